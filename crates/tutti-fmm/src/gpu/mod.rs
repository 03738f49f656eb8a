//! The FMM's two dominant phases as GPU kernels, each with a host twin that performs the
//! host code's operations in its order.
//!
//! - P2P, the near field: [`P2P_MODULE`] (`gpu/p2p.cu`) has one entry, [`P2P_ENTRY`]: one
//!   block per target leaf, a thread per target body (striding over the leaf's bodies when it
//!   has more than the block), adding to each body's field the sum over the leaf's P2P
//!   interaction list, with the body itself skipped in its own leaf. Its inputs are the
//!   tree's Morton-ordered bodies as x, y, z, m columns, each node's body range, and the
//!   interaction lists in CSR form. The host twin runs the host near field's own per-target
//!   code.
//! - M2L, the far field: [`M2L_MODULE`] (`gpu/m2l.cu`, see `m2l_on_device`'s module): the
//!   kernel derivatives of each chunk of pairs, then their contraction with the multipoles
//!   into the local expansions.
//!
//! Compiled without FMA contraction (`fmad: false`, [`P2P_MODULE`], [`M2L_MODULE`]) the
//! kernels compute the host's bits; the `_FMAD` modules are the same sources with
//! contraction, for speed where bitwise agreement does not matter (on a simulated device
//! their twins are the same).
//!
//! [`crate::fmm`] launches them on the ranks that [`crate::Kernels`] names (by default the
//! GPU ranks), with tree, P2M, M2M, L2L and L2P on the host; [`p2p_near_field`] runs the P2P
//! alone.

mod m2l;

pub(crate) use m2l::m2l_on_device;
pub use m2l::{
    M2L_CONTRACT_F32_ENTRY, M2L_CONTRACT_F64_ENTRY, M2L_DERIVATIVES_ENTRY, M2L_MODULE,
    M2L_MODULE_FMAD,
};

use std::ops::Range;

use rayon::prelude::*;
use tutti_backend::kernel::{HostArgs, HostLaunch};
use tutti_backend::{
    Arg, BackendError, Device, ElemKind, KernelEntry, KernelModule, LaunchDims, Param,
};

use crate::evaluate::Shared;
use crate::kernel::{add_near_sources, Field, SourceColumns};
use crate::near::coincident_pair;
use crate::operators::l2p;
use crate::options::validate_bodies;
use crate::solve::Setup;
use crate::traversal::InteractionLists;
use crate::tree::Octree;
use crate::{FmmError, FmmOptions};

/// The entry point of [`P2P_MODULE`] and [`P2P_MODULE_FMAD`].
pub const P2P_ENTRY: &str = "tt_fmm_p2p";

/// Threads per block of the P2P launch (a leaf holds at most `leaf_size` bodies, 64 by
/// default, unless at the depth cap; larger leaves are strided over).
const BLOCK: u32 = 128;

/// The parameters of [`P2P_ENTRY`], in order: `n_leaves`, `leaves`, `list_start`,
/// `list_sources`, `node_begin`, `node_end`, `x`, `y`, `z`, `m`, `softening2`,
/// `body_offset`, then the fields `psi`, `gx`, `gy`, `gz` (read and written).
const P2P_PARAMS: [Param; 16] = [
    Param::U32,
    Param::In(ElemKind::U32),
    Param::In(ElemKind::U64),
    Param::In(ElemKind::U32),
    Param::In(ElemKind::U64),
    Param::In(ElemKind::U64),
    Param::In(ElemKind::F64),
    Param::In(ElemKind::F64),
    Param::In(ElemKind::F64),
    Param::In(ElemKind::F64),
    Param::F64,
    Param::U64,
    Param::InOut(ElemKind::F64),
    Param::InOut(ElemKind::F64),
    Param::InOut(ElemKind::F64),
    Param::InOut(ElemKind::F64),
];

const P2P_ENTRIES: [KernelEntry; 1] = [KernelEntry {
    name: P2P_ENTRY,
    params: &P2P_PARAMS,
    host: p2p_twin,
}];

