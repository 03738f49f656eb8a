//! Solves with a [`Factorization`]: forward substitution up the tree, backward down it, for
//! one or many right-hand sides, and iterative refinement against the factored matrix.

use crate::csr::check_len;
use crate::numeric::Factorization;
use crate::SparseError;

/// A backward error above this after refinement, with perturbed pivots, means the matrix is
/// singular to working precision: refinement against a perturbation of `sqrt(eps) max|A|`
/// converges to about eps on any matrix whose condition is well below `1 / sqrt(eps)`, and
/// stalls near the perturbation's size on a singular one (2e-9 on [[1, 1], [1, 1]]).
const SINGULAR_BACKWARD_ERROR: f64 = 1e-10;

/// Options of a solve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SolveOptions {
    /// Refinement steps at most (default 3); 0 solves once.
    pub max_refinements: usize,
    /// Refinement stops once the componentwise-normwise backward error
    /// `||b - A x||_inf / (||A||_inf ||x||_inf + ||b||_inf)` is below this (default 4 eps).
    pub target: f64,
}

impl Default for SolveOptions {
    fn default() -> Self {
        Self {
            max_refinements: 3,
            target: 4.0 * f64::EPSILON,
        }
    }
}

/// What a solve reached.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SolveInfo {
    /// Refinement steps taken.
    pub refinements: usize,
    /// The largest backward error over the right-hand sides,
    /// `||b - A x||_inf / (||A||_inf ||x||_inf + ||b||_inf)`.
    pub backward_error: f64,
}

impl Factorization {
    /// Solves `A X = B` in place for `rhs` right-hand sides: `b` holds them column-major
    /// (`unknowns x rhs`) and receives X. Refines iteratively (see [`SolveOptions`]) when the
    /// first solve's backward error is above the target, keeping the best iterate.
    ///
    /// Errors: `b` not of length `unknowns * rhs`, or holding a value that is not finite.
    pub fn solve_in_place(
        &self,
        b: &mut [f64],
        rhs: usize,
        options: &SolveOptions,
    ) -> Result<SolveInfo, SparseError> {
        let n = self.symbolic.unknowns();
        let len = n.checked_mul(rhs).ok_or_else(|| SparseError::TooLarge {
            what: "the right-hand sides",
            detail: format!("{n} x {rhs}"),
        })?;
        check_len("b", b.len(), len)?;
        if let Some(k) = b.iter().position(|v| !v.is_finite()) {
            return Err(SparseError::NonFinite {
                row: k % n.max(1),
                col: k / n.max(1),
                value: b[k],
            });
        }
        let norm_a = self.norm_inf();
        let mut refinements = 0;
        let mut worst = 0.0f64;
        for column in b.chunks_mut(n.max(1)).take(rhs) {
            let original = column.to_vec();
            self.solve_once(column);
            let mut residual = vec![0.0; n];
            let mut error = self.residual(column, &original, norm_a, &mut residual);
            let mut steps = 0;
            while error > options.target && steps < options.max_refinements {
                self.solve_once(&mut residual);
                let candidate: Vec<f64> =
                    column.iter().zip(&residual).map(|(x, dx)| x + dx).collect();
                let mut next_residual = vec![0.0; n];
                let next = self.residual(&candidate, &original, norm_a, &mut next_residual);
                steps += 1;
                // Keep the better iterate; stop once refinement stops helping (or a NaN).
                if next.is_nan() || next >= error {
                    break;
                }
                column.copy_from_slice(&candidate);
                residual = next_residual;
                error = next;
            }
            refinements = refinements.max(steps);
            worst = worst.max(error);
        }
        // Perturbed pivots that refinement could not correct: the matrix is singular to
        // working precision, and X is no solution.
        if self.perturbed > 0 && !(worst <= SINGULAR_BACKWARD_ERROR) {
            return Err(SparseError::NumericallySingular {
                perturbed: self.perturbed,
                residual: worst,
            });
        }
        Ok(SolveInfo {
            refinements,
            backward_error: worst,
        })
    }

    /// `||A||_inf` of the factored matrix.
    fn norm_inf(&self) -> f64 {
        let symbolic = &self.symbolic;
        let values = self.matrix_values();
        (0..symbolic.unknowns())
            .map(|i| {
                values[symbolic.indptr[i]..symbolic.indptr[i + 1]]
                    .iter()
                    .map(|v| v.abs())
                    .sum::<f64>()
            })
            .fold(0.0, f64::max)
    }

    /// Writes `b - A x` into `residual` and returns the backward error of `x`.
    fn residual(&self, x: &[f64], b: &[f64], norm_a: f64, residual: &mut [f64]) -> f64 {
        let symbolic = &self.symbolic;
        let values = self.matrix_values();
        for (i, r) in residual.iter_mut().enumerate() {
            let range = symbolic.indptr[i]..symbolic.indptr[i + 1];
            let ax: f64 = symbolic.indices[range.clone()]
                .iter()
                .zip(&values[range])
                .map(|(&j, &a)| a * x[j])
                .sum();
            *r = b[i] - ax;
        }
        let norm = |v: &[f64]| v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let denominator = norm_a * norm(x) + norm(b);
        if denominator == 0.0 {
            0.0
        } else {
            norm(residual) / denominator
        }
    }

    /// One solve with the factors, in place, for one right-hand side (old numbering).
    fn solve_once(&self, b: &mut [f64]) {
        let symbolic = &self.symbolic;
        let order = symbolic.tree.order();
        let mut y: Vec<f64> = order.iter().map(|&old| b[old]).collect();
        // Forward: L, up the tree.
        for (front, factor) in symbolic.fronts.iter().zip(&self.fronts) {
            let (first, p) = (front.first, front.pivots);
            let m = front.order();
            let z = &mut y[first..first + p];
            for (k, &swap) in factor.swaps.iter().enumerate() {
                z.swap(k, swap);
            }
            for k in 0..p {
                let zk = z[k];
                if zk != 0.0 {
                    let column = &factor.lower[k * m..(k + 1) * m];
                    for r in k + 1..p {
                        z[r] -= column[r] * zk;
                    }
                }
            }
            let z: Vec<f64> = z.to_vec();
            for (k, &zk) in z.iter().enumerate() {
                if zk != 0.0 {
                    let column = &factor.lower[k * m + p..(k + 1) * m];
                    for (&l, &v) in column.iter().zip(&front.update) {
                        y[v] -= l * zk;
                    }
                }
            }
        }
        // Backward: U, down the tree.
        for (front, factor) in symbolic.fronts.iter().zip(&self.fronts).rev() {
            let (first, p) = (front.first, front.pivots);
            let m = front.order();
            let mut z: Vec<f64> = y[first..first + p].to_vec();
            for (c, &v) in front.update.iter().enumerate() {
                let xv = y[v];
                if xv != 0.0 {
                    let column = &factor.upper[c * p..(c + 1) * p];
                    for (zr, &u) in z.iter_mut().zip(column) {
                        *zr -= u * xv;
                    }
                }
            }
            for k in (0..p).rev() {
                let column = &factor.lower[k * m..k * m + p];
                z[k] /= column[k];
                let zk = z[k];
                if zk != 0.0 {
                    for r in 0..k {
                        z[r] -= column[r] * zk;
                    }
                }
            }
            y[first..first + p].copy_from_slice(&z);
        }
        for (new, &old) in order.iter().enumerate() {
            b[old] = y[new];
        }
    }
}
