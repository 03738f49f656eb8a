//! The backend's own kernels: the axis swap `[a, b, c] -> [b, a, c]` of `f64` and
//! [`Complex64`] tensors, and `y = alpha * x + y`.
//!
//! [`permute_bac`] and [`axpy`] check their shapes and launch on the buffers' device; the
//! module itself is [`MODULE`], for launches by hand and for the NVRTC checks.

use num_complex::Complex64;
use rayon::prelude::*;

use super::{Arg, HostArgs, HostLaunch, KernelElement, KernelEntry, KernelModule, LaunchDims};
use super::{ElemKind, Param};
use crate::buffer::Buffer;
use crate::BackendError;

/// Threads per block of the backend's one-dimensional kernels.
const BLOCK: u32 = 256;

/// Elements per task of the host twins (small tasks cost more than they share out).
const TASK_ELEMENTS: usize = 1 << 14;

/// The module `tutti_backend` (`kernel/builtin.cu`), compiled without FMA contraction.
pub static MODULE: KernelModule = KernelModule {
    name: "tutti_backend",
    source: include_str!("builtin.cu"),
    fmad: false,
    entries: &[
        KernelEntry {
            name: "tt_permute_bac_f64",
            params: &PERMUTE_F64,
            host: permute_bac_twin::<f64>,
        },
        KernelEntry {
            name: "tt_permute_bac_c64",
            params: &PERMUTE_C64,
            host: permute_bac_twin::<Complex64>,
        },
        KernelEntry {
            name: "tt_axpy_f64",
            params: &[
                Param::U64,
                Param::F64,
                Param::In(ElemKind::F64),
                Param::InOut(ElemKind::F64),
            ],
            host: axpy_twin,
        },
    ],
};

const PERMUTE_F64: [Param; 5] = permute_params(ElemKind::F64);
const PERMUTE_C64: [Param; 5] = permute_params(ElemKind::C64);

/// `(x, y, a, b, c)`.
const fn permute_params(kind: ElemKind) -> [Param; 5] {
    [
        Param::In(kind),
        Param::Out(kind),
        Param::U32,
        Param::U32,
        Param::U32,
    ]
}

/// Every kernel module of the backend, for checks that compile them all.
pub fn modules() -> &'static [&'static KernelModule] {
    static MODULES: [&KernelModule; 1] = [&MODULE];
    &MODULES
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for num_complex::Complex64 {}
}

/// An element type [`permute_bac`] handles: `f64` and [`Complex64`].
pub trait Permutable: KernelElement + sealed::Sealed {
    /// The entry of [`MODULE`] for this type.
    const PERMUTE_ENTRY: &'static str;
}

impl Permutable for f64 {
    const PERMUTE_ENTRY: &'static str = "tt_permute_bac_f64";
}

impl Permutable for Complex64 {
    const PERMUTE_ENTRY: &'static str = "tt_permute_bac_c64";
}

/// Writes `y[j, i, k] = x[i, j, k]` for `x` of shape `[a, b, c]` (row-major, `k` fastest),
/// so `y` has shape `[b, a, c]`; on the buffers' device.
///
/// Errors: [`BackendError::InvalidArgument`] when an extent exceeds `u32::MAX` or a buffer's
/// length is not `a * b * c`; as [`crate::Device::launch`] otherwise (`y` on another device).
pub fn permute_bac<T: Permutable>(
    x: &Buffer<T>,
    y: &mut Buffer<T>,
    shape: [usize; 3],
) -> Result<(), BackendError> {
    let invalid = |detail: String| BackendError::InvalidArgument {
        op: "permute_bac",
        detail,
    };
    let [a, b, c] = shape.map(u32::try_from);
    let (Ok(a), Ok(b), Ok(c)) = (a, b, c) else {
        return Err(invalid(format!(
            "shape {shape:?}: every extent must be at most {}",
            u32::MAX
        )));
    };
    let n = u64::from(a) * u64::from(b) * u64::from(c);
    for (name, len) in [("x", x.len()), ("y", y.len())] {
        if len as u64 != n {
            return Err(invalid(format!(
                "{name} has {len} elements, shape {shape:?} needs {n}"
            )));
        }
    }
    if n == 0 {
        return Ok(());
    }
    let device = x.device().clone();
    device.launch(
        &MODULE,
        T::PERMUTE_ENTRY,
        LaunchDims::linear(n, BLOCK)?,
        &mut [
            Arg::input(x),
            Arg::output(y),
            Arg::u32(a),
            Arg::u32(b),
            Arg::u32(c),
        ],
    )
}

