//! What a computation may use: which devices, how much memory, where to spill.

use std::path::{Path, PathBuf};

use crate::device::{Device, DeviceKind};
use crate::{system, BackendError};

/// The most simulated host devices one selection may open.
///
/// Simulated devices are threads, so any count works; this bound catches a typo such as
/// `--devices 10000` before it spawns ten thousand threads.
pub const MAX_SIMULATED_DEVICES: usize = 256;

/// Which devices to use.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum DeviceRequest {
    /// Every GPU of the node; for simulated devices, one device owning all cores.
    #[default]
    All,
    /// The first `n` devices (ordinals `0..n`).
    Count(usize),
    /// These ordinals, in this order. An ordinal may repeat: two ranks then share one device.
    Ordinals(Vec<usize>),
}

/// Which kind of device to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KindRequest {
    /// Host-simulated devices: threads that share the host's cores and memory.
    Cpu,
    /// CUDA GPUs (needs the cargo feature `cuda` and a driver).
    Gpu,
    /// GPUs when at least one is present and the computation has GPU kernels
    /// ([`GpuUse::Kernels`]), else host-simulated devices.
    #[default]
    Auto,
}

impl std::str::FromStr for KindRequest {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.to_ascii_lowercase().as_str() {
            "cpu" | "host" => Ok(Self::Cpu),
            "gpu" | "cuda" => Ok(Self::Gpu),
            "auto" => Ok(Self::Auto),
            other => Err(format!(
                "unknown device kind '{other}': expected cpu, gpu or auto"
            )),
        }
    }
}

/// What a computation can run on a GPU. It decides what [`KindRequest::Auto`] picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuUse {
    /// The computation has GPU kernels: `auto` picks the GPUs when there are any.
    Kernels,
    /// Everything runs on the host: `auto` picks simulated devices even on a GPU node. A GPU
    /// rank would run the same host code on the same share of the cores as a simulated device,
    /// so it could only be slower. An explicit [`KindRequest::Gpu`] still opens the GPUs.
    HostOnly,
}

/// Whether a rank runs a workload's device code (its GPU kernels and device GEMMs) or its
/// host code, for the workloads that have both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kernels {
    /// The device code on GPU ranks, the host code on simulated devices (default).
    #[default]
    Auto,
    /// The device code on every rank. On a simulated device it runs as the kernels' host
    /// twins and the host implementations of the compute calls, which compute the host
    /// code's bits through the device path (uploads, launches, downloads): how the GPU path
    /// is tested without a GPU. Slower than [`Kernels::Never`] there.
    Always,
    /// The host code on every rank, GPU ranks included.
    Never,
}

impl Kernels {
    /// Whether a rank on `device` runs the device code.
    pub fn on(self, device: &crate::Device) -> bool {
        match self {
            Kernels::Auto => device.kind() == crate::DeviceKind::Cuda,
            Kernels::Always => true,
            Kernels::Never => false,
        }
    }
}

/// The resources one computation may use.
///
/// The defaults are: every GPU if there is one and the computation has GPU kernels, else one
/// simulated device on all cores
/// ([`DeviceRequest::All`], [`KindRequest::Auto`]); no memory caps beyond what the devices
/// report; scratch files under the system temporary directory with no limit beyond its free
/// space.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resources {
    /// Which devices.
    pub devices: DeviceRequest,
    /// Which kind of device.
    pub kind: KindRequest,
    /// Use at most this many bytes on each device (it must not exceed a device's memory).
    pub device_memory_cap: Option<u64>,
    /// Use at most this many bytes of host memory in all.
    pub host_memory_cap: Option<u64>,
    /// Where spill files go; `None` means [`std::env::temp_dir`].
    pub scratch_dir: Option<PathBuf>,
    /// Write at most this many bytes of spill files.
    pub scratch_limit: Option<u64>,
    /// Use at most this many host cores in all (shared among the devices as usual); `None`
    /// means every core this process may run on. Several processes on one node (MPI) each
    /// take their share this way.
    pub host_cores: Option<usize>,
}

impl Resources {
    /// `n` host-simulated devices.
    pub fn cpu(n: usize) -> Self {
        Self {
            devices: DeviceRequest::Count(n),
            kind: KindRequest::Cpu,
            ..Self::default()
        }
    }

    /// The first `n` GPUs.
    pub fn gpu(n: usize) -> Self {
        Self {
            devices: DeviceRequest::Count(n),
            kind: KindRequest::Gpu,
            ..Self::default()
        }
    }

    /// These devices.
    pub fn with_devices(mut self, devices: DeviceRequest) -> Self {
        self.devices = devices;
        self
    }

