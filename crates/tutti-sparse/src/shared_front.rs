//! A shared front factored by all the ranks of its range together, its columns dealt
//! block-cyclically (blocks of [`crate::dense::PANEL`] columns, block b to the range's rank
//! `b mod q`), and kept where they were factored.
//!
//! The front's owner (the range's first rank) assembles it and scatters each rank its
//! columns; each rank works in its own columns only. For each panel, the rank holding it
//! factors it (its columns are up to date: it applied every earlier panel to them) and
//! broadcasts it with its pivot rows; every rank of the range swaps those rows in its own
//! columns and updates its own blocks right of the panel. With a lookahead of one panel: the
//! holder of the next panel updates that panel's block first and factors it before its other
//! updates, so it is ready to broadcast while the other ranks are still updating, and no rank
//! idles through a panel's factorization. At the end each rank keeps its columns of L and U
//! ([`FrontColumns`]), so the range holds the front's factors once, and the owner gathers
//! the contribution block for the parent. Every column sees the kernel calls of
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
    /// The column blocks held, in order.
    blocks: Vec<Range<usize>>,
    /// Where each block's first column starts in `values`.
    starts: Vec<usize>,
    /// The columns, block after block.
    values: Vec<T>,
}

impl<T: Scalar> FrontColumns<T> {
    /// Column `j` (`m` entries if fully summed, else `p`), or `None` when not held.
    pub fn column(&self, j: usize) -> Option<&[T]> {
        let index = self.blocks.partition_point(|block| block.end <= j);
        let block = self.blocks.get(index).filter(|b| b.contains(&j))?;
        let pivots_before = j.min(self.p).saturating_sub(block.start.min(self.p));
        let updates_before = j - block.start - pivots_before;
        let at = self.starts[index] + pivots_before * self.m + updates_before * self.p;
        let len = if j < self.p { self.m } else { self.p };
        self.values.get(at..at + len)
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
    /// At the owner, the front's contribution block (column-major `u x u`); elsewhere `None`.
    pub contribution: Option<Vec<T>>,
    /// The pivots this rank perturbed (in the panels it factored).
    pub perturbed: usize,
}

/// A front shared by the ranks `ranks` (at least two), owned by `ranks.start`.
pub(crate) struct SharedFront<'a> {
    pub front: &'a Front,
    pub ranks: Range<usize>,
}

/// The whole columns a rank of the range works in, block after block.
struct LocalColumns<T> {
    m: usize,
    blocks: Vec<Range<usize>>,
    starts: Vec<usize>,
    values: Vec<T>,
}

impl<T: Scalar> LocalColumns<T> {
    fn zeroed(blocks: Vec<Range<usize>>, m: usize) -> Self {
        let mut starts = Vec::with_capacity(blocks.len());
        let mut len = 0;
        for block in &blocks {
            starts.push(len);
            len += block.len() * m;
        }
        Self {
            m,
            blocks,
            starts,
            values: vec![T::ZERO; len],
        }
    }

    /// Where columns `columns` (inside one held block) start and end in `values`.
    fn span(&self, columns: &Range<usize>) -> Option<Range<usize>> {
        let index = self
            .blocks
            .iter()
            .position(|b| b.start <= columns.start && columns.end <= b.end)?;
        let start = self.starts[index] + (columns.start - self.blocks[index].start) * self.m;
        Some(start..start + columns.len() * self.m)
    }

    fn columns(&self, columns: &Range<usize>) -> Result<&[T], SparseError> {
        let span = self.span(columns).ok_or_else(|| not_held(columns))?;
        Ok(&self.values[span])
    }

    fn columns_mut(&mut self, columns: &Range<usize>) -> Result<&mut [T], SparseError> {
        let span = self.span(columns).ok_or_else(|| not_held(columns))?;
        Ok(&mut self.values[span])
    }

    /// The factors kept: fully summed columns whole, update columns their first `p` rows.
    fn keep(&self, p: usize, swaps: Vec<usize>) -> FrontColumns<T> {
        let m = self.m;
        let mut values = Vec::with_capacity(kept_entries(m, p, &self.blocks));
        let mut starts = Vec::with_capacity(self.blocks.len());
        for (block, &start) in self.blocks.iter().zip(&self.starts) {
            starts.push(values.len());
            for (i, j) in block.clone().enumerate() {
                let column = &self.values[start + i * m..start + (i + 1) * m];
                values.extend_from_slice(if j < p { column } else { &column[..p] });
            }
        }
        FrontColumns {
            swaps,
            m,
            p,
            blocks: self.blocks.clone(),
            starts,
            values,
        }
    }
}

/// Columns asked of a rank that does not hold them (a mapping at odds with itself).
fn not_held(columns: &Range<usize>) -> SparseError {
    SparseError::invalid(format!(
        "columns {columns:?} of a shared front are not where they should be"
    ))
}

