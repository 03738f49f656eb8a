//! Box constraints on a fit's parameters, and the projected Levenberg–Marquardt step that
//! honours them: a parameter held at a bound by the gradient is left out of the step, and
//! the trial point is clipped into the box.

use crate::FitError;

/// `lower[i] <= p[i] <= upper[i]` for each parameter; an infinite bound is no bound, and
/// equal bounds fix a parameter at that value.
#[derive(Clone, Debug, PartialEq)]
pub struct Bounds {
    lower: Vec<f64>,
    upper: Vec<f64>,
}

impl Bounds {
    /// Bounds from their lower and upper values.
    ///
    /// Errors: lengths that differ, a NaN, or a lower bound above its upper one.
    pub fn new(lower: Vec<f64>, upper: Vec<f64>) -> Result<Self, FitError> {
        if lower.len() != upper.len() {
            return Err(FitError::invalid(
                "bounds",
                format!(
                    "{} lower and {} upper bounds, expected one of each per parameter",
                    lower.len(),
                    upper.len()
                ),
            ));
        }
        for (i, (&low, &high)) in lower.iter().zip(&upper).enumerate() {
            if low.is_nan() || high.is_nan() || low > high || low == f64::INFINITY {
                return Err(FitError::invalid(
                    "bounds",
                    format!("parameter {i} has bounds [{low}, {high}], expected low <= high, no NaN and a finite or -inf lower bound"),
                ));
            }
        }
        Ok(Self { lower, upper })
    }

    /// The lower bounds.
    pub fn lower(&self) -> &[f64] {
        &self.lower
    }

    /// The upper bounds.
    pub fn upper(&self) -> &[f64] {
        &self.upper
    }

    /// Checks the bounds against a starting point: one pair per parameter, the point inside.
    pub(crate) fn check_start(&self, initial: &[f64]) -> Result<(), FitError> {
        if self.lower.len() != initial.len() {
            return Err(FitError::invalid(
                "bounds",
                format!(
                    "{} pairs for {} parameters",
                    self.lower.len(),
                    initial.len()
                ),
            ));
        }
        for (i, &p) in initial.iter().enumerate() {
            if p < self.lower[i] || p > self.upper[i] {
                return Err(FitError::invalid(
                    "initial",
                    format!(
                        "parameter {i} is {p}, outside its bounds [{}, {}]",
                        self.lower[i], self.upper[i]
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Which parameters the step leaves alone at `parameters`: the fixed ones, and those at a
    /// bound that the descent direction `-gradient` points out of.
    pub(crate) fn held(&self, parameters: &[f64], gradient: &[f64]) -> Vec<bool> {
        parameters
            .iter()
            .zip(gradient)
            .enumerate()
            .map(|(i, (&p, &g))| {
                self.lower[i] == self.upper[i]
                    || (p <= self.lower[i] && g > 0.0)
                    || (p >= self.upper[i] && g < 0.0)
            })
            .collect()
    }

    /// Clips `parameters` into the box; whether any moved.
    pub(crate) fn clip(&self, parameters: &mut [f64]) -> bool {
        let mut clipped = false;
        for (i, p) in parameters.iter_mut().enumerate() {
            let inside = p.clamp(self.lower[i], self.upper[i]);
            if inside != *p {
                *p = inside;
                clipped = true;
            }
        }
        clipped
    }
}
