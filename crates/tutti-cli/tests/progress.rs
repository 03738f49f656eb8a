//! Progress and logging of long runs: with standard error not a terminal (a pipe here, a
//! log file in a batch job) the CLI writes plain lines and never a carriage return; `-q`
//! silences progress; `-v`, `TUTTI_LOG` and `RUST_LOG` set the log level.

mod common;

use std::process::{Command, Output};

use common::{lcg, run_limited, scratch, text, write_npy, write_train};

/// Runs `tutti args...` with only the log variables in `env` set, time-limited; it must
/// succeed.
fn tutti(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tutti"));
    command
        .args(args)
        .env_remove("TUTTI_LOG")
        .env_remove("RUST_LOG");
    for (name, value) in env {
        command.env(name, value);
    }
    let out = run_limited(&mut command);
    assert!(
        out.status.success(),
        "tutti {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Standard error as text, after checking neither stream holds a carriage return.
fn no_carriage_returns(out: &Output) -> String {
    assert!(
        !out.stdout.contains(&b'\r'),
        "stdout holds a carriage return"
    );
    let stderr = String::from_utf8(out.stderr.clone()).expect("utf-8");
    assert!(
        !stderr.contains('\r'),
        "stderr holds a carriage return: {stderr:?}"
    );
    stderr
}

fn fmm_inputs() -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let dir = scratch("progress-fmm");
    let n = 2000;
    write_npy(&dir.join("p.npy"), &[n, 3], &lcg(5, 3 * n));
    write_npy(&dir.join("m.npy"), &[n], &vec![1.0; n]);
    (dir.join("p.npy"), dir.join("m.npy"), dir.join("out"))
}

#[test]
fn fmm_writes_one_plain_line_per_phase_and_none_with_quiet() {
    let (p, m, out) = fmm_inputs();
    let args = [
        "fmm",
        "--positions",
        text(&p),
        "--masses",
        text(&m),
        "--kind",
        "cpu",
        "-d",
        "2",
        "--out",
        text(&out),
    ];
    let stderr = no_carriage_returns(&tutti(&args, &[]));
    for (index, phase) in ["tree", "upward", "far field", "near field", "gather"]
        .iter()
        .enumerate()
    {
        let line = format!("fmm: {phase} {}/5", index + 1);
        assert_eq!(
            stderr.lines().filter(|l| *l == line).count(),
            1,
            "{line:?} once in {stderr:?}"
        );
    }
    let quiet = no_carriage_returns(&tutti(&[&args[..], &["-q"]].concat(), &[]));
    assert!(
        !quiet.contains("fmm: "),
        "-q still shows progress: {quiet:?}"
    );
}

#[test]
fn sweep_progress_is_plain_lines_with_both_passes() {
    let dir = scratch("progress-sweep");
    let (h, psi) = (dir.join("h"), dir.join("psi"));
    write_train(&h, 5, 3, true, 3);
    write_train(&psi, 5, 4, false, 4);
    let out = dir.join("out");
    let args = [
        "sweep",
        "--train",
        text(&h),
        "--train",
        text(&psi),
        "--chi",
        "6",
        "--kind",
        "cpu",
        "-d",
        "2",
        "--out",
        text(&out),
    ];
    let stderr = no_carriage_returns(&tutti(&args, &[]));
    // Each pass's first line is written (a stage change), and its last step.
    assert!(
        stderr.contains("sweep: sketch (left to right) 1/4"),
        "{stderr:?}"
    );
    assert!(
        stderr.contains("sweep: sketch (left to right) 4/4"),
        "{stderr:?}"
    );
    assert!(
        stderr.contains("sweep: orthogonalize (right to left) 1/5"),
        "{stderr:?}"
    );
    assert!(
        stderr.contains("sweep: orthogonalize (right to left) 5/5"),
        "{stderr:?}"
    );
}

#[test]
fn the_log_level_follows_the_flags_and_the_environment() {
    // `tutti devices` logs nothing at info; a bad TUTTI_LOG is reported as a warning, and
    // `-qq` (errors only) or RUST_LOG=error does not hide that warning, which the logger
    // writes itself. What the levels change: the SCF's progress lines and debug notes.
    let dir = scratch("progress-log");
    let xyz = dir.join("h2.xyz");
    std::fs::write(&xyz, "2\nh2\nH 0 0 0\nH 0 0 0.74\n").expect("xyz");
    let args = [
        "adjoint",
        "energy",
        "--xyz",
        text(&xyz),
        "--basis",
        "sto-3g",
    ];
    let normal = no_carriage_returns(&tutti(&args, &[]));
    assert!(normal.contains("scf: iteration 1/128"), "{normal:?}");
    let quiet = no_carriage_returns(&tutti(&[&args[..], &["-q"]].concat(), &[]));
    assert!(!quiet.contains("scf: iteration"), "{quiet:?}");
    let bad = no_carriage_returns(&tutti(&args, &[("RUST_LOG", "loud")]));
    assert!(bad.contains("RUST_LOG=\"loud\" is not a level"), "{bad:?}");
    let tutti_log_wins = no_carriage_returns(&tutti(
        &args,
        &[("TUTTI_LOG", "info"), ("RUST_LOG", "loud")],
    ));
    assert!(
        !tutti_log_wins.contains("not a level"),
        "{tutti_log_wins:?}"
    );
}
