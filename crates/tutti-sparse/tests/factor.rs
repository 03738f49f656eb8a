//! The multifrontal LU against dense LU on small matrices, with trees made by hand (one
//! dense front; nested dissection of a path), and its error cases.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use faer::Mat;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
mod common;

use common::{path_tree, random_tridiagonal, rhs};
use tutti_sparse::{
    CsrMatrix, FactorOptions, Factorization, SeparatorTree, SolveOptions, SparseError, Symbolic,
};

/// One front holding every unknown: the multifrontal LU is a dense LU.
fn one_front(n: usize) -> SeparatorTree {
    SeparatorTree::new((0..n).collect(), &[(0, n)], &[None]).unwrap()
}

/// A random dense-ish sparse matrix (density about a third), diagonal present.
fn random_sparse(n: usize, seed: u64) -> CsrMatrix {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut triplets = Vec::new();
    for i in 0..n {
        triplets.push((i, i, rng.random_range(-1.0..1.0)));
        for j in 0..n {
            if i != j && rng.random_bool(0.3) {
                triplets.push((i, j, rng.random_range(-1.0..1.0)));
            }
        }
    }
    CsrMatrix::from_triplets(n, n, &triplets).unwrap()
}

fn dense(a: &CsrMatrix) -> Mat<f64> {
    let mut m = Mat::zeros(a.rows(), a.cols());
    for i in 0..a.rows() {
        let (cols, vals) = a.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            m[(i, j)] = v;
        }
    }
    m
}

/// x solving A x = b by faer's dense LU with partial pivoting.
fn dense_solve(a: &CsrMatrix, b: &[f64]) -> Vec<f64> {
    let lu = dense(a).partial_piv_lu();
    let rhs = Mat::from_fn(b.len(), 1, |i, _| b[i]);
    let x = faer::linalg::solvers::Solve::solve(&lu, &rhs);
    (0..b.len()).map(|i| x[(i, 0)]).collect()
}

fn factor(a: &CsrMatrix, tree: SeparatorTree) -> Factorization {
    let symbolic = Arc::new(Symbolic::new(a, tree).unwrap());
    Factorization::new(symbolic, a, FactorOptions::default()).unwrap()
}

fn max_rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

#[test]
fn one_front_is_dense_lu() {
    for (n, seed) in [(1, 1), (5, 2), (40, 3), (100, 4)] {
        let a = random_sparse(n, seed);
        let b = rhs(n, seed + 100);
        let lu = factor(&a, one_front(n));
        let mut x = b.clone();
        let info = lu
            .solve_in_place(&mut x, 1, &SolveOptions::default())
            .unwrap();
        let want = dense_solve(&a, &b);
        // Condition numbers of these random matrices stay below ~1e4: 1e-10 is generous.
        assert!(
            max_rel_diff(&x, &want) < 1e-10,
            "n {n}: {}",
            max_rel_diff(&x, &want)
        );
        assert!(info.backward_error < 1e-14, "n {n}: {info:?}");
        assert_eq!(lu.perturbed_pivots(), 0);
    }
}

#[test]
fn a_dissected_path_solves_to_the_dense_answer() {
    for (n, leaf) in [(7, 3), (64, 4), (1000, 8), (1000, 1)] {
        let a = random_tridiagonal(n, n as u64);
        let tree = path_tree(n, leaf);
        let symbolic = Symbolic::new(&a, tree.clone()).unwrap();
        let stats = symbolic.statistics();
        // A path dissected by single vertices fills in nothing beyond its separators' rows:
        // every front is at most its leaf plus two separators.
        assert!(stats.largest_front <= leaf + 2, "{stats:?}");
        let lu = Factorization::new(Arc::new(symbolic), &a, FactorOptions::default()).unwrap();
        let b = rhs(n, 7);
        let mut x = b.clone();
        let info = lu
            .solve_in_place(&mut x, 1, &SolveOptions::default())
            .unwrap();
        assert!(info.backward_error < 1e-14, "n {n}: {info:?}");
        let want = dense_solve(&a, &b);
        assert!(
            max_rel_diff(&x, &want) < 1e-9,
            "n {n}: {}",
            max_rel_diff(&x, &want)
        );
    }
}

#[test]
fn many_right_hand_sides_give_the_bits_of_one_at_a_time() {
    let n = 200;
    let a = random_tridiagonal(n, 11);
    let lu = factor(&a, path_tree(n, 5));
    let columns: Vec<Vec<f64>> = (0..4).map(|k| rhs(n, 20 + k)).collect();
    let mut together: Vec<f64> = columns.concat();
    lu.solve_in_place(&mut together, 4, &SolveOptions::default())
        .unwrap();
    for (k, column) in columns.iter().enumerate() {
        let mut alone = column.clone();
        lu.solve_in_place(&mut alone, 1, &SolveOptions::default())
            .unwrap();
        assert_eq!(&together[k * n..(k + 1) * n], alone.as_slice());
    }
}

