//! The 2-D Brusselator of DifferentialEquations.jl's tutorial "Solving Large Stiff
//! Equations", a stiff reaction-diffusion system with a sparse Jacobian, as a
//! [`StiffSystem`] for [`crate::bdf::integrate`].
//!
//! On an `n x n` periodic grid `x, y in range(0, 1, length = n)` (spacing `dx = 1 / (n - 1)`,
//! the last point's neighbour being the first):
//!
//! - `du/dt = B + u^2 v - (A + 1) u + alpha Δu + f(x, y, t)`,
//! - `dv/dt = A u - u^2 v + alpha Δv`,
//!
//! with `Δ` the 5-point Laplacian divided by `dx^2`, `A = 3.4`, `B = 1`, `alpha = 10`, and
//! the forcing `f = 5` on the disc `(x - 0.3)^2 + (y - 0.6)^2 <= 0.1^2` for `t >= 1.1`, zero
//! elsewhere. The initial state is `u = 22 (y (1 - y))^(3/2)`, `v = 27 (x (1 - x))^(3/2)`.
//! Point `(i, j)` (x index `i`, y index `j`) is `i + n j`, and its unknowns are `2 point`
//! (u) and `2 point + 1` (v): the two species of a point stay together in the ordering.

mod experiment;

use tutti_sparse::{CsrMatrix, SparseError};

pub use experiment::{
    synthetic_experiments, BrusselatorExperiment, SyntheticSetup, OBSERVATION_TIMES,
    START_PARAMETERS, TRUE_PARAMETERS,
};

use crate::bdf::{ParametricSystem, StiffSystem};

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
    /// The forcing disc's centre (default (0.3, 0.6)) and radius (default 0.1).
    pub disc: ([f64; 2], f64),
    pattern: CsrMatrix,
}

impl Brusselator {
    /// The tutorial's problem on an `n x n` grid.
    ///
    /// Errors: `n < 3` or too large for the Jacobian's indices.
    pub fn new(n: usize) -> Result<Self, SparseError> {
        let pattern = pattern(n)?;
        Ok(Self {
            n,
            a: 3.4,
            b: 1.0,
            alpha: 10.0,
            forcing: 5.0,
            forcing_start: 1.1,
            disc: ([0.3, 0.6], 0.1),
            pattern,
        })
    }

    /// The coordinate of grid index `i`.
    fn coordinate(&self, i: usize) -> f64 {
        i as f64 / (self.n - 1) as f64
    }

    /// The initial state, interleaved `(u, v)` per point.
    pub fn initial_state(&self) -> Vec<f64> {
        let n = self.n;
        let mut state = Vec::with_capacity(2 * n * n);
        for j in 0..n {
            for i in 0..n {
                let (x, y) = (self.coordinate(i), self.coordinate(j));
                state.push(22.0 * (y * (1.0 - y)).powf(1.5));
                state.push(27.0 * (x * (1.0 - x)).powf(1.5));
            }
        }
        state
    }

