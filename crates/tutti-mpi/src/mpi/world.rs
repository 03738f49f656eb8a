//! [`World`]: this process's place among the MPI processes, and the fabric of its groups.

use std::ffi::c_int;
use std::sync::Arc;
use std::time::Duration;

use super::ffi::{self, check, Fint};
use super::wire::{MpiWire, ThreadLevel};
use crate::fabric::SpanningFabric;

/// Why MPI could not be set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpiError(pub String);

impl std::fmt::Display for MpiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MpiError {}

fn mpi(code: c_int, what: &str) -> Result<(), MpiError> {
    check(code, what).map_err(MpiError)
}

/// The processes of a computation over MPI, seen from this one.
///
/// tutti talks on a private duplicate of the communicator it was given (or of
/// `MPI_COMM_WORLD`), so its messages never match the host program's, and errors on it
/// are returned, not fatal. Groups over it come from [`World::fabric`].
pub struct World {
    fabric: Arc<SpanningFabric<MpiWire>>,
    rank: usize,
    size: usize,
    local_rank: usize,
    local_size: usize,
    level: ThreadLevel,
    library_version: String,
    /// Last: dropped after the fabric. The wire holds it too, so MPI is finalised only when
    /// both the world and every group over its fabric are gone.
    _finalizer: Option<Arc<Finalizer>>,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("local_rank", &self.local_rank)
            .field("local_size", &self.local_size)
            .field("level", &self.level)
            .finish()
    }
}

fn initialized() -> Result<bool, MpiError> {
    let mut flag: c_int = 0;
    // SAFETY: a valid pointer to a local; MPI_Initialized may be called at any time.
    let code = unsafe { ffi::tutti_mpi_initialized(&mut flag) };
    mpi(code, "MPI_Initialized")?;
    Ok(flag != 0)
}

fn finalized() -> Result<bool, MpiError> {
    let mut flag: c_int = 0;
    // SAFETY: a valid pointer to a local; MPI_Finalized may be called at any time.
    let code = unsafe { ffi::tutti_mpi_finalized(&mut flag) };
    mpi(code, "MPI_Finalized")?;
    Ok(flag != 0)
}

/// The watchdog from `TUTTI_MPI_TIMEOUT` (seconds; unset or 0: none).
fn watchdog_from_env() -> Result<Option<Duration>, MpiError> {
    match std::env::var("TUTTI_MPI_TIMEOUT") {
        Err(_) => Ok(None),
        Ok(text) => match text.trim().parse::<f64>() {
            Ok(0.0) => Ok(None),
            Ok(seconds) if seconds.is_finite() && seconds > 0.0 => {
                Ok(Some(Duration::from_secs_f64(seconds)))
            }
            _ => Err(MpiError(format!(
                "TUTTI_MPI_TIMEOUT={text:?} is not a number of seconds"
            ))),
        },
    }
}

impl World {
    /// For a program: initialises MPI (asking for `MPI_THREAD_SERIALIZED`) unless it already
    /// is, and takes `MPI_COMM_WORLD`. A world that initialised MPI finalises it when
    /// dropped, so make one per program, at its start.
    pub fn init() -> Result<Self, MpiError> {
        check_fint()?;
        let mut finalizer = None;
        if !initialized()? {
            if finalized()? {
                return Err(MpiError(
                    "MPI was already finalised in this process; it cannot start again".into(),
                ));
            }
            let mut provided: c_int = 0;
            // SAFETY: MPI is not initialised (checked above); `provided` is a valid local.
            let code = unsafe { ffi::tutti_mpi_init_thread(2, &mut provided) };
            mpi(code, "MPI_Init_thread")?;
            finalizer = Some(Arc::new(Finalizer));
        }
        // SAFETY: a getter of the shim; MPI is initialised.
        let world = unsafe { ffi::tutti_mpi_comm_world() };
        // On an error the finalizer, dropped here, finalises the MPI this call started.
        Self::adopt(world, finalizer)
    }

    /// For a library called by an MPI program: takes the host's communicator, given as a
    /// Fortran integer handle (`MPI_Comm_c2f` in C, `comm%MPI_VAL` in Fortran, mpi4py's
    /// `comm.py2f()`). Collective over that communicator. MPI must be initialised and stays
    /// the host's to finalise.
    pub fn from_fortran(comm: i32) -> Result<Self, MpiError> {
        check_fint()?;
        if !initialized()? || finalized()? {
            return Err(MpiError(
                "MPI is not initialised: the host program must call MPI_Init (or \
                 MPI_Init_thread) before passing its communicator to tutti"
                    .into(),
            ));
        }
        Self::adopt(comm, None)
    }

