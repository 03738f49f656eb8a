//! The numeric phase: a multifrontal LU over the assembly tree, one dense front per node.
//!
//! Each front (order m = p fully summed + u update unknowns) is assembled from the matrix's
//! entries and its children's contribution blocks (added in the children's order, so the
//! sum is the same whichever device computed them), then its p fully summed columns are
//! eliminated by a blocked right-looking LU with partial pivoting among the p fully summed
//! rows (the structure stays that of `A + A^T`). A pivot that is still tiny
//! (`|pivot| <= eps * max|A|`) is replaced by `sqrt(eps) * max|A|` with its sign, or for a
//! complex pivot its phase (a static perturbation, counted; the solve's iterative refinement
//! corrects for it). What remains of the trailing block is the front's contribution to its
//! parent. Real and complex matrices run the same code ([`Scalar`]).

use std::sync::Arc;

use tutti_backend::Device;

use crate::dense::{factor_front, Pivoting, Updates};
use crate::symbolic::Symbolic;
use crate::{CsrMatrix, Scalar, SparseError};

/// One front's factors.
#[derive(Clone, Debug)]
pub(crate) struct FrontFactor<T> {
    /// At step k, row k was swapped with row `swaps[k]` (both fully summed, `< p`).
    pub swaps: Vec<usize>,
    /// Column-major `m x p`: the unit lower L11 below the diagonal and U11 on and above it
    /// (top `p x p`), then L21 (rows `p..m`).
    pub lower: Vec<T>,
    /// Column-major `p x u`: U12.
    pub upper: Vec<T>,
}

/// Options of the numeric phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FactorOptions {
    /// A pivot at most `tiny * max|A|` in magnitude is perturbed (default `f64::EPSILON`;
    /// magnitudes are `|z|` for complex matrices).
    pub tiny: f64,
    /// The perturbed pivot's magnitude, relative to `max|A|` (default `sqrt(f64::EPSILON)`):
    /// a real pivot keeps its sign, a complex one its phase (`0` becomes positive real).
    pub perturbation: f64,
}

impl Default for FactorOptions {
    fn default() -> Self {
        Self {
            tiny: f64::EPSILON,
            perturbation: f64::EPSILON.sqrt(),
        }
    }
}

/// A numeric factorization `P A Q = L U` (Q the analysis's order, P its row swaps) with the
/// matrix's values kept for iterative refinement; real (`T = f64`, the default) or complex
/// (`T = c64`).
#[derive(Clone, Debug)]
pub struct Factorization<T = f64> {
    pub(crate) symbolic: Arc<Symbolic>,
    pub(crate) fronts: Vec<FrontFactor<T>>,
    /// The factored matrix's values (on the analysed pattern), for residuals.
    pub(crate) values: Vec<T>,
    /// `||A||_inf` of those values, for the solves' backward errors.
    pub(crate) norm_inf: f64,
    pub(crate) perturbed: usize,
    pub(crate) options: FactorOptions,
}

impl<T: Scalar> Factorization<T> {
    /// Factors `a`, whose pattern `symbolic` analysed.
    ///
    /// Errors: a matrix with another pattern ([`SparseError::PatternMismatch`]), a value
    /// that is not finite.
    pub fn new(
        symbolic: Arc<Symbolic>,
        a: &CsrMatrix<T>,
        options: FactorOptions,
    ) -> Result<Self, SparseError> {
        symbolic.check_pattern(a)?;
        a.check_finite(a.values())?;
        let (fronts, perturbed) = factor_fronts(&symbolic, a.values(), a.max_abs(), &options)?;
        Ok(Self {
            symbolic,
            fronts,
            values: a.values().to_vec(),
            norm_inf: a.norm_inf(),
            perturbed,
            options,
        })
    }

    /// [`Factorization::new`] on `device`'s threads: its thread pool factors independent
    /// subtrees and large fronts' updates, with the bits of one thread.
    ///
    /// Errors: as [`Factorization::new`]; the device's pool failing to start
    /// ([`SparseError::Group`]).
    pub fn on_device(
        device: &Device,
        symbolic: Arc<Symbolic>,
        a: &CsrMatrix<T>,
        options: FactorOptions,
    ) -> Result<Self, SparseError> {
        device_pool(device)?.install(|| Self::new(symbolic, a, options))
    }

