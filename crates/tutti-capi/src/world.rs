//! `TuttiWorld`: the MPI processes of a host program, adopted from its communicator, so that
//! a workload call can span them (`options->resources.world`).
//!
//! The header never includes `mpi.h`: a communicator crosses as its Fortran integer handle
//! (`MPI_Comm_c2f(comm)` in C, `comm%MPI_VAL` in Fortran, `comm.py2f()` in mpi4py), which is
//! a plain `int` in every MPI. `include/tutti_mpi.h` has an inline helper taking an
//! `MPI_Comm`. A library built without the `mpi` feature returns `TUTTI_ERROR_UNSUPPORTED`.

use std::ffi::c_int;

use tutti_backend::{GpuUse, Resources};
use tutti_group::Group;

use crate::boundary::{ffi_call, Out};
use crate::memory::Registry;
use crate::status::{Error, TuttiStatus};

/// Marks a live world: "tuttiwld".
const LIVE_WORLD: u64 = u64::from_be_bytes(*b"tuttiwld");

/// The address of every live world, looked up before a pointer is read.
static LIVE_WORLDS: Registry = Registry::new();

/// The processes of an MPI communicator, as tutti uses them; opaque to C.
///
/// Made by `tutti_world_from_fcomm`, released by `tutti_world_free` (both collective over the
/// communicator). tutti talks on a private duplicate of the communicator, so its messages
/// never match the host program's, and MPI stays the host's to finalise. Name it in a
/// workload call's `options->resources.world` to split the call among the processes: every
/// process makes the same call with the same arguments, each runs a rank per device its
/// `resources` select (`devices` = k gives every process k ranks; several need MPI
/// initialised with `MPI_THREAD_SERIALIZED`), and every process gets the result. When
/// one process fails, every other returns `TUTTI_ERROR_REMOTE` with its rank and message;
/// the communicator stays usable. A sparse handle analysed over a world keeps tutti's
/// duplicate alive itself and may outlive the world (see `tutti_sparse_analyse`).
pub struct TuttiWorld {
    marker: u64,
    #[cfg(feature = "mpi")]
    processes: Processes,
}

/// The processes a world spans.
#[cfg(feature = "mpi")]
enum Processes {
    /// Those of an MPI communicator (tutti's duplicate of it).
    Mpi(tutti_mpi::mpi::World),
    /// Threads of this process standing in for processes over a loopback wire
    /// ([`loopback_worlds`]): how calls over a world are tested without MPI.
    Loopback {
        fabric: std::sync::Arc<tutti_mpi::SpanningFabric<tutti_mpi::LoopbackWire>>,
        rank: usize,
        size: usize,
    },
}

#[cfg(feature = "mpi")]
impl Processes {
    /// The fabric of the groups over these processes: one MPI duplicate (or loopback) for
    /// the world and every group made from it, which share its runs.
    fn fabric(&self) -> std::sync::Arc<dyn tutti_group::Fabric> {
        match self {
            Self::Mpi(world) => world.fabric(),
            Self::Loopback { fabric, .. } => fabric.clone(),
        }
    }

    /// This process's rank, the process count, its rank on its node and the count there
    /// (loopback "processes" all share this node).
    fn place(&self) -> [usize; 4] {
        match self {
            Self::Mpi(w) => [w.rank(), w.size(), w.local_rank(), w.local_size()],
            Self::Loopback { rank, size, .. } => [*rank, *size, *rank, *size],
        }
    }

    /// The thread level of the wire: a loopback may be called from any thread.
    fn thread_level(&self) -> tutti_mpi::mpi::ThreadLevel {
        match self {
            Self::Mpi(world) => world.thread_level(),
            Self::Loopback { .. } => tutti_mpi::mpi::ThreadLevel::Multiple,
        }
    }
}

#[cfg(not(feature = "mpi"))]
fn unsupported() -> Error {
    Error::new(
        TuttiStatus::TUTTI_ERROR_UNSUPPORTED,
        "this libtutti was built without MPI: build it with `cargo build --release -p \
         tutti-capi --features mpi` (with the cluster's mpicc as MPICC)",
    )
}

