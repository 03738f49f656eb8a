//! The per-iteration callback and the robust loss in the fit's bitwise guarantee: a fit
//! stopped by its callback at iteration k is, bit for bit, the fit limited to k iterations,
//! on 1 and 3 devices, on a 2 x 2 (data x model) mesh and across loopback "processes";
//! only rank 0 calls it; and a robust fit converges to the same bits on any device count.

use std::ops::ControlFlow;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tutti_backend::Resources;
use tutti_fit::example::{synthetic_experiments, ReactionExperiment};
use tutti_fit::{fit, fit_on, FitOptions, FitReport, Loss, Termination};
use tutti_group::Group;
use tutti_mpi::{loopback, SpanningFabric};

/// Where the fits start: nearer the truth (2, 0.5, 0.3) than the example's `START_RATES`,
/// from which the robust fit's first trial points have rates the explicit integrator takes
/// many steps for (2.7 s against 0.04 s for the whole linear fit in a debug build).
const START: [f64; 3] = [1.5, 0.7, 0.4];

/// The example under a soft-L1 loss at 2 standard deviations, on `devices` simulated
/// devices, `model_devices` per experiment.
fn options(devices: usize, model_devices: usize) -> FitOptions {
    FitOptions::default()
        .with_resources(Resources::cpu(devices))
        .with_model_devices(model_devices)
        .with_loss(Loss::SoftL1, 2.0)
}

