//! SRC from C: `tutti_src` compresses the product of a stack of train handles
//! ([`crate::train`]) with `tutti-sweep`, on the devices of its options' `resources`, and
//! reports the sweep's diagnostics in a `TuttiSrcInfo` when asked.

use std::ffi::c_int;
use std::ptr;

use tutti_sweep::{src, src_on, Complex64, Layer, SrcInfo, SrcOptions, SweepError, TensorTrain};

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
    /// 0 (the default): the QR of each site's sketched matrix is a Householder QR at rank 0
    /// while the other ranks wait. Nonzero: it is split among the ranks, a distributed
    /// CholeskyQR2 over row blocks of the matrix (shifted CholeskyQR3 for an ill-conditioned
    /// sketch, a Householder QR at rank 0 for one too ill-conditioned for either). One device
    /// always runs the Householder QR. Either way the result agrees to rounding.
    pub distributed_qr: c_int,
    /// NULL (the default), or where `tutti_src` writes the sweep's diagnostics
    /// (`TuttiSrcInfo`), on success only. It must not overlap `out`, the stack or the options.
    pub info_out: *mut TuttiSrcInfo,
    /// Where progress is reported (default: nowhere; see `TuttiProgressCallback`). Each site
    /// of each pass as it starts: stage "sketch (left to right)", then "orthogonalize (right to
    /// left)".
    pub progress: TuttiProgressCallback,
}

/// Diagnostics of one `tutti_src` call, written to `options->info_out` when it is not NULL.
/// Counts of sites refer to the sweep's sites; every field is 0 for a 2-site stack
/// (contracted exactly, `exact_fallback` 1) except `sketch_width`, `devices`, `seconds`,
/// `exact_fallback`, `truncated_weight` and `norm`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TuttiSrcInfo {
    /// The sketch width: `chi_out + oversample`, clamped to the largest bond the product can
    /// have.
    pub sketch_width: u64,
    /// The number of devices (ranks) the sweep was split among.
    pub devices: u64,
    /// Wall-clock seconds of the whole sweep.
    pub seconds: f64,
    /// 1 when the stack had 2 sites and was contracted exactly instead of sketched, else 0.
    pub exact_fallback: c_int,
    /// The weight (sum of squared singular values) the final truncation sweep discarded (0
    /// without `oversample` or `cutoff`).
    pub truncated_weight: f64,
    /// The norm of the result (the Frobenius norm of its site 0: it is right-canonical).
    pub norm: f64,
    /// Sites whose QR was split among the ranks (distributed CholeskyQR2 or shifted
    /// CholeskyQR3): 0 unless `distributed_qr` is set and there are 2 devices or more.
    pub qr_distributed: u64,
    /// Of `qr_distributed`, the sites that took the shifted path (an ill-conditioned sketch).
    pub qr_shifted: u64,
    /// Sites factored by Householder QR at rank 0: every site on one device or without
    /// `distributed_qr`, else the sketches too ill-conditioned for the distributed QR.
    pub qr_householder: u64,
    /// The largest `||Q^H Q - I||_F` the distributed QRs reached (0 when none ran).
    pub qr_worst_orthogonality: f64,
    /// Wall-clock seconds rank 0 spent in the QR step of the right-to-left pass.
    pub qr_seconds: f64,
    /// Sites whose sketched environment stayed where the ranks compute between the passes
    /// (without memory caps, all n - 1 of an n-site stack: sites 1 to n - 1).
    pub environments_on_device: u64,
    /// Sites whose sketched environment the memory plan moved to host memory.
    pub environments_on_host: u64,
    /// Sites whose sketched environment the memory plan spilled to the scratch directory of
    /// `options->resources` (read back during the right-to-left pass).
    pub environments_on_disk: u64,
    /// Bytes written to spill files, summed over this process's ranks (the files are removed
    /// before `tutti_src` returns).
    pub spilled_bytes: u64,
}

