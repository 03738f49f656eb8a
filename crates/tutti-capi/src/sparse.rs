//! Sparse direct solves from C: a factorization handle (`tutti-sparse`'s multifrontal LU)
//! that is analysed once per pattern, factored and refactored with new values, and solved
//! with one or many right-hand sides, split among the devices of `options->resources`.
//!
//! The matrix crosses the boundary as compressed arrays: row pointers and column indices
//! (CSR, the default) or column pointers and row indices (CSC, scipy's `csc_matrix`),
//! 64-bit, 0-based or 1-based (Fortran), in any order within a row or column, duplicates
//! summed. The values come in the caller's entry order at each factorization.
//!
//! A handle factors real (`double`, the default) or complex (`double complex`: two doubles
//! per value, real part first) values, fixed by `options->dtype` when it is analysed: the
//! `_c128` entry points factor and solve a complex handle.
//!
//! With `options->resources.world` the handle spans the world's MPI processes: each holds
//! its own ranks' parts of the factors, every process makes every call collectively, and
//! every process receives the whole solution. A check that fails in one process only is told
//! to the others before they wait in a collective (`TUTTI_ERROR_REMOTE` there).

use std::ffi::c_int;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use tutti_backend::{BackendError, GpuUse};
use tutti_group::{Group, GroupError, RunError};
use tutti_plan::{Plan, Tier};
use tutti_sparse::ordering::{Grid, OrderingOptions};
use tutti_sparse::{
    analyse, c64, factor_on, solve_on, Assembly, Compressed, CsrMatrix, FactorOptions,
    Factorization, OrderingMethod, RankFactors, Scalar, SolveInfo, SolveOptions, SparseError,
    Symbolic,
};

use crate::boundary::{
    check_disjoint, ffi_call, input_options, input_slice, output_slice, write_default, Out, Region,
};
use crate::memory::Registry;
use crate::resources::{device_error, TuttiResources};
use crate::status::{Error, TuttiStatus};
use crate::train::TuttiDtype;
use crate::world::checked;

/// How a matrix's arrays are compressed; passed as an `int`.
#[allow(non_camel_case_types)] // the variants are the C names
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum TuttiSparseLayout {
    /// Compressed rows: `pointers` has `n + 1` entries, `indices` holds column indices.
    TUTTI_SPARSE_CSR = 0,
    /// Compressed columns: `pointers` has `n + 1` entries, `indices` holds row indices.
    TUTTI_SPARSE_CSC = 1,
}

/// Options of `tutti_sparse_analyse`. Start from `tutti_sparse_options_default`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuttiSparseOptions {
    /// Where the factorization runs: its subtrees are split among these devices (default:
    /// `tutti_resources_default`). Factors and solutions are bit-identical for any device
    /// count. The factor storage of each device is checked against
    /// `resources.device_memory_bytes` when the pattern is analysed: a factorization that
    /// does not fit is refused there (`TUTTI_ERROR_OUT_OF_MEMORY`, with the plan's numbers),
    /// before any numeric work. With `resources.world` the factorization is split among the
    /// world's processes, each running a rank per device its `resources` select (see
    /// `tutti_sparse_analyse`).
    pub resources: TuttiResources,
    /// `TUTTI_SPARSE_CSR` (default) or `TUTTI_SPARSE_CSC`.
    pub layout: c_int,
    /// 0 (default, C) or 1 (Fortran): the value of the first pointer and of the first row
    /// and column index.
    pub index_base: c_int,
    /// Unknowns per grid point (default 1): with `block` coupled species per point, numbered
    /// `point * block + species`, the ordering keeps each point's unknowns together.
    pub block: c_int,
    /// A connected part of at most this many unknowns is not dissected further (default 64).
    pub leaf_size: c_int,
    /// All 0 (default): nested dissection of the matrix's graph with METIS's vertex
    /// separators. Otherwise the points per
    /// axis of the grid the unknowns live on (1 to 3 axes, unused axes 0; x fastest: point
    /// `x + nx * (y + ny * z)`), ordered by the grid's geometric dissection.
    pub grid_dims: [c_int; 3],
    /// Per grid axis, 1 if it wraps around (periodic), else 0 (default).
    pub grid_periodic: [c_int; 3],
    /// A pivot at most `pivot_tiny * max|A|` in magnitude is perturbed (default machine
    /// epsilon).
    pub pivot_tiny: f64,
    /// The perturbed pivot's magnitude relative to `max|A|` (default `sqrt(eps)`).
    pub pivot_perturbation: f64,
    /// Iterative refinement steps at most in each solve (default 3; 0 solves once).
    pub max_refinements: c_int,
    /// Refinement stops below this backward error (default `4 eps`).
    pub refinement_target: f64,
    /// The values the handle factors, fixed here: `TUTTI_DTYPE_FLOAT64` (default; factor
    /// and solve with `tutti_sparse_factor` and `tutti_sparse_solve`) or
    /// `TUTTI_DTYPE_COMPLEX128` (`tutti_sparse_factor_c128` and `tutti_sparse_solve_c128`;
    /// the memory plan counts 16 bytes per value instead of 8).
    pub dtype: c_int,
}

impl Default for TuttiSparseOptions {
    fn default() -> Self {
        let ordering = OrderingOptions::default();
        let factor = FactorOptions::default();
        let solve = SolveOptions::default();
        Self {
            resources: TuttiResources::default(),
            layout: TuttiSparseLayout::TUTTI_SPARSE_CSR as c_int,
            index_base: 0,
            block: c_int::try_from(ordering.block).unwrap_or(1),
            leaf_size: c_int::try_from(ordering.leaf_size).unwrap_or(64),
            grid_dims: [0; 3],
            grid_periodic: [0; 3],
            pivot_tiny: factor.tiny,
            pivot_perturbation: factor.perturbation,
            max_refinements: c_int::try_from(solve.max_refinements).unwrap_or(3),
            refinement_target: solve.target,
            dtype: TuttiDtype::TUTTI_DTYPE_FLOAT64 as c_int,
        }
    }
}

