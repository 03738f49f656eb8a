//! The dense kernels of one front's blocked right-looking LU, cut into the steps that one
//! rank runs alone or that the owners of a shared front run together: factor a panel of
//! (at most) [`PANEL`] fully summed columns, swap its pivot rows in other columns, update a
//! block of columns right of it. The columns right of a panel are updated block by block,
//! in blocks aligned to multiples of [`PANEL`], on one rank as on several, so every column
//! sees the same kernel calls on the same data wherever it lives: the bits of one rank.
//!
//! A front is column-major `m x m`; its first `p` columns and rows are fully summed.

use std::ops::Range;

use faer::linalg::matmul::matmul;
use faer::linalg::triangular_solve::solve_unit_lower_triangular_in_place;
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{Accum, MatMut, MatRef, Par};

use crate::numeric::FrontFactor;
use crate::symbolic::Front;
use crate::Scalar;

/// Where a front's trailing updates run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Updates {
    /// On the calling thread: what a subtree task does, so that a thread never leaves a
    /// task half done to run another (the memory plan counts one task in progress per
    /// thread).
    OneThread,
    /// A large update's column blocks on the current rayon pool's threads.
    PoolThreads,
}

/// Columns eliminated per panel, and the width of the column blocks updated after it.
pub(crate) const PANEL: usize = 32;

/// The pivot thresholds of a factorization: a pivot of magnitude at most `tiny` is replaced
/// by one of magnitude `replacement` ([`Scalar::perturbed`]: with its sign, or its phase).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pivoting {
    pub tiny: f64,
    pub replacement: f64,
}

/// The panels of a front with `p` fully summed columns: `k0..k0 + nb`, `k0` a multiple of
/// [`PANEL`].
pub(crate) fn panels(p: usize) -> impl Iterator<Item = Range<usize>> {
    (0..p).step_by(PANEL).map(move |k0| k0..(k0 + PANEL).min(p))
}

/// The column block holding column `c`: blocks are aligned to multiples of [`PANEL`].
pub(crate) fn block_of(c: usize) -> usize {
    c / PANEL
}

/// The blocks of columns `from..m`, cut at multiples of [`PANEL`] (the first may be short).
pub(crate) fn column_blocks(from: usize, m: usize) -> impl Iterator<Item = Range<usize>> {
    let mut start = from;
    std::iter::from_fn(move || {
        (start < m).then(|| {
            let end = ((block_of(start) + 1) * PANEL).min(m);
            let block = start..end;
            start = end;
            block
        })
    })
}

/// Factors the panel `k0..k0 + nb` of the `m x m` front in `dense` (its columns up to date):
/// partial pivoting among rows `k..p`, rows swapped within the panel's columns only, tiny
/// pivots perturbed. Returns the pivot row of each step and the perturbed count.
pub(crate) fn factor_panel<T: Scalar>(
    dense: &mut [T],
    m: usize,
    p: usize,
    panel: Range<usize>,
    pivoting: Pivoting,
) -> (Vec<usize>, usize) {
    let columns = &mut dense[panel.start * m..panel.end * m];
    factor_panel_columns(columns, m, p, panel, pivoting)
}

/// [`factor_panel`] on the panel's own columns: `columns` holds the front's columns
/// `panel` (`m x nb`, column-major), wherever the rest of the front lives.
pub(crate) fn factor_panel_columns<T: Scalar>(
    columns: &mut [T],
    m: usize,
    p: usize,
    panel: Range<usize>,
    pivoting: Pivoting,
) -> (Vec<usize>, usize) {
    let k0 = panel.start;
    let nb = panel.len();
    let mut swaps = Vec::with_capacity(nb);
    let mut perturbed = 0;
    for k in panel {
        let column = (k - k0) * m;
        let mut best = k;
        let mut best_abs = columns[column + k].magnitude();
        for r in k + 1..p {
            let candidate = columns[column + r].magnitude();
            if candidate > best_abs {
                best = r;
                best_abs = candidate;
            }
        }
        swaps.push(best);
        if best != k {
            for c in 0..nb {
                columns.swap(c * m + k, c * m + best);
            }
        }
        let mut pivot = columns[column + k];
        if pivot.magnitude() <= pivoting.tiny {
            pivot = pivot.perturbed(pivoting.replacement);
            columns[column + k] = pivot;
            perturbed += 1;
        }
        for r in k + 1..m {
            columns[column + r] /= pivot;
        }
        // The rest of the panel: a rank-1 update of its columns below row k.
        for c in k - k0 + 1..nb {
            let u_kc = columns[c * m + k];
            if u_kc != T::ZERO {
                for r in k + 1..m {
                    let l_rk = columns[column + r];
                    columns[c * m + r] -= l_rk * u_kc;
                }
            }
        }
    }
    (swaps, perturbed)
}

