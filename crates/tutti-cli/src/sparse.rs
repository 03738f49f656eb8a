//! `tutti sparse`: solve a sparse linear system by a multifrontal LU split among devices
//! (`solve`), or print what its analysis predicts (`info`).

use std::fmt::Display;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use serde_json::{json, Value};
use tutti_backend::{format_bytes, GpuUse, Resources};
use tutti_group::{Group, RunError};
use tutti_plan::npy::{self, NpyError};
use tutti_plan::Tier;
use tutti_sparse::ordering::{
    grid_dissection, metis_dissection, nested_dissection, Grid, OrderingOptions,
};
use tutti_sparse::{
    analyse, c64, factor_on, matrix_market, models, solve_on, CsrMatrix, FactorOptions,
    Factorization, Graph, OrderingMethod, Scalar, SolveInfo, SolveOptions, SparseError,
    SplitFactorization, Symbolic,
};

use crate::failure::Failure;
use crate::processes::Processes;
use crate::report::{device_kind, print_json};
use crate::resources::DeviceArgs;

/// The sparse solver has no GPU kernels: `--kind auto` opens simulated devices.
const GPU_USE: GpuUse = GpuUse::HostOnly;

/// The device counts `tutti sparse info` plans for.
const INFO_DEVICE_COUNTS: [usize; 3] = [1, 2, 4];

/// Options of `tutti sparse`.
#[derive(Args)]
pub struct SparseArgs {
    #[command(subcommand)]
    command: SparseCommand,
}

#[derive(Subcommand)]
enum SparseCommand {
    /// Solve A X = B by a multifrontal LU, split among the devices, with iterative
    /// refinement; B is A * ones unless `--rhs` gives it.
    Solve(SolveArgs),
    /// Order and analyse A without factoring it: fill, flops, and the memory per device on
    /// 1, 2 and 4 devices (16 bytes per entry for a complex file).
    Info(InfoArgs),
}

/// The built-in model matrices (tutti_sparse::models), on a grid of `--dims` points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ModelArg {
    /// The negative Laplacian (3-, 5- or 7-point stencil, Dirichlet boundaries): symmetric
    /// positive definite.
    Laplacian,
    /// -Δu + peclet ∂u/∂x with upwind convection: unsymmetric.
    ConvectionDiffusion,
    /// shift I - J with `--species` coupled species per point: unsymmetric in values.
    ReactionDiffusion,
}

impl ModelArg {
    /// The name as written on the command line.
    fn name(self) -> &'static str {
        match self {
            Self::Laplacian => "laplacian",
            Self::ConvectionDiffusion => "convection-diffusion",
            Self::ReactionDiffusion => "reaction-diffusion",
        }
    }
}

/// Values of `--ordering`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum OrderingArg {
    /// `nd` for a built-in model (a regular grid), `metis` for a matrix file.
    Auto,
    /// Nested dissection of the graph of A + A^T by level structures (any matrix).
    Nd,
    /// Nested dissection of the graph of A + A^T with METIS's vertex separators (any
    /// matrix).
    Metis,
    /// Geometric nested dissection of the model's grid (built-in models only).
    Grid,
}

/// The matrix (a file or a built-in model) and its ordering: the options `solve` and `info`
/// share.
#[derive(Args, Clone, Debug)]
#[command(group(ArgGroup::new("source").required(true).args(["matrix", "model"])))]
struct MatrixArgs {
    /// The matrix, a Matrix Market file (coordinate; real, integer, pattern or complex;
    /// general, symmetric, skew-symmetric or, complex, hermitian). A complex file is solved
    /// in complex128, and planned at 16 bytes per entry.
    #[arg(long, value_name = "A.mtx")]
    matrix: Option<PathBuf>,
    /// A built-in model matrix instead of a file, on the grid of `--dims`.
    #[arg(long, value_enum, value_name = "MODEL", requires = "dims")]
    model: Option<ModelArg>,
    /// The model's grid: 1 to 3 sizes, comma-separated (`64,64` or `32,32,32`).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NX,NY[,NZ]",
        requires = "model"
    )]
    dims: Option<Vec<usize>>,
    /// Coupled species per grid point of `--model reaction-diffusion` (default 2).
    #[arg(long, value_name = "B")]
    species: Option<usize>,
    /// The Péclet number of `--model convection-diffusion` (default 10).
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    peclet: Option<f64>,
    /// The shift of `--model reaction-diffusion`, > -1 for a regular matrix (default 1).
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    shift: Option<f64>,
    /// The fill-reducing ordering: `grid` (geometric, built-in models only), `nd` (nested
    /// dissection of the matrix's graph), or `auto` (`nd`: it fills less than `grid`).
    #[arg(long, value_enum, default_value_t = OrderingArg::Auto)]
    ordering: OrderingArg,
    /// Parts of at most this many unknowns are not dissected further (one dense front).
    #[arg(long, value_name = "N", default_value_t = 64)]
    leaf_size: usize,
    /// Unknowns per point that nested dissection keeps together (default: the model's
    /// species, 1 for a file); the number of unknowns must be a multiple of it.
    #[arg(long, value_name = "B")]
    block: Option<usize>,
}

