//! A stack's cores read once per pass by this process and shared by its ranks.
//!
//! Every rank of a sweep needs every layer's core at every site, in the same order. If each
//! rank opened its own streams, a train on disk would be read once per rank and pass. The
//! ranks of a process share one [`SharedPass`] per pass instead: the first rank to want a
//! site reads it from the layers' streams (started at the first read, so the reverse pass
//! holds nothing during the forward one), the other ranks take the same cores, and the site
//! leaves memory once every rank has taken it (the last taker keeps the cores themselves
//! instead of copying them).
//!
//! A rank reads a new site only while fewer than [`LEAD`] read sites wait for slower ranks,
//! so at most that many sites' cores wait in memory whatever the timing. A rank that leaves
//! the pass early (an error, a panic) gives up its share of every waiting site, and a rank
//! that waits for the others polls its group's abort, so a failure elsewhere never leaves it
//! waiting. A stream error goes to the rank that read it; the others leave with
//! [`CommError::Aborted`] once that rank's failure has aborted the group (so the group
//! reports the original error).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use tutti_group::{AbortProbe, CommError};

use crate::layer::{CoreStream, Layer};
use crate::stack::{layer_tensor, Stack};
use crate::tensor::Tensor;
use crate::train::Core;
use crate::{Scalar, SweepError};

/// How many read sites may wait for slower ranks at once.
pub(crate) const LEAD: usize = 2;

/// How often a waiting rank looks at its group's abort.
const POLL: Duration = Duration::from_millis(5);

/// The two passes of a sweep over one stack, each shared by this process's ranks.
pub(crate) struct StackPasses<'a, T> {
    /// Left to right, site 0 first.
    pub forward: SharedPass<'a, T>,
    /// Right to left, site n-1 first.
    pub reverse: SharedPass<'a, T>,
}

impl<'a, T: Scalar> StackPasses<'a, T> {
    /// Both passes over `stack` (whose layers are `layers`) for this process's `ranks` ranks.
    pub fn new(stack: &'a Stack, layers: &'a [&'a dyn Layer<T>], ranks: usize) -> Self {
        Self {
            forward: SharedPass::new(stack, layers, false, ranks),
            reverse: SharedPass::new(stack, layers, true, ranks),
        }
    }
}

/// One pass over a stack's sites (forwards or in reverse), shared by `ranks` ranks.
pub(crate) struct SharedPass<'a, T> {
    stack: &'a Stack,
    layers: &'a [&'a dyn Layer<T>],
    reverse: bool,
    state: Mutex<PassState<'a, T>>,
    changed: Condvar,
}

/// What the ranks of a pass share, under its lock.
struct PassState<'a, T> {
    /// The layers' streams once started; `None` before the first read, while a rank reads
    /// (the reader holds them outside the lock) and after the last rank left.
    streams: Option<Vec<CoreStream<'a, T>>>,
    /// Whether the streams were started.
    started: bool,
    /// Whether a rank is reading the next site.
    reading: bool,
    /// Sites read and not yet taken by every rank still in the pass, in pass order.
    waiting: VecDeque<WaitingSite<T>>,
    /// The pass position (0 for the first site of the pass) of `waiting`'s front.
    first: usize,
    /// Ranks still in the pass: those that have not joined yet count, so nothing is dropped
    /// before they take it.
    live: usize,
    /// A read failed; nothing more will be read.
    failed: bool,
}

/// One site's cores (every layer's, top layer first) and how many ranks still want them.
struct WaitingSite<T> {
    cores: Arc<Vec<Core<T>>>,
    remaining: usize,
}

impl<'a, T: Scalar> SharedPass<'a, T> {
    /// A pass over `stack`'s sites for `ranks` ranks (this process's ranks of the group):
    /// nothing is read until a rank asks.
    pub fn new(
        stack: &'a Stack,
        layers: &'a [&'a dyn Layer<T>],
        reverse: bool,
        ranks: usize,
    ) -> Self {
        Self {
            stack,
            layers,
            reverse,
            state: Mutex::new(PassState {
                streams: None,
                started: false,
                reading: false,
                waiting: VecDeque::new(),
                first: 0,
                live: ranks,
                failed: false,
            }),
            changed: Condvar::new(),
        }
    }

    /// One rank's place in the pass; `probe` tells it when its group was aborted. Each of
    /// the `ranks` ranks joins once.
    pub fn join<'p>(&'p self, probe: AbortProbe<'p>) -> PassReader<'p, 'a, T> {
        PassReader {
            pass: self,
            probe,
            next: 0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, PassState<'a, T>> {
        // A rank that panics while holding the lock leaves consistent counts behind (every
        // change is made before anything that can panic), so the state is still usable.
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// The site at pass position `position`.
    fn site_at(&self, position: usize) -> usize {
        if self.reverse {
            self.stack.sites - 1 - position
        } else {
            position
        }
    }

    /// Every layer's next core from `streams`: one site, top layer first.
    fn read_site(
        &self,
        streams: &mut [CoreStream<'a, T>],
        site: usize,
    ) -> Result<Vec<Core<T>>, SweepError> {
        streams
            .iter_mut()
            .enumerate()
            .map(|(l, stream)| {
                stream.next().ok_or_else(|| SweepError::LengthMismatch {
                    detail: format!(
                        "layer {l} ({}) ended before site {site}",
                        self.layers[l].name()
                    ),
                })?
            })
            .collect()
    }

    /// Reads the next site of the pass (the one after the waiting ones) outside the lock,
    /// starting the streams first if nobody has, and queues it for every live rank. While
    /// it reads, the others wait; if the read fails (or panics) nothing more is read.
    fn read_next<'g>(
        &'g self,
        mut state: MutexGuard<'g, PassState<'a, T>>,
    ) -> Result<MutexGuard<'g, PassState<'a, T>>, SweepError> {
        let position = state.first + state.waiting.len();
        let site = self.site_at(position);
        let streams = state.streams.take();
        if state.started && streams.is_none() {
            // Only the last rank to leave drops the streams, and this one has not left.
            state.failed = true;
            self.changed.notify_all();
            return Err(SweepError::LengthMismatch {
                detail: "the stack's streams were closed while a rank still read".into(),
            });
        }
        state.started = true;
        state.reading = true;
        drop(state);
        let on_panic = FailOnPanic { pass: self };
        let started = match streams {
            Some(streams) => Ok(streams),
            None => self
                .layers
                .iter()
                .map(|layer| layer.stream(self.reverse))
                .collect::<Result<Vec<_>, _>>(),
        };
        let (streams, read) = match started {
            Ok(mut streams) => {
                let read = self.read_site(&mut streams, site);
                (Some(streams), read)
            }
            Err(error) => (None, Err(error)),
        };
        drop(on_panic);
        let mut state = self.lock();
        state.reading = false;
        state.streams = streams;
        self.changed.notify_all();
        match read {
            Ok(cores) => {
                let remaining = state.live;
                state.waiting.push_back(WaitingSite {
                    cores: Arc::new(cores),
                    remaining,
                });
                Ok(state)
            }
            Err(error) => {
                state.failed = true;
                Err(error)
            }
        }
    }
}

