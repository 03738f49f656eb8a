//! The sparse factorization handle from Rust, called as C would: analyse, factor, refactor,
//! solve and free; the same bits on 1, 2 and 4 simulated devices, from CSR or CSC arrays,
//! 0- or 1-based; complex128 handles (`_c128`) on a damped Helmholtz operator; and every bad
//! input a status with a message naming it.

use std::ffi::c_int;
use std::ptr;

use tutti::boundary::last_error;
use tutti::{
    tutti_sparse_analyse, tutti_sparse_factor, tutti_sparse_factor_c128, tutti_sparse_free,
    tutti_sparse_info, tutti_sparse_options_default, tutti_sparse_solve, tutti_sparse_solve_c128,
    TuttiDtype, TuttiKind, TuttiSparse, TuttiSparseInfo, TuttiSparseLayout, TuttiSparseOptions,
    TuttiSparseSolveInfo, TuttiStatus,
};
use tutti_sparse::models::{convection_diffusion, helmholtz};
use tutti_sparse::{c64, CsrMatrix};

const OK: c_int = TuttiStatus::TUTTI_OK as c_int;
const INVALID: c_int = TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT as c_int;
const NULL: c_int = TuttiStatus::TUTTI_ERROR_NULL_POINTER as c_int;
const SINGULAR: c_int = TuttiStatus::TUTTI_ERROR_SINGULAR as c_int;
const OUT_OF_MEMORY: c_int = TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY as c_int;

/// Default options on `devices` simulated devices.
fn options(devices: c_int) -> TuttiSparseOptions {
    let mut options = TuttiSparseOptions::default();
    // SAFETY: a valid, writable options struct.
    assert_eq!(unsafe { tutti_sparse_options_default(&mut options) }, OK);
    options.resources.kind = TuttiKind::TUTTI_KIND_CPU as c_int;
    options.resources.devices = devices;
    options
}

/// The compressed arrays of a matrix as C gives them: 64-bit, shifted by `base`.
fn arrays(pointers: &[usize], indices: &[usize], base: i64) -> (Vec<i64>, Vec<i64>) {
    let shift = |v: &[usize]| v.iter().map(|&i| i as i64 + base).collect();
    (shift(pointers), shift(indices))
}

/// Analyses, or the failing status and message.
fn analyse(
    n: i64,
    pointers: &[i64],
    indices: &[i64],
    options: &TuttiSparseOptions,
) -> Result<*mut TuttiSparse, (c_int, String)> {
    let mut handle = ptr::null_mut();
    // SAFETY: arrays of the lengths the pointers claim (n + 1, and the entries).
    let status = unsafe {
        tutti_sparse_analyse(n, pointers.as_ptr(), indices.as_ptr(), options, &mut handle)
    };
    if status == OK {
        Ok(handle)
    } else {
        assert!(handle.is_null(), "no handle on failure");
        Err((status, last_error()))
    }
}

fn factor(handle: *mut TuttiSparse, values: &[f64]) -> c_int {
    // SAFETY: a live handle and `values.len()` readable doubles.
    unsafe { tutti_sparse_factor(handle, values.as_ptr(), values.len() as i64) }
}

fn solve(handle: *mut TuttiSparse, b: &mut [f64], rhs: i64) -> (c_int, TuttiSparseSolveInfo) {
    let mut info = TuttiSparseSolveInfo::default();
    // SAFETY: a live handle, `b` of n * rhs doubles, `info` writable.
    let status = unsafe { tutti_sparse_solve(handle, b.as_mut_ptr(), rhs, &mut info) };
    (status, info)
}

fn info(handle: *mut TuttiSparse) -> TuttiSparseInfo {
    let mut info = TuttiSparseInfo::default();
    // SAFETY: a live handle, `info` writable.
    assert_eq!(unsafe { tutti_sparse_info(handle, &mut info) }, OK);
    info
}

fn free(handle: *mut TuttiSparse) -> c_int {
    // SAFETY: a handle from tutti_sparse_analyse (live or released: the registry decides).
    unsafe { tutti_sparse_free(handle) }
}