/// What `tutti_sparse_info` reports about a handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TuttiSparseInfo {
    /// The matrix's order n.
    pub unknowns: i64,
    /// Entries of the pattern, duplicates merged.
    pub matrix_nnz: i64,
    /// Entries of L and U together as stored (the analysis's prediction, exact for this
    /// solver).
    pub factor_nnz: i64,
    /// Floating-point operations of one factorization.
    pub factor_flops: f64,
    /// Floating-point operations of one solve with one right-hand side.
    pub solve_flops: f64,
    /// Fronts of the assembly tree.
    pub fronts: i64,
    /// The largest front's order.
    pub largest_front: i64,
    /// The devices (ranks) the factorization is split among, over all processes of its
    /// world.
    pub devices: c_int,
    /// 1 once `tutti_sparse_factor` (or `tutti_sparse_factor_c128`) has succeeded (and
    /// since its last failure), else 0.
    pub factored: c_int,
    /// Pivots perturbed by the last factorization.
    pub perturbed_pivots: i64,
    /// The most bytes the plan gives one device (factors, fronts, vectors).
    pub device_bytes: u64,
}

/// What one solve reached.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TuttiSparseSolveInfo {
    /// Iterative refinement steps taken.
    pub refinements: c_int,
    /// The largest backward error over the right-hand sides,
    /// `||b - A x||_inf / (||A||_inf ||x||_inf + ||b||_inf)`.
    pub backward_error: f64,
}

/// Marks a live handle: "tuttispr".
const LIVE_SPARSE: u64 = u64::from_be_bytes(*b"tuttispr");

/// The address of every live handle, looked up before a pointer is read.
static LIVE_HANDLES: Registry = Registry::new();

/// A sparse factorization, opaque to C: the analysed pattern, the devices, and (once
/// factored) the factors; with a world, this process's ranks' parts of them.
///
/// Made by `tutti_sparse_analyse`; released exactly once with `tutti_sparse_free`. Calls on
/// one handle from several threads are serialised by a lock inside it. A handle made with a
/// world holds tutti's duplicate of the world's communicator (not the `TuttiWorld`), so it
/// stays usable after `tutti_world_free`.
pub struct TuttiSparse {
    marker: u64,
    state: Mutex<State>,
}

/// What a handle holds.
struct State {
    assembly: Assembly,
    symbolic: Arc<Symbolic>,
    /// The ranks: this process's devices, or a group spanning the world's processes (which
    /// holds the world's fabric, and so its communicator, alive).
    group: Group,
    plan: Plan,
    factor_options: FactorOptions,
    solve_options: SolveOptions,
    /// The values the handle factors (`options->dtype`).
    dtype: TuttiDtype,
    factors: Option<AnyFactors>,
}

/// Factors in `T` on one device, or split among the group's ranks.
enum Factors<T: Scalar> {
    One(Factorization<T>),
    /// This process's ranks' parts, its first rank's first (every rank's when the group is
    /// in this process), as `SplitFactorization` holds them.
    Split(Vec<RankFactors<T>>),
}

/// Factors of either dtype.
enum AnyFactors {
    Real(Factors<f64>),
    Complex(Factors<c64>),
}

impl<T: Scalar> Factors<T> {
    /// Factors `a` on the handle's ranks (checked against the plan when it was analysed):
    /// what `SplitFactorization::new` runs, with another process's failure kept apart
    /// (`TUTTI_ERROR_REMOTE`).
    fn new(state: &State, a: &CsrMatrix<T>) -> Result<Self, Error> {
        let (symbolic, options) = (&state.symbolic, state.factor_options);
        if state.group.size() == 1 {
            let device = state.group.devices().first().ok_or_else(|| {
                Error::new(
                    TuttiStatus::TUTTI_ERROR_DEVICE,
                    "the group has no device in this process",
                )
            })?;
            return Factorization::on_device(device, Arc::clone(symbolic), a, options)
                .map(Self::One)
                .map_err(sparse_error);
        }
        state
            .group
            .run(|comm| factor_on(comm, Arc::clone(symbolic), a, options))
            .map(Self::Split)
            .map_err(run_error)
    }

    /// Solves in place for the `rhs` column-major right-hand sides of `x`; every process of
    /// a world receives the whole solution (`SplitFactorization::solve_in_place`).
    fn solve(&self, state: &State, x: &mut [T], rhs: usize) -> Result<SolveInfo, Error> {
        let options = &state.solve_options;
        let parts = match self {
            Self::One(lu) => return lu.solve_in_place(x, rhs, options).map_err(sparse_error),
            Self::Split(parts) => parts,
        };
        let first = state.group.local_ranks().start;
        let input: &[T] = x;
        let mut solved = state
            .group
            .run(|comm| {
                let part = comm
                    .rank()
                    .checked_sub(first)
                    .and_then(|index| parts.get(index))
                    .ok_or_else(|| SparseError::InvalidArgument {
                        detail: format!("rank {} holds no part of the factors", comm.rank()),
                    })?;
                let mut mine = input.to_vec();
                let info = solve_on(comm, part, &mut mine, rhs, options)?;
                Ok::<_, SparseError>((mine, info))
            })
            .map_err(run_error)?;
        if solved.is_empty() {
            return Err(Error::new(
                TuttiStatus::TUTTI_ERROR_DEVICE,
                "the group ran no rank in this process",
            ));
        }
        let (solution, info) = solved.swap_remove(0);
        x.copy_from_slice(&solution);
        Ok(info)
    }

    fn perturbed_pivots(&self) -> usize {
        match self {
            Self::One(lu) => lu.perturbed_pivots(),
            Self::Split(parts) => parts.first().map_or(0, RankFactors::perturbed_pivots),
        }
    }
}

impl AnyFactors {
    fn perturbed_pivots(&self) -> usize {
        match self {
            Self::Real(lu) => lu.perturbed_pivots(),
            Self::Complex(lu) => lu.perturbed_pivots(),
        }
    }
}

/// A scalar as it crosses the boundary: `double` for `f64`, two `double`s (real part
/// first, C99 `double complex`) for `c64`.
trait Element: Scalar {
    /// The dtype of the handles that factor in this scalar.
    const DTYPE: TuttiDtype;

