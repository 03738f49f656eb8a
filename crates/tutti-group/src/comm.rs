//! Typed collectives over a [`Transport`].

use std::cell::Cell;
use std::marker::PhantomData;

use tutti_backend::{Buffer, Device, Element, Summable};

use crate::transport::{Block, Signature, Transport};
use crate::CommError;

/// One rank's handle on its group: its rank, its device, and the collectives.
///
/// Every collective must be called by all ranks in the same order with agreeing arguments
/// (same collective, same root, same element type, and equal lengths where stated); a
/// disagreement is reported to every rank as [`CommError::Mismatch`]. After another rank
/// fails, a collective returns [`CommError::Aborted`]. Reductions add contributions in rank
/// order, `((x0 + x1) + x2) + ...`, so their result does not depend on timing.
///
/// A `Comm` is not `Sync`: one rank's collectives run one at a time, from its own thread.
pub struct Comm<'a> {
    transport: Link<'a>,
    device: &'a Device,
    _one_thread: PhantomData<Cell<()>>,
}

/// A `Comm`'s transport: the group's, borrowed, or a sub-group's, owned by the `Comm` that
/// [`Comm::split`] made.
enum Link<'a> {
    Borrowed(&'a dyn Transport),
    Owned(Box<dyn Transport + 'a>),
}

impl Drop for Comm<'_> {
    /// A sub-group's rank leaves its sub-group when its `Comm` is dropped, so a member still
    /// waiting for it in a collective learns so ([`CommError::RankLeft`]) instead of hanging.
    fn drop(&mut self) {
        if let Link::Owned(transport) = &self.transport {
            transport.leave();
        }
    }
}

/// Whether a rank's run was aborted: see [`Comm::abort_probe`].
#[derive(Clone, Copy)]
pub struct AbortProbe<'a> {
    transport: &'a dyn Transport,
}

impl AbortProbe<'_> {
    /// Whether another rank of this process failed (or an exchange learned of a failure
    /// elsewhere): a rank waiting for its process's other ranks should give up.
    pub fn is_aborted(&self) -> bool {
        self.transport.is_aborted()
    }
}

impl std::fmt::Debug for AbortProbe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbortProbe")
            .field("aborted", &self.is_aborted())
            .finish()
    }
}

fn to_block<T: Element>(data: &[T]) -> Block {
    Block::from(bytemuck::cast_slice::<T, u8>(data))
}

fn empty_blocks(count: usize) -> Vec<Block> {
    let empty = Block::from(&[][..]);
    vec![empty; count]
}

/// The elements of a block as a new vector. Signatures agree on the element type, so the
/// length is a whole number of elements.
fn from_block<T: Element>(block: &[u8]) -> Vec<T> {
    bytemuck::pod_collect_to_vec::<u8, T>(block)
}

/// Copies a block into `dest`, whose length the signature has already matched.
fn copy_block_into<T: Element>(block: &[u8], dest: &mut [T]) {
    bytemuck::cast_slice_mut::<T, u8>(dest).copy_from_slice(block);
}

/// Calls `read` with the block's elements: in place when the block is aligned for `T`
/// (blocks are 8-byte aligned, enough for every scalar and complex type), else on a copy.
fn with_elements<T: Element, R>(block: &[u8], read: impl FnOnce(&[T]) -> R) -> R {
    match bytemuck::try_cast_slice::<u8, T>(block) {
        Ok(elements) => read(elements),
        Err(_) => read(&from_block::<T>(block)),
    }
}

fn signature<T>(op: &'static str, root: Option<usize>, len: Option<usize>) -> Signature {
    Signature {
        op,
        root,
        element: std::any::type_name::<T>(),
        len,
    }
}

impl<'a> Comm<'a> {
    /// A rank's handle over `transport`, serving `device`. Transports other than the
    /// in-process one (e.g. MPI) construct their ranks' handles with this.
    pub fn new(transport: &'a dyn Transport, device: &'a Device) -> Self {
        Self {
            transport: Link::Borrowed(transport),
            device,
            _one_thread: PhantomData,
        }
    }

