//! The solver in complex arithmetic: damped Helmholtz operators in 2-D and 3-D and a
//! time-harmonic convection-diffusion operator solve to rounding and agree with faer's
//! sparse LU; a small Gaussian-integer system solves exactly; splits among 1, 2 and 4 ranks
//! give the bits of one; a zero pivot is perturbed and refined; non-finite entries are
//! refused; Matrix Market complex files round-trip and are refused as real.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::faer_solve;
use tutti_backend::{GpuUse, Resources};
use tutti_group::Group;
use tutti_sparse::models::{helmholtz, laplacian, time_harmonic_convection_diffusion};
use tutti_sparse::ordering::{Grid, OrderingOptions};
use tutti_sparse::{
    analyse, c64, matrix_market, CsrMatrix, FactorOptions, Factorization, OrderingMethod,
    SeparatorTree, SolveOptions, SparseError, SplitFactorization, Symbolic,
};

/// `|z|`.
fn modulus(z: c64) -> f64 {
    z.re.hypot(z.im)
}

/// `||v||_inf` with `|z|`.
fn norm(v: &[c64]) -> f64 {
    v.iter().fold(0.0f64, |m, &z| m.max(modulus(z)))
}

/// A complex right-hand side with entries of several scales and phases.
fn rhs(n: usize, seed: usize) -> Vec<c64> {
    (0..n)
        .map(|i| {
            let k = i * 7919 + seed * 104_729;
            c64::new(
                (k % 1000) as f64 / 500.0 - 1.0,
                ((k / 7) % 997) as f64 / 400.0 - 1.2,
            )
        })
        .collect()
}

/// `||A x - b||_inf / (||A||_inf ||x||_inf)`.
fn relative_residual(a: &CsrMatrix<c64>, x: &[c64], b: &[c64]) -> f64 {
    let mut ax = vec![c64::new(0.0, 0.0); b.len()];
    a.matvec(x, &mut ax).unwrap();
    let r: Vec<c64> = ax.iter().zip(b).map(|(&p, &q)| p - q).collect();
    norm(&r) / (a.norm_inf() * norm(x))
}

/// `max |x - y| / max |y|`.
fn max_rel_diff(x: &[c64], y: &[c64]) -> f64 {
    let d: Vec<c64> = x.iter().zip(y).map(|(&p, &q)| p - q).collect();
    norm(&d) / norm(y)
}

fn grid(dims: &[usize]) -> Grid {
    Grid {
        dims: dims.to_vec(),
        periodic: vec![false; dims.len()],
        block: 1,
    }
}

/// Solves `a x = b` with `method`; checks the residual and faer's answer; returns both.
fn check(name: &str, a: &CsrMatrix<c64>, method: &OrderingMethod) -> (f64, f64) {
    let symbolic = analyse(a, method).unwrap();
    let lu = Factorization::new(Arc::clone(&symbolic), a, FactorOptions::default()).unwrap();
    let b = rhs(a.rows(), 1);
    let mut x = b.clone();
    let info = lu
        .solve_in_place(&mut x, 1, &SolveOptions::default())
        .unwrap();
    let residual = relative_residual(a, &x, &b);
    assert!(
        residual <= 1e-13,
        "{name}: residual {residual:.2e}, {info:?}"
    );
    // The condition numbers stay below ~1e3 here (|shift.im| bounds ||A^{-1}||).
    let gap = max_rel_diff(&x, &faer_solve(a, &b));
    assert!(gap <= 1e-12, "{name}: {gap:.2e} from faer's sparse LU");
    assert_eq!(lu.perturbed_pivots(), 0, "{name}");
    (residual, gap)
}

#[test]
fn helmholtz_operators_solve_to_rounding_and_agree_with_faer() {
    let cases = [
        (vec![48, 48], c64::new(0.3, 0.05)),
        (vec![12, 12, 12], c64::new(0.8, 0.1)),
        (vec![9, 17, 5], c64::new(1.5, -0.2)),
    ];
    for (dims, shift) in cases {
        let a = helmholtz(&dims, shift).unwrap();
        let methods = [
            OrderingMethod::default(),
            OrderingMethod::NestedDissection(OrderingOptions::default()),
            OrderingMethod::Grid {
                grid: grid(&dims),
                leaf_size: 16,
            },
        ];
        for method in &methods {
            let (residual, gap) = check(&format!("Helmholtz {dims:?}"), &a, method);
            eprintln!("Helmholtz {dims:?}: residual {residual:.2e}, from faer {gap:.2e}");
        }
    }
}

