//! Dense tensors with named axes, and contraction over the axes two tensors share.
//!
//! Every contraction of the sweep (environments, sketches, projections, products, inner
//! products) is one call of [`Tensor::contract_as`] (or [`Tensor::contract`]): faer GEMMs on
//! strided views of the operands as they lie in memory, looping over leading result axes and
//! accumulating over summed axes that do not fuse; only an operand whose axes cannot be viewed
//! that way is permuted first. The caller picks the result's axis order, and with it which
//! operands stay in place: the sweep keeps its large intermediates unpermuted. Naming the axes
//! keeps the index bookkeeping of a stack of any depth out of the algorithms.

use faer::linalg::matmul::matmul;
use faer::reborrow::ReborrowMut;
use faer::{Accum, MatMut, MatRef, Par};

use crate::Scalar;

/// The name of an axis.
///
/// For a stack of `L` layers in mathematical order (layer 0 leftmost, applied last), layer
/// `l`'s core at a site has axes `[Left(l), Phys(l), Phys(l + 1), Right(l)]`: `Phys(l)` is its
/// output leg and `Phys(l + 1)` its input leg, which is layer `l + 1`'s output leg. So
/// `Phys(0)` is the stack's output and `Phys(L)` its input, and contracting two tensors over
/// the names they share is exactly the stack's contraction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Axis {
    /// A sketch column (the batch axis of environments).
    Col,
    /// Left bond of a layer.
    Left(usize),
    /// Right bond of a layer.
    Right(usize),
    /// A physical leg between layers.
    Phys(usize),
    /// The output train's bond on the right of the current site.
    Bond,
    /// The output train's bond on the left of the current site.
    Row,
}

/// A dense tensor in C order with one name per axis.
#[derive(Clone, Debug)]
pub(crate) struct Tensor<T> {
    pub data: Vec<T>,
    pub dims: Vec<usize>,
    pub axes: Vec<Axis>,
}

fn position(axes: &[Axis], axis: Axis) -> Option<usize> {
    axes.iter().position(|&a| a == axis)
}

impl<T: Scalar> Tensor<T> {
    /// A tensor from its parts; `data.len()` must be the product of `dims` (checked, without
    /// overflow: a mismatch is a bug of this crate and panics). Data from outside the crate
    /// goes through [`Tensor::from_parts`].
    pub fn new(data: Vec<T>, dims: Vec<usize>, axes: Vec<Axis>) -> Self {
        assert!(
            dims.len() == axes.len() && checked_product(&dims) == Some(data.len()),
            "tensor data of {} entries does not match dims {dims:?} (axes {axes:?})",
            data.len()
        );
        Self { data, dims, axes }
    }

    /// A tensor from parts that come from outside the crate: `None` unless `dims` and `axes`
    /// have the same length and `data.len()` is the product of `dims` (which must not
    /// overflow).
    pub fn from_parts(data: Vec<T>, dims: Vec<usize>, axes: Vec<Axis>) -> Option<Self> {
        (dims.len() == axes.len() && checked_product(&dims) == Some(data.len())).then_some(Self {
            data,
            dims,
            axes,
        })
    }

    /// The all-ones tensor with every dimension 1.
    pub fn unit(axes: Vec<Axis>) -> Self {
        let dims = vec![1; axes.len()];
        Self::new(vec![T::one()], dims, axes)
    }

    /// Renames `from` to `to`.
    pub fn rename(mut self, from: Axis, to: Axis) -> Self {
        if let Some(i) = position(&self.axes, from) {
            self.axes[i] = to;
        }
        self
    }

    /// The complex conjugate.
    pub fn conj(mut self) -> Self {
        if T::COMPLEX {
            for x in &mut self.data {
                *x = x.conj();
            }
        }
        self
    }

    /// The same tensor with its axes in `order` (every axis exactly once).
    pub fn permuted(&self, order: &[Axis]) -> Self {
        let perm: Vec<usize> = order
            .iter()
            .map(|&a| position(&self.axes, a).unwrap_or_else(|| panic!("axis {a:?} missing")))
            .collect();
        debug_assert_eq!(perm.len(), self.axes.len());
        let dims: Vec<usize> = perm.iter().map(|&p| self.dims[p]).collect();
        // Axes of extent 1 can move freely: when the others keep their order, the data is
        // already in the new order.
        let moved: Vec<usize> = perm
            .iter()
            .copied()
            .filter(|&p| self.dims[p] != 1)
            .collect();
        if moved.windows(2).all(|w| w[0] < w[1]) {
            return Self::new(self.data.clone(), dims, order.to_vec());
        }
        let data = permute(&self.data, &self.dims, &perm);
        Self::new(data, dims, order.to_vec())
    }

