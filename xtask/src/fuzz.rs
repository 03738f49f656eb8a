//! `cargo xtask fuzz`: builds the libFuzzer targets of `fuzz/` (the `tutti-fuzz` member's
//! binaries, feature `libfuzzer`) and runs each for a bounded time or number of executions,
//! coverage-guided, then prints one line per target. CI does not run it: `fuzz/tests/seeds.rs`
//! replays the committed seeds through the same target bodies in the ordinary test build.
//!
//! The targets need the compiler flags cargo-fuzz passes (coverage instrumentation,
//! AddressSanitizer). They are nightly flags; on a stable toolchain `RUSTC_BOOTSTRAP=1`
//! unlocks them, for this one build alone. It uses the `fuzz` profile (root `Cargo.toml`) and
//! an explicit `--target <host>`: the flags then reach neither build scripts nor proc macros,
//! and the instrumented artifacts stay in `target/<host>/fuzz/`, apart from the normal builds'.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::tools::{cargo, describe, output, run, Failure, Workspace};

/// How long, or how many executions, each target runs.
pub struct FuzzBudget {
    /// Seconds per target (libFuzzer's `-max_total_time`).
    pub seconds: u64,
    /// Executions per target (libFuzzer's `-runs`), when set; the time bound still holds.
    pub runs: Option<u64>,
    /// Only these targets (all when empty).
    pub only: Vec<String>,
}

impl FuzzBudget {
    /// Parses `--seconds N`, `--runs N` and target names.
    pub fn parse(args: &[String]) -> Result<Self, Failure> {
        let mut budget = Self {
            seconds: 60,
            runs: None,
            only: Vec::new(),
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut number = |flag: &str| -> Result<u64, Failure> {
                args.next()
                    .and_then(|value| value.parse().ok())
                    .filter(|&value| value > 0)
                    .ok_or_else(|| Failure::new(format!("{flag} takes a positive integer")))
            };
            match arg.as_str() {
                "--seconds" => budget.seconds = number("--seconds")?,
                "--runs" => budget.runs = Some(number("--runs")?),
                name if !name.starts_with('-') => budget.only.push(name.to_string()),
                other => return Err(Failure::new(format!("fuzz: unknown flag `{other}`"))),
            }
        }
        Ok(budget)
    }
}

/// What one target's run did.
struct Outcome {
    target: String,
    executions: Option<u64>,
    seconds: f64,
    passed: bool,
}

const RUSTFLAGS: &[&str] = &[
    "-Cpasses=sancov-module",
    "-Cllvm-args=-sanitizer-coverage-level=4",
    "-Cllvm-args=-sanitizer-coverage-inline-8bit-counters",
    "-Cllvm-args=-sanitizer-coverage-pc-table",
    "-Cllvm-args=-sanitizer-coverage-trace-compares",
    "--cfg=fuzzing",
    "-Zsanitizer=address",
    "-Cforce-frame-pointers=yes",
];

/// Builds every target, then runs the chosen ones; any crash, leak, timeout or sanitizer
/// report fails the task, with the reproducer left in `fuzz/artifacts/<target>/`.
pub fn run_all(workspace: &Workspace, budget: &FuzzBudget) -> Result<(), Failure> {
    let fuzz = workspace.root.join("fuzz");
    let host = host_triple()?;
    println!("==> building the fuzz targets (profile fuzz, AddressSanitizer, coverage)");
    run(cargo()
        .current_dir(&workspace.root)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("RUSTFLAGS", RUSTFLAGS.join(" "))
        .args([
            "build",
            "-p",
            "tutti-fuzz",
            "--features",
            "libfuzzer",
            "--profile",
            "fuzz",
            "--bins",
            "--target",
            &host,
        ]))?;
    let bin_dir = workspace.target_dir.join(&host).join("fuzz");
    let targets = targets(&fuzz)?;
    for name in &budget.only {
        if !targets.contains(name) {
            return Err(Failure::new(format!(
                "no fuzz target `{name}`; the targets are {targets:?}"
            )));
        }
    }
    let mut outcomes = Vec::new();
    for target in targets
        .iter()
        .filter(|t| budget.only.is_empty() || budget.only.contains(t))
    {
        outcomes.push(run_target(&fuzz, &bin_dir.join(target), target, budget)?);
    }
    println!("\nfuzz summary:");
    println!(
        "  {:<20} {:>12} {:>9} {:>10}  verdict",
        "target", "executions", "seconds", "exec/s"
    );
    for outcome in &outcomes {
        let executions = outcome
            .executions
            .map_or("?".to_string(), |n| n.to_string());
        let rate = outcome.executions.map_or("?".to_string(), |n| {
            format!("{:.0}", n as f64 / outcome.seconds.max(1e-9))
        });
        println!(
            "  {:<20} {executions:>12} {:>9.1} {rate:>10}  {}",
            outcome.target,
            outcome.seconds,
            if outcome.passed { "no crash" } else { "FAILED" }
        );
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.passed)
        .map(|o| o.target.as_str())
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "fuzz targets failed: {failed:?} (reproducers in fuzz/artifacts/)"
        )))
    }
}

