//! Several ranks per process in a group spanning processes: the ranks of one process meet in
//! shared memory, and one of them carries the process's part of each exchange over the
//! process-level transport.
//!
//! The process-level transport (one session of a [`Fabric`], whose ranks are the processes)
//! sees one exchange per round. Its blocks are packed: the block for process `q` holds, for
//! every rank `i` of this process and every rank `j` of `q`, the bytes `i` sends `j`, behind a
//! table of their lengths. Blocks between ranks of one process never leave it. The last local
//! rank to arrive in a round makes the process-level call, so the ranks of one process never
//! call the transport concurrently (what `MPI_THREAD_SERIALIZED` allows).
//!
//! Failures cross the process-level transport as text tagged with the global rank that
//! failed, so every process reports the same rank as a group of threads would. A mismatch
//! among the ranks of one process ends the run on every process, where a mismatch between
//! processes (or among threads) is reported and the run may go on.

use std::ops::Range;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::transport::{Block, Signature, Transport};
use crate::CommError;

/// Where the ranks are: `offsets[q]..offsets[q + 1]` are process `q`'s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    offsets: Vec<usize>,
    /// This process's index among the processes.
    process: usize,
}

impl Layout {
    /// The layout of processes holding `counts[q]` ranks each, seen from process `process`.
    /// `None` when a count is zero, the total overflows, or `process` is out of range.
    pub(crate) fn new(counts: &[usize], process: usize) -> Option<Self> {
        if process >= counts.len() || counts.contains(&0) {
            return None;
        }
        let mut offsets: Vec<usize> = vec![0];
        for &count in counts {
            offsets.push(offsets.last().copied()?.checked_add(count)?);
        }
        Some(Self { offsets, process })
    }

    /// The number of ranks over all processes.
    pub(crate) fn size(&self) -> usize {
        self.offsets.last().copied().unwrap_or(0)
    }

    /// The ranks of process `q`.
    pub(crate) fn ranks_of(&self, q: usize) -> Range<usize> {
        self.offsets[q]..self.offsets[q + 1]
    }

    /// This process's ranks.
    pub(crate) fn local(&self) -> Range<usize> {
        self.ranks_of(self.process)
    }

    fn processes(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether every process holds one rank (then the process-level transport serves the
    /// ranks directly).
    pub(crate) fn one_rank_each(&self) -> bool {
        self.size() == self.processes()
    }
}

/// The prefix that tags a failure text with the global rank it came from.
const TAG: char = '\u{1}';

fn tagged(rank: usize, message: &str) -> String {
    format!("{TAG}{rank}{TAG}{message}")
}

/// The global rank and text of a tagged failure text; untagged texts (a failure of the
/// process-level transport itself) are given to process `q`'s first rank.
fn untagged(layout: &Layout, q: usize, text: &str) -> (usize, String) {
    let parsed = text.strip_prefix(TAG).and_then(|rest| {
        let (rank, message) = rest.split_once(TAG)?;
        Some((rank.parse::<usize>().ok()?, message.to_string()))
    });
    parsed
        .filter(|(rank, _)| *rank < layout.size())
        .unwrap_or_else(|| {
            (
                layout.ranks_of(q.min(layout.processes() - 1)).start,
                renumber(text, layout),
            )
        })
}

struct State {
    /// Completed rounds.
    round: u64,
    deposits: Vec<Option<(Signature, Vec<Block>)>>,
    delivered: Vec<Option<Result<Vec<Block>, CommError>>>,
    aborted: bool,
    left: Vec<bool>,
    /// Whether this process has ended its part of the process-level session (leave or abort).
    outer_done: bool,
}

/// The ranks of this process in one run over a process-level transport.
pub(crate) struct NodeMailbox<'a> {
    outer: &'a dyn Transport,
    layout: &'a Layout,
    state: Mutex<State>,
    round_done: Condvar,
    /// Held while calling `outer`: one call at a time from this process.
    calling: Mutex<()>,
}

impl<'a> NodeMailbox<'a> {
    pub(crate) fn new(outer: &'a dyn Transport, layout: &'a Layout) -> Self {
        let local = layout.local().len();
        Self {
            outer,
            layout,
            state: Mutex::new(State {
                round: 0,
                deposits: vec![None; local],
                delivered: vec![None; local],
                aborted: false,
                left: vec![false; local],
                outer_done: false,
            }),
            round_done: Condvar::new(),
            calling: Mutex::new(()),
        }
    }

