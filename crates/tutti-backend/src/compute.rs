//! Dense linear algebra on a device: GEMM and thin QR, one call for both kinds of device.
//!
//! [`Device::gemm`] and [`Device::qr_q`] take the same description on a simulated device
//! (faer on the host, in the device's thread pool) and on a GPU (cuBLAS and cuSOLVER on the
//! device's stream), and check it the same way first: a plan that passes on the CPU is a valid
//! cuBLAS call. Matrices are column-major, as in BLAS: element `(i, j)` of an operand stored
//! at `offset` with leading dimension `ld` is at `offset + i + j * ld`.
//!
//! ```
//! use tutti_backend::{Gemm, Op, Resources};
//!
//! let device = Resources::cpu(1).select()?.remove(0);
//! let a = device.upload(&[1.0, 2.0, 3.0, 4.0])?; // 2 x 2, column-major
//! let b = device.upload(&[1.0, 0.0, 0.0, 1.0])?;
//! let mut c = device.alloc_zeros::<f64>(4)?;
//! device.gemm(&Gemm::new(2, 2, 2).with_a(Op::T, 0, 2), &a, &b, &mut c)?;
//! assert_eq!(c.to_host_vec()?, vec![1.0, 3.0, 2.0, 4.0]); // A^T
//! # Ok::<(), tutti_backend::BackendError>(())
//! ```

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::householder;
use faer::linalg::matmul::matmul;
use faer::linalg::qr::no_pivoting::factor;
use faer::traits::Conjugate;
use faer::{Accum, Conj, Mat, MatMut, MatRef, Par};
use num_complex::Complex64;

use crate::buffer::Buffer;
use crate::device::{Backend, Device};
use crate::{BackendError, Element};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for num_complex::Complex64 {}
}

/// A scalar the device BLAS and solver handle: `f64` and [`Complex64`].
pub trait BlasScalar:
    Element
    + faer::traits::ComplexField
    + Copy
    + PartialEq
    + std::ops::Mul<Output = Self>
    + sealed::Sealed
    + 'static
{
    /// Whether the type is complex (then [`Op::C`] conjugates).
    const COMPLEX: bool;
    /// `0`.
    fn zero() -> Self;
    /// `1`.
    fn one() -> Self;
}

impl BlasScalar for f64 {
    const COMPLEX: bool = false;
    fn zero() -> Self {
        0.0
    }
    fn one() -> Self {
        1.0
    }
}

impl BlasScalar for Complex64 {
    const COMPLEX: bool = true;
    fn zero() -> Self {
        Complex64::new(0.0, 0.0)
    }
    fn one() -> Self {
        Complex64::new(1.0, 0.0)
    }
}

/// How an operand enters a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Op {
    /// As stored.
    #[default]
    N,
    /// Transposed.
    T,
    /// Conjugate-transposed (the same as [`Op::T`] for real scalars).
    C,
}

/// Where an operand of a product lies in its buffer, and how it enters the product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    /// The element index of its `(0, 0)` element (of the first matrix of a batch).
    pub offset: usize,
    /// The leading dimension: elements between the starts of two stored columns.
    pub ld: usize,
    /// As stored, transposed or conjugate-transposed.
    pub op: Op,
}

/// One product, or a batch of products whose operands step by fixed strides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Batch {
    /// A single product.
    #[default]
    One,
    /// `count` products; product `p` reads A at `a.offset + p * a`, B at `b.offset + p * b`
    /// and writes C at `c_offset + p * c` (all in elements). The C matrices must not overlap.
    Strided {
        /// How many products.
        count: usize,
        /// The stride between A matrices.
        a: usize,
        /// The stride between B matrices.
        b: usize,
        /// The stride between C matrices.
        c: usize,
    },
}

/// `C = alpha * op(A) * op(B) + beta * C`, `C` being `m x n` and the inner dimension `k`.
///
/// `beta == 0` overwrites C without reading it (a NaN there does not propagate), as in BLAS.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm<T> {
    /// Rows of C and of op(A).
    pub m: usize,
    /// Columns of C and of op(B).
    pub n: usize,
    /// Columns of op(A), rows of op(B).
    pub k: usize,
    /// Where A is and how it enters.
    pub a: Operand,
    /// Where B is and how it enters.
    pub b: Operand,
    /// The element index of C's `(0, 0)` element.
    pub c_offset: usize,
    /// C's leading dimension.
    pub ldc: usize,
    /// The product's factor.
    pub alpha: T,
    /// C's factor.
    pub beta: T,
    /// One product or a strided batch.
    pub batch: Batch,
}

