//! tutti's multifrontal sparse LU beside faer's sparse LU (COLAMD, supernodal) in one process,
//! on the matrices of `docs/sparse.md`:
//!
//! - 2-D reaction-diffusion with 2 species per point
//!   (`models::reaction_diffusion(&[N, N], 2, 1.0)`), N = 128 and 256;
//! - the 3-D Laplacian (`models::laplacian(&[k, k, k])`), k = 24 and 32.
//!
//! tutti analyses each matrix twice, with the grid's geometric nested dissection and with
//! automatic nested dissection (leaf size 64, the species of a point kept together), then
//! factors on 1 device (`Factorization`, sequential) and on 2 and 4 simulated devices
//! (`SplitFactorization`, whose solutions must be bitwise those of one device), and solves one
//! right-hand side (iterative refinement included). faer runs `sp_lu` (COLAMD, symbolic and
//! numeric: "analyse+factor") and, separately, `SymbolicLu::try_new` then
//! `Lu::try_new_with_symbolic`, once on all cores (faer's default global parallelism) and
//! once sequentially.
//!
//! Every time is the best of 3 rounds; each round runs every solver once, so all of them see
//! the same background load. The relative residual `||A x - b||_inf / (||A||_inf ||x||_inf)`
//! of every solver, computed from A, must be at most 1e-12 (the run fails otherwise); times
//! are reported, never checked. The load average before and after goes into the results: on
//! a shared host only the ratios within one run mean much.
//!
//! `cargo run --release -p tutti-benches --bin sparse_compare [-- --quick] [--no-write]`
//! (`--quick`: N = 128 and k = 24 only; `--no-write` leaves
//! `benches/results/sparse_compare.json` alone).

use std::error::Error;
use std::sync::Arc;
use std::time::Instant;

use faer::linalg::solvers::Solve;
use faer::sparse::linalg::solvers::{Lu, SymbolicLu};
use faer::sparse::{SparseColMat, Triplet};
use faer::{Mat, Par};
use serde_json::{json, Value};
use tutti_backend::{GpuUse, Resources};
use tutti_benches::{write_results, SplitMix};
use tutti_group::Group;
use tutti_sparse::models::{laplacian, reaction_diffusion};
use tutti_sparse::ordering::{Grid, OrderingOptions};
use tutti_sparse::{
    analyse, CsrMatrix, FactorOptions, Factorization, OrderingMethod, SolveOptions,
    SplitFactorization, Statistics,
};

/// Rounds; every time reported is the best of them.
const ROUNDS: usize = 3;
/// Leaf size of both orderings.
const LEAF_SIZE: usize = 64;
/// Device counts of tutti's factorization (1: `Factorization`, more: `SplitFactorization`).
const DEVICES: [usize; 3] = [1, 2, 4];
/// The largest relative residual accepted from any solver.
const RESIDUAL_BOUND: f64 = 1e-12;

/// One matrix of the comparison and the grid it lives on.
struct Case {
    name: String,
    model: &'static str,
    dims: Vec<usize>,
    species: usize,
    matrix: CsrMatrix,
}

/// The smallest of the seconds it has been shown.
#[derive(Clone, Copy, Debug)]
struct Best(f64);

impl Best {
    fn new() -> Self {
        Self(f64::INFINITY)
    }
    fn keep(&mut self, seconds: f64) {
        self.0 = self.0.min(seconds);
    }
}

/// Runs `work` once: its wall seconds and its result.
fn timed<T>(work: impl FnOnce() -> T) -> (f64, T) {
    let started = Instant::now();
    // black_box keeps a pure computation from being moved out of the timed region.
    let out = std::hint::black_box(work());
    (started.elapsed().as_secs_f64(), out)
}

/// tutti on one device count: its best times and its last solution.
struct DeviceRun {
    devices: usize,
    factor: Best,
    solve: Best,
    x: Vec<f64>,
    backward_error: f64,
    refinements: usize,
    /// Whether every round's solution had the bits of the 1-device solution.
    bits_equal: bool,
    /// Bytes of factors and fronts factored on each rank (split runs only).
    rank_factor_bytes: Vec<u64>,
    rank_fronts: Vec<usize>,
}

