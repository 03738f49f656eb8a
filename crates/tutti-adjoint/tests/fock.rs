//! The threaded J/K build against the serial reference and against J/K from the full ERI
// Test helpers outside #[test] functions: a malformed reference should fail loudly.
#![allow(clippy::unwrap_used)]
//! tensor (no permutational symmetry, no screening).

mod common;

use faer::Mat;
use tutti_adjoint::fock::FockBuilder;
use tutti_adjoint::integrals::EriEngine;
use tutti_adjoint::AngularKind;

/// A deterministic symmetric "density" with entries in [-1, 1].
fn density(n: usize) -> Mat<f64> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let mut p = Mat::<f64>::zeros(n, n);
    for i in 0..n {
        for j in 0..=i {
            let value = next();
            p[(i, j)] = value;
            p[(j, i)] = value;
        }
    }
    p
}

fn max_difference(a: &Mat<f64>, b: &Mat<f64>) -> f64 {
    let mut largest: f64 = 0.0;
    for i in 0..a.nrows() {
        for j in 0..a.ncols() {
            largest = largest.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    largest
}

fn max_abs(a: &Mat<f64>) -> f64 {
    let mut largest: f64 = 0.0;
    for i in 0..a.nrows() {
        for j in 0..a.ncols() {
            largest = largest.max(a[(i, j)].abs());
        }
    }
    largest
}

#[test]
fn serial_matches_the_full_tensor() {
    let case = common::load("h2o_631g");
    let basis = case.basis(AngularKind::Spherical);
    let n = basis.nao();
    let engine = EriEngine::new(&basis);
    let p = density(n);
    let jk = FockBuilder::new(&engine, 0.0).serial(p.as_ref());
    let eri = engine.full_tensor();
    let mut j_full = Mat::<f64>::zeros(n, n);
    let mut k_full = Mat::<f64>::zeros(n, n);
    for i in 0..n {
        for j in 0..n {
            let (mut jv, mut kv) = (0.0, 0.0);
            for k in 0..n {
                for l in 0..n {
                    jv += eri[((i * n + j) * n + k) * n + l] * p[(k, l)];
                    kv += eri[((i * n + k) * n + j) * n + l] * p[(k, l)];
                }
            }
            j_full[(i, j)] = jv;
            k_full[(i, j)] = kv;
        }
    }
    let dj = max_difference(&jk.coulomb, &j_full);
    let dk = max_difference(&jk.exchange, &k_full);
    println!("serial vs full tensor: |dJ| {dj:.2e}, |dK| {dk:.2e}");
    assert!(
        dj < 1e-12 * max_abs(&j_full).max(1.0),
        "J differs by {dj:e}"
    );
    assert!(
        dk < 1e-12 * max_abs(&k_full).max(1.0),
        "K differs by {dk:e}"
    );
}

#[test]
fn threaded_matches_serial_at_every_thread_count() {
    let case = common::load("ch4_def2svp");
    let basis = case.basis(AngularKind::Spherical);
    let engine = EriEngine::new(&basis);
    let builder = FockBuilder::new(&engine, 1e-14);
    let p = density(basis.nao());
    let serial = builder.serial(p.as_ref());
    let scale = max_abs(&serial.coulomb).max(max_abs(&serial.exchange));
    for threads in [1, 2, 3, 4, 8] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let threaded = pool.install(|| builder.threaded(p.as_ref()));
        let dj = max_difference(&threaded.coulomb, &serial.coulomb) / scale;
        let dk = max_difference(&threaded.exchange, &serial.exchange) / scale;
        println!("{threads} threads: relative |dJ| {dj:.2e}, |dK| {dk:.2e}");
        assert!(dj < 1e-13 && dk < 1e-13, "{threads} threads: {dj:e} {dk:e}");
        // Repeated runs with one thread count are bitwise identical.
        let again = pool.install(|| builder.threaded(p.as_ref()));
        assert_eq!(max_difference(&again.coulomb, &threaded.coulomb), 0.0);
        assert_eq!(max_difference(&again.exchange, &threaded.exchange), 0.0);
    }
}

#[test]
fn rank_shares_sum_to_the_whole_build() {
    // The parts of 1 to 4 ranks, each on a pool of its own, summed in rank order, match the
    // serial reference; a group of one is the threaded build's bits.
    let case = common::load("h2o_631g");
    let basis = case.basis(AngularKind::Spherical);
    let engine = EriEngine::new(&basis);
    let builder = FockBuilder::new(&engine, 1e-14);
    let p = density(basis.nao());
    let serial = builder.serial(p.as_ref());
    let scale = max_abs(&serial.coulomb).max(max_abs(&serial.exchange));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let whole = pool.install(|| builder.threaded(p.as_ref()));
    let one = pool.install(|| builder.partial(p.as_ref(), 0, 1)).finish();
    assert_eq!(max_difference(&one.coulomb, &whole.coulomb), 0.0);
    assert_eq!(max_difference(&one.exchange, &whole.exchange), 0.0);
    for ranks in 1..=4 {
        let mut total = pool.install(|| builder.partial(p.as_ref(), 0, ranks));
        for rank in 1..ranks {
            total.add(&pool.install(|| builder.partial(p.as_ref(), rank, ranks)));
        }
        let total = total.finish();
        let dj = max_difference(&total.coulomb, &serial.coulomb) / scale;
        let dk = max_difference(&total.exchange, &serial.exchange) / scale;
        println!("{ranks} ranks: relative |dJ| {dj:.2e}, |dK| {dk:.2e}");
        assert!(dj < 1e-13 && dk < 1e-13, "{ranks} ranks: {dj:e} {dk:e}");
    }
}
