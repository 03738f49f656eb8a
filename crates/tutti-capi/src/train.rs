//! Tensor trains from C: the train handle (`tutti-sweep`'s MPS and MPO), made from arrays or
//! a directory, read back, measured and released. SRC of a stack of handles is [`crate::sweep`].
//!
//! A [`TuttiTrain`] is an opaque handle to an MPS or an MPO of float64 or complex128 entries,
//! made from caller arrays ([`tutti_train_from_arrays`]) or from a train directory
//! ([`tutti_train_from_dir`], read lazily), and released with [`tutti_train_free`]. Complex
//! entries cross the boundary as interleaved (re, im) doubles, C order, so a core of `m`
//! entries is `2 m` doubles.

use std::ffi::{c_char, c_int};

use tutti_backend::BackendError;
use tutti_group::GroupError;
use tutti_sweep::{
    distance, load, norm, write_train, Complex64, Core, CoreShape, Layer, NpyTrain, Scalar,
    SweepError, TensorTrain, TrainKind,
};

use crate::boundary::{
    check_disjoint, ffi_call, index_in, input_slice, input_str, output_slice, positive_count,
    to_c_int, Out, Region,
};
use crate::memory::Registry;
use crate::resources::device_error;
use crate::status::{Error, TuttiStatus};

/// Whether a train is a state or an operator; passed as an `int`.
#[allow(non_camel_case_types)] // the variants are the C names
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum TuttiTrainKind {
    /// A matrix product state: cores (Dl, d, Dr), 3 shape entries per site.
    TUTTI_TRAIN_MPS = 0,
    /// A matrix product operator: cores (Dl, d_out, d_in, Dr), 4 shape entries per site.
    TUTTI_TRAIN_MPO = 1,
}

/// The element type of a train; passed as an `int`.
#[allow(non_camel_case_types)] // the variants are the C names
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum TuttiDtype {
    /// Real doubles: one `double` per entry.
    TUTTI_DTYPE_FLOAT64 = 0,
    /// Complex doubles: two `double`s per entry, real part first (C99 `double complex`).
    TUTTI_DTYPE_COMPLEX128 = 1,
}

impl TuttiTrainKind {
    fn from_code(code: c_int, name: &str) -> Result<TrainKind, Error> {
        match code {
            0 => Ok(TrainKind::Mps),
            1 => Ok(TrainKind::Mpo),
            other => Err(Error::invalid_argument(format!(
                "argument `{name}` is {other}: expected TUTTI_TRAIN_MPS (0) or TUTTI_TRAIN_MPO (1)"
            ))),
        }
    }

    pub(crate) fn of(kind: TrainKind) -> Self {
        match kind {
            TrainKind::Mps => Self::TUTTI_TRAIN_MPS,
            TrainKind::Mpo => Self::TUTTI_TRAIN_MPO,
        }
    }
}

impl TuttiDtype {
    fn from_code(code: c_int, name: &str) -> Result<Self, Error> {
        match code {
            0 => Ok(Self::TUTTI_DTYPE_FLOAT64),
            1 => Ok(Self::TUTTI_DTYPE_COMPLEX128),
            other => Err(Error::invalid_argument(format!(
                "argument `{name}` is {other}: expected TUTTI_DTYPE_FLOAT64 (0) or \
                 TUTTI_DTYPE_COMPLEX128 (1)"
            ))),
        }
    }

    /// Doubles per entry.
    pub(crate) fn width(self) -> usize {
        match self {
            Self::TUTTI_DTYPE_FLOAT64 => 1,
            Self::TUTTI_DTYPE_COMPLEX128 => 2,
        }
    }
}

/// Marks a live handle: "tuttitrn".
const LIVE_TRAIN: u64 = u64::from_be_bytes(*b"tuttitrn");

/// The address of every live handle: a pointer is looked up here before it is read, so a
/// released or foreign handle is refused without being touched.
static LIVE_TRAINS: Registry = Registry::new();

/// A tensor train (MPS or MPO, float64 or complex128), opaque to C.
///
/// Made by `tutti_train_from_arrays`, `tutti_train_from_dir` or `tutti_src`; the caller owns
/// it and releases it exactly once with `tutti_train_free`. A train never changes after it is
/// made, so one handle may be read by several threads at once.
pub struct TuttiTrain {
    marker: u64,
    pub(crate) train: AnyTrain,
}

/// What a handle holds.
pub(crate) enum AnyTrain {
    Real(TensorTrain<f64>),
    Complex(TensorTrain<Complex64>),
    /// A directory opened by `tutti_train_from_dir`: headers read, cores streamed on use.
    Disk(NpyTrain),
}

impl AnyTrain {
    fn kind(&self) -> TrainKind {
        match self {
            Self::Real(t) => t.kind(),
            Self::Complex(t) => t.kind(),
            Self::Disk(t) => Layer::<Complex64>::kind(t),
        }
    }

