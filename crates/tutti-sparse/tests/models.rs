//! The model matrices against their definitions: entries by hand for tiny grids and from
//! grid coordinates for small ones, patterns, symmetry, diagonal dominance, entry counts, and
//! the Brusselator Jacobian against finite differences of its right-hand side.

use std::error::Error;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tutti_sparse::models::{
    brusselator_jacobian, convection_diffusion, laplacian, reaction_diffusion,
};
use tutti_sparse::{CsrMatrix, SparseError};

type TestResult = Result<(), Box<dyn Error>>;

/// The grids the models are checked on.
const GRIDS: &[&[usize]] = &[
    &[1],
    &[2],
    &[5],
    &[1, 1],
    &[3, 3],
    &[4, 2],
    &[2, 5],
    &[1, 4],
    &[2, 2, 2],
    &[3, 2, 4],
    &[1, 3, 2],
];

/// The dense rows of `a`.
fn dense(a: &CsrMatrix) -> Vec<Vec<f64>> {
    let mut rows = vec![vec![0.0; a.cols()]; a.rows()];
    for (i, row) in rows.iter_mut().enumerate() {
        let (cols, values) = a.row(i);
        for (&j, &value) in cols.iter().zip(values) {
            row[j] = value;
        }
    }
    rows
}

/// The coordinates of every point of `dims`, in point order (x fastest).
fn points(dims: &[usize]) -> Vec<Vec<usize>> {
    let mut all = vec![vec![]];
    for &n in dims {
        // Each new axis varies slower than those before it.
        all = (0..n)
            .flat_map(|c| {
                all.iter().map(move |point| {
                    let mut point = point.clone();
                    point.push(c);
                    point
                })
            })
            .collect();
    }
    all
}

/// `Some((axis, +1 or -1))` when `q` is one grid step from `p`.
fn step(p: &[usize], q: &[usize]) -> Option<(usize, i64)> {
    let differing: Vec<usize> = (0..p.len()).filter(|&k| p[k] != q[k]).collect();
    match differing[..] {
        [axis] if p[axis].abs_diff(q[axis]) == 1 => {
            Some((axis, if q[axis] > p[axis] { 1 } else { -1 }))
        }
        _ => None,
    }
}

/// The dense matrix with `species` unknowns per point: `block(s, t)` within a point,
/// `neighbour(axis, direction, s)` between neighbours (same species), zero elsewhere.
fn dense_model(
    dims: &[usize],
    species: usize,
    block: impl Fn(usize, usize) -> f64,
    neighbour: impl Fn(usize, i64, usize) -> f64,
) -> Vec<Vec<f64>> {
    let grid = points(dims);
    let n = grid.len() * species;
    let mut a = vec![vec![0.0; n]; n];
    for (p, pc) in grid.iter().enumerate() {
        for (q, qc) in grid.iter().enumerate() {
            for s in 0..species {
                if p == q {
                    for t in 0..species {
                        a[p * species + s][q * species + t] = block(s, t);
                    }
                } else if let Some((axis, direction)) = step(pc, qc) {
                    a[p * species + s][q * species + s] = neighbour(axis, direction, s);
                }
            }
        }
    }
    a
}

/// Grid edges: pairs of neighbouring points.
fn edges(dims: &[usize]) -> usize {
    let points: usize = dims.iter().product();
    dims.iter().map(|&n| points / n * (n - 1)).sum()
}

fn is_symmetric(a: &CsrMatrix) -> bool {
    a.transpose().is_ok_and(|t| &t == a)
}

#[test]
fn the_1d_laplacian_is_the_tridiagonal_matrix() -> TestResult {
    assert_eq!(
        dense(&laplacian(&[3])?),
        [[2.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 2.0]]
    );
    assert_eq!(dense(&laplacian(&[1])?), [[2.0]]);
    Ok(())
}

