//! Where a computation runs: `TuttiResources`, one struct taken by every workload call.
//!
//! Every workload's options struct holds a `TuttiResources resources` field, filled with the
//! defaults by its `tutti_*_options_default` (or by [`tutti_resources_default`]). The fields
//! mirror `tutti_backend::Resources`: which devices, which kind, per-device and host memory
//! caps, the scratch directory and its limit. In C, 0 means "no cap" for the byte fields and
//! [`TUTTI_ALL_DEVICES`] means "every GPU, or one simulated device using all cores".

use std::ffi::{c_char, c_int};

use tutti_backend::{BackendError, DeviceRequest, Kernels, Resources};

use crate::boundary::{ffi_call, input_slice, input_str, write_default};
use crate::devices::TuttiKind;
use crate::status::{Error, TuttiStatus};
use crate::world::TuttiWorld;

/// `TuttiResources.devices` for "every GPU, or one simulated device using all cores".
pub const TUTTI_ALL_DEVICES: c_int = -1;

/// Whether a workload's ranks run its device code (kernels) or its host code: the `kernels`
/// field of `TuttiFmmOptions` and `TuttiSrcOptions`, passed as an `int`.
#[allow(non_camel_case_types)] // the variants are the C names
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum TuttiKernels {
    /// The device code on GPU ranks, the host code on simulated devices (the default).
    TUTTI_KERNELS_AUTO = 0,
    /// The device code on every rank: on a simulated device its host twins, through the
    /// device path (uploads, launches, downloads), which give the host code's bits. How the
    /// GPU path is tested without a GPU; slower than the host code there.
    TUTTI_KERNELS_ALWAYS = 1,
    /// The host code on every rank, GPU ranks included.
    TUTTI_KERNELS_NEVER = 2,
}

impl TuttiKernels {
    /// The library's setting for the value `code` of the field `name`, or
    /// `TUTTI_ERROR_INVALID_ARGUMENT` naming it.
    pub(crate) fn to_rust(code: c_int, name: &str) -> Result<Kernels, Error> {
        match code {
            0 => Ok(Kernels::Auto),
            1 => Ok(Kernels::Always),
            2 => Ok(Kernels::Never),
            other => Err(Error::invalid_argument(format!(
                "{name} is {other}: expected TUTTI_KERNELS_AUTO (0), TUTTI_KERNELS_ALWAYS (1) \
                 or TUTTI_KERNELS_NEVER (2)"
            ))),
        }
    }
}

/// Which devices a computation may use, and how much memory and scratch space.
///
/// Start from `tutti_resources_default` (or a workload's `tutti_*_options_default`, which
/// fills its `resources` field the same way), then set what you need:
/// `opts.resources.kind = TUTTI_KIND_CPU; opts.resources.devices = 4;`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TuttiResources {
    /// `TUTTI_KIND_CPU` (simulated devices), `TUTTI_KIND_GPU` or `TUTTI_KIND_AUTO` (the
    /// default: GPUs when there are any, else simulated devices).
    pub kind: c_int,
    /// `TUTTI_ALL_DEVICES` (-1, the default), or n >= 1 for the first n devices. 0 is an
    /// error. Must stay `TUTTI_ALL_DEVICES` when `ordinals` is set.
    pub devices: c_int,
    /// NULL (the default), or `ordinal_count` device ordinals in rank order; an ordinal may
    /// repeat (two ranks then share one device). The array is read during the call only.
    pub ordinals: *const c_int,
    /// The length of `ordinals` (at least 1 when `ordinals` is set; ignored when NULL).
    pub ordinal_count: c_int,
    /// Use at most this many bytes on each device; 0 = no cap beyond the device's memory.
    pub device_memory_bytes: u64,
    /// Use at most this many bytes of host memory in all; 0 = no cap.
    pub host_memory_bytes: u64,
    /// The directory for scratch (spill) files, NUL-terminated UTF-8; NULL = the system
    /// temporary directory. Read during the call only.
    pub scratch_dir: *const c_char,
    /// Write at most this many bytes of scratch files; 0 = no limit beyond the free space.
    pub scratch_limit_bytes: u64,
    /// NULL (the default): the call runs in this process alone. Or a world from
    /// `tutti_world_from_fcomm`: the call is split among its MPI processes, which all make
    /// the same call with the same arguments; each runs one rank on one device, and each gets
    /// the result. Read during the call only.
    pub world: *const TuttiWorld,
}

