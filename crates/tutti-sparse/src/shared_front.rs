//! A shared front factored by all the ranks of its range together, its columns dealt
//! block-cyclically (blocks of [`crate::dense::PANEL`] columns, block b to the range's rank
//! `b mod q`), assembled where they are dealt ([`crate::shared_assembly`]) and kept where
//! they were factored.
//!
//! Each rank works in its own columns only. For each panel, the rank holding it factors it
//! (its columns are up to date: it applied every earlier panel to them) and broadcasts it
//! with its pivot rows; every rank of the range swaps those rows in its own columns and
//! updates its own blocks right of the panel. With a lookahead of one panel: the holder of
//! the next panel updates that panel's block first and factors it before its other updates,
//! so it is ready to broadcast while the other ranks are still updating, and no rank idles
//! through a panel's factorization. At the end each rank keeps its columns of L and U
//! ([`FrontColumns`]) and of the contribution block ([`BlockColumns`], for the parent's
//! assembly), so the range holds the front once. Every column sees the kernel calls of
//! [`crate::dense::factor_front`] on the same data, so the factors are bitwise those of one
//! rank; the ranks of the range share the trailing updates, which dominate, and the front's
//! memory. The solves run through the columns where they are ([`crate::shared_solve`]).
//!
//! Every rank of the group takes part in the collectives (ranks outside the range send and
//! keep nothing), so the shared fronts are visited in the same postorder everywhere. The
//! collectives move `f64`s: complex values travel as `(re, im)` pairs ([`Scalar::pack`]).

use std::ops::Range;

use tutti_group::Comm;

use crate::dense::{
    block_of, column_blocks, factor_panel_columns, panels, swap_rows, update_columns, Pivoting,
    PANEL,
};
use crate::symbolic::Front;
use crate::{Scalar, SparseError};

/// One rank's columns of a factored shared front: for a fully summed column (`j < p`) all
/// `m` rows (U11 on and above the diagonal, the unit lower L11 below it, then L21); for an
/// update column its first `p` rows (U12). Every rank of the range holds the front's pivot
/// order.
#[derive(Clone, Debug)]
pub(crate) struct FrontColumns<T> {
    /// At step k, row k was swapped with row `swaps[k]` (the whole front's).
    pub swaps: Vec<usize>,
    /// The front's order `m` and fully summed count `p`.
    m: usize,
    p: usize,
    /// Where each of the front's columns starts in `values`, if held.
    offsets: Vec<Option<usize>>,
    /// The columns, block after block.
    values: Vec<T>,
}

impl<T: Scalar> FrontColumns<T> {
    /// Column `j` (`m` entries if fully summed, else `p`), or `None` when not held.
    pub fn column(&self, j: usize) -> Option<&[T]> {
        let start = (*self.offsets.get(j)?)?;
        let len = if j < self.p { self.m } else { self.p };
        self.values.get(start..start + len)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.values.len()
    }
}

/// Entries a rank keeps of a front of order `m` with `p` fully summed columns, when it holds
/// `columns`.
pub(crate) fn kept_entries(m: usize, p: usize, columns: &[Range<usize>]) -> usize {
    columns
        .iter()
        .flat_map(|block| block.clone())
        .map(|j| if j < p { m } else { p })
        .sum()
}

/// What one rank gets from factoring a shared front.
pub(crate) struct Outcome<T> {
    /// In the range, this rank's columns of the factors; elsewhere `None`.
    pub part: Option<FrontColumns<T>>,
    /// In the range, this rank's columns of the contribution block; elsewhere `None`.
    pub contribution: Option<BlockColumns<T>>,
    /// The pivots this rank perturbed (in the panels it factored).
    pub perturbed: usize,
}

/// A front shared by the ranks `ranks` (at least two), owned by `ranks.start`.
pub(crate) struct SharedFront<'a> {
    pub front: &'a Front,
    pub ranks: Range<usize>,
}

/// A rank's columns of a shared front's contribution block (the rows below the fully
/// summed ones of its update columns), kept for the parent's assembly.
#[derive(Clone, Debug)]
pub(crate) struct BlockColumns<T> {
    /// The block's order `u`.
    u: usize,
    /// The block's columns held (`j - p` for the front's column `j`), increasing.
    columns: Vec<usize>,
    /// Their values, `u` per column.
    values: Vec<T>,
}

impl<T: Scalar> BlockColumns<T> {
    /// Column `b` of the contribution block, or `None` when not held.
    pub fn column(&self, b: usize) -> Option<&[T]> {
        let i = self.columns.binary_search(&b).ok()?;
        self.values.get(i * self.u..(i + 1) * self.u)
    }
}

