//! One rank's share of an evaluation: upward pass over its own subtrees, the exchange of
//! multipoles, then the far field (`far.rs`) and the near field (`near.rs`) of its target
//! leaves, their M2L and P2P on the host or as device kernels (`gpu`), as
//! [`Kernels`] says for the rank's device.
//!
//! Every node's expansion is computed with the same operations in the same order whatever
//! the number of ranks, so G ranks give the bits of one.

use std::ops::Range;

use rayon::prelude::*;
use tutti_backend::{Kernels, Progress, ProgressFn};
use tutti_group::{Comm, CommError};

use crate::basis::Basis;
use crate::far::far_field;
use crate::gpu::near_field_on_device;
use crate::kernel::Field;
use crate::near::near_field;
use crate::operators::{m2m, p2m};
use crate::options::{KernelModules, Precision};
use crate::partition::{covers, Partition};
use crate::traversal::InteractionLists;
use crate::tree::Octree;
use crate::FmmError;

/// Everything a rank needs, shared read-only by all ranks.
pub(crate) struct Shared<'a> {
    pub tree: &'a Octree,
    pub lists: &'a InteractionLists,
    pub basis: &'a Basis,
    pub partition: &'a Partition,
    /// Whether each sorted body's field is wanted (`None`: every body's). The host near
    /// field leaves the others' fields zero; the device path computes them all.
    pub wanted: Option<&'a [bool]>,
    pub softening2: f64,
    pub precision: Precision,
    /// M2L pair slots per chunk (pairs go in groups of `LANES` per target).
    pub m2l_chunk: usize,
    /// P2P source bodies per chunk.
    pub p2p_chunk: usize,
    /// Whether ranks run the device kernels or the host code.
    pub kernels: Kernels,
    /// Whether GPU kernels may fuse multiply-adds.
    pub fma: bool,
    /// Where rank 0 reports the phases it finishes.
    pub progress: Option<&'a ProgressFn>,
}

impl Shared<'_> {
    /// Reports phase `PHASES[index]` done, on rank 0 only.
    pub fn phase_done(&self, rank: usize, index: usize) {
        if rank == 0 {
            report_phase(self.progress, index);
        }
    }
}

/// Reports phase `PHASES[index]` done.
pub(crate) fn report_phase(progress: Option<&ProgressFn>, index: usize) {
    tutti_backend::progress::report(
        progress,
        Progress {
            task: "fmm",
            stage: crate::PHASES[index],
            done: index as u64 + 1,
            total: crate::PHASES.len() as u64,
            value: None,
        },
    );
}

/// A rank's results: the fields of the sorted bodies `bodies`.
pub(crate) struct RankOutput {
    pub bodies: Range<usize>,
    pub fields: Vec<Field>,
    pub m2l_chunks: usize,
    pub p2p_chunks: usize,
    pub exchanged_multipoles: usize,
    /// Whether M2L and P2P ran as device kernels.
    pub kernels: bool,
}

/// Every rank's output, gathered on every rank: what a process of a group spanning
/// processes needs to assemble the whole field. The fields travel as four f64 per body
/// (potential, gradient), the counts as u64, both bit for bit.
pub(crate) fn gather_outputs(
    comm: &Comm<'_>,
    mine: RankOutput,
) -> Result<Vec<RankOutput>, FmmError> {
    let counts = [
        mine.bodies.start as u64,
        mine.bodies.end as u64,
        mine.m2l_chunks as u64,
        mine.p2p_chunks as u64,
        mine.exchanged_multipoles as u64,
        u64::from(mine.kernels),
    ];
    let flat: Vec<f64> = mine
        .fields
        .iter()
        .flat_map(|f| [f.psi, f.grad[0], f.grad[1], f.grad[2]])
        .collect();
    let all_counts = comm.allgather(&counts)?;
    let all_fields = comm.allgather(&flat)?;
    let size = |value: u64| {
        usize::try_from(value).map_err(|_| {
            FmmError::Comm(CommError::Transport(format!(
                "a rank sent a count of {value}"
            )))
        })
    };
    all_counts
        .iter()
        .zip(all_fields)
        .map(|(counts, flat)| {
            let [start, end, m2l, p2p, exchanged, kernels] = counts[..] else {
                return Err(FmmError::Comm(CommError::Transport(format!(
                    "a rank sent {} counts, not 6",
                    counts.len()
                ))));
            };
            let fields: Vec<Field> = flat
                .chunks_exact(4)
                .map(|f| Field {
                    psi: f[0],
                    grad: [f[1], f[2], f[3]],
                })
                .collect();
            let bodies = size(start)?..size(end)?;
            if fields.len() != bodies.len() {
                return Err(FmmError::Comm(CommError::Transport(format!(
                    "a rank sent {} fields for {} bodies",
                    fields.len(),
                    bodies.len()
                ))));
            }
            Ok(RankOutput {
                bodies,
                fields,
                m2l_chunks: size(m2l)?,
                p2p_chunks: size(p2p)?,
                exchanged_multipoles: size(exchanged)?,
                kernels: kernels != 0,
            })
        })
        .collect()
}

