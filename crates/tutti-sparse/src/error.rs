//! The sparse solver's errors: each names what was wrong with the input and where.

use std::path::PathBuf;

/// Why a matrix could not be read, ordered, factored or solved with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SparseError {
    /// The arrays of a compressed matrix do not describe one.
    #[error("invalid compressed matrix: {detail}")]
    InvalidMatrix {
        /// What is inconsistent (lengths, order, an index out of range).
        detail: String,
    },
    /// An argument other than the matrix is invalid: an ordering's or a model's parameters,
    /// a tree that does not fit the matrix, a group of the wrong size.
    #[error("invalid argument: {detail}")]
    InvalidArgument {
        /// Which argument, its value and what was expected.
        detail: String,
    },
    /// A square matrix was needed.
    #[error("the matrix is {rows} x {cols}: a square matrix is needed")]
    NotSquare {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
    },
    /// An entry is NaN or infinite (a complex entry: either part).
    #[error("entry ({row}, {col}) is {value}: every entry must be finite")]
    NonFinite {
        /// Row of the entry.
        row: usize,
        /// Column of the entry.
        col: usize,
        /// The value (of a complex entry, the part that is not finite: the real part if it
        /// is not, else the imaginary part).
        value: f64,
    },
    /// A right-hand side entry is NaN or infinite.
    #[error("right-hand side {column}, row {row} is {value}: every entry must be finite")]
    NonFiniteRightHandSide {
        /// Row of the entry.
        row: usize,
        /// Which right-hand side (0-based column of B).
        column: usize,
        /// The value (of a complex entry, the part that is not finite: the real part if it
        /// is not, else the imaginary part).
        value: f64,
    },
    /// Vectors or right-hand sides of the wrong length.
    #[error("{what} has length {got}, expected {expected}")]
    LengthMismatch {
        /// Which vector.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The length needed.
        expected: usize,
    },
    /// The values given for a refactorization are not on the analysed pattern.
    #[error("the matrix's pattern differs from the analysed one: {detail}")]
    PatternMismatch {
        /// Where it differs.
        detail: String,
    },
    /// The matrix is structurally singular: no pivot can make it regular.
    #[error("the matrix is structurally singular: {detail}")]
    StructurallySingular {
        /// Which row or column has no entry, or how many are independent.
        detail: String,
    },
    /// A pivot was zero (or tiny) and perturbing it did not give a usable factorization.
    #[error(
        "the matrix is numerically singular: {perturbed} pivots were perturbed and the \
         solution's residual stayed at {residual:.3e}"
    )]
    NumericallySingular {
        /// Pivots perturbed.
        perturbed: usize,
        /// The relative residual reached after refinement.
        residual: f64,
    },
    /// A Matrix Market file that could not be parsed.
    #[error("{path}:{line}: {detail}", path = path.display())]
    MatrixMarket {
        /// The file.
        path: PathBuf,
        /// The line (1-based; 0 for the file as a whole).
        line: usize,
        /// What is wrong.
        detail: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}", path = path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The group's ranks could not run the factorization or solve (a rank failed or
    /// panicked, a collective was aborted).
    #[error("the group failed: {detail}")]
    Group {
        /// What happened.
        detail: String,
    },
    /// The memory plan does not fit (the planner's numbers), or the devices' memory could
    /// not be read.
    #[error(transparent)]
    Plan(#[from] tutti_plan::PlanError),
    /// A collective failed (another rank failed first, or arguments disagreed).
    #[error(transparent)]
    Comm(#[from] tutti_group::CommError),
    /// A size that does not fit in memory arithmetic.
    #[error("{what} is too large ({detail})")]
    TooLarge {
        /// What was being sized.
        what: &'static str,
        /// The numbers.
        detail: String,
    },
}

impl SparseError {
    /// An [`SparseError::InvalidMatrix`] with `detail`.
    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        Self::InvalidMatrix {
            detail: detail.into(),
        }
    }

    /// An [`SparseError::InvalidArgument`] with `detail`.
    pub(crate) fn argument(detail: impl Into<String>) -> Self {
        Self::InvalidArgument {
            detail: detail.into(),
        }
    }
}
