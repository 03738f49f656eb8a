//! Nested dissection orderings, each giving a [`SeparatorTree`]: [`nested_dissection`] for
//! any graph (George and Liu's automatic nested dissection by level structures),
//! [`metis_dissection`] (the same dissection with METIS's vertex separators) and
//! [`grid_dissection`] for a [`Grid`] (geometric: a plane through the middle of the longest
//! axis).
//!
//! All are deterministic (METIS with a fixed seed; elsewhere every tie broken by the smaller
//! index), so one input always gives one tree, whatever the number of devices that later
//! factor it. All keep the
//! `block` unknowns of a point (the species coupled at one grid point) together in one node,
//! in their original order; within a node the unknowns are in increasing old index, and the
//! children of a node (and the roots of a forest) come in increasing order of their smallest
//! unknown.

mod metis;

use std::cmp::Reverse;

use crate::{Graph, SeparatorTree, SparseError};
use metis::MetisSeparators;

/// Options of [`nested_dissection`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderingOptions {
    /// A connected part of at most this many unknowns is not split further: it becomes a
    /// leaf of the tree, one dense front. A single point is a leaf whatever its size.
    /// Default 64.
    pub leaf_size: usize,
    /// The unknowns come in blocks of `block` consecutive indices (`block` coupled species
    /// per grid point: unknown = point * block + species); a block is always kept whole in
    /// one node, in its original order. Default 1.
    pub block: usize,
}

impl Default for OrderingOptions {
    fn default() -> Self {
        Self {
            leaf_size: 64,
            block: 1,
        }
    }
}

/// Nested dissection of `graph` (the graph of `A + A^T`) by level structures, after George
/// and Liu: each connected component is its own subtree (several give a forest); a part of
/// more than `options.leaf_size` unknowns is split by a separator taken from the middle level
/// of a breadth-first level structure rooted at a pseudo-peripheral vertex, and the connected
/// components left after removing the separator are the separator's children. With
/// `options.block > 1` the graph of points (blocks of unknowns, adjacent when any of their
/// unknowns are) is dissected and each point expanded to its unknowns.
///
/// The separator is the part of the level whose cumulative count first reaches half the part
/// that touches the next level; when that is the last level (a star-like part, where one
/// level holds most vertices) the level before it is used instead. A clique (a part whose
/// level structure has only two levels) keeps its root vertex as a child and all the other
/// vertices as the separator. Cost: a few breadth-first searches per level of the tree,
/// about O(E log V) on meshes.
///
/// Errors: `options.block` zero or not dividing the number of vertices.
pub fn nested_dissection(
    graph: &Graph,
    options: &OrderingOptions,
) -> Result<SeparatorTree, SparseError> {
    let block = check_block(graph, options.block)?;
    let points = PointGraph::new(graph, block);
    let nodes = Dissection::new(&points, block, options.leaf_size).run();
    assemble(&nodes, block)
}

/// Nested dissection of `graph` as [`nested_dissection`] does it, with every separator
/// found by METIS (`METIS_ComputeVertexSeparator`, multilevel with Fiduccia–Mattheyses
/// refinement) instead of a level structure: far smaller separators on irregular graphs and
/// 2-D meshes, hence less fill. The tree is built the same way (components are subtrees,
/// parts of at most `options.leaf_size` unknowns are leaves, points of `options.block`
/// unknowns kept whole), and it is deterministic (a fixed seed). A part METIS cannot split
/// falls back to the level structure's separator.
///
/// Errors: those of [`nested_dissection`].
pub fn metis_dissection(
    graph: &Graph,
    options: &OrderingOptions,
) -> Result<SeparatorTree, SparseError> {
    let block = check_block(graph, options.block)?;
    let points = PointGraph::new(graph, block);
    let mut dissection = Dissection::new(&points, block, options.leaf_size);
    dissection.metis = Some(MetisSeparators::new(points.points()));
    let nodes = dissection.run();
    assemble(&nodes, block)
}

/// `block`, checked: at least 1 and dividing the graph's vertices.
fn check_block(graph: &Graph, block: usize) -> Result<usize, SparseError> {
    if block == 0 {
        return Err(SparseError::argument(
            "the block size is 0: a point holds at least one unknown",
        ));
    }
    if !graph.vertices().is_multiple_of(block) {
        return Err(SparseError::argument(format!(
            "{} unknowns are not a whole number of blocks of {block}",
            graph.vertices()
        )));
    }
    Ok(block)
}