/// Checks a world handle: not NULL, aligned, live.
///
/// # Safety
/// `ptr` is NULL or a handle from tutti, not released while the reference is used.
pub(crate) unsafe fn world_ref<'a>(
    ptr: *const TuttiWorld,
    name: &str,
) -> Result<&'a TuttiWorld, Error> {
    if ptr.is_null() {
        return Err(Error::null_pointer(name));
    }
    let refused = || {
        Error::invalid_argument(format!(
            "{name} ({ptr:p}) is not a live world handle (released already, or not made by \
             tutti_world_from_fcomm)"
        ))
    };
    if !ptr.is_aligned() || !LIVE_WORLDS.contains(ptr.addr()) {
        return Err(refused());
    }
    // SAFETY: not NULL, aligned, and live in the registry (the caller promises that no other
    // thread releases it meanwhile).
    let world = unsafe { &*ptr };
    if world.marker != LIVE_WORLD {
        return Err(refused());
    }
    Ok(world)
}

impl TuttiWorld {
    /// `error`, after telling the other processes: a call that fails in this process before
    /// its workload runs (a bad argument, no device) joins the run's first round as failed,
    /// so the others, waiting in that round, return `TUTTI_ERROR_REMOTE` with this message.
    pub(crate) fn fail_others(&self, error: Error) -> Error {
        #[cfg(feature = "mpi")]
        {
            let fabric = self.processes.fabric();
            let opened = fabric.open();
            if let Ok(transport) = &opened {
                transport.abort_with(error.message());
            }
        }
        error
    }

    /// The group of a call over this world: a rank per device `resources` selects in this
    /// process, with its node share of the cores, host memory and GPUs
    /// (`tutti_mpi::node_share`). A failure (no such device, several devices without
    /// `MPI_THREAD_SERIALIZED`) releases the other processes.
    pub(crate) fn group(&self, resources: &Resources, gpu_use: GpuUse) -> Result<Group, Error> {
        self.make_group(resources, gpu_use).map_err(|error| {
            // A failure another process told while the group formed is known to all
            // already; telling it again would start a round nobody else joins.
            if error.status() == TuttiStatus::TUTTI_ERROR_REMOTE {
                error
            } else {
                self.fail_others(error)
            }
        })
    }

    fn make_group(&self, resources: &Resources, gpu_use: GpuUse) -> Result<Group, Error> {
        #[cfg(feature = "mpi")]
        {
            // The processes of one node share its cores, memory and GPUs.
            let [_, _, local_rank, local_size] = self.processes.place();
            let resources =
                tutti_mpi::node_share(resources, local_rank, local_size, tutti_mpi::Node::here());
            let devices = resources
                .select_for(gpu_use)
                .map_err(crate::resources::device_error)?;
            let level = self.processes.thread_level();
            if devices.len() > 1 && level < tutti_mpi::mpi::ThreadLevel::Serialized {
                return Err(Error::invalid_argument(format!(
                    "options->resources selects {} devices in this process and names a world, \
                     which needs MPI initialised with MPI_THREAD_SERIALIZED or better (this \
                     one is {level:?}): initialise MPI so, or set devices to 1",
                    devices.len()
                )));
            }
            Group::spanning_devices(self.processes.fabric(), devices).map_err(|e| match e {
                tutti_group::GroupError::Remote { .. } => {
                    Error::new(TuttiStatus::TUTTI_ERROR_REMOTE, e.to_string())
                }
                other => Error::new(TuttiStatus::TUTTI_ERROR_DEVICE, other.to_string()),
            })
        }
        #[cfg(not(feature = "mpi"))]
        {
            let _ = (resources, gpu_use);
            Err(unsupported())
        }
    }
}

/// A call's checked arguments, passed through; when the call names a world, a failure first
/// releases the other processes ([`TuttiWorld::fail_others`]).
pub(crate) fn checked<T>(
    world: Option<&TuttiWorld>,
    arguments: Result<T, Error>,
) -> Result<T, Error> {
    match (world, arguments) {
        (Some(world), Err(error)) => Err(world.fail_others(error)),
        (_, arguments) => arguments,
    }
}

#[cfg(feature = "mpi")]
impl TuttiWorld {
    /// A live world over `processes`, owned by the caller (released by `tutti_world_free`).
    fn register(processes: Processes) -> *mut TuttiWorld {
        let handle = Box::into_raw(Box::new(TuttiWorld {
            marker: LIVE_WORLD,
            processes,
        }));
        LIVE_WORLDS.insert(handle.addr());
        handle
    }
}

