//! The solve's forward and backward passes over whole subtrees on the threads of a pool,
//! cut as the factorization cuts them ([`Layers`]): the subtree tasks in parallel, the
//! fronts above them in order. A subtree's unknowns are consecutive (the fronts are
//! numbered in postorder, each after its subtree's), so each task writes its own chunk of
//! `z` or `x`; in the backward pass it reads its ancestors' solution from a copy made once
//! the fronts above are solved. Every front sees the operations of one thread, so the
//! solution's bits do not depend on the thread count.

use std::ops::Range;

use rayon::prelude::*;

use crate::forest::{subtree, Layers};
use crate::numeric::{missing_contribution, FrontFactor};
use crate::solve::{backward_front, backward_front_at, forward_front, forward_front_at};
use crate::symbolic::Symbolic;
use crate::{Scalar, SparseError};

/// Each front's factors, or an error where a front's are missing.
pub(crate) type Factors<'f, T> =
    dyn Fn(usize) -> Result<&'f FrontFactor<T>, SparseError> + Sync + 'f;

/// The forward pass over the subtrees of `roots`: each front's `z` (new numbering) and
/// contribution vector (into `pending`, from which its parent takes it), `b` the permuted
/// right-hand side.
///
/// Errors: a front's factors missing.
pub(crate) fn forward_forest<T: Scalar>(
    symbolic: &Symbolic,
    roots: &[usize],
    factor: &Factors<'_, T>,
    b: &[T],
    pending: &mut [Option<Vec<T>>],
    z: &mut [T],
) -> Result<(), SparseError> {
    let threads = rayon::current_num_threads();
    if threads <= 1 {
        for &root in roots {
            for f in subtree(symbolic, root) {
                pending[f] = Some(forward_front(symbolic, f, factor(f)?, b, pending, z));
            }
        }
        return Ok(());
    }
    let layers = Layers::new(symbolic, roots, threads);
    let ranges: Vec<Range<usize>> = layers
        .tasks
        .iter()
        .map(|&t| unknowns(symbolic, t))
        .collect();
    let count = symbolic.fronts.len();
    let blocks = layers
        .tasks
        .par_iter()
        .zip(chunks(z, &ranges))
        .zip(&ranges)
        .map(|((&task, chunk), range)| {
            let mut local: Vec<Option<Vec<T>>> = vec![None; count];
            for f in subtree(symbolic, task) {
                let block =
                    forward_front_at(symbolic, f, factor(f)?, b, &mut local, chunk, range.start);
                local[f] = Some(block);
            }
            local[task].take().ok_or_else(|| missing_contribution(task))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for (&task, block) in layers.tasks.iter().zip(blocks) {
        pending[task] = Some(block);
    }
    for &f in &layers.above {
        pending[f] = Some(forward_front(symbolic, f, factor(f)?, b, pending, z));
    }
    Ok(())
}

/// The backward pass over the subtrees of `roots`, from the top: each front's solution into
/// `x` (new numbering), whose ancestors' entries (outside the subtrees) are already there.
///
/// Errors: a front's factors missing.
pub(crate) fn backward_forest<T: Scalar>(
    symbolic: &Symbolic,
    roots: &[usize],
    factor: &Factors<'_, T>,
    z: &[T],
    x: &mut [T],
) -> Result<(), SparseError> {
    let threads = rayon::current_num_threads();
    if threads <= 1 {
        for &root in roots.iter().rev() {
            for f in subtree(symbolic, root).rev() {
                backward_front(symbolic, f, factor(f)?, z, x);
            }
        }
        return Ok(());
    }
    let layers = Layers::new(symbolic, roots, threads);
    for &f in layers.above.iter().rev() {
        backward_front(symbolic, f, factor(f)?, z, x);
    }
    let outside = x.to_vec();
    let ranges: Vec<Range<usize>> = layers
        .tasks
        .iter()
        .map(|&t| unknowns(symbolic, t))
        .collect();
    layers
        .tasks
        .par_iter()
        .zip(chunks(x, &ranges))
        .zip(&ranges)
        .try_for_each(|((&task, chunk), range)| {
            for f in subtree(symbolic, task).rev() {
                backward_front_at(symbolic, f, factor(f)?, z, chunk, range.start, &outside);
            }
            Ok(())
        })
}

/// The unknowns of `root`'s subtree: from its first front's to its own last.
fn unknowns(symbolic: &Symbolic, root: usize) -> Range<usize> {
    let fronts = subtree(symbolic, root);
    let (first, last) = (&symbolic.fronts[*fronts.start()], &symbolic.fronts[root]);
    first.first..last.first + last.pivots
}

/// `values` cut into the disjoint `ranges` (increasing), one mutable chunk each.
fn chunks<'v, T>(values: &'v mut [T], ranges: &[Range<usize>]) -> Vec<&'v mut [T]> {
    let mut rest = values;
    let mut at = 0;
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(range.start - at);
        let (chunk, tail) = tail.split_at_mut(range.len());
        out.push(chunk);
        rest = tail;
        at = range.end;
    }
    out
}
