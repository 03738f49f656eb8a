//! CUDA devices through cudarc's driver API, with the driver library loaded at run time.
//!
//! # A missing driver never panics
//!
//! cudarc 0.19 (feature `dynamic-loading`) resolves every driver entry point lazily: the first
//! call of any `cudarc::driver::sys` function runs `sys::culib()`, which tries a list of
//! library names (`libcuda.so`, `libcuda.so.1`, ...) and, when none loads, **panics**
//! (`cudarc::panic_no_lib_found`: "Unable to dynamically load the \"cuda\" shared library").
//! A loaded library without a wanted symbol panics as well (`sys::load`: "Missing symbol").
//! `CudaContext::device_count()` calls `cuInit` first, so on a machine without a driver it
//! would panic rather than return an error.
//!
//! Two guards keep that from reaching callers:
//! 1. [`driver_library`] first asks `sys::is_culib_present()`, which tries the very same
//!    library names as `culib()` but returns `false` instead of panicking. Its answer is
//!    cached, and every entry point of this module ([`device_count`], [`CudaDevice::open`])
//!    checks it before any other driver call, so without a library no driver call is made.
//! 2. Every driver call also runs under [`std::panic::catch_unwind`] ([`catch`]), so a missing
//!    symbol (a driver older than the CUDA 12.8 API cudarc is built against) or an assertion
//!    inside cudarc becomes a [`BackendError::Cuda`] instead of unwinding into the caller.
//!    (The panic message is still printed by the panic hook; with `panic = "abort"` this
//!    second guard cannot help, which is why the first one exists.)
//!
//! # Streams and ordering
//!
//! Every [`CudaDevice`] handle owns one non-blocking stream: its default stream, on which
//! all buffer operations are queued. Two handles on the same ordinal (two ranks sharing one
//! GPU) share the device's primary context but have separate streams; cudarc's per-buffer
//! read/write events order work on one buffer across those streams. Downloads wait for their
//! copy to finish; uploads return once the driver has staged the host data (the host slice
//! may then be reused), with the copy ordered on the stream.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::driver::sys::{self, CUresult};
use cudarc::driver::{CudaContext, CudaSlice, DriverError};

use crate::buffer::CopyRoute;
use crate::device::MemoryInfo;
use crate::panic::panic_message;
use crate::BackendError;

/// The label of errors raised before a device is open.
const DRIVER: &str = "driver";

/// Whether the CUDA driver library can be loaded; probed once per process.
///
/// `Err` carries the reason, for [`BackendError::Cuda`] messages.
fn driver_library() -> Result<(), BackendError> {
    static PRESENT: OnceLock<Result<(), String>> = OnceLock::new();
    PRESENT
        .get_or_init(|| {
            // `is_culib_present` cannot panic on a missing library (unlike `culib()`), but
            // run it under `catch_unwind` all the same: the probe must never unwind.
            let present = catch_unwind(|| {
                // SAFETY: `is_culib_present` only opens the candidate driver libraries with
                // `libloading::Library::new` and closes them again. Loading libcuda runs its
                // initialisers, which is exactly what cudarc does on first use anyway; no
                // symbol is called.
                unsafe { sys::is_culib_present() }
            });
            match present {
                Ok(true) => Ok(()),
                Ok(false) => Err("the CUDA driver library (libcuda) could not be loaded: \
                     no NVIDIA driver is installed, or it is not on the library search path"
                    .to_string()),
                Err(panic) => Err(format!(
                    "probing the CUDA driver library failed: {}",
                    panic_message(panic.as_ref())
                )),
            }
        })
        .clone()
        .map_err(|message| BackendError::Cuda {
            device: DRIVER.into(),
            message,
        })
}

/// Runs `call` (which calls into the driver), turning a panic inside cudarc into an error.
pub(crate) fn catch<T>(device: &str, call: impl FnOnce() -> T) -> Result<T, BackendError> {
    catch_unwind(AssertUnwindSafe(call)).map_err(|panic| BackendError::Cuda {
        device: device.to_string(),
        message: format!(
            "the CUDA driver binding failed: {}",
            panic_message(panic.as_ref())
        ),
    })
}

