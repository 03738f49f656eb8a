//! [`MpiWire`]: the [`Wire`] over an MPI communicator, non-blocking calls polled with a
//! backoff, so that ranks oversubscribing few cores do not starve each other, and an
//! optional watchdog.

use std::ffi::c_int;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tutti_group::Block;

use super::ffi::{self, check, Fint};
use super::world::Finalizer;
use crate::pool::{BlockPool, Receive};
use crate::wire::{Wire, WireError};

/// Bytes of one point-to-point message at most: MPI counts are C `int`s, so larger blocks
/// go as several messages (one source and tag keep their order).
const CHUNK_BYTES: usize = 1 << 30;

/// How long a wait polls between yields before it starts to sleep (see `wait_all`).
const YIELD_POLLING: Duration = Duration::from_millis(20);

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
    /// Receive buffers of earlier exchanges of the run, to receive into again.
    pool: BlockPool,
    /// MPI's finaliser when tutti initialised MPI: dropped after the communicator is freed.
    _finalizer: Option<Arc<Finalizer>>,
}

impl MpiWire {
    /// A wire over `comm`, which the wire owns from now on (it frees it on drop).
    pub(crate) fn new(
        comm: Fint,
        rank: usize,
        size: usize,
        level: ThreadLevel,
        watchdog: Option<Duration>,
        finalizer: Option<Arc<Finalizer>>,
    ) -> Self {
        Self {
            comm,
            rank,
            size,
            level,
            watchdog,
            pool: BlockPool::default(),
            _finalizer: finalizer,
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
            self.back_off(started, &mut idle_polls, what);
        }
    }

