//! Devices: how many there are, and what one of a selection looks like.

use std::ffi::{c_char, c_int};

use tutti_backend::{system, DeviceInfo, DeviceKind, DeviceRequest, KindRequest, Resources};

use crate::boundary::{ffi_call, index_in, positive_count, to_c_int, Out};
use crate::memory::string_to_c;
use crate::status::{Error, TuttiStatus};

/// The most simulated (CPU) devices one selection may open.
pub const TUTTI_MAX_SIMULATED_DEVICES: c_int = 256;

/// Which kind of device a call uses; passed as an `int`.
#[allow(non_camel_case_types)] // the variants are the C names
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum TuttiKind {
    /// Simulated devices: threads sharing the host's cores and memory.
    TUTTI_KIND_CPU = 0,
    /// CUDA GPUs (needs a library built with the `cuda` feature, and a driver).
    TUTTI_KIND_GPU = 1,
    /// GPUs when at least one is present, else simulated devices.
    TUTTI_KIND_AUTO = 2,
}

impl TuttiKind {
    /// The kind with this value, or `TUTTI_ERROR_INVALID_ARGUMENT` naming the argument.
    pub fn from_code(code: c_int, name: &str) -> Result<Self, Error> {
        match code {
            0 => Ok(Self::TUTTI_KIND_CPU),
            1 => Ok(Self::TUTTI_KIND_GPU),
            2 => Ok(Self::TUTTI_KIND_AUTO),
            other => Err(Error::invalid_argument(format!(
                "argument `{name}` is {other}: expected TUTTI_KIND_CPU (0), TUTTI_KIND_GPU (1) \
                 or TUTTI_KIND_AUTO (2)"
            ))),
        }
    }

    /// The backend's request for this kind.
    pub fn request(self) -> KindRequest {
        match self {
            Self::TUTTI_KIND_CPU => KindRequest::Cpu,
            Self::TUTTI_KIND_GPU => KindRequest::Gpu,
            Self::TUTTI_KIND_AUTO => KindRequest::Auto,
        }
    }

    /// The kind of an opened device (never `TUTTI_KIND_AUTO`).
    pub fn of(kind: DeviceKind) -> Self {
        match kind {
            DeviceKind::Host => Self::TUTTI_KIND_CPU,
            DeviceKind::Cuda => Self::TUTTI_KIND_GPU,
        }
    }
}

/// One device of a selection, as `tutti_device_info` reports it.
///
/// The caller owns `name` and releases it with `tutti_free_c`.
#[repr(C)]
#[derive(Debug)]
pub struct TuttiDeviceInfo {
    /// `TUTTI_KIND_CPU` or `TUTTI_KIND_GPU` (never `TUTTI_KIND_AUTO`).
    pub kind: c_int,
    /// Ordinal within its kind (the CUDA device number for a GPU).
    pub ordinal: c_int,
    /// Position within the selection: the rank it serves, equal to the requested index.
    pub index: c_int,
    /// CPU threads the device's host-side work may use (its share of the cores).
    pub threads: c_int,
    /// Bytes free for new buffers; at most `total_bytes`.
    pub free_bytes: u64,
    /// Bytes the device has: for a simulated device, its share of the host's memory.
    pub total_bytes: u64,
    /// A NUL-terminated name ("host (simulated)" or the GPU's name), owned by the caller:
    /// release it with `tutti_free_c`.
    pub name: *mut c_char,
}

/// How many devices of `kind` a computation may use by default.
///
/// CPU: the host's core count, so each simulated device gets a core of its own (up to
/// [`TUTTI_MAX_SIMULATED_DEVICES`] may be opened all the same). GPU: the CUDA device count.
/// AUTO: the GPU count when it is at least 1, else the CPU count.
///
/// Errors: GPU in a build without the `cuda` feature (`TUTTI_ERROR_UNSUPPORTED`), or a CUDA
/// driver that cannot be loaded or initialised (`TUTTI_ERROR_DEVICE`).
pub fn device_count(kind: TuttiKind) -> Result<usize, Error> {
    match kind {
        TuttiKind::TUTTI_KIND_CPU => Ok(system::host_cores()),
        TuttiKind::TUTTI_KIND_GPU => Ok(tutti_backend::gpu_count()?),
        TuttiKind::TUTTI_KIND_AUTO => match tutti_backend::gpu_count() {
            Ok(gpus) if gpus > 0 => Ok(gpus),
            _ => Ok(system::host_cores()),
        },
    }
}

/// Opens a selection of the first `count` devices of `kind` and describes the one at
/// `index`.
///
/// Errors: an `index` outside `0..count`, or whatever opening the devices reports (more
/// devices than exist, no GPU support, a driver error).
pub fn device_info(kind: TuttiKind, count: usize, index: usize) -> Result<DeviceInfo, Error> {
    let resources = Resources::default()
        .with_kind(kind.request())
        .with_devices(DeviceRequest::Count(count));
    let devices = resources.select().map_err(|error| {
        let error = Error::from(error);
        // With a positive count, the only argument select can refuse is the count.
        if error.status() == TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT {
            Error::invalid_argument(format!("argument `count` is {count}: {}", error.message()))
        } else {
            error
        }
    })?;
    let device = devices.get(index).ok_or_else(|| {
        Error::invalid_argument(format!(
            "argument `index` is {index}, out of range: expected 0 <= index < {}",
            devices.len()
        ))
    })?;
    Ok(device.info()?)
}