    fn transport(&self) -> &dyn Transport {
        match &self.transport {
            Link::Borrowed(transport) => *transport,
            Link::Owned(transport) => transport.as_ref(),
        }
    }

    /// Splits the group into sub-groups, one per `color`, and returns this rank's handle on
    /// its sub-group, whose ranks are numbered by `key` (ties by rank in this group); MPI's
    /// `MPI_Comm_split`. Every rank calls it, in order with its other collectives, and the
    /// sub-group keeps this rank's device.
    ///
    /// Each sub-group's collectives run independently of the other sub-groups' and of this
    /// group's (which stay usable), so a (data x model) mesh splits into model groups that
    /// each run their own solve. An abort of this group (another rank failed) releases every
    /// sub-group's collectives with [`CommError::Aborted`]; a rank that drops its sub-group
    /// handle leaves the sub-group.
    ///
    /// Errors: [`CommError::Unsupported`] on a transport that cannot split (one spanning
    /// processes, today); [`CommError::Mismatch`] when the ranks did not all call `split`;
    /// [`CommError::Aborted`].
    pub fn split(&self, color: usize, key: usize) -> Result<Comm<'_>, CommError> {
        let transport = self.transport().split(color, key)?;
        Ok(Comm {
            transport: Link::Owned(transport),
            device: self.device,
            _one_thread: PhantomData,
        })
    }

    /// This rank, `0..size`.
    pub fn rank(&self) -> usize {
        self.transport().rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.transport().size()
    }

    /// This rank's device.
    pub fn device(&self) -> &Device {
        self.device
    }

    /// A probe of whether the run was aborted, for a rank that waits on the other ranks of
    /// its process outside a collective (a shared reader): unlike the `Comm` it may be
    /// handed to the rank's thread pool.
    pub fn abort_probe(&self) -> AbortProbe<'_> {
        AbortProbe {
            transport: self.transport(),
        }
    }

    fn check_root(&self, op: &'static str, root: usize) -> Result<(), CommError> {
        if root < self.size() {
            Ok(())
        } else {
            Err(CommError::InvalidArgument {
                op,
                message: format!("root {root} is not a rank of a group of {}", self.size()),
            })
        }
    }

    /// The root's outgoing blocks of a broadcast: one shared copy of `data` for every other
    /// rank, nothing to itself; empty blocks on the other ranks.
    fn rooted_outgoing<T: Element>(&self, root: usize, data: &[T]) -> Vec<Block> {
        let mut outgoing = empty_blocks(self.size());
        if self.rank() == root {
            let block = to_block(data);
            for (rank, slot) in outgoing.iter_mut().enumerate() {
                if rank != root {
                    *slot = block.clone();
                }
            }
        }
        outgoing
    }

    /// Waits until every rank has arrived.
    pub fn barrier(&self) -> Result<(), CommError> {
        let outgoing = empty_blocks(self.size());
        self.transport()
            .exchange(&signature::<()>("barrier", None, None), outgoing)
            .map(drop)
    }

    /// Makes every rank's `data` a copy of the root's (lengths may differ before the call).
    pub fn broadcast<T: Element>(&self, root: usize, data: &mut Vec<T>) -> Result<(), CommError> {
        const OP: &str = "broadcast";
        self.check_root(OP, root)?;
        let outgoing = self.rooted_outgoing(root, data);
        let incoming = self
            .transport()
            .exchange(&signature::<T>(OP, Some(root), None), outgoing)?;
        if self.rank() != root {
            *data = from_block(&incoming[root]);
        }
        Ok(())
    }

    /// Copies the root's `data` into every rank's `data`; all lengths must be equal.
    pub fn broadcast_slice<T: Element>(
        &self,
        root: usize,
        data: &mut [T],
    ) -> Result<(), CommError> {
        const OP: &str = "broadcast_slice";
        self.check_root(OP, root)?;
        let outgoing = self.rooted_outgoing(root, data);
        let sig = signature::<T>(OP, Some(root), Some(data.len()));
        let incoming = self.transport().exchange(&sig, outgoing)?;
        if self.rank() != root {
            copy_block_into(&incoming[root], data);
        }
        Ok(())
    }

    /// Collects every rank's `send` (any lengths) at the root: `Some(blocks)` there, with
    /// `blocks[r]` from rank r; `None` elsewhere.
    pub fn gather<T: Element>(
        &self,
        root: usize,
        send: &[T],
    ) -> Result<Option<Vec<Vec<T>>>, CommError> {
        const OP: &str = "gather";
        self.check_root(OP, root)?;
        let mut outgoing = empty_blocks(self.size());
        outgoing[root] = to_block(send);
        let incoming = self
            .transport()
            .exchange(&signature::<T>(OP, Some(root), None), outgoing)?;
        Ok((self.rank() == root).then(|| incoming.iter().map(|b| from_block(b)).collect()))
    }

    /// Hands `blocks[r]` (any lengths) from the root to rank r, which returns it. The root
    /// passes `Some` with one block per rank; other ranks pass `None` (ignored if `Some`).
    pub fn scatter<T: Element>(
        &self,
        root: usize,
        blocks: Option<&[Vec<T>]>,
    ) -> Result<Vec<T>, CommError> {
        const OP: &str = "scatter";
        self.check_root(OP, root)?;
        let outgoing = if self.rank() == root {
            let blocks = blocks.ok_or_else(|| CommError::InvalidArgument {
                op: OP,
                message: format!("the root (rank {root}) passed no blocks"),
            })?;
            if blocks.len() != self.size() {
                return Err(CommError::InvalidArgument {
                    op: OP,
                    message: format!(
                        "the root passed {} blocks for a group of {}",
                        blocks.len(),
                        self.size()
                    ),
                });
            }
            blocks.iter().map(|block| to_block(block)).collect()
        } else {
            empty_blocks(self.size())
        };
        let incoming = self
            .transport()
            .exchange(&signature::<T>(OP, Some(root), None), outgoing)?;
        Ok(from_block(&incoming[root]))
    }

    /// Every rank's `send` (any lengths), on every rank: `blocks[r]` from rank r.
    pub fn allgather<T: Element>(&self, send: &[T]) -> Result<Vec<Vec<T>>, CommError> {
        let outgoing = vec![to_block(send); self.size()];
        let incoming = self
            .transport()
            .exchange(&signature::<T>("allgather", None, None), outgoing)?;
        Ok(incoming.iter().map(|b| from_block(b)).collect())
    }

    /// Every rank's `send` (any lengths) concatenated in rank order, on every rank.
    pub fn allgather_concat<T: Element>(&self, send: &[T]) -> Result<Vec<T>, CommError> {
        Ok(self.allgather(send)?.concat())
    }

    /// Sums `data` over the ranks, in rank order, into the root's `data`; other ranks' data
    /// is unchanged. All lengths must be equal.
    pub fn reduce_sum<T: Summable>(&self, root: usize, data: &mut [T]) -> Result<(), CommError> {
        const OP: &str = "reduce_sum";
        self.check_root(OP, root)?;
        let mut outgoing = empty_blocks(self.size());
        if self.rank() != root {
            outgoing[root] = to_block(data);
        }
        let sig = signature::<T>(OP, Some(root), Some(data.len()));
        let incoming = self.transport().exchange(&sig, outgoing)?;
        if self.rank() == root {
            sum_in_rank_order(&incoming, root, data);
        }
        Ok(())
    }

    /// Sums `data` over the ranks, in rank order, into every rank's `data` (the same bits on
    /// every rank). All lengths must be equal.
    pub fn allreduce_sum<T: Summable>(&self, data: &mut [T]) -> Result<(), CommError> {
        self.reduce_sum(0, data)?;
        self.broadcast_slice(0, data)
    }

    /// Sends `send[j]` (any lengths) to rank j; returns `received[i]` from rank i.
    pub fn all_to_all<T: Element>(&self, send: &[Vec<T>]) -> Result<Vec<Vec<T>>, CommError> {
        const OP: &str = "all_to_all";
        if send.len() != self.size() {
            return Err(CommError::InvalidArgument {
                op: OP,
                message: format!("{} blocks for a group of {}", send.len(), self.size()),
            });
        }
        let outgoing = send.iter().map(|block| to_block(block)).collect();
        let incoming = self
            .transport()
            .exchange(&signature::<T>(OP, None, None), outgoing)?;
        Ok(incoming.iter().map(|b| from_block(b)).collect())
    }

    /// [`Comm::broadcast_slice`] on device buffers: the root's buffer is copied into every
    /// rank's buffer (equal lengths). Simulated devices share memory and copy directly;
    /// GPU buffers are staged through the host.
    pub fn broadcast_buffer<T: Element>(
        &self,
        root: usize,
        buffer: &mut Buffer<T>,
    ) -> Result<(), CommError> {
        with_host_view(buffer, |data| self.broadcast_slice(root, data))
    }

    /// [`Comm::reduce_sum`] on device buffers.
    pub fn reduce_sum_buffer<T: Summable>(
        &self,
        root: usize,
        buffer: &mut Buffer<T>,
    ) -> Result<(), CommError> {
        with_host_view(buffer, |data| self.reduce_sum(root, data))
    }

    /// [`Comm::allreduce_sum`] on device buffers.
    pub fn allreduce_sum_buffer<T: Summable>(
        &self,
        buffer: &mut Buffer<T>,
    ) -> Result<(), CommError> {
        with_host_view(buffer, |data| self.allreduce_sum(data))
    }

    /// [`Comm::allgather_concat`] on device buffers: a new buffer on this rank's device.
    pub fn allgather_buffer<T: Element>(&self, buffer: &Buffer<T>) -> Result<Buffer<T>, CommError> {
        let gathered = match buffer.as_host_slice() {
            Some(data) => self.allgather_concat(data)?,
            None => self.allgather_concat(&buffer.to_host_vec()?)?,
        };
        Ok(self.device.upload(&gathered)?)
    }
}

