//! [`SpanningFabric`]: the ranks of several processes over one [`Wire`], opening one
//! [`crate::session::Session`] per run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use tutti_group::{CommError, Fabric, Transport};

use crate::session::Session;
use crate::wire::Wire;

/// A [`Fabric`] over a [`Wire`]: this process is rank `wire.rank()` of `wire.size()`.
///
/// Runs follow one another on it (a [`tutti_group::Group::spanning`] runs one at a time);
/// a run that fails cleanly (an error or panic on any rank, an early return, a mismatch)
/// leaves the fabric usable for the next. A failure of the wire itself (an MPI error, a
/// vanished peer) breaks it: later runs are refused with that error.
pub struct SpanningFabric<W: Wire> {
    rank: usize,
    size: usize,
    wire: Mutex<W>,
    in_use: AtomicBool,
    broken: Mutex<Option<String>>,
}

impl<W: Wire> SpanningFabric<W> {
    /// A fabric over `wire`.
    pub fn new(wire: W) -> Self {
        Self {
            rank: wire.rank(),
            size: wire.size(),
            wire: Mutex::new(wire),
            in_use: AtomicBool::new(false),
            broken: Mutex::new(None),
        }
    }

    /// The wire itself, for work outside the round protocol (a benchmark's raw baseline).
    /// Do not call it during a run on this fabric: the rounds would go out of step.
    pub fn wire(&self) -> MutexGuard<'_, W> {
        // A panic while holding the wire leaves the ranks out of step, which the next
        // round's check reports; the lock itself stays usable.
        self.wire
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Marks the wire unusable after `error`.
    pub(crate) fn break_with(&self, error: &str) {
        let mut broken = self.broken.lock().unwrap_or_else(|p| p.into_inner());
        broken.get_or_insert_with(|| error.to_string());
    }

    pub(crate) fn release(&self) {
        self.wire().release_buffers();
        self.in_use.store(false, Ordering::Release);
    }
}

impl<W: Wire> Fabric for SpanningFabric<W> {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn open(&self) -> Result<Box<dyn Transport + '_>, CommError> {
        if let Some(error) = self
            .broken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            return Err(CommError::Transport(format!(
                "the process group is unusable after an earlier transport error: {error}"
            )));
        }
        if self.in_use.swap(true, Ordering::AcqRel) {
            return Err(CommError::Transport(
                "another run is using this process group; runs over one group must follow \
                 one another"
                    .into(),
            ));
        }
        Ok(Box::new(Session::new(self)))
    }
}

impl<W: Wire> SpanningFabric<W> {
    pub(crate) fn rank_of_wire(&self) -> usize {
        self.rank
    }

    pub(crate) fn size_of_wire(&self) -> usize {
        self.size
    }
}
