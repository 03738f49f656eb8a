//! The one error type of the sweep workload.

use std::path::PathBuf;

use tutti_backend::BackendError;
use tutti_group::{CommError, GroupError, RunError};
use tutti_plan::PlanError;

/// Why a tensor-train operation failed. Every variant names the argument and the expected
/// value, so a caller can fix the input without reading the code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SweepError {
    /// A train with no sites, or a stack with no trains.
    #[error("{what} is empty: {expected}")]
    Empty {
        /// What was empty.
        what: String,
        /// What was expected instead.
        expected: &'static str,
    },
    /// A core has the wrong number of axes or a zero dimension.
    #[error("{train}: site {site}: core shape {shape:?} is invalid: {expected}")]
    BadShape {
        /// Which train.
        train: String,
        /// The site (0-based).
        site: usize,
        /// The shape found.
        shape: Vec<usize>,
        /// What was expected.
        expected: String,
    },
    /// Neighbouring cores disagree on the bond between them (or an outer bond is not 1).
    #[error("{train}: bond mismatch at site {site}: {detail}")]
    BondMismatch {
        /// Which train.
        train: String,
        /// The site whose left bond disagrees (0-based).
        site: usize,
        /// Both dimensions, in words.
        detail: String,
    },
    /// Two layers of a stack disagree on the physical leg between them.
    #[error(
        "physical dimension mismatch at site {site}: layer {upper} has input dimension {upper_in} \
         but layer {lower} has output dimension {lower_out}"
    )]
    PhysicalMismatch {
        /// The site (0-based).
        site: usize,
        /// The layer on the left in mathematical order (the operator applied last).
        upper: usize,
        /// Its input dimension.
        upper_in: usize,
        /// The layer right of it.
        lower: usize,
        /// Its output dimension.
        lower_out: usize,
    },
    /// Trains of a stack (or of an inner product) have different numbers of sites.
    #[error("length mismatch: {detail}")]
    LengthMismatch {
        /// Both lengths, in words.
        detail: String,
    },
    /// A stack whose shape has no meaning (an MPS in the middle, or bra times ket).
    #[error("invalid stack: {detail}")]
    InvalidStack {
        /// What is wrong.
        detail: String,
    },
    /// A NaN or infinite entry.
    #[error("{train}: site {site}: entry {index} is not finite ({value})")]
    NonFinite {
        /// Which train.
        train: String,
        /// The site (0-based).
        site: usize,
        /// The flat C-order index of the entry.
        index: usize,
        /// The value, printed.
        value: String,
    },
    /// An option out of range.
    #[error("invalid option {name} = {value}: {expected}")]
    InvalidOption {
        /// The option.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is allowed.
        expected: &'static str,
    },
    /// A `.npy` file or train directory that cannot be used.
    #[error("{path}: {detail}")]
    File {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// An input/output failure.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A dense factorisation failed (it does not converge on non-finite input).
    #[error("{what} failed at site {site}")]
    Factorization {
        /// Which factorisation.
        what: &'static str,
        /// The site (0-based).
        site: usize,
    },
    /// Memory for a buffer whose size comes from the input (a core read from a file, the
    /// sketch) could not be reserved; nothing was allocated.
    #[error("out of memory: cannot allocate {bytes} bytes for {what}")]
    OutOfMemory {
        /// What the buffer was for.
        what: String,
        /// The bytes asked for (saturated at `u64::MAX` when the size itself overflows).
        bytes: u64,
    },
    /// Selecting the devices or forming the group failed (zero devices, an unknown ordinal,
    /// a GPU request without CUDA, a cap larger than a device).
    #[error("device group: {0}")]
    Group(#[from] GroupError),
    /// A device operation failed (reading a device's memory for the plan, its thread pool).
    #[error("device: {0}")]
    Backend(#[from] BackendError),
    /// A collective failed (another rank's error is reported instead where there is one).
    #[error("collective: {0}")]
    Comm(#[from] CommError),
    /// The memory plan could not fit the sweep's large objects in the budget of the devices,
    /// the host and the scratch disk (the message carries the numbers).
    #[error("memory plan: {0}")]
    Plan(#[from] PlanError),
    /// A rank panicked (a bug: please report it).
    #[error("rank {rank} panicked: {message}")]
    RankPanicked {
        /// The rank.
        rank: usize,
        /// The panic message.
        message: String,
    },
    /// A rank in another process of a group spanning processes (MPI) failed; its error
    /// crossed as text.
    #[error("rank {rank} failed: {message}")]
    RankFailed {
        /// The rank that failed first.
        rank: usize,
        /// Its error's text.
        message: String,
    },
    /// A rank's thread could not be started.
    #[error("rank {rank} could not start: {message}")]
    RankStart {
        /// The rank.
        rank: usize,
        /// Why.
        message: String,
    },
}

impl SweepError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn file(path: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        Self::File {
            path: path.into(),
            detail: detail.into(),
        }
    }
}

impl From<RunError<SweepError>> for SweepError {
    /// The original error of the first failing rank, unwrapped.
    fn from(error: RunError<SweepError>) -> Self {
        match error {
            RunError::Failed { error, .. } => error,
            RunError::Panicked { rank, message } => Self::RankPanicked { rank, message },
            RunError::Remote { rank, message } => Self::RankFailed { rank, message },
            other => Self::RankStart {
                rank: other.rank(),
                message: other.to_string(),
            },
        }
    }
}
