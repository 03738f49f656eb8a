//! A variable-order (1-5), variable-step BDF integrator for stiff systems: the numerical
//! differentiation formulas of Shampine and Reichelt (MATLAB's `ode15s`, scipy's
//! `solve_ivp(method="BDF")`), in the quasi-constant step form of backward differences.
//!
//! Each step predicts from the differences, then solves the implicit formula by a modified
//! Newton iteration against `I - c J`, factored by `tutti-sparse` on the Jacobian's pattern
//! (analysed once): the Jacobian is kept until an iteration fails to converge, and the
//! factors until the step size or the order changes. The local error estimate, `rtol` and
//! `atol` per component (RMS norm) accept or reject each step and choose the next step size
//! and order; the solution between steps comes from the differences (dense output).
//!
//! ```
//! use tutti_fit::bdf::{integrate, BdfOptions, StiffSystem};
//! use tutti_sparse::CsrMatrix;
//!
//! /// y' = -1000 (y - cos t): stiff, y follows cos t after a fast transient.
//! struct Relax;
//! impl StiffSystem for Relax {
//!     fn dimension(&self) -> usize { 1 }
//!     fn rhs(&self, t: f64, y: &[f64], dydt: &mut [f64]) -> Result<(), String> {
//!         dydt[0] = -1000.0 * (y[0] - t.cos());
//!         Ok(())
//!     }
//!     fn jacobian_pattern(&self) -> CsrMatrix {
//!         CsrMatrix::try_new(1, 1, vec![0, 1], vec![0], vec![0.0]).expect("1 x 1")
//!     }
//!     fn jacobian(&self, _t: f64, _y: &[f64], values: &mut [f64]) -> Result<(), String> {
//!         values[0] = -1000.0;
//!         Ok(())
//!     }
//! }
//! let solution = integrate(&Relax, 0.0, &[0.0], &[1.0], &BdfOptions::default())?;
//! assert!((solution.y[0][0] - 1f64.cos()).abs() < 1e-3);
//! # Ok::<(), tutti_fit::bdf::OdeError>(())
//! ```

mod matrix;
mod sensitivity;

use matrix::IterationMatrix;
use sensitivity::Sensitivity;
pub use sensitivity::{
    integrate_sensitivities, integrate_sensitivities_on, ParametricSystem, SensitivitySolution,
};
use tutti_group::Comm;
use tutti_sparse::{CsrMatrix, SparseError};

/// The highest order.
pub const MAX_ORDER: usize = 5;
/// Newton iterations per attempt at a step.
const NEWTON_MAXITER: usize = 4;
/// The step never shrinks by more than this factor after an error test failure...
const MIN_FACTOR: f64 = 0.2;
/// ...nor grows by more than this one after an accepted step.
const MAX_FACTOR: f64 = 10.0;
/// The NDF coefficients kappa of Shampine and Reichelt (order 1-5; kappa_0 unused).
const KAPPA: [f64; MAX_ORDER + 1] = [0.0, -0.1850, -1.0 / 9.0, -0.0823, -0.0415, 0.0];

/// A stiff system `y' = f(t, y)` with a sparse Jacobian of fixed pattern.
pub trait StiffSystem {
    /// The number of unknowns.
    fn dimension(&self) -> usize;
    /// `dydt = f(t, y)`. An `Err` fails the integration with the message.
    fn rhs(&self, t: f64, y: &[f64], dydt: &mut [f64]) -> Result<(), String>;
    /// The pattern of `df/dy` (values ignored), the same at every `(t, y)`.
    fn jacobian_pattern(&self) -> CsrMatrix;
    /// The values of `df/dy` at `(t, y)`, in the pattern's order (row by row).
    fn jacobian(&self, t: f64, y: &[f64], values: &mut [f64]) -> Result<(), String>;
}

/// Tolerances and limits of [`integrate`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BdfOptions {
    /// Relative tolerance per component (default 1e-6).
    pub rtol: f64,
    /// Absolute tolerance per component (default 1e-9).
    pub atol: f64,
    /// The first step; `None` chooses one from `f` at the start (default).
    pub first_step: Option<f64>,
    /// The largest step (default infinite).
    pub max_step: f64,
    /// Steps (accepted and rejected) at most (default 500000).
    pub max_steps: usize,
}

