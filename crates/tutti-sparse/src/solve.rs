//! Solves with a [`Factorization`]: forward substitution up the tree, backward down it, for
//! one or many right-hand sides, and iterative refinement against the factored matrix.

use crate::csr::check_len;
use crate::forest_solve::{backward_forest, forward_forest};
use crate::numeric::{missing_contribution, Factorization, FrontFactor};
use crate::symbolic::Symbolic;
use crate::{Scalar, SparseError};

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
    /// `||b - A x||_inf / (||A||_inf ||x||_inf + ||b||_inf)` (with `|z|` for complex
    /// entries).
    pub backward_error: f64,
}

impl<T: Scalar> Factorization<T> {
    /// Solves `A X = B` in place for `rhs` right-hand sides: `b` holds them column-major
    /// (`unknowns x rhs`) and receives X. Refines iteratively (see [`SolveOptions`]) when the
    /// first solve's backward error is above the target, keeping the best iterate.
    ///
    /// Errors: `b` not of length `unknowns * rhs`, or holding a value that is not finite;
    /// [`SparseError::NumericallySingular`] when pivots were perturbed and refinement could
    /// not bring the backward error below 1e-10.
    pub fn solve_in_place(
        &self,
        b: &mut [T],
        rhs: usize,
        options: &SolveOptions,
    ) -> Result<SolveInfo, SparseError> {
        let n = self.symbolic.unknowns();
        let len = n.checked_mul(rhs).ok_or_else(|| SparseError::TooLarge {
            what: "the right-hand sides",
            detail: format!("{n} x {rhs}"),
        })?;
        check_len("b", b.len(), len)?;
        check_finite_rhs(b, n)?;
        let residual = Residual {
            indptr: &self.symbolic.indptr,
            indices: &self.symbolic.indices,
            values: self.matrix_values(),
            norm_inf: self.norm_inf,
        };
        refine(b, rhs, n, options, self.perturbed, &residual, |column| {
            self.solve_once(column)
        })
    }

    /// One solve with the factors, in place, for one right-hand side (old numbering):
    /// independent subtrees on the current rayon pool's threads, with the bits of one.
    fn solve_once(&self, b: &mut [T]) -> Result<(), SparseError> {
        let symbolic = &self.symbolic;
        let order = symbolic.tree.order();
        let permuted: Vec<T> = order.iter().map(|&old| b[old]).collect();
        let roots = symbolic.tree.roots();
        let factor = |f: usize| self.fronts.get(f).ok_or_else(|| missing_contribution(f));
        let mut z = vec![T::ZERO; symbolic.unknowns()];
        let mut pending: Vec<Option<Vec<T>>> = vec![None; symbolic.fronts.len()];
        forward_forest(symbolic, &roots, &factor, &permuted, &mut pending, &mut z)?;
        let mut x = vec![T::ZERO; symbolic.unknowns()];
        backward_forest(symbolic, &roots, &factor, &z, &mut x)?;
        for (new, &old) in order.iter().enumerate() {
            b[old] = x[new];
        }
        Ok(())
    }
}

/// The forward step of front `f`: its right-hand side assembled ([`front_rhs`]), then
/// `z = L11^{-1} P rhs` into `z` (the front's unknowns) and the front's own contribution,
/// `rhs[p..] - L21 z`, returned for its parent.
pub(crate) fn forward_front<T: Scalar>(
    symbolic: &Symbolic,
    f: usize,
    factor: &FrontFactor<T>,
    b: &[T],
    pending: &mut [Option<Vec<T>>],
    z: &mut [T],
) -> Vec<T> {
    forward_front_at(symbolic, f, factor, b, pending, z, 0)
}