    /// One pause of a wait that began at `started`, and the watchdog's check.
    fn back_off(&self, started: Instant, idle_polls: &mut u32, what: &dyn Fn() -> String) {
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
        // MPI moves a large message in fragments only while it is polled, so the first
        // YIELD_POLLING of a wait polls between yields (the other ranks of an
        // oversubscribed node still get the cores); a longer wait is another rank's
        // computation, and sleeps of 50 us growing to 1 ms keep it from burning a core.
        if started.elapsed() < YIELD_POLLING {
            std::thread::yield_now();
        } else {
            *idle_polls = idle_polls.saturating_add(1);
            let micros = 50u64 << (*idle_polls).min(5);
            std::thread::sleep(Duration::from_micros(micros.min(1000)));
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

impl MpiWire {
    /// A blocking `MPI_Alltoall` of `piece` bytes per pair on the wire's communicator,
    /// outside the round protocol: the raw baseline the benchmarks compare the transport
    /// with. Collective.
    pub fn raw_all_to_all(&mut self, send: &[u8], piece: usize) -> Result<Vec<u8>, WireError> {
        self.check_thread()?;
        let expected = piece.checked_mul(self.size);
        if expected != Some(send.len()) {
            return Err(WireError(format!(
                "{} bytes to send are not {} pieces of {piece}",
                send.len(),
                self.size
            )));
        }
        let count = c_int::try_from(piece)
            .map_err(|_| WireError(format!("a piece of {piece} bytes exceeds an MPI count")))?;
        let mut receive = vec![0u8; send.len()];
        // SAFETY: both buffers hold size * piece bytes; the call is blocking, so they are not
        // used after it returns.
        let code = unsafe {
            ffi::tutti_mpi_alltoall_bytes(
                send.as_ptr().cast(),
                receive.as_mut_ptr().cast(),
                count,
                self.comm,
            )
        };
        check(code, "MPI_Alltoall").map_err(WireError)?;
        Ok(receive)
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

    fn all_to_all(&mut self, send: Vec<u8>, piece: usize) -> Result<Vec<u8>, WireError> {
        self.check_thread()?;
        if piece.checked_mul(self.size) != Some(send.len()) {
            return Err(WireError(format!(
                "{} bytes to send are not {} pieces of {piece}",
                send.len(),
                self.size
            )));
        }
        let piece_count = c_int::try_from(piece)
            .map_err(|_| WireError(format!("a header piece of {piece} bytes")))?;
        let mut receive = vec![0u8; send.len()];
        // SAFETY: a constant getter of the shim.
        let mut request = unsafe { ffi::tutti_mpi_request_null() };
        // SAFETY: `send` and `receive` hold size * piece bytes each (checked above) and
        // outlive the request: `wait_all` completes it, or on an MPI error both are leaked.
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
        if let Err(error) = self.wait_all(std::slice::from_mut(&mut request), &|| {
            "the round header all-to-all".to_string()
        }) {
            // The request may still be pending: MPI may yet write or read these buffers,
            // so they live on (the fabric is broken from now on).
            std::mem::forget(send);
            std::mem::forget(receive);
            return Err(error);
        }
        Ok(receive)
    }

    fn all_to_all_v(
        &mut self,
        send: &[Block],
        receive_lens: &[usize],
    ) -> Result<Vec<Block>, WireError> {
        self.check_thread()?;
        if send.len() != self.size || receive_lens.len() != self.size {
            return Err(WireError(format!(
                "{} blocks to send and {} to receive in a group of {}",
                send.len(),
                receive_lens.len(),
                self.size
            )));
        }
        if send[self.rank].len() != receive_lens[self.rank] {
            return Err(WireError(format!(
                "rank {} announced {} bytes to itself and sent {}",
                self.rank,
                receive_lens[self.rank],
                send[self.rank].len()
            )));
        }
        // The blocks are received in place, into the allocations the collectives hand on:
        // no zeroing and no copy after; large ones into blocks of earlier exchanges that
        // nobody holds any more (`BlockPool`). Every byte is written before `finish`: each
        // chunk's receive is checked to have brought exactly its length.
        let mut incoming: Vec<Receive> = receive_lens
            .iter()
            .map(|&len| self.pool.take(len))
            .collect();
        let mut receives: Vec<(Fint, usize)> = Vec::new();
        let mut sends: Vec<Fint> = Vec::new();
        let mut outcome = Ok(());
        for (source, block) in incoming.iter_mut().enumerate() {
            let Some((start, len)) = block.as_mut_ptr() else {
                outcome = Err(WireError("a receive buffer is shared".into()));
                break;
            };
            if source == self.rank {
                let own = &send[self.rank];
                // SAFETY: `start` is valid for `len` = own.len() bytes of writes (checked
                // above), and a buffer only the pool held overlaps no input.
                unsafe {
                    std::ptr::copy_nonoverlapping(own.as_ptr(), start, own.len());
                }
                continue;
            }
            for offset in (0..len).step_by(CHUNK_BYTES) {
                let chunk = CHUNK_BYTES.min(len - offset);
                // SAFETY: a constant getter of the shim.
                let mut request = unsafe { ffi::tutti_mpi_request_null() };
                // SAFETY: `start + offset` is valid for writes of `chunk` bytes (inside the
                // buffer of `len`) and outlives the request: `incoming` is only read after
                // `wait_receives` below has completed every one (or leaked after an error).
                let code = unsafe {
                    ffi::tutti_mpi_irecv_bytes(
                        start.add(offset).cast(),
                        Self::count(chunk),
                        Self::peer(source),
                        BLOCK_TAG,
                        self.comm,
                        &mut request,
                    )
                };
                outcome = check(code, "MPI_Irecv").map_err(WireError);
                if outcome.is_err() {
                    break;
                }
                receives.push((request, chunk));
            }
            if outcome.is_err() {
                break;
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
                outcome = check(code, "MPI_Isend").map_err(WireError);
                if outcome.is_err() {
                    break;
                }
                sends.push(request);
            }
        }
        // Requests already posted are completed even after a failed post, so that no buffer
        // is freed under a pending request.
        let received = self.wait_receives(&mut receives);
        let sent = self.wait_all(&mut sends, &|| "the block exchange".to_string());
        if let Some(error) = received.err().or(sent.err()) {
            // After an MPI error some requests may still be pending: MPI may yet write or
            // read these blocks, so they live on (the fabric is broken from now on).
            std::mem::forget(incoming);
            send.iter()
                .for_each(|block| std::mem::forget(Block::clone(block)));
            return Err(error);
        }
        outcome?;
        let blocks: Vec<Block> = incoming
            .into_iter()
            // SAFETY: every byte of every block was written: its own block by the copy
            // above, the others by receives that each brought exactly their chunk's length
            // (checked by wait_receives).
            .map(|block| unsafe { block.finish() })
            .collect();
        self.pool.keep(&blocks);
        Ok(blocks)
    }

    fn release_buffers(&mut self) {
        self.pool.clear();
    }
}

impl MpiWire {
    /// Waits for the receives as `wait_all` does, and checks that each brought exactly
    /// the bytes its header announced.
    fn wait_receives(&self, receives: &mut [(Fint, usize)]) -> Result<(), WireError> {
        // SAFETY: a constant getter of the shim.
        let null = unsafe { ffi::tutti_mpi_request_null() };
        let started = Instant::now();
        let mut idle_polls: u32 = 0;
        let mut short = None;
        loop {
            let mut pending = false;
            for (request, expected) in receives.iter_mut().filter(|(r, _)| *r != null) {
                let (mut done, mut got): (c_int, c_int) = (0, 0);
                // SAFETY: `request` is a live receive of this wire; the pointers are locals.
                let code = unsafe { ffi::tutti_mpi_test_received(request, &mut done, &mut got) };
                check(code, "MPI_Test").map_err(WireError)?;
                if done == 0 {
                    pending = true;
                } else if usize::try_from(got).ok() != Some(*expected) {
                    short.get_or_insert((got, *expected));
                }
            }
            if !pending {
                break;
            }
            self.back_off(started, &mut idle_polls, &|| {
                "the block exchange".to_string()
            });
        }
        match short {
            None => Ok(()),
            Some((got, expected)) => Err(WireError(format!(
                "a peer sent {got} bytes where its header announced {expected} (a different \
                 tutti build on that rank?)"
            ))),
        }
    }
}