/// tutti with one ordering, on every device count.
struct TuttiRun {
    label: &'static str,
    method: OrderingMethod,
    analyse: Best,
    /// One device with every core: its factor and solve times, and whether every round's
    /// solution had the bits of the sequential one.
    threaded_factor: Best,
    threaded_solve: Best,
    threaded_bits_equal: bool,
    statistics: Option<Statistics>,
    perturbed: usize,
    devices: Vec<DeviceRun>,
}

/// faer's sparse LU under one parallelism.
struct FaerRun {
    label: &'static str,
    par: Par,
    /// `sp_lu`: COLAMD, symbolic and numeric.
    analyse_factor: Best,
    /// `SymbolicLu::try_new`.
    symbolic: Best,
    /// `Lu::try_new_with_symbolic`.
    numeric: Best,
    solve: Best,
    x: Vec<f64>,
}

/// `||A x - b||_inf / (||A||_inf ||x||_inf)`.
fn relative_residual(a: &CsrMatrix, x: &[f64], b: &[f64]) -> Result<f64, Box<dyn Error>> {
    let mut ax = vec![0.0; b.len()];
    a.matvec(x, &mut ax)?;
    let r = ax
        .iter()
        .zip(b)
        .fold(0.0f64, |m, (p, q)| m.max((p - q).abs()));
    Ok(r / (a.norm_inf() * max_abs(x)))
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0f64, |m, x| m.max(x.abs()))
}

/// `max |x - reference| / max |reference|`.
fn relative_difference(x: &[f64], reference: &[f64]) -> f64 {
    x.iter()
        .zip(reference)
        .fold(0.0f64, |m, (p, q)| m.max((p - q).abs()))
        / max_abs(reference)
}

fn bitwise_equal(x: &[f64], y: &[f64]) -> bool {
    x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
}

/// `a` as faer's compressed-column matrix.
fn to_faer(a: &CsrMatrix) -> Result<SparseColMat<usize, f64>, Box<dyn Error>> {
    let mut triplets = Vec::with_capacity(a.nnz());
    for i in 0..a.rows() {
        let (cols, vals) = a.row(i);
        triplets.extend(cols.iter().zip(vals).map(|(&j, &v)| Triplet::new(i, j, v)));
    }
    Ok(SparseColMat::try_new_from_triplets(
        a.rows(),
        a.cols(),
        &triplets,
    )?)
}

/// One round of tutti with `run`'s ordering: analyse, factor and solve on every device count.
fn tutti_round(
    run: &mut TuttiRun,
    a: &CsrMatrix,
    b: &[f64],
    groups: &[Group],
    pools: &(rayon::ThreadPool, rayon::ThreadPool),
) -> Result<(), Box<dyn Error>> {
    let (seconds, symbolic) = timed(|| analyse(a, &run.method));
    let symbolic = symbolic?;
    run.analyse.keep(seconds);
    run.statistics = Some(symbolic.statistics());

    // One device on one thread (the sequential baseline), then on every core (independent
    // subtrees and large fronts' updates on the device's threads).
    let (seconds, lu) = timed(|| {
        pools
            .0
            .install(|| Factorization::new(Arc::clone(&symbolic), a, FactorOptions::default()))
    });
    let lu = lu?;
    let (threaded_seconds, threaded) = timed(|| {
        pools
            .1
            .install(|| Factorization::new(Arc::clone(&symbolic), a, FactorOptions::default()))
    });
    run.threaded_factor.keep(threaded_seconds);
    let threaded = threaded?;
    let mut threaded_x = b.to_vec();
    let (threaded_solve_seconds, threaded_info) = timed(|| {
        pools
            .1
            .install(|| threaded.solve_in_place(&mut threaded_x, 1, &SolveOptions::default()))
    });
    threaded_info?;
    run.threaded_solve.keep(threaded_solve_seconds);
    run.perturbed = lu.perturbed_pivots();
    let mut x = b.to_vec();
    // The sequential solve on the one-thread pool (subtrees run on the pool's threads).
    let (solve_seconds, info) = timed(|| {
        pools
            .0
            .install(|| lu.solve_in_place(&mut x, 1, &SolveOptions::default()))
    });
    let info = info?;
    drop(lu);
    let (one, split_runs) = run
        .devices
        .split_first_mut()
        .ok_or("no device count to run")?;
    one.factor.keep(seconds);
    one.solve.keep(solve_seconds);
    one.backward_error = info.backward_error;
    one.refinements = info.refinements;
    run.threaded_bits_equal &= bitwise_equal(&threaded_x, &x);

    for (slot, group) in split_runs.iter_mut().zip(groups) {
        let resources = Resources::cpu(slot.devices);
        let (seconds, split) = timed(|| {
            SplitFactorization::new(
                group,
                Arc::clone(&symbolic),
                a,
                FactorOptions::default(),
                &resources,
            )
        });
        let split = split?;
        slot.factor.keep(seconds);
        let mut y = b.to_vec();
        let (seconds, info) =
            timed(|| split.solve_in_place(group, &mut y, 1, &SolveOptions::default()));
        let info = info?;
        slot.solve.keep(seconds);
        slot.backward_error = info.backward_error;
        slot.refinements = info.refinements;
        slot.bits_equal &= bitwise_equal(&y, &x);
        slot.x = y;
        slot.rank_factor_bytes = split.parts().iter().map(|p| p.factor_bytes()).collect();
        slot.rank_fronts = split.parts().iter().map(|p| p.fronts_owned()).collect();
    }
    one.x = x;
    Ok(())
}

