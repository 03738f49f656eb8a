//! The nested dissection orderings, through the public API: every tree is an assembly tree
//! of its graph, leaves are small, blocks stay whole, and the separators of grids have the
//! sizes of a good dissection.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tutti_sparse::ordering::{
    grid_dissection, metis_dissection, nested_dissection, Grid, OrderingOptions,
};
use tutti_sparse::{Graph, SeparatorTree, SparseError};

fn graph(lists: &[Vec<usize>]) -> Graph {
    Graph::from_lists(lists).expect("valid neighbour lists")
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

fn grid(dims: &[usize], periodic: &[bool], block: usize) -> Grid {
    Grid {
        dims: dims.to_vec(),
        periodic: periodic.to_vec(),
        block,
    }
}

fn options(leaf_size: usize, block: usize) -> OrderingOptions {
    OrderingOptions { leaf_size, block }
}

/// The number of nodes on the longest root-to-leaf path.
fn depth(tree: &SeparatorTree) -> usize {
    let nodes = tree.nodes();
    let mut depth = vec![0; nodes.len()];
    // Parents come after their children: walk down from the roots.
    for i in (0..nodes.len()).rev() {
        depth[i] = nodes[i].parent.map_or(1, |p| depth[p] + 1);
    }
    depth.into_iter().max().unwrap_or(0)
}

/// The root's size when there is one root.
fn top_separator(tree: &SeparatorTree) -> usize {
    let roots = tree.roots();
    assert_eq!(roots.len(), 1, "a connected graph has one root");
    tree.nodes()[roots[0]].size()
}

/// Everything a dissection promises for `graph` with `leaf_size` and `block`: an assembly
/// tree; leaves of at most `leaf_size` unknowns (or one block); whole blocks in their order;
/// unknowns of a node in increasing old index; children after their smallest unknown.
fn assert_dissects(tree: &SeparatorTree, graph: &Graph, leaf_size: usize, block: usize) {
    tree.check(graph).expect("every edge on one root path");
    assert_eq!(tree.unknowns(), graph.vertices());
    let order = tree.order();
    let nodes = tree.nodes();
    for (i, node) in nodes.iter().enumerate() {
        assert!(node.size() > 0, "node {i} is empty");
        assert_eq!(node.first % block, 0, "node {i} starts inside a block");
        assert_eq!(node.size() % block, 0, "node {i} holds a partial block");
        let held = &order[node.first..node.end];
        for chunk in held.chunks(block) {
            assert_eq!(chunk[0] % block, 0, "node {i}: block split");
            for (s, &old) in chunk.iter().enumerate() {
                assert_eq!(old, chunk[0] + s, "node {i}: block out of order");
            }
        }
        assert!(
            held.windows(2).all(|w| w[0] < w[1]),
            "node {i}'s unknowns are not increasing"
        );
        if node.children.is_empty() {
            assert!(
                node.size() <= leaf_size || node.size() == block,
                "leaf {i} holds {} unknowns, more than {leaf_size}",
                node.size()
            );
        }
        // Siblings by their smallest unknown (old numbering).
        let smallest = |c: usize| {
            order[nodes[c].subtree_first..nodes[c].end]
                .iter()
                .copied()
                .min()
        };
        let keys: Vec<_> = node.children.iter().map(|&c| smallest(c)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "node {i}: {keys:?}");
    }
}

fn assert_nested(graph: &Graph, leaf_size: usize, block: usize) -> SeparatorTree {
    let tree = nested_dissection(graph, &options(leaf_size, block)).expect("dissects");
    assert_dissects(&tree, graph, leaf_size, block);
    let again = nested_dissection(graph, &options(leaf_size, block)).expect("dissects");
    assert_eq!(tree, again, "not deterministic");
    tree
}

fn assert_geometric(grid: &Grid, leaf_size: usize) -> SeparatorTree {
    let graph = grid.graph().expect("valid grid");
    let tree = grid_dissection(grid, leaf_size).expect("dissects");
    assert_dissects(&tree, &graph, leaf_size, grid.block);
    let again = grid_dissection(grid, leaf_size).expect("dissects");
    assert_eq!(tree, again, "not deterministic");
    tree
}

#[test]
fn default_options() {
    let defaults = OrderingOptions::default();
    assert_eq!(defaults.leaf_size, 64);
    assert_eq!(defaults.block, 1);
}

#[test]
fn paths_stars_and_cliques() {
    for leaf_size in [0, 1, 2, 5, 64] {
        for n in [1, 2, 3, 7, 100, 257] {
            assert_nested(&path(n), leaf_size, 1);
            assert_nested(&complete(n.min(40)), leaf_size, 1);
        }
        for leaves in [1, 2, 10, 300] {
            assert_nested(&star(leaves), leaf_size, 1);
        }
    }
}

#[test]
fn a_star_is_cut_at_its_centre() {
    let tree = assert_nested(&star(500), 4, 1);
    let root = tree.roots()[0];
    assert_eq!(tree.nodes()[root].size(), 1);
    assert_eq!(tree.order()[tree.nodes()[root].first], 0);
    assert_eq!(depth(&tree), 2);
}

#[test]
fn a_clique_is_one_front_over_one_point() {
    let tree = assert_nested(&complete(30), 8, 1);
    assert_eq!(tree.nodes().len(), 2);
    assert_eq!(top_separator(&tree), 29);
}

#[test]
fn a_path_halves() {
    let n = 1023;
    let tree = assert_nested(&path(n), 1, 1);
    // A perfect binary tree: middle vertices first.
    assert_eq!(depth(&tree), 10);
    assert_eq!(tree.nodes().len(), n);
    let root = tree.roots()[0];
    assert_eq!(tree.order()[tree.nodes()[root].first], 511);
}

#[test]
fn the_empty_graph() {
    let tree = assert_nested(&graph(&[]), 4, 1);
    assert!(tree.nodes().is_empty());
    let tree = nested_dissection(&graph(&[]), &options(4, 3)).expect("zero blocks");
    assert_eq!(tree.unknowns(), 0);
}

#[test]
fn components_are_separate_roots_in_order() {
    // Two paths interleaved (even and odd vertices) and an isolated vertex 20.
    let lists: Vec<Vec<usize>> = (0..21)
        .map(|v| if v < 18 { vec![v + 2] } else { Vec::new() })
        .collect();
    let g = graph(&lists);
    let tree = assert_nested(&g, 3, 1);
    let roots = tree.roots();
    assert_eq!(roots.len(), 3);
    let smallest: Vec<usize> = roots
        .iter()
        .map(|&r| {
            let node = &tree.nodes()[r];
            let held = &tree.order()[node.subtree_first..node.end];
            held.iter().copied().min().unwrap_or(usize::MAX)
        })
        .collect();
    assert_eq!(smallest, [0, 1, 20]);
}

#[test]
fn blocks_stay_whole() {
    // Points coupled through one species only: the path 0-1-2-...-39 of points, where only
    // species 1 of point p touches species 0 of point p + 1.
    let (points, block) = (40, 3);
    let mut lists = vec![Vec::new(); points * block];
    for p in 0..points - 1 {
        lists[p * block + 1].push((p + 1) * block);
    }
    let g = graph(&lists);
    let tree = assert_nested(&g, 7, block);
    // Seven unknowns hold two points of three.
    for node in tree.nodes().iter().filter(|n| n.children.is_empty()) {
        assert!(node.size() <= 6);
    }
    // A point bigger than the leaf size is a leaf on its own.
    assert_nested(&g, 2, block);
}

#[test]
fn invalid_blocks_are_refused() {
    let g = path(10);
    for block in [0, 3, 4] {
        assert!(
            matches!(
                nested_dissection(&g, &options(4, block)),
                Err(SparseError::InvalidArgument { .. })
            ),
            "block {block}"
        );
    }
    assert!(nested_dissection(&g, &options(4, 5)).is_ok());
}

#[test]
fn grid_graphs_have_the_stencil_edges() {
    let edges = |dims: &[usize], periodic: &[bool], block: usize| {
        grid(dims, periodic, block)
            .graph()
            .expect("valid grid")
            .edges()
    };
    assert_eq!(edges(&[5], &[false], 1), 4);
    assert_eq!(edges(&[5], &[true], 1), 5);
    assert_eq!(edges(&[3, 3], &[false, false], 1), 12);
    assert_eq!(edges(&[3, 3], &[true, true], 1), 18);
    assert_eq!(edges(&[3, 3], &[true, false], 1), 15);
    // Rings of 1 and 2 points add nothing.
    assert_eq!(edges(&[2, 3], &[true, false], 1), 7);
    assert_eq!(edges(&[1, 3], &[true, true], 1), 3);
    assert_eq!(edges(&[2, 2, 2], &[false; 3], 1), 12);
    assert_eq!(edges(&[2, 2, 2], &[true; 3], 1), 12);
    // Two points of two species: all four unknowns coupled.
    assert_eq!(edges(&[2], &[false], 2), 6);
    // Blocks of 3 on a path of 4 points: 3 edges inside each point, 9 per link.
    assert_eq!(edges(&[4], &[false], 3), 4 * 3 + 3 * 9);
    let g = grid(&[4, 3], &[false, false], 2)
        .graph()
        .expect("valid grid");
    // Point (1, 1) = 5, species 1 = unknown 11: its own other species, and 4 neighbours.
    assert_eq!(g.neighbours(11), &[2, 3, 8, 9, 10, 12, 13, 18, 19]);
}

#[test]
fn invalid_grids_are_refused() {
    let invalid = [
        grid(&[], &[], 1),
        grid(&[2, 2, 2, 2], &[false; 4], 1),
        grid(&[3, 0], &[false, false], 1),
        grid(&[3, 3], &[false], 1),
        grid(&[3, 3], &[false, false], 0),
    ];
    for g in &invalid {
        assert!(
            matches!(g.graph(), Err(SparseError::InvalidArgument { .. })),
            "{g:?}"
        );
        assert!(
            matches!(
                grid_dissection(g, 4),
                Err(SparseError::InvalidArgument { .. })
            ),
            "{g:?}"
        );
    }
    let huge = [
        grid(&[usize::MAX, 2], &[false, false], 1),
        grid(&[1 << 32, 1 << 32], &[false, false], 1),
        grid(&[1 << 40], &[false], 1 << 30),
    ];
    for g in &huge {
        assert!(
            matches!(g.graph(), Err(SparseError::TooLarge { .. })),
            "{g:?}"
        );
        assert!(
            matches!(grid_dissection(g, 4), Err(SparseError::TooLarge { .. })),
            "{g:?}"
        );
    }
}

/// Grids of 1, 2 and 3 axes, plain and periodic.
fn grid_cases() -> Vec<Grid> {
    let mut cases = Vec::new();
    for block in [1, 2, 3] {
        cases.push(grid(&[17], &[false], block));
        cases.push(grid(&[17], &[true], block));
        for periodic in [[false, false], [true, false], [false, true], [true, true]] {
            cases.push(grid(&[13, 9], &periodic, block));
            cases.push(grid(&[2, 11], &periodic, block));
            cases.push(grid(&[3, 3], &periodic, block));
        }
        for periodic in [[false; 3], [true, false, true], [true; 3]] {
            cases.push(grid(&[7, 5, 6], &periodic, block));
            cases.push(grid(&[1, 8, 3], &periodic, block));
        }
    }
    cases
}

#[test]
fn grids_by_nested_dissection() {
    for case in grid_cases() {
        let g = case.graph().expect("valid grid");
        for leaf_size in [1, 8, 30] {
            assert_nested(&g, leaf_size, case.block);
        }
    }
}

#[test]
fn grids_by_geometric_dissection() {
    for case in grid_cases() {
        for leaf_size in [0, 1, 8, 30] {
            assert_geometric(&case, leaf_size);
        }
    }
}

#[test]
fn geometric_separators_are_planes() {
    for k in [15, 31, 63] {
        let tree = assert_geometric(&grid(&[k, k], &[false, false], 1), 16);
        assert_eq!(top_separator(&tree), k);
        // The cut is x = k / 2 (the first axis on a tie).
        let root = &tree.nodes()[tree.roots()[0]];
        let xs: Vec<usize> = tree.order()[root.first..root.end]
            .iter()
            .map(|&p| p % k)
            .collect();
        assert!(xs.iter().all(|&x| x == k / 2), "{xs:?}");
    }
    for k in [7, 15] {
        let tree = assert_geometric(&grid(&[k, k, k], &[false; 3], 1), 16);
        assert_eq!(top_separator(&tree), k * k);
    }
    // Blocks multiply the separator; a periodic axis needs two planes.
    let tree = assert_geometric(&grid(&[15, 15], &[false, false], 3), 16);
    assert_eq!(top_separator(&tree), 3 * 15);
    let tree = assert_geometric(&grid(&[15, 15], &[true, false], 1), 16);
    assert_eq!(top_separator(&tree), 2 * 15);
    // The longest axis is cut: y here.
    let tree = assert_geometric(&grid(&[5, 40], &[false, false], 1), 4);
    assert_eq!(top_separator(&tree), 5);
}

#[test]
fn nested_dissection_of_square_grids_is_balanced() {
    for k in [15, 31, 63] {
        let g = grid(&[k, k], &[false, false], 1)
            .graph()
            .expect("valid grid");
        let tree = assert_nested(&g, 16, 1);
        let separator = top_separator(&tree);
        assert!(separator <= 2 * k, "k = {k}: top separator {separator}");
        let n = (k * k) as f64;
        let depth = depth(&tree);
        assert!(
            depth as f64 <= 3.0 * n.log2(),
            "k = {k}: depth {depth} for {n} unknowns"
        );
        // The halves below the top separator are each at most two thirds of the grid.
        let root = &tree.nodes()[tree.roots()[0]];
        for &child in &root.children {
            let c = &tree.nodes()[child];
            assert!(3 * (c.end - c.subtree_first) <= 2 * k * k);
        }
    }
}

#[test]
fn nested_dissection_of_cubes() {
    let k = 15;
    let g = grid(&[k, k, k], &[false; 3], 1)
        .graph()
        .expect("valid grid");
    let tree = assert_nested(&g, 64, 1);
    let n = (k * k * k) as f64;
    assert!(depth(&tree) as f64 <= 3.0 * n.log2());
    // A level structure's middle level of a cube from a corner: at most ~ 3/4 k^2.
    assert!(top_separator(&tree) <= 2 * k * k);
}

#[test]
fn a_long_path_does_not_overflow_the_stack() {
    let n = 1_000_000;
    let g = path(n);
    let tree = nested_dissection(&g, &OrderingOptions::default()).expect("dissects");
    tree.check(&g).expect("an assembly tree");
    assert!(depth(&tree) <= 20);
    let root = tree.roots()[0];
    assert_eq!(tree.nodes()[root].size(), 1);
}

#[test]
fn random_graphs_with_a_seeded_generator() {
    // Denser and larger than the proptest cases: a few hundred vertices, several components
    // of different densities.
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    for _ in 0..20 {
        let block = rng.random_range(1..=3);
        let points = rng.random_range(50..=400);
        let n = points * block;
        let mut lists = vec![Vec::new(); n];
        // Four bands of vertices, each with its own edge density, so components vary.
        for band in 0..4 {
            let (lo, hi) = (band * n / 4, (band + 1) * n / 4);
            if hi - lo < 2 {
                continue;
            }
            let edges = rng.random_range(0..=(hi - lo) * (band + 1));
            for _ in 0..edges {
                let v = rng.random_range(lo..hi);
                let w = rng.random_range(lo..hi);
                lists[v].push(w);
            }
        }
        let g = graph(&lists);
        let leaf_size = rng.random_range(1..=20);
        assert_nested(&g, leaf_size, block);
    }
}

proptest! {
    #[test]
    fn random_graphs_dissect(
        (points, block, leaf_size, edges) in (1usize..=100, 1usize..=3, 0usize..=20)
            .prop_flat_map(|(points, block, leaf_size)| {
                let n = points * block;
                (
                    Just(points),
                    Just(block),
                    Just(leaf_size),
                    proptest::collection::vec((0..n, 0..n), 0..=2 * n),
                )
            })
    ) {
        let n = points * block;
        let mut lists = vec![Vec::new(); n];
        for (v, w) in edges {
            lists[v].push(w);
        }
        let g = graph(&lists);
        assert_nested(&g, leaf_size, block);
    }

    #[test]
    fn random_grids_dissect(
        dims in proptest::collection::vec(1usize..=9, 1..=3),
        periodic in proptest::collection::vec(any::<bool>(), 3),
        block in 1usize..=3,
        leaf_size in 0usize..=24,
    ) {
        let case = grid(&dims, &periodic[..dims.len()], block);
        let g = case.graph().expect("valid grid");
        assert_geometric(&case, leaf_size);
        assert_nested(&g, leaf_size, block);
    }
}

/// A random geometric graph: `n` points uniform in the unit square (or cube), adjacent
/// within `radius`; irregular, unlike the grids, so level structures split it badly.
fn random_geometric(n: usize, dimension: usize, radius: f64, seed: u64) -> Graph {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let points: Vec<[f64; 3]> = (0..n)
        .map(|_| {
            let mut p = [0.0; 3];
            for x in p.iter_mut().take(dimension) {
                *x = rng.random::<f64>();
            }
            p
        })
        .collect();
    // Cells of side `radius`: neighbours lie in the 3^d cells around.
    let cells = (1.0 / radius).floor().max(1.0) as usize;
    let cell = |x: f64| ((x * cells as f64) as usize).min(cells - 1);
    let key = |p: &[f64; 3]| (cell(p[0]), cell(p[1]), cell(p[2]));
    let mut buckets: std::collections::HashMap<(usize, usize, usize), Vec<usize>> =
        std::collections::HashMap::new();
    for (v, p) in points.iter().enumerate() {
        buckets.entry(key(p)).or_default().push(v);
    }
    let mut lists = vec![Vec::new(); n];
    for (v, p) in points.iter().enumerate() {
        let (cx, cy, cz) = key(p);
        let range = |c: usize| c.saturating_sub(1)..=(c + 1).min(cells - 1);
        for x in range(cx) {
            for y in range(cy) {
                for z in if dimension == 3 { range(cz) } else { 0..=0 } {
                    for &w in buckets.get(&(x, y, z)).map_or(&[][..], Vec::as_slice) {
                        let d2: f64 = (0..3).map(|k| (points[w][k] - p[k]).powi(2)).sum();
                        if w > v && d2 <= radius * radius {
                            lists[v].push(w);
                        }
                    }
                }
            }
        }
    }
    graph(&lists)
}

#[test]
fn metis_dissection_keeps_every_promise_of_a_dissection() {
    for (g, leaf_size, block) in [
        (path(300), 8, 1),
        (star(100), 4, 1),
        (complete(40), 8, 1),
        (random_geometric(2000, 2, 0.05, 3), 32, 1),
        (
            grid(&[12, 9], &[true, false], 2).graph().expect("grid"),
            16,
            2,
        ),
    ] {
        let tree = metis_dissection(&g, &options(leaf_size, block)).expect("dissects");
        assert_dissects(&tree, &g, leaf_size, block);
        // Deterministic, also with other threads ordering at the same time.
        let again: Vec<SeparatorTree> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..3)
                .map(|_| scope.spawn(|| metis_dissection(&g, &options(leaf_size, block))))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("no panic").expect("dissects"))
                .collect()
        });
        assert!(again.iter().all(|t| *t == tree), "not deterministic");
    }
    assert!(matches!(
        metis_dissection(&path(10), &options(4, 3)),
        Err(SparseError::InvalidArgument { .. })
    ));
}

