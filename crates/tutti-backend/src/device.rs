//! Devices: host-simulated or CUDA, one interface.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::buffer::Buffer;
use crate::stream::{Event, Stream};
use crate::{system, BackendError, Element};

/// The kind of a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// A simulated device: a thread with a share of the host's cores and memory.
    Host,
    /// A CUDA GPU.
    Cuda,
}

impl DeviceKind {
    /// `"cpu"` or `"gpu"`, as written in requests and printed tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::Host => "cpu",
            Self::Cuda => "gpu",
        }
    }
}

/// A device's memory, in bytes, after any cap is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Bytes still free for new buffers.
    pub free: u64,
    /// Bytes the device has (or the cap, when one is set).
    pub total: u64,
}

/// A summary of one device, for listings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Host or CUDA.
    pub kind: DeviceKind,
    /// Ordinal within its kind.
    pub ordinal: usize,
    /// Position within its selection (its rank in a group).
    pub index: usize,
    /// A human-readable name ("host (simulated)", or the GPU's name).
    pub name: String,
    /// Memory figures after any cap.
    pub memory: MemoryInfo,
    /// CPU threads its host-side kernels may use.
    pub threads: usize,
}

/// One device of a selection. Cheap to clone: clones share the device.
///
/// Devices come from [`crate::Resources::select`]. Every buffer operation has one meaning for
/// both kinds; on a host device it completes before returning, on a CUDA device it is ordered
/// on the device's default stream and a download waits for it.
#[derive(Clone)]
pub struct Device {
    inner: Arc<DeviceInner>,
}

struct DeviceInner {
    kind: DeviceKind,
    ordinal: usize,
    index: usize,
    threads: usize,
    memory_cap: Option<u64>,
    /// How many simulated devices share the host (1 for CUDA devices).
    host_share: usize,
    /// Bytes held by live buffers allocated through this handle, for caps.
    allocated: AtomicU64,
    pool: OnceLock<Result<rayon::ThreadPool, String>>,
    backend: Backend,
}

pub(crate) enum Backend {
    Host,
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::CudaDevice),
}

