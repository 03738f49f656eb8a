//! One SRC sweep on one rank of a group: the rank owns a contiguous block of sketch columns
//! left to right, and a contiguous block of the right bond right to left.
//!
//! Left to right, each rank builds its columns of every sketched environment (no
//! communication) and puts each away on the tier the memory plan gave it (device, host or a
//! spill file: [`crate::environments`]).
//!
//! Right to left, per site, with the right bond `chi` split among the ranks (rank r its block
//! `block(chi, G, r)` of the bond, so no rank repeats another's flops):
//! - an allgather gives every rank all the sketch columns of the site's environment (the
//!   spilled ones read back one site ahead by a loader thread), of which the first `r_k` (the
//!   new bond) are kept;
//! - each rank forms its block of the stacked cores times S (S's rows of its bonds) and its
//!   block of the sketched matrix Y: every row, the entries of its bonds. Read
//!   column-major, that block is the rows `p chi + c` (c its bonds) of the tall `Y^T`;
//! - the QR of `Y^T` gives the new core `V = Q^T`. Split among the ranks
//!   ([`crate::cholesky_qr`], a distributed CholeskyQR2 over exactly those row blocks), Q's
//!   rows are V's entries for the rank's bonds; rank 0 gathers the whole V for the result. A
//!   sketch too ill-conditioned for CholeskyQR, one device, or the default
//!   (`distributed_qr` off) takes the Householder path: rank 0 gathers Y's blocks, factors
//!   it and scatters each rank its bonds' entries of V;
//! - each rank contracts its entries of V with its block of the stacked cores times S, a
//!   partial sum of the next S over its bonds; an allreduce (summing in rank order, the same
//!   bits on every rank) gives every rank the whole next S.
//!
//! A rank whose bond block is empty (near the right end, where the bond is smaller than the
//! group) contributes nothing but zeros to the sums. A group of one runs the same code inline
//! with trivial exchanges.
//!
//! Collectives run on the rank's own thread; the contractions of each step run in the
//! rank's device thread pool (`pool.install`), so the work stealing stays inside the rank.

use std::ops::Range;
use std::time::Instant;

use faer::Par;
use rayon::ThreadPool;
use tutti_group::Comm;
use tutti_plan::{SpillStore, Tier};

use crate::cholesky_qr::{cholesky_qr, CholeskyQrError, CholeskyQrPath};
use crate::environments::{Environments, Prefetch};
use crate::executor::{DeviceExecutor, Executor, HostExecutor};
use crate::linalg::qr_q_transposed;
use crate::memory::try_filled_vec;
use crate::shared_cores::StackPasses;
use crate::sketch::{block, sketch_block};
use crate::src::{Pass, ProgressFn, QrInfo, SweepProgress};
use crate::stack::Stack;
use crate::tensor::{Axis, Buffers, Tensor};
use crate::train::{Core, CoreShape, TensorTrain, TrainKind};
use crate::{Scalar, SweepError};

/// What one sweep needs besides the layers.
#[derive(Clone, Copy)]
pub(crate) struct SweepJob<'a> {
    pub stack: &'a Stack,
    /// The sketch width s (chi_out + oversample, clamped to the product's largest bond).
    pub width: usize,
    pub seed: u64,
    pub progress: Option<&'a ProgressFn>,
    /// Whether a rank computes on its device or on the host.
    pub kernels: tutti_backend::Kernels,
    /// Whether several ranks split the QR of the sketched matrices.
    pub distributed_qr: bool,
    /// The memory plan's tier of each site's sketched environment (index 0 unused).
    pub environment_tiers: &'a [Tier],
    /// Where environments on the disk tier go; `Some` when some tier is [`Tier::Disk`].
    pub spill: Option<&'a SpillStore>,
}

/// What a rank reports besides the result train.
#[derive(Clone, Debug, Default)]
pub(crate) struct RankReport {
    /// How the sketched matrices were factored, as this rank saw it.
    pub qr: QrInfo,
    /// Bytes of environments this rank wrote to spill files.
    pub spilled: u64,
}