/// `y[i] = alpha * x[i] + y[i]` (a product, then a sum: no FMA), on the buffers' device.
///
/// Errors: [`BackendError::LengthMismatch`] when the lengths differ; as
/// [`crate::Device::launch`] otherwise.
pub fn axpy(alpha: f64, x: &Buffer<f64>, y: &mut Buffer<f64>) -> Result<(), BackendError> {
    if x.len() != y.len() {
        return Err(BackendError::LengthMismatch {
            op: "axpy",
            source_len: x.len(),
            dest_len: y.len(),
        });
    }
    if x.is_empty() {
        return Ok(());
    }
    let n = x.len() as u64;
    let device = x.device().clone();
    device.launch(
        &MODULE,
        "tt_axpy_f64",
        LaunchDims::linear(n, BLOCK)?,
        &mut [Arg::u64(n), Arg::f64(alpha), Arg::input(x), Arg::output(y)],
    )
}

/// How many leading elements a one-dimensional kernel over `n` writes: those its grid
/// covers, after checking that `n` fits the buffers (on a GPU a longer `n` would write out
/// of bounds).
fn covered(launch: &HostLaunch<'_>, n: u64, lens: &[(&str, usize)]) -> Result<usize, BackendError> {
    for (name, len) in lens {
        if n > *len as u64 {
            return Err(BackendError::Kernel {
                module: launch.module().name.to_string(),
                entry: launch.entry().name.to_string(),
                message: format!(
                    "{name} has {len} elements, the kernel would touch {n} (out of bounds)"
                ),
            });
        }
    }
    // At most a buffer's length, so it fits in usize.
    Ok(n.min(launch.dims().threads_x()) as usize)
}

/// The twin of `tt_permute_bac`: output rows (one `(j, i)` pair, `c` elements each) in
/// parallel; a row is one contiguous copy.
fn permute_bac_twin<T: KernelElement>(
    launch: &HostLaunch<'_>,
    mut args: HostArgs<'_>,
) -> Result<(), BackendError> {
    let x = args.input::<T>(0)?;
    let y = args.output::<T>(1)?;
    let [a, b, c] = [args.u32(2)?, args.u32(3)?, args.u32(4)?].map(|d| d as usize);
    let n = (a as u64) * (b as u64) * (c as u64);
    let covered = covered(launch, n, &[("x", x.len()), ("y", y.len())])?;
    if covered == 0 {
        return Ok(());
    }
    launch.pool().install(|| {
        y[..covered]
            .par_chunks_mut(c)
            .with_min_len((TASK_ELEMENTS / c).max(1))
            .enumerate()
            .for_each(|(row, out)| {
                let (i, j) = (row % a, row / a);
                let start = (i * b + j) * c;
                out.copy_from_slice(&x[start..start + out.len()]);
            });
    });
    Ok(())
}

/// The twin of `tt_axpy_f64`.
fn axpy_twin(launch: &HostLaunch<'_>, mut args: HostArgs<'_>) -> Result<(), BackendError> {
    let n = args.u64(0)?;
    let alpha = args.f64(1)?;
    let x = args.input::<f64>(2)?;
    let y = args.output::<f64>(3)?;
    let covered = covered(launch, n, &[("x", x.len()), ("y", y.len())])?;
    launch.pool().install(|| {
        y[..covered]
            .par_chunks_mut(TASK_ELEMENTS)
            .zip(x[..covered].par_chunks(TASK_ELEMENTS))
            .for_each(|(y, x)| {
                for (y, x) in y.iter_mut().zip(x) {
                    // `y + alpha * x`: the same rounding as the kernel's `alpha * x + y`.
                    *y += alpha * *x;
                }
            });
    });
    Ok(())
}
