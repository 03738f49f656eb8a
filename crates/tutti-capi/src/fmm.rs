//! The fast multipole method from C (`tutti-fmm`): potentials and accelerations of N bodies
//! into caller-owned arrays, and the direct sum it is checked against.
//!
//! Conventions (DESIGN.md, G = 1, Plummer softening eps >= 0):
//! `phi_i = -sum_{j != i} m_j / sqrt(r_ij^2 + eps^2)` and
//! `a_i = -sum_{j != i} m_j (x_i - x_j) / (r_ij^2 + eps^2)^(3/2)`. Positions are `n * 3`
//! doubles, row-major (`x0 y0 z0 x1 y1 z1 ...`); strengths may be negative.

use std::ffi::c_int;

use tutti_backend::BackendError;
use tutti_fmm::{direct, fmm, fmm_on, order_for_accuracy, FmmError, FmmOptions, Precision};
use tutti_group::GroupError;

use crate::boundary::{
    check_disjoint, ffi_call, input_options, input_slice, output_slice, write_default, Out, Region,
};
use crate::resources::{device_error, TuttiResources};
use crate::status::{Error, TuttiStatus};
use crate::world::checked;

/// Options of `tutti_fmm`. Start from `tutti_fmm_options_default`; see `docs/fmm.md`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuttiFmmOptions {
    /// Expansion order p, 1 to 12 (default 7). The error falls roughly like theta^p.
    pub order: c_int,
    /// Opening angle theta in (0, 1) (default 0.5): larger is faster and less accurate.
    pub theta: f64,
    /// Most bodies in a leaf of the octree, at least 1 (default 64).
    pub leaf_size: c_int,
    /// Plummer softening length, finite and >= 0, in the units of the positions (default 0:
    /// exact Newtonian; two distinct bodies at one position are then an error).
    pub softening: f64,
    /// Non-zero: the far field (M2L) in f32 with f64 accumulation, accuracy-neutral at
    /// moderate order (default 0: everything in f64).
    pub f32_far_field: c_int,
    /// Where the evaluation runs (default: `tutti_resources_default`, one simulated device
    /// using all cores when there is no GPU). The result is bit-identical for any device
    /// count; memory caps too small for the evaluation are refused up front.
    pub resources: TuttiResources,
}

impl Default for TuttiFmmOptions {
    fn default() -> Self {
        let defaults = FmmOptions::default();
        Self {
            order: c_int::try_from(defaults.order).unwrap_or(c_int::MAX),
            theta: defaults.theta,
            leaf_size: c_int::try_from(defaults.leaf_size).unwrap_or(c_int::MAX),
            softening: defaults.softening,
            f32_far_field: 0,
            resources: TuttiResources::default(),
        }
    }
}

impl TuttiFmmOptions {
    /// The library's options; the ranges are checked by the library.
    ///
    /// # Safety
    /// As for [`TuttiResources::to_rust`] on `self.resources`.
    unsafe fn to_rust(self) -> Result<FmmOptions, Error> {
        let non_negative = |value: c_int, name: &str| {
            usize::try_from(value).map_err(|_| {
                Error::invalid_argument(format!(
                    "options->{name} is {value}: expected a positive integer"
                ))
            })
        };
        // SAFETY: the caller's promise about the resources' pointers.
        let resources = unsafe { self.resources.to_rust("options->resources") }?;
        let options = FmmOptions::default()
            .with_order(non_negative(self.order, "order")?)
            .with_theta(self.theta)
            .with_leaf_size(non_negative(self.leaf_size, "leaf_size")?)
            .with_softening(self.softening)
            .with_far_field(if self.f32_far_field != 0 {
                Precision::F32
            } else {
                Precision::F64
            })
            .with_resources(resources);
        options.validate().map_err(fmm_error)?;
        Ok(options)
    }
}