/// Swaps rows `k0 + i` and `swaps[i]`, in order, in the columns `columns`.
pub(crate) fn apply_swaps<T: Scalar>(
    dense: &mut [T],
    m: usize,
    k0: usize,
    swaps: &[usize],
    columns: Range<usize>,
) {
    for (i, &best) in swaps.iter().enumerate() {
        let k = k0 + i;
        if best != k {
            for c in columns.clone() {
                dense.swap(c * m + k, c * m + best);
            }
        }
    }
}

/// Applies the factored panel whose columns `panel_columns` holds (`m x nb`, column-major,
/// the panel starting at row and column `k0`) to the columns `block` (`m x width`, all
/// right of the panel, its pivot rows already swapped in them): their panel rows become U
/// (`L_panel^{-1}` times them), and the rows below lose L (below the panel) times that U.
pub(crate) fn update_columns<T: Scalar>(panel_columns: &[T], block: &mut [T], m: usize, k0: usize) {
    let nb = panel_columns.len() / m;
    let done = k0 + nb;
    let width = block.len() / m;
    let panel = MatRef::from_column_major_slice(panel_columns, m, nb);
    let panel_lower = panel.submatrix(k0, 0, nb, nb);
    let below: MatRef<'_, T> = panel.submatrix(done, 0, m - done, nb);
    let columns = MatMut::from_column_major_slice_mut(block, m, width);
    let (top, bottom) = columns.split_at_row_mut(done);
    let mut panel_rows = top.subrows_mut(k0, nb);
    solve_unit_lower_triangular_in_place(panel_lower, panel_rows.rb_mut(), Par::Seq);
    matmul(
        bottom,
        Accum::Add,
        below,
        panel_rows.rb(),
        T::from_real(-1.0),
        Par::Seq,
    );
}

/// Multiply-adds of a panel's update below which its column blocks are updated on one
/// thread: a rayon task costs microseconds.
const PARALLEL_UPDATE: usize = 1 << 22;

/// Swaps the panel's pivot rows in the columns right of it and updates them, block by
/// block ([`update_columns`] on each block of [`column_blocks`]); the blocks on the current
/// rayon pool's threads when the update is large. Each block sees the same kernel calls
/// either way, so the bits are those of one thread.
fn update_trailing<T: Scalar>(
    dense: &mut [T],
    m: usize,
    panel: Range<usize>,
    swaps: &[usize],
    updates: Updates,
) {
    let done = panel.end;
    let (left, right) = dense.split_at_mut(done * m);
    let panel_columns = &left[panel.start * m..];
    let mut blocks: Vec<&mut [T]> = Vec::new();
    let mut rest = right;
    for block in column_blocks(done, m) {
        let (head, tail) = rest.split_at_mut(block.len() * m);
        blocks.push(head);
        rest = tail;
    }
    let update = |block: &mut &mut [T]| {
        swap_rows(block, m, panel.start, swaps);
        update_columns(panel_columns, block, m, panel.start);
    };
    let work = (m - done)
        .saturating_mul(m - done)
        .saturating_mul(panel.len());
    if updates == Updates::PoolThreads
        && work >= PARALLEL_UPDATE
        && rayon::current_num_threads() > 1
    {
        use rayon::prelude::*;
        blocks.par_iter_mut().for_each(update);
    } else {
        blocks.iter_mut().for_each(update);
    }
}

