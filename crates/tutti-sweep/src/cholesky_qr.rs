//! Distributed CholeskyQR2 of a tall matrix whose rows are split among the ranks of a group,
//! with shifted CholeskyQR3 for ill-conditioned matrices.
//!
//! Every rank holds a block of rows of a tall `m x n` matrix `A` (`m >= n`; a rank may hold
//! fewer than `n` rows, or none). One CholeskyQR pass on the current rows `B`: each rank forms
//! the Gram matrix of its rows (`B_r^H B_r`, lower triangle), one allgather hands every rank
//! all of them and each sums them in rank order (the same bits on every rank, in one round
//! where an allreduce takes two), every rank factors `W = L L^H` (Cholesky, `R = L^H`)
//! and overwrites its rows by `B_r R^{-1}` (a triangular solve). Two passes are CholeskyQR2:
//! `Q = A R1^{-1} R2^{-1}`, `R = R2 R1`. The Gram of the final `Q` is summed once more, which
//! gives the orthogonality reached, `||Q^H Q - I||_F`, on every rank.
//!
//! CholeskyQR2 is accurate while `kappa(A)` stays below about `u^{-1/2}` (`u = 2^-53`; the
//! proven bound, Yamamoto, Nakatsukasa, Yanagisawa & Fukaya, ETNA 44, 2015: when
//! `8 kappa(A) sqrt((m n + n(n+1)) u) <= 1`, `||Q^H Q - I||_F <= 6 (m n + n(n+1)) u`; in
//! practice further: `2000 x 40` matrices of condition 1e8 reach 2.7e-15 to 4.8e-15). Beyond
//! it the Gram matrix has lost the small singular values and its Cholesky factorisation
//! fails, or succeeds with a `Q` far from orthonormal. [`cholesky_qr`] therefore
//! starts shifted CholeskyQR3 (Fukaya, Kannan, Nakatsukasa, Zhang & Yamamoto, SISC 42, 2020)
//! from `A` when the first Cholesky factorisation meets a non-positive pivot, or when its
//! diagonal spread `max_i L_ii / min_i L_ii`, a lower bound on `kappa(A)`, exceeds `u^{-1/2}`
//! (then `kappa(A)^2 u > 1`: CholeskyQR2 cannot succeed). Shifted CholeskyQR3 is one pass on
//! `W + s I` with `s = 11 (m n + n(n+1)) u ||A||_F^2`, which makes `Q_0 = A R_0^{-1}` well
//! enough conditioned for CholeskyQR2 to finish, for `kappa(A)` up to about `u^{-1}`.
//!
//! The result must meet the tolerance `2 (sqrt(m n + n(n+1)) + n) u`: the bound above with
//! its rounding errors adding like a random walk rather than all in one direction (the
//! probabilistic analysis of Higham & Mary, SISC 41, 2019), plus the few units of rounding in
//! every column's norm, which dominate for tiny matrices; 7.2e-14 for `2000 x 40`, some 10x
//! above the values measured there. A CholeskyQR2 that misses it, or whose second Cholesky
//! factorisation fails (`kappa(A)` above `u^{-1/2}` with a diagonal that does not show it, as
//! for Kahan's matrix), continues with shifted CholeskyQR3 from its `Q`. When the shifted
//! path breaks down too (a numerically rank-deficient `A`, `kappa(A)` near
//! `u^{-1}` or beyond) or misses the tolerance, the error says so and the caller falls back to
//! a Householder QR of the whole matrix.
//!
//! `R` has a real positive diagonal (that of a Cholesky factor). Householder QR (faer) gives
//! `R_ii = -phase(pivot) |R_ii|` instead: the two agree up to a diagonal unitary `D`
//! (`Q_chol = Q_hh D`, `R_chol = D^H R_hh`) for a matrix of full rank. The sweep's result does
//! not depend on `D`: a new core `D^T V` makes the next projected environment's rows scale by
//! `conj(D)`, which cancels in the product of the two cores.
//!
//! Matrices are column-major, as in faer: a rank's block of `A` (and of `Q`) is
//! `rows x n`, entry `(i, j)` at `i + j rows`.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{
    cholesky_in_place, cholesky_in_place_scratch, LltError, LltRegularization,
};
use faer::linalg::matmul::triangular::{matmul as triangular_matmul, BlockStructure};
use faer::linalg::triangular_solve::solve_lower_triangular_in_place_with_conj;
use faer::{Accum, Conj, Mat, MatMut, Par};
use num_complex::Complex64;
use rayon::ThreadPool;
use tutti_group::{Comm, CommError};

