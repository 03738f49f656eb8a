//! Forward sensitivities `s_k = dy/dp_k` of a stiff system's solution to its parameters, by
//! the staggered direct method: once the integrator accepts a step, each `s_k` takes the
//! same step of the same BDF formula applied to the sensitivity equations
//! `s_k' = J(t, y) s_k + df/dp_k(t, y)`, with the Jacobian at the accepted state.
//!
//! Those equations are linear, so the corrector of each step is one linear system with the
//! matrix `I - c J(t_new, y_new)`. It is solved by iterating against the factors the Newton
//! iteration already holds (`I - c J` with the Jacobian it last evaluated): the iteration
//! contracts by about `|c (J_new - J_old)|`, so a few solves reach the Newton iteration's
//! tolerance; when it does not converge in [`MAX_ITERATIONS`] (or diverges), `I - c J_new`
//! is factored afresh and solved directly. The state's steps, their sizes and orders are
//! those of [`super::integrate`]: the sensitivities do not enter the error test, so the
//! state comes out the same bits with or without them.

use tutti_group::Comm;
use tutti_sparse::CsrMatrix;

use super::{
    march, rms, start, update_differences, AcceptHook, BdfOptions, BdfStatistics, IterationMatrix,
    OdeError, Stepper, StiffSystem, MAX_ORDER,
};

/// Iterations of a sensitivity's corrector against the Newton iteration's factors before
/// it is solved against fresh ones.
pub const MAX_ITERATIONS: usize = 6;

/// A stiff system whose right-hand side depends on parameters `p`: what
/// [`integrate_sensitivities`] needs besides `f` and its Jacobian.
pub trait ParametricSystem: StiffSystem {
    /// The number of parameters.
    fn parameters(&self) -> usize;

    /// `df/dp` at `(t, y)`: `columns` holds `parameters()` columns of
    /// [`StiffSystem::dimension`] entries each, column `k` for `df/dp_k`, and arrives
    /// zeroed. An `Err` fails the integration with the message.
    fn rhs_parameter_derivatives(
        &self,
        t: f64,
        y: &[f64],
        columns: &mut [f64],
    ) -> Result<(), String>;
}

/// The solution and its sensitivities at the requested times.
#[derive(Clone, Debug, PartialEq)]
pub struct SensitivitySolution {
    /// The requested times.
    pub t: Vec<f64>,
    /// The solution at each of them.
    pub y: Vec<Vec<f64>>,
    /// The sensitivities at each of them: `parameters` columns of `dimension` entries,
    /// column `k` holding `dy/dp_k`.
    pub sensitivities: Vec<Vec<f64>>,
    /// What the integration did.
    pub statistics: BdfStatistics,
}

/// The sensitivities carried along an integration.
pub(super) struct Sensitivity<'c> {
    /// The backward differences of each sensitivity (per parameter, `MAX_ORDER + 3` rows of
    /// `n`), rescaled with the state's.
    pub(super) differences: Vec<Vec<Vec<f64>>>,
    /// The Jacobian's pattern; its values at the last accepted state are `jacobian`.
    pattern: CsrMatrix,
    jacobian: Vec<f64>,
    /// `df/dp` at the last accepted state, column by column.
    parameter_derivatives: Vec<f64>,
    /// `I - c J` at the accepted state, factored when the iteration does not converge.
    exact: Option<IterationMatrix<'c>>,
}

impl Sensitivity<'_> {
    /// `out = J s + df/dp_k` at the last evaluated state.
    fn sensitivity_rhs(&self, k: usize, s: &[f64], out: &mut [f64]) {
        let n = s.len();
        let forcing = &self.parameter_derivatives[k * n..(k + 1) * n];
        let (indptr, indices) = (self.pattern.indptr(), self.pattern.indices());
        for (i, value) in out.iter_mut().enumerate() {
            let row = indptr[i]..indptr[i + 1];
            *value = forcing[i]
                + indices[row.clone()]
                    .iter()
                    .zip(&self.jacobian[row])
                    .map(|(&j, a)| a * s[j])
                    .sum::<f64>();
        }
    }
}