/// A 1-D, 2-D or 3-D grid of points with nearest-neighbour coupling (the 3-, 5- or 7-point
/// stencil), `block` coupled unknowns per point.
///
/// Point `(x, y, z)` has index `x + nx * (y + ny * z)`, x fastest (a missing axis has length
/// one), and its species `s` is unknown `point * block + s`. The unknowns of one point are all
/// coupled to each other and to every unknown of the neighbouring points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grid {
    /// The number of points along each axis (1 to 3 axes, none of length 0).
    pub dims: Vec<usize>,
    /// Whether each axis wraps around (its last point is a neighbour of its first); one
    /// entry per axis. A periodic axis of length 1 or 2 adds no coupling.
    pub periodic: Vec<bool>,
    /// The number of unknowns per point (at least 1).
    pub block: usize,
}

impl Grid {
    /// The stencil graph of all the grid's unknowns.
    ///
    /// Errors: an invalid grid (no axis or more than 3, an axis of length 0, `periodic` not
    /// one entry per axis, `block` 0); sizes that overflow ([`SparseError::TooLarge`]).
    pub fn graph(&self) -> Result<Graph, SparseError> {
        let shape = self.shape()?;
        let block = shape.block;
        // Each unknown lists its neighbours of higher index only: `from_lists` symmetrizes.
        let stencil = 2 * self.dims.len() + 1;
        shape
            .unknowns
            .checked_mul(stencil)
            .and_then(|entries| entries.checked_mul(block))
            .ok_or_else(|| SparseError::TooLarge {
                what: "the grid's graph",
                detail: format!(
                    "{} unknowns with {stencil}-point coupling of blocks of {block}",
                    shape.unknowns
                ),
            })?;
        let mut lists = Vec::with_capacity(shape.unknowns);
        let mut near = Vec::with_capacity(stencil);
        for p in 0..shape.points {
            shape.neighbour_points(p, &mut near);
            for species in 0..block {
                let own = p * block + species + 1..(p + 1) * block;
                let beyond = near
                    .iter()
                    .filter(|&&q| q > p)
                    .flat_map(|&q| q * block..(q + 1) * block);
                lists.push(own.chain(beyond).collect());
            }
        }
        Graph::from_lists(&lists)
    }

    /// The grid's sizes, checked.
    fn shape(&self) -> Result<GridShape, SparseError> {
        if self.dims.is_empty() || self.dims.len() > 3 {
            return Err(SparseError::argument(format!(
                "a grid has 1, 2 or 3 axes, not {}",
                self.dims.len()
            )));
        }
        if self.periodic.len() != self.dims.len() {
            return Err(SparseError::argument(format!(
                "the grid has {} axes but {} periodicity flags",
                self.dims.len(),
                self.periodic.len()
            )));
        }
        if let Some(axis) = self.dims.iter().position(|&n| n == 0) {
            return Err(SparseError::argument(format!(
                "axis {axis} of the grid has length 0"
            )));
        }
        if self.block == 0 {
            return Err(SparseError::argument(
                "the block size is 0: a point holds at least one unknown",
            ));
        }
        let too_large = || SparseError::TooLarge {
            what: "the grid",
            detail: format!("{:?} points of {} unknowns", self.dims, self.block),
        };
        let points = self
            .dims
            .iter()
            .try_fold(1usize, |count, &n| count.checked_mul(n))
            .ok_or_else(too_large)?;
        let unknowns = points.checked_mul(self.block).ok_or_else(too_large)?;
        let mut dims = [1; 3];
        let mut periodic = [false; 3];
        dims[..self.dims.len()].copy_from_slice(&self.dims);
        periodic[..self.periodic.len()].copy_from_slice(&self.periodic);
        Ok(GridShape {
            dims,
            periodic,
            block: self.block,
            points,
            unknowns,
        })
    }
}