/// Two right-hand sides, column-major: `A 1` and `A t` with t_i = i / n, so the exact
/// solutions are known.
fn right_hand_sides(a: &CsrMatrix) -> (Vec<f64>, Vec<f64>) {
    let n = a.rows();
    let mut x = vec![1.0; n];
    x.extend((0..n).map(|i| i as f64 / n as f64));
    let mut b = vec![0.0; 2 * n];
    a.matvec(&x[..n], &mut b[..n]).expect("lengths");
    a.matvec(&x[n..], &mut b[n..]).expect("lengths");
    (b, x)
}

#[test]
fn csr_and_csc_solve_to_the_same_bits_on_any_device_count() {
    // Unsymmetric, so CSR and CSC arrays differ.
    let a = convection_diffusion(&[14, 13], 30.0).expect("model");
    let n = a.rows();
    let (b, exact) = right_hand_sides(&a);
    let at = a.transpose().expect("transpose");
    let mut first: Option<Vec<f64>> = None;
    for devices in [1, 2, 4] {
        for (layout, base) in [
            (TuttiSparseLayout::TUTTI_SPARSE_CSR, 0),
            (TuttiSparseLayout::TUTTI_SPARSE_CSC, 0),
            (TuttiSparseLayout::TUTTI_SPARSE_CSR, 1),
        ] {
            let mut options = options(devices);
            options.layout = layout as c_int;
            options.index_base = base as c_int;
            // The CSC arrays of A are the CSR arrays of A^T.
            let source = match layout {
                TuttiSparseLayout::TUTTI_SPARSE_CSR => &a,
                TuttiSparseLayout::TUTTI_SPARSE_CSC => &at,
            };
            let (pointers, indices) = arrays(source.indptr(), source.indices(), base);
            let handle = analyse(n as i64, &pointers, &indices, &options).expect("analyses");
            assert_eq!(info(handle).factored, 0);
            assert_eq!(factor(handle, source.values()), OK, "{}", last_error());
            let mut x = b.clone();
            let (status, solved) = solve(handle, &mut x, 2);
            assert_eq!(status, OK, "{}", last_error());
            assert!(solved.backward_error < 1e-15, "{solved:?}");
            // Cond(A) here is about 1e2, so the forward error is near 1e2 eps.
            let error = x
                .iter()
                .zip(&exact)
                .fold(0.0f64, |m, (x, e)| m.max((x - e).abs()));
            assert!(error < 1e-12, "max error {error:e}");
            match &first {
                None => first = Some(x),
                Some(reference) => assert_eq!(
                    &x, reference,
                    "{devices} device(s), {layout:?}, base {base}: other bits"
                ),
            }
            let facts = info(handle);
            assert_eq!(facts.unknowns, n as i64);
            assert_eq!(facts.matrix_nnz, a.nnz() as i64);
            assert_eq!(facts.devices, devices);
            assert_eq!(facts.factored, 1);
            assert_eq!(facts.perturbed_pivots, 0);
            assert!(facts.factor_nnz >= a.nnz() as i64 && facts.factor_flops > 0.0);
            assert!(facts.device_bytes > 0);
            assert_eq!(free(handle), OK);
        }
    }
}

#[test]
fn refactoring_with_new_values_reuses_the_analysis() {
    let a = convection_diffusion(&[9, 8, 7], -5.0).expect("model");
    let n = a.rows();
    let (pointers, indices) = arrays(a.indptr(), a.indices(), 0);
    let handle = analyse(n as i64, &pointers, &indices, &options(3)).expect("analyses");
    let fronts = info(handle).fronts;
    let (b, exact) = right_hand_sides(&a);
    for scale in [1.0, 4.0, 0.5] {
        let values: Vec<f64> = a.values().iter().map(|v| v * scale).collect();
        assert_eq!(factor(handle, &values), OK, "{}", last_error());
        let mut x = b.clone();
        assert_eq!(solve(handle, &mut x, 2).0, OK, "{}", last_error());
        // (s A) x = b: x = exact / s; scaling by powers of two is exact.
        for (x, e) in x.iter().zip(&exact) {
            assert!((x * scale - e).abs() < 1e-12, "{x} * {scale} vs {e}");
        }
        assert_eq!(info(handle).fronts, fronts);
    }
    // A failed refactorization leaves no factors behind: solving is refused, not stale.
    let mut bad = a.values().to_vec();
    bad[5] = f64::NAN;
    assert_eq!(factor(handle, &bad), INVALID);
    assert!(last_error().contains("NaN"), "{}", last_error());
    assert_eq!(info(handle).factored, 0);
    let mut x = b.clone();
    assert_eq!(solve(handle, &mut x, 2).0, INVALID);
    assert!(
        last_error().contains("no factorization"),
        "{}",
        last_error()
    );
    assert_eq!(x, b, "b untouched on failure");
    assert_eq!(free(handle), OK);
}

