//! A Levenberg–Marquardt trust-region solver whose sums run across the data axis.
//!
//! Every rank evaluates the experiments assigned to it; the per-experiment contributions
//! (cost, gradient `J^T r`, Gauss–Newton curvature `J^T J`) are exchanged with one
//! allgather and summed by every rank in EXPERIMENT order. The iterates therefore do not
//! depend on the device count or on which rank evaluated which experiment: they are
//! bitwise identical on 1 or G devices, with or without balancing. Under a robust loss each
//! experiment's residuals and Jacobian rows are rescaled (see [`crate::Loss`]) where it is
//! evaluated, before its contributions are formed, so this holds for every loss.
//!
//! Each record also carries the triangle `R_e` of a QR of the experiment's Jacobian block;
//! the covariance at the solution comes from the QR of those triangles stacked in experiment
//! order (`R^T R = J^T J`), never from inverting `J^T J`.

use tutti_backend::{Device, Progress, Resources};
use tutti_group::{Comm, Group};
use tutti_plan::{ObjectSpec, Plan, Planner, Tier};

use crate::balance::{block_assignment, lpt_assignment, makespan};
use crate::linalg::{cholesky_solve, covariance_from_packed_r, qr_scratch_bytes};
use crate::loss;
use crate::{Experiment, FitError};

mod evaluate;
mod options;
mod report;

use evaluate::{check_sizes, evaluate_all, packed_len, record_width, Evaluation, Mesh, ScaledLoss};
pub use options::{FitCallback, FitIteration, FitOptions};
pub use report::{FitReport, Termination};

/// Fits `initial` to `experiments`, split over the devices of [`FitOptions::resources`] (a
/// data axis: one rank per device, each evaluating its share of the experiments), by
/// Levenberg–Marquardt with Nielsen's damping update and Marquardt's diagonal scaling.
///
/// Each iteration solves `(J^T J + lambda D) step = -J^T r` with `D` the diagonal of
/// `J^T J`, accepts the step if the cost falls, and adapts `lambda` by the ratio of actual
/// to predicted reduction. A trial point where an experiment fails counts as a rejected
/// step; a failure at the starting point is an error naming the experiment.
///
/// Before anything is evaluated the fit makes its [`plan`] and refuses, with the plan's
/// numbers ([`FitError::Plan`]), when its buffers do not fit the devices' memory or the caps
/// of the resources.
///
/// Errors: no experiments, no parameters, a non-finite starting point, an experiment that
/// fails at the starting point, [`FitError::OutOfMemory`] for an experiment whose residuals
/// and Jacobian (`residual_count() * (n + 1)` doubles) overflow, exceed the host's physical
/// memory or cannot be reserved (checked before anything is evaluated),
/// [`FitError::Devices`] when the resources select no device (zero devices, an unknown
/// ordinal, a GPU request without CUDA), [`FitError::Plan`], or a failure of the group (a
/// panicking experiment is [`FitError::Group`] with the rank and the panic message).
pub fn fit<E: Experiment>(
    experiments: &[E],
    initial: &[f64],
    options: &FitOptions,
) -> Result<FitReport, FitError> {
    check_start(experiments, initial, options)?;
    let group = Group::from_resources(&options.resources, crate::GPU_USE)?;
    fit_on(&group, experiments, initial, options)
}

fn check_start<E: Experiment>(
    experiments: &[E],
    initial: &[f64],
    options: &FitOptions,
) -> Result<(), FitError> {
    check_problem(experiments, initial.len())?;
    if let Some(i) = initial.iter().position(|x| !x.is_finite()) {
        return Err(FitError::invalid(
            "initial",
            format!("parameter {i} is {}, expected a finite number", initial[i]),
        ));
    }
    loss::check_scale(options.loss_scale)?;
    match &options.bounds {
        Some(bounds) => bounds.check_start(initial),
        None => Ok(()),
    }
}

