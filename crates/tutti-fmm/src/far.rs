//! The far field of a rank: M2L into the local expansions of every cell above its leaves,
//! in chunks (on the host, or with the device kernels of `gpu::m2l`), then L2L from the top
//! down.

use std::ops::Range;

use rayon::prelude::*;
use tutti_backend::{Device, KernelModule};

use crate::evaluate::Shared;
use crate::operators::{l2l, m2l_f32, m2l_f64, Derivatives, LANES};
use crate::options::Precision;
use crate::partition::covers;
use crate::FmmError;

/// Up to [`LANES`] M2L sources of one target: (target node, source nodes, sources used).
pub(crate) type M2lGroup = (u32, [u32; LANES], usize);

/// Local expansions of every node covering this rank's leaves: M2L in chunks of pairs (on
/// `device` with `module`'s kernels when given, else on the host), then L2L from the top
/// down. Returns them with the number of M2L chunks.
///
/// Errors: only from the device path ([`FmmError::Backend`] and the kernels' size limits).
pub(crate) fn far_field(
    shared: &Shared<'_>,
    me: usize,
    multipoles: &[f64],
    kernels: Option<(&Device, &'static KernelModule)>,
) -> Result<(Vec<f64>, usize), FmmError> {
    let (tree, basis, t) = (shared.tree, shared.basis, shared.basis.len());
    let mine = &shared.partition.leaf_ranges[me];
    let groups = m2l_groups(shared, mine);
    let groups_per_chunk = (shared.m2l_chunk / LANES).max(1);
    let (mut locals, chunks) = match kernels {
        None => {
            let mut locals = vec![0.0; tree.nodes.len() * t];
            let chunks = m2l_pass(shared, &groups, groups_per_chunk, multipoles, &mut locals);
            (locals, chunks)
        }
        Some((device, module)) => {
            // The device holds derivatives in f64 whatever the precision: as many bytes per
            // chunk as the host's f32 buffer takes half as many groups.
            let groups_per_chunk = match shared.precision {
                Precision::F32 => (groups_per_chunk / 2).max(1),
                _ => groups_per_chunk,
            };
            crate::gpu::m2l_on_device(
                device,
                shared,
                &groups,
                multipoles,
                groups_per_chunk,
                module,
            )?
        }
    };
    for range in tree.levels.iter().skip(1) {
        let (above, current) = locals.split_at_mut(range.start * t);
        current[..range.len() * t]
            .par_chunks_mut(t)
            .enumerate()
            .for_each_init(
                || vec![0.0; t],
                |powers, (offset, local)| {
                    let node = &tree.nodes[range.start + offset];
                    if !covers(node, mine) {
                        return;
                    }
                    let parent = node.parent as usize;
                    let from = &above[parent * t..(parent + 1) * t];
                    let parent_center = tree.nodes[parent].center;
                    l2l(basis, from, parent_center, node.center, local, powers);
                },
            );
    }
    Ok((locals, chunks))
}

/// The M2L groups of every node covering `mine`: up to [`LANES`] sources each, cut from the
/// start of each target's list, so that grouping (hence rounding) depends neither on ranks
/// nor on chunks. A target's groups are consecutive.
pub(crate) fn m2l_groups(shared: &Shared<'_>, mine: &Range<usize>) -> Vec<M2lGroup> {
    let mut groups = Vec::new();
    for (index, node) in shared.tree.nodes.iter().enumerate() {
        if covers(node, mine) {
            for sources in shared.lists.m2l_of(index).chunks(LANES) {
                let mut lanes = [0u32; LANES];
                lanes[..sources.len()].copy_from_slice(sources);
                groups.push((index as u32, lanes, sources.len()));
            }
        }
    }
    groups
}

/// The runs of consecutive groups of `batch` with the same target; each run updates one
/// local expansion, adding its groups in list order.
pub(crate) fn runs_of(batch: &[M2lGroup]) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..=batch.len() {
        if i == batch.len() || batch[i].0 != batch[start].0 {
            runs.push(start..i);
            start = i;
        }
    }
    runs
}