impl<S: ParametricSystem + ?Sized> Stepper<'_, S> {
    /// Evaluates the Jacobian and `df/dp` at `(t, y)` into the sensitivity state.
    fn evaluate_derivatives(
        &mut self,
        sensitivity: &mut Sensitivity<'_>,
        t: f64,
        y: &[f64],
    ) -> Result<(), OdeError> {
        self.statistics.sensitivity_jacobians += 1;
        let jacobian_error = |message| OdeError::Jacobian { t, message };
        self.system
            .jacobian(t, y, &mut sensitivity.jacobian)
            .map_err(jacobian_error)?;
        if let Some(bad) = sensitivity.jacobian.iter().find(|v| !v.is_finite()) {
            return Err(jacobian_error(format!("an entry is {bad}")));
        }
        sensitivity.parameter_derivatives.fill(0.0);
        self.system
            .rhs_parameter_derivatives(t, y, &mut sensitivity.parameter_derivatives)
            .map_err(|message| OdeError::Rhs {
                t,
                message: format!("df/dp: {message}"),
            })?;
        if let Some(bad) = sensitivity
            .parameter_derivatives
            .iter()
            .find(|v| !v.is_finite())
        {
            return Err(OdeError::Rhs {
                t,
                message: format!("df/dp holds {bad}"),
            });
        }
        Ok(())
    }

    /// The [`AcceptHook`] of a sensitivity run: takes every sensitivity through the step
    /// just accepted (to `t_new`, with `c` and `order`).
    fn advance_sensitivities(&mut self, t_new: f64, c: f64, order: usize) -> Result<(), OdeError> {
        let Some(mut sensitivity) = self.sensitivity.take() else {
            return Ok(());
        };
        let y = self.d[0].clone();
        self.evaluate_derivatives(&mut sensitivity, t_new, &y)?;
        let n = self.n;
        let mut exact_factored = false;
        for k in 0..sensitivity.differences.len() {
            let (predicted, psi) = self
                .coefficients
                .predict(&sensitivity.differences[k], order);
            let scale = self.scale(&predicted);
            // The corrector d solves d - c (J (predicted + d) + df/dp_k) + psi = 0.
            let residual = |sensitivity: &Sensitivity<'_>, d: &[f64]| -> Vec<f64> {
                let s: Vec<f64> = predicted.iter().zip(d).map(|(p, d)| p + d).collect();
                let mut rate = vec![0.0; n];
                sensitivity.sensitivity_rhs(k, &s, &mut rate);
                (0..n).map(|i| c * rate[i] - psi[i] - d[i]).collect()
            };
            let mut d = vec![0.0; n];
            let mut converged = false;
            let mut previous_norm: Option<f64> = None;
            for _ in 0..MAX_ITERATIONS {
                self.statistics.sensitivity_iterations += 1;
                let mut step = residual(&sensitivity, &d);
                self.matrix.solve(&mut step)?;
                let norm = rms(step.iter().copied(), &scale);
                let rate = previous_norm.map(|old| norm / old);
                if rate.is_some_and(|rate| rate >= 1.0) || !norm.is_finite() {
                    break;
                }
                for (value, change) in d.iter_mut().zip(&step) {
                    *value += change;
                }
                if norm == 0.0
                    || rate.is_some_and(|rate| rate / (1.0 - rate) * norm < self.newton_tol)
                {
                    converged = true;
                    break;
                }
                previous_norm = Some(norm);
            }
            if !converged {
                let exact = match &mut sensitivity.exact {
                    Some(exact) => exact,
                    slot => slot.insert(self.matrix.sibling()),
                };
                if !exact_factored {
                    exact.factor(c, &sensitivity.jacobian)?;
                    self.statistics.sensitivity_factorizations += 1;
                    exact_factored = true;
                }
                d = residual(&sensitivity, &vec![0.0; n]);
                if let Some(exact) = &sensitivity.exact {
                    exact.solve(&mut d)?;
                }
            }
            update_differences(&mut sensitivity.differences[k], order, &d);
        }
        self.sensitivity = Some(sensitivity);
        Ok(())
    }
}

