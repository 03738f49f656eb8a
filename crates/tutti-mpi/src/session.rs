//! One run's transport over a [`Wire`]: the flagged-round protocol.
//!
//! Every exchange, and each rank's final leave or abort, is one round:
//! 1. every rank sends every other a [`Header`] (its status, round, signature hash, the
//!    block length for the receiver, its text length) in one fixed-size all-to-all;
//! 2. every rank draws the same [`Verdict`] from the headers it received;
//! 3. a clean exchange moves the blocks; any other verdict exchanges the ranks' texts
//!    (failure messages, signatures) so that every rank reports the same thing, and the
//!    session closes (a mismatch excepted: it is reported and the session stays open, as in
//!    one process).
//!
//! Nothing hangs: a rank that fails has completed the same rounds as the others, so they are
//! in (or will enter) the round it joins as failed; no message stays in flight, so the
//! communicator underneath stays usable. No `MPI_Abort` is involved.

use std::sync::{Mutex, MutexGuard};

use tutti_group::{Block, CommError, Signature, Transport};

use crate::fabric::SpanningFabric;
use crate::header::{text_hash, verdict, Header, Status, Verdict, HEADER_BYTES};
use crate::wire::{Wire, WireError};

/// How a closed session ended, for the exchanges and rounds attempted after it.
#[derive(Clone, Debug)]
enum Closed {
    /// Every rank left.
    Finished,
    /// A failure somewhere (or a rank that left early): later exchanges are aborted.
    Aborted,
    /// The wire failed: later exchanges get this error.
    Broken(String),
}

struct State {
    round: u64,
    closed: Option<Closed>,
    /// The failure every rank reports: origin rank and text.
    failure: Option<(usize, String)>,
}

/// One run's [`Transport`] over a [`SpanningFabric`].
pub(crate) struct Session<'a, W: Wire> {
    fabric: &'a SpanningFabric<W>,
    state: Mutex<State>,
}

