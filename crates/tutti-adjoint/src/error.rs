//! The crate's error type.

use thiserror::Error;

/// Everything that can go wrong in `tutti-adjoint`: bad input (named, with the expected value)
/// or a computation that did not reach its target.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AdjointError {
    /// An argument is out of its valid range.
    #[error("invalid argument `{argument}`: {message}")]
    InvalidArgument {
        /// Which argument.
        argument: &'static str,
        /// What is wrong and what was expected.
        message: String,
    },
    /// An XYZ file could not be parsed.
    #[error("XYZ input, line {line}: {message}")]
    Xyz {
        /// 1-based line number.
        line: usize,
        /// What is wrong and what was expected.
        message: String,
    },
    /// A basis file (NWChem format) could not be parsed.
    #[error("basis `{source_name}`, line {line}: {message}")]
    BasisParse {
        /// The basis name or file path.
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong and what was expected.
        message: String,
    },
    /// No shipped basis set has this name.
    #[error("unknown basis set `{name}`; shipped basis sets: {known}; or give a path to an NWChem-format file")]
    UnknownBasis {
        /// The name asked for.
        name: String,
        /// The shipped names, comma separated.
        known: String,
    },
    /// The basis set has no functions for an element of the molecule.
    #[error("basis set `{basis}` has no functions for element {symbol} (Z = {charge}); it covers {covered}")]
    MissingElement {
        /// The basis set name.
        basis: String,
        /// The element symbol.
        symbol: String,
        /// The nuclear charge.
        charge: u32,
        /// The elements the basis covers.
        covered: String,
    },
    /// An unknown chemical element symbol.
    #[error("unknown element `{symbol}` (supported: H to Kr)")]
    UnknownElement {
        /// The symbol as given.
        symbol: String,
    },
    /// A shell with an angular momentum above the supported maximum.
    #[error("angular momentum l = {l} is not supported (maximum l = {max})")]
    AngularMomentum {
        /// The angular momentum asked for.
        l: usize,
        /// The largest supported angular momentum.
        max: usize,
    },
    /// The SCF did not converge within the iteration limit.
    #[error("RHF did not converge in {iterations} iterations: last energy change {delta_energy:.3e} Eh (target {energy_tolerance:.1e}), density change {delta_density:.3e} (target {density_tolerance:.1e})")]
    NotConverged {
        /// Iterations done.
        iterations: usize,
        /// |E_n - E_{n-1}| at the last iteration, hartree.
        delta_energy: f64,
        /// max |P_n - P_{n-1}| at the last iteration.
        delta_density: f64,
        /// The energy target, hartree.
        energy_tolerance: f64,
        /// The density target.
        density_tolerance: f64,
    },
    /// A linear-algebra step failed (an eigendecomposition that did not converge).
    #[error("linear algebra: {0}")]
    LinearAlgebra(String),
    /// A dedicated thread pool larger than [`crate::max_threads`] was asked for.
    #[error("threads = {requested} is too many: at most {limit} (4 per core, at least 64); use 0 for the global pool")]
    TooManyThreads {
        /// The thread count asked for.
        requested: usize,
        /// The largest count accepted on this machine ([`crate::max_threads`]).
        limit: usize,
    },
    /// A thread pool could not be started.
    #[error("thread pool: {0}")]
    ThreadPool(String),
    /// A file could not be read.
    #[error("cannot read `{path}`: {message}")]
    Io {
        /// The path.
        path: String,
        /// The system's message.
        message: String,
    },
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, AdjointError>;

/// An [`AdjointError::InvalidArgument`].
pub(crate) fn invalid(argument: &'static str, message: impl Into<String>) -> AdjointError {
    AdjointError::InvalidArgument {
        argument,
        message: message.into(),
    }
}