    /// Contracts over every axis the two tensors share; the result's axes are `self`'s free
    /// axes then `other`'s, each in their order.
    pub fn contract(&self, other: &Self, par: Par) -> Self {
        let out: Vec<Axis> = self
            .axes
            .iter()
            .copied()
            .filter(|a| !other.axes.contains(a))
            .chain(
                other
                    .axes
                    .iter()
                    .copied()
                    .filter(|a| !self.axes.contains(a)),
            )
            .collect();
        self.contract_as(other, &out, par)
    }

    /// Contracts `self` with `other` into a result with axes `out`, in that order: axes of
    /// both that are absent from `out` are summed over, axes of both that are in `out` are
    /// batch axes (element-wise, not summed), every other axis must be in `out`.
    ///
    /// The GEMMs run on strided views of the operands, so no operand is copied when its
    /// axes group into matrices as they lie; an operand that does not (axes to be summed
    /// interleaved with free ones) is permuted first. Callers choose `out` so that the large
    /// operands need no copy (see [`contract_strided`]).
    pub fn contract_as(&self, other: &Self, out: &[Axis], par: Par) -> Self {
        contract_strided(self, false, other, out, par, &mut Buffers::default())
    }
}

/// Spare buffers for results, so that a sweep that contracts the same shapes site after site
/// reuses its memory instead of allocating (and zeroing) megabytes per contraction.
#[derive(Debug, Default)]
pub(crate) struct Buffers<T> {
    spare: Vec<Vec<T>>,
}

impl<T: Scalar> Buffers<T> {
    /// A buffer of `len` elements with arbitrary (initialised) contents: the caller
    /// overwrites every element.
    fn take(&mut self, len: usize) -> Vec<T> {
        // The smallest spare that fits, else the largest (grown).
        let fits = (0..self.spare.len())
            .filter(|&i| self.spare[i].capacity() >= len)
            .min_by_key(|&i| self.spare[i].capacity());
        let chosen =
            fits.or_else(|| (0..self.spare.len()).max_by_key(|&i| self.spare[i].capacity()));
        let mut buffer = chosen.map_or_else(Vec::new, |i| self.spare.swap_remove(i));
        if buffer.len() >= len {
            buffer.truncate(len);
        } else {
            buffer.resize(len, T::zero());
        }
        buffer
    }

    /// Keeps `buffer` for a later result (a few at most: the sweep's working set).
    pub fn give(&mut self, buffer: Vec<T>) {
        const KEPT: usize = 4;
        if buffer.capacity() == 0 {
            return;
        }
        self.spare.push(buffer);
        if self.spare.len() > KEPT {
            let smallest = (0..self.spare.len())
                .min_by_key(|&i| self.spare[i].capacity())
                .unwrap_or(0);
            self.spare.swap_remove(smallest);
        }
    }
}

/// C-order strides of `dims`.
fn c_strides(dims: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * dims[i + 1];
    }
    strides
}

/// The (size, stride) of `axes` (outermost first) fused into one matrix dimension of a
/// tensor with `tensor_axes` and `strides`, or `None` when they do not lie as one
/// stride run. Axes of dimension 1 are skipped: they have no extent.
fn fuse(
    axes: &[Axis],
    tensor_axes: &[Axis],
    dims: &[usize],
    strides: &[usize],
) -> Option<(usize, usize)> {
    let mut size = 1usize;
    let mut stride = 1usize;
    let mut previous: Option<usize> = None;
    for &axis in axes.iter().rev() {
        let i = position(tensor_axes, axis)?;
        if dims[i] == 1 {
            continue;
        }
        match previous {
            None => stride = strides[i],
            Some(inner) if strides[i] == strides[inner] * dims[inner] => {}
            Some(_) => return None,
        }
        previous = Some(i);
        size *= dims[i];
    }
    Some((size, stride))
}

/// Which operand an axis of the result comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Owner {
    A,
    B,
    Both,
}

