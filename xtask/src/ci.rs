//! `cargo xtask ci`: everything CI checks, in order, stopping at the first failure.

use std::time::{Duration, Instant};

use crate::tools::{cargo, ensure_ffi_tools, run, Failure, Workspace};
use crate::{chaos, ffi, header, install, layers, mpi, nvrtc};

/// Kills of the CI's campaign-chaos run: 120 kills 5-100 ms apart still interrupt the
/// 1000-replicate campaign every time; `cargo xtask campaign-chaos` alone does 200.
const CI_CHAOS_KILLS: u32 = 120;

type Action = Box<dyn FnOnce() -> Result<(), Failure>>;

fn cargo_step(args: &'static [&'static str]) -> Action {
    Box::new(move || run(cargo().args(args)))
}

pub fn run_all() -> Result<(), Failure> {
    let steps: Vec<(&str, Action)> = vec![
        (
            "install missing tools (gfortran, pytest)",
            Box::new(ensure_ffi_tools),
        ),
        (
            "cargo fmt --all -- --check",
            cargo_step(&["fmt", "--all", "--", "--check"]),
        ),
        ("cargo xtask check-layers", Box::new(layers::run)),
        (
            "cargo clippy --workspace --all-targets -- -D warnings",
            cargo_step(&[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ]),
        ),
        // The benches hold no tests and the examples none either (clippy checks both above):
        // building the benches as test harnesses and the examples at opt-level 2 cost
        // minutes of the 45 for nothing. The doctests run in a step of their own.
        (
            "cargo test --workspace --exclude tutti-benches --lib --bins --tests",
            cargo_step(&[
                "test",
                "--workspace",
                "--exclude",
                "tutti-benches",
                "--lib",
                "--bins",
                "--tests",
            ]),
        ),
        (
            "cargo test --workspace --exclude tutti-benches --doc",
            cargo_step(&["test", "--workspace", "--exclude", "tutti-benches", "--doc"]),
        ),
        // Only the backend has code under the `cuda` feature (the capi and the CLI only drop
        // their `not(cuda)` fallbacks), so only it is linted with the feature on.
        (
            "cargo clippy (cuda feature) -p tutti-backend",
            cargo_step(&[
                "clippy",
                "-p",
                "tutti-backend",
                "--all-targets",
                "--features",
                "cuda",
                "--",
                "-D",
                "warnings",
            ]),
        ),
        (
            "cargo xtask nvrtc-check (every kernel through NVRTC 13, no GPU)",
            Box::new(|| nvrtc::run_check(&Workspace::load()?)),
        ),
        (
            "cargo xtask mpi-test (Open MPI: mpirun with 2, 3 and 4 processes)",
            Box::new(mpi::run_all),
        ),
        (
            "cargo xtask header --check",
            Box::new(|| header::check(&Workspace::load()?)),
        ),
        // The release library's suites (`cargo xtask ffi-test`) are left out: its release
        // build of the whole stack, and the chaos step's release CLI, took about five
        // minutes of the 45 (clean clone, 2026-12-01).
        (
            "cargo xtask ffi-test --debug-only",
            Box::new(|| ffi::run_debug(&Workspace::load()?)),
        ),
        // The debug library the step above built, so this costs a relink and the examples.
        (
            "cargo xtask install-test (install --debug, build docs/c-abi.md's C with pkg-config)",
            Box::new(|| install::check_examples(&Workspace::load()?)),
        ),
        (
            "cargo xtask campaign-chaos --dev-cli (120 kills, a full disk)",
            Box::new(|| {
                let options = chaos::ChaosOptions::parse(&[
                    "--kills".into(),
                    CI_CHAOS_KILLS.to_string(),
                    "--dev-cli".into(),
                ])?;
                chaos::run_all(&Workspace::load()?, &options)
            }),
        ),
        // No fuzz step: `cargo xtask fuzz` builds the whole stack a second time with
        // AddressSanitizer and coverage instrumentation, which cost 420-670 s of the 45
        // minutes (2 cores) before a target ran. The test step replays every committed seed
        // through each target's body (`fuzz/tests/seeds.rs`) in the build it shares;
        // coverage-guided fuzzing is `cargo xtask fuzz [--seconds N]`, run by hand.
    ];

    let total = steps.len();
    let started = Instant::now();
    let mut times: Vec<(&str, Duration)> = Vec::new();
    let mut failure = None;
    for (number, (name, action)) in steps.into_iter().enumerate() {
        println!(
            "\n==================== [{}/{total}] {name} ====================",
            number + 1
        );
        let step_started = Instant::now();
        let result = action();
        let elapsed = step_started.elapsed();
        times.push((name, elapsed));
        match result {
            Ok(()) => println!(
                "---- [{}/{total}] {name}: ok in {}",
                number + 1,
                seconds(elapsed)
            ),
            Err(err) => {
                println!(
                    "---- [{}/{total}] {name}: FAILED in {}",
                    number + 1,
                    seconds(elapsed)
                );
                failure = Some(format!(
                    "step {}/{total} `{name}` failed: {err}",
                    number + 1
                ));
                break;
            }
        }
    }

    println!("\nci summary:");
    for (index, (name, elapsed)) in times.iter().enumerate() {
        let verdict = if failure.is_some() && index + 1 == times.len() {
            "FAILED"
        } else {
            "ok"
        };
        println!("  {verdict:>6}  {:>8}  {name}", seconds(*elapsed));
    }
    println!("  total   {:>8}", seconds(started.elapsed()));
    match failure {
        None => {
            println!("ci: all {total} steps passed");
            Ok(())
        }
        Some(message) => Err(Failure::new(message)),
    }
}

fn seconds(duration: Duration) -> String {
    format!("{:.1}s", duration.as_secs_f64())
}
