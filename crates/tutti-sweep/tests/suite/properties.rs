//! Property test: random stacks of random shapes (depth 1..3, 3..5 sites, legs 1..3, bonds
//! 1..3, MPS or not at either end) are reproduced exactly when chi_out exceeds every bond.

use crate::common::{dense, matmul, random_train, rel_diff};
use proptest::prelude::*;
use tutti_sweep::{right_orthonormality_error, src, Layer, SrcOptions, TensorTrain, TrainKind};

#[derive(Clone, Debug)]
struct Case {
    sites: usize,
    /// legs[l][k]: the physical dimension between layer l-1 and layer l at site k.
    legs: Vec<Vec<usize>>,
    bonds: Vec<usize>,
    bra: bool,
    ket: bool,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        3usize..=5,
        1usize..=3,
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_flat_map(|(sites, depth, bra, ket, seed)| {
            // A bra needs an operator after it, and a bra times a ket is a number.
            let bra = bra && depth > 1;
            let ket = ket && !bra;
            (
                proptest::collection::vec(proptest::collection::vec(1usize..=3, sites), depth + 1),
                proptest::collection::vec(1usize..=3, depth),
            )
                .prop_map(move |(legs, bonds)| Case {
                    sites,
                    legs,
                    bonds,
                    bra,
                    ket,
                    seed,
                })
        })
}

fn build(case: &Case) -> Vec<TensorTrain<f64>> {
    let depth = case.bonds.len();
    (0..depth)
        .map(|l| {
            let is_bra = case.bra && l == 0;
            let is_ket = case.ket && l == depth - 1;
            let seed = case.seed.wrapping_add(l as u64);
            if is_bra {
                let phys: Vec<(usize, usize)> = case.legs[1].iter().map(|&d| (d, 1)).collect();
                random_train(TrainKind::Mps, &phys, case.bonds[l], 1.0, seed)
            } else if is_ket {
                let phys: Vec<(usize, usize)> = case.legs[l].iter().map(|&d| (d, 1)).collect();
                random_train(TrainKind::Mps, &phys, case.bonds[l], 1.0, seed)
            } else {
                let phys: Vec<(usize, usize)> = (0..case.sites)
                    .map(|k| (case.legs[l][k], case.legs[l + 1][k]))
                    .collect();
                random_train(TrainKind::Mpo, &phys, case.bonds[l], 1.0, seed)
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn random_stacks_are_exact(case in case(), oversample in 0usize..3) {
        let trains = build(&case);
        let depth = trains.len();
        let as_bra = case.bra;
        let mut reference = dense(&trains[0], as_bra);
        for train in &trains[1..] {
            reference = matmul(&reference, &dense(train, false));
        }
        let layers: Vec<&dyn Layer<f64>> = trains.iter().map(|t| t as &dyn Layer<f64>).collect();
        let options = SrcOptions::new(64).with_seed(case.seed).with_oversample(oversample);
        let (out, _) = src(&layers, &options).unwrap();
        let as_bra_out = as_bra && depth > 1;
        let got = dense(&out, as_bra_out);
        let scale: f64 = reference.data.iter().map(|x| x * x).sum::<f64>().sqrt();
        if scale > 1e-12 {
            let err = rel_diff(&got.data, &reference.data);
            prop_assert!(err < 1e-10, "rel err {err:e} for {case:?}");
        }
        prop_assert!(right_orthonormality_error(&out) < 1e-10);
    }
}
