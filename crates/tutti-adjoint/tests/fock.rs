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

/// J and K of `p` from the full ERI tensor (the reference kernel, quartet by quartet, no
/// screening, no symmetry in the sums).
fn jk_from_the_full_tensor(engine: &EriEngine, p: &Mat<f64>) -> (Mat<f64>, Mat<f64>) {
    let n = engine.nao();
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
    (j_full, k_full)
}

#[test]
fn serial_matches_the_full_tensor() {
    // Shells of 1, 3, 5 and 7 functions (the digest's fixed-length copies) in every place
    // of a quartet, and Cartesian d (6, its generic loop), with no screening.
    for (name, kind) in [
        ("h2o_631g", AngularKind::Spherical),
        ("h2o_def2tzvp", AngularKind::Spherical),
        ("h2o_631gs_cart", AngularKind::Cartesian),
    ] {
        let case = common::load(name);
        let basis = case.basis(kind);
        let n = basis.nao();
        let engine = EriEngine::new(&basis);
        let p = density(n);
        let jk = FockBuilder::new(&engine, 0.0).serial(p.as_ref());
        let (j_full, k_full) = jk_from_the_full_tensor(&engine, &p);
        let dj = max_difference(&jk.coulomb, &j_full);
        let dk = max_difference(&jk.exchange, &k_full);
        println!("{name}: serial vs full tensor: |dJ| {dj:.2e}, |dK| {dk:.2e}");
        // Sums of n^2 terms of one sign mix in other orders: rounding, 1e-12 of the largest.
        let (j_scale, k_scale) = (max_abs(&j_full).max(1.0), max_abs(&k_full).max(1.0));
        assert!(dj < 1e-12 * j_scale, "{name}: J differs by {dj:e}");
        assert!(dk < 1e-12 * k_scale, "{name}: K differs by {dk:e}");
    }
}

#[test]
fn threaded_matches_serial_and_has_the_same_bits_at_every_thread_count() {
    let case = common::load("ch4_def2svp");
    let basis = case.basis(AngularKind::Spherical);
    let engine = EriEngine::new(&basis);
    let builder = FockBuilder::new(&engine, 1e-14);
    let p = density(basis.nao());
    let serial = builder.serial(p.as_ref());
    let scale = max_abs(&serial.coulomb).max(max_abs(&serial.exchange));
    let mut first: Option<tutti_adjoint::fock::CoulombExchange> = None;
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
        // Repeated runs are bitwise identical, and so are runs on pools of any size: the
        // task lists, and so the order of every sum, do not depend on the thread count.
        let again = pool.install(|| builder.threaded(p.as_ref()));
        let reference = first.get_or_insert_with(|| threaded.clone());
        for other in [&again, &threaded] {
            for (x, y) in [
                (&other.coulomb, &reference.coulomb),
                (&other.exchange, &reference.exchange),
            ] {
                let same = (0..x.nrows())
                    .all(|i| (0..x.ncols()).all(|j| x[(i, j)].to_bits() == y[(i, j)].to_bits()));
                assert!(same, "{threads} threads: not the bits of 1 thread");
            }
        }
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

#[test]
fn shared_general_contraction_columns_match_the_full_tensor() {
    // Water in cc-pVTZ: oxygen's two s columns over the same ten primitives are computed
    // together by default. J and K must match those of the full tensor (the reference
    // kernel, one quartet of shells at a time), serial and threaded, with and without
    // screening; so must the builder with the columns split.
    let case = common::load("h2o_ccpvtz");
    let basis = case.basis(AngularKind::Spherical);
    let engine = EriEngine::new(&basis);
    let p = density(basis.nao());
    let (j_full, k_full) = jk_from_the_full_tensor(&engine, &p);
    let scale = max_abs(&j_full).max(max_abs(&k_full));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    for threshold in [0.0, 1e-14] {
        let shared = FockBuilder::new(&engine, threshold);
        let split = FockBuilder::new(&engine, threshold).with_shared_columns(false);
        for (path, jk) in [
            ("shared, serial", shared.serial(p.as_ref())),
            (
                "shared, threaded",
                pool.install(|| shared.threaded(p.as_ref())),
            ),
            ("split, serial", split.serial(p.as_ref())),
        ] {
            let dj = max_difference(&jk.coulomb, &j_full) / scale;
            let dk = max_difference(&jk.exchange, &k_full) / scale;
            println!("threshold {threshold:e}, {path}: relative |dJ| {dj:.2e}, |dK| {dk:.2e}");
            // Sums of 58^2 terms in other orders, and at 1e-14 the screened quartets (each
            // below 1e-14 times a density element of at most 1): 1e-13 of the largest element.
            assert!(dj < 1e-13 && dk < 1e-13, "{path}: {dj:e} {dk:e}");
        }
    }
}
