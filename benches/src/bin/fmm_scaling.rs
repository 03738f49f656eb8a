//! The FMM against its baseline, the direct sum, in one run: for N = 1e4, 1e5, 1e6 bodies
//! (a uniform cube and a Plummer sphere) the FMM time, the direct-sum time (exact for
//! N <= 1e4, else timed on a sample of targets and extrapolated to all N), their ratio, the
//! achieved relative L2 error (against the direct sum on the sampled targets) and the time
//! per body; then the FMM at N = 1e5 on 1, 2 and 4 simulated devices (and whether the bits
//! agree), and the default order against p = 10 (the ~1e-6 accuracy of the peer comparison).
//!
//! ```sh
//! cargo run --release -p tutti-benches --bin fmm_scaling               # N up to 1e6
//! cargo run --release -p tutti-benches --bin fmm_scaling -- --max-n 100000
//! cargo run --release -p tutti-benches --bin fmm_scaling -- --write-points DIR
//! ```
//!
//! `--write-points DIR` also writes each case's bodies as `DIR/<case>/positions.npy` and
//! `masses.npy`, the input of `benches/peers/fmm3d_compare.py`. Results go to
//! `benches/results/fmm_scaling.json`.

use std::error::Error;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;
use tutti_backend::Resources;
use tutti_benches::{plummer_bodies, uniform_bodies, write_results, Bodies};
use tutti_fmm::{direct_sum, fmm, relative_l2, FmmOptions, FmmOutput};

/// Targets on which the direct sum is timed and the error measured, for N above
/// [`EXACT_LIMIT`].
const SAMPLES: usize = 1000;

/// Largest N whose direct sum is computed in full.
const EXACT_LIMIT: usize = 10_000;

/// Potentials and accelerations on the sampled targets, and the seconds they took.
type Timed = (Vec<f64>, Vec<[f64; 3]>, f64);

/// Writes a float64 C-order `.npy` array.
fn write_npy(path: &Path, shape: &[usize], values: &[f64]) -> std::io::Result<()> {
    let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
    // Magic (6) + version (2) + header length (2) + header + newline, padded to 64 bytes.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    file.write_all(b"\x93NUMPY\x01\x00")?;
    file.write_all(
        &u16::try_from(header.len())
            .unwrap_or(u16::MAX)
            .to_le_bytes(),
    )?;
    file.write_all(header.as_bytes())?;
    for value in values {
        file.write_all(&value.to_le_bytes())?;
    }
    file.flush()
}

fn write_points(dir: &Path, case: &str, (positions, masses): &Bodies) -> std::io::Result<()> {
    let dir = dir.join(case);
    std::fs::create_dir_all(&dir)?;
    let flat: Vec<f64> = positions.iter().flatten().copied().collect();
    write_npy(&dir.join("positions.npy"), &[positions.len(), 3], &flat)?;
    write_npy(&dir.join("masses.npy"), &[masses.len()], masses)
}

/// One FMM evaluation and its wall time (seconds), with a warm-up run for small N.
fn timed_fmm(
    devices: usize,
    (positions, masses): &Bodies,
    options: &FmmOptions,
) -> Result<(FmmOutput, f64), Box<dyn Error>> {
    let options = options.clone().with_resources(Resources::cpu(devices));
    if positions.len() <= 100_000 {
        fmm(positions, masses, &options)?;
    }
    let started = Instant::now();
    let out = fmm(positions, masses, &options)?;
    Ok((out, started.elapsed().as_secs_f64()))
}

/// The sampled targets: every body up to [`EXACT_LIMIT`], else [`SAMPLES`] evenly spaced.
fn targets(n: usize) -> Vec<usize> {
    if n <= EXACT_LIMIT {
        (0..n).collect()
    } else {
        (0..SAMPLES).map(|k| k * n / SAMPLES).collect()
    }
}

/// The direct sum on the targets: (potential, accel, seconds).
fn timed_direct((positions, masses): &Bodies, targets: &[usize]) -> Result<Timed, Box<dyn Error>> {
    let started = Instant::now();
    let (potential, accel) = direct_sum(positions, masses, 0.0, targets)?;
    Ok((potential, accel, started.elapsed().as_secs_f64()))
}

/// Relative L2 errors (accel, potential) of `out` on the targets.
fn errors(out: &FmmOutput, targets: &[usize], potential: &[f64], accel: &[[f64; 3]]) -> (f64, f64) {
    let approx_accel: Vec<[f64; 3]> = targets.iter().map(|&i| out.accel[i]).collect();
    let approx_potential: Vec<[f64; 1]> = targets.iter().map(|&i| [out.potential[i]]).collect();
    let exact_potential: Vec<[f64; 1]> = potential.iter().map(|&p| [p]).collect();
    (
        relative_l2(&approx_accel, accel),
        relative_l2(&approx_potential, &exact_potential),
    )
}