use crate::Scalar;

/// The unit roundoff of `f64`, `2^-53`.
const UNIT_ROUNDOFF: f64 = f64::EPSILON / 2.0;

/// A thin QR factorisation `A = Q R` of a tall matrix whose rows are split among the ranks.
#[derive(Clone, Debug)]
pub(crate) struct CholeskyQr<T> {
    /// This rank's rows of `Q` (column-major, the rows of `A` this rank passed x `n`); the
    /// columns of `Q` over all ranks are orthonormal to `info.orthogonality`.
    pub q_local: Vec<T>,
    /// The passes' lower Cholesky factors `L_1, L_2, ...`, the same bits on every rank:
    /// `R = L_k^H ... L_1^H` ([`CholeskyQr::r`]).
    pub factors: Vec<Mat<T>>,
    /// How it was computed and how orthonormal `Q` is.
    pub info: CholeskyQrInfo,
}

impl<T: Scalar> CholeskyQr<T> {
    /// `R` (`n x n`, upper triangular with a real positive diagonal, zeros below), formed
    /// from the passes' factors: `n^3 / 3` flops a pass, which the sweep (needing `Q` alone)
    /// does not spend.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the sweep needs Q alone; the tests check Q R = A")
    )]
    pub fn r(&self) -> Mat<T> {
        let n = self.factors.first().map_or(0, |l| l.nrows());
        let mut r = Mat::<T>::identity(n, n);
        for lower in &self.factors {
            let mut next = Mat::<T>::zeros(n, n);
            triangular_matmul(
                next.as_mut(),
                BlockStructure::TriangularUpper,
                Accum::Replace,
                lower.adjoint(),
                BlockStructure::TriangularUpper,
                r.as_ref(),
                BlockStructure::TriangularUpper,
                T::one(),
                Par::Seq,
            );
            r = next;
        }
        r
    }
}

/// Which variant factored the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CholeskyQrPath {
    /// CholeskyQR2: two passes.
    Plain,
    /// Shifted CholeskyQR3: a shifted pass then CholeskyQR2 (after a CholeskyQR2 or part of
    /// one, when that fell short).
    Shifted,
}

/// Diagnostics of [`cholesky_qr`], the same on every rank.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct CholeskyQrInfo {
    /// The variant that produced `Q`.
    pub path: CholeskyQrPath,
    /// `||Q^H Q - I||_F`, measured from the summed Gram matrix of `Q`.
    pub orthogonality: f64,
    /// The shift `s` of the shifted pass (0 on the plain path).
    pub shift: f64,
    /// The number of passes (each: Gram, allgather, Cholesky, triangular solve).
    pub passes: usize,
    /// The rows of the whole matrix, `m`.
    pub rows: usize,
}

/// Why [`cholesky_qr`] gave up on a matrix; the same on every rank, so that every rank falls
/// back together.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub(crate) enum Breakdown {
    /// Fewer rows than columns: no thin QR with an invertible `R`.
    #[error("{rows} rows x {columns} columns is not tall")]
    NotTall {
        /// `m`.
        rows: usize,
        /// `n`.
        columns: usize,
    },
    /// The Gram matrix has a NaN or infinite entry.
    #[error("the Gram matrix is not finite")]
    NonFinite,
    /// The Cholesky factorisation of a pass after the shift met a non-positive pivot.
    #[error("pass {pass}: the Gram matrix is not positive definite (pivot {pivot})")]
    NotPositiveDefinite {
        /// The pass, counted from 1.
        pass: usize,
        /// The failing pivot, counted from 0.
        pivot: usize,
    },
    /// The shifted path ended with `Q` further from orthonormal than its tolerance.
    #[error("||Q^H Q - I||_F = {measured:.3e} exceeds {tolerance:.3e}")]
    LostOrthogonality {
        /// `||Q^H Q - I||_F`.
        measured: f64,
        /// `2 (sqrt(m n + n(n+1)) + n) u`.
        tolerance: f64,
    },
}

