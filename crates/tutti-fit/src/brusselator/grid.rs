//! The Brusselator's periodic grid: its sizes (checked when a model is made), the numbering
//! of its points, each point's neighbours, the Laplacian's stencil and the Jacobian's
//! pattern.
//!
//! Point `(i, j, k)` (x, y and z index; `k = 0` in 2-D) is `i + n j + n^2 k`, and its
//! unknowns are `2 point` (u) and `2 point + 1` (v).

use tutti_sparse::{CsrMatrix, SparseError};

/// An `n x n` (`dims = 2`) or `n x n x n` (`dims = 3`) periodic grid, its sizes known to fit
/// in `usize` (see [`Grid::checked`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Grid {
    /// Points per axis (at least 3).
    pub(super) n: usize,
    /// Space dimensions: 2 or 3.
    pub(super) dims: usize,
}

/// The periodic neighbours of one point.
#[derive(Clone, Copy, Debug)]
pub(super) struct Neighbours {
    /// In the point's z-plane: left, right, below, above (x - 1, x + 1, y - 1, y + 1).
    pub(super) plane: [usize; 4],
    /// In 3-D, the same `(i, j)` in the planes behind and in front (z - 1, z + 1).
    pub(super) across: Option<[usize; 2]>,
}

impl Grid {
    /// The grid, after checking `dims` is 2 or 3, `n >= 3` (the neighbours along each axis
    /// are distinct) and that the unknowns (`2 n^dims`) and the Jacobian's entries
    /// (`(2 + 2 dims)` per unknown) can be counted in `usize`.
    ///
    /// Errors: [`SparseError::InvalidArgument`] for `dims` or `n`, [`SparseError::TooLarge`]
    /// for a count that overflows.
    pub(super) fn checked(n: usize, dims: usize) -> Result<Self, SparseError> {
        if !matches!(dims, 2 | 3) {
            return Err(SparseError::InvalidArgument {
                detail: format!(
                    "the Brusselator is defined in 2 or 3 space dimensions, not {dims}"
                ),
            });
        }
        let grid = Self { n, dims };
        if n < 3 {
            return Err(SparseError::InvalidArgument {
                detail: format!(
                    "the Brusselator grid is {}: at least {} is needed",
                    grid.describe(n),
                    grid.describe(3)
                ),
            });
        }
        grid.nnz()?;
        Ok(grid)
    }

    /// `"n x n"` or `"n x n x n"` for this grid's dimensions.
    fn describe(&self, n: usize) -> String {
        vec![n.to_string(); self.dims].join(" x ")
    }

    /// The number of unknowns and of the Jacobian's entries, or `TooLarge`.
    fn nnz(&self) -> Result<(usize, usize), SparseError> {
        let too_large = || SparseError::TooLarge {
            what: "the Brusselator",
            detail: format!("a {} grid", self.describe(self.n)),
        };
        // `dims` is 2 or 3.
        let points = self.n.checked_pow(self.dims as u32).ok_or_else(too_large)?;
        let unknowns = points.checked_mul(2).ok_or_else(too_large)?;
        let nnz = unknowns
            .checked_mul(2 + 2 * self.dims)
            .ok_or_else(too_large)?;
        Ok((unknowns, nnz))
    }

    /// The number of z-planes: 1 in 2-D, `n` in 3-D.
    pub(super) fn planes(&self) -> usize {
        if self.dims == 3 {
            self.n
        } else {
            1
        }
    }

    /// The number of unknowns, `2 n^dims`.
    pub(super) fn unknowns(&self) -> usize {
        2 * self.n * self.n * self.planes()
    }

    /// The number of point `(i, j, k)`.
    pub(super) fn point(&self, i: usize, j: usize, k: usize) -> usize {
        i + self.n * (j + self.n * k)
    }

    /// The coordinate of index `i` along any axis, `i / (n - 1)`.
    pub(super) fn coordinate(&self, i: usize) -> f64 {
        i as f64 / (self.n - 1) as f64
    }

    /// The periodic neighbours of point `(i, j, k)`.
    pub(super) fn neighbours(&self, i: usize, j: usize, k: usize) -> Neighbours {
        let n = self.n;
        // Periodic wrap by comparison: a division per neighbour would cost more than the
        // rest of a right-hand side's point.
        let previous = |index: usize| if index == 0 { n - 1 } else { index - 1 };
        let next = |index: usize| if index + 1 == n { 0 } else { index + 1 };
        Neighbours {
            plane: [
                self.point(previous(i), j, k),
                self.point(next(i), j, k),
                self.point(i, previous(j), k),
                self.point(i, next(j), k),
            ],
            across: (self.dims == 3)
                .then(|| [self.point(i, j, previous(k)), self.point(i, j, next(k))]),
        }
    }

    /// The Jacobian's pattern: each row `(p, s)` holds `(p, u)`, `(p, v)` and species `s` at
    /// the `2 dims` neighbours of `p`.
    ///
    /// Errors: [`SparseError::TooLarge`] where the entries cannot be allocated.
    pub(super) fn pattern(&self) -> Result<CsrMatrix, SparseError> {
        let (unknowns, nnz) = self.nnz()?;
        let mut triplets = Vec::new();
        triplets
            .try_reserve_exact(nnz)
            .map_err(|err| SparseError::TooLarge {
                what: "the Brusselator Jacobian's entries",
                detail: format!("{nnz} entries: {err}"),
            })?;
        let n = self.n;
        for k in 0..self.planes() {
            for j in 0..n {
                for i in 0..n {
                    let point = self.point(i, j, k);
                    let around = self.neighbours(i, j, k);
                    for species in 0..2 {
                        let row = 2 * point + species;
                        triplets.push((row, 2 * point, 0.0));
                        triplets.push((row, 2 * point + 1, 0.0));
                        for q in around.iter() {
                            triplets.push((row, 2 * q + species, 0.0));
                        }
                    }
                }
            }
        }
        CsrMatrix::from_triplets(unknowns, unknowns, &triplets)
    }
}

impl Neighbours {
    /// The neighbours in the order of the stencil: the plane's four, then the two across.
    pub(super) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.plane
            .iter()
            .chain(self.across.iter().flatten())
            .copied()
    }

    /// The Laplacian's stencil (not divided by `dx^2`) of species `species` of the
    /// interleaved state `y` at `point`: the sum over the `2 dims` neighbours less
    /// `2 dims` times the point's value.
    pub(super) fn laplacian(&self, y: &[f64], point: usize, species: usize) -> f64 {
        let at = |q: usize| y[2 * q + species];
        let [left, right, below, above] = self.plane;
        let in_plane = at(left) + at(right) + at(below) + at(above) - 4.0 * at(point);
        match self.across {
            None => in_plane,
            // The z-direction's difference is added on its own: it is exactly zero where the
            // state does not change with z, so such a state's 3-D stencil has the bits of
            // the 2-D one.
            Some([back, front]) => in_plane + (at(back) + at(front) - 2.0 * at(point)),
        }
    }
}
