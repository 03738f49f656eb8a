//! The Brusselator of DifferentialEquations.jl's tutorial "Solving Large Stiff Equations",
//! a stiff reaction-diffusion system with a sparse Jacobian, in 2-D (the tutorial's) or on
//! the 3-D grid with the 7-point Laplacian, as a [`StiffSystem`] for
//! [`crate::bdf::integrate`] (and a [`ParametricSystem`] in `A`, `B`, `alpha`).
//!
//! **2-D** ([`Brusselator::new`]): on an `n x n` periodic grid
//! `x, y in range(0, 1, length = n)` (spacing `dx = 1 / (n - 1)`, the last point's neighbour
//! being the first):
//!
//! - `du/dt = B + u^2 v - (A + 1) u + alpha Δu + f(x, y, t)`,
//! - `dv/dt = A u - u^2 v + alpha Δv`,
//!
//! with `Δ` the 5-point Laplacian divided by `dx^2`, `A = 3.4`, `B = 1`, `alpha = 10`, and
//! the forcing `f = 5` on the disc `(x - 0.3)^2 + (y - 0.6)^2 <= 0.1^2` for `t >= 1.1`, zero
//! elsewhere. The initial state is `u = 22 (y (1 - y))^(3/2)`, `v = 27 (x (1 - x))^(3/2)`.
//! Point `(i, j)` (x index `i`, y index `j`) is `i + n j`, and its unknowns are `2 point`
//! (u) and `2 point + 1` (v): the two species of a point stay together in the ordering.
//!
//! **3-D** ([`Brusselator::with_dims`]`(n, 3)`): the same equations on the `n x n x n`
//! periodic grid `x, y, z in range(0, 1, length = n)` (the same `dx`), with
//!
//! - `Δ` the 7-point Laplacian divided by `dx^2` (the six periodic neighbours along x, y and
//!   z, less 6 times the point),
//! - `f(x, y, z, t) = 5` on the ball `(x - 0.3)^2 + (y - 0.6)^2 + (z - 0.5)^2 <= 0.1^2` for
//!   `t >= 1.1`, zero elsewhere,
//! - the initial state `u = 22 (y (1 - y))^(3/2)`, `v = 27 (x (1 - x))^(3/2)` in every
//!   z-plane (independent of `z`),
//!
//! and point `(i, j, k)` (z index `k`) numbered `i + n j + n^2 k`, its unknowns again
//! `2 point` (u) and `2 point + 1` (v). A state that does not depend on `z` gives, before the
//! forcing starts, the 2-D right-hand side in every z-plane (to the bit), so until `t = 1.1`
//! the 3-D solution is the 2-D one in every plane.

mod experiment;
mod grid;

use tutti_sparse::{CsrMatrix, SparseError};

pub use experiment::{
    synthetic_experiments, BrusselatorExperiment, SyntheticSetup, OBSERVATION_TIMES,
    START_PARAMETERS, TRUE_PARAMETERS,
};

use crate::bdf::{ParametricSystem, StiffSystem};
use grid::Grid;

/// The Brusselator's parameters and grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Brusselator {
    /// Points per axis (at least 3).
    pub n: usize,
    /// `A` (default 3.4).
    pub a: f64,
    /// `B` (default 1).
    pub b: f64,
    /// The diffusion coefficient `alpha` (default 10).
    pub alpha: f64,
    /// The forcing's amplitude (default 5), switched on at `forcing_start` (default 1.1).
    pub forcing: f64,
    /// When the forcing starts.
    pub forcing_start: f64,
    /// The forcing region's centre in `(x, y)` (default (0.3, 0.6)) and its radius (default
    /// 0.1): the disc in 2-D; in 3-D the ball around `(x, y, ball_z)`.
    pub disc: ([f64; 2], f64),
    /// In 3-D, the `z` of the forcing ball's centre (default 0.5); unused in 2-D.
    pub ball_z: f64,
    /// Space dimensions, 2 or 3.
    dims: usize,
    pattern: CsrMatrix,
}

impl Brusselator {
    /// The tutorial's 2-D problem on an `n x n` grid: `with_dims(n, 2)`.
    ///
    /// Errors: `n < 3` ([`SparseError::InvalidArgument`]) or too large for the Jacobian's
    /// indices ([`SparseError::TooLarge`]).
    pub fn new(n: usize) -> Result<Self, SparseError> {
        Self::with_dims(n, 2)
    }

    /// The problem in `dims` space dimensions on an `n x n` (2) or `n x n x n` (3) grid, as
    /// the [module](self) defines it: `2 n^dims` unknowns.
    ///
    /// Errors: [`SparseError::InvalidArgument`] for `dims` other than 2 or 3 or `n < 3`;
    /// [`SparseError::TooLarge`] where the unknowns or the Jacobian's entries
    /// (`(2 + 2 dims)` per unknown) overflow `usize` or cannot be allocated.
    pub fn with_dims(n: usize, dims: usize) -> Result<Self, SparseError> {
        let pattern = Grid::checked(n, dims)?.pattern()?;
        Ok(Self {
            n,
            a: 3.4,
            b: 1.0,
            alpha: 10.0,
            forcing: 5.0,
            forcing_start: 1.1,
            disc: ([0.3, 0.6], 0.1),
            ball_z: 0.5,
            dims,
            pattern,
        })
    }