impl Default for BdfOptions {
    fn default() -> Self {
        Self {
            rtol: 1e-6,
            atol: 1e-9,
            first_step: None,
            max_step: f64::INFINITY,
            max_steps: 500_000,
        }
    }
}

/// What an integration did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BdfStatistics {
    /// Steps accepted.
    pub steps: usize,
    /// Steps rejected by the error test.
    pub error_test_failures: usize,
    /// Attempts at a step whose Newton iteration did not converge.
    pub newton_failures: usize,
    /// Newton iterations in all.
    pub newton_iterations: usize,
    /// Evaluations of `f`.
    pub rhs_evaluations: usize,
    /// Evaluations of the Jacobian.
    pub jacobians: usize,
    /// Numeric factorizations of `I - c J`.
    pub factorizations: usize,
    /// Accepted steps at each order (index 1-5).
    pub steps_at_order: [usize; MAX_ORDER + 1],
    /// Solves of the sensitivities' linear corrector equations against the Newton
    /// iteration's factors ([`integrate_sensitivities`]; zero otherwise).
    pub sensitivity_iterations: usize,
    /// Evaluations of the Jacobian at accepted steps for the sensitivities.
    pub sensitivity_jacobians: usize,
    /// Factorizations of `I - c J` at the accepted state, for the sensitivities whose
    /// iteration against the Newton iteration's factors did not converge.
    pub sensitivity_factorizations: usize,
}

/// The solution at the requested times.
#[derive(Clone, Debug, PartialEq)]
pub struct BdfSolution {
    /// The requested times.
    pub t: Vec<f64>,
    /// The solution at each of them.
    pub y: Vec<Vec<f64>>,
    /// What the integration did.
    pub statistics: BdfStatistics,
}

/// Why an integration failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OdeError {
    /// An argument is invalid (the message says which).
    #[error("invalid argument: {detail}")]
    InvalidArgument {
        /// What is wrong.
        detail: String,
    },
    /// `f` failed or returned a value that is not finite where the integration could not go
    /// around it.
    #[error("the right-hand side failed at t = {t}: {message}")]
    Rhs {
        /// Where.
        t: f64,
        /// Its message.
        message: String,
    },
    /// The Jacobian failed.
    #[error("the Jacobian failed at t = {t}: {message}")]
    Jacobian {
        /// Where.
        t: f64,
        /// Its message.
        message: String,
    },
    /// The step fell below the spacing of floating-point numbers at `t`.
    #[error("the step size fell to {h:e} at t = {t}: the problem may be singular there")]
    StepTooSmall {
        /// Where.
        t: f64,
        /// The step.
        h: f64,
    },
    /// `max_steps` was reached.
    #[error("{steps} steps reached before t = {t_end} (at t = {t})")]
    TooManySteps {
        /// Steps taken.
        steps: usize,
        /// Where the integration stopped.
        t: f64,
        /// Where it was going.
        t_end: f64,
    },
    /// The sparse factorization of `I - c J` failed.
    #[error(transparent)]
    Sparse(#[from] SparseError),
}

/// The RMS norm of `x / scale`.
fn rms(x: impl Iterator<Item = f64>, scale: &[f64]) -> f64 {
    let n = scale.len().max(1) as f64;
    (x.zip(scale).map(|(v, s)| (v / s).powi(2)).sum::<f64>() / n).sqrt()
}

/// The coefficients of one order: gamma_k = sum_{j<=k} 1/j, alpha = (1 - kappa) gamma, and
/// the error constants kappa gamma + 1 / (k + 1).
struct Coefficients {
    gamma: [f64; MAX_ORDER + 2],
    alpha: [f64; MAX_ORDER + 2],
    error_const: [f64; MAX_ORDER + 2],
}

