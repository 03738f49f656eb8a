//! The GPU side of [`crate::compute`]: GEMM through cuBLAS, thin QR through cuSOLVER.
//!
//! Each device handle owns one cuBLAS and one cuSOLVER handle, created on first use and bound
//! to the handle's stream, so library calls are ordered with its copies. The handles are raw
//! (not cudarc's safe wrappers, whose `Drop` panics when a destroy fails) and every call runs
//! under the driver module's panic guard. cuSOLVER runs in its deterministic mode.

use std::ffi::c_int;
use std::sync::{Mutex, PoisonError};

use cudarc::cublas::sys as cublas;
use cudarc::cusolver::sys as cusolver;
use cudarc::driver::{DevicePtr, DevicePtrMut};
use num_complex::Complex64;

use crate::buffer::Buffer;
use crate::compute::{BlasScalar, Gemm, Op};
use crate::cuda::{catch, driver, CudaDevice};
use crate::cuda_libs::{require, CUBLAS, CUSOLVER};
use crate::device::{Backend, Device};
use crate::BackendError;

/// A cuBLAS handle; destroyed (errors ignored) on drop.
struct BlasHandle(cublas::cublasHandle_t);

// SAFETY: a cuBLAS handle may be used from any thread as long as calls on it do not overlap;
// `MathHandles` only hands it out under its mutex.
unsafe impl Send for BlasHandle {}

impl Drop for BlasHandle {
    fn drop(&mut self) {
        let handle = self.0;
        // SAFETY: the handle came from `cublasCreate_v2` and is destroyed exactly once; a
        // failure (or a missing symbol's panic) at teardown is ignored.
        let _ = std::panic::catch_unwind(|| unsafe { cublas::cublasDestroy_v2(handle) });
    }
}

/// A cuSOLVER dense handle; destroyed (errors ignored) on drop.
struct SolverHandle(cusolver::cusolverDnHandle_t);

// SAFETY: as for `BlasHandle`: used only under `MathHandles`' mutex.
unsafe impl Send for SolverHandle {}

impl Drop for SolverHandle {
    fn drop(&mut self) {
        let handle = self.0;
        // SAFETY: the handle came from `cusolverDnCreate` and is destroyed exactly once.
        let _ = std::panic::catch_unwind(|| unsafe { cusolver::cusolverDnDestroy(handle) });
    }
}

/// The library handles of one device handle, created on first use.
#[derive(Default)]
pub(crate) struct MathHandles {
    blas: Mutex<Option<BlasHandle>>,
    solver: Mutex<Option<SolverHandle>>,
}

fn blas_status(
    device: &str,
    call: &str,
    status: cublas::cublasStatus_t,
) -> Result<(), BackendError> {
    if status == cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(BackendError::Cuda {
            device: device.to_string(),
            message: format!("{call} failed: {status:?}"),
        })
    }
}

fn solver_status(
    device: &str,
    call: &str,
    status: cusolver::cusolverStatus_t,
) -> Result<(), BackendError> {
    if status == cusolver::cusolverStatus_t::CUSOLVER_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(BackendError::Cuda {
            device: device.to_string(),
            message: format!("{call} failed: {status:?}"),
        })
    }
}

fn operation(op: Op, complex: bool) -> cublas::cublasOperation_t {
    match op {
        Op::N => cublas::cublasOperation_t::CUBLAS_OP_N,
        Op::T => cublas::cublasOperation_t::CUBLAS_OP_T,
        Op::C if complex => cublas::cublasOperation_t::CUBLAS_OP_C,
        Op::C => cublas::cublasOperation_t::CUBLAS_OP_T,
    }
}

/// `value` as a C int; the compute checks bounded every size by `MAX_BLAS_DIMENSION` first.
fn int(value: usize) -> c_int {
    c_int::try_from(value).unwrap_or(c_int::MAX)
}

