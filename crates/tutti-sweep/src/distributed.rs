//! One SRC sweep on one rank of a group: the rank owns a contiguous block of sketch columns.
//!
//! Left to right, each rank builds its columns of every sketched environment (no
//! communication). Right to left, per site: every rank forms its rows of the sketched matrix,
//! rank 0 gathers them, runs the QR and scatters blocks of rows of the new core, each rank
//! projects its rows of the next right environment S, and an allgather gives every rank the
//! whole S. A group of one (or the plain path, [`Solo`]) runs the same code with trivial
//! exchanges, so its result is bit-identical.

use faer::Par;
use tutti_backend::Element;
use tutti_group::Comm;

use crate::contract::site_product;
use crate::layer::Layer;
use crate::linalg::qr_q_transposed;
use crate::sketch::{block, sketch_block};
use crate::src::{Pass, ProgressFn, SweepProgress};
use crate::stack::{Stack, StackReader};
use crate::tensor::{Axis, Tensor};
use crate::train::{Core, TensorTrain};
use crate::{Scalar, SweepError};

/// The three exchanges of the right-to-left pass, rooted at rank 0.
pub(crate) trait Exchange {
    /// This rank.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Every rank's `send` concatenated in rank order, at rank 0 (`None` elsewhere).
    fn gather<T: Element>(&self, send: &[T]) -> Result<Option<Vec<T>>, SweepError>;
    /// Rank 0's `blocks[r]` on rank r.
    fn scatter<T: Element>(&self, blocks: Option<&[Vec<T>]>) -> Result<Vec<T>, SweepError>;
    /// Every rank's `send` concatenated in rank order, on every rank.
    fn allgather_concat<T: Element>(&self, send: &[T]) -> Result<Vec<T>, SweepError>;
}

/// The exchanges of a single rank without a group: the plain path.
pub(crate) struct Solo;

impl Exchange for Solo {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn gather<T: Element>(&self, send: &[T]) -> Result<Option<Vec<T>>, SweepError> {
        Ok(Some(send.to_vec()))
    }
    fn scatter<T: Element>(&self, blocks: Option<&[Vec<T>]>) -> Result<Vec<T>, SweepError> {
        Ok(blocks.and_then(|b| b.first().cloned()).unwrap_or_default())
    }
    fn allgather_concat<T: Element>(&self, send: &[T]) -> Result<Vec<T>, SweepError> {
        Ok(send.to_vec())
    }
}

impl Exchange for Comm<'_> {
    fn rank(&self) -> usize {
        Comm::rank(self)
    }
    fn size(&self) -> usize {
        Comm::size(self)
    }
    fn gather<T: Element>(&self, send: &[T]) -> Result<Option<Vec<T>>, SweepError> {
        Ok(Comm::gather(self, 0, send)?.map(|blocks| blocks.concat()))
    }
    fn scatter<T: Element>(&self, blocks: Option<&[Vec<T>]>) -> Result<Vec<T>, SweepError> {
        Ok(Comm::scatter(self, 0, blocks)?)
    }
    fn allgather_concat<T: Element>(&self, send: &[T]) -> Result<Vec<T>, SweepError> {
        Ok(Comm::allgather_concat(self, send)?)
    }
}

/// What one sweep needs besides the layers.
#[derive(Clone, Copy)]
pub(crate) struct SweepPlan<'a> {
    pub stack: &'a Stack,
    /// The sketch width s (chi_out + oversample).
    pub width: usize,
    pub seed: u64,
    pub par: Par,
    pub progress: Option<&'a ProgressFn>,
}

/// `env (Col x D)` times `g (Col x p)` column by column: axes `[Col, Left.., Phys(0), Phys(L)]`.
fn attach_sketch<T: Scalar>(env: &Tensor<T>, g: &[T], stack: &Stack, site: usize) -> Tensor<T> {
    let cols = env.dims[0];
    let fused: usize = env.dims[1..].iter().product();
    let (d_out, d_in) = stack.out_phys(site);
    let p = d_out * d_in;
    let mut data = Vec::with_capacity(cols * fused * p);
    for c in 0..cols {
        let gc = &g[c * p..(c + 1) * p];
        for &e in &env.data[c * fused..(c + 1) * fused] {
            data.extend(gc.iter().map(|&x| e * x));
        }
    }
    let mut dims = env.dims.clone();
    dims.push(d_out);
    dims.push(d_in);
    let mut axes = env.axes.clone();
    axes.push(Axis::Phys(0));
    axes.push(Axis::Phys(stack.depth()));
    Tensor::new(data, dims, axes)
}

fn report(progress: Option<&ProgressFn>, rank: usize, pass: Pass, site: usize, sites: usize) {
    if let (Some(progress), 0) = (progress, rank) {
        progress(SweepProgress { pass, site, sites });
    }
}