/// How one contraction of [`Tensor::contract_as`] runs: the planning half of
/// [`contract_strided`] (axis fusion, loop order, permutations), its execution half
/// [`ContractionPlan::execute`] (the GEMM loop).
///
/// The result's axes (those of extent 1 ignored) end in two runs, one of `a`'s free axes
/// and one of `b`'s (either order, either may be empty); every result axis before them is a
/// loop (batch axes and further free axes), one GEMM per loop index on strided views: `a`
/// (m x k), `b` (k x n), into the result's block for that index (contiguous, so loop indices
/// write disjoint blocks). Summed axes that do not fuse in both operands are accumulation
/// loops (`k_loops`); `a` or `b` is permuted into GEMM order (`a_order`, `b_order`) only when
/// its axes do not fuse into those matrices as they lie.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ContractionPlan {
    /// The result's axes and dimensions.
    out: Vec<Axis>,
    out_dims: Vec<usize>,
    /// Result axes looped over, one GEMM (or accumulation) per index.
    loops: Vec<Axis>,
    /// `a`'s free run (the GEMM's rows) and `b`'s (its columns).
    m_axes: Vec<Axis>,
    n_axes: Vec<Axis>,
    /// Summed axes looped over (accumulated in order), then those fused into k.
    k_loops: Vec<Axis>,
    k_axes: Vec<Axis>,
    /// Whether `a`'s run is the innermost of the result (each block m x n column-major).
    transposed: bool,
    /// The axis orders `a` and `b` are permuted into first, where they do not fuse as they lie.
    a_order: Option<Vec<Axis>>,
    b_order: Option<Vec<Axis>>,
}

/// The GEMMs a [`ContractionPlan`] runs on its operands ([`ContractionPlan::gemm_loops`]):
/// per loop index `i` (result block `i`, `m * n` elements, contiguous) and accumulation step
/// `s`, `a` (`m x k`, strides `a_m`, `a_k`) at `loop_offsets[i].0 + sum_offsets[s].0` times
/// `b` (`k x n`, strides `b_k`, `b_n`) at `loop_offsets[i].1 + sum_offsets[s].1`, the steps
/// added in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GemmLoops {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a_m: usize,
    pub a_k: usize,
    pub b_k: usize,
    pub b_n: usize,
    pub loop_offsets: Vec<(usize, usize)>,
    pub sum_offsets: Vec<(usize, usize)>,
}

/// The axes and dimensions of a contraction's operand: all a plan needs of it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape<'a> {
    pub axes: &'a [Axis],
    pub dims: &'a [usize],
}

impl Shape<'_> {
    /// Number of elements.
    fn len(&self) -> usize {
        self.dims.iter().product()
    }
}

impl<T> Tensor<T> {
    /// The tensor's axes and dimensions.
    pub fn shape(&self) -> Shape<'_> {
        Shape {
            axes: &self.axes,
            dims: &self.dims,
        }
    }
}

/// The dimension of `axis` in `a` or else `b`.
fn dim_in(a: Shape<'_>, b: Shape<'_>, axis: Axis) -> usize {
    position(a.axes, axis)
        .map(|i| a.dims[i])
        .or_else(|| position(b.axes, axis).map(|i| b.dims[i]))
        .unwrap_or_else(|| panic!("result axis {axis:?} in neither operand"))
}

impl ContractionPlan {
    /// The plan of `a` times `b` into a result with axes `out` (as [`Tensor::contract_as`]).
    pub fn new<T: Scalar>(a: &Tensor<T>, b: &Tensor<T>, out: &[Axis]) -> Self {
        Self::for_shapes(a.shape(), b.shape(), out)
    }