    /// This kind of device.
    pub fn with_kind(mut self, kind: KindRequest) -> Self {
        self.kind = kind;
        self
    }

    /// At most `bytes` on each device.
    pub fn with_device_memory_cap(mut self, bytes: u64) -> Self {
        self.device_memory_cap = Some(bytes);
        self
    }

    /// At most `bytes` of host memory.
    pub fn with_host_memory_cap(mut self, bytes: u64) -> Self {
        self.host_memory_cap = Some(bytes);
        self
    }

    /// Spill files under `dir`.
    pub fn with_scratch_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.scratch_dir = Some(dir.into());
        self
    }

    /// At most `bytes` of spill files.
    pub fn with_scratch_limit(mut self, bytes: u64) -> Self {
        self.scratch_limit = Some(bytes);
        self
    }

    /// Uses at most `cores` host cores (at least 1 is used).
    pub fn with_host_cores(mut self, cores: usize) -> Self {
        self.host_cores = Some(cores);
        self
    }

    /// The host cores the devices share: every core this process may run on, or the cap.
    fn cores(&self) -> usize {
        let cores = system::host_cores();
        self.host_cores.map_or(cores, |cap| cap.clamp(1, cores))
    }

    /// The scratch directory: the configured one, or the system temporary directory.
    pub fn scratch_dir(&self) -> PathBuf {
        self.scratch_dir.clone().unwrap_or_else(std::env::temp_dir)
    }

    /// Opens the requested devices, in request order; their positions are the ranks.
    ///
    /// [`KindRequest::Auto`] picks the GPUs whenever there are any, as for a computation with
    /// GPU kernels ([`GpuUse::Kernels`]); a workload states what it can do through
    /// [`Resources::select_for`].
    ///
    /// Errors: zero devices requested, more devices than exist, an unknown ordinal, no GPU
    /// for a GPU request (or a build without the `cuda` feature), a zero cap, or a device
    /// memory cap larger than a device's memory.
    pub fn select(&self) -> Result<Vec<Device>, BackendError> {
        self.select_for(GpuUse::Kernels)
    }

    /// The kind of device this request opens for a computation that can do `gpu_use`.
    ///
    /// `auto` is the GPU only when the computation has GPU kernels and the node has a GPU.
    pub fn kind_for(&self, gpu_use: GpuUse) -> DeviceKind {
        match (self.kind, gpu_use) {
            (KindRequest::Cpu, _) => DeviceKind::Host,
            (KindRequest::Gpu, _) => DeviceKind::Cuda,
            (KindRequest::Auto, GpuUse::HostOnly) => DeviceKind::Host,
            (KindRequest::Auto, GpuUse::Kernels) if gpu_count().unwrap_or(0) > 0 => {
                DeviceKind::Cuda
            }
            (KindRequest::Auto, GpuUse::Kernels) => DeviceKind::Host,
        }
    }

    /// Opens the requested devices for a computation that can do `gpu_use` on a GPU, in
    /// request order; their positions are the ranks.
    ///
    /// Every rank, simulated or GPU, gets an even share of the host's cores for its host-side
    /// work ([`Device::threads`]). Errors as [`Resources::select`].
    pub fn select_for(&self, gpu_use: GpuUse) -> Result<Vec<Device>, BackendError> {
        if self.device_memory_cap == Some(0) {
            return Err(BackendError::ZeroCap {
                what: "the device memory cap",
            });
        }
        if self.host_memory_cap == Some(0) {
            return Err(BackendError::ZeroCap {
                what: "the host memory cap",
            });
        }
        if self.scratch_limit == Some(0) {
            return Err(BackendError::ZeroCap {
                what: "the scratch limit",
            });
        }
        let devices = match self.kind_for(gpu_use) {
            DeviceKind::Host => self.select_host()?,
            DeviceKind::Cuda => self.select_gpus()?,
        };
        if let Some(cap) = self.device_memory_cap {
            for device in &devices {
                let total = device.physical_memory()?.total;
                if cap > total {
                    let note = match device.kind() {
                        DeviceKind::Host => format!(
                            " ({} simulated device(s) share the host's memory equally)",
                            devices.len()
                        ),
                        DeviceKind::Cuda => String::new(),
                    };
                    return Err(BackendError::CapExceedsDevice {
                        cap,
                        total,
                        device: device.to_string(),
                        note,
                    });
                }
            }
        }
        Ok(devices)
    }

    fn select_host(&self) -> Result<Vec<Device>, BackendError> {
        let ordinals: Vec<usize> = match &self.devices {
            DeviceRequest::All => vec![0],
            DeviceRequest::Count(n) => (0..*n).collect(),
            DeviceRequest::Ordinals(ordinals) => ordinals.clone(),
        };
        check_count(ordinals.len(), MAX_SIMULATED_DEVICES, "cpu")?;
        if let Some(&ordinal) = ordinals.iter().find(|&&o| o >= MAX_SIMULATED_DEVICES) {
            return Err(BackendError::UnknownOrdinal {
                ordinal,
                count: MAX_SIMULATED_DEVICES,
                kind: "cpu",
            });
        }
        let share = ordinals.len();
        let cores = self.cores();
        Ok(ordinals
            .iter()
            .enumerate()
            .map(|(index, &ordinal)| {
                let threads = core_share(cores, share, index);
                Device::host(index, ordinal, share, threads, self.device_memory_cap)
            })
            .collect())
    }

    fn select_gpus(&self) -> Result<Vec<Device>, BackendError> {
        let available = match gpu_count() {
            Ok(n) => n,
            Err(BackendError::CudaNotBuilt) => return Err(BackendError::CudaNotBuilt),
            Err(err) => {
                return Err(BackendError::NoDevices {
                    kind: "gpu",
                    hint: format!(" ({err})"),
                })
            }
        };
        if available == 0 && self.devices == DeviceRequest::All {
            return Err(BackendError::NoDevices {
                kind: "gpu",
                hint: String::new(),
            });
        }
        let ordinals: Vec<usize> = match &self.devices {
            DeviceRequest::All => (0..available).collect(),
            DeviceRequest::Count(n) => {
                check_count(*n, available, "gpu")?;
                (0..*n).collect()
            }
            DeviceRequest::Ordinals(ordinals) => ordinals.clone(),
        };
        check_count(ordinals.len(), usize::MAX, "gpu")?;
        if let Some(&ordinal) = ordinals.iter().find(|&&o| o >= available) {
            return Err(BackendError::UnknownOrdinal {
                ordinal,
                count: available,
                kind: "gpu",
            });
        }
        open_gpus(&ordinals, self.device_memory_cap, self.cores())
    }

    /// Checks that the scratch directory exists and is a directory, and returns it.
    pub fn checked_scratch_dir(&self) -> Result<PathBuf, BackendError> {
        let dir = self.scratch_dir();
        check_scratch_dir(&dir)?;
        Ok(dir)
    }
}

