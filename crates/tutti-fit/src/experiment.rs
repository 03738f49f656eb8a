//! The user's side of a fit: one experiment's residuals and Jacobian.

use tutti_group::Comm;

/// One experiment of a fit: residuals `r(p)` and their Jacobian `J = dr/dp` for given
/// parameters `p`. The fit minimizes `0.5 * sum over experiments of |r|^2` (or the robust
/// cost of [`crate::FitOptions::loss`], applied to each residual), so residuals
/// should be weighted (e.g. divided by the measurement's standard deviation).
pub trait Experiment: Sync {
    /// The number of residuals this experiment contributes (fixed).
    fn residual_count(&self) -> usize;

    /// Writes the residuals at `parameters` into `residuals` (`residual_count()` values) and
    /// the Jacobian into `jacobian`, row-major: `jacobian[i * n + j] = d r_i / d p_j` with
    /// `n = parameters.len()`. An `Err` (e.g. an integrator that failed) rejects a trial
    /// step, or fails the fit at the starting point.
    fn evaluate(
        &self,
        parameters: &[f64],
        residuals: &mut [f64],
        jacobian: &mut [f64],
    ) -> Result<(), String>;

    /// [`Experiment::evaluate`] on a model group: every rank of `model` calls this
    /// together, with the same parameters, when the fit runs each experiment on several
    /// devices ([`crate::FitOptions::model_devices`]); the first rank's residuals and
    /// Jacobian are used. An experiment that splits its own work (a sparse factorization
    /// over the model axis) overrides it and uses `model`'s collectives; it must return the
    /// same `Ok` or `Err` on every rank (a deterministic computation on the same inputs
    /// does), and it should give the same bits on a group of any size, so that the fit does
    /// not depend on the mesh. The default ignores `model` and calls `evaluate` on every
    /// rank.
    fn evaluate_on(
        &self,
        model: &Comm<'_>,
        parameters: &[f64],
        residuals: &mut [f64],
        jacobian: &mut [f64],
    ) -> Result<(), String> {
        let _ = model;
        self.evaluate(parameters, residuals, jacobian)
    }

    /// An estimate of the cost of one evaluation, in any unit shared by all experiments, for
    /// balancing; `None` (the default) balances by measured evaluation time instead.
    fn cost_estimate(&self) -> Option<f64> {
        None
    }
}
