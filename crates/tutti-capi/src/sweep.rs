//! SRC from C: `tutti_src` compresses the product of a stack of train handles
//! ([`crate::train`]) with `tutti-sweep`, on the devices of its options' `resources`.

use std::ffi::c_int;

use tutti_sweep::{src, src_on, Complex64, Layer, SrcOptions, SweepError, TensorTrain};

use crate::boundary::{
    check_disjoint, ffi_call, input_options, input_slice, positive_count, write_default, Out,
    Region,
};
use crate::progress::TuttiProgressCallback;
use crate::resources::{TuttiKernels, TuttiResources};
use crate::status::Error;
use crate::train::{
    handle_region, into_handle, promote, sweep_error, train_ref, AnyTrain, TuttiTrain,
};
use crate::world::checked;

/// Options of `tutti_src`. Start from `tutti_src_options_default` and set `chi_out`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuttiSrcOptions {
    /// The largest bond of the result (at least 1; the default, 0, must be replaced).
    pub chi_out: c_int,
    /// Extra sketch columns k: the sweep keeps bonds up to `chi_out + k`, then one SVD sweep
    /// truncates to `chi_out` (default 0: plain SRC).
    pub oversample: c_int,
    /// Relative singular-value cutoff in [0, 1): the final SVD sweep (run when `oversample`
    /// or `cutoff` is positive) keeps at each bond only `sigma_i > cutoff * sigma_0`
    /// (default 0).
    pub cutoff: f64,
    /// The sketch's seed: the draws for sketch column j at site k depend only on
    /// (seed, k, j), so the result does not depend on the devices beyond rounding (default 0).
    pub seed: u64,
    /// Where the sweep runs and the memory its plan must fit in (default:
    /// `tutti_resources_default`, every GPU or one simulated device on all cores).
    pub resources: TuttiResources,
    /// `TUTTI_KERNELS_AUTO` (default: the sweep's contractions on the device for GPU ranks,
    /// on the host for simulated devices), `TUTTI_KERNELS_ALWAYS` or `TUTTI_KERNELS_NEVER`.
    pub kernels: c_int,
    /// Where progress is reported (default: nowhere; see `TuttiProgressCallback`). Each site
    /// of each pass as it starts: stage "sketch (left to right)", then "orthogonalize (right to
    /// left)".
    pub progress: TuttiProgressCallback,
}

impl Default for TuttiSrcOptions {
    fn default() -> Self {
        Self {
            chi_out: 0,
            oversample: 0,
            cutoff: 0.0,
            seed: 0,
            resources: TuttiResources::default(),
            kernels: TuttiKernels::TUTTI_KERNELS_AUTO as c_int,
            progress: TuttiProgressCallback::default(),
        }
    }
}

/// Writes the default SRC options to `*options`: `chi_out` 0 (set it), no oversampling, no
/// cutoff, seed 0, the default resources.
///
/// # Safety
/// `options` is NULL or valid for writing a `TuttiSrcOptions`.
#[no_mangle]
pub unsafe extern "C" fn tutti_src_options_default(options: *mut TuttiSrcOptions) -> c_int {
    ffi_call("tutti_src_options_default", || {
        // SAFETY: NULL or valid for writes (the caller's promise).
        unsafe { write_default(options, "options") }
    })
}

