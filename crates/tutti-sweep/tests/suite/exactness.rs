//! SRC with chi_out above every exact bond reproduces the dense product (naive reference).

use crate::common::{dense, matmul, random_train, rel_diff, Dense};
use tutti_sweep::{
    compress_exact, exact_product, right_orthonormality_error, src, Complex64, Layer, Scalar,
    SrcOptions, TensorTrain, TrainKind,
};

const N: usize = 5;

/// The dense product of a stack, by naive matrix products of each layer's dense operator.
fn dense_stack<T: Scalar>(stack: &[&TensorTrain<T>]) -> Dense<T> {
    let last = stack.len() - 1;
    let mut product = dense(stack[0], stack[0].kind() == TrainKind::Mps && last > 0);
    for layer in &stack[1..] {
        product = matmul(&product, &dense(layer, false));
    }
    product
}

/// SRC, exact product and exact compression of `stack` against the dense product.
fn check<T: Scalar>(label: &str, stack: &[&TensorTrain<T>], oversample: usize) {
    let layers: Vec<&dyn Layer<T>> = stack.iter().map(|t| *t as &dyn Layer<T>).collect();
    let reference = dense_stack(stack);
    let as_bra = stack[0].kind() == TrainKind::Mps && stack.len() > 1;
    for seed in [0, 1] {
        let options = SrcOptions::new(64)
            .with_seed(seed)
            .with_oversample(oversample);
        let (out, info) = src(&layers, &options).unwrap();
        let got = dense(&out, as_bra);
        let err = rel_diff(&got.data, &reference.data);
        let ortho = right_orthonormality_error(&out);
        println!(
            "{label}: seed {seed} rel err {err:.2e}, right-orthonormality {ortho:.2e}, bonds {:?}",
            info.bonds
        );
        assert!(err < 1e-10, "{label}: rel err {err:e}");
        assert!(ortho < 1e-10, "{label}: orthonormality {ortho:e}");
        assert!(info.bonds.iter().all(|&b| b <= 64));
    }
    let exact = exact_product(&layers).unwrap();
    assert!(rel_diff(&dense(&exact, as_bra).data, &reference.data) < 1e-12);
    let (compressed, info) = compress_exact(&layers, 64, 0.0).unwrap();
    assert!(rel_diff(&dense(&compressed, as_bra).data, &reference.data) < 1e-10);
    assert!(info.relative_error < 1e-12);
    assert!(right_orthonormality_error(&compressed) < 1e-10);
}

fn mpo<T: Scalar>(phys: &[(usize, usize)], bond: usize, seed: u64) -> TensorTrain<T> {
    random_train(TrainKind::Mpo, phys, bond, 1.0, seed)
}

fn mps<T: Scalar>(d: &[usize], bond: usize, seed: u64) -> TensorTrain<T> {
    let phys: Vec<(usize, usize)> = d.iter().map(|&d| (d, 1)).collect();
    random_train(TrainKind::Mps, &phys, bond, 1.0, seed)
}

fn all_stacks<T: Scalar>(oversample: usize) {
    let square = [(2, 2); N];
    // Rectangular legs: C maps 2 -> 3 at some sites.
    let rect: Vec<(usize, usize)> = (0..N)
        .map(|k| (2, if k % 2 == 0 { 3 } else { 2 }))
        .collect();
    let a = mpo::<T>(&square, 3, 1);
    let b = mpo::<T>(&square, 2, 2);
    let c = mpo::<T>(&rect, 2, 3);
    let psi_rect = mps::<T>(&rect.iter().map(|r| r.1).collect::<Vec<_>>(), 3, 4);
    let psi = mps::<T>(&[2; N], 3, 5);
    let phi = mps::<T>(&[2; N], 2, 6);
    check("A psi", &[&a, &psi], oversample);
    check("A B", &[&a, &b], oversample);
    check("A B psi", &[&a, &b, &psi], oversample);
    check("A B C psi", &[&a, &b, &c, &psi_rect], oversample);
    check("phi A", &[&phi, &a], oversample);
    check("phi A B", &[&phi, &a, &b], oversample);
    check("psi", &[&psi], oversample);
    check("A", &[&a], oversample);
}

#[test]
fn real_stacks_are_exact() {
    all_stacks::<f64>(0);
}

#[test]
fn real_stacks_are_exact_with_oversampling() {
    all_stacks::<f64>(4);
}

#[test]
fn complex_stacks_are_exact() {
    all_stacks::<Complex64>(0);
}

#[test]
fn identity_layers_reproduce_the_operator() {
    let identity = {
        let cores = (0..N)
            .map(|_| (vec![1, 2, 2, 1], vec![1.0, 0.0, 0.0, 1.0]))
            .collect();
        TensorTrain::<f64>::from_arrays(TrainKind::Mpo, cores).unwrap()
    };
    let a = mpo::<f64>(&[(2, 2); N], 3, 9);
    let (out, _) = src(
        &[&identity as &dyn Layer<f64>, &a, &identity],
        &SrcOptions::new(64),
    )
    .unwrap();
    let err = rel_diff(&dense(&out, false).data, &dense(&a, false).data);
    assert!(err < 1e-10, "{err:e}");
}

#[test]
fn two_sites_fall_back_to_exact() {
    let a = mpo::<f64>(&[(2, 2); 2], 3, 1);
    let psi = mps::<f64>(&[2; 2], 2, 2);
    let (out, info) = src(&[&a as &dyn Layer<f64>, &psi], &SrcOptions::new(8)).unwrap();
    assert!(info.exact_fallback);
    let reference = matmul(&dense(&a, false), &dense(&psi, false));
    assert!(rel_diff(&dense(&out, false).data, &reference.data) < 1e-12);
}

#[test]
fn inner_norm_distance_match_dense_vectors() {
    let x = mps::<Complex64>(&[2, 3, 2, 2, 3], 3, 31);
    let y = mps::<Complex64>(&[2, 3, 2, 2, 3], 2, 32);
    let (dx, dy) = (dense(&x, false).data, dense(&y, false).data);
    let dot: Complex64 = dx.iter().zip(&dy).map(|(a, b)| a.conj() * b).sum();
    let got = tutti_sweep::inner(&x, &y).unwrap();
    assert!(
        (got - dot).norm() < 1e-13 * dot.norm().max(1.0),
        "{got} vs {dot}"
    );
    let nx: f64 = dx.iter().map(|a| a.norm_sqr()).sum::<f64>().sqrt();
    assert!((tutti_sweep::norm(&x) - nx).abs() < 1e-13 * nx);
    let diff: f64 = dx
        .iter()
        .zip(&dy)
        .map(|(a, b)| (a - b).norm_sqr())
        .sum::<f64>()
        .sqrt();
    let got = tutti_sweep::distance(&x, &y).unwrap();
    assert!((got - diff).abs() < 1e-13 * diff, "{got} vs {diff}");
    // The distance of a train to itself is zero to rounding, not sqrt(rounding).
    assert!(tutti_sweep::distance(&x, &x).unwrap() < 1e-14 * nx);
}
