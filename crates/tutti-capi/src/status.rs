//! The status every entry point returns, and the error a call fails with.

use std::ffi::{c_char, c_int, CStr};
use std::fmt;

use tutti_backend::BackendError;

/// The status every tutti function returns, as an `int`.
///
/// `TUTTI_OK` (0) is success; every error kind is negative. The values are stable: later
/// versions add new kinds below the lowest one and never renumber, so a caller must treat
/// any negative value as an error, known or not. `tutti_last_error()` says what went wrong.
#[allow(non_camel_case_types)] // the variants are the C names
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum TuttiStatus {
    /// Success.
    TUTTI_OK = 0,
    /// An argument has a value the function does not accept: an unknown kind, a count or
    /// index out of range, a zero or negative size, an empty input, a non-finite number, a
    /// pointer that tutti did not allocate given to `tutti_free_c`.
    TUTTI_ERROR_INVALID_ARGUMENT = -1,
    /// A pointer argument that must not be NULL is NULL.
    TUTTI_ERROR_NULL_POINTER = -2,
    /// The request needs something this build or this machine does not have, e.g. GPUs
    /// from a library built without the `cuda` feature.
    TUTTI_ERROR_UNSUPPORTED = -3,
    /// A device failed or could not be opened (e.g. the CUDA driver reported an error).
    TUTTI_ERROR_DEVICE = -4,
    /// Memory ran out: on a device, under a memory cap, or on the host.
    TUTTI_ERROR_OUT_OF_MEMORY = -5,
    /// Reading or writing a file or directory failed (inputs, outputs, scratch space).
    TUTTI_ERROR_IO = -6,
    /// tutti panicked: a bug in tutti, caught at the boundary. The message says where.
    TUTTI_ERROR_PANIC = -7,
    /// A user callback reported failure (a non-zero return) or returned non-finite values
    /// where the computation could not go around them (e.g. at a fit's starting point).
    TUTTI_ERROR_CALLBACK = -8,
    /// An iterative computation did not reach its tolerance within its iteration limit
    /// (e.g. an SCF); the message gives the last changes and the targets.
    TUTTI_ERROR_NOT_CONVERGED = -9,
    /// Another process of the MPI job (a `TuttiWorld`) failed; the message names its rank
    /// and gives its error's text. Every other process of the call returns this.
    TUTTI_ERROR_REMOTE = -10,
    /// The matrix is singular: structurally (an empty row or column: no pivot order makes
    /// it regular) or numerically (pivots were perturbed and the solution's backward error
    /// stayed above 1e-10). The message says which.
    TUTTI_ERROR_SINGULAR = -11,
}

impl TuttiStatus {
    /// Every status, in declaration order.
    pub const fn all() -> [TuttiStatus; 12] {
        [
            Self::TUTTI_OK,
            Self::TUTTI_ERROR_INVALID_ARGUMENT,
            Self::TUTTI_ERROR_NULL_POINTER,
            Self::TUTTI_ERROR_UNSUPPORTED,
            Self::TUTTI_ERROR_DEVICE,
            Self::TUTTI_ERROR_OUT_OF_MEMORY,
            Self::TUTTI_ERROR_IO,
            Self::TUTTI_ERROR_PANIC,
            Self::TUTTI_ERROR_CALLBACK,
            Self::TUTTI_ERROR_NOT_CONVERGED,
            Self::TUTTI_ERROR_REMOTE,
            Self::TUTTI_ERROR_SINGULAR,
        ]
    }

    /// The value a C caller sees.
    pub const fn code(self) -> c_int {
        self as c_int
    }

    /// The status with this value, if there is one.
    pub fn from_code(code: c_int) -> Option<Self> {
        Self::all().into_iter().find(|status| status.code() == code)
    }

    /// The C name, e.g. `"TUTTI_ERROR_NULL_POINTER"`.
    pub const fn name(self) -> &'static CStr {
        match self {
            Self::TUTTI_OK => c"TUTTI_OK",
            Self::TUTTI_ERROR_INVALID_ARGUMENT => c"TUTTI_ERROR_INVALID_ARGUMENT",
            Self::TUTTI_ERROR_NULL_POINTER => c"TUTTI_ERROR_NULL_POINTER",
            Self::TUTTI_ERROR_UNSUPPORTED => c"TUTTI_ERROR_UNSUPPORTED",
            Self::TUTTI_ERROR_DEVICE => c"TUTTI_ERROR_DEVICE",
            Self::TUTTI_ERROR_OUT_OF_MEMORY => c"TUTTI_ERROR_OUT_OF_MEMORY",
            Self::TUTTI_ERROR_IO => c"TUTTI_ERROR_IO",
            Self::TUTTI_ERROR_PANIC => c"TUTTI_ERROR_PANIC",
            Self::TUTTI_ERROR_CALLBACK => c"TUTTI_ERROR_CALLBACK",
            Self::TUTTI_ERROR_NOT_CONVERGED => c"TUTTI_ERROR_NOT_CONVERGED",
            Self::TUTTI_ERROR_REMOTE => c"TUTTI_ERROR_REMOTE",
            Self::TUTTI_ERROR_SINGULAR => c"TUTTI_ERROR_SINGULAR",
        }
    }
}