/// `size` worlds over a loopback among threads of this process, world r holding process rank
/// r: an MPI job's processes stood in for by threads, so that calls over a world are tested
/// without MPI. Each thread passes its own world's [`LoopbackWorld::as_ptr`] as
/// `options->resources.world` and makes the calls each process would. A receive that waits
/// longer than `timeout` fails (the loopback's watchdog), so a hang becomes an error. Not
/// part of the C ABI.
#[cfg(feature = "mpi")]
#[doc(hidden)]
pub fn loopback_worlds(size: usize, timeout: std::time::Duration) -> Vec<LoopbackWorld> {
    tutti_mpi::loopback(size, timeout)
        .into_iter()
        .enumerate()
        .map(|(rank, wire)| {
            let fabric = std::sync::Arc::new(tutti_mpi::SpanningFabric::new(wire));
            LoopbackWorld(TuttiWorld::register(Processes::Loopback {
                fabric,
                rank,
                size,
            }))
        })
        .collect()
}

/// One world of [`loopback_worlds`], released (`tutti_world_free`) when dropped.
#[cfg(feature = "mpi")]
#[doc(hidden)]
pub struct LoopbackWorld(*mut TuttiWorld);

// SAFETY: the pointer is this value's own world (from `TuttiWorld::register`), whose parts
// are `Send` (checked below); moving it to another thread moves that ownership.
#[cfg(feature = "mpi")]
unsafe impl Send for LoopbackWorld {}

#[cfg(feature = "mpi")]
const _: fn() = || {
    fn send<T: Send>() {}
    send::<TuttiWorld>();
};

#[cfg(feature = "mpi")]
impl LoopbackWorld {
    /// The world, for `options->resources.world` and the `tutti_world_*` calls (live until
    /// this value is dropped; do not pass it to `tutti_world_free`).
    pub fn as_ptr(&self) -> *const TuttiWorld {
        self.0
    }
}

#[cfg(feature = "mpi")]
impl Drop for LoopbackWorld {
    fn drop(&mut self) {
        // SAFETY: a world from `register`; the registry refuses it unread if it was released
        // already.
        unsafe { tutti_world_free(self.0) };
    }
}

/// Adopts the MPI communicator whose Fortran handle is `fcomm` and writes a new world to
/// `*world_out`. Collective over the communicator: every process calls it. MPI must be
/// initialised (by the host program, which also finalises it). In C,
/// `tutti_world_from_fcomm(MPI_Comm_c2f(MPI_COMM_WORLD), &world)`, or the inline
/// `tutti_world_from_comm` of `tutti_mpi.h`; in Fortran pass `comm%MPI_VAL` (or an
/// `integer` communicator); from mpi4py, `comm.py2f()`.
///
/// Errors: `TUTTI_ERROR_NULL_POINTER` for `world_out`; `TUTTI_ERROR_UNSUPPORTED` in a
/// library built without MPI; `TUTTI_ERROR_DEVICE` when MPI is not initialised or refuses
/// the communicator (MPI's own message).
///
/// # Safety
/// `world_out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn tutti_world_from_fcomm(
    fcomm: i32,
    world_out: *mut *mut TuttiWorld,
) -> c_int {
    ffi_call("tutti_world_from_fcomm", || {
        // SAFETY: NULL or valid for one write (the caller's promise); checked by Out.
        let out = unsafe { Out::new(world_out, "world_out") }?;
        #[cfg(feature = "mpi")]
        {
            let world = tutti_mpi::mpi::World::from_fortran(fcomm)
                .map_err(|e| Error::new(TuttiStatus::TUTTI_ERROR_DEVICE, e.to_string()))?;
            out.write(TuttiWorld::register(Processes::Mpi(world)));
            Ok(())
        }
        #[cfg(not(feature = "mpi"))]
        {
            let _ = (fcomm, out);
            Err(unsupported())
        }
    })
}

/// This process's place in `world`: its rank and the process count, and its rank and the
/// count among the processes on its node. Any output pointer may be NULL (not written).
///
/// Errors: `TUTTI_ERROR_NULL_POINTER` for `world`, `TUTTI_ERROR_INVALID_ARGUMENT` for a
/// pointer that is not a live world.
///
/// # Safety
/// `world` is NULL or a world from tutti not yet released; each output is NULL or valid for
/// one write.
#[no_mangle]
pub unsafe extern "C" fn tutti_world_info(
    world: *const TuttiWorld,
    rank: *mut c_int,
    size: *mut c_int,
    local_rank: *mut c_int,
    local_size: *mut c_int,
) -> c_int {
    ffi_call("tutti_world_info", || {
        // SAFETY: checked against the registry before it is read.
        let world = unsafe { world_ref(world, "world") }?;
        let values = world_numbers(world)?;
        for (ptr, value, name) in [
            (rank, values[0], "rank"),
            (size, values[1], "size"),
            (local_rank, values[2], "local_rank"),
            (local_size, values[3], "local_size"),
        ] {
            if !ptr.is_null() {
                // SAFETY: not NULL, valid for one write (the caller's promise); Out checks
                // the alignment.
                unsafe { Out::new(ptr, name) }?.write(value);
            }
        }
        Ok(())
    })
}

