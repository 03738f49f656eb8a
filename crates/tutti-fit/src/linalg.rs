//! Small dense factorizations for the solver (faer underneath; n = the parameter count).
//!
//! Everything runs with [`Par::Seq`]: the matrices are n x n or (a few n) x n, and a fixed
//! parallelism keeps the bits independent of the rank and thread pool that computes them.

use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::linalg::cholesky::llt;
use faer::linalg::qr::no_pivoting::factor as qr;
use faer::linalg::triangular_solve::solve_upper_triangular_in_place;
use faer::reborrow::ReborrowMut;
use faer::{Mat, MatMut, MatRef, Par};

/// Solves `a x = b` for a symmetric positive definite `a` (n x n, row-major) by faer's
/// Cholesky (`LL^T`); `None` when `a` is not numerically positive definite.
pub(crate) fn cholesky_solve(a: &[f64], b: &[f64]) -> Option<Vec<f64>> {
    let n = b.len();
    // Row-major and symmetric: read as column-major it is the same matrix.
    let mut factor = MatRef::from_column_major_slice(a, n, n).to_owned();
    let mut buffer = MemBuffer::try_new(llt::factor::cholesky_in_place_scratch::<f64>(
        n,
        Par::Seq,
        Default::default(),
    ))
    .ok()?;
    llt::factor::cholesky_in_place(
        factor.as_mut(),
        Default::default(),
        Par::Seq,
        MemStack::new(&mut buffer),
        Default::default(),
    )
    .ok()?;
    let mut x = Mat::<f64>::from_fn(n, 1, |i, _| b[i]);
    llt::solve::solve_in_place(
        factor.as_ref(),
        x.as_mut(),
        Par::Seq,
        MemStack::new(&mut MemBuffer::new(StackReq::EMPTY)),
    );
    let x: Vec<f64> = (0..n).map(|i| x[(i, 0)]).collect();
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// The bytes of scratch a QR of an `m x n` matrix needs besides the matrix itself (its
/// Householder coefficients and faer's workspace), for the plan.
pub(crate) fn qr_scratch_bytes(m: usize, n: usize) -> u64 {
    let block = qr::recommended_block_size::<f64>(m.max(1), n.max(1));
    let workspace = qr::qr_in_place_scratch::<f64>(m, n, block, Par::Seq, Default::default())
        .unaligned_bytes_required();
    let coefficients = block.saturating_mul(m.min(n)).saturating_mul(8);
    (workspace.saturating_add(coefficients)) as u64
}

/// The upper triangle of `R` of a QR of the `m x n` matrix `a` (any layout), factored in
/// place (`a` is overwritten), packed row by row into `out` (`n (n + 1) / 2` values; rows
/// past `min(m, n)` are zero), so that `R^T R = a^T a`.
pub(crate) fn packed_r_in_place(mut a: MatMut<'_, f64>, out: &mut [f64]) {
    out.fill(0.0);
    let (m, n) = a.shape();
    if m == 0 || n == 0 {
        return;
    }
    let r = m.min(n);
    let block = qr::recommended_block_size::<f64>(m, n);
    let mut coefficients = Mat::<f64>::zeros(block, r);
    let mut buffer = MemBuffer::new(qr::qr_in_place_scratch::<f64>(
        m,
        n,
        block,
        Par::Seq,
        Default::default(),
    ));
    qr::qr_in_place(
        a.rb_mut(),
        coefficients.as_mut(),
        Par::Seq,
        MemStack::new(&mut buffer),
        Default::default(),
    );
    let mut k = 0;
    for i in 0..n {
        for j in i..n {
            if i < r {
                out[k] = a[(i, j)];
            }
            k += 1;
        }
    }
}

/// `(R^T R)^-1` for the `R` of the QR of the stacked packed triangles `blocks` (each
/// `n (n + 1) / 2` values, in the order given): the inverse of the sum of their `R_e^T R_e`,
/// formed as `R^-1 R^-T` without ever forming `R^T R` (its condition number is the square of
/// `R`'s), and the rank `n`. When `R` is numerically singular (a diagonal entry at most
/// `n * eps` times the largest) it is the pseudo-inverse `V S^-2 V^T` from the SVD `R = U S
/// V^T`, singular values at most `n * eps` times the largest left out, with their count as
/// the rank. Row-major n x n, exactly symmetric; `None` when the QR or the SVD fails or the
/// result is not finite.
pub(crate) fn covariance_from_packed_r<'a>(
    blocks: impl ExactSizeIterator<Item = &'a [f64]>,
    n: usize,
) -> Option<(Vec<f64>, usize)> {
    let rows = blocks.len().checked_mul(n)?;
    let mut stacked = Mat::<f64>::zeros(rows, n);
    for (e, packed) in blocks.enumerate() {
        let mut k = 0;
        for i in 0..n {
            for j in i..n {
                stacked[(e * n + i, j)] = packed[k];
                k += 1;
            }
        }
    }
    let r = triangular_factor(stacked, n)?;
    if !is_regular(r.as_ref()) {
        return pseudo_inverse_covariance(r.as_ref());
    }
    // R^-1 by solving R X = I, then C = X X^T, upper triangle mirrored.
    let mut inverse = Mat::<f64>::identity(n, n);
    solve_upper_triangular_in_place(r.as_ref(), inverse.as_mut(), Par::Seq);
    let mut covariance = vec![0.0; n * n];
    for i in 0..n {
        for j in i..n {
            // X is upper triangular: row i is zero before column i.
            let value: f64 = (j..n).map(|k| inverse[(i, k)] * inverse[(j, k)]).sum();
            covariance[i * n + j] = value;
            covariance[j * n + i] = value;
        }
    }
    covariance
        .iter()
        .all(|v| v.is_finite())
        .then_some((covariance, n))
}