    /// The plan of an `a` and a `b` of these shapes into a result with axes `out`.
    pub fn for_shapes(a: Shape<'_>, b: Shape<'_>, out: &[Axis]) -> Self {
        let dim_of = |axis: Axis| dim_in(a, b, axis);
        let out_dims: Vec<usize> = out.iter().map(|&x| dim_of(x)).collect();
        let owner = |axis: Axis| match (a.axes.contains(&axis), b.axes.contains(&axis)) {
            (true, false) => Owner::A,
            (false, true) => Owner::B,
            _ => Owner::Both,
        };
        // The result's axes with extent, and its trailing runs.
        let live: Vec<Axis> = out
            .iter()
            .zip(&out_dims)
            .filter(|&(_, &d)| d != 1)
            .map(|(&x, _)| x)
            .collect();
        let mut split = live.len();
        let mut runs: Vec<(Owner, usize, usize)> = Vec::new();
        for _ in 0..2 {
            let Some(&last) = live[..split].last() else {
                break;
            };
            let who = owner(last);
            if who == Owner::Both || runs.iter().any(|r| r.0 == who) {
                break;
            }
            let end = split;
            while split > 0 && owner(live[split - 1]) == who {
                split -= 1;
            }
            runs.push((who, split, end));
        }
        let loops: Vec<Axis> = live[..split].to_vec();
        let run_of = |who: Owner| {
            runs.iter()
                .find(|r| r.0 == who)
                .map_or(Vec::new(), |r| live[r.1..r.2].to_vec())
        };
        let (m_axes, n_axes) = (run_of(Owner::A), run_of(Owner::B));
        // The result is [loops.., b's run, a's run] when a's run is the innermost: the block per
        // loop index is then m x n column-major.
        let transposed = runs.first().is_some_and(|r| r.0 == Owner::A);
        let summed_a: Vec<Axis> = a
            .axes
            .iter()
            .zip(a.dims)
            .filter(|&(x, &d)| d != 1 && b.axes.contains(x) && !out.contains(x))
            .map(|(&x, _)| x)
            .collect();
        let summed_b: Vec<Axis> = b
            .axes
            .iter()
            .zip(b.dims)
            .filter(|&(x, &d)| d != 1 && a.axes.contains(x) && !out.contains(x))
            .map(|(&x, _)| x)
            .collect();
        debug_assert!(
            a.axes
                .iter()
                .chain(b.axes)
                .all(|x| out.contains(x) || (a.axes.contains(x) && b.axes.contains(x))),
            "an axis of one operand only is missing from the result"
        );

        // Fuse the groups as the operands lie. Summed axes that do not fuse become accumulation
        // loops (a few large GEMMs added up in a fixed order); where that would take many small
        // GEMMs, or a free run does not fuse, the operand is permuted into GEMM order.
        let a_strides = c_strides(a.dims);
        let b_strides = c_strides(b.dims);
        let fuses = |t: Shape<'_>, strides: &[usize], axes: &[Axis]| {
            fuse(axes, t.axes, t.dims, strides).is_some()
        };
        let m_fits = fuses(a, &a_strides, &m_axes);
        let n_fits = fuses(b, &b_strides, &n_axes);
        // For an order of the summed axes: how many leading ones must loop so that the rest fuse
        // in both operands.
        let split_of = |order: &[Axis]| {
            (0..=order.len())
                .find(|&j| fuses(a, &a_strides, &order[j..]) && fuses(b, &b_strides, &order[j..]))
                .unwrap_or(order.len())
        };
        let loop_count =
            |order: &[Axis], j: usize| -> usize { order[..j].iter().map(|&x| dim_of(x)).product() };
        let (split_a, split_b) = (split_of(&summed_a), split_of(&summed_b));
        let (mut k_order, mut k_split) =
            if loop_count(&summed_a, split_a) <= loop_count(&summed_b, split_b) {
                (summed_a.clone(), split_a)
            } else {
                (summed_b.clone(), split_b)
            };
        const MAX_ACCUMULATION_LOOPS: usize = 16;
        let gemm_order = |t: Shape<'_>, inner: [&[Axis]; 2]| -> Vec<Axis> {
            let mut order: Vec<Axis> = loops
                .iter()
                .copied()
                .filter(|x| t.axes.contains(x))
                .collect();
            order.extend(inner.iter().flat_map(|g| g.iter().copied()));
            let rest: Vec<Axis> = t
                .axes
                .iter()
                .copied()
                .filter(|x| !order.contains(x))
                .collect();
            order.extend(rest);
            order
        };
        let (mut a_order, mut b_order) = (None, None);
        if !m_fits || !n_fits || loop_count(&k_order, k_split) > MAX_ACCUMULATION_LOOPS {
            let own_a = fuses(a, &a_strides, &summed_a);
            let own_b = fuses(b, &b_strides, &summed_b);
            // Keep the summed axes in the order of an operand where they already fuse, and
            // permute what does not fit (the smaller operand when both could move).
            k_order = if own_a && (!own_b || a.len() >= b.len()) {
                summed_a.clone()
            } else if own_b {
                summed_b.clone()
            } else {
                summed_a.clone()
            };
            k_split = 0;
            if !m_fits || !fuses(a, &a_strides, &k_order) {
                a_order = Some(gemm_order(a, [&m_axes, &k_order]));
            }
            if !n_fits || !fuses(b, &b_strides, &k_order) {
                b_order = Some(gemm_order(b, [&k_order, &n_axes]));
            }
        }
        Self {
            out: out.to_vec(),
            out_dims,
            loops,
            m_axes,
            n_axes,
            k_loops: k_order[..k_split].to_vec(),
            k_axes: k_order[k_split..].to_vec(),
            transposed,
            a_order,
            b_order,
        }
    }

    /// The result's axes.
    pub fn out(&self) -> &[Axis] {
        &self.out
    }

    /// The result's dimensions.
    pub fn out_dims(&self) -> &[usize] {
        &self.out_dims
    }

    /// Whether each result block is `m x n` column-major (else row-major).
    pub fn transposed(&self) -> bool {
        self.transposed
    }

    /// The axis order `a` is permuted into first, if any.
    pub fn a_order(&self) -> Option<&[Axis]> {
        self.a_order.as_deref()
    }

    /// The axis order `b` is permuted into first, if any.
    pub fn b_order(&self) -> Option<&[Axis]> {
        self.b_order.as_deref()
    }

    /// The GEMMs of the plan on operands (after the plan's permutations) with axes and
    /// dimensions `a` and `b`, in C order: the matrix sizes and strides, and the offsets of
    /// each loop index and accumulation step.
    ///
    /// Panics when the operands are not the (permuted) ones the plan was made for.
    pub fn gemm_loops(&self, a: (&[Axis], &[usize]), b: (&[Axis], &[usize])) -> GemmLoops {
        let a_strides = c_strides(a.1);
        let b_strides = c_strides(b.1);
        let group = |axes: &[Axis], (t_axes, t_dims): (&[Axis], &[usize]), strides: &[usize]| {
            fuse(axes, t_axes, t_dims, strides)
                .unwrap_or_else(|| panic!("axes {axes:?} do not fuse after permutation"))
        };
        let (m, a_m) = group(&self.m_axes, a, &a_strides);
        let (k, a_k) = group(&self.k_axes, a, &a_strides);
        let (k_b, b_k) = group(&self.k_axes, b, &b_strides);
        let (n, b_n) = group(&self.n_axes, b, &b_strides);
        debug_assert_eq!(k, k_b);
        let dim_of = |axis: Axis| {
            position(a.0, axis)
                .map(|i| a.1[i])
                .or_else(|| position(b.0, axis).map(|i| b.1[i]))
                .unwrap_or_else(|| panic!("axis {axis:?} in neither operand"))
        };
        let stride_in = |t_axes: &[Axis], strides: &[usize], axis: Axis| {
            position(t_axes, axis).map_or(0, |i| strides[i])
        };
        // Per loop index: the offsets into a and b; per accumulation index likewise.
        let offsets = |axes: &[Axis]| -> Vec<(usize, usize)> {
            let dims: Vec<usize> = axes.iter().map(|&x| dim_of(x)).collect();
            let count: usize = dims.iter().product();
            (0..count)
                .map(|index| {
                    let (mut offset_a, mut offset_b, mut rest) = (0usize, 0usize, index);
                    for axis in (0..axes.len()).rev() {
                        let i = rest % dims[axis];
                        rest /= dims[axis];
                        offset_a += i * stride_in(a.0, &a_strides, axes[axis]);
                        offset_b += i * stride_in(b.0, &b_strides, axes[axis]);
                    }
                    (offset_a, offset_b)
                })
                .collect()
        };
        GemmLoops {
            m,
            n,
            k,
            a_m,
            a_k,
            b_k,
            b_n,
            loop_offsets: offsets(&self.loops),
            sum_offsets: offsets(&self.k_loops),
        }
    }

    /// Runs the plan on the operands it was made for, `a` conjugated when `conj_a`: the
    /// permutations it calls for, then the GEMM loop, the result in a buffer from `buffers`.
    pub fn execute<T: Scalar>(
        &self,
        a: &Tensor<T>,
        conj_a: bool,
        b: &Tensor<T>,
        par: Par,
        buffers: &mut Buffers<T>,
    ) -> Tensor<T> {
        let Self {
            out,
            out_dims,
            transposed,
            a_order,
            b_order,
            ..
        } = self;
        let transposed = *transposed;
        let a_perm = a_order.as_ref().map(|order| a.permuted(order));
        let b_perm = b_order.as_ref().map(|order| b.permuted(order));
        let a = a_perm.as_ref().unwrap_or(a);
        let b = b_perm.as_ref().unwrap_or(b);
        let GemmLoops {
            m,
            n,
            k,
            a_m,
            a_k,
            b_k,
            b_n,
            loop_offsets,
            sum_offsets,
        } = self.gemm_loops((&a.axes, &a.dims), (&b.axes, &b.dims));
        let out_dims = out_dims.clone();
        let total: usize = out_dims.iter().product();
        let mut data = buffers.take(total);
        if total == 0 || k == 0 {
            // Nothing to multiply: an empty result, or a sum over an empty range.
            data.iter_mut().for_each(|x| *x = T::zero());
            return Tensor::new(data, out_dims, out.clone());
        }
        let block = m * n;
        let count = loop_offsets.len();
        debug_assert_eq!(count * block, total);
        // Many small GEMMs run one per thread; one large GEMM uses the threads itself.
        let inner_par = if count > 1 { Par::Seq } else { par };
        let (dst_rs, dst_cs) = if transposed { (1, m) } else { (n, 1) };
        let gemm = |index: usize, dst: &mut [T]| {
            let (offset_a, offset_b) = loop_offsets[index];
            let mut dst = strided_mut(dst, m, n, dst_rs, dst_cs);
            for (step, &(sum_a, sum_b)) in sum_offsets.iter().enumerate() {
                let lhs = strided_ref(&a.data[offset_a + sum_a..], m, k, a_m, a_k);
                let rhs = strided_ref(&b.data[offset_b + sum_b..], k, n, b_k, b_n);
                let accum = if step == 0 {
                    Accum::Replace
                } else {
                    Accum::Add
                };
                if conj_a && T::COMPLEX {
                    matmul(
                        dst.rb_mut(),
                        accum,
                        lhs.conjugate(),
                        rhs,
                        T::one(),
                        inner_par,
                    );
                } else {
                    matmul(dst.rb_mut(), accum, lhs, rhs, T::one(), inner_par);
                }
            }
        };
        match par {
            Par::Rayon(threads) if count > 1 && threads.get() > 1 => {
                use rayon::prelude::*;
                let per = count.div_ceil(threads.get());
                data.par_chunks_mut(block * per)
                    .enumerate()
                    .for_each(|(chunk, blocks)| {
                        for (j, dst) in blocks.chunks_mut(block).enumerate() {
                            gemm(chunk * per + j, dst);
                        }
                    });
            }
            _ => {
                for (index, dst) in data.chunks_mut(block).enumerate() {
                    gemm(index, dst);
                }
            }
        }
        for temporary in [a_perm, b_perm].into_iter().flatten() {
            buffers.give(temporary.data);
        }
        Tensor::new(data, out_dims, out.clone())
    }
}

