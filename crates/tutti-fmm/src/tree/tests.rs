use proptest::prelude::*;

use super::*;
use crate::options::MAX_DEPTH;

fn check_invariants(tree: &Octree, n: usize, leaf_size: usize, max_depth: usize) {
    let mut seen = vec![0usize; n];
    for &input in &tree.input_index {
        seen[input] += 1;
    }
    assert!(
        seen.iter().all(|&count| count == 1),
        "input_index is a permutation"
    );
    if n == 0 {
        assert!(tree.nodes.is_empty());
        return;
    }
    // Every sorted body lies in exactly one leaf; leaves tile 0..n along the Morton curve.
    let mut next = 0;
    for &leaf in &tree.leaves {
        let node = &tree.nodes[leaf as usize];
        assert!(node.is_leaf());
        assert_eq!(node.begin, next);
        assert!(node.end > node.begin, "leaves are not empty");
        // A crowded leaf is at the depth cap, or its bodies cannot be separated.
        let mut bodies: Vec<usize> = (node.begin..node.end).collect();
        assert!(
            node.bodies() <= leaf_size
                || node.level == max_depth
                || split_cell(&mut bodies, &tree.positions).is_none()
        );
        next = node.end;
    }
    assert_eq!(next, n);
    assert!(tree.depth() <= max_depth);
    for (index, node) in tree.nodes.iter().enumerate() {
        assert!(tree.levels[node.level].contains(&index));
        for p in &tree.positions[node.begin..node.end] {
            assert!(distance2(p, &node.center).sqrt() <= node.radius * (1.0 + 1e-12) + 1e-300);
        }
        if !node.is_leaf() {
            let children = node.children();
            assert_eq!(tree.nodes[children.start].begin, node.begin);
            assert_eq!(tree.nodes[children.end - 1].end, node.end);
            for pair in children.clone().collect::<Vec<_>>().windows(2) {
                assert_eq!(tree.nodes[pair[0]].end, tree.nodes[pair[1]].begin);
            }
            for child in children {
                assert_eq!(tree.nodes[child].parent as usize, index);
            }
            assert!(node.leaf_end - node.leaf_begin >= 2 || node.child_count == 1);
        }
    }
}

proptest! {
    #[test]
    fn tree_invariants(
        points in prop::collection::vec((-1.0f64..1.0, -1.0f64..1.0, -1.0f64..1.0), 0..400),
        clustered in 0usize..3,
        leaf_size in 1usize..20,
        max_depth in 1usize..=MAX_DEPTH,
    ) {
        // Some cases squeeze the points into a tiny cluster or onto one point.
        let squeeze = [1.0, 1e-9, 0.0][clustered];
        let positions: Vec<[f64; 3]> =
            points.iter().map(|&(x, y, z)| [x * squeeze, y * squeeze + 0.5, z]).collect();
        let masses = vec![1.0; positions.len()];
        let tree = Octree::build(&positions, &masses, leaf_size, max_depth);
        check_invariants(&tree, positions.len(), leaf_size, max_depth);
    }
}

#[test]
fn all_bodies_at_one_point_make_one_leaf() {
    let positions = vec![[0.25, -1.0, 3.0]; 1000];
    let masses = vec![1.0; 1000];
    let tree = Octree::build(&positions, &masses, 8, 5);
    assert_eq!(tree.depth(), 0);
    assert_eq!(tree.leaves.len(), 1);
    assert_eq!(tree.nodes.len(), 1);
    check_invariants(&tree, 1000, 8, 5);
}

#[test]
fn bodies_one_ulp_apart_make_one_leaf_instead_of_a_chain() {
    let x = 1.0f64;
    let next = f64::from_bits(x.to_bits() + 1);
    let positions: Vec<[f64; 3]> = (0..100)
        .map(|i| [if i % 2 == 0 { x } else { next }, 0.0, 0.0])
        .collect();
    let masses = vec![1.0; 100];
    let tree = Octree::build(&positions, &masses, 8, 21);
    check_invariants(&tree, 100, 8, 21);
    assert!(tree.depth() <= 1, "depth {}", tree.depth());
}

#[test]
fn bodies_at_the_ends_of_the_f64_range_are_split() {
    let positions = vec![[-1e308, 0.0, 0.0], [1e308, 0.0, 0.0], [0.0, 1e308, -1e308]];
    let masses = vec![1.0; 3];
    let tree = Octree::build(&positions, &masses, 1, 21);
    check_invariants(&tree, 3, 1, 21);
    assert_eq!(tree.leaves.len(), 3);
}

/// Bodies on a lattice filling the unit cube, `n` of them.
fn unit_cube(n: usize) -> Vec<[f64; 3]> {
    let side = (n as f64).cbrt().ceil() as usize;
    (0..n)
        .map(|i| {
            let (x, y, z) = (i % side, (i / side) % side, i / (side * side));
            [x, y, z].map(|c| (c as f64 + 0.5) / side as f64)
        })
        .collect()
}

#[test]
fn a_far_outlier_costs_one_level_not_the_leaves() {
    let leaf_size = 16;
    let inside = unit_cube(4096);
    let mut with_outlier = inside.clone();
    with_outlier.push([1e15, -3e14, 2e15]);
    let plain = Octree::build(&inside, &vec![1.0; inside.len()], leaf_size, MAX_DEPTH);
    let tree = Octree::build(
        &with_outlier,
        &vec![1.0; with_outlier.len()],
        leaf_size,
        MAX_DEPTH,
    );
    check_invariants(&tree, with_outlier.len(), leaf_size, MAX_DEPTH);
    let largest = |tree: &Octree| {
        tree.leaves
            .iter()
            .map(|&l| tree.nodes[l as usize].bodies())
            .max()
            .unwrap_or(0)
    };
    assert!(
        largest(&tree) <= leaf_size,
        "largest leaf {}",
        largest(&tree)
    );
    // The outlier's own leaf, beside the unit cube's tree.
    assert_eq!(tree.leaves.len(), plain.leaves.len() + 1);
    assert_eq!(tree.depth(), plain.depth() + 1);
}