    /// The forcing at point `(i, j)` and time `t`.
    fn forcing_at(&self, i: usize, j: usize, t: f64) -> f64 {
        let ([cx, cy], radius) = self.disc;
        let (dx, dy) = (self.coordinate(i) - cx, self.coordinate(j) - cy);
        if t >= self.forcing_start && dx * dx + dy * dy <= radius * radius {
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

/// The four periodic neighbours of point `(i, j)` of an `n x n` grid: left, right, below,
/// above.
fn neighbours(n: usize, i: usize, j: usize) -> [usize; 4] {
    [
        (i + n - 1) % n + n * j,
        (i + 1) % n + n * j,
        i + n * ((j + n - 1) % n),
        i + n * ((j + 1) % n),
    ]
}

/// The Jacobian's pattern: each row `(p, s)` holds `(p, u)`, `(p, v)` and the same species at
/// the four neighbours.
fn pattern(n: usize) -> Result<CsrMatrix, SparseError> {
    if n < 3 {
        return Err(SparseError::InvalidArgument {
            detail: format!("the Brusselator grid is {n} x {n}: at least 3 x 3 is needed"),
        });
    }
    let unknowns = n
        .checked_mul(n)
        .and_then(|points| points.checked_mul(2))
        .ok_or_else(|| SparseError::TooLarge {
            what: "the Brusselator",
            detail: format!("a {n} x {n} grid"),
        })?;
    let mut triplets = Vec::with_capacity(unknowns * 6);
    for j in 0..n {
        for i in 0..n {
            let point = i + n * j;
            for species in 0..2 {
                let row = 2 * point + species;
                triplets.push((row, 2 * point, 0.0));
                triplets.push((row, 2 * point + 1, 0.0));
                for q in neighbours(n, i, j) {
                    triplets.push((row, 2 * q + species, 0.0));
                }
            }
        }
    }
    CsrMatrix::from_triplets(unknowns, unknowns, &triplets)
}

impl StiffSystem for Brusselator {
    fn dimension(&self) -> usize {
        2 * self.n * self.n
    }

    fn rhs(&self, t: f64, y: &[f64], dydt: &mut [f64]) -> Result<(), String> {
        let n = self.n;
        let diffusion = self.diffusion();
        for j in 0..n {
            for i in 0..n {
                let point = i + n * j;
                let (u, v) = (y[2 * point], y[2 * point + 1]);
                let [left, right, below, above] = neighbours(n, i, j);
                let laplacian = |s: usize| {
                    y[2 * left + s] + y[2 * right + s] + y[2 * below + s] + y[2 * above + s]
                        - 4.0 * y[2 * point + s]
                };
                let uuv = u * u * v;
                dydt[2 * point] = diffusion * laplacian(0) + self.b + uuv - (self.a + 1.0) * u
                    + self.forcing_at(i, j, t);
                dydt[2 * point + 1] = diffusion * laplacian(1) + self.a * u - uuv;
            }
        }
        Ok(())
    }

    fn jacobian_pattern(&self) -> CsrMatrix {
        self.pattern.clone()
    }

    fn jacobian(&self, _t: f64, y: &[f64], values: &mut [f64]) -> Result<(), String> {
        let n = self.n;
        let diffusion = self.diffusion();
        let indptr = self.pattern.indptr();
        let indices = self.pattern.indices();
        for j in 0..n {
            for i in 0..n {
                let point = i + n * j;
                let (u, v) = (y[2 * point], y[2 * point + 1]);
                let around = neighbours(n, i, j);
                let own = [
                    [2.0 * u * v - (self.a + 1.0) - 4.0 * diffusion, u * u],
                    [self.a - 2.0 * u * v, -u * u - 4.0 * diffusion],
                ];
                for (species, own) in own.iter().enumerate() {
                    let row = 2 * point + species;
                    for k in indptr[row]..indptr[row + 1] {
                        let column = indices[k];
                        values[k] = if column / 2 == point {
                            own[column % 2]
                        } else if around.iter().any(|&q| 2 * q + species == column) {
                            diffusion
                        } else {
                            0.0
                        };
                    }
                }
            }
        }
        Ok(())
    }
}

/// The parameters, in order: `A`, `B`, `alpha` (the forcing and its disc are fixed).
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
        let n = self.n;
        let unknowns = 2 * n * n;
        let (by_a, rest) = columns.split_at_mut(unknowns);
        let (by_b, by_alpha) = rest.split_at_mut(unknowns);
        // d(alpha / dx^2)/d alpha.
        let inverse_dx = (n - 1) as f64;
        let per_alpha = inverse_dx * inverse_dx;
        for j in 0..n {
            for i in 0..n {
                let point = i + n * j;
                let u = y[2 * point];
                let [left, right, below, above] = neighbours(n, i, j);
                by_a[2 * point] = -u;
                by_a[2 * point + 1] = u;
                by_b[2 * point] = 1.0;
                for s in 0..2 {
                    by_alpha[2 * point + s] = per_alpha
                        * (y[2 * left + s]
                            + y[2 * right + s]
                            + y[2 * below + s]
                            + y[2 * above + s]
                            - 4.0 * y[2 * point + s]);
                }
            }
        }
        Ok(())
    }
}
