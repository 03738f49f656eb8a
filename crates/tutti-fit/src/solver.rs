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

use std::fmt;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use faer::MatMut;
use rayon::prelude::*;
use tutti_backend::{Device, Progress, ProgressFn, Resources};
use tutti_group::{Comm, Group};
use tutti_plan::{ObjectSpec, Plan, Planner, Tier};

use crate::balance::{block_assignment, lpt_assignment, makespan};
use crate::linalg::{
    cholesky_solve, covariance_from_packed_r, packed_r_in_place, qr_scratch_bytes,
};
use crate::loss::{self, Loss};
use crate::{Bounds, Experiment, FitError};

/// Options of [`fit`], with documented defaults.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FitOptions {
    /// Most iterations (accepted or rejected steps); default 200.
    pub max_iterations: usize,
    /// Stop when the gradient is orthogonal to the residuals to within this: when the
    /// largest cosine of the angle between the residual vector `r` and a column `J_j` of the
    /// Jacobian, `max_j |(J^T r)_j| / (|r| |J_j|)` over the components the bounds leave free
    /// ([`FitReport::gradient_cosine`], MINPACK's measure), is at most this, or the residuals
    /// are all zero. Checked before each iteration. Default 1e-10.
    ///
    /// The measure has no units: scaling the residuals or changing a parameter's units
    /// leaves it unchanged (the former test, `max |J^T r| <= 1e-10`, moved with the square
    /// of the residuals' scale). Near a minimum its square is about the cost's relative
    /// excess over the minimum (exactly so for one parameter), and a parameter whose column
    /// is uncorrelated with the others is within `cosine * |r|` standard errors of it
    /// (residuals weighted by their standard deviations; correlated columns widen this).
    /// Why 1e-10 rather than scipy's 1e-8: it keeps the former default's number (the C,
    /// Python and Fortran front ends document it) and every existing fit's iterations, and
    /// it is met only when a step lands at the minimum to within rounding (Gauss–Newton on a
    /// nearly linear problem): a cosine below `sqrt(eps)` (1.5e-8) means a relative excess
    /// below `eps`, which the cost cannot resolve, so other fits end on the cost test (a
    /// last decrease of 1e-14 of the cost is a cosine near 1e-7) or the step test. A
    /// zero-residual fit (near its solution `r` lies in the range of `J`) keeps a cosine
    /// near 1 until `r` vanishes, and ends on those tests too.
    pub gradient_tolerance: f64,
    /// Stop when a step is at most this relative to the parameters:
    /// `|step| <= tol (|p| + tol)`, Euclidean norms; default 1e-12. Relative, so scaling all
    /// parameters together does not change it, but the norms mix the parameters' units:
    /// with parameters of very different magnitudes it measures the step against the
    /// largest.
    pub step_tolerance: f64,
    /// Stop when an accepted step lowers the cost by at most this fraction of the cost
    /// before it (a relative test: scaling the residuals does not change it); default 1e-14.
    pub cost_tolerance: f64,
    /// The starting damping `lambda` of `(J^T J + lambda diag(J^T J)) step = -J^T r`: a
    /// fraction of each parameter's own curvature, so it does not depend on the parameters'
    /// scales; default 1e-3.
    pub initial_damping: f64,
    /// Move experiments between ranks between iterations by their costs. `None` (the
    /// default) balances when some rank holds several experiments. Never changes results.
    pub balance_steps: Option<bool>,
    /// Called by rank 0 after each iteration: task `"fit"`, stage `"iteration"`, `done` the
    /// iteration, `total` the limit, `value` the cost of the parameters kept. Default `None`.
    /// Each iteration is also logged (cost, trial cost, damping, accepted or rejected)
    /// through the `log` facade at debug level, target `tutti_fit::solver`: the library never
    /// prints.
    pub progress: Option<ProgressFn>,
    /// Where the fit runs: the experiments are split over the devices these resources select
    /// (one rank per device, a data axis over all of them), and the memory caps bound the
    /// fit's buffers (see [`plan`]). Default [`Resources::default`]: every GPU, else one
    /// simulated device on all cores. The result does not depend on the device count.
    pub resources: Resources,
    /// Bounds on the parameters (equal bounds fix one); default `None`. The step leaves out
    /// a parameter held at a bound by the gradient and the trial point is clipped into the
    /// box; the starting point must lie inside. The gradient tolerance applies to the
    /// components the bounds leave free. The covariance is still that of the unconstrained
    /// problem at the solution (as scipy's `curve_fit` reports it).
    pub bounds: Option<Bounds>,
    /// The devices each experiment runs on together (the model axis of a data x model
    /// mesh); default 1. The fit's ranks are split into consecutive groups of this many
    /// (ranks `g k .. g k + k` form model group `g`), each group evaluates its share of the
    /// experiments through [`Experiment::evaluate_on`] on its own sub-group, one experiment
    /// at a time, and the groups split the experiments as single devices do. Must divide
    /// the device count. The result does not depend on the mesh when the experiments'
    /// `evaluate_on` gives the same bits on any model group (the Brusselator's does).
    pub model_devices: usize,
    /// The loss applied to each residual (scipy's `loss`); default [`Loss::Linear`],
    /// ordinary least squares. Under another loss the fit minimizes
    /// `0.5 C^2 sum rho((r / C)^2)` with `C` = [`FitOptions::loss_scale`], by rescaling each
    /// experiment's residuals and Jacobian rows (Triggs' correction, as scipy does; see
    /// [`Loss`]) where the experiment is evaluated, so the result still does not depend on
    /// the devices or the mesh. [`FitReport::cost`] is then that robust cost.
    pub loss: Loss,
    /// The residuals' soft margin `C` between inliers and outliers (scipy's `f_scale`), in
    /// the residuals' units: a residual well below it costs about `0.5 r^2`, one well above
    /// it less, as its loss says. Must be positive and finite; no effect under
    /// [`Loss::Linear`]; default 1.
    pub loss_scale: f64,
    /// Called by rank 0 after each iteration (see [`FitCallback`]); [`ControlFlow::Break`]
    /// stops the fit on every rank with [`Termination::Callback`] and the best point found.
    /// Default `None`.
    pub callback: Option<FitCallback>,
}