    /// The factors, as factors of either dtype.
    fn wrap(factors: Factors<Self>) -> AnyFactors;

    /// The factors, when they are in this scalar.
    fn unwrap(factors: &AnyFactors) -> Option<&Factors<Self>>;
}

impl Element for f64 {
    const DTYPE: TuttiDtype = TuttiDtype::TUTTI_DTYPE_FLOAT64;

    fn wrap(factors: Factors<Self>) -> AnyFactors {
        AnyFactors::Real(factors)
    }

    fn unwrap(factors: &AnyFactors) -> Option<&Factors<Self>> {
        match factors {
            AnyFactors::Real(lu) => Some(lu),
            AnyFactors::Complex(_) => None,
        }
    }
}

impl Element for c64 {
    const DTYPE: TuttiDtype = TuttiDtype::TUTTI_DTYPE_COMPLEX128;

    fn wrap(factors: Factors<Self>) -> AnyFactors {
        AnyFactors::Complex(factors)
    }

    fn unwrap(factors: &AnyFactors) -> Option<&Factors<Self>> {
        match factors {
            AnyFactors::Complex(lu) => Some(lu),
            AnyFactors::Real(_) => None,
        }
    }
}

/// What a dtype is called and which entry points factor and solve in it.
struct DtypeNames {
    constant: &'static str,
    factor: &'static str,
    solve: &'static str,
}

fn dtype_names(dtype: TuttiDtype) -> DtypeNames {
    match dtype {
        TuttiDtype::TUTTI_DTYPE_FLOAT64 => DtypeNames {
            constant: "TUTTI_DTYPE_FLOAT64",
            factor: "tutti_sparse_factor",
            solve: "tutti_sparse_solve",
        },
        TuttiDtype::TUTTI_DTYPE_COMPLEX128 => DtypeNames {
            constant: "TUTTI_DTYPE_COMPLEX128",
            factor: "tutti_sparse_factor_c128",
            solve: "tutti_sparse_solve_c128",
        },
    }
}

/// The status of a sparse error: a singular matrix is `TUTTI_ERROR_SINGULAR`; bad arrays,
/// values, options and lengths are invalid arguments; a plan that does not fit or a size
/// that cannot be allocated is out of memory; a rank's failure is a device error.
fn sparse_error(error: SparseError) -> Error {
    use TuttiStatus::*;
    let status = match &error {
        SparseError::StructurallySingular { .. } | SparseError::NumericallySingular { .. } => {
            TUTTI_ERROR_SINGULAR
        }
        SparseError::InvalidMatrix { .. }
        | SparseError::InvalidArgument { .. }
        | SparseError::NotSquare { .. }
        | SparseError::NonFinite { .. }
        | SparseError::NonFiniteRightHandSide { .. }
        | SparseError::LengthMismatch { .. }
        | SparseError::PatternMismatch { .. } => TUTTI_ERROR_INVALID_ARGUMENT,
        SparseError::Plan(_) | SparseError::TooLarge { .. } => TUTTI_ERROR_OUT_OF_MEMORY,
        SparseError::Io { .. } | SparseError::MatrixMarket { .. } => TUTTI_ERROR_IO,
        // Group runs, collectives, and kinds the library adds later.
        _ => TUTTI_ERROR_DEVICE,
    };
    Error::new(status, error.to_string())
}

/// The status of a failed group run: the rank's own error as [`sparse_error`] maps it,
/// another process's failure `TUTTI_ERROR_REMOTE` (`rank R failed: its message`), a panic
/// `TUTTI_ERROR_PANIC`, a rank thread that could not start a device error.
fn run_error(error: RunError<SparseError>) -> Error {
    use TuttiStatus::*;
    let status = match error {
        RunError::Failed { error, .. } => return sparse_error(error),
        RunError::Remote { .. } => TUTTI_ERROR_REMOTE,
        RunError::Panicked { .. } => TUTTI_ERROR_PANIC,
        _ => TUTTI_ERROR_DEVICE,
    };
    Error::new(status, error.to_string())
}

/// `result`, first telling the other processes when it is an error and the group spans a
/// world's processes (`Group::before_run`, with the error's message): a check that fails in
/// this process only then fails the others' next run (`TUTTI_ERROR_REMOTE`) instead of
/// leaving them waiting in it. In one process this passes `result` through.
fn told<T>(group: &Group, result: Result<T, Error>) -> Result<T, Error> {
    if let Err(error) = &result {
        // Only the telling matters here; the error itself is `result`'s.
        let _ = group.before_run(Err::<(), _>(error.message()));
    }
    result
}

fn group_error(error: GroupError) -> Error {
    match error {
        GroupError::Backend(error) if !matches!(error, BackendError::OutOfMemory { .. }) => {
            device_error(error)
        }
        other => Error::new(TuttiStatus::TUTTI_ERROR_DEVICE, other.to_string()),
    }
}

/// A count from C that must be at least `min`, as a `usize`.
fn count_at_least(value: i64, min: usize, name: &str) -> Result<usize, Error> {
    usize::try_from(value)
        .ok()
        .filter(|&v| v >= min)
        .ok_or_else(|| {
            Error::invalid_argument(format!(
                "argument `{name}` is {value}: expected at least {min}"
            ))
        })
}

/// Positive `int` option fields.
fn positive_option(value: c_int, name: &str) -> Result<usize, Error> {
    usize::try_from(value)
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(|| {
            Error::invalid_argument(format!("options->{name} is {value}: expected at least 1"))
        })
}

/// Positive finite `double` option fields.
fn positive_real(value: f64, name: &str) -> Result<f64, Error> {
    if value > 0.0 && value.is_finite() {
        Ok(value)
    } else {
        Err(Error::invalid_argument(format!(
            "options->{name} is {value}: expected a positive finite number"
        )))
    }
}

