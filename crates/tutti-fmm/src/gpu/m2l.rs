//! The far field's M2L as GPU kernels (`gpu/m2l.cu`), with host twins that perform the
//! host far field's operations in its order.
//!
//! The M2L pairs of a rank are cut into groups of up to [`LANES`] sources of one target
//! (exactly the host's groups, [`crate::far::m2l_groups`]), and the groups into chunks bounded
//! by the working memory. Per chunk, [`M2L_DERIVATIVES_ENTRY`] fills the kernel derivatives of
//! every pair (a thread per pair), then a contraction entry ([`M2L_CONTRACT_F64_ENTRY`] or
//! [`M2L_CONTRACT_F32_ENTRY`], by [`Precision`]) adds each run of groups sharing a target to
//! that target's local expansion (a block per run, a thread per coefficient). Multipoles and
//! local expansions stay on the device for the whole pass; derivatives are held in f64 in
//! both precisions (the f32 contraction rounds them as the host's f32 buffer does).

use std::ops::Range;

use rayon::prelude::*;
use tutti_backend::kernel::{HostArgs, HostLaunch};
use tutti_backend::{
    Arg, BackendError, Device, ElemKind, KernelEntry, KernelModule, LaunchDims, Param,
};

use crate::basis::RecurrenceColumns;
use crate::evaluate::Shared;
use crate::far::{runs_of, M2lGroup};
use crate::operators::LANES;
use crate::options::Precision;
use crate::FmmError;

/// Fills the kernel derivatives of every pair of a chunk of groups.
pub const M2L_DERIVATIVES_ENTRY: &str = "tt_fmm_m2l_derivatives";
/// Contracts a chunk's derivatives with the multipoles in f64 ([`Precision::F64`]).
pub const M2L_CONTRACT_F64_ENTRY: &str = "tt_fmm_m2l_contract_f64";
/// Contracts in f32 products summed in f64 ([`Precision::F32`]).
pub const M2L_CONTRACT_F32_ENTRY: &str = "tt_fmm_m2l_contract_f32";

/// Words per group in the group table: target, [`LANES`] sources, sources used.
const GROUP_WORDS: usize = 2 + LANES;

/// Threads per block of the derivatives launch (four per group).
const DERIVATIVES_BLOCK: u32 = 128;

/// Most threads per block of the contraction (one per coefficient, at most the basis size).
const CONTRACT_BLOCK: u32 = 128;

/// `n_groups`, `terms`, `groups`, `centers` (3 per node), the recurrence as `start`,
/// `source`, `axis`, `coefficient`, `softening2`, then the derivatives written.
const DERIVATIVES_PARAMS: [Param; 10] = [
    Param::U32,
    Param::U32,
    Param::In(ElemKind::U32),
    Param::In(ElemKind::F64),
    Param::In(ElemKind::U32),
    Param::In(ElemKind::U32),
    Param::In(ElemKind::U32),
    Param::In(ElemKind::F64),
    Param::F64,
    Param::Out(ElemKind::F64),
];

/// `n_runs`, `terms`, `run_start`, `groups`, `m2l_start`, `m2l`, `multipoles`, `derivatives`,
/// then the local expansions (read and written).
const CONTRACT_PARAMS: [Param; 9] = [
    Param::U32,
    Param::U32,
    Param::In(ElemKind::U32),
    Param::In(ElemKind::U32),
    Param::In(ElemKind::U32),
    Param::In(ElemKind::U32),
    Param::In(ElemKind::F64),
    Param::In(ElemKind::F64),
    Param::InOut(ElemKind::F64),
];

const M2L_ENTRIES: [KernelEntry; 3] = [
    KernelEntry {
        name: M2L_DERIVATIVES_ENTRY,
        params: &DERIVATIVES_PARAMS,
        host: derivatives_twin,
    },
    KernelEntry {
        name: M2L_CONTRACT_F64_ENTRY,
        params: &CONTRACT_PARAMS,
        host: contract_f64_twin,
    },
    KernelEntry {
        name: M2L_CONTRACT_F32_ENTRY,
        params: &CONTRACT_PARAMS,
        host: contract_f32_twin,
    },
];

/// The M2L module (`gpu/m2l.cu`) without FMA contraction: on a GPU it equals its host twins,
/// and so the host far field, bit for bit.
pub static M2L_MODULE: KernelModule = KernelModule {
    name: "tutti_fmm_m2l",
    source: include_str!("m2l.cu"),
    fmad: false,
    entries: &M2L_ENTRIES,
};

/// The same module with FMA contraction: on a GPU it agrees with the host to rounding.
pub static M2L_MODULE_FMAD: KernelModule = KernelModule {
    name: "tutti_fmm_m2l_fmad",
    source: include_str!("m2l.cu"),
    fmad: true,
    entries: &M2L_ENTRIES,
};

