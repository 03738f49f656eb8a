//! The fast multipole method from C (`tutti-fmm`): potentials and accelerations of N bodies
//! into caller-owned arrays, and the direct sum it is checked against.
//!
//! Conventions (DESIGN.md, G = 1, Plummer softening eps >= 0):
//! `phi_i = -sum_{j != i} m_j / sqrt(r_ij^2 + eps^2)` and
//! `a_i = -sum_{j != i} m_j (x_i - x_j) / (r_ij^2 + eps^2)^(3/2)`. Positions are `n * 3`
//! doubles, row-major (`x0 y0 z0 x1 y1 z1 ...`); strengths may be negative.

use std::ffi::c_int;

use tutti_backend::BackendError;
use tutti_fmm::{
    direct, fmm, fmm_at_targets, fmm_at_targets_on, fmm_on, order_for_accuracy, FmmError,
    FmmOptions, Precision,
};
use tutti_group::GroupError;

use crate::boundary::{
    check_disjoint, ffi_call, input_options, input_slice, output_slice, write_default, Out, Region,
};
use crate::progress::TuttiProgressCallback;
use crate::resources::{device_error, TuttiKernels, TuttiResources};
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
    /// `TUTTI_KERNELS_AUTO` (default: M2L and P2P as device kernels on GPU ranks, host code on
    /// simulated devices), `TUTTI_KERNELS_ALWAYS` or `TUTTI_KERNELS_NEVER`.
    pub kernels: c_int,
    /// Non-zero (default 1): the GPU kernels may fuse multiply-adds, as the host code's
    /// compiler may not; 0 makes a GPU's results the host code's bits.
    pub fused_multiply_add: c_int,
    /// Where progress is reported (default: nowhere; see `TuttiProgressCallback`). Each of the
    /// five phases ("tree", "upward", "far field", "near field", "gather") as it ends.
    pub progress: TuttiProgressCallback,
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
            kernels: TuttiKernels::TUTTI_KERNELS_AUTO as c_int,
            fused_multiply_add: c_int::from(defaults.fused_multiply_add),
            progress: TuttiProgressCallback::default(),
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
            .with_resources(resources)
            .with_kernels(TuttiKernels::to_rust(self.kernels, "options->kernels")?)
            .with_fused_multiply_add(match self.fused_multiply_add {
                0 => false,
                1 => true,
                other => {
                    return Err(Error::invalid_argument(format!(
                        "options->fused_multiply_add is {other}: expected 0 or 1"
                    )))
                }
            });
        let options = match self.progress.to_rust() {
            Some(progress) => options.with_progress(progress),
            None => options,
        };
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

/// A count argument as a `usize`, or `TUTTI_ERROR_INVALID_ARGUMENT` naming it.
fn count_of(value: i64, name: &str, what: &str) -> Result<usize, Error> {
    usize::try_from(value).map_err(|_| {
        Error::invalid_argument(format!(
            "argument `{name}` is {value}: expected a number of {what} >= 0"
        ))
    })
}

/// The sources, targets and output arrays of one `tutti_fmm_targets` call, checked.
struct TargetCall<'a> {
    sources: &'a [[f64; 3]],
    masses: &'a [f64],
    targets: &'a [[f64; 3]],
    fields: Bodies<'a>,
}

