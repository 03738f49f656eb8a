//! Forward sensitivities of the BDF integrator (`integrate_sensitivities`): against exact
//! derivatives of linear systems (a scalar decay with a rate and an initial value as
//! parameters, a stiff 2 x 2 whose slow eigenvalue is the parameter), against central
//! differences of the integrator itself on Robertson's problem and on the Brusselator, and
//! the state unchanged, bit for bit, by carrying sensitivities along.

use tutti_backend::{GpuUse, Resources};
use tutti_fit::bdf::{
    integrate, integrate_on, integrate_sensitivities, integrate_sensitivities_on, BdfOptions,
    OdeError, ParametricSystem, StiffSystem,
};
use tutti_fit::brusselator::Brusselator;
use tutti_group::Group;
use tutti_sparse::CsrMatrix;

fn dense_pattern(n: usize) -> CsrMatrix {
    let triplets: Vec<_> = (0..n)
        .flat_map(|i| (0..n).map(move |j| (i, j, 0.0)))
        .collect();
    CsrMatrix::from_triplets(n, n, &triplets).expect("pattern")
}

fn options(rtol: f64, atol: f64) -> BdfOptions {
    BdfOptions {
        rtol,
        atol,
        ..BdfOptions::default()
    }
}

/// The largest error relative to `atol + rtol |exact|`.
fn scaled_error(got: &[f64], exact: &[f64], rtol: f64, atol: f64) -> f64 {
    got.iter()
        .zip(exact)
        .map(|(g, e)| (g - e).abs() / (atol + rtol * e.abs()))
        .fold(0.0, f64::max)
}

/// y' = -p y with y(0) = q; parameters (p, q).
struct Decay {
    p: f64,
}

impl StiffSystem for Decay {
    fn dimension(&self) -> usize {
        1
    }
    fn rhs(&self, _t: f64, y: &[f64], dydt: &mut [f64]) -> Result<(), String> {
        dydt[0] = -self.p * y[0];
        Ok(())
    }
    fn jacobian_pattern(&self) -> CsrMatrix {
        dense_pattern(1)
    }
    fn jacobian(&self, _t: f64, _y: &[f64], values: &mut [f64]) -> Result<(), String> {
        values[0] = -self.p;
        Ok(())
    }
}

impl ParametricSystem for Decay {
    fn parameters(&self) -> usize {
        2
    }
    fn rhs_parameter_derivatives(
        &self,
        _t: f64,
        y: &[f64],
        columns: &mut [f64],
    ) -> Result<(), String> {
        columns[0] = -y[0];
        Ok(())
    }
}

/// Robertson's chemical kinetics with its rate constants `k` as the parameters.
struct Robertson {
    k: [f64; 3],
}

impl StiffSystem for Robertson {
    fn dimension(&self) -> usize {
        3
    }
    fn rhs(&self, _t: f64, y: &[f64], dydt: &mut [f64]) -> Result<(), String> {
        let [k1, k2, k3] = self.k;
        dydt[0] = -k1 * y[0] + k3 * y[1] * y[2];
        dydt[1] = k1 * y[0] - k2 * y[1] * y[1] - k3 * y[1] * y[2];
        dydt[2] = k2 * y[1] * y[1];
        Ok(())
    }
    fn jacobian_pattern(&self) -> CsrMatrix {
        dense_pattern(3)
    }
    fn jacobian(&self, _t: f64, y: &[f64], values: &mut [f64]) -> Result<(), String> {
        let [k1, k2, k3] = self.k;
        values.copy_from_slice(&[
            -k1,
            k3 * y[2],
            k3 * y[1],
            k1,
            -2.0 * k2 * y[1] - k3 * y[2],
            -k3 * y[1],
            0.0,
            2.0 * k2 * y[1],
            0.0,
        ]);
        Ok(())
    }
}

impl ParametricSystem for Robertson {
    fn parameters(&self) -> usize {
        3
    }
    fn rhs_parameter_derivatives(
        &self,
        _t: f64,
        y: &[f64],
        columns: &mut [f64],
    ) -> Result<(), String> {
        columns.copy_from_slice(&[
            -y[0],
            y[0],
            0.0,
            0.0,
            -y[1] * y[1],
            y[1] * y[1],
            y[1] * y[2],
            -y[1] * y[2],
            0.0,
        ]);
        Ok(())
    }
}