    fn shapes(&self) -> Vec<CoreShape> {
        match self {
            Self::Real(t) => t.shapes(),
            Self::Complex(t) => t.shapes(),
            Self::Disk(t) => Layer::<Complex64>::shapes(t),
        }
    }

    fn dtype(&self) -> TuttiDtype {
        let complex = match self {
            Self::Real(_) => false,
            Self::Complex(_) => true,
            Self::Disk(t) => t.is_complex(),
        };
        if complex {
            TuttiDtype::TUTTI_DTYPE_COMPLEX128
        } else {
            TuttiDtype::TUTTI_DTYPE_FLOAT64
        }
    }

    /// The train as a stack layer of `f64` (`None` for complex trains).
    pub(crate) fn real_layer(&self) -> Option<&dyn Layer<f64>> {
        match self {
            Self::Real(t) => Some(t),
            Self::Disk(t) if !t.is_complex() => Some(t),
            _ => None,
        }
    }

    /// The train in memory as complex128 (float64 entries promoted).
    fn to_complex(&self) -> Result<TensorTrain<Complex64>, SweepError> {
        match self {
            Self::Real(t) => promote(t),
            Self::Complex(t) => Ok(t.clone()),
            Self::Disk(t) => t.read(),
        }
    }

    /// The train in memory as float64 (`None` for complex trains).
    fn to_real(&self) -> Option<Result<TensorTrain<f64>, SweepError>> {
        match self {
            Self::Real(t) => Some(Ok(t.clone())),
            Self::Disk(t) if !t.is_complex() => Some(t.read()),
            _ => None,
        }
    }
}

pub(crate) fn promote(train: &TensorTrain<f64>) -> Result<TensorTrain<Complex64>, SweepError> {
    let cores = train
        .cores()
        .iter()
        .map(|core| Core {
            shape: core.shape,
            data: core.data.iter().map(|&x| Complex64::new(x, 0.0)).collect(),
        })
        .collect();
    TensorTrain::new(train.kind(), cores)
}

/// The status of a sweep error: bad trains, stacks and options are invalid arguments, a
/// buffer too large to allocate or a plan that does not fit is out of memory, files that
/// cannot be read or written are I/O errors, a bad device request gets the backend's status
/// (invalid argument naming `options->resources`, unsupported for a GPU without CUDA), a
/// rank's panic is a panic, other device failures are device errors.
pub fn sweep_error(error: SweepError) -> Error {
    use TuttiStatus::*;
    let error = match error {
        SweepError::Backend(error) | SweepError::Group(GroupError::Backend(error))
            if !matches!(error, BackendError::OutOfMemory { .. }) =>
        {
            return device_error(error)
        }
        other => other,
    };
    let status = match &error {
        SweepError::Empty { .. }
        | SweepError::BadShape { .. }
        | SweepError::BondMismatch { .. }
        | SweepError::PhysicalMismatch { .. }
        | SweepError::LengthMismatch { .. }
        | SweepError::InvalidStack { .. }
        | SweepError::NonFinite { .. }
        | SweepError::InvalidOption { .. }
        | SweepError::Factorization { .. } => TUTTI_ERROR_INVALID_ARGUMENT,
        SweepError::Plan(tutti_plan::PlanError::Io { .. }) => TUTTI_ERROR_IO,
        SweepError::OutOfMemory { .. }
        | SweepError::Plan(_)
        | SweepError::Backend(BackendError::OutOfMemory { .. }) => TUTTI_ERROR_OUT_OF_MEMORY,
        SweepError::File { .. } | SweepError::Io { .. } => TUTTI_ERROR_IO,
        SweepError::RankPanicked { .. } => TUTTI_ERROR_PANIC,
        SweepError::RankFailed { .. } => TUTTI_ERROR_REMOTE,
        // Devices, collectives, and kinds the sweep adds later.
        _ => TUTTI_ERROR_DEVICE,
    };
    Error::new(status, error.to_string())
}

/// A handle argument `const TuttiTrain *name`, checked: not NULL, aligned, live.
///
/// # Safety
/// `ptr` is NULL or a handle from tutti that has not been released, not released during `'a`.
pub(crate) unsafe fn train_ref<'a>(
    ptr: *const TuttiTrain,
    name: &str,
) -> Result<&'a TuttiTrain, Error> {
    if ptr.is_null() {
        return Err(Error::null_pointer(name));
    }
    if !ptr.is_aligned() {
        return Err(Error::invalid_argument(format!(
            "argument `{name}` ({ptr:p}) is not a train handle (misaligned)"
        )));
    }
    if !LIVE_TRAINS.contains(ptr.addr()) {
        return Err(Error::invalid_argument(format!(
            "argument `{name}` ({ptr:p}) is not a live train handle (released already, or \
             not made by tutti)"
        )));
    }
    // SAFETY: not NULL, aligned, and a live handle made by into_handle (the registry says so;
    // the caller promises no other thread releases it during 'a).
    let train = unsafe { &*ptr };
    if train.marker != LIVE_TRAIN {
        return Err(Error::invalid_argument(format!(
            "argument `{name}` ({ptr:p}) is not a live train handle (released already, or \
             not made by tutti)"
        )));
    }
    Ok(train)
}

