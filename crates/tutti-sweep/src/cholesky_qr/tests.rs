//! CholeskyQR2 against Householder QR on random and ill-conditioned matrices, split unevenly
//! among 1..4 ranks.
#![allow(clippy::unwrap_used)]

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tutti_backend::Resources;
use tutti_group::Group;

use super::*;

/// Rows per rank for a group of `ranks`, 2000 rows in all: uneven, with a rank holding fewer
/// rows than the 40 columns and (from 3 ranks) one holding none.
fn uneven_rows(ranks: usize) -> Vec<usize> {
    match ranks {
        1 => vec![2000],
        2 => vec![1990, 10],
        3 => vec![25, 0, 1975],
        _ => vec![700, 0, 30, 1270],
    }
}

fn gaussian<T: Scalar>(m: usize, n: usize, seed: u64) -> Mat<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Mat::from_fn(m, n, |_, _| T::gaussian(&mut rng))
}

/// A random `m x n` matrix with orthonormal columns.
fn orthonormal<T: Scalar>(m: usize, n: usize, seed: u64) -> Mat<T> {
    gaussian::<T>(m, n, seed).qr().compute_thin_Q()
}

/// `U diag(sigma) V^H` with random orthonormal `U` (`m x n`) and `V` (`n x n`) and `sigma`
/// log-spaced from 1 down to `1 / condition`: condition number `condition`.
fn conditioned<T: Scalar>(m: usize, n: usize, condition: f64, seed: u64) -> Mat<T> {
    let u = orthonormal::<T>(m, n, seed);
    let v = orthonormal::<T>(n, n, seed + 1);
    let sigma = |j: usize| condition.powf(-(j as f64) / (n.max(2) - 1) as f64);
    let scaled = Mat::from_fn(m, n, |i, j| u[(i, j)] * T::from_real(sigma(j)));
    product(&scaled, v.adjoint())
}

fn product<T: Scalar>(
    a: &Mat<T>,
    b: faer::MatRef<'_, impl faer::traits::Conjugate<Canonical = T>>,
) -> Mat<T> {
    let mut out = Mat::zeros(a.nrows(), b.ncols());
    matmul(
        out.as_mut(),
        Accum::Replace,
        a.as_ref(),
        b,
        T::one(),
        Par::Seq,
    );
    out
}

fn frobenius<T: Scalar>(a: &Mat<T>) -> f64 {
    a.as_ref().norm_l2()
}

fn difference<T: Scalar>(a: &Mat<T>, b: &Mat<T>) -> f64 {
    frobenius(&Mat::from_fn(a.nrows(), a.ncols(), |i, j| {
        a[(i, j)] - b[(i, j)]
    }))
}

/// `||Q^H Q - I||_F`, formed on one rank.
fn orthogonality<T: Scalar>(q: &Mat<T>) -> f64 {
    let gram = product(&q.adjoint().to_owned(), q.as_ref());
    let n = q.ncols();
    difference(&gram, &Mat::identity(n, n))
}

/// The factorisation of `a` with its rows split among `rows.len()` ranks: `Q` put back
/// together, rank 0's `R` and info (every rank's `R` and info are checked to be the same).
fn factor_on<T: Scalar>(
    a: &Mat<T>,
    rows: &[usize],
) -> Result<(Mat<T>, Mat<T>, CholeskyQrInfo), Breakdown> {
    assert_eq!(rows.iter().sum::<usize>(), a.nrows());
    let n = a.ncols();
    let starts: Vec<usize> = rows
        .iter()
        .scan(0, |next, &count| {
            let start = *next;
            *next += count;
            Some(start)
        })
        .collect();
    let devices = Resources::cpu(rows.len()).select().unwrap();
    let group = Group::new(devices).unwrap();
    let results = group
        .run(|comm| {
            let mine = starts[comm.rank()]..starts[comm.rank()] + rows[comm.rank()];
            let local: Vec<T> = (0..n)
                .flat_map(|j| mine.clone().map(move |i| a[(i, j)]))
                .collect();
            let pool = comm.device().thread_pool().unwrap();
            match cholesky_qr(comm, local, n, pool, Par::Seq) {
                Ok(factored) => Ok(Ok(factored)),
                Err(CholeskyQrError::Breakdown(breakdown)) => Ok(Err(breakdown)),
                Err(CholeskyQrError::Comm(error)) => Err(error),
            }
        })
        .unwrap();
    let results: Vec<CholeskyQr<T>> = results.into_iter().collect::<Result<_, _>>()?;
    let first = &results[0];
    for other in &results[1..] {
        assert_eq!(other.info, first.info);
        assert!(other.factors == first.factors, "R differs between ranks");
    }
    let mut q = Mat::zeros(a.nrows(), n);
    for (rank, factored) in results.iter().enumerate() {
        for j in 0..n {
            for i in 0..rows[rank] {
                q[(starts[rank] + i, j)] = factored.q_local[i + j * rows[rank]];
            }
        }
    }
    Ok((q, first.r(), first.info))
}

