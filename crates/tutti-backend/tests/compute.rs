//! `Device::gemm` and `Device::qr_q` on simulated devices, against plain loops: every
//! transpose, offsets and leading dimensions, strided batches, BLAS's `beta` semantics, and
//! the checks a GPU relies on.
#![allow(clippy::unwrap_used)]

use tutti_backend::{BackendError, BlasScalar, Complex64, Device, Gemm, Op, Resources};

/// The first of `share` simulated devices: all the cores for 1, half of them for 2.
fn first_of(share: usize) -> Device {
    Resources::cpu(share).select().unwrap().remove(0)
}

/// A deterministic, irregular fill (no zeros, no repeats).
trait Sample:
    BlasScalar + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> + std::ops::AddAssign
{
    fn sample(i: usize) -> Self;
    fn conj(self) -> Self;
    fn abs(self) -> f64;
}

impl Sample for f64 {
    fn sample(i: usize) -> Self {
        ((i as f64) * 0.618_033_988_75).sin() + 0.01 * i as f64
    }
    fn conj(self) -> Self {
        self
    }
    fn abs(self) -> f64 {
        self.abs()
    }
}

impl Sample for Complex64 {
    fn sample(i: usize) -> Self {
        Complex64::new(f64::sample(i), (i as f64 * 0.37).cos())
    }
    fn conj(self) -> Self {
        Complex64::conj(&self)
    }
    fn abs(self) -> f64 {
        self.norm()
    }
}

fn filled<T: Sample>(n: usize, seed: usize) -> Vec<T> {
    (0..n).map(|i| T::sample(i * 7 + seed)).collect()
}

/// `op(M)(i, j)` for M stored column-major at `offset` with leading dimension `ld`.
fn entry<T: Sample>(data: &[T], offset: usize, ld: usize, op: Op, i: usize, j: usize) -> T {
    match op {
        Op::N => data[offset + i + j * ld],
        Op::T => data[offset + j + i * ld],
        Op::C => data[offset + j + i * ld].conj(),
    }
}

/// The reference: `C = alpha op(A) op(B) + beta C` by a triple loop, product by product.
fn reference<T: Sample + std::ops::Add<Output = T>>(g: &Gemm<T>, a: &[T], b: &[T], c: &mut [T]) {
    let (count, (sa, sb, sc)) = match g.batch {
        tutti_backend::Batch::One => (1, (0, 0, 0)),
        tutti_backend::Batch::Strided { count, a, b, c } => (count, (a, b, c)),
    };
    for p in 0..count {
        for j in 0..g.n {
            for i in 0..g.m {
                let mut sum = T::zero();
                for l in 0..g.k {
                    sum += entry(a, g.a.offset + p * sa, g.a.ld, g.a.op, i, l)
                        * entry(b, g.b.offset + p * sb, g.b.ld, g.b.op, l, j);
                }
                let slot = &mut c[g.c_offset + p * sc + i + j * g.ldc];
                *slot = if g.beta == T::zero() {
                    g.alpha * sum
                } else {
                    g.alpha * sum + g.beta * *slot
                };
            }
        }
    }
}

fn max_diff<T: Sample + std::ops::Sub<Output = T>>(x: &[T], y: &[T]) -> f64 {
    x.iter()
        .zip(y)
        .map(|(&a, &b)| (a - b).abs())
        .fold(0.0, f64::max)
}

fn check_all_ops<T>(alpha: T, beta: T)
where
    T: Sample + std::ops::Add<Output = T> + std::ops::Sub<Output = T>,
{
    let device = first_of(1);
    let (m, n, k) = (7, 5, 6);
    for op_a in [Op::N, Op::T, Op::C] {
        for op_b in [Op::N, Op::T, Op::C] {
            // Stored shapes with room: offsets and leading dimensions larger than the rows.
            let (ar, ac) = if op_a == Op::N { (m, k) } else { (k, m) };
            let (br, bc) = if op_b == Op::N { (k, n) } else { (n, k) };
            let (lda, ldb, ldc) = (ar + 2, br + 1, m + 3);
            let gemm = Gemm::new(m, n, k)
                .with_a(op_a, 3, lda)
                .with_b(op_b, 1, ldb)
                .with_c(2, ldc)
                .with_scaling(alpha, beta);
            let a = filled::<T>(3 + lda * ac, 1);
            let b = filled::<T>(1 + ldb * bc, 2);
            let c0 = filled::<T>(2 + ldc * n + 4, 3);
            let mut expected = c0.clone();
            reference(&gemm, &a, &b, &mut expected);
            let (da, db) = (device.upload(&a).unwrap(), device.upload(&b).unwrap());
            let mut dc = device.upload(&c0).unwrap();
            device.gemm(&gemm, &da, &db, &mut dc).unwrap();
            let got = dc.to_host_vec().unwrap();
            let scale = expected.iter().map(|x| x.abs()).fold(1.0, f64::max);
            // Sums of 6 products of O(1) numbers: a few ulps of the largest entry; the
            // padding between columns and past the end is untouched, bit for bit.
            assert!(
                max_diff(&got, &expected) <= 1e-14 * scale,
                "{op_a:?} {op_b:?}: {}",
                max_diff(&got, &expected)
            );
            for (index, (g, c)) in got.iter().zip(&c0).enumerate() {
                let inside = index >= 2 && (index - 2) % ldc < m && (index - 2) / ldc < n;
                if !inside {
                    assert_eq!(g, c, "{op_a:?} {op_b:?}: element {index} outside C changed");
                }
            }
        }
    }
}

