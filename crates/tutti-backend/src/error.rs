//! The backend's error type.

use std::path::PathBuf;

/// Everything that can go wrong when selecting devices or moving data between them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// A request for zero devices.
    #[error("zero devices requested: ask for at least one device")]
    ZeroDevices,
    /// More devices were requested than the node has.
    #[error("{requested} {kind} device(s) requested, but only {available} exist")]
    MoreDevicesThanExist {
        /// How many were asked for.
        requested: usize,
        /// How many exist.
        available: usize,
        /// `"cpu"` or `"gpu"`.
        kind: &'static str,
    },
    /// No device of the requested kind exists.
    #[error("no {kind} device found{hint}")]
    NoDevices {
        /// `"cpu"` or `"gpu"`.
        kind: &'static str,
        /// Why, when known (e.g. " (the CUDA driver library could not be loaded)").
        hint: String,
    },
    /// A device ordinal that does not exist.
    #[error("unknown {kind} device ordinal {ordinal}: valid ordinals are 0..{count}")]
    UnknownOrdinal {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices of that kind exist.
        count: usize,
        /// `"cpu"` or `"gpu"`.
        kind: &'static str,
    },
    /// A per-device memory cap larger than the memory the device has.
    #[error(
        "device memory cap of {} exceeds device {device}'s memory of {}{note}",
        crate::format_bytes(*cap), crate::format_bytes(*total)
    )]
    CapExceedsDevice {
        /// The cap asked for, in bytes.
        cap: u64,
        /// The device's total memory, in bytes.
        total: u64,
        /// The device it was checked against, as printed by [`crate::Device`]'s `Display`.
        device: String,
        /// Why the device has that much, where it is not obvious (simulated devices).
        note: String,
    },
    /// A zero cap or limit, which could hold nothing.
    #[error("{what} must be positive, got 0")]
    ZeroCap {
        /// Which setting.
        what: &'static str,
    },
    /// The GPU backend was requested but this build does not include it.
    #[error("this build of tutti has no GPU support: rebuild with the cargo feature `cuda`")]
    CudaNotBuilt,
    /// An allocation that does not fit in the device's remaining memory.
    #[error(
        "out of memory on {device}: {} requested, {} free",
        crate::format_bytes(*requested), crate::format_bytes(*free)
    )]
    OutOfMemory {
        /// The device, as printed by its `Display`.
        device: String,
        /// Bytes asked for.
        requested: u64,
        /// Bytes free at the time.
        free: u64,
    },
    /// Source and destination of a copy have different lengths.
    #[error("length mismatch in {op}: source has {source_len} elements, destination {dest_len}")]
    LengthMismatch {
        /// The operation.
        op: &'static str,
        /// Source length, in elements.
        source_len: usize,
        /// Destination length, in elements.
        dest_len: usize,
    },
    /// The scratch directory is missing or unusable.
    #[error("scratch directory {path}: {reason}")]
    Scratch {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A device operation described inconsistently: an operand outside its buffer, a leading
    /// dimension shorter than its rows, a size the device library cannot take.
    #[error("invalid {op}: {detail}")]
    InvalidArgument {
        /// The operation (`"gemm"`, `"qr_q"`).
        op: &'static str,
        /// What is wrong, with the numbers.
        detail: String,
    },
    /// An error reported by the CUDA driver.
    #[error("CUDA error on {device}: {message}")]
    Cuda {
        /// The device, or `"driver"` for errors before a device is open.
        device: String,
        /// The driver's message.
        message: String,
    },
    /// A kernel launch that does not match its kernel's description (arguments, element
    /// types, devices, launch dimensions), or a kernel that failed to run.
    #[error("kernel {module}::{entry}: {message}")]
    Kernel {
        /// The kernel module's name.
        module: String,
        /// The entry point's name.
        entry: String,
        /// What is wrong, naming the parameter where there is one.
        message: String,
    },
    /// NVRTC failed to compile a kernel module; the program log says why.
    #[error("NVRTC could not compile kernel module {module} for {arch}: {message}{}",
        if log.trim().is_empty() { String::new() } else { format!("\n{}", log.trim_end()) })]
    Nvrtc {
        /// The kernel module's name.
        module: String,
        /// The target, e.g. `"sm_90"`.
        arch: String,
        /// NVRTC's error, e.g. `"NVRTC_ERROR_COMPILATION"`.
        message: String,
        /// NVRTC's program log (compiler diagnostics), possibly empty.
        log: String,
    },
    /// An I/O error while reading system facts.
    #[error("reading {what}: {source}")]
    Io {
        /// What was being read.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
