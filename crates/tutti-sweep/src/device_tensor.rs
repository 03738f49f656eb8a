//! The sweep's contractions on a `tutti_backend::Device`: a [`ContractionPlan`] executed on
//! operands in device buffers, every GEMM of the plan a [`Device::gemm`] call.
//!
//! The executor reads the same lowering as the host ([`ContractionPlan::gemm_loops`]): per loop
//! index and accumulation step one product on strided views. A view with a unit stride is a
//! column-major BLAS operand (`Op::N`) or the transpose of one (`Op::T`); a result block that
//! is row-major is computed as its transpose, `C^T = B^T A^T`. The loop over the plan's loop
//! indices is one `Batch::Strided` call per accumulation step where the loop offsets form an
//! arithmetic progression, else one call per index; the accumulation steps are `beta = 1`
//! calls in the host's order. The plan's permutations run on the device (passes of the
//! backend's `permute_bac` kernel). Conjugation of `a` is `Op::C` where `a` enters
//! transposed; where it would enter as stored (a plain conjugate, which BLAS has no `Op` for),
//! `a` is conjugated first by a round trip through the host (download, conjugate, upload: the
//! conjugated operand of the sweep is this rank's rows of a new core, a small block).
//!
//! The sweep's device executor (`executor.rs`) runs every contraction of a rank through it.

use tutti_backend::kernel::builtin::permute_bac;
use tutti_backend::{BackendError, BlasScalar, Buffer, Device, Gemm, Op};

use crate::tensor::{Axis, ContractionPlan, GemmLoops, Shape, Tensor};
use crate::{Scalar, SweepError};

/// A dense tensor in C order in a device buffer, one name per axis (the device twin of
/// [`Tensor`]).
#[derive(Debug)]
pub(crate) struct DeviceTensor<T: Scalar> {
    pub data: Buffer<T>,
    pub dims: Vec<usize>,
    pub axes: Vec<Axis>,
}

fn invalid(detail: String) -> SweepError {
    SweepError::Backend(BackendError::InvalidArgument {
        op: "device contraction",
        detail,
    })
}

impl<T: Scalar> DeviceTensor<T> {
    /// The tensor's axes and dimensions.
    pub fn shape(&self) -> Shape<'_> {
        Shape {
            axes: &self.axes,
            dims: &self.dims,
        }
    }

    /// `tensor` copied to `device`.
    pub fn upload(device: &Device, tensor: &Tensor<T>) -> Result<Self, SweepError> {
        Ok(Self {
            data: device.upload(&tensor.data)?,
            dims: tensor.dims.clone(),
            axes: tensor.axes.clone(),
        })
    }

    /// The tensor copied to the host.
    pub fn download(&self) -> Result<Tensor<T>, SweepError> {
        let data = self.data.to_host_vec()?;
        Tensor::from_parts(data, self.dims.clone(), self.axes.clone()).ok_or_else(|| {
            invalid(format!(
                "a device tensor of {} elements does not match dims {:?}",
                self.data.len(),
                self.dims
            ))
        })
    }

    /// The same tensor with its axes in `order` (every axis exactly once), on the same device:
    /// one `permute_bac` pass (`[a, b, c] -> [b, a, c]`) per axis brought to the front, from the
    /// last of `order` to the first; axes of extent 1 move for free.
    pub fn permuted(&self, order: &[Axis]) -> Result<Self, SweepError> {
        if order.len() != self.axes.len() || order.iter().any(|a| !self.axes.contains(a)) {
            return Err(invalid(format!(
                "cannot permute axes {:?} into {order:?}",
                self.axes
            )));
        }
        let mut axes = self.axes.clone();
        let mut dims = self.dims.clone();
        let mut data: Option<Buffer<T>> = None;
        for &axis in order.iter().rev() {
            let Some(p) = axes.iter().position(|&x| x == axis) else {
                continue;
            };
            let (outer, moved): (usize, usize) = (dims[..p].iter().product(), dims[p]);
            let inner: usize = dims[p + 1..].iter().product();
            if outer > 1 && moved > 1 {
                let source = data.as_ref().unwrap_or(&self.data);
                let mut target = source.device().alloc_zeros::<T>(source.len())?;
                permute_bac(source, &mut target, [outer, moved, inner])?;
                data = Some(target);
            }
            axes[..=p].rotate_right(1);
            dims[..=p].rotate_right(1);
        }
        let data = match data {
            Some(data) => data,
            None => self.data.clone_to(self.data.device())?,
        };
        Ok(Self { data, dims, axes })
    }

    /// The complex conjugate, through the host (see the module's documentation).
    pub fn conjugated(&self) -> Result<Self, SweepError> {
        let mut host = self.data.to_host_vec()?;
        for x in &mut host {
            *x = Scalar::conj(*x);
        }
        Ok(Self {
            data: self.data.device().upload(&host)?,
            dims: self.dims.clone(),
            axes: self.axes.clone(),
        })
    }
}