/// Integrates `system` from `(t0, y0)` with the sensitivities `dy/dp` starting from `s0`
/// (`system.parameters()` columns of `system.dimension()` entries: zero for a parameter of
/// `f` alone, a unit column for a parameter that is an initial value), and returns both at
/// `t_eval`.
///
/// The state is the same bits as [`super::integrate`] gives with the same arguments: the
/// sensitivities follow its steps and do not enter its error test, so their accuracy is
/// that of the state's steps (check it at a tighter tolerance when it matters). Each
/// accepted step costs one more Jacobian and `df/dp`, and a few solves per parameter with
/// the factors the state's Newton iteration holds.
///
/// Errors: those of [`super::integrate`], and `s0` of the wrong length or not finite, `df/dp`
/// failing or not finite.
///
/// ```
/// use tutti_fit::bdf::{integrate_sensitivities, BdfOptions};
/// use tutti_fit::brusselator::Brusselator;
///
/// let model = Brusselator::new(8)?;
/// let y0 = model.initial_state();
/// let s0 = vec![0.0; 3 * y0.len()]; // A, B, alpha are not in the initial state
/// let solution =
///     integrate_sensitivities(&model, 0.0, &y0, &s0, &[1.5], &BdfOptions::default())?;
/// let n = y0.len();
/// let du0_dalpha = solution.sensitivities[0][2 * n]; // column 2 (alpha), unknown 0
/// assert!(du0_dalpha.is_finite());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn integrate_sensitivities<S: ParametricSystem + ?Sized>(
    system: &S,
    t0: f64,
    y0: &[f64],
    s0: &[f64],
    t_eval: &[f64],
    options: &BdfOptions,
) -> Result<SensitivitySolution, OdeError> {
    integrate_sensitivities_with(None, system, t0, y0, s0, t_eval, options)
}

/// [`integrate_sensitivities`] on every rank of a model group together, the Newton and
/// sensitivity matrices factored and solved split among `model`'s ranks (see
/// [`super::integrate_on`]): the same solution and sensitivities on every rank, bitwise
/// those of [`integrate_sensitivities`] on one rank, or the same error.
///
/// Errors: those of [`integrate_sensitivities`]; a collective's error.
pub fn integrate_sensitivities_on<S: ParametricSystem + ?Sized>(
    model: &Comm<'_>,
    system: &S,
    t0: f64,
    y0: &[f64],
    s0: &[f64],
    t_eval: &[f64],
    options: &BdfOptions,
) -> Result<SensitivitySolution, OdeError> {
    integrate_sensitivities_with(Some(model), system, t0, y0, s0, t_eval, options)
}

fn integrate_sensitivities_with<S: ParametricSystem + ?Sized>(
    model: Option<&Comm<'_>>,
    system: &S,
    t0: f64,
    y0: &[f64],
    s0: &[f64],
    t_eval: &[f64],
    options: &BdfOptions,
) -> Result<SensitivitySolution, OdeError> {
    let n = system.dimension();
    let parameters = system.parameters();
    let entries = n
        .checked_mul(parameters)
        .ok_or_else(|| OdeError::InvalidArgument {
            detail: format!("{parameters} sensitivities of {n} unknowns overflow"),
        })?;
    if s0.len() != entries {
        return Err(OdeError::InvalidArgument {
            detail: format!(
                "s0 has {} entries for {parameters} parameters of {n} unknowns",
                s0.len()
            ),
        });
    }
    if let Some(bad) = s0.iter().find(|v| !v.is_finite()) {
        return Err(OdeError::InvalidArgument {
            detail: format!("s0 holds {bad}"),
        });
    }
    let mut stepper = start(model, system, t0, y0, t_eval, options)?;
    let pattern = system.jacobian_pattern();
    let mut sensitivity = Sensitivity {
        differences: Vec::with_capacity(parameters),
        jacobian: vec![0.0; pattern.nnz()],
        pattern,
        parameter_derivatives: vec![0.0; entries],
        exact: None,
    };
    stepper.evaluate_derivatives(&mut sensitivity, t0, y0)?;
    for k in 0..parameters {
        let mut differences = vec![vec![0.0; n]; MAX_ORDER + 3];
        differences[0].copy_from_slice(&s0[k * n..(k + 1) * n]);
        let mut rate = vec![0.0; n];
        sensitivity.sensitivity_rhs(k, &differences[0], &mut rate);
        for (d, r) in differences[1].iter_mut().zip(&rate) {
            *d = r * stepper.h;
        }
        sensitivity.differences.push(differences);
    }
    stepper.sensitivity = Some(sensitivity);
    let hook: AcceptHook<Stepper<'_, S>> = Stepper::advance_sensitivities;
    let samples = march(&mut stepper, t_eval, hook, |stepper, t| {
        let y = stepper.solution_at(&stepper.d, t);
        let mut columns = Vec::with_capacity(entries);
        if let Some(sensitivity) = &stepper.sensitivity {
            for differences in &sensitivity.differences {
                columns.extend(stepper.solution_at(differences, t));
            }
        }
        (y, columns)
    })?;
    let (y, sensitivities) = samples.into_iter().unzip();
    Ok(SensitivitySolution {
        t: t_eval.to_vec(),
        y,
        sensitivities,
        statistics: stepper.statistics,
    })
}