#[test]
fn time_harmonic_convection_diffusion_solves_to_rounding_and_agrees_with_faer() {
    for (dims, peclet, omega) in [(vec![40, 40], 50.0, 0.2), (vec![10, 10, 10], -20.0, 1.0)] {
        let a = time_harmonic_convection_diffusion(&dims, peclet, omega).unwrap();
        assert_ne!(a, a.transpose().unwrap(), "unsymmetric");
        let (residual, gap) = check(
            &format!("convection-diffusion {dims:?}"),
            &a,
            &OrderingMethod::default(),
        );
        eprintln!("convection-diffusion {dims:?}: residual {residual:.2e}, from faer {gap:.2e}");
    }
}

#[test]
fn a_gaussian_integer_system_solves_exactly() {
    // A = L U with L unit lower, its multipliers 0, ±1 or ±i (no row swap: partial pivoting
    // keeps the first of equal magnitudes), and U's pivots 1 + i, -1, 1 - i, 2i, whose
    // squared moduli are powers of 2: elimination and substitution are exact in binary, so
    // the Gaussian-integer solution comes out exactly, without refinement.
    let z = |re: f64, im: f64| c64::new(re, im);
    let o = z(0.0, 0.0);
    let lower = [
        [z(1.0, 0.0), o, o, o],
        [z(0.0, 1.0), z(1.0, 0.0), o, o],
        [o, z(-1.0, 0.0), z(1.0, 0.0), o],
        [z(1.0, 0.0), o, z(0.0, 1.0), z(1.0, 0.0)],
    ];
    let upper = [
        [z(1.0, 1.0), z(2.0, 0.0), z(0.0, -1.0), z(1.0, 0.0)],
        [o, z(-1.0, 0.0), z(1.0, 1.0), z(2.0, 0.0)],
        [o, o, z(1.0, -1.0), z(3.0, 0.0)],
        [o, o, o, z(0.0, 2.0)],
    ];
    let mut entries = Vec::new();
    for (i, l_row) in lower.iter().enumerate() {
        for j in 0..4 {
            let a_ij: c64 = l_row
                .iter()
                .zip(&upper)
                .map(|(&l, u_row)| l * u_row[j])
                .sum();
            if a_ij != o {
                entries.push((i, j, a_ij));
            }
        }
    }
    let a = CsrMatrix::from_triplets(4, 4, &entries).unwrap();
    let want = [z(1.0, 2.0), z(-1.0, 0.0), z(3.0, -1.0), z(0.0, 4.0)];
    let mut b = vec![o; 4];
    a.matvec(&want, &mut b).unwrap();
    let tree = SeparatorTree::new(vec![0, 1, 2, 3], &[(0, 4)], &[None]).unwrap();
    let symbolic = Arc::new(Symbolic::new(&a, tree).unwrap());
    let lu = Factorization::new(symbolic, &a, FactorOptions::default()).unwrap();
    let mut x = b.clone();
    let info = lu
        .solve_in_place(&mut x, 1, &SolveOptions::default())
        .unwrap();
    assert_eq!(x, want, "{info:?}");
    assert_eq!(info.backward_error, 0.0);
    assert_eq!(info.refinements, 0);
}

