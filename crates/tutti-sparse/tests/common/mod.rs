//! Helpers shared by the sparse solver's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use faer::sparse::{SparseColMat, Triplet};
use faer::Mat;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tutti_sparse::{CsrMatrix, Scalar, SeparatorTree};

/// Nested dissection of the path 0 - 1 - ... - n-1 down to leaves of at most `leaf`
/// vertices: the middle vertex separates.
pub fn path_tree(n: usize, leaf: usize) -> SeparatorTree {
    fn dissect(
        range: std::ops::Range<usize>,
        leaf: usize,
        order: &mut Vec<usize>,
        ranges: &mut Vec<(usize, usize)>,
        parents: &mut Vec<Option<usize>>,
    ) -> usize {
        if range.len() <= leaf {
            let first = order.len();
            order.extend(range);
            ranges.push((first, order.len()));
            parents.push(None);
            return ranges.len() - 1;
        }
        let middle = range.start + range.len() / 2;
        let left = dissect(range.start..middle, leaf, order, ranges, parents);
        let right = dissect(middle + 1..range.end, leaf, order, ranges, parents);
        let first = order.len();
        order.push(middle);
        ranges.push((first, first + 1));
        parents.push(None);
        let me = ranges.len() - 1;
        parents[left] = Some(me);
        parents[right] = Some(me);
        me
    }
    let (mut order, mut ranges, mut parents) = (Vec::new(), Vec::new(), Vec::new());
    dissect(0..n, leaf, &mut order, &mut ranges, &mut parents);
    SeparatorTree::new(order, &ranges, &parents).unwrap()
}

/// A random matrix with the pattern of a path (tridiagonal), unsymmetric values, a
/// diagonal of random sign and size: pivoting matters inside the fronts.
pub fn random_tridiagonal(n: usize, seed: u64) -> CsrMatrix {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut triplets = Vec::new();
    for i in 0..n {
        triplets.push((i, i, rng.random_range(-2.0..2.0)));
        if i + 1 < n {
            triplets.push((i, i + 1, rng.random_range(-1.0..1.0)));
            triplets.push((i + 1, i, rng.random_range(-1.0..1.0)));
        }
    }
    CsrMatrix::from_triplets(n, n, &triplets).unwrap()
}

/// A random right-hand side.
pub fn rhs(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// x from faer's sparse LU (COLAMD, supernodal), real or complex: an independent solver.
pub fn faer_solve<T: Scalar>(a: &CsrMatrix<T>, b: &[T]) -> Vec<T> {
    let mut triplets = Vec::with_capacity(a.nnz());
    for i in 0..a.rows() {
        let (cols, vals) = a.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            triplets.push(Triplet::new(i, j, v));
        }
    }
    let m = SparseColMat::<usize, T>::try_new_from_triplets(a.rows(), a.cols(), &triplets).unwrap();
    let lu = m.sp_lu().unwrap();
    let rhs = Mat::from_fn(b.len(), 1, |i, _| b[i]);
    let x = faer::linalg::solvers::Solve::solve(&lu, &rhs);
    (0..b.len()).map(|i| x[(i, 0)]).collect()
}
