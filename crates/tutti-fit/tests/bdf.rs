//! The BDF integrator against exact solutions of linear stiff systems (a 2 x 2 with
//! eigenvalues -1 and -1000, the semi-discrete heat equation on 200 points, sparse) and
//! against scipy's Radau on Robertson's problem (`tests/data/robertson.py`), with the
//! behaviour a variable-order method must show: errors that follow the tolerance, high
//! orders at tight tolerances, the Jacobian and factors reused across steps.

use tutti_fit::bdf::{integrate, BdfOptions, OdeError, StiffSystem};
use tutti_sparse::CsrMatrix;

/// A matrix from dense rows, every entry in the pattern.
fn dense_pattern(n: usize) -> CsrMatrix {
    let triplets: Vec<_> = (0..n)
        .flat_map(|i| (0..n).map(move |j| (i, j, 0.0)))
        .collect();
    CsrMatrix::from_triplets(n, n, &triplets).expect("pattern")
}

/// y' = A y, A = [[-500.5, 499.5], [499.5, -500.5]]: eigenvalues -1 (along (1, 1)) and
/// -1000 (along (1, -1)), so y(t) = a e^-t (1, 1) + b e^-1000t (1, -1).
struct TwoScales;

const A: [[f64; 2]; 2] = [[-500.5, 499.5], [499.5, -500.5]];

impl StiffSystem for TwoScales {
    fn dimension(&self) -> usize {
        2
    }
    fn rhs(&self, _t: f64, y: &[f64], dydt: &mut [f64]) -> Result<(), String> {
        for i in 0..2 {
            dydt[i] = A[i][0] * y[0] + A[i][1] * y[1];
        }
        Ok(())
    }
    fn jacobian_pattern(&self) -> CsrMatrix {
        dense_pattern(2)
    }
    fn jacobian(&self, _t: f64, _y: &[f64], values: &mut [f64]) -> Result<(), String> {
        values.copy_from_slice(&[A[0][0], A[0][1], A[1][0], A[1][1]]);
        Ok(())
    }
}

fn two_scales_exact(t: f64) -> [f64; 2] {
    // y(0) = (2, 0): a = b = 1.
    let (slow, fast) = ((-t).exp(), (-1000.0 * t).exp());
    [slow + fast, slow - fast]
}

/// The largest error relative to `atol + rtol |exact|`, the scale the integrator controls.
fn scaled_error(got: &[f64], exact: &[f64], rtol: f64, atol: f64) -> f64 {
    got.iter()
        .zip(exact)
        .map(|(g, e)| (g - e).abs() / (atol + rtol * e.abs()))
        .fold(0.0, f64::max)
}

fn options(rtol: f64, atol: f64) -> BdfOptions {
    BdfOptions {
        rtol,
        atol,
        ..BdfOptions::default()
    }
}

#[test]
fn a_linear_stiff_system_follows_its_exact_solution_at_every_tolerance() {
    let t_eval: Vec<f64> = (1..=20).map(|k| 0.25 * k as f64).collect();
    let mut previous = f64::INFINITY;
    // scipy 1.17's BDF on this problem, same tolerances and output times: the largest error
    // in tolerances (global error relative to a local control, growing as the solution
    // decays below atol / rtol).
    let scipy = [1.937, 7.627, 21.32, 50.78];
    for (rtol, scipy) in [1e-4, 1e-6, 1e-8, 1e-10].into_iter().zip(scipy) {
        let atol = rtol * 1e-3;
        let solution = integrate(&TwoScales, 0.0, &[2.0, 0.0], &t_eval, &options(rtol, atol))
            .expect("integrates");
        let worst = solution
            .t
            .iter()
            .zip(&solution.y)
            .map(|(&t, y)| {
                let exact = two_scales_exact(t);
                y.iter()
                    .zip(exact)
                    .map(|(g, e)| (g - e).abs())
                    .fold(0.0, f64::max)
            })
            .fold(0.0, f64::max);
        let scaled = solution
            .t
            .iter()
            .zip(&solution.y)
            .map(|(&t, y)| scaled_error(y, &two_scales_exact(t), rtol, atol))
            .fold(0.0, f64::max);
        assert!(
            scaled < 1.25 * scipy,
            "rtol {rtol}: error {scaled:.2} tolerances, scipy's BDF {scipy}"
        );
        assert!(
            worst < previous,
            "rtol {rtol}: {worst:e} after {previous:e}"
        );
        previous = worst;
        let stats = solution.statistics;
        // The Jacobian is constant: one evaluation; factors only when h or the order changes.
        assert_eq!(stats.jacobians, 1, "{stats:?}");
        assert!(stats.factorizations < stats.steps, "{stats:?}");
        if rtol <= 1e-8 {
            let high: usize = stats.steps_at_order[4..].iter().sum();
            assert!(high > stats.steps / 2, "rtol {rtol}: {stats:?}");
        }
    }
}

