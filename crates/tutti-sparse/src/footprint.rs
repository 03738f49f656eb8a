//! What one rank's part of a factorization needs in memory, for `tutti-plan`: its factors,
//! and its working set (the largest front it assembles or helps factor, with the
//! contribution blocks alive at that moment and, for a shared front's owner, the blocks
//! gathered to it and the columns it deals), sized from the analysis and the mapping before
//! any numeric work.

use tutti_backend::{Device, Resources};
use tutti_plan::{Budget, ObjectSpec, Plan, Planner, Tier};

use crate::mapping::Mapping;
use crate::symbolic::Symbolic;
use crate::{Scalar, SparseError};

const F64: u64 = std::mem::size_of::<f64>() as u64;

/// One rank's entries: its factors, and the peak of its working set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RankFootprint {
    pub factors: u64,
    pub working: u64,
}

/// Rank `rank`'s footprint under `mapping`, in entries.
pub(crate) fn rank_footprint(symbolic: &Symbolic, mapping: &Mapping, rank: usize) -> RankFootprint {
    let square = |u: usize| (u as u64).saturating_mul(u as u64);
    let fronts = &symbolic.fronts;
    let mut factors = 0u64;
    let mut live = 0u64;
    let mut peak = 0u64;
    let own = |f: usize, factors: &mut u64| {
        let (p, u) = (fronts[f].pivots as u64, fronts[f].update.len() as u64);
        *factors = factors.saturating_add(p.saturating_mul(p).saturating_add(2 * p * u));
    };
    for f in mapping.local_fronts(rank) {
        let front = &fronts[f];
        let children: u64 = front
            .children
            .iter()
            .map(|&c| square(fronts[c].update.len()))
            .sum();
        peak = peak.max(live.saturating_add(square(front.order())));
        live = live
            .saturating_sub(children)
            .saturating_add(square(front.update.len()));
        own(f, &mut factors);
    }
    for f in mapping.shared_fronts() {
        let front = &fronts[f];
        let sent: u64 = front
            .children
            .iter()
            .filter(|&&c| mapping.owner[c] == rank)
            .map(|&c| square(fronts[c].update.len()))
            .sum();
        if mapping.owner[f] == rank {
            let gathered: u64 = front
                .children
                .iter()
                .map(|&c| square(fronts[c].update.len()))
                .sum();
            // The front, and the copies of the other ranks' columns dealt from it.
            let dealt = if mapping.ranks[f].len() > 1 {
                square(front.order())
            } else {
                0
            };
            peak = peak.max(
                live.saturating_add(gathered)
                    .saturating_add(square(front.order()))
                    .saturating_add(dealt),
            );
            live = live
                .saturating_sub(sent)
                .saturating_add(square(front.update.len()));
            own(f, &mut factors);
        } else {
            if mapping.ranks[f].contains(&rank) {
                // A rank of the range works in a whole copy of the front.
                peak = peak.max(live.saturating_add(square(front.order())));
            }
            live = live.saturating_sub(sent);
        }
    }
    RankFootprint {
        factors,
        working: peak,
    }
}

/// The memory plan of a real factorization of `symbolic` split among `ranks` ranks on
/// `devices` (this process's devices) within the caps of `resources`: per device, the
/// largest rank's factors and working set, and the solve's vectors; all on the device tier.
/// A complex factorization ([`crate::SplitFactorization`] of a `CsrMatrix<c64>`) plans the
/// same entries at 16 bytes each ([`plan_for`]).
///
/// Errors: [`SparseError::Plan`] when a rank's part does not fit (the planner's numbers),
/// or the devices' memory cannot be read.
pub fn plan(
    symbolic: &Symbolic,
    ranks: usize,
    devices: &[Device],
    resources: &Resources,
) -> Result<Plan, SparseError> {
    plan_entries(symbolic, ranks, devices, resources, F64)
}

/// [`plan`] for a factorization in `T`: the same entries, each counted at
/// `size_of::<T>()` bytes (8 for `f64`, 16 for [`crate::c64`]), as
/// [`crate::SplitFactorization`] plans its own.
///
/// Errors: as [`plan`].
pub fn plan_for<T: Scalar>(
    symbolic: &Symbolic,
    ranks: usize,
    devices: &[Device],
    resources: &Resources,
) -> Result<Plan, SparseError> {
    plan_entries(
        symbolic,
        ranks,
        devices,
        resources,
        std::mem::size_of::<T>() as u64,
    )
}

/// [`plan`] for entries of `entry_bytes` bytes (8 real, 16 complex).
pub(crate) fn plan_entries(
    symbolic: &Symbolic,
    ranks: usize,
    devices: &[Device],
    resources: &Resources,
    entry_bytes: u64,
) -> Result<Plan, SparseError> {
    let mapping = Mapping::new(symbolic, ranks);
    let largest = (0..ranks.max(1))
        .map(|rank| rank_footprint(symbolic, &mapping, rank))
        .fold(RankFootprint::default(), |a, b| RankFootprint {
            factors: a.factors.max(b.factors),
            working: a.working.max(b.working),
        });
    let n = symbolic.unknowns() as u64;
    let objects = [
        ObjectSpec::per_device(
            "fronts and contribution blocks",
            entry_bytes,
            largest.working,
        )
        .first_used_at(0)
        .no_slower_than(Tier::Device),
        ObjectSpec::per_device("factors", entry_bytes, largest.factors)
            .first_used_at(1)
            .no_slower_than(Tier::Device),
        // The permuted right-hand side, z, x and one refinement's residual and iterate.
        ObjectSpec::per_device("solve vectors", entry_bytes, n.saturating_mul(6))
            .first_used_at(2)
            .no_slower_than(Tier::Device),
    ];
    Ok(Planner::new(Budget::from_devices(devices, resources)?).plan(&objects)?)
}
