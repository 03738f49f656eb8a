//! Fits against known answers: Rosenbrock, a linear model against its normal equations (and
//! its covariance against the closed form), Läuchli's ill-conditioned matrix, the
//! reaction-network example on 1 to 4 simulated devices; typed device errors, a failing
//! rank, and memory plans.

use tutti_backend::{BackendError, DeviceRequest, Resources};
use tutti_fit::example::{synthetic_experiments, START_RATES, TRUE_RATES};
use tutti_fit::{fit, plan, Experiment, FitError, FitOptions, Termination};
use tutti_plan::{PlanError, Tier};

mod common;

use common::Rosenbrock;

/// `options` on `devices` simulated devices.
fn cpu(devices: usize, options: &FitOptions) -> FitOptions {
    options.clone().with_resources(Resources::cpu(devices))
}

#[test]
fn rosenbrock_converges_to_its_minimum() {
    let report = fit(&[Rosenbrock], &[-1.2, 1.0], &cpu(1, &FitOptions::default())).unwrap();
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
        &cpu(1, &FitOptions::default()),
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
            &cpu(devices, &FitOptions::default()),
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
        let covariance = |report: &tutti_fit::FitReport| bits(report.covariance.as_ref().unwrap());
        assert_eq!(covariance(&many), covariance(&one), "{devices} devices");
    }
    // The covariance of a linear model is (A^T A)^-1 exactly: here by the adjugate. A^T A
    // has a condition number near 1e3, so QR and adjugate agree to ~1e-13; 1e-11 is loose.
    let covariance = one.covariance.as_ref().unwrap();
    let scale = covariance.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
    for i in 0..3 {
        for j in 0..3 {
            let minor = |r: usize, c: usize| {
                let rows: Vec<usize> = (0..3).filter(|&k| k != r).collect();
                let cols: Vec<usize> = (0..3).filter(|&k| k != c).collect();
                ata[rows[0]][cols[0]] * ata[rows[1]][cols[1]]
                    - ata[rows[0]][cols[1]] * ata[rows[1]][cols[0]]
            };
            let sign = if (i + j) % 2 == 0 { 1.0 } else { -1.0 };
            let want = sign * minor(j, i) / det(ata);
            let got = covariance[i * 3 + j];
            assert!(
                (got - want).abs() < 1e-11 * scale,
                "({i}, {j}): {got} vs {want}"
            );
        }
    }
}

/// Läuchli's matrix as residuals: r = J p - y with J = [[1, 1], [d, 0], [0, d]].
struct Lauchli {
    d: f64,
}

impl Experiment for Lauchli {
    fn residual_count(&self) -> usize {
        3
    }
    fn evaluate(&self, p: &[f64], r: &mut [f64], j: &mut [f64]) -> Result<(), String> {
        let d = self.d;
        r.copy_from_slice(&[p[0] + p[1] - 2.0, d * p[0] - d, d * p[1] - d]);
        j.copy_from_slice(&[1.0, 1.0, d, 0.0, 0.0, d]);
        Ok(())
    }
}

#[test]
fn the_covariance_comes_from_a_qr_of_the_jacobian_not_from_inverting_j_t_j() {
    // J^T J = [[1 + d^2, 1], [1, 1 + d^2]] has condition number ~2 / d^2 = 2e14: formed in
    // floating point it loses about 1e-2 of d^2, and so would its inverse. The QR of J
    // (condition ~1.4e7) keeps the closed form [[1 + d^2, -1], [-1, 1 + d^2]] / (d^2 (2 + d^2))
    // to about cond(J) * eps = 3e-9; 1e-6 leaves room and still fails a J^T J inverse.
    let d = 1e-7;
    let report = fit(
        &[Lauchli { d }],
        &[0.5, 0.5],
        &cpu(1, &FitOptions::default().with_max_iterations(20)),
    )
    .unwrap();
    let covariance = report.covariance.expect("full rank");
    let det = d * d * (2.0 + d * d);
    let want = [1.0 + d * d, -1.0, -1.0, 1.0 + d * d].map(|x| x / det);
    for (got, want) in covariance.iter().zip(want) {
        assert!((got / want - 1.0).abs() < 1e-6, "{got:e} vs {want:e}");
    }
}

#[test]
fn the_example_is_bitwise_identical_on_1_2_3_and_4_devices() {
    let experiments = synthetic_experiments(11).unwrap();
    let run = |devices| {
        fit(
            &experiments,
            &START_RATES,
            &cpu(devices, &FitOptions::default()),
        )
        .unwrap()
    };
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let one = run(1);
    for devices in 2..=4 {
        let many = run(devices);
        assert_eq!(bits(&many.parameters), bits(&one.parameters), "{devices}");
        assert_eq!(many.cost.to_bits(), one.cost.to_bits(), "{devices}");
        assert_eq!(
            bits(many.covariance.as_ref().unwrap()),
            bits(one.covariance.as_ref().unwrap()),
            "{devices}"
        );
        assert_eq!(
            (many.iterations, many.evaluations),
            (one.iterations, one.evaluations)
        );
    }
}