/// The P2P module (`gpu/p2p.cu`) compiled without FMA contraction: on a GPU it equals its
/// host twin, and so the host near field, bit for bit.
pub static P2P_MODULE: KernelModule = KernelModule {
    name: "tutti_fmm_p2p",
    source: include_str!("p2p.cu"),
    fmad: false,
    entries: &P2P_ENTRIES,
};

/// The same module compiled with FMA contraction (`fmad: true`): on a GPU it agrees with
/// the host to rounding (about 1e-15 relative), not bitwise; on a simulated device its host
/// twin is [`P2P_MODULE`]'s.
pub static P2P_MODULE_FMAD: KernelModule = KernelModule {
    name: "tutti_fmm_p2p_fmad",
    source: include_str!("p2p.cu"),
    fmad: true,
    entries: &P2P_ENTRIES,
};

/// Every kernel module of the crate, for checks that compile them all.
pub fn modules() -> &'static [&'static KernelModule] {
    static MODULES: [&KernelModule; 4] =
        [&P2P_MODULE, &P2P_MODULE_FMAD, &M2L_MODULE, &M2L_MODULE_FMAD];
    &MODULES
}

/// The P2P part of the near field alone: potentials and accelerations (input order) from
/// the direct sums over each leaf's P2P interaction list, for the tree and lists
/// [`crate::fmm`] builds with `options`, the target leaves split among `devices` as among
/// its ranks, each device's share computed by `module`'s [`P2P_ENTRY`] (on a GPU the
/// kernel, on a simulated device its host twin). The far field is left out, so this is not
/// the FMM's result: it is the part of it the kernel computes.
///
/// Coincident bodies without softening give infinite or NaN values here (the evaluation
/// reports them as [`FmmError::CoincidentBodies`]).
///
/// Errors: [`FmmError::InvalidArgument`] for bad options or no devices; those of
/// [`crate::fmm`]'s input checks; [`FmmError::Backend`] for a failed upload, launch or
/// download.
pub fn p2p_near_field(
    positions: &[[f64; 3]],
    masses: &[f64],
    options: &FmmOptions,
    devices: &[Device],
    module: &'static KernelModule,
) -> Result<(Vec<f64>, Vec<[f64; 3]>), FmmError> {
    options.validate()?;
    validate_bodies(positions, masses)?;
    if devices.is_empty() {
        return Err(FmmError::invalid("devices", "at least one device", "none"));
    }
    let n = positions.len();
    let (mut potential, mut accel) = (vec![0.0; n], vec![[0.0; 3]; n]);
    if n == 0 {
        return Ok((potential, accel));
    }
    let setup = Setup::build(positions, masses, options, devices.len());
    let tree = &setup.tree;
    let columns = BodyColumns::new(tree);
    for (device, leaves) in devices.iter().zip(&setup.partition.leaf_ranges) {
        let bodies = leaf_bodies(tree, leaves.clone());
        let initial = vec![Field::default(); bodies.len()];
        let fields = p2p_on_device(
            device,
            tree,
            &setup.lists,
            &columns,
            leaves.clone(),
            initial,
            options.softening * options.softening,
            module,
        )?;
        for (sorted, field) in bodies.zip(&fields) {
            let input = tree.input_index[sorted];
            potential[input] = -field.psi;
            accel[input] = field.grad;
        }
    }
    Ok((potential, accel))
}