/// The worst over `t_eval` of `|s - fd|_inf / |fd|_inf` per parameter, `fd` the central
/// difference `(y(p (1 + delta)) - y(p (1 - delta))) / (2 delta p)` of the integrator.
fn central_difference_mismatch<S: ParametricSystem>(
    perturbed: impl Fn(usize, f64) -> S,
    values: &[f64],
    y0: &[f64],
    t_eval: &[f64],
    options: &BdfOptions,
    delta: f64,
) -> Vec<f64> {
    let n = y0.len();
    let system = perturbed(0, 0.0);
    let s0 = vec![0.0; values.len() * n];
    let solution = integrate_sensitivities(&system, 0.0, y0, &s0, t_eval, options).expect("sens");
    (0..values.len())
        .map(|p| {
            let run = |sign: f64| {
                integrate(&perturbed(p, sign * delta), 0.0, y0, t_eval, options).expect("run")
            };
            let (up, down) = (run(1.0), run(-1.0));
            (0..t_eval.len())
                .map(|i| {
                    let s = &solution.sensitivities[i][p * n..(p + 1) * n];
                    let mut difference: f64 = 0.0;
                    let mut norm: f64 = 0.0;
                    for (c, sensitivity) in s.iter().enumerate() {
                        let fd = (up.y[i][c] - down.y[i][c]) / (2.0 * delta * values[p]);
                        difference = difference.max((sensitivity - fd).abs());
                        norm = norm.max(fd.abs());
                    }
                    difference / norm
                })
                .fold(0.0, f64::max)
        })
        .collect()
}

#[test]
fn a_decay_rate_and_an_initial_value_have_sensitivities_as_accurate_as_the_state() {
    // y = q e^{-pt}: dy/dp = -t q e^{-pt}, dy/dq = e^{-pt} (q enters through s0 = (0, 1)).
    let (p, q) = (2.0, 3.0);
    let t_eval: Vec<f64> = (1..=10).map(|i| 0.5 * f64::from(i)).collect();
    for rtol in [1e-4, 1e-6, 1e-8, 1e-10] {
        let atol = rtol * 1e-3;
        let solution = integrate_sensitivities(
            &Decay { p },
            0.0,
            &[q],
            &[0.0, 1.0],
            &t_eval,
            &options(rtol, atol),
        )
        .expect("decay");
        let (mut state_error, mut sensitivity_error) = (0.0f64, 0.0f64);
        for (i, &t) in t_eval.iter().enumerate() {
            let decay = (-p * t).exp();
            state_error = state_error.max(scaled_error(&solution.y[i], &[q * decay], rtol, atol));
            let exact = [-t * q * decay, decay];
            sensitivity_error =
                sensitivity_error.max(scaled_error(&solution.sensitivities[i], &exact, rtol, atol));
        }
        // Measured: state 2.5 / 12.3 / 24.5 / 60.9 tolerances, sensitivities 2.8 / 9.9 / 19.4
        // / 49.2. The sensitivities take the state's steps with the same formula, so their
        // error is of the same size; 1.5x the state's (at least 5) leaves room for the
        // difference in their solutions' shapes.
        assert!(
            sensitivity_error <= 1.5 * state_error.max(5.0),
            "rtol {rtol:e}: sensitivities {sensitivity_error:.2} against the state's {state_error:.2}"
        );
        let statistics = solution.statistics;
        assert_eq!(statistics.sensitivity_jacobians, statistics.steps + 1);
        // A linear system: the Newton iteration's Jacobian is exact, two solves per
        // parameter and step (the second one confirms convergence).
        assert_eq!(statistics.sensitivity_iterations, 2 * 2 * statistics.steps);
        assert_eq!(statistics.sensitivity_factorizations, 0);
    }
}

/// y' = A(k) y with A = -(k / 2) v v^T - 500 w w^T, v = (1, 1), w = (1, -1): eigenvalues -k
/// (slow) and -1000 (fast). From y(0) = (2, 0), y = e^{-kt} v + e^{-1000t} w, so
/// dy/dk = -t e^{-kt} v.
struct TwoScales {
    k: f64,
}

impl TwoScales {
    fn matrix(&self) -> [f64; 4] {
        let (diagonal, off) = (-(self.k / 2.0 + 500.0), 500.0 - self.k / 2.0);
        [diagonal, off, off, diagonal]
    }
}

impl StiffSystem for TwoScales {
    fn dimension(&self) -> usize {
        2
    }
    fn rhs(&self, _t: f64, y: &[f64], dydt: &mut [f64]) -> Result<(), String> {
        let a = self.matrix();
        dydt[0] = a[0] * y[0] + a[1] * y[1];
        dydt[1] = a[2] * y[0] + a[3] * y[1];
        Ok(())
    }
    fn jacobian_pattern(&self) -> CsrMatrix {
        dense_pattern(2)
    }
    fn jacobian(&self, _t: f64, _y: &[f64], values: &mut [f64]) -> Result<(), String> {
        values.copy_from_slice(&self.matrix());
        Ok(())
    }
}

impl ParametricSystem for TwoScales {
    fn parameters(&self) -> usize {
        1
    }
    fn rhs_parameter_derivatives(
        &self,
        _t: f64,
        y: &[f64],
        columns: &mut [f64],
    ) -> Result<(), String> {
        let along = -0.5 * (y[0] + y[1]);
        columns.copy_from_slice(&[along, along]);
        Ok(())
    }
}