/// Runs the sweep on this rank; rank 0 returns the right-canonical result (bonds <= width),
/// the other ranks `None`.
pub(crate) fn sweep_rank<T: Scalar, X: Exchange>(
    exchange: &X,
    layers: &[&dyn Layer<T>],
    plan: &SweepPlan<'_>,
) -> Result<Option<TensorTrain<T>>, SweepError> {
    let stack = plan.stack;
    let (n, depth, par) = (stack.sites, stack.depth(), plan.par);
    let (rank, size) = (exchange.rank(), exchange.size());
    let columns = block(plan.width, size, rank);
    let left_axes = stack.left_axes();
    let right_axes = stack.right_axes();

    // Left to right: this rank's columns of the sketched environments envs[k], left of site k.
    let mut env_axes = vec![Axis::Col];
    env_axes.extend(left_axes.iter().copied());
    let mut env_dims = vec![1; depth + 1];
    env_dims[0] = columns.len();
    let mut envs = Vec::with_capacity(n);
    envs.push(Tensor::new(
        vec![T::one(); columns.len()],
        env_dims,
        env_axes.clone(),
    ));
    {
        let mut reader = StackReader::new(stack, layers, false)?;
        for site in 0..n - 1 {
            report(plan.progress, rank, Pass::Sketch, site, n);
            let cores = reader.next_site(site)?;
            let g = sketch_block::<T>(plan.seed, site, columns.clone(), stack.phys(site));
            let mut z = attach_sketch(&envs[site], &g, stack, site);
            for core in cores.iter().rev() {
                z = z.contract(core, par);
            }
            let mut order = vec![Axis::Col];
            order.extend(right_axes.iter().copied());
            let mut next = z.permuted(&order);
            for l in 0..depth {
                next = next.rename(Axis::Right(l), Axis::Left(l));
            }
            envs.push(next);
        }
    }

    // Right to left: sketch, QR at rank 0, projected environment S.
    let mut s_axes = right_axes.clone();
    s_axes.push(Axis::Bond);
    let mut s_env = Tensor::<T>::unit(s_axes);
    let mut out: Vec<Option<Core<T>>> = vec![None; n];
    let mut chi_right = 1usize;
    let mut left_caps = Vec::with_capacity(n);
    let mut phys_product = 1usize;
    for site in 0..n {
        left_caps.push(phys_product.min(stack.fused_left(site)));
        phys_product = phys_product.saturating_mul(stack.phys(site));
    }
    let mut reader = StackReader::new(stack, layers, true)?;
    for site in (1..n).rev() {
        report(plan.progress, rank, Pass::Orthogonalize, site, n);
        let cores = reader.next_site(site)?;
        let (d_out, d_in) = stack.out_phys(site);
        let phys = d_out * d_in;
        let row_width = phys * chi_right;

        // This rank's rows of the sketched matrix Y (columns x phys*chi_right).
        let mut y = envs[site].clone();
        for core in cores.iter().rev() {
            y = y.contract(core, par);
        }
        let y = y.contract(&s_env, par).permuted(&[
            Axis::Col,
            Axis::Phys(0),
            Axis::Phys(depth),
            Axis::Bond,
        ]);
        envs.truncate(site);

        // Rank 0: Y^T = Q R; the new core is Q^T (rank x phys*chi_right), right-orthonormal.
        let gathered = exchange.gather(&y.data)?;
        let blocks = match gathered {
            Some(sketch) => {
                let rank_k = plan.width.min(row_width).min(left_caps[site]);
                // Row-major Y (width x row_width) is column-major Y^T; its first rank_k
                // columns are the first rank_k sketch columns.
                let v = qr_q_transposed(&sketch[..rank_k * row_width], row_width, rank_k);
                let blocks: Vec<Vec<T>> = (0..size)
                    .map(|r| {
                        let rows = block(rank_k, size, r);
                        v[rows.start * row_width..rows.end * row_width].to_vec()
                    })
                    .collect();
                out[site] = Some(Core {
                    shape: stack.out_shape(site, rank_k, chi_right),
                    data: v,
                });
                Some(blocks)
            }
            None => None,
        };
        let my_rows = exchange.scatter(blocks.as_deref())?;
        let count = my_rows.len() / row_width.max(1);

        // This rank's rows of the next S: S[a, r] = sum W[a, p, b] S_old[b, c] conj(V[r, p, c]).
        let v = Tensor::new(
            my_rows,
            vec![count, d_out, d_in, chi_right],
            vec![Axis::Row, Axis::Phys(0), Axis::Phys(depth), Axis::Bond],
        )
        .conj();
        let mut t = s_env.contract(&v, par);
        for core in &cores {
            t = t.contract(core, par);
        }
        let mut order = vec![Axis::Row];
        order.extend(left_axes.iter().copied());
        let mine = t.permuted(&order);
        let all_rows = exchange.allgather_concat(&mine.data)?;
        let fused_left = stack.fused_left(site);
        let rank_k = all_rows.len() / fused_left.max(1);
        let mut dims = vec![rank_k];
        dims.extend(stack.shapes.iter().map(|s| s[site].left));
        let mut next = Tensor::new(all_rows, dims, order);
        let mut s_order = left_axes.clone();
        s_order.push(Axis::Row);
        next = next.permuted(&s_order);
        for l in 0..depth {
            next = next.rename(Axis::Left(l), Axis::Right(l));
        }
        s_env = next.rename(Axis::Row, Axis::Bond);
        chi_right = rank_k;
    }

    // Site 0 carries the norm: the exact product core times S.
    let cores = reader.next_site(0)?;
    report(plan.progress, rank, Pass::Orthogonalize, 0, n);
    if rank != 0 {
        return Ok(None);
    }
    let first = site_product(stack, &cores, par).contract(&s_env, par);
    out[0] = Some(Core {
        shape: stack.out_shape(0, 1, chi_right),
        data: first.data,
    });
    let cores = out
        .into_iter()
        .enumerate()
        .map(|(site, core)| {
            core.ok_or_else(|| SweepError::Devices(format!("site {site} was not computed")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(TensorTrain::from_trusted(stack.out_kind, cores)))
}