/// The tree and basis tables both M2L entries read, as the kernels take them (the
/// recurrence's columns are the basis's own).
struct Tables {
    centers: Vec<f64>,
    m2l_start: Vec<u32>,
    m2l: Vec<u32>,
}

impl Tables {
    fn new(shared: &Shared<'_>) -> Result<Self, FmmError> {
        let basis = shared.basis;
        Ok(Self {
            centers: shared.tree.nodes.iter().flat_map(|n| n.center).collect(),
            m2l_start: basis
                .m2l_start
                .iter()
                .map(|&s| {
                    u32::try_from(s).map_err(|_| {
                        FmmError::invalid("order", "an M2L table of at most u32::MAX entries", s)
                    })
                })
                .collect::<Result<_, _>>()?,
            m2l: basis.m2l.iter().map(|&i| u32::from(i)).collect(),
        })
    }
}

/// The M2L of `groups` on `device` with `module`'s entries, `groups_per_chunk` groups at a
/// time, into local expansions that start at zero; returns them (every node, `t` each) and
/// the number of chunks.
///
/// Errors: [`FmmError::InvalidArgument`] when a count does not fit the kernels' 32-bit
/// parameters; [`FmmError::Backend`] for a failed allocation, upload, launch or download.
pub(crate) fn m2l_on_device(
    device: &Device,
    shared: &Shared<'_>,
    groups: &[M2lGroup],
    multipoles: &[f64],
    groups_per_chunk: usize,
    module: &'static KernelModule,
) -> Result<(Vec<f64>, usize), FmmError> {
    let t = shared.basis.len();
    let nodes = shared.tree.nodes.len();
    let mut locals = device.alloc_zeros::<f64>(nodes * t)?;
    if groups.is_empty() {
        return Ok((locals.to_host_vec()?, 0));
    }
    let terms = u32::try_from(t).map_err(|_| FmmError::invalid("order", "a smaller order", t))?;
    let tables = Tables::new(shared)?;
    let centers = device.upload(&tables.centers)?;
    let recurrence = &shared.basis.recurrence;
    let recurrence_start = device.upload(&recurrence.start)?;
    let recurrence_source = device.upload(&recurrence.source)?;
    let recurrence_axis = device.upload(&recurrence.axis)?;
    let recurrence_coefficient = device.upload(&recurrence.coefficient)?;
    let m2l_start = device.upload(&tables.m2l_start)?;
    let m2l = device.upload(&tables.m2l)?;
    let multipoles = device.upload(multipoles)?;
    let groups_per_chunk = groups_per_chunk.clamp(1, groups.len());
    let mut derivatives = device.alloc_zeros::<f64>(groups_per_chunk * t * LANES)?;
    let contract = match shared.precision {
        Precision::F32 => M2L_CONTRACT_F32_ENTRY,
        _ => M2L_CONTRACT_F64_ENTRY,
    };
    let mut chunks = 0;
    for batch in groups.chunks(groups_per_chunk) {
        chunks += 1;
        let n_groups = u32::try_from(batch.len()).map_err(|_| {
            FmmError::invalid("chunk_items", "at most u32::MAX groups", batch.len())
        })?;
        let table: Vec<u32> = batch
            .iter()
            .flat_map(|(target, sources, used)| {
                let mut words = [0u32; GROUP_WORDS];
                words[0] = *target;
                words[1..=LANES].copy_from_slice(sources);
                words[GROUP_WORDS - 1] = *used as u32;
                words
            })
            .collect();
        let runs = runs_of(batch);
        let run_start: Vec<u32> = runs
            .iter()
            .map(|run| run.start as u32)
            .chain(std::iter::once(batch.len() as u32))
            .collect();
        let n_runs = runs.len() as u32;
        let table = device.upload(&table)?;
        let run_start = device.upload(&run_start)?;
        device.launch(
            module,
            M2L_DERIVATIVES_ENTRY,
            LaunchDims::linear(u64::from(n_groups) * LANES as u64, DERIVATIVES_BLOCK)?,
            &mut [
                Arg::u32(n_groups),
                Arg::u32(terms),
                Arg::input(&table),
                Arg::input(&centers),
                Arg::input(&recurrence_start),
                Arg::input(&recurrence_source),
                Arg::input(&recurrence_axis),
                Arg::input(&recurrence_coefficient),
                Arg::f64(shared.softening2),
                Arg::output(&mut derivatives),
            ],
        )?;
        device.launch(
            module,
            contract,
            LaunchDims {
                grid: [n_runs, 1, 1],
                block: [terms.min(CONTRACT_BLOCK), 1, 1],
                shared_bytes: 0,
            },
            &mut [
                Arg::u32(n_runs),
                Arg::u32(terms),
                Arg::input(&run_start),
                Arg::input(&table),
                Arg::input(&m2l_start),
                Arg::input(&m2l),
                Arg::input(&multipoles),
                Arg::input(&derivatives),
                Arg::output(&mut locals),
            ],
        )?;
    }
    Ok((locals.to_host_vec()?, chunks))
}