/// [`fit`] on a group made by the caller: the way to fit across processes, on a
/// [`Group::spanning`] group whose other ranks are other MPI processes running the same
/// program with the same experiments and options. The experiments are split among all
/// ranks as on threads, and every process returns the same report, bitwise equal to the
/// report of a group of as many threads. `options.resources` still gives the memory caps
/// the plan is checked against; the group gives the devices.
///
/// A failure on another process is [`FitError::Group`] with that rank's error text.
pub fn fit_on<E: Experiment>(
    group: &Group,
    experiments: &[E],
    initial: &[f64],
    options: &FitOptions,
) -> Result<FitReport, FitError> {
    // A failure before the run releases the other processes of a spanning group.
    group.before_run(check_start(experiments, initial, options).and_then(|()| {
        check_mesh(group, options.model_devices)?;
        plan_on(
            group.devices(),
            experiments,
            initial.len(),
            &options.resources,
        )
    }))?;
    let reports = group.run(|comm| solve(comm, experiments, initial, options))?;
    reports
        .into_iter()
        .next()
        .ok_or_else(|| FitError::Group("the group returned no result".into()))
}

/// Refuses a model axis that does not divide the devices, or spans processes (sub-groups
/// are in-process only, today).
fn check_mesh(group: &Group, model_devices: usize) -> Result<(), FitError> {
    let devices = group.size();
    if model_devices > 1 && group.is_spanning() {
        return Err(FitError::invalid(
            "model_devices",
            format!(
                "{model_devices} devices per experiment on a group spanning processes: the \
                 model axis runs within one process only, for now"
            ),
        ));
    }
    if model_devices == 0 || !devices.is_multiple_of(model_devices) {
        return Err(FitError::invalid(
            "model_devices",
            format!(
                "{model_devices} device(s) per experiment do not divide the {devices} \
                 device(s) of the fit into model groups"
            ),
        ));
    }
    Ok(())
}

/// The memory plan of a fit of `parameters` parameters to `experiments` under
/// [`FitOptions::resources`], without running it: the objects every rank holds, placed by
/// [`tutti_plan::Planner`] on the device tier (the fit neither spills nor moves them), with
/// the budget they were checked against. `Plan`'s `Display` prints it as a table. [`fit`]
/// makes the same plan first and refuses to start when it does not fit.
///
/// The objects, per device (`c` = concurrent evaluations on one device, the smaller of its
/// thread count and the number of experiments; `m` = the largest residual count; `E` = the
/// number of experiments; `n` = `parameters`):
/// - `jacobian blocks`: `c` blocks of `m x n` doubles, one per experiment being evaluated;
/// - `residuals`: `c` vectors of `m` doubles;
/// - `qr workspace`: `c` workspaces of faer's blocked QR of an `m x n` block;
/// - `contributions`: `2E` records (cost, gradient, packed `J^T J`, packed QR triangle) of
///   `4 + n + n (n + 1)` doubles: the gathered records of all experiments and this rank's;
/// - `normal matrix`: 4 matrices of `n x n` doubles (`J^T J` now and at the trial point,
///   the damped system, its Cholesky factor);
/// - `stacked triangles`: the `E n x n` stack whose QR gives the covariance.
///
/// Errors: as [`fit`] for an empty problem and for device selection; [`FitError::Plan`]
/// when the objects do not fit (the message lists each object with what it needed and what
/// was free) or the budget cannot be measured.
pub fn plan<E: Experiment>(
    experiments: &[E],
    parameters: usize,
    options: &FitOptions,
) -> Result<Plan, FitError> {
    check_problem(experiments, parameters)?;
    let devices = options.resources.select_for(crate::GPU_USE)?;
    plan_on(&devices, experiments, parameters, &options.resources)
}

/// Refuses an empty problem and sizes no host can hold.
fn check_problem<E: Experiment>(experiments: &[E], parameters: usize) -> Result<(), FitError> {
    if experiments.is_empty() {
        return Err(FitError::invalid("experiments", "at least one is needed"));
    }
    if parameters == 0 {
        return Err(FitError::invalid(
            "initial",
            "at least one parameter is needed",
        ));
    }
    check_sizes(experiments, parameters)
}