#[test]
fn a_refactorization_gives_the_bits_of_a_fresh_factorization() {
    let n = 300;
    let a = random_tridiagonal(n, 3);
    let b = random_tridiagonal(n, 4);
    let mut lu = factor(&a, path_tree(n, 6));
    lu.refactor(&b).unwrap();
    let fresh = factor(&b, path_tree(n, 6));
    let (mut x, mut y) = (rhs(n, 1), rhs(n, 1));
    lu.solve_in_place(&mut x, 1, &SolveOptions::default())
        .unwrap();
    fresh
        .solve_in_place(&mut y, 1, &SolveOptions::default())
        .unwrap();
    assert_eq!(x, y);
}

#[test]
fn a_zero_pivot_without_a_fully_summed_alternative_is_perturbed_and_refined() {
    // [[0, 1], [1, 0]] dissected into a leaf {0} under a root {1}: the leaf's only pivot
    // is zero and cannot be swapped; perturbed, then refinement recovers x = (b1, b0).
    let a = CsrMatrix::from_triplets(
        3,
        3,
        &[
            (0, 1, 1.0),
            (1, 0, 1.0),
            (1, 2, 0.5),
            (2, 1, 0.5),
            (2, 2, 3.0),
        ],
    )
    .unwrap();
    let tree = SeparatorTree::new(
        vec![0, 2, 1],
        &[(0, 1), (1, 2), (2, 3)],
        &[Some(2), Some(2), None],
    )
    .unwrap();
    let lu = factor(&a, tree);
    assert_eq!(lu.perturbed_pivots(), 1);
    let b = [1.0, 2.0, 3.0];
    let mut x = b.to_vec();
    let info = lu
        .solve_in_place(&mut x, 1, &SolveOptions::default())
        .unwrap();
    let want = dense_solve(&a, &b);
    assert!(max_rel_diff(&x, &want) < 1e-12, "{x:?} vs {want:?}");
    assert!(info.refinements >= 1, "{info:?}");
}

#[test]
fn a_singular_matrix_is_an_error_not_a_solution() {
    let a = CsrMatrix::from_triplets(2, 2, &[(0, 0, 1.0), (0, 1, 1.0), (1, 0, 1.0), (1, 1, 1.0)])
        .unwrap();
    let lu = factor(&a, one_front(2));
    let mut x = vec![1.0, 0.0];
    let err = lu
        .solve_in_place(&mut x, 1, &SolveOptions::default())
        .unwrap_err();
    assert!(
        matches!(err, SparseError::NumericallySingular { perturbed: 1, .. }),
        "{err}"
    );
}

#[test]
fn bad_inputs_are_clear_errors() {
    let a = random_tridiagonal(10, 1);
    let lu = factor(&a, path_tree(10, 3));
    // Another pattern.
    let other = random_sparse(10, 2);
    let mut copy = lu.clone();
    assert!(matches!(
        copy.refactor(&other),
        Err(SparseError::PatternMismatch { .. })
    ));
    // Wrong lengths and non-finite right-hand sides.
    let mut short = vec![1.0; 9];
    assert!(matches!(
        lu.solve_in_place(&mut short, 1, &SolveOptions::default()),
        Err(SparseError::LengthMismatch { .. })
    ));
    let mut nan = vec![1.0; 10];
    nan[4] = f64::NAN;
    assert!(matches!(
        lu.solve_in_place(&mut nan, 1, &SolveOptions::default()),
        Err(SparseError::NonFiniteRightHandSide {
            row: 4,
            column: 0,
            ..
        })
    ));
    // An empty row is structurally singular; a non-square matrix is refused.
    let empty = CsrMatrix::from_triplets(3, 3, &[(0, 0, 1.0), (2, 2, 1.0), (2, 1, 1.0)]).unwrap();
    assert!(matches!(
        Symbolic::new(&empty, one_front(3)),
        Err(SparseError::StructurallySingular { .. })
    ));
    let wide = CsrMatrix::from_triplets(2, 3, &[(0, 0, 1.0)]).unwrap();
    assert!(matches!(
        Symbolic::new(&wide, one_front(2)),
        Err(SparseError::NotSquare { .. })
    ));
    // A tree that is no assembly tree for the pattern: leaves {0} and {1} side by side
    // although 0 and 1 are coupled.
    let coupled = random_tridiagonal(3, 5);
    let wrong = SeparatorTree::new(
        vec![0, 1, 2],
        &[(0, 1), (1, 2), (2, 3)],
        &[Some(2), Some(2), None],
    )
    .unwrap();
    assert!(Symbolic::new(&coupled, wrong).is_err());
}