impl TuttiSrcInfo {
    /// The C view of the sweep's diagnostics.
    fn from_rust(info: &SrcInfo) -> Self {
        let count = |value: usize| u64::try_from(value).unwrap_or(u64::MAX);
        Self {
            sketch_width: count(info.sketch_width),
            devices: count(info.devices),
            seconds: info.seconds,
            exact_fallback: c_int::from(info.exact_fallback),
            truncated_weight: info.truncated_weight,
            norm: info.norm,
            qr_distributed: count(info.qr.distributed),
            qr_shifted: count(info.qr.shifted),
            qr_householder: count(info.qr.householder),
            qr_worst_orthogonality: info.qr.worst_orthogonality,
            qr_seconds: info.qr.seconds,
            environments_on_device: count(info.environments.on_device),
            environments_on_host: count(info.environments.on_host),
            environments_on_disk: count(info.environments.on_disk),
            spilled_bytes: info.environments.spilled_bytes,
        }
    }
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
            distributed_qr: 0,
            info_out: ptr::null_mut(),
            progress: TuttiProgressCallback::default(),
        }
    }
}

/// Writes the default SRC options to `*options`: `chi_out` 0 (set it), no oversampling, no
/// cutoff, seed 0, the default resources, `TUTTI_KERNELS_AUTO`, the QR at rank 0
/// (`distributed_qr` 0), no diagnostics (`info_out` NULL), no progress callback.
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
/// Out of core: sketched environments that fit neither the device cap
/// (`options->resources.device_memory_bytes`) nor the host cap (`host_memory_bytes`) are
/// spilled to a private directory under `options->resources.scratch_dir` (the system's
/// temporary directory when NULL), within `scratch_limit_bytes`, and read back during the
/// right-to-left pass; the directory is removed before the call returns, on success or
/// failure. Where the environments lived never changes the result's bits.
/// `options->distributed_qr` splits the QR of each site among the devices.
///
/// `out` receives the new train, released with `tutti_train_free`. When
/// `options->info_out` is not NULL, the sweep's diagnostics are written there (a
/// `TuttiSrcInfo`, plain numbers: nothing to release). Both are written on success only.
///
/// Errors: NULL pointers (`TUTTI_ERROR_NULL_POINTER`); `n` below 1, trains of different
/// lengths, an MPS in the middle, mismatched physical legs, `chi_out` below 1, a negative
/// `oversample`, a cutoff outside [0, 1), a bad `options->resources` (a device count of 0,
/// too many devices, an unknown ordinal: `TUTTI_ERROR_INVALID_ARGUMENT`; a GPU request in a
/// build without CUDA: `TUTTI_ERROR_UNSUPPORTED`); a memory plan that does not fit the caps
/// (`TUTTI_ERROR_OUT_OF_MEMORY`, the message with the numbers); a file of a directory train
/// that turns out unreadable, a spill file that cannot be written or read
/// (`TUTTI_ERROR_IO`); `options->info_out` overlapping `out`, the stack or the options, or
/// misaligned (`TUTTI_ERROR_INVALID_ARGUMENT`).
///
/// # Safety
/// `stack` holds `n` live handles; `options` is NULL or valid for reading a
/// `TuttiSrcOptions` whose `resources` pointers are NULL or valid as documented on
/// `TuttiResources` and whose `info_out` is NULL or valid for writing a `TuttiSrcInfo`;
/// `out` is NULL or valid for writing a pointer.
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
        let (out, info_out, trains, src_options) = checked(
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
                    Region::output("options->info_out", options.info_out, 1),
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
                let info_out = if options.info_out.is_null() {
                    None
                } else {
                    // SAFETY: not NULL, so valid for writing a TuttiSrcInfo (the caller's
                    // promise about `options->info_out`); the helper checks alignment; it
                    // overlaps no input and no other output (checked above).
                    Some(unsafe { Out::new(options.info_out, "options->info_out")? })
                };
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
                    .with_kernels(TuttiKernels::to_rust(options.kernels, "options->kernels")?)
                    .with_distributed_qr(options.distributed_qr != 0);
                let src_options = match options.progress.to_sweep() {
                    Some(progress) => src_options.with_progress(progress),
                    None => src_options,
                };
                Ok((out, info_out, trains, src_options))
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
        let (result, info) = match real {
            Some(layers) => sweep(&layers).map(|(t, info)| (AnyTrain::Real(t), info)),
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
                sweep_complex(&layers).map(|(t, info)| (AnyTrain::Complex(t), info))
            }
        }
        .map_err(sweep_error)?;
        if let Some(info_out) = info_out {
            info_out.write(TuttiSrcInfo::from_rust(&info));
        }
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

    /// The float64 train of a handle made by this test.
    fn real_train<'a>(handle: *mut TuttiTrain) -> &'a TensorTrain<f64> {
        // SAFETY: a live handle made by this test, released only after the last use of the
        // reference (the tests free their handles last).
        match unsafe { &(*handle).train } {
            AnyTrain::Real(train) => train,
            _ => panic!("a float64 train in memory"),
        }
    }

    /// `run_src` with `options.info_out` pointed at a fresh info, returned beside the status
    /// and the train.
    fn run_src_with_info(
        stack: &[*mut TuttiTrain],
        options: &TuttiSrcOptions,
    ) -> (c_int, *mut TuttiTrain, TuttiSrcInfo) {
        let mut info = TuttiSrcInfo {
            sketch_width: u64::MAX,
            ..TuttiSrcInfo::default()
        };
        let with_info = TuttiSrcOptions {
            info_out: &mut info,
            ..*options
        };
        let (status, out) = run_src(stack, &with_info);
        (status, out, info)
    }

    #[test]
    fn distributed_qr_on_two_devices_agrees_and_the_info_reports_the_sweep() {
        let sites = 8;
        let h = make(TrainKind::Mpo, TuttiDtype::TUTTI_DTYPE_FLOAT64, sites, 3);
        let psi = make(TrainKind::Mps, TuttiDtype::TUTTI_DTYPE_FLOAT64, sites, 4);
        // chi 6 truncates the exact bonds (up to 3 x 4 = 12).
        let (status, plain, plain_info) = run_src_with_info(&[h, psi], &options(6, 2));
        assert_eq!(status, 0, "{}", last_error());
        let distributed_options = TuttiSrcOptions {
            distributed_qr: 1,
            ..options(6, 2)
        };
        let (status, split, split_info) = run_src_with_info(&[h, psi], &distributed_options);
        assert_eq!(status, 0, "{}", last_error());
        assert_eq!(real_train(split).bonds(), real_train(plain).bonds());
        assert_eq!(real_train(plain).bonds(), vec![1, 2, 4, 6, 6, 6, 4, 2, 1]);
        // The same sketch's range, factored two ways: one train to rounding.
        let scale = norm_of(plain);
        assert!(
            distance_of(split, plain) <= 1e-10 * scale,
            "{} against {scale}",
            distance_of(split, plain)
        );

        // The default: every site's QR a Householder QR at rank 0.
        let qr_sites = (sites - 1) as u64;
        assert_eq!(plain_info.sketch_width, 6);
        assert_eq!(plain_info.devices, 2);
        assert_eq!(plain_info.exact_fallback, 0);
        assert_eq!(plain_info.truncated_weight, 0.0);
        assert!((plain_info.norm - scale).abs() <= 1e-12 * scale);
        assert!(plain_info.seconds > 0.0 && plain_info.seconds >= plain_info.qr_seconds);
        assert_eq!(
            (
                plain_info.qr_distributed,
                plain_info.qr_shifted,
                plain_info.qr_householder
            ),
            (0, 0, qr_sites)
        );
        assert_eq!(plain_info.qr_worst_orthogonality, 0.0);
        // No caps: every environment on the device tier, nothing spilled.
        assert_eq!(
            (
                plain_info.environments_on_device,
                plain_info.environments_on_host,
                plain_info.environments_on_disk,
                plain_info.spilled_bytes
            ),
            (qr_sites, 0, 0, 0)
        );

        // Distributed: the QRs split among the ranks, orthonormal to rounding.
        assert!(split_info.qr_distributed > 0, "{split_info:?}");
        assert_eq!(
            split_info.qr_distributed + split_info.qr_householder,
            qr_sites
        );
        assert!(split_info.qr_shifted <= split_info.qr_distributed);
        assert!(
            split_info.qr_worst_orthogonality > 0.0 && split_info.qr_worst_orthogonality < 1e-12,
            "{split_info:?}"
        );
        assert_eq!(
            (split_info.sketch_width, split_info.devices),
            (plain_info.sketch_width, 2)
        );
        assert!((split_info.norm - scale).abs() <= 1e-10 * scale);

        // Oversampling reports the weight its truncation sweep dropped.
        let oversampled = TuttiSrcOptions {
            oversample: 4,
            ..options(6, 2)
        };
        let (status, truncated, truncated_info) = run_src_with_info(&[h, psi], &oversampled);
        assert_eq!(status, 0, "{}", last_error());
        assert_eq!(truncated_info.sketch_width, 10);
        assert!(truncated_info.truncated_weight > 0.0, "{truncated_info:?}");

        // One device always factors at rank 0, distributed_qr or not.
        let one_device = TuttiSrcOptions {
            distributed_qr: 1,
            ..options(6, 1)
        };
        let (status, single, single_info) = run_src_with_info(&[h, psi], &one_device);
        assert_eq!(status, 0, "{}", last_error());
        assert_eq!(
            (
                single_info.devices,
                single_info.qr_distributed,
                single_info.qr_householder
            ),
            (1, 0, qr_sites)
        );

        // A 2-site stack is contracted exactly: no QR, no environments.
        let h2 = make(TrainKind::Mpo, TuttiDtype::TUTTI_DTYPE_FLOAT64, 2, 3);
        let psi2 = make(TrainKind::Mps, TuttiDtype::TUTTI_DTYPE_FLOAT64, 2, 2);
        let (status, short, short_info) = run_src_with_info(&[h2, psi2], &options(8, 2));
        assert_eq!(status, 0, "{}", last_error());
        assert_eq!(short_info.exact_fallback, 1);
        assert_eq!(short_info.devices, 2);
        assert_eq!(
            (short_info.qr_householder, short_info.environments_on_device),
            (0, 0)
        );
        assert!((short_info.norm - norm_of(short)).abs() <= 1e-12 * norm_of(short));

        for train in [h, psi, plain, split, truncated, single, h2, psi2, short] {
            free(train);
        }
    }

    #[test]
    fn info_out_is_checked_and_left_alone_on_failure() {
        let h = make(TrainKind::Mpo, TuttiDtype::TUTTI_DTYPE_FLOAT64, 4, 2);
        let psi = make(TrainKind::Mps, TuttiDtype::TUTTI_DTYPE_FLOAT64, 4, 2);
        let stack = [h.cast_const(), psi.cast_const()];
        // info_out over out: refused before any work, nothing written.
        let mut both = [0u64; 32];
        let mut aliased = options(4, 1);
        aliased.info_out = both.as_mut_ptr().cast();
        let out = both.as_mut_ptr().cast::<*mut TuttiTrain>();
        // SAFETY: live handles; out and info_out point into a local large enough for both.
        let status = unsafe { tutti_src(stack.as_ptr(), 2, &aliased, out) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(
            last_error().contains("options->info_out"),
            "{}",
            last_error()
        );
        assert_eq!(both, [0u64; 32]);
        // A failing call (chi_out 0) leaves the info as it was.
        let mut info = TuttiSrcInfo {
            devices: 77,
            ..TuttiSrcInfo::default()
        };
        let mut failing = options(0, 1);
        failing.info_out = &mut info;
        let (status, none) = run_src(&[h, psi], &failing);
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(none.is_null());
        assert_eq!(
            info,
            TuttiSrcInfo {
                devices: 77,
                ..TuttiSrcInfo::default()
            }
        );
        free(h);
        free(psi);
    }

    /// A fresh empty directory under the system's temporary directory, removed on drop.
    struct ScratchDir(std::path::PathBuf);

    impl ScratchDir {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "tutti-capi-{name}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("a scratch directory");
            Self(dir)
        }

        fn entries(&self) -> usize {
            std::fs::read_dir(&self.0).expect("readable").count()
        }
    }

    impl Drop for ScratchDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn caps_that_force_the_disk_spill_and_give_the_uncapped_bits() {
        use tutti_plan::{Plan, Tier};

        // An MPO (bond 3) times an MPS (bond 24) on 12 sites, chi 16, on 2 devices.
        let sites = 12;
        let h = make(TrainKind::Mpo, TuttiDtype::TUTTI_DTYPE_FLOAT64, sites, 3);
        let psi = make(TrainKind::Mps, TuttiDtype::TUTTI_DTYPE_FLOAT64, sites, 24);
        let scratch = ScratchDir::new("src-spill");
        let scratch_c =
            std::ffi::CString::new(scratch.0.to_string_lossy().as_bytes()).expect("no NUL");
        let mut uncapped = options(16, 2);
        uncapped.resources.scratch_dir = scratch_c.as_ptr();

        // The caps, from the uncapped plan's numbers (as tutti-sweep's tiers test finds
        // them): a device cap holding the working set and two staged environments only, then
        // a host cap holding nothing of the environments.
        let layers: [&dyn Layer<f64>; 2] = [real_train(h), real_train(psi)];
        let plan_for = |resources: &TuttiResources| -> Plan {
            // SAFETY: the scratch directory is a live C string; no ordinals.
            let resources = unsafe { resources.to_rust("resources") }.expect("resources");
            let options = SrcOptions::new(16).with_seed(3).with_resources(resources);
            tutti_sweep::plan(&layers, &options).expect("a plan")
        };
        let environments = |plan: &Plan| -> Vec<(u64, Tier)> {
            plan.placements()
                .iter()
                .filter(|p| p.object.name().starts_with("environment "))
                .map(|p| (p.bytes, p.tier))
                .collect()
        };
        let free_plan = plan_for(&uncapped.resources);
        let envs = environments(&free_plan);
        assert_eq!(envs.len(), sites - 1);
        let largest = envs.iter().map(|e| e.0).max().expect("environments");
        let working_set = free_plan.used(Tier::Device) - envs.iter().map(|e| e.0).sum::<u64>();
        let mut capped = uncapped;
        capped.resources.device_memory_bytes = working_set + 2 * largest;
        let host_plan = plan_for(&capped.resources);
        let env_host: u64 = environments(&host_plan).iter().map(|e| e.0).sum();
        capped.resources.host_memory_bytes = host_plan.used(Tier::Host) - env_host;
        let disk_plan = plan_for(&capped.resources);
        assert!(
            environments(&disk_plan)
                .iter()
                .all(|&(_, tier)| tier == Tier::Disk),
            "{disk_plan}"
        );

        let (status, free_train, free_info) = run_src_with_info(&[h, psi], &uncapped);
        assert_eq!(status, 0, "{}", last_error());
        assert_eq!(free_info.environments_on_device, (sites - 1) as u64);
        assert_eq!(free_info.spilled_bytes, 0);
        let (status, spilled, spilled_info) = run_src_with_info(&[h, psi], &capped);
        assert_eq!(status, 0, "{}", last_error());
        assert_eq!(
            (
                spilled_info.environments_on_device,
                spilled_info.environments_on_host,
                spilled_info.environments_on_disk
            ),
            (0, 0, (sites - 1) as u64),
            "{spilled_info:?}"
        );
        // Each rank spills its own 8 of the 16 sketch columns of every environment.
        let planned_disk: u64 = environments(&disk_plan).iter().map(|e| e.0).sum();
        assert_eq!(spilled_info.spilled_bytes, planned_disk);
        assert!(spilled_info.spilled_bytes > 0);
        // The tiers never change the bits.
        let (free_cores, spilled_cores) = (real_train(free_train), real_train(spilled));
        assert_eq!(free_cores.bonds(), spilled_cores.bonds());
        for (a, b) in free_cores.cores().iter().zip(spilled_cores.cores()) {
            let bits = |core: &[f64]| core.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a.data), bits(&b.data));
        }
        assert_eq!(spilled_info.norm.to_bits(), free_info.norm.to_bits());
        // The spill directory is gone.
        assert_eq!(scratch.entries(), 0, "the spill directory is left behind");

        // A scratch limit one byte short is refused before any work, writing no info.
        let mut short = capped;
        short.resources.scratch_limit_bytes = disk_plan.used(Tier::Disk) - 1;
        let (status, none, untouched) = run_src_with_info(&[h, psi], &short);
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY.code());
        assert!(last_error().contains("scratch disk"), "{}", last_error());
        assert!(none.is_null());
        assert_eq!(untouched.sketch_width, u64::MAX);
        assert_eq!(scratch.entries(), 0);

        for train in [h, psi, free_train, spilled] {
            free(train);
        }
    }
}