#[test]
fn duplicates_are_summed_and_grids_ordered_geometrically() {
    // The 1-D Laplacian of 6 points with every diagonal entry given as 1 + 1.
    let n = 6;
    let mut pointers = vec![0i64];
    let (mut indices, mut values) = (Vec::new(), Vec::new());
    for i in 0..n {
        for (j, v) in [(i - 1, -1.0), (i, 1.0), (i, 1.0), (i + 1, -1.0)] {
            if (0..n).contains(&j) {
                indices.push(j);
                values.push(v);
            }
        }
        pointers.push(indices.len() as i64);
    }
    let mut options = options(2);
    options.grid_dims = [6, 0, 0];
    options.leaf_size = 2;
    let handle = analyse(n, &pointers, &indices, &options).expect("analyses");
    assert_eq!(info(handle).matrix_nnz, 3 * n - 2);
    assert_eq!(factor(handle, &values), OK, "{}", last_error());
    // A x = b for x = (1..=6): b = (0, 0, 0, 0, 0, 7).
    let mut x = vec![0.0, 0.0, 0.0, 0.0, 0.0, 7.0];
    assert_eq!(solve(handle, &mut x, 1).0, OK);
    for (i, x) in x.iter().enumerate() {
        assert!((x - (i + 1) as f64).abs() < 1e-13, "x[{i}] = {x}");
    }
    assert_eq!(free(handle), OK);

    // A grid of another size than n.
    options.grid_dims = [3, 3, 0];
    let (status, message) = analyse(n, &pointers, &indices, &options).expect_err("refused");
    assert_eq!(status, INVALID, "{message}");
    assert!(message.contains("9"), "{message}");
}

#[test]
fn singular_matrices_have_their_own_status() {
    // Structurally singular: row 1 is empty.
    let (status, message) = analyse(2, &[0, 2, 2], &[0, 1], &options(1)).expect_err("refused");
    assert_eq!(status, SINGULAR, "{message}");
    assert!(message.contains("structurally singular"), "{message}");
    // Numerically singular: [[1, 1], [1, 1]].
    let handle = analyse(2, &[0, 2, 4], &[0, 1, 0, 1], &options(1)).expect("analyses");
    assert_eq!(factor(handle, &[1.0, 1.0, 1.0, 1.0]), OK);
    assert_eq!(info(handle).perturbed_pivots, 1);
    let mut b = vec![1.0, 2.0];
    assert_eq!(solve(handle, &mut b, 1).0, SINGULAR);
    assert!(
        last_error().contains("numerically singular"),
        "{}",
        last_error()
    );
    assert_eq!(b, [1.0, 2.0]);
    assert_eq!(free(handle), OK);
}

/// n, pointers, indices, options, the status expected and a phrase of its message.
type BadCase = (
    i64,
    Vec<i64>,
    Vec<i64>,
    TuttiSparseOptions,
    c_int,
    &'static str,
);