impl Coefficients {
    fn new() -> Self {
        let mut gamma = [0.0; MAX_ORDER + 2];
        for k in 1..=MAX_ORDER + 1 {
            gamma[k] = gamma[k - 1] + 1.0 / k as f64;
        }
        let mut alpha = [0.0; MAX_ORDER + 2];
        let mut error_const = [0.0; MAX_ORDER + 2];
        for k in 0..=MAX_ORDER + 1 {
            let kappa = KAPPA.get(k).copied().unwrap_or(0.0);
            alpha[k] = (1.0 - kappa) * gamma[k];
            error_const[k] = kappa * gamma[k] + 1.0 / (k as f64 + 1.0);
        }
        Self {
            gamma,
            alpha,
            error_const,
        }
    }

    /// What the differences `d` of a step of order `order` predict: the solution
    /// `sum_{j <= order} D_j`, and `psi = sum_{1 <= j <= order} gamma_j D_j / alpha_order`,
    /// the history term of the implicit formula.
    fn predict(&self, d: &[Vec<f64>], order: usize) -> (Vec<f64>, Vec<f64>) {
        let n = d[0].len();
        let predicted = (0..n).map(|x| (0..=order).map(|j| d[j][x]).sum()).collect();
        let psi = (0..n)
            .map(|x| (1..=order).map(|j| d[j][x] * self.gamma[j]).sum::<f64>() / self.alpha[order])
            .collect();
        (predicted, psi)
    }
}

/// The matrix that rescales backward differences of order `order` for a step multiplied by
/// `factor` (row-major `(order + 1) x (order + 1)`).
fn rescaling(order: usize, factor: f64) -> Vec<f64> {
    let m = order + 1;
    let mut r = vec![0.0; m * m];
    r[..m].fill(1.0);
    for i in 1..m {
        for j in 1..m {
            let (i_f, j_f) = (i as f64, j as f64);
            r[i * m + j] = (i_f - 1.0 - factor * j_f) / i_f;
        }
    }
    // Cumulative products down each column.
    for i in 1..m {
        for j in 0..m {
            r[i * m + j] *= r[(i - 1) * m + j];
        }
    }
    r
}

/// Rescales the differences `d[0..=order]` for a step multiplied by `factor`.
fn change_differences(d: &mut [Vec<f64>], order: usize, factor: f64) {
    let m = order + 1;
    let r = rescaling(order, factor);
    let u = rescaling(order, 1.0);
    // RU = R U; new D[j] = sum_i RU[i][j] D[i].
    let mut ru = vec![0.0; m * m];
    for i in 0..m {
        for j in 0..m {
            ru[i * m + j] = (0..m).map(|k| r[i * m + k] * u[k * m + j]).sum();
        }
    }
    let n = d[0].len();
    let old: Vec<Vec<f64>> = d[..m].to_vec();
    for j in 0..m {
        for x in 0..n {
            d[j][x] = (0..m).map(|i| ru[i * m + j] * old[i][x]).sum();
        }
    }
}

/// The integration's state between steps.
struct Stepper<'s, S: StiffSystem + ?Sized> {
    system: &'s S,
    options: BdfOptions,
    coefficients: Coefficients,
    n: usize,
    t: f64,
    /// Backward differences: `d[0]` is y, `d[1]` h f, ... (MAX_ORDER + 3 rows).
    d: Vec<Vec<f64>>,
    h: f64,
    order: usize,
    equal_steps: usize,
    jacobian_values: Vec<f64>,
    jacobian_is_current: bool,
    matrix: IterationMatrix<'s>,
    newton_tol: f64,
    statistics: BdfStatistics,
    /// The forward sensitivities carried along, if any.
    sensitivity: Option<Sensitivity<'s>>,
}

/// What [`Stepper::step`] calls after it accepts a step, with the new time, `c = h / alpha`
/// and the order of the step, the state's differences already updated.
type AcceptHook<T> = fn(&mut T, f64, f64, usize) -> Result<(), OdeError>;

/// Applies the correction `d` of an accepted step of order `order` to the backward
/// differences: `D[order + 2] = d - D[order + 1]`, `D[order + 1] = d`, then each lower
/// difference gains the one above it.
fn update_differences(differences: &mut [Vec<f64>], order: usize, correction: &[f64]) {
    let (low, high) = differences.split_at_mut(order + 2);
    for ((above, next), &value) in high[0].iter_mut().zip(&mut low[order + 1]).zip(correction) {
        *above = value - *next;
        *next = value;
    }
    for j in (0..=order).rev() {
        let (low, high) = differences.split_at_mut(j + 1);
        for (value, above) in low[j].iter_mut().zip(&high[0]) {
            *value += above;
        }
    }
}