/// A twin's error for `entry` of the launched module.
fn twin_error(
    launch: &HostLaunch<'_>,
    entry: &str,
    message: impl std::fmt::Display,
) -> BackendError {
    BackendError::Kernel {
        module: launch.module().name.to_string(),
        entry: entry.to_string(),
        message: format!("host twin: {message}"),
    }
}

/// One group of the table: target, sources, lanes used (checked to be 1..=LANES).
fn group_at(groups: &[u32], g: usize) -> Option<(usize, [usize; LANES], usize)> {
    let words = groups.get(g * GROUP_WORDS..(g + 1) * GROUP_WORDS)?;
    let used = words[GROUP_WORDS - 1] as usize;
    (1..=LANES).contains(&used).then(|| {
        (
            words[0] as usize,
            [0, 1, 2, 3].map(|lane| words[1 + lane] as usize),
            used,
        )
    })
}

/// The host twin of [`M2L_DERIVATIVES_ENTRY`]: every covered pair's derivatives by the host's
/// own recurrence code (`Basis::kernel_derivatives`) over the given columns, the groups in
/// parallel.
fn derivatives_twin(launch: &HostLaunch<'_>, mut args: HostArgs<'_>) -> Result<(), BackendError> {
    let fail = |message: String| twin_error(launch, M2L_DERIVATIVES_ENTRY, message);
    let n_groups = args.u32(0)? as usize;
    let terms = args.u32(1)? as usize;
    let groups = args.input::<u32>(2)?;
    let centers = args.input::<f64>(3)?;
    let start = args.input::<u32>(4)?;
    let source = args.input::<u32>(5)?;
    let axis = args.input::<u32>(6)?;
    let coefficient = args.input::<f64>(7)?;
    let softening2 = args.f64(8)?;
    let derivatives = args.output::<f64>(9)?;
    let stride = terms * LANES;
    let covered_threads = launch.dims().threads_x().min((n_groups * LANES) as u64) as usize;
    let covered_groups = covered_threads.div_ceil(LANES);
    if terms == 0 || start.len() < terms + 1 || derivatives.len() < covered_groups * stride {
        return Err(fail(format!(
            "{terms} terms, {} recurrence offsets, {} derivatives for {covered_groups} groups",
            start.len(),
            derivatives.len()
        )));
    }
    let last_term = start[terms] as usize;
    if source.len() < last_term
        || axis.len() < last_term
        || coefficient.len() < last_term
        || start[..=terms].windows(2).any(|w| w[0] > w[1])
        // Each index's terms read only indices computed before it.
        || (1..terms).any(|n| {
            source[start[n] as usize..start[n + 1] as usize]
                .iter()
                .any(|&s| s as usize >= n)
        })
    {
        return Err(fail("a recurrence table out of range".into()));
    }
    let recurrence = RecurrenceColumns {
        start,
        source,
        axis,
        coefficient,
    };
    let center = |node: usize| -> Option<[f64; 3]> {
        let c = centers.get(3 * node..3 * node + 3)?;
        Some([c[0], c[1], c[2]])
    };
    let pairs = (0..covered_groups)
        .map(|g| {
            let (target, sources, used) =
                group_at(groups, g).ok_or_else(|| fail(format!("group {g}: bad entry")))?;
            let za = center(target).ok_or_else(|| fail(format!("group {g}: bad target")))?;
            let lanes = (0..LANES)
                .map(|lane| {
                    let covered = g * LANES + lane < covered_threads;
                    match (covered, lane < used) {
                        (false, _) => Ok(None),
                        (true, false) => Ok(Some(None)),
                        (true, true) => center(sources[lane])
                            .map(|zb| Some(Some([za[0] - zb[0], za[1] - zb[1], za[2] - zb[2]])))
                            .ok_or_else(|| fail(format!("group {g}: bad source"))),
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(lanes)
        })
        .collect::<Result<Vec<_>, BackendError>>()?;
    launch.pool().install(|| {
        derivatives[..covered_groups * stride]
            .par_chunks_mut(stride)
            .zip(pairs)
            .for_each_init(
                || vec![0.0; terms],
                |exact, (out, lanes)| {
                    for (lane, pair) in lanes.into_iter().enumerate() {
                        match pair {
                            None => continue,
                            Some(None) => exact.fill(0.0),
                            Some(Some(r)) => recurrence.derivatives(r, softening2, exact),
                        }
                        for (n, &e) in exact.iter().enumerate() {
                            out[n * LANES + lane] = e;
                        }
                    }
                },
            );
    });
    Ok(())
}

/// The f64 contraction's twin.
fn contract_f64_twin(launch: &HostLaunch<'_>, args: HostArgs<'_>) -> Result<(), BackendError> {
    contract_twin(launch, args, M2L_CONTRACT_F64_ENTRY, |m, d| m * d)
}

/// The f32 contraction's twin: both factors rounded to f32, multiplied in f32.
fn contract_f32_twin(launch: &HostLaunch<'_>, args: HostArgs<'_>) -> Result<(), BackendError> {
    contract_twin(launch, args, M2L_CONTRACT_F32_ENTRY, |m, d| {
        f64::from(m as f32 * d as f32)
    })
}

/// The host twin of the contractions: every covered run in parallel, each updating its
/// target's coefficients group after group as `m2l_f64` does, `product` forming each term.
fn contract_twin(
    launch: &HostLaunch<'_>,
    mut args: HostArgs<'_>,
    entry: &str,
    product: fn(f64, f64) -> f64,
) -> Result<(), BackendError> {
    let fail = |message: String| twin_error(launch, entry, message);
    let n_runs = args.u32(0)? as usize;
    let terms = args.u32(1)? as usize;
    let run_start = args.input::<u32>(2)?;
    let groups = args.input::<u32>(3)?;
    let m2l_start = args.input::<u32>(4)?;
    let m2l = args.input::<u32>(5)?;
    let multipoles = args.input::<f64>(6)?;
    let derivatives = args.input::<f64>(7)?;
    let locals = args.output::<f64>(8)?;
    let stride = terms * LANES;
    let covered = n_runs.min(launch.dims().grid[0] as usize);
    if terms == 0 || run_start.len() < covered + 1 || m2l_start.len() < terms + 1 {
        return Err(fail(format!(
            "{terms} terms, {} run offsets for {covered} runs, {} m2l offsets",
            run_start.len(),
            m2l_start.len()
        )));
    }
    let m2l_end = m2l_start[terms] as usize;
    if m2l.len() < m2l_end
        // A coefficient's list pairs at most `terms` multipole entries with derivatives.
        || m2l_start[..=terms]
            .windows(2)
            .any(|w| w[0] > w[1] || (w[1] - w[0]) as usize > terms)
        || m2l[..m2l_end].iter().any(|&i| i as usize >= terms)
    {
        return Err(fail("an m2l table out of range".into()));
    }
    // Each covered run: its groups and its target's coefficients (targets must differ: on a
    // GPU two blocks writing one target would race).
    let mut slots: Vec<Option<&mut [f64]>> = locals.chunks_exact_mut(terms).map(Some).collect();
    let mut work = Vec::with_capacity(covered);
    for r in 0..covered {
        let run: Range<usize> = run_start[r] as usize..run_start[r + 1] as usize;
        if run.is_empty() {
            return Err(fail(format!("run {r} is empty")));
        }
        let mut members = Vec::with_capacity(run.len());
        for g in run {
            let (target, sources, used) =
                group_at(groups, g).ok_or_else(|| fail(format!("group {g}: bad entry")))?;
            let d = derivatives
                .get(g * stride..(g + 1) * stride)
                .ok_or_else(|| fail(format!("group {g}: derivatives out of range")))?;
            let rows = (0..used)
                .map(|lane| multipoles.get(sources[lane] * terms..(sources[lane] + 1) * terms))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| fail(format!("group {g}: a source out of range")))?;
            members.push((target, rows, d));
        }
        let target = members[0].0;
        if members.iter().any(|m| m.0 != target) {
            return Err(fail(format!("run {r} mixes targets")));
        }
        let local = slots
            .get_mut(target)
            .ok_or_else(|| fail(format!("run {r}: target {target} out of range")))?
            .take()
            .ok_or_else(|| fail(format!("two runs share target {target}")))?;
        work.push((local, members));
    }
    launch.pool().install(|| {
        work.into_par_iter().for_each(|(local, members)| {
            for (k, l) in local.iter_mut().enumerate() {
                let targets = &m2l[m2l_start[k] as usize..m2l_start[k + 1] as usize];
                for (_, rows, d) in &members {
                    let mut sum = [0.0; LANES];
                    for (j, &nk) in targets.iter().enumerate() {
                        let at = nk as usize * LANES;
                        for lane in 0..LANES {
                            let m = rows.get(lane).map_or(0.0, |row| row[j]);
                            sum[lane] += product(m, d[at + lane]);
                        }
                    }
                    *l += (sum[0] + sum[1]) + (sum[2] + sum[3]);
                }
            }
        });
    });
    Ok(())
}