impl TuttiSparseOptions {
    fn layout(&self) -> Result<Compressed, Error> {
        match self.layout {
            0 => Ok(Compressed::Rows),
            1 => Ok(Compressed::Columns),
            other => Err(Error::invalid_argument(format!(
                "options->layout is {other}: expected TUTTI_SPARSE_CSR (0) or TUTTI_SPARSE_CSC (1)"
            ))),
        }
    }

    fn index_base(&self) -> Result<usize, Error> {
        match self.index_base {
            0 => Ok(0),
            1 => Ok(1),
            other => Err(Error::invalid_argument(format!(
                "options->index_base is {other}: expected 0 (C) or 1 (Fortran)"
            ))),
        }
    }

    fn ordering(&self) -> Result<OrderingMethod, Error> {
        let block = positive_option(self.block, "block")?;
        let leaf_size = positive_option(self.leaf_size, "leaf_size")?;
        let axes = self
            .grid_dims
            .iter()
            .rposition(|&d| d != 0)
            .map_or(0, |last| last + 1);
        if axes == 0 {
            return Ok(OrderingMethod::Metis(OrderingOptions { leaf_size, block }));
        }
        let dims = self.grid_dims[..axes]
            .iter()
            .enumerate()
            .map(|(axis, &d)| positive_option(d, &format!("grid_dims[{axis}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let periodic = self.grid_periodic[..axes]
            .iter()
            .enumerate()
            .map(|(axis, &p)| match p {
                0 => Ok(false),
                1 => Ok(true),
                other => Err(Error::invalid_argument(format!(
                    "options->grid_periodic[{axis}] is {other}: expected 0 or 1"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(OrderingMethod::Grid {
            grid: Grid {
                dims,
                periodic,
                block,
            },
            leaf_size,
        })
    }

    fn dtype(&self) -> Result<TuttiDtype, Error> {
        match self.dtype {
            0 => Ok(TuttiDtype::TUTTI_DTYPE_FLOAT64),
            1 => Ok(TuttiDtype::TUTTI_DTYPE_COMPLEX128),
            other => Err(Error::invalid_argument(format!(
                "options->dtype is {other}: expected TUTTI_DTYPE_FLOAT64 (0) or \
                 TUTTI_DTYPE_COMPLEX128 (1)"
            ))),
        }
    }

    fn factor_options(&self) -> Result<FactorOptions, Error> {
        Ok(FactorOptions {
            tiny: positive_real(self.pivot_tiny, "pivot_tiny")?,
            perturbation: positive_real(self.pivot_perturbation, "pivot_perturbation")?,
        })
    }

    /// Hashes what every process of a world must give alike: every field but `resources`
    /// and `index_base` (the arrays are compared 0-based).
    fn fingerprint(&self, hasher: &mut impl Hasher) {
        (
            self.layout,
            self.block,
            self.leaf_size,
            self.grid_dims,
            self.grid_periodic,
            self.max_refinements,
            self.dtype,
        )
            .hash(hasher);
        for value in [
            self.pivot_tiny,
            self.pivot_perturbation,
            self.refinement_target,
        ] {
            value.to_bits().hash(hasher);
        }
    }

    fn solve_options(&self) -> Result<SolveOptions, Error> {
        let max_refinements = usize::try_from(self.max_refinements).map_err(|_| {
            Error::invalid_argument(format!(
                "options->max_refinements is {}: expected at least 0",
                self.max_refinements
            ))
        })?;
        Ok(SolveOptions {
            max_refinements,
            target: positive_real(self.refinement_target, "refinement_target")?,
        })
    }
}

/// Writes the default sparse options to `*options`: the default resources, CSR, 0-based,
/// nested dissection (METIS's separators) with blocks of 1 and leaves of 64 unknowns, pivots below `eps max|A|`
/// perturbed to `sqrt(eps) max|A|`, at most 3 refinement steps down to `4 eps`, float64
/// values.
///
/// Errors: `TUTTI_ERROR_NULL_POINTER` for NULL.
///
/// # Safety
/// `options` is NULL or valid for writing a `TuttiSparseOptions`.
#[no_mangle]
pub unsafe extern "C" fn tutti_sparse_options_default(options: *mut TuttiSparseOptions) -> c_int {
    ffi_call("tutti_sparse_options_default", || {
        // SAFETY: NULL or valid for writes (the caller's promise).
        unsafe { write_default(options, "options") }
    })
}

/// The caller's 64-bit indices as 0-based `usize`s below `bound`, or an error naming the
/// array and the entry.
fn zero_based(values: &[i64], base: usize, name: &str) -> Result<Vec<usize>, Error> {
    let mut out = Vec::new();
    out.try_reserve_exact(values.len()).map_err(|_| {
        Error::new(
            TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY,
            format!(
                "argument `{name}`: {} entries do not fit in memory",
                values.len()
            ),
        )
    })?;
    for (k, &v) in values.iter().enumerate() {
        let index = usize::try_from(v)
            .ok()
            .and_then(|v| v.checked_sub(base))
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "argument `{name}`[{k}] is {v}: indices start at {base}"
                ))
            })?;
        out.push(index);
    }
    Ok(out)
}

/// What `tutti_sparse_analyse` checked and computed before its group forms.
struct Analysis<'a> {
    handle_out: Out<'a, *mut TuttiSparse>,
    assembly: Assembly,
    symbolic: Arc<Symbolic>,
    resources: tutti_backend::Resources,
    factor_options: FactorOptions,
    solve_options: SolveOptions,
    dtype: TuttiDtype,
    /// The arguments every process of a world must agree on (the pattern and the options
    /// but the resources), hashed.
    fingerprint: u64,
}

/// Checks the arguments of `tutti_sparse_analyse` and analyses the pattern.
///
/// # Safety
/// As for `tutti_sparse_analyse`.
unsafe fn analysis<'a>(
    n: i64,
    pointers: *const i64,
    indices: *const i64,
    options: &TuttiSparseOptions,
    handle_out: *mut *mut TuttiSparse,
) -> Result<Analysis<'a>, Error> {
    // SAFETY: NULL or valid for writing a pointer (the caller's promise).
    let handle_out = unsafe { Out::new(handle_out, "handle_out") }?;
    let n = count_at_least(n, 1, "n")?;
    let layout = options.layout()?;
    let base = options.index_base()?;
    let method = options.ordering()?;
    let factor_options = options.factor_options()?;
    let solve_options = options.solve_options()?;
    let dtype = options.dtype()?;
    // SAFETY: the resources' pointers are NULL or valid (the caller's promise).
    let resources = unsafe { options.resources.to_rust("options->resources") }?;
    let pointer_count = n
        .checked_add(1)
        .ok_or_else(|| Error::invalid_argument(format!("argument `n` is {n}: too large")))?;
    // SAFETY: `pointers` holds n + 1 readable entries (the caller's promise).
    let pointers = unsafe { input_slice(pointers, pointer_count, "pointers") }?;
    let pointers = zero_based(pointers, base, "pointers")?;
    // Checked before `indices` is read: 1-based arrays given with index_base 0 would
    // otherwise make it one entry longer than the caller's array.
    if pointers[0] != 0 {
        return Err(Error::invalid_argument(format!(
            "argument `pointers` starts at {}: with options->index_base {base} it starts \
             at {base} (index_base is 1 for 1-based arrays)",
            pointers[0] + base
        )));
    }
    let entries = pointers[n];
    // SAFETY: `indices` holds pointers[n] - base readable entries (the caller's promise).
    let indices = unsafe { input_slice(indices, entries, "indices") }?;
    let indices = zero_based(indices, base, "indices")?;
    let assembly = Assembly::new(n, n, &pointers, &indices, layout).map_err(sparse_error)?;
    let symbolic = analyse(assembly.pattern(), &method).map_err(sparse_error)?;
    let mut hasher = DefaultHasher::new();
    (n, &pointers, &indices).hash(&mut hasher);
    options.fingerprint(&mut hasher);
    Ok(Analysis {
        handle_out,
        assembly,
        symbolic,
        resources,
        factor_options,
        solve_options,
        dtype,
        fingerprint: hasher.finish(),
    })
}

/// Checks that every process of a spanning group analysed with the same arguments
/// (`fingerprint`), in one run over the group, which also makes the processes' analyses
/// succeed or fail together: a failure another process told (its arguments, its plan) fails
/// this one's run with `TUTTI_ERROR_REMOTE`. Arguments that differ are refused on every
/// process alike (`TUTTI_ERROR_INVALID_ARGUMENT`, naming the ranks that differ from rank 0).
fn agree(group: &Group, fingerprint: u64) -> Result<(), Error> {
    let gathered = group
        .run(|comm| comm.allgather(&[fingerprint]).map_err(SparseError::from))
        .map_err(run_error)?;
    let fingerprints: Vec<u64> = gathered
        .first()
        .map(|all| {
            all.iter()
                .map(|f| f.first().copied().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default();
    let differing: Vec<usize> = (0..fingerprints.len())
        .filter(|&rank| fingerprints[rank] != fingerprints[0])
        .collect();
    if differing.is_empty() {
        return Ok(());
    }
    Err(Error::invalid_argument(format!(
        "the processes of options->resources.world were given different patterns or options: \
         those of rank(s) {differing:?} differ from rank 0's (every process calls \
         tutti_sparse_analyse with the same arguments; only the resources may differ)"
    )))
}

/// Analyses the pattern of an `n x n` sparse matrix and makes a factorization handle for it:
/// the fill-reducing ordering, the assembly tree, the memory plan on the devices of
/// `options->resources` (a factorization that does not fit is refused here). No values are
/// needed; factor with `tutti_sparse_factor`, then solve with `tutti_sparse_solve` (or, for
/// `options->dtype` `TUTTI_DTYPE_COMPLEX128`, with `tutti_sparse_factor_c128` and
/// `tutti_sparse_solve_c128`).
///
/// `pointers` has `n + 1` entries and `indices` has `pointers[n] - index_base` (the
/// entries, at least 1), per `options->layout` and `options->index_base`; both are read
/// during the call only.
///
/// With `options->resources.world` (from `tutti_world_from_fcomm`) the factorization is
/// split among the world's processes. Every process calls `tutti_sparse_analyse`, then
/// `tutti_sparse_factor` and `tutti_sparse_solve` (or their `_c128` twins) on its handle,
/// collectively: in the same order and with the same arguments, only `resources` may differ
/// (each process runs a rank per device its `resources` select). Every process receives the
/// whole solution, bitwise that of as many devices in one process. The patterns and options
/// are compared here (when they differ, every process returns
/// `TUTTI_ERROR_INVALID_ARGUMENT`), and the values and right-hand sides by a digest at each
/// factorization and solve (when they differ, every process fails, naming the ranks). When a
/// call fails in one process (a bad argument, a value that is not finite), that process
/// returns its own status and every other `TUTTI_ERROR_REMOTE` with its rank and message;
/// only a failure before the options or the handle are read (a bad `options` or `handle`
/// pointer) cannot release the others. `tutti_sparse_info` and `tutti_sparse_free` are
/// local.
///
/// Lifetime with a world: the handle keeps tutti's duplicate of the world's communicator
/// alive itself (it never reads the `TuttiWorld` after this call), so it stays usable after
/// `tutti_world_free`; the duplicate is freed with the last of the world and the handles
/// made with it. Release such handles on every process, as the world, before
/// `MPI_Finalize` (after it nothing is freed). A host program's own failure can be told
/// (`tutti_world_fail`) only while the world is alive.
///
/// Errors: `TUTTI_ERROR_NULL_POINTER`; `TUTTI_ERROR_INVALID_ARGUMENT` for `n < 1`,
/// pointers that do not start at the base, decrease, an index out of range, bad options,
/// a grid whose size is not `n`, a world that is not live; `TUTTI_ERROR_SINGULAR` for a
/// structurally singular pattern (an empty row or column); `TUTTI_ERROR_OUT_OF_MEMORY` when
/// the factors do not fit the devices' memory caps; device selection errors as for every
/// workload; `TUTTI_ERROR_REMOTE` when another process of the world failed.
///
/// # Safety
/// `pointers` holds `n + 1` and `indices` `pointers[n] - index_base` readable `int64_t`s;
/// `options` is NULL or a valid `TuttiSparseOptions` whose `resources` pointers are NULL or
/// valid as documented on `TuttiResources`; `handle_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tutti_sparse_analyse(
    n: i64,
    pointers: *const i64,
    indices: *const i64,
    options: *const TuttiSparseOptions,
    handle_out: *mut *mut TuttiSparse,
) -> c_int {
    ffi_call("tutti_sparse_analyse", || {
        // SAFETY: NULL or valid for reading the options (the caller's promise).
        let options = unsafe { input_options(options, "options") }?;
        // SAFETY: the world is NULL or a live handle for the call (the caller's promise;
        // checked).
        let world = unsafe { options.resources.world("options->resources") }?;
        // The world first: with one, every later check's failure releases the other
        // processes (`checked`, and `told` once the group has formed).
        // SAFETY: the caller's promises, as `analysis` needs them.
        let analysis = checked(world, unsafe {
            analysis(n, pointers, indices, &options, handle_out)
        })?;
        let group = match world {
            Some(world) => world.group(&analysis.resources, GpuUse::HostOnly)?,
            None => {
                Group::from_resources(&analysis.resources, GpuUse::HostOnly).map_err(group_error)?
            }
        };
        let plan = match analysis.dtype {
            TuttiDtype::TUTTI_DTYPE_FLOAT64 => tutti_sparse::plan_for::<f64>,
            TuttiDtype::TUTTI_DTYPE_COMPLEX128 => tutti_sparse::plan_for::<c64>,
        }(
            &analysis.symbolic,
            group.size(),
            group.devices(),
            &analysis.resources,
        );
        let plan = told(&group, plan.map_err(sparse_error))?;
        if group.is_spanning() {
            agree(&group, analysis.fingerprint)?;
        }
        let handle = Box::into_raw(Box::new(TuttiSparse {
            marker: LIVE_SPARSE,
            state: Mutex::new(State {
                assembly: analysis.assembly,
                symbolic: analysis.symbolic,
                group,
                plan,
                factor_options: analysis.factor_options,
                solve_options: analysis.solve_options,
                dtype: analysis.dtype,
                factors: None,
            }),
        }));
        LIVE_HANDLES.insert(handle.addr());
        analysis.handle_out.write(handle);
        Ok(())
    })
}

/// A handle argument, checked: not NULL, aligned, live.
///
/// # Safety
/// `ptr` is NULL or a handle from tutti not released during `'a`.
unsafe fn handle_ref<'a>(ptr: *const TuttiSparse, name: &str) -> Result<&'a TuttiSparse, Error> {
    if ptr.is_null() {
        return Err(Error::null_pointer(name));
    }
    let not_live = || {
        Error::invalid_argument(format!(
            "argument `{name}` ({ptr:p}) is not a live sparse handle (released already, or \
             not made by tutti_sparse_analyse)"
        ))
    };
    if !ptr.is_aligned() || !LIVE_HANDLES.contains(ptr.addr()) {
        return Err(not_live());
    }
    // SAFETY: not NULL, aligned, and a live handle made by tutti_sparse_analyse (the registry
    // says so; the caller promises no other thread releases it during 'a).
    let handle = unsafe { &*ptr };
    if handle.marker != LIVE_SPARSE {
        return Err(not_live());
    }
    Ok(handle)
}

impl TuttiSparse {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A call that panicked left `factors` either whole or None: usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// Refuses a call of `called` (an entry point in `T`) on a handle analysed for another
    /// dtype, naming the entry point `right` picks among the handle's.
    fn check_dtype<T: Element>(
        &self,
        called: &str,
        right: fn(&DtypeNames) -> &'static str,
    ) -> Result<(), Error> {
        if self.dtype == T::DTYPE {
            return Ok(());
        }
        let names = dtype_names(self.dtype);
        Err(Error::invalid_argument(format!(
            "argument `handle` was analysed with options->dtype {}: call {} instead of {called}",
            names.constant,
            right(&names),
        )))
    }
}

/// `values` entries, each `T::PACKED` doubles, as a count of doubles.
fn doubles<T: Scalar>(values: usize, name: &str) -> Result<usize, Error> {
    values.checked_mul(T::PACKED).ok_or_else(|| {
        Error::invalid_argument(format!("argument `{name}`: {values} values overflow"))
    })
}

/// The body of `tutti_sparse_factor` (`T = f64`) and `tutti_sparse_factor_c128`
/// (`T = c64`): `values` holds `nnz` values of `T`, `T::PACKED` doubles each.
///
/// # Safety
/// `handle` is NULL or a live handle; `values` holds `nnz * T::PACKED` readable doubles.
unsafe fn factor<T: Element>(
    function: &str,
    handle: *mut TuttiSparse,
    values: *const f64,
    nnz: i64,
) -> Result<(), Error> {
    // SAFETY: checked against the registry before it is read.
    let handle = unsafe { handle_ref(handle, "handle") }?;
    let mut state = handle.state();
    state.factors = None;
    // With a world, a check that fails in this process only releases the others.
    let checks = || {
        state.check_dtype::<T>(function, |names| names.factor)?;
        let expected = state.assembly.entries();
        let nnz = count_at_least(nnz, 1, "nnz")?;
        if nnz != expected {
            return Err(Error::invalid_argument(format!(
                "argument `nnz` is {nnz}: the analysed pattern has {expected} entries"
            )));
        }
        // SAFETY: `values` holds nnz * T::PACKED readable doubles (the caller's promise).
        let packed = unsafe { input_slice(values, doubles::<T>(nnz, "values")?, "values") }?;
        let values = T::unpack(packed).ok_or_else(|| {
            Error::invalid_argument("argument `values`: not a whole number of values")
        })?;
        state.assembly.matrix(&values).map_err(sparse_error)
    };
    let a = told(&state.group, checks())?;
    let factors = Factors::new(&state, &a)?;
    state.factors = Some(T::wrap(factors));
    Ok(())
}

/// The body of `tutti_sparse_solve` (`T = f64`) and `tutti_sparse_solve_c128` (`T = c64`):
/// `b` holds `n * n_rhs` values of `T`, `T::PACKED` doubles each.
///
/// # Safety
/// `handle` is NULL or a live handle; `b` holds `n * n_rhs * T::PACKED` readable and
/// writable doubles; `info_out` is NULL or writable and does not overlap `b`.
unsafe fn solve<T: Element>(
    function: &str,
    handle: *mut TuttiSparse,
    b: *mut f64,
    n_rhs: i64,
    info_out: *mut TuttiSparseSolveInfo,
) -> Result<(), Error> {
    // SAFETY: checked against the registry before it is read.
    let handle = unsafe { handle_ref(handle, "handle") }?;
    let state = handle.state();
    // With a world, a check that fails in this process only releases the others.
    let checks = || {
        state.check_dtype::<T>(function, |names| names.solve)?;
        let rhs = count_at_least(n_rhs, 1, "n_rhs")?;
        let n = state.symbolic.unknowns();
        let len = n.checked_mul(rhs).ok_or_else(|| {
            Error::invalid_argument(format!(
                "{n} unknowns times {rhs} right-hand sides overflow"
            ))
        })?;
        let len = doubles::<T>(len, "b")?;
        let info_slot = if info_out.is_null() {
            None
        } else {
            check_disjoint(&[
                Region::output("b", b, len),
                Region::output("info_out", info_out, 1),
            ])?;
            // SAFETY: not NULL; writable and disjoint from b (checked above).
            Some(unsafe { Out::new(info_out, "info_out") }?)
        };
        let Some(factors) = state.factors.as_ref().and_then(T::unwrap) else {
            return Err(Error::invalid_argument(format!(
                "argument `handle` holds no factorization: call {} first (or again, after it \
                 failed)",
                dtype_names(T::DTYPE).factor
            )));
        };
        // SAFETY: `b` holds len readable and writable doubles (the caller's promise).
        let b = unsafe { output_slice(b, len, "b") }?;
        let x = T::unpack(b)
            .ok_or_else(|| Error::invalid_argument("argument `b`: not a whole number of values"))?
            .into_owned();
        Ok((rhs, info_slot, factors, b, x))
    };
    let (rhs, info_slot, factors, b, mut x) = told(&state.group, checks())?;
    // A value of `b` that is not finite is refused in the run, by every rank of this process.
    let info = factors.solve(&state, &mut x, rhs)?;
    let mut solution = Vec::new();
    T::pack(&x, &mut solution);
    b.copy_from_slice(&solution);
    if let Some(slot) = info_slot {
        slot.write(TuttiSparseSolveInfo {
            refinements: c_int::try_from(info.refinements).unwrap_or(c_int::MAX),
            backward_error: info.backward_error,
        });
    }
    Ok(())
}

/// Factors the handle's matrix with `values`: `nnz` doubles in the order of the `indices`
/// given to `tutti_sparse_analyse` (duplicates summed). Call again with new values on the
/// same pattern to refactor (the numeric phase only: what an implicit integrator does when
/// its step changes). On failure the handle holds no factors until a factorization succeeds.
/// A handle made with a world is factored collectively, every process giving the same values
/// (see `tutti_sparse_analyse`); each keeps its own ranks' factors.
///
/// Errors: `TUTTI_ERROR_NULL_POINTER`; `TUTTI_ERROR_INVALID_ARGUMENT` for a handle that is
/// not live or analysed for `TUTTI_DTYPE_COMPLEX128` (factor it with
/// `tutti_sparse_factor_c128`), `nnz` other than the analysed entry count, a value that is
/// not finite (the message gives its row and column); `TUTTI_ERROR_REMOTE` when another
/// process of the handle's world failed (its rank and message); a rank's panic as
/// `TUTTI_ERROR_PANIC`, its other failures as device errors. Tiny pivots are perturbed, not
/// refused: a singular matrix is found by the solve (`TUTTI_ERROR_SINGULAR`).
///
/// # Safety
/// `handle` is NULL or a live handle; `values` holds `nnz` readable doubles.
#[no_mangle]
pub unsafe extern "C" fn tutti_sparse_factor(
    handle: *mut TuttiSparse,
    values: *const f64,
    nnz: i64,
) -> c_int {
    const FUNCTION: &str = "tutti_sparse_factor";
    ffi_call(FUNCTION, || {
        // SAFETY: the caller's promises are those of `factor` for f64.
        unsafe { factor::<f64>(FUNCTION, handle, values, nnz) }
    })
}

/// Factors a complex handle's matrix (`options->dtype` `TUTTI_DTYPE_COMPLEX128`) with
/// `values`: `nnz` complex values, `2 * nnz` doubles, each value's real part first (the
/// layout of C99 `double complex` and Fortran's `complex(c_double_complex)`), in the order of
/// the `indices` given to `tutti_sparse_analyse` (duplicates summed). Otherwise as
/// `tutti_sparse_factor`: call again to refactor; on failure the handle holds no factors.
///
/// Errors: as `tutti_sparse_factor`; `TUTTI_ERROR_INVALID_ARGUMENT` also for a handle
/// analysed for `TUTTI_DTYPE_FLOAT64` (factor it with `tutti_sparse_factor`), and for a
/// value whose real or imaginary part is not finite.
///
/// # Safety
/// `handle` is NULL or a live handle; `values` holds `2 * nnz` readable doubles.
#[no_mangle]
pub unsafe extern "C" fn tutti_sparse_factor_c128(
    handle: *mut TuttiSparse,
    values: *const f64,
    nnz: i64,
) -> c_int {
    const FUNCTION: &str = "tutti_sparse_factor_c128";
    ffi_call(FUNCTION, || {
        // SAFETY: the caller's promises are those of `factor` for c64 (2 doubles a value).
        unsafe { factor::<c64>(FUNCTION, handle, values, nnz) }
    })
}

/// Solves `A X = B` in place: `b` holds `n_rhs` right-hand sides column-major (`n x n_rhs`,
/// column k at `b + k n`) and receives X. Each solve refines iteratively (see
/// `TuttiSparseOptions`). `info_out` may be NULL; else it gets the refinement steps and the
/// backward error. `b` is written only on success. A handle made with a world solves
/// collectively, every process giving the same `b` and `n_rhs`, and every process receives
/// the whole of X.
///
/// Errors: `TUTTI_ERROR_NULL_POINTER`; `TUTTI_ERROR_INVALID_ARGUMENT` for a handle not
/// factored (or whose last factorization failed) or analysed for `TUTTI_DTYPE_COMPLEX128`
/// (solve with `tutti_sparse_solve_c128`), `n_rhs < 1`, a value of `b` that is not finite;
/// `TUTTI_ERROR_SINGULAR` when pivots were perturbed and refinement could not bring the
/// backward error below 1e-10 (the matrix is singular to working precision);
/// `TUTTI_ERROR_REMOTE` when another process of the handle's world failed.
///
/// # Safety
/// `handle` is NULL or a live handle; `b` holds `n * n_rhs` readable and writable doubles;
/// `info_out` is NULL or writable and does not overlap `b`.
#[no_mangle]
pub unsafe extern "C" fn tutti_sparse_solve(
    handle: *mut TuttiSparse,
    b: *mut f64,
    n_rhs: i64,
    info_out: *mut TuttiSparseSolveInfo,
) -> c_int {
    const FUNCTION: &str = "tutti_sparse_solve";
    ffi_call(FUNCTION, || {
        // SAFETY: the caller's promises are those of `solve` for f64.
        unsafe { solve::<f64>(FUNCTION, handle, b, n_rhs, info_out) }
    })
}

/// Solves `A X = B` in place with a complex handle's factors (`tutti_sparse_factor_c128`):
/// `b` holds `n_rhs` complex right-hand sides column-major (`n x n_rhs` values, column k at
/// value `k n`), `2 * n * n_rhs` doubles, each value's real part first (C99
/// `double complex`), and receives X. Otherwise as `tutti_sparse_solve`: iterative
/// refinement, the backward error in complex moduli, `b` written only on success.
///
/// Errors: as `tutti_sparse_solve`; `TUTTI_ERROR_INVALID_ARGUMENT` also for a handle
/// analysed for `TUTTI_DTYPE_FLOAT64` (solve with `tutti_sparse_solve`).
///
/// # Safety
/// `handle` is NULL or a live handle; `b` holds `2 * n * n_rhs` readable and writable
/// doubles; `info_out` is NULL or writable and does not overlap `b`.
#[no_mangle]
pub unsafe extern "C" fn tutti_sparse_solve_c128(
    handle: *mut TuttiSparse,
    b: *mut f64,
    n_rhs: i64,
    info_out: *mut TuttiSparseSolveInfo,
) -> c_int {
    const FUNCTION: &str = "tutti_sparse_solve_c128";
    ffi_call(FUNCTION, || {
        // SAFETY: the caller's promises are those of `solve` for c64 (2 doubles a value).
        unsafe { solve::<c64>(FUNCTION, handle, b, n_rhs, info_out) }
    })
}

/// `*info_out` = what the analysis predicts (fill, flops, fronts), the devices, whether the
/// handle holds factors and how many pivots they perturbed, and the plan's largest
/// per-device bytes. For a handle made with a world this is local (no communication) and
/// the same on every process: `devices` counts the ranks of all its processes, and the
/// perturbed pivots are those of all ranks.
///
/// Errors: `TUTTI_ERROR_NULL_POINTER`; `TUTTI_ERROR_INVALID_ARGUMENT` for a handle that is not
/// live.
///
/// # Safety
/// `handle` is NULL or a live handle; `info_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tutti_sparse_info(
    handle: *const TuttiSparse,
    info_out: *mut TuttiSparseInfo,
) -> c_int {
    ffi_call("tutti_sparse_info", || {
        // SAFETY: checked against the registry before it is read.
        let handle = unsafe { handle_ref(handle, "handle") }?;
        // SAFETY: NULL or writable (the caller's promise).
        let out = unsafe { Out::new(info_out, "info_out") }?;
        let state = handle.state();
        let s = state.symbolic.statistics();
        let wide = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        out.write(TuttiSparseInfo {
            unknowns: wide(s.unknowns),
            matrix_nnz: wide(s.matrix_nnz),
            factor_nnz: i64::try_from(s.factor_nnz).unwrap_or(i64::MAX),
            factor_flops: s.factor_flops,
            solve_flops: s.solve_flops,
            fronts: wide(s.fronts),
            largest_front: wide(s.largest_front),
            devices: c_int::try_from(state.group.size()).unwrap_or(c_int::MAX),
            factored: c_int::from(state.factors.is_some()),
            perturbed_pivots: wide(
                state
                    .factors
                    .as_ref()
                    .map_or(0, AnyFactors::perturbed_pivots),
            ),
            device_bytes: state.plan.used(Tier::Device),
        });
        Ok(())
    })
}

/// Releases a handle from `tutti_sparse_analyse`. NULL is a no-op. A pointer that is not a
/// live handle (released already, or not made by tutti) is refused with
/// `TUTTI_ERROR_INVALID_ARGUMENT` without being read.
///
/// # Safety
/// `handle` is NULL or a handle from tutti not yet released, and no other thread uses it.
#[no_mangle]
pub unsafe extern "C" fn tutti_sparse_free(handle: *mut TuttiSparse) -> c_int {
    ffi_call("tutti_sparse_free", || {
        if handle.is_null() {
            return Ok(());
        }
        // SAFETY: checked against the registry before it is read.
        unsafe { handle_ref(handle, "handle")? };
        // Of two racing releases, only the one that removes it goes on.
        if !LIVE_HANDLES.remove(handle.addr()) {
            return Err(Error::invalid_argument(format!(
                "argument `handle` ({handle:p}) is not a live sparse handle (released already)"
            )));
        }
        // SAFETY: made by Box::into_raw in tutti_sparse_analyse and live until the removal
        // above, so this is its one release.
        unsafe {
            (*handle).marker = 0;
            drop(Box::from_raw(handle));
        }
        Ok(())
    })
}