/// The near field of rank `me` with the P2P on `device` (`module`'s [`P2P_ENTRY`]): the L2P
/// of every body of its leaves on the host (in the current thread pool), then the P2P of
/// all its leaves in one launch starting from those values. Returns, as the host near field
/// does, the rank's sorted bodies, their fields, and the number of P2P chunks (one launch).
///
/// Errors: [`FmmError::CoincidentBodies`] as the host near field reports them (without
/// softening, the first leaf in order with a non-finite potential that holds two bodies at
/// one position); [`FmmError::Backend`] for a failed upload, launch or download.
pub(crate) fn near_field_on_device(
    shared: &Shared<'_>,
    me: usize,
    locals: &[f64],
    device: &Device,
    module: &'static KernelModule,
) -> Result<(Range<usize>, Vec<Field>, usize), FmmError> {
    let (tree, basis, t) = (shared.tree, shared.basis, shared.basis.len());
    let leaves = shared.partition.leaf_ranges[me].clone();
    let bodies = leaf_bodies(tree, leaves.clone());
    if bodies.is_empty() {
        return Ok((bodies, Vec::new(), 0));
    }
    let targets = &tree.leaves[leaves.clone()];
    let by_leaf: Vec<Vec<Field>> = targets
        .par_iter()
        .map_init(
            || vec![0.0; t],
            |powers, &leaf| {
                let node = &tree.nodes[leaf as usize];
                let local = &locals[leaf as usize * t..(leaf as usize + 1) * t];
                tree.positions[node.begin..node.end]
                    .iter()
                    .map(|&x| l2p(basis, local, node.center, x, powers))
                    .collect()
            },
        )
        .collect();
    let initial = by_leaf.concat();
    let columns = BodyColumns::new(tree);
    let fields = p2p_on_device(
        device,
        tree,
        shared.lists,
        &columns,
        leaves,
        initial,
        shared.softening2,
        module,
    )?;
    if shared.softening2 == 0.0 {
        for &leaf in targets {
            let node = &tree.nodes[leaf as usize];
            let own = &fields[node.begin - bodies.start..node.end - bodies.start];
            if own.iter().any(|f| !f.psi.is_finite()) {
                if let Some(error) = coincident_pair(tree, leaf as usize) {
                    return Err(error);
                }
            }
        }
    }
    Ok((bodies, fields, 1))
}

/// The tree's Morton-ordered bodies as columns (the kernel's source layout).
pub(crate) struct BodyColumns {
    x: Vec<f64>,
    y: Vec<f64>,
    z: Vec<f64>,
    m: Vec<f64>,
}

impl BodyColumns {
    pub(crate) fn new(tree: &Octree) -> Self {
        Self {
            x: tree.positions.iter().map(|p| p[0]).collect(),
            y: tree.positions.iter().map(|p| p[1]).collect(),
            z: tree.positions.iter().map(|p| p[2]).collect(),
            m: tree.masses.clone(),
        }
    }
}

/// The sorted bodies of the leaves `tree.leaves[leaves]` (consecutive along the Morton
/// curve, so their bodies are one range).
pub(crate) fn leaf_bodies(tree: &Octree, leaves: Range<usize>) -> Range<usize> {
    let leaves = &tree.leaves[leaves];
    match leaves.first().zip(leaves.last()) {
        Some((&first, &last)) => tree.nodes[first as usize].begin..tree.nodes[last as usize].end,
        None => 0..0,
    }
}