/// The contraction of [`Tensor::contract_as`], with `a` conjugated when `conj_a`: its
/// [`ContractionPlan`], executed.
pub(crate) fn contract_strided<T: Scalar>(
    a: &Tensor<T>,
    conj_a: bool,
    b: &Tensor<T>,
    out: &[Axis],
    par: Par,
    buffers: &mut Buffers<T>,
) -> Tensor<T> {
    ContractionPlan::new(a, b, out).execute(a, conj_a, b, par, buffers)
}

/// The product of `dims`, or `None` when it overflows.
pub(crate) fn checked_product(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// The last element a strided `rows x cols` view starting at 0 touches, plus one; `None` when
/// that overflows (no slice is that long).
fn extent(rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> Option<usize> {
    if rows == 0 || cols == 0 {
        Some(0)
    } else {
        (rows - 1)
            .checked_mul(row_stride)?
            .checked_add((cols - 1).checked_mul(col_stride)?)?
            .checked_add(1)
    }
}

/// A strided view of `data` (element (i, j) at `i * row_stride + j * col_stride`).
fn strided_ref<T>(
    data: &[T],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
) -> MatRef<'_, T> {
    assert!(
        extent(rows, cols, row_stride, col_stride).is_some_and(|end| end <= data.len()),
        "strided view out of bounds"
    );
    let (rs, cs) = (signed(row_stride), signed(col_stride));
    // SAFETY: every element the view can reach, (rows-1)*row_stride + (cols-1)*col_stride at
    // most, lies inside `data` (asserted above), and the view borrows `data` immutably for
    // its lifetime.
    unsafe { MatRef::from_raw_parts(data.as_ptr(), rows, cols, rs, cs) }
}

/// A mutable strided view of `data` whose elements do not overlap (the strides describe a
/// row-major or column-major `rows x cols` block).
fn strided_mut<T>(
    data: &mut [T],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
) -> MatMut<'_, T> {
    assert!(
        extent(rows, cols, row_stride, col_stride).is_some_and(|end| end <= data.len()),
        "strided view out of bounds"
    );
    assert!(
        (row_stride == cols.max(1) && col_stride == 1)
            || (row_stride == 1 && col_stride == rows.max(1)),
        "a mutable view must be a dense block"
    );
    let (rs, cs) = (signed(row_stride), signed(col_stride));
    // SAFETY: the view stays inside `data` (asserted), its elements are distinct (a dense
    // row- or column-major block, asserted), and it borrows `data` mutably for its lifetime.
    unsafe { MatMut::from_raw_parts_mut(data.as_mut_ptr(), rows, cols, rs, cs) }
}