/// A sketched environment `env` (`[Col, Left(0), ..., Left(L-1)]`) times every layer's core
/// at one site, the bottom layer first: axes
/// `[Phys(0), Right(0), ..., Right(L-2), Col, Phys(L), Right(L-1)]`.
///
/// The bottom layer (the state, with the largest bond) meets the environment in a few large
/// GEMMs (one per index of the upper layers' bonds and its output leg); each layer above then
/// acts on the leading axes of the intermediate, one GEMM over all the rest. No large
/// intermediate is permuted.
fn env_times_cores<T: Scalar, E: Executor<T>>(
    exec: &mut E,
    env: &E::Held,
    cores: &[E::Held],
) -> Result<E::Held, SweepError> {
    let depth = cores.len();
    let bottom = depth - 1;
    let mut tail = vec![Axis::Col, Axis::Phys(depth), Axis::Right(bottom)];
    let mut out: Vec<Axis> = (0..bottom).map(Axis::Left).collect();
    out.push(Axis::Phys(bottom));
    out.extend(tail.iter().copied());
    let mut t = exec.contract(env, false, &cores[bottom], &out)?;
    for l in (0..bottom).rev() {
        let mut out: Vec<Axis> = (0..l).map(Axis::Left).collect();
        out.extend([Axis::Phys(l), Axis::Right(l)]);
        out.extend(tail.iter().copied());
        let next = exec.contract(&t, false, &cores[l], &out)?;
        exec.recycle(std::mem::replace(&mut t, next));
        tail.insert(0, Axis::Right(l));
    }
    Ok(t)
}

/// `t` (`[Phys(0), Right(0), .., Right(L-2), Col, Phys(L), Right(L-1)]`, from
/// [`env_times_cores`]) contracted with this rank's sketch vectors `g` (row-major
/// `Col x (d_out d_in)`) column by column: the next environment,
/// `[Col, Left(0), ..., Left(L-1)]` (the right bonds renamed for the next site).
pub(crate) fn apply_sketch<T: Scalar>(
    t: &Tensor<T>,
    g: &[T],
    depth: usize,
    par: Par,
) -> Result<Tensor<T>, SweepError> {
    let dims = SketchDims::of(&t.dims, depth);
    let SketchDims {
        middle,
        cols,
        inner,
        ..
    } = dims;
    let mut data = try_filled_vec(cols * middle * inner, T::zero(), || {
        "a sketched environment".to_string()
    })?;
    let per_column = (middle * inner).max(1);
    match par {
        Par::Rayon(threads) if threads.get() > 1 && cols > 1 => {
            use rayon::prelude::*;
            data.par_chunks_mut(per_column)
                .enumerate()
                .with_min_len(cols.div_ceil(threads.get()))
                .for_each(|(c, out_c)| sketch_column(dims, g, &t.data, c, out_c));
        }
        _ => {
            for (c, out_c) in data.chunks_mut(per_column).enumerate() {
                sketch_column(dims, g, &t.data, c, out_c);
            }
        }
    }
    let mut dims = vec![cols];
    dims.extend_from_slice(&t.dims[1..depth]);
    dims.push(inner);
    let mut axes = vec![Axis::Col];
    axes.extend((0..depth).map(Axis::Left));
    Ok(Tensor::new(data, dims, axes))
}