/// `value` as a C long long (strides).
fn long(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The element kinds the libraries take, and their entry points.
trait DeviceScalar: BlasScalar {
    /// `cublas{D,Z}gemm{_v2,StridedBatched}`; pointers are device addresses.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_strided(
        handle: cublas::cublasHandle_t,
        gemm: &Gemm<Self>,
        a: u64,
        b: u64,
        c: u64,
    ) -> cublas::cublasStatus_t;
    /// `cusolverDn{D,Z}geqrf_bufferSize` + `{D}orgqr/{Z}ungqr_bufferSize`: the larger.
    unsafe fn qr_workspace(
        handle: cusolver::cusolverDnHandle_t,
        m: c_int,
        n: c_int,
        a: u64,
        lda: c_int,
        tau: u64,
        lwork: &mut c_int,
    ) -> cusolver::cusolverStatus_t;
    /// `geqrf` then `orgqr`/`ungqr`, queued on the handle's stream.
    #[allow(clippy::too_many_arguments)]
    unsafe fn qr(
        handle: cusolver::cusolverDnHandle_t,
        m: c_int,
        n: c_int,
        a: u64,
        lda: c_int,
        tau: u64,
        work: u64,
        lwork: c_int,
        info: u64,
    ) -> cusolver::cusolverStatus_t;
}

impl DeviceScalar for f64 {
    unsafe fn gemm_strided(
        handle: cublas::cublasHandle_t,
        g: &Gemm<Self>,
        a: u64,
        b: u64,
        c: u64,
    ) -> cublas::cublasStatus_t {
        let (sa, sb, sc) = g.strides();
        let (ta, tb) = (operation(g.a.op, false), operation(g.b.op, false));
        let (a, b, c) = (a as *const f64, b as *const f64, c as *mut f64);
        // SAFETY: (the caller guarantees) the pointers address buffers the checks have bounded.
        unsafe {
            if g.count() == 1 {
                cublas::cublasDgemm_v2(
                    handle,
                    ta,
                    tb,
                    int(g.m),
                    int(g.n),
                    int(g.k),
                    &g.alpha,
                    a,
                    int(g.a.ld),
                    b,
                    int(g.b.ld),
                    &g.beta,
                    c,
                    int(g.ldc),
                )
            } else {
                cublas::cublasDgemmStridedBatched(
                    handle,
                    ta,
                    tb,
                    int(g.m),
                    int(g.n),
                    int(g.k),
                    &g.alpha,
                    a,
                    int(g.a.ld),
                    long(sa),
                    b,
                    int(g.b.ld),
                    long(sb),
                    &g.beta,
                    c,
                    int(g.ldc),
                    long(sc),
                    int(g.count()),
                )
            }
        }
    }

    unsafe fn qr_workspace(
        handle: cusolver::cusolverDnHandle_t,
        m: c_int,
        n: c_int,
        a: u64,
        lda: c_int,
        tau: u64,
        lwork: &mut c_int,
    ) -> cusolver::cusolverStatus_t {
        let (mut geqrf, mut orgqr) = (0, 0);
        // SAFETY: (the caller guarantees) size queries read no matrix element.
        unsafe {
            let status =
                cusolver::cusolverDnDgeqrf_bufferSize(handle, m, n, a as *mut f64, lda, &mut geqrf);
            if status != cusolver::cusolverStatus_t::CUSOLVER_STATUS_SUCCESS {
                return status;
            }
            let status = cusolver::cusolverDnDorgqr_bufferSize(
                handle,
                m,
                n,
                n,
                a as *const f64,
                lda,
                tau as *const f64,
                &mut orgqr,
            );
            *lwork = geqrf.max(orgqr);
            status
        }
    }

