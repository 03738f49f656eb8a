//! Accuracy against the crate's direct sum: thin disk, error versus order, small N, signed
//! strengths, softening, f32 far field, and chunking.

mod common;

use tutti_fmm::{direct, fmm, sampled_error, FmmOptions, Precision};

fn errors_vs_direct(positions: &[[f64; 3]], masses: &[f64], options: &FmmOptions) -> (f64, f64) {
    let out = fmm(positions, masses, options).expect("fmm");
    let (potential, accel) = direct(positions, masses, options.softening).expect("direct");
    common::errors(&out, &potential, &accel)
}

#[test]
fn thin_disk_default_options_within_1e_4() {
    let (positions, masses) = common::thin_disk(6000, 3);
    let (accel, potential) = errors_vs_direct(&positions, &masses, &FmmOptions::default());
    println!("thin disk: accel {accel:.3e}, potential {potential:.3e}");
    assert!(accel <= 1e-4, "{accel}");
    assert!(potential <= 1e-4, "{potential}");
}

#[test]
fn error_falls_geometrically_with_order() {
    let (positions, masses) = common::plummer(3000, 4);
    let (exact_potential, exact_accel) = direct(&positions, &masses, 0.0).expect("direct");
    let mut errors = Vec::new();
    for order in [2, 4, 6, 8, 10] {
        let out = fmm(
            &positions,
            &masses,
            &FmmOptions::default().with_order(order),
        )
        .expect("fmm");
        let (accel, potential) = common::errors(&out, &exact_potential, &exact_accel);
        println!("p = {order}: accel {accel:.3e}, potential {potential:.3e}");
        errors.push(accel);
    }
    // theta = 0.5: each step of 2 in p should gain well over a factor 2 (about 4 to 8).
    for pair in errors.windows(2) {
        assert!(pair[1] < pair[0] / 2.5, "{errors:?}");
    }
    assert!(errors[4] < errors[0] * 1e-3, "{errors:?}");
}

#[test]
fn everything_near_field_equals_the_direct_sum() {
    for (n, leaf_size, theta) in [(1, 1, 0.5), (2, 1, 0.5), (17, 64, 0.5), (200, 1, 1e-6)] {
        let (positions, mut masses) = common::uniform(n, 5);
        masses.iter_mut().step_by(3).for_each(|m| *m = -*m);
        let options = FmmOptions::default()
            .with_leaf_size(leaf_size)
            .with_theta(theta);
        let out = fmm(&positions, &masses, &options).expect("fmm");
        assert_eq!(out.info.m2l_pairs, 0, "n = {n}: all near field");
        let (potential, accel) = direct(&positions, &masses, 0.0).expect("direct");
        let (ea, ep) = common::errors(&out, &potential, &accel);
        assert!(ea <= 1e-14 && ep <= 1e-14, "n = {n}: {ea} {ep}");
    }
}

#[test]
fn signed_strengths_and_softening() {
    // A neutral plasma-like set (charges +1 and -1), with and without softening.
    let (positions, _) = common::uniform(3000, 6);
    let charges: Vec<f64> = (0..positions.len())
        .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    for softening in [0.0, 0.01] {
        let options = FmmOptions::default()
            .with_softening(softening)
            .with_order(8);
        let (accel, potential) = errors_vs_direct(&positions, &charges, &options);
        println!("charges, softening {softening}: accel {accel:.3e}, potential {potential:.3e}");
        assert!(accel <= 1e-4 && potential <= 1e-4, "{accel} {potential}");
    }
}

#[test]
fn softened_gravity_matches_softened_direct_sum() {
    let (positions, masses) = common::plummer(3000, 7);
    let options = FmmOptions::default().with_softening(0.05);
    let (accel, potential) = errors_vs_direct(&positions, &masses, &options);
    println!("softened Plummer: accel {accel:.3e}, potential {potential:.3e}");
    assert!(accel <= 1e-4 && potential <= 1e-4, "{accel} {potential}");
}

#[test]
fn f32_far_field_is_accuracy_neutral_at_moderate_order() {
    let (positions, masses) = common::uniform(4000, 8);
    let (exact_potential, exact_accel) = direct(&positions, &masses, 0.0).expect("direct");
    for order in [4, 6] {
        let options = FmmOptions::default().with_order(order);
        let f64_out = fmm(&positions, &masses, &options).expect("f64");
        let f32_out =
            fmm(&positions, &masses, &options.with_far_field(Precision::F32)).expect("f32");
        let (a64, p64) = common::errors(&f64_out, &exact_potential, &exact_accel);
        let (a32, p32) = common::errors(&f32_out, &exact_potential, &exact_accel);
        println!("p = {order}: f64 {a64:.3e} {p64:.3e}, f32 {a32:.3e} {p32:.3e}");
        assert!(a32 <= a64 * 1.1 + 1e-7, "{a32} vs {a64}");
        assert!(p32 <= p64 * 1.1 + 1e-7, "{p32} vs {p64}");
    }
}

#[test]
fn chunking_does_not_change_a_bit() {
    let (positions, masses) = common::plummer(3000, 9);
    let whole = fmm(&positions, &masses, &FmmOptions::default()).expect("whole");
    assert_eq!(whole.info.m2l_chunks, 1);
    for options in [
        FmmOptions::default().with_chunk_items(37),
        FmmOptions::default().with_working_memory(64 << 10),
    ] {
        let chunked = fmm(&positions, &masses, &options).expect("chunked");
        assert!(chunked.info.m2l_chunks > 10, "{:?}", chunked.info);
        assert!(chunked.info.p2p_chunks > 1, "{:?}", chunked.info);
        assert_eq!(chunked.potential, whole.potential);
        assert_eq!(chunked.accel, whole.accel);
    }
}

#[test]
fn sampled_error_diagnostic_matches_the_full_error() {
    let case = common::case("cube_10k");
    let out = fmm(&case.positions, &case.masses, &FmmOptions::default()).expect("fmm");
    let sampled = sampled_error(
        &case.positions,
        &case.masses,
        0.0,
        &out.potential,
        &out.accel,
        500,
        42,
    )
    .expect("sampled");
    assert_eq!(sampled.targets.len(), 500);
    let (full_accel, _) = common::errors(&out, &case.potential, &case.accel);
    // A 500-body sample estimates the error within a factor of 2.
    assert!(sampled.accel < 2.0 * full_accel && sampled.accel > 0.5 * full_accel);
    let again = sampled_error(
        &case.positions,
        &case.masses,
        0.0,
        &out.potential,
        &out.accel,
        500,
        42,
    )
    .expect("again");
    assert_eq!(again, sampled, "keyed by the seed only");
}
