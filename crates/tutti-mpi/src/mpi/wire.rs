//! [`MpiWire`]: the [`Wire`] over an MPI communicator, non-blocking calls polled with a
//! backoff, so that ranks oversubscribing few cores do not starve each other, and an
//! optional watchdog.

use std::ffi::c_int;
use std::time::{Duration, Instant};

use super::ffi::{self, check, Fint};
use crate::wire::{Wire, WireError};

/// Bytes of one point-to-point message at most: MPI counts are C `int`s, so larger blocks
/// go as several messages (one source and tag keep their order).
const CHUNK_BYTES: usize = 1 << 30;

/// The tag of tutti's blocks on its private communicator.
const BLOCK_TAG: c_int = 7;

/// Whether MPI calls may come from any thread, or only from the thread that initialised MPI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ThreadLevel {
    /// `MPI_THREAD_SINGLE`.
    Single,
    /// `MPI_THREAD_FUNNELED`: MPI calls from the main thread only.
    Funneled,
    /// `MPI_THREAD_SERIALIZED`: any thread, one at a time.
    Serialized,
    /// `MPI_THREAD_MULTIPLE`.
    Multiple,
}

impl ThreadLevel {
    pub(crate) fn from_code(code: c_int) -> Self {
        match code {
            0 => Self::Single,
            1 => Self::Funneled,
            2 => Self::Serialized,
            _ => Self::Multiple,
        }
    }
}

/// One process's end of tutti's private communicator (a duplicate, freed on drop).
pub struct MpiWire {
    comm: Fint,
    rank: usize,
    size: usize,
    level: ThreadLevel,
    watchdog: Option<Duration>,
}

impl MpiWire {
    /// A wire over `comm`, which the wire owns from now on (it frees it on drop).
    pub(crate) fn new(
        comm: Fint,
        rank: usize,
        size: usize,
        level: ThreadLevel,
        watchdog: Option<Duration>,
    ) -> Self {
        Self {
            comm,
            rank,
            size,
            level,
            watchdog,
        }
    }

    fn check_thread(&self) -> Result<(), WireError> {
        if self.level >= ThreadLevel::Serialized {
            return Ok(());
        }
        let mut main: c_int = 0;
        // SAFETY: a valid pointer to a local.
        let code = unsafe { ffi::tutti_mpi_is_thread_main(&mut main) };
        check(code, "MPI_Is_thread_main").map_err(WireError)?;
        if main == 0 {
            return Err(WireError(format!(
                "MPI was initialised with thread level {:?}, so tutti may call MPI only from \
                 the main thread; call tutti from it, or initialise MPI with \
                 MPI_THREAD_SERIALIZED",
                self.level
            )));
        }
        Ok(())
    }

    /// Waits for every request, polling with a backoff; the watchdog aborts the job.
    fn wait_all(&self, requests: &mut [Fint], what: &dyn Fn() -> String) -> Result<(), WireError> {
        // SAFETY: a constant getter of the shim.
        let null = unsafe { ffi::tutti_mpi_request_null() };
        let started = Instant::now();
        let mut idle_polls: u32 = 0;
        loop {
            let mut pending = false;
            for request in requests.iter_mut().filter(|r| **r != null) {
                let mut done: c_int = 0;
                // SAFETY: `request` is a live request handle of this wire (or null, filtered
                // out); both pointers are valid locals.
                let code = unsafe { ffi::tutti_mpi_test(request, &mut done) };
                check(code, "MPI_Test").map_err(|e| WireError(format!("{}: {e}", what())))?;
                pending |= done == 0;
            }
            if !pending {
                return Ok(());
            }
            if let Some(limit) = self.watchdog {
                if started.elapsed() > limit {
                    self.watchdog_abort(&format!(
                        "rank {} waited {:.0} s in {} (TUTTI_MPI_TIMEOUT)",
                        self.rank,
                        started.elapsed().as_secs_f64(),
                        what()
                    ));
                }
            }
            idle_polls = idle_polls.saturating_add(1);
            if idle_polls < 64 {
                std::thread::yield_now();
            } else {
                let micros = 10u64 << (idle_polls - 64).min(7);
                std::thread::sleep(Duration::from_micros(micros.min(1000)));
            }
        }
    }

    /// The watchdog's last resort: every process of the job ends with status 124.
    fn watchdog_abort(&self, message: &str) -> ! {
        log::error!("tutti-mpi watchdog: {message}; aborting the MPI job");
        // SAFETY: aborting on the wire's own communicator; MPI_Abort does not return on
        // success, and the process exits below if it does.
        unsafe {
            ffi::tutti_mpi_abort(self.comm, 124);
        }
        std::process::exit(124);
    }

    fn count(len: usize) -> c_int {
        // CHUNK_BYTES fits a C int, and every count passed is at most CHUNK_BYTES.
        c_int::try_from(len.min(CHUNK_BYTES)).unwrap_or(c_int::MAX)
    }

