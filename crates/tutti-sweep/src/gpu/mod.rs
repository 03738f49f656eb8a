//! The sweep's own GPU kernel: the sketch application of the left-to-right pass
//! (`gpu/sketch.cu`), with a host twin that runs the host pass's per-column code.
//!
//! [`SKETCH_MODULE`] has two entries, [`APPLY_SKETCH_F64`] and [`APPLY_SKETCH_C64`]: one thread
//! per element of the next sketched environment, summing its `d_out * d_in` terms in the
//! host's order. It is compiled with FMA contraction (the sweep is compared with the host to
//! rounding, not bitwise); its twin is `distributed::sketch_column`, so on a simulated
//! device the launch gives the host pass's bits.

use rayon::prelude::*;
use tutti_backend::kernel::{HostArgs, HostLaunch};
use tutti_backend::{
    Arg, BackendError, Complex64, ElemKind, KernelElement, KernelEntry, KernelModule, LaunchDims,
    Param,
};

use crate::device_tensor::DeviceTensor;
use crate::distributed::{sketch_column, SketchDims};
use crate::tensor::Axis;
use crate::{Scalar, SweepError};

/// The f64 entry of [`SKETCH_MODULE`].
pub const APPLY_SKETCH_F64: &str = "tt_sweep_apply_sketch_f64";
/// The complex128 entry of [`SKETCH_MODULE`].
pub const APPLY_SKETCH_C64: &str = "tt_sweep_apply_sketch_c64";

/// Threads per block of the sketch launch.
const BLOCK: u32 = 256;

/// `d_out`, `middle`, `cols`, `d_in`, `inner`, then `g`, `t` and the output.
const fn sketch_params(kind: ElemKind) -> [Param; 8] {
    [
        Param::U64,
        Param::U64,
        Param::U64,
        Param::U64,
        Param::U64,
        Param::In(kind),
        Param::In(kind),
        Param::Out(kind),
    ]
}

const F64_PARAMS: [Param; 8] = sketch_params(ElemKind::F64);
const C64_PARAMS: [Param; 8] = sketch_params(ElemKind::C64);

const SKETCH_ENTRIES: [KernelEntry; 2] = [
    KernelEntry {
        name: APPLY_SKETCH_F64,
        params: &F64_PARAMS,
        host: sketch_twin::<f64>,
    },
    KernelEntry {
        name: APPLY_SKETCH_C64,
        params: &C64_PARAMS,
        host: sketch_twin::<Complex64>,
    },
];

/// The sweep's kernel module (`gpu/sketch.cu`).
pub static SKETCH_MODULE: KernelModule = KernelModule {
    name: "tutti_sweep_sketch",
    source: include_str!("sketch.cu"),
    fmad: true,
    entries: &SKETCH_ENTRIES,
};

/// Every kernel module of the crate, for checks that compile them all.
pub fn modules() -> &'static [&'static KernelModule] {
    static MODULES: [&KernelModule; 1] = [&SKETCH_MODULE];
    &MODULES
}

/// The entry of [`SKETCH_MODULE`] for `T`.
fn entry_for<T: KernelElement>() -> &'static str {
    match T::KIND {
        ElemKind::C64 => APPLY_SKETCH_C64,
        _ => APPLY_SKETCH_F64,
    }
}

/// The device twin of the host pass's `apply_sketch`: `t` (`[Phys(0), Right(0), ..,
/// Right(L-2), Col, Phys(L), Right(L-1)]`) contracted with the sketch vectors `g` (this
/// rank's columns, row-major `Col x (d_out d_in)`, on `t`'s device) into the next
/// environment `[Col, Left(0), ..., Left(L-1)]`, on the same device.
///
/// Errors: [`SweepError::Backend`] for a failed allocation or launch.
pub(crate) fn apply_sketch_on_device<T: Scalar>(
    t: &DeviceTensor<T>,
    g: &tutti_backend::Buffer<T>,
    depth: usize,
) -> Result<DeviceTensor<T>, SweepError> {
    let dims = SketchDims::of(&t.dims, depth);
    let total = dims.cols * dims.middle * dims.inner;
    let device = t.data.device();
    let mut out = device.alloc_zeros::<T>(total)?;
    if total > 0 {
        let blocks = total.div_ceil(BLOCK as usize).min(1 << 20) as u64;
        device.launch(
            &SKETCH_MODULE,
            entry_for::<T>(),
            LaunchDims::linear(blocks * u64::from(BLOCK), BLOCK)?,
            &mut [
                Arg::u64(dims.d_out as u64),
                Arg::u64(dims.middle as u64),
                Arg::u64(dims.cols as u64),
                Arg::u64(dims.d_in as u64),
                Arg::u64(dims.inner as u64),
                Arg::input(g),
                Arg::input(&t.data),
                Arg::output(&mut out),
            ],
        )?;
    }
    let mut out_dims = vec![dims.cols];
    out_dims.extend_from_slice(&t.dims[1..depth]);
    out_dims.push(dims.inner);
    let mut axes = vec![Axis::Col];
    axes.extend((0..depth).map(Axis::Left));
    Ok(DeviceTensor {
        data: out,
        dims: out_dims,
        axes,
    })
}

/// The host twin of both entries: every column in parallel, by the host pass's own
/// per-column code.
fn sketch_twin<T: Scalar + KernelElement>(
    launch: &HostLaunch<'_>,
    mut args: HostArgs<'_>,
) -> Result<(), BackendError> {
    let fail = |message: String| BackendError::Kernel {
        module: launch.module().name.to_string(),
        entry: entry_for::<T>().to_string(),
        message: format!("host twin: {message}"),
    };
    let size = |index: usize| -> Result<usize, BackendError> {
        usize::try_from(args.u64(index)?).map_err(|_| fail(format!("argument {index} too large")))
    };
    let dims = SketchDims {
        d_out: size(0)?,
        middle: size(1)?,
        cols: size(2)?,
        d_in: size(3)?,
        inner: size(4)?,
    };
    let g = args.input::<T>(5)?;
    let t = args.input::<T>(6)?;
    let out = args.output::<T>(7)?;
    let SketchDims {
        middle,
        cols,
        inner,
        ..
    } = dims;
    let product = |factors: &[usize]| {
        factors
            .iter()
            .try_fold(1usize, |acc, &f| acc.checked_mul(f))
            .ok_or_else(|| fail("sizes overflow".into()))
    };
    let (g_len, t_len, total) = (
        product(&[cols, dims.d_out, dims.d_in])?,
        product(&[dims.d_out, middle, cols, dims.d_in, inner])?,
        product(&[cols, middle, inner])?,
    );
    if g.len() < g_len || t.len() < t_len || out.len() < total {
        return Err(fail(format!(
            "{} sketch entries, {} of t and {} outputs for extents {dims:?}",
            g.len(),
            t.len(),
            out.len()
        )));
    }
    // The kernel strides over the whole output whatever the grid: every element is written.
    let per_column = (middle * inner).max(1);
    launch.pool().install(|| {
        out[..total]
            .par_chunks_mut(per_column)
            .enumerate()
            .for_each(|(c, out_c)| {
                out_c.fill(T::zero());
                sketch_column(dims, g, t, c, out_c);
            });
    });
    Ok(())
}
