//! `tutti fit brusselator`: the fit recovers A, B and alpha within their standard errors,
//! `--json` holds what the text shows, and bad options are usage errors (exit 2).

mod common;

use common::tutti;
use serde_json::Value;

#[test]
fn the_fit_recovers_the_parameters_and_reports_them() {
    let args = ["fit", "brusselator", "--json", "--kind", "cpu", "-d", "2"];
    let out = tutti(&args);
    assert!(
        out.status.success(),
        "tutti {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(report["command"], "fit brusselator");
    assert_eq!(report["converged"], true, "{report}");
    assert_eq!(report["devices"], 2);
    // 4 experiments x 4 times x 16 observed points x 2 species.
    assert_eq!(report["residuals"], 512);
    assert_eq!(report["parameter_names"][2], "alpha");
    for k in 0..3 {
        let fitted = report["parameters"][k].as_f64().expect("parameter");
        let truth = report["true_parameters"][k].as_f64().expect("truth");
        let error = report["standard_errors"][k]
            .as_f64()
            .expect("standard error");
        // The library's test measures |z| of 1.1, 0.64, 0.89 on this setup: three standard
        // errors.
        assert!(
            (fitted - truth).abs() <= 3.0 * error,
            "parameter {k}: {fitted} +- {error} against {truth}"
        );
    }
}

#[test]
fn a_model_axis_gives_the_same_fit_as_one_device() {
    // A small, short fit: 6 x 6, 2 experiments, 3 iterations; the library's test checks
    // every mesh bitwise, this checks that the flag reaches it.
    let run = |devices: &'static str, model: &'static str| -> Value {
        let args = [
            "fit",
            "brusselator",
            "--json",
            "--kind",
            "cpu",
            "-d",
            devices,
            "--model-devices",
            model,
            "--n",
            "6",
            "--experiments",
            "2",
            "--max-iterations",
            "3",
        ];
        let out = tutti(&args);
        assert!(
            out.status.success(),
            "tutti {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("one JSON object")
    };
    let one = run("1", "1");
    let split = run("2", "2");
    assert_eq!(split["model_devices"], 2);
    assert_eq!(split["inputs"]["model_devices"], 2);
    assert_eq!(split["devices"], 2);
    // serde_json prints the shortest decimal that reads back to the same double.
    assert_eq!(split["parameters"], one["parameters"]);
    assert_eq!(split["cost"], one["cost"]);
}

#[test]
fn bad_options_are_usage_errors() {
    for bad in [
        &["--n", "2"][..],
        &["--noise", "0"],
        &["--rtol", "2"],
        &["--experiments", "0"],
        &["--model-devices", "0"],
        &["-d", "3", "--model-devices", "2"],
    ] {
        let mut args = vec!["fit", "brusselator", "--kind", "cpu"];
        args.extend_from_slice(bad);
        let out = tutti(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "tutti {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!String::from_utf8_lossy(&out.stderr).is_empty());
    }
}
