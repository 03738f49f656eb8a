//! A shared front factored by all the ranks of its range together, its columns dealt
//! block-cyclically (blocks of [`crate::dense::PANEL`] columns, block b to the range's rank `b mod q`).
//!
//! The front's owner (the range's first rank) assembles it and scatters each rank its
//! columns. For each panel, the rank holding it factors it (its columns are up to date: it
//! applied every earlier panel to them) and broadcasts it with its pivot rows; every rank of
//! the range swaps those rows in its own columns and updates its own blocks right of the
//! panel. With a lookahead of one panel: the holder of the next panel updates that panel's
//! block first and factors it before its other updates, so it is ready to broadcast while
//! the other ranks are still updating, and no rank idles through a panel's factorization. At the end the owner gathers the columns back and keeps the factors and the
//! contribution block, as if it had factored the front alone. Every column sees the kernel
//! calls of [`crate::dense::factor_front`] on the same data, so the factors are bitwise
//! those of one rank; the ranks of the range share the trailing updates, which dominate.
//!
//! Every rank of the group takes part in the collectives (ranks outside the range send and
//! keep nothing), so the shared fronts are visited in the same postorder everywhere. The
//! collectives move `f64`s: complex values travel as `(re, im)` pairs ([`Scalar::pack`]).

use std::ops::Range;

use tutti_group::Comm;

use crate::dense::{
    apply_swaps, block_of, column_blocks, extract, factor_panel, panels, update_block, Pivoting,
};
use crate::numeric::FrontFactor;
use crate::symbolic::Front;
use crate::{Scalar, SparseError};

/// What one rank gets from factoring a shared front.
pub(crate) struct Outcome<T> {
    /// At the owner, the front's factors and its contribution block; elsewhere `None`.
    pub kept: Option<(FrontFactor<T>, Vec<T>)>,
    /// The pivots this rank perturbed (in the panels it factored).
    pub perturbed: usize,
}

/// A front shared by the ranks `ranks` (at least two), owned by `ranks.start`.
pub(crate) struct SharedFront<'a> {
    pub front: &'a Front,
    pub ranks: Range<usize>,
}

impl SharedFront<'_> {
    fn owner(&self) -> usize {
        self.ranks.start
    }

    /// The rank holding column block `block`.
    fn holder(&self, block: usize) -> usize {
        self.ranks.start + block % self.ranks.len().max(1)
    }

    /// The column ranges of the blocks `rank` holds, in order.
    fn columns_of(&self, rank: usize) -> Vec<Range<usize>> {
        column_blocks(0, self.front.order())
            .filter(|block| self.holder(block_of(block.start)) == rank)
            .collect()
    }

    /// Factors the front with the other ranks of its range. At the owner, `dense` holds the
    /// assembled front (column-major) and receives the factored one; elsewhere in the range it
    /// is a workspace.
    ///
    /// Errors: a collective's (another rank failed).
    pub fn factor<T: Scalar>(
        &self,
        comm: &Comm<'_>,
        dense: &mut Vec<T>,
        pivoting: Pivoting,
    ) -> Result<Outcome<T>, SparseError> {
        let rank = comm.rank();
        let m = self.front.order();
        let p = self.front.pivots;
        let inside = self.ranks.contains(&rank);
        let mine = self.columns_of(rank);

        // The owner deals the columns.
        let dealt = (rank == self.owner()).then(|| {
            (0..comm.size())
                .map(|r| {
                    let mut columns = Vec::new();
                    if r != rank {
                        for block in self.columns_of(r) {
                            T::pack(&dense[block.start * m..block.end * m], &mut columns);
                        }
                    }
                    columns
                })
                .collect::<Vec<_>>()
        });
        let received = comm.scatter(self.owner(), dealt.as_deref())?;
        if inside && rank != self.owner() {
            dense.clear();
            dense.resize(m * m, T::ZERO);
            place(dense, m, &mine, &received)?;
        }

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
                    None => factor_panel(dense, m, p, panel.clone(), pivoting),
                };
                perturbed += count;
                T::pack(&dense[panel.start * m..panel.end * m], &mut message);
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
                if rank != root {
                    let columns = T::unpack(&message[..packed]).ok_or_else(|| odd(packed))?;
                    dense[panel.start * m..panel.end * m].copy_from_slice(&columns);
                }
                // The holder of the next panel brings its block up to date and factors it
                // before its other updates, so the next broadcast need not wait for them.
                // Every column still sees the same kernel calls in the same order.
                let next = all_panels
                    .get(i + 1)
                    .filter(|next| self.holder(block_of(next.start)) == rank);
                let ahead_block = next.and_then(|_| column_blocks(panel.end, m).next());
                if let (Some(next), Some(block)) = (next, ahead_block.clone()) {
                    apply_swaps(dense, m, panel.start, &panel_swaps, block.clone());
                    update_block(dense, m, panel.clone(), block);
                    factored_ahead = Some(factor_panel(dense, m, p, next.clone(), pivoting));
                }
                for block in &mine {
                    if ahead_block.as_ref() == Some(block) {
                        continue;
                    }
                    for columns in [
                        block.start..block.end.min(panel.start),
                        block.start.max(panel.end)..block.end,
                    ] {
                        if !columns.is_empty() {
                            apply_swaps(dense, m, panel.start, &panel_swaps, columns);
                        }
                    }
                }
                for block in column_blocks(panel.end, m) {
                    if self.holder(block_of(block.start)) == rank
                        && ahead_block.as_ref() != Some(&block)
                    {
                        update_block(dense, m, panel.clone(), block);
                    }
                }
            }
            swaps.extend(panel_swaps);
        }

        // The owner gathers the columns back.
        let mut send = Vec::new();
        if inside && rank != self.owner() {
            for block in &mine {
                T::pack(&dense[block.start * m..block.end * m], &mut send);
            }
        }
        let gathered = comm.gather(self.owner(), &send)?;
        let Some(gathered) = gathered else {
            return Ok(Outcome {
                kept: None,
                perturbed,
            });
        };
        for r in self.ranks.clone().filter(|&r| r != rank) {
            place(dense, m, &self.columns_of(r), &gathered[r])?;
        }
        Ok(Outcome {
            kept: Some(extract(dense, self.front, swaps)),
            perturbed,
        })
    }
}

