//! SRC against the exact baseline (`compress_exact`: contract, then truncate by SVD) in one
//! run, on the cases of issue 3:
//!
//! - the Heisenberg XXZ MPO (D_H = 5) applied to a random MPS, n = 32, D_psi = 64 and 128,
//!   chi = D_psi;
//! - a depth-3 stack of random MPOs applied to a random MPS;
//! - a random MPO with D_H = 8 applied to a random MPS.
//!
//! For each: both relative errors (SRC's against the exact product, by contraction), both
//! times and their ratio, SRC on 1, 2 and 4 simulated devices, and the sweep's achieved
//! GFLOP/s (the flops of its contractions and QRs as the sweep runs them, see
//! [`sweep_flops`]) beside a faer GEMM of the shape of its largest contractions, timed in the
//! same process. The load average before and after goes into the results: on a shared host
//! only the ratios within one run mean much.
//!
//! `cargo run --release -p tutti-benches --bin sweep_compare [-- --skip-exact-128]
//! [--no-write]` (the exact baseline at D_psi = 128 contracts bonds of 640: several seconds
//! on 2 cores; `--no-write` leaves `benches/results/sweep_compare.json` alone).

use std::error::Error;
use std::time::Instant;

use faer::{Mat, Par};
use serde_json::{json, Value};
use tutti_backend::Resources;
use tutti_benches::{best_time, write_results};
use tutti_sweep::{
    compress_exact, distance, exact_product, heisenberg_xxz, norm, src, CoreShape, Layer,
    SrcOptions, TensorTrain, TrainKind,
};