/// What a [`FitCallback`] is told after each iteration.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct FitIteration<'a> {
    /// The iteration just finished, from 1.
    pub iteration: usize,
    /// The parameters kept after it: the best point found so far (a step is accepted only
    /// when it lowers the cost).
    pub parameters: &'a [f64],
    /// The cost there (the robust cost under a robust [`FitOptions::loss`]).
    pub cost: f64,
    /// Whether this iteration's step was accepted (the parameters moved).
    pub accepted: bool,
    /// The damping the next iteration starts from.
    pub damping: f64,
}

/// A per-iteration callback of [`fit`] that can stop it: called by rank 0 alone after every
/// iteration (accepted or rejected, the last one included), it returns
/// [`ControlFlow::Continue`] to go on or [`ControlFlow::Break`] to stop. Rank 0 broadcasts
/// the decision to every rank (one small collective per iteration, also across the
/// processes of a spanning group), so all stop together, at the same iteration. A stopped
/// fit returns [`Termination::Callback`] with the best point found, the same bits as a fit
/// limited to that many iterations; when the iteration already met a tolerance, that
/// termination is reported instead. It runs on rank 0's thread between iterations: the fit
/// waits for it.
#[derive(Clone)]
pub struct FitCallback(Arc<CallbackFn>);

/// The closure a [`FitCallback`] wraps.
type CallbackFn = dyn Fn(&FitIteration<'_>) -> ControlFlow<()> + Send + Sync;

impl FitCallback {
    /// Wraps a closure.
    pub fn new(
        callback: impl Fn(&FitIteration<'_>) -> ControlFlow<()> + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(callback))
    }

    /// Asks the callback about `iteration`.
    pub fn call(&self, iteration: &FitIteration<'_>) -> ControlFlow<()> {
        (self.0)(iteration)
    }
}

impl fmt::Debug for FitCallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FitCallback(..)")
    }
}