/// Geometric nested dissection of `grid`: a box of points of more than `leaf_size` unknowns
/// (and more than one point) is cut by the plane of points through the middle of its longest
/// axis (ties: the lowest axis), and the two halves are the plane's children. A periodic axis
/// of length 3 or more is a ring that one plane does not cut: its first cut takes the planes
/// at index 0 and at the middle together as the separator; the halves are then ordinary boxes.
///
/// Errors: those of [`Grid::graph`]'s validation.
pub fn grid_dissection(grid: &Grid, leaf_size: usize) -> Result<SeparatorTree, SparseError> {
    let shape = grid.shape()?;
    let mut nodes: Vec<PendingNode> = Vec::new();
    let mut boxes = vec![(
        PointBox {
            lo: [0; 3],
            hi: shape.dims,
        },
        None,
    )];
    while let Some((region, parent)) = boxes.pop() {
        let node = nodes.len();
        let key = shape.index(region.lo);
        let points = region.points();
        if points == 1 || points * shape.block <= leaf_size {
            let mut members = Vec::with_capacity(points);
            shape.points_in(&region, &mut members);
            nodes.push(PendingNode {
                parent,
                key,
                points: members,
            });
            continue;
        }
        let axis = (0..3)
            .max_by_key(|&a| (region.len(a), Reverse(a)))
            .unwrap_or(0);
        let (lo, hi) = (region.lo[axis], region.hi[axis]);
        let middle = lo + (hi - lo) / 2;
        let ring = shape.periodic[axis] && lo == 0 && hi == shape.dims[axis] && hi > 2;
        let (planes, halves) = if ring {
            (vec![0, middle], [(1, middle), (middle + 1, hi)])
        } else {
            (vec![middle], [(lo, middle), (middle + 1, hi)])
        };
        let mut separator = Vec::new();
        for &plane in &planes {
            shape.points_in(&region.slab(axis, plane, plane + 1), &mut separator);
        }
        separator.sort_unstable();
        nodes.push(PendingNode {
            parent,
            key,
            points: separator,
        });
        for (first, end) in halves {
            if first < end {
                boxes.push((region.slab(axis, first, end), Some(node)));
            }
        }
    }
    assemble(&nodes, shape.block)
}

/// A checked [`Grid`], its axes padded to three.
#[derive(Clone, Debug)]
struct GridShape {
    dims: [usize; 3],
    periodic: [bool; 3],
    block: usize,
    points: usize,
    unknowns: usize,
}

impl GridShape {
    /// The index of the point at `coords`.
    fn index(&self, coords: [usize; 3]) -> usize {
        coords[0] + self.dims[0] * (coords[1] + self.dims[1] * coords[2])
    }

    /// The coordinates of point `p`.
    fn coords(&self, p: usize) -> [usize; 3] {
        let [nx, ny, _] = self.dims;
        [p % nx, (p / nx) % ny, p / (nx * ny)]
    }

    /// Replaces `near` with the distinct stencil neighbours of point `p` (not `p` itself),
    /// increasing.
    fn neighbour_points(&self, p: usize, near: &mut Vec<usize>) {
        near.clear();
        let coords = self.coords(p);
        for axis in 0..3 {
            let n = self.dims[axis];
            // A ring of 1 or 2 points has no neighbour that the plain axis lacks.
            let wraps = self.periodic[axis] && n > 2;
            let c = coords[axis];
            let mut at = |coord: usize| {
                let mut moved = coords;
                moved[axis] = coord;
                near.push(self.index(moved));
            };
            if c + 1 < n {
                at(c + 1);
            } else if wraps {
                at(0);
            }
            if c > 0 {
                at(c - 1);
            } else if wraps {
                at(n - 1);
            }
        }
        near.sort_unstable();
        near.dedup();
    }

    /// Appends the points of `region`, increasing.
    fn points_in(&self, region: &PointBox, out: &mut Vec<usize>) {
        for z in region.lo[2]..region.hi[2] {
            for y in region.lo[1]..region.hi[1] {
                let row = self.index([0, y, z]);
                out.extend(row + region.lo[0]..row + region.hi[0]);
            }
        }
    }
}

/// A box of grid points: `lo[a]..hi[a]` along each axis `a`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PointBox {
    lo: [usize; 3],
    hi: [usize; 3],
}

impl PointBox {
    /// Its extent along `axis`.
    fn len(&self, axis: usize) -> usize {
        self.hi[axis] - self.lo[axis]
    }

    /// Its number of points.
    fn points(&self) -> usize {
        (0..3).map(|a| self.len(a)).product()
    }

    /// The part of it with `first..end` along `axis`.
    fn slab(&self, axis: usize, first: usize, end: usize) -> Self {
        let mut slab = *self;
        slab.lo[axis] = first;
        slab.hi[axis] = end;
        slab
    }
}