    unsafe fn qr(
        handle: cusolver::cusolverDnHandle_t,
        m: c_int,
        n: c_int,
        a: u64,
        lda: c_int,
        tau: u64,
        work: u64,
        lwork: c_int,
        info: u64,
    ) -> cusolver::cusolverStatus_t {
        let (a, tau, work, info) = (
            a as *mut f64,
            tau as *mut f64,
            work as *mut f64,
            info as *mut c_int,
        );
        // SAFETY: (the caller guarantees) `info` addresses two ints, one per call.
        unsafe {
            let status = cusolver::cusolverDnDgeqrf(handle, m, n, a, lda, tau, work, lwork, info);
            if status != cusolver::cusolverStatus_t::CUSOLVER_STATUS_SUCCESS {
                return status;
            }
            cusolver::cusolverDnDorgqr(handle, m, n, n, a, lda, tau, work, lwork, info.add(1))
        }
    }
}

impl DeviceScalar for Complex64 {
    unsafe fn gemm_strided(
        handle: cublas::cublasHandle_t,
        g: &Gemm<Self>,
        a: u64,
        b: u64,
        c: u64,
    ) -> cublas::cublasStatus_t {
        type Z = cublas::cuDoubleComplex;
        let (sa, sb, sc) = g.strides();
        let (ta, tb) = (operation(g.a.op, true), operation(g.b.op, true));
        // `Complex64` is `#[repr(C)] { re, im }`, laid out as `cuDoubleComplex { x, y }`.
        let alpha = Z {
            x: g.alpha.re,
            y: g.alpha.im,
        };
        let beta = Z {
            x: g.beta.re,
            y: g.beta.im,
        };
        let (a, b, c) = (a as *const Z, b as *const Z, c as *mut Z);
        // SAFETY: (the caller guarantees) the pointers address buffers the checks have bounded.
        unsafe {
            if g.count() == 1 {
                cublas::cublasZgemm_v2(
                    handle,
                    ta,
                    tb,
                    int(g.m),
                    int(g.n),
                    int(g.k),
                    &alpha,
                    a,
                    int(g.a.ld),
                    b,
                    int(g.b.ld),
                    &beta,
                    c,
                    int(g.ldc),
                )
            } else {
                cublas::cublasZgemmStridedBatched(
                    handle,
                    ta,
                    tb,
                    int(g.m),
                    int(g.n),
                    int(g.k),
                    &alpha,
                    a,
                    int(g.a.ld),
                    long(sa),
                    b,
                    int(g.b.ld),
                    long(sb),
                    &beta,
                    c,
                    int(g.ldc),
                    long(sc),
                    int(g.count()),
                )
            }
        }
    }

    unsafe fn qr_workspace(
        handle: cusolver::cusolverDnHandle_t,
        m: c_int,
        n: c_int,
        a: u64,
        lda: c_int,
        tau: u64,
        lwork: &mut c_int,
    ) -> cusolver::cusolverStatus_t {
        type Z = cusolver::cuDoubleComplex;
        let (mut geqrf, mut ungqr) = (0, 0);
        // SAFETY: (the caller guarantees) size queries read no matrix element.
        unsafe {
            let status =
                cusolver::cusolverDnZgeqrf_bufferSize(handle, m, n, a as *mut Z, lda, &mut geqrf);
            if status != cusolver::cusolverStatus_t::CUSOLVER_STATUS_SUCCESS {
                return status;
            }
            let status = cusolver::cusolverDnZungqr_bufferSize(
                handle,
                m,
                n,
                n,
                a as *const Z,
                lda,
                tau as *const Z,
                &mut ungqr,
            );
            *lwork = geqrf.max(ungqr);
            status
        }
    }

    unsafe fn qr(
        handle: cusolver::cusolverDnHandle_t,
        m: c_int,
        n: c_int,
        a: u64,
        lda: c_int,
        tau: u64,
        work: u64,
        lwork: c_int,
        info: u64,
    ) -> cusolver::cusolverStatus_t {
        type Z = cusolver::cuDoubleComplex;
        let (a, tau, work, info) = (
            a as *mut Z,
            tau as *mut Z,
            work as *mut Z,
            info as *mut c_int,
        );
        // SAFETY: (the caller guarantees) `info` addresses two ints, one per call.
        unsafe {
            let status = cusolver::cusolverDnZgeqrf(handle, m, n, a, lda, tau, work, lwork, info);
            if status != cusolver::cusolverStatus_t::CUSOLVER_STATUS_SUCCESS {
                return status;
            }
            cusolver::cusolverDnZungqr(handle, m, n, n, a, lda, tau, work, lwork, info.add(1))
        }
    }
}

