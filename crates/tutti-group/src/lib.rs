//! A group of ranks, one per device: run a closure on every rank, exchange data with
//! collectives, and abort cleanly when any rank fails.
//!
//! [`Group::run`] is the one entry point: it runs a closure on every rank (one thread per
//! device; a group of one runs inline) and returns every rank's result, or the ORIGINAL error
//! of the first rank that failed. A failure aborts the group: ranks blocked in a collective
//! wake with [`CommError::Aborted`], so nothing hangs.
//!
//! Collectives ([`Comm`]) are built on one primitive, [`Transport::exchange`] (an all-to-all
//! of byte blocks), so a transport spanning processes (MPI) implements that trait and reuses
//! every collective unchanged. Reductions sum in rank order, so results do not depend on
//! timing.
//!
//! This crate knows nothing of tensors, particles or any workload.
//!
//! ```
//! use tutti_backend::{GpuUse, Resources};
//! use tutti_group::{CommError, Group};
//!
//! let group = Group::from_resources(&Resources::cpu(3), GpuUse::HostOnly)?;
//! let sums = group.run(|comm| {
//!     let mut x = vec![comm.rank() as f64 + 1.0; 4];
//!     comm.allreduce_sum(&mut x)?;
//!     Ok::<_, CommError>(x[0])
//! })?;
//! assert_eq!(sums, vec![6.0, 6.0, 6.0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod comm;
mod error;
mod group;
mod hybrid;
mod local;
mod transport;

pub use comm::{AbortProbe, Comm};
pub use error::{CommError, RunError};
pub use group::{Group, GroupError};
pub use transport::{Block, Fabric, Signature, Transport};