impl Default for FitOptions {
    fn default() -> Self {
        Self {
            max_iterations: 200,
            gradient_tolerance: 1e-10,
            step_tolerance: 1e-12,
            cost_tolerance: 1e-14,
            initial_damping: 1e-3,
            balance_steps: None,
            progress: None,
            resources: Resources::default(),
            bounds: None,
            model_devices: 1,
            loss: Loss::Linear,
            loss_scale: 1.0,
            callback: None,
        }
    }
}

impl FitOptions {
    /// These options with balancing switched on or off.
    pub fn with_balance_steps(mut self, balance: bool) -> Self {
        self.balance_steps = Some(balance);
        self
    }

    /// These options with a maximum number of iterations.
    pub fn with_max_iterations(mut self, iterations: usize) -> Self {
        self.max_iterations = iterations;
        self
    }

    /// These options with a progress callback (see [`FitOptions::progress`]).
    pub fn with_progress(mut self, progress: ProgressFn) -> Self {
        self.progress = Some(progress);
        self
    }

    /// These options with bounds on the parameters (see [`FitOptions::bounds`]).
    pub fn with_bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = Some(bounds);
        self
    }

    /// These options with `devices` devices per experiment (see
    /// [`FitOptions::model_devices`]).
    pub fn with_model_devices(mut self, devices: usize) -> Self {
        self.model_devices = devices;
        self
    }

    /// These options running on `resources` (see [`FitOptions::resources`]).
    pub fn with_resources(mut self, resources: Resources) -> Self {
        self.resources = resources;
        self
    }

    /// These options with a robust loss and its scale `f_scale`, in the residuals' units
    /// (see [`FitOptions::loss`] and [`FitOptions::loss_scale`]). A scale that is not
    /// positive and finite is refused when the fit starts
    /// ([`FitError::InvalidArgument`] naming `loss_scale`).
    pub fn with_loss(mut self, loss: Loss, f_scale: f64) -> Self {
        self.loss = loss;
        self.loss_scale = f_scale;
        self
    }

    /// These options with a per-iteration callback that can stop the fit (see
    /// [`FitCallback`]).
    pub fn with_callback(
        mut self,
        callback: impl Fn(&FitIteration<'_>) -> ControlFlow<()> + Send + Sync + 'static,
    ) -> Self {
        self.callback = Some(FitCallback::new(callback));
        self
    }
}

/// Why the solver stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// The gradient is below the gradient tolerance.
    Gradient,
    /// The step is below the step tolerance.
    Step,
    /// The cost no longer decreases by more than the cost tolerance.
    Cost,
    /// The iteration limit was reached: the result is the best point found, not converged.
    MaxIterations,
    /// The [`FitCallback`] asked to stop: the result is the best point found, not
    /// converged.
    Callback,
}