/// M2L of `groups` into `locals` on the host, `groups_per_chunk` groups at a time: kernel
/// derivatives of a chunk's pairs first, then the contractions. Returns the chunk count.
fn m2l_pass(
    shared: &Shared<'_>,
    groups: &[M2lGroup],
    groups_per_chunk: usize,
    multipoles: &[f64],
    locals: &mut [f64],
) -> usize {
    let (tree, basis, t) = (shared.tree, shared.basis, shared.basis.len());
    let stride = t * LANES;
    let multipoles32: Vec<f32> = match shared.precision {
        Precision::F32 => multipoles.iter().map(|&m| m as f32).collect(),
        _ => Vec::new(),
    };
    let mut derivatives =
        Derivatives::zeros(shared.precision, groups_per_chunk.min(groups.len()), t);
    let mut chunks = 0;
    for batch in groups.chunks(groups_per_chunk) {
        chunks += 1;
        // Kernel derivatives of every pair of the batch, interleaved by lane.
        let fill = |exact: &mut Vec<f64>, group: &M2lGroup, lane: usize| {
            let (target, sources, used) = group;
            if lane < *used {
                let za = tree.nodes[*target as usize].center;
                let zb = tree.nodes[sources[lane] as usize].center;
                let r = [za[0] - zb[0], za[1] - zb[1], za[2] - zb[2]];
                basis.kernel_derivatives(r, shared.softening2, exact);
            } else {
                exact.fill(0.0);
            }
        };
        match &mut derivatives {
            Derivatives::F64(buffer) => buffer[..batch.len() * stride]
                .par_chunks_mut(stride)
                .zip(batch)
                .for_each_init(
                    || vec![0.0; t],
                    |exact, (out, group)| {
                        for lane in 0..LANES {
                            fill(exact, group, lane);
                            for (n, &e) in exact.iter().enumerate() {
                                out[n * LANES + lane] = e;
                            }
                        }
                    },
                ),
            Derivatives::F32(buffer) => buffer[..batch.len() * stride]
                .par_chunks_mut(stride)
                .zip(batch)
                .for_each_init(
                    || vec![0.0; t],
                    |exact, (out, group)| {
                        for lane in 0..LANES {
                            fill(exact, group, lane);
                            for (n, &e) in exact.iter().enumerate() {
                                out[n * LANES + lane] = e as f32;
                            }
                        }
                    },
                ),
        }
        let runs = runs_of(batch);
        let updated: Vec<Vec<f64>> = runs
            .par_iter()
            .map(|run| {
                let a = batch[run.start].0 as usize;
                let mut local = locals[a * t..(a + 1) * t].to_vec();
                let mut gathered = vec![0.0f64; stride];
                let mut gathered32 = vec![0.0f32; stride];
                for i in run.clone() {
                    let (_, sources, used) = &batch[i];
                    let d = i * stride..(i + 1) * stride;
                    match &derivatives {
                        Derivatives::F64(buffer) => {
                            interleave(multipoles, sources, *used, t, &mut gathered);
                            m2l_f64(basis, &gathered, &buffer[d], &mut local);
                        }
                        Derivatives::F32(buffer) => {
                            interleave(&multipoles32, sources, *used, t, &mut gathered32);
                            m2l_f32(basis, &gathered32, &buffer[d], &mut local);
                        }
                    }
                }
                local
            })
            .collect();
        for (run, local) in runs.iter().zip(updated) {
            let a = batch[run.start].0 as usize;
            locals[a * t..(a + 1) * t].copy_from_slice(&local);
        }
    }
    chunks
}

/// Copies the multipoles of `sources[..used]` into `out`, interleaved by lane; unused lanes
/// are zero.
fn interleave<T: Copy + Default>(
    multipoles: &[T],
    sources: &[u32; LANES],
    used: usize,
    t: usize,
    out: &mut [T],
) {
    for lane in 0..LANES {
        if lane < used {
            let b = sources[lane] as usize;
            for (n, &m) in multipoles[b * t..(b + 1) * t].iter().enumerate() {
                out[n * LANES + lane] = m;
            }
        } else {
            for n in 0..t {
                out[n * LANES + lane] = T::default();
            }
        }
    }
}
