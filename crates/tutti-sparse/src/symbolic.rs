//! The symbolic phase: each front's rows and columns, the maps that assemble the matrix and
//! the children's contribution blocks into it, and the fill and flops it predicts. Made once
//! per pattern and reused by every numeric factorization with that pattern.

use crate::{CsrMatrix, Graph, Scalar, SeparatorTree, SparseError};

/// One front of the multifrontal factorization: a tree node's unknowns (the fully summed
/// ones) and its update unknowns (those of ancestors it couples to), in the new order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Front {
    /// The fully summed unknowns: `first..first + pivots`.
    pub first: usize,
    /// How many: the node's size.
    pub pivots: usize,
    /// The update unknowns, increasing, all beyond the node's own.
    pub update: Vec<usize>,
    /// Where each update unknown sits in the parent's front (its local index there); empty
    /// for a root.
    pub in_parent: Vec<usize>,
    /// The children (tree nodes), increasing: their contribution blocks are added in this
    /// order, so the sum is the same whatever device computed them.
    pub children: Vec<usize>,
}

impl Front {
    /// The front's order: fully summed plus update unknowns.
    pub fn order(&self) -> usize {
        self.pivots + self.update.len()
    }
}

/// What one analysis of a pattern predicts, for reports and plans.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Statistics {
    /// The unknowns.
    pub unknowns: usize,
    /// Entries of the matrix.
    pub matrix_nnz: usize,
    /// Entries of L and U together (the unit diagonal of L not counted), as stored.
    pub factor_nnz: u64,
    /// Floating-point operations of one numeric factorization (multiplications and
    /// additions counted separately).
    pub factor_flops: f64,
    /// Floating-point operations of one solve with one right-hand side.
    pub solve_flops: f64,
    /// The number of fronts (tree nodes).
    pub fronts: usize,
    /// The largest front's order.
    pub largest_front: usize,
    /// Entries of the largest contribution block.
    pub largest_contribution: u64,
}

/// The analysis of a pattern: the tree, its fronts, and where every matrix entry goes.
#[derive(Clone, Debug)]
pub struct Symbolic {
    pub(crate) tree: SeparatorTree,
    pub(crate) fronts: Vec<Front>,
    /// The analysed pattern (row pointers and columns), to check refactorizations.
    pub(crate) indptr: Vec<usize>,
    pub(crate) indices: Vec<usize>,
    /// Per front, the matrix entries it assembles: `entries[entry_ptr[f]..entry_ptr[f+1]]`,
    /// each (entry index in CSR order, row within the front, column within the front).
    pub(crate) entry_ptr: Vec<usize>,
    pub(crate) entries: Vec<(usize, usize, usize)>,
    pub(crate) statistics: Statistics,
}