#[test]
fn the_example_recovers_the_true_rates_identically_on_1_and_3_devices() {
    let experiments = synthetic_experiments(2026).unwrap();
    let one = fit(&experiments, &START_RATES, &cpu(1, &FitOptions::default())).unwrap();
    let three = fit(&experiments, &START_RATES, &cpu(3, &FitOptions::default())).unwrap();
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
    let balanced = fit(&experiments, &START_RATES, &cpu(2, &on)).unwrap();
    let unbalanced = fit(&experiments, &START_RATES, &cpu(2, &off)).unwrap();
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
        &cpu(2, &FitOptions::default()),
    )
    .unwrap_err();
    assert!(
        matches!(&err, FitError::Experiment { index: 0, message } if message.contains("integrator diverged")),
        "{err}"
    );
    let none: [Rosenbrock; 0] = [];
    assert!(fit(&none, &[1.0, 1.0], &cpu(1, &FitOptions::default())).is_err());
    let err = fit(
        &[Rosenbrock],
        &[f64::NAN, 1.0],
        &cpu(1, &FitOptions::default()),
    )
    .unwrap_err();
    assert!(err.to_string().contains("parameter 0 is NaN"), "{err}");
    let limited = fit(
        &[Rosenbrock],
        &[-1.2, 1.0],
        &cpu(1, &FitOptions::default().with_max_iterations(2)),
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
        let error = fit(&experiments, &initial, &cpu(1, &FitOptions::default())).unwrap_err();
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
fn progress_reports_each_iteration_with_the_cost_kept() {
    // The callback hears iterations 1..=report.iterations in order, from rank 0 alone, the
    // cost never rises, the last is the report's, and the fit runs as without it.
    use std::sync::{Arc, Mutex};
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let progress = tutti_backend::ProgressFn::new(move |p| {
        assert_eq!((p.task, p.stage), ("fit", "iteration"));
        sink.lock().unwrap().push((p.done, p.value.unwrap()));
    });
    let quiet = fit(&[Rosenbrock], &[-1.2, 1.0], &cpu(2, &FitOptions::default())).unwrap();
    let options = FitOptions::default().with_progress(progress);
    let report = fit(&[Rosenbrock], &[-1.2, 1.0], &cpu(2, &options)).unwrap();
    assert!(report.converged(), "{:?}", report.termination);
    assert_eq!(report.parameters, quiet.parameters);
    let seen = seen.lock().unwrap();
    let done: Vec<u64> = seen.iter().map(|(done, _)| *done).collect();
    assert_eq!(done, (1..=report.iterations as u64).collect::<Vec<_>>());
    assert!(seen.windows(2).all(|w| w[1].1 <= w[0].1), "{seen:?}");
    assert_eq!(seen.last().unwrap().1, report.cost);
}

#[test]
fn device_selection_errors_are_typed() {
    let fit_on = |resources: Resources| {
        fit(
            &[Rosenbrock],
            &[-1.2, 1.0],
            &FitOptions::default().with_resources(resources),
        )
        .unwrap_err()
    };
    let err = fit_on(Resources::cpu(0));
    assert!(
        matches!(err, FitError::Devices(BackendError::ZeroDevices)),
        "{err}"
    );
    let err = fit_on(Resources::cpu(1).with_devices(DeviceRequest::Ordinals(vec![100_000])));
    assert!(
        matches!(
            err,
            FitError::Devices(BackendError::UnknownOrdinal {
                ordinal: 100_000,
                ..
            })
        ),
        "{err}"
    );
    // Without the `cuda` feature a GPU request says so; with it but without a GPU, no device.
    let err = fit_on(Resources::gpu(1));
    assert!(
        matches!(
            err,
            FitError::Devices(
                BackendError::CudaNotBuilt
                    | BackendError::NoDevices { .. }
                    | BackendError::MoreDevicesThanExist { .. }
            )
        ),
        "{err}"
    );
    assert!(
        std::error::Error::source(&err).is_some(),
        "the backend error is the source"
    );
    // plan() selects the same way.
    let err = plan(
        &[Rosenbrock],
        2,
        &FitOptions::default().with_resources(Resources::cpu(0)),
    )
    .unwrap_err();
    assert!(
        matches!(err, FitError::Devices(BackendError::ZeroDevices)),
        "{err}"
    );
}

/// Experiment `index` of a set: fails (or panics) when it is the chosen one.
struct OneBad {
    index: usize,
    bad: usize,
    panic: bool,
}

impl Experiment for OneBad {
    fn residual_count(&self) -> usize {
        2
    }
    fn evaluate(&self, p: &[f64], r: &mut [f64], j: &mut [f64]) -> Result<(), String> {
        if self.index == self.bad {
            if self.panic {
                panic!("experiment {} blew up", self.index);
            }
            return Err(format!("experiment {} diverged", self.index));
        }
        Rosenbrock.evaluate(p, r, j)
    }
}

/// Runs `work` on a thread and waits at most 60 s for it: a hang fails the test.
fn within_a_minute<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(work());
    });
    receive
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the fit hung or its thread died")
}