/// Options of `tutti sparse solve`.
#[derive(Args)]
struct SolveArgs {
    #[command(flatten)]
    matrix: MatrixArgs,
    /// The right-hand side: a float64 .npy vector of length n, or an (n, k) C-order array
    /// for k right-hand sides (default: one, A * ones, and the error against x = 1 is
    /// reported). For a complex matrix, complex128 (a float64 file is promoted).
    #[arg(long, value_name = "b.npy")]
    rhs: Option<PathBuf>,
    /// Where to write the solution: a .npy of the right-hand side's shape (float64, or
    /// complex128 for a complex matrix), written atomically.
    #[arg(long, value_name = "x.npy")]
    out: Option<PathBuf>,
    /// Print the memory plan (each device's fronts and contribution blocks, factors, the
    /// matrix's values and the solve vectors) and exit without factoring; refused with the
    /// numbers when it does not fit the devices and caps.
    #[arg(long)]
    plan: bool,
    /// The devices: one rank each, the assembly tree's subtrees split among them.
    #[command(flatten)]
    devices: DeviceArgs,
}

/// Options of `tutti sparse info`.
#[derive(Args)]
struct InfoArgs {
    #[command(flatten)]
    matrix: MatrixArgs,
}

pub fn run(args: &SparseArgs, processes: &Processes, json: bool) -> Result<(), Failure> {
    match &args.command {
        SparseCommand::Solve(solve) => run_solve(solve, processes, json),
        SparseCommand::Info(info) => processes
            .refuse_spanning("tutti sparse info")
            .and_then(|()| run_info(info, json)),
    }
}

/// Sparse-solver errors by kind (docs/cli.md): a matrix, ordering or right-hand side that
/// cannot be used (malformed, not square, structurally singular, of the wrong size) is
/// input, and so is a plan that does not fit; a numerically singular matrix, found only by
/// factoring and solving, and a failure among the ranks are computation failures.
impl From<SparseError> for Failure {
    fn from(error: SparseError) -> Self {
        match error {
            SparseError::Plan(error) => Failure::from(error).context("memory plan"),
            SparseError::InvalidMatrix { .. }
            | SparseError::InvalidArgument { .. }
            | SparseError::NotSquare { .. }
            | SparseError::NonFinite { .. }
            | SparseError::NonFiniteRightHandSide { .. }
            | SparseError::LengthMismatch { .. }
            | SparseError::PatternMismatch { .. }
            | SparseError::StructurallySingular { .. }
            | SparseError::MatrixMarket { .. }
            | SparseError::Io { .. }
            | SparseError::TooLarge { .. } => Failure::input(error.to_string()),
            other => Failure::computation(other.to_string()),
        }
    }
}

/// How the matrix is ordered, resolved from `--ordering`, `--block` and the source.
#[derive(Clone, Debug)]
enum Ordering {
    /// Geometric dissection of the model's grid, `block` unknowns per point.
    Grid { dims: Vec<usize>, block: usize },
    /// Nested dissection of the graph, points of `block` unknowns.
    NestedDissection { block: usize },
    /// Nested dissection with METIS's separators, points of `block` unknowns.
    Metis { block: usize },
}

impl Ordering {
    /// The name reported (`--ordering`'s value).
    fn name(&self) -> &'static str {
        match self {
            Self::Grid { .. } => "grid",
            Self::NestedDissection { .. } => "nd",
            Self::Metis { .. } => "metis",
        }
    }

    fn block(&self) -> usize {
        match self {
            Self::Grid { block, .. } | Self::NestedDissection { block } | Self::Metis { block } => {
                *block
            }
        }
    }
}

/// Where the matrix comes from, with every model parameter resolved.
#[derive(Clone, Debug)]
enum Source {
    File(PathBuf),
    Model {
        model: ModelArg,
        dims: Vec<usize>,
        species: usize,
        peclet: f64,
        shift: f64,
    },
}

/// The matrix options checked and resolved, before any work.
#[derive(Clone, Debug)]
struct Problem {
    source: Source,
    ordering: Ordering,
    leaf_size: usize,
}