struct Args {
    max_n: usize,
    write_points: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        max_n: 1_000_000,
        write_points: None,
    };
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        match word.as_str() {
            "--max-n" => {
                let value = words.next().ok_or("--max-n needs a number")?;
                args.max_n = value
                    .parse()
                    .map_err(|_| format!("--max-n: expected a number of bodies, got {value:?}"))?;
            }
            "--write-points" => {
                args.write_points = Some(
                    words
                        .next()
                        .ok_or("--write-points needs a directory")?
                        .into(),
                );
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?}; expected --max-n N or --write-points DIR"
                ))
            }
        }
    }
    Ok(args)
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args()?;
    let cores = tutti_backend::system::host_cores();
    let options = FmmOptions::default();
    println!(
        "fmm_scaling: p = {}, theta = {}, leaf size {}, one device with all {cores} core(s) unless said",
        options.order, options.theta, options.leaf_size
    );
    println!(
        "  {:<14} {:>9} {:>10} {:>12} {:>8} {:>10} {:>10} {:>12}",
        "case", "N", "fmm (s)", "direct (s)", "ratio", "accel err", "pot err", "us per body"
    );
    let mut rows = Vec::new();
    let sizes: Vec<usize> = [10_000, 100_000, 1_000_000]
        .into_iter()
        .filter(|&n| n <= args.max_n)
        .collect();
    for &n in &sizes {
        for (kind, bodies) in [
            ("uniform", uniform_bodies(n, 1)),
            ("plummer", plummer_bodies(n, 2)),
        ] {
            let case = format!("{kind}_{}", short(n));
            if let Some(dir) = &args.write_points {
                write_points(dir, &case, &bodies)?;
            }
            let (out, fmm_seconds) = timed_fmm(1, &bodies, &options)?;
            let targets = targets(n);
            let (potential, accel, sampled_seconds) = timed_direct(&bodies, &targets)?;
            let direct_seconds = sampled_seconds * n as f64 / targets.len() as f64;
            let (accel_error, potential_error) = errors(&out, &targets, &potential, &accel);
            let extrapolated = targets.len() < n;
            println!(
                "  {case:<14} {n:>9} {fmm_seconds:>10.3} {direct_seconds:>11.3}{} {:>8.1} {accel_error:>10.2e} {potential_error:>10.2e} {:>12.2}",
                if extrapolated { "*" } else { " " },
                direct_seconds / fmm_seconds,
                1e6 * fmm_seconds / n as f64,
            );
            rows.push(json!({
                "case": case, "distribution": kind, "n": n,
                "fmm_seconds": fmm_seconds, "setup_seconds": out.info.setup_seconds,
                "direct_seconds": direct_seconds, "direct_extrapolated": extrapolated,
                "direct_sampled_targets": targets.len(), "direct_sampled_seconds": sampled_seconds,
                "ratio": direct_seconds / fmm_seconds,
                "accel_error": accel_error, "potential_error": potential_error,
                "us_per_body": 1e6 * fmm_seconds / n as f64,
                "nodes": out.info.nodes, "m2l_pairs": out.info.m2l_pairs, "p2p_pairs": out.info.p2p_pairs,
            }));
        }
    }
    println!("  (* direct sum timed on {SAMPLES} targets and extrapolated to N; errors on those targets)");

    let mut device_rows = Vec::new();
    let mut accuracy_rows = Vec::new();
    if args.max_n >= 100_000 {
        let n = 100_000;
        let bodies = plummer_bodies(n, 2);
        println!("devices: plummer_100k, simulated devices sharing the {cores} core(s)");
        let mut single: Option<(FmmOutput, f64)> = None;
        for devices in [1usize, 2, 4] {
            let (out, seconds) = timed_fmm(devices, &bodies, &options)?;
            let (identical, baseline) = match &single {
                Some((first, baseline)) => (
                    first.potential == out.potential && first.accel == out.accel,
                    *baseline,
                ),
                None => (true, seconds),
            };
            println!(
                "  {devices} device(s): {seconds:.3} s ({:.2}x vs 1 device); leaves per device {:?}; exchanged multipoles {:?}; the same bits as 1 device: {}",
                baseline / seconds,
                out.info.leaves_per_rank,
                out.info.exchanged_per_rank,
                if identical { "yes" } else { "NO" }
            );
            device_rows.push(json!({
                "case": "plummer_100k", "devices": devices, "seconds": seconds,
                "speedup": baseline / seconds, "identical_to_one_device": identical,
                "leaves_per_rank": out.info.leaves_per_rank,
                "exchanged_per_rank": out.info.exchanged_per_rank,
            }));
            if single.is_none() {
                single = Some((out, seconds));
            }
        }

        println!("accuracy: N = 1e5, order 7 (default) against order 10 (about 1e-6)");
        for (kind, bodies) in [("uniform", uniform_bodies(n, 1)), ("plummer", bodies)] {
            let targets = targets(n);
            let (potential, accel, _) = timed_direct(&bodies, &targets)?;
            for order in [7usize, 10] {
                let options = FmmOptions::default().with_order(order);
                let (out, seconds) = timed_fmm(1, &bodies, &options)?;
                let (accel_error, potential_error) = errors(&out, &targets, &potential, &accel);
                println!(
                    "  {kind}_100k p = {order:>2}: {seconds:.3} s, accel error {accel_error:.2e}, potential error {potential_error:.2e}"
                );
                accuracy_rows.push(json!({
                    "case": format!("{kind}_100k"), "order": order, "theta": options.theta,
                    "seconds": seconds, "accel_error": accel_error, "potential_error": potential_error,
                }));
            }
        }
    }

    let path = write_results(
        "fmm_scaling",
        json!({
            "options": {"order": options.order, "theta": options.theta, "leaf_size": options.leaf_size},
            "sizes": rows,
            "devices": device_rows,
            "accuracy": accuracy_rows,
            "max_n": args.max_n,
        }),
    )?;
    println!("results: {}", path.display());
    Ok(())
}

/// 10000 -> "10k", 1000000 -> "1m".
fn short(n: usize) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}m", n / 1_000_000)
    } else if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}