impl<T: BlasScalar> Gemm<T> {
    /// `C = A * B` on packed operands at offset 0: A `m x k`, B `k x n`, C `m x n`.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Self {
            m,
            n,
            k,
            a: Operand {
                offset: 0,
                ld: m.max(1),
                op: Op::N,
            },
            b: Operand {
                offset: 0,
                ld: k.max(1),
                op: Op::N,
            },
            c_offset: 0,
            ldc: m.max(1),
            alpha: T::one(),
            beta: T::zero(),
            batch: Batch::One,
        }
    }

    /// A stored at `offset` with leading dimension `ld`, entering as `op`.
    pub fn with_a(mut self, op: Op, offset: usize, ld: usize) -> Self {
        self.a = Operand { offset, ld, op };
        self
    }

    /// B stored at `offset` with leading dimension `ld`, entering as `op`.
    pub fn with_b(mut self, op: Op, offset: usize, ld: usize) -> Self {
        self.b = Operand { offset, ld, op };
        self
    }

    /// C stored at `offset` with leading dimension `ld`.
    pub fn with_c(mut self, offset: usize, ld: usize) -> Self {
        self.c_offset = offset;
        self.ldc = ld;
        self
    }

    /// The factors: `C = alpha * op(A) * op(B) + beta * C`.
    pub fn with_scaling(mut self, alpha: T, beta: T) -> Self {
        self.alpha = alpha;
        self.beta = beta;
        self
    }

    /// A strided batch of `count` products.
    pub fn strided(mut self, count: usize, a: usize, b: usize, c: usize) -> Self {
        self.batch = Batch::Strided { count, a, b, c };
        self
    }

    /// The number of products.
    pub fn count(&self) -> usize {
        match self.batch {
            Batch::One => 1,
            Batch::Strided { count, .. } => count,
        }
    }

    /// The strides between the A, B and C of consecutive products (zero for one product).
    pub(crate) fn strides(&self) -> (usize, usize, usize) {
        match self.batch {
            Batch::One => (0, 0, 0),
            Batch::Strided { a, b, c, .. } => (a, b, c),
        }
    }

    /// The stored shape `(rows, columns)` of A and of B.
    pub(crate) fn stored_shapes(&self) -> ((usize, usize), (usize, usize)) {
        let a = match self.a.op {
            Op::N => (self.m, self.k),
            Op::T | Op::C => (self.k, self.m),
        };
        let b = match self.b.op {
            Op::N => (self.k, self.n),
            Op::T | Op::C => (self.n, self.k),
        };
        (a, b)
    }
}

/// The largest dimension, leading dimension, count or stride cuBLAS takes (a C `int`); the
/// host path refuses the same sizes, so a plan means the same on both kinds of device.
pub const MAX_BLAS_DIMENSION: usize = i32::MAX as usize;

fn invalid(op: &'static str, detail: impl Into<String>) -> BackendError {
    BackendError::InvalidArgument {
        op,
        detail: detail.into(),
    }
}

fn check_dimension(op: &'static str, what: &str, value: usize) -> Result<(), BackendError> {
    if value > MAX_BLAS_DIMENSION {
        return Err(invalid(
            op,
            format!("{what} = {value} exceeds {MAX_BLAS_DIMENSION} (cuBLAS takes a C int)"),
        ));
    }
    Ok(())
}

/// One past the last element a column-major `rows x cols` matrix at `offset` with leading
/// dimension `ld` touches, repeated `count` times `stride` apart; `None` on overflow.
fn extent(
    offset: usize,
    rows: usize,
    cols: usize,
    ld: usize,
    count: usize,
    stride: usize,
) -> Option<usize> {
    if rows == 0 || cols == 0 || count == 0 {
        return Some(0);
    }
    let one = (cols - 1).checked_mul(ld)?.checked_add(rows)?;
    (count - 1)
        .checked_mul(stride)?
        .checked_add(offset)?
        .checked_add(one)
}

