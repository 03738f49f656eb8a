//! Bad input gets a clear error naming what is wrong.

use crate::common::{dense, random_train};
use tutti_sweep::{
    heisenberg_xxz, inner, src, Layer, SrcOptions, SweepError, TensorTrain, TrainKind,
};

fn mps(n: usize, d: usize, seed: u64) -> TensorTrain<f64> {
    random_train(TrainKind::Mps, &vec![(d, 1); n], 2, 1.0, seed)
}

fn mpo(n: usize, d_out: usize, d_in: usize, seed: u64) -> TensorTrain<f64> {
    random_train(TrainKind::Mpo, &vec![(d_out, d_in); n], 2, 1.0, seed)
}

#[test]
fn malformed_trains() {
    let bond = TensorTrain::<f64>::from_arrays(
        TrainKind::Mps,
        vec![(vec![1, 2, 3], vec![0.0; 6]), (vec![2, 2, 1], vec![0.0; 4])],
    )
    .unwrap_err();
    assert!(
        bond.to_string()
            .contains("site 0 has right bond 3 but site 1 has left bond 2"),
        "{bond}"
    );
    let outer =
        TensorTrain::<f64>::from_arrays(TrainKind::Mps, vec![(vec![2, 2, 1], vec![0.0; 4])])
            .unwrap_err();
    assert!(
        outer.to_string().contains("first left bond is 2"),
        "{outer}"
    );
    let nan =
        TensorTrain::<f64>::from_arrays(TrainKind::Mps, vec![(vec![1, 2, 1], vec![0.0, f64::NAN])])
            .unwrap_err();
    assert!(
        matches!(
            nan,
            SweepError::NonFinite {
                site: 0,
                index: 1,
                ..
            }
        ),
        "{nan}"
    );
    let inf = TensorTrain::<f64>::from_arrays(
        TrainKind::Mpo,
        vec![(vec![1, 1, 1, 1], vec![f64::INFINITY])],
    )
    .unwrap_err();
    assert!(matches!(inf, SweepError::NonFinite { .. }), "{inf}");
    let empty = TensorTrain::<f64>::from_arrays(TrainKind::Mps, vec![]).unwrap_err();
    assert!(matches!(empty, SweepError::Empty { .. }), "{empty}");
    let zero =
        TensorTrain::<f64>::from_arrays(TrainKind::Mps, vec![(vec![1, 0, 1], vec![])]).unwrap_err();
    assert!(matches!(zero, SweepError::BadShape { .. }), "{zero}");
    let axes = TensorTrain::<f64>::from_arrays(TrainKind::Mpo, vec![(vec![1, 2, 1], vec![0.0; 2])])
        .unwrap_err();
    assert!(axes.to_string().contains("4 axes"), "{axes}");
    let len = TensorTrain::<f64>::from_arrays(TrainKind::Mps, vec![(vec![1, 2, 1], vec![0.0; 3])])
        .unwrap_err();
    assert!(len.to_string().contains("2 entries, got 3"), "{len}");
}

#[test]
fn malformed_stacks() {
    let (a, psi, phi) = (mpo(4, 2, 2, 1), mps(4, 2, 2), mps(4, 2, 3));
    let opts = SrcOptions::new(4);
    let run = |layers: &[&dyn Layer<f64>], opts: &SrcOptions| src(layers, opts).unwrap_err();

    let wide = mpo(4, 3, 3, 4);
    let err = run(&[&wide, &psi], &opts);
    assert!(
        matches!(
            err,
            SweepError::PhysicalMismatch {
                site: 0,
                upper: 0,
                upper_in: 3,
                lower: 1,
                lower_out: 2
            }
        ),
        "{err}"
    );
    let err = run(&[&a, &mps(5, 2, 5)], &opts);
    assert!(matches!(err, SweepError::LengthMismatch { .. }), "{err}");
    let err = run(&[&a, &psi, &a], &opts);
    assert!(
        err.to_string().contains("layer 1") && err.to_string().contains("middle"),
        "{err}"
    );
    let err = run(&[&phi, &psi], &opts);
    assert!(matches!(err, SweepError::InvalidStack { .. }), "{err}");
    let err = run(&[], &opts);
    assert!(matches!(err, SweepError::Empty { .. }), "{err}");
    let err = run(&[&a, &psi], &SrcOptions::new(0));
    assert!(
        matches!(
            err,
            SweepError::InvalidOption {
                name: "chi_out",
                ..
            }
        ),
        "{err}"
    );
    let err = run(&[&a, &psi], &SrcOptions::new(4).with_cutoff(f64::NAN));
    assert!(
        matches!(err, SweepError::InvalidOption { name: "cutoff", .. }),
        "{err}"
    );
    let one = mps(1, 2, 6);
    let err = run(&[&one], &opts);
    assert!(err.to_string().contains("single site"), "{err}");
    let err = inner(&psi, &mps(5, 2, 7)).unwrap_err();
    assert!(matches!(err, SweepError::LengthMismatch { .. }), "{err}");
    assert!(heisenberg_xxz(1, 1.0, 1.0, 0.0).is_err());
    assert!(heisenberg_xxz(4, f64::NAN, 1.0, 0.0).is_err());
}

/// The dense XXZ Hamiltonian by Kronecker products, against the MPO built in code.
#[test]
fn heisenberg_mpo_matches_its_dense_hamiltonian() {
    let (j, delta, h) = (1.0, 0.5, 0.3);
    for n in [2usize, 3, 4, 5] {
        let dim = 1 << n;
        let mut reference = vec![0.0; dim * dim];
        // Basis (up, down): bit 0 = up; Sz = +1/2 on up. Site 0 is the most significant bit.
        let spin = |state: usize, site: usize| (state >> (n - 1 - site)) & 1;
        let sz = |state: usize, site: usize| if spin(state, site) == 0 { 0.5 } else { -0.5 };
        for state in 0..dim {
            for site in 0..n {
                reference[state * dim + state] -= h * sz(state, site);
            }
            for site in 0..n - 1 {
                reference[state * dim + state] += delta * sz(state, site) * sz(state, site + 1);
                if spin(state, site) != spin(state, site + 1) {
                    let flipped = state ^ (1 << (n - 1 - site)) ^ (1 << (n - 2 - site));
                    reference[flipped * dim + state] += j / 2.0;
                }
            }
        }
        let mpo = heisenberg_xxz(n, j, delta, h).unwrap();
        let got = dense(&mpo, false);
        let err = crate::common::rel_diff(&got.data, &reference);
        assert!(err < 1e-14, "n {n}: {err:e}");
    }
}