#[test]
fn the_2d_laplacian_on_2_x_2_by_hand() -> TestResult {
    // Points (0, 0), (1, 0), (0, 1), (1, 1).
    assert_eq!(
        dense(&laplacian(&[2, 2])?),
        [
            [4.0, -1.0, -1.0, 0.0],
            [-1.0, 4.0, 0.0, -1.0],
            [-1.0, 0.0, 4.0, -1.0],
            [0.0, -1.0, -1.0, 4.0]
        ]
    );
    // A 3 x 2 grid: point 1 = (1, 0) neighbours 0, 2 and 4 = (1, 1).
    let a = laplacian(&[3, 2])?;
    assert_eq!(a.row(1), (&[0, 1, 2, 4][..], &[-1.0, 4.0, -1.0, -1.0][..]));
    Ok(())
}

#[test]
fn laplacians_follow_the_grid_and_their_row_sums_count_missing_neighbours() -> TestResult {
    for &dims in GRIDS {
        let d = dims.len();
        let a = laplacian(dims)?;
        let expected = dense_model(dims, 1, |_, _| 2.0 * d as f64, |_, _, _| -1.0);
        assert_eq!(dense(&a), expected, "{dims:?}");
        for (p, coordinates) in points(dims).iter().enumerate() {
            let missing = (0..d)
                .map(|k| {
                    usize::from(coordinates[k] == 0) + usize::from(coordinates[k] + 1 == dims[k])
                })
                .sum::<usize>();
            let sum: f64 = a.row(p).1.iter().sum();
            assert_eq!(sum, missing as f64, "{dims:?} point {p}");
        }
        assert!(is_symmetric(&a), "{dims:?}");
    }
    Ok(())
}

#[test]
fn entry_counts_match_their_formulas() -> TestResult {
    for k in 1..7 {
        assert_eq!(laplacian(&[k])?.nnz(), 3 * k - 2);
        assert_eq!(laplacian(&[k, k])?.nnz(), 5 * k * k - 4 * k);
        assert_eq!(laplacian(&[k, k, k])?.nnz(), 7 * k * k * k - 6 * k * k);
    }
    for &dims in GRIDS {
        let points: usize = dims.iter().product();
        let nnz = points + 2 * edges(dims);
        assert_eq!(laplacian(dims)?.nnz(), nnz, "{dims:?}");
        assert_eq!(convection_diffusion(dims, 3.0)?.nnz(), nnz, "{dims:?}");
        for species in [1, 2, 5] {
            let a = reaction_diffusion(dims, species, 0.5)?;
            assert_eq!(a.rows(), points * species);
            assert_eq!(
                a.nnz(),
                points * species * species + 2 * edges(dims) * species,
                "{dims:?}, {species} species"
            );
        }
    }
    for n in [3, 4, 9] {
        let state = vec![1.0; n * n];
        let a = brusselator_jacobian(n, 0.1, &state, &state)?;
        assert_eq!((a.rows(), a.nnz()), (2 * n * n, 12 * n * n));
    }
    Ok(())
}

#[test]
fn convection_diffusion_upwinds_and_is_diagonally_dominant() -> TestResult {
    for &dims in GRIDS {
        let d = dims.len() as f64;
        assert_eq!(convection_diffusion(dims, 0.0)?, laplacian(dims)?);
        for peclet in [0.5, 10.0, 1e4, -3.0] {
            let a = convection_diffusion(dims, peclet)?;
            let c = peclet.abs() / (dims[0] as f64 + 1.0);
            let upwind = if peclet >= 0.0 { -1 } else { 1 };
            let expected = dense_model(
                dims,
                1,
                |_, _| 2.0 * d + c,
                |axis, direction, _| {
                    if axis == 0 && direction == upwind {
                        -1.0 - c
                    } else {
                        -1.0
                    }
                },
            );
            assert_eq!(dense(&a), expected, "{dims:?}, peclet {peclet}");
            assert_eq!(is_symmetric(&a), dims[0] == 1, "{dims:?}, peclet {peclet}");
            let mut strict = false;
            for i in 0..a.rows() {
                let (cols, values) = a.row(i);
                let (mut diagonal, mut off) = (0.0, 0.0);
                for (&j, &value) in cols.iter().zip(values) {
                    if i == j {
                        diagonal = value;
                    } else {
                        off += f64::abs(value);
                    }
                }
                assert!(diagonal >= off * (1.0 - 1e-14), "{dims:?} row {i}");
                strict |= diagonal > off * (1.0 + 1e-14);
            }
            assert!(strict, "{dims:?}, peclet {peclet}");
        }
    }
    Ok(())
}

