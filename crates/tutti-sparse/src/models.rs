//! The model matrices of the tests and benchmarks: Laplacians, convection-diffusion and
//! reaction-diffusion operators on 1-D, 2-D and 3-D grids, the Jacobian of the 2-D
//! Brusselator, and two complex ones: a damped Helmholtz operator and a time-harmonic
//! convection-diffusion operator.
//!
//! Conventions shared by every model:
//!
//! - A grid of sizes `dims = [nx]`, `[nx, ny]` or `[nx, ny, nz]` numbers its point
//!   `(x, y, z)` as `x + nx * (y + ny * z)` (x fastest; a missing size is 1).
//! - With `b` species per point, unknown `point * b + species` is species `species` at
//!   `point` (species innermost), so a point's unknowns are consecutive.
//! - Dirichlet grids have spacing `h = 1 / (n + 1)` along an axis of `n` points (the
//!   boundary values, zero, are not unknowns); neighbours across the boundary are dropped.
//! - Sizes are checked: a grid whose unknowns or entries overflow `usize`, or cannot be
//!   allocated, is [`SparseError::TooLarge`]; malformed arguments (no or more than 3
//!   dimensions, a size or species count of 0, a coefficient that is not finite) are
//!   [`SparseError::InvalidMatrix`].

use faer::c64;

use crate::csr::check_len;
use crate::{CsrMatrix, Scalar, SparseError};

/// The negative Laplacian of a `d`-dimensional grid (`d = dims.len()`, 1 to 3), with
/// Dirichlet boundaries and without the `1/h^2` factor: the 3-, 5- or 7-point stencil with
/// `2 d` on the diagonal and `-1` to each of the point's grid neighbours (on a grid of equal
/// sizes, `h^2` times the finite-difference operator; unequal sizes get the same unit
/// weights on every axis).
///
/// `(A u)_p = 2 d u_p - sum_{q neighbour of p} u_q`. Symmetric positive definite; a row's
/// sum is the number of neighbours it lacks (0 inside the grid). Entries:
/// `N + 2 E` with `N` points and `E = sum_k (n_k - 1) N / n_k` grid edges (`5 k^2 - 4 k` on
/// a `k x k` grid).
///
/// Errors: malformed `dims`, or too large a grid (see the [module](self) conventions).
pub fn laplacian(dims: &[usize]) -> Result<CsrMatrix, SparseError> {
    let grid = Grid::new(dims)?;
    let diagonal = 2.0 * grid.dimension as f64;
    assemble(&grid, 1, |_, _| diagonal, |_, _| -1.0)
}

/// A convection-diffusion operator, unsymmetric for `peclet != 0`: the discretization of
/// `-Δu + peclet ∂u/∂x` on the unit square or cube with Dirichlet boundaries (diffusion 1,
/// velocity `peclet` along x), multiplied by `h^2` like [`laplacian`] (`h` the spacing along
/// x), with first-order upwind differences for the convection.
///
/// With `h = 1 / (nx + 1)` the spacing along x and `c = |peclet| h = |peclet| / (nx + 1)`:
/// `A = L + c (I - S)`, `L` the scaled [`laplacian`] and `S` the shift to the upwind
/// neighbour: `(S u)_(x, y, z) = u_(x - 1, y, z)` when `peclet >= 0` (backward difference),
/// `u_(x + 1, y, z)` when `peclet < 0` (forward), zero across the boundary. Entries: `2 d + c`
/// on the diagonal, `-1 - c` to the upwind neighbour along x, `-1` to the other neighbours;
/// the pattern of [`laplacian`], the same matrix when `peclet == 0`. Diagonally dominant
/// for every `peclet` (weakly inside, strictly in rows that lack a neighbour), an M-matrix.
///
/// Errors: malformed `dims`, a `peclet` that is not finite, too large a grid.
pub fn convection_diffusion(dims: &[usize], peclet: f64) -> Result<CsrMatrix, SparseError> {
    let grid = Grid::new(dims)?;
    check_finite("peclet", peclet)?;
    // c = |peclet| h, rounded once.
    let convection = peclet.abs() / (grid.sizes[0] as f64 + 1.0);
    let diagonal = 2.0 * grid.dimension as f64 + convection;
    let upwind_is_forward = peclet < 0.0;
    assemble(
        &grid,
        1,
        |_, _| diagonal,
        |step, _| {
            if step.axis == 0 && step.forward == upwind_is_forward {
                -1.0 - convection
            } else {
                -1.0
            }
        },
    )
}

