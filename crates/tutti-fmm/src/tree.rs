//! The adaptive octree over Morton-sorted bodies.
//!
//! A node is split into its non-empty octants while it holds more than `leaf_size` bodies,
//! is above `max_depth`, and its bodies can be separated (they do not all coincide). The
//! octants of a node are those of the cube fitted to the node's own bodies (see
//! `split_cell`), not a fixed grid over the whole bounding cube: one far outlier then costs
//! one level, not the resolution of every other cell. Bodies are ordered along the curve
//! this defines (octants in Morton order at every level). Nodes are stored breadth first, so
//! every level is a contiguous index range, the children of a node are contiguous, and
//! within a level nodes follow the curve. Leaves are also numbered along the curve, and
//! every node covers a contiguous range of leaves and of sorted bodies.

use rayon::prelude::*;

/// Marks the parent of the root.
pub(crate) const NO_PARENT: u32 = u32::MAX;

/// One cell of the octree.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    /// First body (in sorted order).
    pub begin: usize,
    /// One past the last body.
    pub end: usize,
    /// Depth (root = 0).
    pub level: usize,
    /// Parent node, or [`NO_PARENT`].
    pub parent: u32,
    /// First child; children are `child_begin..child_begin + child_count`.
    pub child_begin: u32,
    /// Number of children (0 for a leaf).
    pub child_count: u32,
    /// First leaf (Morton leaf numbering) under this node.
    pub leaf_begin: usize,
    /// One past the last leaf under this node.
    pub leaf_end: usize,
    /// Expansion centre: the centre of the bounding box of the node's bodies.
    pub center: [f64; 3],
    /// Largest distance from `center` to a body of the node.
    pub radius: f64,
}

impl Node {
    /// Whether the node has no children.
    pub fn is_leaf(&self) -> bool {
        self.child_count == 0
    }

    /// Number of bodies.
    pub fn bodies(&self) -> usize {
        self.end - self.begin
    }

    /// The children's indices.
    pub fn children(&self) -> std::ops::Range<usize> {
        self.child_begin as usize..(self.child_begin + self.child_count) as usize
    }
}

/// The octree and the bodies in Morton order.
#[derive(Clone, Debug)]
pub(crate) struct Octree {
    /// Nodes, breadth first.
    pub nodes: Vec<Node>,
    /// `levels[l]` is the index range of the nodes at depth l.
    pub levels: Vec<std::ops::Range<usize>>,
    /// Leaf node indices along the Morton curve.
    pub leaves: Vec<u32>,
    /// Input index of each sorted body.
    pub input_index: Vec<usize>,
    /// Sorted positions.
    pub positions: Vec<[f64; 3]>,
    /// Sorted strengths.
    pub masses: Vec<f64>,
}

/// Puts the bodies of one cell (`cell`, input indices) in octant order and returns how many
/// fall into each octant, or `None` when the cell cannot be split: its bodies coincide, or
/// their extent is too small for the midpoint to separate them in floating point.
///
/// The octants are those of the cube anchored at the low corner of the bodies' own bounding
/// box, with its largest side: octant `4 x + 2 y + z`, each bit set in the upper half of
/// its axis. Every cell is re-fitted to its bodies, so a far outlier costs one level instead
/// of squeezing everything else into one cell. The order within an octant is kept, so the
/// result depends only on the positions.
fn split_cell(cell: &mut [usize], positions: &[[f64; 3]]) -> Option<[usize; 8]> {
    let mut low = [f64::INFINITY; 3];
    let mut high = [f64::NEG_INFINITY; 3];
    for &body in cell.iter() {
        for axis in 0..3 {
            low[axis] = low[axis].min(positions[body][axis]);
            high[axis] = high[axis].max(positions[body][axis]);
        }
    }
    // Half the largest side, halved before subtracting so that +-1e308 cannot overflow.
    let half = (0..3)
        .map(|a| 0.5 * high[a] - 0.5 * low[a])
        .fold(0.0, f64::max);
    if half <= 0.0 {
        return None;
    }
    let middle = low.map(|l| l + half);
    let octant = |body: usize| {
        let p = &positions[body];
        (usize::from(p[0] >= middle[0]) << 2)
            | (usize::from(p[1] >= middle[1]) << 1)
            | usize::from(p[2] >= middle[2])
    };
    let mut counts = [0usize; 8];
    for &body in cell.iter() {
        counts[octant(body)] += 1;
    }
    if counts.contains(&cell.len()) {
        // One octant holds everything: the child would be the same cell again.
        return None;
    }
    let mut next = [0usize; 8];
    for oct in 1..8 {
        next[oct] = next[oct - 1] + counts[oct - 1];
    }
    let mut sorted = vec![0usize; cell.len()];
    for &body in cell.iter() {
        let oct = octant(body);
        sorted[next[oct]] = body;
        next[oct] += 1;
    }
    cell.copy_from_slice(&sorted);
    Some(counts)
}

/// A leaf at the depth cap holding more than this many times `leaf_size` bodies is reported:
/// its direct sum is quadratic in its bodies.
const CROWDED_LEAF_FACTOR: usize = 8;

