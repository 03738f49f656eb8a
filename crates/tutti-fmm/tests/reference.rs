//! Accuracy at the default options against the committed exact direct sums (cube_10k and
//! plummer_10k, made by an independent numpy direct sum; see tests/data/*/meta.json).

mod common;

use tutti_fmm::{fmm, FmmOptions};

fn check(name: &str) {
    let case = common::case(name);
    let out = fmm(&case.positions, &case.masses, &FmmOptions::default()).expect("fmm");
    let (accel, potential) = common::errors(&out, &case.potential, &case.accel);
    println!(
        "{name}: relative L2 accel {accel:.3e}, potential {potential:.3e}; {:?}",
        out.info
    );
    assert!(accel <= 1e-4, "{name}: accel error {accel}");
    assert!(potential <= 1e-4, "{name}: potential error {potential}");
}

#[test]
fn cube_10k_default_options_within_1e_4() {
    check("cube_10k");
}

#[test]
fn plummer_10k_default_options_within_1e_4() {
    check("plummer_10k");
}