    /// Local rank `index`'s (global rank `local().start + index`) view of the mailbox.
    pub(crate) fn endpoint(&self, index: usize) -> NodeEndpoint<'_, 'a> {
        NodeEndpoint {
            mailbox: self,
            index,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Whether the session was aborted (a local rank failed, or a failure arrived).
    pub(crate) fn is_aborted(&self) -> bool {
        self.lock().aborted
    }

    /// The failure the process-level transport learned of, as (global rank, text).
    pub(crate) fn failure(&self) -> Option<(usize, String)> {
        let (q, text) = self.outer.failure()?;
        Some(untagged(self.layout, q, &text))
    }

    /// Ends this process's part of the session once: `message` for an abort, `None` for a
    /// leave. Every local rank is released first.
    fn finish_outer(&self, message: Option<String>) {
        {
            let mut state = self.lock();
            // An abort releases the local ranks even when the session is already over (a
            // mismatch inside this process ended it): one may have carried on after it.
            if message.is_some() {
                state.aborted = true;
            }
            let done = std::mem::replace(&mut state.outer_done, true);
            drop(state);
            self.round_done.notify_all();
            if done {
                return;
            }
        }
        let _calling = self
            .calling
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        match message {
            Some(message) => self.outer.abort_with(&message),
            None => self.outer.leave(),
        }
    }

    fn abort_with(&self, index: usize, message: &str) {
        let rank = self.layout.local().start + index;
        self.finish_outer(Some(tagged(rank, message)));
    }

    fn leave(&self, index: usize) {
        let all_left = {
            let mut state = self.lock();
            state.left[index] = true;
            state.left.iter().all(|&left| left)
        };
        self.round_done.notify_all();
        if all_left {
            self.finish_outer(None);
        }
    }

    /// The error for local ranks waiting in a round that a departed local rank never joins.
    fn departed_error(&self, state: &State) -> Option<CommError> {
        let gone = (0..state.left.len()).find(|&i| state.left[i] && state.deposits[i].is_none())?;
        let start = self.layout.local().start;
        let waiting = (0..state.left.len())
            .filter(|&i| state.deposits[i].is_some())
            .map(|i| start + i)
            .collect();
        let op = state
            .deposits
            .iter()
            .flatten()
            .next()
            .map_or_else(|| "a collective".to_string(), |(sig, _)| sig.to_string());
        Some(CommError::RankLeft {
            rank: start + gone,
            waiting,
            op,
        })
    }

    fn exchange(
        &self,
        index: usize,
        signature: &Signature,
        outgoing: Vec<Block>,
    ) -> Result<Vec<Block>, CommError> {
        if outgoing.len() != self.layout.size() {
            return Err(CommError::InvalidArgument {
                op: signature.op,
                message: format!(
                    "{} outgoing blocks for a group of {}",
                    outgoing.len(),
                    self.layout.size()
                ),
            });
        }
        let mut state = self.lock();
        if state.aborted {
            return Err(CommError::Aborted);
        }
        if state.deposits[index].is_some() {
            return Err(CommError::Mismatch(format!(
                "rank {} entered {signature} while already inside a collective \
                 (collectives of one rank must not run concurrently)",
                self.layout.local().start + index
            )));
        }
        let my_round = state.round;
        state.deposits[index] = Some((signature.clone(), outgoing));
        if state.deposits.iter().all(Option::is_some) {
            let deposits: Vec<(Signature, Vec<Block>)> =
                state.deposits.iter_mut().filter_map(Option::take).collect();
            drop(state);
            // The last to arrive carries the round; the others wait for its delivery.
            let delivered = self.carry_round(deposits);
            state = self.lock();
            state.delivered = delivered.into_iter().map(Some).collect();
            state.round += 1;
            self.round_done.notify_all();
        } else {
            if let Some(err) = self.departed_error(&state) {
                state.deposits[index] = None;
                return Err(err);
            }
            while state.round == my_round {
                if state.aborted {
                    state.deposits[index] = None;
                    return Err(CommError::Aborted);
                }
                if let Some(err) = self.departed_error(&state) {
                    state.deposits[index] = None;
                    return Err(err);
                }
                state = self
                    .round_done
                    .wait(state)
                    .unwrap_or_else(|poison| poison.into_inner());
            }
        }
        state.delivered[index]
            .take()
            .unwrap_or(Err(CommError::Aborted))
    }

    /// One round of every local rank's deposits: local blocks move in memory, the others
    /// over the process-level transport. Returns each local rank's incoming blocks.
    fn carry_round(
        &self,
        deposits: Vec<(Signature, Vec<Block>)>,
    ) -> Vec<Result<Vec<Block>, CommError>> {
        let local = self.layout.local();
        let signatures: Vec<Signature> = deposits.iter().map(|(s, _)| s.clone()).collect();
        let all = |result: Result<Vec<Vec<Block>>, CommError>| match result {
            Ok(incoming) => incoming.into_iter().map(Ok).collect(),
            Err(err) => vec![Err(err); local.len()],
        };
        if let Some(d) = signatures.iter().position(|s| s != &signatures[0]) {
            let message = format!(
                "rank {} called {} while rank {} called {}",
                local.start,
                signatures[0],
                local.start + d,
                signatures[d]
            );
            // The other processes wait in this round: fail it for them with this text (a
            // mismatch ends the run, as it does every run in practice).
            self.lock().outer_done = true;
            {
                let _calling = self
                    .calling
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner());
                let text = CommError::Mismatch(message.clone()).to_string();
                self.outer.abort_with(&tagged(local.start, &text));
            }
            return vec![Err(CommError::Mismatch(message)); local.len()];
        }
        let packed = (0..self.layout.processes())
            .map(|q| {
                if q == self.layout.process {
                    Block::from(Vec::new())
                } else {
                    pack(&deposits, self.layout.ranks_of(q))
                }
            })
            .collect();
        let received = self
            .call_outer(&signatures[0], packed)
            .map_err(|err| self.in_global_ranks(err));
        all(received.and_then(|blocks| self.unpack(&deposits, &blocks)))
    }

    /// An error of the process-level transport, whose ranks are processes, in the group's
    /// ranks: a process is named by its first rank.
    fn in_global_ranks(&self, err: CommError) -> CommError {
        let first = |q: usize| {
            if q < self.layout.processes() {
                self.layout.ranks_of(q).start
            } else {
                q
            }
        };
        match err {
            CommError::RankLeft { rank, waiting, op } => CommError::RankLeft {
                rank: first(rank),
                waiting: waiting
                    .into_iter()
                    .filter(|&q| q < self.layout.processes())
                    .flat_map(|q| self.layout.ranks_of(q))
                    .collect(),
                op,
            },
            CommError::Mismatch(text) => CommError::Mismatch(renumber(&text, self.layout)),
            other => other,
        }
    }

    fn call_outer(
        &self,
        signature: &Signature,
        blocks: Vec<Block>,
    ) -> Result<Vec<Block>, CommError> {
        let _calling = self
            .calling
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        self.outer.exchange(signature, blocks)
    }

    /// Every local rank's incoming blocks, in global rank order: from this process's
    /// deposits, and from the packed blocks of the others.
    fn unpack(
        &self,
        deposits: &[(Signature, Vec<Block>)],
        blocks: &[Block],
    ) -> Result<Vec<Vec<Block>>, CommError> {
        let local = self.layout.local();
        let mut incoming: Vec<Vec<Block>> =
            vec![Vec::with_capacity(self.layout.size()); local.len()];
        if blocks.len() != self.layout.processes() {
            return Err(CommError::Transport(format!(
                "{} blocks from {} processes",
                blocks.len(),
                self.layout.processes()
            )));
        }
        for (q, block) in blocks.iter().enumerate() {
            let senders = self.layout.ranks_of(q);
            if q == self.layout.process {
                for (_, outgoing) in deposits {
                    for (j, into) in incoming.iter_mut().enumerate() {
                        into.push(outgoing[local.start + j].clone());
                    }
                }
                continue;
            }
            let pieces = unpack_block(block, senders.len(), local.len()).ok_or_else(|| {
                CommError::Transport(format!(
                    "process {q} sent a packed block that does not hold {} x {} pieces",
                    senders.len(),
                    local.len()
                ))
            })?;
            for (k, piece) in pieces.into_iter().enumerate() {
                incoming[k % local.len()].push(piece);
            }
        }
        Ok(incoming)
    }
}

/// A text of the process-level transport (a mismatch, an early return), whose ranks are
/// processes, in the group's ranks: `rank N` names process N's first rank, and the list of
/// `rank(s) [..]` every rank of the processes listed.
fn renumber(text: &str, layout: &Layout) -> String {
    let first = |q: usize| {
        if q < layout.processes() {
            layout.ranks_of(q).start
        } else {
            q
        }
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("rank") {
        let (before, after) = rest.split_at(at + "rank".len());
        out.push_str(before);
        if let Some(list) = after.strip_prefix("(s) [") {
            let Some(close) = list.find(']') else {
                rest = after;
                continue;
            };
            let processes: Option<Vec<usize>> = list[..close]
                .split(", ")
                .map(|n| n.parse::<usize>().ok().filter(|&q| q < layout.processes()))
                .collect();
            match processes {
                Some(processes) => {
                    let ranks: Vec<usize> = processes
                        .into_iter()
                        .flat_map(|q| layout.ranks_of(q))
                        .collect();
                    out.push_str(&format!("(s) {ranks:?}"));
                }
                None => out.push_str(&after[..5 + close + 1]),
            }
            rest = &list[close + 1..];
        } else if let Some(number) = after.strip_prefix(' ') {
            let digits = number.bytes().take_while(u8::is_ascii_digit).count();
            out.push(' ');
            match number[..digits].parse::<usize>() {
                Ok(n) => out.push_str(&first(n).to_string()),
                Err(_) => out.push_str(&number[..digits]),
            }
            rest = &number[digits..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The block for the ranks `receivers` of one process: a table of `senders x receivers`
/// little-endian u64 lengths (sender-major), then the pieces in that order.
fn pack(deposits: &[(Signature, Vec<Block>)], receivers: Range<usize>) -> Block {
    let pieces = deposits.len() * receivers.len();
    let bytes: usize = deposits
        .iter()
        .flat_map(|(_, outgoing)| outgoing[receivers.clone()].iter().map(|b| b.len()))
        .sum();
    let mut packed = Vec::with_capacity(8 * pieces + bytes);
    for (_, outgoing) in deposits {
        for block in &outgoing[receivers.clone()] {
            packed.extend_from_slice(&(block.len() as u64).to_le_bytes());
        }
    }
    for (_, outgoing) in deposits {
        for block in &outgoing[receivers.clone()] {
            packed.extend_from_slice(block);
        }
    }
    Block::from(packed)
}

/// The `senders x receivers` pieces of a packed block, sender-major; `None` if it is not one.
fn unpack_block(block: &[u8], senders: usize, receivers: usize) -> Option<Vec<Block>> {
    let pieces = senders.checked_mul(receivers)?;
    let table_bytes = pieces.checked_mul(8)?;
    let (table, mut payload) = (block.get(..table_bytes)?, block.get(table_bytes..)?);
    let mut out = Vec::with_capacity(pieces);
    for entry in table.chunks_exact(8) {
        let len = usize::try_from(u64::from_le_bytes(entry.try_into().ok()?)).ok()?;
        let (piece, rest) = (payload.get(..len)?, payload.get(len..)?);
        out.push(Block::from(piece));
        payload = rest;
    }
    payload.is_empty().then_some(out)
}

/// One local rank's handle on a [`NodeMailbox`]: a [`Transport`] over every rank of every
/// process.
pub(crate) struct NodeEndpoint<'m, 'a> {
    mailbox: &'m NodeMailbox<'a>,
    index: usize,
}

impl Transport for NodeEndpoint<'_, '_> {
    fn rank(&self) -> usize {
        self.mailbox.layout.local().start + self.index
    }

    fn size(&self) -> usize {
        self.mailbox.layout.size()
    }

    fn exchange(
        &self,
        signature: &Signature,
        outgoing: Vec<Block>,
    ) -> Result<Vec<Block>, CommError> {
        self.mailbox.exchange(self.index, signature, outgoing)
    }

    fn abort(&self) {
        self.mailbox
            .abort_with(self.index, "aborted without a message");
    }

    fn leave(&self) {
        self.mailbox.leave(self.index);
    }

    fn abort_with(&self, message: &str) {
        self.mailbox.abort_with(self.index, message);
    }

    fn failure(&self) -> Option<(usize, String)> {
        self.mailbox.failure()
    }

    fn is_aborted(&self) -> bool {
        self.mailbox.is_aborted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_number_the_ranks_process_by_process() {
        let layout = Layout::new(&[2, 1, 3], 2).unwrap();
        assert_eq!(layout.size(), 6);
        assert_eq!(layout.local(), 3..6);
        assert_eq!(layout.ranks_of(1), 2..3);
        assert!(!layout.one_rank_each());
        assert!(Layout::new(&[1, 1], 0).unwrap().one_rank_each());
        assert_eq!(Layout::new(&[1, 0], 0), None);
        assert_eq!(Layout::new(&[1, 1], 2), None);
        assert_eq!(Layout::new(&[usize::MAX, 1], 0), None);
    }

    #[test]
    fn packed_blocks_unpack_to_their_pieces() {
        let block = |bytes: &[u8]| Block::from(bytes);
        let sig = Signature {
            op: "test",
            root: None,
            element: "u8",
            len: None,
        };
        // Two senders, each with blocks for global ranks 0..4; the receivers are 1..3.
        let deposits = vec![
            (
                sig.clone(),
                vec![block(b"x"), block(b"a"), block(b""), block(b"y")],
            ),
            (
                sig,
                vec![block(b"x"), block(b"bb"), block(b"ccc"), block(b"y")],
            ),
        ];
        let packed = pack(&deposits, 1..3);
        let pieces = unpack_block(&packed, 2, 2).unwrap();
        let pieces: Vec<&[u8]> = pieces.iter().map(|p| &p[..]).collect();
        assert_eq!(pieces, [&b"a"[..], b"", b"bb", b"ccc"]);
        assert_eq!(
            unpack_block(&packed, 2, 1),
            None,
            "a wrong shape is refused"
        );
        assert_eq!(unpack_block(&packed[..packed.len() - 1], 2, 2), None);
        assert_eq!(
            unpack_block(&[0xff; 8], 1, 1),
            None,
            "a length past the end"
        );
    }

    #[test]
    fn process_numbers_in_texts_become_ranks() {
        let layout = Layout::new(&[2, 3, 1], 0).unwrap();
        assert_eq!(
            renumber("rank 0 called barrier<()> while rank 2 called x", &layout),
            "rank 0 called barrier<()> while rank 5 called x"
        );
        assert_eq!(
            renumber(
                "rank 1 returned while rank(s) [0, 2] waited for it in y",
                &layout
            ),
            "rank 2 returned while rank(s) [0, 1, 5] waited for it in y"
        );
        assert_eq!(
            renumber("no ranks; rank x; ranks", &layout),
            "no ranks; rank x; ranks"
        );
        assert_eq!(
            renumber("rank(s) [9] and rank(s) [", &layout),
            "rank(s) [9] and rank(s) ["
        );
    }

    #[test]
    fn failure_texts_carry_the_global_rank() {
        let layout = Layout::new(&[2, 3], 0).unwrap();
        assert_eq!(
            untagged(&layout, 1, &tagged(4, "bad input")),
            (4, "bad input".to_string())
        );
        assert_eq!(
            untagged(&layout, 1, "wire broke"),
            (2, "wire broke".to_string())
        );
        assert_eq!(
            untagged(&layout, 1, &tagged(9, "x")),
            (2, tagged(9, "x")),
            "a rank out of range is not trusted"
        );
    }
}
