//! `tutti` as processes of an MPI job (feature `mpi`; run by `cargo xtask mpi-test`):
//! `mpirun -n 3 tutti fit demo` gives bitwise the report of `tutti fit demo --devices 3`, and
//! subcommands that do not run across processes yet refuse to. Without an
//! `mpirun` the test says so and passes, unless `TUTTI_REQUIRE_MPI=1`.
#![cfg(feature = "mpi")]

mod common;

use std::process::{Command, Output};

use common::{lcg, scratch, text, write_npy};
use serde_json::Value;
use tutti_mpi::launch::OPEN_MPI_CONTAINER_ENV;

const TUTTI: &str = env!("CARGO_BIN_EXE_tutti");

fn have_mpirun() -> bool {
    let found = Command::new("mpirun").arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var("TUTTI_REQUIRE_MPI").as_deref() != Ok("1"),
            "TUTTI_REQUIRE_MPI=1 but there is no mpirun on PATH"
        );
        eprintln!("skipped: no mpirun on PATH");
    }
    found
}

fn mpirun(processes: usize, args: &[&str]) -> Output {
    Command::new("timeout")
        .args([
            "120",
            "mpirun",
            "-n",
            &processes.to_string(),
            "--timeout",
            "100",
        ])
        .arg(TUTTI)
        .args(args)
        .envs(OPEN_MPI_CONTAINER_ENV.iter().copied())
        .output()
        .expect("mpirun starts")
}

fn alone(args: &[&str]) -> Output {
    Command::new(TUTTI)
        .args(args)
        .output()
        .expect("tutti starts")
}

fn json_lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).expect("a JSON report"))
        .collect()
}

/// The report without its timing, which is all that may differ.
fn without_seconds(mut report: Value) -> Value {
    if let Some(map) = report.as_object_mut() {
        map.remove("seconds");
    }
    report
}

#[test]
fn fit_over_processes_is_bitwise_the_fit_over_threads() {
    if !have_mpirun() {
        return;
    }
    for processes in [2usize, 3] {
        let over_mpi = mpirun(
            processes,
            &["fit", "demo", "--json", "--kind", "cpu", "--devices", "1"],
        );
        assert!(
            over_mpi.status.success(),
            "mpirun -n {processes} tutti fit demo: {}",
            String::from_utf8_lossy(&over_mpi.stderr)
        );
        let reports = json_lines(&over_mpi);
        assert_eq!(reports.len(), 1, "rank 0 alone prints the report");
        let threads = processes.to_string();
        let on_threads = alone(&[
            "fit",
            "demo",
            "--json",
            "--kind",
            "cpu",
            "--devices",
            &threads,
        ]);
        assert!(on_threads.status.success());
        let reference = json_lines(&on_threads);
        // serde_json prints floats so that they read back to the same bits: equal JSON is
        // bitwise equal parameters, cost and standard errors.
        assert_eq!(
            without_seconds(reports[0].clone()),
            without_seconds(reference[0].clone()),
            "{processes} processes against {processes} threads"
        );
        assert_eq!(reports[0]["devices"], Value::from(processes));
    }
}

#[test]
fn fmm_over_processes_writes_bitwise_the_files_of_threads() {
    if !have_mpirun() {
        return;
    }
    let dir = scratch("mpirun-fmm");
    let n = 3000;
    let masses: Vec<f64> = lcg(2, n).iter().map(|m| 1.0 + 0.5 * m).collect();
    write_npy(&dir.join("p.npy"), &[n, 3], &lcg(1, 3 * n));
    write_npy(&dir.join("m.npy"), &[n], &masses);
    let (p, m) = (dir.join("p.npy"), dir.join("m.npy"));
    let command = [
        "fmm",
        "--positions",
        text(&p),
        "--masses",
        text(&m),
        "--kind",
        "cpu",
    ];
    let read = |out: &std::path::Path| {
        let read = |name: &str| std::fs::read(out.join(name)).expect("an output file");
        (read("potential.npy"), read("accel.npy"))
    };
    for processes in [2usize, 3] {
        let threads = dir.join(format!("threads{processes}"));
        let count = processes.to_string();
        let on_threads = alone(&[&command[..], &["-d", &count, "--out", text(&threads)]].concat());
        assert!(on_threads.status.success(), "{on_threads:?}");
        let over = dir.join(format!("processes{processes}"));
        let over_mpi = mpirun(
            processes,
            &[&command[..], &["-d", "1", "--out", text(&over)]].concat(),
        );
        assert!(
            over_mpi.status.success(),
            "mpirun -n {processes} tutti fmm: {}",
            String::from_utf8_lossy(&over_mpi.stderr)
        );
        let stdout = String::from_utf8_lossy(&over_mpi.stdout);
        assert_eq!(
            stdout.matches("fmm: N = 3000").count(),
            1,
            "rank 0 alone prints:\n{stdout}"
        );
        assert!(
            stdout.contains(&format!("{processes} device(s)")),
            "{stdout}"
        );
        assert!(
            read(&over) == read(&threads),
            "{processes} processes against threads"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mpi_off_runs_every_process_alone() {
    if !have_mpirun() {
        return;
    }
    let output = mpirun(
        2,
        &[
            "--mpi", "off", "fit", "demo", "--json", "--kind", "cpu", "-d", "1",
        ],
    );
    assert!(output.status.success());
    let reports = json_lines(&output);
    assert_eq!(reports.len(), 2, "each process prints its own report");
    assert_eq!(reports[0]["devices"], Value::from(1));
}

#[test]
fn subcommands_not_yet_across_processes_refuse() {
    if !have_mpirun() {
        return;
    }
    let output = mpirun(2, &["demo"]);
    assert!(!output.status.success(), "the job fails");
    let stderr = String::from_utf8_lossy(&output.stderr);
    // mpirun ends the job when the first process exits non-zero, so the other may be
    // stopped before it prints the same message.
    assert!(
        stderr.contains("tutti demo does not run across processes yet (started by Open MPI"),
        "a process says why:\n{stderr}"
    );
    let output = mpirun(2, &["fit", "demo", "--kind", "cpu", "-d", "2"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("over MPI every process runs one device, and the flags select 2"),
        "{stderr}"
    );
}