/// Compresses the product of the stack of `n` trains to bonds <= `options->chi_out` by
/// successive randomized compression (one randomized sweep, split among the devices of
/// `options->resources` by sketch columns). NULL `options` means the defaults (whose
/// `chi_out`, 0, is an error: set it).
///
/// `stack` is in mathematical order: `{u3, u2, u1, psi}` is U3·U2·U1|psi>. An MPS may only
/// come first (a bra, not conjugated) or last (a ket); the result is an MPS if there is one,
/// else an MPO. If any train is complex128, the product is computed in complex128 (float64
/// trains promoted). The result is right-canonical (site 0 carries the norm); it equals the
/// exact product (to rounding) when `chi_out + oversample` reaches every exact bond. Stacks of
/// 2 sites are contracted exactly; 1 site is an error. Before any work the sweep's large
/// objects are planned within the devices' memory and the caps of `options->resources`.
///
/// `out` receives the new train, released with `tutti_train_free`.
///
/// Errors: NULL pointers (`TUTTI_ERROR_NULL_POINTER`); `n` below 1, trains of different
/// lengths, an MPS in the middle, mismatched physical legs, `chi_out` below 1, a negative
/// `oversample`, a cutoff outside [0, 1), a bad `options->resources` (a device count of 0,
/// too many devices, an unknown ordinal: `TUTTI_ERROR_INVALID_ARGUMENT`; a GPU request in a
/// build without CUDA: `TUTTI_ERROR_UNSUPPORTED`); a memory plan that does not fit the caps
/// (`TUTTI_ERROR_OUT_OF_MEMORY`, the message with the numbers); a file of a directory train
/// that turns out unreadable (`TUTTI_ERROR_IO`).
///
/// # Safety
/// `stack` holds `n` live handles; `options` is NULL or valid for reading a
/// `TuttiSrcOptions` whose `resources` pointers are NULL or valid as documented on
/// `TuttiResources`; `out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn tutti_src(
    stack: *const *const TuttiTrain,
    n: c_int,
    options: *const TuttiSrcOptions,
    out: *mut *mut TuttiTrain,
) -> c_int {
    ffi_call("tutti_src", || {
        let options_ptr = options;
        // SAFETY: NULL or valid for reading (the caller's promise), checked by the helper.
        let options = unsafe { input_options(options_ptr, "options") }?;
        // SAFETY: the world is NULL or a live handle (the caller's promise; checked).
        let world = unsafe { options.resources.world("options->resources") }?;
        // Every check before the sweep goes through `checked`: with a world, a failure
        // releases the other processes.
        let (out, trains, src_options) = checked(
            world,
            (|| {
                let count = positive_count(n, "n")?;
                // SAFETY: the caller's promise, checked by the helper.
                let handles = unsafe { input_slice(stack, count, "stack")? };
                let names: Vec<String> = (0..count).map(|i| format!("stack[{i}]")).collect();
                let mut regions = vec![
                    Region::input("stack", handles.as_ptr(), handles.len()),
                    Region::input("options", options_ptr, 1),
                    Region::output("out", out, 1),
                ];
                regions.extend(
                    handles
                        .iter()
                        .zip(&names)
                        .map(|(&handle, name)| handle_region(name, handle)),
                );
                check_disjoint(&regions)?;
                // SAFETY: NULL or valid for writing a pointer (the caller's promise), overlapping no
                // input (checked above).
                let out = unsafe { Out::new(out, "out")? };
                let trains = handles
                    .iter()
                    .enumerate()
                    // SAFETY: each entry is a live handle (the caller's promise), checked by train_ref.
                    .map(|(i, &handle)| unsafe { train_ref(handle, &format!("stack[{i}]")) })
                    .collect::<Result<Vec<_>, _>>()?;
                let chi_out = positive_count(options.chi_out, "options->chi_out")?;
                let oversample = usize::try_from(options.oversample).map_err(|_| {
                    Error::invalid_argument(format!(
                        "options->oversample is {}: expected 0 or more",
                        options.oversample
                    ))
                })?;
                // SAFETY: the resources' pointers are the caller's, as documented above.
                let resources = unsafe { options.resources.to_rust("options->resources") }?;
                let src_options = SrcOptions::new(chi_out)
                    .with_oversample(oversample)
                    .with_cutoff(options.cutoff)
                    .with_seed(options.seed)
                    .with_resources(resources)
                    .with_kernels(TuttiKernels::to_rust(options.kernels, "options->kernels")?);
                let src_options = match options.progress.to_sweep() {
                    Some(progress) => src_options.with_progress(progress),
                    None => src_options,
                };
                Ok((out, trains, src_options))
            })(),
        )?;
        let group = match world {
            None => None,
            Some(world) => Some(world.group(&src_options.resources, tutti_sweep::GPU_USE)?),
        };
        let sweep = |layers: &[&dyn Layer<f64>]| match &group {
            None => src(layers, &src_options),
            Some(group) => src_on(group, layers, &src_options),
        };
        let sweep_complex = |layers: &[&dyn Layer<Complex64>]| match &group {
            None => src(layers, &src_options),
            Some(group) => src_on(group, layers, &src_options),
        };
        let real: Option<Vec<&dyn Layer<f64>>> =
            trains.iter().map(|t| t.train.real_layer()).collect();
        let result = match real {
            Some(layers) => sweep(&layers).map(|(t, _)| AnyTrain::Real(t)),
            None => {
                let promoted = checked(
                    world,
                    trains
                        .iter()
                        .map(|t| complex_layer(&t.train))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(sweep_error),
                )?;
                let layers: Vec<&dyn Layer<Complex64>> =
                    promoted.iter().map(ComplexLayer::as_layer).collect();
                sweep_complex(&layers).map(|(t, _)| AnyTrain::Complex(t))
            }
        }
        .map_err(sweep_error)?;
        out.write(into_handle(result));
        Ok(())
    })
}

/// A train of a complex stack: borrowed where it is complex already or on disk (promoted
/// while streaming), copied where a float64 train in memory must be promoted.
enum ComplexLayer<'a> {
    Borrowed(&'a dyn Layer<Complex64>),
    Promoted(TensorTrain<Complex64>),
}

