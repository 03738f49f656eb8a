//! `tutti ode brusselator` through the built binary: the report's counts, the state files
//! against the library's own integration, and the exit status of bad input.

mod common;

use common::{scratch, text, tutti};
use serde_json::Value;
use tutti_fit::bdf::{integrate, BdfOptions};
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
fn bad_input_exits_with_2() {
    for (args, says) in [
        (vec!["ode", "brusselator", "--n", "2"], "at least 3 x 3"),
        (vec!["ode", "brusselator", "--t-end=-1"], "--t-end"),
        (
            vec!["ode", "brusselator", "--n", "4", "--rtol", "0"],
            "rtol",
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