/// One round of faer under `run`'s parallelism: `sp_lu` and its solve, then the symbolic and
/// numeric phases apart.
fn faer_round(
    run: &mut FaerRun,
    a: &SparseColMat<usize, f64>,
    b: &[f64],
) -> Result<(), Box<dyn Error>> {
    faer::set_global_parallelism(run.par);
    let (seconds, lu) = timed(|| a.sp_lu());
    let lu = lu?;
    run.analyse_factor.keep(seconds);
    let mut x = Mat::from_fn(b.len(), 1, |i, _| b[i]);
    let (seconds, ()) = timed(|| lu.solve_in_place(x.as_mut()));
    run.solve.keep(seconds);
    run.x = (0..b.len()).map(|i| x[(i, 0)]).collect();
    drop(lu);

    let (seconds, symbolic) = timed(|| SymbolicLu::try_new(a.symbolic()));
    let symbolic = symbolic?;
    run.symbolic.keep(seconds);
    let (seconds, lu) = timed(|| Lu::try_new_with_symbolic(symbolic, a.as_ref()));
    lu?;
    run.numeric.keep(seconds);
    faer::set_global_parallelism(Par::rayon(0));
    Ok(())
}

/// The 1-, 5- and 15-minute load averages (Linux), if readable.
fn load_average() -> Option<Vec<f64>> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace()
        .take(3)
        .map(|x| x.parse().ok())
        .collect()
}

