//! Target leaves split among ranks along the Morton curve, balanced by estimated cost.

use std::ops::Range;

use crate::basis::Basis;
use crate::traversal::InteractionLists;
use crate::tree::{Node, Octree};

/// Contiguous ranges of Morton-ordered leaves, one per rank (possibly empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Partition {
    /// `leaf_ranges[r]`: the leaves whose bodies rank r evaluates.
    pub leaf_ranges: Vec<Range<usize>>,
}

impl Partition {
    /// Splits the leaves of `tree` among `ranks` ranks so that each gets about the same
    /// estimated cost: its P2P body pairs, its P2M and L2P terms, and an even share of the
    /// M2L pairs of every node above it.
    pub(crate) fn new(
        tree: &Octree,
        lists: &InteractionLists,
        basis: &Basis,
        ranks: usize,
    ) -> Self {
        let leaves = tree.leaves.len();
        let m2l_weight = (basis.m2l.len() + basis.recurrence.len()) as f64;
        let expansion_weight = 2.0 * basis.len() as f64;
        let mut cost = vec![0.0f64; leaves];
        for (leaf, &index) in tree.leaves.iter().enumerate() {
            let node = &tree.nodes[index as usize];
            let near: usize = lists
                .p2p_of(index as usize)
                .iter()
                .map(|&s| tree.nodes[s as usize].bodies())
                .sum();
            cost[leaf] = (node.bodies() * near) as f64 + node.bodies() as f64 * expansion_weight;
        }
        for (index, node) in tree.nodes.iter().enumerate() {
            let pairs = lists.m2l_of(index).len();
            if pairs > 0 {
                let share = pairs as f64 * m2l_weight / (node.leaf_end - node.leaf_begin) as f64;
                for c in &mut cost[node.leaf_begin..node.leaf_end] {
                    *c += share;
                }
            }
        }
        let total: f64 = cost.iter().sum();
        let mut starts = vec![0usize; ranks + 1];
        starts[ranks] = leaves;
        let mut before = 0.0;
        let mut rank_of_leaf = Vec::with_capacity(leaves);
        for &c in &cost {
            // The rank whose share holds the leaf's midpoint on the cumulative-cost axis.
            let midpoint = before + 0.5 * c;
            let rank = if total > 0.0 {
                ((midpoint / total * ranks as f64) as usize).min(ranks - 1)
            } else {
                0
            };
            rank_of_leaf.push(rank);
            before += c;
        }
        for (rank, start) in starts.iter_mut().enumerate().take(ranks).skip(1) {
            *start = rank_of_leaf.partition_point(|&r| r < rank);
        }
        let leaf_ranges = (0..ranks).map(|r| starts[r]..starts[r + 1]).collect();
        Self { leaf_ranges }
    }

    /// The rank that evaluates `leaf`.
    pub(crate) fn rank_of_leaf(&self, leaf: usize) -> usize {
        self.leaf_ranges
            .partition_point(|range| range.end <= leaf)
            .min(self.leaf_ranges.len() - 1)
    }

    /// The rank owning every leaf below `node`, or `None` when they span several ranks.
    pub(crate) fn owner(&self, node: &Node) -> Option<usize> {
        let first = self.rank_of_leaf(node.leaf_begin);
        (self.rank_of_leaf(node.leaf_end - 1) == first).then_some(first)
    }
}

/// Whether `node` lies above or among `leaves` (its leaves intersect them).
pub(crate) fn covers(node: &Node, leaves: &Range<usize>) -> bool {
    node.leaf_begin < leaves.end && node.leaf_end > leaves.start
}