/// A strided `rows x cols` view (element `(i, j)` at `i * row_stride + j * col_stride`).
#[derive(Clone, Copy, Debug)]
struct View {
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl View {
    /// The view as a BLAS operand: `(op, ld)` such that `op(stored)` is the view (conjugated
    /// when `conj`), or `None` when no `Op` expresses it.
    fn operand(self, conj: bool) -> Option<(Op, usize)> {
        let Self {
            rows,
            cols,
            row_stride,
            col_stride,
        } = self;
        // Stored column-major as it is (rows x cols), or as its transpose (cols x rows).
        let as_stored = (rows <= 1 || row_stride == 1)
            .then(|| if cols <= 1 { rows.max(1) } else { col_stride })
            .filter(|&ld| ld >= rows.max(1));
        let as_transpose = (cols <= 1 || col_stride == 1)
            .then(|| if rows <= 1 { cols.max(1) } else { row_stride })
            .filter(|&ld| ld >= cols.max(1));
        if conj {
            as_transpose.map(|ld| (Op::C, ld))
        } else {
            as_stored
                .map(|ld| (Op::N, ld))
                .or_else(|| as_transpose.map(|ld| (Op::T, ld)))
        }
    }

    fn transposed(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
        }
    }
}

/// The common step `(da, db)` of `offsets` when there are at least two and they form an
/// arithmetic progression with non-negative steps.
fn progression(offsets: &[(usize, usize)]) -> Option<(usize, usize)> {
    let (&(a0, b0), &(a1, b1)) = (offsets.first()?, offsets.get(1)?);
    let (da, db) = (a1.checked_sub(a0)?, b1.checked_sub(b0)?);
    offsets
        .iter()
        .enumerate()
        .all(|(i, &(a, b))| a == a0 + i * da && b == b0 + i * db)
        .then_some((da, db))
}