/// A damped Helmholtz operator, complex symmetric (not hermitian) and indefinite for
/// `shift.re` inside the Laplacian's spectrum: `A = L - shift I`, `L` the scaled
/// [`laplacian`] of `dims` (no `1/h^2`), the discretization of `-Δu - (k^2 + i σ) u`
/// multiplied by `h^2`, with `shift = h^2 (k^2 + i σ)`.
///
/// Entries: `2 d - shift` on the diagonal, `-1` to each grid neighbour (the pattern of
/// [`laplacian`]). `L` is symmetric, so `A` is normal with eigenvalues `λ - shift`, `λ` those
/// of `L` (in `(0, 4 d)`): regular whenever `shift.im != 0`, with
/// `||A^{-1}||_2 <= 1 / |shift.im|`.
///
/// Errors: malformed `dims`, a `shift` that is not finite, too large a grid.
pub fn helmholtz(dims: &[usize], shift: c64) -> Result<CsrMatrix<c64>, SparseError> {
    let grid = Grid::new(dims)?;
    check_finite("shift.re", shift.re)?;
    check_finite("shift.im", shift.im)?;
    let diagonal = c64::new(2.0 * grid.dimension as f64, 0.0) - shift;
    let off = c64::new(-1.0, 0.0);
    assemble(&grid, 1, |_, _| diagonal, |_, _| off)
}

/// A time-harmonic convection-diffusion operator, complex and unsymmetric:
/// `A = C + i omega I`, `C` the [`convection_diffusion`] matrix of `dims` and `peclet` (upwind,
/// scaled by `h^2`), the discretization of `i ω u - Δu + peclet ∂u/∂x` multiplied by `h^2`
/// with `omega = h^2 ω`.
///
/// Entries: those of [`convection_diffusion`] (real) with `i omega` added to the diagonal.
/// Regular for every `omega` (`C` is an M-matrix; for `omega != 0` the diagonal only
/// gains an imaginary part).
///
/// Errors: malformed `dims`, a `peclet` or `omega` that is not finite, too large a grid.
pub fn time_harmonic_convection_diffusion(
    dims: &[usize],
    peclet: f64,
    omega: f64,
) -> Result<CsrMatrix<c64>, SparseError> {
    let grid = Grid::new(dims)?;
    check_finite("peclet", peclet)?;
    check_finite("omega", omega)?;
    let convection = peclet.abs() / (grid.sizes[0] as f64 + 1.0);
    let diagonal = c64::new(2.0 * grid.dimension as f64 + convection, omega);
    let upwind_is_forward = peclet < 0.0;
    assemble(
        &grid,
        1,
        |_, _| diagonal,
        |step, _| {
            if step.axis == 0 && step.forward == upwind_is_forward {
                c64::new(-1.0 - convection, 0.0)
            } else {
                c64::new(-1.0, 0.0)
            }
        },
    )
}