    /// Factors the same pattern with new values (the numeric phase only): what an implicit
    /// integrator does when its step or order changes.
    ///
    /// Errors: as [`Factorization::new`]; on error `self` is unchanged.
    pub fn refactor(&mut self, a: &CsrMatrix<T>) -> Result<(), SparseError> {
        *self = Self::new(Arc::clone(&self.symbolic), a, self.options)?;
        Ok(())
    }

    /// The analysis this factorization uses.
    pub fn symbolic(&self) -> &Arc<Symbolic> {
        &self.symbolic
    }

    /// How many pivots were perturbed.
    pub fn perturbed_pivots(&self) -> usize {
        self.perturbed
    }

    /// The factored matrix, rebuilt from the kept values.
    pub(crate) fn matrix_values(&self) -> &[T] {
        &self.values
    }
}

/// Factors every front, children before parents, independent subtrees on the current rayon
/// pool's threads ([`crate::forest`]); returns the factors and the number of perturbed
/// pivots.
pub(crate) fn factor_fronts<T: Scalar>(
    symbolic: &Symbolic,
    values: &[T],
    max_abs: f64,
    options: &FactorOptions,
) -> Result<(Vec<FrontFactor<T>>, usize), SparseError> {
    let count = symbolic.fronts.len();
    let mut contributions: Vec<Option<Vec<T>>> = vec![None; count];
    let mut factors: Vec<Option<FrontFactor<T>>> = vec![None; count];
    let perturbed = crate::forest::factor_forest(
        symbolic,
        values,
        max_abs,
        options,
        &symbolic.tree.roots(),
        &mut contributions,
        &mut factors,
    )?;
    let factors = factors
        .into_iter()
        .enumerate()
        .map(|(f, factor)| factor.ok_or_else(|| missing_contribution(f)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((factors, perturbed))
}

/// `device`'s thread pool, its failure to start as [`SparseError::Group`].
pub(crate) fn device_pool(device: &Device) -> Result<&rayon::ThreadPool, SparseError> {
    device.thread_pool().map_err(|error| SparseError::Group {
        detail: format!("device {}'s threads: {error}", device.index()),
    })
}

/// A front whose data should have been there (a mapping or tree at odds with itself).
pub(crate) fn missing_contribution(f: usize) -> SparseError {
    SparseError::invalid(format!("front {f}'s data is missing where it is needed"))
}

/// Factors fronts one after another with one workspace: assembly, the children's blocks,
/// elimination. One per rank.
pub(crate) struct FrontFactorizer<'s, T> {
    symbolic: &'s Symbolic,
    values: &'s [T],
    pivoting: Pivoting,
    /// The front being factored, reused from front to front (zeroing memory already
    /// touched costs no page faults; a fresh allocation per front had two ranks contending
    /// in the kernel).
    dense: Vec<T>,
    /// Where the fronts' trailing updates run.
    updates: Updates,
    /// Pivots perturbed so far.
    pub perturbed: usize,
}

impl<'s, T: Scalar> FrontFactorizer<'s, T> {
    /// A factorizer for `values` (on `symbolic`'s pattern, largest magnitude `max_abs`).
    pub fn new(
        symbolic: &'s Symbolic,
        values: &'s [T],
        max_abs: f64,
        options: &FactorOptions,
    ) -> Self {
        let (tiny, replacement) = pivot_thresholds(max_abs, options);
        Self {
            symbolic,
            values,
            pivoting: Pivoting { tiny, replacement },
            dense: Vec::new(),
            updates: Updates::PoolThreads,
            perturbed: 0,
        }
    }

    /// This factorizer with every front's updates on the calling thread
    /// ([`Updates::OneThread`]).
    pub fn on_one_thread(mut self) -> Self {
        self.updates = Updates::OneThread;
        self
    }

    /// Front `f` assembled from the matrix and `children`'s contribution blocks (each child
    /// with its block, in the children's order), then factored: its factors and its own
    /// contribution block.
    pub fn factor<'b>(
        &mut self,
        f: usize,
        children: impl IntoIterator<Item = (usize, &'b [T])>,
    ) -> Result<(FrontFactor<T>, Vec<T>), SparseError> {
        self.assemble(f, children)?;
        let (factor, contribution, count) = factor_front(
            &mut self.dense,
            &self.symbolic.fronts[f],
            self.pivoting,
            self.updates,
        );
        self.perturbed += count;
        Ok((factor, contribution))
    }

    /// Front `f` assembled from the matrix and `children`'s contribution blocks, in the
    /// workspace, not factored.
    fn assemble<'b>(
        &mut self,
        f: usize,
        children: impl IntoIterator<Item = (usize, &'b [T])>,
    ) -> Result<(), SparseError> {
        let front = &self.symbolic.fronts[f];
        assemble(self.symbolic, f, self.values, &mut self.dense)?;
        for (c, block) in children {
            extend_add(
                &mut self.dense,
                front.order(),
                block,
                &self.symbolic.fronts[c].in_parent,
            );
        }
        Ok(())
    }

    /// The pivot thresholds.
    pub fn pivoting(&self) -> Pivoting {
        self.pivoting
    }

    /// Factors `fronts` (whole subtrees, in postorder): each front's children's blocks are
    /// taken from `contributions`, its own put there; its factors go to `factors`.
    pub fn factor_subtrees(
        &mut self,
        fronts: impl IntoIterator<Item = usize>,
        contributions: &mut [Option<Vec<T>>],
        factors: &mut [Option<FrontFactor<T>>],
    ) -> Result<(), SparseError> {
        for f in fronts {
            let blocks = self.symbolic.fronts[f]
                .children
                .iter()
                .map(|&c| {
                    contributions[c]
                        .take()
                        .map(|block| (c, block))
                        .ok_or_else(|| missing_contribution(c))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let (factor, contribution) =
                self.factor(f, blocks.iter().map(|(c, block)| (*c, block.as_slice())))?;
            factors[f] = Some(factor);
            contributions[f] = Some(contribution);
        }
        Ok(())
    }
}

/// The pivot size at or below which a pivot is perturbed, and its replacement's size, for a
/// matrix whose largest entry is `max_abs`.
fn pivot_thresholds(max_abs: f64, options: &FactorOptions) -> (f64, f64) {
    let scale = if max_abs > 0.0 { max_abs } else { 1.0 };
    (options.tiny * scale, options.perturbation * scale)
}

/// Front `f` with the matrix's entries in place (`values` on the analysed pattern),
/// column-major, before its children's contributions are added: written into `dense`, a
/// workspace reused from front to front (zeroing memory already touched costs no page
/// faults; a fresh allocation per front had two ranks contending in the kernel).
fn assemble<T: Scalar>(
    symbolic: &Symbolic,
    f: usize,
    values: &[T],
    dense: &mut Vec<T>,
) -> Result<(), SparseError> {
    let m = symbolic.fronts[f].order();
    let size = m.checked_mul(m).ok_or_else(|| SparseError::TooLarge {
        what: "a front",
        detail: format!("order {m}"),
    })?;
    dense.clear();
    dense.resize(size, T::ZERO);
    for &(p, row, col) in &symbolic.entries[symbolic.entry_ptr[f]..symbolic.entry_ptr[f + 1]] {
        dense[row + col * m] += values[p];
    }
    Ok(())
}

/// Adds a child's contribution block (column-major, order `positions.len()`) into the
/// parent's front (order `m`) at `positions`.
fn extend_add<T: Scalar>(front: &mut [T], m: usize, block: &[T], positions: &[usize]) {
    let u = positions.len();
    for (b, &col) in positions.iter().enumerate() {
        let source = &block[b * u..(b + 1) * u];
        let target = &mut front[col * m..(col + 1) * m];
        for (&value, &row) in source.iter().zip(positions) {
            target[row] += value;
        }
    }
}
