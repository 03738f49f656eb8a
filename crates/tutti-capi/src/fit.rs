//! Fits from C: residuals and Jacobians come from a user callback.

use std::ffi::{c_int, c_void};

use tutti_backend::BackendError;
use tutti_fit::{fit, fit_on, Bounds, Experiment, FitError, FitOptions, Termination};

use crate::boundary::{
    check_disjoint, ffi_call, input_options, input_slice, output_slice, positive_count,
    write_default, Out, Region,
};
use crate::progress::TuttiProgressCallback;
use crate::resources::{device_error, TuttiResources};
use crate::status::{Error, TuttiStatus};
use crate::world::checked;

/// Computes one experiment's residuals and Jacobian at `parameters`.
///
/// Arguments: `user_data` as given to `tutti_fit`; the experiment's index
/// (`0 <= experiment < n_experiments`); `parameters` (`n_parameters` values); `residuals`
/// (write `n_residuals` values); `jacobian` (write `n_residuals * n_parameters` values,
/// row-major: `jacobian[i * n_parameters + j] = d residual_i / d parameter_j`).
///
/// Return 0 on success, anything else on failure (a trial step is then rejected; at the
/// starting point the fit fails with `TUTTI_ERROR_CALLBACK`). The callback may be called
/// concurrently from several threads for different experiments; the arrays are valid only
/// during the call.
pub type TuttiResidualFn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        experiment: c_int,
        parameters: *const f64,
        n_parameters: c_int,
        residuals: *mut f64,
        n_residuals: c_int,
        jacobian: *mut f64,
    ) -> c_int,
>;

/// Options of `tutti_fit`. Start from `tutti_fit_options_default`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuttiFitOptions {
    /// Where the fit runs: the experiments are split over these devices (default:
    /// `tutti_resources_default`, every GPU, else one simulated device using all cores). The
    /// result is bit-identical for any device count; memory caps too small for the fit's
    /// buffers are refused up front (`TUTTI_ERROR_OUT_OF_MEMORY`, with the plan's numbers).
    pub resources: TuttiResources,
    /// Most iterations (default 200).
    pub max_iterations: c_int,
    /// Stop when the largest cosine of the angle between the residuals and a column of the
    /// Jacobian is at most this (default 1e-10): MINPACK's measure, `max_j |(J^T r)_j| /
    /// (|r| |J_j|)`, which does not change when the residuals or a parameter's units are
    /// scaled.
    pub gradient_tolerance: f64,
    /// Stop when a step is at most this relative to the parameters (default 1e-12).
    pub step_tolerance: f64,
    /// Stop when an accepted step lowers the cost by at most this fraction (default 1e-14).
    pub cost_tolerance: f64,
    /// Where progress is reported (default: nowhere; see `TuttiProgressCallback`). Each
    /// iteration (stage "iteration", `total` the iteration limit), with the cost.
    pub progress: TuttiProgressCallback,
    /// Lower bounds of the parameters: NULL (the default) for none, or `n_parameters`
    /// doubles, `lower[i]` finite or `-INFINITY` (no lower bound on parameter `i`). Borrowed
    /// for the call only.
    pub lower: *const f64,
    /// Upper bounds of the parameters: NULL (the default) for none, or `n_parameters`
    /// doubles, `upper[i]` finite or `INFINITY` (no upper bound on parameter `i`). Borrowed
    /// for the call only.
    ///
    /// With bounds (either array set; a NULL one is unbounded on that side) the fit keeps
    /// `lower[i] <= parameter i <= upper[i]`: `lower[i] == upper[i]` fixes parameter `i` at
    /// that value, `initial` must lie inside the bounds, a parameter held at a bound by the
    /// gradient is left out of the step, and the gradient tolerance applies to the others.
    /// The covariance is still that of the unconstrained problem at the solution (as
    /// scipy's `curve_fit` reports it).
    pub upper: *const f64,
}