/// Runs every solver on `case` for [`ROUNDS`] rounds, prints its table and returns its row of
/// results.
fn run_case(case: &Case, groups: &[Group]) -> Result<Value, Box<dyn Error>> {
    let a = &case.matrix;
    let n = a.rows();
    let mut draws = SplitMix(n as u64);
    let b: Vec<f64> = (0..n).map(|_| 2.0 * draws.next_unit() - 1.0).collect();
    let faer_matrix = to_faer(a)?;
    let device_runs = || {
        DEVICES
            .iter()
            .map(|&devices| DeviceRun {
                devices,
                factor: Best::new(),
                solve: Best::new(),
                x: Vec::new(),
                backward_error: f64::NAN,
                refinements: 0,
                bits_equal: true,
                rank_factor_bytes: Vec::new(),
                rank_fronts: Vec::new(),
            })
            .collect()
    };
    let grid = Grid {
        dims: case.dims.clone(),
        periodic: vec![false; case.dims.len()],
        block: case.species,
    };
    let mut tutti = [
        TuttiRun {
            label: "grid ND",
            method: OrderingMethod::Grid {
                grid,
                leaf_size: LEAF_SIZE,
            },
            analyse: Best::new(),
            threaded_factor: Best::new(),
            threaded_solve: Best::new(),
            threaded_bits_equal: true,
            statistics: None,
            perturbed: 0,
            devices: device_runs(),
        },
        TuttiRun {
            label: "auto ND",
            method: OrderingMethod::NestedDissection(OrderingOptions {
                leaf_size: LEAF_SIZE,
                block: case.species,
            }),
            analyse: Best::new(),
            threaded_factor: Best::new(),
            threaded_solve: Best::new(),
            threaded_bits_equal: true,
            statistics: None,
            perturbed: 0,
            devices: device_runs(),
        },
    ];
    let faer_run = |label, par| FaerRun {
        label,
        par,
        analyse_factor: Best::new(),
        symbolic: Best::new(),
        numeric: Best::new(),
        solve: Best::new(),
        x: Vec::new(),
    };
    let cores = tutti_backend::system::host_cores();
    // One thread, and one device's worth: every core.
    let pools = (
        rayon::ThreadPoolBuilder::new().num_threads(1).build()?,
        rayon::ThreadPoolBuilder::new().num_threads(cores).build()?,
    );
    let mut faer = [
        faer_run("all_cores", Par::rayon(0)),
        faer_run("sequential", Par::Seq),
    ];

    println!("\n{}: {n} unknowns, {} entries", case.name, a.nnz());
    for round in 0..ROUNDS {
        let started = Instant::now();
        for run in &mut tutti {
            tutti_round(run, a, &b, groups, &pools)?;
        }
        for run in &mut faer {
            faer_round(run, &faer_matrix, &b)?;
        }
        println!(
            "  round {}/{ROUNDS}: {:.1} s",
            round + 1,
            started.elapsed().as_secs_f64()
        );
    }

    // Residuals first: a wrong answer fails the run before any time is reported.
    let residual_of = |label: String, x: &[f64]| -> Result<f64, Box<dyn Error>> {
        let residual = relative_residual(a, x, &b)?;
        // A NaN residual fails too.
        if residual.is_nan() || residual > RESIDUAL_BOUND {
            return Err(format!(
                "{}: {label}: relative residual {residual:.2e} above {RESIDUAL_BOUND:e}",
                case.name
            )
            .into());
        }
        Ok(residual)
    };
    let mut tutti_residuals = Vec::new();
    for run in &tutti {
        let per_device = run
            .devices
            .iter()
            .map(|d| residual_of(format!("tutti {} on {}", run.label, d.devices), &d.x))
            .collect::<Result<Vec<_>, _>>()?;
        tutti_residuals.push(per_device);
    }
    let faer_residuals = faer
        .iter()
        .map(|f| residual_of(format!("faer {}", f.label), &f.x))
        .collect::<Result<Vec<_>, _>>()?;

    for run in &tutti {
        if let Some(s) = &run.statistics {
            println!(
                "  tutti {}: nnz(L+U) {:.2} M, {:.2} Gflop to factor, {} fronts, largest front \
                 {}, largest contribution block {:.2} M entries, {} pivots perturbed",
                run.label,
                s.factor_nnz as f64 / 1e6,
                s.factor_flops / 1e9,
                s.fronts,
                s.largest_front,
                s.largest_contribution as f64 / 1e6,
                run.perturbed,
            );
        }
        let shares: Vec<String> = run.devices[1..]
            .iter()
            .map(|d| {
                let megabytes: Vec<String> = d
                    .rank_factor_bytes
                    .iter()
                    .zip(&d.rank_fronts)
                    .map(|(&bytes, fronts)| format!("{:.0} ({fronts})", bytes as f64 / 1e6))
                    .collect();
                format!("{} dev [{}]", d.devices, megabytes.join(", "))
            })
            .collect();
        println!("    factors per rank, MB (fronts): {}", shares.join("; "));
    }
    println!(
        "  {:<22} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>6} {:>6} {:>15} {:>15}",
        "solver",
        "analyse",
        "factor",
        "an+fact",
        "solve",
        "GFLOP/s",
        "residual",
        "refine",
        "bits",
        "/faer all-core",
        "/faer seq"
    );
    let ms = |s: f64| format!("{:.1}ms", 1e3 * s);
    let mut tutti_rows = Vec::new();
    for (run, residuals) in tutti.iter().zip(&tutti_residuals) {
        let statistics = run.statistics.ok_or("no statistics")?;
        let mut device_rows = Vec::new();
        for (d, residual) in run.devices.iter().zip(residuals) {
            let analyse_factor = run.analyse.0 + d.factor.0;
            let gflops = statistics.factor_flops / d.factor.0 / 1e9;
            let ratios: Vec<(f64, f64)> = faer
                .iter()
                .map(|f| {
                    (
                        analyse_factor / f.analyse_factor.0,
                        d.factor.0 / f.numeric.0,
                    )
                })
                .collect();
            let ratio_text = |(both, factor): (f64, f64)| format!("{both:.2}x / {factor:.2}x");
            println!(
                "  {:<22} {:>9} {:>9} {:>9} {:>9} {:>8.2} {:>9.1e} {:>6} {:>6} {:>15} {:>15}",
                format!("tutti {} {} dev", run.label, d.devices),
                ms(run.analyse.0),
                ms(d.factor.0),
                ms(analyse_factor),
                ms(d.solve.0),
                gflops,
                residual,
                d.refinements,
                if d.devices == 1 {
                    "-"
                } else if d.bits_equal {
                    "same"
                } else {
                    "DIFFER"
                },
                ratio_text(ratios[0]),
                ratio_text(ratios[1]),
            );
            // tutti's (analyse + factor) over faer's sp_lu, and its factor over faer's numeric
            // phase, against each faer run.
            let over_faer: serde_json::Map<String, Value> = faer
                .iter()
                .zip(&ratios)
                .map(|(f, (both, factor))| {
                    (
                        f.label.to_string(),
                        json!({ "analyse_factor": both, "factor": factor }),
                    )
                })
                .collect();
            if d.devices == 1 {
                // The same device on every core.
                let factor = run.threaded_factor.0;
                println!(
                    "  {:<22} {:>9} {:>9} {:>9} {:>9} {:>8.2} {:>9} {:>6} {:>6} {:>15} {:>15}",
                    format!("tutti {} 1 dev {cores} thr", run.label),
                    ms(run.analyse.0),
                    ms(factor),
                    ms(run.analyse.0 + factor),
                    ms(run.threaded_solve.0),
                    statistics.factor_flops / factor / 1e9,
                    "-",
                    "-",
                    if run.threaded_bits_equal {
                        "same"
                    } else {
                        "DIFFER"
                    },
                    format!("{:.2}x seq", d.factor.0 / factor),
                    "",
                );
            }
            device_rows.push(json!({
                "devices": d.devices,
                "factor_seconds": d.factor.0,
                "analyse_factor_seconds": analyse_factor,
                "solve_seconds": d.solve.0,
                "factor_gflops": gflops,
                "relative_residual": residual,
                "backward_error": d.backward_error,
                "refinements": d.refinements,
                "bits_equal_one_device": d.bits_equal,
                "rank_factor_bytes": d.rank_factor_bytes,
                "rank_fronts": d.rank_fronts,
                "over_faer": over_faer,
            }));
        }
        let one = run.devices.first().ok_or("no device count")?;
        let difference = relative_difference(&one.x, &faer[0].x);
        tutti_rows.push(json!({
            "ordering": run.label,
            "analyse_seconds": run.analyse.0,
            "factor_nnz": statistics.factor_nnz,
            "factor_flops": statistics.factor_flops,
            "solve_flops": statistics.solve_flops,
            "fronts": statistics.fronts,
            "largest_front": statistics.largest_front,
            "largest_contribution": statistics.largest_contribution,
            "perturbed_pivots": run.perturbed,
            "relative_difference_from_faer": difference,
            "one_device_all_cores": {
                "threads": cores,
                "factor_seconds": run.threaded_factor.0,
                "speedup_over_one_thread": one.factor.0 / run.threaded_factor.0,
                "solve_seconds": run.threaded_solve.0,
                "solve_speedup_over_one_thread": one.solve.0 / run.threaded_solve.0,
                "bits_equal_one_thread": run.threaded_bits_equal,
            },
            "devices": device_rows,
        }));
    }
    let mut faer_rows = Vec::new();
    for (f, residual) in faer.iter().zip(&faer_residuals) {
        let label = if f.par == Par::Seq {
            "faer COLAMD seq".to_string()
        } else {
            format!("faer COLAMD {cores} thr")
        };
        println!(
            "  {:<22} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9.1e} {:>6} {:>6} {:>15} {:>15}",
            label,
            ms(f.symbolic.0),
            ms(f.numeric.0),
            ms(f.analyse_factor.0),
            ms(f.solve.0),
            "-",
            residual,
            "-",
            "-",
            "",
            "",
        );
        faer_rows.push(json!({
            "parallelism": f.label,
            "threads": if f.par == Par::Seq { 1 } else { cores },
            "analyse_factor_seconds": f.analyse_factor.0,
            "symbolic_seconds": f.symbolic.0,
            "numeric_seconds": f.numeric.0,
            "solve_seconds": f.solve.0,
            "relative_residual": residual,
        }));
    }
    let differences: Vec<String> = tutti
        .iter()
        .map(|run| {
            let x = run.devices.first().map_or(&[][..], |d| &d.x[..]);
            format!("{} {:.1e}", run.label, relative_difference(x, &faer[0].x))
        })
        .collect();
    println!(
        "  max |x_tutti - x_faer| / max |x_faer|: {}; faer seq vs all cores {:.1e}",
        differences.join(", "),
        relative_difference(&faer[1].x, &faer[0].x)
    );
    Ok(json!({
        "case": case.name,
        "model": case.model,
        "dims": case.dims,
        "species": case.species,
        "unknowns": n,
        "matrix_nnz": a.nnz(),
        "tutti": tutti_rows,
        "faer": faer_rows,
    }))
}