/// Runs a fallible driver call under [`catch`], mapping its error into [`BackendError`].
pub(crate) fn driver<T>(
    device: &str,
    call: impl FnOnce() -> Result<T, DriverError>,
) -> Result<T, BackendError> {
    catch(device, call)?.map_err(|err| cuda_error(device, err))
}

/// A driver error as a [`BackendError::Cuda`] on `device`, with the driver's own words.
fn cuda_error(device: &str, err: DriverError) -> BackendError {
    BackendError::Cuda {
        device: device.to_string(),
        message: describe(err),
    }
}

/// `"CUDA_ERROR_OUT_OF_MEMORY: out of memory"`, or the bare code when the driver cannot say.
fn describe(err: DriverError) -> String {
    /// Set once the library turned out to lack `cuGetErrorName`/`cuGetErrorString`, so that
    /// later errors do not panic (and print the panic) again.
    static NO_ERROR_STRINGS: AtomicBool = AtomicBool::new(false);
    let code = err.0;
    if NO_ERROR_STRINGS.load(Ordering::Relaxed) {
        return format!("{code:?}");
    }
    let words = catch_unwind(|| {
        let name = err.error_name().ok()?.to_string_lossy().into_owned();
        let text = err.error_string().ok()?.to_string_lossy().into_owned();
        Some(format!("{name}: {text}"))
    });
    match words {
        Ok(Some(words)) => words,
        Ok(None) => format!("{code:?}"),
        Err(_) => {
            NO_ERROR_STRINGS.store(true, Ordering::Relaxed);
            format!("{code:?}")
        }
    }
}

/// The number of CUDA devices.
///
/// `Ok(0)` when a driver is installed but reports no device; `Err` with device `"driver"`
/// when the driver library cannot be loaded or initialised. Never panics (see the module
/// documentation).
pub(crate) fn device_count() -> Result<usize, BackendError> {
    /// The first panic of `cuInit`/`cuDeviceGetCount` (a library without those symbols):
    /// cudarc would panic again on every call, so later calls return this instead.
    static BROKEN: OnceLock<String> = OnceLock::new();
    driver_library()?;
    if let Some(message) = BROKEN.get() {
        return Err(BackendError::Cuda {
            device: DRIVER.into(),
            message: message.clone(),
        });
    }
    let counted = catch(DRIVER, CudaContext::device_count).inspect_err(|err| {
        if let BackendError::Cuda { message, .. } = err {
            let _ = BROKEN.set(message.clone());
        }
    })?;
    match counted {
        Ok(count) => Ok(usize::try_from(count).unwrap_or(0)),
        Err(DriverError(CUresult::CUDA_ERROR_NO_DEVICE)) => Ok(0),
        Err(err) => Err(cuda_error(DRIVER, err)),
    }
}

/// One handle on a CUDA device: the device's primary context and a stream of its own.
///
/// Several handles may share an ordinal (several ranks on one GPU); each retains the primary
/// context, which lives until the last handle and buffer using it are dropped.
pub(crate) struct CudaDevice {
    ordinal: usize,
    /// `"gpu:N"`, as errors name the device.
    label: String,
    name: String,
    ctx: Arc<CudaContext>,
    /// The stream buffer operations are queued on.
    stream: Arc<cudarc::driver::CudaStream>,
    /// Ordinals whose memory this handle's context was given direct access to.
    peers: Mutex<Vec<usize>>,
    /// cuBLAS and cuSOLVER handles on `stream`, created on first use.
    math: crate::cuda_blas::MathHandles,
    /// Kernel modules compiled and loaded on this handle, by module name.
    kernels: crate::nvrtc::ModuleCache,
}