/// The result of a fit, with diagnostics.
#[derive(Clone, Debug, PartialEq)]
pub struct FitReport {
    /// The parameters found.
    pub parameters: Vec<f64>,
    /// `0.5 * sum |r|^2` there; under a robust [`FitOptions::loss`], the robust cost
    /// `0.5 C^2 sum rho((r / C)^2)`.
    pub cost: f64,
    /// Iterations (accepted and rejected steps).
    pub iterations: usize,
    /// Evaluations of all experiments.
    pub evaluations: usize,
    /// The largest gradient component `|(J^T r)_j|` at the solution, among those the bounds
    /// leave free (in the units of the cost per unit of the parameter; under a robust loss,
    /// of the robust cost).
    pub gradient_norm: f64,
    /// The measure the gradient test uses ([`FitOptions::gradient_tolerance`]) at the
    /// solution: the largest `|(J^T r)_j| / (|r| |J_j|)` among the components the bounds
    /// leave free, the cosine of the angle between the residuals and a column of the
    /// Jacobian (0 for a zero column or zero residuals). Under a robust loss, `J` is the
    /// rescaled Jacobian, `J^T r` the robust gradient and `|r|` is `sqrt(2 cost)`.
    pub gradient_cosine: f64,
    /// Why it stopped.
    pub termination: Termination,
    /// `(J^T J)^-1` at the solution, row-major n x n: the parameters' covariance when the
    /// residuals are weighted by their standard deviations. Formed as `R^-1 R^-T` from a QR
    /// of the Jacobian (blockwise, in experiment order), which is better conditioned than
    /// inverting `J^T J`. When `R` is numerically singular (a diagonal entry at most
    /// `n * eps` times the largest) it is the pseudo-inverse from the SVD of `R`, and
    /// [`FitReport::covariance_rank`] says how many directions it covers (a warning is
    /// logged). `None` only if a factorization fails or the result is not finite.
    ///
    /// Under a robust [`FitOptions::loss`] it is `(J_s^T J_s)^-1` of the rescaled Jacobian
    /// `J_s` (each row times `sqrt(rho' + 2 rho'' z)`): the inverse Gauss–Newton curvature of
    /// the robust cost, an approximation to the parameters' covariance (as scipy's
    /// `least_squares` Jacobian gives it) that down-weights outliers but is no longer the
    /// least-squares covariance, and is not exact for any loss but the linear one.
    pub covariance: Option<Vec<f64>>,
    /// The rank of `J^T J` at the solution: the parameter count when every combination of
    /// the parameters is determined by the data, less when some are not (the covariance is
    /// then a pseudo-inverse, and the standard errors of those combinations are not known).
    pub covariance_rank: usize,
    /// The number of residuals over all experiments.
    pub residual_count: usize,
    /// The devices (ranks) the fit ran on.
    pub devices: usize,
    /// The devices each experiment ran on together (the model axis):
    /// `devices / model_devices` model groups split the experiments.
    pub model_devices: usize,
    /// The modelled makespan (largest per-group cost) of the starting assignment.
    pub makespan_initial: f64,
    /// The modelled makespan of the final assignment, with the same costs.
    pub makespan_final: f64,
    /// How many times experiments moved between model groups.
    pub rebalances: usize,
    /// The final assignment: `assignment[e]` is the model group of experiment `e` (its
    /// rank when each experiment runs on one device).
    pub assignment: Vec<usize>,
    /// Seconds rank 0 spent evaluating its experiments, over all evaluations.
    pub evaluation_seconds: f64,
    /// Seconds rank 0 spent exchanging and summing contributions (waiting for slower ranks
    /// included), over all evaluations.
    pub reduction_seconds: f64,
}

impl FitReport {
    /// The covariance scaled by the reduced chi-square `2 cost / (m - n)` (`m` residuals,
    /// `n` parameters): the parameters' covariance when the residuals' common standard
    /// deviation is unknown and estimated from the fit (scipy's `curve_fit` with
    /// `absolute_sigma=False`). `None` without a covariance or with `m <= n`. Under a
    /// robust loss `cost` is the robust cost, so the factor is only a rough estimate of the
    /// inliers' variance.
    pub fn scaled_covariance(&self) -> Option<Vec<f64>> {
        let n = self.parameters.len();
        let dof = self.residual_count.checked_sub(n).filter(|&dof| dof > 0)?;
        let chi2 = 2.0 * self.cost / dof as f64;
        let covariance = self.covariance.as_ref()?;
        Some(covariance.iter().map(|c| c * chi2).collect())
    }

    /// The standard errors: square roots of the covariance's diagonal.
    pub fn standard_errors(&self) -> Option<Vec<f64>> {
        let n = self.parameters.len();
        let covariance = self.covariance.as_ref()?;
        Some((0..n).map(|i| covariance[i * n + i].sqrt()).collect())
    }

