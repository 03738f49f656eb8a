//! What one rank's part of a factorization needs in memory, for `tutti-plan`: its factors
//! (its local fronts', and its columns of the shared fronts whose range it is in), and the
//! peak of its working set, sized from the analysis and the mapping before any numeric work.
//!
//! The working set is bounded from the way the factorization runs, step by step, never from
//! a guess: a rank's local subtrees on one thread hold one reused front workspace (as large
//! as the largest front so far) and the contribution blocks alive; on several threads every
//! subtree task (one per thread) may be in progress while the others are done
//! ([`crate::forest`]); a rank of a shared front's range holds its columns of the front, the
//! block columns it sends and receives in the assembly's exchange, then a panel, and keeps
//! its columns of the factors and of the front's own block.

use tutti_backend::{Device, Resources};
use tutti_plan::{Budget, ObjectSpec, Plan, Planner, Tier};

use crate::dense::block_of;
use crate::forest::{subtree, Layers};
use crate::mapping::Mapping;
use crate::shared_assembly::block_column_holder;
use crate::shared_front::{kept_entries, panel_entries, SharedFront};
use crate::symbolic::Symbolic;
use crate::{Scalar, SparseError};

const F64: u64 = std::mem::size_of::<f64>() as u64;

/// One rank's entries: its factors, and the peak of its working set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RankFootprint {
    pub factors: u64,
    pub working: u64,
}

/// `a * b` in entries, saturating.
fn entries(a: usize, b: usize) -> u64 {
    (a as u64).saturating_mul(b as u64)
}

/// Front `f`'s contribution block, in entries.
fn contribution(symbolic: &Symbolic, f: usize) -> u64 {
    let u = symbolic.fronts[f].update.len();
    entries(u, u)
}

/// The working set's peak of factoring `fronts` (whole subtrees, in postorder) one after
/// another with one workspace, as [`crate::numeric::FrontFactorizer::factor_subtrees`]
/// does, with `live` entries of contribution blocks alive at the start (those the fronts
/// take among them) and an empty workspace: at each front the workspace (as large as the largest front so
/// far), the contribution blocks alive (its children's among them) and its own, being
/// copied out.
fn sequential_peak(
    symbolic: &Symbolic,
    mut live: u64,
    fronts: impl IntoIterator<Item = usize>,
) -> u64 {
    let (mut workspace, mut peak) = (0u64, 0u64);
    for f in fronts {
        let front = &symbolic.fronts[f];
        workspace = workspace.max(entries(front.order(), front.order()));
        let own = contribution(symbolic, f);
        peak = peak.max(live.saturating_add(workspace).saturating_add(own));
        let children: u64 = front
            .children
            .iter()
            .map(|&c| contribution(symbolic, c))
            .sum();
        live = live.saturating_sub(children).saturating_add(own);
    }
    peak
}

/// The working set's peak of factoring the subtrees of `roots` on `threads` threads, in
/// the two phases of [`crate::forest::factor_forest`]: the subtree tasks, at most
/// `threads` in progress at once (each at most its [`sequential_peak`]) and the others
/// done (their roots' blocks) or not begun; then the fronts above them one at a time, from
/// all the tasks' blocks.
fn forest_peak(symbolic: &Symbolic, roots: &[usize], threads: usize) -> u64 {
    if threads <= 1 {
        return sequential_peak(
            symbolic,
            0,
            roots.iter().flat_map(|&root| subtree(symbolic, root)),
        );
    }
    let layers = Layers::new(symbolic, roots, threads);
    let tasks = layers
        .tasks
        .iter()
        .map(|&f| {
            let done = contribution(symbolic, f);
            let running = sequential_peak(symbolic, 0, subtree(symbolic, f)).max(done);
            (0..=threads)
                .map(|k| if k == 0 { done } else { running })
                .collect::<Vec<_>>()
        })
        .fold(vec![0u64; threads + 1], |held, task| combine(&held, &task));
    let blocks: u64 = layers
        .tasks
        .iter()
        .map(|&f| contribution(symbolic, f))
        .sum();
    let above = sequential_peak(symbolic, blocks, layers.above.iter().copied());
    tasks[threads].max(above)
}