impl CudaDevice {
    /// Opens device `ordinal`: retains its primary context and creates this handle's stream.
    ///
    /// Errors: no driver, an ordinal that does not exist ([`BackendError::UnknownOrdinal`]),
    /// or a driver failure.
    pub(crate) fn open(ordinal: usize) -> Result<Self, BackendError> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(BackendError::UnknownOrdinal {
                ordinal,
                count,
                kind: "gpu",
            });
        }
        let label = format!("gpu:{ordinal}");
        let ctx = driver(&label, || CudaContext::new(ordinal))?;
        let stream = driver(&label, || ctx.new_stream())?;
        let name =
            driver(&label, || ctx.name()).unwrap_or_else(|_| format!("CUDA device {ordinal}"));
        Ok(Self {
            ordinal,
            label,
            name,
            ctx,
            stream,
            peers: Mutex::new(Vec::new()),
            math: crate::cuda_blas::MathHandles::default(),
            kernels: crate::nvrtc::ModuleCache::default(),
        })
    }

    /// `"gpu:N"`, as errors name the device.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// The device's primary context.
    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream this handle queues its work on.
    pub(crate) fn cuda_stream(&self) -> &cudarc::driver::CudaStream {
        &self.stream
    }

    /// The kernel modules loaded on this device handle.
    pub(crate) fn kernels(&self) -> &crate::nvrtc::ModuleCache {
        &self.kernels
    }

    /// The library handles of this device handle.
    pub(crate) fn math(&self) -> &crate::cuda_blas::MathHandles {
        &self.math
    }

    /// The GPU's name as the driver reports it (e.g. "NVIDIA H100 80GB HBM3").
    pub(crate) fn name(&self) -> String {
        self.name.clone()
    }

    /// Free and total device memory, from `cuMemGetInfo`.
    pub(crate) fn memory_info(&self) -> Result<MemoryInfo, BackendError> {
        let (free, total) = driver(&self.label, || self.ctx.mem_get_info())?;
        Ok(MemoryInfo {
            free: free as u64,
            total: total as u64,
        })
    }

    /// `bytes` zeroed bytes of device memory, allocated (and zeroed) on this handle's stream.
    ///
    /// A driver out-of-memory error becomes [`BackendError::OutOfMemory`], as on host devices.
    pub(crate) fn alloc_zeroed(&self, bytes: usize) -> Result<CudaBytes, BackendError> {
        if bytes == 0 {
            // The driver refuses zero-byte allocations; an empty buffer needs no memory.
            return Ok(CudaBytes {
                len: 0,
                slice: None,
            });
        }
        match catch(&self.label, || self.stream.alloc_zeros::<u8>(bytes))? {
            Ok(slice) => Ok(CudaBytes {
                len: bytes,
                slice: Some(slice),
            }),
            Err(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY)) => {
                Err(BackendError::OutOfMemory {
                    device: self.label.clone(),
                    requested: bytes as u64,
                    free: self.memory_info().map_or(0, |m| m.free),
                })
            }
            Err(err) => Err(cuda_error(&self.label, err)),
        }
    }

    /// Copies `src` (memory of this device) into `dst`; the data is in `dst` on return.
    pub(crate) fn download(&self, src: &CudaBytes, dst: &mut [u8]) -> Result<(), BackendError> {
        check_bytes(&self.label, "download", src.len, dst.len())?;
        let Some(slice) = &src.slice else {
            return Ok(());
        };
        driver(&self.label, || {
            self.stream.memcpy_dtoh(slice, dst)?;
            // A copy into pageable memory already returns when done; wait explicitly so the
            // guarantee does not rest on that.
            self.stream.synchronize()?;
            self.ctx.check_err()
        })
    }

    /// Copies `src` into `dst` (memory of this device), ordered on this handle's stream.
    ///
    /// Returns once the driver has taken the host data: `src` may be reused at once, and
    /// later work on the stream (downloads, copies) sees the new contents.
    pub(crate) fn upload_into(&self, dst: &mut CudaBytes, src: &[u8]) -> Result<(), BackendError> {
        check_bytes(&self.label, "upload", src.len(), dst.len)?;
        let Some(slice) = &mut dst.slice else {
            return Ok(());
        };
        driver(&self.label, || {
            self.stream.memcpy_htod(src, slice)?;
            self.ctx.check_err()
        })
    }

    /// Waits for all work in the device's primary context (every stream of every handle on
    /// this ordinal).
    pub(crate) fn synchronize(&self) -> Result<(), BackendError> {
        driver(&self.label, || {
            self.ctx.synchronize()?;
            self.ctx.check_err()
        })
    }

    /// The stream buffer operations are queued on.
    pub(crate) fn default_stream(&self) -> CudaStream {
        CudaStream {
            label: self.label.clone(),
            stream: Arc::clone(&self.stream),
        }
    }

    /// A new non-blocking stream on this device.
    pub(crate) fn new_stream(&self) -> Result<CudaStream, BackendError> {
        let stream = driver(&self.label, || self.ctx.new_stream())?;
        Ok(CudaStream {
            label: self.label.clone(),
            stream,
        })
    }

    /// Whether this device can access `other`'s memory directly: always for the same
    /// ordinal, else `cuDeviceCanAccessPeer`'s answer (`false` if the driver fails to answer).
    pub(crate) fn can_access_peer(&self, other: &CudaDevice) -> bool {
        if self.ordinal == other.ordinal {
            return true;
        }
        let answer = driver(&self.label, || {
            let mut can: c_int = 0;
            // SAFETY: both `CUdevice` handles come from `cuDeviceGet` through contexts that
            // `self` and `other` keep alive; `can` is a valid, writable out-pointer.
            unsafe {
                sys::cuDeviceCanAccessPeer(&mut can, self.ctx.cu_device(), other.ctx.cu_device())
            }
            .result()?;
            Ok(can != 0)
        });
        answer.unwrap_or(false)
    }

    /// Gives this device's context direct access to `other`'s memory, where the hardware
    /// allows. Returns whether access is now on; enabling it twice is not an error.
    pub(crate) fn enable_peer_access(&self, other: &CudaDevice) -> Result<bool, BackendError> {
        if self.ordinal == other.ordinal {
            return Ok(true);
        }
        if self.peers_lock().contains(&other.ordinal) {
            return Ok(true);
        }
        if !self.can_access_peer(other) {
            return Ok(false);
        }
        driver(&self.label, || {
            self.ctx.bind_to_thread()?;
            // SAFETY: the calling thread's current context is `self.ctx` (bound just above);
            // `other.ctx.cu_ctx()` is a live primary context retained by `other` for the
            // duration of the call; the flags argument must be 0.
            match unsafe { sys::cuCtxEnablePeerAccess(other.ctx.cu_ctx(), 0) } {
                // Another handle on this ordinal may have enabled it already: same context.
                CUresult::CUDA_SUCCESS | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
                code => Err(DriverError(code)),
            }
        })?;
        let mut peers = self.peers_lock();
        if !peers.contains(&other.ordinal) {
            peers.push(other.ordinal);
        }
        Ok(true)
    }

    fn peers_lock(&self) -> std::sync::MutexGuard<'_, Vec<usize>> {
        // The list is only ever pushed to, so a poisoned lock still holds a valid list.
        self.peers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Copies `src` (on `from`) into `dst` (on `to`); both hold the same number of bytes.