/// `TuttiFitResult::termination`: the largest cosine of the angle between the residuals and
/// a column of the Jacobian, among the parameters the bounds leave free, fell to
/// `gradient_tolerance` (or the residuals are all zero).
pub const TUTTI_TERMINATION_GRADIENT: c_int = 1;
/// `TuttiFitResult::termination`: a step was at most `step_tolerance` relative to the
/// parameters.
pub const TUTTI_TERMINATION_STEP: c_int = 2;
/// `TuttiFitResult::termination`: an accepted step lowered the cost by at most
/// `cost_tolerance`.
pub const TUTTI_TERMINATION_COST: c_int = 3;
/// `TuttiFitResult::termination`: the iteration limit was reached; the parameters are the
/// best point found, not converged.
pub const TUTTI_TERMINATION_MAX_ITERATIONS: c_int = 4;
/// `TuttiFitResult::termination`: a per-iteration callback asked the fit to stop; the
/// parameters are the best point found, not converged. (The Rust API's callback; `tutti_fit`
/// has none yet, so it does not return this today.)
pub const TUTTI_TERMINATION_CALLBACK: c_int = 5;

/// Diagnostics of `tutti_fit`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TuttiFitResult {
    /// `0.5 * sum |r|^2` at the solution.
    pub cost: f64,
    /// Iterations taken.
    pub iterations: c_int,
    /// Evaluations of all experiments.
    pub evaluations: c_int,
    /// 1 if a tolerance was met, 0 if the iteration limit was reached (or a callback stopped
    /// the fit).
    pub converged: c_int,
    /// Why the fit stopped: `TUTTI_TERMINATION_GRADIENT`, `_STEP`, `_COST`,
    /// `_MAX_ITERATIONS` or `_CALLBACK` (never 0 after a successful call).
    pub termination: c_int,
    /// The rank of `J^T J` at the solution: `n_parameters` when every combination of the
    /// parameters is determined by the data, less when some are not (then the covariance is
    /// the pseudo-inverse, and the variances of the undetermined combinations are not
    /// known); -1 when no covariance could be formed (a failed factorization or a non-finite
    /// result; `covariance_out` is then all NaN).
    pub covariance_rank: c_int,
}

impl Default for TuttiFitOptions {
    fn default() -> Self {
        let defaults = FitOptions::default();
        Self {
            resources: TuttiResources::default(),
            max_iterations: c_int::try_from(defaults.max_iterations).unwrap_or(c_int::MAX),
            gradient_tolerance: defaults.gradient_tolerance,
            step_tolerance: defaults.step_tolerance,
            cost_tolerance: defaults.cost_tolerance,
            progress: TuttiProgressCallback::default(),
            lower: std::ptr::null(),
            upper: std::ptr::null(),
        }
    }
}

/// Writes the default fit options to `*options`: the default resources, 200 iterations,
/// tolerances 1e-10 (gradient), 1e-12 (step), 1e-14 (cost), no progress callback, no
/// bounds.
///
/// Errors: `TUTTI_ERROR_NULL_POINTER` for NULL.
///
/// # Safety
/// `options` is NULL or valid for writing a `TuttiFitOptions`.
#[no_mangle]
pub unsafe extern "C" fn tutti_fit_options_default(options: *mut TuttiFitOptions) -> c_int {
    ffi_call("tutti_fit_options_default", || {
        // SAFETY: NULL or valid for writes (the caller's promise).
        unsafe { write_default(options, "options") }
    })
}

/// One experiment seen through the C callback.
struct CallbackExperiment {
    callback: unsafe extern "C" fn(
        *mut c_void,
        c_int,
        *const f64,
        c_int,
        *mut f64,
        c_int,
        *mut f64,
    ) -> c_int,
    user_data: UserData,
    index: c_int,
    residuals: c_int,
}

/// The caller's `user_data` pointer, passed back to the callback untouched.
#[derive(Clone, Copy)]
struct UserData(*mut c_void);

// SAFETY: tutti never dereferences the pointer; it only hands it back to the callback,
// which the caller promises may run concurrently from several threads (tutti_fit's contract).
unsafe impl Sync for UserData {}
// SAFETY: as above.
unsafe impl Send for UserData {}

impl Experiment for CallbackExperiment {
    fn residual_count(&self) -> usize {
        self.residuals as usize
    }

    fn evaluate(
        &self,
        parameters: &[f64],
        residuals: &mut [f64],
        jacobian: &mut [f64],
    ) -> Result<(), String> {
        let n = c_int::try_from(parameters.len()).map_err(|_| "too many parameters".to_string())?;
        // SAFETY: the callback is the caller's function with the documented signature; the
        // arrays are valid for the lengths passed during the call.
        let status = unsafe {
            (self.callback)(
                self.user_data.0,
                self.index,
                parameters.as_ptr(),
                n,
                residuals.as_mut_ptr(),
                self.residuals,
                jacobian.as_mut_ptr(),
            )
        };
        if status == 0 {
            Ok(())
        } else {
            Err(format!(
                "the residual callback returned {status} for experiment {}",
                self.index
            ))
        }
    }
}

