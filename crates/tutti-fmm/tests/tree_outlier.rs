//! One far outlier among bodies in the unit cube must not squeeze the tree: the tree and the
//! interaction lists stay those of the bodies without it (plus one leaf), so the work stays
//! about the same, and the result stays accurate against the direct sum.

mod common;

use tutti_fmm::{direct, fmm, FmmOptions};

/// The cube's bodies, and the same bodies with one far outlier appended.
fn with_and_without_outlier(n: usize, seed: u64) -> [(Vec<[f64; 3]>, Vec<f64>); 2] {
    let (positions, masses) = common::uniform(n, seed);
    let mut far_positions = positions.clone();
    far_positions.push([1e15, -2e14, 5e14]);
    let mut far_masses = masses.clone();
    far_masses.push(1.0);
    [(positions, masses), (far_positions, far_masses)]
}

#[test]
fn a_far_outlier_adds_one_leaf_and_keeps_the_interactions() {
    let [(positions, masses), (far_positions, far_masses)] = with_and_without_outlier(20_000, 11);
    let options = FmmOptions::default();
    let plain = fmm(&positions, &masses, &options).expect("fmm").info;
    let far = fmm(&far_positions, &far_masses, &options)
        .expect("fmm")
        .info;
    println!(
        "without outlier: {} leaves, depth {}, {} P2P, {} M2L; with: {} leaves, depth {}, {} P2P, {} M2L",
        plain.leaves,
        plain.depth,
        plain.p2p_pairs,
        plain.m2l_pairs,
        far.leaves,
        far.depth,
        far.p2p_pairs,
        far.m2l_pairs
    );
    // Leaves hold at most leaf_size bodies (no crowded leaf at the depth cap), so the near
    // field of the cube is the same as without the outlier.
    assert_eq!(far.leaves, plain.leaves + 1);
    assert_eq!(far.depth, plain.depth + 1);
    assert!(far.leaves * options.leaf_size >= far.bodies);
    assert!(
        far.p2p_pairs <= 2 * plain.p2p_pairs + 2,
        "{} P2P pairs with the outlier, {} without",
        far.p2p_pairs,
        plain.p2p_pairs
    );
    assert!(far.p2p_pairs >= plain.p2p_pairs);
    assert!(far.m2l_pairs <= 2 * plain.m2l_pairs + 2);
}

#[test]
fn a_far_outlier_keeps_the_result_accurate() {
    let [_, (positions, masses)] = with_and_without_outlier(3000, 12);
    let out = fmm(&positions, &masses, &FmmOptions::default()).expect("fmm");
    let (potential, accel) = direct(&positions, &masses, 0.0).expect("direct");
    let (accel_error, potential_error) = common::errors(&out, &potential, &accel);
    println!("outlier: accel {accel_error:.3e}, potential {potential_error:.3e}");
    assert!(accel_error <= 1e-4, "{accel_error}");
    assert!(potential_error <= 1e-4, "{potential_error}");
    // The outlier itself: pulled by the cube's total mass from 1e15 away.
    let last = positions.len() - 1;
    let relative = (out.potential[last] - potential[last]).abs() / potential[last].abs();
    assert!(relative <= 1e-6, "outlier potential off by {relative:.3e}");
}