fn check_scratch_dir(dir: &Path) -> Result<(), BackendError> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(BackendError::Scratch {
            path: dir.to_path_buf(),
            reason: "not a directory".into(),
        }),
        Err(err) => Err(BackendError::Scratch {
            path: dir.to_path_buf(),
            reason: err.to_string(),
        }),
    }
}

/// The host threads of rank `index` of `ranks`: the cores split as evenly as possible, the
/// first `cores % ranks` ranks taking one more; every rank gets at least one.
pub(crate) fn core_share(cores: usize, ranks: usize, index: usize) -> usize {
    let ranks = ranks.max(1);
    (cores / ranks + usize::from(index < cores % ranks)).max(1)
}

fn check_count(requested: usize, available: usize, kind: &'static str) -> Result<(), BackendError> {
    if requested == 0 {
        return Err(BackendError::ZeroDevices);
    }
    if requested > available {
        return Err(BackendError::MoreDevicesThanExist {
            requested,
            available,
            kind,
        });
    }
    Ok(())
}

/// The number of CUDA devices on this node.
///
/// Errors: [`BackendError::CudaNotBuilt`] without the `cuda` feature; a driver error when the
/// CUDA driver library cannot be loaded or initialised.
pub fn gpu_count() -> Result<usize, BackendError> {
    #[cfg(feature = "cuda")]
    {
        crate::cuda::device_count()
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err(BackendError::CudaNotBuilt)
    }
}

#[cfg(feature = "cuda")]
fn open_gpus(
    ordinals: &[usize],
    cap: Option<u64>,
    cores: usize,
) -> Result<Vec<Device>, BackendError> {
    ordinals
        .iter()
        .enumerate()
        .map(|(index, &ordinal)| {
            Device::cuda(
                index,
                ordinal,
                core_share(cores, ordinals.len(), index),
                cap,
            )
        })
        .collect()
}

#[cfg(not(feature = "cuda"))]
fn open_gpus(
    _ordinals: &[usize],
    _cap: Option<u64>,
    _cores: usize,
) -> Result<Vec<Device>, BackendError> {
    Err(BackendError::CudaNotBuilt)
}