/// The projected right environment `s_env` (`[Bond, Right(0), ..., Right(L-1)]`) times every
/// layer's core at one site, the bottom layer first: `[Phys(0), Left(0), ..., Left(L-1),
/// Phys(L), Bond]`, the stacked cores at the site contracted with S.
///
/// It does not depend on the sketch columns, so both the sketched matrix (environment times
/// it) and the next S (the new core times it) come from it by one GEMM each.
fn s_times_cores<T: Scalar, E: Executor<T>>(
    exec: &mut E,
    s_env: &E::Held,
    cores: &[E::Held],
) -> Result<E::Held, SweepError> {
    let depth = cores.len();
    // Layer l's result: the remaining right bonds with this layer's output leg placed just
    // before Right(l-1), so that the next layer's summed axes (Phys(l), Right(l-1)) lie
    // together as in its core and neither operand is permuted; then Left(l) and the tail.
    let order = |l: usize, tail: &[Axis]| -> Vec<Axis> {
        let mut out: Vec<Axis> = (0..l.saturating_sub(1)).map(Axis::Right).collect();
        out.push(Axis::Phys(l));
        if l >= 1 {
            out.push(Axis::Right(l - 1));
        }
        out.push(Axis::Left(l));
        out.extend(tail.iter().copied());
        out
    };
    let mut tail = vec![Axis::Phys(depth), Axis::Bond];
    let bottom = depth - 1;
    let mut x = exec.contract(s_env, false, &cores[bottom], &order(bottom, &tail))?;
    for l in (0..bottom).rev() {
        tail.insert(0, Axis::Left(l + 1));
        let next = exec.contract(&x, false, &cores[l], &order(l, &tail))?;
        exec.recycle(std::mem::replace(&mut x, next));
    }
    Ok(x)
}

fn report(progress: Option<&ProgressFn>, rank: usize, pass: Pass, site: usize, sites: usize) {
    if let (Some(progress), 0) = (progress, rank) {
        progress(SweepProgress { pass, site, sites });
    }
}

/// The extents of one sketch application: `t` is row-major `[d_out, middle, cols, d_in,
/// inner]` (from [`env_times_cores`]), `g` row-major `[cols, d_out, d_in]`, the result
/// row-major `[cols, middle, inner]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SketchDims {
    pub d_out: usize,
    pub middle: usize,
    pub cols: usize,
    pub d_in: usize,
    pub inner: usize,
}

impl SketchDims {
    /// The extents of `t`'s dims for a stack of `depth` layers.
    pub fn of(t_dims: &[usize], depth: usize) -> Self {
        Self {
            d_out: t_dims[0],
            // Factors of a tensor's length, which is in memory: their products fit.
            middle: t_dims[1..depth].iter().product(),
            cols: t_dims[depth],
            d_in: t_dims[depth + 1],
            inner: t_dims[depth + 2],
        }
    }
}

/// Column `c` of a sketch application (`out_c`, `middle * inner` entries, zero on entry):
/// `out_c[x, i] += sum_a sum_b g[c, a, b] t[a, x, c, b, i]`. Each result row is finished
/// while it is in cache: its `d_out * d_in` terms are summed one after the other (in the same
/// order whatever the threads). The sweep's sketch kernel performs these operations in this
/// order (`gpu/sketch.cu`).
pub(crate) fn sketch_column<T: Scalar>(
    dims: SketchDims,
    g: &[T],
    t: &[T],
    c: usize,
    out_c: &mut [T],
) {
    let SketchDims {
        d_out,
        middle,
        cols,
        d_in,
        inner,
    } = dims;
    for x in 0..middle {
        let out_row = &mut out_c[x * inner..(x + 1) * inner];
        for a in 0..d_out {
            for b in 0..d_in {
                let coefficient = g[(c * d_out + a) * d_in + b];
                let start = (((a * middle + x) * cols + c) * d_in + b) * inner;
                for (o, &v) in out_row.iter_mut().zip(&t[start..start + inner]) {
                    *o += coefficient * v;
                }
            }
        }
    }
}

