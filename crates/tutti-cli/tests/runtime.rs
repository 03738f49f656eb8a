//! Every workload subcommand on the one runtime: the same device flags on 1, 2, 3 and 4
//! simulated devices give the documented agreement (bitwise for fmm and fit, 1e-12 relative
//! for RHF energies, 1e-10 for sweep outputs); `--plan` prints a plan; a request that cannot
//! be met is an error with a message, never a hang (every run is time-limited).

mod common;

use common::{lcg, scratch, text, tutti, write_npy, write_train};
use tutti_sweep::{distance, norm, read_train};

/// `tutti args...` must succeed; returns stdout.
fn succeed(args: &[&str]) -> String {
    let out = tutti(args);
    assert!(
        out.status.success(),
        "tutti {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `tutti args...` must fail with a message containing `says`.
fn refuse(args: &[&str], says: &str) {
    let out = tutti(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "tutti {args:?} succeeded");
    assert!(
        stderr.contains(says),
        "tutti {args:?}: {stderr:?} lacks {says:?}"
    );
}

/// The device flags every workload subcommand takes, refused the same way everywhere.
fn refusals(command: &[&str]) {
    fn joined<'a>(command: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        [command, extra].concat()
    }
    let with = |extra: &[&'static str]| joined(command, extra);
    refuse(&with(&["--kind", "cpu", "--devices", "0"]), "zero devices");
    refuse(&with(&["--kind", "cpu", "--ordinals", "999"]), "999");
    refuse(
        &with(&["--kind", "cpu", "--device-memory-mib", "0"]),
        "must be positive",
    );
    #[cfg(not(feature = "cuda"))]
    refuse(&with(&["--kind", "gpu"]), "cuda");
    let plan = succeed(&with(&["--kind", "cpu", "--devices", "2", "--plan"]));
    assert!(plan.contains("plan for 2 device(s)"), "{plan}");
}

#[test]
fn fmm_is_bitwise_the_same_on_one_to_four_devices() {
    let dir = scratch("fmm");
    let n = 3000;
    let positions = lcg(1, 3 * n);
    let masses: Vec<f64> = lcg(2, n).iter().map(|m| 1.0 + 0.5 * m).collect();
    write_npy(&dir.join("p.npy"), &[n, 3], &positions);
    write_npy(&dir.join("m.npy"), &[n], &masses);
    let (p, m) = (dir.join("p.npy"), dir.join("m.npy"));
    let command = ["fmm", "--positions", text(&p), "--masses", text(&m)];
    let mut outputs = Vec::new();
    for devices in 1..=4 {
        let out = dir.join(format!("out{devices}"));
        let devices = devices.to_string();
        succeed(
            &[
                &command[..],
                &["--kind", "cpu", "-d", &devices, "--out", text(&out)],
            ]
            .concat(),
        );
        let read = |name: &str| std::fs::read(out.join(name)).expect("output");
        outputs.push((read("potential.npy"), read("accel.npy")));
    }
    for (devices, output) in outputs.iter().enumerate().skip(1) {
        assert!(
            output == &outputs[0],
            "{} devices differ from one",
            devices + 1
        );
    }
    let refused = dir.join("refused");
    let with_out = [&command[..], &["--out", text(&refused)]].concat();
    refusals(&with_out);
    refuse(
        &[
            &with_out[..],
            &["--kind", "cpu", "-d", "4", "--host-memory-mib", "1"],
        ]
        .concat(),
        "does not fit",
    );
    assert!(!refused.exists(), "a refused run wrote its output");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sweep_agrees_to_1e_10_on_one_to_four_devices() {
    let dir = scratch("sweep");
    let (h, psi) = (dir.join("h"), dir.join("psi"));
    write_train(&h, 6, 3, true, 3);
    write_train(&psi, 6, 4, false, 4);
    // chi = 12 = 3 x 4 holds the exact product: every device count must give it.
    let command = [
        "sweep",
        "--train",
        text(&h),
        "--train",
        text(&psi),
        "--chi",
        "12",
        "--seed",
        "7",
    ];
    let mut results = Vec::new();
    for devices in 1..=4 {
        let out = dir.join(format!("out{devices}"));
        let count = devices.to_string();
        succeed(
            &[
                &command[..],
                &["--kind", "cpu", "-d", &count, "--out", text(&out)],
            ]
            .concat(),
        );
        results.push(read_train::<f64>(&out).expect("result"));
    }
    let scale = norm(&results[0]);
    assert!(scale > 0.0);
    for (devices, result) in results.iter().enumerate().skip(1) {
        let gap = distance(result, &results[0]).expect("distance") / scale;
        assert!(
            gap <= 1e-10,
            "{} devices: relative distance {gap}",
            devices + 1
        );
    }
    let refused = dir.join("refused");
    refusals(&[&command[..], &["--out", text(&refused)]].concat());
    assert!(!refused.exists(), "a refused run wrote its output");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The value of `"key":` in a one-line JSON object (the text up to the next `,` or `}`).
fn json_field<'a>(json: &'a str, key: &str) -> &'a str {
    let start = json
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("{key} missing from {json}"))
        + key.len()
        + 3;
    let rest = &json[start..];
    let end = if rest.starts_with('[') {
        rest.find(']').expect("array end") + 1
    } else {
        rest.find([',', '}']).expect("value end")
    };
    &rest[..end]
}

#[test]
fn fit_is_bitwise_the_same_on_one_to_four_devices() {
    let command = ["fit", "demo", "--json"];
    let mut parameters = Vec::new();
    for devices in 1..=4 {
        let count = devices.to_string();
        let json = succeed(&[&command[..], &["--kind", "cpu", "-d", &count]].concat());
        assert_eq!(json_field(&json, "devices"), count);
        // Printed with Rust's shortest round-trip formatting: equal text is equal bits.
        parameters.push(json_field(&json, "parameters").to_string());
    }
    assert!(
        parameters.iter().all(|p| p == &parameters[0]),
        "{parameters:?}"
    );
    refusals(&command);
}

#[test]
fn rhf_energies_agree_to_1e_12_on_one_to_four_devices() {
    let dir = scratch("adjoint");
    let xyz = dir.join("water.xyz");
    std::fs::write(
        &xyz,
        "3\nwater\nO 0 0 0.1173\nH 0 0.7572 -0.4692\nH 0 -0.7572 -0.4692\n",
    )
    .expect("xyz");
    let command = [
        "adjoint",
        "energy",
        "--xyz",
        text(&xyz),
        "--basis",
        "6-31g",
        "--json",
    ];
    let mut energies = Vec::new();
    for devices in 1..=4 {
        let count = devices.to_string();
        let json = succeed(&[&command[..], &["--kind", "cpu", "-d", &count]].concat());
        energies.push(json_field(&json, "energy").parse::<f64>().expect("energy"));
    }
    // PySCF's RHF/6-31G energy of this geometry is -75.98; every count within 1e-12.
    assert!((energies[0] + 75.98).abs() < 0.01, "{energies:?}");
    for energy in &energies[1..] {
        assert!(
            ((energy - energies[0]) / energies[0]).abs() <= 1e-12,
            "{energies:?}"
        );
    }
    refusals(&command);
    let _ = std::fs::remove_dir_all(&dir);
}