/// The whole columns (`m` rows each) a rank of a shared front's range works in, block
/// after block.
pub(crate) struct LocalColumns<T> {
    m: usize,
    blocks: Vec<Range<usize>>,
    /// Where each of the front's columns starts in `values`, if held.
    offsets: Vec<Option<usize>>,
    values: Vec<T>,
}

impl<T: Scalar> LocalColumns<T> {
    /// The columns `blocks` of a front of order `m`, zero.
    ///
    /// Errors: more entries than memory can address.
    pub fn zeroed(blocks: Vec<Range<usize>>, m: usize) -> Result<Self, SparseError> {
        let mut offsets = vec![None; m];
        let mut len = 0usize;
        for block in &blocks {
            for j in block.clone() {
                offsets[j] = Some(len);
                len = len.checked_add(m).ok_or_else(|| SparseError::TooLarge {
                    what: "a shared front's columns",
                    detail: format!("order {m}"),
                })?;
            }
        }
        Ok(Self {
            m,
            blocks,
            offsets,
            values: vec![T::ZERO; len],
        })
    }

    /// Column `j`, if held.
    pub fn column_mut(&mut self, j: usize) -> Option<&mut [T]> {
        let start = (*self.offsets.get(j)?)?;
        self.values.get_mut(start..start + self.m)
    }

    /// Where columns `columns` (inside one held block) start and end in `values`.
    fn span(&self, columns: &Range<usize>) -> Option<Range<usize>> {
        let start = (*self.offsets.get(columns.start)?)?;
        let last = (*self.offsets.get(columns.end.checked_sub(1)?)?)?;
        (last == start + (columns.len() - 1) * self.m).then(|| start..last + self.m)
    }

    fn columns(&self, columns: &Range<usize>) -> Result<&[T], SparseError> {
        let span = self.span(columns).ok_or_else(|| not_held(columns))?;
        Ok(&self.values[span])
    }

    fn columns_mut(&mut self, columns: &Range<usize>) -> Result<&mut [T], SparseError> {
        let span = self.span(columns).ok_or_else(|| not_held(columns))?;
        Ok(&mut self.values[span])
    }

    /// The factors kept: fully summed columns whole, update columns their first `p` rows;
    /// and the update columns' rows below, the contribution block's columns.
    fn keep(&self, p: usize, swaps: Vec<usize>) -> (FrontColumns<T>, BlockColumns<T>) {
        let m = self.m;
        let u = m - p;
        let mut values = Vec::with_capacity(kept_entries(m, p, &self.blocks));
        let mut offsets = vec![None; m];
        let mut block = BlockColumns {
            u,
            columns: Vec::new(),
            values: Vec::new(),
        };
        for columns in &self.blocks {
            for j in columns.clone() {
                let Some(start) = self.offsets[j] else {
                    continue;
                };
                offsets[j] = Some(values.len());
                let column = &self.values[start..start + m];
                if j < p {
                    values.extend_from_slice(column);
                } else {
                    values.extend_from_slice(&column[..p]);
                    block.columns.push(j - p);
                    block.values.extend_from_slice(&column[p..]);
                }
            }
        }
        let factors = FrontColumns {
            swaps,
            m,
            p,
            offsets,
            values,
        };
        (factors, block)
    }
}

/// Columns asked of a rank that does not hold them (a mapping at odds with itself).
fn not_held(columns: &Range<usize>) -> SparseError {
    SparseError::invalid(format!(
        "columns {columns:?} of a shared front are not where they should be"
    ))
}