fn experiments() -> Vec<ReactionExperiment> {
    synthetic_experiments(2026).expect("data")
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Everything a report holds that must not depend on the devices, as bits.
fn fingerprint(report: &FitReport) -> (Vec<u64>, u64, Vec<u64>, u64, u64, usize, usize) {
    (
        bits(&report.parameters),
        report.cost.to_bits(),
        bits(report.covariance.as_deref().unwrap_or_default()),
        report.gradient_cosine.to_bits(),
        report.gradient_norm.to_bits(),
        report.iterations,
        report.evaluations,
    )
}

/// What the callback saw: (iteration, parameters, cost, accepted), in call order.
type Seen = Arc<Mutex<Vec<(usize, Vec<f64>, f64, bool)>>>;

/// `options` with a callback that records each call and stops after iteration `k`.
fn stopping_at(options: FitOptions, k: usize) -> (FitOptions, Seen) {
    let seen: Seen = Arc::default();
    let sink = Arc::clone(&seen);
    let options = options.with_callback(move |state| {
        sink.lock().expect("the record").push((
            state.iteration,
            state.parameters.to_vec(),
            state.cost,
            state.accepted,
        ));
        if state.iteration >= k {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    (options, seen)
}

#[test]
fn a_robust_fit_is_the_same_bits_on_1_and_3_devices_and_on_a_2_x_2_mesh() {
    let experiments = experiments();
    let one = fit(&experiments, &START, &options(1, 1)).expect("fit");
    assert!(one.converged(), "{:?}", one.termination);
    for (devices, model_devices) in [(3, 1), (4, 2)] {
        let many = fit(&experiments, &START, &options(devices, model_devices)).expect("fit");
        assert_eq!(
            fingerprint(&many),
            fingerprint(&one),
            "{devices} devices, {model_devices} per experiment"
        );
        assert_eq!(many.termination, one.termination);
    }
    // The loss changed the fit: the linear one ends elsewhere, with another cost.
    let linear = fit(
        &experiments,
        &START,
        &FitOptions::default().with_resources(Resources::cpu(1)),
    )
    .expect("fit");
    assert_ne!(bits(&linear.parameters), bits(&one.parameters));
    assert!(one.cost < linear.cost, "{} vs {}", one.cost, linear.cost);
}

#[test]
fn stopping_at_iteration_k_is_the_fit_limited_to_k_iterations_on_any_mesh() {
    let experiments = experiments();
    for k in [1, 3, 5] {
        let limited =
            fit(&experiments, &START, &options(1, 1).with_max_iterations(k)).expect("limited");
        assert_eq!(limited.termination, Termination::MaxIterations);
        for (devices, model_devices) in [(1, 1), (3, 1), (4, 2)] {
            let (stopping, seen) = stopping_at(options(devices, model_devices), k);
            let stopped = fit(&experiments, &START, &stopping).expect("stopped");
            let mesh = format!("k = {k}, {devices} devices, {model_devices} per experiment");
            assert_eq!(stopped.termination, Termination::Callback, "{mesh}");
            assert!(!stopped.converged(), "{mesh}");
            assert_eq!(fingerprint(&stopped), fingerprint(&limited), "{mesh}");
            // Rank 0 alone calls it, once per iteration, and its last call saw the report's
            // point: the best one (the cost never rises from call to call).
            let seen = seen.lock().expect("the record");
            let iterations: Vec<usize> = seen.iter().map(|s| s.0).collect();
            assert_eq!(iterations, (1..=k).collect::<Vec<_>>(), "{mesh}");
            let last = seen.last().expect("a call");
            assert_eq!(bits(&last.1), bits(&stopped.parameters), "{mesh}");
            assert_eq!(last.2.to_bits(), stopped.cost.to_bits(), "{mesh}");
            assert!(seen.windows(2).all(|w| w[1].2 <= w[0].2), "{mesh}");
            for (_, parameters, _, accepted) in seen.iter() {
                // An accepted step moved the parameters away from the start.
                if *accepted {
                    assert_ne!(bits(parameters), bits(&START), "{mesh}");
                }
            }
        }
    }
}

#[test]
fn a_callback_that_never_stops_changes_nothing() {
    let experiments = experiments();
    let quiet = fit(&experiments, &START, &options(2, 1)).expect("fit");
    let (listening, seen) = stopping_at(options(2, 1), usize::MAX);
    let heard = fit(&experiments, &START, &listening).expect("fit");
    assert_eq!(fingerprint(&heard), fingerprint(&quiet));
    assert_eq!(heard.termination, quiet.termination);
    // Called after every iteration, the last one (whose step met a tolerance, or after which
    // the gradient test did) included.
    assert_eq!(seen.lock().expect("the record").len(), heard.iterations);
}

/// Runs `work` on `size` threads, each its own "process" with a spanning group over a
/// loopback wire; returns each one's value, in rank order. Fails on a hang.
fn processes<T, F>(size: usize, work: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize, Group) -> T + Send + Sync + 'static,
{
    let limit = Duration::from_secs(60);
    let (done, results) = mpsc::channel();
    let work = Arc::new(work);
    for wire in loopback(size, limit) {
        let (done, work) = (done.clone(), Arc::clone(&work));
        std::thread::spawn(move || {
            let rank = tutti_mpi::Wire::rank(&wire);
            let fabric = Arc::new(SpanningFabric::new(wire));
            let device = Resources::cpu(1).select().expect("a device").remove(0);
            let _ = done.send((rank, work(rank, Group::spanning(fabric, device))));
        });
    }
    drop(done);
    let mut outcomes: Vec<Option<T>> = (0..size).map(|_| None).collect();
    for _ in 0..size {
        let (rank, value) = results
            .recv_timeout(limit + Duration::from_secs(5))
            .expect("a process hung or panicked outside its group");
        outcomes[rank] = Some(value);
    }
    outcomes
        .into_iter()
        .map(|v| v.expect("every rank"))
        .collect()
}

#[test]
fn rank_0s_decision_stops_every_process_at_the_same_iteration() {
    // Only process 0's options ask to stop (after iteration 2); the others have no
    // callback. Every process still stops there, with the report of threads.
    let experiments = experiments();
    let limited =
        fit(&experiments, &START, &options(1, 1).with_max_iterations(2)).expect("limited");
    let reports = processes(3, |rank, group| {
        let experiments = synthetic_experiments(2026).expect("data");
        let options = if rank == 0 {
            stopping_at(options(1, 1), 2).0
        } else {
            options(1, 1)
        };
        fit_on(&group, &experiments, &START, &options).expect("fit")
    });
    for (rank, report) in reports.iter().enumerate() {
        assert_eq!(report.termination, Termination::Callback, "rank {rank}");
        assert_eq!(report.devices, 3, "rank {rank}");
        assert_eq!(fingerprint(report), fingerprint(&limited), "rank {rank}");
    }
}