/// The value at `t` of the polynomial the differences `d` of order `order` describe: it
/// interpolates the last solutions on the grid `t_last, t_last - h, ...`.
fn interpolate(d: &[Vec<f64>], t_last: f64, h: f64, order: usize, t: f64) -> Vec<f64> {
    let mut y = d[0].clone();
    let mut product = 1.0;
    for j in 0..order {
        let shift = t_last - h * j as f64;
        product *= (t - shift) / (h * (1 + j) as f64);
        for (value, difference) in y.iter_mut().zip(&d[j + 1]) {
            *value += difference * product;
        }
    }
    y
}

impl<S: StiffSystem + ?Sized> Stepper<'_, S> {
    /// The error scale `atol + rtol |y|` of each component of `y`.
    fn scale(&self, y: &[f64]) -> Vec<f64> {
        y.iter()
            .map(|y| self.options.atol + self.options.rtol * y.abs())
            .collect()
    }

    /// Rescales the differences (the state's and the sensitivities') for a step multiplied
    /// by `factor`; the caller sets the new step.
    fn rescale(&mut self, factor: f64) {
        change_differences(&mut self.d, self.order, factor);
        if let Some(sensitivity) = &mut self.sensitivity {
            for differences in &mut sensitivity.differences {
                change_differences(differences, self.order, factor);
            }
        }
        self.equal_steps = 0;
        self.matrix.invalidate();
    }

    fn rhs(&mut self, t: f64, y: &[f64], dydt: &mut [f64]) -> Result<bool, OdeError> {
        self.statistics.rhs_evaluations += 1;
        self.system
            .rhs(t, y, dydt)
            .map_err(|message| OdeError::Rhs { t, message })?;
        Ok(dydt.iter().all(|v| v.is_finite()))
    }

    fn update_jacobian(&mut self, t: f64, y: &[f64]) -> Result<(), OdeError> {
        self.statistics.jacobians += 1;
        self.system
            .jacobian(t, y, &mut self.jacobian_values)
            .map_err(|message| OdeError::Jacobian { t, message })?;
        if let Some(bad) = self.jacobian_values.iter().find(|v| !v.is_finite()) {
            return Err(OdeError::Jacobian {
                t,
                message: format!("an entry is {bad}"),
            });
        }
        self.jacobian_is_current = true;
        self.matrix.invalidate();
        Ok(())
    }

    /// The modified Newton iteration for the step to `t_new`: whether it converged, the
    /// iterations, the solution and its correction from the prediction.
    fn newton(
        &mut self,
        t_new: f64,
        predicted: &[f64],
        c: f64,
        psi: &[f64],
        scale: &[f64],
    ) -> Result<(bool, usize, Vec<f64>, Vec<f64>), OdeError> {
        let n = self.n;
        let mut y = predicted.to_vec();
        let mut d = vec![0.0; n];
        let mut f = vec![0.0; n];
        let mut previous_norm: Option<f64> = None;
        for k in 0..NEWTON_MAXITER {
            self.statistics.newton_iterations += 1;
            if !self.rhs(t_new, &y, &mut f)? {
                return Ok((false, k + 1, y, d));
            }
            let mut dy: Vec<f64> = (0..n).map(|i| c * f[i] - psi[i] - d[i]).collect();
            self.matrix.solve(&mut dy)?;
            let norm = rms(dy.iter().copied(), scale);
            let rate = previous_norm.map(|old| norm / old);
            if let Some(rate) = rate {
                let remaining = (NEWTON_MAXITER - k) as i32;
                if rate >= 1.0 || rate.powi(remaining) / (1.0 - rate) * norm > self.newton_tol {
                    return Ok((false, k + 1, y, d));
                }
            }
            for i in 0..n {
                y[i] += dy[i];
                d[i] += dy[i];
            }
            if norm == 0.0 || rate.is_some_and(|rate| rate / (1.0 - rate) * norm < self.newton_tol)
            {
                return Ok((true, k + 1, y, d));
            }
            previous_norm = Some(norm);
        }
        Ok((false, NEWTON_MAXITER, y, d))
    }

    /// One accepted step towards `t_end` (shortened to end there); rejected attempts are
    /// retried inside. `accepted` runs once the step is accepted, before the next step size
    /// and order are chosen.
    fn step(&mut self, t_end: f64, accepted: AcceptHook<Self>) -> Result<(), OdeError> {
        loop {
            let attempts = self.statistics.steps
                + self.statistics.error_test_failures
                + self.statistics.newton_failures;
            if attempts >= self.options.max_steps {
                return Err(OdeError::TooManySteps {
                    steps: attempts,
                    t: self.t,
                    t_end,
                });
            }
            let spacing = (self.t.abs() * f64::EPSILON).max(f64::MIN_POSITIVE);
            let min_step = 10.0 * spacing;
            if self.h > self.options.max_step {
                self.rescale(self.options.max_step / self.h);
                self.h = self.options.max_step;
            } else if self.h < min_step {
                return Err(OdeError::StepTooSmall {
                    t: self.t,
                    h: self.h,
                });
            }
            let mut t_new = self.t + self.h;
            if t_new > t_end {
                t_new = t_end;
                self.rescale((t_new - self.t) / self.h);
                self.h = t_new - self.t;
            }
            let order = self.order;
            let coefficients = &self.coefficients;
            let (predicted, psi) = coefficients.predict(&self.d, order);
            let scale = self.scale(&predicted);
            let c = self.h / coefficients.alpha[order];
            let error_const = coefficients.error_const;

            let mut outcome = None;
            loop {
                if !self.matrix.is_factored() {
                    self.matrix.factor(c, &self.jacobian_values)?;
                    self.statistics.factorizations = self.matrix.factorizations;
                }
                let (converged, iterations, y_new, d) =
                    self.newton(t_new, &predicted, c, &psi, &scale)?;
                if converged {
                    outcome = Some((iterations, y_new, d));
                    break;
                }
                if self.jacobian_is_current {
                    break;
                }
                self.update_jacobian(t_new, &predicted)?;
            }
            let Some((iterations, y_new, d)) = outcome else {
                self.statistics.newton_failures += 1;
                self.rescale(0.5);
                self.h *= 0.5;
                continue;
            };

            let safety =
                0.9 * (2 * NEWTON_MAXITER + 1) as f64 / (2 * NEWTON_MAXITER + iterations) as f64;
            let scale = self.scale(&y_new);
            let error_norm = rms(d.iter().map(|v| error_const[order] * v), &scale);
            if error_norm > 1.0 {
                self.statistics.error_test_failures += 1;
                let factor = MIN_FACTOR.max(safety * error_norm.powf(-1.0 / (order as f64 + 1.0)));
                self.rescale(factor);
                self.h *= factor;
                continue;
            }

            // Accepted.
            self.statistics.steps += 1;
            self.statistics.steps_at_order[order] += 1;
            self.jacobian_is_current = false;
            self.equal_steps += 1;
            self.t = t_new;
            update_differences(&mut self.d, order, &d);
            accepted(self, t_new, c, order)?;
            if self.equal_steps < order + 1 {
                return Ok(());
            }
            let lower = if order > 1 {
                rms(
                    self.d[order].iter().map(|v| error_const[order - 1] * v),
                    &scale,
                )
            } else {
                f64::INFINITY
            };
            let higher = if order < MAX_ORDER {
                rms(
                    self.d[order + 2].iter().map(|v| error_const[order + 1] * v),
                    &scale,
                )
            } else {
                f64::INFINITY
            };
            let norms = [lower, error_norm, higher];
            let factors: Vec<f64> = norms
                .iter()
                .enumerate()
                .map(|(k, norm)| norm.powf(-1.0 / (order + k) as f64))
                .collect();
            // The first largest factor: lower order, same, higher.
            let mut best = 0;
            for k in 1..factors.len() {
                if factors[k] > factors[best] {
                    best = k;
                }
            }
            let largest = factors[best];
            self.order = order + best - 1;
            let factor = MAX_FACTOR.min(safety * largest);
            self.rescale(factor);
            self.h *= factor;
            return Ok(());
        }
    }
}

