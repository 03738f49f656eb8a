//! Running a closure on every rank of a group, with abort on the first failure.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use tutti_backend::{panic_message, BackendError, Device, GpuUse, Resources};

use crate::comm::Comm;
use crate::local::{LocalMailbox, SoloTransport};
use crate::transport::Transport;
use crate::RunError;

/// Ranks `0..size`, one per device, in one process.
///
/// [`Group::run`] calls a closure on every rank, each on its own thread (a group of one runs
/// inline on the caller's thread), and returns every rank's result in rank order, or the
/// original error of the first rank that failed.
#[derive(Clone, Debug)]
pub struct Group {
    devices: Vec<Device>,
}

/// Why a group could not be formed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GroupError {
    /// A group needs at least one device.
    #[error("a group needs at least one device")]
    Empty,
    /// The devices could not be selected.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

impl Group {
    /// A group with one rank per device, rank r serving `devices[r]`.
    pub fn new(devices: Vec<Device>) -> Result<Self, GroupError> {
        if devices.is_empty() {
            return Err(GroupError::Empty);
        }
        Ok(Self { devices })
    }

    /// A group over the devices `resources` selects for a computation that can do `gpu_use`
    /// on a GPU (which decides what `auto` picks: [`Resources::select_for`]).
    pub fn from_resources(resources: &Resources, gpu_use: GpuUse) -> Result<Self, GroupError> {
        Self::new(resources.select_for(gpu_use)?)
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.devices.len()
    }

    /// The devices, in rank order.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Runs `work` on every rank and returns the results in rank order.
    ///
    /// When a rank's closure returns an error or panics, the group is aborted: every rank
    /// blocked in (or later entering) a collective gets [`crate::CommError::Aborted`], and
    /// this call returns the first failure as it happened ([`RunError::Failed`] with the
    /// rank's own error, or [`RunError::Panicked`] with the panic message). A rank returning
    /// while others wait for it in a collective releases them with
    /// [`crate::CommError::RankLeft`]. Nothing hangs on a failure.
    pub fn run<R, E, F>(&self, work: F) -> Result<Vec<R>, RunError<E>>
    where
        F: Fn(&Comm<'_>) -> Result<R, E> + Sync,
        R: Send,
        E: Send,
    {
        if let [device] = self.devices.as_slice() {
            let comm = Comm::new(&SoloTransport, device);
            return match catch_unwind(AssertUnwindSafe(|| work(&comm))) {
                Ok(Ok(value)) => Ok(vec![value]),
                Ok(Err(error)) => Err(RunError::Failed { rank: 0, error }),
                Err(payload) => Err(RunError::Panicked {
                    rank: 0,
                    message: panic_message(payload.as_ref()).to_string(),
                }),
            };
        }
        let mailbox = LocalMailbox::new(self.size());
        let first_failure: Mutex<Option<RunError<E>>> = Mutex::new(None);
        let fail = |failure: RunError<E>| {
            // Record before aborting, so the original error is in place before any rank can
            // fail with `Aborted`.
            let mut slot = first_failure
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            slot.get_or_insert(failure);
            drop(slot);
            mailbox.abort();
        };
        let results: Vec<Option<R>> = std::thread::scope(|scope| {
            let mut handles = Vec::with_capacity(self.size());
            for (rank, device) in self.devices.iter().enumerate() {
                let (work, fail, mailbox) = (&work, &fail, &mailbox);
                let spawned = std::thread::Builder::new()
                    .name(format!("tutti-rank-{rank}"))
                    .spawn_scoped(scope, move || {
                        let endpoint = mailbox.endpoint(rank);
                        let comm = Comm::new(&endpoint, device);
                        match catch_unwind(AssertUnwindSafe(|| work(&comm))) {
                            Ok(Ok(value)) => {
                                endpoint.leave();
                                Some(value)
                            }
                            Ok(Err(error)) => {
                                fail(RunError::Failed { rank, error });
                                None
                            }
                            Err(payload) => {
                                fail(RunError::Panicked {
                                    rank,
                                    message: panic_message(payload.as_ref()).to_string(),
                                });
                                None
                            }
                        }
                    });
                match spawned {
                    Ok(handle) => handles.push(handle),
                    Err(err) => {
                        fail(RunError::Spawn {
                            rank,
                            message: err.to_string(),
                        });
                        break;
                    }
                }
            }
            // The closures catch their panics, so a join error cannot happen; map it to a
            // missing result all the same rather than unwinding through the scope.
            handles
                .into_iter()
                .map(|handle| handle.join().ok().flatten())
                .collect()
        });
        if let Some(failure) = first_failure
            .into_inner()
            .unwrap_or_else(|poison| poison.into_inner())
        {
            return Err(failure);
        }
        results
            .into_iter()
            .enumerate()
            .map(|(rank, value)| {
                value.ok_or_else(|| RunError::Panicked {
                    rank,
                    message: "the rank's thread ended without a result".into(),
                })
            })
            .collect()
    }
}
