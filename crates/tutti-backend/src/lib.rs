//! Devices for tutti: host-simulated devices and CUDA GPUs behind one interface.
//!
//! A [`Resources`] value says what a computation may use; [`Resources::select`] opens the
//! [`Device`]s, one per rank. Workloads allocate [`Buffer`]s, upload, download and copy them
//! between devices, and order work with [`Stream`]s and [`Event`]s, written once for both
//! kinds: a simulated device is how every test exercises multi-device logic without a GPU.
//!
//! This crate knows nothing of collectives, plans or workloads.
//!
//! ```
//! use tutti_backend::Resources;
//!
//! let devices = Resources::cpu(2).select()?;
//! let buffer = devices[0].upload(&[1.0_f64, 2.0, 3.0])?;
//! let copy = buffer.clone_to(&devices[1])?;
//! assert_eq!(copy.to_host_vec()?, vec![1.0, 2.0, 3.0]);
//! # Ok::<(), tutti_backend::BackendError>(())
//! ```
#![deny(missing_docs)]

mod buffer;
mod compute;
#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "cuda")]
mod cuda_blas;
#[cfg(feature = "cuda")]
mod cuda_libs;
mod device;
mod element;
mod error;
pub mod kernel;
#[cfg(feature = "cuda")]
#[path = "cuda_nvrtc.rs"]
pub mod nvrtc;
mod panic;
pub mod progress;
mod resources;
mod stream;
pub mod system;

pub use buffer::{Buffer, CopyRoute};
pub use compute::{Batch, BlasScalar, Gemm, Op, Operand, MAX_BLAS_DIMENSION};
pub use device::{
    enable_peer_access, peer_access_matrix, Device, DeviceInfo, DeviceKind, MemoryInfo,
};
pub use element::{Element, Summable};
pub use error::BackendError;
pub use kernel::{Arg, ElemKind, KernelElement, KernelEntry, KernelModule, LaunchDims, Param};
pub use panic::panic_message;
pub use progress::{Progress, ProgressFn};
pub use resources::{
    gpu_count, DeviceRequest, GpuUse, Kernels, KindRequest, Resources, MAX_SIMULATED_DEVICES,
};
pub use stream::{Event, Stream};

pub use num_complex::{Complex32, Complex64};

/// Formats a byte count for people: `"12.0 GiB"`, `"512 B"`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = 0;
    // 1023.95 and up would print as "1024.0" of this unit: use the next one.
    while value >= 1023.95 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Whether this build includes the CUDA backend (cargo feature `cuda`).
pub const fn cuda_built() -> bool {
    cfg!(feature = "cuda")
}

#[cfg(test)]
mod tests;