/// The first step, from `f` at the start (Hairer, Nørsett & Wanner, section II.4).
fn first_step<S: StiffSystem + ?Sized>(
    stepper: &mut Stepper<'_, S>,
    t0: f64,
    y0: &[f64],
    f0: &[f64],
) -> Result<f64, OdeError> {
    let options = stepper.options;
    let scale: Vec<f64> = y0
        .iter()
        .map(|y| options.atol + options.rtol * y.abs())
        .collect();
    let d0 = rms(y0.iter().copied(), &scale);
    let d1 = rms(f0.iter().copied(), &scale);
    let h0 = if d0 < 1e-5 || d1 < 1e-5 {
        1e-6
    } else {
        0.01 * d0 / d1
    };
    let y1: Vec<f64> = y0.iter().zip(f0).map(|(y, f)| y + h0 * f).collect();
    let mut f1 = vec![0.0; y0.len()];
    if !stepper.rhs(t0 + h0, &y1, &mut f1)? {
        return Ok(h0);
    }
    let d2 = rms(f1.iter().zip(f0).map(|(a, b)| a - b), &scale) / h0;
    let h1 = if d1 <= 1e-15 && d2 <= 1e-15 {
        (h0 * 1e-3).max(1e-6)
    } else {
        (0.01 / d1.max(d2)).sqrt()
    };
    Ok((100.0 * h0).min(h1))
}

