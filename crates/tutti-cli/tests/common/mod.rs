//! Inputs the CLI's integration tests write (`.npy` arrays, random tensor trains, scratch
//! directories) and the time-limited way they run `tutti`.
// Each test binary uses its own subset.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longest any one run may take (debug build, two shared cores, other tests running).
pub const LIMIT: Duration = Duration::from_secs(180);

/// Runs `command` (a `tutti` command line) with its output captured, failing the test if
/// it has not ended within [`LIMIT`]: a hang fails, never blocks CI.
pub fn run_limited(command: &mut Command) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tutti starts");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("{command:?} did not finish within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// `tutti args...` at log level warn, time-limited ([`run_limited`]).
pub fn tutti(args: &[&str]) -> Output {
    run_limited(
        Command::new(env!("CARGO_BIN_EXE_tutti"))
            .args(args)
            .env("TUTTI_LOG", "warn"),
    )
}

/// A float64 C-order `.npy` file (format 1.0).
pub fn write_npy(path: &Path, shape: &[usize], values: &[f64]) {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut file = std::fs::File::create(path).expect("create npy");
    file.write_all(b"\x93NUMPY\x01\x00").expect("magic");
    file.write_all(&(header.len() as u16).to_le_bytes())
        .expect("header length");
    file.write_all(header.as_bytes()).expect("header");
    for value in values {
        file.write_all(&value.to_le_bytes()).expect("data");
    }
}

/// Deterministic values in [-1, 1) from a linear congruential generator.
pub fn lcg(seed: u64, count: usize) -> Vec<f64> {
    let mut state = seed
        .wrapping_mul(2862933555777941757)
        .wrapping_add(3037000493);
    (0..count)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            2.0 * ((state >> 11) as f64 / (1u64 << 53) as f64) - 1.0
        })
        .collect()
}

pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tutti-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

pub fn text(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A train directory of `sites` random cores: MPS cores (Dl, 2, Dr), MPO cores (Dl, 2, 2, Dr).
pub fn write_train(dir: &Path, sites: usize, bond: usize, operator: bool, seed: u64) {
    std::fs::create_dir_all(dir).expect("train dir");
    for site in 0..sites {
        let left = if site == 0 { 1 } else { bond };
        let right = if site + 1 == sites { 1 } else { bond };
        let shape: Vec<usize> = if operator {
            vec![left, 2, 2, right]
        } else {
            vec![left, 2, right]
        };
        let values = lcg(seed * 100 + site as u64, shape.iter().product());
        write_npy(&dir.join(format!("{site:03}.npy")), &shape, &values);
    }
}
