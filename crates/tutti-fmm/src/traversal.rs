//! Interaction lists from a dual-tree traversal.
//!
//! Starting from (root, root), a target cell A and a source cell B interact through their
//! expansions (M2L) when they are well separated,
//!
//! ```text
//! r_A + r_B < theta * |z_A - z_B|
//! ```
//!
//! with z the centre of a cell's bodies' bounding box and r the largest distance from z to
//! its bodies, unless both are leaves with at most `direct_limit` body pairs between them
//! (then the direct sum is cheaper and exact). Otherwise two leaves interact directly (P2P),
//! and in any other case the cell
//! with the larger radius (the target on a tie) is split when it has children. The traversal
//! is sequential and depends only on the tree and theta, never on the device count, so every
//! rank sees the same lists in the same order.

use crate::tree::{distance2, Octree};

/// Compressed per-target-node lists of source nodes.
#[derive(Clone, Debug, Default)]
pub(crate) struct InteractionLists {
    /// `m2l[m2l_start[a]..m2l_start[a + 1]]`: sources acting on node a through M2L.
    pub m2l: Vec<u32>,
    /// Offsets into `m2l` (one per node, plus one).
    pub m2l_start: Vec<usize>,
    /// `p2p[p2p_start[a]..p2p_start[a + 1]]`: source leaves acting on leaf a directly.
    pub p2p: Vec<u32>,
    /// Offsets into `p2p`.
    pub p2p_start: Vec<usize>,
}

impl InteractionLists {
    /// The M2L sources of node `target`.
    pub(crate) fn m2l_of(&self, target: usize) -> &[u32] {
        &self.m2l[self.m2l_start[target]..self.m2l_start[target + 1]]
    }

    /// The P2P source leaves of leaf `target`.
    pub(crate) fn p2p_of(&self, target: usize) -> &[u32] {
        &self.p2p[self.p2p_start[target]..self.p2p_start[target + 1]]
    }

    /// Builds the lists of `tree` for opening angle `theta`; separated leaf pairs with at
    /// most `direct_limit` body pairs go to P2P.
    pub(crate) fn build(tree: &Octree, theta: f64, direct_limit: usize) -> Self {
        let nodes = &tree.nodes;
        let mut m2l_pairs: Vec<(u32, u32)> = Vec::new();
        let mut p2p_pairs: Vec<(u32, u32)> = Vec::new();
        let mut stack: Vec<(u32, u32)> = if nodes.is_empty() {
            Vec::new()
        } else {
            vec![(0, 0)]
        };
        while let Some((a, b)) = stack.pop() {
            let (na, nb) = (&nodes[a as usize], &nodes[b as usize]);
            let separation2 = distance2(&na.center, &nb.center);
            let reach = na.radius + nb.radius;
            let both_leaves = na.is_leaf() && nb.is_leaf();
            if reach * reach < theta * theta * separation2
                && !(both_leaves && na.bodies() * nb.bodies() <= direct_limit)
            {
                m2l_pairs.push((a, b));
            } else if both_leaves {
                p2p_pairs.push((a, b));
            } else if nb.is_leaf() || (!na.is_leaf() && na.radius >= nb.radius) {
                // Reverse so that children are visited in octant order.
                stack.extend(na.children().rev().map(|child| (child as u32, b)));
            } else {
                stack.extend(nb.children().rev().map(|child| (a, child as u32)));
            }
        }
        let (m2l, m2l_start) = bucket(&m2l_pairs, nodes.len());
        let (p2p, p2p_start) = bucket(&p2p_pairs, nodes.len());
        Self {
            m2l,
            m2l_start,
            p2p,
            p2p_start,
        }
    }
}

/// Groups (target, source) pairs by target, keeping the traversal order within a target.
fn bucket(pairs: &[(u32, u32)], nodes: usize) -> (Vec<u32>, Vec<usize>) {
    let mut start = vec![0usize; nodes + 1];
    for &(target, _) in pairs {
        start[target as usize + 1] += 1;
    }
    for i in 0..nodes {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut sources = vec![0u32; pairs.len()];
    for &(target, source) in pairs {
        sources[fill[target as usize]] = source;
        fill[target as usize] += 1;
    }
    (sources, start)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (target body, source body) pair is covered exactly once: by a P2P leaf pair or
    /// by an M2L pair of an ancestor-or-self of each.
    #[test]
    fn every_body_pair_is_covered_once() {
        let mut state = 12345u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let positions: Vec<[f64; 3]> = (0..300).map(|_| [next(), next(), next() * 0.1]).collect();
        let masses = vec![1.0; positions.len()];
        let tree = Octree::build(&positions, &masses, 4, 21);
        let lists = InteractionLists::build(&tree, 0.6, 8);
        let n = positions.len();
        let mut cover = vec![0u32; n * n];
        for target in 0..tree.nodes.len() {
            let a = &tree.nodes[target];
            for &source in lists.m2l_of(target).iter().chain(lists.p2p_of(target)) {
                let b = &tree.nodes[source as usize];
                for i in a.begin..a.end {
                    for j in b.begin..b.end {
                        cover[i * n + j] += 1;
                    }
                }
            }
            if !lists.p2p_of(target).is_empty() {
                assert!(a.is_leaf());
            }
        }
        assert!(cover.iter().all(|&c| c == 1));
    }
}