/// The memory of a handle argument, for [`check_disjoint`] (nothing is read).
pub(crate) fn handle_region<'n>(name: &'n str, ptr: *const TuttiTrain) -> Region<'n> {
    Region::input(name, ptr, 1)
}

pub(crate) fn into_handle(train: AnyTrain) -> *mut TuttiTrain {
    let handle = Box::into_raw(Box::new(TuttiTrain {
        marker: LIVE_TRAIN,
        train,
    }));
    LIVE_TRAINS.insert(handle.addr());
    handle
}

/// Shape entries per site: 3 for an MPS, 4 for an MPO.
fn axes(kind: TrainKind) -> usize {
    match kind {
        TrainKind::Mps => 3,
        TrainKind::Mpo => 4,
    }
}

/// The doubles of each site's core (`width` per entry) from the C shapes, `axes` ints per
/// site, after checking every dimension and the whole bond chain: each dimension at least 1,
/// the first left bond and the last right bond 1, each right bond equal to the next site's
/// left bond, and each core small enough for memory.
///
/// Errors: `TUTTI_ERROR_INVALID_ARGUMENT` naming the site and its slice of `shapes`.
fn core_lengths(kind: TrainKind, shapes: &[c_int], width: usize) -> Result<Vec<usize>, Error> {
    let axes = axes(kind);
    let sites = shapes.len() / axes;
    let at = |site: usize| format!("shapes[{}..{}]", site * axes, site * axes + axes);
    let mut lengths = Vec::with_capacity(sites);
    for (site, dims) in shapes.chunks_exact(axes).enumerate() {
        if dims.iter().any(|&d| d < 1) {
            return Err(Error::invalid_argument(format!(
                "site {site}: shape {dims:?} has a dimension below 1 ({})",
                at(site)
            )));
        }
        let (left, right) = (dims[0], dims[axes - 1]);
        if site == 0 && left != 1 {
            return Err(Error::invalid_argument(format!(
                "bond mismatch at site 0: the first left bond is {left}, expected 1 ({})",
                at(site)
            )));
        }
        if site + 1 == sites && right != 1 {
            return Err(Error::invalid_argument(format!(
                "bond mismatch at site {site}: the last right bond is {right}, expected 1 ({})",
                at(site)
            )));
        }
        if site > 0 {
            let previous_right = shapes[site * axes - 1];
            if previous_right != left {
                return Err(Error::invalid_argument(format!(
                    "bond mismatch at site {site}: site {} has right bond {previous_right} but \
                     site {site} has left bond {left} ({})",
                    site - 1,
                    at(site)
                )));
            }
        }
        let doubles = dims
            .iter()
            // Positive ints (checked above) convert exactly.
            .try_fold(width, |acc, &d| acc.checked_mul(d as usize))
            .filter(|&doubles| doubles <= isize::MAX as usize / std::mem::size_of::<f64>())
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "site {site}: shape {dims:?} is larger than memory ({})",
                    at(site)
                ))
            })?;
        lengths.push(doubles);
    }
    Ok(lengths)
}

/// An empty vector with room for `len` entries, or `TUTTI_ERROR_OUT_OF_MEMORY` when the
/// host cannot provide it (instead of aborting the process).
fn reserve<T>(len: usize) -> Result<Vec<T>, Error> {
    let mut entries = Vec::new();
    entries.try_reserve_exact(len).map_err(|_| {
        let bytes = len.saturating_mul(std::mem::size_of::<T>());
        Error::new(
            TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY,
            format!(
                "cannot allocate {} of host memory for a core",
                tutti_backend::format_bytes(bytes as u64)
            ),
        )
    })?;
    Ok(entries)
}