fn world_numbers(world: &TuttiWorld) -> Result<[c_int; 4], Error> {
    #[cfg(feature = "mpi")]
    {
        world
            .processes
            .place()
            .map(|n| crate::boundary::to_c_int(n, "a process count"))
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map(|v| [v[0], v[1], v[2], v[3]])
    }
    #[cfg(not(feature = "mpi"))]
    {
        let _ = world;
        Err(unsupported())
    }
}

/// Fails this process's next call over `world` before it starts, with `message`: the other
/// processes, waiting in that call, return `TUTTI_ERROR_REMOTE` with this process's rank and
/// `message`, as they do for an argument tutti refuses on this process only. For a host
/// program whose own checks fail on some processes only: call this instead of the workload
/// on those processes, and the job goes on (nothing waits forever). Blocks until the other
/// processes have entered their call.
///
/// Errors: `TUTTI_ERROR_NULL_POINTER` for `world` or `message`;
/// `TUTTI_ERROR_INVALID_ARGUMENT` for a pointer that is not a live world or a message that
/// is not UTF-8.
///
/// # Safety
/// `world` is NULL or a world from tutti not yet released; `message` is NULL or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tutti_world_fail(
    world: *const TuttiWorld,
    message: *const std::ffi::c_char,
) -> c_int {
    ffi_call("tutti_world_fail", || {
        // SAFETY: checked against the registry before it is read.
        let world = unsafe { world_ref(world, "world") }?;
        // SAFETY: NULL or NUL-terminated (the caller's promise); checked by input_str.
        let message = unsafe { crate::boundary::input_str(message, "message") }?;
        world.fail_others(Error::invalid_argument(message.to_string()));
        Ok(())
    })
}

/// Releases `world` (frees tutti's duplicate communicator): collective over the
/// communicator, like `MPI_Comm_free`. Call it before the host's `MPI_Finalize`.
/// `tutti_world_free(NULL)` is a no-op returning `TUTTI_OK`.
///
/// Errors: `TUTTI_ERROR_INVALID_ARGUMENT` for a pointer that is not a live world.
///
/// # Safety
/// `world` is NULL or a world from tutti not yet released, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn tutti_world_free(world: *mut TuttiWorld) -> c_int {
    ffi_call("tutti_world_free", || {
        if world.is_null() {
            return Ok(());
        }
        // SAFETY: checked against the registry before it is read.
        unsafe { world_ref(world, "world") }?;
        if !LIVE_WORLDS.remove(world.addr()) {
            return Err(Error::invalid_argument(format!(
                "world ({world:p}) is not a live world handle (released already)"
            )));
        }
        // SAFETY: made by Box::into_raw in tutti_world_from_fcomm and live until the removal
        // above, so this is its one release.
        unsafe {
            (*world).marker = 0;
            drop(Box::from_raw(world));
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_handles_are_refused_and_null_is_a_no_op() {
        // SAFETY: NULL and a stack address that is not a world: both are refused unread.
        unsafe {
            assert_eq!(tutti_world_free(std::ptr::null_mut()), 0);
            let mut not_a_world = 0u64;
            let fake = (&mut not_a_world as *mut u64).cast::<TuttiWorld>();
            assert_eq!(
                tutti_world_free(fake),
                TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code()
            );
            assert_eq!(
                tutti_world_info(
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut()
                ),
                TuttiStatus::TUTTI_ERROR_NULL_POINTER.code()
            );
            let message = c"why".as_ptr();
            assert_eq!(
                tutti_world_fail(std::ptr::null(), message),
                TuttiStatus::TUTTI_ERROR_NULL_POINTER.code()
            );
            assert_eq!(
                tutti_world_fail(fake, message),
                TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code()
            );
        }
    }

    #[cfg(not(feature = "mpi"))]
    #[test]
    fn without_mpi_adoption_is_unsupported() {
        let mut world: *mut TuttiWorld = std::ptr::null_mut();
        // SAFETY: a valid out pointer.
        let status = unsafe { tutti_world_from_fcomm(0, &mut world) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_UNSUPPORTED.code());
        assert!(world.is_null());
        assert!(crate::boundary::last_error().contains("built without MPI"));
    }
}
