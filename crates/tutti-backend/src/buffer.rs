//! Buffers: a run of elements in one device's memory.

use std::fmt;

use crate::device::{Backend, Device};
use crate::{BackendError, Element};

/// How a copy between two buffers travelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyRoute {
    /// Within one device, or between simulated devices sharing host memory.
    Direct,
    /// Between two GPUs with peer access.
    Peer,
    /// Downloaded to the host, then uploaded (no peer access, or host and GPU).
    ViaHost,
}

/// `len` elements of `T` in one device's memory.
///
/// The memory is released when the buffer is dropped. Every operation checks lengths and
/// returns [`BackendError::LengthMismatch`] instead of panicking.
pub struct Buffer<T: Element> {
    device: Device,
    len: usize,
    storage: Storage<T>,
}

enum Storage<T> {
    Host(Vec<T>),
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::CudaBytes),
}

fn byte_len<T>(len: usize) -> u64 {
    (len as u64).saturating_mul(std::mem::size_of::<T>() as u64)
}

impl<T: Element> Buffer<T> {
    pub(crate) fn zeros(device: &Device, len: usize) -> Result<Self, BackendError> {
        let bytes = byte_len::<T>(len);
        device.reserve(bytes)?;
        let storage = match device.backend() {
            Backend::Host => {
                let mut data = Vec::new();
                if data.try_reserve_exact(len).is_err() {
                    device.release(bytes);
                    return Err(BackendError::OutOfMemory {
                        device: device.to_string(),
                        requested: bytes,
                        free: device.memory_info().map_or(0, |m| m.free),
                    });
                }
                data.resize(len, T::zeroed());
                Storage::Host(data)
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => match cuda.alloc_zeroed(bytes as usize) {
                Ok(slice) => Storage::Cuda(slice),
                Err(err) => {
                    device.release(bytes);
                    return Err(err);
                }
            },
        };
        Ok(Self {
            device: device.clone(),
            len,
            storage,
        })
    }

    pub(crate) fn from_host(device: &Device, data: &[T]) -> Result<Self, BackendError> {
        let mut buffer = Self::zeros(device, data.len())?;
        buffer.copy_from_host(data)?;
        Ok(buffer)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device holding the memory.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The elements as a host slice, when the memory is host memory (simulated devices).
    pub fn as_host_slice(&self) -> Option<&[T]> {
        match &self.storage {
            Storage::Host(data) => Some(data),
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => None,
        }
    }

    /// The elements as a mutable host slice, when the memory is host memory.
    pub fn as_host_slice_mut(&mut self) -> Option<&mut [T]> {
        match &mut self.storage {
            Storage::Host(data) => Some(data),
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => None,
        }
    }

    /// The device memory, when the buffer lives on a GPU.
    #[cfg(feature = "cuda")]
    pub(crate) fn cuda_bytes(&self) -> Option<&crate::cuda::CudaBytes> {
        match &self.storage {
            Storage::Cuda(bytes) => Some(bytes),
            Storage::Host(_) => None,
        }
    }

    /// The device memory, mutably, when the buffer lives on a GPU.
    #[cfg(feature = "cuda")]
    pub(crate) fn cuda_bytes_mut(&mut self) -> Option<&mut crate::cuda::CudaBytes> {
        match &mut self.storage {
            Storage::Cuda(bytes) => Some(bytes),
            Storage::Host(_) => None,
        }
    }

    /// Copies the elements into `out`, which must have the same length.
    pub fn copy_to_host(&self, out: &mut [T]) -> Result<(), BackendError> {
        check_len("download", self.len, out.len())?;
        match &self.storage {
            Storage::Host(data) => out.copy_from_slice(data),
            #[cfg(feature = "cuda")]
            Storage::Cuda(bytes) => match self.device.backend() {
                Backend::Cuda(cuda) => cuda.download(bytes, bytemuck::cast_slice_mut(out))?,
                Backend::Host => unreachable!("CUDA storage always lives on a CUDA device"),
            },
        }
        Ok(())
    }

    /// A host copy of the elements.
    pub fn to_host_vec(&self) -> Result<Vec<T>, BackendError> {
        let mut out = vec![T::zeroed(); self.len];
        self.copy_to_host(&mut out)?;
        Ok(out)
    }

    /// Overwrites the elements with `data`, which must have the same length.
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<(), BackendError> {
        check_len("upload", data.len(), self.len)?;
        match &mut self.storage {
            Storage::Host(dest) => dest.copy_from_slice(data),
            #[cfg(feature = "cuda")]
            Storage::Cuda(bytes) => match self.device.backend() {
                Backend::Cuda(cuda) => cuda.upload_into(bytes, bytemuck::cast_slice(data))?,
                Backend::Host => unreachable!("CUDA storage always lives on a CUDA device"),
            },
        }
        Ok(())
    }

    /// Copies this buffer into `dest`, which may live on another device and must have the
    /// same length. Uses peer access where the devices have it, else goes through the host.
    pub fn copy_to(&self, dest: &mut Buffer<T>) -> Result<CopyRoute, BackendError> {
        check_len("device copy", self.len, dest.len)?;
        match (&self.storage, &mut dest.storage) {
            (Storage::Host(src), Storage::Host(dst)) => {
                dst.copy_from_slice(src);
                Ok(CopyRoute::Direct)
            }
            #[cfg(feature = "cuda")]
            (Storage::Cuda(src), Storage::Cuda(dst)) => {
                match (self.device.backend(), dest.device.backend()) {
                    (Backend::Cuda(from), Backend::Cuda(to)) => {
                        crate::cuda::copy_between(from, src, to, dst)
                    }
                    _ => unreachable!("CUDA storage always lives on a CUDA device"),
                }
            }
            #[cfg(feature = "cuda")]
            _ => {
                let staged = self.to_host_vec()?;
                dest.copy_from_host(&staged)?;
                Ok(CopyRoute::ViaHost)
            }
        }
    }

    /// A copy of this buffer on `device`.
    pub fn clone_to(&self, device: &Device) -> Result<Buffer<T>, BackendError> {
        let mut dest = device.alloc_zeros(self.len)?;
        self.copy_to(&mut dest)?;
        Ok(dest)
    }
}

impl<T: Element> Drop for Buffer<T> {
    fn drop(&mut self) {
        self.device.release(byte_len::<T>(self.len));
    }
}

impl<T: Element> fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("device", &self.device.to_string())
            .field("len", &self.len)
            .field("element", &std::any::type_name::<T>())
            .finish()
    }
}

fn check_len(op: &'static str, source_len: usize, dest_len: usize) -> Result<(), BackendError> {
    if source_len == dest_len {
        Ok(())
    } else {
        Err(BackendError::LengthMismatch {
            op,
            source_len,
            dest_len,
        })
    }
}
