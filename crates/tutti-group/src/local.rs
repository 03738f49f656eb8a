//! The in-process transport: one thread per rank, exchanging through shared memory.

use std::cell::Cell;
use std::collections::HashMap;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

use crate::transport::{Block, Signature, Transport};
use crate::CommError;

/// How many times a rank waiting for a round checks for its end before it sleeps: about
/// 10-30 microseconds of `spin_loop` hints.
const SPIN_CHECKS: usize = 100;

thread_local! {
    /// Whether a collective on this thread has failed with [`CommError::Aborted`] or
    /// [`CommError::RankLeft`]: errors that only relay another rank's failure or departure.
    static WITNESSED_OTHERS_FAILURE: Cell<bool> = const { Cell::new(false) };
}

/// Forgets what [`witnessed_others_failure`] would report: called as a rank's work starts on
/// its thread.
pub(crate) fn reset_witness() {
    WITNESSED_OTHERS_FAILURE.with(|seen| seen.set(false));
}

/// Whether a collective on this thread has failed because another rank failed or left since
/// [`reset_witness`]: a rank failing after that may be failing only as a consequence.
pub(crate) fn witnessed_others_failure() -> bool {
    WITNESSED_OTHERS_FAILURE.with(Cell::get)
}

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
    /// `state.round`, readable without the lock: a waiting rank spins on it briefly before
    /// it sleeps on `round_done`.
    completed: AtomicU64,
    splits: Mutex<SplitRegistry>,
}

/// The sub-group mailboxes [`LocalMailbox::split`] made.
#[derive(Default)]
struct SplitRegistry {
    /// Mailboxes not yet taken by every member, by (split number, color), with how many
    /// members have still to take theirs.
    pending: HashMap<(u64, usize), (Arc<LocalMailbox>, usize)>,
    /// Every sub-group made, to abort with this one.
    children: Vec<Weak<LocalMailbox>>,
    /// Splits each rank has made so far: the same on every rank after each split, so it
    /// names the split.
    made: Vec<u64>,
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
            completed: AtomicU64::new(0),
            splits: Mutex::new(SplitRegistry {
                made: vec![0; size],
                ..SplitRegistry::default()
            }),
        }
    }

    /// Rank `rank`'s view of the mailbox.
    pub(crate) fn endpoint(&self, rank: usize) -> LocalEndpoint<&Self> {
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

    /// Aborts this mailbox and every sub-group split from it.
    pub(crate) fn abort(&self) {
        self.lock().aborted = true;
        self.round_done.notify_all();
        let children: Vec<Arc<LocalMailbox>> = self
            .lock_splits()
            .children
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for child in children {
            child.abort();
        }
    }

    fn lock_splits(&self) -> MutexGuard<'_, SplitRegistry> {
        self.splits
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Rank `rank`'s part of a split (see [`Transport::split`]): one exchange tells every
    /// rank every `(color, key)`; the first member of a color to arrive makes its mailbox,
    /// the others take it.
    fn split(&self, rank: usize, color: usize, key: usize) -> Result<SubEndpoint, CommError> {
        let words = [color as u64, key as u64];
        let block = Block::from(bytemuck::cast_slice::<u64, u8>(&words));
        let signature = Signature {
            op: "split",
            root: None,
            element: "u64",
            len: Some(2),
        };
        let incoming = self.exchange(rank, &signature, vec![block; self.size])?;
        let mut choices = Vec::with_capacity(self.size);
        for block in &incoming {
            let words: Vec<u64> = bytemuck::pod_collect_to_vec(block);
            match words.as_slice() {
                [color, key] => choices.push((*color, *key)),
                _ => {
                    return Err(CommError::Mismatch(format!(
                        "split: a rank sent {} bytes instead of a color and a key",
                        block.len()
                    )))
                }
            }
        }
        let mut members: Vec<usize> = (0..self.size)
            .filter(|&r| choices[r].0 == color as u64)
            .collect();
        members.sort_by_key(|&r| (choices[r].1, r));
        let sub_rank = members
            .iter()
            .position(|&r| r == rank)
            .unwrap_or_else(|| unreachable!("a rank is a member of its own color"));
        let mut registry = self.lock_splits();
        let SplitRegistry {
            pending,
            children,
            made,
        } = &mut *registry;
        let number = made[rank];
        made[rank] += 1;
        let entry = pending.entry((number, color)).or_insert_with(|| {
            let child = Arc::new(LocalMailbox::new(members.len()));
            children.retain(|weak| weak.strong_count() > 0);
            children.push(Arc::downgrade(&child));
            (child, members.len())
        });
        let mailbox = Arc::clone(&entry.0);
        entry.1 -= 1;
        if entry.1 == 0 {
            pending.remove(&(number, color));
        }
        drop(registry);
        // An abort that walked the children before this one was registered set the flag
        // first: seeing it here, abort the new sub-group too.
        if self.is_aborted() {
            mailbox.abort();
        }
        Ok(SubEndpoint {
            mailbox,
            rank: sub_rank,
        })
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
        let result = self.exchange_round(rank, signature, outgoing);
        if let Err(CommError::Aborted | CommError::RankLeft { .. }) = result {
            WITNESSED_OTHERS_FAILURE.with(|seen| seen.set(true));
        }
        result
    }

    /// One round of [`Self::exchange`].
    fn exchange_round(
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
            // Rounds of small messages complete within microseconds when every rank has a
            // core: wait for that briefly without sleeping, as a sleep and a wake-up cost
            // more than the round itself. Bounded, so that ranks sharing cores lose little.
            drop(state);
            for _ in 0..SPIN_CHECKS {
                if self.completed.load(Ordering::Acquire) != my_round {
                    break;
                }
                std::thread::yield_now();
            }
            state = self.lock();
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
        self.completed.store(state.round, Ordering::Release);
    }
}

/// One rank's handle on a [`LocalMailbox`]: the group's, borrowed (`&LocalMailbox`), or a
/// sub-group's, shared by its members (`Arc<LocalMailbox>`, made by [`LocalMailbox::split`];
/// the parent's abort reaches it).
pub(crate) struct LocalEndpoint<M> {
    mailbox: M,
    rank: usize,
}

/// The endpoint of a sub-group.
pub(crate) type SubEndpoint = LocalEndpoint<Arc<LocalMailbox>>;

impl<M: Deref<Target = LocalMailbox> + Send + Sync> Transport for LocalEndpoint<M> {
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

    fn split(&self, color: usize, key: usize) -> Result<Box<dyn Transport + '_>, CommError> {
        Ok(Box::new(self.mailbox.split(self.rank, color, key)?))
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

    fn split(&self, _color: usize, _key: usize) -> Result<Box<dyn Transport + '_>, CommError> {
        Ok(Box::new(SoloTransport))
    }
}