impl Problem {
    /// Checks the options that clap cannot: sizes of 0, model parameters given to a model
    /// without them, `--ordering grid` of a file, `--block` with the grid ordering.
    fn resolve(args: &MatrixArgs) -> Result<Self, Failure> {
        for (flag, value) in [
            ("--leaf-size", Some(args.leaf_size)),
            ("--block", args.block),
        ] {
            if value == Some(0) {
                return Err(Failure::input(format!(
                    "`{flag}` must be at least 1, got 0"
                )));
            }
        }
        let allowed: &[&str] = match args.model {
            Some(ModelArg::ConvectionDiffusion) => &["--peclet"],
            Some(ModelArg::ReactionDiffusion) => &["--species", "--shift"],
            Some(ModelArg::Laplacian) | None => &[],
        };
        for (flag, given) in [
            ("--species", args.species.is_some()),
            ("--peclet", args.peclet.is_some()),
            ("--shift", args.shift.is_some()),
        ] {
            if given && !allowed.contains(&flag) {
                return Err(Failure::input(match args.model {
                    Some(model) => {
                        format!("`{flag}` does not apply to `--model {}`", model.name())
                    }
                    None => format!(
                        "`{flag}` sets a parameter of a built-in `--model`, not of a matrix file"
                    ),
                }));
            }
        }
        let source = match (&args.matrix, args.model) {
            (Some(path), None) => Source::File(path.clone()),
            (None, Some(model)) => Source::Model {
                model,
                dims: args.dims.clone().unwrap_or_default(),
                species: match model {
                    ModelArg::ReactionDiffusion => args.species.unwrap_or(2),
                    _ => 1,
                },
                peclet: args.peclet.unwrap_or(10.0),
                shift: args.shift.unwrap_or(1.0),
            },
            // clap's group requires exactly one of them.
            _ => {
                return Err(Failure::input(
                    "give the matrix as exactly one of `--matrix A.mtx` and `--model NAME`",
                ))
            }
        };
        let ordering =
            match (&source, args.ordering) {
                (Source::Model { dims, species, .. }, OrderingArg::Grid) => {
                    if args.block.is_some() {
                        return Err(Failure::input(format!(
                        "`--block` sets the points of `--ordering nd`; the grid ordering keeps \
                         each point's {species} unknown(s) together already"
                    )));
                    }
                    Ordering::Grid {
                        dims: dims.clone(),
                        block: *species,
                    }
                }
                (Source::File(_), OrderingArg::Grid) => return Err(Failure::input(
                    "`--ordering grid` needs a built-in `--model` (a matrix file has no grid); \
                     use `--ordering nd`",
                )),
                // Automatic dissection fills less than the grid's one-plane separators (0.5-0.7x
                // the flops on the benchmark's grids), so `auto` is `nd` for models too.
                (Source::Model { species, .. }, OrderingArg::Auto | OrderingArg::Nd) => {
                    Ordering::NestedDissection {
                        block: args.block.unwrap_or(*species),
                    }
                }
                (Source::File(_), OrderingArg::Nd) => Ordering::NestedDissection {
                    block: args.block.unwrap_or(1),
                },
                (Source::Model { species, .. }, OrderingArg::Metis) => Ordering::Metis {
                    block: args.block.unwrap_or(*species),
                },
                // A file's graph may be irregular, where METIS fills about half what level
                // structures do (on grids the two are within 10%).
                (Source::File(_), OrderingArg::Auto | OrderingArg::Metis) => Ordering::Metis {
                    block: args.block.unwrap_or(1),
                },
            };
        Ok(Self {
            source,
            ordering,
            leaf_size: args.leaf_size,
        })
    }

    /// Whether the matrix is complex: a file whose header declares the field `complex`
    /// ([`declares_complex`]). The built-in models are real.
    fn is_complex(&self) -> bool {
        matches!(&self.source, Source::File(path) if declares_complex(path))
    }

    /// The matrix in `T`: read from its file or built (a model is real, promoted for a
    /// complex `T`).
    fn matrix<T: Field>(&self) -> Result<CsrMatrix<T>, Failure> {
        match &self.source {
            Source::File(path) => Ok(T::read_matrix(path)?),
            Source::Model {
                model,
                dims,
                species,
                peclet,
                shift,
            } => {
                let built = match model {
                    ModelArg::Laplacian => models::laplacian(dims),
                    ModelArg::ConvectionDiffusion => models::convection_diffusion(dims, *peclet),
                    ModelArg::ReactionDiffusion => {
                        models::reaction_diffusion(dims, *species, *shift)
                    }
                };
                // The models' bad arguments: name the flag.
                built.map(T::matrix_from_real).map_err(|error| match error {
                    SparseError::InvalidArgument { detail } => {
                        Failure::input(format!("`--model {}`: {detail}", model.name()))
                    }
                    other => {
                        Failure::from(other).context(format_args!("`--model {}`", model.name()))
                    }
                })
            }
        }
    }