/// `c_st` of the reaction block, as documented.
fn coupling(s: usize, t: usize) -> f64 {
    if s == t {
        return -1.0;
    }
    let sign = if t > s { 1.0 } else { -1.0 };
    let alternating = (-1.0f64).powi((s + t) as i32);
    sign * alternating * 0.5 / (1.0 + s.abs_diff(t) as f64)
}

#[test]
fn reaction_diffusion_has_its_documented_entries() -> TestResult {
    for &dims in GRIDS {
        let d = dims.len() as f64;
        for species in [1, 2, 3, 4] {
            for shift in [0.0, 2.5] {
                let a = reaction_diffusion(dims, species, shift)?;
                let expected = dense_model(
                    dims,
                    species,
                    |s, t| {
                        let diffusion = if s == t {
                            2.0 * d * (1.0 + s as f64)
                        } else {
                            0.0
                        };
                        let identity = if s == t { shift } else { 0.0 };
                        identity - coupling(s, t) + diffusion
                    },
                    |_, _, s| -(1.0 + s as f64),
                );
                assert_eq!(dense(&a), expected, "{dims:?}, {species} species");
                assert_eq!(
                    is_symmetric(&a),
                    species == 1,
                    "{dims:?}, {species} species"
                );
            }
        }
        // One species: (shift + 1) I + L.
        let a = reaction_diffusion(dims, 1, 2.0)?;
        let l = laplacian(dims)?;
        let shifted: Vec<f64> = l
            .values()
            .iter()
            .zip(l.indices())
            .enumerate()
            .map(|(p, (&value, &j))| {
                let i = l.indptr().partition_point(|&start| start <= p) - 1;
                if i == j {
                    value + 3.0
                } else {
                    value
                }
            })
            .collect();
        assert_eq!(a, l.with_values(shifted)?);
    }
    // By hand, 2 species on 2 points: c_01 = -0.25, c_10 = 0.25.
    assert_eq!(
        dense(&reaction_diffusion(&[2], 2, 1.0)?),
        [
            [4.0, 0.25, -1.0, 0.0],
            [-0.25, 6.0, 0.0, -2.0],
            [-1.0, 0.0, 4.0, 0.25],
            [0.0, -2.0, -0.25, 6.0]
        ]
    );
    Ok(())
}

#[test]
fn every_model_has_a_symmetric_pattern() -> TestResult {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut models = Vec::new();
    for &dims in GRIDS {
        models.push(laplacian(dims)?);
        models.push(convection_diffusion(dims, 7.0)?);
        models.push(reaction_diffusion(dims, 3, 1.0)?);
    }
    for n in [3, 5] {
        let u: Vec<f64> = (0..n * n).map(|_| rng.random_range(0.0..4.0)).collect();
        let v: Vec<f64> = (0..n * n).map(|_| rng.random_range(0.0..4.0)).collect();
        models.push(brusselator_jacobian(n, 10.0, &u, &v)?);
    }
    for a in models {
        assert!(a.same_pattern(&a.transpose()?), "{a:?}");
    }
    Ok(())
}

/// The Brusselator right-hand side at `state` (`u` and `v` interleaved per point), with a
/// forcing that does not depend on the state.
fn brusselator_rhs(n: usize, alpha: f64, state: &[f64]) -> Vec<f64> {
    let dx = 1.0 / (n - 1) as f64;
    let a = alpha / (dx * dx);
    let at = |x: usize, y: usize, species: usize| state[2 * (x % n + n * (y % n)) + species];
    let mut rhs = vec![0.0; 2 * n * n];
    for y in 0..n {
        for x in 0..n {
            let p = x + n * y;
            let lap = |s: usize| {
                at(x + n - 1, y, s) + at(x + 1, y, s) + at(x, y + n - 1, s) + at(x, y + 1, s)
                    - 4.0 * at(x, y, s)
            };
            let (u, v) = (at(x, y, 0), at(x, y, 1));
            let forcing = (x as f64 * dx).sin() * (y as f64 * dx).cos();
            rhs[2 * p] = 1.0 + u * u * v - 4.4 * u + a * lap(0) + forcing;
            rhs[2 * p + 1] = 3.4 * u - u * u * v + a * lap(1);
        }
    }
    rhs
}