/// Householder QR (faer) with its `R`'s diagonal made real positive, CholeskyQR's convention:
/// `Q D`, `D^H R` with `D_ii` the phase of `R_ii`.
fn householder<T: Scalar>(a: &Mat<T>) -> (Mat<T>, Mat<T>) {
    let qr = a.qr();
    let (q, r) = (qr.compute_thin_Q(), qr.thin_R().to_owned());
    let phase = |j: usize| {
        let z = r[(j, j)].to_complex();
        T::from_complex(z / z.norm())
    };
    let q = Mat::from_fn(q.nrows(), q.ncols(), |i, j| q[(i, j)] * phase(j));
    let r = Mat::from_fn(r.nrows(), r.ncols(), |i, j| phase(i).conj() * r[(i, j)]);
    (q, r)
}

/// The matrices of the accuracy tests: a Gaussian one and three of condition 1e4, 1e8, 1e12.
fn cases<T: Scalar>() -> Vec<(&'static str, f64, Mat<T>)> {
    let (m, n) = (2000, 40);
    vec![
        ("gaussian", 1.0, gaussian::<T>(m, n, 11)),
        ("kappa 1e4", 1e4, conditioned::<T>(m, n, 1e4, 12)),
        ("kappa 1e8", 1e8, conditioned::<T>(m, n, 1e8, 14)),
        ("kappa 1e12", 1e12, conditioned::<T>(m, n, 1e12, 16)),
    ]
}

fn accuracy<T: Scalar>() {
    for (name, condition, a) in cases::<T>() {
        let scale = frobenius(&a);
        let (q_hh, r_hh) = householder(&a);
        let one_rank = factor_on(&a, &uneven_rows(1)).unwrap();
        for ranks in 1..=4 {
            let (q, r, info) = factor_on(&a, &uneven_rows(ranks)).unwrap();
            let residual = difference(&product(&q, r.as_ref()), &a) / scale;
            let measured = orthogonality(&q);
            let q_gap = difference(&q, &one_rank.0) / (a.ncols() as f64).sqrt();
            let r_gap = difference(&r, &one_rank.1) / frobenius(&one_rank.1);
            let q_hh_gap = difference(&q, &q_hh) / (a.ncols() as f64).sqrt();
            let r_hh_gap = difference(&r, &r_hh) / frobenius(&r_hh);
            println!(
                "{} {name}, G {ranks}: {:?} ({} passes, shift {:.1e}), ||Q^H Q - I||_F {:.2e} \
                 (one rank: {measured:.2e}; Householder {:.2e}), ||QR - A||/||A|| {residual:.2e}, \
                 vs G 1: Q {q_gap:.1e} R {r_gap:.1e}, vs Householder: Q {q_hh_gap:.1e} \
                 R {r_hh_gap:.1e}",
                T::NAME,
                info.path,
                info.passes,
                info.shift,
                info.orthogonality,
                orthogonality(&q_hh),
            );
            assert_eq!(info.rows, a.nrows());
            // CholeskyQR2's orthogonality is O(sqrt(m n) u) = 3e-14 here (the proven bound,
            // 6 (m n + n(n+1)) u = 5e-11, is a worst case); the shifted path ends with the
            // same CholeskyQR2.
            assert!(info.orthogonality <= 1e-13, "{name} G {ranks}: {info:?}");
            // The distributed measure is the Gram matrix of the same Q summed in another
            // order. Each of its n^2 entries (sums of products of entries of unit columns)
            // carries a rounding error of a few u, so the two measures agree to about n u.
            let gap = (info.orthogonality - measured).abs();
            assert!(gap <= 1e-14, "{name}: {measured:e}");
            // Each pass is backward stable row by row (the triangular solve), so Q R = A to a
            // few units of rounding times sqrt(n), far below the worst-case 5 n^2 sqrt(n) u.
            assert!(residual <= 1e-14, "{name} G {ranks}: residual {residual:e}");
            for j in 0..r.ncols() {
                assert!(r[(j, j)].re() > 0.0 && r[(j, j)] == T::from_real(r[(j, j)].re()));
                for i in j + 1..r.nrows() {
                    assert!(r[(i, j)] == T::zero());
                }
            }
            // CholeskyQR2 up to kappa about u^{-1/2} = 9.5e7 (1e8 still succeeds here); at
            // 1e12 the Gram matrix is singular to rounding and the shifted path runs.
            let expected = if condition <= 1e8 {
                CholeskyQrPath::Plain
            } else {
                CholeskyQrPath::Shifted
            };
            assert_eq!(info.path, expected, "{name} G {ranks}");
            // Q is as well-conditioned a function of A as A is: two backward-stable
            // factorisations (another split sums the Gram matrices in another order;
            // Householder) differ in Q by about kappa(A) u (measured 60-130 kappa u), so 1e-12
            // up to kappa 1e4, and 1e3 kappa u beyond. R's large entries are far less
            // sensitive (measured <= 1e-15 relative at every kappa).
            let q_limit = 1e-12f64.max(1e3 * condition * UNIT_ROUNDOFF);
            assert!(q_gap <= q_limit && r_gap <= 1e-14, "{name} G {ranks}");
            assert!(q_hh_gap <= q_limit && r_hh_gap <= 1e-14, "{name} G {ranks}");
        }
    }
}