/// A reaction-diffusion matrix with `species` coupled species per point, of the shape
/// `shift I - J` that an implicit integrator factors (`I - h γ J` scaled by `1 / (h γ)`):
/// unsymmetric in values, symmetric in pattern.
///
/// `J = I_N ⊗ C - L ⊗ D` on the grid of `dims` (`N` points): every species diffuses to the
/// same species at the grid neighbours with coefficient `d_s = 1 + s` (`D = diag(d_s)`,
/// `L` the scaled [`laplacian`]), and the species of one point react through the dense
/// block `C`, with `c_ss = -1` and, for `s != t`,
/// `c_st = sign(t - s) (-1)^(s + t) 0.5 / (1 + |s - t|)` (alternating in sign along a row,
/// skew-symmetric off the diagonal). The entries of `A = shift I - J`:
///
/// - `A[(p, s), (p, s)] = shift + 1 + 2 d (1 + s)`, `d = dims.len()`;
/// - `A[(p, s), (p, t)] = -c_st` for `t != s`;
/// - `A[(p, s), (q, s)] = -(1 + s)` for each grid neighbour `q` of `p`;
///
/// with `(p, s)` the unknown `p * species + s`. As the off-diagonal part of `C` is
/// skew-symmetric, `A + A^T = 2 (shift + 1) I + 2 L ⊗ D` is positive definite and `A`
/// regular for every `shift > -1`. With one species, `A = (shift + 1) I + L`. Entries:
/// `N species^2 + 2 E species` with `E` the grid edges.
///
/// Errors: malformed `dims`, `species == 0`, a `shift` that is not finite, too large a grid.
pub fn reaction_diffusion(
    dims: &[usize],
    species: usize,
    shift: f64,
) -> Result<CsrMatrix, SparseError> {
    let grid = Grid::new(dims)?;
    if species == 0 {
        return Err(SparseError::argument(
            "a reaction-diffusion model needs at least one species",
        ));
    }
    check_finite("shift", shift)?;
    let dimension = grid.dimension as f64;
    let diffusion = |s: usize| 1.0 + s as f64;
    assemble(
        &grid,
        species,
        |s, t| {
            if s == t {
                shift + 1.0 + 2.0 * dimension * diffusion(s)
            } else {
                -reaction_coupling(s, t)
            }
        },
        |_, s| -diffusion(s),
    )
}

/// The reaction block's entry `c_st`, `s != t`, of [`reaction_diffusion`].
fn reaction_coupling(s: usize, t: usize) -> f64 {
    let distance = s.abs_diff(t);
    let magnitude = 0.5 / (1.0 + distance as f64);
    let alternating = if s.is_multiple_of(2) == t.is_multiple_of(2) {
        1.0
    } else {
        -1.0
    };
    let direction = if t > s { 1.0 } else { -1.0 };
    direction * alternating * magnitude
}

