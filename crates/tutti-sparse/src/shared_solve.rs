//! The solve's steps through a shared front whose factors stay where they were factored
//! ([`FrontColumns`], one rank per column block): the right-hand side travels from the
//! holder of one block to the holder of the next, each applying its columns in the order
//! one rank would ([`crate::solve::eliminate`], [`crate::solve::subtract_update`],
//! [`crate::solve::substitute`]), so every entry sees the same operations in the same
//! order: the bits of one rank. It moves by broadcast (every rank of the group takes
//! part), once per change of holder, and the last broadcast leaves the result on every rank.

use std::ops::Range;

use tutti_group::Comm;

use crate::dense::{block_of, column_blocks, panels};
use crate::numeric::missing_contribution as missing;
use crate::shared_front::{FrontColumns, SharedFront};
use crate::solve::{eliminate, substitute, subtract_update};
use crate::{Scalar, SparseError};

/// The forward step of shared front `f`: `rhs` (at the owner: the front's right-hand side,
/// [`crate::solve::front_rhs`]; elsewhere ignored) through L's columns. Every rank
/// returns the result (order `m`): `z` at the fully summed rows, the contribution to the
/// parent below them.
///
/// Errors: a collective's; this rank's columns missing where the mapping puts them.
pub(crate) fn forward<T: Scalar>(
    comm: &Comm<'_>,
    shared: &SharedFront<'_>,
    f: usize,
    part: Option<&FrontColumns<T>>,
    rhs: Vec<T>,
) -> Result<Vec<T>, SparseError> {
    let rank = comm.rank();
    let p = shared.front.pivots;
    let mut state = if rank == shared.owner() {
        rhs
    } else {
        Vec::new()
    };
    let mut current = shared.owner();
    for panel in panels(p) {
        let holder = shared.holder(block_of(panel.start));
        if holder != current {
            share(comm, current, &mut state)?;
            current = holder;
        }
        if rank == holder {
            let part = part.ok_or_else(|| missing(f))?;
            for k in panel {
                eliminate(&mut state, k, part.column(k).ok_or_else(|| missing(f))?);
            }
        }
    }
    share(comm, current, &mut state)?;
    check_len(&state, shared.front.order(), f)?;
    Ok(state)
}

/// The backward step of shared front `f`: from `z` (its fully summed unknowns' forward
/// result, on every rank) and the solution `x` at its update unknowns (its ancestors',
/// on every rank), its unknowns' solution, on every rank.
///
/// Errors: a collective's; this rank's columns missing where the mapping puts them.
pub(crate) fn backward<T: Scalar>(
    comm: &Comm<'_>,
    shared: &SharedFront<'_>,
    f: usize,
    part: Option<&FrontColumns<T>>,
    z: &[T],
    x: &[T],
) -> Result<Vec<T>, SparseError> {
    let rank = comm.rank();
    let front = shared.front;
    let (p, m) = (front.pivots, front.order());
    // U12's columns in order, then the fully summed columns from the last.
    let steps: Vec<(Range<usize>, bool)> = column_blocks(p, m)
        .map(|block| (block, true))
        .chain(
            panels(p)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .map(|panel| (panel, false)),
        )
        .collect();
    let mut state = z.to_vec();
    let mut current = steps.first().map_or(shared.owner(), |(columns, _)| {
        shared.holder(block_of(columns.start))
    });
    for (columns, update) in steps {
        let holder = shared.holder(block_of(columns.start));
        if holder != current {
            share(comm, current, &mut state)?;
            current = holder;
        }
        if rank != holder {
            continue;
        }
        let part = part.ok_or_else(|| missing(f))?;
        if update {
            for j in columns {
                let v = front.update[j - p];
                subtract_update(&mut state, part.column(j).ok_or_else(|| missing(f))?, x[v]);
            }
        } else {
            for k in columns.rev() {
                substitute(&mut state, k, part.column(k).ok_or_else(|| missing(f))?);
            }
        }
    }
    share(comm, current, &mut state)?;
    check_len(&state, p, f)?;
    Ok(state)
}

/// `state` broadcast from `root` to every rank (packed as `f64`s).
fn share<T: Scalar>(comm: &Comm<'_>, root: usize, state: &mut Vec<T>) -> Result<(), SparseError> {
    let mut packed = Vec::new();
    if comm.rank() == root {
        T::pack(state, &mut packed);
    }
    comm.broadcast(root, &mut packed)?;
    if comm.rank() != root {
        let values = T::unpack(&packed).ok_or_else(|| {
            SparseError::invalid(format!(
                "a message of {} numbers holds no whole number of values",
                packed.len()
            ))
        })?;
        state.clear();
        state.extend_from_slice(&values);
    }
    Ok(())
}

/// An error unless `state` holds `len` values.
fn check_len<T>(state: &[T], len: usize, f: usize) -> Result<(), SparseError> {
    if state.len() == len {
        Ok(())
    } else {
        Err(SparseError::invalid(format!(
            "front {f}'s right-hand side arrived with {} values instead of {len}",
            state.len()
        )))
    }
}
