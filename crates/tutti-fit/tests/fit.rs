//! Fits against known answers: Rosenbrock, a linear model against its normal equations, and
//! the reaction-network example on 1 and 3 simulated devices.

use tutti_backend::Resources;
use tutti_fit::example::{synthetic_experiments, START_RATES, TRUE_RATES};
use tutti_fit::{fit, Experiment, FitError, FitOptions, Mesh, Termination};

fn mesh(devices: usize) -> Mesh {
    Mesh::data(Resources::cpu(devices).select().expect("devices")).expect("mesh")
}

/// Rosenbrock's function as least squares: r = (10 (y - x^2), 1 - x), minimum at (1, 1).
struct Rosenbrock;

impl Experiment for Rosenbrock {
    fn residual_count(&self) -> usize {
        2
    }
    fn evaluate(&self, p: &[f64], r: &mut [f64], j: &mut [f64]) -> Result<(), String> {
        r[0] = 10.0 * (p[1] - p[0] * p[0]);
        r[1] = 1.0 - p[0];
        j.copy_from_slice(&[-20.0 * p[0], 10.0, -1.0, 0.0]);
        Ok(())
    }
}

#[test]
fn rosenbrock_converges_to_its_minimum() {
    let report = fit(
        &[Rosenbrock],
        &[-1.2, 1.0],
        &mesh(1),
        &FitOptions::default(),
    )
    .unwrap();
    assert!(report.converged(), "{:?}", report.termination);
    assert!(
        (report.parameters[0] - 1.0).abs() < 1e-9,
        "{:?}",
        report.parameters
    );
    assert!(
        (report.parameters[1] - 1.0).abs() < 1e-9,
        "{:?}",
        report.parameters
    );
    assert!(report.cost < 1e-20);
}

/// Points of a quadratic y = c0 + c1 x + c2 x^2 with fixed "noise", one experiment per block.
struct Quadratic {
    xs: Vec<f64>,
    ys: Vec<f64>,
}

impl Experiment for Quadratic {
    fn residual_count(&self) -> usize {
        self.xs.len()
    }
    fn evaluate(&self, c: &[f64], r: &mut [f64], j: &mut [f64]) -> Result<(), String> {
        for (i, (&x, &y)) in self.xs.iter().zip(&self.ys).enumerate() {
            r[i] = c[0] + c[1] * x + c[2] * x * x - y;
            j[i * 3..i * 3 + 3].copy_from_slice(&[1.0, x, x * x]);
        }
        Ok(())
    }
}

#[test]
fn a_linear_model_matches_its_normal_equations_on_any_device_count() {
    let experiments: Vec<Quadratic> = (0..5)
        .map(|e| {
            let xs: Vec<f64> = (0..7).map(|i| (e * 7 + i) as f64 * 0.1 - 1.5).collect();
            let ys = xs
                .iter()
                .enumerate()
                .map(|(i, x)| 0.3 - 1.1 * x + 0.7 * x * x + 0.01 * ((i * 37 + e * 11) % 7) as f64)
                .collect();
            Quadratic { xs, ys }
        })
        .collect();
    // The normal equations, solved independently by Cramer's rule.
    let mut ata = [[0.0f64; 3]; 3];
    let mut aty = [0.0f64; 3];
    for experiment in &experiments {
        for (&x, &y) in experiment.xs.iter().zip(&experiment.ys) {
            let row = [1.0, x, x * x];
            for a in 0..3 {
                aty[a] += row[a] * y;
                for b in 0..3 {
                    ata[a][b] += row[a] * row[b];
                }
            }
        }
    }
    let det = |m: [[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let expected: Vec<f64> = (0..3)
        .map(|k| {
            let mut m = ata;
            for a in 0..3 {
                m[a][k] = aty[a];
            }
            det(m) / det(ata)
        })
        .collect();
    let one = fit(
        &experiments,
        &[0.0, 0.0, 0.0],
        &mesh(1),
        &FitOptions::default(),
    )
    .unwrap();
    for (got, want) in one.parameters.iter().zip(&expected) {
        assert!(
            (got - want).abs() < 1e-10 * (1.0 + want.abs()),
            "{got} vs {want}"
        );
    }
    for devices in 2..=4 {
        let many = fit(
            &experiments,
            &[0.0, 0.0, 0.0],
            &mesh(devices),
            &FitOptions::default(),
        )
        .unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&many.parameters),
            bits(&one.parameters),
            "{devices} devices"
        );
        assert_eq!(many.cost.to_bits(), one.cost.to_bits());
        assert_eq!(many.iterations, one.iterations);
    }
}