/// Runs rank `comm.rank()`'s share: collectives on the rank's thread, computation in the
/// rank's thread pool.
pub(crate) fn run_rank(comm: &Comm<'_>, shared: &Shared<'_>) -> Result<RankOutput, FmmError> {
    let me = comm.rank();
    let pool = comm.device().thread_pool()?;
    let mut multipoles = pool.install(|| upward_owned(shared, me));
    let exchanged = exchange(comm, shared, &mut multipoles)?;
    let device = comm.device();

    let kernels = KernelModules::for_rank(shared.kernels, device, shared.fma);
    let (bodies, fields, m2l_chunks, p2p_chunks) = pool.install(|| {
        upward_shared(shared, &mut multipoles);
        shared.phase_done(me, 1);
        let m2l = kernels.map(|k| (device, k.m2l));
        let (locals, m2l_chunks) = far_field(shared, me, &multipoles, m2l)?;
        shared.phase_done(me, 2);
        let near = match kernels {
            None => near_field(shared, me, &locals),
            Some(k) => near_field_on_device(shared, me, &locals, device, k.p2p),
        };
        shared.phase_done(me, 3);
        near.map(|(bodies, fields, p2p_chunks)| (bodies, fields, m2l_chunks, p2p_chunks))
    })?;
    Ok(RankOutput {
        bodies,
        fields,
        m2l_chunks,
        p2p_chunks,
        exchanged_multipoles: exchanged,
        kernels: kernels.is_some(),
    })
}

/// Multipoles of every node whose leaves all belong to `me` (others left zero), deepest
/// level first.
fn upward_owned(shared: &Shared<'_>, me: usize) -> Vec<f64> {
    let (tree, basis, t) = (shared.tree, shared.basis, shared.basis.len());
    let mut multipoles = vec![0.0; tree.nodes.len() * t];
    for range in tree.levels.iter().rev() {
        let (upper, lower) = multipoles.split_at_mut(range.end * t);
        let level = &mut upper[range.start * t..];
        level.par_chunks_mut(t).enumerate().for_each_init(
            || vec![0.0; t],
            |powers, (offset, out)| {
                let index = range.start + offset;
                let node = &tree.nodes[index];
                if shared.partition.owner(node) != Some(me) {
                    return;
                }
                if node.is_leaf() {
                    p2m(
                        basis,
                        node.center,
                        &tree.positions[node.begin..node.end],
                        &tree.masses[node.begin..node.end],
                        out,
                    );
                } else {
                    for child in node.children() {
                        let at = (child - range.end) * t;
                        let c = &tree.nodes[child];
                        m2m(
                            basis,
                            &lower[at..at + t],
                            c.center,
                            node.center,
                            out,
                            powers,
                        );
                    }
                }
            },
        );
    }
    multipoles
}

/// Multipoles of the nodes spanning several ranks, from their children (every rank computes
/// the same ones the same way).
fn upward_shared(shared: &Shared<'_>, multipoles: &mut [f64]) {
    let (tree, basis, t) = (shared.tree, shared.basis, shared.basis.len());
    let mut powers = vec![0.0; t];
    let mut sum = vec![0.0; t];
    for range in tree.levels.iter().rev() {
        for index in range.clone() {
            let node = &tree.nodes[index];
            if shared.partition.owner(node).is_some() {
                continue;
            }
            sum.fill(0.0);
            for child in node.children() {
                let c = &tree.nodes[child];
                let from = &multipoles[child * t..(child + 1) * t];
                m2m(basis, from, c.center, node.center, &mut sum, &mut powers);
            }
            multipoles[index * t..(index + 1) * t].copy_from_slice(&sum);
        }
    }
}

/// Receives from their owners the multipoles this rank needs and does not own: the M2L
/// sources of its target nodes and the children of shared nodes (request, then reply).
/// Returns how many multipoles arrived.
fn exchange(
    comm: &Comm<'_>,
    shared: &Shared<'_>,
    multipoles: &mut [f64],
) -> Result<usize, FmmError> {
    let ranks = comm.size();
    if ranks == 1 {
        return Ok(0);
    }
    let (tree, partition, t) = (shared.tree, shared.partition, shared.basis.len());
    let me = comm.rank();
    let mine = &partition.leaf_ranges[me];
    let mut needed = Vec::new();
    for (index, node) in tree.nodes.iter().enumerate() {
        if covers(node, mine) {
            needed.extend_from_slice(shared.lists.m2l_of(index));
        }
        if partition.owner(node).is_none() {
            needed.extend(node.children().map(|c| c as u32));
        }
    }
    needed.sort_unstable();
    needed.dedup();
    let mut requests = vec![Vec::new(); ranks];
    for &source in &needed {
        if let Some(owner) = partition.owner(&tree.nodes[source as usize]) {
            if owner != me {
                requests[owner].push(source);
            }
        }
    }
    let asked = comm.all_to_all(&requests)?;
    let replies: Vec<Vec<f64>> = asked
        .iter()
        .map(|ids| {
            ids.iter()
                .flat_map(|&b| &multipoles[b as usize * t..(b as usize + 1) * t])
                .copied()
                .collect()
        })
        .collect();
    let received = comm.all_to_all(&replies)?;
    let mut count = 0;
    for (ids, values) in requests.iter().zip(&received) {
        if values.len() != ids.len() * t {
            return Err(FmmError::Comm(tutti_group::CommError::Mismatch(format!(
                "expected {} multipole values, received {}",
                ids.len() * t,
                values.len()
            ))));
        }
        for (&b, value) in ids.iter().zip(values.chunks_exact(t)) {
            multipoles[b as usize * t..(b as usize + 1) * t].copy_from_slice(value);
        }
        count += ids.len();
    }
    Ok(count)
}
