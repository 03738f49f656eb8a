//! What a fit found: [`FitReport`](crate::FitReport) and why it stopped ([`Termination`](crate::Termination)).

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
    /// The [`FitCallback`](crate::FitCallback) asked to stop: the result is the best point found, not
    /// converged.
    Callback,
}

/// The result of a fit, with diagnostics.
#[derive(Clone, Debug, PartialEq)]
pub struct FitReport {
    /// The parameters found.
    pub parameters: Vec<f64>,
    /// `0.5 * sum |r|^2` there; under a robust [`FitOptions::loss`](crate::FitOptions::loss), the robust cost
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
    /// The measure the gradient test uses ([`FitOptions::gradient_tolerance`](crate::FitOptions::gradient_tolerance)) at the
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
    /// [`FitReport::covariance_rank`](crate::FitReport::covariance_rank) says how many directions it covers (a warning is
    /// logged). `None` only if a factorization fails or the result is not finite.
    ///
    /// Under a robust [`FitOptions::loss`](crate::FitOptions::loss) it is `(J_s^T J_s)^-1` of the rescaled Jacobian
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