    fn peer(rank: usize) -> c_int {
        c_int::try_from(rank).unwrap_or(c_int::MAX)
    }
}

impl Drop for MpiWire {
    fn drop(&mut self) {
        let mut finalized: c_int = 1;
        // SAFETY: valid pointer to a local; the free happens only while MPI is alive, on the
        // duplicate this wire owns.
        unsafe {
            ffi::tutti_mpi_finalized(&mut finalized);
            if finalized == 0 {
                ffi::tutti_mpi_comm_free(self.comm);
            }
        }
    }
}

impl Wire for MpiWire {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn all_to_all(&mut self, send: &[u8], piece: usize) -> Result<Vec<u8>, WireError> {
        self.check_thread()?;
        let piece_count = c_int::try_from(piece)
            .map_err(|_| WireError(format!("a header piece of {piece} bytes")))?;
        let mut receive = vec![0u8; send.len()];
        // SAFETY: a constant getter of the shim.
        let mut request = unsafe { ffi::tutti_mpi_request_null() };
        // SAFETY: `send` and `receive` hold size * piece bytes each and outlive the request,
        // which `wait_all` completes before they are touched or dropped.
        let code = unsafe {
            ffi::tutti_mpi_ialltoall_bytes(
                send.as_ptr().cast(),
                receive.as_mut_ptr().cast(),
                piece_count,
                self.comm,
                &mut request,
            )
        };
        check(code, "MPI_Ialltoall").map_err(WireError)?;
        self.wait_all(std::slice::from_mut(&mut request), &|| {
            "the round header all-to-all".to_string()
        })?;
        Ok(receive)
    }

    fn all_to_all_v(
        &mut self,
        send: &[&[u8]],
        receive_lens: &[usize],
    ) -> Result<Vec<Vec<u8>>, WireError> {
        self.check_thread()?;
        let mut incoming: Vec<Vec<u8>> = receive_lens.iter().map(|&n| vec![0u8; n]).collect();
        let mut requests: Vec<Fint> = Vec::new();
        let post = |requests: &mut Vec<Fint>, result: Result<Fint, String>| match result {
            Ok(request) => {
                requests.push(request);
                Ok(())
            }
            Err(error) => Err(WireError(error)),
        };
        // Receives first, then sends; a block to itself is a copy.
        let mut outcome = Ok(());
        for (source, block) in incoming.iter_mut().enumerate() {
            if source == self.rank || outcome.is_err() {
                continue;
            }
            for chunk in block.chunks_mut(CHUNK_BYTES) {
                // SAFETY: a constant getter of the shim.
                let mut request = unsafe { ffi::tutti_mpi_request_null() };
                // SAFETY: `chunk` is valid for `count` bytes and outlives the request:
                // `incoming` is only read after `wait_all` below has completed every one.
                let code = unsafe {
                    ffi::tutti_mpi_irecv_bytes(
                        chunk.as_mut_ptr().cast(),
                        Self::count(chunk.len()),
                        Self::peer(source),
                        BLOCK_TAG,
                        self.comm,
                        &mut request,
                    )
                };
                outcome = post(&mut requests, check(code, "MPI_Irecv").map(|()| request));
                if outcome.is_err() {
                    break;
                }
            }
        }
        for (dest, block) in send.iter().enumerate() {
            if dest == self.rank || outcome.is_err() {
                continue;
            }
            for chunk in block.chunks(CHUNK_BYTES) {
                // SAFETY: a constant getter of the shim.
                let mut request = unsafe { ffi::tutti_mpi_request_null() };
                // SAFETY: `chunk` borrows the caller's block, alive until this function
                // returns, which is after `wait_all` has completed the send.
                let code = unsafe {
                    ffi::tutti_mpi_isend_bytes(
                        chunk.as_ptr().cast(),
                        Self::count(chunk.len()),
                        Self::peer(dest),
                        BLOCK_TAG,
                        self.comm,
                        &mut request,
                    )
                };
                outcome = post(&mut requests, check(code, "MPI_Isend").map(|()| request));
                if outcome.is_err() {
                    break;
                }
            }
        }
        // Requests already posted are completed even after a failed post, so that no buffer
        // is freed under a pending request.
        let waited = self.wait_all(&mut requests, &|| "the block exchange".to_string());
        outcome?;
        waited?;
        if let (Some(own), Some(block)) = (incoming.get_mut(self.rank), send.get(self.rank)) {
            if own.len() != block.len() {
                return Err(WireError(format!(
                    "rank {} announced {} bytes to itself and sent {}",
                    self.rank,
                    own.len(),
                    block.len()
                )));
            }
            own.copy_from_slice(block);
        }
        Ok(incoming)
    }
}