#[test]
fn split_factorizations_give_the_bits_of_one_rank() {
    let a = helmholtz(&[40, 40], c64::new(0.4, 0.05)).unwrap();
    let symbolic = analyse(
        &a,
        &OrderingMethod::NestedDissection(OrderingOptions {
            leaf_size: 16,
            ..OrderingOptions::default()
        }),
    )
    .unwrap();
    let alone = Factorization::new(Arc::clone(&symbolic), &a, FactorOptions::default()).unwrap();
    let n = a.rows();
    let b: Vec<c64> = (0..2).flat_map(|k| rhs(n, 3 + k)).collect();
    let mut want = b.clone();
    let info = alone
        .solve_in_place(&mut want, 2, &SolveOptions::default())
        .unwrap();
    let bits = |v: &[c64]| {
        v.iter()
            .map(|z| (z.re.to_bits(), z.im.to_bits()))
            .collect::<Vec<_>>()
    };
    for ranks in [1, 2, 4] {
        let resources = Resources::cpu(ranks);
        let group = Group::from_resources(&resources, GpuUse::HostOnly).unwrap();
        let split = SplitFactorization::new(
            &group,
            Arc::clone(&symbolic),
            &a,
            FactorOptions::default(),
            &resources,
        )
        .unwrap();
        assert!(split.parts().iter().all(|p| p.fronts_owned() > 0));
        let mut x = b.clone();
        let got = split
            .solve_in_place(&group, &mut x, 2, &SolveOptions::default())
            .unwrap();
        assert_eq!(got, info, "{ranks} ranks");
        assert_eq!(bits(&x), bits(&want), "{ranks} ranks: other bits");
    }
}

#[test]
fn a_complex_zero_pivot_is_perturbed_and_refined() {
    // [[0, i], [i, 0]] with a third unknown, the zero pivot in a leaf of its own: it cannot
    // be swapped, is perturbed, and refinement recovers the answer.
    let z = |re: f64, im: f64| c64::new(re, im);
    let a = CsrMatrix::from_triplets(
        3,
        3,
        &[
            (0, 1, z(0.0, 1.0)),
            (1, 0, z(0.0, 1.0)),
            (1, 2, z(0.5, 0.5)),
            (2, 1, z(0.5, -0.5)),
            (2, 2, z(3.0, 1.0)),
        ],
    )
    .unwrap();
    let tree = SeparatorTree::new(
        vec![0, 2, 1],
        &[(0, 1), (1, 2), (2, 3)],
        &[Some(2), Some(2), None],
    )
    .unwrap();
    let symbolic = Arc::new(Symbolic::new(&a, tree).unwrap());
    let lu = Factorization::new(symbolic, &a, FactorOptions::default()).unwrap();
    assert_eq!(lu.perturbed_pivots(), 1);
    let b = [z(1.0, 0.0), z(2.0, -1.0), z(0.0, 3.0)];
    let mut x = b.to_vec();
    let info = lu
        .solve_in_place(&mut x, 1, &SolveOptions::default())
        .unwrap();
    assert!(info.refinements >= 1, "{info:?}");
    let residual = relative_residual(&a, &x, &b);
    assert!(residual < 1e-15, "{residual:.2e} {info:?}");
}

#[test]
fn non_finite_complex_entries_are_refused() {
    let z = |re: f64, im: f64| c64::new(re, im);
    for bad in [
        z(1.0, f64::NAN),
        z(f64::INFINITY, 0.0),
        z(0.0, f64::NEG_INFINITY),
    ] {
        let made = CsrMatrix::from_triplets(2, 2, &[(0, 0, z(1.0, 0.0)), (1, 1, bad)]);
        assert!(
            matches!(made, Err(SparseError::NonFinite { row: 1, col: 1, .. })),
            "{made:?}"
        );
        let made = CsrMatrix::try_new(2, 2, vec![0, 1, 2], vec![0, 1], vec![bad, z(1.0, 0.0)]);
        assert!(matches!(made, Err(SparseError::NonFinite { row: 0, .. })));
    }
    let a = helmholtz(&[4, 4], c64::new(0.1, 0.1)).unwrap();
    let symbolic = analyse(&a, &OrderingMethod::default()).unwrap();
    let lu = Factorization::new(symbolic, &a, FactorOptions::default()).unwrap();
    let mut b = rhs(16, 0);
    b[5] = z(0.0, f64::NAN);
    assert!(matches!(
        lu.solve_in_place(&mut b, 1, &SolveOptions::default()),
        Err(SparseError::NonFiniteRightHandSide { row: 5, .. })
    ));
    let mut values = a.values().to_vec();
    values[3] = z(f64::NAN, 0.0);
    assert!(matches!(
        a.with_values(values),
        Err(SparseError::NonFinite { .. })
    ));
}