/// Writes the default FMM options to `*options`: order 7, theta 0.5, leaf size 64, no
/// softening, f64 far field, the default resources. They reach a relative L2 error below 1e-4 on
/// accelerations for uniform, Plummer and thin-disk bodies.
///
/// # Safety
/// `options` is NULL or valid for writing a `TuttiFmmOptions`.
#[no_mangle]
pub unsafe extern "C" fn tutti_fmm_options_default(options: *mut TuttiFmmOptions) -> c_int {
    ffi_call("tutti_fmm_options_default", || {
        // SAFETY: NULL or valid for writes (the caller's promise).
        unsafe { write_default(options, "options") }
    })
}

/// The expansion order for a requested relative L2 error `eps` on accelerations, at the
/// default theta (0.5): the lowest order whose measured error on the committed uniform,
/// Plummer and thin-disk cases (the worst of the three) is at most `eps`. Writes the order
/// to `*order_out` and that measured error to `*measured_error_out`; set
/// `TuttiFmmOptions.order` from it.
///
/// Errors: NULL outputs (`TUTTI_ERROR_NULL_POINTER`); `eps` not finite and positive, or below
/// the best measured error (8.53e-7, order 10) (`TUTTI_ERROR_INVALID_ARGUMENT`).
///
/// # Safety
/// `order_out` is NULL or valid for writing an int, `measured_error_out` NULL or valid for
/// writing a double; the two do not overlap.
#[no_mangle]
pub unsafe extern "C" fn tutti_fmm_order_for_accuracy(
    eps: f64,
    order_out: *mut c_int,
    measured_error_out: *mut f64,
) -> c_int {
    ffi_call("tutti_fmm_order_for_accuracy", || {
        check_disjoint(&[
            Region::output("order_out", order_out, 1),
            Region::output("measured_error_out", measured_error_out, 1),
        ])?;
        // SAFETY: each pointer is NULL or valid for writes (the caller's promise), and the
        // two are disjoint (checked above).
        let (order_slot, error_slot) = unsafe {
            (
                Out::new(order_out, "order_out")?,
                Out::new(measured_error_out, "measured_error_out")?,
            )
        };
        let (order, measured) = order_for_accuracy(eps).map_err(fmm_error)?;
        let order = c_int::try_from(order)
            .map_err(|_| Error::invalid_argument("the order does not fit an int".to_string()))?;
        order_slot.write(order);
        error_slot.write(measured);
        Ok(())
    })
}

/// The status of an FMM error: bad bodies and options are invalid arguments, a working set
/// that cannot fit is out of memory, a rank's panic is a panic, other failures are device
/// errors. The message is the library's, naming the argument.
pub fn fmm_error(error: FmmError) -> Error {
    use TuttiStatus::*;
    let error = match error {
        FmmError::Backend(error) | FmmError::Group(GroupError::Backend(error))
            if !matches!(error, BackendError::OutOfMemory { .. }) =>
        {
            return device_error(error)
        }
        other => other,
    };
    let status = match &error {
        FmmError::InvalidArgument { .. }
        | FmmError::LengthMismatch { .. }
        | FmmError::NonFinite { .. }
        | FmmError::CoincidentBodies { .. } => TUTTI_ERROR_INVALID_ARGUMENT,
        FmmError::Plan(_) | FmmError::Backend(BackendError::OutOfMemory { .. }) => {
            TUTTI_ERROR_OUT_OF_MEMORY
        }
        FmmError::RankPanicked { .. } => TUTTI_ERROR_PANIC,
        FmmError::RankFailed { .. } => TUTTI_ERROR_REMOTE,
        FmmError::File { .. } => TUTTI_ERROR_IO,
        // Devices, collectives, and kinds the library adds later.
        _ => TUTTI_ERROR_DEVICE,
    };
    Error::new(status, error.to_string())
}

/// The bodies and output arrays of one call, checked.
struct Bodies<'a> {
    positions: &'a [[f64; 3]],
    masses: &'a [f64],
    potential_out: Option<&'a mut [f64]>,
    accel_out: Option<&'a mut [[f64; 3]]>,
}