#[test]
fn cholesky_qr_is_accurate_real() {
    accuracy::<f64>();
}

#[test]
fn cholesky_qr_is_accurate_complex() {
    accuracy::<Complex64>();
}

#[test]
fn rank_deficient_and_wide_matrices_break_down() {
    // Rank 20 of 40 columns: the shifted pass leaves Q_0 numerically singular.
    let low_rank = product(
        &gaussian::<f64>(500, 20, 3),
        gaussian::<f64>(20, 40, 4).as_ref(),
    );
    for ranks in [1, 3] {
        let rows = [vec![500], vec![100, 0, 400]];
        let rows = &rows[usize::from(ranks > 1)];
        let breakdown = factor_on(&low_rank, rows).unwrap_err();
        assert!(
            matches!(breakdown, Breakdown::NotPositiveDefinite { .. }),
            "{breakdown}"
        );
    }
    let wide = gaussian::<f64>(30, 40, 5);
    assert_eq!(
        factor_on(&wide, &[10, 20]).unwrap_err(),
        Breakdown::NotTall {
            rows: 30,
            columns: 40
        }
    );
    let mut broken = gaussian::<f64>(100, 4, 6);
    broken[(70, 2)] = f64::NAN;
    assert_eq!(
        factor_on(&broken, &[50, 50]).unwrap_err(),
        Breakdown::NonFinite
    );
}

/// Kahan's matrix (`R_ii = s^i`, `R_ij = -c s^i` above the diagonal, `s = sin 1`,
/// `c = cos 1`) behind random orthonormal columns: its Cholesky diagonal spreads only 8e2
/// while kappa is 5.6e10. On one rank its Gram matrix still has a Cholesky factor, so
/// CholeskyQR2 runs, misses the tolerance 7.2e-14 (1.6e-13 measured) and the shifted path
/// continues from its Q (5 passes); on 4 ranks the Gram matrix summed in another order has
/// none, and the shifted path starts from A (3 passes).
#[test]
fn a_hidden_condition_number_continues_on_the_shifted_path() {
    let n = 40;
    let (s, c) = (1f64.sin(), 1f64.cos());
    let kahan = Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Equal => s.powi(i as i32),
        std::cmp::Ordering::Less => -c * s.powi(i as i32),
        std::cmp::Ordering::Greater => 0.0,
    });
    let a = product(&orthonormal::<f64>(2000, n, 9), kahan.as_ref());
    let singular = a.as_ref().singular_values().unwrap();
    let condition = singular[0] / singular[n - 1];
    assert!(condition > 1e10, "kappa {condition:e}");
    for ranks in [1, 4] {
        let (q, r, info) = factor_on(&a, &uneven_rows(ranks)).unwrap();
        let residual = difference(&product(&q, r.as_ref()), &a) / frobenius(&a);
        println!(
            "Kahan, kappa {condition:.1e}, G {ranks}: {info:?}, ||QR - A||/||A|| {residual:.1e}"
        );
        assert_eq!(info.path, CholeskyQrPath::Shifted);
        assert!(info.passes == 3 || info.passes == 5, "{info:?}");
        assert!(info.orthogonality <= 1e-13 && orthogonality(&q) <= 1e-13);
        assert!(residual <= 1e-14, "{residual:e}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any shape with m >= n, any split among 1..4 ranks (empty blocks included): an
    /// orthonormal Q and Q R = A, whichever path.
    #[test]
    fn any_split_factors(
        n in 1usize..12,
        extra in 0usize..80,
        cuts in proptest::collection::vec(0.0f64..1.0, 0..4),
        condition_exponent in 0u32..13,
        complex in any::<bool>(),
        seed in 0u64..1000,
    ) {
        let m = n + extra;
        let mut points: Vec<usize> = cuts.iter().map(|c| (c * m as f64) as usize).collect();
        points.sort_unstable();
        let mut rows = Vec::new();
        let mut last = 0;
        for p in points.into_iter().chain([m]) {
            rows.push(p - last);
            last = p;
        }
        let condition = 10f64.powi(condition_exponent as i32);
        if complex {
            check_split::<Complex64>(m, n, condition, seed, &rows)?;
        } else {
            check_split::<f64>(m, n, condition, seed, &rows)?;
        }
    }
}

fn check_split<T: Scalar>(
    m: usize,
    n: usize,
    condition: f64,
    seed: u64,
    rows: &[usize],
) -> Result<(), TestCaseError> {
    let a = conditioned::<T>(m, n, condition, seed);
    let (q, r, info) = factor_on(&a, rows).map_err(|b| TestCaseError::fail(b.to_string()))?;
    let residual = difference(&product(&q, r.as_ref()), &a) / frobenius(&a);
    prop_assert!(info.orthogonality <= 1e-13, "{info:?}");
    prop_assert!(orthogonality(&q) <= 1e-13);
    prop_assert!(residual <= 1e-14, "residual {residual:e}");
    Ok(())
}
