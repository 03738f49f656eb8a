//! The transport interface: how ranks exchange bytes.
//!
//! Every collective of [`crate::Comm`] is one or two calls of [`Transport::exchange`], an
//! all-to-all of byte blocks with uneven sizes. A transport only has to implement that, with
//! the abort and mismatch rules below; the threads-in-one-process transport lives in this
//! crate, and one spanning processes (MPI) implements the same trait.

use std::fmt;
use std::sync::Arc;

use crate::CommError;

/// A block of bytes in an exchange. Shared, so that one block sent to many ranks (a
/// broadcast) is not copied once per rank.
pub type Block = Arc<[u8]>;

/// What a rank says it is doing when it enters an exchange; all ranks of one round must
/// agree, else every rank of the round gets [`CommError::Mismatch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The collective's name, e.g. `"allreduce_sum"`.
    pub op: &'static str,
    /// The root rank, for rooted collectives.
    pub root: Option<usize>,
    /// The element type's name.
    pub element: &'static str,
    /// The element length that must be equal on all ranks, where the collective needs one.
    pub len: Option<usize>,
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}<{}>", self.op, self.element)?;
        if let Some(root) = self.root {
            write!(f, " root {root}")?;
        }
        if let Some(len) = self.len {
            write!(f, " len {len}")?;
        }
        Ok(())
    }
}

impl Signature {
    /// Checks that every rank's signature agrees; `signatures[r]` is rank r's.
    pub fn check_agreement(signatures: &[Signature]) -> Result<(), CommError> {
        let Some(first) = signatures.first() else {
            return Ok(());
        };
        for (rank, signature) in signatures.iter().enumerate().skip(1) {
            if signature != first {
                return Err(CommError::Mismatch(format!(
                    "rank 0 called {first} while rank {rank} called {signature}"
                )));
            }
        }
        Ok(())
    }
}

/// A way for the ranks of a group to exchange bytes.
///
/// Contract for implementors:
/// - [`Transport::exchange`] is collective: every rank calls it, in the same order, with
///   agreeing [`Signature`]s (else all get [`CommError::Mismatch`]).
/// - After [`Transport::abort`], every rank blocked in or entering an exchange returns
///   [`CommError::Aborted`] promptly.
/// - After a rank calls [`Transport::leave`], ranks waiting for it return
///   [`CommError::RankLeft`] instead of waiting forever.
pub trait Transport: Send + Sync {
    /// This rank, `0..size`.
    fn rank(&self) -> usize;

    /// The number of ranks.
    fn size(&self) -> usize;

    /// Sends `outgoing[j]` to rank `j` (one block per rank, any lengths, empty allowed) and
    /// returns the blocks received, `incoming[i]` from rank `i`.
    fn exchange(
        &self,
        signature: &Signature,
        outgoing: Vec<Block>,
    ) -> Result<Vec<Block>, CommError>;

    /// Releases every rank from current and future exchanges with [`CommError::Aborted`].
    fn abort(&self);

    /// Marks this rank as finished: it will make no more exchanges.
    fn leave(&self);

    /// Aborts because this rank failed with `message`. A transport spanning processes
    /// sends the message to the other ranks, which report it as
    /// [`crate::RunError::Remote`]; in one process the group holds the original error and
    /// this is [`Transport::abort`].
    fn abort_with(&self, message: &str) {
        let _ = message;
        self.abort();
    }

    /// The failure this transport learned of from another process: the failing rank and
    /// its error's text. `None` in one process, where the group records failures itself.
    fn failure(&self) -> Option<(usize, String)> {
        None
    }

    /// Whether this run has been aborted (a rank of this process failed, or an exchange
    /// learned of a failure elsewhere). A rank that waits on something other than an
    /// exchange (another local rank's progress) polls this so that it leaves instead of
    /// waiting forever. `false` by default: a transport with one local rank never waits so.
    fn is_aborted(&self) -> bool {
        false
    }

    /// Splits the ranks into sub-groups, one per `color`, ranked within each by `key` (ties
    /// by rank), and returns this rank's transport of its sub-group (MPI's
    /// `MPI_Comm_split`). Collective: every rank calls it, in the same order as its other
    /// exchanges. A sub-group's exchanges are independent of the parent's and of the other
    /// sub-groups', but an abort of the parent aborts every sub-group made from it.
    /// [`CommError::Unsupported`] by default.
    fn split(&self, color: usize, key: usize) -> Result<Box<dyn Transport + '_>, CommError> {
        let _ = (color, key);
        Err(CommError::Unsupported(
            "this transport cannot split into sub-groups".into(),
        ))
    }
}

/// The ranks of a computation spanning processes (MPI): the ranks of this process are a part
/// of them, and every [`crate::Group::run`] opens one transport session on the fabric.
///
/// Contract for implementors:
/// - [`Fabric::open`] is collective over the processes and gives a fresh session: a failure
///   in one run (which closes its session) leaves the next run unaffected.
/// - A session's [`Transport::leave`] and [`Transport::abort_with`] are collective too: they
///   complete a final round with every other rank, so every process learns of a failure
///   and no message of the run is left in flight.
/// - A session is used by one run at a time; opening a second one while the first is open
///   is an error, not an interleaving.
pub trait Fabric: Send + Sync {
    /// The rank of this process's (first) rank.
    fn rank(&self) -> usize;

    /// The number of ranks over all processes.
    fn size(&self) -> usize;

    /// Opens the transport of one run.
    fn open(&self) -> Result<Box<dyn Transport + '_>, CommError>;
}