fn signed(stride: usize) -> isize {
    isize::try_from(stride).unwrap_or_else(|_| panic!("stride {stride} exceeds isize"))
}

/// `out (m x n) = a (m x k) * b (k x n)`, all row-major.
pub(crate) fn gemm_row_major<T: Scalar>(
    out: &mut [T],
    a: &[T],
    b: &[T],
    m: usize,
    k: usize,
    n: usize,
    par: Par,
) {
    if m == 0 || n == 0 {
        return;
    }
    // Row-major C (m x n) is column-major C^T (n x m) = B^T A^T, and row-major B, A are
    // column-major B^T, A^T: one GEMM on the views, no copies.
    let dst = MatMut::from_column_major_slice_mut(out, n, m);
    let bt = MatRef::from_column_major_slice(b, n, k);
    let at = MatRef::from_column_major_slice(a, k, m);
    matmul(dst, Accum::Replace, bt, at, T::one(), par);
}

/// `data` (C order, shape `dims`) with its axes permuted: output axis i is input axis
/// `perm[i]`.
pub(crate) fn permute<T: Copy>(data: &[T], dims: &[usize], perm: &[usize]) -> Vec<T> {
    let rank = dims.len();
    let mut in_strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        in_strides[i] = in_strides[i + 1] * dims[i + 1];
    }
    let out_dims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    let strides: Vec<usize> = perm.iter().map(|&p| in_strides[p]).collect();
    let total = data.len();
    let mut out = Vec::with_capacity(total);
    if total == 0 {
        return out;
    }
    // Odometer over the output index, innermost axis as a tight loop.
    let inner = rank - 1;
    let (inner_dim, inner_stride) = (out_dims[inner], strides[inner]);
    let mut index = vec![0usize; rank];
    let mut offset = 0usize;
    loop {
        let mut o = offset;
        for _ in 0..inner_dim {
            out.push(data[o]);
            o += inner_stride;
        }
        // Advance the outer axes.
        let mut axis = inner;
        loop {
            if axis == 0 {
                return out;
            }
            axis -= 1;
            index[axis] += 1;
            offset += strides[axis];
            if index[axis] < out_dims[axis] {
                break;
            }
            offset -= strides[axis] * out_dims[axis];
            index[axis] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_matches_naive_transpose() {
        let data: Vec<f64> = (0..24).map(f64::from).collect();
        let out = permute(&data, &[2, 3, 4], &[2, 0, 1]);
        for i in 0..2 {
            for j in 0..3 {
                for k in 0..4 {
                    assert_eq!(out[k * 6 + i * 3 + j], data[i * 12 + j * 4 + k]);
                }
            }
        }
    }

    /// The contraction by its definition: sum over every index of the summed axes.
    fn naive(a: &Tensor<f64>, b: &Tensor<f64>, out: &[Axis]) -> Vec<f64> {
        let mut all: Vec<(Axis, usize)> = Vec::new();
        for (&x, &d) in a.axes.iter().zip(&a.dims).chain(b.axes.iter().zip(&b.dims)) {
            if !all.iter().any(|&(y, _)| y == x) {
                all.push((x, d));
            }
        }
        let index_of = |t: &Tensor<f64>, values: &[usize]| {
            t.axes.iter().zip(&t.dims).fold(0, |acc, (x, &d)| {
                let i = all.iter().position(|&(y, _)| y == *x).unwrap_or(0);
                acc * d + values[i]
            })
        };
        let out_dims: Vec<usize> = out
            .iter()
            .map(|x| all.iter().find(|&&(y, _)| y == *x).map_or(1, |&(_, d)| d))
            .collect();
        let mut result = vec![0.0; out_dims.iter().product()];
        let total: usize = all.iter().map(|&(_, d)| d).product();
        for flat in 0..total {
            let mut values = vec![0; all.len()];
            let mut rest = flat;
            for (i, &(_, d)) in all.iter().enumerate().rev() {
                values[i] = rest % d;
                rest /= d;
            }
            let o = out.iter().zip(&out_dims).fold(0, |acc, (x, &d)| {
                let i = all.iter().position(|&(y, _)| y == *x).unwrap_or(0);
                acc * d + values[i]
            });
            result[o] += a.data[index_of(a, &values)] * b.data[index_of(b, &values)];
        }
        result
    }

    fn filled(dims: &[usize], axes: &[Axis], seed: usize) -> Tensor<f64> {
        let len = dims.iter().product();
        let data = (0..len)
            .map(|i| ((i * 7 + seed * 13) % 11) as f64 - 5.0)
            .collect();
        Tensor::new(data, dims.to_vec(), axes.to_vec())
    }

    #[test]
    fn strided_contractions_match_the_definition() {
        use Axis::{Bond, Col, Left, Phys, Right, Row};
        // (a axes, a dims, b axes, b dims, result orders): loops over free and batch axes,
        // accumulation over summed axes that do not fuse, transposed blocks, permuted
        // fallbacks and axes of extent 1.
        /// Operand a's axes and dims, b's, and the result orders to try.
        type Case = (Vec<Axis>, Vec<usize>, Vec<Axis>, Vec<usize>, Vec<Vec<Axis>>);
        let cases: Vec<Case> = vec![
            (
                vec![Col, Left(0), Left(1)],
                vec![3, 2, 4],
                vec![Left(1), Phys(1), Phys(2), Right(1)],
                vec![4, 2, 1, 3],
                vec![
                    vec![Left(0), Phys(1), Col, Phys(2), Right(1)],
                    vec![Col, Left(0), Phys(1), Phys(2), Right(1)],
                    vec![Right(1), Col, Phys(2), Phys(1), Left(0)],
                ],
            ),
            (
                vec![Row, Phys(0), Phys(2), Bond],
                vec![2, 3, 2, 4],
                vec![Phys(0), Left(0), Left(1), Phys(2), Bond],
                vec![3, 2, 2, 2, 4],
                vec![vec![Row, Left(0), Left(1)], vec![Left(1), Left(0), Row]],
            ),
            (
                vec![Col, Left(0), Phys(1), Right(1)],
                vec![2, 3, 2, 3],
                vec![Col, Left(0), Phys(1), Right(0)],
                vec![2, 3, 2, 2],
                vec![vec![Col, Right(0), Right(1)], vec![Col, Right(1), Right(0)]],
            ),
            (
                vec![Bond, Right(0), Right(1)],
                vec![3, 2, 4],
                vec![Left(0), Phys(0), Phys(1), Right(0)],
                vec![2, 3, 2, 2],
                vec![
                    vec![Right(1), Phys(0), Left(0), Phys(1), Bond],
                    vec![Phys(0), Left(0), Right(1), Phys(1), Bond],
                ],
            ),
        ];
        for (seed, (a_axes, a_dims, b_axes, b_dims, orders)) in cases.into_iter().enumerate() {
            let a = filled(&a_dims, &a_axes, seed);
            let b = filled(&b_dims, &b_axes, seed + 1);
            for out in orders {
                let expected = naive(&a, &b, &out);
                for par in [Par::Seq, Par::rayon(2)] {
                    let got = a.contract_as(&b, &out, par);
                    assert_eq!(got.axes, out);
                    assert_eq!(got.data, expected, "result order {out:?}");
                }
            }
        }
    }

    #[test]
    fn contract_is_matrix_product() {
        let a = Tensor::new(
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            vec![2, 3],
            vec![Axis::Row, Axis::Col],
        );
        let b = Tensor::new(
            vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0],
            vec![3, 2],
            vec![Axis::Col, Axis::Bond],
        );
        let c = a.contract(&b, Par::Seq);
        assert_eq!(c.axes, vec![Axis::Row, Axis::Bond]);
        assert_eq!(c.data, vec![4.0, 5.0, 10.0, 11.0]);
    }

    #[test]
    fn plans_permute_only_what_does_not_fuse() {
        use Axis::*;
        // The sweep's first step: an environment [Col, Left(0), Left(1)] times the state's
        // core [Left(1), Phys(1), Phys(2), Right(1)] into [Left(0), Phys(1), Col, Phys(2),
        // Right(1)]: strided GEMMs over Left(0), neither operand copied.
        let env = filled(&[3, 2, 4], &[Col, Left(0), Left(1)], 1);
        let core = filled(&[4, 2, 1, 5], &[Left(1), Phys(1), Phys(2), Right(1)], 2);
        let out = [Left(0), Phys(1), Col, Phys(2), Right(1)];
        let plan = ContractionPlan::new(&env, &core, &out);
        assert_eq!((plan.a_order.clone(), plan.b_order.clone()), (None, None));
        assert_eq!(plan.k_axes, vec![Left(1)]);
        let run = plan.execute(&env, false, &core, Par::Seq, &mut Buffers::default());
        assert_eq!(run.data, naive(&env, &core, &out));
        // Summed axes interleaved with free ones in `a`: permuted, same numbers.
        let a = filled(&[2, 3, 4], &[Left(0), Row, Left(1)], 3);
        let b = filled(&[4, 2], &[Left(1), Left(0)], 4);
        let plan = ContractionPlan::new(&a, &b, &[Row]);
        assert!(plan.a_order.is_some() || plan.b_order.is_some() || !plan.k_loops.is_empty());
        let run = plan.execute(&a, false, &b, Par::Seq, &mut Buffers::default());
        assert_eq!(run.data, naive(&a, &b, &[Row]));
    }
}