#[test]
fn an_error_in_one_experiment_on_one_rank_surfaces_without_a_hang() {
    // Eight experiments on four devices: experiment 5 is on rank 2.
    for panic in [false, true] {
        let err = within_a_minute(move || {
            let experiments: Vec<OneBad> = (0..8)
                .map(|index| OneBad {
                    index,
                    bad: 5,
                    panic,
                })
                .collect();
            fit(&experiments, &[-1.2, 1.0], &cpu(4, &FitOptions::default())).unwrap_err()
        });
        if panic {
            assert!(
                matches!(&err, FitError::Group(message) if message.contains("experiment 5 blew up")),
                "{err}"
            );
        } else {
            assert!(
                matches!(&err, FitError::Experiment { index: 5, message } if message.contains("experiment 5 diverged")),
                "{err}"
            );
        }
    }
}

#[test]
fn a_cap_too_small_for_the_plan_is_refused_up_front_and_a_sufficient_one_runs() {
    let experiments = synthetic_experiments(3).unwrap();
    // Per device: 2 x 6 contribution records of 4 + 3 + 12 doubles are 1824 bytes alone.
    let small =
        FitOptions::default().with_resources(Resources::cpu(2).with_device_memory_cap(1024));
    let err = plan(&experiments, 3, &small).unwrap_err();
    assert!(
        matches!(err, FitError::Plan(PlanError::DoesNotFit { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("contributions"), "{err}");
    // fit refuses with the same numbers before evaluating anything.
    let refused = fit(&experiments, &START_RATES, &small).unwrap_err();
    assert_eq!(refused.to_string(), err.to_string());

    let enough =
        FitOptions::default().with_resources(Resources::cpu(2).with_device_memory_cap(1 << 20));
    let table = plan(&experiments, 3, &enough).unwrap();
    let listed = table.to_string();
    for object in [
        "jacobian blocks",
        "residuals",
        "qr workspace",
        "contributions",
        "normal matrix",
    ] {
        assert!(listed.contains(object), "{listed}");
    }
    // 6 experiments of 24 residuals x 3 parameters: one block is 576 bytes.
    let blocks = table.placement("jacobian blocks").unwrap();
    assert_eq!(blocks.object.bytes_each(), 24 * 3 * 8);
    assert_eq!(blocks.tier, Tier::Device);
    let report = fit(&experiments, &START_RATES, &enough).unwrap();
    assert!(report.converged(), "{:?}", report.termination);
}

/// r_i = (p0 + p1) x_i - y_i: only the sum p0 + p1 is determined by the data.
struct SumOnly;

const SUM_X: [f64; 4] = [1.0, 2.0, 3.0, 4.0];
const SUM_Y: [f64; 4] = [2.1, 3.9, 6.2, 7.8];

impl Experiment for SumOnly {
    fn residual_count(&self) -> usize {
        4
    }
    fn evaluate(&self, p: &[f64], r: &mut [f64], j: &mut [f64]) -> Result<(), String> {
        for (i, (x, y)) in SUM_X.iter().zip(SUM_Y).enumerate() {
            r[i] = (p[0] + p[1]) * x - y;
            j[2 * i] = *x;
            j[2 * i + 1] = *x;
        }
        Ok(())
    }
}

#[test]
fn a_rank_deficient_jacobian_gives_the_pseudo_inverse_and_its_rank() {
    let report = fit(&[SumOnly], &[0.0, 0.0], &cpu(1, &FitOptions::default())).unwrap();
    // The sum is the slope of a fit through the origin: Sxy / Sxx = 59.7 / 30.
    let (sxx, sxy) = (30.0, 59.7);
    let sum = report.parameters[0] + report.parameters[1];
    assert!((sum - sxy / sxx).abs() < 1e-10, "{:?}", report.parameters);
    assert_eq!(report.covariance_rank, 1);
    // J^T J = Sxx [[1, 1], [1, 1]] = 2 Sxx u u^T, u = (1, 1) / sqrt 2: its pseudo-inverse is
    // u u^T / (2 Sxx) = [[1, 1], [1, 1]] / (4 Sxx).
    let covariance = report.covariance.as_ref().expect("pseudo-inverse");
    for value in covariance {
        assert!((value - 1.0 / (4.0 * sxx)).abs() < 1e-14, "{covariance:?}");
    }
    // Scaled by the reduced chi-square 2 cost / (4 - 2).
    let scaled = report.scaled_covariance().expect("scaled");
    let chi2 = report.cost;
    for (s, c) in scaled.iter().zip(covariance) {
        assert!(
            (s - c * chi2).abs() <= 1e-15 * s.abs().max(1e-300),
            "{scaled:?}"
        );
    }
}
