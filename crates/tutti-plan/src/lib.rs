//! Memory plans for tutti: before any work, decide where each large object lives and how
//! big a chunk may be, or refuse up front with the numbers.
//!
//! - A [`Budget`] says how many bytes each [`Tier`] may hold: every device (the smallest
//!   free memory over the devices, or the user's cap), the host, and the scratch disk.
//!   [`Budget::from_devices`] measures it; [`Budget::new`] states it exactly.
//! - A [`Planner`] places named [`ObjectSpec`]s on the device, host or disk tier, greedily
//!   in order of first use, after setting a working-set [`Headroom`] aside (the rule is
//!   written on [`Planner`]). The resulting [`Plan`] lists its [`Placement`]s and prints as
//!   a table.
//! - [`largest_chunk`] gives the largest number of items whose working set fits.
//! - A [`SpillStore`] is a private scratch directory for spill files, removed on drop.
//! - [`files::AtomicFile`]: an output file that appears complete or not at all (temporary
//!   beside it, flushed, renamed into place), for every workload's results and ledgers.
//! - [`npy`]: the one checked reader and writer of float64 / complex128 `.npy` files, which
//!   trusts no size in a header, shared by the workloads and the command line.
//!
//! All sizes are in bytes (`u64`). Every error is a [`PlanError`] whose message names the
//! objects and carries the numbers ("needs 41.2 GiB per device, 12.0 GiB free").
//!
//! This crate knows nothing of collectives or workloads; it reads devices and the host
//! through `tutti-backend` only.
//!
//! ```
//! use tutti_backend::Resources;
//! use tutti_plan::{largest_chunk, Budget, ObjectSpec, Planner, Tier};
//!
//! // Two simulated devices limited to 1 MiB each.
//! let resources = Resources::cpu(2).with_device_memory_cap(1 << 20);
//! let devices = resources.select()?;
//! let budget = Budget::from_devices(&devices, &resources)?;
//! assert_eq!(budget.device_bytes(), 1 << 20);
//!
//! let plan = Planner::new(budget).plan(&[
//!     ObjectSpec::shared("operator", 64 << 10, 4),      // 256 KiB, replicated
//!     ObjectSpec::per_device("environments", 1 << 20, 2), // 2 MiB per device
//! ])?;
//! assert_eq!(plan.tier_of("operator"), Some(Tier::Device));
//! assert_ne!(plan.tier_of("environments"), Some(Tier::Device));
//! println!("{plan}");
//!
//! // What is left per device bounds a chunk of 1 KiB items with 4 KiB fixed.
//! let chunking = largest_chunk(10_000, 1024, 4096, plan.free(Tier::Device))?;
//! assert_eq!(chunking.size, 764);
//! assert_eq!(chunking.count, 14);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod budget;
mod chunk;
mod error;
pub mod files;
pub mod npy;
mod object;
mod placement;
mod report;
mod spill;

pub use budget::{Budget, Tier};
pub use chunk::{largest_chunk, Chunking};
pub use error::{PlanError, Shortfall, TierShortfall};
pub use object::{ObjectSpec, Scope};
pub use placement::{Headroom, Placement, Plan, Planner};
pub use spill::{SpillReader, SpillStore, SpillWriter};
