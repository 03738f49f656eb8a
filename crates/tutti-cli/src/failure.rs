//! How a subcommand fails, and the exit status that tells a script which way
//! (docs/cli.md): 2 when what the user gave cannot be used, 1 when the computation failed.
//!
//! Library errors are classified by their kind, not by where they were returned: a request
//! that cannot be met (bad options, unreadable or malformed inputs, devices that do not
//! exist, a memory plan that does not fit the caps and devices) is [`Failure::Input`];
//! what goes wrong while computing (not converged, a device or collective failure, running
//! out of memory mid-run, a rank's panic) and writing the outputs is
//! [`Failure::Computation`]. The C ABI's statuses (tutti-capi's `status.rs` and the
//! workloads' maps) draw the same line: its invalid arguments are input here.

use std::fmt;

use tutti_adjoint::AdjointError;
use tutti_backend::BackendError;
use tutti_fit::FitError;
use tutti_fmm::FmmError;
use tutti_group::GroupError;
use tutti_plan::PlanError;
use tutti_sweep::SweepError;

/// Why a subcommand failed, with the message for the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Bad usage or bad input: exit status 2 (as clap gives for a command line it cannot
    /// parse). Nothing was computed; changing the command or its inputs is the fix.
    Input(String),
    /// The computation failed: exit status 1.
    Computation(String),
}

impl Failure {
    /// The exit status for bad usage or bad input.
    pub const INPUT_EXIT: u8 = 2;
    /// The exit status for a failed computation.
    pub const COMPUTATION_EXIT: u8 = 1;

    /// A failure caused by what the user gave.
    pub fn input(message: impl Into<String>) -> Self {
        Self::Input(message.into())
    }

    /// A failure of the computation itself.
    pub fn computation(message: impl Into<String>) -> Self {
        Self::Computation(message.into())
    }

