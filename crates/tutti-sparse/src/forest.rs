//! Whole subtrees of the assembly tree factored on the threads of a pool: sibling subtrees
//! are independent until their parent assembles their contribution blocks, so they run as
//! rayon tasks, and a subtree below a grain of work runs on one thread with one workspace.
//!
//! Each front is assembled from the matrix and its children's blocks in the children's
//! order and eliminated by the same dense kernels as on one thread, so the factors are
//! bitwise those of [`FrontFactorizer::factor_subtrees`] whatever the thread count or the
//! order in which the tasks ran.

use rayon::prelude::*;

use crate::mapping::subtree_costs;
use crate::numeric::{FactorOptions, FrontFactor, FrontFactorizer};
use crate::symbolic::Symbolic;
use crate::{Scalar, SparseError};

/// Subtrees per thread the work is cut into at least: enough that the uneven ones even
/// out among the threads.
const TASKS_PER_THREAD: f64 = 4.0;

/// A factored subtree: its fronts' factors, its root's contribution block and the pivots
/// it perturbed.
struct Factored<T> {
    factors: Vec<(usize, FrontFactor<T>)>,
    contribution: Vec<T>,
    perturbed: usize,
}

/// What every task reads: the analysis, the matrix's values and the pivoting.
struct Forest<'s, T> {
    symbolic: &'s Symbolic,
    values: &'s [T],
    max_abs: f64,
    options: &'s FactorOptions,
    /// Each front's subtree's flops.
    cost: Vec<f64>,
    /// A subtree costing at most this runs on one thread.
    grain: f64,
}

/// Factors the whole subtrees rooted at `roots` on the current rayon pool's threads (one
/// thread: in order, as [`FrontFactorizer::factor_subtrees`]): every front's factors go to
/// `factors`, each root's contribution block to `contributions`. Returns the pivots
/// perturbed.
///
/// Errors: a front too large to allocate.
pub(crate) fn factor_forest<T: Scalar>(
    symbolic: &Symbolic,
    values: &[T],
    max_abs: f64,
    options: &FactorOptions,
    roots: &[usize],
    contributions: &mut [Option<Vec<T>>],
    factors: &mut [Option<FrontFactor<T>>],
) -> Result<usize, SparseError> {
    let threads = rayon::current_num_threads();
    if threads <= 1 {
        let mut factorizer = FrontFactorizer::new(symbolic, values, max_abs, options);
        for &root in roots {
            factorizer.factor_subtrees(postorder(symbolic, root), contributions, factors)?;
        }
        return Ok(factorizer.perturbed);
    }
    let cost = subtree_costs(symbolic);
    let total: f64 = roots.iter().map(|&root| cost[root]).sum();
    let forest = Forest {
        symbolic,
        values,
        max_abs,
        options,
        grain: total / (threads as f64 * TASKS_PER_THREAD),
        cost,
    };
    let done = roots
        .par_iter()
        .map(|&root| forest.subtree(root))
        .collect::<Result<Vec<_>, _>>()?;
    let mut perturbed = 0;
    for (&root, subtree) in roots.iter().zip(done) {
        for (f, factor) in subtree.factors {
            factors[f] = Some(factor);
        }
        contributions[root] = Some(subtree.contribution);
        perturbed += subtree.perturbed;
    }
    Ok(perturbed)
}

impl<T: Scalar> Forest<'_, T> {
    fn factorizer(&self) -> FrontFactorizer<'_, T> {
        FrontFactorizer::new(self.symbolic, self.values, self.max_abs, self.options)
    }

    /// The subtree of `root`: its children's subtrees as parallel tasks, then `root`; or,
    /// below the grain, the whole subtree on this thread.
    fn subtree(&self, root: usize) -> Result<Factored<T>, SparseError> {
        let children = &self.symbolic.fronts[root].children;
        if self.cost[root] <= self.grain || children.is_empty() {
            return self.subtree_here(root);
        }
        let done = children
            .par_iter()
            .map(|&child| self.subtree(child))
            .collect::<Result<Vec<_>, _>>()?;
        let mut factorizer = self.factorizer();
        let (factor, contribution) = factorizer.factor(
            root,
            children
                .iter()
                .zip(&done)
                .map(|(&c, child)| (c, child.contribution.as_slice())),
        )?;
        let mut factors = Vec::new();
        let mut perturbed = factorizer.perturbed;
        for child in done {
            factors.extend(child.factors);
            perturbed += child.perturbed;
        }
        factors.push((root, factor));
        Ok(Factored {
            factors,
            contribution,
            perturbed,
        })
    }

    /// The subtree of `root` on this thread, one front after another with one workspace.
    fn subtree_here(&self, root: usize) -> Result<Factored<T>, SparseError> {
        let order = postorder(self.symbolic, root);
        let count = self.symbolic.fronts.len();
        let mut contributions: Vec<Option<Vec<T>>> = vec![None; count];
        let mut factors: Vec<Option<FrontFactor<T>>> = vec![None; count];
        let mut factorizer = self.factorizer();
        factorizer.factor_subtrees(order.iter().copied(), &mut contributions, &mut factors)?;
        let contribution = contributions[root]
            .take()
            .ok_or_else(|| crate::numeric::missing_contribution(root))?;
        let factors = order
            .iter()
            .filter_map(|&f| factors[f].take().map(|factor| (f, factor)))
            .collect();
        Ok(Factored {
            factors,
            contribution,
            perturbed: factorizer.perturbed,
        })
    }
}

/// The fronts of `root`'s subtree, every front after its descendants.
fn postorder(symbolic: &Symbolic, root: usize) -> Vec<usize> {
    // Preorder (a front before its descendants), reversed.
    let mut order = Vec::new();
    let mut stack = vec![root];
    while let Some(f) = stack.pop() {
        order.push(f);
        stack.extend(&symbolic.fronts[f].children);
    }
    order.reverse();
    order
}