#[test]
fn complex_matrix_market_files_round_trip_and_are_refused_as_real() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("helmholtz.mtx");
    // Values whose decimal forms are long, and a negative zero.
    let a = time_harmonic_convection_diffusion(&[5, 4], 7.0, 1.0 / 3.0).unwrap();
    let mut values = a.values().to_vec();
    values[0] = c64::new(-0.0, std::f64::consts::PI);
    let a = a.with_values(values).unwrap();
    matrix_market::write(&path, &a).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("%%MatrixMarket matrix coordinate complex general\n"));
    let back = matrix_market::read_complex(&path).unwrap();
    let bits = |m: &CsrMatrix<c64>| {
        m.values()
            .iter()
            .map(|z| (z.re.to_bits(), z.im.to_bits()))
            .collect::<Vec<_>>()
    };
    assert!(back.same_pattern(&a));
    assert_eq!(bits(&back), bits(&a));
    // A complex file read as real is refused, naming the complex reader.
    let err = matrix_market::read(&path).unwrap_err();
    assert!(
        matches!(&err, SparseError::MatrixMarket { line: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("read_complex"), "{err}");
    // A real file read as complex is promoted.
    let real = laplacian(&[3, 3]).unwrap();
    let real_path = dir.path().join("laplacian.mtx");
    matrix_market::write(&real_path, &real).unwrap();
    assert_eq!(
        matrix_market::read_complex(&real_path).unwrap(),
        real.to_complex()
    );
}

/// Reads `text` as a complex Matrix Market file.
fn read_text(text: &str) -> Result<CsrMatrix<c64>, SparseError> {
    matrix_market::read_complex_from(text.as_bytes(), std::path::Path::new("test.mtx"))
}

#[test]
fn complex_symmetries_mirror_the_lower_triangle() {
    let z = |re: f64, im: f64| c64::new(re, im);
    let dense = |a: &CsrMatrix<c64>| {
        let mut d = vec![vec![z(0.0, 0.0); a.cols()]; a.rows()];
        for (i, row) in d.iter_mut().enumerate() {
            let (cols, vals) = a.row(i);
            for (&j, &v) in cols.iter().zip(vals) {
                row[j] = v;
            }
        }
        d
    };
    let body = "2 2 3\n1 1 1 0\n2 1 2 3\n2 2 -4 0\n";
    let cases = [
        (
            "general",
            [[z(1.0, 0.0), z(0.0, 0.0)], [z(2.0, 3.0), z(-4.0, 0.0)]],
        ),
        (
            "symmetric",
            [[z(1.0, 0.0), z(2.0, 3.0)], [z(2.0, 3.0), z(-4.0, 0.0)]],
        ),
        (
            "hermitian",
            [[z(1.0, 0.0), z(2.0, -3.0)], [z(2.0, 3.0), z(-4.0, 0.0)]],
        ),
    ];
    for (symmetry, want) in cases {
        let a = read_text(&format!(
            "%%MatrixMarket matrix coordinate complex {symmetry}\n{body}"
        ))
        .unwrap();
        assert_eq!(
            dense(&a),
            want.map(|row| row.to_vec()).to_vec(),
            "{symmetry}"
        );
    }
    let skew =
        read_text("%%MatrixMarket matrix coordinate complex skew-symmetric\n2 2 1\n2 1 2 3\n")
            .unwrap();
    assert_eq!(
        dense(&skew),
        vec![
            vec![z(0.0, 0.0), z(-2.0, -3.0)],
            vec![z(2.0, 3.0), z(0.0, 0.0)]
        ]
    );
    // Malformed complex files: each an error at its line.
    for (text, line, expected) in [
        (
            "%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n1 1 1 2\n",
            3,
            "imaginary part",
        ),
        (
            "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1\n",
            3,
            "`row col re im`",
        ),
        (
            "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 nan\n",
            3,
            "not finite",
        ),
        (
            "%%MatrixMarket matrix coordinate real hermitian\n2 2 0\n",
            1,
            "needs the field `complex`",
        ),
        (
            "%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n1 2 1 0\n",
            3,
            "above the diagonal",
        ),
    ] {
        let err = read_text(text).unwrap_err();
        assert!(
            matches!(&err, SparseError::MatrixMarket { line: l, .. } if *l == line),
            "{text}: {err}"
        );
        assert!(err.to_string().contains(expected), "{text}: {err}");
    }
}