/// The plan of [`plan`] on devices already selected.
fn plan_on<E: Experiment>(
    devices: &[Device],
    experiments: &[E],
    n: usize,
    resources: &Resources,
) -> Result<Plan, FitError> {
    let to_u64 = |x: usize| u64::try_from(x).unwrap_or(u64::MAX);
    let m = experiments
        .iter()
        .map(Experiment::residual_count)
        .max()
        .unwrap_or(0);
    let count = experiments.len();
    let threads = devices.iter().map(Device::threads).max().unwrap_or(1);
    let concurrent = to_u64(threads.clamp(1, count.max(1)));
    let doubles = |entries: usize| to_u64(entries).saturating_mul(8);
    let objects = [
        ObjectSpec::per_device("jacobian blocks", doubles(m.saturating_mul(n)), concurrent),
        ObjectSpec::per_device("residuals", doubles(m), concurrent),
        ObjectSpec::per_device("qr workspace", qr_scratch_bytes(m, n), concurrent),
        ObjectSpec::per_device(
            "contributions",
            doubles(record_width(n)),
            to_u64(count).saturating_mul(2),
        ),
        ObjectSpec::per_device("normal matrix", doubles(n.saturating_mul(n)), 4),
        ObjectSpec::per_device(
            "stacked triangles",
            doubles(n.saturating_mul(n)),
            to_u64(count),
        ),
    ]
    .map(|object| object.no_slower_than(Tier::Device));
    let budget = tutti_plan::Budget::from_devices(devices, resources)?;
    Ok(Planner::new(budget).plan(&objects)?)
}

/// The costs used for balancing: the experiments' estimates when all give one, else the
/// measured seconds, smoothed.
fn update_costs<E: Experiment>(experiments: &[E], costs: &mut Vec<f64>, seconds: &[f64]) {
    let estimates: Option<Vec<f64>> = experiments.iter().map(E::cost_estimate).collect();
    match estimates {
        Some(estimates) => *costs = estimates,
        None if costs.is_empty() => *costs = seconds.to_vec(),
        None => {
            for (cost, &s) in costs.iter_mut().zip(seconds) {
                *cost = 0.5 * *cost + 0.5 * s;
            }
        }
    }
}