fn fit_error(error: FitError) -> Error {
    let error = match error {
        FitError::Devices(error) if !matches!(error, BackendError::OutOfMemory { .. }) => {
            return device_error(error)
        }
        other => other,
    };
    let status = match &error {
        FitError::Experiment { .. } | FitError::NonFinite { .. } => {
            TuttiStatus::TUTTI_ERROR_CALLBACK
        }
        FitError::InvalidArgument { .. } => TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT,
        FitError::OutOfMemory { .. }
        | FitError::Plan(_)
        | FitError::Devices(BackendError::OutOfMemory { .. }) => {
            TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY
        }
        FitError::Io { .. } | FitError::BadLedger { .. } => TuttiStatus::TUTTI_ERROR_IO,
        FitError::RankFailed { .. } => TuttiStatus::TUTTI_ERROR_REMOTE,
        // Group runs, and kinds the library adds later.
        _ => TuttiStatus::TUTTI_ERROR_DEVICE,
    };
    Error::new(status, error.to_string())
}

/// `TUTTI_TERMINATION_*` for why the solver stopped.
fn termination_code(termination: Termination) -> c_int {
    match termination {
        Termination::Gradient => TUTTI_TERMINATION_GRADIENT,
        Termination::Step => TUTTI_TERMINATION_STEP,
        Termination::Cost => TUTTI_TERMINATION_COST,
        Termination::MaxIterations => TUTTI_TERMINATION_MAX_ITERATIONS,
        Termination::Callback => TUTTI_TERMINATION_CALLBACK,
    }
}

/// The fit's bounds from `options->lower` and `options->upper` (read as slices, `None` for
/// NULL: unbounded on that side), checked against the start `initial`; `None` when both are
/// NULL.
///
/// Errors: `TUTTI_ERROR_INVALID_ARGUMENT` naming the entry at fault: a NaN, a lower bound
/// of `INFINITY` or an upper bound of `-INFINITY`, a lower bound above its upper bound, or
/// an initial value outside its bounds.
fn fit_bounds(
    lower: Option<&[f64]>,
    upper: Option<&[f64]>,
    initial: &[f64],
) -> Result<Option<Bounds>, Error> {
    if lower.is_none() && upper.is_none() {
        return Ok(None);
    }
    let n = initial.len();
    let lower = lower.map_or_else(|| vec![f64::NEG_INFINITY; n], <[f64]>::to_vec);
    let upper = upper.map_or_else(|| vec![f64::INFINITY; n], <[f64]>::to_vec);
    for (i, ((&low, &high), &start)) in lower.iter().zip(&upper).zip(initial).enumerate() {
        if low.is_nan() || low == f64::INFINITY {
            return Err(Error::invalid_argument(format!(
                "options->lower[{i}] is {low}: expected a finite number or -INFINITY"
            )));
        }
        if high.is_nan() || high == f64::NEG_INFINITY {
            return Err(Error::invalid_argument(format!(
                "options->upper[{i}] is {high}: expected a finite number or INFINITY"
            )));
        }
        if low > high {
            return Err(Error::invalid_argument(format!(
                "options->lower[{i}] is {low}, above options->upper[{i}] = {high}: expected \
                 lower <= upper (equal bounds fix the parameter)"
            )));
        }
        // A NaN start is left to the fit's own check of `initial`.
        if start < low || start > high {
            return Err(Error::invalid_argument(format!(
                "initial[{i}] is {start}, outside its bounds [options->lower[{i}], \
                 options->upper[{i}]] = [{low}, {high}]: the fit must start inside them"
            )));
        }
    }
    Bounds::new(lower, upper).map(Some).map_err(fit_error)
}

/// An optional input array `const double *name` of `len` values: `None` for NULL, else
/// checked as [`input_slice`] checks it.
///
/// # Safety
/// As [`input_slice`], for a pointer that is not NULL.
unsafe fn optional_input<'a>(
    ptr: *const f64,
    len: usize,
    name: &str,
) -> Result<Option<&'a [f64]>, Error> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: not NULL, so valid for `len` reads (the caller's promise).
    unsafe { input_slice(ptr, len, name) }.map(Some)
}