    fn adopt(comm: Fint, finalizer: Option<Arc<Finalizer>>) -> Result<Self, MpiError> {
        let mut level: c_int = 0;
        // SAFETY: valid pointer to a local; MPI is initialised.
        let code = unsafe { ffi::tutti_mpi_query_thread(&mut level) };
        mpi(code, "MPI_Query_thread")?;
        let level = ThreadLevel::from_code(level);
        let watchdog = watchdog_from_env()?;
        let mut dup: Fint = 0;
        // SAFETY: `comm` is the caller's communicator handle; `dup` is a valid local. The
        // duplicate is owned by the wire below, which frees it, or freed here on an error.
        let code = unsafe { ffi::tutti_mpi_comm_dup(comm, &mut dup) };
        mpi(code, "MPI_Comm_dup of the given communicator")?;
        let placed = (|| {
            let (mut rank, mut size): (c_int, c_int) = (0, 0);
            // SAFETY: `dup` is a live communicator; valid pointers to locals.
            unsafe {
                mpi(ffi::tutti_mpi_comm_rank(dup, &mut rank), "MPI_Comm_rank")?;
                mpi(ffi::tutti_mpi_comm_size(dup, &mut size), "MPI_Comm_size")?;
            }
            let (local_rank, local_size) = node_local(dup, rank)?;
            let rank = usize::try_from(rank).map_err(|_| MpiError(format!("MPI rank {rank}")))?;
            let size = usize::try_from(size).map_err(|_| MpiError(format!("MPI size {size}")))?;
            Ok((rank, size, local_rank, local_size))
        })();
        let (rank, size, local_rank, local_size) = match placed {
            Ok(placed) => placed,
            Err(error) => {
                // SAFETY: the duplicate made above, used by nothing else.
                unsafe {
                    ffi::tutti_mpi_comm_free(dup);
                }
                return Err(error);
            }
        };
        let mut wire = MpiWire::new(dup, rank, size, level, watchdog, finalizer.clone());
        let library_version = library_version();
        // Every process alike refuses a world of mixed builds (the wire, dropped, frees the
        // duplicate).
        crate::handshake::handshake(&mut wire, &library_version).map_err(MpiError)?;
        Ok(Self {
            fabric: Arc::new(SpanningFabric::new(wire)),
            rank,
            size,
            local_rank,
            local_size,
            level,
            library_version,
            _finalizer: finalizer,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of processes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// This process's rank among the processes on its node.
    pub fn local_rank(&self) -> usize {
        self.local_rank
    }

    /// The number of processes on this node.
    pub fn local_size(&self) -> usize {
        self.local_size
    }

    /// The thread level MPI provides.
    pub fn thread_level(&self) -> ThreadLevel {
        self.level
    }

    /// `MPI_Get_library_version`'s text (its first line).
    pub fn library_version(&self) -> &str {
        &self.library_version
    }

    /// The fabric for [`tutti_group::Group::spanning`]: one rank per process.
    pub fn fabric(&self) -> Arc<SpanningFabric<MpiWire>> {
        Arc::clone(&self.fabric)
    }
}

/// Finalises MPI when dropped: shared by a [`World`] that initialised MPI (its last field,
/// so that its fabric goes first) and that world's wire (which frees its communicator
/// before its fields drop), so MPI ends after the last user of its communicator. Drop the
/// world and the groups over it on the thread that initialised MPI: `MPI_Finalize` must
/// run there.
pub(crate) struct Finalizer;

impl Drop for Finalizer {
    fn drop(&mut self) {
        // SAFETY: the world that holds this initialised MPI, and its communicator is gone; a
        // fabric still held elsewhere frees nothing afterwards (its wire checks
        // MPI_Finalized).
        unsafe {
            ffi::tutti_mpi_finalize();
        }
    }
}

/// This process's rank and the process count on its node (`MPI_COMM_TYPE_SHARED`).
fn node_local(comm: Fint, rank: c_int) -> Result<(usize, usize), MpiError> {
    let mut node: Fint = 0;
    let (mut local_rank, mut local_size): (c_int, c_int) = (0, 1);
    // SAFETY: `comm` is a live communicator; `node` is freed below; pointers are locals.
    unsafe {
        mpi(
            ffi::tutti_mpi_comm_split_shared(comm, rank, &mut node),
            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)",
        )?;
        let ranked = ffi::tutti_mpi_comm_rank(node, &mut local_rank);
        let sized = ffi::tutti_mpi_comm_size(node, &mut local_size);
        ffi::tutti_mpi_comm_free(node);
        mpi(ranked, "MPI_Comm_rank of the node communicator")?;
        mpi(sized, "MPI_Comm_size of the node communicator")?;
    }
    Ok((
        usize::try_from(local_rank).unwrap_or(0),
        usize::try_from(local_size).unwrap_or(1).max(1),
    ))
}

fn library_version() -> String {
    let mut text = vec![0u8; 8192];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds 8192 bytes; the shim writes at most 8191 and a NUL.
    unsafe {
        ffi::tutti_mpi_library_version(text.as_mut_ptr().cast(), 8192, &mut len);
    }
    text.truncate(usize::try_from(len).unwrap_or(0));
    let text = String::from_utf8_lossy(&text);
    text.lines().next().unwrap_or("").trim().to_string()
}

fn check_fint() -> Result<(), MpiError> {
    // SAFETY: a constant getter of the shim.
    let bytes = unsafe { ffi::tutti_mpi_fint_bytes() };
    if usize::try_from(bytes).ok() == Some(std::mem::size_of::<Fint>()) {
        Ok(())
    } else {
        Err(MpiError(format!(
            "this MPI's MPI_Fint has {bytes} bytes; tutti-mpi supports MPI_Fint as a C int"
        )))
    }
}