/// Makes a train from one array per site, copying the data.
///
/// - `kind`: `TUTTI_TRAIN_MPS` or `TUTTI_TRAIN_MPO`; `dtype`: `TUTTI_DTYPE_FLOAT64` or
///   `TUTTI_DTYPE_COMPLEX128`; `n_sites` at least 1.
/// - `shapes`: `3 * n_sites` ints for an MPS, site `k`'s core (Dl, d, Dr) at `shapes[3k..3k+3]`;
///   `4 * n_sites` for an MPO, (Dl, d_out, d_in, Dr) at `shapes[4k..4k+4]`. The first Dl and
///   the last Dr are 1, and each Dr equals the next site's Dl.
/// - `cores`: `n_sites` pointers; `cores[k]` holds the product of site `k`'s dims entries in
///   C order (last index fastest), one double each for float64, two (re, im) for complex128.
/// - `out`: receives the new handle, which the caller releases with `tutti_train_free`.
///
/// The shapes are checked in full (every dimension, the whole bond chain, each core's size)
/// before any core is read, so inconsistent shapes never make tutti read past a caller's
/// array.
///
/// Errors: NULL pointers (`TUTTI_ERROR_NULL_POINTER`); an unknown kind or dtype, a dimension
/// below 1, outer bonds other than 1, neighbouring bonds that differ (the message names the
/// site and both dims), a core larger than memory, NaN or infinite entries, `out`
/// overlapping an input (`TUTTI_ERROR_INVALID_ARGUMENT`); no host memory for the copy
/// (`TUTTI_ERROR_OUT_OF_MEMORY`).
///
/// # Safety
/// `shapes` holds `axes * n_sites` ints; `cores` holds `n_sites` pointers, each valid for
/// reading its core; `out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn tutti_train_from_arrays(
    kind: c_int,
    dtype: c_int,
    n_sites: c_int,
    shapes: *const c_int,
    cores: *const *const f64,
    out: *mut *mut TuttiTrain,
) -> c_int {
    ffi_call("tutti_train_from_arrays", || {
        let kind = TuttiTrainKind::from_code(kind, "kind")?;
        let dtype = TuttiDtype::from_code(dtype, "dtype")?;
        let sites = positive_count(n_sites, "n_sites")?;
        let axes = axes(kind);
        let shape_len = axes.checked_mul(sites).ok_or_else(|| {
            Error::invalid_argument(format!("argument `n_sites` is {sites}: too many sites"))
        })?;
        // SAFETY: the lengths are the caller's promise; the helpers check NULL and alignment.
        let (shapes, pointers) = unsafe {
            (
                input_slice(shapes, shape_len, "shapes")?,
                input_slice(cores, sites, "cores")?,
            )
        };
        // Every dimension and the whole bond chain are checked before any core is touched:
        // the shapes are all that says how much of the caller's memory may be read.
        let doubles_per_site = core_lengths(kind, shapes, dtype.width())?;
        let names: Vec<String> = (0..sites).map(|site| format!("cores[{site}]")).collect();
        let mut regions = vec![
            Region::input("shapes", shapes.as_ptr(), shapes.len()),
            Region::input("cores", pointers.as_ptr(), pointers.len()),
            Region::output("out", out, 1),
        ];
        regions.extend(
            pointers
                .iter()
                .zip(&doubles_per_site)
                .zip(&names)
                .map(|((&pointer, &doubles), name)| Region::input(name, pointer, doubles)),
        );
        check_disjoint(&regions)?;
        // SAFETY: NULL or valid for writing a pointer (the caller's promise), overlapping no
        // input (checked above).
        let out = unsafe { Out::new(out, "out")? };
        let mut dims_per_site = Vec::with_capacity(sites);
        let mut data_per_site = Vec::with_capacity(sites);
        for (site, ((dims, &pointer), &doubles)) in shapes
            .chunks_exact(axes)
            .zip(pointers)
            .zip(&doubles_per_site)
            .enumerate()
        {
            // SAFETY: cores[site] is valid for this core's doubles (the caller's promise),
            // a count the shapes give and core_lengths checked.
            let values = unsafe { input_slice(pointer, doubles, &format!("cores[{site}]"))? };
            // Positive ints (checked by core_lengths), so the casts are exact.
            dims_per_site.push(dims.iter().map(|&d| d as usize).collect::<Vec<usize>>());
            data_per_site.push(values);
        }
        let train = match dtype {
            TuttiDtype::TUTTI_DTYPE_FLOAT64 => {
                let arrays = dims_per_site
                    .into_iter()
                    .zip(data_per_site)
                    .map(|(dims, values)| {
                        let mut entries = reserve(values.len())?;
                        entries.extend_from_slice(values);
                        Ok((dims, entries))
                    })
                    .collect::<Result<_, Error>>()?;
                AnyTrain::Real(TensorTrain::from_arrays(kind, arrays).map_err(sweep_error)?)
            }
            TuttiDtype::TUTTI_DTYPE_COMPLEX128 => {
                let arrays = dims_per_site
                    .into_iter()
                    .zip(data_per_site)
                    .map(|(dims, values)| {
                        let mut entries = reserve(values.len() / 2)?;
                        entries.extend(
                            values
                                .chunks_exact(2)
                                .map(|pair| Complex64::new(pair[0], pair[1])),
                        );
                        Ok((dims, entries))
                    })
                    .collect::<Result<_, Error>>()?;
                AnyTrain::Complex(TensorTrain::from_arrays(kind, arrays).map_err(sweep_error)?)
            }
        };
        out.write(into_handle(train));
        Ok(())
    })
}