/// [`forward_front`] with `z` holding the unknowns from `offset` on (the front's among
/// them).
pub(crate) fn forward_front_at<T: Scalar>(
    symbolic: &Symbolic,
    f: usize,
    factor: &FrontFactor<T>,
    b: &[T],
    pending: &mut [Option<Vec<T>>],
    z: &mut [T],
    offset: usize,
) -> Vec<T> {
    let front = &symbolic.fronts[f];
    let (first, p, m) = (front.first - offset, front.pivots, front.order());
    let mut rhs = front_rhs(symbolic, f, &factor.swaps, b, pending);
    for k in 0..p {
        eliminate(&mut rhs, k, &factor.lower[k * m..(k + 1) * m]);
    }
    z[first..first + p].copy_from_slice(&rhs[..p]);
    rhs.drain(..p);
    rhs
}

/// Front `f`'s right-hand side (order `m`): `b` (new numbering) at its unknowns and its
/// children's contribution vectors (taken from `pending`, added in the children's order, so
/// the sums do not depend on where the children were solved), the pivot rows `swaps`
/// applied.
pub(crate) fn front_rhs<T: Scalar>(
    symbolic: &Symbolic,
    f: usize,
    swaps: &[usize],
    b: &[T],
    pending: &mut [Option<Vec<T>>],
) -> Vec<T> {
    let front = &symbolic.fronts[f];
    let (first, p, m) = (front.first, front.pivots, front.order());
    let mut rhs = vec![T::ZERO; m];
    rhs[..p].copy_from_slice(&b[first..first + p]);
    for &c in &front.children {
        if let Some(block) = pending[c].take() {
            for (&value, &position) in block.iter().zip(&symbolic.fronts[c].in_parent) {
                rhs[position] += value;
            }
        }
    }
    for (k, &swap) in swaps.iter().enumerate() {
        rhs.swap(k, swap);
    }
    rhs
}

/// One column of the forward elimination: `rhs[k+1..] -= column[k+1..] rhs[k]`, where
/// `column` is the front's column `k` of L (all `m` rows).
pub(crate) fn eliminate<T: Scalar>(rhs: &mut [T], k: usize, column: &[T]) {
    let zk = rhs[k];
    if zk != T::ZERO {
        for (target, &l) in rhs[k + 1..].iter_mut().zip(&column[k + 1..]) {
            *target -= l * zk;
        }
    }
}

/// One update column of the backward step: `own -= column x_v`, where `column` is the
/// column of U12 (`p` rows) of an update unknown whose solution is `xv`.
pub(crate) fn subtract_update<T: Scalar>(own: &mut [T], column: &[T], xv: T) {
    if xv != T::ZERO {
        for (target, &u) in own.iter_mut().zip(column) {
            *target -= u * xv;
        }
    }
}

/// One column of the backward substitution: `own[k] /= U[k, k]`, then
/// `own[..k] -= column[..k] own[k]`, where `column` is the front's column `k` (at least its
/// first `k + 1` rows).
pub(crate) fn substitute<T: Scalar>(own: &mut [T], k: usize, column: &[T]) {
    own[k] /= column[k];
    let xk = own[k];
    if xk != T::ZERO {
        for (target, &u) in own[..k].iter_mut().zip(&column[..k]) {
            *target -= u * xk;
        }
    }
}

/// The backward step of front `f`: `x = U11^{-1} (z - U12 x_update)` for its unknowns,
/// from its forward result `z` and the solution at its update unknowns (its ancestors',
/// already in `x`).
pub(crate) fn backward_front<T: Scalar>(
    symbolic: &Symbolic,
    f: usize,
    factor: &FrontFactor<T>,
    z: &[T],
    x: &mut [T],
) {
    backward_front_at(symbolic, f, factor, z, x, 0, &[]);
}