/// The factor's entries (nnz(L+U)) that `tree` gives for the pattern of `g`.
fn fill(g: &Graph, tree: SeparatorTree) -> u64 {
    let n = g.vertices();
    let mut triplets: Vec<(usize, usize, f64)> = (0..n).map(|v| (v, v, 4.0)).collect();
    for v in 0..n {
        triplets.extend(g.neighbours(v).iter().map(|&w| (v, w, -1.0)));
    }
    let a = tutti_sparse::CsrMatrix::from_triplets(n, n, &triplets).expect("matrix");
    tutti_sparse::analyse(&a, &tutti_sparse::OrderingMethod::Given(tree))
        .expect("analyses")
        .statistics()
        .factor_nnz
}

#[test]
fn metis_fills_far_less_than_level_structures_on_irregular_graphs() {
    // Measured with leaves of 64: 2-D 0.67x, 3-D 0.51x the level structures' nnz(L+U); on
    // the larger graphs of `docs/sparse.md` (20000 and 12000 points) 0.56x and 0.47x.
    for (dimension, n, radius, bound) in [(2, 6000, 0.022, 0.8), (3, 4000, 0.11, 0.8)] {
        let g = random_geometric(n, dimension, radius, 11);
        let by_levels = fill(
            &g,
            nested_dissection(&g, &options(64, 1)).expect("dissects"),
        );
        let by_metis = fill(&g, metis_dissection(&g, &options(64, 1)).expect("dissects"));
        let ratio = by_metis as f64 / by_levels as f64;
        assert!(
            ratio < bound,
            "{dimension}-D: METIS {by_metis}, level structures {by_levels}: {ratio:.2}"
        );
    }
}