    /// What the matrix is, for the text report.
    fn describe(&self) -> String {
        match &self.source {
            Source::File(path) => path.display().to_string(),
            Source::Model {
                model,
                dims,
                species,
                peclet,
                shift,
            } => {
                let grid: Vec<String> = dims.iter().map(usize::to_string).collect();
                let grid = grid.join("x");
                match model {
                    ModelArg::Laplacian => format!("laplacian on {grid}"),
                    ModelArg::ConvectionDiffusion => {
                        format!("convection-diffusion on {grid}, peclet {peclet}")
                    }
                    ModelArg::ReactionDiffusion => {
                        format!("reaction-diffusion on {grid}, {species} species, shift {shift}")
                    }
                }
            }
        }
    }

    /// The `inputs` of `--json` for these options (defaults filled in, `null` where they do
    /// not apply).
    fn to_json(&self) -> Value {
        let (matrix, model) = match &self.source {
            Source::File(path) => (json!(path), Value::Null),
            Source::Model {
                model,
                dims,
                species,
                peclet,
                shift,
            } => (
                Value::Null,
                json!({
                    "name": model.name(),
                    "dims": dims,
                    "species": species,
                    "peclet": (*model == ModelArg::ConvectionDiffusion).then_some(*peclet),
                    "shift": (*model == ModelArg::ReactionDiffusion).then_some(*shift),
                }),
            ),
        };
        json!({
            "matrix": matrix,
            "model": model,
            "ordering": self.ordering.name(),
            "leaf_size": self.leaf_size,
            "block": self.ordering.block(),
        })
    }
}

/// A matrix and its analysis, with what each step took.
struct Analysed<T: Scalar = f64> {
    a: CsrMatrix<T>,
    symbolic: Arc<Symbolic>,
    /// Seconds to read or build the matrix, to order it, and to analyse its pattern.
    matrix_seconds: f64,
    ordering_seconds: f64,
    symbolic_seconds: f64,
}

/// Reads or builds the matrix in `T`, orders it and analyses its pattern.
fn analyse_problem<T: Field>(problem: &Problem) -> Result<Analysed<T>, Failure> {
    let started = Instant::now();
    log::info!("matrix: {}", problem.describe());
    let a = problem.matrix::<T>()?;
    if a.rows() != a.cols() {
        return Err(SparseError::NotSquare {
            rows: a.rows(),
            cols: a.cols(),
        }
        .into());
    }
    let matrix_seconds = started.elapsed().as_secs_f64();
    let ordered = Instant::now();
    log::info!(
        "ordering {} unknowns ({})",
        a.rows(),
        problem.ordering.name()
    );
    let ordering_failure = |error: SparseError| match error {
        // A bad block or grid: name the option.
        SparseError::InvalidArgument { detail } => Failure::input(format!(
            "`--ordering {}`: {detail}",
            problem.ordering.name()
        )),
        other => Failure::from(other),
    };
    let tree = match &problem.ordering {
        Ordering::Grid { dims, block } => grid_dissection(
            &Grid {
                dims: dims.clone(),
                periodic: vec![false; dims.len()],
                block: *block,
            },
            problem.leaf_size,
        ),
        Ordering::NestedDissection { block } => nested_dissection(
            &Graph::of_matrix(&a)?,
            &OrderingOptions {
                leaf_size: problem.leaf_size,
                block: *block,
            },
        ),
        Ordering::Metis { block } => metis_dissection(
            &Graph::of_matrix(&a)?,
            &OrderingOptions {
                leaf_size: problem.leaf_size,
                block: *block,
            },
        ),
    }
    .map_err(ordering_failure)?;
    let ordering_seconds = ordered.elapsed().as_secs_f64();
    let analysed = Instant::now();
    let symbolic = analyse(&a, &OrderingMethod::Given(tree))?;
    Ok(Analysed {
        a,
        symbolic,
        matrix_seconds,
        ordering_seconds,
        symbolic_seconds: analysed.elapsed().as_secs_f64(),
    })
}

/// The analysis's statistics as `--json` fields.
fn statistics_json(symbolic: &Symbolic) -> Value {
    let s = symbolic.statistics();
    json!({
        "unknowns": s.unknowns,
        "nnz": s.matrix_nnz,
        "fronts": s.fronts,
        "largest_front": s.largest_front,
        "largest_contribution": s.largest_contribution,
        "factor_nnz": s.factor_nnz,
        "factor_flops": s.factor_flops,
        "solve_flops": s.solve_flops,
    })
}

/// Adds the entries of `extra` (an object) to `fields` (an object).
fn merge(mut fields: Value, extra: Value) -> Value {
    if let (Value::Object(fields), Value::Object(extra)) = (&mut fields, extra) {
        fields.extend(extra);
    }
    fields
}

fn run_info(args: &InfoArgs, json: bool) -> Result<(), Failure> {
    let started = Instant::now();
    let problem = Problem::resolve(&args.matrix)?;
    // The analysis is the pattern's alone; the field sets the bytes of an entry planned.
    if problem.is_complex() {
        info_in::<c64>(&problem, json, started)
    } else {
        info_in::<f64>(&problem, json, started)
    }
}