///
/// - Same ordinal: a device-to-device copy on `to`'s stream, after any pending write to `src`
///   (cudarc's buffer events order it across the two handles' streams): [`CopyRoute::Direct`].
/// - Different GPUs where `to` can access `from`'s memory (peer access is enabled on first
///   use): `cuMemcpyPeerAsync` on `to`'s stream, after all work queued so far on `from`'s
///   stream; `from`'s stream then waits for the copy, so a later write or free of `src`
///   cannot overtake it: [`CopyRoute::Peer`]. The call returns without waiting; a download
///   of `dst` or an event recorded on `to`'s stream waits for the copy.
/// - Otherwise the bytes go through host memory (a synchronous download, then an upload):
///   [`CopyRoute::ViaHost`].
pub(crate) fn copy_between(
    from: &CudaDevice,
    src: &CudaBytes,
    to: &CudaDevice,
    dst: &mut CudaBytes,
) -> Result<CopyRoute, BackendError> {
    check_bytes(&to.label, "device copy", src.len, dst.len)?;
    if from.ordinal == to.ordinal {
        if let (Some(src), Some(dst)) = (&src.slice, &mut dst.slice) {
            driver(&to.label, || {
                to.stream.memcpy_dtod(src, dst)?;
                to.ctx.check_err()
            })?;
        }
        return Ok(CopyRoute::Direct);
    }
    if to.enable_peer_access(from)? {
        if let (Some(src), Some(dst)) = (&src.slice, &mut dst.slice) {
            driver(&to.label, || {
                // Waits on `from`'s stream, then copies peer to peer on `to`'s stream.
                to.stream.memcpy_dtod(src, dst)?;
                let copied = to.stream.record_event(None)?;
                from.stream.wait(&copied)?;
                from.ctx.check_err()?;
                to.ctx.check_err()
            })?;
        }
        return Ok(CopyRoute::Peer);
    }
    let mut staged = vec![0_u8; src.len];
    from.download(src, &mut staged)?;
    to.upload_into(dst, &staged)?;
    Ok(CopyRoute::ViaHost)
}