/// Runs `f` with the handle held in `slot`, creating it with `create` on first use; the lock
/// keeps calls on one handle from overlapping.
fn with_lazy<H, R>(
    slot: &Mutex<Option<H>>,
    create: impl FnOnce() -> Result<H, BackendError>,
    f: impl FnOnce(&H) -> Result<R, BackendError>,
) -> Result<R, BackendError> {
    let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
    let handle = match slot.take() {
        Some(handle) => handle,
        None => create()?,
    };
    f(slot.insert(handle))
}

impl CudaDevice {
    /// The cuBLAS handle, created (on this handle's stream) on first use; `f` runs with it.
    fn with_blas<R>(
        &self,
        f: impl FnOnce(cublas::cublasHandle_t) -> Result<R, BackendError>,
    ) -> Result<R, BackendError> {
        require(&CUBLAS, self.label())?;
        with_lazy(
            &self.math().blas,
            || self.create_blas(),
            |handle| f(handle.0),
        )
    }

    /// The cuSOLVER handle (deterministic mode, on this handle's stream), created on first use.
    fn with_solver<R>(
        &self,
        f: impl FnOnce(cusolver::cusolverDnHandle_t) -> Result<R, BackendError>,
    ) -> Result<R, BackendError> {
        require(&CUSOLVER, self.label())?;
        with_lazy(
            &self.math().solver,
            || self.create_solver(),
            |handle| f(handle.0),
        )
    }

    /// A new cuBLAS handle bound to this handle's stream.
    fn create_blas(&self) -> Result<BlasHandle, BackendError> {
        driver(self.label(), || self.context().bind_to_thread())?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: `cublasCreate_v2` writes a new handle into `handle`.
        let status = catch(self.label(), || unsafe {
            cublas::cublasCreate_v2(&mut handle)
        })?;
        blas_status(self.label(), "cublasCreate", status)?;
        let created = BlasHandle(handle);
        let stream = self.cuda_stream().cu_stream() as cublas::cudaStream_t;
        // SAFETY: the handle is live and the stream belongs to this device's context.
        let status = catch(self.label(), || unsafe {
            cublas::cublasSetStream_v2(created.0, stream)
        })?;
        blas_status(self.label(), "cublasSetStream", status)?;
        Ok(created)
    }

    /// A new cuSOLVER dense handle bound to this handle's stream, in deterministic mode.
    fn create_solver(&self) -> Result<SolverHandle, BackendError> {
        driver(self.label(), || self.context().bind_to_thread())?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: `cusolverDnCreate` writes a new handle into `handle`.
        let status = catch(self.label(), || unsafe {
            cusolver::cusolverDnCreate(&mut handle)
        })?;
        solver_status(self.label(), "cusolverDnCreate", status)?;
        let created = SolverHandle(handle);
        let stream = self.cuda_stream().cu_stream() as cusolver::cudaStream_t;
        // SAFETY: the handle is live and the stream belongs to this device's context.
        let status = catch(self.label(), || unsafe {
            cusolver::cusolverDnSetStream(created.0, stream)
        })?;
        solver_status(self.label(), "cusolverDnSetStream", status)?;
        // SAFETY: the handle is live; the mode is a valid enumerator.
        let status = catch(self.label(), || unsafe {
            cusolver::cusolverDnSetDeterministicMode(
                created.0,
                cusolver::cusolverDeterministicMode_t::CUSOLVER_DETERMINISTIC_RESULTS,
            )
        })?;
        solver_status(self.label(), "cusolverDnSetDeterministicMode", status)?;
        Ok(created)
    }