/// `tutti sparse info` in `T`: the matrix read or built in `T` and its memory planned at
/// `size_of::<T>()` bytes per entry ([`tutti_sparse::plan_for`]).
fn info_in<T: Field>(problem: &Problem, json: bool, started: Instant) -> Result<(), Failure> {
    let analysed = analyse_problem::<T>(problem)?;
    let symbolic = &analysed.symbolic;
    // The per-device memory on P simulated devices: the plan's device tier, or its refusal
    // where P devices of this node could not hold it.
    let mut per_device = Vec::new();
    for count in INFO_DEVICE_COUNTS {
        let resources = Resources::cpu(count);
        let devices = resources.select_for(GPU_USE)?;
        per_device.push(
            match tutti_sparse::plan_for::<T>(symbolic, count, &devices, &resources) {
                Ok(plan) => (count, Ok(plan.used(Tier::Device))),
                Err(SparseError::Plan(refusal)) => (count, Err(refusal.to_string())),
                Err(other) => return Err(other.into()),
            },
        );
    }
    let s = symbolic.statistics();
    if json {
        let memory: Vec<Value> = per_device
            .iter()
            .map(|(count, bytes)| match bytes {
                Ok(bytes) => json!({ "devices": count, "device_bytes": bytes, "refused": null }),
                Err(refusal) => {
                    json!({ "devices": count, "device_bytes": null, "refused": refusal })
                }
            })
            .collect();
        let fields = json!({
            "inputs": problem.to_json(),
            "dtype": T::DTYPE,
            "ordering": problem.ordering.name(),
            "memory_per_device": memory,
            "timings": {
                "matrix": analysed.matrix_seconds,
                "ordering": analysed.ordering_seconds,
                "symbolic": analysed.symbolic_seconds,
            },
        });
        print_json(
            "sparse info",
            started,
            merge(fields, statistics_json(symbolic)),
        );
        return Ok(());
    }
    println!(
        "sparse info: {} ({} unknowns, {} entries, {})",
        problem.describe(),
        s.unknowns,
        s.matrix_nnz,
        T::DTYPE
    );
    println!(
        "ordering: {} ({:.3} s), symbolic analysis {:.3} s",
        problem.ordering.name(),
        analysed.ordering_seconds,
        analysed.symbolic_seconds
    );
    println!(
        "fronts:   {}, largest {} (contribution block of {} entries)",
        s.fronts, s.largest_front, s.largest_contribution
    );
    println!(
        "nnz(L+U): {} ({:.1} per entry of A)",
        s.factor_nnz,
        s.factor_nnz as f64 / s.matrix_nnz.max(1) as f64
    );
    println!(
        "flops:    factor {:.3e}, solve {:.3e} per right-hand side",
        s.factor_flops, s.solve_flops
    );
    println!(
        "memory per device ({} B per entry):",
        std::mem::size_of::<T>()
    );
    for (count, bytes) in &per_device {
        match bytes {
            Ok(bytes) => println!("  {count} device(s): {}", format_bytes(*bytes)),
            Err(refusal) => println!("  {count} device(s): refused here: {refusal}"),
        }
    }
    Ok(())
}

/// The right-hand sides to solve for: column-major `n x count`, and the `.npy` shape the
/// solution is written in.
struct RightHandSides<T> {
    values: Vec<T>,
    count: usize,
    shape: Vec<u64>,
}

impl<T: Field> RightHandSides<T> {
    /// `A * ones`: one right-hand side whose solution is known.
    fn of_ones(a: &CsrMatrix<T>) -> Result<Self, Failure> {
        let mut values = vec![T::ZERO; a.rows()];
        a.matvec(&vec![T::from_real(1.0); a.cols()], &mut values)?;
        Ok(Self {
            shape: vec![a.rows() as u64],
            values,
            count: 1,
        })
    }

    /// Reads `--rhs`: a C-order `.npy` of shape `(n,)` or `(n, k)`, `k >= 1`, of `T`'s dtype
    /// ([`Field::read_npy`]).
    fn read(path: &Path, n: usize) -> Result<Self, Failure> {
        let (shape, values) =
            T::read_npy(path).map_err(|error| Failure::input(error.to_string()))?;
        let bad = |message: String| Failure::input(format!("{}: {message}", path.display()));
        let count = match shape[..] {
            [rows] if rows == n as u64 => 1,
            [rows, columns] if rows == n as u64 && columns > 0 => {
                usize::try_from(columns).map_err(|_| bad(format!("shape {shape:?}: too large")))?
            }
            _ => {
                return Err(bad(format!(
                    "expected shape ({n},) or ({n}, k) for a matrix of {n} unknowns, got \
                     {shape:?}"
                )))
            }
        };
        if let Some(k) = values.iter().position(|v| !v.is_finite()) {
            let at = if shape.len() == 1 {
                format!("{k}")
            } else {
                format!("{}, {}", k / count, k % count)
            };
            return Err(bad(format!(
                "entry ({at}) is {}: every right-hand side entry must be finite",
                values[k]
            )));
        }
        // C order (n, k) to the column-major layout the solver takes.
        let values = if count == 1 {
            values
        } else {
            transpose(&values, n, count)
        };
        Ok(Self {
            values,
            count,
            shape,
        })
    }

