//! `tutti` as processes of an MPI job (feature `mpi`; run by `cargo xtask mpi-test`):
//! `mpirun -n 3 tutti fit demo` gives bitwise the report of `tutti fit demo --devices 3`, and
//! subcommands that do not run across processes yet refuse to. Without an
//! `mpirun` the test says so and passes, unless `TUTTI_REQUIRE_MPI=1`.
#![cfg(feature = "mpi")]

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{lcg, scratch, text, write_npy, write_train};
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

/// The report without what may differ between processes and threads: its timings, the
/// flags it was given (devices per process) and the process count.
fn without_seconds(mut report: Value) -> Value {
    if let Some(map) = report.as_object_mut() {
        for key in ["seconds", "timings", "inputs", "processes"] {
            map.remove(key);
        }
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

/// `tutti sparse solve` (`command`, without `-d` and `--out`) under `mpirun -n processes`
/// with one device each, against as many devices in one process: the same solution file,
/// byte for byte, rank 0 alone printing, the report naming `dtype`.
fn sparse_solve_over_processes(dir: &Path, command: &[&str], processes: usize, dtype: &str) {
    let count = processes.to_string();
    let threads = dir.join(format!("threads{processes}.npy"));
    let on_threads = alone(&[command, &["-d", &count, "--out", text(&threads)]].concat());
    assert!(on_threads.status.success(), "{on_threads:?}");
    let over = dir.join(format!("processes{processes}.npy"));
    let over_mpi = mpirun(
        processes,
        &[command, &["-d", "1", "--out", text(&over)]].concat(),
    );
    assert!(
        over_mpi.status.success(),
        "mpirun -n {processes} tutti sparse solve: {}",
        String::from_utf8_lossy(&over_mpi.stderr)
    );
    let stdout = String::from_utf8_lossy(&over_mpi.stdout);
    assert_eq!(
        stdout.matches("sparse: ").count(),
        1,
        "rank 0 alone prints:\n{stdout}"
    );
    assert!(stdout.contains(dtype), "{stdout}");
    assert!(
        stdout.contains(&format!("{processes} device(s)")),
        "{stdout}"
    );
    let read = |path: &Path| std::fs::read(path).expect("the solution file");
    let solution = read(&over);
    let numpy_type = if dtype == "complex128" {
        "'<c16'"
    } else {
        "'<f8'"
    };
    assert!(
        String::from_utf8_lossy(&solution[..solution.len().min(128)]).contains(numpy_type),
        "the solution is {dtype}"
    );
    assert!(
        solution == read(&threads),
        "{processes} processes against threads"
    );
}

#[test]
fn sparse_over_processes_writes_bitwise_the_solution_of_threads() {
    if !have_mpirun() {
        return;
    }
    let dir = scratch("mpirun-sparse");
    // A 3-D convection-diffusion matrix: its top fronts are shared by every rank.
    let command = [
        "sparse",
        "solve",
        "--model",
        "convection-diffusion",
        "--dims",
        "14,13,12",
        "--kind",
        "cpu",
    ];
    for processes in [2usize, 3] {
        sparse_solve_over_processes(&dir, &command, processes, "float64");
    }
    let info = mpirun(
        2,
        &["sparse", "info", "--model", "laplacian", "--dims", "8,8"],
    );
    assert!(!info.status.success());
    assert!(
        String::from_utf8_lossy(&info.stderr)
            .contains("tutti sparse info does not run across processes yet"),
        "{info:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn complex_sparse_over_processes_writes_bitwise_the_solution_of_threads() {
    if !have_mpirun() {
        return;
    }
    let dir = scratch("mpirun-sparse-complex");
    // A 3-D time-harmonic convection-diffusion matrix (complex, unsymmetric), as a file:
    // solved in complex128.
    let a = tutti_sparse::models::time_harmonic_convection_diffusion(&[10, 9, 8], 10.0, 0.5)
        .expect("the model");
    let mtx = dir.join("a.mtx");
    tutti_sparse::matrix_market::write(&mtx, &a).expect("write mtx");
    let command = ["sparse", "solve", "--matrix", text(&mtx), "--kind", "cpu"];
    for processes in [2usize, 3] {
        sparse_solve_over_processes(&dir, &command, processes, "complex128");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sweep_over_processes_agrees_with_threads() {
    if !have_mpirun() {
        return;
    }
    let dir = scratch("mpirun-sweep");
    let (h, psi) = (dir.join("h"), dir.join("psi"));
    write_train(&h, 6, 3, true, 3);
    write_train(&psi, 6, 4, false, 4);
    let command = [
        "sweep",
        "--train",
        text(&h),
        "--train",
        text(&psi),
        "--chi",
        "7",
        "--seed",
        "7",
        "--kind",
        "cpu",
    ];
    let threads = dir.join("threads");
    let on_threads = alone(&[&command[..], &["-d", "2", "--out", text(&threads)]].concat());
    assert!(on_threads.status.success(), "{on_threads:?}");
    let over = dir.join("processes");
    let over_mpi = mpirun(
        2,
        &[&command[..], &["-d", "1", "--out", text(&over)]].concat(),
    );
    assert!(
        over_mpi.status.success(),
        "mpirun -n 2 tutti sweep: {}",
        String::from_utf8_lossy(&over_mpi.stderr)
    );
    let stdout = String::from_utf8_lossy(&over_mpi.stdout);
    assert_eq!(
        stdout.matches("sweep: 2 trains").count(),
        1,
        "rank 0 alone prints:\n{stdout}"
    );
    assert!(stdout.contains("2 device(s)"), "{stdout}");
    let reference = tutti_sweep::read_train::<f64>(&threads).expect("the threads' train");
    let result = tutti_sweep::read_train::<f64>(&over).expect("the processes' train");
    assert_eq!(result.bonds(), reference.bonds());
    // The documented agreement of the sweep across device counts (same ranks here).
    let gap = tutti_sweep::distance(&result, &reference).expect("distance")
        / tutti_sweep::norm(&reference);
    assert!(gap <= 1e-10, "relative distance {gap:e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every number of `got` within `relative` of `reference` (relative to max(|r|, 1e-2), as
/// the gradient's device-count tests), the rest equal; `timings` are skipped.
fn agree(got: &Value, reference: &Value, relative: f64, at: &str) {
    match (got, reference) {
        (Value::Number(g), Value::Number(r)) => {
            let (g, r) = (g.as_f64().expect("a number"), r.as_f64().expect("a number"));
            let gap = (g - r).abs() / r.abs().max(1e-2);
            assert!(gap <= relative, "{at}: {g} against {r} ({gap:e})");
        }
        (Value::Array(g), Value::Array(r)) => {
            assert_eq!(g.len(), r.len(), "{at}: lengths");
            for (index, (g, r)) in g.iter().zip(r).enumerate() {
                agree(g, r, relative, &format!("{at}[{index}]"));
            }
        }
        (Value::Object(g), Value::Object(r)) => {
            for (key, r) in r.iter().filter(|(key, _)| *key != "timings") {
                let g = g.get(key).unwrap_or_else(|| panic!("{at}.{key} missing"));
                agree(g, r, relative, &format!("{at}.{key}"));
            }
        }
        (g, r) => assert_eq!(g, r, "{at}"),
    }
}

#[test]
fn adjoint_gradient_over_processes_agrees_with_threads() {
    if !have_mpirun() {
        return;
    }
    let dir = scratch("mpirun-adjoint");
    let xyz = dir.join("water.xyz");
    std::fs::write(
        &xyz,
        "3\nwater\nO 0.0 0.0 0.1173\nH 0.0 0.7572 -0.4692\nH 0.0 -0.7572 -0.4692\n",
    )
    .expect("the xyz file");
    let command = [
        "adjoint",
        "gradient",
        "--xyz",
        text(&xyz),
        "--basis",
        "6-31g",
        "--kind",
        "cpu",
        "--out",
        "-",
    ];
    let document = |output: &Output| -> Value {
        let text = String::from_utf8_lossy(&output.stdout);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("not one JSON document ({e}):\n{text}"))
    };
    let on_threads = alone(&[&command[..], &["-d", "2"]].concat());
    assert!(on_threads.status.success(), "{on_threads:?}");
    let over_mpi = mpirun(2, &[&command[..], &["-d", "1"]].concat());
    assert!(
        over_mpi.status.success(),
        "mpirun -n 2 tutti adjoint gradient: {}",
        String::from_utf8_lossy(&over_mpi.stderr)
    );
    // Rank 0 alone prints: the standard output is one JSON document.
    let (got, reference) = (document(&over_mpi), document(&on_threads));
    assert_eq!(got["devices"], Value::from(2));
    // The tolerances of the device-count tests: the split of the J/K and gradient sums.
    agree(&got["energy"], &reference["energy"], 1e-12, "energy");
    agree(&got, &reference, 1e-10, "gradient");
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
}

#[test]
fn processes_times_local_devices_are_bitwise_the_threads() {
    if !have_mpirun() {
        return;
    }
    // 2 processes of 2 ranks each (one a thread per device), against 4 threads.
    let over_mpi = mpirun(
        2,
        &["fit", "demo", "--json", "--kind", "cpu", "--devices", "2"],
    );
    assert!(
        over_mpi.status.success(),
        "{}",
        String::from_utf8_lossy(&over_mpi.stderr)
    );
    let reports = json_lines(&over_mpi);
    assert_eq!(reports.len(), 1, "rank 0 alone prints the report");
    assert_eq!(reports[0]["devices"], Value::from(4));
    let on_threads = alone(&["fit", "demo", "--json", "--kind", "cpu", "--devices", "4"]);
    assert_eq!(
        without_seconds(reports[0].clone()),
        without_seconds(json_lines(&on_threads)[0].clone())
    );
}

/// The records of a bootstrap ledger by task id (empty while there is no ledger).
fn ledger_records(path: &std::path::Path) -> std::collections::BTreeMap<String, Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let ledger: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    ledger["tasks"]
        .as_array()
        .map(|tasks| {
            tasks
                .iter()
                .map(|task| {
                    (
                        task["task_id"].as_str().unwrap_or("").to_string(),
                        task.clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The processes whose parent is `parent`, with their MPI rank (from `OMPI_COMM_WORLD_RANK`).
fn children_by_rank(parent: u32) -> Vec<(usize, u32)> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The fields after the command name (in parentheses): state, then the parent's pid.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        if after.split_whitespace().nth(1) != Some(&parent.to_string()) {
            continue;
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let rank = environ
            .split(|&b| b == 0)
            .filter_map(|var| std::str::from_utf8(var).ok())
            .find_map(|var| var.strip_prefix("OMPI_COMM_WORLD_RANK="))
            .and_then(|rank| rank.parse().ok());
        if let Some(rank) = rank {
            children.push((rank, pid));
        }
    }
    children.sort_unstable();
    children
}

/// Whether `pid` still runs (a zombie awaiting its parent does not).
fn running(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest.trim_start());
    !state.is_empty() && !state.starts_with('Z') && !state.starts_with('X')
}

#[test]
fn a_bootstrap_across_processes_killed_mid_run_resumes_losing_nothing() {
    use std::time::{Duration, Instant};
    if !have_mpirun() {
        return;
    }
    let dir = scratch("mpirun-bootstrap-kill");
    let ledger = dir.join("ledger.json");
    let ledger_arg = ledger.to_string_lossy().into_owned();
    let args = [
        "fit",
        "bootstrap",
        "--replicates",
        "60",
        "--ledger",
        &ledger_arg,
        "--kind",
        "cpu",
        "--devices",
        "1",
    ];
    let log = std::fs::File::create(dir.join("killed.log")).expect("log file");
    let mut job = Command::new("mpirun")
        .args(["-n", "2", "--timeout", "100"])
        .arg(TUTTI)
        .args(args)
        .envs(OPEN_MPI_CONTAINER_ENV.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("mpirun starts");
    // Kill rank 0, the ledger's writer, once a few rounds are recorded.
    let started = Instant::now();
    while ledger_records(&ledger).len() < 4 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no records after 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let ranks = children_by_rank(job.id());
    assert_eq!(
        ranks.len(),
        2,
        "two tutti processes under mpirun: {ranks:?}"
    );
    let killed = Command::new("kill")
        .args(["-KILL", &ranks[0].1.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let killed_at = Instant::now();
    let status = loop {
        if let Some(status) = job.try_wait().expect("wait for mpirun") {
            break status;
        }
        if killed_at.elapsed() > Duration::from_secs(60) {
            let _ = job.kill();
            panic!("the job still ran 60 s after one process was killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success(), "a job with a killed process must fail");
    std::thread::sleep(Duration::from_millis(200));
    for (rank, pid) in &ranks {
        assert!(!running(*pid), "rank {rank} (pid {pid}) outlived its job");
    }
    let before = ledger_records(&ledger);
    eprintln!(
        "rank 0 killed with {} of 60 replicates recorded; the job ended {:.2} s later",
        before.len(),
        killed_at.elapsed().as_secs_f64() - 0.2
    );
    assert!(
        before.len() >= 4 && before.len() < 60,
        "{} records",
        before.len()
    );

    // Resumed: the recorded tasks are reused as they are, the others run.
    let resumed = mpirun(2, &args);
    assert!(
        resumed.status.success(),
        "resume: {}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let summary = format!(
        "({} taken from the ledger, {} run)",
        before.len(),
        60 - before.len()
    );
    assert!(
        text_of(&resumed).contains(&summary),
        "expected {summary}:\n{}",
        text_of(&resumed)
    );
    let after = ledger_records(&ledger);
    assert_eq!(after.len(), 60);
    for (id, record) in &before {
        assert_eq!(&after[id], record, "{id} changed on resume");
    }

    // One process on two devices, uninterrupted: bitwise the same results and intervals.
    let reference_ledger = dir.join("reference.json");
    let reference_arg = reference_ledger.to_string_lossy().into_owned();
    let mut reference_args = args;
    reference_args[5] = &reference_arg;
    reference_args[9] = "2";
    let reference = alone(&reference_args);
    assert!(reference.status.success());
    let reference_records = ledger_records(&reference_ledger);
    for (id, record) in &reference_records {
        assert_eq!(after[id]["status"], record["status"], "{id}");
        assert_eq!(after[id]["result"], record["result"], "{id}");
    }
    let table = |output: &Output| {
        text_of(output)
            .lines()
            .skip_while(|line| !line.trim_start().starts_with("rate"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(table(&resumed), table(&reference));
    assert_eq!(table(&reference).len(), 4, "a header and three rates");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A command's standard output.
fn text_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}