    /// The process's exit status: 2 for input, 1 for a computation.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Input(_) => Self::INPUT_EXIT,
            Self::Computation(_) => Self::COMPUTATION_EXIT,
        }
    }

    /// What went wrong, for people.
    pub fn message(&self) -> &str {
        match self {
            Self::Input(message) | Self::Computation(message) => message,
        }
    }

    /// The same kind of failure, its message prefixed with `context: `.
    pub fn context(self, context: impl fmt::Display) -> Self {
        match self {
            Self::Input(message) => Self::Input(format!("{context}: {message}")),
            Self::Computation(message) => Self::Computation(format!("{context}: {message}")),
        }
    }

    /// The same message as a computation failure: for errors whose kind says "input" in
    /// general but that come from writing an output here (a file error of a library that
    /// also reads files).
    pub fn in_output(self) -> Self {
        Self::Computation(self.message().to_string())
    }

    /// `error` as input when `input`, else as a computation failure.
    fn of(input: bool, error: impl fmt::Display) -> Self {
        if input {
            Self::Input(error.to_string())
        } else {
            Self::Computation(error.to_string())
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// A message with no kind attached is a computation failure: input errors are marked
/// where they are found, with [`Failure::input`].
impl From<String> for Failure {
    fn from(message: String) -> Self {
        Self::Computation(message)
    }
}

/// Whether a device error is the request's fault: no such device, kind or ordinal, zero
/// devices, a cap of zero or beyond a device, GPUs from a build without CUDA, a scratch
/// directory that is not one. Device and driver failures, running out of memory and
/// inconsistent device operations are computation failures.
fn backend_is_input(error: &BackendError) -> bool {
    matches!(
        error,
        BackendError::ZeroDevices
            | BackendError::MoreDevicesThanExist { .. }
            | BackendError::NoDevices { .. }
            | BackendError::UnknownOrdinal { .. }
            | BackendError::CapExceedsDevice { .. }
            | BackendError::ZeroCap { .. }
            | BackendError::CudaNotBuilt
            | BackendError::Scratch { .. }
    )
}

/// Whether a plan error is a refusal of the problem on these resources, before any work:
/// what does not fit the devices, host and scratch caps (or the devices' memory) is input,
/// fixed by other flags or a smaller problem. Spill-file failures while computing are not.
fn plan_is_input(error: &PlanError) -> bool {
    match error {
        PlanError::ZeroDevices
        | PlanError::SizeOverflow { .. }
        | PlanError::HeadroomTooLarge { .. }
        | PlanError::DoesNotFit { .. }
        | PlanError::ChunkDoesNotFit { .. } => true,
        PlanError::Backend(error) => backend_is_input(error),
        _ => false,
    }
}

fn group_is_input(error: &GroupError) -> bool {
    match error {
        GroupError::Empty => true,
        GroupError::Backend(error) => backend_is_input(error),
        _ => false,
    }
}

impl From<BackendError> for Failure {
    fn from(error: BackendError) -> Self {
        Self::of(backend_is_input(&error), error)
    }
}

impl From<PlanError> for Failure {
    fn from(error: PlanError) -> Self {
        Self::of(plan_is_input(&error), error)
    }
}

impl From<GroupError> for Failure {
    fn from(error: GroupError) -> Self {
        Self::of(group_is_input(&error), error)
    }
}

/// Bad bodies, options and `.npy` files are input (a file error writing the outputs is
/// marked with [`Failure::in_output`] where it happens).
impl From<FmmError> for Failure {
    fn from(error: FmmError) -> Self {
        let input = match &error {
            FmmError::InvalidArgument { .. }
            | FmmError::LengthMismatch { .. }
            | FmmError::NonFinite { .. }
            | FmmError::CoincidentBodies { .. }
            | FmmError::File { .. } => true,
            FmmError::Group(error) => group_is_input(error),
            FmmError::Backend(error) => backend_is_input(error),
            FmmError::Plan(error) => plan_is_input(error),
            _ => false,
        };
        Self::of(input, error)
    }
}

/// Bad trains, stacks, options and files are input, as is a factorisation that fails on
/// them (the C ABI's invalid argument) and a plan that does not fit; a file error
/// writing the result is marked with [`Failure::in_output`] where it happens.
impl From<SweepError> for Failure {
    fn from(error: SweepError) -> Self {
        let input = match &error {
            SweepError::Empty { .. }
            | SweepError::BadShape { .. }
            | SweepError::BondMismatch { .. }
            | SweepError::PhysicalMismatch { .. }
            | SweepError::LengthMismatch { .. }
            | SweepError::InvalidStack { .. }
            | SweepError::NonFinite { .. }
            | SweepError::InvalidOption { .. }
            | SweepError::Factorization { .. }
            | SweepError::File { .. }
            | SweepError::Io { .. } => true,
            SweepError::Group(error) => group_is_input(error),
            SweepError::Backend(error) => backend_is_input(error),
            SweepError::Plan(error) => plan_is_input(error),
            _ => false,
        };
        Self::of(input, error)
    }
}

/// Bad molecules, basis sets, elements, options and unreadable files are input; an SCF
/// that does not converge is a computation failure.
impl From<AdjointError> for Failure {
    fn from(error: AdjointError) -> Self {
        let input = match &error {
            AdjointError::InvalidArgument { .. }
            | AdjointError::Xyz { .. }
            | AdjointError::BasisParse { .. }
            | AdjointError::UnknownBasis { .. }
            | AdjointError::MissingElement { .. }
            | AdjointError::UnknownElement { .. }
            | AdjointError::AngularMomentum { .. }
            | AdjointError::Io { .. } => true,
            AdjointError::Group(error) => group_is_input(error),
            AdjointError::Backend(error) => backend_is_input(error),
            AdjointError::Plan(error) => plan_is_input(error),
            _ => false,
        };
        Self::of(input, error)
    }
}

/// Bad arguments, a damaged ledger, a ledger recorded for other inputs or one that may not
/// be resumed are input; a ledger locked by another process, experiments that fail and
/// I/O while a campaign runs are computation failures.
impl From<FitError> for Failure {
    fn from(error: FitError) -> Self {
        let input = match &error {
            FitError::InvalidArgument { .. }
            | FitError::BadLedger { .. }
            | FitError::InputChanged { .. }
            | FitError::LedgerExists { .. } => true,
            FitError::Devices(error) => backend_is_input(error),
            FitError::Plan(error) => plan_is_input(error),
            _ => false,
        };
        Self::of(input, error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(failure: impl Into<Failure>, code: u8) {
        let failure = failure.into();
        assert_eq!(failure.exit_code(), code, "{failure}");
    }

    #[test]
    fn library_errors_map_to_their_exit_codes() {
        let (input, computation) = (Failure::INPUT_EXIT, Failure::COMPUTATION_EXIT);
        check(BackendError::ZeroDevices, input);
        check(
            BackendError::UnknownOrdinal {
                ordinal: 9,
                count: 1,
                kind: "cpu",
            },
            input,
        );
        check(BackendError::CudaNotBuilt, input);
        check(
            BackendError::OutOfMemory {
                device: "cpu:0".into(),
                requested: 2,
                free: 1,
            },
            computation,
        );
        check(
            PlanError::DoesNotFit {
                shortfalls: Vec::new(),
            },
            input,
        );
        check(
            PlanError::ScratchLimitExceeded {
                name: "block".into(),
                requested: 2,
                used: 0,
                limit: 1,
            },
            computation,
        );
        check(
            FmmError::Plan(PlanError::Backend(BackendError::ZeroDevices)),
            input,
        );
        check(
            FmmError::Group(GroupError::Backend(BackendError::Cuda {
                device: "driver".into(),
                message: "lost".into(),
            })),
            computation,
        );
        check(
            FmmError::File {
                path: "p.npy".into(),
                message: "not an .npy file".into(),
            },
            input,
        );
        check(
            FmmError::RankPanicked {
                rank: 1,
                message: "bug".into(),
            },
            computation,
        );
        check(
            SweepError::InvalidOption {
                name: "cutoff",
                value: "2".into(),
                expected: "in [0, 1)",
            },
            input,
        );
        check(
            SweepError::OutOfMemory {
                what: "sketch".into(),
                bytes: 1,
            },
            computation,
        );
        check(
            AdjointError::UnknownElement {
                symbol: "Xx".into(),
            },
            input,
        );
        check(
            AdjointError::NotConverged {
                iterations: 1,
                delta_energy: 1.0,
                delta_density: 1.0,
                orbital_gradient: 1.0,
                energy_tolerance: 1e-10,
                density_tolerance: 1e-8,
                gradient_tolerance: None,
            },
            computation,
        );
        check(
            AdjointError::NotConverged {
                iterations: 1,
                delta_energy: 1.0,
                delta_density: 1.0,
                orbital_gradient: 1.0,
                energy_tolerance: 1e-10,
                density_tolerance: 1e-8,
                gradient_tolerance: Some(1e-5),
            },
            computation,
        );
        check(FitError::Devices(BackendError::ZeroDevices), input);
        check(
            FitError::BadLedger {
                path: "l.json".into(),
                reason: "not valid JSON".into(),
            },
            input,
        );
        check(
            FitError::LedgerLocked {
                path: "l.json".into(),
                lock: "l.json.lock".into(),
            },
            computation,
        );
        check(
            String::from("a collective returned a wrong result"),
            computation,
        );
        check(Failure::input("`--out DIR` is needed"), input);
    }

    #[test]
    fn context_and_in_output_keep_the_message() {
        let failure = Failure::input("no such file").context("--xyz `a.xyz`");
        assert_eq!(
            failure,
            Failure::Input("--xyz `a.xyz`: no such file".into())
        );
        assert_eq!(failure.clone().in_output().exit_code(), 1);
        assert_eq!(failure.in_output().message(), "--xyz `a.xyz`: no such file");
    }
}