#[test]
fn the_brusselator_jacobian_matches_finite_differences() -> TestResult {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for (n, alpha) in [(3, 10.0), (4, 0.1), (7, 10.0), (8, 1.0)] {
        let u: Vec<f64> = (0..n * n).map(|_| rng.random_range(0.1..4.0)).collect();
        let v: Vec<f64> = (0..n * n).map(|_| rng.random_range(0.1..4.0)).collect();
        let jacobian = brusselator_jacobian(n, alpha, &u, &v)?;
        let exact = dense(&jacobian);
        let scale = jacobian.max_abs();
        let state: Vec<f64> = u.iter().zip(&v).flat_map(|(&u, &v)| [u, v]).collect();
        for k in 0..state.len() {
            let epsilon = 1e-6 * state[k].abs().max(1.0);
            let (mut plus, mut minus) = (state.clone(), state.clone());
            plus[k] += epsilon;
            minus[k] -= epsilon;
            let (high, low) = (
                brusselator_rhs(n, alpha, &plus),
                brusselator_rhs(n, alpha, &minus),
            );
            for i in 0..state.len() {
                let difference = (high[i] - low[i]) / (plus[k] - minus[k]);
                assert!(
                    (difference - exact[i][k]).abs() <= 1e-6 * scale,
                    "n {n}: J[{i}][{k}] is {} but finite differences give {difference}",
                    exact[i][k]
                );
            }
        }
    }
    Ok(())
}

#[test]
fn malformed_arguments_are_errors() {
    let invalid: Vec<Result<CsrMatrix, SparseError>> = vec![
        laplacian(&[]),
        laplacian(&[2, 2, 2, 2]),
        laplacian(&[3, 0]),
        convection_diffusion(&[3], f64::NAN),
        convection_diffusion(&[3], f64::INFINITY),
        reaction_diffusion(&[3], 0, 1.0),
        reaction_diffusion(&[3], 2, f64::NEG_INFINITY),
        brusselator_jacobian(2, 1.0, &[1.0; 4], &[1.0; 4]),
        brusselator_jacobian(0, 1.0, &[], &[]),
        brusselator_jacobian(3, f64::NAN, &[1.0; 9], &[1.0; 9]),
        brusselator_jacobian(
            3,
            1.0,
            &[1.0, f64::NAN, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
            &[1.0; 9],
        ),
        brusselator_jacobian(3, 1.0, &[1.0; 9], &[f64::INFINITY; 9]),
    ];
    for result in invalid {
        assert!(
            matches!(result, Err(SparseError::InvalidArgument { .. })),
            "{result:?}"
        );
    }
    for result in [
        brusselator_jacobian(3, 1.0, &[1.0; 8], &[1.0; 9]),
        brusselator_jacobian(3, 1.0, &[1.0; 9], &[1.0; 10]),
    ] {
        assert!(
            matches!(result, Err(SparseError::LengthMismatch { .. })),
            "{result:?}"
        );
    }
    // Sizes whose unknowns or entries overflow, refused before any allocation.
    let too_large = [
        laplacian(&[usize::MAX, 2]),
        laplacian(&[1 << 62]),
        laplacian(&[1 << 21, 1 << 21, 1 << 21]),
        convection_diffusion(&[1 << 32, 1 << 32], 1.0),
        reaction_diffusion(&[1 << 31, 1 << 31], 4, 0.0),
        reaction_diffusion(&[2], usize::MAX, 0.0),
        brusselator_jacobian(1 << 32, 1.0, &[], &[]),
        brusselator_jacobian(1 << 31, 1.0, &[], &[]),
    ];
    for result in too_large {
        assert!(
            matches!(result, Err(SparseError::TooLarge { .. })),
            "{result:?}"
        );
    }
    // An entry that overflows although the state is finite.
    assert!(matches!(
        brusselator_jacobian(3, 1.0, &[1e200; 9], &[1.0; 9]),
        Err(SparseError::NonFinite { .. })
    ));
}
