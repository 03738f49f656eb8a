//! The fit crate's error type.

use std::path::PathBuf;

use tutti_backend::BackendError;
use tutti_group::{CommError, GroupError, RunError};
use tutti_plan::PlanError;

/// Everything that can go wrong in a fit or a campaign.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FitError {
    /// An argument with a value the function does not accept.
    #[error("invalid {argument}: {message}")]
    InvalidArgument {
        /// The argument.
        argument: &'static str,
        /// What is wrong and what was expected.
        message: String,
    },
    /// The devices could not be selected: zero devices, an unknown ordinal, a GPU request
    /// without CUDA, a cap larger than a device (see [`tutti_backend::Resources::select`]).
    #[error("devices: {0}")]
    Devices(#[source] BackendError),
    /// The fit's buffers do not fit the memory its resources allow (the plan's numbers are in
    /// the message), or the budget could not be measured.
    #[error("memory plan: {0}")]
    Plan(#[from] PlanError),
    /// A collective of the group failed.
    #[error("collective: {0}")]
    Comm(#[from] CommError),
    /// A user's experiment failed to evaluate.
    #[error("experiment {index} failed: {message}")]
    Experiment {
        /// The experiment's position in the input.
        index: usize,
        /// Its message.
        message: String,
    },
    /// The residuals or Jacobian contain NaN or Inf.
    #[error("experiment {index} returned a non-finite {what} at parameters {parameters:?}")]
    NonFinite {
        /// The experiment's position in the input.
        index: usize,
        /// `"residual"` or `"Jacobian entry"`.
        what: &'static str,
        /// The parameters it was evaluated at.
        parameters: Vec<f64>,
    },
    /// The ledger file is not a tutti ledger, or is damaged; it is left untouched.
    #[error("ledger {path}: {reason}; it was left untouched")]
    BadLedger {
        /// The ledger.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Another process holds the ledger.
    #[error("ledger {path} is in use by another process (lock {lock} is held)")]
    LedgerLocked {
        /// The ledger.
        path: PathBuf,
        /// Its lock file.
        lock: PathBuf,
    },
    /// A recorded task's input differs from the item given now.
    #[error(
        "task '{task_id}': its input changed since it was recorded in the ledger \
         (recorded hash {recorded}, now {now}); use a new ledger, or remove the task from it"
    )]
    InputChanged {
        /// The task.
        task_id: String,
        /// The hash in the ledger.
        recorded: String,
        /// The hash of the item given now.
        now: String,
    },
    /// A ledger exists but resuming was switched off.
    #[error(
        "ledger {path} already exists and resume is off: it is never overwritten; \
         resume it, or choose another path"
    )]
    LedgerExists {
        /// The ledger.
        path: PathBuf,
    },
    /// A buffer whose size comes from the input (an experiment's residuals and Jacobian) is
    /// larger than the host's memory or could not be reserved; nothing was allocated.
    #[error("out of memory: cannot allocate {bytes} bytes for {what}")]
    OutOfMemory {
        /// What the buffer was for (it names the experiment and its dimensions).
        what: String,
        /// The bytes asked for (`u64::MAX` when the size itself overflows).
        bytes: u64,
    },
    /// A rank of the group panicked or could not start.
    #[error("{0}")]
    Group(String),
    /// A rank in another process of a group spanning processes (MPI) failed; its error
    /// crossed as text.
    #[error("rank {rank} failed: {message}")]
    RankFailed {
        /// The rank that failed first.
        rank: usize,
        /// Its error's text.
        message: String,
    },
    /// An I/O error.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl FitError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn invalid(argument: &'static str, message: impl Into<String>) -> Self {
        Self::InvalidArgument {
            argument,
            message: message.into(),
        }
    }
}

impl From<BackendError> for FitError {
    fn from(err: BackendError) -> Self {
        Self::Devices(err)
    }
}

impl From<GroupError> for FitError {
    fn from(err: GroupError) -> Self {
        match err {
            GroupError::Empty => Self::Devices(BackendError::ZeroDevices),
            GroupError::Backend(err) => Self::Devices(err),
            other => Self::Group(other.to_string()),
        }
    }
}

impl From<RunError<FitError>> for FitError {
    /// The first failing rank's own error; a panic or a thread that did not start as
    /// [`FitError::Group`] with the rank and its message.
    fn from(err: RunError<FitError>) -> Self {
        match err {
            RunError::Failed { error, .. } => error,
            RunError::Remote { rank, message } => Self::RankFailed { rank, message },
            other => Self::Group(other.to_string()),
        }
    }
}
