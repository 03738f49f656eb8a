//! tutti's groups across processes: the same collectives as threads, over MPI.
//!
//! A [`tutti_group::Group::spanning`] over a [`SpanningFabric`] holds one rank in this
//! process; the other ranks are the other processes of the launch, running the same
//! program. Every collective of [`tutti_group::Comm`] works unchanged: it is one
//! [`tutti_group::Transport::exchange`], which this crate carries as a *round*
//! ([`session`](crate) protocol): a fixed-size header all-to-all saying what every rank is
//! doing, then the blocks. A rank that fails, panics or returns early joins the next round
//! saying so, and every process reports the first failure's rank and text, without
//! `MPI_Abort`, so a host program's communicator stays usable.
//!
//! - [`Wire`]: the byte mover under the protocol: MPI ([`mpi::MpiWire`], feature `mpi`), or
//!   threads standing in for processes ([`loopback()`]), which is how the protocol is
//!   tested without MPI.
//! - [`launch`]: whether a launcher (`mpirun`, `mpiexec`, `srun`) started this process.
//! - [`node_share`]: a process's part of its node (cores, host memory, which GPU).
//! - [`mpi::World`] (feature `mpi`): initialise or adopt MPI, and the fabric of its groups.
//!
//! Reductions stay in tutti (rank-ordered sums at the root), never `MPI_Allreduce` on
//! floats, so results are bitwise the same as with threads.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tutti_backend::Resources;
//! use tutti_group::{CommError, Group};
//! use tutti_mpi::{loopback, SpanningFabric};
//!
//! // Three "processes" (threads here), each with its own spanning group of one rank.
//! let wires = loopback(3, Duration::from_secs(60));
//! let sums: Vec<f64> = std::thread::scope(|scope| {
//!     let handles: Vec<_> = wires
//!         .into_iter()
//!         .map(|wire| {
//!             scope.spawn(move || {
//!                 let device = Resources::cpu(1).select()?.remove(0);
//!                 let group = Group::spanning(Arc::new(SpanningFabric::new(wire)), device);
//!                 let mut results = group.run(|comm| {
//!                     let mut x = [comm.rank() as f64 + 1.0];
//!                     comm.allreduce_sum(&mut x)?;
//!                     Ok::<_, CommError>(x[0])
//!                 })?;
//!                 Ok::<_, Box<dyn std::error::Error + Send + Sync>>(results.remove(0))
//!             })
//!         })
//!         .collect();
//!     handles.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
//! });
//! assert_eq!(sums, vec![6.0, 6.0, 6.0]);
//! ```
#![deny(missing_docs)]

mod fabric;
#[cfg_attr(not(feature = "mpi"), allow(dead_code))] // used by mpi::World; tested always
mod handshake;
mod header;
pub mod launch;
mod loopback;
#[cfg_attr(not(feature = "mpi"), allow(dead_code))] // used by mpi::MpiWire; tested always
mod pool;
mod session;
mod share;
mod wire;

#[cfg(feature = "mpi")]
pub mod mpi;

pub use fabric::SpanningFabric;
pub use loopback::{loopback, on_loopback_processes, LoopbackWire, LOOPBACK_TIMEOUT};
pub use share::{launch_share, node_share, Node};
pub use wire::{Wire, WireError};
