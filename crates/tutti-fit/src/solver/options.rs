//! What a fit is asked to do: [`FitOptions`](crate::FitOptions) and the per-iteration [`FitCallback`](crate::FitCallback).

use std::fmt;
use std::ops::ControlFlow;
use std::sync::Arc;

use tutti_backend::{ProgressFn, Resources};

use crate::{Bounds, Loss};

/// Options of [`fit`](crate::fit), with documented defaults.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FitOptions {
    /// Most iterations (accepted or rejected steps); default 200.
    pub max_iterations: usize,
    /// Stop when the gradient is orthogonal to the residuals to within this: when the
    /// largest cosine of the angle between the residual vector `r` and a column `J_j` of the
    /// Jacobian, `max_j |(J^T r)_j| / (|r| |J_j|)` over the components the bounds leave free
    /// ([`FitReport::gradient_cosine`](crate::FitReport::gradient_cosine), MINPACK's measure), is at most this, or the residuals
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
    /// fit's buffers (see [`plan`](crate::plan)). Default [`Resources::default`]: every GPU, else one
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
    /// experiments through [`Experiment::evaluate_on`](crate::Experiment::evaluate_on) on its own sub-group, one experiment
    /// at a time, and the groups split the experiments as single devices do. Must divide
    /// the device count. The result does not depend on the mesh when the experiments'
    /// `evaluate_on` gives the same bits on any model group (the Brusselator's does).
    pub model_devices: usize,
    /// The loss applied to each residual (scipy's `loss`); default [`Loss::Linear`],
    /// ordinary least squares. Under another loss the fit minimizes
    /// `0.5 C^2 sum rho((r / C)^2)` with `C` = [`FitOptions::loss_scale`](crate::FitOptions::loss_scale), by rescaling each
    /// experiment's residuals and Jacobian rows (Triggs' correction, as scipy does; see
    /// [`Loss`]) where the experiment is evaluated, so the result still does not depend on
    /// the devices or the mesh. [`FitReport::cost`](crate::FitReport::cost) is then that robust cost.
    pub loss: Loss,
    /// The residuals' soft margin `C` between inliers and outliers (scipy's `f_scale`), in
    /// the residuals' units: a residual well below it costs about `0.5 r^2`, one well above
    /// it less, as its loss says. Must be positive and finite; no effect under
    /// [`Loss::Linear`]; default 1.
    pub loss_scale: f64,
    /// Called by rank 0 after each iteration (see [`FitCallback`](crate::FitCallback)); [`ControlFlow::Break`]
    /// stops the fit on every rank with [`Termination::Callback`](crate::Termination::Callback) and the best point found.
    /// Default `None`.
    pub callback: Option<FitCallback>,
}

/// What a [`FitCallback`](crate::FitCallback) is told after each iteration.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct FitIteration<'a> {
    /// The iteration just finished, from 1.
    pub iteration: usize,
    /// The parameters kept after it: the best point found so far (a step is accepted only
    /// when it lowers the cost).
    pub parameters: &'a [f64],
    /// The cost there (the robust cost under a robust [`FitOptions::loss`](crate::FitOptions::loss)).
    pub cost: f64,
    /// Whether this iteration's step was accepted (the parameters moved).
    pub accepted: bool,
    /// The damping the next iteration starts from.
    pub damping: f64,
}

/// A per-iteration callback of [`fit`](crate::fit) that can stop it: called by rank 0 alone after every
/// iteration (accepted or rejected, the last one included), it returns
/// [`ControlFlow::Continue`] to go on or [`ControlFlow::Break`] to stop. Rank 0 broadcasts
/// the decision to every rank (one small collective per iteration, also across the
/// processes of a spanning group), so all stop together, at the same iteration. A stopped
/// fit returns [`Termination::Callback`](crate::Termination::Callback) with the best point found, the same bits as a fit
/// limited to that many iterations; when the iteration already met a tolerance, that
/// termination is reported instead. It runs on rank 0's thread between iterations: the fit
/// waits for it.
#[derive(Clone)]
pub struct FitCallback(Arc<CallbackFn>);

/// The closure a [`FitCallback`](crate::FitCallback) wraps.
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

    /// These options with a progress callback (see [`FitOptions::progress`](crate::FitOptions::progress)).
    pub fn with_progress(mut self, progress: ProgressFn) -> Self {
        self.progress = Some(progress);
        self
    }

    /// These options with bounds on the parameters (see [`FitOptions::bounds`](crate::FitOptions::bounds)).
    pub fn with_bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = Some(bounds);
        self
    }

    /// These options with `devices` devices per experiment (see
    /// [`FitOptions::model_devices`](crate::FitOptions::model_devices)).
    pub fn with_model_devices(mut self, devices: usize) -> Self {
        self.model_devices = devices;
        self
    }

    /// These options running on `resources` (see [`FitOptions::resources`](crate::FitOptions::resources)).
    pub fn with_resources(mut self, resources: Resources) -> Self {
        self.resources = resources;
        self
    }

    /// These options with a robust loss and its scale `f_scale`, in the residuals' units
    /// (see [`FitOptions::loss`](crate::FitOptions::loss) and [`FitOptions::loss_scale`](crate::FitOptions::loss_scale)). A scale that is not
    /// positive and finite is refused when the fit starts
    /// ([`FitError::InvalidArgument`](crate::FitError::InvalidArgument) naming `loss_scale`).
    pub fn with_loss(mut self, loss: Loss, f_scale: f64) -> Self {
        self.loss = loss;
        self.loss_scale = f_scale;
        self
    }

    /// These options with a per-iteration callback that can stop the fit (see
    /// [`FitCallback`](crate::FitCallback)).
    pub fn with_callback(
        mut self,
        callback: impl Fn(&FitIteration<'_>) -> ControlFlow<()> + Send + Sync + 'static,
    ) -> Self {
        self.callback = Some(FitCallback::new(callback));
        self
    }
}