impl Symbolic {
    /// Analyses `a`'s pattern for the order and assembly tree `tree`.
    ///
    /// Errors: a matrix that is not square or not of the tree's size; a tree that is not an
    /// assembly tree for the pattern (an edge between two subtrees); an empty row or column
    /// (structurally singular); sizes that overflow.
    pub fn new<T: Scalar>(a: &CsrMatrix<T>, tree: SeparatorTree) -> Result<Self, SparseError> {
        let graph = Graph::of_matrix(a)?;
        tree.check(&graph)?;
        let n = a.rows();
        check_structure(a)?;
        let inverse = tree.inverse();
        let nodes = tree.nodes();

        // Update sets, children first: the node's neighbours above it and its children's
        // update sets, minus its own unknowns.
        let mut fronts: Vec<Front> = Vec::with_capacity(nodes.len());
        let mut mark = vec![usize::MAX; n];
        for (f, node) in nodes.iter().enumerate() {
            let mut update = Vec::new();
            for new in node.first..node.end {
                let old = tree.order()[new];
                for &w in graph.neighbours(old) {
                    let v = inverse[w];
                    if v >= node.end && mark[v] != f {
                        mark[v] = f;
                        update.push(v);
                    }
                }
            }
            for &c in &node.children {
                for &v in &fronts[c].update {
                    if v >= node.end && mark[v] != f {
                        mark[v] = f;
                        update.push(v);
                    }
                }
            }
            update.sort_unstable();
            fronts.push(Front {
                first: node.first,
                pivots: node.size(),
                update,
                in_parent: Vec::new(),
                children: node.children.clone(),
            });
        }
        // Each child's update unknowns in its parent's front.
        for (f, node) in nodes.iter().enumerate() {
            if let Some(p) = node.parent {
                let (parent_first, parent_end) =
                    (fronts[p].first, fronts[p].first + fronts[p].pivots);
                let positions = fronts[f]
                    .update
                    .iter()
                    .map(|&v| {
                        if (parent_first..parent_end).contains(&v) {
                            Ok(v - parent_first)
                        } else {
                            fronts[p]
                                .update
                                .binary_search(&v)
                                .map(|k| fronts[p].pivots + k)
                                .map_err(|_| {
                                    SparseError::invalid(format!(
                                        "front {f}'s update unknown {v} is missing from its \
                                         parent {p}"
                                    ))
                                })
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                fronts[f].in_parent = positions;
            }
        }

        // Every entry (i, j), new numbering, goes to the front of min(i, j).
        let node_of = tree.node_of_unknowns();
        let local = |front: &Front, v: usize| -> Option<usize> {
            if v >= front.first && v < front.first + front.pivots {
                Some(v - front.first)
            } else {
                front
                    .update
                    .binary_search(&v)
                    .ok()
                    .map(|k| front.pivots + k)
            }
        };
        let mut per_front: Vec<Vec<(usize, usize, usize)>> = vec![Vec::new(); fronts.len()];
        for row in 0..n {
            let (cols, _) = a.row(row);
            for (offset, &col) in cols.iter().enumerate() {
                let p = a.indptr()[row] + offset;
                let (i, j) = (inverse[row], inverse[col]);
                let f = node_of[i.min(j)];
                let front = &fronts[f];
                match (local(front, i), local(front, j)) {
                    (Some(r), Some(c)) => per_front[f].push((p, r, c)),
                    _ => {
                        return Err(SparseError::invalid(format!(
                            "entry ({row}, {col}) has no place in front {f}"
                        )))
                    }
                }
            }
        }
        let mut entry_ptr = Vec::with_capacity(fronts.len() + 1);
        entry_ptr.push(0);
        let mut entries = Vec::with_capacity(a.nnz());
        for list in per_front {
            entries.extend(list);
            entry_ptr.push(entries.len());
        }

        let statistics = statistics(a, &fronts)?;
        Ok(Self {
            tree,
            fronts,
            indptr: a.indptr().to_vec(),
            indices: a.indices().to_vec(),
            entry_ptr,
            entries,
            statistics,
        })
    }

    /// The order and assembly tree analysed for.
    pub fn tree(&self) -> &SeparatorTree {
        &self.tree
    }

    /// Fill, flops and front sizes.
    pub fn statistics(&self) -> Statistics {
        self.statistics
    }

    /// The number of unknowns.
    pub fn unknowns(&self) -> usize {
        self.tree.unknowns()
    }

    /// Errors unless `a` has exactly the analysed pattern.
    pub(crate) fn check_pattern<T: Scalar>(&self, a: &CsrMatrix<T>) -> Result<(), SparseError> {
        let n = self.unknowns();
        if a.rows() != n || a.cols() != n {
            return Err(SparseError::PatternMismatch {
                detail: format!(
                    "a {} x {} matrix for an analysis of {n} unknowns",
                    a.rows(),
                    a.cols()
                ),
            });
        }
        if a.indptr() != self.indptr.as_slice() || a.indices() != self.indices.as_slice() {
            let row = (0..n)
                .find(|&i| {
                    let (got, _) = a.row(i);
                    let want = &self.indices[self.indptr[i]..self.indptr[i + 1]];
                    got != want
                })
                .unwrap_or(0);
            return Err(SparseError::PatternMismatch {
                detail: format!("row {row} has other columns than the analysed matrix"),
            });
        }
        Ok(())
    }
}

/// Errors on the first empty row or column: no pivot exists for it.
fn check_structure<T: Scalar>(a: &CsrMatrix<T>) -> Result<(), SparseError> {
    let n = a.rows();
    if let Some(row) = (0..n).find(|&i| a.row(i).0.is_empty()) {
        return Err(SparseError::StructurallySingular {
            detail: format!("row {row} has no entries"),
        });
    }
    let mut seen = vec![false; n];
    for &j in a.indices() {
        seen[j] = true;
    }
    if let Some(col) = seen.iter().position(|&s| !s) {
        return Err(SparseError::StructurallySingular {
            detail: format!("column {col} has no entries"),
        });
    }
    Ok(())
}

/// The fill, flops and sizes of a factorization with these fronts.
fn statistics<T: Scalar>(a: &CsrMatrix<T>, fronts: &[Front]) -> Result<Statistics, SparseError> {
    let mut factor_nnz = 0u64;
    let mut factor_flops = 0f64;
    let mut solve_flops = 0f64;
    let mut largest_front = 0;
    let mut largest_contribution = 0u64;
    let too_large = || SparseError::TooLarge {
        what: "the factors",
        detail: "more entries than a u64 counts".into(),
    };
    for front in fronts {
        let (p, u) = (front.pivots as u64, front.update.len() as u64);
        let stored = p
            .checked_mul(p)
            .and_then(|pp| p.checked_mul(u)?.checked_mul(2)?.checked_add(pp))
            .ok_or_else(too_large)?;
        factor_nnz = factor_nnz.checked_add(stored).ok_or_else(too_large)?;
        // Eliminating pivot k of a front of order m: m - k - 1 divisions, and an update of
        // (m - k - 1) x (p - k - 1 + u) entries... counted exactly as the numeric phase does
        // it: the column scaled, then the rank-1 update of the trailing (m - k - 1)^2 block.
        let m = (front.pivots + front.update.len()) as f64;
        for k in 0..front.pivots {
            let rest = m - k as f64 - 1.0;
            factor_flops += rest + 2.0 * rest * rest;
        }
        solve_flops += 2.0 * stored as f64;
        largest_front = largest_front.max(front.order());
        largest_contribution = largest_contribution.max(u.saturating_mul(u));
    }
    Ok(Statistics {
        unknowns: a.rows(),
        matrix_nnz: a.nnz(),
        factor_nnz,
        factor_flops,
        solve_flops,
        fronts: fronts.len(),
        largest_front,
        largest_contribution,
    })
}
