//! A shared front assembled where its columns are factored: each rank of its range adds
//! the matrix's entries of its own columns, and the columns of the children's contribution
//! blocks go, in one all-to-all, from the ranks holding them to the ranks holding the
//! parent's columns they land in. No rank ever holds the whole front, nor a shared child's
//! whole block.
//!
//! Every entry receives the matrix's values in the analysis's order, then one value from
//! each child, in the children's order: the sums of one rank's assembly
//! ([`crate::numeric::FrontFactorizer::assemble`]), so the bits are the same.

use tutti_group::Comm;

use crate::dense::block_of;
use crate::mapping::Mapping;
use crate::numeric::missing_contribution as missing;
use crate::shared_front::{BlockColumns, LocalColumns, SharedFront};
use crate::symbolic::Symbolic;
use crate::{Scalar, SparseError};

/// Where the children's contribution blocks are: a local child's whole on its rank, a
/// shared child's by columns on the ranks of its range. Each is taken when sent.
pub(crate) struct Blocks<'a, T> {
    pub local: &'a mut [Option<Vec<T>>],
    pub shared: &'a mut [Option<BlockColumns<T>>],
}

/// The rank holding column `b` of front `c`'s contribution block.
pub(crate) fn block_column_holder(
    symbolic: &Symbolic,
    mapping: &Mapping,
    c: usize,
    b: usize,
) -> usize {
    if mapping.local[c] {
        mapping.owner[c]
    } else {
        let front = &symbolic.fronts[c];
        SharedFront {
            front,
            ranks: mapping.ranks[c].clone(),
        }
        .holder(block_of(front.pivots + b))
    }
}

/// Assembles shared front `f` (every rank of the group calls this): this rank's columns,
/// from `values` (on the analysed pattern) and the children's blocks in `blocks` (those
/// this rank holds are taken).
///
/// Errors: a collective's; a child's block missing where the mapping puts it; a message of
/// the wrong length.
pub(crate) fn assemble<T: Scalar>(
    comm: &Comm<'_>,
    symbolic: &Symbolic,
    mapping: &Mapping,
    f: usize,
    values: &[T],
    blocks: Blocks<'_, T>,
) -> Result<LocalColumns<T>, SparseError> {
    let rank = comm.rank();
    let front = &symbolic.fronts[f];
    let shared = SharedFront {
        front,
        ranks: mapping.ranks[f].clone(),
    };
    let mine = if shared.ranks.contains(&rank) {
        shared.columns_of(rank)
    } else {
        Vec::new()
    };
    let mut local = LocalColumns::zeroed(mine, front.order())?;
    for &(p, row, col) in &symbolic.entries[symbolic.entry_ptr[f]..symbolic.entry_ptr[f + 1]] {
        if let Some(column) = local.column_mut(col) {
            column[row] += values[p];
        }
    }

    // Each block column this rank holds, to the holder of the column it lands in.
    let mut send: Vec<Vec<f64>> = vec![Vec::new(); comm.size()];
    let lands = |position: usize| shared.holder(block_of(position));
    for &c in &front.children {
        let child = &symbolic.fronts[c];
        let u = child.update.len();
        if mapping.local[c] {
            if mapping.owner[c] != rank {
                continue;
            }
            let block = blocks.local[c].take().ok_or_else(|| missing(c))?;
            for (b, &position) in child.in_parent.iter().enumerate() {
                T::pack(&block[b * u..(b + 1) * u], &mut send[lands(position)]);
            }
        } else if mapping.ranks[c].contains(&rank) {
            let block = blocks.shared[c].take().ok_or_else(|| missing(c))?;
            for (b, &position) in child.in_parent.iter().enumerate() {
                if block_column_holder(symbolic, mapping, c, b) == rank {
                    let column = block.column(b).ok_or_else(|| missing(c))?;
                    T::pack(column, &mut send[lands(position)]);
                }
            }
        }
    }
    let received = comm.all_to_all(&send)?;
    drop(send);

    // Added in the children's order, each column's rows in order.
    let received = received
        .iter()
        .map(|message| {
            T::unpack(message).ok_or_else(|| {
                SparseError::invalid(format!(
                    "a message of {} numbers holds no whole number of values",
                    message.len()
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut read = vec![0usize; received.len()];
    for &c in &front.children {
        let child = &symbolic.fronts[c];
        let u = child.update.len();
        for (b, &position) in child.in_parent.iter().enumerate() {
            let Some(column) = local.column_mut(position) else {
                continue;
            };
            let source = block_column_holder(symbolic, mapping, c, b);
            let start = read[source];
            let values = received
                .get(source)
                .and_then(|message| message.get(start..start + u))
                .ok_or_else(|| missing(c))?;
            read[source] = start + u;
            for (&value, &row) in values.iter().zip(&child.in_parent) {
                column[row] += value;
            }
        }
    }
    if read
        .iter()
        .zip(&received)
        .any(|(&r, message)| r != message.len())
    {
        return Err(SparseError::invalid(format!(
            "front {f}'s assembly received values it had no place for"
        )));
    }
    Ok(local)
}