/// u_t = u_xx on (0, 1), u = 0 at both ends, on `n` interior points: the semi-discrete
/// system y' = L y with L tridiagonal (1, -2, 1) / h^2, whose eigenvector sin(pi x_i) decays
/// exactly as exp(-lambda t), lambda = (2 - 2 cos(pi h)) / h^2; the stiffness ratio is
/// about 4 / (pi h)^2 (16000 for n = 200).
struct Heat {
    n: usize,
}

impl Heat {
    fn h(&self) -> f64 {
        1.0 / (self.n as f64 + 1.0)
    }
}

impl StiffSystem for Heat {
    fn dimension(&self) -> usize {
        self.n
    }
    fn rhs(&self, _t: f64, y: &[f64], dydt: &mut [f64]) -> Result<(), String> {
        let h2 = self.h() * self.h();
        for i in 0..self.n {
            let left = if i > 0 { y[i - 1] } else { 0.0 };
            let right = if i + 1 < self.n { y[i + 1] } else { 0.0 };
            dydt[i] = (left - 2.0 * y[i] + right) / h2;
        }
        Ok(())
    }
    fn jacobian_pattern(&self) -> CsrMatrix {
        let mut triplets = Vec::new();
        for i in 0..self.n {
            for j in i.saturating_sub(1)..(i + 2).min(self.n) {
                triplets.push((i, j, 0.0));
            }
        }
        CsrMatrix::from_triplets(self.n, self.n, &triplets).expect("pattern")
    }
    fn jacobian(&self, _t: f64, _y: &[f64], values: &mut [f64]) -> Result<(), String> {
        let h2 = self.h() * self.h();
        let mut k = 0;
        for i in 0..self.n {
            for j in i.saturating_sub(1)..(i + 2).min(self.n) {
                values[k] = if i == j { -2.0 / h2 } else { 1.0 / h2 };
                k += 1;
            }
        }
        Ok(())
    }
}

#[test]
fn the_sparse_heat_equation_decays_as_its_eigenvalue_says() {
    let heat = Heat { n: 200 };
    let h = heat.h();
    let x = |i: usize| (i + 1) as f64 * h;
    let y0: Vec<f64> = (0..heat.n)
        .map(|i| (std::f64::consts::PI * x(i)).sin())
        .collect();
    let lambda = (2.0 - 2.0 * (std::f64::consts::PI * h).cos()) / (h * h);
    let t_eval = [0.01, 0.05, 0.1, 0.3];
    let (rtol, atol) = (1e-7, 1e-10);
    let solution = integrate(&heat, 0.0, &y0, &t_eval, &options(rtol, atol)).expect("integrates");
    for (&t, y) in solution.t.iter().zip(&solution.y) {
        let exact: Vec<f64> = y0.iter().map(|v| v * (-lambda * t).exp()).collect();
        let error = scaled_error(y, &exact, rtol, atol);
        assert!(error < 20.0, "t {t}: error {error:.2} tolerances");
    }
    let stats = solution.statistics;
    // A stiff problem: an explicit method would need about lambda_max t / 2.8 = 17000
    // steps to t = 0.3; BDF takes a few hundred at most.
    assert!(stats.steps < 400, "{stats:?}");
    assert_eq!(stats.jacobians, 1, "{stats:?}");
}

/// Robertson's chemical kinetics: stiff, nonlinear, with a Jacobian that changes.
struct Robertson;

impl StiffSystem for Robertson {
    fn dimension(&self) -> usize {
        3
    }
    fn rhs(&self, _t: f64, y: &[f64], dydt: &mut [f64]) -> Result<(), String> {
        dydt[0] = -0.04 * y[0] + 1e4 * y[1] * y[2];
        dydt[1] = 0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] * y[1];
        dydt[2] = 3e7 * y[1] * y[1];
        Ok(())
    }
    fn jacobian_pattern(&self) -> CsrMatrix {
        dense_pattern(3)
    }
    fn jacobian(&self, _t: f64, y: &[f64], values: &mut [f64]) -> Result<(), String> {
        values.copy_from_slice(&[
            -0.04,
            1e4 * y[2],
            1e4 * y[1],
            0.04,
            -1e4 * y[2] - 6e7 * y[1],
            -1e4 * y[1],
            0.0,
            6e7 * y[1],
            0.0,
        ]);
        Ok(())
    }
}

fn robertson_reference() -> serde_json::Value {
    let text = include_str!("data/robertson.json");
    serde_json::from_str(text).expect("the reference file parses")
}

fn rows(value: &serde_json::Value) -> Vec<Vec<f64>> {
    value
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            row.as_array()
                .expect("a row")
                .iter()
                .map(|v| v.as_f64().expect("a number"))
                .collect()
        })
        .collect()
}