impl Default for TuttiResources {
    fn default() -> Self {
        Self {
            kind: TuttiKind::TUTTI_KIND_AUTO as c_int,
            devices: TUTTI_ALL_DEVICES,
            ordinals: std::ptr::null(),
            ordinal_count: 0,
            device_memory_bytes: 0,
            host_memory_bytes: 0,
            scratch_dir: std::ptr::null(),
            scratch_limit_bytes: 0,
            world: std::ptr::null(),
        }
    }
}

impl TuttiResources {
    /// The world named by `world`, or `None` for a call in this process alone.
    ///
    /// Errors: `TUTTI_ERROR_INVALID_ARGUMENT` for a pointer that is not a live world.
    ///
    /// # Safety
    /// `world` is NULL or a world from tutti not released during `'w` (the call).
    pub unsafe fn world<'w>(&self, name: &str) -> Result<Option<&'w TuttiWorld>, Error> {
        if self.world.is_null() {
            return Ok(None);
        }
        // SAFETY: not NULL; checked against the registry before it is read.
        unsafe { crate::world::world_ref(self.world, &format!("{name}.world")) }.map(Some)
    }

    /// The backend's `Resources` for these fields; `name` is how the struct is called in
    /// messages (e.g. `options->resources`).
    ///
    /// Errors (`TUTTI_ERROR_INVALID_ARGUMENT` naming the field): an unknown kind, a device
    /// count of 0 or below -1, ordinals together with a device count, an ordinal count below
    /// 1, a negative ordinal, a scratch directory that is not UTF-8. Device selection itself
    /// (too many devices, an unknown ordinal, no GPU) is checked by the workload when it
    /// opens the devices.
    ///
    /// # Safety
    /// `ordinals` is NULL or valid for reads of `ordinal_count` ints, and `scratch_dir` is NULL
    /// or a NUL-terminated string; both unchanged during the call.
    pub unsafe fn to_rust(&self, name: &str) -> Result<Resources, Error> {
        let kind = TuttiKind::from_code(self.kind, &format!("{name}.kind"))?;
        let devices = if self.ordinals.is_null() {
            match self.devices {
                TUTTI_ALL_DEVICES => DeviceRequest::All,
                n if n >= 1 => DeviceRequest::Count(n as usize),
                n => {
                    return Err(Error::invalid_argument(format!(
                        "{name}.devices is {n}: expected TUTTI_ALL_DEVICES (-1) or a count of \
                         at least 1"
                    )))
                }
            }
        } else {
            if self.devices != TUTTI_ALL_DEVICES {
                return Err(Error::invalid_argument(format!(
                    "{name}.devices is {} and {name}.ordinals is set: give one of them (leave \
                     devices at TUTTI_ALL_DEVICES when listing ordinals)",
                    self.devices
                )));
            }
            let count = usize::try_from(self.ordinal_count)
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "{name}.ordinal_count is {}: expected at least 1 when {name}.ordinals \
                         is set",
                        self.ordinal_count
                    ))
                })?;
            // SAFETY: not NULL here; valid for `ordinal_count` reads (the caller's promise).
            let ordinals =
                unsafe { input_slice(self.ordinals, count, &format!("{name}.ordinals")) }?;
            let ordinals = ordinals
                .iter()
                .map(|&ordinal| {
                    usize::try_from(ordinal).map_err(|_| {
                        Error::invalid_argument(format!(
                            "{name}.ordinals holds {ordinal}: ordinals are at least 0"
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            DeviceRequest::Ordinals(ordinals)
        };
        let mut resources = Resources::default()
            .with_kind(kind.request())
            .with_devices(devices);
        if self.device_memory_bytes > 0 {
            resources = resources.with_device_memory_cap(self.device_memory_bytes);
        }
        if self.host_memory_bytes > 0 {
            resources = resources.with_host_memory_cap(self.host_memory_bytes);
        }
        if self.scratch_limit_bytes > 0 {
            resources = resources.with_scratch_limit(self.scratch_limit_bytes);
        }
        if !self.scratch_dir.is_null() {
            // SAFETY: not NULL; NUL-terminated and unchanged during the call (the caller's
            // promise).
            let dir = unsafe { input_str(self.scratch_dir, &format!("{name}.scratch_dir")) }?;
            resources = resources.with_scratch_dir(dir);
        }
        Ok(resources)
    }
}

/// The C error of a device selection that failed for `options->resources`: the backend's
/// status (invalid argument, unsupported, device, out of memory), its message prefixed with
/// the field at fault where the request itself was wrong.
pub fn device_error(error: BackendError) -> Error {
    let error = Error::from(error);
    if error.status() == TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT {
        Error::invalid_argument(format!("options->resources: {}", error.message()))
    } else {
        error
    }
}

/// Writes the default resources to `*resources`: `TUTTI_KIND_AUTO`, `TUTTI_ALL_DEVICES`, no
/// ordinals, no memory caps, the system temporary directory, no scratch limit.
///
/// Errors: `TUTTI_ERROR_NULL_POINTER` for NULL.
///
/// # Safety
/// `resources` is NULL or valid for writing a `TuttiResources`.
#[no_mangle]
pub unsafe extern "C" fn tutti_resources_default(resources: *mut TuttiResources) -> c_int {
    ffi_call("tutti_resources_default", || {
        // SAFETY: NULL or valid for writes (the caller's promise).
        unsafe { write_default(resources, "resources") }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::last_error;
    use tutti_backend::KindRequest;

    fn convert(resources: &TuttiResources) -> Result<Resources, Error> {
        // SAFETY: every pointer in the test structs points to live locals or is NULL.
        unsafe { resources.to_rust("options->resources") }
    }

    #[test]
    fn the_defaults_are_the_backend_defaults() {
        let mut out = TuttiResources {
            kind: 7,
            ..TuttiResources::default()
        };
        // SAFETY: a valid pointer to a local.
        assert_eq!(unsafe { tutti_resources_default(&mut out) }, 0);
        assert_eq!(out, TuttiResources::default());
        assert_eq!(convert(&out).ok(), Some(Resources::default()));
        // SAFETY: NULL is allowed by the contract.
        let status = unsafe { tutti_resources_default(std::ptr::null_mut()) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_NULL_POINTER.code());
        assert!(
            last_error().contains("`resources` is NULL"),
            "{}",
            last_error()
        );
    }

    #[test]
    fn every_field_reaches_the_backend() {
        let ordinals = [1, 0, 1];
        let scratch = c"/tmp";
        let resources = TuttiResources {
            kind: TuttiKind::TUTTI_KIND_CPU as c_int,
            devices: TUTTI_ALL_DEVICES,
            ordinals: ordinals.as_ptr(),
            ordinal_count: 3,
            device_memory_bytes: 1 << 20,
            host_memory_bytes: 2 << 20,
            scratch_dir: scratch.as_ptr(),
            scratch_limit_bytes: 3 << 20,
            world: std::ptr::null(),
        };
        let expected = Resources::cpu(1)
            .with_kind(KindRequest::Cpu)
            .with_devices(DeviceRequest::Ordinals(vec![1, 0, 1]))
            .with_device_memory_cap(1 << 20)
            .with_host_memory_cap(2 << 20)
            .with_scratch_dir("/tmp")
            .with_scratch_limit(3 << 20);
        assert_eq!(convert(&resources).ok(), Some(expected));

        let counted = TuttiResources {
            kind: TuttiKind::TUTTI_KIND_GPU as c_int,
            devices: 3,
            ..TuttiResources::default()
        };
        assert_eq!(convert(&counted).ok(), Some(Resources::gpu(3)));
    }

    #[test]
    fn bad_fields_are_invalid_arguments_naming_the_field() {
        let ordinals = [0, -2];
        let not_utf8 = [0xffu8 as c_char, 0];
        let cases = [
            (
                TuttiResources {
                    kind: 9,
                    ..TuttiResources::default()
                },
                "options->resources.kind",
            ),
            (
                TuttiResources {
                    devices: 0,
                    ..TuttiResources::default()
                },
                "options->resources.devices is 0",
            ),
            (
                TuttiResources {
                    devices: -5,
                    ..TuttiResources::default()
                },
                "options->resources.devices is -5",
            ),
            (
                TuttiResources {
                    devices: 2,
                    ordinals: ordinals.as_ptr(),
                    ordinal_count: 1,
                    ..TuttiResources::default()
                },
                "give one of them",
            ),
            (
                TuttiResources {
                    ordinals: ordinals.as_ptr(),
                    ordinal_count: 0,
                    ..TuttiResources::default()
                },
                "options->resources.ordinal_count is 0",
            ),
            (
                TuttiResources {
                    ordinals: ordinals.as_ptr(),
                    ordinal_count: 2,
                    ..TuttiResources::default()
                },
                "holds -2",
            ),
            (
                TuttiResources {
                    scratch_dir: not_utf8.as_ptr(),
                    ..TuttiResources::default()
                },
                "options->resources.scratch_dir",
            ),
        ];
        for (resources, says) in cases {
            let error = convert(&resources).expect_err(says);
            assert_eq!(error.status(), TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT);
            assert!(
                error.message().contains(says),
                "{} lacks {says}",
                error.message()
            );
        }
    }
}