/// Runs the sweep on this rank; rank 0 returns the right-canonical result (bonds <= width),
/// the other ranks `None`, and every rank how the sketched matrices were factored (the
/// seconds its own). The contractions run on the rank's device when `job.kernels` says
/// so for it ([`DeviceExecutor`]), else on the host in the rank's pool ([`HostExecutor`]).
pub(crate) fn sweep_rank<T: Scalar>(
    comm: &Comm<'_>,
    passes: &StackPasses<'_, T>,
    job: &SweepJob<'_>,
) -> Result<(Option<TensorTrain<T>>, RankReport), SweepError> {
    let pool = comm.device().thread_pool()?;
    if job.kernels.on(comm.device()) {
        let mut exec = DeviceExecutor {
            device: comm.device().clone(),
        };
        sweep_rank_with(comm, passes, job, &mut exec)
    } else {
        let par = match pool.current_num_threads() {
            0 | 1 => Par::Seq,
            threads => Par::rayon(threads),
        };
        let mut exec = HostExecutor {
            par,
            buffers: Buffers::default(),
        };
        sweep_rank_with(comm, passes, job, &mut exec)
    }
}

/// [`sweep_rank`] with its contractions on `exec`. Collectives run on the rank's own thread,
/// everything else in the rank's pool.
fn sweep_rank_with<T: Scalar, E: Executor<T>>(
    comm: &Comm<'_>,
    passes: &StackPasses<'_, T>,
    job: &SweepJob<'_>,
    exec: &mut E,
) -> Result<(Option<TensorTrain<T>>, RankReport), SweepError> {
    let pool = comm.device().thread_pool()?;
    let stack = job.stack;
    let (n, depth) = (stack.sites, stack.depth());
    let (rank, size) = (comm.rank(), comm.size());
    let columns = block(job.width, size, rank);
    // The layers' cores at one site, where `exec` computes.
    let hold_all = |exec: &mut E, cores: Vec<Tensor<T>>| -> Result<Vec<E::Held>, SweepError> {
        cores.into_iter().map(|core| exec.hold(core)).collect()
    };

    // Left to right: this rank's columns of the sketched environments, left of each site,
    // each put away on its planned tier (no communication: the whole pass runs in the rank's
    // pool). Environment 0 is only needed for environment 1.
    let mut env_axes = vec![Axis::Col];
    env_axes.extend(stack.left_axes());
    let mut env_dims = vec![1; depth + 1];
    env_dims[0] = columns.len();
    let mut envs = Environments::new(job.environment_tiers.to_vec(), job.spill, rank)?;
    let first_env = try_filled_vec(columns.len(), T::one(), || {
        format!("the first sketched environment ({} columns)", columns.len())
    })?;
    let mut current = exec.hold(Tensor::new(first_env, env_dims, env_axes.clone()))?;
    // The cores come from the pass this process's ranks share, read on the rank's own thread
    // (it may wait there for the slower ranks), the rest in the rank's pool.
    let mut reader = passes.forward.join(comm.abort_probe());
    for site in 0..n - 1 {
        report(job.progress, rank, Pass::Sketch, site, n);
        let cores = reader.next_site(site)?;
        in_pool(pool, || {
            let cores = hold_all(exec, cores)?;
            let g = sketch_block::<T>(job.seed, site, columns.clone(), stack.phys(site))?;
            let t = env_times_cores(exec, &current, &cores)?;
            let next = exec.apply_sketch(&t, &g, depth)?;
            exec.recycle(t);
            let done = std::mem::replace(&mut current, next);
            if site == 0 {
                exec.recycle(done);
                Ok(())
            } else {
                envs.put(site, done, exec)
            }
        })?;
    }
    drop(reader);
    in_pool(pool, || envs.put(n - 1, current, exec))?;

    // Right to left, with the spilled environments read back one site ahead by a loader.
    let (train, qr) = std::thread::scope(|scope| {
        let mut prefetch = envs.prefetch(scope)?;
        right_to_left(comm, passes, job, exec, &mut envs, &mut prefetch)
    })?;
    let spilled = envs.written();
    Ok((train, RankReport { qr, spilled }))
}