/// Two disjoint parts' states together: `k` tasks in progress split between them in the
/// heaviest way.
fn combine(a: &[u64], b: &[u64]) -> Vec<u64> {
    (0..a.len())
        .map(|k| {
            (0..=k)
                .map(|j| a[k - j].saturating_add(b[j]))
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// Rank `rank`'s footprint under `mapping`, in entries, its local subtrees factored on
/// `threads` threads.
pub(crate) fn rank_footprint(
    symbolic: &Symbolic,
    mapping: &Mapping,
    rank: usize,
    threads: usize,
) -> RankFootprint {
    let fronts = &symbolic.fronts;
    let mut factors = 0u64;
    for f in mapping.local_fronts(rank) {
        let (p, u) = (fronts[f].pivots, fronts[f].update.len());
        factors = factors
            .saturating_add(entries(p, p))
            .saturating_add(entries(p, u).saturating_mul(2));
    }
    // The local subtrees; their roots' blocks stay for the shared fronts.
    let roots = mapping.local_roots(symbolic, rank);
    let mut peak = forest_peak(symbolic, &roots, threads);
    let mut live: u64 = roots.iter().map(|&f| contribution(symbolic, f)).sum();

    // The shared fronts, in postorder.
    for f in mapping.shared_fronts() {
        let front = &fronts[f];
        let (m, p) = (front.order(), front.pivots);
        let u = m - p;
        let shared = SharedFront {
            front,
            ranks: mapping.ranks[f].clone(),
        };
        if !shared.ranks.contains(&rank) {
            continue;
        }
        // The children's block columns this rank holds and sends, and those it receives.
        let (mut held, mut received) = (0u64, 0u64);
        for &c in &front.children {
            let child = &fronts[c];
            let size = child.update.len() as u64;
            for (b, &position) in child.in_parent.iter().enumerate() {
                if block_column_holder(symbolic, mapping, c, b) == rank {
                    held = held.saturating_add(size);
                }
                if shared.holder(block_of(position)) == rank {
                    received = received.saturating_add(size);
                }
            }
        }
        let columns = shared.columns_of(rank);
        let local = entries(m, columns.iter().map(|b| b.len()).sum());
        let kept = kept_entries(m, p, &columns) as u64;
        let own_block = entries(
            u,
            columns
                .iter()
                .map(|b| b.end - b.start.max(p).min(b.end))
                .sum(),
        );
        let panel = 2 * panel_entries(m, p) as u64;
        // The exchange: its columns; the blocks it sends, packed (each child's freed once
        // packed) and in the transport; those it receives, in the transport and copied out
        // (a complex unpacking copies them again once the transport's are freed).
        let exchange = live
            .saturating_add(local)
            .saturating_add(held)
            .saturating_add(received.saturating_mul(2));
        let rest = live.saturating_sub(held).saturating_add(local);
        // Then the panels; then the columns kept, copied out of the working ones.
        let factor = rest.saturating_add(panel);
        let keep = rest.saturating_add(kept).saturating_add(own_block);
        peak = peak.max(exchange).max(factor).max(keep);
        live = live.saturating_sub(held).saturating_add(own_block);
        factors = factors.saturating_add(kept);
    }
    RankFootprint {
        factors,
        working: peak,
    }
}

/// The memory plan of a real factorization of `symbolic` split among `ranks` ranks on
/// `devices` (this process's devices) within the caps of `resources`: per device, the
/// largest rank's factors and working set (its local subtrees on as many threads as the
/// devices have), the matrix's values (each rank keeps them for residuals) and the solve's
/// vectors; all on the device tier.
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
    // Every rank planned with the most threads of a device here (another process's
    // devices are planned by that process).
    let threads = devices.iter().map(Device::threads).max().unwrap_or(1);
    let largest = (0..ranks.max(1))
        .map(|rank| rank_footprint(symbolic, &mapping, rank, threads))
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
        // Every rank keeps the factored matrix's values, for the solves' residuals.
        ObjectSpec::per_device("matrix values", entry_bytes, symbolic.indices.len() as u64)
            .first_used_at(0)
            .no_slower_than(Tier::Device),
        // The permuted right-hand side, z, x, the copy of x the threaded backward pass
        // reads its ancestors from, and one refinement's residual and iterate.
        ObjectSpec::per_device("solve vectors", entry_bytes, n.saturating_mul(7))
            .first_used_at(2)
            .no_slower_than(Tier::Device),
    ];
    Ok(Planner::new(Budget::from_devices(devices, resources)?).plan(&objects)?)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tutti_backend::{GpuUse, Resources};
    use tutti_group::Group;

    use super::*;
    use crate::models::laplacian;
    use crate::ordering::Grid;
    use crate::{analyse, FactorOptions, OrderingMethod, SplitFactorization};

    fn cube(k: usize, leaf_size: usize) -> (crate::CsrMatrix, Arc<Symbolic>) {
        let dims = vec![k; 3];
        let a = laplacian(&dims).expect("laplacian");
        let grid = Grid {
            dims,
            periodic: vec![false; 3],
            block: 1,
        };
        let symbolic = analyse(&a, &OrderingMethod::Grid { grid, leaf_size }).expect("analyse");
        (a, symbolic)
    }

    /// The plan counts, rank by rank, exactly the factor entries each rank keeps: its local
    /// fronts' and its columns of the shared fronts'.
    #[test]
    fn the_plan_counts_each_ranks_factors_exactly() {
        let (a, symbolic) = cube(12, 32);
        for ranks in 1..=4 {
            let group =
                Group::from_resources(&Resources::cpu(ranks), GpuUse::HostOnly).expect("group");
            let split = SplitFactorization::new(
                &group,
                Arc::clone(&symbolic),
                &a,
                FactorOptions::default(),
                &Resources::cpu(ranks),
            )
            .expect("factor");
            let mapping = Mapping::new(&symbolic, ranks);
            for (rank, part) in split.parts().iter().enumerate() {
                let planned = rank_footprint(&symbolic, &mapping, rank, 1).factors;
                assert_eq!(part.factor_bytes(), planned * F64, "rank {rank} of {ranks}");
            }
        }
    }

    /// The two-phase bound is the heaviest state the subtree tasks can reach (every choice
    /// of tasks done and at most `threads` in progress, enumerated) or the fronts above
    /// them reach one at a time; on one thread, the sequential peak.
    #[test]
    fn the_forest_bound_is_the_heaviest_state_of_its_tasks() {
        let (_, symbolic) = cube(10, 8);
        let roots = symbolic.tree.roots();
        let sequential = sequential_peak(
            &symbolic,
            0,
            roots.iter().flat_map(|&root| subtree(&symbolic, root)),
        );
        assert_eq!(forest_peak(&symbolic, &roots, 1), sequential);
        for threads in [2, 3] {
            let layers = Layers::new(&symbolic, &roots, threads);
            let tasks = &layers.tasks;
            assert!((6..=13).contains(&tasks.len()), "{} tasks", tasks.len());
            let done: Vec<u64> = tasks.iter().map(|&f| contribution(&symbolic, f)).collect();
            let running: Vec<u64> = tasks
                .iter()
                .map(|&f| sequential_peak(&symbolic, 0, subtree(&symbolic, f)))
                .collect();
            // Each task not begun (0), done (1) or in progress (2).
            let mut heaviest = 0u64;
            let states = 3usize.pow(tasks.len() as u32);
            for mut state in 0..states {
                let (mut held, mut in_progress) = (0u64, 0);
                for i in 0..tasks.len() {
                    match state % 3 {
                        1 => held += done[i],
                        2 => {
                            held += running[i];
                            in_progress += 1;
                        }
                        _ => {}
                    }
                    state /= 3;
                }
                if in_progress <= threads {
                    heaviest = heaviest.max(held);
                }
            }
            let above = sequential_peak(&symbolic, done.iter().sum(), layers.above.iter().copied());
            assert_eq!(
                forest_peak(&symbolic, &roots, threads),
                heaviest.max(above),
                "{threads} threads"
            );
        }
    }
}