/// A length check for byte copies (the buffer layer checks element counts first, so this
/// only fires on a bug; it keeps cudarc's length assertions from ever being reached).
fn check_bytes(device: &str, op: &str, source: usize, dest: usize) -> Result<(), BackendError> {
    if source == dest {
        Ok(())
    } else {
        Err(BackendError::Cuda {
            device: device.to_string(),
            message: format!("{op}: source has {source} bytes, destination {dest}"),
        })
    }
}

/// Device memory of a fixed number of bytes, freed (in stream order) on drop.
pub(crate) struct CudaBytes {
    len: usize,
    /// `None` for zero bytes: the driver does not allocate empty blocks.
    pub(crate) slice: Option<CudaSlice<u8>>,
}

/// A CUDA stream of one device handle.
pub(crate) struct CudaStream {
    label: String,
    stream: Arc<cudarc::driver::CudaStream>,
}

impl CudaStream {
    /// An event that completes when the work queued so far on this stream has.
    pub(crate) fn record_event(&self) -> Result<CudaEvent, BackendError> {
        let event = driver(&self.label, || self.stream.record_event(None))?;
        Ok(CudaEvent {
            label: self.label.clone(),
            event,
        })
    }

    /// Makes later work on this stream wait for `event` (from any stream or device), without
    /// blocking the calling thread.
    pub(crate) fn wait_event(&self, event: &CudaEvent) -> Result<(), BackendError> {
        driver(&self.label, || self.stream.wait(&event.event))
    }

    /// Blocks until everything queued on this stream has finished.
    pub(crate) fn synchronize(&self) -> Result<(), BackendError> {
        driver(&self.label, || self.stream.synchronize())
    }
}

/// A recorded point in a CUDA stream.
pub(crate) struct CudaEvent {
    label: String,
    event: cudarc::driver::CudaEvent,
}

impl CudaEvent {
    /// Blocks until the event has completed.
    pub(crate) fn synchronize(&self) -> Result<(), BackendError> {
        driver(&self.label, || self.event.synchronize())
    }

    /// Whether the event has completed, without blocking; errors of earlier work surface here.
    pub(crate) fn is_complete(&self) -> Result<bool, BackendError> {
        driver(&self.label, || self.event.try_is_complete())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_count_returns_instead_of_panicking() {
        // Without a driver this is an error naming the driver; with one, a count. Either way
        // it returns, and twice in a row gives the same kind of answer (the probe is cached).
        let first = device_count();
        let second = device_count();
        match (&first, &second) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(BackendError::Cuda { device, message }), Err(_)) => {
                assert_eq!(device, DRIVER);
                assert!(!message.is_empty());
                println!("no CUDA driver: {message}");
            }
            other => panic!("unexpected device counts: {other:?}"),
        }
    }

    #[test]
    fn open_without_a_device_is_an_error() {
        if matches!(device_count(), Ok(n) if n > 0) {
            println!("skipping: a CUDA device is present");
            return;
        }
        assert!(CudaDevice::open(0).is_err());
    }

    #[test]
    fn panics_inside_driver_calls_become_errors() {
        let err = catch::<u32>("gpu:7", || panic!("Missing symbol cuFoo"));
        match err {
            Err(BackendError::Cuda { device, message }) => {
                assert_eq!(device, "gpu:7");
                assert!(message.contains("Missing symbol cuFoo"), "{message}");
            }
            other => panic!("expected a CUDA error, got {other:?}"),
        }
    }

    #[test]
    fn byte_lengths_are_checked() {
        assert!(check_bytes("gpu:0", "upload", 8, 8).is_ok());
        let err = check_bytes("gpu:0", "upload", 8, 16).expect_err("mismatch");
        assert!(err.to_string().contains("8 bytes"), "{err}");
    }
}