fn solve<E: Experiment>(
    comm: &Comm<'_>,
    experiments: &[E],
    initial: &[f64],
    options: &FitOptions,
) -> Result<FitReport, FitError> {
    let n = initial.len();
    let mesh = Mesh::split(comm, options.model_devices)?;
    let ranks = mesh.groups;
    let balance = options.balance_steps.unwrap_or(experiments.len() > ranks);
    let mut assignment = block_assignment(experiments.len(), ranks);
    let mut parameters = initial.to_vec();
    let scaled_loss = ScaledLoss {
        loss: options.loss,
        scale: options.loss_scale,
    };
    let mut current = evaluate_all(
        comm,
        &mesh,
        experiments,
        &assignment,
        &parameters,
        scaled_loss,
    )?;
    let mut evaluations = 1;
    let mut timing = current.timing;
    if let Some((index, message)) = current.failure.take() {
        return Err(FitError::Experiment {
            index,
            message: format!("at the starting point: {message}"),
        });
    }
    let mut costs = Vec::new();
    update_costs(experiments, &mut costs, &current.seconds);
    let makespan_initial = makespan(&costs, &assignment, ranks);
    let mut rebalances = 0;
    let rebalance = |costs: &[f64], assignment: &mut Vec<usize>, rebalances: &mut usize| {
        if !balance {
            return;
        }
        let candidate = lpt_assignment(costs, ranks);
        if makespan(costs, &candidate, ranks) < 0.95 * makespan(costs, assignment, ranks) {
            *assignment = candidate;
            *rebalances += 1;
        }
    };
    rebalance(&costs, &mut assignment, &mut rebalances);

    // The damping multiplies the diagonal of J^T J (Marquardt's scaling), so it has no
    // units: a parameter whose column of J is small is damped in proportion, not swamped
    // by the largest column's scale.
    let mut damping = options.initial_damping;
    let mut growth = 2.0;
    let mut iterations = 0;
    // The parameters the step leaves alone: those the bounds hold (none without bounds).
    let held = |parameters: &[f64], gradient: &[f64]| match &options.bounds {
        Some(bounds) => bounds.held(parameters, gradient),
        None => vec![false; n],
    };
    // The largest gradient component the bounds leave free.
    let gradient_norm = |parameters: &[f64], g: &[f64]| {
        g.iter()
            .zip(held(parameters, g))
            .filter(|(_, held)| !held)
            .fold(0.0_f64, |m, (x, _)| m.max(x.abs()))
    };
    // MINPACK's scale-free gradient measure over the free components: the largest cosine of
    // the angle between the residuals and a column of J, |(J^T r)_j| / (|r| |J_j|), with
    // |J_j|^2 the diagonal of J^T J and |r|^2 = 2 cost. Under a robust loss J is the rescaled
    // Jacobian and 2 cost the robust one: not the norm of the rescaled residuals, which
    // Huber's clamped curvature inflates by up to 1 / sqrt(eps) for outliers and would make
    // the cosine spuriously small. Zero residuals give 0 (a zero-residual minimum); a zero
    // column has a zero gradient component and is skipped.
    let gradient_cosine = |parameters: &[f64], evaluation: &Evaluation| {
        let residual_norm = (2.0 * evaluation.cost).sqrt();
        if residual_norm == 0.0 {
            return 0.0;
        }
        let g = &evaluation.gradient;
        held(parameters, g)
            .iter()
            .enumerate()
            .filter(|(_, held)| !**held)
            .fold(0.0_f64, |largest, (j, _)| {
                let column_norm = evaluation.curvature[j * n + j].sqrt();
                if column_norm == 0.0 {
                    largest
                } else {
                    largest.max(g[j].abs() / column_norm / residual_norm)
                }
            })
    };
    let termination = loop {
        if gradient_cosine(&parameters, &current) <= options.gradient_tolerance {
            break Termination::Gradient;
        }
        if iterations >= options.max_iterations {
            break Termination::MaxIterations;
        }
        iterations += 1;
        // One iteration: whether its step was accepted, and the tolerance it met, if any.
        let (accepted, met): (bool, Option<Termination>) = 'iteration: {
            let mut system = current.curvature.clone();
            for i in 0..n {
                system[i * n + i] += damping * current.curvature[i * n + i].max(1e-300);
            }
            let mut rhs: Vec<f64> = current.gradient.iter().map(|g| -g).collect();
            // A held parameter's row and column become the identity's, its right-hand side
            // zero: its step is zero and the others' system is the free block.
            for (i, _) in held(&parameters, &current.gradient)
                .iter()
                .enumerate()
                .filter(|(_, held)| **held)
            {
                for j in 0..n {
                    system[i * n + j] = 0.0;
                    system[j * n + i] = 0.0;
                }
                system[i * n + i] = 1.0;
                rhs[i] = 0.0;
            }
            let Some(mut step) = cholesky_solve(&system, &rhs) else {
                damping *= growth;
                growth *= 2.0;
                break 'iteration (false, None);
            };
            let step_norm = step.iter().map(|s| s * s).sum::<f64>().sqrt();
            let parameter_norm = parameters.iter().map(|p| p * p).sum::<f64>().sqrt();
            if step_norm <= options.step_tolerance * (parameter_norm + options.step_tolerance) {
                break 'iteration (false, Some(Termination::Step));
            }
            let mut trial_parameters: Vec<f64> =
                parameters.iter().zip(&step).map(|(p, s)| p + s).collect();
            let clipped = options
                .bounds
                .as_ref()
                .is_some_and(|bounds| bounds.clip(&mut trial_parameters));
            if clipped {
                for ((s, trial), p) in step.iter_mut().zip(&trial_parameters).zip(&parameters) {
                    *s = trial - p;
                }
            }
            let mut trial = evaluate_all(
                comm,
                &mesh,
                experiments,
                &assignment,
                &trial_parameters,
                scaled_loss,
            )?;
            evaluations += 1;
            timing.0 += trial.timing.0;
            timing.1 += trial.timing.1;
            // Predicted reduction of the quadratic model: 0.5 step^T (lambda D step - g) for
            // the step the system gave; -g^T step - 0.5 step^T (J^T J) step for a clipped one.
            let predicted: f64 = if clipped {
                -(0..n)
                    .map(|i| {
                        let curvature: f64 =
                            (0..n).map(|j| current.curvature[i * n + j] * step[j]).sum();
                        step[i] * (current.gradient[i] + 0.5 * curvature)
                    })
                    .sum::<f64>()
            } else {
                0.5 * (0..n)
                    .map(|i| {
                        step[i]
                            * (damping * current.curvature[i * n + i].max(1e-300) * step[i]
                                - current.gradient[i])
                    })
                    .sum::<f64>()
            };
            let actual = current.cost - trial.cost;
            let ratio = if trial.failure.is_none() && predicted > 0.0 {
                actual / predicted
            } else {
                -1.0
            };
            if comm.rank() == 0 {
                log::debug!(
                    "fit: iteration {iterations:>3}  cost {:.6e}  trial {:.6e}  damping {damping:.2e}  {}",
                    current.cost,
                    trial.cost,
                    if ratio > 0.0 { "accepted" } else { "rejected" }
                );
            }
            if ratio > 0.0 {
                let previous_cost = current.cost;
                trial.failure = None;
                update_costs(experiments, &mut costs, &trial.seconds);
                current = trial;
                parameters = trial_parameters;
                damping *= (1.0 - (2.0 * ratio - 1.0).powi(3)).max(1.0 / 3.0);
                growth = 2.0;
                rebalance(&costs, &mut assignment, &mut rebalances);
                // Relative, so scaling the residuals does not change it.
                let met =
                    (actual <= options.cost_tolerance * previous_cost).then_some(Termination::Cost);
                (true, met)
            } else {
                damping *= growth;
                growth *= 2.0;
                (false, None)
            }
        };
        // Rank 0 reports every iteration and asks the callback; its answer reaches every
        // rank (and process) through one broadcast, so all stop at the same iteration.
        let mut stop = [0_u8];
        if comm.rank() == 0 {
            tutti_backend::progress::report(
                options.progress.as_ref(),
                Progress {
                    task: "fit",
                    stage: "iteration",
                    done: iterations as u64,
                    total: options.max_iterations as u64,
                    value: Some(current.cost),
                },
            );
            if let Some(callback) = &options.callback {
                let state = FitIteration {
                    iteration: iterations,
                    parameters: &parameters,
                    cost: current.cost,
                    accepted,
                    damping,
                };
                stop[0] = u8::from(callback.call(&state).is_break());
            }
        }
        comm.broadcast_slice(0, &mut stop)?;
        if let Some(termination) = met {
            break termination;
        }
        if stop[0] != 0 {
            break Termination::Callback;
        }
    };
    let (covariance, covariance_rank) =
        match covariance_from_packed_r(current.triangles.chunks_exact(packed_len(n)), n) {
            Some((covariance, rank)) => (Some(covariance), rank),
            None => (None, 0),
        };
    if covariance_rank < n && comm.rank() == 0 {
        log::warn!(
            "fit: J^T J has rank {covariance_rank} of {n} at the solution: some combinations \
             of the parameters are not determined by the data; the covariance is a \
             pseudo-inverse"
        );
    }
    Ok(FitReport {
        gradient_norm: gradient_norm(&parameters, &current.gradient),
        gradient_cosine: gradient_cosine(&parameters, &current),
        // Every rank holds every triangle, so each computes the covariance itself (the QR of
        // an E n x n stack): the reports are the same on every rank, and in every process
        // of a group spanning processes.
        covariance,
        covariance_rank,
        parameters,
        cost: current.cost,
        iterations,
        evaluations,
        termination,
        residual_count: experiments
            .iter()
            .map(Experiment::residual_count)
            .fold(0, usize::saturating_add),
        devices: comm.size(),
        model_devices: options.model_devices.max(1),
        makespan_initial,
        makespan_final: makespan(&costs, &assignment, ranks),
        rebalances,
        assignment,
        evaluation_seconds: timing.0,
        reduction_seconds: timing.1,
    })
}
