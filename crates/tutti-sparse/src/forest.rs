//! Whole subtrees of the assembly tree factored on the threads of a pool, in two phases
//! (the layer of subtrees below it and the fronts above it, as MUMPS's "L0" layer): the
//! subtrees whose flops are at most a grain (about a quarter of a thread's share) run as
//! rayon tasks, each on one thread with one workspace, its fronts' updates on that thread
//! too; then the fronts above them, children before parents, one at a time, a large
//! front's updates on all the pool's threads. A thread so holds one subtree task in
//! progress at a time, and the fronts above are never in progress together: what the
//! memory plan counts (`footprint`).
//!
//! Each front is assembled from the matrix and its children's blocks in the children's
//! order and eliminated by the same dense kernels as on one thread, so the factors are
//! bitwise those of [`FrontFactorizer::factor_subtrees`] whatever the thread count or the
//! order in which the tasks ran.

use std::ops::RangeInclusive;

use rayon::prelude::*;

use crate::mapping::subtree_costs;
use crate::numeric::{FactorOptions, FrontFactor, FrontFactorizer};
use crate::symbolic::Symbolic;
use crate::{Scalar, SparseError};

/// Subtree tasks per thread the work is cut into at least: enough that the uneven ones
/// even out among the threads.
pub(crate) const TASKS_PER_THREAD: f64 = 4.0;

/// The forest of `roots` cut for `threads` threads: the subtree tasks (each a subtree at
/// most the grain, or a leaf), and the fronts above them in postorder.
pub(crate) struct Layers {
    pub tasks: Vec<usize>,
    pub above: Vec<usize>,
}

impl Layers {
    /// Cuts the subtrees of `roots` at a grain of their flops over `threads *`
    /// [`TASKS_PER_THREAD`].
    pub fn new(symbolic: &Symbolic, roots: &[usize], threads: usize) -> Self {
        let cost = subtree_costs(symbolic);
        let total: f64 = roots.iter().map(|&root| cost[root]).sum();
        let grain = total / (threads.max(1) as f64 * TASKS_PER_THREAD);
        let mut tasks = Vec::new();
        let mut above = Vec::new();
        let mut stack: Vec<usize> = roots.to_vec();
        while let Some(f) = stack.pop() {
            let children = &symbolic.fronts[f].children;
            if cost[f] <= grain || children.is_empty() {
                tasks.push(f);
            } else {
                above.push(f);
                stack.extend(children);
            }
        }
        tasks.sort_unstable();
        above.sort_unstable();
        Self { tasks, above }
    }
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
    let factorizer = || FrontFactorizer::new(symbolic, values, max_abs, options);
    if threads <= 1 {
        let mut factorizer = factorizer();
        for &root in roots {
            factorizer.factor_subtrees(subtree(symbolic, root), contributions, factors)?;
        }
        return Ok(factorizer.perturbed);
    }
    let layers = Layers::new(symbolic, roots, threads);
    // The subtree tasks, each on one thread, its updates too.
    let done = layers
        .tasks
        .par_iter()
        .map(|&root| {
            let order = subtree(symbolic, root);
            let mut mine: Vec<Option<Vec<T>>> = vec![None; symbolic.fronts.len()];
            let mut own: Vec<Option<FrontFactor<T>>> = vec![None; symbolic.fronts.len()];
            let mut factorizer = factorizer().on_one_thread();
            factorizer.factor_subtrees(order.clone(), &mut mine, &mut own)?;
            let contribution = mine[root]
                .take()
                .ok_or_else(|| crate::numeric::missing_contribution(root))?;
            let factored: Vec<(usize, FrontFactor<T>)> = order
                .filter_map(|f| own[f].take().map(|factor| (f, factor)))
                .collect();
            Ok::<_, SparseError>((contribution, factored, factorizer.perturbed))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut perturbed = 0;
    for (&root, (contribution, factored, count)) in layers.tasks.iter().zip(done) {
        for (f, factor) in factored {
            factors[f] = Some(factor);
        }
        contributions[root] = Some(contribution);
        perturbed += count;
    }
    // The fronts above, one at a time, their updates on the pool's threads.
    let mut factorizer = factorizer();
    factorizer.factor_subtrees(layers.above.iter().copied(), contributions, factors)?;
    Ok(perturbed + factorizer.perturbed)
}

/// The fronts of `root`'s subtree, every front after its descendants: a range, since the
/// fronts are numbered in postorder (children in increasing order), so a subtree's fronts
/// run from its first leaf's to its root.
pub(crate) fn subtree(symbolic: &Symbolic, root: usize) -> RangeInclusive<usize> {
    let mut first = root;
    while let Some(&child) = symbolic.fronts[first].children.first() {
        first = child;
    }
    first..=root
}