fn run_target(
    fuzz: &Path,
    binary: &Path,
    target: &str,
    budget: &FuzzBudget,
) -> Result<Outcome, Failure> {
    let corpus = fuzz.join("corpus").join(target);
    let artifacts = fuzz.join("artifacts").join(target);
    let seeds = fuzz.join("seeds").join(target);
    for dir in [&corpus, &artifacts] {
        std::fs::create_dir_all(dir)
            .map_err(|err| Failure::new(format!("creating {}: {err}", dir.display())))?;
    }
    let mut command = Command::new(binary);
    command
        .current_dir(fuzz)
        .env(
            "ASAN_OPTIONS",
            "allocator_may_return_null=1:detect_stack_use_after_return=1:abort_on_error=0",
        )
        .arg(format!("-max_total_time={}", budget.seconds))
        .arg("-timeout=10")
        .arg("-rss_limit_mb=2048")
        .arg("-print_final_stats=1")
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg(&corpus);
    if let Some(runs) = budget.runs {
        command.arg(format!("-runs={runs}"));
    }
    if seeds.is_dir() {
        command.arg(&seeds);
    }
    println!("\n==> fuzz {target}: $ {}", describe(&command));
    let started = Instant::now();
    let result = command
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .output()
        .map_err(|err| Failure::new(format!("cannot start {}: {err}", binary.display())))?;
    let seconds = started.elapsed().as_secs_f64();
    let log = String::from_utf8_lossy(&result.stderr);
    let executions = log
        .lines()
        .find_map(|line| line.strip_prefix("stat::number_of_executed_units:"))
        .and_then(|n| n.trim().parse().ok());
    let passed = result.status.success();
    if !passed {
        // The whole report: the crash, its stack and the reproducer's path.
        eprintln!("{log}");
    } else {
        for line in log
            .lines()
            .filter(|l| l.starts_with("Done ") || l.starts_with("stat::"))
        {
            println!("    {line}");
        }
    }
    Ok(Outcome {
        target: target.to_string(),
        executions,
        seconds,
        passed,
    })
}

/// The `[[bin]]` names in `fuzz/Cargo.toml`, in file order.
fn targets(fuzz: &Path) -> Result<Vec<String>, Failure> {
    let manifest = fuzz.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|err| Failure::new(format!("reading {}: {err}", manifest.display())))?;
    let mut in_bin = false;
    let mut names = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if let Some(value) = line.strip_prefix("name").filter(|_| in_bin) {
            let name = value
                .trim_start_matches([' ', '='])
                .trim()
                .trim_matches('"');
            names.push(name.to_string());
        }
    }
    if names.is_empty() {
        return Err(Failure::new(format!(
            "{} lists no [[bin]] targets",
            manifest.display()
        )));
    }
    Ok(names)
}

/// The host's target triple, from `rustc -vV` (the sanitizer needs an explicit `--target`,
/// so build scripts and proc macros are built without it).
fn host_triple() -> Result<String, Failure> {
    let rustc = std::env::var_os("RUSTC").map_or_else(|| PathBuf::from("rustc"), PathBuf::from);
    let text = output(Command::new(rustc).arg("-vV"))?;
    text.lines()
        .find_map(|line| line.strip_prefix("host:"))
        .map(|host| host.trim().to_string())
        .ok_or_else(|| Failure::new("`rustc -vV` names no host"))
}