#[test]
fn the_slow_eigenvalue_of_a_stiff_system_has_its_exact_sensitivity() {
    let k = 1.0;
    let t_eval = [0.01, 0.1, 1.0, 2.0, 5.0];
    for rtol in [1e-6, 1e-8, 1e-10] {
        let atol = rtol * 1e-3;
        let solution = integrate_sensitivities(
            &TwoScales { k },
            0.0,
            &[2.0, 0.0],
            &[0.0, 0.0],
            &t_eval,
            &options(rtol, atol),
        )
        .expect("two scales");
        let (mut state_error, mut sensitivity_error) = (0.0f64, 0.0f64);
        for (i, &t) in t_eval.iter().enumerate() {
            let (slow, fast) = ((-k * t).exp(), (-1000.0 * t).exp());
            let exact = [slow + fast, slow - fast];
            state_error = state_error.max(scaled_error(&solution.y[i], &exact, rtol, atol));
            let exact = [-t * slow, -t * slow];
            sensitivity_error =
                sensitivity_error.max(scaled_error(&solution.sensitivities[i], &exact, rtol, atol));
        }
        // Measured, in tolerances: sensitivities 56 / 37 / 48, the state 7.6 / 21 / 51 (as
        // scipy's BDF on the same system). The sensitivities are not in the error test: their
        // error is set by the state's steps, and the fast transient's steps leave dy/dk,
        // which grows like t from zero, relatively less accurate early on. The bound: twice
        // the state's worst over these tolerances, at every tolerance (no drift as rtol
        // tightens).
        assert!(
            sensitivity_error <= 100.0 && state_error <= 100.0,
            "rtol {rtol:e}: sensitivities {sensitivity_error:.2}, state {state_error:.2} tolerances"
        );
    }
}

#[test]
fn robertsons_rate_sensitivities_agree_with_central_differences() {
    let k = [0.04, 3e7, 1e4];
    let y0 = [1.0, 0.0, 0.0];
    let t_eval = [0.4, 4.0, 40.0, 400.0, 4000.0];
    // Central differences at delta = 1e-4 carry a truncation error of about delta^2 = 1e-8
    // and the integration's own error over 2 delta, about rtol / delta = 1e-6 at worst;
    // measured: 1.5e-8, 1.0e-8, 1.4e-8 for k1, k2, k3.
    let mismatch = central_difference_mismatch(
        |p, delta| {
            let mut k = k;
            if delta != 0.0 {
                k[p] *= 1.0 + delta;
            }
            Robertson { k }
        },
        &k,
        &y0,
        &t_eval,
        &options(1e-10, 1e-16),
        1e-4,
    );
    for (p, mismatch) in mismatch.iter().enumerate() {
        assert!(*mismatch <= 1e-6, "k{}: {mismatch:e}", p + 1);
    }
}

#[test]
fn the_brusselators_parameter_sensitivities_agree_with_central_differences() {
    let base = Brusselator::new(6).expect("6 x 6");
    let y0 = base.initial_state();
    // Past the forcing's start at t = 1.1.
    let t_eval = [0.5, 1.0, 1.5, 3.0];
    let values = [base.a, base.b, base.alpha];
    // dy/dalpha is small (about 7e-4 against states of order 1 on this strongly diffusive
    // 6 x 6 grid), so the central difference's share of the integration error, rtol |y| /
    // (2 delta alpha) = 2e-9 absolute, is up to 3e-6 of it: hence rtol 1e-12. Measured: 3.1e-8,
    // 5.9e-8, 1.2e-7 for A, B, alpha.
    let mismatch = central_difference_mismatch(
        |p, delta| {
            let mut model = base.clone();
            match p {
                0 => model.a *= 1.0 + delta,
                1 => model.b *= 1.0 + delta,
                _ => model.alpha *= 1.0 + delta,
            }
            model
        },
        &values,
        &y0,
        &t_eval,
        &options(1e-12, 1e-14),
        1e-4,
    );
    for (name, mismatch) in ["A", "B", "alpha"].iter().zip(&mismatch) {
        assert!(*mismatch <= 1e-6, "{name}: {mismatch:e}");
    }
}

#[test]
fn carrying_sensitivities_leaves_the_state_the_same_bits() {
    let model = Brusselator::new(8).expect("8 x 8");
    let y0 = model.initial_state();
    let t_eval = [0.5, 1.5, 4.0];
    let options = options(1e-6, 1e-8);
    let plain = integrate(&model, 0.0, &y0, &t_eval, &options).expect("plain");
    let with = integrate_sensitivities(
        &model,
        0.0,
        &y0,
        &vec![0.0; 3 * y0.len()],
        &t_eval,
        &options,
    )
    .expect("sensitivities");
    assert_eq!(plain.y, with.y);
    let mut statistics = with.statistics;
    statistics.sensitivity_iterations = 0;
    statistics.sensitivity_jacobians = 0;
    statistics.sensitivity_factorizations = 0;
    assert_eq!(statistics, plain.statistics);
}

