//! Running a closure on every rank of a group, with abort on the first failure.

use std::fmt;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use tutti_backend::{panic_message, BackendError, Device, GpuUse, Resources};

use crate::comm::Comm;
use crate::hybrid::{Layout, NodeMailbox};
use crate::local::{self, LocalMailbox, SoloTransport};
use crate::transport::{Block, Fabric, Signature, Transport};
use crate::RunError;

/// Ranks `0..size`, one per device: all in this process, or spread over processes.
///
/// [`Group::run`] calls a closure on every rank of this process, each on its own thread (a
/// single local rank runs inline on the caller's thread), and returns their results in rank
/// order, or the original error of the first rank that failed.
///
/// A group made with [`Group::new`] has every rank in this process. One made with
/// [`Group::spanning`] has one rank here and the others in other processes (MPI), which run
/// the same program: [`Group::run`] then returns this process's result only.
#[derive(Clone)]
pub struct Group {
    devices: Vec<Device>,
    fabric: Option<Arc<dyn Fabric>>,
    /// Where the ranks of a spanning group with several ranks in some process are.
    layout: Option<Arc<Layout>>,
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Group");
        debug.field("devices", &self.devices);
        if self.fabric.is_some() {
            debug
                .field("ranks", &self.local_ranks())
                .field("size", &self.size());
        }
        debug.finish()
    }
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
    /// The processes of a spanning group could not agree on its layout.
    #[error("forming a group across processes: {0}")]
    Layout(String),
    /// A process failed while the processes formed a spanning group (its failure before a
    /// call, told with [`Group::before_run`] or its like, meets the others there).
    #[error("rank {rank} failed: {message}")]
    Remote {
        /// The failing process's (first) rank.
        rank: usize,
        /// Its error's text.
        message: String,
    },
}

impl Group {
    /// A group with one rank per device, rank r serving `devices[r]`.
    pub fn new(devices: Vec<Device>) -> Result<Self, GroupError> {
        if devices.is_empty() {
            return Err(GroupError::Empty);
        }
        Ok(Self {
            devices,
            fabric: None,
            layout: None,
        })
    }

    /// A group spanning processes: this process holds one rank, `fabric.rank()`, serving
    /// `device`; the other `fabric.size() - 1` ranks are in the processes that share the
    /// fabric and run the same program.
    pub fn spanning(fabric: Arc<dyn Fabric>, device: Device) -> Self {
        Self {
            devices: vec![device],
            fabric: Some(fabric),
            layout: None,
        }
    }

    /// A group spanning processes with a rank per device of `devices` in this process: the
    /// fabric's processes (its ranks) hold consecutive ranks of the group, process 0 the
    /// first ones. Collective over the fabric: every process calls it, each with its own
    /// devices (the counts may differ). The ranks of one process exchange in shared memory;
    /// one of them at a time carries the process's part of each exchange over the fabric.
    /// A process of several ranks thus calls the fabric from several threads (one at a
    /// time: an MPI fabric needs `MPI_THREAD_SERIALIZED` there); a process of one rank runs
    /// it on the calling thread. When every process has one device this is
    /// [`Group::spanning`].
    ///
    /// Errors, on every process alike: [`GroupError::Empty`] when some process has no
    /// device, [`GroupError::Layout`] when the processes cannot exchange their counts,
    /// [`GroupError::Remote`] when a process failed before forming the group and said so
    /// (its MPI process rank and message).
    pub fn spanning_devices(
        fabric: Arc<dyn Fabric>,
        devices: Vec<Device>,
    ) -> Result<Self, GroupError> {
        let counts = exchange_counts(fabric.as_ref(), devices.len())?;
        if counts.contains(&0) {
            return Err(GroupError::Empty);
        }
        let layout = Layout::new(&counts, fabric.rank()).ok_or_else(|| {
            GroupError::Layout(format!(
                "the device counts {counts:?} of the processes do not form a group"
            ))
        })?;
        let layout = (!layout.one_rank_each()).then(|| Arc::new(layout));
        Ok(Self {
            devices,
            fabric: Some(fabric),
            layout,
        })
    }