/// The name of a status value, e.g. `"TUTTI_ERROR_NULL_POINTER"` for -2, or
/// `"TUTTI_ERROR_UNKNOWN"` for a value this version does not know.
///
/// Never NULL. The string is static: the caller must not free it.
#[no_mangle]
pub extern "C" fn tutti_status_name(status: c_int) -> *const c_char {
    TuttiStatus::from_code(status)
        .map_or(c"TUTTI_ERROR_UNKNOWN", TuttiStatus::name)
        .as_ptr()
}

/// Why a call failed: the status it returns and the message [`tutti_last_error`] gives.
///
/// [`tutti_last_error`]: crate::tutti_last_error
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: TuttiStatus,
    message: String,
}

impl Error {
    /// An error of kind `status`. `status` must not be `TUTTI_OK`.
    pub fn new(status: TuttiStatus, message: impl Into<String>) -> Self {
        debug_assert_ne!(
            status,
            TuttiStatus::TUTTI_OK,
            "an error needs an error status"
        );
        Self {
            status,
            message: message.into(),
        }
    }

    /// `TUTTI_ERROR_INVALID_ARGUMENT` with this message, which names the argument.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT, message)
    }

    /// `TUTTI_ERROR_NULL_POINTER` for the argument called `argument`.
    pub fn null_pointer(argument: &str) -> Self {
        Self::new(
            TuttiStatus::TUTTI_ERROR_NULL_POINTER,
            format!("argument `{argument}` is NULL"),
        )
    }

    /// The status the call returns.
    pub fn status(&self) -> TuttiStatus {
        self.status
    }

    /// What went wrong, for people.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({})",
            self.message,
            self.status.name().to_string_lossy()
        )
    }
}

impl std::error::Error for Error {}

impl From<BackendError> for Error {
    fn from(error: BackendError) -> Self {
        use TuttiStatus::*;
        let status = match &error {
            BackendError::ZeroDevices
            | BackendError::MoreDevicesThanExist { .. }
            | BackendError::UnknownOrdinal { .. }
            | BackendError::CapExceedsDevice { .. }
            | BackendError::ZeroCap { .. }
            | BackendError::LengthMismatch { .. } => TUTTI_ERROR_INVALID_ARGUMENT,
            BackendError::CudaNotBuilt => TUTTI_ERROR_UNSUPPORTED,
            BackendError::OutOfMemory { .. } => TUTTI_ERROR_OUT_OF_MEMORY,
            BackendError::Scratch { .. } | BackendError::Io { .. } => TUTTI_ERROR_IO,
            // NoDevices, Cuda, and kinds the backend adds later.
            _ => TUTTI_ERROR_DEVICE,
        };
        Self::new(status, error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_zero_for_ok_and_distinct_negatives_for_errors() {
        assert_eq!(TuttiStatus::TUTTI_OK.code(), 0);
        let mut codes: Vec<c_int> = TuttiStatus::all()[1..].iter().map(|s| s.code()).collect();
        assert!(codes.iter().all(|&code| code < 0), "{codes:?}");
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), TuttiStatus::all().len() - 1);
    }

    #[test]
    fn codes_round_trip_and_names_match_the_variants() {
        for status in TuttiStatus::all() {
            assert_eq!(TuttiStatus::from_code(status.code()), Some(status));
            assert_eq!(
                status.name().to_str().ok(),
                Some(format!("{status:?}").as_str())
            );
        }
        assert_eq!(TuttiStatus::from_code(1), None);
        assert_eq!(TuttiStatus::from_code(-1000), None);
    }

    #[test]
    fn status_name_is_never_null() {
        for (code, expected) in [
            (0, "TUTTI_OK"),
            (-2, "TUTTI_ERROR_NULL_POINTER"),
            (-7, "TUTTI_ERROR_PANIC"),
            (-9, "TUTTI_ERROR_NOT_CONVERGED"),
            (42, "TUTTI_ERROR_UNKNOWN"),
        ] {
            let name = tutti_status_name(code);
            assert!(!name.is_null());
            // SAFETY: tutti_status_name returns a pointer to a static NUL-terminated string.
            let name = unsafe { CStr::from_ptr(name) };
            assert_eq!(name.to_str().ok(), Some(expected));
        }
    }

    #[test]
    fn backend_errors_map_to_kinds() {
        let check = |error: BackendError, status: TuttiStatus| {
            let text = error.to_string();
            let converted = Error::from(error);
            assert_eq!(converted.status(), status, "{text}");
            assert_eq!(converted.message(), text);
        };
        check(
            BackendError::ZeroDevices,
            TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT,
        );
        check(
            BackendError::MoreDevicesThanExist {
                requested: 9,
                available: 2,
                kind: "gpu",
            },
            TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT,
        );
        check(
            BackendError::CudaNotBuilt,
            TuttiStatus::TUTTI_ERROR_UNSUPPORTED,
        );
        check(
            BackendError::OutOfMemory {
                device: "cpu:0".into(),
                requested: 10,
                free: 1,
            },
            TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY,
        );
        check(
            BackendError::Cuda {
                device: "driver".into(),
                message: "no driver".into(),
            },
            TuttiStatus::TUTTI_ERROR_DEVICE,
        );
        check(
            BackendError::Scratch {
                path: "/nowhere".into(),
                reason: "missing".into(),
            },
            TuttiStatus::TUTTI_ERROR_IO,
        );
    }
}