/// `Decay` whose `df/dp` fails or is not finite.
struct BadDerivatives {
    value: Option<f64>,
}

impl StiffSystem for BadDerivatives {
    fn dimension(&self) -> usize {
        1
    }
    fn rhs(&self, t: f64, y: &[f64], dydt: &mut [f64]) -> Result<(), String> {
        Decay { p: 1.0 }.rhs(t, y, dydt)
    }
    fn jacobian_pattern(&self) -> CsrMatrix {
        dense_pattern(1)
    }
    fn jacobian(&self, t: f64, y: &[f64], values: &mut [f64]) -> Result<(), String> {
        Decay { p: 1.0 }.jacobian(t, y, values)
    }
}

impl ParametricSystem for BadDerivatives {
    fn parameters(&self) -> usize {
        1
    }
    fn rhs_parameter_derivatives(
        &self,
        t: f64,
        _y: &[f64],
        columns: &mut [f64],
    ) -> Result<(), String> {
        match self.value {
            Some(value) if t > 0.5 => {
                columns[0] = value;
                Ok(())
            }
            Some(_) => Ok(()),
            None => Err("no derivative here".into()),
        }
    }
}

#[test]
fn bad_initial_sensitivities_and_failing_derivatives_are_errors() {
    let options = BdfOptions::default();
    let decay = Decay { p: 1.0 };
    let error = integrate_sensitivities(&decay, 0.0, &[1.0], &[0.0], &[1.0], &options)
        .expect_err("one column for two parameters");
    assert!(
        matches!(&error, OdeError::InvalidArgument { detail } if detail.contains("s0 has 1 entries")),
        "{error}"
    );
    let error = integrate_sensitivities(&decay, 0.0, &[1.0], &[0.0, f64::NAN], &[1.0], &options)
        .expect_err("NaN");
    assert!(
        matches!(&error, OdeError::InvalidArgument { detail } if detail.contains("NaN")),
        "{error}"
    );
    let error = integrate_sensitivities(
        &BadDerivatives { value: None },
        0.0,
        &[1.0],
        &[0.0],
        &[1.0],
        &options,
    )
    .expect_err("df/dp fails");
    assert!(
        matches!(&error, OdeError::Rhs { t, message } if *t == 0.0 && message.contains("no derivative here")),
        "{error}"
    );
    let error = integrate_sensitivities(
        &BadDerivatives {
            value: Some(f64::INFINITY),
        },
        0.0,
        &[1.0],
        &[0.0],
        &[1.0],
        &options,
    )
    .expect_err("df/dp infinite after t = 0.5");
    assert!(
        matches!(&error, OdeError::Rhs { t, message } if *t > 0.5 && message.contains("inf")),
        "{error}"
    );
}

#[test]
fn a_model_group_integrates_the_same_bits_as_one_rank() {
    // The Newton and sensitivity matrices factored split over 2 and 3 ranks
    // (`tutti_sparse::factor_on`): every rank steps the whole state with solutions bitwise
    // those of the whole factorization, so the steps, the state and the sensitivities agree
    // bit for bit. The forcing starts inside the interval, so steps are rejected and the
    // order changes on the way.
    let model = Brusselator::new(6).expect("grid");
    let y0 = model.initial_state();
    let s0 = vec![0.0; 3 * y0.len()];
    let times = [0.5, 1.5];
    let options = options(1e-6, 1e-9);
    let alone = integrate_sensitivities(&model, 0.0, &y0, &s0, &times, &options).expect("one");
    let state = integrate(&model, 0.0, &y0, &times, &options).expect("state");
    for ranks in [2, 3] {
        let group = Group::from_resources(&Resources::cpu(ranks), GpuUse::HostOnly)
            .expect("simulated devices");
        let results = group
            .run(|comm| {
                let sensitivities =
                    integrate_sensitivities_on(comm, &model, 0.0, &y0, &s0, &times, &options)?;
                let plain = integrate_on(comm, &model, 0.0, &y0, &times, &options)?;
                Ok::<_, OdeError>((sensitivities, plain))
            })
            .expect("split integration");
        for (rank, (sensitivities, plain)) in results.into_iter().enumerate() {
            assert_eq!(sensitivities, alone, "{ranks} ranks, rank {rank}");
            assert_eq!(plain.y, state.y, "{ranks} ranks, rank {rank}");
            assert_eq!(plain.statistics, state.statistics);
        }
    }
    assert!(alone.statistics.factorizations > 1);
}