const USAGE: &str = "usage: sparse_compare [--quick] [--no-write]
  --quick     only the smaller case of each model (N = 128, k = 24)
  --no-write  print only; leave benches/results/sparse_compare.json alone";

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(bad) = args
        .iter()
        .find(|a| !matches!(a.as_str(), "--quick" | "--no-write"))
    {
        if bad != "--help" && bad != "-h" {
            eprintln!("unknown argument {bad}");
        }
        println!("{USAGE}");
        return Ok(());
    }
    let quick = args.iter().any(|a| a == "--quick");
    let write = !args.iter().any(|a| a == "--no-write");
    let (sides_2d, sides_3d): (&[usize], &[usize]) = if quick {
        (&[128], &[24])
    } else {
        (&[128, 256], &[24, 32])
    };
    let mut cases = Vec::new();
    for &side in sides_2d {
        cases.push(Case {
            name: format!("2-D reaction-diffusion {side} x {side}, 2 species"),
            model: "reaction_diffusion",
            dims: vec![side, side],
            species: 2,
            matrix: reaction_diffusion(&[side, side], 2, 1.0)?,
        });
    }
    for &side in sides_3d {
        cases.push(Case {
            name: format!("3-D Laplacian {side} x {side} x {side}"),
            model: "laplacian",
            dims: vec![side, side, side],
            species: 1,
            matrix: laplacian(&[side, side, side])?,
        });
    }
    let groups = DEVICES[1..]
        .iter()
        .map(|&devices| Group::from_resources(&Resources::cpu(devices), GpuUse::HostOnly))
        .collect::<Result<Vec<_>, _>>()?;
    let cores = tutti_backend::system::host_cores();
    println!(
        "sparse_compare: tutti multifrontal LU (1 device sequential; {:?} simulated devices) vs \
         faer sparse LU (COLAMD; {cores} threads and sequential), {cores} cores, best of \
         {ROUNDS} interleaved rounds{}",
        &DEVICES[1..],
        if quick { ", --quick" } else { "" }
    );
    println!(
        "columns: analyse (faer: symbolic), factor (faer: numeric), analyse+factor (faer: \
         sp_lu), solve (tutti: with refinement), GFLOP/s of tutti's factor flops, residual \
         ||Ax-b||/(||A|| ||x||), refinement steps, bits of 1 device, tutti/faer (analyse+factor \
         / factor over numeric)"
    );
    let load_before = load_average();
    println!("load average before: {load_before:?}");
    let mut rows = Vec::new();
    for case in &cases {
        rows.push(run_case(case, &groups)?);
    }
    let load_after = load_average();
    println!("\nload average after: {load_after:?}");
    if write {
        let results = json!({
            "quick": quick,
            "rounds": ROUNDS,
            "leaf_size": LEAF_SIZE,
            "residual_bound": RESIDUAL_BOUND,
            "cases": rows,
            "load_average_before": load_before,
            "load_average_after": load_after,
        });
        let path = write_results("sparse_compare", results)?;
        println!("results: {}", path.display());
    }
    Ok(())
}