/// A node of a tree being built, before its numbering in postorder.
#[derive(Clone, Debug)]
struct PendingNode {
    /// Its parent (an index into the pending nodes).
    parent: Option<usize>,
    /// The smallest point of its subtree: siblings are ordered by it.
    key: usize,
    /// Its points, increasing.
    points: Vec<usize>,
}

/// Numbers `nodes` in postorder (children by increasing key before their parent, roots by
/// increasing key) and expands each point to its `block` unknowns.
fn assemble(nodes: &[PendingNode], block: usize) -> Result<SeparatorTree, SparseError> {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut roots = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        match node.parent {
            Some(parent) => children[parent].push(i),
            None => roots.push(i),
        }
    }
    for list in children.iter_mut().chain(std::iter::once(&mut roots)) {
        list.sort_unstable_by_key(|&c| nodes[c].key);
    }
    let unknowns = nodes.iter().map(|node| node.points.len()).sum::<usize>() * block;
    let mut order = Vec::with_capacity(unknowns);
    let mut ranges = Vec::with_capacity(nodes.len());
    let mut postorder = Vec::with_capacity(nodes.len());
    let mut number = vec![0; nodes.len()];
    // (node, how many of its children are done); the first root on top.
    let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&r| (r, 0)).collect();
    while let Some(top) = stack.last_mut() {
        let (node, done) = *top;
        if let Some(&child) = children[node].get(done) {
            top.1 += 1;
            stack.push((child, 0));
            continue;
        }
        stack.pop();
        let first = order.len();
        for &p in &nodes[node].points {
            order.extend(p * block..(p + 1) * block);
        }
        ranges.push((first, order.len()));
        number[node] = postorder.len();
        postorder.push(node);
    }
    let parents: Vec<Option<usize>> = postorder
        .iter()
        .map(|&node| nodes[node].parent.map(|parent| number[parent]))
        .collect();
    SeparatorTree::new(order, &ranges, &parents)
}

/// The adjacency of the points (blocks of unknowns) of a graph: point `p` is adjacent to
/// `q != p` when an unknown of `p` is adjacent to one of `q`. Neighbour lists increasing.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PointGraph {
    offsets: Vec<usize>,
    targets: Vec<usize>,
}

impl PointGraph {
    /// The point graph of `graph` with `block` unknowns per point (`block` divides the
    /// number of vertices).
    fn new(graph: &Graph, block: usize) -> Self {
        let points = graph.vertices() / block;
        let mut offsets = Vec::with_capacity(points + 1);
        let mut targets = Vec::with_capacity(if block == 1 { 2 * graph.edges() } else { 0 });
        offsets.push(0);
        let mut near = Vec::new();
        for p in 0..points {
            if block == 1 {
                targets.extend_from_slice(graph.neighbours(p));
            } else {
                near.clear();
                for unknown in p * block..(p + 1) * block {
                    near.extend(
                        graph
                            .neighbours(unknown)
                            .iter()
                            .map(|&w| w / block)
                            .filter(|&q| q != p),
                    );
                }
                near.sort_unstable();
                near.dedup();
                targets.extend_from_slice(&near);
            }
            offsets.push(targets.len());
        }
        Self { offsets, targets }
    }

