//! Experiments more than one of the fit's test files use.

use tutti_fit::Experiment;

/// Rosenbrock's function as least squares: r = (10 (y - x^2), 1 - x), minimum at (1, 1).
pub struct Rosenbrock;

impl Experiment for Rosenbrock {
    fn residual_count(&self) -> usize {
        2
    }
    fn evaluate(&self, p: &[f64], r: &mut [f64], j: &mut [f64]) -> Result<(), String> {
        r[0] = 10.0 * (p[1] - p[0] * p[0]);
        r[1] = 1.0 - p[0];
        j.copy_from_slice(&[-20.0 * p[0], 10.0, -1.0, 0.0]);
        Ok(())
    }
}