#[test]
fn real_gemm_matches_the_triple_loop_for_every_transpose() {
    check_all_ops::<f64>(1.0, 0.0);
    check_all_ops::<f64>(-0.75, 1.0);
    check_all_ops::<f64>(2.0, 0.5);
}

#[test]
fn complex_gemm_conjugates_only_under_op_c() {
    check_all_ops::<Complex64>(Complex64::new(1.0, 0.0), Complex64::new(0.0, 0.0));
    check_all_ops::<Complex64>(Complex64::new(0.5, -1.5), Complex64::new(-0.25, 2.0));
}

#[test]
fn a_strided_batch_equals_its_products_one_by_one_on_any_thread_count() {
    let (m, n, k, count) = (9, 4, 11, 5);
    let gemm = Gemm::<f64>::new(m, n, k)
        .with_a(Op::T, 0, k)
        .strided(count, k * m + 3, k * n, m * n + 2)
        .with_scaling(1.5, 0.0);
    let a = filled::<f64>((count - 1) * (k * m + 3) + k * m, 4);
    let b = filled::<f64>(count * k * n, 5);
    let mut expected = vec![f64::NAN; (count - 1) * (m * n + 2) + m * n];
    // beta = 0 must not read C: NaN there must not reach the result.
    for (p, value) in expected.iter_mut().enumerate() {
        if p % (m * n + 2) >= m * n {
            *value = 0.0;
        }
    }
    let c0 = expected.clone();
    reference(&gemm, &a, &b, &mut expected);
    for devices in [1, 2] {
        let device = first_of(devices);
        let (da, db) = (device.upload(&a).unwrap(), device.upload(&b).unwrap());
        let mut dc = device.upload(&c0).unwrap();
        device.gemm(&gemm, &da, &db, &mut dc).unwrap();
        let got = dc.to_host_vec().unwrap();
        assert!(got.iter().all(|x| x.is_finite()), "a NaN of C leaked");
        let scale = expected.iter().fold(1.0_f64, |s, x| s.max(x.abs()));
        let diff = max_diff(&got, &expected);
        assert!(
            diff <= 1e-14 * scale,
            "{diff:e} against entries up to {scale:e}"
        );
    }
}

