//! Errors of collectives and of group runs.

use std::fmt;

use tutti_backend::BackendError;

/// An error inside a collective or a transport.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommError {
    /// Another rank failed or panicked; this rank was released from the collective it waited
    /// in. The group reports the other rank's original error, not this one.
    #[error("aborted: another rank of the group failed")]
    Aborted,
    /// The ranks did not call the same collective with compatible arguments.
    #[error("collective mismatch: {0}")]
    Mismatch(String),
    /// A rank returned from its closure while others waited for it in a collective.
    #[error("rank {rank} returned while rank(s) {waiting:?} waited for it in {op}")]
    RankLeft {
        /// The rank that returned.
        rank: usize,
        /// The ranks left waiting.
        waiting: Vec<usize>,
        /// The collective they waited in.
        op: String,
    },
    /// An invalid argument to a collective (a root out of range, a wrong block count).
    #[error("invalid argument to {op}: {message}")]
    InvalidArgument {
        /// The collective.
        op: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A device error while staging a buffer.
    #[error("device error in a collective: {0}")]
    Backend(String),
    /// A transport failure (e.g. an MPI error).
    #[error("transport error: {0}")]
    Transport(String),
    /// The transport cannot do what was asked (e.g. split a group spanning processes).
    #[error("not supported: {0}")]
    Unsupported(String),
}

impl From<BackendError> for CommError {
    fn from(err: BackendError) -> Self {
        Self::Backend(err.to_string())
    }
}

/// Why a group run failed: the ORIGINAL error of the first rank that failed.
///
/// Ranks released by the abort (their collectives returned [`CommError::Aborted`]) are not
/// reported; their errors are consequences of this one.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError<E> {
    /// A rank's closure returned an error.
    Failed {
        /// The rank.
        rank: usize,
        /// The error it returned.
        error: E,
    },
    /// A rank's closure panicked.
    Panicked {
        /// The rank.
        rank: usize,
        /// The panic message.
        message: String,
    },
    /// A rank in another process failed or panicked; its error crossed as text. Every
    /// process of the run gets this (the failing one gets its own [`RunError::Failed`]).
    Remote {
        /// The rank that failed first.
        rank: usize,
        /// Its error's text (a panic's reads `panicked: ...`).
        message: String,
    },
    /// A rank's thread could not be started.
    Spawn {
        /// The rank whose thread failed to start.
        rank: usize,
        /// The operating system's message.
        message: String,
    },
}

impl<E> RunError<E> {
    /// The rank that failed first.
    pub fn rank(&self) -> usize {
        match self {
            Self::Failed { rank, .. }
            | Self::Panicked { rank, .. }
            | Self::Remote { rank, .. }
            | Self::Spawn { rank, .. } => *rank,
        }
    }

    /// The error the failing rank returned, if it returned one (rather than panicking).
    pub fn into_error(self) -> Option<E> {
        match self {
            Self::Failed { error, .. } => Some(error),
            _ => None,
        }
    }

    /// Converts the rank's error with `f`, keeping rank and panic information.
    pub fn map_err<F, M: FnOnce(E) -> F>(self, map: M) -> RunError<F> {
        match self {
            Self::Failed { rank, error } => RunError::Failed {
                rank,
                error: map(error),
            },
            Self::Panicked { rank, message } => RunError::Panicked { rank, message },
            Self::Remote { rank, message } => RunError::Remote { rank, message },
            Self::Spawn { rank, message } => RunError::Spawn { rank, message },
        }
    }
}

impl<E: fmt::Display> fmt::Display for RunError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failed { rank, error } => write!(f, "rank {rank} failed: {error}"),
            Self::Panicked { rank, message } => write!(f, "rank {rank} panicked: {message}"),
            Self::Remote { rank, message } => write!(f, "rank {rank} failed: {message}"),
            Self::Spawn { rank, message } => {
                write!(f, "could not start the thread of rank {rank}: {message}")
            }
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for RunError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Failed { error, .. } => Some(error),
            _ => None,
        }
    }
}
