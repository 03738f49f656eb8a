//! The user's side of a fit: one experiment's residuals and Jacobian.

/// One experiment of a fit: residuals `r(p)` and their Jacobian `J = dr/dp` for given
/// parameters `p`. The fit minimizes `0.5 * sum over experiments of |r|^2`, so residuals
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

    /// An estimate of the cost of one evaluation, in any unit shared by all experiments, for
    /// balancing; `None` (the default) balances by measured evaluation time instead.
    fn cost_estimate(&self) -> Option<f64> {
        None
    }
}