impl<'a, W: Wire> Session<'a, W> {
    pub(crate) fn new(fabric: &'a SpanningFabric<W>) -> Self {
        Self {
            fabric,
            state: Mutex::new(State {
                round: 0,
                closed: None,
                failure: None,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// One round: this rank's `status`, `text` (signature or failure message) and outgoing
    /// blocks (empty outside an exchange). Returns the incoming blocks of a clean exchange.
    fn round(
        &self,
        status: Status,
        text: &str,
        outgoing: &[Block],
    ) -> Result<Vec<Block>, CommError> {
        let mut state = self.state();
        match &state.closed {
            None => {}
            Some(Closed::Broken(error)) => return Err(CommError::Transport(error.clone())),
            Some(_) => return Err(CommError::Aborted),
        }
        let round = state.round;
        state.round += 1;
        let mut wire = self.fabric.wire();
        match run_round(&mut *wire, round, status, text, outgoing) {
            Ok(Outcome::Blocks(blocks)) => Ok(blocks),
            Ok(Outcome::Finished) => {
                state.closed = Some(Closed::Finished);
                Ok(Vec::new())
            }
            Ok(Outcome::Mismatch(message)) => Err(CommError::Mismatch(message)),
            Ok(Outcome::Failed { origin, message }) => {
                state.closed = Some(Closed::Aborted);
                state.failure = Some((origin, message));
                Err(CommError::Aborted)
            }
            Ok(Outcome::Left { rank, waiting, op }) => {
                let error = CommError::RankLeft { rank, waiting, op };
                state.closed = Some(Closed::Aborted);
                // Every process reports the lowest waiting rank's error, the leaver too:
                // an early return is a defect of the program, not a success.
                if let CommError::RankLeft { waiting, .. } = &error {
                    if let Some(&first) = waiting.first() {
                        state.failure = Some((first, error.to_string()));
                    }
                }
                Err(error)
            }
            Err(error) => {
                let message = format!("transport failure in round {round}: {error}");
                self.fabric.break_with(&message);
                state.closed = Some(Closed::Broken(message.clone()));
                // Reported as this rank's failure, so that a leave that met it is no
                // success: the other processes' verdict is unknown.
                state
                    .failure
                    .get_or_insert((self.fabric.rank_of_wire(), message.clone()));
                Err(CommError::Transport(message))
            }
        }
    }
}

impl<W: Wire> Drop for Session<'_, W> {
    fn drop(&mut self) {
        self.fabric.release();
    }
}

enum Outcome {
    Blocks(Vec<Block>),
    Finished,
    Mismatch(String),
    Failed {
        origin: usize,
        message: String,
    },
    Left {
        rank: usize,
        waiting: Vec<usize>,
        op: String,
    },
}

fn run_round<W: Wire>(
    wire: &mut W,
    round: u64,
    status: Status,
    text: &str,
    outgoing: &[Block],
) -> Result<Outcome, WireError> {
    let size = wire.size();
    let signature_hash = if status == Status::Exchange {
        text_hash(text)
    } else {
        0
    };
    let mut send = vec![0u8; size * HEADER_BYTES];
    for (dest, piece) in send.chunks_exact_mut(HEADER_BYTES).enumerate() {
        Header {
            status,
            round,
            signature_hash,
            block_len: outgoing.get(dest).map_or(0, |b| b.len() as u64),
            text_len: text.len() as u64,
        }
        .encode(piece);
    }
    let received = wire.all_to_all(send, HEADER_BYTES)?;
    let headers = received
        .chunks_exact(HEADER_BYTES)
        .enumerate()
        .map(|(from, bytes)| Header::decode(bytes, from))
        .collect::<Result<Vec<_>, _>>()?;
    let verdict = verdict(&headers, round)?;
    if verdict == Verdict::Exchange {
        let lens = headers
            .iter()
            .map(|h| receive_len(h.block_len))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Outcome::Blocks(wire.all_to_all_v(outgoing, &lens)?));
    }
    let texts = if verdict.needs_texts() {
        let lens = headers
            .iter()
            .map(|h| receive_len(h.text_len))
            .collect::<Result<Vec<_>, _>>()?;
        let send = vec![Block::from(text.as_bytes()); size];
        wire.all_to_all_v(&send, &lens)?
            .into_iter()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .collect()
    } else {
        Vec::new()
    };
    let text_of = |rank: usize| texts.get(rank).cloned().unwrap_or_default();
    Ok(match verdict {
        Verdict::Exchange | Verdict::AllLeft => Outcome::Finished,
        Verdict::Failed { origin } => Outcome::Failed {
            origin,
            message: text_of(origin),
        },
        Verdict::Left { rank, waiting } => Outcome::Left {
            rank,
            op: waiting.first().map_or_else(String::new, |&w| text_of(w)),
            waiting,
        },
        Verdict::Mismatch => {
            let first = text_of(0);
            let (rank, other) = (1..size)
                .map(|r| (r, text_of(r)))
                .find(|(_, t)| *t != first)
                .unwrap_or((0, first.clone()));
            Outcome::Mismatch(format!(
                "rank 0 called {first} while rank {rank} called {other}"
            ))
        }
    })
}

fn receive_len(len: u64) -> Result<usize, WireError> {
    usize::try_from(len).map_err(|_| {
        WireError(format!(
            "a peer announced a block of {len} bytes, beyond memory"
        ))
    })
}

impl<W: Wire> Transport for Session<'_, W> {
    fn rank(&self) -> usize {
        self.fabric.rank_of_wire()
    }

    fn size(&self) -> usize {
        self.fabric.size_of_wire()
    }

    fn exchange(
        &self,
        signature: &Signature,
        outgoing: Vec<Block>,
    ) -> Result<Vec<Block>, CommError> {
        let size = self.size();
        if outgoing.len() != size {
            return Err(CommError::InvalidArgument {
                op: signature.op,
                message: format!("{} outgoing blocks for a group of {size}", outgoing.len()),
            });
        }
        self.round(Status::Exchange, &signature.to_string(), &outgoing)
    }

    fn abort(&self) {
        self.abort_with("aborted");
    }

    fn leave(&self) {
        // A closed session has nothing to leave; a failure is recorded in `failure`.
        let _ = self.round(Status::Left, "", &[]);
    }

    fn abort_with(&self, message: &str) {
        let _ = self.round(Status::Failed, message, &[]);
        let mut state = self.state();
        if state.failure.is_none() && !matches!(state.closed, Some(Closed::Broken(_))) {
            // This rank's own failure (it joined the round as failed) is the origin unless a
            // lower rank failed in the same round.
            state.failure = Some((self.rank(), message.to_string()));
        }
    }

    fn failure(&self) -> Option<(usize, String)> {
        self.state().failure.clone()
    }
}