impl Octree {
    /// Builds the tree. Positions and masses have equal lengths (checked by the caller); the
    /// tree of no bodies has no nodes.
    pub(crate) fn build(
        positions: &[[f64; 3]],
        masses: &[f64],
        leaf_size: usize,
        max_depth: usize,
    ) -> Self {
        // `order[k]`: the input index of the k-th body in tree order.
        let mut order: Vec<usize> = (0..positions.len()).collect();
        let mut nodes = Vec::new();
        let mut levels = Vec::new();
        if !positions.is_empty() {
            nodes.push(Node {
                begin: 0,
                end: positions.len(),
                level: 0,
                parent: NO_PARENT,
                child_begin: 0,
                child_count: 0,
                leaf_begin: 0,
                leaf_end: 0,
                center: [0.0; 3],
                radius: 0.0,
            });
            let mut level_range = 0..1;
            loop {
                levels.push(level_range.clone());
                let level_end = nodes.len();
                let candidates: Vec<usize> = level_range
                    .clone()
                    .filter(|&i| nodes[i].bodies() > leaf_size && nodes[i].level < max_depth)
                    .collect();
                // The candidates' body ranges are disjoint and increasing: split them in
                // parallel, each on its own part of `order`.
                let mut cells = Vec::with_capacity(candidates.len());
                let mut rest: &mut [usize] = &mut order;
                let mut offset = 0;
                for &index in &candidates {
                    let (begin, end) = (nodes[index].begin, nodes[index].end);
                    let (_, tail) = std::mem::take(&mut rest).split_at_mut(begin - offset);
                    let (cell, tail) = tail.split_at_mut(end - begin);
                    cells.push(cell);
                    rest = tail;
                    offset = end;
                }
                let splits: Vec<Option<[usize; 8]>> = cells
                    .into_par_iter()
                    .map(|cell| split_cell(cell, positions))
                    .collect();
                for (&index, counts) in candidates.iter().zip(splits) {
                    let Some(counts) = counts else {
                        continue;
                    };
                    let child_begin = nodes.len() as u32;
                    let mut start = nodes[index].begin;
                    for count in counts.into_iter().filter(|&c| c > 0) {
                        nodes.push(Node {
                            begin: start,
                            end: start + count,
                            level: nodes[index].level + 1,
                            parent: index as u32,
                            ..nodes[index].clone()
                        });
                        start += count;
                    }
                    nodes[index].child_begin = child_begin;
                    nodes[index].child_count = nodes.len() as u32 - child_begin;
                }
                if nodes.len() == level_end {
                    break;
                }
                level_range = level_end..nodes.len();
            }
        }
        let input_index = order;
        let sorted_positions: Vec<[f64; 3]> = input_index.iter().map(|&i| positions[i]).collect();
        let sorted_masses: Vec<f64> = input_index.iter().map(|&i| masses[i]).collect();
        if let Some(crowded) = nodes
            .iter()
            .filter(|n| n.child_count == 0 && n.level >= max_depth)
            .map(Node::bodies)
            .max()
            .filter(|&bodies| bodies > CROWDED_LEAF_FACTOR.saturating_mul(leaf_size))
        {
            log::warn!(
                "fmm: a leaf at the depth cap ({max_depth}) holds {crowded} bodies \
                 (leaf_size {leaf_size}); they interact directly, in time quadratic in their number"
            );
        }
        for node in nodes.iter_mut().filter(|n| n.is_leaf()) {
            node.child_begin = 0;
        }

        // Leaves along the Morton curve (depth first, children in octant order).
        let mut leaves = Vec::new();
        let mut stack = if nodes.is_empty() {
            vec![]
        } else {
            vec![0usize]
        };
        while let Some(index) = stack.pop() {
            if nodes[index].is_leaf() {
                leaves.push(index as u32);
            } else {
                stack.extend(nodes[index].children().rev());
            }
        }
        for (leaf, &index) in leaves.iter().enumerate() {
            nodes[index as usize].leaf_begin = leaf;
            nodes[index as usize].leaf_end = leaf + 1;
        }
        for range in levels.iter().rev() {
            for index in range.clone() {
                if !nodes[index].is_leaf() {
                    let children = nodes[index].children();
                    nodes[index].leaf_begin = nodes[children.start].leaf_begin;
                    nodes[index].leaf_end = nodes[children.end - 1].leaf_end;
                }
            }
        }

        // Geometry from the bodies themselves.
        nodes.par_iter_mut().for_each(|node| {
            let bodies = &sorted_positions[node.begin..node.end];
            let mut low = [f64::INFINITY; 3];
            let mut high = [f64::NEG_INFINITY; 3];
            for p in bodies {
                for axis in 0..3 {
                    low[axis] = low[axis].min(p[axis]);
                    high[axis] = high[axis].max(p[axis]);
                }
            }
            let center = [0, 1, 2].map(|a| 0.5 * (low[a] + high[a]));
            let radius2 = bodies
                .iter()
                .map(|p| distance2(p, &center))
                .fold(0.0, f64::max);
            node.center = center;
            node.radius = radius2.sqrt();
        });

        Self {
            nodes,
            levels,
            leaves,
            input_index,
            positions: sorted_positions,
            masses: sorted_masses,
        }
    }

    /// Depth of the deepest level (0 for a single leaf, and for no bodies).
    pub(crate) fn depth(&self) -> usize {
        self.levels.len().saturating_sub(1)
    }
}

/// Squared distance between two points.
pub(crate) fn distance2(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    let d = [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
    d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
}

#[cfg(test)]
mod tests;