/// The Jacobian of the right-hand side of the 2-D Brusselator on an `n x n` periodic grid
/// at the state `(u, v)`, as in DifferentialEquations.jl's "Solving Large Stiff Equations"
/// (grid `range(0, 1, length = n)`, spacing `dx = 1 / (n - 1)`, the last point wrapping to
/// the first):
///
/// - `du/dt = 1 + u^2 v - 4.4 u + alpha Δu + f(x, y, t)`,
/// - `dv/dt = 3.4 u - u^2 v + alpha Δv`,
///
/// with `Δ` the 5-point periodic Laplacian divided by `dx^2` and `f` a forcing independent
/// of the state. Point `(x, y)` is `x + n y`, unknown `2 point + species` with species 0 `u`
/// and 1 `v`; `u` and `v` hold the point values. With `a = alpha / dx^2 = alpha (n - 1)^2`,
/// the entries of rows `(p, u)` and `(p, v)`:
///
/// - `d(du)/du = 2 u v - 4.4 - 4 a`, `d(du)/dv = u^2`,
/// - `d(dv)/du = 3.4 - 2 u v`, `d(dv)/dv = -u^2 - 4 a`,
/// - `a` to the same species at the four periodic neighbours.
///
/// Every row has 6 entries (`12 n^2` in all); the pattern is symmetric.
///
/// Errors: `n < 3` ([`SparseError::InvalidMatrix`]: the four neighbours would not be
/// distinct), `u` or `v` not of length `n^2` ([`SparseError::LengthMismatch`]), a state, an
/// `alpha` or an entry that is not finite, too large an `n`.
pub fn brusselator_jacobian(
    n: usize,
    alpha: f64,
    u: &[f64],
    v: &[f64],
) -> Result<CsrMatrix, SparseError> {
    if n < 3 {
        return Err(SparseError::argument(format!(
            "the Brusselator grid is {n} x {n}: at least 3 x 3 is needed"
        )));
    }
    let too_large = || SparseError::TooLarge {
        what: "the Brusselator Jacobian",
        detail: format!("a {n} x {n} grid"),
    };
    let points = n.checked_mul(n).ok_or_else(too_large)?;
    let unknowns = points.checked_mul(2).ok_or_else(too_large)?;
    let nnz = unknowns.checked_mul(6).ok_or_else(too_large)?;
    check_len("u", u.len(), points)?;
    check_len("v", v.len(), points)?;
    check_finite("alpha", alpha)?;
    for (name, state) in [("u", u), ("v", v)] {
        if let Some(k) = state.iter().position(|value| !value.is_finite()) {
            return Err(SparseError::argument(format!(
                "the Brusselator state {name}[{k}] is {}: the state must be finite",
                state[k]
            )));
        }
    }
    let inverse_dx = (n - 1) as f64;
    let a = alpha * inverse_dx * inverse_dx;
    let mut indptr = allocate(unknowns + 1, "the Brusselator Jacobian's row pointers")?;
    let mut indices = allocate(nnz, "the Brusselator Jacobian's columns")?;
    let mut values = allocate(nnz, "the Brusselator Jacobian's values")?;
    indptr.push(0);
    for y in 0..n {
        for x in 0..n {
            let point = x + n * y;
            let neighbours = [
                (x + n - 1) % n + n * y,
                (x + 1) % n + n * y,
                x + n * ((y + n - 1) % n),
                x + n * ((y + 1) % n),
            ];
            let (up, vp) = (u[point], v[point]);
            // Row (p, u), then row (p, v); try_new sorts the wrapped columns.
            let rows = [
                (0, [2.0 * up * vp - 4.4 - 4.0 * a, up * up]),
                (1, [3.4 - 2.0 * up * vp, -up * up - 4.0 * a]),
            ];
            for (species, block) in rows {
                indices.extend([2 * point, 2 * point + 1]);
                values.extend(block);
                for q in neighbours {
                    indices.push(2 * q + species);
                    values.push(a);
                }
                indptr.push(indices.len());
            }
        }
    }
    CsrMatrix::try_new(unknowns, unknowns, indptr, indices, values)
}

/// A structured grid of 1, 2 or 3 dimensions.
struct Grid {
    /// Points along x, y and z (1 beyond the grid's dimension).
    sizes: [usize; 3],
    /// The number of dimensions given.
    dimension: usize,
    /// `sizes[0] * sizes[1] * sizes[2]`.
    points: usize,
}

/// A step from a grid point to a neighbour.
#[derive(Clone, Copy)]
struct Step {
    /// 0 for x, 1 for y, 2 for z.
    axis: usize,
    /// Towards increasing coordinates.
    forward: bool,
}

impl Grid {
    fn new(dims: &[usize]) -> Result<Self, SparseError> {
        if dims.is_empty() || dims.len() > 3 {
            return Err(SparseError::argument(format!(
                "a grid of {} dimensions: 1, 2 or 3 are supported",
                dims.len()
            )));
        }
        if let Some(axis) = dims.iter().position(|&n| n == 0) {
            return Err(SparseError::argument(format!(
                "the grid {dims:?} has no point along axis {axis}"
            )));
        }
        let points = dims
            .iter()
            .try_fold(1usize, |product, &n| product.checked_mul(n))
            .ok_or_else(|| SparseError::TooLarge {
                what: "the grid",
                detail: format!("{dims:?} points"),
            })?;
        let mut sizes = [1; 3];
        sizes[..dims.len()].copy_from_slice(dims);
        Ok(Self {
            sizes,
            dimension: dims.len(),
            points,
        })
    }