/// Uniform draws in [-1, 1) from a fixed xorshift stream.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// A random train of `n` sites, bond `bond`, physical dimension 2 (an MPO when `operator`),
/// entries scaled so that the norm stays near 1 along the chain.
fn random_train(
    n: usize,
    bond: usize,
    operator: bool,
    seed: u64,
) -> Result<TensorTrain<f64>, Box<dyn Error>> {
    let mut draws = Draws(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let cores = (0..n)
        .map(|k| {
            let left = if k == 0 { 1 } else { bond };
            let right = if k + 1 == n { 1 } else { bond };
            let dims = if operator {
                vec![left, 2, 2, right]
            } else {
                vec![left, 2, right]
            };
            let len: usize = dims.iter().product();
            // Uniform [-1, 1) has variance 1/3: scale rows of (left * phys) to unit norm.
            let scale = (3.0 / (len / right) as f64).sqrt();
            let data = (0..len).map(|_| scale * draws.next()).collect();
            (dims, data)
        })
        .collect();
    let kind = if operator {
        TrainKind::Mpo
    } else {
        TrainKind::Mps
    };
    Ok(TensorTrain::from_arrays(kind, cores)?)
}

/// The floating-point operations of one SRC sweep of width `s` (f64, no oversampling) as
/// `tutti-sweep` runs it, contraction by contraction (layer shapes per site, top layer
/// first): left to right, the environment times the bottom core, then each layer above, then
/// the sketch vectors; right to left, S times the cores bottom first (X), the sketched matrix
/// Y = environment x X, the Householder QR of Y^T and its thin Q, and the next S = conj(Q^T)
/// x X; site 0 is X alone. A GEMM (m x k)(k x n) counts 2mnk.
fn sweep_flops(shapes: &[Vec<CoreShape>], s: usize) -> f64 {
    let sites = shapes[0].len();
    let depth = shapes.len();
    let s = s as f64;
    let mut total = 0.0;
    let at = |k: usize| -> Vec<CoreShape> { shapes.iter().map(|layer| layer[k]).collect() };
    // Physical leg l at a site: P_0 the stack's output, P_L its input.
    let leg = |c: &[CoreShape], l: usize| -> f64 {
        if l == depth {
            c[depth - 1].d_in as f64
        } else {
            c[l].d_out as f64
        }
    };
    let prod = |c: &[CoreShape], f: &dyn Fn(&CoreShape) -> usize| -> f64 {
        c.iter().map(|x| f(x) as f64).product()
    };
    // Left to right.
    for k in 0..sites - 1 {
        let c = at(k);
        let bottom = depth - 1;
        let lefts = prod(&c, &|x| x.left);
        let (p_in, out_leg) = (leg(&c, depth), leg(&c, bottom));
        total += 2.0 * s * lefts * out_leg * p_in * c[bottom].right as f64;
        let mut size = s * lefts / c[bottom].left as f64 * out_leg * p_in * c[bottom].right as f64;
        for l in (0..bottom).rev() {
            total += 2.0 * size * leg(&c, l) * c[l].right as f64;
            size = size / (c[l].left as f64 * leg(&c, l + 1)) * leg(&c, l) * c[l].right as f64;
        }
        total += 2.0 * size;
    }
    // Right to left.
    let mut chi = 1.0f64;
    let mut caps = Vec::with_capacity(sites);
    let mut phys_product = 1.0f64;
    for k in 0..sites {
        let c = at(k);
        caps.push(phys_product.min(prod(&c, &|x| x.left)));
        phys_product *= leg(&c, 0) * leg(&c, depth);
    }
    for k in (0..sites).rev() {
        let c = at(k);
        let bottom = depth - 1;
        let rights = prod(&c, &|x| x.right);
        let lefts = prod(&c, &|x| x.left);
        let p = leg(&c, 0) * leg(&c, depth);
        total += 2.0 * chi * rights * c[bottom].left as f64 * leg(&c, bottom) * leg(&c, depth);
        let mut size = chi * rights / c[bottom].right as f64
            * leg(&c, bottom)
            * c[bottom].left as f64
            * leg(&c, depth);
        for l in (0..bottom).rev() {
            total += 2.0 * size * leg(&c, l) * c[l].left as f64;
            size = size / (c[l].right as f64 * leg(&c, l + 1)) * leg(&c, l) * c[l].left as f64;
        }
        if k == 0 {
            break;
        }
        let m = p * chi;
        let r = s.min(m).min(caps[k]);
        total += 2.0 * s * lefts * m; // Y
        total += 2.0 * (2.0 * m * r * r - 2.0 * r * r * r / 3.0); // QR and its thin Q
        total += 2.0 * r * m * lefts; // next S
        chi = r;
    }
    total
}

/// GFLOP/s of a faer GEMM (m x k) * (k x n) on all cores, the best of several runs.
fn gemm_rate(m: usize, k: usize, n: usize) -> f64 {
    let a = Mat::<f64>::from_fn(m, k, |i, j| ((i * 7 + j * 3) % 11) as f64 - 5.0);
    let b = Mat::<f64>::from_fn(k, n, |i, j| ((i * 5 + j) % 13) as f64 - 6.0);
    let mut c = Mat::<f64>::zeros(m, n);
    let reps = (2e9 / (2.0 * (m * k * n) as f64)).clamp(1.0, 200.0) as usize;
    let (time, _) = best_time(5, || {
        for _ in 0..reps {
            faer::linalg::matmul::matmul(
                c.as_mut(),
                faer::Accum::Replace,
                a.as_ref(),
                b.as_ref(),
                1.0,
                Par::rayon(0),
            );
        }
        c[(0, 0)]
    });
    2.0 * (m * k * n * reps) as f64 / time.as_secs_f64() / 1e9
}

struct Case {
    name: String,
    layers: Vec<TensorTrain<f64>>,
    chi: usize,
    /// The GEMM shape of the sweep's largest contractions (the sketched matrix: sketch
    /// columns x fused left bond x one output leg's block of X), the rate reference.
    gemm: (usize, usize, usize),
}

fn run_case(case: &Case, skip_exact: bool) -> Result<Value, Box<dyn Error>> {
    let stack: Vec<&dyn Layer<f64>> = case.layers.iter().map(|t| t as &dyn Layer<f64>).collect();
    let bonds: Vec<usize> = case.layers.iter().map(TensorTrain::max_bond).collect();
    println!("\n{} (bonds {bonds:?}, chi {})", case.name, case.chi);
    let options = SrcOptions::new(case.chi).with_seed(1);
    let (src_time, outcome) = best_time(2, || src(&stack, &options));
    let (result, _) = outcome?;
    let src_seconds = src_time.as_secs_f64();
    let shapes: Vec<Vec<CoreShape>> = stack.iter().map(|l| l.shapes()).collect();
    let flops = sweep_flops(&shapes, case.chi);
    let sweep_rate = flops / src_seconds / 1e9;
    let (m, k, n) = case.gemm;
    let gemm = gemm_rate(m, k, n);
    println!(
        "  SRC (plain path, all cores): {src_seconds:.3} s, {:.2} GFLOP counted, {sweep_rate:.2} \
         GFLOP/s; faer GEMM {m}x{k}x{n}: {gemm:.2} GFLOP/s (sweep at {:.0}% of GEMM)",
        flops / 1e9,
        100.0 * sweep_rate / gemm
    );
    let mut devices_rows = Vec::new();
    for devices in [1usize, 2, 4] {
        let options = SrcOptions::new(case.chi)
            .with_seed(1)
            .with_resources(Resources::cpu(devices));
        let (time, outcome) = best_time(1, || src(&stack, &options));
        let (split, _) = outcome?;
        let difference = distance(&split, &result)? / norm(&result);
        println!(
            "  SRC on {devices} simulated device(s): {:.3} s, relative difference from the plain \
             path {difference:.1e}",
            time.as_secs_f64()
        );
        devices_rows.push(json!({
            "devices": devices, "seconds": time.as_secs_f64(), "difference": difference,
        }));
    }
    let mut row = json!({
        "case": case.name, "layer_bonds": bonds, "chi": case.chi,
        "src_seconds": src_seconds, "src_gflop": flops / 1e9,
        "src_gflops": sweep_rate, "gemm_shape": [m, k, n], "gemm_gflops": gemm,
        "devices": devices_rows,
    });
    if skip_exact {
        println!("  exact baseline skipped (--skip-exact-128)");
        return Ok(row);
    }
    let started = Instant::now();
    let (_, exact_info) = compress_exact(&stack, case.chi, 0.0)?;
    let exact_seconds = started.elapsed().as_secs_f64();
    let product = exact_product(&stack)?;
    let src_error = distance(&result, &product)? / norm(&product);
    let ratio = exact_seconds / src_seconds;
    println!(
        "  error: SRC {src_error:.4e}, optimal (compress_exact) {:.4e}, ratio {:.3}",
        exact_info.relative_error,
        src_error / exact_info.relative_error
    );
    println!(
        "  time:  SRC {src_seconds:.3} s, compress_exact {exact_seconds:.3} s: SRC {ratio:.1}x \
         faster"
    );
    if let Value::Object(map) = &mut row {
        map.insert("src_error".into(), json!(src_error));
        map.insert("optimal_error".into(), json!(exact_info.relative_error));
        map.insert("exact_seconds".into(), json!(exact_seconds));
        map.insert("speedup".into(), json!(ratio));
    }
    Ok(row)
}

/// The 1-, 5- and 15-minute load averages (Linux), if readable.
fn load_average() -> Option<Vec<f64>> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace()
        .take(3)
        .map(|x| x.parse().ok())
        .collect()
}