/// Marks a pass failed when the rank reading it panics (a layer's stream panicked), so the
/// other ranks stop waiting for the read and leave once the group is aborted.
struct FailOnPanic<'g, 'a, T> {
    pass: &'g SharedPass<'a, T>,
}

impl<T> Drop for FailOnPanic<'_, '_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut state = self
                .pass
                .state
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            state.reading = false;
            state.failed = true;
            self.pass.changed.notify_all();
        }
    }
}

/// One rank's reading of a [`SharedPass`]: the sites in pass order, one call each.
pub(crate) struct PassReader<'p, 'a, T> {
    pass: &'p SharedPass<'a, T>,
    probe: AbortProbe<'p>,
    /// This rank's next pass position.
    next: usize,
}

impl<T: Scalar> PassReader<'_, '_, T> {
    /// The next site's cores as tensors with the axes of [`crate::tensor::Axis`]: layer l
    /// is `[Left(l), Phys(l), Phys(l+1), Right(l)]`. `site` is the site the caller expects
    /// (checked: the sites come in pass order).
    ///
    /// Errors: a stream's error or a stream that ended early (to the rank that read it),
    /// [`CommError::Aborted`] when the group failed while this rank waited.
    pub fn next_site(&mut self, site: usize) -> Result<Vec<Tensor<T>>, SweepError> {
        let pass = self.pass;
        let position = self.next;
        if position >= pass.stack.sites || pass.site_at(position) != site {
            return Err(SweepError::LengthMismatch {
                detail: format!(
                    "site {site} asked for where the pass is at position {position} of {}",
                    pass.stack.sites
                ),
            });
        }
        let cores = self.take(position)?;
        self.next += 1;
        let shapes = pass.stack.shapes.iter().map(|layer| layer[site]);
        cores
            .into_iter()
            .zip(shapes)
            .enumerate()
            .map(|(l, (core, shape))| layer_tensor(l, site, shape, core))
            .collect()
    }

    /// The cores at pass position `position`: taken from the waiting sites, or read.
    fn take(&mut self, position: usize) -> Result<Vec<Core<T>>, SweepError> {
        let pass = self.pass;
        let mut state = pass.lock();
        loop {
            if position < state.first + state.waiting.len() {
                // Entries leave only once every live rank took them, and this one has not.
                let index = position - state.first;
                let entry = &mut state.waiting[index];
                entry.remaining -= 1;
                let cores = Arc::clone(&entry.cores);
                if entry.remaining == 0 {
                    // Taken in order by every rank: only the front can be done.
                    state.waiting.pop_front();
                    state.first += 1;
                    pass.changed.notify_all();
                }
                drop(state);
                // The last taker gets the cores themselves unless another rank still copies.
                return Ok(Arc::try_unwrap(cores).unwrap_or_else(|shared| (*shared).clone()));
            }
            if state.failed {
                // The reader's failure aborts the group; leave then, so it is the one reported.
                if self.probe.is_aborted() {
                    return Err(SweepError::Comm(CommError::Aborted));
                }
            } else if !state.reading && state.waiting.len() < LEAD {
                state = pass.read_next(state)?;
                continue;
            } else if self.probe.is_aborted() {
                return Err(SweepError::Comm(CommError::Aborted));
            }
            state = pass
                .changed
                .wait_timeout(state, POLL)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poison| poison.into_inner().0);
        }
    }
}

impl<T> Drop for PassReader<'_, '_, T> {
    /// Leaves the pass: this rank's share of every site it did not take is given up (the
    /// ones nobody else wants leave memory), and the last rank closes the streams (a `.npy`
    /// loader stops).
    fn drop(&mut self) {
        let pass = self.pass;
        let mut state = pass
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let first = state.first;
        for (index, entry) in state.waiting.iter_mut().enumerate() {
            if first + index >= self.next {
                entry.remaining = entry.remaining.saturating_sub(1);
            }
        }
        while state
            .waiting
            .front()
            .is_some_and(|entry| entry.remaining == 0)
        {
            state.waiting.pop_front();
            state.first += 1;
        }
        state.live = state.live.saturating_sub(1);
        let streams = if state.live == 0 {
            state.streams.take()
        } else {
            None
        };
        pass.changed.notify_all();
        drop(state);
        // Dropped outside the lock: a loader thread is joined here.
        drop(streams);
    }
}
