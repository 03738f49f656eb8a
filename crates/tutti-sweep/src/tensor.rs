//! Dense tensors with named axes, and contraction over the axes two tensors share.
//!
//! Every contraction of the sweep (environments, sketches, projections, products, inner
//! products) is one call of [`Tensor::contract`]: permute both operands so the shared axes
//! meet, then one GEMM (faer). Naming the axes keeps the index bookkeeping of a stack of any
//! depth out of the algorithms.

use faer::linalg::matmul::matmul;
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
    /// A tensor from its parts; `data.len()` must be the product of `dims`.
    pub fn new(data: Vec<T>, dims: Vec<usize>, axes: Vec<Axis>) -> Self {
        debug_assert_eq!(data.len(), dims.iter().product::<usize>());
        debug_assert_eq!(dims.len(), axes.len());
        Self { data, dims, axes }
    }

    /// The all-ones tensor with every dimension 1.
    pub fn unit(axes: Vec<Axis>) -> Self {
        let dims = vec![1; axes.len()];
        Self::new(vec![T::one()], dims, axes)
    }

    /// The dimension of `axis` (1 when absent).
    pub fn dim(&self, axis: Axis) -> usize {
        position(&self.axes, axis).map_or(1, |i| self.dims[i])
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
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return self.clone();
        }
        let dims: Vec<usize> = perm.iter().map(|&p| self.dims[p]).collect();
        let data = permute(&self.data, &self.dims, &perm);
        Self::new(data, dims, order.to_vec())
    }

    /// Contracts over every axis the two tensors share; the result's axes are `self`'s free
    /// axes then `other`'s, each in their order.
    pub fn contract(&self, other: &Self, par: Par) -> Self {
        let shared: Vec<Axis> = self
            .axes
            .iter()
            .copied()
            .filter(|a| other.axes.contains(a))
            .collect();
        let free_a: Vec<Axis> = self
            .axes
            .iter()
            .copied()
            .filter(|a| !shared.contains(a))
            .collect();
        let free_b: Vec<Axis> = other
            .axes
            .iter()
            .copied()
            .filter(|a| !shared.contains(a))
            .collect();
        let order_a: Vec<Axis> = free_a.iter().chain(shared.iter()).copied().collect();
        let order_b: Vec<Axis> = shared.iter().chain(free_b.iter()).copied().collect();
        let a = self.permuted(&order_a);
        let b = other.permuted(&order_b);
        let m: usize = free_a.iter().map(|&x| a.dim(x)).product();
        let k: usize = shared.iter().map(|&x| a.dim(x)).product();
        let n: usize = free_b.iter().map(|&x| b.dim(x)).product();
        let mut out = vec![T::zero(); m * n];
        gemm_row_major(&mut out, &a.data, &b.data, m, k, n, par);
        let dims = free_a
            .iter()
            .map(|&x| a.dim(x))
            .chain(free_b.iter().map(|&x| b.dim(x)))
            .collect();
        let axes = free_a.into_iter().chain(free_b).collect();
        Self::new(out, dims, axes)
    }
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
}