#[test]
fn bad_arguments_are_refused_with_their_names() {
    let ok = options(1);
    let (p, i) = (vec![0i64, 1, 2], vec![0i64, 1]);
    let cases: Vec<BadCase> = vec![
        (0, p.clone(), i.clone(), ok, INVALID, "`n` is 0"),
        (
            2,
            vec![1, 1, 2],
            i.clone(),
            ok,
            INVALID,
            "`pointers` starts at 1",
        ),
        (2, vec![0, 2, 1], i.clone(), ok, INVALID, "decrease"),
        (2, p.clone(), vec![0, 2], ok, INVALID, "out of range"),
        (2, p.clone(), vec![0, -1], ok, INVALID, "`indices`[1] is -1"),
        (2, vec![0, 0, 0], vec![0], ok, INVALID, "`indices` is empty"),
        (
            2,
            p.clone(),
            i.clone(),
            TuttiSparseOptions { layout: 2, ..ok },
            INVALID,
            "options->layout",
        ),
        (
            2,
            p.clone(),
            i.clone(),
            TuttiSparseOptions {
                index_base: 1,
                ..ok
            },
            INVALID,
            "indices start at 1",
        ),
        (
            2,
            p.clone(),
            i.clone(),
            TuttiSparseOptions { block: 0, ..ok },
            INVALID,
            "options->block",
        ),
        (
            2,
            p.clone(),
            i.clone(),
            TuttiSparseOptions {
                pivot_tiny: f64::NAN,
                ..ok
            },
            INVALID,
            "options->pivot_tiny",
        ),
        (
            2,
            p.clone(),
            i.clone(),
            TuttiSparseOptions {
                max_refinements: -1,
                ..ok
            },
            INVALID,
            "options->max_refinements",
        ),
        (
            2,
            p.clone(),
            i.clone(),
            TuttiSparseOptions {
                grid_periodic: [2, 0, 0],
                grid_dims: [2, 0, 0],
                ..ok
            },
            INVALID,
            "grid_periodic[0]",
        ),
    ];
    for (n, pointers, indices, options, expected, needle) in cases {
        let (status, message) = analyse(n, &pointers, &indices, &options).expect_err("refused");
        assert_eq!(status, expected, "{needle}: {message}");
        assert!(
            message.contains(needle),
            "expected {needle:?} in {message:?}"
        );
    }

    // NULL pointers.
    let mut handle = ptr::null_mut();
    // SAFETY: NULL arrays are checked before any read.
    let status = unsafe { tutti_sparse_analyse(2, ptr::null(), i.as_ptr(), &ok, &mut handle) };
    assert_eq!(status, NULL);
    // SAFETY: as above; NULL options mean the defaults, NULL output is refused.
    let status =
        unsafe { tutti_sparse_analyse(2, p.as_ptr(), i.as_ptr(), ptr::null(), ptr::null_mut()) };
    assert_eq!(status, NULL);
    assert!(last_error().contains("handle_out"), "{}", last_error());

    // Handle misuse: wrong nnz, NULL values, solve before factor, n_rhs 0, double free.
    let handle = analyse(2, &p, &i, &ok).expect("analyses");
    assert_eq!(factor(handle, &[1.0]), INVALID);
    assert!(last_error().contains("2 entries"), "{}", last_error());
    // SAFETY: NULL values are checked before any read.
    assert_eq!(unsafe { tutti_sparse_factor(handle, ptr::null(), 2) }, NULL);
    let mut b = vec![1.0, 1.0];
    assert_eq!(solve(handle, &mut b, 1).0, INVALID);
    assert_eq!(factor(handle, &[2.0, 4.0]), OK);
    assert_eq!(solve(handle, &mut b, 0).0, INVALID);
    b[1] = f64::INFINITY;
    assert_eq!(solve(handle, &mut b, 1).0, INVALID);
    b[1] = 1.0;
    // SAFETY: a live handle; NULL info is allowed.
    let status = unsafe { tutti_sparse_solve(handle, b.as_mut_ptr(), 1, ptr::null_mut()) };
    assert_eq!(status, OK);
    assert_eq!(b, [0.5, 0.25]);
    assert_eq!(free(handle), OK);
    assert_eq!(free(handle), INVALID);
    assert!(
        last_error().contains("not a live sparse handle"),
        "{}",
        last_error()
    );
    assert_eq!(factor(handle, &[2.0, 4.0]), INVALID);
    assert_eq!(free(ptr::null_mut()), OK);
}