/// Opens the train in the directory `path` (`000.npy`, `001.npy`, ...: float64 or
/// complex128, C order; 3 axes for an MPS, 4 for an MPO).
///
/// Only the headers are read now; the cores are read when the train is used, site by site,
/// so a train larger than memory streams through `tutti_src`. The files must not change while
/// the handle lives. `out` receives the handle, released with `tutti_train_free`.
///
/// Errors: NULL pointers; a missing directory or file, a file that is not `.npy`, truncated,
/// of another dtype or in Fortran order (`TUTTI_ERROR_IO`); bonds that do not chain
/// (`TUTTI_ERROR_INVALID_ARGUMENT`, naming the site).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn tutti_train_from_dir(
    path: *const c_char,
    out: *mut *mut TuttiTrain,
) -> c_int {
    ffi_call("tutti_train_from_dir", || {
        // SAFETY: the caller's promise, checked for NULL and UTF-8 by the helper.
        let path = unsafe { input_str(path, "path")? };
        check_disjoint(&[
            Region::input("path", path.as_ptr(), path.len() + 1),
            Region::output("out", out, 1),
        ])?;
        // SAFETY: NULL or valid for writing a pointer (the caller's promise), overlapping no
        // input (checked above).
        let out = unsafe { Out::new(out, "out")? };
        let train = NpyTrain::open(path).map_err(sweep_error)?;
        out.write(into_handle(AnyTrain::Disk(train)));
        Ok(())
    })
}

/// Describes a train: `*kind` (a `TuttiTrainKind`), `*dtype` (a `TuttiDtype`) and `*n_sites`.
/// Any output may be NULL when not wanted.
///
/// # Safety
/// `train` is NULL or a live handle; each output is NULL or valid for writing an `int`.
#[no_mangle]
pub unsafe extern "C" fn tutti_train_info(
    train: *const TuttiTrain,
    kind: *mut c_int,
    dtype: *mut c_int,
    n_sites: *mut c_int,
) -> c_int {
    ffi_call("tutti_train_info", || {
        check_disjoint(&[
            handle_region("train", train),
            Region::output("kind", kind, 1),
            Region::output("dtype", dtype, 1),
            Region::output("n_sites", n_sites, 1),
        ])?;
        // SAFETY: a live handle or NULL (the caller's promise).
        let train = unsafe { train_ref(train, "train")? };
        let sites = to_c_int(train.train.shapes().len(), "the number of sites")?;
        let values = [
            (
                kind,
                TuttiTrainKind::of(train.train.kind()) as c_int,
                "kind",
            ),
            (dtype, train.train.dtype() as c_int, "dtype"),
            (n_sites, sites, "n_sites"),
        ];
        let mut outs = Vec::new();
        for (ptr, value, name) in values {
            if !ptr.is_null() {
                // SAFETY: not NULL, so valid for writing an int (the caller's promise).
                outs.push((unsafe { Out::new(ptr, name)? }, value));
            }
        }
        for (out, value) in outs {
            out.write(value);
        }
        Ok(())
    })
}

/// Writes every core's shape to the caller's array `shapes` of `len` ints: 3 per site for an
/// MPS (Dl, d, Dr), 4 for an MPO (Dl, d_out, d_in, Dr), site 0 first, as
/// `tutti_train_from_arrays` takes them. `len` must be exactly that (see `tutti_train_info`).
///
/// # Safety
/// `train` is NULL or a live handle; `shapes` is NULL or valid for writing `len` ints.
#[no_mangle]
pub unsafe extern "C" fn tutti_train_shapes(
    train: *const TuttiTrain,
    shapes: *mut c_int,
    len: usize,
) -> c_int {
    ffi_call("tutti_train_shapes", || {
        check_disjoint(&[
            handle_region("train", train),
            Region::output("shapes", shapes, len),
        ])?;
        // SAFETY: a live handle or NULL (the caller's promise).
        let train = unsafe { train_ref(train, "train")? };
        let kind = train.train.kind();
        let mut values = Vec::new();
        for shape in train.train.shapes() {
            for d in shape.dims(kind) {
                values.push(to_c_int(d, "a dimension")?);
            }
        }
        if len != values.len() {
            return Err(Error::invalid_argument(format!(
                "argument `len` is {len}: this train needs exactly {} ints",
                values.len()
            )));
        }
        // SAFETY: valid for writing len ints (the caller's promise); checked by the helper.
        let shapes = unsafe { output_slice(shapes, len, "shapes")? };
        shapes.copy_from_slice(&values);
        Ok(())
    })
}