    /// A group over the devices `resources` selects for a computation that can do `gpu_use`
    /// on a GPU (which decides what `auto` picks: [`Resources::select_for`]).
    pub fn from_resources(resources: &Resources, gpu_use: GpuUse) -> Result<Self, GroupError> {
        Self::new(resources.select_for(gpu_use)?)
    }

    /// The number of ranks, over all processes.
    pub fn size(&self) -> usize {
        match (&self.layout, &self.fabric) {
            (Some(layout), _) => layout.size(),
            (None, Some(fabric)) => fabric.size(),
            (None, None) => self.devices.len(),
        }
    }

    /// The ranks held by this process: all of them, unless the group spans processes.
    pub fn local_ranks(&self) -> Range<usize> {
        match (&self.layout, &self.fabric) {
            (Some(layout), _) => layout.local(),
            (None, None) => 0..self.devices.len(),
            (None, Some(fabric)) => fabric.rank()..fabric.rank() + self.devices.len(),
        }
    }

    /// Whether the group spans processes ([`Group::spanning`]).
    pub fn is_spanning(&self) -> bool {
        self.fabric.is_some()
    }

    /// The devices of this process's ranks, in rank order.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Passes `result` through, first telling the other processes of a spanning group when
    /// it is an error: a call that fails in this process before its [`Group::run`] (a bad
    /// argument, a plan that does not fit) joins the run's first round as failed, so the
    /// other processes, waiting in that round, return [`RunError::Remote`] with this error's
    /// text instead of waiting forever. In one process this does nothing.
    ///
    /// Wrap every fallible step a computation takes before its run with this, in
    /// computations meant for spanning groups: inputs that differ between processes can
    /// make one process fail where the others do not.
    pub fn before_run<T, E: fmt::Display>(&self, result: Result<T, E>) -> Result<T, E> {
        if let (Err(error), Some(fabric)) = (&result, &self.fabric) {
            if let Ok(transport) = fabric.open() {
                transport.abort_with(&error.to_string());
            }
        }
        result
    }

