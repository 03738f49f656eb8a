//! `tutti ode brusselator` through the built binary: the report's counts, the state files
//! against the library's own integration (2-D and 3-D), the model axis's bits against one
//! device's, and the exit status of bad input.

mod common;

use common::{scratch, text, tutti};
use serde_json::Value;
use tutti_fit::bdf::{integrate, BdfOptions, StiffSystem};
use tutti_fit::brusselator::Brusselator;

#[test]
fn the_brusselator_writes_the_state_the_library_computes() {
    let dir = scratch("ode-brusselator");
    let out = tutti(&[
        "--json",
        "ode",
        "brusselator",
        "--n",
        "6",
        "--t-end",
        "2",
        "--rtol",
        "1e-7",
        "--out",
        text(&dir),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(report["command"], "ode brusselator", "{report}");
    assert_eq!(report["unknowns"], 72, "{report}");
    assert_eq!(report["dims"], 2, "{report}");
    assert_eq!(report["inputs"]["dims"], 2, "{report}");
    assert_eq!(report["grid"], serde_json::json!([6, 6]), "{report}");
    let stats = &report["statistics"];
    let steps = stats["steps"].as_u64().expect("steps");
    let per_order: u64 = stats["steps_at_order"]
        .as_array()
        .expect("orders")
        .iter()
        .map(|v| v.as_u64().expect("a count"))
        .sum();
    assert_eq!(per_order, steps, "{report}");
    // The library, called directly with the same options, gives the same bits.
    let model = Brusselator::new(6).expect("model");
    let options = BdfOptions {
        rtol: 1e-7,
        atol: 1e-9,
        ..BdfOptions::default()
    };
    let solution =
        integrate(&model, 0.0, &model.initial_state(), &[2.0], &options).expect("integrates");
    assert_eq!(solution.statistics.steps as u64, steps);
    let read = |name: &str| {
        let (shape, values) = tutti_plan::npy::read_f64(dir.join(name)).expect("a state file");
        assert_eq!(shape, [6, 6]);
        values
    };
    let (u, v) = (read("u.npy"), read("v.npy"));
    for (point, pair) in solution.y[0].chunks(2).enumerate() {
        assert_eq!(u[point].to_bits(), pair[0].to_bits(), "u at point {point}");
        assert_eq!(v[point].to_bits(), pair[1].to_bits(), "v at point {point}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_3d_brusselator_reports_its_dimension_and_state() {
    let dir = scratch("ode-brusselator-3d");
    let out = tutti(&[
        "--json",
        "ode",
        "brusselator",
        "--dims",
        "3",
        "--n",
        "4",
        "--t-end",
        "0.5",
        "--out",
        text(&dir),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(report["command"], "ode brusselator", "{report}");
    assert_eq!(report["dims"], 3, "{report}");
    assert_eq!(report["inputs"]["dims"], 3, "{report}");
    assert_eq!(report["inputs"]["n"], 4, "{report}");
    assert_eq!(report["grid"], serde_json::json!([4, 4, 4]), "{report}");
    assert_eq!(report["outputs"]["shape"], serde_json::json!([4, 4, 4]));
    // 2 species at 4^3 points.
    assert_eq!(report["unknowns"], 128, "{report}");
    // The library's 3-D model with the same options gives the same bits: the means, the
    // steps and the state files (z, y, x).
    let model = Brusselator::with_dims(4, 3).expect("model");
    assert_eq!(model.dimension(), 128);
    let solution = integrate(
        &model,
        0.0,
        &model.initial_state(),
        &[0.5],
        &BdfOptions::default(),
    )
    .expect("integrates");
    let steps = report["statistics"]["steps"].as_u64().expect("steps");
    assert_eq!(solution.statistics.steps as u64, steps);
    let (u, v): (Vec<f64>, Vec<f64>) = solution.y[0].chunks(2).map(|p| (p[0], p[1])).unzip();
    let mean = |w: &[f64]| w.iter().sum::<f64>() / w.len() as f64;
    for (field, expected) in [("mean_u", mean(&u)), ("mean_v", mean(&v))] {
        let got = report[field].as_f64().expect("a number");
        assert_eq!(
            got.to_bits(),
            expected.to_bits(),
            "{field}: {got} vs {expected}"
        );
        assert!(got > 0.0, "{field}: {got}");
    }
    let read = |name: &str| {
        let (shape, values) = tutti_plan::npy::read_f64(dir.join(name)).expect("a state file");
        assert_eq!(shape, [4, 4, 4]);
        values
    };
    assert_eq!(read("u.npy"), u);
    assert_eq!(read("v.npy"), v);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tutti --json ode brusselator --n 6 --t-end 4 --kind cpu` with `extra` flags, the state
/// written to `dir`: the report.
fn brusselator_on(dir: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "--json",
        "ode",
        "brusselator",
        "--n",
        "6",
        "--t-end",
        "4",
        "--kind",
        "cpu",
        "--out",
        text(dir),
    ];
    args.extend_from_slice(extra);
    let out = tutti(&args);
    assert!(
        out.status.success(),
        "{extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn the_model_axis_gives_the_bits_of_one_device() {
    let (one_dir, two_dir) = (scratch("ode-model-1"), scratch("ode-model-2"));
    let one = brusselator_on(&one_dir, &["--model-devices", "1", "-d", "1"]);
    let two = brusselator_on(&two_dir, &["--model-devices", "2", "-d", "2"]);
    for (report, k) in [(&one, 1), (&two, 2)] {
        assert_eq!(report["model_devices"], k, "{report}");
        assert_eq!(report["inputs"]["model_devices"], k, "{report}");
        assert_eq!(report["devices"], k, "{report}");
        assert_eq!(report["device_kind"], "cpu", "{report}");
    }
    // The steps, iterations, evaluations and factorizations are the same counts...
    assert_eq!(one["statistics"], two["statistics"]);
    assert!(
        one["statistics"]["factorizations"].as_u64() > Some(1),
        "{one}"
    );
    // ...the means the same bits...
    for field in ["mean_u", "mean_v"] {
        let bits = |report: &Value| report[field].as_f64().expect("a number").to_bits();
        assert_eq!(bits(&one), bits(&two), "{field}: {one} vs {two}");
    }
    // ...and so are the state files, byte for byte.
    for name in ["u.npy", "v.npy"] {
        let read = |dir: &std::path::Path| std::fs::read(dir.join(name)).expect("a state file");
        assert_eq!(read(&one_dir), read(&two_dir), "{name}");
    }
    // Without `-d`, `--model-devices 2` takes two devices of the kind.
    let default_count = brusselator_on(&two_dir, &["--model-devices", "2"]);
    assert_eq!(default_count["devices"], 2, "{default_count}");
    assert_eq!(default_count["statistics"], one["statistics"]);
    for dir in [one_dir, two_dir] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn bad_input_exits_with_2() {
    for (args, says) in [
        (vec!["ode", "brusselator", "--n", "2"], "at least 3 x 3"),
        (vec!["ode", "brusselator", "--t-end=-1"], "--t-end"),
        (
            vec!["ode", "brusselator", "--dims", "4", "--n", "4"],
            "`--dims` is 4",
        ),
        (
            vec!["ode", "brusselator", "--dims", "1", "--n", "4"],
            "2 or 3 dimensions",
        ),
        (
            vec!["ode", "brusselator", "--dims", "3", "--n", "2"],
            "at least 3 x 3 x 3",
        ),
        (
            vec!["ode", "brusselator", "--n", "4", "--rtol", "0"],
            "rtol",
        ),
        (
            vec!["ode", "brusselator", "--n", "4", "--model-devices", "0"],
            "`--model-devices` is 0",
        ),
        (
            vec![
                "ode",
                "brusselator",
                "--n",
                "4",
                "--model-devices",
                "2",
                "--kind",
                "cpu",
                "-d",
                "3",
            ],
            "`--model-devices` is 2 but the device flags select 3 device(s)",
        ),
        (
            vec!["ode", "brusselator", "--n", "4", "--kind", "cpu", "-d", "2"],
            "`--model-devices` is 1 but the device flags select 2 device(s)",
        ),
        (
            vec!["ode", "brusselator", "--n", "4", "--model-devices", "x"],
            "--model-devices",
        ),
    ] {
        let out = tutti(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(says),
            "{args:?}: expected {says:?} in {stderr}"
        );
    }
}