/// Checks the counts and the five arrays of `tutti_fmm_targets`: with a count of 0 the
/// arrays it sizes may be NULL and are not read or written.
///
/// # Safety
/// As documented on `tutti_fmm_targets`.
unsafe fn target_call<'a>(
    n_sources: i64,
    sources: *const f64,
    masses: *const f64,
    n_targets: i64,
    targets: *const f64,
    potential_out: *mut f64,
    accel_out: *mut f64,
) -> Result<TargetCall<'a>, Error> {
    let n = count_of(n_sources, "n_sources", "sources")?;
    let m = count_of(n_targets, "n_targets", "targets")?;
    let mut regions = Vec::with_capacity(5);
    if n > 0 {
        regions.push(Region::input("sources", sources, n.saturating_mul(3)));
        regions.push(Region::input("masses", masses, n));
    }
    if m > 0 {
        regions.push(Region::input("targets", targets, m.saturating_mul(3)));
        regions.push(Region::output("potential_out", potential_out, m));
        regions.push(Region::output("accel_out", accel_out, m.saturating_mul(3)));
    }
    check_disjoint(&regions)?;
    let (sources, masses) = if n == 0 {
        (&[][..], &[][..])
    } else {
        // SAFETY: with n > 0, `sources` holds n * 3 doubles and `masses` n (the caller's
        // promise); a [f64; 3] has the size and alignment of three doubles; the helpers
        // check NULL, alignment and that the byte count fits in memory.
        unsafe {
            (
                input_slice(sources.cast::<[f64; 3]>(), n, "sources")?,
                input_slice(masses, n, "masses")?,
            )
        }
    };
    if m == 0 {
        return Ok(TargetCall {
            sources,
            masses,
            targets: &[],
            fields: Bodies {
                positions: &[],
                masses: &[],
                potential_out: None,
                accel_out: None,
            },
        });
    }
    // SAFETY: `targets` holds m * 3 doubles (the caller's promise), checked as above.
    let targets = unsafe { input_slice(targets.cast::<[f64; 3]>(), m, "targets")? };
    let potential_out = if potential_out.is_null() {
        None
    } else {
        // SAFETY: not NULL, so valid for m doubles (the caller's promise), and disjoint from
        // every other array (checked above).
        Some(unsafe { output_slice(potential_out, m, "potential_out")? })
    };
    let accel_out = if accel_out.is_null() {
        None
    } else {
        // SAFETY: not NULL, so valid for m * 3 doubles (the caller's promise), and disjoint
        // from every other array (checked above).
        Some(unsafe { output_slice(accel_out.cast::<[f64; 3]>(), m, "accel_out")? })
    };
    Ok(TargetCall {
        sources,
        masses,
        targets,
        fields: Bodies {
            positions: &[],
            masses: &[],
            potential_out,
            accel_out,
        },
    })
}