    /// The number of points.
    fn points(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The neighbours of point `p`, increasing.
    fn neighbours(&self, p: usize) -> &[usize] {
        &self.targets[self.offsets[p]..self.offsets[p + 1]]
    }
}

/// The part label of a point already placed in a node.
const PLACED: usize = usize::MAX;

/// At most this many breadth-first searches look for a pseudo-peripheral root of one part:
/// each must lengthen the level structure, and meshes stop after two or three, but the bound
/// keeps the cost per part linear on any graph.
const MAX_ROOT_SEARCHES: usize = 32;

/// A breadth-first level structure: level `l` is `vertices[starts[l]..starts[l + 1]]`.
#[derive(Clone, Debug, Default)]
struct Levels {
    vertices: Vec<usize>,
    starts: Vec<usize>,
}

impl Levels {
    /// The number of levels (the root's eccentricity plus one).
    fn count(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// The vertices of level `l`, in the order the search reached them.
    fn level(&self, l: usize) -> &[usize] {
        &self.vertices[self.starts[l]..self.starts[l + 1]]
    }
}

/// A set of points still to dissect, all labelled `label`, whose components become children
/// of `parent`.
struct Part {
    points: Vec<usize>,
    label: usize,
    parent: Option<usize>,
}

/// A connected component of a part, labelled `label`; `key` is its smallest point.
struct Component {
    points: Vec<usize>,
    label: usize,
    key: usize,
}

/// The state of one nested dissection of a point graph.
struct Dissection<'g> {
    graph: &'g PointGraph,
    block: usize,
    leaf_size: usize,
    /// The label of the part each point is in, or [`PLACED`].
    label: Vec<usize>,
    /// The next unused label.
    next_label: usize,
    /// The last search (a number from `searches`) that reached each point.
    reached: Vec<usize>,
    /// The number of searches so far.
    searches: usize,
    /// Each point's level in the last search that reached it.
    level_of: Vec<usize>,
    /// The level structure of the last search.
    levels: Levels,
    /// Storage for the next search.
    spare: Levels,
    /// METIS's separators instead of the level structure's, when set.
    metis: Option<MetisSeparators>,
}

impl<'g> Dissection<'g> {
    fn new(graph: &'g PointGraph, block: usize, leaf_size: usize) -> Self {
        let points = graph.points();
        Self {
            graph,
            block,
            leaf_size,
            label: vec![0; points],
            next_label: 1,
            reached: vec![0; points],
            searches: 0,
            level_of: vec![0; points],
            levels: Levels::default(),
            spare: Levels::default(),
            metis: None,
        }
    }

    /// Dissects the whole graph: the tree's nodes, unnumbered.
    fn run(mut self) -> Vec<PendingNode> {
        let mut nodes = Vec::new();
        // An explicit stack: a path of a million points must not recurse a million deep.
        let mut parts = vec![Part {
            points: (0..self.graph.points()).collect(),
            label: 0,
            parent: None,
        }];
        while let Some(part) = parts.pop() {
            for component in self.components(&part.points, part.label) {
                let node = nodes.len();
                let size = component.points.len();
                if size == 1 || size * self.block <= self.leaf_size {
                    let mut points = component.points;
                    points.sort_unstable();
                    for &p in &points {
                        self.label[p] = PLACED;
                    }
                    nodes.push(PendingNode {
                        parent: part.parent,
                        key: component.key,
                        points,
                    });
                    continue;
                }
                let (separator, rest) = self.bisect(&component.points, component.label);
                nodes.push(PendingNode {
                    parent: part.parent,
                    key: component.key,
                    points: separator,
                });
                parts.push(Part {
                    points: rest,
                    label: component.label,
                    parent: Some(node),
                });
            }
        }
        nodes
    }

    /// The connected components of `points` (all labelled `label`), each relabelled with a
    /// fresh label, in increasing order of their smallest point.
    fn components(&mut self, points: &[usize], label: usize) -> Vec<Component> {
        let graph = self.graph;
        let mut found = Vec::new();
        for &start in points {
            if self.label[start] != label {
                continue; // in a component found before
            }
            let fresh = self.next_label;
            self.next_label += 1;
            self.label[start] = fresh;
            let mut members = vec![start];
            let mut key = start;
            let mut head = 0;
            while let Some(&v) = members.get(head) {
                head += 1;
                key = key.min(v);
                for &w in graph.neighbours(v) {
                    if self.label[w] == label {
                        self.label[w] = fresh;
                        members.push(w);
                    }
                }
            }
            found.push(Component {
                points: members,
                label: fresh,
                key,
            });
        }
        found.sort_unstable_by_key(|component| component.key);
        found
    }