/// Checks one operand: its leading dimension and that it lies inside its buffer.
#[allow(clippy::too_many_arguments)]
fn check_operand(
    op: &'static str,
    name: &str,
    (rows, cols): (usize, usize),
    offset: usize,
    ld: usize,
    count: usize,
    stride: usize,
    len: usize,
) -> Result<(), BackendError> {
    check_dimension(op, &format!("ld{name}"), ld)?;
    check_dimension(op, &format!("the stride of {name}"), stride)?;
    if ld < rows.max(1) {
        return Err(invalid(
            op,
            format!("ld{name} = {ld} is less than the {rows} stored rows of {name}"),
        ));
    }
    match extent(offset, rows, cols, ld, count, stride) {
        Some(end) if end <= len => Ok(()),
        Some(end) => Err(invalid(
            op,
            format!(
                "{name} ({rows} x {cols} at offset {offset}, ld {ld}, {count} matrices \
                 {stride} apart) reaches element {end}, past its buffer of {len}"
            ),
        )),
        None => Err(invalid(
            op,
            format!("{name}'s extent overflows the address space"),
        )),
    }
}

/// Checks a GEMM against its buffers' lengths; shared by both kinds of device.
pub(crate) fn check_gemm<T: BlasScalar>(
    gemm: &Gemm<T>,
    a_len: usize,
    b_len: usize,
    c_len: usize,
) -> Result<(), BackendError> {
    const OP: &str = "gemm";
    for (what, value) in [("m", gemm.m), ("n", gemm.n), ("k", gemm.k)] {
        check_dimension(OP, what, value)?;
    }
    let count = gemm.count();
    check_dimension(OP, "the batch count", count)?;
    let (sa, sb, sc) = gemm.strides();
    let (a_shape, b_shape) = gemm.stored_shapes();
    check_operand(OP, "A", a_shape, gemm.a.offset, gemm.a.ld, count, sa, a_len)?;
    check_operand(OP, "B", b_shape, gemm.b.offset, gemm.b.ld, count, sb, b_len)?;
    let c_shape = (gemm.m, gemm.n);
    check_operand(OP, "C", c_shape, gemm.c_offset, gemm.ldc, count, sc, c_len)?;
    // Products of a batch run concurrently on a GPU: their outputs must be disjoint.
    let one_c = extent(0, gemm.m, gemm.n, gemm.ldc, 1, 0).unwrap_or(usize::MAX);
    if count > 1 && one_c > 0 && sc < one_c {
        return Err(invalid(
            OP,
            format!(
                "the C matrices of the batch overlap: stride {sc} < the {one_c} elements one spans"
            ),
        ));
    }
    Ok(())
}

/// Checks a thin QR of an `m x n` matrix with leading dimension `lda` in a buffer of `len`.
pub(crate) fn check_qr(m: usize, n: usize, lda: usize, len: usize) -> Result<(), BackendError> {
    const OP: &str = "qr_q";
    check_dimension(OP, "m", m)?;
    check_dimension(OP, "n", n)?;
    if n > m {
        return Err(invalid(
            OP,
            format!("a thin QR needs m >= n, got {m} x {n}"),
        ));
    }
    check_operand(OP, "A", (m, n), 0, lda, 1, 0, len)
}

fn check_on_device<T: Element>(
    device: &Device,
    what: &str,
    buffer: &Buffer<T>,
) -> Result<(), BackendError> {
    if buffer.device().same_physical_device(device) {
        Ok(())
    } else {
        Err(invalid(
            "gemm",
            format!(
                "{what} lives on {} but the product runs on {device}",
                buffer.device()
            ),
        ))
    }
}

