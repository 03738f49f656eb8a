//! What scripts depend on (docs/cli.md): the exit status says what failed (0 success, 1 the
//! computation failed, 2 bad usage or bad input) and `--json` puts exactly one JSON object on
//! standard output, for every subcommand, on tiny inputs.

mod common;

use std::path::Path;

use common::{lcg, scratch, text, tutti, write_npy, write_train};
use serde_json::Value;

/// `tutti args...` must exit with `code`.
fn exits(code: i32, args: &[&str]) {
    let out = tutti(args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "tutti {args:?}: stderr {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `tutti args...` must succeed with exactly one JSON object on standard output, naming
/// `command` and this crate's version; returns it.
fn json(command: &str, args: &[&str]) -> Value {
    let out = tutti(args);
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        out.status.success(),
        "tutti {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // from_str refuses anything after the first value: one object, nothing else.
    let value: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|err| panic!("tutti {args:?}: not one JSON value ({err}): {stdout}"));
    assert!(value.is_object(), "{value}");
    assert_eq!(value["command"], command, "{value}");
    assert_eq!(value["versions"]["tutti"], env!("CARGO_PKG_VERSION"));
    assert!(
        value["seconds"].as_f64().is_some_and(|s| s >= 0.0),
        "{value}"
    );
    value
}

/// N random bodies: positions (N, 3) and positive strengths (N,) as `.npy` files in `dir`.
fn bodies(dir: &Path, n: usize) -> (String, String) {
    let (positions, masses) = (dir.join("p.npy"), dir.join("m.npy"));
    write_npy(&positions, &[n, 3], &lcg(1, 3 * n));
    let strengths: Vec<f64> = lcg(2, n).iter().map(|m| 1.0 + 0.5 * m).collect();
    write_npy(&masses, &[n], &strengths);
    (text(&positions).to_string(), text(&masses).to_string())
}

/// H2 at 0.74 Angstrom, as an XYZ file in `dir`.
fn hydrogen(dir: &Path) -> String {
    let xyz = dir.join("h2.xyz");
    std::fs::write(&xyz, "2\nH2\nH 0 0 0\nH 0 0 0.74\n").expect("xyz");
    text(&xyz).to_string()
}

#[test]
fn the_exit_status_says_what_failed() {
    let dir = scratch("exit-codes");
    let (p, m) = bodies(&dir, 50);
    let out = dir.join("out");
    let fmm = ["fmm", "--positions", &p, "--masses", &m, "--kind", "cpu"];
    let with = |extra: &[&'static str]| -> Vec<String> {
        let mut argv: Vec<String> = fmm.iter().map(|s| s.to_string()).collect();
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv
    };
    let run = |code: i32, argv: Vec<String>| {
        exits(code, &argv.iter().map(String::as_str).collect::<Vec<_>>());
    };
    // Success.
    run(0, [with(&["--out"]), vec![text(&out).to_string()]].concat());
    // A missing input file.
    let missing = text(&dir.join("missing.npy")).to_string();
    exits(
        2,
        &[
            "fmm",
            "--positions",
            &missing,
            "--masses",
            &m,
            "--out",
            text(&out),
        ],
    );
    // A malformed .npy file.
    let malformed = dir.join("malformed.npy");
    std::fs::write(&malformed, b"\x93NUMPY but not really").expect("write");
    exits(
        2,
        &[
            "fmm",
            "--positions",
            text(&malformed),
            "--masses",
            &m,
            "--out",
            text(&out),
        ],
    );
    // An option value the library refuses.
    run(
        2,
        [
            with(&["--theta", "1.5", "--out"]),
            vec![text(&out).to_string()],
        ]
        .concat(),
    );
    // Devices that do not exist.
    run(
        2,
        [
            with(&["--ordinals", "999", "--out"]),
            vec![text(&out).to_string()],
        ]
        .concat(),
    );
    // A plan that does not fit the caps is refused before any work: input too.
    run(
        2,
        [
            with(&["-d", "4", "--host-memory-mib", "1", "--out"]),
            vec![text(&out).to_string()],
        ]
        .concat(),
    );
    // Usage errors clap reports.
    exits(2, &["fmm", "--bogus"]);
    exits(2, &["no-such-subcommand"]);
    exits(
        2,
        &["fmm", "--positions", &p, "--masses", &m, "--order", "seven"],
    );
    // Bad input to the other workloads.
    let xyz = hydrogen(&dir);
    exits(
        2,
        &[
            "adjoint",
            "energy",
            "--xyz",
            &xyz,
            "--basis",
            "no-such-basis",
        ],
    );
    let no_train = text(&dir.join("no-train")).to_string();
    exits(
        2,
        &[
            "sweep",
            "--train",
            &no_train,
            "--chi",
            "2",
            "--out",
            text(&out),
        ],
    );
    exits(
        2,
        &["campaign", "status", text(&dir.join("no-ledger.json"))],
    );
    // Two JSON objects cannot share standard output.
    exits(
        2,
        &[
            "adjoint", "gradient", "--xyz", &xyz, "--basis", "sto-3g", "--out", "-", "--json",
        ],
    );
    // The computation fails: an SCF stopped before it converges.
    exits(
        1,
        &[
            "adjoint",
            "energy",
            "--xyz",
            &xyz,
            "--basis",
            "sto-3g",
            "--max-iterations",
            "1",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn devices_json_lists_the_devices() {
    // --json is global: before the subcommand as well as after it.
    let value = json(
        "devices",
        &["--json", "devices", "--kind", "cpu", "-d", "2"],
    );
    assert_eq!(value["devices"], 2);
    assert_eq!(value["device_kind"], "cpu");
    assert_eq!(value["device_info"].as_array().map(Vec::len), Some(2));
    assert_eq!(value["device_info"][1]["rank"], 1);
    assert!(value["device_info"][0]["memory_total"].as_u64() > Some(0));
    assert_eq!(value["inputs"]["resources"]["devices"], 2);
    assert!(value["cuda"]["built"].is_boolean());
}

#[test]
fn demo_json_reports_every_check() {
    let value = json("demo", &["demo", "--json", "-d", "2", "--len", "1024"]);
    assert_eq!(value["passed"], true);
    assert_eq!(value["devices"], 2);
    for check in [
        "collectives",
        "abort",
        "plan_and_spill",
        "fit",
        "sweep",
        "fmm",
        "adjoint",
    ] {
        assert_eq!(value["checks"][check]["ok"], true, "{check}: {value}");
    }
    assert!(value["checks"]["fmm"]["accel_error"].as_f64() < Some(1e-4));
    assert!(value["checks"]["adjoint"]["difference"].as_f64() < Some(1e-8));
}

#[test]
fn fmm_json_holds_the_inputs_outputs_and_error() {
    let dir = scratch("fmm-json");
    let n = 300;
    let (p, m) = bodies(&dir, n);
    let out = dir.join("out");
    let command = [
        "fmm",
        "--positions",
        &p,
        "--masses",
        &m,
        "--kind",
        "cpu",
        "-d",
        "2",
    ];
    let argv = [
        &command[..],
        &["--json", "--check-direct", "40", "--out", text(&out)],
    ]
    .concat();
    let value = json("fmm", &argv);
    assert_eq!(value["bodies"], n);
    assert_eq!(value["devices"], 2);
    assert_eq!(value["device_kind"], "cpu");
    assert_eq!(value["inputs"]["positions"], p.as_str());
    assert_eq!(value["inputs"]["order"], 7, "the default in effect");
    let potential = value["outputs"]["potential"].as_str().expect("a path");
    assert!(Path::new(potential).is_file(), "{potential}");
    assert_eq!(value["check"]["samples"], 40);
    assert!(
        value["check"]["accel_error"].as_f64() < Some(1e-3),
        "{value}"
    );
    assert!(value["timings"]["evaluate"].as_f64() >= Some(0.0));
    // --plan: the plan as text in the object, nothing evaluated.
    let planned = json("fmm", &[&command[..], &["--plan", "--json"]].concat());
    assert!(planned["plan"]
        .as_str()
        .is_some_and(|plan| plan.contains("plan for 2 device(s)")));
    assert!(planned.get("outputs").is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sweep_json_holds_the_result() {
    let dir = scratch("sweep-json");
    let (h, psi, out) = (dir.join("h"), dir.join("psi"), dir.join("out"));
    write_train(&h, 5, 2, true, 3);
    write_train(&psi, 5, 3, false, 4);
    let value = json(
        "sweep",
        &[
            "sweep",
            "--train",
            text(&h),
            "--train",
            text(&psi),
            "--chi",
            "4",
            "--kind",
            "cpu",
            "-d",
            "2",
            "--out",
            text(&out),
            "--json",
        ],
    );
    assert_eq!(value["sites"], 5);
    assert_eq!(value["trains"], 2);
    assert_eq!(value["devices"], 2);
    assert_eq!(value["inputs"]["chi"], 4);
    let bonds = value["bonds"].as_array().expect("bonds");
    assert!(bonds.iter().all(|b| b.as_u64() <= Some(4)), "{value}");
    assert!(value["norm"].as_f64() > Some(0.0));
    assert_eq!(value["outputs"]["train"], text(&out));
    assert!(out.join("000.npy").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn adjoint_json_holds_the_energy_and_the_files() {
    let dir = scratch("adjoint-json");
    let xyz = hydrogen(&dir);
    let molecule = ["--xyz", xyz.as_str(), "--basis", "sto-3g", "--kind", "cpu"];
    let energy = json(
        "adjoint energy",
        &[&["adjoint", "energy", "--json", "-d", "2"], &molecule[..]].concat(),
    );
    // RHF/STO-3G of H2 at 0.74 A: -1.1168 Eh; the existing fields stay.
    assert!((energy["energy"].as_f64().expect("energy") + 1.1168).abs() < 1e-3);
    assert_eq!(energy["nao"], 2);
    assert_eq!(energy["devices"], 2);
    assert!(energy["timings"]["scf"].as_f64().is_some());
    assert_eq!(energy["inputs"]["basis"], "sto-3g");
    let out = dir.join("gradient.json");
    let gradient = json(
        "adjoint gradient",
        &[
            &["adjoint", "gradient", "--json", "--out", text(&out)],
            &molecule[..],
        ]
        .concat(),
    );
    let (e1, e2) = (energy["energy"].as_f64(), gradient["energy"].as_f64());
    assert!(
        e1.zip(e2).is_some_and(|(a, b)| (a - b).abs() < 1e-10),
        "{e1:?} {e2:?}"
    );
    assert_eq!(
        gradient["parameters"], 12,
        "3 exponents and 3 coefficients per atom"
    );
    assert_eq!(gradient["outputs"]["gradient"], text(&out));
    // The gradient document is still written where --out says.
    let document: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("written")).expect("JSON");
    assert_eq!(document["energy"], gradient["energy"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fit_and_campaign_json_hold_the_results() {
    let dir = scratch("fit-json");
    let fit = json(
        "fit demo",
        &["fit", "demo", "--json", "--kind", "cpu", "-d", "2"],
    );
    assert_eq!(fit["devices"], 2);
    assert_eq!(fit["converged"], true);
    assert_eq!(fit["parameters"].as_array().map(Vec::len), Some(3));
    assert_eq!(fit["true_parameters"][0], 2.0);
    let ledger = dir.join("ledger.json");
    let bootstrap = json(
        "fit bootstrap",
        &[
            "fit",
            "bootstrap",
            "--replicates",
            "2",
            "--ledger",
            text(&ledger),
            "--json",
            "--kind",
            "cpu",
            "-d",
            "2",
        ],
    );
    assert_eq!(bootstrap["replicates"], 2);
    assert_eq!(bootstrap["ran"], 2);
    assert_eq!(bootstrap["accepted"], 2);
    assert_eq!(bootstrap["rates"].as_array().map(Vec::len), Some(3));
    assert_eq!(bootstrap["outputs"]["ledger"], text(&ledger));
    let status = json(
        "campaign status",
        &["campaign", "status", text(&ledger), "--json"],
    );
    assert_eq!(status["tasks"], 2);
    assert_eq!(status["accepted"], 2);
    assert_eq!(status["failed"], 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_closed_standard_output_is_not_reported_as_a_bug() {
    // `tutti ... | head`: the reader is gone before tutti prints. The read end is closed
    // before the child starts (closing it after the spawn raced the child's print under
    // load: the output fitted in the pipe and tutti exited 0), so its first print meets a
    // broken pipe: it must exit as a program killed by SIGPIPE reports itself to a shell
    // (141), without the "internal error" of a panic (101).
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_tutti"))
        .args(["devices", "--json"])
        .env("TUTTI_LOG", "warn")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tutti starts");
    let out = child.wait_with_output().expect("tutti ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "stderr: {stderr}");
    assert!(!stderr.contains("internal error"), "{stderr}");
}