    /// Splits the connected part `points` (labelled `label`, at least two points): its
    /// separator (increasing, now placed) and the rest.
    fn bisect(&mut self, points: &[usize], label: usize) -> (Vec<usize>, Vec<usize>) {
        if let Some(metis) = &mut self.metis {
            let labels = &self.label;
            if let Some(separator) = metis.separate(self.graph, points, |q| labels[q] == label) {
                return self.split_off(points, label, separator);
            }
        }
        self.pseudo_peripheral_levels(points, label);
        let graph = self.graph;
        let levels = &self.levels;
        let count = levels.count();
        let mut separator: Vec<usize> = if count <= 2 {
            // One level: a single point. Two levels: the root of least degree is adjacent to
            // every other point, so the part is a clique, and any separator is all but one.
            levels.level(count.saturating_sub(1)).to_vec()
        } else {
            // The level where half the part is reached; with the last level holding more
            // than half (a star), the one before it, so that the separator is not empty.
            let half = (0..count)
                .find(|&l| 2 * levels.starts[l + 1] >= points.len())
                .unwrap_or(count - 1)
                .min(count - 2);
            levels
                .level(half)
                .iter()
                .copied()
                .filter(|&v| {
                    graph
                        .neighbours(v)
                        .iter()
                        .any(|&w| self.label[w] == label && self.level_of[w] == half + 1)
                })
                .collect()
        };
        if separator.is_empty() {
            // Not reached (the level before the last touches the last), but a part that
            // could not be split must not be queued again unchanged.
            separator = points.to_vec();
        }
        separator.sort_unstable();
        self.split_off(points, label, separator)
    }

    /// Places `separator` (increasing, non-empty, inside the part `points` labelled
    /// `label`): the separator and the rest of the part.
    fn split_off(
        &mut self,
        points: &[usize],
        label: usize,
        separator: Vec<usize>,
    ) -> (Vec<usize>, Vec<usize>) {
        for &v in &separator {
            self.label[v] = PLACED;
        }
        let rest = points
            .iter()
            .copied()
            .filter(|&v| self.label[v] == label)
            .collect();
        (separator, rest)
    }

    /// Leaves in `self.levels` the level structure of the connected part `points` (labelled
    /// `label`) rooted at a pseudo-peripheral point: starting from the point of least degree,
    /// the search is repeated from the point of least degree of the last level until the
    /// number of levels stops growing.
    fn pseudo_peripheral_levels(&mut self, points: &[usize], label: usize) {
        let Some(root) = self.least_degree(points, label) else {
            self.levels = Levels::default();
            return;
        };
        self.search_levels(root, label);
        for _ in 1..MAX_ROOT_SEARCHES {
            let count = self.levels.count();
            // One level per point: a path searched from one end, as long as it gets.
            if count <= 1 || count == points.len() {
                break;
            }
            let Some(candidate) = self.least_degree(self.levels.level(count - 1), label) else {
                break;
            };
            self.search_levels(candidate, label);
            if self.levels.count() <= count {
                break;
            }
        }
    }

    /// The point of `candidates` with the fewest neighbours labelled `label` (ties: the
    /// smallest point).
    fn least_degree(&self, candidates: &[usize], label: usize) -> Option<usize> {
        candidates.iter().copied().min_by_key(|&v| {
            let degree = self
                .graph
                .neighbours(v)
                .iter()
                .filter(|&&w| self.label[w] == label)
                .count();
            (degree, v)
        })
    }

    /// A breadth-first search from `root` through the points labelled `label`, leaving its
    /// level structure in `self.levels` and each reached point's level in `self.level_of`.
    fn search_levels(&mut self, root: usize, label: usize) {
        let graph = self.graph;
        self.searches += 1;
        let mark = self.searches;
        let levels = &mut self.spare;
        levels.vertices.clear();
        levels.starts.clear();
        levels.starts.push(0);
        levels.vertices.push(root);
        self.reached[root] = mark;
        self.level_of[root] = 0;
        let mut begin = 0;
        let mut depth = 0;
        loop {
            let end = levels.vertices.len();
            levels.starts.push(end);
            for i in begin..end {
                let v = levels.vertices[i];
                for &w in graph.neighbours(v) {
                    if self.label[w] == label && self.reached[w] != mark {
                        self.reached[w] = mark;
                        self.level_of[w] = depth + 1;
                        levels.vertices.push(w);
                    }
                }
            }
            if levels.vertices.len() == end {
                break;
            }
            begin = end;
            depth += 1;
        }
        std::mem::swap(&mut self.levels, &mut self.spare);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(lists: &[Vec<usize>]) -> Graph {
        Graph::from_lists(lists).expect("valid lists")
    }

    fn path(n: usize) -> Graph {
        graph(
            &(0..n)
                .map(|v| (v + 1..n).take(1).collect())
                .collect::<Vec<_>>(),
        )
    }

    fn star(leaves: usize) -> Graph {
        let mut lists = vec![Vec::new(); leaves + 1];
        lists[0] = (1..=leaves).collect();
        graph(&lists)
    }

    fn complete(n: usize) -> Graph {
        graph(&(0..n).map(|v| (v + 1..n).collect()).collect::<Vec<_>>())
    }

    fn grid_2d(k: usize) -> Graph {
        Grid {
            dims: vec![k, k],
            periodic: vec![false, false],
            block: 1,
        }
        .graph()
        .expect("valid grid")
    }

    /// A dissection of the whole of `g` (a single component).
    fn dissection(points: &PointGraph, leaf_size: usize) -> Dissection<'_> {
        let mut dissection = Dissection::new(points, 1, leaf_size);
        let all: Vec<usize> = (0..points.points()).collect();
        let components = dissection.components(&all, 0);
        assert_eq!(components.len(), 1, "the test graph is connected");
        dissection
    }