    /// Queues `gemm` (checked by the caller) on this handle's stream.
    pub(crate) fn gemm<T: BlasScalar>(
        &self,
        gemm: &Gemm<T>,
        a: &Buffer<T>,
        b: &Buffer<T>,
        c: &mut Buffer<T>,
    ) -> Result<(), BackendError> {
        let stream = self.cuda_stream();
        let label = self.label();
        self.with_blas(|handle| {
            driver(label, || self.context().bind_to_thread())?;
            let (a_ptr, _a_read) = device_ptr(a, stream);
            let (b_ptr, _b_read) = device_ptr(b, stream);
            let (c_ptr, _c_write) = device_ptr_mut(c, stream);
            let size = std::mem::size_of::<T>() as u64;
            let (a_ptr, b_ptr, c_ptr) = (
                a_ptr + gemm.a.offset as u64 * size,
                b_ptr + gemm.b.offset as u64 * size,
                c_ptr + gemm.c_offset as u64 * size,
            );
            // SAFETY: `check_gemm` bounded every operand inside its buffer and sizes by
            // `c_int`; the pointers are live device addresses of this context, kept alive (with
            // their ordering events) by the guards until the call is queued.
            let status = catch(label, || unsafe {
                dispatch_gemm(handle, gemm, a_ptr, b_ptr, c_ptr)
            })?;
            blas_status(label, "cublas gemm", status)
        })
    }
}

/// The device address of a buffer's memory (0 for an empty one) and the guard that orders
/// later work after this read.
fn device_ptr<'a, T: crate::Element>(
    buffer: &'a Buffer<T>,
    stream: &'a cudarc::driver::CudaStream,
) -> (u64, Option<cudarc::driver::SyncOnDrop<'a>>) {
    match buffer.cuda_bytes().and_then(|bytes| bytes.slice.as_ref()) {
        Some(slice) => {
            let (ptr, guard) = slice.device_ptr(stream);
            (ptr, Some(guard))
        }
        None => (0, None),
    }
}

/// As [`device_ptr`], for a write.
fn device_ptr_mut<'a, T: crate::Element>(
    buffer: &'a mut Buffer<T>,
    stream: &'a cudarc::driver::CudaStream,
) -> (u64, Option<cudarc::driver::SyncOnDrop<'a>>) {
    match buffer
        .cuda_bytes_mut()
        .and_then(|bytes| bytes.slice.as_mut())
    {
        Some(slice) => {
            let (ptr, guard) = slice.device_ptr_mut(stream);
            (ptr, Some(guard))
        }
        None => (0, None),
    }
}

/// Calls the library entry point of `T` (`f64` or `Complex64`).
///
/// # Safety
/// As the library call: live, bounded device addresses.
unsafe fn dispatch_gemm<T: BlasScalar>(
    handle: cublas::cublasHandle_t,
    gemm: &Gemm<T>,
    a: u64,
    b: u64,
    c: u64,
) -> cublas::cublasStatus_t {
    if let Some(gemm) = (gemm as &dyn std::any::Any).downcast_ref::<Gemm<f64>>() {
        // SAFETY: forwarded from the caller.
        unsafe { f64::gemm_strided(handle, gemm, a, b, c) }
    } else if let Some(gemm) = (gemm as &dyn std::any::Any).downcast_ref::<Gemm<Complex64>>() {
        // SAFETY: forwarded from the caller.
        unsafe { Complex64::gemm_strided(handle, gemm, a, b, c) }
    } else {
        cublas::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED
    }
}