    /// The number of space dimensions, 2 or 3 (the number of unknowns is
    /// [`StiffSystem::dimension`]).
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The grid (its sizes were checked when the model was made).
    fn grid(&self) -> Grid {
        Grid {
            n: self.n,
            dims: self.dims,
        }
    }

    /// The initial state, interleaved `(u, v)` per point, `2 n^dims` values.
    pub fn initial_state(&self) -> Vec<f64> {
        let grid = self.grid();
        let n = self.n;
        let mut state = Vec::with_capacity(grid.unknowns());
        for _ in 0..grid.planes() {
            for j in 0..n {
                for i in 0..n {
                    let (x, y) = (grid.coordinate(i), grid.coordinate(j));
                    state.push(22.0 * (y * (1.0 - y)).powf(1.5));
                    state.push(27.0 * (x * (1.0 - x)).powf(1.5));
                }
            }
        }
        state
    }

    /// The forcing at point `(i, j, k)` and time `t`.
    fn forcing_at(&self, grid: &Grid, [i, j, k]: [usize; 3], t: f64) -> f64 {
        let ([cx, cy], radius) = self.disc;
        let (dx, dy) = (grid.coordinate(i) - cx, grid.coordinate(j) - cy);
        let mut squared = dx * dx + dy * dy;
        if self.dims == 3 {
            let dz = grid.coordinate(k) - self.ball_z;
            squared += dz * dz;
        }
        if t >= self.forcing_start && squared <= radius * radius {
            self.forcing
        } else {
            0.0
        }
    }

    /// `alpha / dx^2`.
    fn diffusion(&self) -> f64 {
        let inverse_dx = (self.n - 1) as f64;
        self.alpha * inverse_dx * inverse_dx
    }
}

impl StiffSystem for Brusselator {
    fn dimension(&self) -> usize {
        self.grid().unknowns()
    }

    fn rhs(&self, t: f64, y: &[f64], dydt: &mut [f64]) -> Result<(), String> {
        let grid = self.grid();
        let n = self.n;
        let diffusion = self.diffusion();
        for k in 0..grid.planes() {
            for j in 0..n {
                for i in 0..n {
                    let point = grid.point(i, j, k);
                    let (u, v) = (y[2 * point], y[2 * point + 1]);
                    let around = grid.neighbours(i, j, k);
                    let uuv = u * u * v;
                    dydt[2 * point] = diffusion * around.laplacian(y, point, 0) + self.b + uuv
                        - (self.a + 1.0) * u
                        + self.forcing_at(&grid, [i, j, k], t);
                    dydt[2 * point + 1] =
                        diffusion * around.laplacian(y, point, 1) + self.a * u - uuv;
                }
            }
        }
        Ok(())
    }

    fn jacobian_pattern(&self) -> CsrMatrix {
        self.pattern.clone()
    }

    fn jacobian(&self, _t: f64, y: &[f64], values: &mut [f64]) -> Result<(), String> {
        let grid = self.grid();
        let n = self.n;
        let diffusion = self.diffusion();
        // The stencil's centre weight, -2 dims.
        let centre = (2 * self.dims) as f64 * diffusion;
        let indptr = self.pattern.indptr();
        let indices = self.pattern.indices();
        for k in 0..grid.planes() {
            for j in 0..n {
                for i in 0..n {
                    let point = grid.point(i, j, k);
                    let (u, v) = (y[2 * point], y[2 * point + 1]);
                    let around = grid.neighbours(i, j, k);
                    let own = [
                        [2.0 * u * v - (self.a + 1.0) - centre, u * u],
                        [self.a - 2.0 * u * v, -u * u - centre],
                    ];
                    for (species, own) in own.iter().enumerate() {
                        let row = 2 * point + species;
                        for entry in indptr[row]..indptr[row + 1] {
                            let column = indices[entry];
                            values[entry] = if column / 2 == point {
                                own[column % 2]
                            } else if around.iter().any(|q| 2 * q + species == column) {
                                diffusion
                            } else {
                                0.0
                            };
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The parameters, in order: `A`, `B`, `alpha` (the forcing and its region are fixed).
impl ParametricSystem for Brusselator {
    fn parameters(&self) -> usize {
        3
    }

    fn rhs_parameter_derivatives(
        &self,
        _t: f64,
        y: &[f64],
        columns: &mut [f64],
    ) -> Result<(), String> {
        let grid = self.grid();
        let n = self.n;
        let unknowns = grid.unknowns();
        let (by_a, rest) = columns.split_at_mut(unknowns);
        let (by_b, by_alpha) = rest.split_at_mut(unknowns);
        // d(alpha / dx^2)/d alpha.
        let inverse_dx = (n - 1) as f64;
        let per_alpha = inverse_dx * inverse_dx;
        for k in 0..grid.planes() {
            for j in 0..n {
                for i in 0..n {
                    let point = grid.point(i, j, k);
                    let u = y[2 * point];
                    let around = grid.neighbours(i, j, k);
                    by_a[2 * point] = -u;
                    by_a[2 * point + 1] = u;
                    by_b[2 * point] = 1.0;
                    for s in 0..2 {
                        by_alpha[2 * point + s] = per_alpha * around.laplacian(y, point, s);
                    }
                }
            }
        }
        Ok(())
    }
}