/// Runs `plan` (made for operands of `a`'s and `b`'s axes and dims) on the device holding
/// `a` and `b`, `a` conjugated when `conj_a`: the result in a new buffer, laid out as the
/// host's [`ContractionPlan::execute`] lays it out.
///
/// Errors: a backend error (memory, a library call), or `InvalidArgument` when an operand
/// does not match the plan.
pub(crate) fn execute_on_device<T: Scalar>(
    plan: &ContractionPlan,
    a: &DeviceTensor<T>,
    conj_a: bool,
    b: &DeviceTensor<T>,
) -> Result<DeviceTensor<T>, SweepError> {
    let device = a.data.device().clone();
    let a_perm = plan.a_order().map(|order| a.permuted(order)).transpose()?;
    let b_perm = plan.b_order().map(|order| b.permuted(order)).transpose()?;
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
    } = plan.gemm_loops((&a.axes, &a.dims), (&b.axes, &b.dims));
    let out_dims = plan.out_dims().to_vec();
    let total: usize = out_dims.iter().product();
    let mut c = device.alloc_zeros::<T>(total)?;
    let result = |data| DeviceTensor {
        data,
        dims: out_dims.clone(),
        axes: plan.out().to_vec(),
    };
    if total == 0 || k == 0 {
        return Ok(result(c));
    }
    let a_view = View {
        rows: m,
        cols: k,
        row_stride: a_m,
        col_stride: a_k,
    };
    let b_view = View {
        rows: k,
        cols: n,
        row_stride: b_k,
        col_stride: b_n,
    };
    // A column-major block is C = A B; a row-major one is computed as C^T = B^T A^T, a then
    // entering second.
    let a_first = plan.transposed();
    let a_slot = if a_first { a_view } else { a_view.transposed() };
    let b_slot = if a_first { b_view } else { b_view.transposed() };
    let conj = conj_a && <T as BlasScalar>::COMPLEX;
    let mut a_conj = None;
    let a_operand = match (a_slot.operand(conj), conj) {
        (Some(operand), _) => operand,
        (None, true) => {
            // A plain conjugate: conjugate a copy, then multiply it as stored.
            let operand = a_slot.operand(false);
            a_conj = Some(a.conjugated()?);
            operand.ok_or_else(|| invalid(format!("a's view {a_view:?} has no unit stride")))?
        }
        (None, false) => {
            return Err(invalid(format!("a's view {a_view:?} has no unit stride")));
        }
    };
    let a_data = a_conj.as_ref().map_or(&a.data, |t| &t.data);
    let b_operand = b_slot
        .operand(false)
        .ok_or_else(|| invalid(format!("b's view {b_view:?} has no unit stride")))?;
    let (rows, cols) = if a_first { (m, n) } else { (n, m) };
    let block = m * n;
    // Operands in slot order: (first, second) buffers, operands and offsets.
    let (first, second, first_operand, second_operand) = if a_first {
        (a_data, &b.data, a_operand, b_operand)
    } else {
        (&b.data, a_data, b_operand, a_operand)
    };
    let order = |(offset_a, offset_b): (usize, usize)| {
        if a_first {
            (offset_a, offset_b)
        } else {
            (offset_b, offset_a)
        }
    };
    let batch = progression(&loop_offsets);
    for (step, &(sum_a, sum_b)) in sum_offsets.iter().enumerate() {
        let beta = if step == 0 {
            <T as BlasScalar>::zero()
        } else {
            <T as BlasScalar>::one()
        };
        let gemm_at = |(offset_a, offset_b): (usize, usize), c_offset: usize| {
            let (first_offset, second_offset) = order((offset_a + sum_a, offset_b + sum_b));
            Gemm::<T>::new(rows, cols, k)
                .with_a(first_operand.0, first_offset, first_operand.1)
                .with_b(second_operand.0, second_offset, second_operand.1)
                .with_c(c_offset, rows.max(1))
                .with_scaling(<T as BlasScalar>::one(), beta)
        };
        match batch {
            Some(steps) => {
                let (first_step, second_step) = order(steps);
                let gemm = gemm_at(loop_offsets[0], 0).strided(
                    loop_offsets.len(),
                    first_step,
                    second_step,
                    block,
                );
                device.gemm(&gemm, first, second, &mut c)?;
            }
            None => {
                for (index, &offsets) in loop_offsets.iter().enumerate() {
                    device.gemm(&gemm_at(offsets, index * block), first, second, &mut c)?;
                }
            }
        }
    }
    Ok(result(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_map_to_blas_operands() {
        let view = |rows, cols, row_stride, col_stride| View {
            rows,
            cols,
            row_stride,
            col_stride,
        };
        // Column-major 3 x 4 with ld 5; row-major 3 x 4 with row stride 6.
        assert_eq!(view(3, 4, 1, 5).operand(false), Some((Op::N, 5)));
        assert_eq!(view(3, 4, 6, 1).operand(false), Some((Op::T, 6)));
        assert_eq!(view(3, 4, 6, 1).operand(true), Some((Op::C, 6)));
        // A plain conjugate of a column-major view has no Op.
        assert_eq!(view(3, 4, 1, 5).operand(true), None);
        // Vectors fit either way; a view without a unit stride fits neither.
        assert_eq!(view(3, 1, 1, 7).operand(true), Some((Op::C, 1)));
        assert_eq!(view(3, 4, 2, 8).operand(false), None);
    }

    #[test]
    fn progressions() {
        assert_eq!(progression(&[(0, 4), (3, 4), (6, 4)]), Some((3, 0)));
        assert_eq!(progression(&[(0, 0), (3, 1), (5, 2)]), None);
        assert_eq!(progression(&[(1, 1)]), None);
        assert_eq!(progression(&[(3, 0), (0, 1)]), None);
    }
}