/// Copies site `site`'s core into the caller's array `data` of `len` doubles: C order, the
/// product of the site's dims entries (see `tutti_train_shapes`), times 2 for complex128
/// (interleaved re, im). `len` must be exactly that.
///
/// A train opened from a directory reads the files up to that site.
///
/// Errors: `site` out of range or a wrong `len` (`TUTTI_ERROR_INVALID_ARGUMENT`); an
/// unreadable file (`TUTTI_ERROR_IO`).
///
/// # Safety
/// `train` is NULL or a live handle; `data` is NULL or valid for writing `len` doubles.
#[no_mangle]
pub unsafe extern "C" fn tutti_train_site(
    train: *const TuttiTrain,
    site: c_int,
    data: *mut f64,
    len: usize,
) -> c_int {
    ffi_call("tutti_train_site", || {
        check_disjoint(&[
            handle_region("train", train),
            Region::output("data", data, len),
        ])?;
        // SAFETY: a live handle or NULL (the caller's promise).
        let train = unsafe { train_ref(train, "train")? };
        let shapes = train.train.shapes();
        let site = index_in(site, shapes.len(), "site")?;
        let needed = shapes[site].len() * train.train.dtype().width();
        if len != needed {
            return Err(Error::invalid_argument(format!(
                "argument `len` is {len}: site {site} has exactly {needed} doubles"
            )));
        }
        // SAFETY: valid for writing len doubles (the caller's promise); checked by the helper.
        let data = unsafe { output_slice(data, len, "data")? };
        match &train.train {
            AnyTrain::Real(t) => data.copy_from_slice(&t.cores()[site].data),
            AnyTrain::Complex(t) => copy_complex(&t.cores()[site].data, data),
            AnyTrain::Disk(t) => {
                if t.is_complex() {
                    let core = nth_core::<Complex64>(t, site)?;
                    copy_complex(&core.data, data);
                } else {
                    data.copy_from_slice(&nth_core::<f64>(t, site)?.data);
                }
            }
        }
        Ok(())
    })
}

fn copy_complex(values: &[Complex64], out: &mut [f64]) {
    for (pair, z) in out.chunks_exact_mut(2).zip(values) {
        pair[0] = z.re;
        pair[1] = z.im;
    }
}

fn nth_core<T: Scalar>(train: &NpyTrain, site: usize) -> Result<Core<T>, Error>
where
    NpyTrain: Layer<T>,
{
    let mut stream = Layer::<T>::stream(train, false).map_err(sweep_error)?;
    stream
        .nth(site)
        .ok_or_else(|| Error::invalid_argument(format!("site {site} is out of range")))?
        .map_err(sweep_error)
}

/// Writes the train to the directory `path` in the `.npy` format (`000.npy`, ...), atomically:
/// into a temporary sibling, then renamed. An existing `path` is replaced only if it holds
/// nothing but `.npy` files.
///
/// Errors: NULL pointers; a directory that cannot be written or holds other files
/// (`TUTTI_ERROR_IO`).
///
/// # Safety
/// `train` is NULL or a live handle; `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tutti_train_write_dir(
    train: *const TuttiTrain,
    path: *const c_char,
) -> c_int {
    ffi_call("tutti_train_write_dir", || {
        // SAFETY: the caller's promises, checked by the helpers.
        let (train, path) = unsafe { (train_ref(train, "train")?, input_str(path, "path")?) };
        match &train.train {
            AnyTrain::Real(t) => write_train(t, path),
            AnyTrain::Complex(t) => write_train(t, path),
            AnyTrain::Disk(t) if t.is_complex() => {
                load::<Complex64>(t).and_then(|t| write_train(&t, path))
            }
            AnyTrain::Disk(t) => load::<f64>(t).and_then(|t| write_train(&t, path)),
        }
        .map_err(sweep_error)
    })
}

/// Releases a train. `tutti_train_free(NULL)` is a no-op returning `TUTTI_OK`.
///
/// Errors: `TUTTI_ERROR_INVALID_ARGUMENT` for a pointer that is not a live handle (released
/// already, or not made by tutti): tutti keeps a registry of its live handles and looks the
/// pointer up before reading it, so such a pointer is left alone. As for `tutti_free_c`, one
/// case is undetectable: a handle released twice whose address a newer handle now has
/// releases the newer one.
///
/// # Safety
/// `train` is NULL or a handle from tutti not yet released, and no other thread uses it.
#[no_mangle]
pub unsafe extern "C" fn tutti_train_free(train: *mut TuttiTrain) -> c_int {
    ffi_call("tutti_train_free", || {
        if train.is_null() {
            return Ok(());
        }
        // SAFETY: checked against the registry before it is read.
        unsafe { train_ref(train, "train")? };
        // Of two racing releases, only the one that removes it goes on.
        if !LIVE_TRAINS.remove(train.addr()) {
            return Err(Error::invalid_argument(format!(
                "argument `train` ({train:p}) is not a live train handle (released already)"
            )));
        }
        // SAFETY: made by Box::into_raw in into_handle and live until the removal above, so
        // this is its one release. The cleared marker helps a debugger spot a stale handle.
        unsafe {
            (*train).marker = 0;
            drop(Box::from_raw(train));
        }
        Ok(())
    })
}

/// `*norm_out = ||train||` (the Frobenius norm for an MPO), by a QR sweep over the cores.
///
/// # Safety
/// `train` is NULL or a live handle; `norm_out` is NULL or valid for writing a double.
#[no_mangle]
pub unsafe extern "C" fn tutti_train_norm(train: *const TuttiTrain, norm_out: *mut f64) -> c_int {
    ffi_call("tutti_train_norm", || {
        check_disjoint(&[
            handle_region("train", train),
            Region::output("norm_out", norm_out, 1),
        ])?;
        // SAFETY: the caller's promises, checked by the helpers.
        let (train, out) = unsafe { (train_ref(train, "train")?, Out::new(norm_out, "norm_out")?) };
        let value = match train.train.to_real() {
            Some(real) => norm(&real.map_err(sweep_error)?),
            None => norm(&train.train.to_complex().map_err(sweep_error)?),
        };
        out.write(value);
        Ok(())
    })
}