/// Integrates `system` from `(t0, y0)` and returns the solution at `t_eval` (increasing, all
/// after `t0`; the last is where the integration ends).
///
/// Errors: `y0` of the wrong length or not finite, `t_eval` empty, not increasing or not
/// after `t0`, tolerances that are not positive; `f` or the Jacobian failing (or not finite
/// at the start); the step falling to rounding ([`OdeError::StepTooSmall`]);
/// `max_steps` reached; the factorization failing.
pub fn integrate<S: StiffSystem + ?Sized>(
    system: &S,
    t0: f64,
    y0: &[f64],
    t_eval: &[f64],
    options: &BdfOptions,
) -> Result<BdfSolution, OdeError> {
    integrate_with(None, system, t0, y0, t_eval, options)
}

/// [`integrate`] on every rank of a model group together: each Newton matrix is factored and
/// solved split among `model`'s ranks ([`tutti_sparse::factor_on`]), and every rank steps
/// the whole state. Every rank calls this with the same arguments and gets the same
/// solution, bitwise that of [`integrate`] on one rank, or the same error.
///
/// Errors: those of [`integrate`]; a collective's error (another rank failed).
pub fn integrate_on<S: StiffSystem + ?Sized>(
    model: &Comm<'_>,
    system: &S,
    t0: f64,
    y0: &[f64],
    t_eval: &[f64],
    options: &BdfOptions,
) -> Result<BdfSolution, OdeError> {
    integrate_with(Some(model), system, t0, y0, t_eval, options)
}

fn integrate_with<S: StiffSystem + ?Sized>(
    model: Option<&Comm<'_>>,
    system: &S,
    t0: f64,
    y0: &[f64],
    t_eval: &[f64],
    options: &BdfOptions,
) -> Result<BdfSolution, OdeError> {
    let mut stepper = start(model, system, t0, y0, t_eval, options)?;
    let y = march(
        &mut stepper,
        t_eval,
        |_, _, _, _| Ok(()),
        |stepper, t| stepper.solution_at(&stepper.d, t),
    )?;
    Ok(BdfSolution {
        t: t_eval.to_vec(),
        y,
        statistics: stepper.statistics,
    })
}