/// A packed message of `len` `f64`s that holds no whole number of values.
fn odd(len: usize) -> SparseError {
    SparseError::invalid(format!(
        "a message of {len} numbers holds no whole number of values"
    ))
}

/// Copies `packed` (the blocks' columns, concatenated, packed by [`Scalar::pack`]) into
/// their places in `dense`.
fn place<T: Scalar>(
    dense: &mut [T],
    m: usize,
    blocks: &[Range<usize>],
    packed: &[f64],
) -> Result<(), SparseError> {
    let expected: usize = blocks.iter().map(|b| b.len() * m).sum();
    let columns = T::unpack(packed).ok_or_else(|| odd(packed.len()))?;
    if columns.len() != expected {
        return Err(SparseError::invalid(format!(
            "{} values arrived for {expected} of a front's columns",
            columns.len()
        )));
    }
    let mut at = 0;
    for block in blocks {
        let len = block.len() * m;
        dense[block.start * m..block.end * m].copy_from_slice(&columns[at..at + len]);
        at += len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dense::factor_front;
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
                factor_front(&mut alone, &front, pivoting);
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
                        let mut dense = if comm.rank() == ranks.start {
                            assembled.clone()
                        } else {
                            Vec::new()
                        };
                        shared.factor(comm, &mut dense, pivoting)
                    })
                    .expect("run");
                let perturbed: usize = results.iter().map(|outcome| outcome.perturbed).sum();
                assert_eq!(perturbed, want_perturbed);
                for (rank, outcome) in results.into_iter().enumerate() {
                    let Some((factor, contribution)) = outcome.kept else {
                        assert_ne!(rank, ranks.start, "the owner keeps the factors");
                        continue;
                    };
                    assert_eq!(rank, ranks.start);
                    let label = format!("p {pivots}, u {update}, ranks {ranks:?} of {size}");
                    assert_eq!(factor.swaps, want.swaps, "{label}");
                    assert_eq!(bits(&factor.lower), bits(&want.lower), "{label}");
                    assert_eq!(bits(&factor.upper), bits(&want.upper), "{label}");
                    assert_eq!(bits(&contribution), bits(&want_contribution), "{label}");
                }
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