/// The thin Q of `a` in place on `device` (a CUDA device); checked by the caller.
///
/// The workspace, `tau` and the two status words are buffers of `device`, counted against its
/// memory cap; the status words are read back and must be zero.
pub(crate) fn qr_q<T: BlasScalar>(
    device: &Device,
    a: &mut Buffer<T>,
    m: usize,
    n: usize,
    lda: usize,
) -> Result<(), BackendError> {
    let Backend::Cuda(cuda) = device.backend() else {
        unreachable!("qr_q on a CUDA device");
    };
    let label = cuda.label();
    let stream = cuda.cuda_stream();
    let tau = device.alloc_zeros::<T>(n)?;
    let mut info = device.alloc_zeros::<c_int>(2)?;
    let (m_int, n_int, lda_int) = (int(m), int(n), int(lda));
    let lwork = cuda.with_solver(|handle| {
        let (a_ptr, _a) = device_ptr(a, stream);
        let (tau_ptr, _tau) = device_ptr(&tau, stream);
        let mut lwork: c_int = 0;
        // SAFETY: a size query on live device addresses of this context.
        let status = catch(label, || unsafe {
            dispatch_qr_workspace::<T>(handle, m_int, n_int, a_ptr, lda_int, tau_ptr, &mut lwork)
        })?;
        solver_status(label, "cusolverDn geqrf/orgqr bufferSize", status)?;
        Ok(usize::try_from(lwork).unwrap_or(0).max(1))
    })?;
    let mut work = device.alloc_zeros::<T>(lwork)?;
    let mut tau = tau;
    cuda.with_solver(|handle| {
        driver(label, || cuda.context().bind_to_thread())?;
        let (a_ptr, _a) = device_ptr_mut(a, stream);
        let (tau_ptr, _tau) = device_ptr_mut(&mut tau, stream);
        let (work_ptr, _work) = device_ptr_mut(&mut work, stream);
        let (info_ptr, _info) = device_ptr_mut(&mut info, stream);
        // SAFETY: `check_qr` bounded the matrix inside `a`; `tau` holds n elements, `work`
        // lwork, `info` two ints; all are live device addresses of this context.
        let status = catch(label, || unsafe {
            dispatch_qr::<T>(
                handle,
                m_int,
                n_int,
                a_ptr,
                lda_int,
                tau_ptr,
                work_ptr,
                int(lwork),
                info_ptr,
            )
        })?;
        solver_status(label, "cusolverDn geqrf/orgqr", status)
    })?;
    let words = info.to_host_vec()?;
    if let Some((call, word)) = ["geqrf", "orgqr"].iter().zip(&words).find(|(_, &w)| w != 0) {
        return Err(BackendError::Cuda {
            device: label.to_string(),
            message: format!(
                "cuSOLVER {call} reported info = {word} (argument {} invalid)",
                -word
            ),
        });
    }
    Ok(())
}

/// # Safety
/// As the library call.
unsafe fn dispatch_qr_workspace<T: BlasScalar>(
    handle: cusolver::cusolverDnHandle_t,
    m: c_int,
    n: c_int,
    a: u64,
    lda: c_int,
    tau: u64,
    lwork: &mut c_int,
) -> cusolver::cusolverStatus_t {
    // SAFETY: forwarded from the caller.
    unsafe {
        if T::COMPLEX {
            Complex64::qr_workspace(handle, m, n, a, lda, tau, lwork)
        } else {
            f64::qr_workspace(handle, m, n, a, lda, tau, lwork)
        }
    }
}

/// # Safety
/// As the library call.
#[allow(clippy::too_many_arguments)]
unsafe fn dispatch_qr<T: BlasScalar>(
    handle: cusolver::cusolverDnHandle_t,
    m: c_int,
    n: c_int,
    a: u64,
    lda: c_int,
    tau: u64,
    work: u64,
    lwork: c_int,
    info: u64,
) -> cusolver::cusolverStatus_t {
    // SAFETY: forwarded from the caller; `BlasScalar` is sealed to `f64` and `Complex64`,
    // so `T::COMPLEX` says which one the addresses hold.
    unsafe {
        if T::COMPLEX {
            Complex64::qr(handle, m, n, a, lda, tau, work, lwork, info)
        } else {
            f64::qr(handle, m, n, a, lda, tau, work, lwork, info)
        }
    }
}
