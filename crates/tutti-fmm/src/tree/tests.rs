use proptest::prelude::*;

use super::*;

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
        assert!(node.bodies() <= leaf_size || node.level == max_depth);
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
fn all_bodies_at_one_point_stop_at_the_depth_cap() {
    let positions = vec![[0.25, -1.0, 3.0]; 1000];
    let masses = vec![1.0; 1000];
    let tree = Octree::build(&positions, &masses, 8, 5);
    assert_eq!(tree.depth(), 5);
    assert_eq!(tree.leaves.len(), 1);
    assert!(tree.nodes.len() <= 6);
    check_invariants(&tree, 1000, 8, 5);
}
