//! Bad input gets clear errors; degenerate input works.

mod common;

use tutti_fmm::{direct, fmm, FmmError, FmmOptions, MAX_ORDER};

fn message(result: Result<tutti_fmm::FmmOutput, FmmError>) -> String {
    result.expect_err("an error").to_string()
}

#[test]
fn zero_and_one_body() {
    let out = fmm(&[], &[], &FmmOptions::default()).expect("N = 0");
    assert!(out.potential.is_empty() && out.accel.is_empty());
    let out = fmm(&[[1.0, 2.0, 3.0]], &[5.0], &FmmOptions::default()).expect("N = 1");
    assert_eq!(out.potential, vec![0.0]);
    assert_eq!(out.accel, vec![[0.0; 3]]);
}

#[test]
fn non_finite_and_mismatched_input() {
    let ok = vec![[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]];
    let options = FmmOptions::default();
    let msg = message(fmm(
        &[[0.0, f64::NAN, 0.0], [1.0, 0.0, 0.0]],
        &[1.0, 1.0],
        &options,
    ));
    assert!(msg.contains("`positions` of body 0 is NaN"), "{msg}");
    let msg = message(fmm(&ok, &[1.0, f64::INFINITY], &options));
    assert!(msg.contains("`masses` of body 1 is inf"), "{msg}");
    let msg = message(fmm(&ok, &[1.0], &options));
    assert!(
        msg.contains("`positions` has 2 bodies, `masses` has 1"),
        "{msg}"
    );
}

#[test]
fn options_out_of_range() {
    let bodies = vec![[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]];
    let masses = vec![1.0, 1.0];
    let cases = [
        (FmmOptions::default().with_order(0), "`order`"),
        (FmmOptions::default().with_order(MAX_ORDER + 1), "1..=12"),
        (FmmOptions::default().with_theta(0.0), "`theta`"),
        (FmmOptions::default().with_theta(1.0), "(0, 1)"),
        (FmmOptions::default().with_theta(f64::NAN), "`theta`"),
        (FmmOptions::default().with_leaf_size(0), "`leaf_size`"),
        (FmmOptions::default().with_max_depth(0), "`max_depth`"),
        (FmmOptions::default().with_max_depth(22), "1..=21"),
        (
            FmmOptions::default().with_softening(-1e-3),
            "`softening`: expected a finite number >= 0, got -0.001",
        ),
        (
            FmmOptions::default().with_softening(f64::INFINITY),
            "`softening`",
        ),
        (FmmOptions::default().with_chunk_items(0), "`chunk_items`"),
        (
            FmmOptions::default().with_working_memory(0),
            "`working_memory`",
        ),
    ];
    for (options, expected) in cases {
        let msg = message(fmm(&bodies, &masses, &options));
        assert!(msg.contains(expected), "{msg} lacks {expected}");
    }
}

#[test]
fn coincident_bodies_need_softening() {
    let positions = vec![
        [0.0, 0.0, 0.0],
        [0.5, 0.5, 0.5],
        [1.0, 0.0, 0.0],
        [0.5, 0.5, 0.5],
    ];
    let masses = vec![1.0; 4];
    let msg = message(fmm(&positions, &masses, &FmmOptions::default()));
    assert!(msg.contains("bodies 1 and 3"), "{msg}");
    assert!(msg.contains("softening"), "{msg}");
    let direct_err = direct(&positions, &masses, 0.0)
        .expect_err("direct")
        .to_string();
    assert!(direct_err.contains("bodies 1 and 3"), "{direct_err}");
    // With softening they are fine, and agree with the direct sum.
    let options = FmmOptions::default().with_softening(0.1);
    let out = fmm(&positions, &masses, &options).expect("softened");
    let (potential, accel) = direct(&positions, &masses, 0.1).expect("direct");
    let (ea, ep) = common::errors(&out, &potential, &accel);
    assert!(ea < 1e-14 && ep < 1e-14);
}

#[test]
fn all_bodies_at_one_point_stay_shallow() {
    let positions = vec![[3.0, -1.0, 2.0]; 500];
    let masses = vec![1.0; 500];
    let options = FmmOptions::default().with_softening(0.01).with_max_depth(8);
    let out = fmm(&positions, &masses, &options).expect("one point");
    // Coincident bodies cannot be separated: one leaf, not a chain down to the depth cap.
    assert_eq!(out.info.depth, 0);
    assert_eq!(out.info.leaves, 1);
    assert!((out.potential[0] + 499.0 / 0.01).abs() < 1e-9);
    assert!(out.accel.iter().all(|a| *a == [0.0; 3]));
}

#[test]
fn heavy_clustering_and_extreme_aspect_ratio_are_bounded_by_the_depth_cap() {
    // Half the bodies in a cluster 1e-12 wide, the rest on a needle 1e6 long.
    let (cube, _) = common::uniform(2000, 14);
    let mut positions: Vec<[f64; 3]> = cube[..1000]
        .iter()
        .map(|p| [p[0] * 1e-12, p[1] * 1e-12, p[2] * 1e-12])
        .collect();
    positions.extend(
        cube[1000..]
            .iter()
            .map(|p| [p[0] * 1e6, p[1] * 1e-3, p[2] * 1e-3]),
    );
    let masses = vec![1.0; positions.len()];
    let options = FmmOptions::default().with_softening(1e-13);
    let out = fmm(&positions, &masses, &options).expect("clustered");
    assert!(out.info.depth <= tutti_fmm::MAX_DEPTH);
    assert!(out.info.nodes < 20 * positions.len(), "{:?}", out.info);
    let (potential, accel) = direct(&positions, &masses, 1e-13).expect("direct");
    let (ea, ep) = common::errors(&out, &potential, &accel);
    println!(
        "clustered: accel {ea:.3e}, potential {ep:.3e}, {:?}",
        out.info
    );
    assert!(ea <= 1e-4 && ep <= 1e-4, "{ea} {ep}");
}