impl Device {
    /// `C = alpha * op(A) * op(B) + beta * C` as `gemm` describes, on this device.
    ///
    /// On a simulated device faer runs it in the device's thread pool; on a GPU, cuBLAS on the
    /// device's stream (one call for a whole strided batch). The two agree to rounding (the
    /// order of the sums differs).
    ///
    /// Errors: [`BackendError::InvalidArgument`] for an operand outside its buffer, a leading
    /// dimension shorter than its rows, a size above [`MAX_BLAS_DIMENSION`], overlapping
    /// outputs of a batch, or a buffer on another device; a library error on a GPU.
    pub fn gemm<T: BlasScalar>(
        &self,
        gemm: &Gemm<T>,
        a: &Buffer<T>,
        b: &Buffer<T>,
        c: &mut Buffer<T>,
    ) -> Result<(), BackendError> {
        check_on_device(self, "A", a)?;
        check_on_device(self, "B", b)?;
        check_on_device(self, "C", c)?;
        check_gemm(gemm, a.len(), b.len(), c.len())?;
        if gemm.m == 0 || gemm.n == 0 || gemm.count() == 0 {
            return Ok(());
        }
        match self.backend() {
            Backend::Host => {
                let (Some(a), Some(b)) = (a.as_host_slice(), b.as_host_slice()) else {
                    return Err(invalid(
                        "gemm",
                        "an operand of a simulated device is not in host memory",
                    ));
                };
                let Some(c) = c.as_host_slice_mut() else {
                    return Err(invalid(
                        "gemm",
                        "C of a simulated device is not in host memory",
                    ));
                };
                let par = self.parallelism();
                self.thread_pool()?
                    .install(|| host_gemm(gemm, a, b, c, par));
                Ok(())
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => cuda.gemm(gemm, a, b, c),
        }
    }

    /// Overwrites the column-major `m x n` matrix (`m >= n`, leading dimension `lda`, at the
    /// start of `a`) with the orthonormal factor Q of its thin QR factorisation.
    ///
    /// Householder reflections: faer on a simulated device, cuSOLVER `geqrf` + `orgqr`
    /// (`ungqr` for complex) on a GPU, whose workspace is allocated on the device and counted
    /// against its memory cap. The sign of each column of Q is the factorisation's choice: the
    /// two kinds agree on Q up to those signs (compare `Q Q^H`, not Q).
    ///
    /// Errors: [`BackendError::InvalidArgument`] for `n > m`, a short `lda` or a matrix
    /// outside the buffer; a library error on a GPU.
    pub fn qr_q<T: BlasScalar>(
        &self,
        a: &mut Buffer<T>,
        m: usize,
        n: usize,
        lda: usize,
    ) -> Result<(), BackendError> {
        check_on_device(self, "A", a)?;
        check_qr(m, n, lda, a.len())?;
        if n == 0 {
            return Ok(());
        }
        match self.backend() {
            Backend::Host => {
                let Some(data) = a.as_host_slice_mut() else {
                    return Err(invalid(
                        "qr_q",
                        "A of a simulated device is not in host memory",
                    ));
                };
                let par = self.parallelism();
                self.thread_pool()?
                    .install(|| host_qr_q(data, m, n, lda, par));
                Ok(())
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda(_) => crate::cuda_blas::qr_q(self, a, m, n, lda),
        }
    }

    /// faer's parallelism for this device's host-side kernels: its share of the cores.
    fn parallelism(&self) -> Par {
        match self.threads() {
            0 | 1 => Par::Seq,
            threads => Par::rayon(threads),
        }
    }
}

/// A read-only column-major view, `rows x cols` at `offset` with column stride `ld`.
fn view<T: BlasScalar>(
    data: &[T],
    offset: usize,
    rows: usize,
    cols: usize,
    ld: usize,
) -> MatRef<'_, T> {
    // check_operand has bounded offset + (cols - 1) * ld + rows by the slice's length.
    MatRef::from_column_major_slice_with_stride(&data[offset..], rows, cols, ld)
}

/// `dst (+)= alpha * lhs * op(rhs)`, dispatching on how B enters (faer types a conjugated
/// view differently from a plain one).
#[allow(clippy::too_many_arguments)]
fn times_rhs<T: BlasScalar, L: Conjugate<Canonical = T>>(
    dst: MatMut<'_, T>,
    accum: Accum,
    lhs: MatRef<'_, L>,
    rhs: MatRef<'_, T>,
    op: Op,
    alpha: T,
    par: Par,
) {
    match op {
        Op::N => matmul(dst, accum, lhs, rhs, alpha, par),
        Op::T => matmul(dst, accum, lhs, rhs.transpose(), alpha, par),
        Op::C => matmul(dst, accum, lhs, rhs.adjoint(), alpha, par),
    }
}

/// `dst (+)= alpha * op(lhs) * op(rhs)`.
#[allow(clippy::too_many_arguments)]
fn product<T: BlasScalar>(
    dst: MatMut<'_, T>,
    accum: Accum,
    (lhs, op_lhs): (MatRef<'_, T>, Op),
    (rhs, op_rhs): (MatRef<'_, T>, Op),
    alpha: T,
    par: Par,
) {
    match op_lhs {
        Op::N => times_rhs(dst, accum, lhs, rhs, op_rhs, alpha, par),
        Op::T => times_rhs(dst, accum, lhs.transpose(), rhs, op_rhs, alpha, par),
        Op::C => times_rhs(dst, accum, lhs.adjoint(), rhs, op_rhs, alpha, par),
    }
}

/// The host GEMM: faer on strided views, product after product.
pub(crate) fn host_gemm<T: BlasScalar>(gemm: &Gemm<T>, a: &[T], b: &[T], c: &mut [T], par: Par) {
    let (sa, sb, sc) = gemm.strides();
    let ((ar, ac), (br, bc)) = gemm.stored_shapes();
    let c_len = (gemm.n - 1) * gemm.ldc + gemm.m;
    for p in 0..gemm.count() {
        let c_offset = gemm.c_offset + p * sc;
        let block = &mut c[c_offset..c_offset + c_len];
        let accum = if gemm.beta == T::zero() {
            Accum::Replace
        } else {
            if gemm.beta != T::one() {
                for column in block.chunks_mut(gemm.ldc) {
                    let rows = column.len().min(gemm.m);
                    for x in &mut column[..rows] {
                        *x = gemm.beta * *x;
                    }
                }
            }
            Accum::Add
        };
        if gemm.k == 0 {
            if accum == Accum::Replace {
                for column in block.chunks_mut(gemm.ldc) {
                    let rows = column.len().min(gemm.m);
                    column[..rows].fill(T::zero());
                }
            }
            continue;
        }
        let dst = MatMut::from_column_major_slice_with_stride_mut(block, gemm.m, gemm.n, gemm.ldc);
        let lhs = view(a, gemm.a.offset + p * sa, ar, ac, gemm.a.ld);
        let rhs = view(b, gemm.b.offset + p * sb, br, bc, gemm.b.ld);
        product(
            dst,
            accum,
            (lhs, gemm.a.op),
            (rhs, gemm.b.op),
            gemm.alpha,
            par,
        );
    }
}

/// The host thin Q: blocked Householder QR (faer), then Q formed in place of the matrix.
pub(crate) fn host_qr_q<T: BlasScalar>(data: &mut [T], m: usize, n: usize, lda: usize, par: Par) {
    let len = (n - 1) * lda + m;
    let mut a = MatMut::from_column_major_slice_with_stride_mut(&mut data[..len], m, n, lda);
    let mut factors: Mat<T> = a.as_ref().to_owned();
    let block_size = factor::recommended_block_size::<T>(m, n);
    let mut coefficients = Mat::<T>::zeros(block_size, n);
    let scratch = factor::qr_in_place_scratch::<T>(m, n, block_size, par, Default::default()).or(
        householder::apply_block_householder_sequence_on_the_left_in_place_scratch::<T>(
            m, block_size, n,
        ),
    );
    let mut buffer = MemBuffer::new(scratch);
    let stack = MemStack::new(&mut buffer);
    factor::qr_in_place(
        factors.as_mut(),
        coefficients.as_mut(),
        par,
        stack,
        Default::default(),
    );
    // Q = H_1 ... H_n applied to the first n columns of the identity, written over A.
    for j in 0..n {
        for i in 0..m {
            a[(i, j)] = if i == j { T::one() } else { T::zero() };
        }
    }
    householder::apply_block_householder_sequence_on_the_left_in_place_with_conj(
        factors.as_ref(),
        coefficients.as_ref(),
        Conj::No,
        a.as_mut(),
        par,
        stack,
    );
}