/// Writes to `*count` how many devices of `kind` (`TUTTI_KIND_CPU`, `TUTTI_KIND_GPU` or
/// `TUTTI_KIND_AUTO`) a computation may use by default.
///
/// - CPU: the host's core count, so each simulated device gets a core of its own. Up to
///   `TUTTI_MAX_SIMULATED_DEVICES` may be opened all the same; they then share cores.
/// - GPU: the number of CUDA devices. A library built without the `cuda` feature returns
///   `TUTTI_ERROR_UNSUPPORTED` (not 0, which would claim the node has no GPU); a CUDA
///   driver that cannot be loaded returns `TUTTI_ERROR_DEVICE`.
/// - AUTO: the GPU count when at least one GPU is usable, else the CPU count; never fails
///   for lack of GPUs.
///
/// Errors: `TUTTI_ERROR_INVALID_ARGUMENT` for an unknown `kind`, `TUTTI_ERROR_NULL_POINTER`
/// for a NULL `count`, and the GPU errors above.
///
/// # Safety
/// `count` is NULL or valid for writing an `int`.
#[no_mangle]
pub unsafe extern "C" fn tutti_device_count(kind: c_int, count: *mut c_int) -> c_int {
    ffi_call("tutti_device_count", || {
        // SAFETY: count is NULL or valid for writes (the caller's promise).
        let out = unsafe { Out::new(count, "count") }?;
        let kind = TuttiKind::from_code(kind, "kind")?;
        let devices = device_count(kind)?;
        out.write(to_c_int(devices, "the device count")?);
        Ok(())
    })
}