impl Device {
    pub(crate) fn host(
        index: usize,
        ordinal: usize,
        host_share: usize,
        threads: usize,
        memory_cap: Option<u64>,
    ) -> Self {
        Self::from_inner(DeviceInner {
            kind: DeviceKind::Host,
            ordinal,
            index,
            threads,
            memory_cap,
            host_share,
            allocated: AtomicU64::new(0),
            pool: OnceLock::new(),
            backend: Backend::Host,
        })
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn cuda(
        index: usize,
        ordinal: usize,
        threads: usize,
        memory_cap: Option<u64>,
    ) -> Result<Self, BackendError> {
        let cuda = crate::cuda::CudaDevice::open(ordinal)?;
        Ok(Self::from_inner(DeviceInner {
            kind: DeviceKind::Cuda,
            ordinal,
            index,
            threads,
            memory_cap,
            host_share: 1,
            allocated: AtomicU64::new(0),
            pool: OnceLock::new(),
            backend: Backend::Cuda(cuda),
        }))
    }

    fn from_inner(inner: DeviceInner) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    /// Host or CUDA.
    pub fn kind(&self) -> DeviceKind {
        self.inner.kind
    }

    /// Ordinal within its kind.
    pub fn ordinal(&self) -> usize {
        self.inner.ordinal
    }

    /// Position within its selection: the rank it serves in a group.
    pub fn index(&self) -> usize {
        self.inner.index
    }

    /// CPU threads this device's host-side kernels may use (its share of the cores).
    pub fn threads(&self) -> usize {
        self.inner.threads
    }

    /// The per-device memory cap, if one was set.
    pub fn memory_cap(&self) -> Option<u64> {
        self.inner.memory_cap
    }

    /// Whether two handles refer to the same physical device (e.g. two ranks on one GPU).
    pub fn same_physical_device(&self, other: &Device) -> bool {
        match (self.kind(), other.kind()) {
            (DeviceKind::Cuda, DeviceKind::Cuda) => self.ordinal() == other.ordinal(),
            (DeviceKind::Host, DeviceKind::Host) => Arc::ptr_eq(&self.inner, &other.inner),
            _ => false,
        }
    }

    /// A human-readable name.
    pub fn name(&self) -> String {
        match self.backend() {
            Backend::Host => "host (simulated)".to_string(),
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => cuda.name(),
        }
    }

    /// The device's memory before any cap: for a simulated device, its share of the host's.
    pub fn physical_memory(&self) -> Result<MemoryInfo, BackendError> {
        match self.backend() {
            Backend::Host => {
                let host = system::host_memory()?;
                let share = self.inner.host_share.max(1) as u64;
                Ok(MemoryInfo {
                    free: host.available / share,
                    total: host.total / share,
                })
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => cuda.memory_info(),
        }
    }

    /// Free and total memory as a computation may use it: the cap, when set, bounds both.
    ///
    /// Buffers allocated through this device count against the cap.
    pub fn memory_info(&self) -> Result<MemoryInfo, BackendError> {
        let physical = self.physical_memory()?;
        let allocated = self.inner.allocated.load(Ordering::Relaxed);
        Ok(match self.inner.memory_cap {
            None => physical,
            Some(cap) => MemoryInfo {
                free: physical.free.min(cap.saturating_sub(allocated)),
                total: cap,
            },
        })
    }

    /// Everything a listing shows about this device.
    pub fn info(&self) -> Result<DeviceInfo, BackendError> {
        Ok(DeviceInfo {
            kind: self.kind(),
            ordinal: self.ordinal(),
            index: self.index(),
            name: self.name(),
            memory: self.memory_info()?,
            threads: self.threads(),
        })
    }

    /// A thread pool with [`Device::threads`] threads for this device's host-side kernels,
    /// built on first use.
    pub fn thread_pool(&self) -> Result<&rayon::ThreadPool, BackendError> {
        let index = self.index();
        let threads = self.threads();
        self.inner
            .pool
            .get_or_init(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(move |i| format!("tutti-dev{index}-worker{i}"))
                    .build()
                    .map_err(|err| err.to_string())
            })
            .as_ref()
            .map_err(|message| BackendError::Io {
                what: format!("building the thread pool of {self}"),
                source: std::io::Error::other(message.clone()),
            })
    }

    /// Reserves `bytes` against the cap; released by [`Device::release`].
    pub(crate) fn reserve(&self, bytes: u64) -> Result<(), BackendError> {
        if let Some(cap) = self.inner.memory_cap {
            let mut current = self.inner.allocated.load(Ordering::Relaxed);
            loop {
                let free = cap.saturating_sub(current);
                if bytes > free {
                    return Err(BackendError::OutOfMemory {
                        device: self.to_string(),
                        requested: bytes,
                        free,
                    });
                }
                match self.inner.allocated.compare_exchange_weak(
                    current,
                    current + bytes,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Ok(()),
                    Err(actual) => current = actual,
                }
            }
        }
        self.inner.allocated.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn release(&self, bytes: u64) {
        self.inner.allocated.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// A zero-filled buffer of `len` elements on this device.
    pub fn alloc_zeros<T: Element>(&self, len: usize) -> Result<Buffer<T>, BackendError> {
        Buffer::zeros(self, len)
    }

    /// A buffer on this device holding a copy of `data`.
    pub fn upload<T: Element>(&self, data: &[T]) -> Result<Buffer<T>, BackendError> {
        Buffer::from_host(self, data)
    }

    /// Waits until all work queued on this device's streams has finished.
    pub fn synchronize(&self) -> Result<(), BackendError> {
        match self.backend() {
            Backend::Host => Ok(()),
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => cuda.synchronize(),
        }
    }

    /// The stream buffer operations are ordered on.
    pub fn default_stream(&self) -> Stream {
        Stream::default_for(self)
    }

    /// A new stream on this device, for work that may overlap the default stream.
    pub fn new_stream(&self) -> Result<Stream, BackendError> {
        Stream::new_for(self)
    }

    /// Records an event on the default stream: it completes when the work queued so far does.
    pub fn record_event(&self) -> Result<Event, BackendError> {
        self.default_stream().record_event()
    }

    /// Makes the default stream wait for `event` (which may come from another device).
    pub fn wait_event(&self, event: &Event) -> Result<(), BackendError> {
        self.default_stream().wait_event(event)
    }

    /// Whether this device can read and write `other`'s memory directly.
    ///
    /// Simulated devices share host memory, so always; a GPU with itself, always; two GPUs
    /// when the driver reports peer access.
    pub fn can_access_peer(&self, other: &Device) -> bool {
        match (self.backend(), other.backend()) {
            (Backend::Host, Backend::Host) => true,
            #[cfg(feature = "cuda")]
            (Backend::Cuda(a), Backend::Cuda(b)) => a.can_access_peer(b),
            #[cfg(feature = "cuda")]
            _ => false,
        }
    }

    /// Enables direct access from this device to `other`'s memory where the hardware allows.
    /// Returns whether peer access is now on.
    pub fn enable_peer_access(&self, other: &Device) -> Result<bool, BackendError> {
        match (self.backend(), other.backend()) {
            (Backend::Host, Backend::Host) => Ok(true),
            #[cfg(feature = "cuda")]
            (Backend::Cuda(a), Backend::Cuda(b)) => a.enable_peer_access(b),
            #[cfg(feature = "cuda")]
            _ => Ok(false),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind().name(), self.ordinal())
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("kind", &self.kind())
            .field("ordinal", &self.ordinal())
            .field("index", &self.index())
            .field("threads", &self.threads())
            .field("memory_cap", &self.memory_cap())
            .finish()
    }
}

/// Whether each device of `devices` can access each other one directly: `matrix[i][j]` is
/// `devices[i].can_access_peer(&devices[j])`.
pub fn peer_access_matrix(devices: &[Device]) -> Vec<Vec<bool>> {
    devices
        .iter()
        .map(|a| devices.iter().map(|b| a.can_access_peer(b)).collect())
        .collect()
}

/// Enables peer access between every pair of `devices` that allows it; returns the matrix
/// of pairs now connected.
pub fn enable_peer_access(devices: &[Device]) -> Result<Vec<Vec<bool>>, BackendError> {
    devices
        .iter()
        .map(|a| {
            devices
                .iter()
                .map(|b| {
                    if a.can_access_peer(b) {
                        a.enable_peer_access(b)
                    } else {
                        Ok(false)
                    }
                })
                .collect()
        })
        .collect()
}