/// The right-to-left pass of [`sweep_rank_with`]: per site the sketched matrix, its QR (the
/// new core), the next projected environment; then site 0. Takes the environments back from
/// `envs` (the spilled ones through `prefetch`).
fn right_to_left<T: Scalar, E: Executor<T>>(
    comm: &Comm<'_>,
    passes: &StackPasses<'_, T>,
    job: &SweepJob<'_>,
    exec: &mut E,
    envs: &mut Environments<'_, T, E::Held>,
    prefetch: &mut Option<Prefetch<'_, T>>,
) -> Result<(Option<TensorTrain<T>>, QrInfo), SweepError> {
    let pool = comm.device().thread_pool()?;
    let par = match pool.current_num_threads() {
        0 | 1 => Par::Seq,
        threads => Par::rayon(threads),
    };
    let stack = job.stack;
    let (n, depth) = (stack.sites, stack.depth());
    let (rank, size) = (comm.rank(), comm.size());
    let right_axes = stack.right_axes();
    let hold_all = |exec: &mut E, cores: Vec<Tensor<T>>| -> Result<Vec<E::Held>, SweepError> {
        cores.into_iter().map(|core| exec.hold(core)).collect()
    };
    let mut s_axes = vec![Axis::Bond];
    s_axes.extend(right_axes.iter().copied());

    // The projected environment S (`[Bond, Right(0..L)]`, Bond the new core's left bond at
    // the site to the right), whole on every rank; this rank works with its block of rows.
    let mut s_whole = Tensor::<T>::unit(s_axes.clone());
    let mut out: Vec<Option<Core<T>>> = vec![None; n];
    let mut chi_right = 1usize;
    let mut left_caps = Vec::with_capacity(n);
    let mut phys_product = 1usize;
    for site in 0..n {
        left_caps.push(phys_product.min(stack.fused_left(site)));
        phys_product = phys_product.saturating_mul(stack.phys(site));
    }
    let mut reader = passes.reverse.join(comm.abort_probe());
    let mut qr = QrInfo::default();
    for site in (1..n).rev() {
        report(job.progress, rank, Pass::Orthogonalize, site, n);
        let (d_out, d_in) = stack.out_phys(site);
        let phys = d_out * d_in;
        let rank_k = job.width.min(phys * chi_right).min(left_caps[site]);
        let bonds = block(chi_right, size, rank);
        let cores = reader.next_site(site)?;

        // Every rank's sketch columns of this site's environment, the first rank_k of them.
        let env = envs.take(site, exec, prefetch)?;
        let env = exec.release(env)?;
        let fused_left = stack.fused_left(site);
        let mut columns = comm.allgather_concat(&env.data)?;
        columns.truncate(rank_k * fused_left);
        let mut env_dims = env.dims.clone();
        env_dims[0] = rank_k;
        let env_axes = env.axes.clone();
        exec.recycle_host(env);

        // This rank's block of the stacked cores times S, and of the sketched matrix Y: all
        // rank_k rows, the entries of its bonds (`rank_k x phys x bonds`, row-major).
        let mine = if bonds.is_empty() {
            None
        } else {
            let s_rows = rows_of(&s_whole, bonds.clone());
            Some(in_pool(pool, || {
                let s_mine = exec.hold(s_rows)?;
                let env_all = exec.hold(Tensor::new(columns, env_dims, env_axes))?;
                let cores = hold_all(exec, cores)?;
                let x = s_times_cores(exec, &s_mine, &cores)?;
                exec.recycle(s_mine);
                let y = exec.contract(
                    &env_all,
                    false,
                    &x,
                    &[Axis::Phys(0), Axis::Col, Axis::Phys(depth), Axis::Bond],
                )?;
                exec.recycle(env_all);
                let y_mine = exec.permuted(
                    &y,
                    &[Axis::Col, Axis::Phys(0), Axis::Phys(depth), Axis::Bond],
                )?;
                exec.recycle(y);
                Ok((x, y_mine))
            })?)
        };
        let (x, y_mine) = match mine {
            Some((x, y)) => (Some(x), exec.release(y)?.data),
            None => (None, Vec::new()),
        };

        // Y^T = Q R; the new core is V = Q^T (rank_k x phys x chi_right), right-orthonormal.
        let started = Instant::now();
        let sketch = SiteSketch {
            y_mine,
            rank_k,
            phys,
            chi_right,
        };
        let core = factor_sketch(comm, pool, par, sketch, job.distributed_qr, &mut qr)?;
        qr.seconds += started.elapsed().as_secs_f64();
        if let Some(v) = core.whole {
            out[site] = Some(Core {
                shape: stack.out_shape(site, rank_k, chi_right),
                data: v,
            });
        }

        // The next S: S[r, a] = sum_{p, c} conj(V[r, p, c]) X[p, a, c], each rank summing over
        // its bonds c, then an allreduce over the ranks (in rank order: the same bits on each).
        let mut s_next = match x {
            Some(x) => {
                let v = exec.hold(Tensor::new(
                    core.mine,
                    vec![rank_k, d_out, d_in, bonds.len()],
                    vec![Axis::Row, Axis::Phys(0), Axis::Phys(depth), Axis::Bond],
                ))?;
                let mut order = vec![Axis::Row];
                order.extend(stack.left_axes());
                let partial = pool.install(|| exec.contract(&v, true, &x, &order))?;
                exec.recycle(x);
                exec.recycle(v);
                exec.release(partial)?.data
            }
            None => try_filled_vec(rank_k * fused_left, T::zero(), || {
                format!("the projected environment ({rank_k} x {fused_left})")
            })?,
        };
        comm.allreduce_sum(&mut s_next)?;
        let mut dims = vec![rank_k];
        dims.extend(stack.shapes.iter().map(|s| s[site].left));
        let previous = std::mem::replace(&mut s_whole, Tensor::new(s_next, dims, s_axes.clone()));
        exec.recycle_host(previous);
        chi_right = rank_k;
    }

    // Site 0 carries the norm: the stacked cores times S (left bonds 1).
    let cores = reader.next_site(0)?;
    report(job.progress, rank, Pass::Orthogonalize, 0, n);
    if rank != 0 {
        return Ok((None, qr));
    }
    let first = pool.install(|| {
        let s_env = exec.hold(s_whole)?;
        let cores = hold_all(exec, cores)?;
        let first = s_times_cores(exec, &s_env, &cores)?;
        exec.release(first)
    })?;
    out[0] = Some(Core {
        shape: stack.out_shape(0, 1, chi_right),
        data: first.data,
    });
    // Rank 0 holds every site's core ([`factor_sketch`] returns it there).
    let cores = out
        .into_iter()
        .enumerate()
        .map(|(site, core)| {
            core.ok_or_else(|| {
                SweepError::Comm(tutti_group::CommError::Mismatch(format!(
                    "site {site} was not computed at rank 0"
                )))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((Some(TensorTrain::from_trusted(stack.out_kind, cores)), qr))
}

/// The rows `rows` of `s` (its first axis), as a tensor of its own.
fn rows_of<T: Scalar>(s: &Tensor<T>, rows: Range<usize>) -> Tensor<T> {
    let per_row: usize = s.dims[1..].iter().product();
    let data = s.data[rows.start * per_row..rows.end * per_row].to_vec();
    let mut dims = s.dims.clone();
    dims[0] = rows.len();
    Tensor::new(data, dims, s.axes.clone())
}

/// One site's sketched matrix `Y` (`rank_k x phys x chi_right`) as this rank holds it: every
/// row, the entries of its block of bonds `block(chi_right, size, rank)`.
struct SiteSketch<T> {
    /// Row-major `rank_k x phys x bonds`: read column-major, this rank's rows of `Y^T`
    /// (`phys bonds x rank_k`), the rows `p chi_right + c` of the whole `Y^T` for its bonds
    /// `c`.
    y_mine: Vec<T>,
    /// The new bond: the sketch columns kept, the rows of Y.
    rank_k: usize,
    /// The site's physical dimension, `d_out d_in`.
    phys: usize,
    /// The bond to the right.
    chi_right: usize,
}

/// The new core `V = Q^T` of one site as a rank holds it.
struct NewCore<T> {
    /// Every row of V, this rank's bonds: row-major `rank_k x phys x bonds`.
    mine: Vec<T>,
    /// At rank 0, all of V (row-major `rank_k x phys x chi_right`); `None` elsewhere.
    whole: Option<Vec<T>>,
}

/// The entries of rank `r`'s bonds in a row-major `rank_k x phys x chi_right` array, as a
/// row-major `rank_k x phys x bonds` one.
fn bond_block<T: Copy>(whole: &[T], chi_right: usize, bonds: Range<usize>) -> Vec<T> {
    let width = bonds.len();
    let mut out = Vec::with_capacity(whole.len() / chi_right.max(1) * width);
    for row in whole.chunks_exact(chi_right.max(1)) {
        out.extend_from_slice(&row[bonds.clone()]);
    }
    out
}

/// Every rank's `rank_k x phys x bonds` block (in rank order) put together as the row-major
/// `rank_k x phys x chi_right` array.
fn join_bond_blocks<T: Scalar>(
    blocks: &[Vec<T>],
    lines: usize,
    chi_right: usize,
) -> Result<Vec<T>, SweepError> {
    let size = blocks.len();
    let mut whole = try_filled_vec(lines * chi_right, T::zero(), || {
        format!("a sketched matrix or core ({lines} x {chi_right})")
    })?;
    for (r, piece) in blocks.iter().enumerate() {
        let bonds = block(chi_right, size, r);
        if bonds.is_empty() {
            continue;
        }
        for (line, from) in piece.chunks_exact(bonds.len()).enumerate() {
            whole[line * chi_right + bonds.start..line * chi_right + bonds.end]
                .copy_from_slice(from);
        }
    }
    Ok(whole)
}

/// The thin QR of `Y^T`, as the new core `V = Q^T`. Split among the ranks when `distributed`
/// and there are several, else (or when CholeskyQR breaks down) Householder at rank 0; `info`
/// counts which.
fn factor_sketch<T: Scalar>(
    comm: &Comm<'_>,
    pool: &ThreadPool,
    par: Par,
    sketch: SiteSketch<T>,
    distributed: bool,
    info: &mut QrInfo,
) -> Result<NewCore<T>, SweepError> {
    let (rank, size) = (comm.rank(), comm.size());
    let SiteSketch {
        y_mine,
        rank_k,
        phys,
        chi_right,
    } = sketch;
    let bonds = block(chi_right, size, rank);
    let row_width = phys * chi_right;
    let lines = rank_k * phys;
    if distributed && size > 1 {
        // The same rule as the Householder QR's: a second thread only for tens of MFLOP.
        let local_par = if phys * bonds.len() * rank_k * rank_k >= 1 << 24 {
            par
        } else {
            Par::Seq
        };
        match cholesky_qr(comm, y_mine.clone(), rank_k, pool, local_par) {
            Ok(factored) => {
                info.distributed += 1;
                if factored.info.path == CholeskyQrPath::Shifted {
                    info.shifted += 1;
                }
                info.worst_orthogonality =
                    info.worst_orthogonality.max(factored.info.orthogonality);
                // Q's rows (column-major, phys bonds x rank_k) are V's bonds (row-major).
                let mine = factored.q_local;
                let whole = match comm.gather(0, &mine)? {
                    Some(blocks) => Some(join_bond_blocks(&blocks, lines, chi_right)?),
                    None => None,
                };
                return Ok(NewCore { mine, whole });
            }
            Err(CholeskyQrError::Comm(error)) => return Err(error.into()),
            Err(CholeskyQrError::Breakdown(breakdown)) => {
                log::debug!(
                    "tutti-sweep: the distributed QR of a {row_width} x {rank_k} sketch broke \
                     down ({breakdown}); Householder QR at rank 0 instead"
                );
            }
        }
    }
    let gathered = comm.gather(0, &y_mine)?;
    drop(y_mine);
    let blocks = match gathered {
        Some(blocks) => {
            let whole_y = join_bond_blocks(&blocks, lines, chi_right)?;
            drop(blocks);
            // Row-major Y (rank_k x row_width) is column-major Y^T.
            // faer's blocked QR synchronises its threads per panel: below some tens of
            // MFLOP a second thread costs more than it gains (measured on the 2-core
            // development host, XXZ x MPS at D_psi = 128: the 31 QRs of 256 x 128 took
            // 74-101 ms on two threads, 26-31 ms on one).
            let qr_par = if row_width * rank_k * rank_k >= 1 << 24 {
                par
            } else {
                Par::Seq
            };
            let v = pool.install(|| qr_q_transposed(&whole_y, row_width, rank_k, qr_par));
            drop(whole_y);
            let blocks: Vec<Vec<T>> = (0..size)
                .map(|r| bond_block(&v, chi_right, block(chi_right, size, r)))
                .collect();
            Some((blocks, v))
        }
        None => None,
    };
    let mine = comm.scatter(0, blocks.as_ref().map(|(b, _)| b.as_slice()))?;
    info.householder += 1;
    Ok(NewCore {
        mine,
        whole: blocks.map(|(_, v)| v),
    })
}

/// `work` in `pool` (its rayon calls use the pool's threads).
fn in_pool<R: Send>(
    pool: &ThreadPool,
    work: impl FnOnce() -> Result<R, SweepError> + Send,
) -> Result<R, SweepError> {
    pool.install(work)
}

/// Rank 0's result train, given to every rank: what a process of a group spanning
/// processes needs to return the result (in one process only rank 0's is read). Two
/// broadcasts: the kind and shapes as u64 (4 per core), then every core's entries.
pub(crate) fn share_train<T: Scalar>(
    comm: &Comm<'_>,
    train: Option<TensorTrain<T>>,
) -> Result<TensorTrain<T>, SweepError> {
    let (mut shapes, mut entries) = match &train {
        Some(train) if comm.rank() == 0 => {
            let mut shapes = vec![u64::from(train.kind() == TrainKind::Mpo)];
            for core in train.cores() {
                let s = core.shape;
                shapes.extend([s.left, s.d_out, s.d_in, s.right].map(|n| n as u64));
            }
            let entries: Vec<T> = train
                .cores()
                .iter()
                .flat_map(|c| c.data.iter().copied())
                .collect();
            (shapes, entries)
        }
        _ => (Vec::new(), Vec::new()),
    };
    comm.broadcast(0, &mut shapes)?;
    comm.broadcast(0, &mut entries)?;
    if comm.rank() == 0 {
        if let Some(train) = train {
            return Ok(train);
        }
    }
    let bad = |detail: String| SweepError::InvalidStack {
        detail: format!("the result train broadcast by rank 0 is malformed: {detail}"),
    };
    let kind = match shapes.first() {
        Some(0) => TrainKind::Mps,
        Some(1) => TrainKind::Mpo,
        other => return Err(bad(format!("kind {other:?}"))),
    };
    let mut cores = Vec::with_capacity(shapes.len() / 4);
    let mut rest = entries.as_slice();
    for dims in shapes[1..].chunks(4) {
        let &[left, d_out, d_in, right] = dims else {
            return Err(bad(format!("{} shape words", shapes.len())));
        };
        let dim = |n: u64| usize::try_from(n).map_err(|_| bad(format!("a dimension {n}")));
        let shape = CoreShape {
            left: dim(left)?,
            d_out: dim(d_out)?,
            d_in: dim(d_in)?,
            right: dim(right)?,
        };
        let len = shape.len();
        if len > rest.len() {
            return Err(bad(format!("{} entries for a core of {len}", rest.len())));
        }
        let (data, tail) = rest.split_at(len);
        rest = tail;
        cores.push(Core {
            shape,
            data: data.to_vec(),
        });
    }
    if !rest.is_empty() {
        return Err(bad(format!("{} entries left over", rest.len())));
    }
    TensorTrain::new(kind, cores)
}
