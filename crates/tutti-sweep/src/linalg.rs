//! Thin QR and SVD of row-major matrices (faer underneath).

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::householder;
use faer::linalg::qr::no_pivoting::factor;
use faer::{Conj, Mat, MatRef, Par};

use crate::{Scalar, SweepError};

/// A thin QR of a row-major `m x n` matrix: `Q` (`m x r`, orthonormal columns) and `R`
/// (`r x n`), both row-major, `r = min(m, n)`.
pub(crate) fn qr<T: Scalar>(a: &[T], m: usize, n: usize) -> (Vec<T>, Vec<T>) {
    let r = m.min(n);
    if r == 0 {
        return (Vec::new(), Vec::new());
    }
    let view = MatRef::from_row_major_slice(a, m, n);
    let qr = view.qr();
    let q = qr.compute_thin_Q();
    let rr = qr.thin_R();
    let mut q_out = Vec::with_capacity(m * r);
    for i in 0..m {
        for j in 0..r {
            q_out.push(q[(i, j)]);
        }
    }
    let mut r_out = Vec::with_capacity(r * n);
    for i in 0..r {
        for j in 0..n {
            r_out.push(rr[(i, j)]);
        }
    }
    (q_out, r_out)
}

/// The orthonormal factor alone of a thin QR of the column-major `m x n` matrix `a`
/// (`m >= n`), returned transposed: row-major `n x m`; row i is the i-th column of Q.
///
/// Blocked Householder (faer) with the caller's parallelism `par`: the sweep runs it with
/// its rank's share of the threads instead of faer's global setting.
pub(crate) fn qr_q_transposed<T: Scalar>(
    a_col_major: &[T],
    m: usize,
    n: usize,
    par: Par,
) -> Vec<T> {
    let r = m.min(n);
    if r == 0 {
        return Vec::new();
    }
    let mut factors = MatRef::from_column_major_slice(a_col_major, m, n).to_owned();
    let block_size = factor::recommended_block_size::<T>(m, n);
    let mut coefficients = Mat::<T>::zeros(block_size, r);
    let scratch = factor::qr_in_place_scratch::<T>(m, n, block_size, par, Default::default()).or(
        householder::apply_block_householder_sequence_on_the_left_in_place_scratch::<T>(
            m, block_size, r,
        ),
    );
    let mut buffer = MemBuffer::new(scratch);
    let stack = MemStack::new(&mut buffer);
    factor::qr_in_place(
        factors.as_mut(),
        coefficients.as_mut(),
        par,
        stack,
        Default::default(),
    );
    // The Householder basis is the strictly lower part with a unit diagonal.
    let basis = factors.get(.., ..r);
    let mut q = Mat::<T>::identity(m, r);
    householder::apply_block_householder_sequence_on_the_left_in_place_with_conj(
        basis,
        coefficients.as_ref(),
        Conj::No,
        q.as_mut(),
        par,
        stack,
    );
    let mut out = Vec::with_capacity(r * m);
    for j in 0..r {
        out.extend(q.col(j).iter().copied());
    }
    out
}

/// `(U, singular values, V^H)` of a thin SVD.
pub(crate) type SvdParts<T> = (Vec<T>, Vec<f64>, Vec<T>);

/// A thin SVD of a row-major `m x n` matrix: `U` (`m x r`), singular values (descending) and
/// `V^H` (`r x n`), row-major, `r = min(m, n)`.
pub(crate) fn svd<T: Scalar>(
    a: &[T],
    m: usize,
    n: usize,
    site: usize,
) -> Result<SvdParts<T>, SweepError> {
    let r = m.min(n);
    if r == 0 {
        return Ok((Vec::new(), Vec::new(), Vec::new()));
    }
    let view = MatRef::from_row_major_slice(a, m, n);
    let svd = view
        .thin_svd()
        .map_err(|_| SweepError::Factorization { what: "SVD", site })?;
    let (u, s, v) = (svd.U(), svd.S().column_vector(), svd.V());
    let mut u_out = Vec::with_capacity(m * r);
    for i in 0..m {
        for j in 0..r {
            u_out.push(u[(i, j)]);
        }
    }
    let sigma: Vec<f64> = (0..r).map(|i| s[i].re()).collect();
    let mut vh = Vec::with_capacity(r * n);
    for i in 0..r {
        for j in 0..n {
            vh.push(v[(j, i)].conj());
        }
    }
    Ok((u_out, sigma, vh))
}

/// How many singular values to keep: at most `chi`, at least 1, and only those with
/// `sigma_i > cutoff * sigma_0` (relative to the largest at this bond).
pub(crate) fn kept_rank(sigma: &[f64], chi: usize, cutoff: f64) -> usize {
    let largest = sigma.first().copied().unwrap_or(0.0);
    let above = sigma.iter().take_while(|&&s| s > cutoff * largest).count();
    above.min(chi).max(1).min(sigma.len().max(1))
}

/// A thin LQ of a row-major `m x n` matrix: `L` (`m x r`) and `Q` (`r x n`, orthonormal rows:
/// `Q Q^H = I`), row-major, `r = min(m, n)`.
pub(crate) fn lq<T: Scalar>(a: &[T], m: usize, n: usize) -> (Vec<T>, Vec<T>) {
    let r = m.min(n);
    if r == 0 {
        return (Vec::new(), Vec::new());
    }
    // Row-major A is column-major A^T (n x m); A^T = Q' R' gives A = R'^T Q'^T.
    let view = MatRef::from_column_major_slice(a, n, m);
    let qr = view.qr();
    let q = qr.compute_thin_Q();
    let rr = qr.thin_R();
    let mut l_out = Vec::with_capacity(m * r);
    for i in 0..m {
        for j in 0..r {
            l_out.push(rr[(j, i)]);
        }
    }
    let mut q_out = Vec::with_capacity(r * n);
    for i in 0..r {
        for j in 0..n {
            q_out.push(q[(j, i)]);
        }
    }
    (l_out, q_out)
}