#[test]
fn the_example_recovers_the_true_rates_identically_on_1_and_3_devices() {
    let experiments = synthetic_experiments(2026).unwrap();
    let one = fit(&experiments, &START_RATES, &mesh(1), &FitOptions::default()).unwrap();
    let three = fit(&experiments, &START_RATES, &mesh(3), &FitOptions::default()).unwrap();
    assert!(one.converged(), "{:?}", one.termination);
    // Bitwise the same iterates: the sums run in experiment order on any device count.
    assert_eq!(
        one.parameters
            .iter()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>(),
        three
            .parameters
            .iter()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>()
    );
    assert_eq!(one.cost.to_bits(), three.cost.to_bits());
    assert_eq!(one.iterations, three.iterations);

    // Within 4 standard errors of the truth (the residuals are weighted by sigma, so the
    // covariance is (J^T J)^-1), and the errors are small: the data pin the rates down.
    let errors = one.standard_errors().unwrap();
    for k in 0..3 {
        let deviation = (one.parameters[k] - TRUE_RATES[k]).abs();
        assert!(
            deviation < 4.0 * errors[k],
            "k{k}: {} vs {} (se {})",
            one.parameters[k],
            TRUE_RATES[k],
            errors[k]
        );
        assert!(errors[k] < 0.02 * TRUE_RATES[k], "k{k}: se {}", errors[k]);
    }
    // Chi-square per degree of freedom near 1: the model and the noise level are right.
    let dof = (one.residual_count - 3) as f64;
    let reduced = 2.0 * one.cost / dof;
    assert!((0.6..1.4).contains(&reduced), "chi2/dof = {reduced}");
}

#[test]
fn balancing_shortens_a_skewed_makespan_and_never_changes_the_result() {
    let mut experiments = synthetic_experiments(7).unwrap();
    for (experiment, cost) in experiments.iter_mut().zip([5.0, 5.0, 1.0, 1.0, 1.0, 1.0]) {
        experiment.cost = Some(cost);
    }
    let on = FitOptions::default().with_balance_steps(true);
    let off = FitOptions::default().with_balance_steps(false);
    let balanced = fit(&experiments, &START_RATES, &mesh(2), &on).unwrap();
    let unbalanced = fit(&experiments, &START_RATES, &mesh(2), &off).unwrap();
    // Blocks put 5 + 5 + 1 on rank 0: makespan 11; LPT gives 5 + 1 + 1 on each: 7.
    assert_eq!(unbalanced.makespan_initial, 11.0);
    assert_eq!(unbalanced.makespan_final, 11.0);
    assert_eq!(balanced.makespan_final, 7.0);
    assert_eq!(balanced.rebalances, 1);
    assert_eq!(balanced.parameters, unbalanced.parameters);
    assert_eq!(balanced.cost.to_bits(), unbalanced.cost.to_bits());
}

struct Failing;

impl Experiment for Failing {
    fn residual_count(&self) -> usize {
        1
    }
    fn evaluate(&self, _: &[f64], _: &mut [f64], _: &mut [f64]) -> Result<(), String> {
        Err("integrator diverged".into())
    }
}

#[test]
fn failures_and_bad_input_are_clear_errors() {
    let err = fit(
        &[Failing, Failing, Failing],
        &[1.0],
        &mesh(2),
        &FitOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, FitError::Experiment { index: 0, message } if message.contains("integrator diverged")),
        "{err}"
    );
    let none: [Rosenbrock; 0] = [];
    assert!(fit(&none, &[1.0, 1.0], &mesh(1), &FitOptions::default()).is_err());
    let err = fit(
        &[Rosenbrock],
        &[f64::NAN, 1.0],
        &mesh(1),
        &FitOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("parameter 0 is NaN"), "{err}");
    let limited = fit(
        &[Rosenbrock],
        &[-1.2, 1.0],
        &mesh(1),
        &FitOptions::default().with_max_iterations(2),
    )
    .unwrap();
    assert_eq!(limited.termination, Termination::MaxIterations);
    assert!(!limited.converged());
}

/// An experiment that claims `count` residuals and must never be evaluated.
struct Claims {
    count: usize,
}

impl Experiment for Claims {
    fn residual_count(&self) -> usize {
        self.count
    }
    fn evaluate(&self, _: &[f64], _: &mut [f64], _: &mut [f64]) -> Result<(), String> {
        Err("evaluated: its buffers were allocated".into())
    }
}

#[test]
fn residual_counts_no_buffer_can_hold_are_refused_before_allocating() {
    let initial = vec![0.5; 1000];
    // i32::MAX residuals x 1000 parameters: 17 TB of Jacobian, more than any host holds.
    for (count, bytes) in [
        (i32::MAX as usize, Some((i32::MAX as u64) * 1001 * 8)),
        (usize::MAX, None),
        (usize::MAX / 999, None),
    ] {
        let experiments = [Rosenbrock.residual_count(), count].map(|count| Claims { count });
        let error = fit(&experiments, &initial, &mesh(1), &FitOptions::default()).unwrap_err();
        match &error {
            FitError::OutOfMemory { what, bytes: got } => {
                assert!(
                    what.contains("experiment 1") && what.contains(&count.to_string()),
                    "{error}"
                );
                assert_eq!(*got, bytes.unwrap_or(u64::MAX), "{error}");
            }
            other => panic!("expected OutOfMemory, got {other}"),
        }
    }
}

#[test]
fn progress_reports_go_to_the_log_facade() {
    // With `progress` the fit runs as without it (it used to write to stderr from the
    // library; now nothing is printed unless the program installs a logger).
    let options = FitOptions::default().with_progress(true);
    let report = fit(&[Rosenbrock], &[-1.2, 1.0], &mesh(2), &options).unwrap();
    assert!(report.converged(), "{:?}", report.termination);
}
