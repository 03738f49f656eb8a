//! Streams and events: ordering work on and between devices.
//!
//! On a simulated device every operation completes before it returns, so its streams are
//! already in order and its events are complete when recorded; the same calling code then
//! orders CUDA work correctly.

use crate::device::{Backend, Device};
use crate::BackendError;

/// A queue of work on one device.
pub struct Stream {
    device: Device,
    inner: StreamInner,
}

enum StreamInner {
    Host,
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::CudaStream),
}

/// A point in a stream's work; complete once everything queued before it has finished.
pub struct Event {
    inner: EventInner,
}

enum EventInner {
    Host,
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::CudaEvent),
}

impl Stream {
    pub(crate) fn default_for(device: &Device) -> Self {
        let inner = match device.backend() {
            Backend::Host => StreamInner::Host,
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => StreamInner::Cuda(cuda.default_stream()),
        };
        Self {
            device: device.clone(),
            inner,
        }
    }

    pub(crate) fn new_for(device: &Device) -> Result<Self, BackendError> {
        let inner = match device.backend() {
            Backend::Host => StreamInner::Host,
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => StreamInner::Cuda(cuda.new_stream()?),
        };
        Ok(Self {
            device: device.clone(),
            inner,
        })
    }

    /// The device this stream belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Records an event that completes when the work queued so far on this stream does.
    pub fn record_event(&self) -> Result<Event, BackendError> {
        let inner = match &self.inner {
            StreamInner::Host => EventInner::Host,
            #[cfg(feature = "cuda")]
            StreamInner::Cuda(stream) => EventInner::Cuda(stream.record_event()?),
        };
        Ok(Event { inner })
    }

    /// Makes later work on this stream wait for `event`, which may belong to another stream
    /// or device. Does not block the calling thread on a GPU.
    pub fn wait_event(&self, event: &Event) -> Result<(), BackendError> {
        match (&self.inner, &event.inner) {
            (StreamInner::Host, EventInner::Host) => Ok(()),
            #[cfg(feature = "cuda")]
            (StreamInner::Cuda(stream), EventInner::Cuda(event)) => stream.wait_event(event),
            // A host stream waiting for a GPU event blocks until it completes; a GPU stream
            // after a host event has nothing to wait for.
            #[cfg(feature = "cuda")]
            (StreamInner::Host, EventInner::Cuda(event)) => event.synchronize(),
            #[cfg(feature = "cuda")]
            (StreamInner::Cuda(_), EventInner::Host) => Ok(()),
        }
    }

    /// Blocks until everything queued on this stream has finished.
    pub fn synchronize(&self) -> Result<(), BackendError> {
        match &self.inner {
            StreamInner::Host => Ok(()),
            #[cfg(feature = "cuda")]
            StreamInner::Cuda(stream) => stream.synchronize(),
        }
    }
}

impl Event {
    /// Blocks until the event has completed.
    pub fn synchronize(&self) -> Result<(), BackendError> {
        match &self.inner {
            EventInner::Host => Ok(()),
            #[cfg(feature = "cuda")]
            EventInner::Cuda(event) => event.synchronize(),
        }
    }

    /// Whether the event has completed, without blocking.
    pub fn is_complete(&self) -> Result<bool, BackendError> {
        match &self.inner {
            EventInner::Host => Ok(true),
            #[cfg(feature = "cuda")]
            EventInner::Cuda(event) => event.is_complete(),
        }
    }
}