/// [`backward_front`] with `x` holding the unknowns from `offset` on (the front's among
/// them); an update unknown outside them is read from `outside` (the whole solution).
pub(crate) fn backward_front_at<T: Scalar>(
    symbolic: &Symbolic,
    f: usize,
    factor: &FrontFactor<T>,
    z: &[T],
    x: &mut [T],
    offset: usize,
    outside: &[T],
) {
    let front = &symbolic.fronts[f];
    let (first, p, m) = (front.first, front.pivots, front.order());
    let mut own: Vec<T> = z[first..first + p].to_vec();
    for (c, &v) in front.update.iter().enumerate() {
        let xv = match v.checked_sub(offset).and_then(|i| x.get(i)) {
            Some(&value) => value,
            None => outside[v],
        };
        subtract_update(&mut own, &factor.upper[c * p..(c + 1) * p], xv);
    }
    for k in (0..p).rev() {
        substitute(&mut own, k, &factor.lower[k * m..k * m + p]);
    }
    x[first - offset..first - offset + p].copy_from_slice(&own);
}

/// Errors on the first right-hand side entry that is not finite (`b` column-major, `n` rows).
pub(crate) fn check_finite_rhs<T: Scalar>(b: &[T], n: usize) -> Result<(), SparseError> {
    match b.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(k) => Err(SparseError::NonFiniteRightHandSide {
            row: k % n.max(1),
            column: k / n.max(1),
            value: b[k].non_finite_part(),
        }),
    }
}

/// The factored matrix, for residuals: its pattern and values.
pub(crate) struct Residual<'a, T> {
    pub indptr: &'a [usize],
    pub indices: &'a [usize],
    pub values: &'a [T],
    /// `||A||_inf`, computed once when the matrix was factored.
    pub norm_inf: f64,
}

impl<T: Scalar> Residual<'_, T> {
    /// Writes `b - A x` into `residual` and returns the backward error of `x`.
    fn of(&self, x: &[T], b: &[T], norm_a: f64, residual: &mut [T]) -> f64 {
        for (i, r) in residual.iter_mut().enumerate() {
            let range = self.indptr[i]..self.indptr[i + 1];
            let ax: T = self.indices[range.clone()]
                .iter()
                .zip(&self.values[range])
                .map(|(&j, &a)| a * x[j])
                .sum();
            *r = b[i] - ax;
        }
        let norm = |v: &[T]| v.iter().fold(0.0f64, |m, x| m.max(x.magnitude()));
        let denominator = norm_a * norm(x) + norm(b);
        if denominator == 0.0 {
            0.0
        } else {
            norm(residual) / denominator
        }
    }
}

/// Solves every column of `b` (`n` rows, `rhs` columns) with `solve_once` and refines it,
/// keeping the best iterate; the same steps whoever solves (one rank or several).
pub(crate) fn refine<T: Scalar>(
    b: &mut [T],
    rhs: usize,
    n: usize,
    options: &SolveOptions,
    perturbed: usize,
    matrix: &Residual<'_, T>,
    mut solve_once: impl FnMut(&mut [T]) -> Result<(), SparseError>,
) -> Result<SolveInfo, SparseError> {
    let norm_a = matrix.norm_inf;
    let mut refinements = 0;
    let mut worst = 0.0f64;
    for column in b.chunks_mut(n.max(1)).take(rhs) {
        let original = column.to_vec();
        solve_once(column)?;
        let mut residual = vec![T::ZERO; n];
        let mut error = matrix.of(column, &original, norm_a, &mut residual);
        let mut steps = 0;
        while error > options.target && steps < options.max_refinements {
            solve_once(&mut residual)?;
            let candidate: Vec<T> = column
                .iter()
                .zip(&residual)
                .map(|(&x, &dx)| x + dx)
                .collect();
            let mut next_residual = vec![T::ZERO; n];
            let next = matrix.of(&candidate, &original, norm_a, &mut next_residual);
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
    if perturbed > 0 && (worst.is_nan() || worst > SINGULAR_BACKWARD_ERROR) {
        return Err(SparseError::NumericallySingular {
            perturbed,
            residual: worst,
        });
    }
    Ok(SolveInfo {
        refinements,
        backward_error: worst,
    })
}