/// Computes the potential and acceleration that `n_sources` sources produce at each of
/// `n_targets` separate points, by the fast multipole method on the devices of
/// `options->resources` (one tree over sources and targets, as FMM3D's; bit-identical for
/// any device count):
/// `phi(t) = -sum_j m_j / sqrt(|t - x_j|^2 + eps^2)`, `a(t) = -grad phi(t)`. A source at
/// exactly a target's position is left out of that target's sum (FMM3D's convention), so a
/// target at a source gets what `tutti_fmm` gives that source.
///
/// Inputs: `sources` (`n_sources * 3` doubles, row-major), `masses` (`n_sources`, any sign),
/// `targets` (`n_targets * 3` doubles, row-major; duplicates allowed), `options` (NULL for
/// the defaults). Outputs (caller-owned, written only on success, each may be NULL):
/// `potential_out` (`n_targets` doubles), `accel_out` (`n_targets * 3` doubles). A count of 0
/// is allowed: the arrays it sizes may be NULL; no sources give zero fields.
///
/// Errors as for `tutti_fmm`, the sources named `positions` in messages about them: NaN or
/// infinite coordinates (a target's message names its index), two sources at one position
/// without softening, overlapping arrays, bad options.
///
/// # Safety
/// Each array is NULL only when its count is 0, else readable (inputs) or writable
/// (outputs) for the lengths above, the outputs not overlapping anything (an overlap is
/// refused, not undefined); `options` as for `tutti_fmm`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn tutti_fmm_targets(
    n_sources: i64,
    sources: *const f64,
    masses: *const f64,
    n_targets: i64,
    targets: *const f64,
    options: *const TuttiFmmOptions,
    potential_out: *mut f64,
    accel_out: *mut f64,
) -> c_int {
    ffi_call("tutti_fmm_targets", || {
        // SAFETY: NULL or valid for reading a TuttiFmmOptions (the caller's promise).
        let options = unsafe { input_options(options, "options") }?;
        // SAFETY: the world is NULL or a live handle (the caller's promise; checked).
        let world = unsafe { options.resources.world("options->resources") }?;
        // SAFETY: the resources' pointers and the array contracts are the caller's, as
        // documented above.
        let (options, call) = checked(world, unsafe {
            options.to_rust().and_then(|options| {
                target_call(
                    n_sources,
                    sources,
                    masses,
                    n_targets,
                    targets,
                    potential_out,
                    accel_out,
                )
                .map(|call| (options, call))
            })
        })?;
        let out = match world {
            None => fmm_at_targets(call.sources, call.masses, call.targets, &options),
            Some(world) => fmm_at_targets_on(
                &world.group(&options.resources, tutti_fmm::GPU_USE)?,
                call.sources,
                call.masses,
                call.targets,
                &options,
            ),
        }
        .map_err(fmm_error)?;
        call.fields.write(&out.potential, &out.accel);
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
    fn the_progress_callback_gets_each_phase_once_in_order() {
        let (positions, masses) = lcg_bodies(700);
        let seen = crate::progress::recording::Seen::default();
        let options = TuttiFmmOptions {
            progress: seen.callback(),
            resources: TuttiResources {
                kind: crate::TuttiKind::TUTTI_KIND_CPU as c_int,
                devices: 2,
                ..TuttiResources::default()
            },
            ..TuttiFmmOptions::default()
        };
        let (status, _, _) = call_fmm(&positions, &masses, Some(&options));
        assert_eq!(status, 0, "{}", last_error());
        let expected: Vec<_> = tutti_fmm::PHASES
            .iter()
            .zip(1..)
            .map(|(phase, done)| ("fmm".to_string(), phase.to_string(), done, 5, None))
            .collect();
        assert_eq!(seen.reports(), expected);
    }

    #[test]
    fn the_kernels_on_simulated_devices_give_the_host_bits_and_bad_values_are_named() {
        let (positions, masses) = lcg_bodies(900);
        let on = |kernels: TuttiKernels, fused_multiply_add: c_int| TuttiFmmOptions {
            kernels: kernels as c_int,
            fused_multiply_add,
            leaf_size: 16,
            resources: TuttiResources {
                kind: crate::TuttiKind::TUTTI_KIND_CPU as c_int,
                devices: 2,
                ..TuttiResources::default()
            },
            ..TuttiFmmOptions::default()
        };
        let host = call_fmm(
            &positions,
            &masses,
            Some(&on(TuttiKernels::TUTTI_KERNELS_NEVER, 1)),
        );
        assert_eq!(host.0, 0, "{}", last_error());
        for fma in [0, 1] {
            let twins = call_fmm(
                &positions,
                &masses,
                Some(&on(TuttiKernels::TUTTI_KERNELS_ALWAYS, fma)),
            );
            assert_eq!(
                twins, host,
                "the kernels' host twins, fused_multiply_add {fma}"
            );
        }
        let auto = call_fmm(
            &positions,
            &masses,
            Some(&on(TuttiKernels::TUTTI_KERNELS_AUTO, 1)),
        );
        assert_eq!(auto, host);

        let invalid = TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT as c_int;
        let mut bad = on(TuttiKernels::TUTTI_KERNELS_AUTO, 1);
        bad.kernels = 3;
        assert_eq!(call_fmm(&positions, &masses, Some(&bad)).0, invalid);
        assert!(
            last_error().contains("options->kernels is 3"),
            "{}",
            last_error()
        );
        let mut bad = on(TuttiKernels::TUTTI_KERNELS_AUTO, 1);
        bad.fused_multiply_add = 2;
        assert_eq!(call_fmm(&positions, &masses, Some(&bad)).0, invalid);
        assert!(
            last_error().contains("fused_multiply_add is 2"),
            "{}",
            last_error()
        );
    }

    fn call_targets(
        sources: &[f64],
        masses: &[f64],
        targets: &[f64],
        options: Option<&TuttiFmmOptions>,
    ) -> (c_int, Vec<f64>, Vec<f64>) {
        let m = targets.len() / 3;
        let mut potential = vec![7.0; m];
        let mut accel = vec![7.0; 3 * m];
        // SAFETY: arrays of the stated lengths.
        let status = unsafe {
            tutti_fmm_targets(
                masses.len() as i64,
                sources.as_ptr(),
                masses.as_ptr(),
                m as i64,
                targets.as_ptr(),
                options.map_or(std::ptr::null(), |o| o as *const _),
                potential.as_mut_ptr(),
                accel.as_mut_ptr(),
            )
        };
        (status, potential, accel)
    }

    #[test]
    fn fmm_at_targets_matches_the_direct_sum_and_leaves_out_a_source_at_a_target() {
        let (sources, masses) = lcg_bodies(1500);
        // Targets from the same generator's later draws, spread over twice the source box,
        // then the first three sources themselves.
        let (spread, _) = lcg_bodies(2200);
        let mut targets: Vec<f64> = spread[4500..].iter().map(|x| 2.0 * x - 0.5).collect();
        targets.extend_from_slice(&sources[..9]);
        let (status, potential, accel) = call_targets(&sources, &masses, &targets, None);
        assert_eq!(status, 0, "{}", last_error());
        let as_points = |flat: &[f64]| -> Vec<[f64; 3]> {
            flat.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect()
        };
        let (exact_potential, exact_accel) =
            tutti_fmm::direct_at_targets(&as_points(&sources), &masses, &as_points(&targets), 0.0)
                .expect("direct");
        let flat_exact: Vec<f64> = exact_accel.iter().flatten().copied().collect();
        // The defaults' documented accuracy (1e-4 relative L2 on accelerations).
        assert!(relative_l2(&accel, &flat_exact) < 1e-4);
        assert!(relative_l2(&potential, &exact_potential) < 1e-4);
        // Targets that are all at sources add no body to the tree: each gets tutti_fmm's field
        // of its source, bit for bit.
        let at_sources: Vec<f64> = sources[..9].to_vec();
        let (status, potential, accel) = call_targets(&sources, &masses, &at_sources, None);
        assert_eq!(status, 0, "{}", last_error());
        let (status, own_potential, own_accel) = call_fmm(&sources, &masses, None);
        assert_eq!(status, 0, "{}", last_error());
        assert_eq!(potential, own_potential[..3]);
        assert_eq!(accel, own_accel[..9]);
    }

    #[test]
    fn fmm_at_targets_checks_its_arrays_and_allows_empty_counts() {
        let (sources, masses) = lcg_bodies(50);
        let targets = vec![0.25, 0.5, 0.75, f64::NAN, 0.0, 0.0];
        let (status, _, _) = call_targets(&sources, &masses, &targets, None);
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT as c_int);
        assert!(
            last_error().contains("targets") && last_error().contains('1'),
            "{}",
            last_error()
        );
        let null = std::ptr::null_mut::<f64>();
        // SAFETY: counts of 0 with NULL arrays, and arrays of the stated lengths.
        unsafe {
            assert_eq!(
                tutti_fmm_targets(0, null, null, 0, null, std::ptr::null(), null, null),
                0
            );
            let mut potential = [7.0; 2];
            let status = tutti_fmm_targets(
                0,
                null,
                null,
                2,
                sources.as_ptr(),
                std::ptr::null(),
                potential.as_mut_ptr(),
                null,
            );
            assert_eq!(
                (status, potential),
                (0, [0.0, 0.0]),
                "no sources: zero fields"
            );
            let mut accel = sources[..6].to_vec();
            let status = tutti_fmm_targets(
                50,
                sources.as_ptr(),
                masses.as_ptr(),
                2,
                accel.as_ptr(),
                std::ptr::null(),
                null,
                accel.as_mut_ptr(),
            );
            assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT as c_int);
            assert!(last_error().contains("accel_out"), "{}", last_error());
            let status = tutti_fmm_targets(-1, null, null, 0, null, std::ptr::null(), null, null);
            assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT as c_int);
            assert!(last_error().contains("n_sources"), "{}", last_error());
        }
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