    /// Whether the solver met a tolerance (rather than the iteration limit or a stop by the
    /// callback).
    pub fn converged(&self) -> bool {
        matches!(
            self.termination,
            Termination::Gradient | Termination::Step | Termination::Cost
        )
    }
}

/// Everything every rank knows after one evaluation of all experiments.
struct Evaluation {
    cost: f64,
    gradient: Vec<f64>,
    /// Row-major n x n.
    curvature: Vec<f64>,
    /// Each experiment's packed QR triangle, in experiment order (`n (n + 1) / 2` each).
    triangles: Vec<f64>,
    /// Seconds each experiment took.
    seconds: Vec<f64>,
    /// The first experiment that failed, with its message.
    failure: Option<(usize, String)>,
    /// This rank's seconds evaluating, then exchanging and summing.
    timing: (f64, f64),
}

/// Per-experiment record layout in the allgather: index, status, seconds, cost, gradient
/// (n), packed upper curvature (n(n+1)/2), packed QR triangle of the Jacobian (n(n+1)/2).
const HEADER: usize = 4;
const OK: f64 = 0.0;
const FAILED: f64 = 1.0;
const NON_FINITE: f64 = 2.0;
/// The experiment's residual and Jacobian buffers could not be reserved.
const OUT_OF_MEMORY: f64 = 3.0;

/// The bytes of one experiment's evaluation buffers: `m` residuals and the `m x n` Jacobian,
/// `None` when that overflows.
fn evaluation_bytes(m: usize, n: usize) -> Option<u64> {
    let entries = m.checked_mul(n)?.checked_add(m)?;
    u64::try_from(entries).ok()?.checked_mul(8)
}

/// The out-of-memory error for experiment `index`'s buffers.
fn evaluation_out_of_memory(index: usize, m: usize, n: usize) -> FitError {
    FitError::OutOfMemory {
        what: format!(
            "the residuals and Jacobian of experiment {index} ({m} residuals x {n} parameters)"
        ),
        bytes: evaluation_bytes(m, n).unwrap_or(u64::MAX),
    }
}

/// Refuses, before anything is allocated, sizes that cannot be held: an experiment whose
/// residuals and Jacobian (or the n x n curvature) overflow or exceed the host's physical
/// memory. Smaller requests are still reserved fallibly when evaluated.
fn check_sizes<E: Experiment>(experiments: &[E], n: usize) -> Result<(), FitError> {
    let physical = tutti_backend::system::host_memory()
        .ok()
        .map(|memory| memory.total);
    let too_large = |bytes: Option<u64>| match (bytes, physical) {
        (None, _) => true,
        (Some(bytes), Some(physical)) => bytes > physical,
        (Some(_), None) => false,
    };
    let curvature = n
        .checked_mul(n)
        .and_then(|entries| u64::try_from(entries).ok())
        .and_then(|entries| entries.checked_mul(8));
    if too_large(curvature) {
        return Err(FitError::OutOfMemory {
            what: format!("the {n} x {n} curvature matrix"),
            bytes: curvature.unwrap_or(u64::MAX),
        });
    }
    for (index, experiment) in experiments.iter().enumerate() {
        let m = experiment.residual_count();
        if too_large(evaluation_bytes(m, n)) {
            return Err(evaluation_out_of_memory(index, m, n));
        }
    }
    Ok(())
}

/// `len` zeros, or `None` when they cannot be reserved.
fn try_zeros(len: usize) -> Option<Vec<f64>> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).ok()?;
    out.resize(len, 0.0);
    Some(out)
}

fn packed_len(n: usize) -> usize {
    n * (n + 1) / 2
}

fn record_width(n: usize) -> usize {
    HEADER + n + 2 * packed_len(n)
}

/// The loss every experiment's residuals are rescaled by, and its scale.
#[derive(Clone, Copy)]
struct ScaledLoss {
    loss: Loss,
    scale: f64,
}

