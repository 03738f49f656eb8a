//! The one error type of the crate.

use tutti_backend::BackendError;
use tutti_group::{CommError, GroupError, RunError};
use tutti_plan::PlanError;

/// Why an FMM evaluation (or reading and writing its files) failed.
///
/// Bad input is reported before any work, naming the argument and the expected value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FmmError {
    /// An option or argument is out of its range.
    #[error("invalid `{argument}`: expected {expected}, got {got}")]
    InvalidArgument {
        /// The argument or option, as spelled in the API (e.g. `order`).
        argument: &'static str,
        /// The accepted values, in words (e.g. "an integer in 1..=12").
        expected: String,
        /// The value given.
        got: String,
    },
    /// `positions` and `masses` describe different numbers of bodies.
    #[error("mismatched lengths: `positions` has {positions} bodies, `masses` has {masses}; expected equal lengths")]
    LengthMismatch {
        /// Bodies in `positions` (rows of the (N,3) array).
        positions: usize,
        /// Entries of `masses`.
        masses: usize,
    },
    /// A position, strength or target coordinate is NaN or infinite.
    #[error("`{argument}` of body {index} is {value}; expected finite values")]
    NonFinite {
        /// `positions`, `masses` or `targets`.
        argument: &'static str,
        /// The body's (or target's) index in the input.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// Two distinct bodies share a position and there is no softening, so their mutual
    /// force would be infinite.
    #[error("bodies {first} and {second} are both at {position:?}: their interaction is infinite without softening; merge them or set a softening length > 0")]
    CoincidentBodies {
        /// The smaller input index of the pair.
        first: usize,
        /// The larger input index of the pair.
        second: usize,
        /// The shared position.
        position: [f64; 3],
    },
    /// Selecting the devices or forming the group failed.
    #[error("device group: {0}")]
    Group(#[from] GroupError),
    /// A device operation failed.
    #[error("device: {0}")]
    Backend(#[from] BackendError),
    /// A collective failed (another rank's error is reported instead where there is one).
    #[error("collective: {0}")]
    Comm(#[from] CommError),
    /// The memory plan could not fit the working set.
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
    /// Reading or writing a `.npy` file failed or the file has the wrong shape or type.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What went wrong, with the expected shape or type where it applies.
        message: String,
    },
}

impl FmmError {
    /// An [`FmmError::InvalidArgument`] from its three parts.
    pub(crate) fn invalid(
        argument: &'static str,
        expected: impl Into<String>,
        got: impl ToString,
    ) -> Self {
        Self::InvalidArgument {
            argument,
            expected: expected.into(),
            got: got.to_string(),
        }
    }
}

impl From<RunError<FmmError>> for FmmError {
    /// The original error of the first failing rank, unwrapped.
    fn from(err: RunError<FmmError>) -> Self {
        match err {
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
