//! Receive buffers kept from one exchange for the next ones of a run.
//!
//! A fresh allocation of a large block is mapped memory the kernel zeroes page by page as
//! the receive first touches it; on this project's 2-core machines those page faults cost
//! more than the transfer itself (a 4 MiB exchange between 2 processes: 25 ms with fresh
//! buffers, 9 ms when glibc keeps its memory, 3.2 ms for a raw `MPI_Alltoall`). The
//! collectives copy each received block out and drop it, so by the next exchange the wire
//! holds the only reference to it and can receive into it again. A block is reused only
//! for a receive of exactly its length; the pool keeps at most [`POOL_LIMIT`] bytes and is
//! emptied when the run ends.

use std::mem::MaybeUninit;
use std::sync::Arc;

use tutti_group::Block;

/// Blocks shorter than this come from the allocator's heap cheaply: not kept.
pub(crate) const POOLED_BYTES: usize = 16 << 10;

/// The most bytes the pool keeps.
pub(crate) const POOL_LIMIT: usize = 256 << 20;

/// The most blocks the pool keeps (each receive searches them).
const POOL_BLOCKS: usize = 64;

/// Where one receive lands: a fresh allocation, or a kept block nobody else holds.
pub(crate) enum Receive {
    /// Fresh, uninitialised memory.
    Fresh(Arc<[MaybeUninit<u8>]>),
    /// A block of an earlier exchange, held by the pool alone.
    Reused(Block),
}

impl Receive {
    /// The buffer's start and length, for MPI to write into; `None` if it is shared (never
    /// for what [`BlockPool::take`] returns).
    pub(crate) fn as_mut_ptr(&mut self) -> Option<(*mut u8, usize)> {
        match self {
            Self::Fresh(block) => Arc::get_mut(block).map(|b| (b.as_mut_ptr().cast(), b.len())),
            Self::Reused(block) => Arc::get_mut(block).map(|b| (b.as_mut_ptr(), b.len())),
        }
    }

    /// The received block.
    ///
    /// # Safety
    /// Every byte of a [`Receive::Fresh`] buffer has been written.
    pub(crate) unsafe fn finish(self) -> Block {
        match self {
            // SAFETY: every byte written (the caller's promise).
            Self::Fresh(block) => unsafe { block.assume_init() },
            Self::Reused(block) => block,
        }
    }
}

/// The kept blocks, oldest first.
#[derive(Default)]
pub(crate) struct BlockPool {
    kept: Vec<Block>,
}

impl BlockPool {
    /// A buffer of exactly `len` bytes: a kept block of that length that only the pool
    /// holds, or fresh memory.
    pub(crate) fn take(&mut self, len: usize) -> Receive {
        if len >= POOLED_BYTES {
            let free = self
                .kept
                .iter_mut()
                .position(|block| block.len() == len && Arc::get_mut(block).is_some());
            if let Some(i) = free {
                return Receive::Reused(self.kept.remove(i));
            }
        }
        Receive::Fresh(Arc::new_uninit_slice(len))
    }

    /// Keeps `delivered`'s large blocks for later exchanges, dropping the oldest kept ones
    /// beyond the limits.
    pub(crate) fn keep(&mut self, delivered: &[Block]) {
        self.kept.extend(
            delivered
                .iter()
                .filter(|block| (POOLED_BYTES..=POOL_LIMIT).contains(&block.len()))
                .cloned(),
        );
        let mut total: usize = self.kept.iter().map(|b| b.len()).sum();
        let mut drop_first = 0;
        while total > POOL_LIMIT || self.kept.len() - drop_first > POOL_BLOCKS {
            total -= self.kept[drop_first].len();
            drop_first += 1;
        }
        self.kept.drain(..drop_first);
    }

    /// Drops every kept block (when a run ends).
    pub(crate) fn clear(&mut self) {
        self.kept.clear();
    }

    #[cfg(test)]
    fn kept_bytes(&self) -> usize {
        self.kept.iter().map(|b| b.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(receive: &mut Receive, byte: u8) {
        let (ptr, len) = receive.as_mut_ptr().expect("unshared");
        // SAFETY: `ptr` is valid for `len` bytes of writes (an unshared buffer).
        unsafe { std::ptr::write_bytes(ptr, byte, len) };
    }

    #[test]
    fn a_dropped_block_is_received_into_again_and_a_held_one_is_not() {
        let mut pool = BlockPool::default();
        let mut first = pool.take(POOLED_BYTES);
        filled(&mut first, 1);
        // SAFETY: filled above.
        let first = unsafe { first.finish() };
        let address = first.as_ptr();
        pool.keep(std::slice::from_ref(&first));
        // Still held by the "collective": a second receive gets fresh memory.
        assert!(matches!(pool.take(POOLED_BYTES), Receive::Fresh(_)));
        drop(first);
        let mut again = pool.take(POOLED_BYTES);
        assert!(matches!(again, Receive::Reused(_)));
        filled(&mut again, 2);
        // SAFETY: filled above.
        let again = unsafe { again.finish() };
        assert_eq!(again.as_ptr(), address, "the same memory");
        assert!(again.iter().all(|&b| b == 2), "with the new bytes");
        // Another length, or a small block, is never taken from the pool.
        pool.keep(std::slice::from_ref(&again));
        drop(again);
        assert!(matches!(pool.take(POOLED_BYTES + 1), Receive::Fresh(_)));
        assert!(matches!(pool.take(8), Receive::Fresh(_)));
        pool.clear();
        assert!(matches!(pool.take(POOLED_BYTES), Receive::Fresh(_)));
    }

    #[test]
    fn the_pool_keeps_the_newest_blocks_within_its_limits() {
        let mut pool = BlockPool::default();
        let big = |len: usize| Block::from(vec![0u8; len]);
        pool.keep(&[big(8), big(POOLED_BYTES)]);
        assert_eq!(pool.kept_bytes(), POOLED_BYTES, "small blocks are not kept");
        let blocks: Vec<Block> = (0..POOL_BLOCKS + 10).map(|_| big(POOLED_BYTES)).collect();
        pool.keep(&blocks);
        assert_eq!(pool.kept.len(), POOL_BLOCKS);
        assert!(Arc::ptr_eq(
            &pool.kept[POOL_BLOCKS - 1],
            &blocks[blocks.len() - 1]
        ));
        pool.keep(&[big(POOL_LIMIT / 2 + 1), big(POOL_LIMIT / 2 + 1)]);
        assert!(pool.kept_bytes() <= POOL_LIMIT);
        assert_eq!(pool.kept.len(), 1, "the newest one fits");
    }
}