    /// `x` (column-major, as solved) in the layout of the `.npy` shape.
    fn to_c_order(&self, x: &[T]) -> Vec<T> {
        if self.count == 1 {
            x.to_vec()
        } else {
            transpose(x, self.count, x.len() / self.count.max(1))
        }
    }
}

/// The transpose of `values`, a C-order `rows x columns` array.
fn transpose<T: Scalar>(values: &[T], rows: usize, columns: usize) -> Vec<T> {
    let mut out = vec![T::ZERO; values.len()];
    for (i, row) in values.chunks_exact(columns.max(1)).enumerate().take(rows) {
        for (j, &value) in row.iter().enumerate() {
            out[j * rows + i] = value;
        }
    }
    out
}

/// What `tutti sparse solve` reads, factors and writes in, and what `tutti sparse info`
/// reads and plans in: `f64` for a real matrix (float64 `.npy` files, 8 bytes per entry),
/// [`c64`] for a complex one (complex128 `.npy` files, 16 bytes per entry).
trait Field: Scalar + Display {
    /// The numpy name of the field's `.npy` files, reported as the matrix's `dtype`:
    /// `float64` or `complex128`.
    const DTYPE: &'static str;

    /// Reads the Matrix Market file at `path` in this field ([`matrix_market::read`] or
    /// [`matrix_market::read_complex`]).
    fn read_matrix(path: &Path) -> Result<CsrMatrix<Self>, SparseError>;

    /// A real matrix in this field (itself for `f64`).
    fn matrix_from_real(a: CsrMatrix) -> CsrMatrix<Self>;

    /// Reads a C-order `.npy` array of this field and its shape: float64 for `f64`
    /// ([`npy::read_f64`]); complex128, or float64 promoted, for `c64` ([`npy::read_c128`]).
    fn read_npy(path: &Path) -> Result<(Vec<u64>, Vec<Self>), NpyError>;

    /// Writes `values` as a C-order `.npy` of `shape` and this field's dtype, atomically.
    fn write_npy(path: &Path, shape: &[u64], values: &[Self]) -> Result<(), NpyError>;
}

impl Field for f64 {
    const DTYPE: &'static str = "float64";

    fn read_matrix(path: &Path) -> Result<CsrMatrix, SparseError> {
        matrix_market::read(path)
    }

    fn matrix_from_real(a: CsrMatrix) -> CsrMatrix {
        a
    }

    fn read_npy(path: &Path) -> Result<(Vec<u64>, Vec<f64>), NpyError> {
        npy::read_f64(path)
    }

    fn write_npy(path: &Path, shape: &[u64], values: &[f64]) -> Result<(), NpyError> {
        npy::write_f64(path, shape, values)
    }
}

impl Field for c64 {
    const DTYPE: &'static str = "complex128";

    fn read_matrix(path: &Path) -> Result<CsrMatrix<c64>, SparseError> {
        matrix_market::read_complex(path)
    }

    fn matrix_from_real(a: CsrMatrix) -> CsrMatrix<c64> {
        a.to_complex()
    }

    fn read_npy(path: &Path) -> Result<(Vec<u64>, Vec<c64>), NpyError> {
        let (shape, values) = npy::read_c128(path)?;
        let values = values
            .into_iter()
            .map(|[re, im]| c64::new(re, im))
            .collect();
        Ok((shape, values))
    }

    fn write_npy(path: &Path, shape: &[u64], values: &[c64]) -> Result<(), NpyError> {
        let parts: Vec<[f64; 2]> = values.iter().map(|z| [z.re, z.im]).collect();
        npy::write_c128(path, shape, &parts)
    }
}

/// Whether the Matrix Market file at `path` declares the field `complex` on its header line
/// (`%%MatrixMarket matrix coordinate complex <symmetry>`, case-insensitive). Anything else,
/// a file that cannot be opened or whose first line cannot be read included, is `false`:
/// [`matrix_market::read`] then reports it as for any real file.
fn declares_complex(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    // A valid header line is a few dozen bytes.
    let mut line = String::new();
    if BufReader::new(file.take(1024))
        .read_line(&mut line)
        .is_err()
    {
        return false;
    }
    let words: Vec<String> = line
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    matches!(
        words.as_slice(),
        [banner, _, _, field, ..] if banner == "%%matrixmarket" && field == "complex"
    )
}