/// Checks `n` and the four arrays of `tutti_fmm` and `tutti_direct_sum`. With `n == 0`
/// every pointer may be NULL and nothing is read or written.
///
/// # Safety
/// As documented on `tutti_fmm`.
unsafe fn bodies<'a>(
    n: i64,
    positions: *const f64,
    masses: *const f64,
    potential_out: *mut f64,
    accel_out: *mut f64,
) -> Result<Bodies<'a>, Error> {
    let count = usize::try_from(n).map_err(|_| {
        Error::invalid_argument(format!(
            "argument `n` is {n}: expected a number of bodies >= 0"
        ))
    })?;
    if count == 0 {
        return Ok(Bodies {
            positions: &[],
            masses: &[],
            potential_out: None,
            accel_out: None,
        });
    }
    let coordinates = count.saturating_mul(3);
    check_disjoint(&[
        Region::input("positions", positions, coordinates),
        Region::input("masses", masses, count),
        Region::output("potential_out", potential_out, count),
        Region::output("accel_out", accel_out, coordinates),
    ])?;
    // SAFETY: `positions` holds n * 3 doubles and `masses` n (the caller's promise); a
    // [f64; 3] has the size and alignment of three doubles, and the helpers check NULL,
    // alignment and that the byte count fits in memory.
    let (positions, masses) = unsafe {
        (
            input_slice(positions.cast::<[f64; 3]>(), count, "positions")?,
            input_slice(masses, count, "masses")?,
        )
    };
    let potential_out = if potential_out.is_null() {
        None
    } else {
        // SAFETY: not NULL, so valid for n doubles (the caller's promise), and disjoint from
        // every other array (checked above).
        Some(unsafe { output_slice(potential_out, count, "potential_out")? })
    };
    let accel_out = if accel_out.is_null() {
        None
    } else {
        // SAFETY: not NULL, so valid for n * 3 doubles (the caller's promise), and disjoint
        // from every other array (checked above).
        Some(unsafe { output_slice(accel_out.cast::<[f64; 3]>(), count, "accel_out")? })
    };
    Ok(Bodies {
        positions,
        masses,
        potential_out,
        accel_out,
    })
}

impl Bodies<'_> {
    /// Copies the results into the caller's arrays that are present.
    fn write(self, potential: &[f64], accel: &[[f64; 3]]) {
        if let Some(out) = self.potential_out {
            out.copy_from_slice(potential);
        }
        if let Some(out) = self.accel_out {
            out.copy_from_slice(accel);
        }
    }
}

/// Computes the potential and acceleration of each of `n` bodies by the fast multipole
/// method, split among the devices of `options->resources` (the result is bit-identical
/// for any device count).
///
/// Inputs: `positions` (`n * 3` doubles, row-major: body i at `positions[3 i .. 3 i + 3]`),
/// `masses` (`n` strengths, any sign), `options` (NULL for the defaults). Outputs
/// (caller-owned, written only on success, each may be NULL): `potential_out` (`n` doubles),
/// `accel_out` (`n * 3` doubles, row-major). `n == 0` is allowed: nothing is read or written
/// and every pointer may be NULL.
///
/// Errors (`TUTTI_ERROR_INVALID_ARGUMENT` unless said; the message names the argument):
/// `n < 0`; NULL `positions` or `masses` with `n > 0` (`TUTTI_ERROR_NULL_POINTER`); NaN or
/// infinite positions or strengths; options out of range; two distinct bodies at the same
/// position without softening (the message names both and suggests a softening length);
/// outputs that overlap each other or an input (`potential_out == accel_out`,
/// `accel_out == positions`).
///
/// # Safety
/// For `n > 0`: `positions` holds `n * 3` doubles and `masses` `n` doubles, readable for the
/// call; `potential_out` and `accel_out` are NULL or writable for `n` and `n * 3` doubles and
/// do not overlap the inputs (an overlap is refused, not undefined); `options` is NULL or
/// points to a `TuttiFmmOptions` whose `resources` pointers are NULL or valid as documented
/// on `TuttiResources`.
#[no_mangle]
pub unsafe extern "C" fn tutti_fmm(
    n: i64,
    positions: *const f64,
    masses: *const f64,
    options: *const TuttiFmmOptions,
    potential_out: *mut f64,
    accel_out: *mut f64,
) -> c_int {
    ffi_call("tutti_fmm", || {
        // SAFETY: NULL or valid for reading a TuttiFmmOptions (the caller's promise).
        let options = unsafe { input_options(options, "options") }?;
        // SAFETY: the world is NULL or a live handle (the caller's promise; checked).
        let world = unsafe { options.resources.world("options->resources") }?;
        // SAFETY: the resources' pointers and the array contracts are the caller's, as
        // documented above.
        let (options, bodies) = checked(world, unsafe {
            options.to_rust().and_then(|options| {
                bodies(n, positions, masses, potential_out, accel_out).map(|b| (options, b))
            })
        })?;
        let out = match world {
            None => fmm(bodies.positions, bodies.masses, &options),
            Some(world) => fmm_on(
                &world.group(&options.resources, tutti_fmm::GPU_USE)?,
                bodies.positions,
                bodies.masses,
                &options,
            ),
        }
        .map_err(fmm_error)?;
        bodies.write(&out.potential, &out.accel);
        Ok(())
    })
}