/// Runs `collective` on the buffer's elements as a host slice: in place for host memory,
/// else downloaded and uploaded back.
fn with_host_view<T: Element>(
    buffer: &mut Buffer<T>,
    collective: impl FnOnce(&mut [T]) -> Result<(), CommError>,
) -> Result<(), CommError> {
    if let Some(data) = buffer.as_host_slice_mut() {
        return collective(data);
    }
    let mut staged = buffer.to_host_vec()?;
    collective(&mut staged)?;
    buffer.copy_from_host(&staged)?;
    Ok(())
}

/// At the root: `data = x_0 + x_1 + ...`, added left to right, where `x_r` is
/// `incoming[r]` and the root's own contribution is `data` itself.
fn sum_in_rank_order<T: Summable>(incoming: &[Block], root: usize, data: &mut [T]) {
    if root == 0 {
        for block in &incoming[1..] {
            with_elements(block, |x: &[T]| add_into(data, x));
        }
        return;
    }
    let own = data.to_vec();
    with_elements(&incoming[0], |x: &[T]| data.copy_from_slice(x));
    for (rank, block) in incoming.iter().enumerate().skip(1) {
        if rank == root {
            add_into(data, &own);
        } else {
            with_elements(block, |x: &[T]| add_into(data, x));
        }
    }
}

fn add_into<T: Summable>(acc: &mut [T], x: &[T]) {
    for (a, &b) in acc.iter_mut().zip(x) {
        *a = a.add(b);
    }
}