/// `max_j ||A x_j - b_j||_inf / (||A||_inf ||x_j||_inf)` over the columns of `x` and `b`
/// (column-major, `n` rows), from the matrix itself (not the solver's refinement).
fn relative_residual<T: Scalar>(a: &CsrMatrix<T>, x: &[T], b: &[T]) -> Result<f64, Failure> {
    let n = a.rows().max(1);
    let norm_a = a.norm_inf();
    let mut ax = vec![T::ZERO; a.rows()];
    let mut worst = 0.0f64;
    for (x, b) in x.chunks_exact(n).zip(b.chunks_exact(n)) {
        a.matvec(x, &mut ax)?;
        let residual = ax
            .iter()
            .zip(b)
            .fold(0.0f64, |m, (&p, &q)| m.max((p - q).magnitude()));
        let scale = norm_a * x.iter().fold(0.0f64, |m, v| m.max(v.magnitude()));
        let relative = if residual == 0.0 {
            0.0
        } else {
            residual / scale
        };
        worst = worst.max(relative);
    }
    Ok(worst)
}

/// A solve's outcome, with the times of its two phases.
struct Solved<T> {
    x: Vec<T>,
    info: SolveInfo,
    perturbed: usize,
    factor_seconds: f64,
    solve_seconds: f64,
}

/// Factors `a` on the ranks of `group` and solves for `rhs`: on one device alone, split
/// among this process's devices, or, over MPI, inside the group's run on every process
/// (each gets the whole solution; the bits are those of one device in every case).
fn factor_and_solve<T: Field>(
    group: &Group,
    symbolic: &Arc<Symbolic>,
    a: &CsrMatrix<T>,
    rhs: &RightHandSides<T>,
    resources: &Resources,
) -> Result<Solved<T>, Failure> {
    let options = SolveOptions::default();
    let mut x = rhs.values.clone();
    if group.is_spanning() {
        let mut outcomes = group
            .run(|comm| {
                let factored = Instant::now();
                let part = factor_on(comm, Arc::clone(symbolic), a, FactorOptions::default())?;
                let factor_seconds = factored.elapsed().as_secs_f64();
                let solved = Instant::now();
                let mut x = rhs.values.clone();
                let info = solve_on(comm, &part, &mut x, rhs.count, &options)?;
                Ok::<_, SparseError>(Solved {
                    x,
                    info,
                    perturbed: part.perturbed_pivots(),
                    factor_seconds,
                    solve_seconds: solved.elapsed().as_secs_f64(),
                })
            })
            .map_err(|error| match error {
                RunError::Failed { error, .. } => Failure::from(error),
                other => Failure::computation(other.to_string()),
            })?;
        // This process's first rank; every rank holds the whole solution.
        return if outcomes.is_empty() {
            Err(Failure::computation(
                "the group ran no rank in this process",
            ))
        } else {
            Ok(outcomes.swap_remove(0))
        };
    }
    let factored = Instant::now();
    let (info, perturbed, factor_seconds, solve_seconds) = if group.size() == 1 {
        let device = group
            .devices()
            .first()
            .ok_or_else(|| Failure::computation("the group has no device in this process"))?;
        let lu =
            Factorization::on_device(device, Arc::clone(symbolic), a, FactorOptions::default())?;
        let factor_seconds = factored.elapsed().as_secs_f64();
        let solved = Instant::now();
        let info = lu.solve_in_place(&mut x, rhs.count, &options)?;
        (
            info,
            lu.perturbed_pivots(),
            factor_seconds,
            solved.elapsed().as_secs_f64(),
        )
    } else {
        let lu = SplitFactorization::new(
            group,
            Arc::clone(symbolic),
            a,
            FactorOptions::default(),
            resources,
        )?;
        let factor_seconds = factored.elapsed().as_secs_f64();
        let solved = Instant::now();
        let info = lu.solve_in_place(group, &mut x, rhs.count, &options)?;
        (
            info,
            lu.perturbed_pivots(),
            factor_seconds,
            solved.elapsed().as_secs_f64(),
        )
    };
    Ok(Solved {
        x,
        info,
        perturbed,
        factor_seconds,
        solve_seconds,
    })
}

fn run_solve(args: &SolveArgs, processes: &Processes, json: bool) -> Result<(), Failure> {
    let started = Instant::now();
    let problem = Problem::resolve(&args.matrix)?;
    // A complex file is solved in complex throughout; the models are real.
    if problem.is_complex() {
        solve_in::<c64>(args, processes, json, &problem, started)
    } else {
        solve_in::<f64>(args, processes, json, &problem, started)
    }
}

