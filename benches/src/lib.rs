//! Shared pieces of tutti's benchmarks: timing, and JSON results with a `_meta` block.
#![deny(missing_docs)]

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A SplitMix64 stream of doubles in [0, 1), seeded by its one field: the same inputs on
/// every machine.
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next double in [0, 1) (53 random bits).
    pub fn next_unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Bodies of an FMM benchmark: positions and strengths.
pub type Bodies = (Vec<[f64; 3]>, Vec<f64>);

/// N bodies uniform in the unit cube, strengths in [0.5, 1.5).
pub fn uniform_bodies(n: usize, seed: u64) -> Bodies {
    let mut rng = SplitMix(seed);
    let positions = (0..n)
        .map(|_| [rng.next_unit(), rng.next_unit(), rng.next_unit()])
        .collect();
    let masses = (0..n).map(|_| 0.5 + rng.next_unit()).collect();
    (positions, masses)
}

/// A Plummer sphere of N bodies (scale radius 1, truncated at 20), equal masses summing to 1.
pub fn plummer_bodies(n: usize, seed: u64) -> Bodies {
    let mut rng = SplitMix(seed);
    let positions = (0..n)
        .map(|_| {
            let radius = loop {
                let u = rng.next_unit().max(1e-10);
                let r = 1.0 / (u.powf(-2.0 / 3.0) - 1.0).sqrt();
                if r < 20.0 {
                    break r;
                }
            };
            let cos_t = 2.0 * rng.next_unit() - 1.0;
            let sin_t = (1.0 - cos_t * cos_t).sqrt();
            let phi = std::f64::consts::TAU * rng.next_unit();
            [
                radius * sin_t * phi.cos(),
                radius * sin_t * phi.sin(),
                radius * cos_t,
            ]
        })
        .collect();
    (positions, vec![1.0 / n as f64; n])
}

/// A random MPS of `n` sites, bond `bond`, physical dimension 2, entries uniform in [-1, 1)
/// scaled so that every core's rows (left bond times physical index) have unit norm on
/// average: the sweep benchmarks' state, the same on every machine for a seed.
pub fn random_mps(
    n: usize,
    bond: usize,
    seed: u64,
) -> Result<tutti_sweep::TensorTrain<f64>, tutti_sweep::SweepError> {
    let mut draws = SplitMix(seed);
    let cores = (0..n)
        .map(|k| {
            let dims = vec![
                if k == 0 { 1 } else { bond },
                2,
                if k + 1 == n { 1 } else { bond },
            ];
            let len: usize = dims.iter().product();
            // Uniform [-1, 1) has variance 1/3: rows of (left * 2) entries get unit norm.
            let scale = (3.0 / (len / dims[2]) as f64).sqrt();
            let data = (0..len)
                .map(|_| scale * (2.0 * draws.next_unit() - 1.0))
                .collect();
            (dims, data)
        })
        .collect();
    tutti_sweep::TensorTrain::from_arrays(tutti_sweep::TrainKind::Mps, cores)
}

/// The best (smallest) wall time of `repeats` runs of `work`, after one warm-up run.
pub fn best_time<T>(repeats: usize, mut work: impl FnMut() -> T) -> (Duration, T) {
    let mut result = work();
    let mut best = Duration::MAX;
    for _ in 0..repeats.max(1) {
        let started = Instant::now();
        // black_box keeps a pure computation from being moved out of the timed region.
        result = std::hint::black_box(work());
        best = best.min(started.elapsed());
    }
    (best, result)
}

/// Facts that make a result comparable: machine, cores, versions, git commit, date.
pub fn meta(bench: &str) -> Value {
    let command_output = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    json!({
        "bench": bench,
        "tutti_version": env!("CARGO_PKG_VERSION"),
        "git_commit": command_output("git", &["rev-parse", "HEAD"]),
        "rustc": command_output("rustc", &["--version"]),
        "host": command_output("uname", &["-srm"]),
        "cores": tutti_backend::system::host_cores(),
        "host_memory_bytes": tutti_backend::system::host_memory().map(|m| m.total).ok(),
        "cuda_built": tutti_backend::cuda_built(),
        "unix_time": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    })
}

/// Writes `results` with its `_meta` block to `benches/results/<bench>.json` (or
/// `$TUTTI_BENCH_RESULTS/<bench>.json` when that variable names a folder, as the GPU pack's
/// `run.sh` sets it) and returns the path.
pub fn write_results(bench: &str, mut results: Value) -> std::io::Result<PathBuf> {
    if let Value::Object(map) = &mut results {
        map.insert("_meta".into(), meta(bench));
    }
    let dir = std::env::var_os("TUTTI_BENCH_RESULTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results"));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{bench}.json"));
    let text = serde_json::to_string_pretty(&results).map_err(std::io::Error::other)?;
    let mut file = tutti_plan::files::AtomicFile::create(&path)?;
    file.write_all((text + "\n").as_bytes())?;
    file.commit()?;
    Ok(path)
}