fn positive_tolerance(value: f64, name: &str) -> Result<f64, Error> {
    if value > 0.0 && value.is_finite() {
        Ok(value)
    } else {
        Err(Error::invalid_argument(format!(
            "options->{name} is {value}: expected a positive finite number"
        )))
    }
}

/// Fits `n_parameters` parameters, starting from `initial`, to `n_experiments` experiments
/// whose residuals and Jacobians `residual_fn` computes (experiment `e` has
/// `residual_counts[e]` residuals), by Levenberg–Marquardt with the experiments split over
/// the devices of `options->resources`, within the bounds `options->lower` and
/// `options->upper` when set; the result does not depend on the device count.
///
/// Outputs (caller-owned, written only on success): `parameters_out` (`n_parameters`
/// values), `covariance_out` (`n_parameters * n_parameters` values, row-major, the inverse of
/// `J^T J` at the solution, formed from a QR of the Jacobian; may be NULL), `result_out`
/// (diagnostics: cost, iterations, why the fit stopped, the covariance's rank).
///
/// A singular `J^T J` (parameters that enter the residuals only through a combination, such
/// as two that only appear as their sum) is not an error: the fit returns its parameters
/// and `covariance_out` the pseudo-inverse, with `result_out->covariance_rank` below
/// `n_parameters`. Should no covariance be formed at all, `covariance_out` is NaN and the
/// rank -1.
///
/// `options` may be NULL for the defaults. The callback may run concurrently from several
/// threads for different experiments, and must be safe to do so with `user_data`.
///
/// Errors: NULL required pointers or callback (`TUTTI_ERROR_NULL_POINTER`); counts below 1,
/// non-finite initial values, bad options (`TUTTI_ERROR_INVALID_ARGUMENT`), among them bad
/// bounds: a NaN, `options->lower[i]` of `INFINITY` or `options->upper[i]` of `-INFINITY`,
/// `options->lower[i] > options->upper[i]`, or `initial[i]` outside its bounds (the message
/// names the entry); the callback failing at the starting point (`TUTTI_ERROR_CALLBACK`);
/// outputs that overlap each other or an input, the bounds included
/// (`TUTTI_ERROR_INVALID_ARGUMENT`); a problem too large for memory or for the caps of
/// `options->resources` (`TUTTI_ERROR_OUT_OF_MEMORY`); device selection as for every
/// workload (`TUTTI_ERROR_INVALID_ARGUMENT` for zero devices or an unknown ordinal,
/// `TUTTI_ERROR_UNSUPPORTED` for a GPU request without CUDA, ...).
///
/// # Safety
/// `residual_counts` holds `n_experiments` ints, `initial` and `parameters_out`
/// `n_parameters` doubles, `covariance_out` (if not NULL) `n_parameters^2` doubles;
/// `options` and `result_out` are NULL or valid (and `options->resources`' pointers NULL or
/// valid as documented on `TuttiResources`, `options->lower` and `options->upper` NULL or
/// valid for `n_parameters` doubles); the callback honours its contract.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn tutti_fit(
    residual_fn: TuttiResidualFn,
    user_data: *mut c_void,
    n_experiments: c_int,
    residual_counts: *const c_int,
    n_parameters: c_int,
    initial: *const f64,
    options: *const TuttiFitOptions,
    parameters_out: *mut f64,
    covariance_out: *mut f64,
    result_out: *mut TuttiFitResult,
) -> c_int {
    ffi_call("tutti_fit", || {
        let options_ptr = options;
        // SAFETY: NULL or valid for reading a TuttiFitOptions (the caller's promise).
        let options = unsafe { input_options(options_ptr, "options") }?;
        // SAFETY: the world is NULL or a live handle (the caller's promise; checked).
        let world = unsafe { options.resources.world("options->resources") }?;
        // Every check before the fit goes through `checked`: with a world, a failure
        // releases the other processes.
        let prepared = checked(
            world,
            (|| {
                let callback = residual_fn.ok_or_else(|| Error::null_pointer("residual_fn"))?;
                let experiments = positive_count(n_experiments, "n_experiments")?;
                let parameters = positive_count(n_parameters, "n_parameters")?;
                let covariance_len = parameters.checked_mul(parameters).ok_or_else(|| {
                    Error::invalid_argument(format!(
                "argument `n_parameters` is {parameters}: its covariance matrix is larger than \
                 memory"
            ))
                })?;
                check_disjoint(&[
                    Region::input("residual_counts", residual_counts, experiments),
                    Region::input("initial", initial, parameters),
                    Region::input("options", options_ptr, 1),
                    Region::input("options->lower", options.lower, parameters),
                    Region::input("options->upper", options.upper, parameters),
                    Region::output("parameters_out", parameters_out, parameters),
                    Region::output("covariance_out", covariance_out, covariance_len),
                    Region::output("result_out", result_out, 1),
                ])?;
                // SAFETY: the lengths are the caller's promise; the helpers check NULL and alignment;
                // the outputs are disjoint from each other and from the inputs (checked above).
                let (counts, initial, parameters_out, result_out) = unsafe {
                    (
                        input_slice(residual_counts, experiments, "residual_counts")?,
                        input_slice(initial, parameters, "initial")?,
                        output_slice(parameters_out, parameters, "parameters_out")?,
                        Out::new(result_out, "result_out")?,
                    )
                };
                let covariance_out = if covariance_out.is_null() {
                    None
                } else {
                    // SAFETY: not NULL, so valid for n^2 doubles (the caller's promise).
                    Some(unsafe { output_slice(covariance_out, covariance_len, "covariance_out")? })
                };
                // SAFETY: each NULL or valid for n doubles, only read (the caller's promise);
                // disjoint from the outputs (checked above).
                let (lower, upper) = unsafe {
                    (
                        optional_input(options.lower, parameters, "options->lower")?,
                        optional_input(options.upper, parameters, "options->upper")?,
                    )
                };
                if let Some(e) = counts.iter().position(|&count| count < 1) {
                    return Err(Error::invalid_argument(format!(
                        "residual_counts[{e}] is {}: every experiment needs at least one residual",
                        counts[e]
                    )));
                }
                // SAFETY: the resources' pointers are the caller's, as documented above.
                let resources = unsafe { options.resources.to_rust("options->resources") }?;
                let mut fit_options = FitOptions::default().with_resources(resources);
                fit_options.max_iterations =
                    positive_count(options.max_iterations, "options->max_iterations")?;
                fit_options.gradient_tolerance =
                    positive_tolerance(options.gradient_tolerance, "gradient_tolerance")?;
                fit_options.step_tolerance =
                    positive_tolerance(options.step_tolerance, "step_tolerance")?;
                fit_options.cost_tolerance =
                    positive_tolerance(options.cost_tolerance, "cost_tolerance")?;
                fit_options.progress = options.progress.to_rust();
                if let Some(bounds) = fit_bounds(lower, upper, initial)? {
                    fit_options = fit_options.with_bounds(bounds);
                }

                let experiments: Vec<CallbackExperiment> = counts
                    .iter()
                    .enumerate()
                    .map(|(index, &residuals)| CallbackExperiment {
                        callback,
                        user_data: UserData(user_data),
                        index: index as c_int,
                        residuals,
                    })
                    .collect();
                Ok((
                    experiments,
                    initial,
                    fit_options,
                    parameters_out,
                    covariance_out,
                    result_out,
                ))
            })(),
        )?;
        let (experiments, initial, fit_options, parameters_out, covariance_out, result_out) =
            prepared;
        let report = match world {
            None => fit(&experiments, initial, &fit_options),
            Some(world) => fit_on(
                &world.group(&fit_options.resources, tutti_fit::GPU_USE)?,
                &experiments,
                initial,
                &fit_options,
            ),
        }
        .map_err(fit_error)?;
        if let Some(out) = covariance_out {
            match &report.covariance {
                Some(covariance) => out.copy_from_slice(covariance),
                None => out.fill(f64::NAN),
            }
        }
        parameters_out.copy_from_slice(&report.parameters);
        result_out.write(TuttiFitResult {
            cost: report.cost,
            iterations: c_int::try_from(report.iterations).unwrap_or(c_int::MAX),
            evaluations: c_int::try_from(report.evaluations).unwrap_or(c_int::MAX),
            converged: c_int::from(report.converged()),
            termination: termination_code(report.termination),
            // At most n_parameters, an int.
            covariance_rank: match report.covariance {
                Some(_) => c_int::try_from(report.covariance_rank).unwrap_or(c_int::MAX),
                None => -1,
            },
        });
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_errors_map_to_their_status() {
        let too_large = FitError::OutOfMemory {
            what: "the residuals of experiment 0".into(),
            bytes: u64::MAX,
        };
        assert_eq!(
            fit_error(too_large).status(),
            TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY
        );
        let bad = FitError::InvalidArgument {
            argument: "initial",
            message: "not finite".into(),
        };
        assert_eq!(
            fit_error(bad).status(),
            TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT
        );
    }

    /// y = a * exp(b * x) at five x per experiment; experiment e's data are exact for
    /// (a, b) = (2, -0.5), so the fit must land there.
    unsafe extern "C" fn exponential(
        user_data: *mut c_void,
        experiment: c_int,
        p: *const f64,
        n: c_int,
        r: *mut f64,
        m: c_int,
        j: *mut f64,
    ) -> c_int {
        // SAFETY: the test passes a pointer to an AtomicUsize call counter.
        let calls = unsafe { &*(user_data as *const std::sync::atomic::AtomicUsize) };
        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: tutti passes arrays of the stated lengths.
        let (p, r, j) = unsafe {
            (
                std::slice::from_raw_parts(p, n as usize),
                std::slice::from_raw_parts_mut(r, m as usize),
                std::slice::from_raw_parts_mut(j, (m * n) as usize),
            )
        };
        for i in 0..m as usize {
            let x = f64::from(experiment) + 0.25 * i as f64;
            let model = p[0] * (p[1] * x).exp();
            r[i] = model - 2.0 * (-0.5 * x).exp();
            j[2 * i] = (p[1] * x).exp();
            j[2 * i + 1] = p[0] * x * (p[1] * x).exp();
        }
        0
    }

    unsafe extern "C" fn failing(
        _: *mut c_void,
        _: c_int,
        _: *const f64,
        _: c_int,
        _: *mut f64,
        _: c_int,
        _: *mut f64,
    ) -> c_int {
        7
    }

    #[test]
    fn a_callback_fit_recovers_exact_parameters_on_any_device_count() {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let counts = [5, 5, 5, 5];
        let mut first = None;
        for devices in [1, 3] {
            let options = TuttiFitOptions {
                resources: TuttiResources {
                    kind: crate::devices::TuttiKind::TUTTI_KIND_CPU as c_int,
                    devices,
                    ..TuttiResources::default()
                },
                ..TuttiFitOptions::default()
            };
            let mut parameters = [0.0; 2];
            let mut covariance = [0.0; 4];
            let mut result = TuttiFitResult::default();
            // SAFETY: every array has the stated length; the callback reads its counter.
            let status = unsafe {
                tutti_fit(
                    Some(exponential),
                    &calls as *const _ as *mut c_void,
                    4,
                    counts.as_ptr(),
                    2,
                    [1.0, 0.0].as_ptr(),
                    &options,
                    parameters.as_mut_ptr(),
                    covariance.as_mut_ptr(),
                    &mut result,
                )
            };
            assert_eq!(status, 0, "{}", crate::boundary::last_error());
            assert!(
                (parameters[0] - 2.0).abs() < 1e-10 && (parameters[1] + 0.5).abs() < 1e-10,
                "{parameters:?}"
            );
            assert!(result.cost < 1e-20 && result.converged == 1);
            assert_eq!(result.covariance_rank, 2, "full rank");
            assert!(
                covariance[0] > 0.0
                    && (covariance[1] - covariance[2]).abs() < 1e-12 * covariance[1].abs().max(1.0)
            );
            let bits = parameters.map(f64::to_bits);
            assert_eq!(
                *first.get_or_insert(bits),
                bits,
                "the same bits on {devices} devices"
            );
        }
        assert!(calls.load(std::sync::atomic::Ordering::SeqCst) > 0);
    }

    #[test]
    fn bad_arguments_and_failing_callbacks_are_statuses() {
        let mut parameters = [0.0; 2];
        let mut result = TuttiFitResult::default();
        let counts = [3];
        // SAFETY: arrays of the stated lengths; NULL where the test says so.
        let status = unsafe {
            tutti_fit(
                None,
                std::ptr::null_mut(),
                1,
                counts.as_ptr(),
                2,
                [1.0, 1.0].as_ptr(),
                std::ptr::null(),
                parameters.as_mut_ptr(),
                std::ptr::null_mut(),
                &mut result,
            )
        };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_NULL_POINTER.code());
        assert!(crate::boundary::last_error().contains("residual_fn"));
        // SAFETY: as above.
        let status = unsafe {
            tutti_fit(
                Some(failing),
                std::ptr::null_mut(),
                1,
                counts.as_ptr(),
                2,
                [1.0, 1.0].as_ptr(),
                std::ptr::null(),
                parameters.as_mut_ptr(),
                std::ptr::null_mut(),
                &mut result,
            )
        };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_CALLBACK.code());
        assert!(
            crate::boundary::last_error().contains("returned 7"),
            "{}",
            crate::boundary::last_error()
        );
        assert_eq!(parameters, [0.0, 0.0], "outputs untouched on failure");
        // SAFETY: as above.
        let status = unsafe {
            tutti_fit(
                Some(failing),
                std::ptr::null_mut(),
                1,
                [0].as_ptr(),
                2,
                [1.0, 1.0].as_ptr(),
                std::ptr::null(),
                parameters.as_mut_ptr(),
                std::ptr::null_mut(),
                &mut result,
            )
        };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(crate::boundary::last_error().contains("residual_counts[0]"));
    }

    /// Calls `tutti_fit` on the exponential model with `options`; the status.
    fn exponential_fit(options: &TuttiFitOptions) -> c_int {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let mut parameters = [0.0; 2];
        let mut result = TuttiFitResult::default();
        // SAFETY: arrays of the stated lengths; the callback reads its counter.
        unsafe {
            tutti_fit(
                Some(exponential),
                &calls as *const _ as *mut c_void,
                2,
                [5, 5].as_ptr(),
                2,
                [1.0, 0.0].as_ptr(),
                options,
                parameters.as_mut_ptr(),
                std::ptr::null_mut(),
                &mut result,
            )
        }
    }

    #[test]
    fn resources_reach_the_fit_and_their_errors_are_statuses() {
        let cpu = |resources: TuttiResources| TuttiFitOptions {
            resources: TuttiResources {
                kind: crate::devices::TuttiKind::TUTTI_KIND_CPU as c_int,
                ..resources
            },
            ..TuttiFitOptions::default()
        };
        let zero = cpu(TuttiResources {
            devices: 0,
            ..TuttiResources::default()
        });
        assert_eq!(
            exponential_fit(&zero),
            TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code()
        );
        assert!(crate::boundary::last_error().contains("options->resources.devices"));
        let ordinals = [100_000];
        let unknown = cpu(TuttiResources {
            ordinals: ordinals.as_ptr(),
            ordinal_count: 1,
            ..TuttiResources::default()
        });
        assert_eq!(
            exponential_fit(&unknown),
            TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code()
        );
        assert!(
            crate::boundary::last_error().contains("ordinal 100000"),
            "{}",
            crate::boundary::last_error()
        );
        // Per device: 2 x 2 contribution records of 4 + 2 + 6 doubles (384 bytes) and more.
        let capped = cpu(TuttiResources {
            devices: 2,
            device_memory_bytes: 256,
            ..TuttiResources::default()
        });
        assert_eq!(
            exponential_fit(&capped),
            TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY.code()
        );
        assert!(
            crate::boundary::last_error().contains("contributions"),
            "{}",
            crate::boundary::last_error()
        );
        let enough = cpu(TuttiResources {
            devices: 2,
            device_memory_bytes: 1 << 20,
            ..TuttiResources::default()
        });
        assert_eq!(
            exponential_fit(&enough),
            0,
            "{}",
            crate::boundary::last_error()
        );
        // NULL options are the defaults.
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let mut parameters = [0.0; 2];
        let mut result = TuttiFitResult::default();
        // SAFETY: as above, with NULL options.
        let status = unsafe {
            tutti_fit(
                Some(exponential),
                &calls as *const _ as *mut c_void,
                2,
                [5, 5].as_ptr(),
                2,
                [1.0, 0.0].as_ptr(),
                std::ptr::null(),
                parameters.as_mut_ptr(),
                std::ptr::null_mut(),
                &mut result,
            )
        };
        assert_eq!(status, 0, "{}", crate::boundary::last_error());
        assert!((parameters[0] - 2.0).abs() < 1e-10, "{parameters:?}");
        assert_eq!(result.converged, 1);
    }
}