/// `tutti sparse solve` in `T`: the matrix read or built in `T`, the right-hand sides read in
/// `T`'s dtype, the solution written in it.
fn solve_in<T: Field>(
    args: &SolveArgs,
    processes: &Processes,
    json: bool,
    problem: &Problem,
    started: Instant,
) -> Result<(), Failure> {
    let inputs = merge(
        problem.to_json(),
        json!({
            "rhs": args.rhs,
            "out": args.out,
            "plan": args.plan,
            "resources": args.devices.to_json(),
        }),
    );
    let analysed = analyse_problem::<T>(problem)?;
    let (a, symbolic) = (&analysed.a, &analysed.symbolic);
    let n = a.rows();
    let requested = args.devices.resources();
    let resources = processes.alone_share(&requested);
    let group = processes.group(&requested, GPU_USE)?;
    // The plan is checked against the devices and caps before any numeric work, on one
    // device as on several.
    let plan = tutti_sparse::plan_for::<T>(symbolic, group.size(), group.devices(), &resources)?;
    if args.plan {
        processes.refuse_spanning("tutti sparse solve --plan")?;
        if json {
            let fields = json!({
                "inputs": inputs,
                "dtype": T::DTYPE,
                "unknowns": n,
                "devices": group.size(),
                "plan": plan.to_string(),
            });
            print_json("sparse solve", started, fields);
        } else {
            println!("{plan}");
        }
        return Ok(());
    }
    let rhs = match &args.rhs {
        Some(path) => RightHandSides::<T>::read(path, n)?,
        None => RightHandSides::<T>::of_ones(a)?,
    };

    log::info!(
        "factoring {n} unknowns on {} device(s) ({} fronts), solving for {} right-hand side(s)",
        group.size(),
        symbolic.statistics().fronts,
        rhs.count
    );
    let Solved {
        x,
        info,
        perturbed,
        factor_seconds,
        solve_seconds,
    } = factor_and_solve(&group, symbolic, a, &rhs, &resources)?;
    let residual = relative_residual(a, &x, &rhs.values)?;
    let max_error = args.rhs.is_none().then(|| {
        let one = T::from_real(1.0);
        x.iter().fold(0.0f64, |m, &v| m.max((v - one).magnitude()))
    });

    // Every process holds the whole solution; rank 0 writes and reports it.
    if !processes.prints() {
        return Ok(());
    }
    let written = Instant::now();
    if let Some(out) = &args.out {
        log::info!("writing {}", out.display());
        // Written after the work: an error is a computation failure.
        T::write_npy(out, &rhs.shape, &rhs.to_c_order(&x))
            .map_err(|error| Failure::computation(error.to_string()))?;
    }
    let write_seconds = written.elapsed().as_secs_f64();

    let s = symbolic.statistics();
    if json {
        let fields = json!({
            "inputs": inputs,
            "dtype": T::DTYPE,
            "ordering": problem.ordering.name(),
            "right_hand_sides": rhs.count,
            "processes": processes.size(),
            "devices": group.size(),
            "device_kind": device_kind(group.devices()),
            "plan": plan.summary(),
            "perturbed_pivots": perturbed,
            "refinements": info.refinements,
            "backward_error": info.backward_error,
            "relative_residual": residual,
            "max_error": max_error,
            "outputs": { "x": args.out },
            "timings": {
                "matrix": analysed.matrix_seconds,
                "ordering": analysed.ordering_seconds,
                "symbolic": analysed.symbolic_seconds,
                "factor": factor_seconds,
                "solve": solve_seconds,
                "write": write_seconds,
            },
        });
        print_json(
            "sparse solve",
            started,
            merge(fields, statistics_json(symbolic)),
        );
        return Ok(());
    }
    println!(
        "sparse: {} ({} unknowns, {} entries, {}), {} right-hand side(s), {} device(s)",
        problem.describe(),
        s.unknowns,
        s.matrix_nnz,
        T::DTYPE,
        rhs.count,
        group.size()
    );
    println!(
        "ordering: {} ({:.3} s), symbolic analysis {:.3} s: {} fronts, largest {}",
        problem.ordering.name(),
        analysed.ordering_seconds,
        analysed.symbolic_seconds,
        s.fronts,
        s.largest_front
    );
    println!(
        "factor:   {:.3} s, nnz(L+U) {}, {:.3e} flops predicted, {perturbed} pivot(s) perturbed",
        factor_seconds, s.factor_nnz, s.factor_flops
    );
    println!(
        "solve:    {:.3} s, {} refinement step(s), backward error {:.3e}",
        solve_seconds, info.refinements, info.backward_error
    );
    println!("residual: ||Ax - b|| / (||A|| ||x||) = {residual:.3e}");
    if let Some(error) = max_error {
        println!("error:    max |x - 1| = {error:.3e}");
    }
    println!("plan:     {}", plan.summary());
    if let Some(out) = &args.out {
        println!("wrote:    {}", out.display());
    }
    Ok(())
}