/// Swaps rows `k0 + i` and `swaps[i]`, in order, in every column of `columns` (`m` rows
/// each, column-major).
pub(crate) fn swap_rows<T: Scalar>(columns: &mut [T], m: usize, k0: usize, swaps: &[usize]) {
    for column in columns.chunks_exact_mut(m) {
        for (i, &best) in swaps.iter().enumerate() {
            if best != k0 + i {
                column.swap(k0 + i, best);
            }
        }
    }
}

/// Eliminates a front's fully summed unknowns on one rank; returns its factors, its
/// contribution block (column-major `u x u`) and the number of perturbed pivots.
pub(crate) fn factor_front<T: Scalar>(
    dense: &mut [T],
    front: &Front,
    pivoting: Pivoting,
    updates: Updates,
) -> (FrontFactor<T>, Vec<T>, usize) {
    let m = front.order();
    let p = front.pivots;
    let mut swaps = Vec::with_capacity(p);
    let mut perturbed = 0;
    for panel in panels(p) {
        let (panel_swaps, count) = factor_panel(dense, m, p, panel.clone(), pivoting);
        perturbed += count;
        apply_swaps(dense, m, panel.start, &panel_swaps, 0..panel.start);
        update_trailing(dense, m, panel.clone(), &panel_swaps, updates);
        swaps.extend(panel_swaps);
    }
    let (factor, contribution) = extract(dense, front, swaps);
    (factor, contribution, perturbed)
}

/// A factored front's L and U, and its contribution block, copied out of `dense`.
pub(crate) fn extract<T: Scalar>(
    dense: &[T],
    front: &Front,
    swaps: Vec<usize>,
) -> (FrontFactor<T>, Vec<T>) {
    let m = front.order();
    let p = front.pivots;
    let u = m - p;
    let mut lower = Vec::with_capacity(m * p);
    lower.extend_from_slice(&dense[..m * p]);
    let mut upper = Vec::with_capacity(p * u);
    let mut contribution = Vec::with_capacity(u * u);
    for c in p..m {
        upper.extend_from_slice(&dense[c * m..c * m + p]);
        contribution.extend_from_slice(&dense[c * m + p..(c + 1) * m]);
    }
    (
        FrontFactor {
            swaps,
            lower,
            upper,
        },
        contribution,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A front large enough that its updates run on the pool's threads
    /// ([`PARALLEL_UPDATE`]) is factored with the bits of one thread.
    #[test]
    fn a_front_updated_on_several_threads_has_the_bits_of_one() {
        let (pivots, update) = (450, 70);
        let m = pivots + update;
        assert!((m - PANEL) * (m - PANEL) * PANEL >= PARALLEL_UPDATE);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let assembled: Vec<f64> = (0..m * m)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .collect();
        let front = Front {
            first: 0,
            pivots,
            update: (pivots..m).collect(),
            children: Vec::new(),
            in_parent: Vec::new(),
        };
        let pivoting = Pivoting {
            tiny: 1e-300,
            replacement: 1e-8,
        };
        let on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("pool");
            let mut dense = assembled.clone();
            let (factor, contribution, _) =
                pool.install(|| factor_front(&mut dense, &front, pivoting, Updates::PoolThreads));
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            (
                factor.swaps,
                bits(&factor.lower),
                bits(&factor.upper),
                bits(&contribution),
            )
        };
        let one = on(1);
        for threads in [2, 3] {
            assert!(on(threads) == one, "{threads} threads");
        }
    }

    #[test]
    fn column_blocks_are_cut_at_multiples_of_the_panel() {
        let blocks: Vec<_> = column_blocks(40, 100).collect();
        assert_eq!(blocks, vec![40..64, 64..96, 96..100]);
        assert_eq!(column_blocks(64, 64).count(), 0);
        assert_eq!(column_blocks(0, 5).collect::<Vec<_>>(), vec![0..5]);
        let panels: Vec<_> = panels(70).collect();
        assert_eq!(panels, vec![0..32, 32..64, 64..70]);
        assert_eq!(block_of(63), 1);
    }
}