const USAGE: &str = "usage: sweep_compare [--skip-exact-128] [--no-write]
  --skip-exact-128  skip the exact baseline at D_psi = 128 (slow machines)
  --no-write        print only; leave benches/results/sweep_compare.json alone";

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(bad) = args
        .iter()
        .find(|a| !matches!(a.as_str(), "--skip-exact-128" | "--no-write"))
    {
        if bad != "--help" && bad != "-h" {
            eprintln!("unknown argument {bad}");
        }
        println!("{USAGE}");
        return Ok(());
    }
    let skip_exact_128 = args.iter().any(|a| a == "--skip-exact-128");
    let write = !args.iter().any(|a| a == "--no-write");
    let n = 32;
    let h = heisenberg_xxz(n, 1.0, 0.5, 0.0)?;
    let mut cases = Vec::new();
    for d_psi in [64, 128] {
        cases.push(Case {
            name: format!("Heisenberg XXZ (n = {n}) x random MPS, D_psi = {d_psi}"),
            layers: vec![h.clone(), random_train(n, d_psi, false, d_psi as u64)?],
            chi: d_psi,
            gemm: (d_psi, 5 * d_psi, d_psi),
        });
    }
    cases.push(Case {
        name: "depth-3 stack: three random MPOs (D = 3) x random MPS (D = 16), n = 16".into(),
        layers: vec![
            random_train(16, 3, true, 11)?,
            random_train(16, 3, true, 12)?,
            random_train(16, 3, true, 13)?,
            random_train(16, 16, false, 14)?,
        ],
        chi: 64,
        gemm: (64, 27 * 16, 64),
    });
    cases.push(Case {
        name: format!("random MPO (D_H = 8) x random MPS (D_psi = 64), n = {n}"),
        layers: vec![
            random_train(n, 8, true, 21)?,
            random_train(n, 64, false, 22)?,
        ],
        chi: 64,
        gemm: (64, 8 * 64, 64),
    });
    println!(
        "sweep_compare: SRC vs contract-then-truncate, {} cores",
        tutti_backend::system::host_cores()
    );
    let load_before = load_average();
    println!("load average before: {load_before:?}");
    let mut rows = Vec::new();
    for case in &cases {
        let skip = skip_exact_128 && case.chi == 128;
        rows.push(run_case(case, skip)?);
    }
    let load_after = load_average();
    println!("\nload average after: {load_after:?}");
    if write {
        let results = json!({
            "cases": rows, "load_average_before": load_before, "load_average_after": load_after,
        });
        let path = write_results("sweep_compare", results)?;
        println!("results: {}", path.display());
    }
    Ok(())
}