/// `*distance_out = ||a - b||`, by contraction (accurate even when `a` and `b` agree to
/// rounding). A float64 train is compared with a complex128 one as complex.
///
/// Errors: trains of different kinds, lengths or physical dimensions
/// (`TUTTI_ERROR_INVALID_ARGUMENT`).
///
/// # Safety
/// `a` and `b` are NULL or live handles; `distance_out` is NULL or valid for writing a double.
#[no_mangle]
pub unsafe extern "C" fn tutti_train_distance(
    a: *const TuttiTrain,
    b: *const TuttiTrain,
    distance_out: *mut f64,
) -> c_int {
    ffi_call("tutti_train_distance", || {
        check_disjoint(&[
            handle_region("a", a),
            handle_region("b", b),
            Region::output("distance_out", distance_out, 1),
        ])?;
        // SAFETY: the caller's promises, checked by the helpers.
        let (a, b, out) = unsafe {
            (
                train_ref(a, "a")?,
                train_ref(b, "b")?,
                Out::new(distance_out, "distance_out")?,
            )
        };
        if a.train.kind() != b.train.kind() {
            return Err(Error::invalid_argument(
                "`a` and `b` are of different kinds (an MPS and an MPO)",
            ));
        }
        let value = match (a.train.to_real(), b.train.to_real()) {
            (Some(x), Some(y)) => distance(&x.map_err(sweep_error)?, &y.map_err(sweep_error)?),
            _ => distance(
                &a.train.to_complex().map_err(sweep_error)?,
                &b.train.to_complex().map_err(sweep_error)?,
            ),
        }
        .map_err(sweep_error)?;
        out.write(value);
        Ok(())
    })
}

