//! A [`Wire`] between threads of one process, standing in for processes in tests: the round
//! protocol runs unchanged over it, so its behaviour on failures, early returns and
//! mismatches is tested without MPI.

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use crate::wire::{Wire, WireError};

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

    fn all_to_all(&mut self, send: &[u8], piece: usize) -> Result<Vec<u8>, WireError> {
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
        send: &[&[u8]],
        receive_lens: &[usize],
    ) -> Result<Vec<Vec<u8>>, WireError> {
        for (dest, bytes) in send.iter().enumerate() {
            if !bytes.is_empty() {
                self.send(dest, bytes.to_vec())?;
            }
        }
        let mut received = Vec::with_capacity(receive_lens.len());
        for (source, &len) in receive_lens.iter().enumerate() {
            if len == 0 {
                received.push(Vec::new());
                continue;
            }
            let bytes = self.receive(source)?;
            if bytes.len() != len {
                return Err(WireError(format!(
                    "rank {source} sent {} bytes where {len} were announced",
                    bytes.len()
                )));
            }
            received.push(bytes);
        }
        Ok(received)
    }
}