    fn label_of_all(dissection: &Dissection<'_>) -> usize {
        dissection.label[0]
    }

    #[test]
    fn point_graph_merges_blocks() {
        // Unknowns 0..6 in blocks of 2: points 0, 1, 2. Edges 1-2 (points 0-1), 0-1 (inside
        // point 0), 5-4 (inside point 2): points 0 and 1 adjacent, point 2 alone.
        let g = graph(&[vec![1], vec![2], vec![], vec![], vec![5], vec![]]);
        let points = PointGraph::new(&g, 2);
        assert_eq!(points.points(), 3);
        assert_eq!(points.neighbours(0), &[1]);
        assert_eq!(points.neighbours(1), &[0]);
        assert!(points.neighbours(2).is_empty());
        let plain = PointGraph::new(&g, 1);
        assert_eq!(plain.points(), 6);
        assert_eq!(plain.neighbours(1), &[0, 2]);
    }

    #[test]
    fn components_come_by_smallest_point_with_fresh_labels() {
        // Components {0, 3}, {1}, {2, 4}.
        let g = graph(&[vec![3], vec![], vec![4], vec![], vec![]]);
        let points = PointGraph::new(&g, 1);
        let mut dissection = Dissection::new(&points, 1, 1);
        let components = dissection.components(&[4, 3, 2, 1, 0], 0);
        let keys: Vec<usize> = components.iter().map(|c| c.key).collect();
        assert_eq!(keys, [0, 1, 2]);
        let mut sets: Vec<Vec<usize>> = components.iter().map(|c| c.points.clone()).collect();
        sets.iter_mut().for_each(|s| s.sort_unstable());
        assert_eq!(sets, [vec![0, 3], vec![1], vec![2, 4]]);
        let labels: Vec<usize> = components.iter().map(|c| c.label).collect();
        assert!(labels.iter().all(|&l| l != 0 && l != PLACED));
        assert_eq!(dissection.label[0], dissection.label[3]);
        assert_ne!(dissection.label[0], dissection.label[2]);
    }

    #[test]
    fn a_path_is_searched_from_an_end() {
        let g = path(9);
        let points = PointGraph::new(&g, 1);
        let mut dissection = dissection(&points, 1);
        let label = label_of_all(&dissection);
        let all: Vec<usize> = (0..9).collect();
        dissection.pseudo_peripheral_levels(&all, label);
        assert_eq!(dissection.levels.count(), 9);
        assert_eq!(dissection.levels.level(0), &[0]);
        let (separator, rest) = dissection.bisect(&all, label);
        assert_eq!(separator, [4]);
        assert_eq!(rest, [0, 1, 2, 3, 5, 6, 7, 8]);
        assert_eq!(dissection.label[4], PLACED);
    }

    #[test]
    fn a_grid_is_searched_from_a_corner_and_cut_on_a_diagonal() {
        let k = 7;
        let g = grid_2d(k);
        let points = PointGraph::new(&g, 1);
        let mut dissection = dissection(&points, 1);
        let label = label_of_all(&dissection);
        let all: Vec<usize> = (0..k * k).collect();
        dissection.pseudo_peripheral_levels(&all, label);
        // Corner to opposite corner: 2k - 1 anti-diagonals.
        assert_eq!(dissection.levels.count(), 2 * k - 1);
        let root = dissection.levels.level(0)[0];
        assert!([0, k - 1, k * (k - 1), k * k - 1].contains(&root));
        let (separator, rest) = dissection.bisect(&all, label);
        assert_eq!(separator.len(), k);
        assert_eq!(rest.len(), k * k - k);
        // The middle anti-diagonal (from whichever corner): x + y or x - y constant.
        let sums: Vec<usize> = separator.iter().map(|&p| p % k + p / k).collect();
        let diffs: Vec<usize> = separator.iter().map(|&p| p % k + k - p / k).collect();
        assert!(
            sums.iter().all(|&s| s == sums[0]) || diffs.iter().all(|&d| d == diffs[0]),
            "{separator:?}"
        );
    }