/// One experiment's record: evaluates it (with its model group, when it has one) and forms
/// its contributions, from residuals and Jacobian rows rescaled by the loss first (so every
/// rank, whichever evaluates the experiment, forms the same bits). Only a model group's
/// collective can fail; with one, every member agrees whether the buffers were reserved
/// before the experiment's collective evaluation.
fn evaluate_one<E: Experiment>(
    experiment: &E,
    index: usize,
    parameters: &[f64],
    model: Option<&Comm<'_>>,
    loss: ScaledLoss,
) -> Result<(Vec<f64>, Option<String>), FitError> {
    let n = parameters.len();
    let m = experiment.residual_count();
    let mut record = vec![0.0; record_width(n)];
    record[0] = index as f64;
    let mut buffers = try_zeros(m).zip(m.checked_mul(n).and_then(try_zeros));
    if let Some(model) = model {
        let mut missing = [u64::from(buffers.is_none())];
        model.allreduce_sum(&mut missing)?;
        if missing[0] > 0 {
            buffers = None;
        }
    }
    let Some((mut residuals, mut jacobian)) = buffers else {
        record[1] = OUT_OF_MEMORY;
        return Ok((record, None));
    };
    let started = Instant::now();
    let outcome = match model {
        Some(model) => experiment.evaluate_on(model, parameters, &mut residuals, &mut jacobian),
        None => experiment.evaluate(parameters, &mut residuals, &mut jacobian),
    };
    record[2] = started.elapsed().as_secs_f64();
    if let Err(message) = outcome {
        record[1] = FAILED;
        return Ok((record, Some(message)));
    }
    if !residuals.iter().chain(&jacobian).all(|x| x.is_finite()) {
        record[1] = NON_FINITE;
        return Ok((record, None));
    }
    let cost = loss::apply(loss.loss, loss.scale, &mut residuals, &mut jacobian, n);
    // A robust loss of a huge residual can overflow.
    if !cost.is_finite() || !residuals.iter().chain(&jacobian).all(|x| x.is_finite()) {
        record[1] = NON_FINITE;
        return Ok((record, None));
    }
    record[1] = OK;
    record[3] = cost;
    let (gradient, rest) = record[HEADER..].split_at_mut(n);
    let (packed, triangle) = rest.split_at_mut(packed_len(n));
    for (row, r) in jacobian.chunks_exact(n).zip(&residuals) {
        for j in 0..n {
            gradient[j] += row[j] * r;
        }
        let mut k = 0;
        for a in 0..n {
            for b in a..n {
                packed[k] += row[a] * row[b];
                k += 1;
            }
        }
    }
    // The Jacobian is not needed any more: factor it in place.
    packed_r_in_place(
        MatMut::from_row_major_slice_mut(&mut jacobian, m, n),
        triangle,
    );
    Ok((record, None))
}

/// Where a rank sits in the (data x model) mesh of a fit.
struct Mesh<'c> {
    /// This rank's model group, `0..groups`: the data axis.
    group: usize,
    /// The model groups.
    groups: usize,
    /// This rank's model group's handle, when experiments span several devices.
    model: Option<Comm<'c>>,
}

impl<'c> Mesh<'c> {
    /// Splits `comm` into model groups of `model_devices` consecutive ranks.
    fn split(comm: &'c Comm<'_>, model_devices: usize) -> Result<Self, FitError> {
        let model_devices = model_devices.max(1);
        let group = comm.rank() / model_devices;
        let groups = comm.size() / model_devices;
        let model = if model_devices > 1 {
            Some(comm.split(group, comm.rank() % model_devices)?)
        } else {
            None
        };
        Ok(Self {
            group,
            groups,
            model,
        })
    }

    /// Whether this rank contributes its group's records: the model group's first rank.
    fn reports(&self) -> bool {
        self.model.as_ref().is_none_or(|model| model.rank() == 0)
    }
}