impl ComplexLayer<'_> {
    fn as_layer(&self) -> &dyn Layer<Complex64> {
        match self {
            Self::Borrowed(layer) => *layer,
            Self::Promoted(train) => train,
        }
    }
}

fn complex_layer(train: &AnyTrain) -> Result<ComplexLayer<'_>, SweepError> {
    Ok(match train {
        AnyTrain::Real(t) => ComplexLayer::Promoted(promote(t)?),
        AnyTrain::Complex(t) => ComplexLayer::Borrowed(t),
        AnyTrain::Disk(t) => ComplexLayer::Borrowed(t),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::last_error;
    use crate::devices::TuttiKind;
    use crate::resources::TUTTI_ALL_DEVICES;
    use crate::status::TuttiStatus;
    use crate::train::testing::*;
    use crate::train::{tutti_train_info, TuttiDtype, TuttiTrainKind};
    use std::ptr;
    use tutti_sweep::TrainKind;

    /// Options for `chi` on `devices` simulated devices (-1: `TUTTI_ALL_DEVICES`).
    fn options(chi: c_int, devices: c_int) -> TuttiSrcOptions {
        TuttiSrcOptions {
            chi_out: chi,
            seed: 3,
            resources: TuttiResources {
                kind: TuttiKind::TUTTI_KIND_CPU as c_int,
                devices,
                ..TuttiResources::default()
            },
            ..TuttiSrcOptions::default()
        }
    }

    fn run_src(stack: &[*mut TuttiTrain], options: &TuttiSrcOptions) -> (c_int, *mut TuttiTrain) {
        let stack: Vec<*const TuttiTrain> = stack.iter().map(|&p| p.cast_const()).collect();
        let mut out = ptr::null_mut();
        // SAFETY: live handles; out is a local.
        let status = unsafe { tutti_src(stack.as_ptr(), stack.len() as c_int, options, &mut out) };
        (status, out)
    }

    /// The exact product `a b` as a new handle, contracted by the sweep crate.
    fn exact_product_of(a: *mut TuttiTrain, b: *mut TuttiTrain) -> *mut TuttiTrain {
        // SAFETY: live handles made by this test's `make`, not released yet.
        let (a, b) = unsafe { (&(*a).train, &(*b).train) };
        let product = match (a.real_layer(), b.real_layer()) {
            (Some(x), Some(y)) => {
                AnyTrain::Real(tutti_sweep::exact_product(&[x, y]).expect("product"))
            }
            _ => {
                let (x, y) = (complex_layer(a).expect("x"), complex_layer(b).expect("y"));
                let layers = [x.as_layer(), y.as_layer()];
                AnyTrain::Complex(tutti_sweep::exact_product(&layers).expect("product"))
            }
        };
        into_handle(product)
    }

    #[test]
    fn src_with_a_wide_sketch_is_exact_on_any_device_count_real_and_complex() {
        for dtype in [
            TuttiDtype::TUTTI_DTYPE_FLOAT64,
            TuttiDtype::TUTTI_DTYPE_COMPLEX128,
        ] {
            let h = make(TrainKind::Mpo, dtype, 5, 2);
            let psi = make(TrainKind::Mps, dtype, 5, 3);
            // The exact bonds of H psi are at most 2 x 3 = 6: chi 16 covers them.
            let (status, one) = run_src(&[h, psi], &options(16, 1));
            assert_eq!(status, 0, "{}", last_error());
            let (status, two) = run_src(&[h, psi], &options(16, 2));
            assert_eq!(status, 0, "{}", last_error());
            // The exact product (bonds 2 x 3), contracted by the sweep crate.
            let exact = exact_product_of(h, psi);
            let scale = norm_of(exact);
            assert!(scale > 0.0);
            assert!(distance_of(one, exact) <= 1e-12 * scale);
            assert!(distance_of(two, exact) <= 1e-12 * scale);
            let mut kind = -1;
            let mut dt = -1;
            let mut sites = -1;
            // SAFETY: a live handle and locals.
            let status = unsafe { tutti_train_info(one, &mut kind, &mut dt, &mut sites) };
            assert_eq!(status, 0);
            assert_eq!(
                (kind, dt, sites),
                (TuttiTrainKind::TUTTI_TRAIN_MPS as c_int, dtype as c_int, 5)
            );
            for train in [h, psi, one, two, exact] {
                free(train);
            }
        }
    }

    #[test]
    fn bad_src_input_gets_a_status_and_a_message_naming_it() {
        // SRC: an MPS in the middle, chi 0, NULL entries, too many devices.
        let psi = make(TrainKind::Mps, TuttiDtype::TUTTI_DTYPE_FLOAT64, 4, 2);
        let h = make(TrainKind::Mpo, TuttiDtype::TUTTI_DTYPE_FLOAT64, 4, 2);
        let (status, result) = run_src(&[h, psi, h], &options(4, 1));
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(last_error().contains("invalid stack"), "{}", last_error());
        assert!(result.is_null());
        let (status, _) = run_src(&[h, psi], &options(0, 1));
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(
            last_error().contains("options->chi_out"),
            "{}",
            last_error()
        );
        let (status, _) = run_src(&[h, psi], &options(4, 100_000));
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(
            last_error().contains("options->resources"),
            "{}",
            last_error()
        );
        let (status, _) = run_src(&[h, psi], &options(4, 0));
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        let ordinals: [c_int; 2] = [0, 9999];
        let mut unknown = options(4, TUTTI_ALL_DEVICES);
        unknown.resources.ordinals = ordinals.as_ptr();
        unknown.resources.ordinal_count = 2;
        let (status, _) = run_src(&[h, psi], &unknown);
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(last_error().contains("9999"), "{}", last_error());
        if tutti_backend::gpu_count().unwrap_or(0) == 0 {
            let mut gpu = options(4, 1);
            gpu.resources.kind = TuttiKind::TUTTI_KIND_GPU as c_int;
            let (status, _) = run_src(&[h, psi], &gpu);
            assert!(
                status == TuttiStatus::TUTTI_ERROR_UNSUPPORTED.code()
                    || status == TuttiStatus::TUTTI_ERROR_DEVICE.code(),
                "{status}: {}",
                last_error()
            );
        }
        let (status, _) = run_src(&[h, ptr::null_mut()], &options(4, 1));
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_NULL_POINTER.code());
        assert!(last_error().contains("stack[1]"), "{}", last_error());
        free(psi);
        free(h);
    }

    #[test]
    fn a_mixed_stack_is_computed_in_complex() {
        let h = make(TrainKind::Mpo, TuttiDtype::TUTTI_DTYPE_FLOAT64, 4, 2);
        let psi = make(TrainKind::Mps, TuttiDtype::TUTTI_DTYPE_COMPLEX128, 4, 2);
        let (status, out) = run_src(&[h, psi], &options(8, 1));
        assert_eq!(status, 0, "{}", last_error());
        let mut dtype = -1;
        // SAFETY: a live handle; the other outputs NULL.
        let status = unsafe { tutti_train_info(out, ptr::null_mut(), &mut dtype, ptr::null_mut()) };
        assert_eq!(status, 0);
        assert_eq!(dtype, TuttiDtype::TUTTI_DTYPE_COMPLEX128 as c_int);
        for train in [h, psi, out] {
            free(train);
        }
    }

    #[test]
    fn null_options_are_the_defaults_and_any_device_count_agrees() {
        let h = make(TrainKind::Mpo, TuttiDtype::TUTTI_DTYPE_FLOAT64, 6, 3);
        let psi = make(TrainKind::Mps, TuttiDtype::TUTTI_DTYPE_FLOAT64, 6, 4);
        let stack = [h.cast_const(), psi.cast_const()];
        let mut out = ptr::null_mut();
        // NULL options: the defaults, whose chi_out 0 must be replaced.
        // SAFETY: live handles; out is a local.
        let status = unsafe { tutti_src(stack.as_ptr(), 2, ptr::null(), &mut out) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(last_error().contains("chi_out"), "{}", last_error());
        let mut defaults = TuttiSrcOptions {
            chi_out: -5,
            ..TuttiSrcOptions::default()
        };
        // SAFETY: a local.
        assert_eq!(unsafe { tutti_src_options_default(&mut defaults) }, 0);
        assert_eq!(defaults, TuttiSrcOptions::default());
        assert_eq!(defaults.resources, TuttiResources::default());

        let (status, one) = run_src(&[h, psi], &options(5, 1));
        assert_eq!(status, 0, "{}", last_error());
        let scale = norm_of(one);
        for devices in 2..=4 {
            let (status, split) = run_src(&[h, psi], &options(5, devices));
            assert_eq!(status, 0, "{}", last_error());
            // Rounding of a different order of the rank sums only.
            assert!(
                distance_of(split, one) <= 1e-10 * scale,
                "{devices} devices"
            );
            free(split);
        }
        // A 4 KiB device cap cannot hold the sweep's buffers: refused up front.
        let mut capped = options(5, 1);
        capped.resources.device_memory_bytes = 4 << 10;
        let (status, none) = run_src(&[h, psi], &capped);
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY.code());
        assert!(last_error().contains("memory plan"), "{}", last_error());
        assert!(none.is_null());
        for train in [h, psi, one] {
            free(train);
        }
    }
}