impl SharedFront<'_> {
    /// The range's first rank: it holds the first column block, so the solve's forward
    /// step starts there.
    pub fn owner(&self) -> usize {
        self.ranks.start
    }

    /// The rank holding column block `block`.
    pub fn holder(&self, block: usize) -> usize {
        self.ranks.start + block % self.ranks.len().max(1)
    }

    /// The column ranges of the blocks `rank` holds, in order.
    pub fn columns_of(&self, rank: usize) -> Vec<Range<usize>> {
        column_blocks(0, self.front.order())
            .filter(|block| self.holder(block_of(block.start)) == rank)
            .collect()
    }

    /// Factors the front with the other ranks of its range, each from its own assembled
    /// columns `local` (none outside the range).
    ///
    /// Errors: a collective's (another rank failed); a message of the wrong length.
    pub fn factor<T: Scalar>(
        &self,
        comm: &Comm<'_>,
        mut local: LocalColumns<T>,
        pivoting: Pivoting,
    ) -> Result<Outcome<T>, SparseError> {
        let rank = comm.rank();
        let m = self.front.order();
        let p = self.front.pivots;
        let inside = self.ranks.contains(&rank);

        let mut swaps = Vec::with_capacity(p);
        let mut perturbed = 0;
        let mut message = Vec::new();
        let all_panels: Vec<Range<usize>> = panels(p).collect();
        // The next panel, factored ahead by its holder (lookahead): its pivot rows and
        // perturbed count.
        let mut factored_ahead: Option<(Vec<usize>, usize)> = None;
        for (i, panel) in all_panels.iter().enumerate() {
            let root = self.holder(block_of(panel.start));
            let width = panel.len();
            message.clear();
            if rank == root {
                let (panel_swaps, count) = match factored_ahead.take() {
                    Some(ahead) => ahead,
                    None => factor_panel_columns(
                        local.columns_mut(panel)?,
                        m,
                        p,
                        panel.clone(),
                        pivoting,
                    ),
                };
                perturbed += count;
                T::pack(local.columns(panel)?, &mut message);
                // Row indices below p < 2^53: exact as doubles.
                message.extend(panel_swaps.iter().map(|&r| r as f64));
            }
            comm.broadcast(root, &mut message)?;
            let packed = width * m * T::PACKED;
            if message.len() != packed + width {
                return Err(SparseError::invalid(format!(
                    "a panel of {width} columns of a front of order {m} arrived as {} values",
                    message.len()
                )));
            }
            let panel_swaps: Vec<usize> = message[packed..].iter().map(|&r| r as usize).collect();
            if inside {
                let panel_columns = T::unpack(&message[..packed]).ok_or_else(|| odd(packed))?;
                // The holder of the next panel brings its block up to date and factors it
                // before its other updates, so the next broadcast need not wait for them.
                // Every column still sees the same kernel calls in the same order.
                let next = all_panels
                    .get(i + 1)
                    .filter(|next| self.holder(block_of(next.start)) == rank);
                let ahead_block = next.and_then(|_| column_blocks(panel.end, m).next());
                if let (Some(next), Some(block)) = (next, &ahead_block) {
                    let columns = local.columns_mut(block)?;
                    swap_rows(columns, m, panel.start, &panel_swaps);
                    update_columns(&panel_columns, columns, m, panel.start);
                    factored_ahead = Some(factor_panel_columns(
                        local.columns_mut(next)?,
                        m,
                        p,
                        next.clone(),
                        pivoting,
                    ));
                }
                let held = local.blocks.clone();
                for block in &held {
                    if ahead_block.as_ref() == Some(block) {
                        continue;
                    }
                    for columns in [
                        block.start..block.end.min(panel.start),
                        block.start.max(panel.end)..block.end,
                    ] {
                        if !columns.is_empty() {
                            swap_rows(local.columns_mut(&columns)?, m, panel.start, &panel_swaps);
                        }
                    }
                }
                for block in column_blocks(panel.end, m) {
                    if self.holder(block_of(block.start)) == rank
                        && ahead_block.as_ref() != Some(&block)
                    {
                        update_columns(&panel_columns, local.columns_mut(&block)?, m, panel.start);
                    }
                }
            }
            swaps.extend(panel_swaps);
        }
        drop(message);
        let (part, contribution) = if inside {
            let (part, block) = local.keep(p, swaps);
            (Some(part), Some(block))
        } else {
            (None, None)
        };
        Ok(Outcome {
            part,
            contribution,
            perturbed,
        })
    }
}

/// Entries of the panel buffer a rank of a shared front's range needs at most.
pub(crate) fn panel_entries(m: usize, p: usize) -> usize {
    m * p.min(PANEL)
}