/// Evaluates this rank's model group's experiments (single-device experiments in parallel in
/// the device's thread pool; a model group's one at a time, on all its ranks together),
/// exchanges the records, and sums them in experiment order.
fn evaluate_all<E: Experiment>(
    comm: &Comm<'_>,
    mesh: &Mesh<'_>,
    experiments: &[E],
    assignment: &[usize],
    parameters: &[f64],
    loss: ScaledLoss,
) -> Result<Evaluation, FitError> {
    let n = parameters.len();
    let width = record_width(n);
    let mine: Vec<usize> = (0..experiments.len())
        .filter(|&e| assignment[e] == mesh.group)
        .collect();
    let started = Instant::now();
    let local: Vec<(Vec<f64>, Option<String>)> = match &mesh.model {
        Some(model) => mine
            .iter()
            .map(|&e| evaluate_one(&experiments[e], e, parameters, Some(model), loss))
            .collect::<Result<_, _>>()?,
        None => {
            let pool = comm.device().thread_pool()?;
            pool.install(|| {
                mine.par_iter()
                    .map(|&e| evaluate_one(&experiments[e], e, parameters, None, loss))
                    .collect::<Result<_, _>>()
            })?
        }
    };
    // The other ranks of a model group computed the same records: only the first sends.
    let local = if mesh.reports() { local } else { Vec::new() };
    let evaluating = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut flat = Vec::with_capacity(local.len() * width);
    for (record, _) in &local {
        flat.extend_from_slice(record);
    }
    let gathered = comm.allgather_concat(&flat)?;
    let mut records: Vec<&[f64]> = vec![&[]; experiments.len()];
    for record in gathered.chunks_exact(width) {
        records[record[0] as usize] = record;
    }
    // Buffers that could not be reserved fail the fit on every rank alike (every rank sees
    // the same records).
    if let Some(e) = records.iter().position(|r| r[1] == OUT_OF_MEMORY) {
        return Err(evaluation_out_of_memory(
            e,
            experiments[e].residual_count(),
            n,
        ));
    }
    // Failures: every rank learns the first failing experiment's message.
    let first_failed = records.iter().position(|r| r[1] != OK);
    let failure = match first_failed {
        None => None,
        Some(e) => {
            let message = local
                .iter()
                .find(|(record, _)| record[0] as usize == e)
                .and_then(|(_, message)| message.clone())
                .unwrap_or_default();
            let shared = comm.allgather_concat(message.as_bytes())?;
            let text = String::from_utf8_lossy(&shared).into_owned();
            let text = if records[e][1] == NON_FINITE {
                "non-finite residuals or Jacobian".to_string()
            } else {
                text
            };
            Some((e, text))
        }
    };
    let mut evaluation = Evaluation {
        cost: 0.0,
        gradient: vec![0.0; n],
        curvature: vec![0.0; n * n],
        triangles: Vec::new(),
        seconds: records.iter().map(|r| r[2]).collect(),
        failure,
        timing: (evaluating, 0.0),
    };
    if evaluation.failure.is_some() {
        evaluation.cost = f64::INFINITY;
        evaluation.timing.1 = started.elapsed().as_secs_f64();
        return Ok(evaluation);
    }
    let triangle_start = HEADER + n + packed_len(n);
    evaluation.triangles = Vec::with_capacity(records.len() * packed_len(n));
    for record in &records {
        evaluation.cost += record[3];
        evaluation
            .triangles
            .extend_from_slice(&record[triangle_start..]);
        let (gradient, packed) = record[HEADER..triangle_start].split_at(n);
        for (acc, g) in evaluation.gradient.iter_mut().zip(gradient) {
            *acc += g;
        }
        let mut k = 0;
        for a in 0..n {
            for b in a..n {
                evaluation.curvature[a * n + b] += packed[k];
                k += 1;
            }
        }
    }
    for a in 0..n {
        for b in 0..a {
            evaluation.curvature[a * n + b] = evaluation.curvature[b * n + a];
        }
    }
    evaluation.timing.1 = started.elapsed().as_secs_f64();
    Ok(evaluation)
}

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
