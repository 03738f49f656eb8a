//! The byte mover under the round protocol: what MPI (or a test loopback) must provide.
//!
//! A [`Wire`] moves bytes and does nothing else: no arithmetic, no interpretation. The round
//! protocol ([`crate::session`]) is written once over this trait, so it is tested without MPI
//! (the thread loopback of [`crate::loopback`]) and the MPI binding stays a local swap.

use std::fmt;

use tutti_group::Block;

/// Why a [`Wire`] operation failed: the MPI error text, a peer that vanished, or a watchdog
/// timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError(pub String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

/// A collective byte mover among `size` ranks, this one being `rank`.
///
/// Both operations are collective: every rank calls them in the same order. Neither blocks
/// the CPU while waiting (implementations poll with a backoff, so oversubscribed ranks on
/// few cores are not starved).
pub trait Wire: Send {
    /// This rank, `0..size`.
    fn rank(&self) -> usize;

    /// The number of ranks.
    fn size(&self) -> usize;

    /// A fixed-size all-to-all: `send` holds `size` pieces of `piece` bytes, piece `j` for
    /// rank `j`; returns `size` pieces, piece `i` from rank `i`.
    fn all_to_all(&mut self, send: Vec<u8>, piece: usize) -> Result<Vec<u8>, WireError>;

    /// A variable all-to-all whose sizes every receiver already knows: sends `send[j]` to
    /// rank `j` and returns `incoming[i]` from rank `i`, of `receive_lens[i]` bytes, as the
    /// blocks the collectives hand on (received in place, not copied after). Empty blocks
    /// move no message.
    fn all_to_all_v(
        &mut self,
        send: &[Block],
        receive_lens: &[usize],
    ) -> Result<Vec<Block>, WireError>;

    /// Drops buffers kept for later exchanges: called when a run ends.
    fn release_buffers(&mut self) {}
}
