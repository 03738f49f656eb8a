//! The in-process transport: one thread per rank, exchanging through shared memory.

use std::sync::{Condvar, Mutex, MutexGuard};

use crate::transport::{Block, Signature, Transport};
use crate::CommError;

/// The shared state of one group's in-process exchanges.
///
/// Each exchange is a round: every rank deposits its outgoing blocks; the last to arrive
/// checks the signatures and hands every rank its incoming blocks, then wakes the others.
/// A rank can deposit for round n+1 only after taking its blocks of round n, so one slot per
/// rank suffices.
pub(crate) struct LocalMailbox {
    size: usize,
    state: Mutex<RoundState>,
    round_done: Condvar,
}

struct RoundState {
    /// Completed rounds.
    round: u64,
    /// Signature and outgoing blocks of each rank in the current round.
    deposits: Vec<Option<(Signature, Vec<Block>)>>,
    /// Incoming blocks of each rank from the last completed round.
    delivered: Vec<Vec<Block>>,
    /// The last completed round's verdict (a mismatch is given to every rank).
    verdict: Result<(), CommError>,
    aborted: bool,
    left: Vec<bool>,
}

impl LocalMailbox {
    pub(crate) fn new(size: usize) -> Self {
        Self {
            size,
            state: Mutex::new(RoundState {
                round: 0,
                deposits: vec![None; size],
                delivered: vec![Vec::new(); size],
                verdict: Ok(()),
                aborted: false,
                left: vec![false; size],
            }),
            round_done: Condvar::new(),
        }
    }

    /// Rank `rank`'s view of the mailbox.
    pub(crate) fn endpoint(&self, rank: usize) -> LocalEndpoint<'_> {
        LocalEndpoint {
            mailbox: self,
            rank,
        }
    }

    fn lock(&self) -> MutexGuard<'_, RoundState> {
        // No code panics while holding this lock, but a poisoned lock must not turn one
        // rank's failure into a second panic elsewhere.
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    pub(crate) fn is_aborted(&self) -> bool {
        self.lock().aborted
    }

    pub(crate) fn abort(&self) {
        self.lock().aborted = true;
        self.round_done.notify_all();
    }

    fn leave(&self, rank: usize) {
        self.lock().left[rank] = true;
        self.round_done.notify_all();
    }

    /// The error for ranks waiting in a round that a departed rank will never join.
    fn departed_error(&self, state: &RoundState) -> Option<CommError> {
        let gone = (0..self.size).find(|&r| state.left[r] && state.deposits[r].is_none())?;
        let waiting: Vec<usize> = (0..self.size)
            .filter(|&r| state.deposits[r].is_some())
            .collect();
        let op = state
            .deposits
            .iter()
            .flatten()
            .next()
            .map_or_else(|| "a collective".to_string(), |(sig, _)| sig.to_string());
        Some(CommError::RankLeft {
            rank: gone,
            waiting,
            op,
        })
    }

    fn exchange(
        &self,
        rank: usize,
        signature: &Signature,
        outgoing: Vec<Block>,
    ) -> Result<Vec<Block>, CommError> {
        if outgoing.len() != self.size {
            return Err(CommError::InvalidArgument {
                op: signature.op,
                message: format!(
                    "{} outgoing blocks for a group of {}",
                    outgoing.len(),
                    self.size
                ),
            });
        }
        let mut state = self.lock();
        if state.aborted {
            return Err(CommError::Aborted);
        }
        if state.deposits[rank].is_some() {
            return Err(CommError::Mismatch(format!(
                "rank {rank} entered {signature} while already inside a collective \
                 (collectives of one rank must not run concurrently)"
            )));
        }
        let my_round = state.round;
        state.deposits[rank] = Some((signature.clone(), outgoing));
        if state.deposits.iter().all(Option::is_some) {
            self.complete_round(&mut state);
            self.round_done.notify_all();
        } else {
            // Someone who already left can never join this round.
            if let Some(err) = self.departed_error(&state) {
                state.deposits[rank] = None;
                return Err(err);
            }
            while state.round == my_round {
                if state.aborted {
                    state.deposits[rank] = None;
                    return Err(CommError::Aborted);
                }
                if let Some(err) = self.departed_error(&state) {
                    state.deposits[rank] = None;
                    return Err(err);
                }
                state = self
                    .round_done
                    .wait(state)
                    .unwrap_or_else(|poison| poison.into_inner());
            }
        }
        state.verdict.clone()?;
        Ok(std::mem::take(&mut state.delivered[rank]))
    }

    /// Moves every deposit to its destination and opens the next round.
    fn complete_round(&self, state: &mut RoundState) {
        let mut signatures = Vec::with_capacity(self.size);
        let mut delivered: Vec<Vec<Block>> = vec![Vec::with_capacity(self.size); self.size];
        for deposit in state.deposits.iter_mut() {
            let (signature, outgoing) = deposit.take().unwrap_or_else(|| {
                unreachable!("complete_round runs only when every rank has deposited")
            });
            signatures.push(signature);
            for (dest, block) in outgoing.into_iter().enumerate() {
                delivered[dest].push(block);
            }
        }
        state.verdict = Signature::check_agreement(&signatures);
        state.delivered = delivered;
        state.round += 1;
    }
}

/// One rank's handle on a [`LocalMailbox`].
pub(crate) struct LocalEndpoint<'a> {
    mailbox: &'a LocalMailbox,
    rank: usize,
}

impl Transport for LocalEndpoint<'_> {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.mailbox.size
    }

    fn exchange(
        &self,
        signature: &Signature,
        outgoing: Vec<Block>,
    ) -> Result<Vec<Block>, CommError> {
        self.mailbox.exchange(self.rank, signature, outgoing)
    }

    fn abort(&self) {
        self.mailbox.abort();
    }

    fn leave(&self) {
        self.mailbox.leave(self.rank);
    }

    fn is_aborted(&self) -> bool {
        self.mailbox.is_aborted()
    }
}

/// The transport of a group of one: every exchange is a local move, no threads, no locks.
pub(crate) struct SoloTransport;

impl Transport for SoloTransport {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn exchange(
        &self,
        signature: &Signature,
        outgoing: Vec<Block>,
    ) -> Result<Vec<Block>, CommError> {
        if outgoing.len() != 1 {
            return Err(CommError::InvalidArgument {
                op: signature.op,
                message: format!("{} outgoing blocks for a group of 1", outgoing.len()),
            });
        }
        Ok(outgoing)
    }

    fn abort(&self) {}

    fn leave(&self) {}
}
