//! The crate's error type.

use thiserror::Error;
use tutti_backend::BackendError;
use tutti_group::{CommError, GroupError, RunError};
use tutti_plan::PlanError;

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
    /// The SCF did not converge within the iteration limit. The message names the criterion
    /// that was used: the energy and density changes, or, with `gradient_tolerance` set, the
    /// energy change and the orbital gradient; the quantity the criterion did not use is
    /// reported too, without a target.
    #[error(
        "RHF did not converge in {iterations} iterations {}",
        not_converged_detail(
            *.delta_energy,
            *.delta_density,
            *.orbital_gradient,
            *.energy_tolerance,
            *.density_tolerance,
            *.gradient_tolerance,
        )
    )]
    NotConverged {
        /// Iterations done.
        iterations: usize,
        /// |E_n - E_{n-1}| at the last iteration, hartree.
        delta_energy: f64,
        /// max |P_n - P_{n-1}| at the last iteration.
        delta_density: f64,
        /// The orbital gradient of the last iteration's Fock matrix and density,
        /// `|X^T (F P S - S P F) X|_F / sqrt(2)` (PySCF's `conv_tol_grad` norm).
        orbital_gradient: f64,
        /// The energy target, hartree.
        energy_tolerance: f64,
        /// The density target (the criterion when `gradient_tolerance` is `None`).
        density_tolerance: f64,
        /// The orbital-gradient target when that criterion was used
        /// ([`crate::ScfOptions::gradient_tolerance`]); `None`: the density criterion was.
        gradient_tolerance: Option<f64>,
    },
    /// A linear-algebra step failed (an eigendecomposition that did not converge).
    #[error("linear algebra: {0}")]
    LinearAlgebra(String),
    /// Selecting the devices or forming the group failed (zero devices, an unknown ordinal,
    /// a GPU request without CUDA, a cap larger than a device).
    #[error("devices: {0}")]
    Group(#[from] GroupError),
    /// A device operation failed (e.g. starting a device's thread pool).
    #[error("device: {0}")]
    Backend(#[from] BackendError),
    /// A collective between the ranks failed (another rank's own error is reported instead
    /// where there is one).
    #[error("collective: {0}")]
    Comm(#[from] CommError),
    /// The memory plan cannot hold the run's large objects within the caps.
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
        /// The operating system's message.
        message: String,
    },
    /// The failure a test asked for with [`crate::scf::Fault`] (never raised otherwise).
    #[doc(hidden)]
    #[error("injected fault on rank {rank}")]
    InjectedFault {
        /// The rank that failed.
        rank: usize,
    },
    /// A file could not be read.
    #[error("cannot read `{path}`: {message}")]
    Io {
        /// The path.
        path: String,
        /// The system's message.
        message: String,
    },
}

impl AdjointError {
    /// The device error inside a device-selection ([`AdjointError::Group`]) or device
    /// ([`AdjointError::Backend`]) error, for callers that map it on (a C status); any
    /// other error is given back unchanged.
    pub fn into_backend(self) -> std::result::Result<BackendError, Self> {
        match self {
            Self::Backend(error) | Self::Group(GroupError::Backend(error)) => Ok(error),
            other => Err(other),
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, AdjointError>;

impl From<RunError<AdjointError>> for AdjointError {
    /// The original error of the first failing rank, unwrapped.
    fn from(err: RunError<AdjointError>) -> Self {
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

/// The part of [`AdjointError::NotConverged`]'s message after the iteration count: the
/// criterion used, the last values of its quantities with their targets, then the quantity
/// it did not use.
fn not_converged_detail(
    delta_energy: f64,
    delta_density: f64,
    orbital_gradient: f64,
    energy_tolerance: f64,
    density_tolerance: f64,
    gradient_tolerance: Option<f64>,
) -> String {
    let energy =
        format!("last energy change {delta_energy:.3e} Eh (target {energy_tolerance:.1e})");
    match gradient_tolerance {
        None => format!(
            "(criterion: energy and density changes): {energy}, density change \
             {delta_density:.3e} (target {density_tolerance:.1e}); orbital gradient \
             {orbital_gradient:.3e}"
        ),
        Some(gradient_tolerance) => format!(
            "(criterion: energy change and orbital gradient): {energy}, orbital gradient \
             {orbital_gradient:.3e} (target {gradient_tolerance:.1e}); density change \
             {delta_density:.3e}"
        ),
    }
}

/// An [`AdjointError::InvalidArgument`].
pub(crate) fn invalid(argument: &'static str, message: impl Into<String>) -> AdjointError {
    AdjointError::InvalidArgument {
        argument,
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::AdjointError;

    fn not_converged(gradient_tolerance: Option<f64>) -> AdjointError {
        AdjointError::NotConverged {
            iterations: 7,
            delta_energy: 2.5e-6,
            delta_density: 3e-4,
            orbital_gradient: 4e-3,
            energy_tolerance: 1e-10,
            density_tolerance: 1e-8,
            gradient_tolerance,
        }
    }

    #[test]
    fn not_converged_names_the_criterion_used_and_the_other_quantity() {
        for (gradient_tolerance, expected) in [
            (
                None,
                "RHF did not converge in 7 iterations (criterion: energy and density changes): \
                 last energy change 2.500e-6 Eh (target 1.0e-10), density change 3.000e-4 \
                 (target 1.0e-8); orbital gradient 4.000e-3",
            ),
            (
                Some(1e-5),
                "RHF did not converge in 7 iterations (criterion: energy change and orbital \
                 gradient): last energy change 2.500e-6 Eh (target 1.0e-10), orbital gradient \
                 4.000e-3 (target 1.0e-5); density change 3.000e-4",
            ),
        ] {
            assert_eq!(not_converged(gradient_tolerance).to_string(), expected);
        }
    }
}