impl SharedFront<'_> {
    /// The range's first rank: it assembles the front and keeps its contribution block.
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

    /// Factors the front with the other ranks of its range. At the owner, `assembled` holds
    /// the assembled front (column-major); it is read only.
    ///
    /// Errors: a collective's (another rank failed); a message of the wrong length.
    pub fn factor<T: Scalar>(
        &self,
        comm: &Comm<'_>,
        assembled: &[T],
        pivoting: Pivoting,
    ) -> Result<Outcome<T>, SparseError> {
        let rank = comm.rank();
        let m = self.front.order();
        let p = self.front.pivots;
        let inside = self.ranks.contains(&rank);
        let mut local = LocalColumns::zeroed(
            if inside {
                self.columns_of(rank)
            } else {
                Vec::new()
            },
            m,
        );

        // The owner deals the columns (and copies its own).
        let dealt = if rank == self.owner() {
            if assembled.len() != m * m {
                return Err(SparseError::invalid(format!(
                    "a shared front of order {m} was assembled with {} entries",
                    assembled.len()
                )));
            }
            for (block, &start) in local.blocks.iter().zip(&local.starts) {
                local.values[start..start + block.len() * m]
                    .copy_from_slice(&assembled[block.start * m..block.end * m]);
            }
            Some(
                (0..comm.size())
                    .map(|r| {
                        let mut columns = Vec::new();
                        if r != rank {
                            for block in self.columns_of(r) {
                                T::pack(&assembled[block.start * m..block.end * m], &mut columns);
                            }
                        }
                        columns
                    })
                    .collect::<Vec<_>>(),
            )
        } else {
            None
        };
        let received = comm.scatter(self.owner(), dealt.as_deref())?;
        drop(dealt);
        if inside && rank != self.owner() {
            let columns = T::unpack(&received).ok_or_else(|| odd(received.len()))?;
            if columns.len() != local.values.len() {
                return Err(SparseError::invalid(format!(
                    "{} values arrived for {} of a front's columns",
                    columns.len(),
                    local.values.len()
                )));
            }
            local.values.copy_from_slice(&columns);
        }
        drop(received);

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

        // The contribution block (rows and columns p..m) to the owner.
        let mut send = Vec::new();
        if inside {
            for block in &local.blocks {
                for j in block.clone().filter(|&j| j >= p) {
                    let column = local.columns(&(j..j + 1))?;
                    T::pack(&column[p..], &mut send);
                }
            }
        }
        let gathered = comm.gather(self.owner(), &send)?;
        drop(send);
        let contribution = match gathered {
            Some(gathered) => Some(self.contribution_block::<T>(&gathered)?),
            None => None,
        };
        Ok(Outcome {
            part: inside.then(|| local.keep(p, swaps)),
            contribution,
            perturbed,
        })
    }

    /// The contribution block (`u x u`, column-major) from the update columns' lower rows
    /// that each rank of the range sent, in its blocks' order.
    fn contribution_block<T: Scalar>(&self, gathered: &[Vec<f64>]) -> Result<Vec<T>, SparseError> {
        let m = self.front.order();
        let p = self.front.pivots;
        let u = m - p;
        let mut block = vec![T::ZERO; u * u];
        for r in self.ranks.clone() {
            let message = gathered.get(r).ok_or_else(|| odd(0))?;
            let values = T::unpack(message).ok_or_else(|| odd(message.len()))?;
            let columns: Vec<usize> = self
                .columns_of(r)
                .into_iter()
                .flatten()
                .filter(|&j| j >= p)
                .collect();
            if values.len() != columns.len() * u {
                return Err(SparseError::invalid(format!(
                    "{} values of a contribution block arrived from rank {r} for {} columns of {u}",
                    values.len(),
                    columns.len()
                )));
            }
            for (i, j) in columns.into_iter().enumerate() {
                block[(j - p) * u..(j - p + 1) * u].copy_from_slice(&values[i * u..(i + 1) * u]);
            }
        }
        Ok(block)
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
                        let dense = if comm.rank() == ranks.start {
                            assembled.clone()
                        } else {
                            Vec::new()
                        };
                        shared.factor(comm, &dense, pivoting)
                    })
                    .expect("run");
                let perturbed: usize = results.iter().map(|outcome| outcome.perturbed).sum();
                assert_eq!(perturbed, want_perturbed);
                // The factors rebuilt from the columns each rank kept, each column once.
                let m = pivots + update;
                let label = format!("p {pivots}, u {update}, ranks {ranks:?} of {size}");
                let mut lower = vec![T::ZERO; m * pivots];
                let mut upper = vec![T::ZERO; pivots * update];
                let mut held = vec![0usize; m];
                let mut contribution = None;
                let mut kept = 0;
                for (rank, outcome) in results.into_iter().enumerate() {
                    assert_eq!(outcome.part.is_some(), ranks.contains(&rank), "{label}");
                    assert_eq!(outcome.contribution.is_some(), rank == ranks.start);
                    contribution = contribution.or(outcome.contribution);
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
                let contribution = contribution.expect("the owner keeps the contribution");
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