    #[test]
    fn a_star_is_cut_at_its_centre() {
        let g = star(20);
        let points = PointGraph::new(&g, 1);
        let mut dissection = dissection(&points, 1);
        let label = label_of_all(&dissection);
        let all: Vec<usize> = (0..21).collect();
        let (separator, rest) = dissection.bisect(&all, label);
        assert_eq!(separator, [0]);
        assert_eq!(rest.len(), 20);
    }

    #[test]
    fn a_clique_keeps_one_point_below_the_rest() {
        let g = complete(6);
        let points = PointGraph::new(&g, 1);
        let mut dissection = dissection(&points, 1);
        let label = label_of_all(&dissection);
        let all: Vec<usize> = (0..6).collect();
        let (separator, rest) = dissection.bisect(&all, label);
        assert_eq!(separator.len(), 5);
        assert_eq!(rest.len(), 1);
        assert!(separator.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn grid_neighbours_wrap_only_on_rings_of_three_or_more() {
        let shape = |dims: Vec<usize>, periodic: Vec<bool>| {
            Grid {
                dims,
                periodic,
                block: 1,
            }
            .shape()
            .expect("valid grid")
        };
        let mut near = Vec::new();
        let ring = shape(vec![5], vec![true]);
        ring.neighbour_points(0, &mut near);
        assert_eq!(near, [1, 4]);
        ring.neighbour_points(4, &mut near);
        assert_eq!(near, [0, 3]);
        let pair = shape(vec![2], vec![true]);
        pair.neighbour_points(0, &mut near);
        assert_eq!(near, [1]);
        let single = shape(vec![1, 3], vec![true, false]);
        single.neighbour_points(1, &mut near);
        assert_eq!(near, [0, 2]);
        let torus = shape(vec![3, 4, 5], vec![true, false, true]);
        // Point (0, 0, 0): x wraps to 2, y has only 1, z wraps to 4.
        torus.neighbour_points(0, &mut near);
        assert_eq!(near, [1, 2, 3, 12, 48]);
        assert_eq!(torus.coords(torus.index([2, 3, 4])), [2, 3, 4]);
    }

    #[test]
    fn boxes_list_their_points_in_increasing_order() {
        let shape = Grid {
            dims: vec![4, 3, 2],
            periodic: vec![false; 3],
            block: 1,
        }
        .shape()
        .expect("valid grid");
        let region = PointBox {
            lo: [1, 1, 0],
            hi: [3, 3, 2],
        };
        assert_eq!(region.points(), 8);
        let mut out = Vec::new();
        shape.points_in(&region, &mut out);
        assert_eq!(out, [5, 6, 9, 10, 17, 18, 21, 22]);
        let slab = region.slab(0, 2, 3);
        assert_eq!(slab.points(), 4);
    }

    #[test]
    fn assemble_numbers_children_by_key_before_their_parent() {
        // Root 0 with children 1 (key 5) and 2 (key 1), and a second root 3 (key 0).
        let nodes = [
            PendingNode {
                parent: None,
                key: 1,
                points: vec![3],
            },
            PendingNode {
                parent: Some(0),
                key: 5,
                points: vec![5],
            },
            PendingNode {
                parent: Some(0),
                key: 1,
                points: vec![1, 4],
            },
            PendingNode {
                parent: None,
                key: 0,
                points: vec![0, 2],
            },
        ];
        let tree = assemble(&nodes, 2).expect("a valid tree");
        let sizes: Vec<usize> = tree.nodes().iter().map(|n| n.size()).collect();
        assert_eq!(sizes, [4, 4, 2, 2]);
        assert_eq!(
            tree.order(),
            &[0, 1, 4, 5, 2, 3, 8, 9, 10, 11, 6, 7],
            "root {{0, 2}}, then child {{1, 4}}, child {{5}}, parent {{3}}"
        );
        assert_eq!(tree.roots(), [0, 3]);
        assert_eq!(tree.nodes()[3].children, [1, 2]);
    }
}