/// Helpers for the tests of the train and SRC entry points.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::boundary::last_error;
    use std::ptr;

    /// Deterministic pseudo-random entries in [-1, 1).
    pub(crate) fn entries(len: usize, salt: u64) -> Vec<f64> {
        let mut state = salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
            })
            .collect()
    }

    /// Shapes (axes per site) and data for a train of `n` sites, bond `bond`, physical dim 2.
    pub(crate) fn arrays(
        kind: TrainKind,
        n: usize,
        bond: usize,
        width: usize,
    ) -> (Vec<c_int>, Vec<Vec<f64>>) {
        let mut shapes = Vec::new();
        let mut data = Vec::new();
        for k in 0..n {
            let left = if k == 0 { 1 } else { bond };
            let right = if k + 1 == n { 1 } else { bond };
            let dims: Vec<usize> = match kind {
                TrainKind::Mps => vec![left, 2, right],
                TrainKind::Mpo => vec![left, 2, 2, right],
            };
            shapes.extend(dims.iter().map(|&d| d as c_int));
            data.push(entries(
                dims.iter().product::<usize>() * width,
                k as u64 + 7,
            ));
        }
        (shapes, data)
    }

    pub(crate) fn make(
        kind: TrainKind,
        dtype: TuttiDtype,
        n: usize,
        bond: usize,
    ) -> *mut TuttiTrain {
        let (shapes, data) = arrays(kind, n, bond, dtype.width());
        let pointers: Vec<*const f64> = data.iter().map(|d| d.as_ptr()).collect();
        let mut out = ptr::null_mut();
        // SAFETY: arrays of the stated lengths; out is a local.
        let status = unsafe {
            tutti_train_from_arrays(
                TuttiTrainKind::of(kind) as c_int,
                dtype as c_int,
                n as c_int,
                shapes.as_ptr(),
                pointers.as_ptr(),
                &mut out,
            )
        };
        assert_eq!(status, 0, "{}", last_error());
        out
    }

    pub(crate) fn free(train: *mut TuttiTrain) {
        // SAFETY: a live handle from this test, released once.
        assert_eq!(unsafe { tutti_train_free(train) }, 0, "{}", last_error());
    }

    pub(crate) fn distance_of(a: *mut TuttiTrain, b: *mut TuttiTrain) -> f64 {
        let mut d = -1.0;
        // SAFETY: live handles; d is a local.
        let status = unsafe { tutti_train_distance(a, b, &mut d) };
        assert_eq!(status, 0, "{}", last_error());
        d
    }

    pub(crate) fn norm_of(a: *mut TuttiTrain) -> f64 {
        let mut value = -1.0;
        // SAFETY: a live handle; value is a local.
        assert_eq!(unsafe { tutti_train_norm(a, &mut value) }, 0);
        value
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use crate::boundary::last_error;
    use std::ffi::CString;
    use std::ptr;

    #[test]
    fn shapes_and_sites_round_trip_through_arrays_and_directories() {
        let dtype = TuttiDtype::TUTTI_DTYPE_COMPLEX128;
        let (shapes, data) = arrays(TrainKind::Mpo, 4, 3, 2);
        let train = make(TrainKind::Mpo, dtype, 4, 3);
        let mut got = vec![0; shapes.len()];
        // SAFETY: a live handle and an array of the stated length.
        let status = unsafe { tutti_train_shapes(train, got.as_mut_ptr(), got.len()) };
        assert_eq!(status, 0, "{}", last_error());
        assert_eq!(got, shapes);
        let dir = std::env::temp_dir().join(format!("tutti-capi-sweep-{}", std::process::id()));
        let path = CString::new(dir.to_string_lossy().as_bytes()).expect("no NUL");
        // SAFETY: a live handle and a C string.
        assert_eq!(unsafe { tutti_train_write_dir(train, path.as_ptr()) }, 0);
        let mut opened = ptr::null_mut();
        // SAFETY: a C string and a local.
        let status = unsafe { tutti_train_from_dir(path.as_ptr(), &mut opened) };
        assert_eq!(status, 0, "{}", last_error());
        for (site, expected) in data.iter().enumerate() {
            for handle in [train, opened] {
                let mut core = vec![0.0; expected.len()];
                // SAFETY: a live handle and an array of the stated length.
                let status = unsafe {
                    tutti_train_site(handle, site as c_int, core.as_mut_ptr(), core.len())
                };
                assert_eq!(status, 0, "{}", last_error());
                assert_eq!(&core, expected);
            }
        }
        let mut short = vec![0.0; 3];
        // SAFETY: as above.
        let status = unsafe { tutti_train_site(train, 0, short.as_mut_ptr(), short.len()) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(
            last_error().contains("exactly 24 doubles"),
            "{}",
            last_error()
        );
        // The same entries: the distance is rounding of the difference train's QR sweep.
        assert!(distance_of(train, opened) <= 1e-13 * norm_of(train));
        free(train);
        free(opened);
        std::fs::remove_dir_all(&dir).expect("cleanup");

        let real = make(TrainKind::Mps, TuttiDtype::TUTTI_DTYPE_FLOAT64, 3, 2);
        // SAFETY: a live handle and a C string.
        assert_eq!(unsafe { tutti_train_write_dir(real, path.as_ptr()) }, 0);
        let back: TensorTrain<f64> = tutti_sweep::read_train(&dir).expect("readable train");
        assert_eq!(back.bonds(), vec![1, 2, 2, 1]);
        free(real);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn bad_input_gets_a_status_and_a_message_naming_it() {
        // A bond mismatch: site 1 has left bond 3, site 0 right bond 2.
        let shapes: [c_int; 6] = [1, 2, 2, 3, 2, 1];
        let (a, b) = (vec![0.5; 4], vec![0.5; 6]);
        let cores = [a.as_ptr(), b.as_ptr()];
        let mut out = ptr::null_mut();
        // SAFETY: arrays of the stated lengths.
        let status =
            unsafe { tutti_train_from_arrays(0, 0, 2, shapes.as_ptr(), cores.as_ptr(), &mut out) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        let message = last_error();
        assert!(message.contains("bond mismatch at site 1"), "{message}");
        assert!(out.is_null(), "no output on failure");
        // NaN, an unknown dtype, a zero dimension.
        let nan = [f64::NAN, 1.0];
        let single: [c_int; 3] = [1, 2, 1];
        for (kind, dtype, shape, data, needle) in [
            (0, 0, single, nan.as_ptr(), "not finite"),
            (0, 7, single, nan.as_ptr(), "argument `dtype` is 7"),
            (0, 0, [1, 0, 1], nan.as_ptr(), "dimension below 1"),
            (3, 0, single, nan.as_ptr(), "argument `kind` is 3"),
        ] {
            let cores = [data];
            // SAFETY: arrays of the stated lengths.
            let status = unsafe {
                tutti_train_from_arrays(kind, dtype, 1, shape.as_ptr(), cores.as_ptr(), &mut out)
            };
            assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
            assert!(last_error().contains(needle), "{}", last_error());
        }
        // A missing directory is an I/O error.
        let missing = CString::new("/nonexistent/tutti/train").expect("no NUL");
        // SAFETY: a C string and a local.
        let status = unsafe { tutti_train_from_dir(missing.as_ptr(), &mut out) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_IO.code());
        // SAFETY: NULL is a no-op.
        assert_eq!(unsafe { tutti_train_free(ptr::null_mut()) }, 0);
    }

    #[test]
    fn sweep_errors_map_to_their_status() {
        let too_large = SweepError::OutOfMemory {
            what: "the sketch".into(),
            bytes: u64::MAX,
        };
        assert_eq!(
            sweep_error(too_large).status(),
            TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY
        );
        let mismatch = SweepError::BondMismatch {
            train: "MPS".into(),
            site: 1,
            detail: "2 against 3".into(),
        };
        assert_eq!(
            sweep_error(mismatch).status(),
            TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT
        );
    }
}