/// Whether the triangular `r` is numerically regular: every diagonal entry finite and above
/// `n * eps` times the largest.
fn is_regular(r: MatRef<'_, f64>) -> bool {
    let n = r.ncols();
    let largest = (0..n).map(|i| r[(i, i)].abs()).fold(0.0, f64::max);
    let threshold = n as f64 * f64::EPSILON * largest;
    largest.is_finite()
        && largest > 0.0
        && (0..n).all(|i| {
            let d = r[(i, i)].abs();
            d.is_finite() && d > threshold
        })
}

/// The pseudo-inverse of `R^T R` and its rank, from the SVD of `R` (see
/// [`covariance_from_packed_r`]).
fn pseudo_inverse_covariance(r: MatRef<'_, f64>) -> Option<(Vec<f64>, usize)> {
    let n = r.ncols();
    let svd = r.thin_svd().ok()?;
    let (s, v) = (svd.S().column_vector(), svd.V());
    let largest = (0..n).map(|i| s[i].abs()).fold(0.0, f64::max);
    let threshold = n as f64 * f64::EPSILON * largest;
    let kept: Vec<usize> = (0..n)
        .filter(|&k| s[k].is_finite() && s[k].abs() > threshold)
        .collect();
    let mut covariance = vec![0.0; n * n];
    for i in 0..n {
        for j in i..n {
            let value: f64 = kept
                .iter()
                .map(|&k| v[(i, k)] * v[(j, k)] / (s[k] * s[k]))
                .sum();
            covariance[i * n + j] = value;
            covariance[j * n + i] = value;
        }
    }
    covariance
        .iter()
        .all(|v| v.is_finite())
        .then_some((covariance, kept.len()))
}

/// The n x n upper triangular `R` of a QR of `a` (`rows x n`, rows >= n), or `None` when
/// there are fewer rows than columns or no workspace.
fn triangular_factor(mut a: Mat<f64>, n: usize) -> Option<Mat<f64>> {
    let m = a.nrows();
    if m < n || n == 0 {
        return None;
    }
    let block = qr::recommended_block_size::<f64>(m, n);
    let mut coefficients = Mat::<f64>::zeros(block, n);
    let mut buffer = MemBuffer::try_new(qr::qr_in_place_scratch::<f64>(
        m,
        n,
        block,
        Par::Seq,
        Default::default(),
    ))
    .ok()?;
    qr::qr_in_place(
        a.as_mut(),
        coefficients.as_mut(),
        Par::Seq,
        MemStack::new(&mut buffer),
        Default::default(),
    );
    Some(Mat::<f64>::from_fn(n, n, |i, j| {
        if i <= j {
            a[(i, j)]
        } else {
            0.0
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solves_a_known_system() {
        // a = [[4, 2], [2, 3]], b = [2, 1] -> x = [0.5, 0].
        let a = [4.0, 2.0, 2.0, 3.0];
        let x = cholesky_solve(&a, &[2.0, 1.0]).unwrap();
        assert!((x[0] - 0.5).abs() < 1e-15 && x[1].abs() < 1e-15);
        // Indefinite and NaN matrices are refused.
        assert!(cholesky_solve(&[1.0, 2.0, 2.0, 1.0], &[1.0, 1.0]).is_none());
        assert!(cholesky_solve(&[f64::NAN, 0.0, 0.0, 1.0], &[1.0, 1.0]).is_none());
    }

    #[test]
    fn the_covariance_of_split_blocks_is_the_inverse_of_the_summed_normal_matrix() {
        // J = [[2, 1], [0, 1], [1, 1]] split into blocks of 1 and 2 rows:
        // J^T J = [[5, 3], [3, 3]], inverse [[3, -3], [-3, 5]] / 6.
        let packed = |mut a: Vec<f64>, m: usize| {
            let mut out = [0.0; 3];
            packed_r_in_place(MatMut::from_row_major_slice_mut(&mut a, m, 2), &mut out);
            out
        };
        let first = packed(vec![2.0, 1.0], 1);
        let mut second = packed(vec![0.0, 1.0, 1.0, 1.0], 2);
        let (covariance, rank) =
            covariance_from_packed_r([&first[..], &second[..]].into_iter(), 2).unwrap();
        assert_eq!(rank, 2);
        for (got, want) in covariance.iter().zip([0.5, -0.5, -0.5, 5.0 / 6.0]) {
            assert!((got - want).abs() < 1e-15, "{covariance:?}");
        }
        // Collinear columns: J = [[1, 2], [2, 4]] has rank 1 and J^T J = 5 [[1, 2], [2, 4]]
        // = 25 u u^T with u = (1, 2) / sqrt 5, whose pseudo-inverse is u u^T / 25 =
        // [[1, 2], [2, 4]] / 125.
        second = packed(vec![1.0, 2.0, 2.0, 4.0], 2);
        let (covariance, rank) = covariance_from_packed_r([&second[..]].into_iter(), 2).unwrap();
        assert_eq!(rank, 1);
        for (got, want) in covariance.iter().zip([1.0, 2.0, 2.0, 4.0]) {
            assert!((got - want / 125.0).abs() < 1e-15, "{covariance:?}");
        }
        assert!(qr_scratch_bytes(100, 3) > 0);
    }
}