/// Adds the P2P of the leaves `tree.leaves[leaves]` to `initial` (the fields of their bodies,
/// [`leaf_bodies`], in order) on `device`: uploads the inputs, launches `module`'s
/// [`P2P_ENTRY`] with a block per leaf, and downloads the fields.
///
/// Errors: [`FmmError::InvalidArgument`] when `initial` does not match the leaves' bodies or
/// there are more than `u32::MAX` leaves; [`FmmError::Backend`] for a failed upload,
/// launch or download.
#[allow(clippy::too_many_arguments)]
pub(crate) fn p2p_on_device(
    device: &Device,
    tree: &Octree,
    lists: &InteractionLists,
    columns: &BodyColumns,
    leaves: Range<usize>,
    initial: Vec<Field>,
    softening2: f64,
    module: &'static KernelModule,
) -> Result<Vec<Field>, FmmError> {
    let bodies = leaf_bodies(tree, leaves.clone());
    if initial.len() != bodies.len() {
        return Err(FmmError::invalid(
            "initial",
            format!("the fields of the leaves' {} bodies", bodies.len()),
            format!("{} fields", initial.len()),
        ));
    }
    let targets = &tree.leaves[leaves];
    if targets.is_empty() {
        return Ok(initial);
    }
    let n_leaves = u32::try_from(targets.len())
        .map_err(|_| FmmError::invalid("leaves", "at most u32::MAX leaves", targets.len()))?;
    let mut list_start = Vec::with_capacity(targets.len() + 1);
    let mut list_sources = Vec::new();
    list_start.push(0_u64);
    for &leaf in targets {
        list_sources.extend_from_slice(lists.p2p_of(leaf as usize));
        list_start.push(list_sources.len() as u64);
    }
    if list_sources.is_empty() {
        return Ok(initial);
    }
    let node_begin: Vec<u64> = tree.nodes.iter().map(|n| n.begin as u64).collect();
    let node_end: Vec<u64> = tree.nodes.iter().map(|n| n.end as u64).collect();
    let column = |pick: fn(&Field) -> f64| -> Vec<f64> { initial.iter().map(pick).collect() };

    let leaves_b = device.upload(targets)?;
    let list_start_b = device.upload(&list_start)?;
    let list_sources_b = device.upload(&list_sources)?;
    let node_begin_b = device.upload(&node_begin)?;
    let node_end_b = device.upload(&node_end)?;
    let x = device.upload(&columns.x)?;
    let y = device.upload(&columns.y)?;
    let z = device.upload(&columns.z)?;
    let m = device.upload(&columns.m)?;
    let mut psi = device.upload(&column(|f| f.psi))?;
    let mut gx = device.upload(&column(|f| f.grad[0]))?;
    let mut gy = device.upload(&column(|f| f.grad[1]))?;
    let mut gz = device.upload(&column(|f| f.grad[2]))?;
    let dims = LaunchDims {
        grid: [n_leaves, 1, 1],
        block: [BLOCK, 1, 1],
        shared_bytes: 0,
    };
    device.launch(
        module,
        P2P_ENTRY,
        dims,
        &mut [
            Arg::u32(n_leaves),
            Arg::input(&leaves_b),
            Arg::input(&list_start_b),
            Arg::input(&list_sources_b),
            Arg::input(&node_begin_b),
            Arg::input(&node_end_b),
            Arg::input(&x),
            Arg::input(&y),
            Arg::input(&z),
            Arg::input(&m),
            Arg::f64(softening2),
            Arg::u64(bodies.start as u64),
            Arg::output(&mut psi),
            Arg::output(&mut gx),
            Arg::output(&mut gy),
            Arg::output(&mut gz),
        ],
    )?;
    let (psi, gx, gy, gz) = (
        psi.to_host_vec()?,
        gx.to_host_vec()?,
        gy.to_host_vec()?,
        gz.to_host_vec()?,
    );
    Ok((0..bodies.len())
        .map(|i| Field {
            psi: psi[i],
            grad: [gx[i], gy[i], gz[i]],
        })
        .collect())
}