#[test]
fn robertson_agrees_with_radau_and_with_scipys_bdf() {
    let reference = robertson_reference();
    let t_eval: Vec<f64> = reference["t"]
        .as_array()
        .expect("t")
        .iter()
        .map(|v| v.as_f64().expect("a time"))
        .collect();
    let radau = rows(&reference["radau_rtol_1e-12"]);
    let scipy_bdf = rows(&reference["scipy_bdf_rtol_1e-6_atol_1e-10"]["y"]);
    // At scipy's tolerances: tutti's error against Radau is of the size of scipy's own.
    let (rtol, atol) = (1e-6, 1e-10);
    let ours = integrate(
        &Robertson,
        0.0,
        &[1.0, 0.0, 0.0],
        &t_eval,
        &options(rtol, atol),
    )
    .expect("integrates");
    let error = |y: &[Vec<f64>]| {
        y.iter()
            .zip(&radau)
            .map(|(got, exact)| scaled_error(got, exact, rtol, atol))
            .fold(0.0, f64::max)
    };
    let (tutti_error, scipy_error) = (error(&ours.y), error(&scipy_bdf));
    // The same method as scipy's, step for step (measured: 1007 evaluations of f, 10
    // Jacobians, 76 factorizations for both): the counts agree within 10%.
    let scipy_counts = &reference["scipy_bdf_rtol_1e-6_atol_1e-10"];
    let stats = ours.statistics;
    for (name, tutti) in [
        ("nfev", stats.rhs_evaluations),
        ("njev", stats.jacobians),
        ("nlu", stats.factorizations),
    ] {
        let scipy = scipy_counts[name].as_f64().expect("a count");
        assert!(
            (tutti as f64 - scipy).abs() <= 0.1 * scipy,
            "{name}: tutti {tutti}, scipy {scipy}"
        );
    }
    assert!(
        tutti_error < 3.0 * scipy_error.max(1.0),
        "tutti {tutti_error:.2} tolerances, scipy's BDF {scipy_error:.2}"
    );
    // At tight tolerances: close to Radau.
    let (rtol, atol) = (1e-9, 1e-16);
    let tight = integrate(
        &Robertson,
        0.0,
        &[1.0, 0.0, 0.0],
        &t_eval,
        &options(rtol, atol),
    )
    .expect("integrates");
    for (got, exact) in tight.y.iter().zip(&radau) {
        let error = scaled_error(got, exact, rtol, atol);
        assert!(error < 50.0, "{got:?} vs {exact:?}: {error:.1} tolerances");
        // Mass is conserved: y1 + y2 + y3 = 1 (the method is linear, so exactly up to the
        // Newton iteration's and rounding's errors).
        let mass: f64 = got.iter().sum();
        assert!((mass - 1.0).abs() < 1e-9, "mass {mass}");
    }
    let stats = tight.statistics;
    // The Jacobian changes, but it is re-evaluated only when Newton fails to converge.
    assert!(stats.jacobians < stats.steps / 4, "{stats:?}");
}

#[test]
fn bad_arguments_and_failing_callbacks_are_errors() {
    let y0 = [2.0, 0.0];
    let cases = [
        integrate(&TwoScales, 0.0, &[1.0], &[1.0], &BdfOptions::default()),
        integrate(
            &TwoScales,
            0.0,
            &[f64::NAN, 0.0],
            &[1.0],
            &BdfOptions::default(),
        ),
        integrate(&TwoScales, 0.0, &y0, &[], &BdfOptions::default()),
        integrate(&TwoScales, 0.0, &y0, &[2.0, 1.0], &BdfOptions::default()),
        integrate(&TwoScales, 1.0, &y0, &[1.0], &BdfOptions::default()),
        integrate(&TwoScales, 0.0, &y0, &[1.0], &options(0.0, 1e-9)),
    ];
    for result in cases {
        assert!(
            matches!(result, Err(OdeError::InvalidArgument { .. })),
            "{result:?}"
        );
    }

    /// y' = 1 until t = 0.5, where f fails.
    struct FailsLater;
    impl StiffSystem for FailsLater {
        fn dimension(&self) -> usize {
            1
        }
        fn rhs(&self, t: f64, _y: &[f64], dydt: &mut [f64]) -> Result<(), String> {
            if t > 0.5 {
                return Err("the model broke".into());
            }
            dydt[0] = 1.0;
            Ok(())
        }
        fn jacobian_pattern(&self) -> CsrMatrix {
            dense_pattern(1)
        }
        fn jacobian(&self, _t: f64, _y: &[f64], values: &mut [f64]) -> Result<(), String> {
            values[0] = 0.0;
            Ok(())
        }
    }
    let failed = integrate(&FailsLater, 0.0, &[0.0], &[1.0], &BdfOptions::default());
    match failed {
        Err(OdeError::Rhs { t, message }) => {
            assert!(t > 0.5 && message.contains("broke"), "{t} {message}");
        }
        other => panic!("expected the callback's error, got {other:?}"),
    }
    let limited = integrate(
        &TwoScales,
        0.0,
        &y0,
        &[5.0],
        &BdfOptions {
            max_steps: 5,
            ..BdfOptions::default()
        },
    );
    assert!(
        matches!(limited, Err(OdeError::TooManySteps { .. })),
        "{limited:?}"
    );
}
