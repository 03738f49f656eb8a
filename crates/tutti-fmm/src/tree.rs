//! The adaptive octree over Morton-sorted bodies.
//!
//! Bodies are sorted by their Morton key (21 bits per axis in the bounding cube). A node is
//! split into its non-empty octants while it holds more than `leaf_size` bodies and is above
//! `max_depth`. Nodes are stored breadth first, so every level is a contiguous index range,
//! the children of a node are contiguous, and within a level nodes follow the Morton curve.
//! Leaves are also numbered along the Morton curve, and every node covers a contiguous range
//! of leaves and of sorted bodies.

use rayon::prelude::*;

use crate::options::MAX_DEPTH;

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

/// Spreads the low 21 bits of `v` to every third bit.
fn spread(v: u64) -> u64 {
    let mut x = v & 0x1f_ffff;
    x = (x | (x << 32)) & 0x1f00000000ffff;
    x = (x | (x << 16)) & 0x1f0000ff0000ff;
    x = (x | (x << 8)) & 0x100f00f00f00f00f;
    x = (x | (x << 4)) & 0x10c30c30c30c30c3;
    x = (x | (x << 2)) & 0x1249249249249249;
    x
}

/// Morton keys of the positions in their bounding cube (x in the highest bit of each triple).
fn morton_keys(positions: &[[f64; 3]]) -> Vec<u64> {
    let mut low = [f64::INFINITY; 3];
    let mut high = [f64::NEG_INFINITY; 3];
    for p in positions {
        for axis in 0..3 {
            low[axis] = low[axis].min(p[axis]);
            high[axis] = high[axis].max(p[axis]);
        }
    }
    let extent = (0..3).map(|a| high[a] - low[a]).fold(0.0, f64::max);
    let cells = (1u64 << MAX_DEPTH) as f64;
    let scale = if extent > 0.0 { cells / extent } else { 0.0 };
    let max_cell = (1u64 << MAX_DEPTH) - 1;
    positions
        .par_iter()
        .map(|p| {
            let cell = |axis: usize| {
                let c = ((p[axis] - low[axis]) * scale).floor();
                // Saturating float-to-int conversion; the top face maps to the last cell.
                (c as u64).min(max_cell)
            };
            (spread(cell(0)) << 2) | (spread(cell(1)) << 1) | spread(cell(2))
        })
        .collect()
}

/// The octant of `key` below a node at `level`.
fn octant(key: u64, level: usize) -> u64 {
    (key >> (3 * (MAX_DEPTH - level - 1))) & 7
}

impl Octree {
    /// Builds the tree. Positions and masses have equal lengths (checked by the caller); the
    /// tree of no bodies has no nodes.
    pub(crate) fn build(
        positions: &[[f64; 3]],
        masses: &[f64],
        leaf_size: usize,
        max_depth: usize,
    ) -> Self {
        let keys = morton_keys(positions);
        let mut sorted: Vec<(u64, usize)> = keys.into_iter().zip(0..).collect();
        sorted.par_sort_unstable();
        let input_index: Vec<usize> = sorted.iter().map(|&(_, i)| i).collect();
        let keys: Vec<u64> = sorted.iter().map(|&(k, _)| k).collect();
        let sorted_positions: Vec<[f64; 3]> = input_index.iter().map(|&i| positions[i]).collect();
        let sorted_masses: Vec<f64> = input_index.iter().map(|&i| masses[i]).collect();

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
                for index in level_range.clone() {
                    let (begin, end, level) =
                        (nodes[index].begin, nodes[index].end, nodes[index].level);
                    if end - begin <= leaf_size || level >= max_depth {
                        continue;
                    }
                    let child_begin = nodes.len() as u32;
                    let mut start = begin;
                    for oct in 0..8u64 {
                        let stop =
                            begin + keys[begin..end].partition_point(|&k| octant(k, level) <= oct);
                        if stop > start {
                            nodes.push(Node {
                                begin: start,
                                end: stop,
                                level: level + 1,
                                parent: index as u32,
                                ..nodes[index].clone()
                            });
                        }
                        start = stop;
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
