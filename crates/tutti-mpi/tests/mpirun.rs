//! The transport over real MPI processes: `mpirun -n 2, 3, 4` on the self-test binary
//! (`src/bin/selftest.rs`), each case checked by every process. Needs the `mpi` feature and
//! an `mpirun` (Open MPI's; `cargo xtask mpi-test` installs it): without one the test says
//! so and passes, unless `TUTTI_REQUIRE_MPI=1`, which makes that a failure.
#![cfg(feature = "mpi")]

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use tutti_mpi::launch::OPEN_MPI_CONTAINER_ENV;

const SELFTEST: &str = env!("CARGO_BIN_EXE_tutti-mpi-selftest");

/// A case that takes longer than this has hung (mpirun's own --timeout is 60 s).
const CASE_LIMIT: Duration = Duration::from_secs(75);

fn have_mpirun() -> bool {
    let found = Command::new("mpirun").arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var("TUTTI_REQUIRE_MPI").as_deref() != Ok("1"),
            "TUTTI_REQUIRE_MPI=1 but there is no mpirun on PATH"
        );
        eprintln!("skipped: no mpirun on PATH (install Open MPI, or run `cargo xtask mpi-test`)");
    }
    found
}

/// `mpirun -n <processes> selftest <args>`, with the settings a root CI container on two
/// cores needs.
fn mpirun(processes: usize, args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let output = Command::new("timeout")
        .arg(CASE_LIMIT.as_secs().to_string())
        .args(["mpirun", "-n", &processes.to_string(), "--timeout", "60"])
        .arg(SELFTEST)
        .args(args)
        .envs(OPEN_MPI_CONTAINER_ENV.iter().copied())
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("mpirun starts");
    (output, started.elapsed())
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn no_selftest_left() {
    let left = Command::new("pgrep")
        .args(["-f", SELFTEST])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "self-test processes outlived their job: {left}"
    );
}

fn expect_ok(processes: usize, args: &[&str]) {
    let (output, elapsed) = mpirun(processes, args);
    let log = text(&output);
    assert!(
        output.status.success(),
        "mpirun -n {processes} {args:?} failed ({:?}, {elapsed:?}):\n{log}",
        output.status
    );
    for rank in 0..processes {
        assert!(
            log.contains(&format!("rank {rank}: ok")),
            "rank {rank} of {processes} did not report ok for {args:?}:\n{log}"
        );
    }
    no_selftest_left();
}

/// Every case in sequence (one test, so that the orphan check sees only its own job).
#[test]
fn the_transport_over_mpi_processes() {
    if !have_mpirun() {
        return;
    }
    for processes in [2, 3, 4] {
        expect_ok(processes, &["collectives"]);
        let last = (processes - 1).to_string();
        expect_ok(processes, &["error", &last, "5"]);
        expect_ok(processes, &["error", "0", "0"]);
        expect_ok(processes, &["panic", "1", "3"]);
        expect_ok(processes, &["early", &last, "2"]);
        expect_ok(processes, &["mismatch", "1", "4"]);
    }
    expect_ok(3, &["rounds"]);
    expect_ok(2, &["large"]);
    expect_ok(3, &["large"]);
    expect_ok(3, &["again"]);
    // Random failure points: rank and round from a fixed sequence.
    for trial in 0..8usize {
        let processes = 2 + trial % 3;
        let rank = (trial * 7 + 3) % processes;
        let round = (trial * 5 + 1) % 11;
        let kind = ["error", "panic", "early", "mismatch"][trial % 4];
        expect_ok(processes, &[kind, &rank.to_string(), &round.to_string()]);
    }
    for (kind, signal_text) in [("abort", "signal 6"), ("kill", "signal 9")] {
        let (output, elapsed) = mpirun(3, &[kind, "1"]);
        let log = text(&output);
        assert!(!output.status.success(), "the job must fail:\n{log}");
        assert!(
            elapsed < Duration::from_secs(60),
            "the job took {elapsed:?} to end after a process died"
        );
        assert!(
            log.contains(signal_text),
            "mpirun names the death ({signal_text}):\n{log}"
        );
        no_selftest_left();
    }
}