/// Checks the arguments of an integration and sets its first step up: the differences
/// `y0` and `h f(t0, y0)`, the Jacobian at the start.
fn start<'s, S: StiffSystem + ?Sized>(
    model: Option<&'s Comm<'s>>,
    system: &'s S,
    t0: f64,
    y0: &[f64],
    t_eval: &[f64],
    options: &BdfOptions,
) -> Result<Stepper<'s, S>, OdeError> {
    let invalid = |detail: String| Err(OdeError::InvalidArgument { detail });
    let n = system.dimension();
    if y0.len() != n {
        return invalid(format!("y0 has {} entries for {n} unknowns", y0.len()));
    }
    if let Some(bad) = y0.iter().find(|v| !v.is_finite()) {
        return invalid(format!("y0 holds {bad}"));
    }
    if !(options.rtol > 0.0 && options.atol > 0.0 && options.max_step > 0.0) {
        return invalid(format!(
            "rtol {}, atol {} and max_step {} must be positive",
            options.rtol, options.atol, options.max_step
        ));
    }
    if !t0.is_finite() || t_eval.is_empty() {
        return invalid("t0 must be finite and t_eval not empty".into());
    }
    if t_eval[0] <= t0
        || t_eval.windows(2).any(|w| w[1] <= w[0])
        || !t_eval.iter().all(|t| t.is_finite())
    {
        return invalid("t_eval must be finite, increasing and after t0".into());
    }
    let pattern = system.jacobian_pattern();
    if pattern.rows() != n || pattern.cols() != n {
        return invalid(format!(
            "the Jacobian pattern is {} x {} for {n} unknowns",
            pattern.rows(),
            pattern.cols()
        ));
    }
    let matrix = IterationMatrix::new(&pattern, model)?;
    let mut stepper = Stepper {
        system,
        options: *options,
        coefficients: Coefficients::new(),
        n,
        t: t0,
        d: vec![vec![0.0; n]; MAX_ORDER + 3],
        h: 0.0,
        order: 1,
        equal_steps: 0,
        jacobian_values: vec![0.0; pattern.nnz()],
        jacobian_is_current: false,
        matrix,
        newton_tol: (10.0 * f64::EPSILON / options.rtol).max(options.rtol.sqrt().min(0.03)),
        statistics: BdfStatistics::default(),
        sensitivity: None,
    };
    let mut f0 = vec![0.0; n];
    if !stepper.rhs(t0, y0, &mut f0)? {
        return Err(OdeError::Rhs {
            t: t0,
            message: "f(t0, y0) is not finite".into(),
        });
    }
    let h = match options.first_step {
        Some(h) if h > 0.0 => h,
        Some(h) => return invalid(format!("first_step {h} must be positive")),
        None => first_step(&mut stepper, t0, y0, &f0)?,
    }
    .min(options.max_step);
    stepper.h = h;
    stepper.d[0].copy_from_slice(y0);
    for (d, f) in stepper.d[1].iter_mut().zip(&f0) {
        *d = f * h;
    }
    stepper.update_jacobian(t0, y0)?;
    Ok(stepper)
}

/// Steps to the last of `t_eval`, calling `accepted` after every accepted step and
/// `sample` at each time of `t_eval` once a step has passed it.
fn march<'s, S: StiffSystem + ?Sized, T>(
    stepper: &mut Stepper<'s, S>,
    t_eval: &[f64],
    accepted: AcceptHook<Stepper<'s, S>>,
    mut sample: impl FnMut(&Stepper<'s, S>, f64) -> T,
) -> Result<Vec<T>, OdeError> {
    let t_end = *t_eval.last().unwrap_or(&stepper.t);
    let mut samples = Vec::with_capacity(t_eval.len());
    let mut next = 0;
    while next < t_eval.len() {
        stepper.step(t_end, accepted)?;
        while next < t_eval.len() && t_eval[next] <= stepper.t {
            samples.push(sample(stepper, t_eval[next]));
            next += 1;
        }
    }
    stepper.statistics.factorizations = stepper.matrix.factorizations;
    Ok(samples)
}

impl<S: StiffSystem + ?Sized> Stepper<'_, S> {
    /// The value at `t` (inside the last step) of what the differences `d` describe: the
    /// last value itself at the step's end, the interpolating polynomial elsewhere.
    fn solution_at(&self, d: &[Vec<f64>], t: f64) -> Vec<f64> {
        if t == self.t {
            d[0].clone()
        } else {
            interpolate(d, self.t, self.h, self.order, t)
        }
    }
}