/// The host twin of [`P2P_ENTRY`]: the leaves in parallel in the device's pool, each body's
/// field updated by the host near field's per-target code ([`add_near_sources`]) over the
/// same columns.
fn p2p_twin(launch: &HostLaunch<'_>, mut args: HostArgs<'_>) -> Result<(), BackendError> {
    let fail = |message: String| BackendError::Kernel {
        module: launch.module().name.to_string(),
        entry: P2P_ENTRY.to_string(),
        message: format!("host twin: {message}"),
    };
    let n_leaves = args.u32(0)? as usize;
    let leaves = args.input::<u32>(1)?;
    let list_start = args.input::<u64>(2)?;
    let list_sources = args.input::<u32>(3)?;
    let node_begin = args.input::<u64>(4)?;
    let node_end = args.input::<u64>(5)?;
    let columns = SourceColumns {
        x: args.input::<f64>(6)?,
        y: args.input::<f64>(7)?,
        z: args.input::<f64>(8)?,
        m: args.input::<f64>(9)?,
    };
    let softening2 = args.f64(10)?;
    let body_offset = args.u64(11)?;
    let mut outputs = [
        args.output::<f64>(12)?,
        args.output::<f64>(13)?,
        args.output::<f64>(14)?,
        args.output::<f64>(15)?,
    ];
    let bodies = columns.m.len();
    if [columns.x.len(), columns.y.len(), columns.z.len()] != [bodies; 3]
        || node_begin.len() != node_end.len()
    {
        return Err(fail("columns of unequal lengths".into()));
    }
    let out_len = outputs[0].len();
    if outputs.iter().any(|o| o.len() != out_len) {
        return Err(fail("field columns of unequal lengths".into()));
    }
    // Blocks the grid covers (only x: the kernel's other blocks write nothing).
    let covered = n_leaves.min(launch.dims().grid[0] as usize);
    if leaves.len() < covered || list_start.len() < covered + 1 {
        return Err(fail(format!(
            "{covered} leaves launched, {} leaves and {} list offsets given",
            leaves.len(),
            list_start.len()
        )));
    }
    let range_of = |node: u32| -> Option<Range<usize>> {
        let (begin, end) = (
            *node_begin.get(node as usize)? as usize,
            *node_end.get(node as usize)? as usize,
        );
        (begin <= end && end <= bodies).then_some(begin..end)
    };
    // Each launched leaf: its bodies, its list, and where its fields are.
    let mut work = Vec::with_capacity(covered);
    for k in 0..covered {
        let leaf = leaves[k];
        let targets = range_of(leaf).ok_or_else(|| fail(format!("leaf {leaf}: bad node")))?;
        let (first, last) = (list_start[k] as usize, list_start[k + 1] as usize);
        let sources = list_sources
            .get(first..last)
            .ok_or_else(|| fail(format!("leaf {leaf}: list {first}..{last} out of range")))?;
        let segments = sources
            .iter()
            .map(|&s| range_of(s).map(|r| (s == leaf, r)))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| fail(format!("leaf {leaf}: a source node out of range")))?;
        let fields = (targets.start as u64)
            .checked_sub(body_offset)
            .map(|start| start as usize..start as usize + targets.len())
            .filter(|fields| fields.end <= out_len)
            .ok_or_else(|| fail(format!("leaf {leaf}: fields out of range")))?;
        work.push((targets, segments, fields));
    }
    // The leaves' fields must be disjoint (on a GPU overlapping leaves would race).
    work.sort_by_key(|(_, _, fields)| fields.start);
    let mut chunks = Vec::with_capacity(work.len());
    let [mut psi, mut gx, mut gy, mut gz] = outputs.each_mut().map(|o| &mut o[..]);
    let mut at = 0;
    for (targets, segments, fields) in work {
        if fields.start < at {
            return Err(fail("two launched leaves share bodies".into()));
        }
        let skip = fields.start - at;
        let len = fields.len();
        chunks.push((
            targets,
            segments,
            [
                take_front(&mut psi, skip, len),
                take_front(&mut gx, skip, len),
                take_front(&mut gy, skip, len),
                take_front(&mut gz, skip, len),
            ],
        ));
        at = fields.end;
    }
    launch.pool().install(|| {
        chunks
            .into_par_iter()
            .for_each(|(targets, segments, [psi, gx, gy, gz])| {
                for (i, b) in targets.clone().enumerate() {
                    let target = [columns.x[b], columns.y[b], columns.z[b]];
                    let mut field = Field {
                        psi: psi[i],
                        grad: [gx[i], gy[i], gz[i]],
                    };
                    add_near_sources(
                        &mut field,
                        &target,
                        b - targets.start,
                        segments.iter().cloned(),
                        columns,
                        softening2,
                    );
                    psi[i] = field.psi;
                    gx[i] = field.grad[0];
                    gy[i] = field.grad[1];
                    gz[i] = field.grad[2];
                }
            });
    });
    Ok(())
}

/// `column[skip..skip + len]`, leaving `column` as what follows it.
fn take_front<'a>(column: &mut &'a mut [f64], skip: usize, len: usize) -> &'a mut [f64] {
    let (mine, rest) = std::mem::take(column)[skip..].split_at_mut(len);
    *column = rest;
    mine
}

#[cfg(test)]
mod tests;