/// Computes the potential and acceleration of each of `n` bodies by the direct O(n^2) sum
/// (the reference `tutti_fmm` is checked against; threaded over the host's cores), with
/// Plummer softening `softening` (>= 0).
///
/// Arguments, outputs and errors as for `tutti_fmm`; `softening` replaces the options.
///
/// # Safety
/// As for `tutti_fmm`.
#[no_mangle]
pub unsafe extern "C" fn tutti_direct_sum(
    n: i64,
    positions: *const f64,
    masses: *const f64,
    softening: f64,
    potential_out: *mut f64,
    accel_out: *mut f64,
) -> c_int {
    ffi_call("tutti_direct_sum", || {
        // SAFETY: the array contracts are the caller's, as documented above.
        let bodies = unsafe { bodies(n, positions, masses, potential_out, accel_out)? };
        let (potential, accel) =
            direct(bodies.positions, bodies.masses, softening).map_err(fmm_error)?;
        bodies.write(&potential, &accel);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::last_error;

    /// `n` bodies from a fixed linear congruential generator in the unit cube, strengths in
    /// [0.5, 1.5).
    fn lcg_bodies(n: usize) -> (Vec<f64>, Vec<f64>) {
        let mut state: u64 = 12345;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let positions = (0..3 * n).map(|_| next()).collect();
        let masses = (0..n).map(|_| 0.5 + next()).collect();
        (positions, masses)
    }

    fn call_fmm(
        positions: &[f64],
        masses: &[f64],
        options: Option<&TuttiFmmOptions>,
    ) -> (c_int, Vec<f64>, Vec<f64>) {
        let n = masses.len();
        let mut potential = vec![7.0; n];
        let mut accel = vec![7.0; 3 * n];
        // SAFETY: arrays of the stated lengths.
        let status = unsafe {
            tutti_fmm(
                n as i64,
                positions.as_ptr(),
                masses.as_ptr(),
                options.map_or(std::ptr::null(), |o| o as *const _),
                potential.as_mut_ptr(),
                accel.as_mut_ptr(),
            )
        };
        (status, potential, accel)
    }

    fn relative_l2(approx: &[f64], exact: &[f64]) -> f64 {
        let diff: f64 = approx.iter().zip(exact).map(|(a, e)| (a - e).powi(2)).sum();
        let norm: f64 = exact.iter().map(|e| e * e).sum();
        (diff / norm).sqrt()
    }

    #[test]
    fn a_device_out_of_memory_is_out_of_memory() {
        let error = FmmError::Backend(BackendError::OutOfMemory {
            device: "cpu:0".into(),
            requested: 1 << 40,
            free: 1 << 30,
        });
        assert_eq!(
            fmm_error(error).status(),
            TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY
        );
    }

    #[test]
    fn fmm_matches_the_direct_sum_and_any_device_count() {
        let (positions, masses) = lcg_bodies(1500);
        let (status, potential, accel) = call_fmm(&positions, &masses, None);
        assert_eq!(status, 0, "{}", last_error());
        let mut exact_potential = vec![0.0; 1500];
        let mut exact_accel = vec![0.0; 4500];
        // SAFETY: arrays of the stated lengths.
        let status = unsafe {
            tutti_direct_sum(
                1500,
                positions.as_ptr(),
                masses.as_ptr(),
                0.0,
                exact_potential.as_mut_ptr(),
                exact_accel.as_mut_ptr(),
            )
        };
        assert_eq!(status, 0, "{}", last_error());
        let accel_error = relative_l2(&accel, &exact_accel);
        let potential_error = relative_l2(&potential, &exact_potential);
        assert!(accel_error < 1e-4, "{accel_error}");
        assert!(potential_error < 1e-5, "{potential_error}");

        let options = TuttiFmmOptions {
            resources: TuttiResources {
                kind: crate::TuttiKind::TUTTI_KIND_CPU as c_int,
                devices: 3,
                ..TuttiResources::default()
            },
            ..TuttiFmmOptions::default()
        };
        let (status, potential3, accel3) = call_fmm(&positions, &masses, Some(&options));
        assert_eq!(status, 0, "{}", last_error());
        assert_eq!(potential3, potential, "bit-identical on 3 devices");
        assert_eq!(accel3, accel, "bit-identical on 3 devices");
    }

    #[test]
    fn options_change_the_answer_within_their_accuracy() {
        let (positions, masses) = lcg_bodies(800);
        let (_, exact_potential, exact_accel) = call_fmm(
            &positions,
            &masses,
            Some(&TuttiFmmOptions {
                order: 12,
                theta: 0.3,
                ..TuttiFmmOptions::default()
            }),
        );
        let mut default = TuttiFmmOptions {
            order: 0,
            ..TuttiFmmOptions::default()
        };
        // SAFETY: a valid pointer to a local.
        assert_eq!(unsafe { tutti_fmm_options_default(&mut default) }, 0);
        assert_eq!(default, TuttiFmmOptions::default());
        assert_eq!(
            (default.order, default.leaf_size, default.resources),
            (7, 64, TuttiResources::default())
        );
        for (options, bound) in [
            (
                TuttiFmmOptions {
                    order: 3,
                    theta: 0.7,
                    leaf_size: 16,
                    ..default
                },
                1e-2,
            ),
            (
                TuttiFmmOptions {
                    f32_far_field: 1,
                    order: 5,
                    ..default
                },
                1e-3,
            ),
            (
                TuttiFmmOptions {
                    softening: 0.01,
                    ..default
                },
                f64::INFINITY,
            ),
        ] {
            let (status, potential, accel) = call_fmm(&positions, &masses, Some(&options));
            assert_eq!(status, 0, "{options:?}: {}", last_error());
            assert!(relative_l2(&accel, &exact_accel) < bound, "{options:?}");
            assert!(
                relative_l2(&potential, &exact_potential) < bound,
                "{options:?}"
            );
        }
    }

    #[test]
    fn null_outputs_and_zero_bodies_are_allowed() {
        let (positions, masses) = lcg_bodies(100);
        let mut potential = vec![0.0; 100];
        // SAFETY: arrays of the stated lengths; accel_out NULL.
        let status = unsafe {
            tutti_fmm(
                100,
                positions.as_ptr(),
                masses.as_ptr(),
                std::ptr::null(),
                potential.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(status, 0, "{}", last_error());
        assert!(potential.iter().all(|&p| p < 0.0));
        for function in [tutti_fmm_zero, tutti_direct_sum_zero] {
            assert_eq!(function(), 0, "{}", last_error());
        }
    }

    fn tutti_fmm_zero() -> c_int {
        // SAFETY: n = 0: no pointer is read or written.
        unsafe {
            tutti_fmm(
                0,
                std::ptr::null(),
                std::ptr::null(),
                std::ptr::null(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }
    }

    fn tutti_direct_sum_zero() -> c_int {
        // SAFETY: n = 0: no pointer is read or written.
        unsafe {
            tutti_direct_sum(
                0,
                std::ptr::null(),
                std::ptr::null(),
                0.0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }
    }

    #[test]
    fn bad_input_is_a_status_naming_the_argument() {
        use TuttiStatus::*;
        let (positions, masses) = lcg_bodies(50);
        let check = |positions: &[f64],
                     masses: &[f64],
                     options: TuttiFmmOptions,
                     status: TuttiStatus,
                     needle: &str| {
            let (got, potential, accel) = call_fmm(positions, masses, Some(&options));
            let message = last_error();
            assert_eq!(got, status.code(), "{message}");
            assert!(message.starts_with("tutti_fmm: "), "{message}");
            assert!(message.contains(needle), "{needle:?} in {message}");
            assert!(
                potential.iter().chain(&accel).all(|&x| x == 7.0),
                "untouched"
            );
        };
        let default = TuttiFmmOptions::default();
        let mut nan = positions.clone();
        nan[3 * 7 + 1] = f64::NAN;
        check(
            &nan,
            &masses,
            default,
            TUTTI_ERROR_INVALID_ARGUMENT,
            "`positions` of body 7",
        );
        let mut inf = masses.clone();
        inf[3] = f64::INFINITY;
        check(
            &positions,
            &inf,
            default,
            TUTTI_ERROR_INVALID_ARGUMENT,
            "`masses` of body 3",
        );
        let mut coincident = positions.clone();
        coincident.copy_within(3 * 4..3 * 5, 3 * 9);
        check(
            &coincident,
            &masses,
            default,
            TUTTI_ERROR_INVALID_ARGUMENT,
            "bodies 4 and 9",
        );
        let softened = TuttiFmmOptions {
            softening: 1e-3,
            ..default
        };
        let (status, _, _) = call_fmm(&coincident, &masses, Some(&softened));
        assert_eq!(status, 0, "softening makes coincident bodies fine");
        for (options, needle) in [
            (
                TuttiFmmOptions {
                    softening: -1.0,
                    ..default
                },
                "softening",
            ),
            (
                TuttiFmmOptions {
                    softening: f64::NAN,
                    ..default
                },
                "softening",
            ),
            (
                TuttiFmmOptions {
                    order: 13,
                    ..default
                },
                "order",
            ),
            (
                TuttiFmmOptions {
                    order: -2,
                    ..default
                },
                "options->order",
            ),
            (
                TuttiFmmOptions {
                    theta: 1.0,
                    ..default
                },
                "theta",
            ),
            (
                TuttiFmmOptions {
                    leaf_size: 0,
                    ..default
                },
                "leaf_size",
            ),
            (
                TuttiFmmOptions {
                    resources: TuttiResources {
                        devices: 0,
                        ..default.resources
                    },
                    ..default
                },
                "options->resources.devices is 0",
            ),
            (
                TuttiFmmOptions {
                    resources: TuttiResources {
                        kind: crate::TuttiKind::TUTTI_KIND_CPU as c_int,
                        devices: 100_000,
                        ..default.resources
                    },
                    ..default
                },
                "options->resources: 100000 cpu device(s) requested",
            ),
            (
                TuttiFmmOptions {
                    resources: TuttiResources {
                        kind: crate::TuttiKind::TUTTI_KIND_CPU as c_int,
                        ordinals: [300].as_ptr(),
                        ordinal_count: 1,
                        ..default.resources
                    },
                    ..default
                },
                "options->resources: ",
            ),
        ] {
            check(
                &positions,
                &masses,
                options,
                TUTTI_ERROR_INVALID_ARGUMENT,
                needle,
            );
        }

        let mut out = [0.0; 3];
        // SAFETY: NULL positions with n > 0 are rejected before any access.
        let status = unsafe {
            tutti_fmm(
                1,
                std::ptr::null(),
                masses.as_ptr(),
                std::ptr::null(),
                out.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(status, TUTTI_ERROR_NULL_POINTER.code());
        assert!(last_error().contains("`positions`"));
        // SAFETY: a negative n is rejected before any access.
        let status = unsafe {
            tutti_direct_sum(
                -1,
                positions.as_ptr(),
                masses.as_ptr(),
                0.0,
                out.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(status, TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(
            last_error().contains("argument `n` is -1"),
            "{}",
            last_error()
        );
        // SAFETY: arrays of the stated lengths.
        let status = unsafe {
            tutti_direct_sum(
                1,
                positions.as_ptr(),
                masses.as_ptr(),
                -0.5,
                out.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(status, TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(last_error().contains("softening"), "{}", last_error());
    }
}