#[test]
fn k_zero_scales_c_by_beta() {
    let device = first_of(1);
    let gemm = Gemm::<f64>::new(3, 2, 0).with_scaling(1.0, 2.0);
    let (a, b) = (
        device.upload(&[0.0_f64; 0]).unwrap(),
        device.upload(&[0.0_f64; 0]).unwrap(),
    );
    let mut c = device.upload(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    device.gemm(&gemm, &a, &b, &mut c).unwrap();
    assert_eq!(
        c.to_host_vec().unwrap(),
        vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    );
    let mut c = device.upload(&[f64::NAN; 6]).unwrap();
    device.gemm(&Gemm::new(3, 2, 0), &a, &b, &mut c).unwrap();
    assert_eq!(c.to_host_vec().unwrap(), vec![0.0; 6]);
}

fn invalid(err: BackendError) -> String {
    assert!(
        matches!(err, BackendError::InvalidArgument { .. }),
        "{err:?}"
    );
    err.to_string()
}

#[test]
fn plans_a_gpu_would_fault_on_are_refused_on_the_host_too() {
    let device = first_of(1);
    let a = device.upload(&filled::<f64>(12, 1)).unwrap();
    let b = device.upload(&filled::<f64>(12, 2)).unwrap();
    let mut c = device.alloc_zeros::<f64>(9).unwrap();
    // A (3 x 4) does not fit in 12 elements from offset 1.
    let err = device
        .gemm(&Gemm::new(3, 3, 4).with_a(Op::N, 1, 3), &a, &b, &mut c)
        .unwrap_err();
    assert!(invalid(err).contains("past its buffer of 12"));
    // lda shorter than the stored rows.
    let err = device
        .gemm(&Gemm::new(3, 3, 4).with_a(Op::N, 0, 2), &a, &b, &mut c)
        .unwrap_err();
    assert!(invalid(err).contains("ldA = 2 is less than the 3 stored rows"));
    // Overlapping outputs of a batch.
    let mut c = device.alloc_zeros::<f64>(20).unwrap();
    let err = device
        .gemm(&Gemm::new(2, 2, 1).strided(3, 1, 1, 3), &a, &b, &mut c)
        .unwrap_err();
    assert!(invalid(err).contains("overlap"));
    // Sizes cuBLAS cannot take.
    let err = device
        .gemm(&Gemm::new(1 << 31, 0, 0), &a, &b, &mut c)
        .unwrap_err();
    assert!(invalid(err).contains("C int"));
    // Operands on another device.
    let other = first_of(1);
    let foreign = other.upload(&filled::<f64>(12, 3)).unwrap();
    let err = device
        .gemm(&Gemm::new(3, 3, 4), &foreign, &b, &mut c)
        .unwrap_err();
    assert!(invalid(err).contains("lives on"));
    // A thin QR needs m >= n.
    let mut q = device.upload(&filled::<f64>(12, 4)).unwrap();
    assert!(invalid(device.qr_q(&mut q, 3, 4, 3).unwrap_err()).contains("m >= n"));
    assert!(invalid(device.qr_q(&mut q, 5, 3, 5).unwrap_err()).contains("past its buffer"));
}

/// `Q^H Q = I` and `Q Q^H A = A` for the Q `qr_q` left in place of A.
fn check_qr<T>(m: usize, n: usize, lda: usize, threads: usize, tolerance: f64)
where
    T: Sample + std::ops::Add<Output = T> + std::ops::Sub<Output = T>,
{
    let device = first_of(threads);
    let a = filled::<T>(lda * n, 9);
    let mut buffer = device.upload(&a).unwrap();
    device.qr_q(&mut buffer, m, n, lda).unwrap();
    let q = buffer.to_host_vec().unwrap();
    let at = |data: &[T], i: usize, j: usize| data[i + j * lda];
    let mut worst_orthogonality = 0.0_f64;
    for i in 0..n {
        for j in 0..n {
            let mut dot = T::zero();
            for r in 0..m {
                dot += at(&q, r, i).conj() * at(&q, r, j);
            }
            let target = if i == j { T::one() } else { T::zero() };
            worst_orthogonality = worst_orthogonality.max((dot - target).abs());
        }
    }
    assert!(
        worst_orthogonality < tolerance,
        "||Q^H Q - I|| = {worst_orthogonality:e}"
    );
    // The projector onto Q's columns reproduces A: they span A's column space.
    let mut worst_projection = 0.0_f64;
    for j in 0..n {
        let coefficients: Vec<T> = (0..n)
            .map(|c| (0..m).fold(T::zero(), |s, r| s + at(&q, r, c).conj() * at(&a, r, j)))
            .collect();
        for r in 0..m {
            let projected = (0..n).fold(T::zero(), |s, c| s + at(&q, r, c) * coefficients[c]);
            worst_projection = worst_projection.max((projected - at(&a, r, j)).abs());
        }
    }
    // Relative to A's largest entry: the projection reproduces A to its own rounding.
    let scale = a.iter().fold(1.0_f64, |s, x| s.max(x.abs()));
    assert!(
        worst_projection < tolerance * scale,
        "||Q Q^H A - A|| = {worst_projection:e} against entries up to {scale:e}"
    );
    // Rows between m and lda are the caller's: untouched.
    for j in 0..n {
        for r in m..lda {
            assert_eq!(
                at(&q, r, j),
                at(&a, r, j),
                "padding row {r} of column {j} changed"
            );
        }
    }
}

#[test]
fn thin_q_is_orthonormal_and_spans_the_matrix() {
    // Householder QR: orthogonality to a small multiple of m * eps.
    check_qr::<f64>(40, 12, 43, 1, 1e-13);
    check_qr::<f64>(300, 64, 300, 2, 1e-12);
    check_qr::<f64>(5, 5, 5, 1, 1e-14);
    check_qr::<Complex64>(37, 9, 40, 1, 1e-13);
    check_qr::<Complex64>(200, 48, 200, 2, 1e-12);
}