/// A packed message of `len` `f64`s that holds no whole number of values.
fn odd(len: usize) -> SparseError {
    SparseError::invalid(format!(
        "a message of {len} numbers holds no whole number of values"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dense::{factor_front, Updates};
    use tutti_backend::{GpuUse, Resources};
    use tutti_group::Group;

    /// A matrix entry made from pseudo-random draws.
    type Entry<T> = fn(&mut dyn FnMut() -> f64) -> T;

    /// A front of order `pivots + update` with pseudo-random entries (`entry` made from
    /// the draws of its argument, in `[-0.5, 0.5)`), column `zero` of its fully summed part
    /// zero (a pivot to perturb).
    fn random_front<T: Scalar>(
        pivots: usize,
        update: usize,
        zero: usize,
        entry: Entry<T>,
    ) -> (Front, Vec<T>) {
        let m = pivots + update;
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let mut dense: Vec<T> = (0..m * m).map(|_| entry(&mut next)).collect();
        dense[zero * m..zero * m + pivots].fill(T::ZERO);
        let front = Front {
            first: 0,
            pivots,
            update: (pivots..m).collect(),
            children: Vec::new(),
            in_parent: Vec::new(),
        };
        (front, dense)
    }

    /// Every front of the test, factored by ranges of 2, 3 and 4 ranks, has the factors and
    /// contribution block of one rank, bit for bit.
    fn check_shared_fronts<T: Scalar>(entry: Entry<T>) {
        let pivoting = Pivoting {
            tiny: 1e-300,
            replacement: 1e-8,
        };
        let bits = |v: &[T]| {
            v.iter()
                .map(|x| {
                    let (re, im) = x.parts();
                    (re.to_bits(), im.to_bits())
                })
                .collect::<Vec<_>>()
        };
        // Pivots not a multiple of the panel, an update part, fronts larger and smaller
        // than the range's blocks.
        for (pivots, update, zero) in [(75, 40, 33), (96, 0, 5), (20, 50, 0), (200, 130, 101)] {
            let (front, assembled) = random_front(pivots, update, zero, entry);
            let m = pivots + update;
            let mut alone = assembled.clone();
            let (want, want_contribution, want_perturbed) =
                factor_front(&mut alone, &front, pivoting, Updates::OneThread);
            assert!(want_perturbed >= 1, "column {zero} was zero");
            for (size, ranks) in [(2, 0..2), (3, 0..3), (4, 1..4), (4, 0..4)] {
                let group =
                    Group::from_resources(&Resources::cpu(size), GpuUse::HostOnly).expect("group");
                let shared = SharedFront {
                    front: &front,
                    ranks: ranks.clone(),
                };
                let results = group
                    .run(|comm| {
                        let mine = if ranks.contains(&comm.rank()) {
                            shared.columns_of(comm.rank())
                        } else {
                            Vec::new()
                        };
                        let mut local = LocalColumns::zeroed(mine, m)?;
                        for j in 0..m {
                            if let Some(column) = local.column_mut(j) {
                                column.copy_from_slice(&assembled[j * m..(j + 1) * m]);
                            }
                        }
                        shared.factor(comm, local, pivoting)
                    })
                    .expect("run");
                let perturbed: usize = results.iter().map(|outcome| outcome.perturbed).sum();
                assert_eq!(perturbed, want_perturbed);
                // The factors rebuilt from the columns each rank kept, each column once.
                let label = format!("p {pivots}, u {update}, ranks {ranks:?} of {size}");
                let mut lower = vec![T::ZERO; m * pivots];
                let mut upper = vec![T::ZERO; pivots * update];
                let mut held = vec![0usize; m];
                let mut contribution = vec![T::ZERO; update * update];
                let mut block_held = vec![0usize; update];
                let mut kept = 0;
                for (rank, outcome) in results.into_iter().enumerate() {
                    assert_eq!(outcome.part.is_some(), ranks.contains(&rank), "{label}");
                    if let Some(block) = outcome.contribution {
                        for b in 0..update {
                            if let Some(column) = block.column(b) {
                                block_held[b] += 1;
                                contribution[b * update..(b + 1) * update].copy_from_slice(column);
                            }
                        }
                    }
                    let Some(part) = outcome.part else { continue };
                    assert_eq!(part.swaps, want.swaps, "{label}");
                    kept += part.len();
                    for j in 0..m {
                        let Some(column) = part.column(j) else {
                            continue;
                        };
                        held[j] += 1;
                        assert_eq!(shared.holder(j / PANEL), rank, "{label}: column {j}");
                        if j < pivots {
                            lower[j * m..(j + 1) * m].copy_from_slice(column);
                        } else {
                            let c = j - pivots;
                            upper[c * pivots..(c + 1) * pivots].copy_from_slice(column);
                        }
                    }
                }
                assert!(held.iter().all(|&h| h == 1), "{label}: {held:?}");
                assert_eq!(kept, m * pivots + pivots * update, "{label}");
                assert_eq!(bits(&lower), bits(&want.lower), "{label}");
                assert_eq!(bits(&upper), bits(&want.upper), "{label}");
                assert!(
                    block_held.iter().all(|&h| h == 1),
                    "{label}: {block_held:?}"
                );
                assert_eq!(bits(&contribution), bits(&want_contribution), "{label}");
            }
        }
    }

    #[test]
    fn a_front_factored_by_its_range_has_the_bits_of_one_rank() {
        check_shared_fronts(|next| next());
    }

    #[test]
    fn a_complex_front_factored_by_its_range_has_the_bits_of_one_rank() {
        check_shared_fronts(|next| {
            let re = next();
            faer::c64::new(re, next())
        });
    }

    #[test]
    fn blocks_are_dealt_round_robin_over_the_range() {
        let front = Front {
            first: 0,
            pivots: 70,
            update: (70..100).collect(),
            children: Vec::new(),
            in_parent: Vec::new(),
        };
        let shared = SharedFront {
            front: &front,
            ranks: 2..5,
        };
        assert_eq!(shared.columns_of(2), vec![0..32, 96..100]);
        assert_eq!(shared.columns_of(3), vec![32..64]);
        assert_eq!(shared.columns_of(4), vec![64..96]);
        assert!(shared.columns_of(0).is_empty());
    }
}