    /// The number of neighbouring pairs of points.
    fn edges(&self) -> Option<usize> {
        self.sizes.iter().try_fold(0usize, |total, &n| {
            total.checked_add(self.points / n * (n - 1))
        })
    }

    /// `point`'s neighbours, increasing: `(neighbour, step)`.
    fn neighbours(&self, point: usize) -> impl Iterator<Item = (usize, Step)> {
        let [nx, ny, nz] = self.sizes;
        let coordinates = [point % nx, point / nx % ny, point / (nx * ny)];
        let strides = [1, nx, nx * ny];
        let extents = [nx, ny, nz];
        // Backward steps from z to x, then forward steps from x to z: increasing indices.
        let backward = [2, 1, 0].map(|axis| {
            (coordinates[axis] > 0).then(|| {
                let step = Step {
                    axis,
                    forward: false,
                };
                (point - strides[axis], step)
            })
        });
        let forward = [0, 1, 2].map(|axis| {
            (coordinates[axis] + 1 < extents[axis]).then(|| {
                let step = Step {
                    axis,
                    forward: true,
                };
                (point + strides[axis], step)
            })
        });
        backward.into_iter().chain(forward).flatten()
    }
}

/// The matrix of `species` unknowns per point of `grid`: row `(p, s)` holds
/// `neighbour(step, s)` at `(q, s)` for every grid neighbour `q` of `p`, and `block(s, t)`
/// at `(p, t)` for every species `t`.
fn assemble<T: Scalar>(
    grid: &Grid,
    species: usize,
    block: impl Fn(usize, usize) -> T,
    neighbour: impl Fn(Step, usize) -> T,
) -> Result<CsrMatrix<T>, SparseError> {
    let too_large = || SparseError::TooLarge {
        what: "the model matrix",
        detail: format!(
            "{} points, {species} species",
            grid.sizes[..grid.dimension]
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(" x ")
        ),
    };
    let unknowns = grid.points.checked_mul(species).ok_or_else(too_large)?;
    let nnz = grid
        .edges()
        .and_then(|edges| edges.checked_mul(2))
        .and_then(|ends| ends.checked_mul(species))
        .and_then(|coupling| {
            unknowns
                .checked_mul(species)
                .and_then(|blocks| blocks.checked_add(coupling))
        })
        .ok_or_else(too_large)?;
    let pointers = unknowns.checked_add(1).ok_or_else(too_large)?;
    let mut indptr = allocate(pointers, "the model matrix's row pointers")?;
    let mut indices = allocate(nnz, "the model matrix's columns")?;
    let mut values = allocate(nnz, "the model matrix's values")?;
    indptr.push(0);
    for p in 0..grid.points {
        for s in 0..species {
            for (q, step) in grid.neighbours(p).filter(|&(q, _)| q < p) {
                indices.push(q * species + s);
                values.push(neighbour(step, s));
            }
            for t in 0..species {
                indices.push(p * species + t);
                values.push(block(s, t));
            }
            for (q, step) in grid.neighbours(p).filter(|&(q, _)| q > p) {
                indices.push(q * species + s);
                values.push(neighbour(step, s));
            }
            indptr.push(indices.len());
        }
    }
    CsrMatrix::try_new(unknowns, unknowns, indptr, indices, values)
}

/// An empty vector with room for `capacity` elements, or [`SparseError::TooLarge`] when
/// that cannot be allocated.
fn allocate<T>(capacity: usize, what: &'static str) -> Result<Vec<T>, SparseError> {
    let mut vector = Vec::new();
    vector
        .try_reserve_exact(capacity)
        .map_err(|err| SparseError::TooLarge {
            what,
            detail: format!("{capacity} elements: {err}"),
        })?;
    Ok(vector)
}

/// Errors unless `value` is finite.
fn check_finite(name: &str, value: f64) -> Result<(), SparseError> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(SparseError::argument(format!(
            "{name} is {value}: a finite number is needed"
        )))
    }
}