/// Describes device `index` of a selection of the first `count` devices of `kind`, writing
/// it to `*out`.
///
/// The selection splits the host the way a computation on `count` devices would: with
/// `TUTTI_KIND_CPU`, each simulated device gets its share of the cores (`threads`) and of
/// the host memory (`total_bytes`). On success the caller owns `out->name` and must release
/// it with `tutti_free_c`; on failure `*out` is left untouched and nothing needs releasing.
///
/// Errors: `TUTTI_ERROR_INVALID_ARGUMENT` for an unknown `kind`, `count < 1`, more devices
/// than exist (above `TUTTI_MAX_SIMULATED_DEVICES` for CPU), or `index` outside
/// `0 <= index < count`; `TUTTI_ERROR_NULL_POINTER` for a NULL `out`;
/// `TUTTI_ERROR_UNSUPPORTED` or `TUTTI_ERROR_DEVICE` as for `tutti_device_count`.
///
/// # Safety
/// `out` is NULL or valid for writing a `TuttiDeviceInfo`.
#[no_mangle]
pub unsafe extern "C" fn tutti_device_info(
    kind: c_int,
    count: c_int,
    index: c_int,
    out: *mut TuttiDeviceInfo,
) -> c_int {
    ffi_call("tutti_device_info", || {
        // SAFETY: out is NULL or valid for writes (the caller's promise).
        let out = unsafe { Out::new(out, "out") }?;
        let kind = TuttiKind::from_code(kind, "kind")?;
        let count = positive_count(count, "count")?;
        let index = index_in(index, count, "index")?;
        let info = device_info(kind, count, index)?;
        let mut described = TuttiDeviceInfo {
            kind: TuttiKind::of(info.kind) as c_int,
            ordinal: to_c_int(info.ordinal, "the device ordinal")?,
            index: to_c_int(info.index, "the device index")?,
            threads: to_c_int(info.threads, "the thread count")?,
            free_bytes: info.memory.free,
            total_bytes: info.memory.total,
            name: std::ptr::null_mut(),
        };
        // Allocated last: nothing after it can fail, so it never leaks.
        described.name = string_to_c(&info.name)?.as_ptr();
        out.write(described);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::last_error;
    use std::ffi::CStr;

    fn empty_info() -> TuttiDeviceInfo {
        TuttiDeviceInfo {
            kind: -1,
            ordinal: -1,
            index: -1,
            threads: -1,
            free_bytes: 0,
            total_bytes: 0,
            name: std::ptr::null_mut(),
        }
    }

    #[test]
    fn max_simulated_devices_matches_the_backend() {
        assert_eq!(
            TUTTI_MAX_SIMULATED_DEVICES as usize,
            tutti_backend::MAX_SIMULATED_DEVICES
        );
    }

    #[test]
    fn cpu_count_is_the_core_count() {
        let mut count = -1;
        // SAFETY: a valid pointer to a local.
        let status = unsafe { tutti_device_count(TuttiKind::TUTTI_KIND_CPU as c_int, &mut count) };
        assert_eq!(status, 0, "{}", last_error());
        assert_eq!(count as usize, system::host_cores());
        assert!(count >= 1);
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn gpu_count_without_cuda_is_unsupported_and_auto_falls_back_to_cpu() {
        let mut count = -1;
        // SAFETY: a valid pointer to a local.
        let status = unsafe { tutti_device_count(TuttiKind::TUTTI_KIND_GPU as c_int, &mut count) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_UNSUPPORTED.code());
        assert_eq!(count, -1);
        assert!(last_error().contains("cuda"), "{}", last_error());

        // SAFETY: a valid pointer to a local.
        let status = unsafe { tutti_device_count(TuttiKind::TUTTI_KIND_AUTO as c_int, &mut count) };
        assert_eq!(status, 0);
        assert_eq!(count as usize, system::host_cores());
    }

    #[test]
    fn bad_count_arguments_are_errors() {
        // SAFETY: NULL is allowed by the contract.
        let status = unsafe { tutti_device_count(0, std::ptr::null_mut()) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_NULL_POINTER.code());
        assert!(last_error().contains("`count` is NULL"));

        let mut count = -1;
        // SAFETY: a valid pointer to a local.
        let status = unsafe { tutti_device_count(7, &mut count) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(last_error().contains("`kind` is 7"), "{}", last_error());
        assert_eq!(count, -1);
    }

    #[test]
    fn cpu_device_info_describes_the_requested_device() {
        for (count, index) in [(1, 0), (2, 1), (3, 2), (4, 0)] {
            let mut info = empty_info();
            // SAFETY: a valid pointer to a local.
            let status = unsafe { tutti_device_info(0, count, index, &mut info) };
            assert_eq!(status, 0, "{}", last_error());
            assert_eq!(info.kind, TuttiKind::TUTTI_KIND_CPU as c_int);
            assert_eq!((info.index, info.ordinal), (index, index));
            assert!(info.threads >= 1);
            assert!(0 < info.total_bytes && info.free_bytes <= info.total_bytes);
            assert!(!info.name.is_null());
            // SAFETY: name is a NUL-terminated string returned by tutti.
            let name = unsafe { CStr::from_ptr(info.name) };
            assert_eq!(name.to_str().ok(), Some("host (simulated)"));
            // SAFETY: the caller owns name and releases it once.
            assert_eq!(unsafe { crate::tutti_free_c(info.name.cast()) }, 0);
        }
    }

    #[test]
    fn cpu_devices_share_the_cores() {
        let cores = system::host_cores();
        let count = (cores + 1) as c_int;
        let mut threads = 0;
        for index in 0..count {
            let mut info = empty_info();
            // SAFETY: a valid pointer to a local.
            let status = unsafe { tutti_device_info(0, count, index, &mut info) };
            assert_eq!(status, 0, "{}", last_error());
            threads += info.threads as usize;
            // SAFETY: the caller owns name and releases it once.
            assert_eq!(unsafe { crate::tutti_free_c(info.name.cast()) }, 0);
        }
        // One more device than cores: each gets at least one thread, one core is shared.
        assert_eq!(threads, cores + 1);
    }

    #[test]
    fn bad_info_arguments_are_errors_and_leave_out_untouched() {
        let check = |kind: c_int, count: c_int, index: c_int, status: TuttiStatus, says: &str| {
            let mut info = empty_info();
            // SAFETY: a valid pointer to a local.
            let got = unsafe { tutti_device_info(kind, count, index, &mut info) };
            assert_eq!(
                got,
                status.code(),
                "{kind} {count} {index}: {}",
                last_error()
            );
            let message = last_error();
            assert!(message.starts_with("tutti_device_info: "), "{message}");
            assert!(message.contains(says), "{message} lacks {says}");
            assert_eq!((info.kind, info.index), (-1, -1));
            assert!(info.name.is_null());
        };
        use TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT as INVALID;
        let cases: [(c_int, c_int, c_int, &str); 6] = [
            (
                0,
                2,
                2,
                "argument `index` is 2, out of range: expected 0 <= index < 2",
            ),
            (0, 2, -1, "argument `index` is -1"),
            (0, 0, 0, "argument `count` must be at least 1, got 0"),
            (0, -3, 0, "argument `count` must be at least 1, got -3"),
            (3, 1, 0, "argument `kind` is 3"),
            (
                0,
                257,
                0,
                "argument `count` is 257: 257 cpu device(s) requested",
            ),
        ];
        for (kind, count, index, says) in cases {
            check(kind, count, index, INVALID, says);
        }
        #[cfg(not(feature = "cuda"))]
        check(1, 1, 0, TuttiStatus::TUTTI_ERROR_UNSUPPORTED, "cuda");

        // SAFETY: NULL is allowed by the contract.
        let status = unsafe { tutti_device_info(0, 1, 0, std::ptr::null_mut()) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_NULL_POINTER.code());
        assert!(last_error().contains("`out` is NULL"));
    }

    #[test]
    fn rust_device_info_matches_the_c_entry_point() {
        let info = device_info(TuttiKind::TUTTI_KIND_CPU, 2, 1).expect("two cpu devices");
        assert_eq!(
            (info.kind, info.index, info.ordinal),
            (DeviceKind::Host, 1, 1)
        );
        assert!(info.memory.free <= info.memory.total);
    }
}
