//! The adjacency graph of a square matrix's symmetrized pattern, `A + A^T` without the
//! diagonal: what the ordering dissects and the symbolic phase follows.

use crate::{CsrMatrix, Scalar, SparseError};

/// An undirected graph in compressed form: vertex `v`'s neighbours are
/// `adjacency[offsets[v]..offsets[v + 1]]`, increasing, without `v` itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    offsets: Vec<usize>,
    adjacency: Vec<usize>,
}

impl Graph {
    /// The graph of `A + A^T` (entry (i, j) or (j, i) stored, i != j: an edge), whatever
    /// the values (explicit zeros are edges).
    ///
    /// Errors: a matrix that is not square.
    pub fn of_matrix<T: Scalar>(a: &CsrMatrix<T>) -> Result<Self, SparseError> {
        if a.rows() != a.cols() {
            return Err(SparseError::NotSquare {
                rows: a.rows(),
                cols: a.cols(),
            });
        }
        let n = a.rows();
        let t = a.transpose()?;
        let mut offsets = Vec::with_capacity(n + 1);
        let mut adjacency = Vec::with_capacity(2 * a.nnz());
        offsets.push(0);
        for v in 0..n {
            // Merge the sorted rows of A and A^T, dropping the diagonal and repeats.
            let (left, _) = a.row(v);
            let (right, _) = t.row(v);
            let (mut p, mut q) = (0, 0);
            while p < left.len() || q < right.len() {
                let next = match (left.get(p), right.get(q)) {
                    (Some(&x), Some(&y)) if x == y => {
                        p += 1;
                        q += 1;
                        x
                    }
                    (Some(&x), Some(&y)) if x < y => {
                        p += 1;
                        x
                    }
                    (Some(&x), None) => {
                        p += 1;
                        x
                    }
                    (_, Some(&y)) => {
                        q += 1;
                        y
                    }
                    (None, None) => break,
                };
                if next != v {
                    adjacency.push(next);
                }
            }
            offsets.push(adjacency.len());
        }
        Ok(Self { offsets, adjacency })
    }

    /// A graph from neighbour lists (tests, grids): each list is sorted and deduplicated,
    /// self-loops dropped, and every edge made symmetric.
    ///
    /// Errors: a neighbour out of range.
    pub fn from_lists(lists: &[Vec<usize>]) -> Result<Self, SparseError> {
        let n = lists.len();
        let mut sym: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (v, list) in lists.iter().enumerate() {
            for &w in list {
                if w >= n {
                    return Err(SparseError::argument(format!(
                        "vertex {v} has neighbour {w}, out of range for {n} vertices"
                    )));
                }
                if w != v {
                    sym[v].push(w);
                    sym[w].push(v);
                }
            }
        }
        let mut offsets = Vec::with_capacity(n + 1);
        let mut adjacency = Vec::new();
        offsets.push(0);
        for mut list in sym {
            list.sort_unstable();
            list.dedup();
            adjacency.extend(list);
            offsets.push(adjacency.len());
        }
        Ok(Self { offsets, adjacency })
    }

    /// The number of vertices.
    pub fn vertices(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The number of edges (each counted once).
    pub fn edges(&self) -> usize {
        self.adjacency.len() / 2
    }

    /// `v`'s neighbours, increasing.
    ///
    /// Panics if `v >= vertices()`.
    pub fn neighbours(&self, v: usize) -> &[usize] {
        &self.adjacency[self.offsets[v]..self.offsets[v + 1]]
    }
}
