//! The plan's error type.

use std::fmt;
use std::path::PathBuf;

use tutti_backend::{format_bytes, BackendError};

use crate::Tier;

/// Everything that can go wrong when budgeting, placing, chunking or spilling.
///
/// Every message carries the numbers involved, formatted with
/// [`tutti_backend::format_bytes`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// A budget for zero devices.
    #[error("a budget needs at least one device, got 0")]
    ZeroDevices,
    /// Two objects of one plan share a name.
    #[error("object '{name}' is listed twice: every object of a plan needs its own name")]
    DuplicateObject {
        /// The repeated name.
        name: String,
    },
    /// An object whose size does not fit in 64 bits.
    #[error(
        "object '{name}': {count} x {bytes_each} bytes{per} overflows a 64-bit byte count",
        per = if *devices > 1 { format!(" x {devices} devices") } else { String::new() }
    )]
    SizeOverflow {
        /// The object.
        name: String,
        /// Bytes of one item.
        bytes_each: u64,
        /// Items.
        count: u64,
        /// Devices it is multiplied by (1 when not).
        devices: usize,
    },
    /// The working-set headroom alone exceeds a tier's budget.
    #[error(
        "the working set needs {}, {} free",
        tier.describe(*needed), format_bytes(*available)
    )]
    HeadroomTooLarge {
        /// The tier.
        tier: Tier,
        /// Bytes of headroom asked for (per device on the device tier).
        needed: u64,
        /// Bytes the tier has (per device on the device tier).
        available: u64,
    },
    /// Objects that fit on no tier allowed to them, after the objects used before them
    /// were placed.
    #[error("the plan does not fit: {}", list(shortfalls))]
    DoesNotFit {
        /// One entry per object that could not be placed, in order of use.
        shortfalls: Vec<Shortfall>,
    },
    /// Not even a chunk of one item fits.
    #[error(
        "a chunk of one item needs {} ({} fixed + {} per item), {} available",
        format_bytes(fixed_bytes.saturating_add(*bytes_per_item)),
        format_bytes(*fixed_bytes), format_bytes(*bytes_per_item), format_bytes(*available)
    )]
    ChunkDoesNotFit {
        /// Bytes needed whatever the chunk size.
        fixed_bytes: u64,
        /// Bytes needed per item of the chunk.
        bytes_per_item: u64,
        /// Bytes available.
        available: u64,
    },
    /// A spill file name that is empty, a path, or hidden.
    #[error("invalid spill file name {name:?}: {reason}")]
    InvalidSpillName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A spill file created twice.
    #[error("spill file '{name}' already exists in {}", dir.display())]
    SpillFileExists {
        /// The file's name.
        name: String,
        /// The spill directory.
        dir: PathBuf,
    },
    /// A spill file opened or removed that was never created.
    #[error("no spill file '{name}' in {}", dir.display())]
    SpillFileNotFound {
        /// The file's name.
        name: String,
        /// The spill directory.
        dir: PathBuf,
    },
    /// A write that would take the spill files past the scratch limit.
    #[error(
        "writing {} to spill file '{name}' exceeds the scratch limit of {} ({} already written)",
        format_bytes(*requested), format_bytes(*limit), format_bytes(*used)
    )]
    ScratchLimitExceeded {
        /// The file written.
        name: String,
        /// Bytes of the refused write.
        requested: u64,
        /// Bytes held by all spill files of the store before the write.
        used: u64,
        /// The store's limit.
        limit: u64,
    },
    /// An I/O error on the spill directory or a spill file.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done ("creating the spill directory", "reading spill file").
        what: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An error from the backend while measuring devices, host or scratch space.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// Why one object could not be placed: for each tier it was allowed, what it needed there
/// and what was still free.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shortfall {
    /// The object's name.
    pub object: String,
    /// The tiers it was allowed, fastest first.
    pub tiers: Vec<TierShortfall>,
}

/// One tier of a [`Shortfall`]. Bytes are per device on [`Tier::Device`], for the node
/// otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TierShortfall {
    /// The tier.
    pub tier: Tier,
    /// Bytes the object needs there.
    pub needed: u64,
    /// Bytes still free there when the object's turn came.
    pub free: u64,
}

impl fmt::Display for Shortfall {
    /// `'mpo' needs 41.2 GiB per device, 12.0 GiB free; or 82.4 GiB of host memory, ...`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}' needs ", self.object)?;
        for (i, tier) in self.tiers.iter().enumerate() {
            if i > 0 {
                f.write_str("; or ")?;
            }
            write!(
                f,
                "{}, {} free",
                tier.tier.describe(tier.needed),
                format_bytes(tier.free)
            )?;
        }
        Ok(())
    }
}

fn list(shortfalls: &[Shortfall]) -> String {
    shortfalls
        .iter()
        .map(Shortfall::to_string)
        .collect::<Vec<_>>()
        .join("; and ")
}