#[test]
fn a_factorization_too_large_for_one_capped_device_fits_on_four() {
    let a = convection_diffusion(&[12, 12, 12], 1.0).expect("model");
    let (pointers, indices) = arrays(a.indptr(), a.indices(), 0);
    let one = analyse(a.rows() as i64, &pointers, &indices, &options(1)).expect("fits");
    let four = analyse(a.rows() as i64, &pointers, &indices, &options(4)).expect("fits");
    let (one_bytes, four_bytes) = (info(one).device_bytes, info(four).device_bytes);
    assert!(four_bytes < one_bytes, "{four_bytes} vs {one_bytes}");
    // A cap between the two: one device is refused up front, four factor.
    let cap = (one_bytes + four_bytes) / 2;
    let mut capped_one = options(1);
    capped_one.resources.device_memory_bytes = cap;
    let (status, message) =
        analyse(a.rows() as i64, &pointers, &indices, &capped_one).expect_err("refused");
    assert_eq!(status, OUT_OF_MEMORY, "{message}");
    let mut capped_four = options(4);
    capped_four.resources.device_memory_bytes = cap;
    let handle = analyse(a.rows() as i64, &pointers, &indices, &capped_four).expect("fits");
    assert_eq!(factor(handle, a.values()), OK, "{}", last_error());
    for handle in [one, four, handle] {
        assert_eq!(free(handle), OK);
    }
}

const COMPLEX128: c_int = TuttiDtype::TUTTI_DTYPE_COMPLEX128 as c_int;

/// Default options for complex128 values on `devices` simulated devices.
fn complex_options(devices: c_int) -> TuttiSparseOptions {
    TuttiSparseOptions {
        dtype: COMPLEX128,
        ..options(devices)
    }
}

/// Complex values as C gives them: `(re, im)` pairs of doubles.
fn interleaved(values: &[c64]) -> Vec<f64> {
    values.iter().flat_map(|z| [z.re, z.im]).collect()
}

fn factor_c128(handle: *mut TuttiSparse, values: &[c64]) -> c_int {
    let packed = interleaved(values);
    // SAFETY: a live handle and 2 * values.len() readable doubles.
    unsafe { tutti_sparse_factor_c128(handle, packed.as_ptr(), values.len() as i64) }
}

/// Solves in complex128: `b` holds `rhs` columns of n complex values as (re, im) pairs.
fn solve_c128(handle: *mut TuttiSparse, b: &mut [f64], rhs: i64) -> (c_int, TuttiSparseSolveInfo) {
    let mut info = TuttiSparseSolveInfo::default();
    // SAFETY: a live handle, `b` of 2 * n * rhs doubles, `info` writable.
    let status = unsafe { tutti_sparse_solve_c128(handle, b.as_mut_ptr(), rhs, &mut info) };
    (status, info)
}

/// `max_j ||A x_j - b_j||_inf / (||A||_inf ||x_j||_inf)` over `rhs` complex columns given
/// as (re, im) pairs.
fn complex_residual(a: &CsrMatrix<c64>, x: &[f64], b: &[f64]) -> f64 {
    let n = a.rows();
    let unpack =
        |v: &[f64]| -> Vec<c64> { v.chunks_exact(2).map(|p| c64::new(p[0], p[1])).collect() };
    let (x, b) = (unpack(x), unpack(b));
    let mut ax = vec![c64::new(0.0, 0.0); n];
    let mut worst = 0.0f64;
    for (x, b) in x.chunks_exact(n).zip(b.chunks_exact(n)) {
        a.matvec(x, &mut ax).expect("lengths");
        let residual = ax
            .iter()
            .zip(b)
            .fold(0.0f64, |m, (p, q)| m.max((p - q).norm()));
        let scale = a.norm_inf() * x.iter().fold(0.0f64, |m, v| m.max(v.norm()));
        worst = worst.max(residual / scale);
    }
    worst
}