    /// Runs `work` on every rank and returns the results in rank order.
    ///
    /// When a rank's closure returns an error or panics, the group is aborted: every rank
    /// blocked in (or later entering) a collective gets [`crate::CommError::Aborted`], and
    /// this call returns the first failure as it happened ([`RunError::Failed`] with the
    /// rank's own error, or [`RunError::Panicked`] with the panic message). A rank returning
    /// while others wait for it in a collective releases them with
    /// [`crate::CommError::RankLeft`]. Nothing hangs on a failure. A failure that followed a
    /// collective's `Aborted` or `RankLeft` on that rank is reported only when no rank failed
    /// otherwise, so the caller sees the cause, not its echo.
    ///
    /// In a group spanning processes the result holds this process's rank only, and a
    /// failure in another process is [`RunError::Remote`] with that rank's error text.
    pub fn run<R, E, F>(&self, work: F) -> Result<Vec<R>, RunError<E>>
    where
        F: Fn(&Comm<'_>) -> Result<R, E> + Sync,
        R: Send,
        E: Send + fmt::Display,
    {
        if let (Some(fabric), Some(layout)) = (&self.fabric, &self.layout) {
            return run_hybrid(fabric.as_ref(), layout, &self.devices, work);
        }
        if let (Some(fabric), [device]) = (&self.fabric, self.devices.as_slice()) {
            return run_spanning(fabric.as_ref(), device, work);
        }
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
        let failures: Mutex<FirstFailures<E>> = Mutex::new(FirstFailures::default());
        let fail = |failure: RunError<E>, relayed: bool| {
            // Record before aborting, so the original error is in place before any rank can
            // fail with `Aborted`.
            failures
                .lock()
                .unwrap_or_else(|poison| poison.into_inner())
                .record(failure, relayed);
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
                        local::reset_witness();
                        let outcome = catch_unwind(AssertUnwindSafe(|| work(&comm)));
                        let relayed = local::witnessed_others_failure();
                        match outcome {
                            Ok(Ok(value)) => {
                                endpoint.leave();
                                Some(value)
                            }
                            Ok(Err(error)) => {
                                fail(RunError::Failed { rank, error }, relayed);
                                None
                            }
                            Err(payload) => {
                                let message = panic_message(payload.as_ref()).to_string();
                                fail(RunError::Panicked { rank, message }, relayed);
                                None
                            }
                        }
                    });
                match spawned {
                    Ok(handle) => handles.push(handle),
                    Err(err) => {
                        let message = err.to_string();
                        fail(RunError::Spawn { rank, message }, false);
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
        if let Some(failure) = failures
            .into_inner()
            .unwrap_or_else(|poison| poison.into_inner())
            .into_reported()
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

/// [`Group::run`] for this process's one rank of a group spanning processes.
/// The failures of an in-process run, kept to report the one that started it.
///
/// A rank that fails after a collective told it [`crate::CommError::Aborted`] or
/// [`crate::CommError::RankLeft`] may be failing only because another rank did: a rank that
/// returns an error drops its sub-group handles first, so its sub-group's members can learn of
/// its departure, and fail, before its own error is recorded. Such a relayed failure is
/// reported only when no rank failed on its own.
struct FirstFailures<E> {
    own: Option<RunError<E>>,
    relayed: Option<RunError<E>>,
}

impl<E> Default for FirstFailures<E> {
    fn default() -> Self {
        Self {
            own: None,
            relayed: None,
        }
    }
}

impl<E> FirstFailures<E> {
    /// Keeps `failure` if it is the first of its kind.
    fn record(&mut self, failure: RunError<E>, relayed: bool) {
        let slot = if relayed {
            &mut self.relayed
        } else {
            &mut self.own
        };
        slot.get_or_insert(failure);
    }

    /// The failure to report: the first own failure, else the first relayed one.
    fn into_reported(self) -> Option<RunError<E>> {
        self.own.or(self.relayed)
    }
}

fn run_spanning<R, E, F>(
    fabric: &dyn Fabric,
    device: &Device,
    work: F,
) -> Result<Vec<R>, RunError<E>>
where
    F: Fn(&Comm<'_>) -> Result<R, E>,
    E: fmt::Display,
{
    let rank = fabric.rank();
    let transport = fabric.open().map_err(|err| RunError::Remote {
        rank,
        message: format!("could not open the run's transport: {err}"),
    })?;
    let comm = Comm::new(transport.as_ref(), device);
    let outcome = catch_unwind(AssertUnwindSafe(|| work(&comm)));
    // Whoever failed first (lowest rank of the round) is the one every process reports.
    let remote = |transport: &dyn Transport| {
        transport
            .failure()
            .filter(|(origin, _)| *origin != rank)
            .map(|(origin, message)| RunError::Remote {
                rank: origin,
                message,
            })
    };
    match outcome {
        Ok(Ok(value)) => {
            transport.leave();
            // Any failure the leave round learned of, this rank's own included (a transport
            // that broke in it), makes the run fail.
            match transport.failure() {
                Some((origin, message)) => Err(RunError::Remote {
                    rank: origin,
                    message,
                }),
                None => Ok(vec![value]),
            }
        }
        Ok(Err(error)) => {
            transport.abort_with(&error.to_string());
            Err(remote(transport.as_ref()).unwrap_or(RunError::Failed { rank, error }))
        }
        Err(payload) => {
            let message = panic_message(payload.as_ref()).to_string();
            transport.abort_with(&format!("panicked: {message}"));
            Err(remote(transport.as_ref()).unwrap_or(RunError::Panicked { rank, message }))
        }
    }
}

/// Every process's device count, through one session of `fabric`.
fn exchange_counts(fabric: &dyn Fabric, mine: usize) -> Result<Vec<usize>, GroupError> {
    let failed = |err: crate::CommError| GroupError::Layout(err.to_string());
    let transport = fabric.open().map_err(failed)?;
    let signature = Signature {
        op: "spanning_devices",
        root: None,
        element: "u64",
        len: Some(1),
    };
    let block = Block::from((mine as u64).to_le_bytes().to_vec());
    let incoming = transport.exchange(&signature, vec![block; fabric.size()]);
    if let (Err(_), Some((rank, message))) = (&incoming, transport.failure()) {
        return Err(GroupError::Remote { rank, message });
    }
    transport.leave();
    incoming
        .map_err(failed)?
        .iter()
        .map(|block| {
            let bytes: [u8; 8] = block[..].try_into().map_err(|_| {
                GroupError::Layout(format!("a device count of {} bytes", block.len()))
            })?;
            usize::try_from(u64::from_le_bytes(bytes))
                .map_err(|_| GroupError::Layout("a device count past usize".into()))
        })
        .collect()
}

/// [`Group::run`] with several ranks in this process of a spanning group: a thread per local
/// rank over a [`NodeMailbox`], which carries the exchanges between processes.
fn run_hybrid<R, E, F>(
    fabric: &dyn Fabric,
    layout: &Layout,
    devices: &[Device],
    work: F,
) -> Result<Vec<R>, RunError<E>>
where
    F: Fn(&Comm<'_>) -> Result<R, E> + Sync,
    R: Send,
    E: Send + fmt::Display,
{
    let local = layout.local();
    let outer = fabric.open().map_err(|err| RunError::Remote {
        rank: local.start,
        message: format!("could not open the run's transport: {err}"),
    })?;
    let mailbox = NodeMailbox::new(outer.as_ref(), layout);
    let failures: Mutex<Vec<RunError<E>>> = Mutex::new(Vec::new());
    let fail = |failure: RunError<E>| {
        failures
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .push(failure);
    };
    let body = |index: usize, device: &Device| {
        let rank = local.start + index;
        let endpoint = mailbox.endpoint(index);
        let comm = Comm::new(&endpoint, device);
        match catch_unwind(AssertUnwindSafe(|| work(&comm))) {
            Ok(Ok(value)) => {
                endpoint.leave();
                Some(value)
            }
            Ok(Err(error)) => {
                let text = error.to_string();
                fail(RunError::Failed { rank, error });
                endpoint.abort_with(&text);
                None
            }
            Err(payload) => {
                let message = panic_message(payload.as_ref()).to_string();
                let text = format!("panicked: {message}");
                fail(RunError::Panicked { rank, message });
                endpoint.abort_with(&text);
                None
            }
        }
    };
    // One rank here runs on the calling thread, so that a process of one rank calls the
    // fabric from the thread it was called on (what `MPI_THREAD_FUNNELED` allows).
    let results: Vec<Option<R>> = match devices {
        [device] => vec![body(0, device)],
        _ => std::thread::scope(|scope| {
            let mut handles = Vec::with_capacity(devices.len());
            for (index, device) in devices.iter().enumerate() {
                let rank = local.start + index;
                let body = &body;
                let spawned = std::thread::Builder::new()
                    .name(format!("tutti-rank-{rank}"))
                    .spawn_scoped(scope, move || body(index, device));
                match spawned {
                    Ok(handle) => handles.push(handle),
                    Err(err) => {
                        let message = err.to_string();
                        mailbox
                            .endpoint(index)
                            .abort_with(&format!("could not start its thread: {message}"));
                        fail(RunError::Spawn { rank, message });
                        break;
                    }
                }
            }
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap_or(None))
                .collect()
        }),
    };
    let mut failures = failures
        .into_inner()
        .unwrap_or_else(|poison| poison.into_inner());
    // Every process reports the failure the transport agreed on: another process's as
    // `Remote`, one of this process's as its own error.
    match mailbox.failure() {
        Some((origin, message)) if !local.contains(&origin) => Err(RunError::Remote {
            rank: origin,
            message,
        }),
        Some((origin, message)) => match failures.iter().position(|f| f.rank() == origin) {
            Some(i) => Err(failures.swap_remove(i)),
            None => Err(RunError::Remote {
                rank: origin,
                message,
            }),
        },
        None if !failures.is_empty() => Err(failures.swap_remove(0)),
        None => results
            .into_iter()
            .collect::<Option<Vec<R>>>()
            .ok_or_else(|| RunError::Remote {
                rank: local.start,
                message: "a rank of this process returned no result".into(),
            }),
    }
}
