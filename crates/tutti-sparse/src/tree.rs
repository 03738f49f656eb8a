//! The separator tree of a nested dissection: a fill-reducing order and the assembly tree of
//! the multifrontal factorization in one.

use crate::{Graph, SparseError};

/// One node of a [`SeparatorTree`]: a separator (or a leaf's block) of consecutive unknowns
/// in the new order, eliminated together as one front.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeNode {
    /// The node's first unknown (new numbering).
    pub first: usize,
    /// One past its last unknown.
    pub end: usize,
    /// The first unknown of its subtree: the subtree's unknowns are `subtree_first..end`.
    pub subtree_first: usize,
    /// Its children, in increasing order (each numbered before it).
    pub children: Vec<usize>,
    /// Its parent, or `None` for a root.
    pub parent: Option<usize>,
}

impl TreeNode {
    /// The number of unknowns the node eliminates.
    pub fn size(&self) -> usize {
        self.end.saturating_sub(self.first)
    }
}

/// A fill-reducing order with its tree: unknown `old` of the matrix becomes unknown
/// `inverse()[old]`, and `order()[new]` is the old index of new unknown `new`.
///
/// The nodes are numbered in postorder (children before their parent, a subtree's nodes
/// consecutive); each node's unknowns are consecutive in the new order and follow those of
/// its subtree, so a subtree is a range of unknowns. The tree is a forest when the graph is
/// disconnected. The property that makes it an assembly tree (checked by
/// [`SeparatorTree::check`]): every edge of the graph joins a node to itself or to one of
/// its ancestors, so the subtrees of two siblings never touch and are factored
/// independently, in any order, on any device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeparatorTree {
    order: Vec<usize>,
    inverse: Vec<usize>,
    nodes: Vec<TreeNode>,
}

impl SeparatorTree {
    /// A tree from the new order (`order[new] = old`) and nodes given by their unknown
    /// ranges and parents; children, subtree ranges and the checks are derived.
    ///
    /// Errors: `order` not a permutation; ranges that do not tile `0..n` in order; a parent
    /// numbered before its child; a subtree whose unknowns are not consecutive.
    pub fn new(
        order: Vec<usize>,
        ranges: &[(usize, usize)],
        parents: &[Option<usize>],
    ) -> Result<Self, SparseError> {
        let n = order.len();
        let mut inverse = vec![usize::MAX; n];
        for (new, &old) in order.iter().enumerate() {
            if old >= n || inverse[old] != usize::MAX {
                return Err(SparseError::argument(format!(
                    "the order is not a permutation of 0..{n} (entry {new} is {old})"
                )));
            }
            inverse[old] = new;
        }
        if ranges.len() != parents.len() {
            return Err(SparseError::argument(format!(
                "{} node ranges but {} parents",
                ranges.len(),
                parents.len()
            )));
        }
        let mut next = 0;
        for (i, &(first, end)) in ranges.iter().enumerate() {
            if first != next || end < first || end > n {
                return Err(SparseError::argument(format!(
                    "node {i} holds {first}..{end}, expected to start at {next}"
                )));
            }
            next = end;
        }
        if next != n {
            return Err(SparseError::argument(format!(
                "the nodes hold {next} of {n} unknowns"
            )));
        }
        let mut nodes: Vec<TreeNode> = ranges
            .iter()
            .zip(parents)
            .map(|(&(first, end), &parent)| TreeNode {
                first,
                end,
                subtree_first: first,
                children: Vec::new(),
                parent,
            })
            .collect();
        for i in 0..nodes.len() {
            if let Some(p) = nodes[i].parent {
                if p <= i || p >= nodes.len() {
                    return Err(SparseError::argument(format!(
                        "node {i} has parent {p}: parents come after their children"
                    )));
                }
                // Postorder: the subtree of p is consecutive, so i's subtree ends where the
                // next child's (or p's own unknowns) begin.
                let child_first = nodes[i].subtree_first;
                nodes[p].children.push(i);
                if nodes[p].children.len() == 1 {
                    nodes[p].subtree_first = child_first;
                }
            }
        }
        for (i, node) in nodes.iter().enumerate() {
            let mut expected = node.subtree_first;
            for &c in &node.children {
                if nodes[c].subtree_first != expected {
                    return Err(SparseError::argument(format!(
                        "node {i}'s subtree is not consecutive (child {c} starts at {}, \
                         expected {expected})",
                        nodes[c].subtree_first
                    )));
                }
                expected = nodes[c].end;
            }
            if expected != node.first {
                return Err(SparseError::argument(format!(
                    "node {i}'s unknowns start at {} but its children end at {expected}",
                    node.first
                )));
            }
        }
        Ok(Self {
            order,
            inverse,
            nodes,
        })
    }

    /// The number of unknowns.
    pub fn unknowns(&self) -> usize {
        self.order.len()
    }

    /// `order()[new]` is the old index of new unknown `new`.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// `inverse()[old]` is the new index of old unknown `old`.
    pub fn inverse(&self) -> &[usize] {
        &self.inverse
    }

    /// The nodes, in postorder.
    pub fn nodes(&self) -> &[TreeNode] {
        &self.nodes
    }

    /// The roots (nodes without a parent), increasing.
    pub fn roots(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].parent.is_none())
            .collect()
    }

    /// The node of each new unknown.
    pub fn node_of_unknowns(&self) -> Vec<usize> {
        let mut node_of = vec![0; self.unknowns()];
        for (i, node) in self.nodes.iter().enumerate() {
            node_of[node.first..node.end].fill(i);
        }
        node_of
    }

    /// Checks that this is an assembly tree for `graph` (old numbering): every edge joins a
    /// node to itself or to an ancestor.
    ///
    /// Errors: a graph of another size; the first edge that crosses between two subtrees.
    pub fn check(&self, graph: &Graph) -> Result<(), SparseError> {
        if graph.vertices() != self.unknowns() {
            return Err(SparseError::argument(format!(
                "a tree of {} unknowns for a graph of {} vertices",
                self.unknowns(),
                graph.vertices()
            )));
        }
        let node_of = self.node_of_unknowns();
        for old in 0..graph.vertices() {
            let u = self.inverse[old];
            for &w in graph.neighbours(old) {
                let v = self.inverse[w];
                // With u < v in the new order, v's node must be an ancestor of (or equal to)
                // u's: its subtree range holds u.
                let (low, high) = (u.min(v), u.max(v));
                let node = &self.nodes[node_of[high]];
                if low < node.subtree_first {
                    return Err(SparseError::argument(format!(
                        "edge ({old}, {w}) joins node {} to node {}, which are not on one \
                         root path",
                        node_of[low], node_of[high]
                    )));
                }
            }
        }
        Ok(())
    }
}