#[test]
fn complex_helmholtz_solves_to_the_same_bits_on_one_and_two_devices() {
    // -Δu - (k^2 + iσ) u on a 24 x 20 grid (scaled by h^2): complex symmetric, indefinite,
    // ||A^-1||_2 <= 1 / 0.05.
    let a = helmholtz(&[24, 20], c64::new(0.5, 0.05)).expect("model");
    let n = a.rows();
    let (pointers, indices) = arrays(a.indptr(), a.indices(), 0);
    // Two right-hand sides with complex entries everywhere, as (re, im) pairs.
    let b: Vec<f64> = (0..2 * n)
        .flat_map(|k| {
            let t = k as f64 / n as f64;
            [1.0 + (3.0 * t).sin(), (5.0 * t).cos() - 0.5]
        })
        .collect();
    let mut first: Option<Vec<f64>> = None;
    for devices in [1, 2] {
        let handle =
            analyse(n as i64, &pointers, &indices, &complex_options(devices)).expect("analyses");
        assert_eq!(factor_c128(handle, a.values()), OK, "{}", last_error());
        let mut x = b.clone();
        let (status, solved) = solve_c128(handle, &mut x, 2);
        assert_eq!(status, OK, "{}", last_error());
        assert!(solved.backward_error < 1e-14, "{solved:?}");
        // A backward-stable solve leaves a residual near eps relative to ||A|| ||x||
        // (tutti-sparse's complex tests see 2e-16 to 4e-16); 1e-13 is far above rounding
        // and far below any misread value (a swapped real and imaginary part gives O(1)).
        let residual = complex_residual(&a, &x, &b);
        println!("complex Helmholtz 24 x 20, {devices} device(s): residual {residual:.2e}");
        assert!(residual <= 1e-13, "residual {residual:e}");
        match &first {
            None => first = Some(x),
            Some(reference) => assert_eq!(&x, reference, "{devices} devices: other bits"),
        }
        let facts = info(handle);
        assert_eq!((facts.factored, facts.devices), (1, devices));
        assert_eq!(free(handle), OK);
    }
}

#[test]
fn a_complex_plan_counts_sixteen_bytes_per_entry() {
    let a = helmholtz(&[10, 9, 8], c64::new(0.5, 0.05)).expect("model");
    let (pointers, indices) = arrays(a.indptr(), a.indices(), 0);
    let n = a.rows() as i64;
    let real = analyse(n, &pointers, &indices, &options(2)).expect("fits");
    let complex = analyse(n, &pointers, &indices, &complex_options(2)).expect("fits");
    let (real_bytes, complex_bytes) = (info(real).device_bytes, info(complex).device_bytes);
    assert_eq!(
        complex_bytes,
        2 * real_bytes,
        "{complex_bytes} vs {real_bytes}"
    );
    // A cap between the two: the real factorization fits, the complex one is refused up
    // front.
    let cap = (real_bytes + complex_bytes) / 2;
    let mut capped = options(2);
    capped.resources.device_memory_bytes = cap;
    let fits = analyse(n, &pointers, &indices, &capped).expect("the real plan fits");
    capped.dtype = COMPLEX128;
    let (status, message) = analyse(n, &pointers, &indices, &capped).expect_err("refused");
    assert_eq!(status, OUT_OF_MEMORY, "{message}");
    for handle in [real, complex, fits] {
        assert_eq!(free(handle), OK);
    }
}

