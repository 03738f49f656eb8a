//! A [`Wire`] between threads of one process, standing in for processes in tests: the round
//! protocol runs unchanged over it, so its behaviour on failures, early returns and
//! mismatches is tested without MPI.

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use tutti_backend::{BackendError, Resources};
use tutti_group::{Block, Group};

use crate::fabric::SpanningFabric;
use crate::wire::{Wire, WireError};

/// How long a loopback receive waits in [`on_loopback_processes`] before failing: a hang
/// becomes an error instead of hanging a test.
pub const LOOPBACK_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `work` on `size` threads standing in for processes: each gets its own
/// [`Group::spanning`] group of one rank (on one simulated device) over a loopback wire, as
/// each process of an MPI job would. Returns each "process"'s value in rank order. This is
/// how code written for groups spanning processes is tested without MPI.
///
/// Errors: the simulated device could not be made. A panic in `work` propagates.
pub fn on_loopback_processes<T, F>(size: usize, work: F) -> Result<Vec<T>, BackendError>
where
    T: Send,
    F: Fn(&Group) -> T + Sync,
{
    let devices = (0..size)
        .map(|_| Resources::cpu(1).select().map(|mut d| d.remove(0)))
        .collect::<Result<Vec<_>, _>>()?;
    let work = &work;
    Ok(std::thread::scope(|scope| {
        let handles: Vec<_> = loopback(size, LOOPBACK_TIMEOUT)
            .into_iter()
            .zip(devices)
            .map(|(wire, device)| {
                scope.spawn(move || {
                    let group = Group::spanning(Arc::new(SpanningFabric::new(wire)), device);
                    work(&group)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| match handle.join() {
                Ok(value) => value,
                Err(payload) => std::panic::resume_unwind(payload),
            })
            .collect()
    }))
}

/// One rank's end of a loopback among `size` threads.
pub struct LoopbackWire {
    rank: usize,
    to: Vec<Sender<Vec<u8>>>,
    from: Vec<Receiver<Vec<u8>>>,
    timeout: Duration,
}

/// `size` connected loopback wires, rank r at index r. A receive waiting longer than
/// `timeout` fails (the loopback's watchdog), and so does one from a rank whose wire was
/// dropped (a "process" that died).
pub fn loopback(size: usize, timeout: Duration) -> Vec<LoopbackWire> {
    // channels[s][d] carries messages from rank s to rank d, in order.
    let mut senders: Vec<Vec<Sender<Vec<u8>>>> = (0..size).map(|_| Vec::new()).collect();
    let mut receivers: Vec<Vec<Option<Receiver<Vec<u8>>>>> = (0..size)
        .map(|_| (0..size).map(|_| None).collect())
        .collect();
    for (source, outgoing) in senders.iter_mut().enumerate() {
        for receiving in receivers.iter_mut() {
            let (send, receive) = channel();
            outgoing.push(send);
            receiving[source] = Some(receive);
        }
    }
    senders
        .into_iter()
        .zip(receivers)
        .enumerate()
        .map(|(rank, (to, from))| LoopbackWire {
            rank,
            to,
            from: from.into_iter().flatten().collect(),
            timeout,
        })
        .collect()
}

impl LoopbackWire {
    fn send(&self, dest: usize, bytes: Vec<u8>) -> Result<(), WireError> {
        self.to[dest]
            .send(bytes)
            .map_err(|_| WireError(format!("rank {dest} is gone (its wire was dropped)")))
    }

    fn receive(&self, source: usize) -> Result<Vec<u8>, WireError> {
        self.from[source]
            .recv_timeout(self.timeout)
            .map_err(|err| match err {
                RecvTimeoutError::Timeout => WireError(format!(
                    "rank {} waited {:?} for rank {source}",
                    self.rank, self.timeout
                )),
                RecvTimeoutError::Disconnected => {
                    WireError(format!("rank {source} is gone (its wire was dropped)"))
                }
            })
    }
}

impl Wire for LoopbackWire {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.to.len()
    }

    fn all_to_all(&mut self, send: Vec<u8>, piece: usize) -> Result<Vec<u8>, WireError> {
        if piece.checked_mul(self.size()) != Some(send.len()) {
            return Err(WireError(format!(
                "{} bytes to send are not {} pieces of {piece}",
                send.len(),
                self.size()
            )));
        }
        for (dest, bytes) in send.chunks_exact(piece).enumerate() {
            self.send(dest, bytes.to_vec())?;
        }
        let mut received = Vec::with_capacity(send.len());
        for source in 0..self.size() {
            let bytes = self.receive(source)?;
            if bytes.len() != piece {
                return Err(WireError(format!(
                    "rank {source} sent {} bytes where {piece} were expected",
                    bytes.len()
                )));
            }
            received.extend_from_slice(&bytes);
        }
        Ok(received)
    }

    fn all_to_all_v(
        &mut self,
        send: &[Block],
        receive_lens: &[usize],
    ) -> Result<Vec<Block>, WireError> {
        for (dest, bytes) in send.iter().enumerate() {
            if !bytes.is_empty() {
                self.send(dest, bytes.to_vec())?;
            }
        }
        let mut received = Vec::with_capacity(receive_lens.len());
        for (source, &len) in receive_lens.iter().enumerate() {
            if len == 0 {
                received.push(Block::from(&[][..]));
                continue;
            }
            let bytes = self.receive(source)?;
            if bytes.len() != len {
                return Err(WireError(format!(
                    "rank {source} sent {} bytes where {len} were announced",
                    bytes.len()
                )));
            }
            received.push(Block::from(bytes));
        }
        Ok(received)
    }
}