/// Why [`cholesky_qr`] failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CholeskyQrError {
    /// A collective failed (another rank failed, or the ranks disagreed on `n`).
    #[error(transparent)]
    Comm(#[from] CommError),
    /// The matrix is too ill-conditioned (or not tall): factor it with Householder QR.
    #[error("CholeskyQR broke down: {0}")]
    Breakdown(#[from] Breakdown),
}

/// `A = Q R` by CholeskyQR2, or shifted CholeskyQR3 when `A` is ill-conditioned, for `A`
/// split by rows among the ranks of `comm`.
///
/// `a_local` is this rank's block of rows of `A`, column-major `rows x n` (`rows` may differ
/// between ranks and may be 0); it becomes `Q`'s block of the same rows. Every rank calls this
/// with the same `n`, on its own thread (the collectives run there); the products on its
/// rows (Gram matrices, triangular solves) run in `pool` with `par` (on the calling thread
/// when `par` is sequential), the `n x n` Cholesky factorisations on the calling thread,
/// sequentially, so that every rank computes them bit for bit alike and takes the same path.
/// The collectives are three allgathers of `n(n+1)/2 + 1` numbers (twice that for complex
/// `T`) on the plain path (the Gram matrix of `A`, of the first `Q`, and of the final `Q`,
/// which measures the orthogonality), four on the shifted path from `A`, five or six after a
/// CholeskyQR2 that fell short.
///
/// Errors: [`CholeskyQrError::Comm`] from the collectives; [`CholeskyQrError::Breakdown`]
/// (on every rank alike) for a matrix with fewer rows than columns, a non-finite one, or one
/// too ill-conditioned even for the shifted path (numerically rank-deficient): the caller
/// factors it by Householder QR instead.
pub(crate) fn cholesky_qr<T: Scalar>(
    comm: &Comm<'_>,
    a_local: Vec<T>,
    n: usize,
    pool: &ThreadPool,
    par: Par,
) -> Result<CholeskyQr<T>, CholeskyQrError> {
    let rows = a_local.len().checked_div(n).unwrap_or(0);
    if rows * n != a_local.len() {
        return Err(CommError::InvalidArgument {
            op: "cholesky_qr",
            message: format!(
                "{} local entries are not a whole number of rows of {n} columns",
                a_local.len()
            ),
        }
        .into());
    }
    let mut q_local = a_local;
    let mut factor = Factor {
        comm,
        q: MatMut::from_column_major_slice_mut(&mut q_local, rows, n),
        factors: Vec::new(),
        pool,
        par,
    };
    let (mut gram, m) = factor.gram()?;
    if m < n {
        return Err(Breakdown::NotTall {
            rows: m,
            columns: n,
        }
        .into());
    }
    if !gram.as_ref().is_all_finite() {
        return Err(Breakdown::NonFinite.into());
    }
    let size = (m * n + n * (n + 1)) as f64;
    let tolerance = 2.0 * (size.sqrt() + n as f64) * UNIT_ROUNDOFF;

    // CholeskyQR2 unless the first Cholesky factor shows it cannot succeed.
    if let Ok(first) = cholesky(&gram, 0.0) {
        if diagonal_spread(&first) <= UNIT_ROUNDOFF.sqrt().recip() {
            gram = factor.solve(first)?;
            // When Q1 is too far from orthonormal for a Cholesky factorisation, the shifted
            // path continues from it (`gram` is its Gram matrix).
            if let Ok(second) = cholesky(&gram, 0.0) {
                gram = factor.solve(second)?;
                let orthogonality = distance_to_identity(&gram);
                if orthogonality <= tolerance {
                    let info = factor.info(CholeskyQrPath::Plain, orthogonality, 0.0, m);
                    return Ok(CholeskyQr {
                        factors: factor.factors,
                        q_local,
                        info,
                    });
                }
            }
        }
    }

    // Shifted CholeskyQR3 on the current rows (A, or what CholeskyQR2 made of it).
    let norm_squared: f64 = (0..n).map(|i| gram[(i, i)].re()).sum();
    let shift = 11.0 * size * UNIT_ROUNDOFF * norm_squared;
    for pass_shift in [shift, 0.0, 0.0] {
        let lower =
            cholesky(&gram, pass_shift).map_err(|pivot| Breakdown::NotPositiveDefinite {
                pass: factor.factors.len() + 1,
                pivot,
            })?;
        gram = factor.solve(lower)?;
    }
    let orthogonality = distance_to_identity(&gram);
    if orthogonality.is_nan() || orthogonality > tolerance {
        return Err(Breakdown::LostOrthogonality {
            measured: orthogonality,
            tolerance,
        }
        .into());
    }
    let info = factor.info(CholeskyQrPath::Shifted, orthogonality, shift, m);
    Ok(CholeskyQr {
        factors: factor.factors,
        q_local,
        info,
    })
}

/// The factorisation in progress on one rank: `A = Q R` with `Q` its rows so far.
struct Factor<'q, 'c, T> {
    comm: &'q Comm<'c>,
    /// This rank's rows of the current `Q` (at first `A`).
    q: MatMut<'q, T>,
    /// The passes' Cholesky factors so far.
    factors: Vec<Mat<T>>,
    pool: &'q ThreadPool,
    par: Par,
}

impl<T: Scalar> Factor<'_, '_, T> {
    /// The Gram matrix `Q^H Q` of the current rows summed over the ranks (lower triangle only,
    /// zeros above; the same bits on every rank) and the number of rows over all ranks.
    fn gram(&self) -> Result<(Mat<T>, usize), CommError> {
        let n = self.q.ncols();
        let mut local = Mat::<T>::zeros(n, n);
        if self.q.nrows() > 0 {
            let (q, par) = (self.q.as_ref(), self.par);
            in_pool(self.pool, par, || {
                triangular_matmul(
                    local.as_mut(),
                    BlockStructure::TriangularLower,
                    Accum::Replace,
                    q.adjoint(),
                    BlockStructure::Rectangular,
                    q,
                    BlockStructure::Rectangular,
                    T::one(),
                    par,
                )
            });
        }
        // One sum over the ranks of f64 words: the lower triangle, column by column, then
        // the row count (exact in f64 below 2^53).
        let mut words = Vec::with_capacity(n * (n + 1) + 1);
        for j in 0..n {
            for i in j..n {
                push_words(&mut words, local[(i, j)]);
            }
        }
        words.push(self.q.nrows() as f64);
        let words = self.sum_over_ranks(words)?;
        let mut next = words.iter().copied();
        for j in 0..n {
            for i in j..n {
                local[(i, j)] = pop_words(&mut next);
            }
            // The diagonal is real (sums of |q_ij|^2); complex products rounded with fused
            // multiply-adds may leave an imaginary part of rounding size, which would make
            // R's diagonal complex.
            local[(j, j)] = T::from_real(local[(j, j)].re());
        }
        let rows = next.next().unwrap_or(0.0) as usize;
        Ok((local, rows))
    }

    /// One pass's update with `lower` the Cholesky factor of the current Gram matrix:
    /// `Q <- Q L^{-H}` (kept in the factors); returns the Gram matrix of the new `Q`.
    fn solve(&mut self, lower: Mat<T>) -> Result<Mat<T>, CommError> {
        // Q L^H = B, transposed: conj(L) Q^T = B^T.
        let (q, par) = (self.q.as_mut(), self.par);
        in_pool(self.pool, par, || {
            solve_lower_triangular_in_place_with_conj(
                lower.as_ref(),
                Conj::Yes,
                q.transpose_mut(),
                par,
            )
        });
        self.factors.push(lower);
        Ok(self.gram()?.0)
    }

    /// The sum over the ranks of every rank's `words` (equal lengths), added in rank order,
    /// `((w_0 + w_1) + w_2) + ...`: the same bits on every rank.
    fn sum_over_ranks(&self, words: Vec<f64>) -> Result<Vec<f64>, CommError> {
        let blocks = self.comm.allgather(&words)?;
        let mut sum = words;
        sum.fill(0.0);
        for (rank, block) in blocks.iter().enumerate() {
            if block.len() != sum.len() {
                return Err(CommError::Mismatch(format!(
                    "cholesky_qr: rank {rank} summed {} words, rank {} {}",
                    block.len(),
                    self.comm.rank(),
                    sum.len()
                )));
            }
            for (total, &word) in sum.iter_mut().zip(block) {
                *total += word;
            }
        }
        Ok(sum)
    }

    fn info(
        &self,
        path: CholeskyQrPath,
        orthogonality: f64,
        shift: f64,
        rows: usize,
    ) -> CholeskyQrInfo {
        CholeskyQrInfo {
            path,
            orthogonality,
            shift,
            passes: self.factors.len(),
            rows,
        }
    }
}

/// `work` in `pool` with `par`, or on the calling thread when `par` is sequential (the trip
/// to the pool would cost more than a small product takes).
fn in_pool<R: Send>(pool: &ThreadPool, par: Par, work: impl FnOnce() -> R + Send) -> R {
    match par {
        Par::Seq => work(),
        Par::Rayon(_) => pool.install(work),
    }
}

/// The lower Cholesky factor `L` of `gram + shift I` (`gram` Hermitian, its lower triangle
/// read), zeros above the diagonal; the failing pivot when it is not positive definite.
fn cholesky<T: Scalar>(gram: &Mat<T>, shift: f64) -> Result<Mat<T>, usize> {
    let par = Par::Seq;
    let n = gram.nrows();
    let mut lower = gram.clone();
    for i in 0..n {
        lower[(i, i)] += T::from_real(shift);
    }
    let mut buffer = MemBuffer::new(cholesky_in_place_scratch::<T>(n, par, Default::default()));
    cholesky_in_place(
        lower.as_mut(),
        LltRegularization::default(),
        par,
        MemStack::new(&mut buffer),
        Default::default(),
    )
    .map_err(|LltError::NonPositivePivot { index }| index)?;
    for j in 0..n {
        for i in 0..j {
            lower[(i, j)] = T::zero();
        }
        // Real in exact arithmetic (a square root of a real pivot); complex rounding may
        // leave an imaginary part of rounding size, which would make R's diagonal complex.
        lower[(j, j)] = T::from_real(lower[(j, j)].re());
    }
    Ok(lower)
}

/// `max_i L_ii / min_i L_ii` of a Cholesky factor: a lower bound on the condition number of
/// the matrix whose Gram matrix `L L^H` is.
fn diagonal_spread<T: Scalar>(lower: &Mat<T>) -> f64 {
    let diagonal = (0..lower.nrows()).map(|i| lower[(i, i)].re());
    let (low, high) = diagonal.fold((f64::INFINITY, 0.0f64), |(low, high), d| {
        (low.min(d), high.max(d))
    });
    if low > 0.0 {
        high / low
    } else {
        f64::INFINITY
    }
}

/// `||W - I||_F` for `W` Hermitian given by its lower triangle.
fn distance_to_identity<T: Scalar>(gram: &Mat<T>) -> f64 {
    let n = gram.nrows();
    let mut sum = 0.0;
    for j in 0..n {
        sum += (gram[(j, j)] - T::one()).abs2();
        for i in j + 1..n {
            sum += 2.0 * gram[(i, j)].abs2();
        }
    }
    sum.sqrt()
}

/// Appends `x` as f64 words: one for a real type, two (re, im) for a complex one.
fn push_words<T: Scalar>(words: &mut Vec<f64>, x: T) {
    let z = x.to_complex();
    words.push(z.re);
    if T::COMPLEX {
        words.push(z.im);
    }
}

/// The next element from f64 words written by [`push_words`] (missing words read as 0).
fn pop_words<T: Scalar>(words: &mut impl Iterator<Item = f64>) -> T {
    let re = words.next().unwrap_or(0.0);
    let im = if T::COMPLEX {
        words.next().unwrap_or(0.0)
    } else {
        0.0
    };
    T::from_complex(Complex64::new(re, im))
}

#[cfg(test)]
mod tests;