#[test]
fn calls_of_the_other_dtype_are_refused_by_name() {
    // [[2, i], [0, 4]] and its real part.
    let (p, i) = (vec![0i64, 2, 3], vec![0i64, 1, 1]);
    let values = [c64::new(2.0, 0.0), c64::new(0.0, 1.0), c64::new(4.0, 0.0)];
    let complex = analyse(2, &p, &i, &complex_options(1)).expect("analyses");
    assert_eq!(factor(complex, &[2.0, 0.0, 4.0]), INVALID);
    let message = last_error();
    assert!(
        message.starts_with("tutti_sparse_factor: ")
            && message.contains("TUTTI_DTYPE_COMPLEX128")
            && message.contains("call tutti_sparse_factor_c128"),
        "{message}"
    );
    assert_eq!(factor_c128(complex, &values), OK, "{}", last_error());
    let mut b = vec![1.0, 1.0];
    assert_eq!(solve(complex, &mut b, 1).0, INVALID);
    assert!(
        last_error().contains("call tutti_sparse_solve_c128"),
        "{}",
        last_error()
    );
    assert_eq!(b, [1.0, 1.0], "b untouched");
    // The refused solve left the factors: x = (1 + i, 1) for b = A x = (2 + 3i, 4).
    let mut b = vec![2.0, 3.0, 4.0, 0.0];
    let (status, _) = solve_c128(complex, &mut b, 1);
    assert_eq!(status, OK, "{}", last_error());
    assert_eq!(b, [1.0, 1.0, 1.0, 0.0]);

    let real = analyse(2, &p, &i, &options(1)).expect("analyses");
    assert_eq!(factor_c128(real, &values), INVALID);
    let message = last_error();
    assert!(
        message.starts_with("tutti_sparse_factor_c128: ")
            && message.contains("TUTTI_DTYPE_FLOAT64")
            && message.contains("call tutti_sparse_factor instead"),
        "{message}"
    );
    assert_eq!(factor(real, &[2.0, 1.0, 4.0]), OK);
    let mut b = vec![1.0, 0.0, 1.0, 0.0];
    assert_eq!(solve_c128(real, &mut b, 1).0, INVALID);
    assert!(
        last_error().contains("call tutti_sparse_solve instead"),
        "{}",
        last_error()
    );
    assert_eq!(b, [1.0, 0.0, 1.0, 0.0], "b untouched");

    // A dtype that is neither.
    let bad = TuttiSparseOptions {
        dtype: 2,
        ..options(1)
    };
    let (status, message) = analyse(2, &p, &i, &bad).expect_err("refused");
    assert_eq!(status, INVALID, "{message}");
    assert!(message.contains("options->dtype is 2"), "{message}");
    for handle in [complex, real] {
        assert_eq!(free(handle), OK);
    }
}

#[test]
fn non_finite_complex_values_are_refused() {
    let a = helmholtz(&[5, 4], c64::new(0.5, 0.05)).expect("model");
    let (pointers, indices) = arrays(a.indptr(), a.indices(), 0);
    let handle = analyse(a.rows() as i64, &pointers, &indices, &complex_options(1)).expect("ok");
    assert_eq!(factor_c128(handle, a.values()), OK, "{}", last_error());
    // A NaN imaginary part of a finite real part.
    let mut bad = a.values().to_vec();
    bad[7].im = f64::NAN;
    assert_eq!(factor_c128(handle, &bad), INVALID);
    let message = last_error();
    let row = a.indptr().partition_point(|&start| start <= 7) - 1;
    let col = a.indices()[7];
    assert!(
        message.contains(&format!("entry ({row}, {col}) is NaN")),
        "{message}"
    );
    // No stale factors after the failure.
    assert_eq!(info(handle).factored, 0);
    let mut b = vec![1.0; 2 * a.rows()];
    assert_eq!(solve_c128(handle, &mut b, 1).0, INVALID);
    assert!(
        last_error().contains("call tutti_sparse_factor_c128 first"),
        "{}",
        last_error()
    );
    // An infinite real part; then a right-hand side with an infinite imaginary part.
    bad[7] = c64::new(f64::INFINITY, 0.0);
    assert_eq!(factor_c128(handle, &bad), INVALID);
    assert!(last_error().contains("inf"), "{}", last_error());
    assert_eq!(factor_c128(handle, a.values()), OK);
    b[3] = f64::NEG_INFINITY;
    assert_eq!(solve_c128(handle, &mut b, 1).0, INVALID);
    assert!(last_error().contains("finite"), "{}", last_error());
    assert_eq!(b[3], f64::NEG_INFINITY, "b untouched");
    // NULL values and a wrong count.
    // SAFETY: NULL values are checked before any read.
    let status = unsafe { tutti_sparse_factor_c128(handle, ptr::null(), a.nnz() as i64) };
    assert_eq!(status, NULL);
    assert_eq!(factor_c128(handle, &a.values()[1..]), INVALID);
    assert!(last_error().contains("entries"), "{}", last_error());
    assert_eq!(free(handle), OK);
}
