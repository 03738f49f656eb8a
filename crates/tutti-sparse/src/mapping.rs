//! Which rank factors which front: a proportional (subtree-to-subcube) mapping of the
//! assembly tree onto the ranks of a group.
//!
//! The ranks `0..P` go to the roots, then down the tree: each node's range of ranks is split
//! among its children in proportion to their subtrees' flops, contiguously and in the
//! children's order; a child always gets at least one rank, so with more children than
//! ranks, neighbours share one. A node whose range is a single rank is **local**: its whole
//! subtree is on that rank, factored without a message. A node with a range of several
//! ranks is **shared**: its children's contribution blocks are gathered to its owner (the
//! range's first rank), which assembles it; the range's ranks factor it together, its
//! columns dealt block-cyclically (`shared_front`), each rank keeping the columns it
//! factored. The tree itself never depends on P: P only
//! decides where subtrees run, so the arithmetic, and the bits, are those of one rank.

use std::ops::Range;

use crate::symbolic::Symbolic;

/// The ranks of every front.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mapping {
    /// The rank that assembles each front (and, for a local one, keeps and solves it): its
    /// range's first.
    pub owner: Vec<usize>,
    /// The ranks of each front: one for a local front; for a shared one, the ranks that
    /// factor it together.
    pub ranks: Vec<Range<usize>>,
    /// Whether each front's whole subtree is on its owner.
    pub local: Vec<bool>,
}

impl Mapping {
    /// The mapping of `symbolic`'s tree onto `ranks` ranks (at least one).
    pub fn new(symbolic: &Symbolic, ranks: usize) -> Self {
        let ranks = ranks.max(1);
        let fronts = &symbolic.fronts;
        let count = fronts.len();
        let cost = subtree_costs(symbolic);
        let mut range: Vec<Range<usize>> = vec![0..0; count];
        let roots = symbolic.tree.roots();
        for (root, share) in roots.iter().zip(split(0..ranks, &roots, &cost)) {
            range[*root] = share;
        }
        // Parents before children: reverse postorder.
        for f in (0..count).rev() {
            let children = &fronts[f].children;
            if !children.is_empty() {
                for (&child, share) in children
                    .iter()
                    .zip(split(range[f].clone(), children, &cost))
                {
                    range[child] = share;
                }
            }
        }
        Self {
            owner: range.iter().map(|r| r.start).collect(),
            local: range.iter().map(|r| r.len() == 1).collect(),
            ranks: range,
        }
    }

    /// The fronts rank `rank` factors without messages, in postorder.
    pub fn local_fronts(&self, rank: usize) -> impl DoubleEndedIterator<Item = usize> + '_ {
        (0..self.owner.len()).filter(move |&f| self.local[f] && self.owner[f] == rank)
    }

    /// The roots of rank `rank`'s local subtrees (local fronts whose parent is shared or
    /// none), in postorder.
    pub fn local_roots(&self, symbolic: &Symbolic, rank: usize) -> Vec<usize> {
        self.local_fronts(rank)
            .filter(|&f| {
                symbolic.tree.nodes()[f]
                    .parent
                    .is_none_or(|p| !self.local[p])
            })
            .collect()
    }

    /// The shared fronts, in postorder (every rank takes part in their exchanges).
    pub fn shared_fronts(&self) -> impl DoubleEndedIterator<Item = usize> + '_ {
        (0..self.owner.len()).filter(move |&f| !self.local[f])
    }
}

/// Each front's subtree's cost: its fronts' flops (and their orders, so none is free).
pub(crate) fn subtree_costs(symbolic: &Symbolic) -> Vec<f64> {
    let mut cost = vec![0f64; symbolic.fronts.len()];
    // Children before parents: the fronts are numbered in postorder.
    for (f, front) in symbolic.fronts.iter().enumerate() {
        let m = front.order() as f64;
        let own: f64 = (0..front.pivots)
            .map(|k| {
                let rest = m - k as f64 - 1.0;
                rest + 2.0 * rest * rest
            })
            .sum();
        cost[f] += own + m;
        if let Some(parent) = symbolic.tree.nodes()[f].parent {
            let subtree = cost[f];
            cost[parent] += subtree;
        }
    }
    cost
}

/// `ranks` split among `nodes` in proportion to `cost`, contiguously, at least one each.
fn split(ranks: Range<usize>, nodes: &[usize], cost: &[f64]) -> Vec<Range<usize>> {
    let len = ranks.len();
    if len <= 1 {
        return vec![ranks; nodes.len()];
    }
    let total: f64 = nodes.iter().map(|&n| cost[n]).sum();
    let mut before = 0.0;
    nodes
        .iter()
        .map(|&n| {
            let at = |fraction: f64| -> usize {
                let offset = if total > 0.0 {
                    (len as f64 * fraction / total).round() as usize
                } else {
                    0
                };
                ranks.start + offset.min(len)
            };
            let mut start = at(before);
            before += cost[n];
            let mut end = at(before);
            start = start.min(ranks.end - 1);
            end = end.max(start + 1).min(ranks.end);
            start..end
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn ranks_follow_the_costs_and_every_child_gets_one() {
        let cost = [3.0, 1.0, 0.0, 5.0];
        assert_eq!(split(0..4, &[0, 1], &cost), vec![0..3, 3..4]);
        assert_eq!(split(2..4, &[0, 1], &cost), vec![2..4, 3..4]);
        assert_eq!(split(0..1, &[0, 1, 3], &cost), vec![0..1, 0..1, 0..1]);
        // More children than ranks: neighbours share.
        let shares = split(0..2, &[0, 1, 2, 3], &cost);
        assert!(
            shares.iter().all(|r| !r.is_empty() && r.end <= 2),
            "{shares:?}"
        );
    }
}
