//! The near field of a rank: L2P and P2P for its leaves, in chunks of staged sources.

use std::ops::Range;

use rayon::prelude::*;

use crate::evaluate::Shared;
use crate::kernel::{add_near_sources, Field, StagedSources};
use crate::operators::l2p;
use crate::tree::Octree;
use crate::FmmError;

/// Fields of the bodies of this rank's leaves: L2P plus P2P over each leaf's near list,
/// leaves taken in chunks bounded by the number of source bodies staged at once. Bodies
/// whose field is not wanted (`Shared::wanted`) get a zero field, and a leaf with none
/// wanted stages nothing.
pub(crate) fn near_field(
    shared: &Shared<'_>,
    me: usize,
    locals: &[f64],
) -> Result<(Range<usize>, Vec<Field>, usize), FmmError> {
    let (tree, t) = (shared.tree, shared.basis.len());
    let leaves = &tree.leaves[shared.partition.leaf_ranges[me].clone()];
    let Some((&first, &last)) = leaves.first().zip(leaves.last()) else {
        return Ok((0..0, Vec::new(), 0));
    };
    let bodies = tree.nodes[first as usize].begin..tree.nodes[last as usize].end;
    let staged = |leaf: u32| -> usize {
        if !any_wanted(shared, leaf as usize) {
            return 0;
        }
        shared
            .lists
            .p2p_of(leaf as usize)
            .iter()
            .map(|&s| tree.nodes[s as usize].bodies())
            .sum()
    };
    let mut chunks = Vec::new();
    let (mut start, mut load) = (0, 0);
    for (i, &leaf) in leaves.iter().enumerate() {
        let size = staged(leaf);
        if i > start && load + size > shared.p2p_chunk {
            chunks.push(start..i);
            start = i;
            load = 0;
        }
        load += size;
    }
    chunks.push(start..leaves.len());

    let mut fields = Vec::with_capacity(bodies.len());
    for chunk in &chunks {
        let results: Vec<Result<Vec<Field>, FmmError>> = leaves[chunk.clone()]
            .par_iter()
            .map_init(
                || vec![0.0; t],
                |powers, &leaf| leaf_fields(shared, leaf as usize, locals, powers),
            )
            .collect();
        for result in results {
            fields.extend(result?);
        }
    }
    Ok((bodies, fields, chunks.len()))
}

/// Whether any body of `leaf` has its field wanted.
fn any_wanted(shared: &Shared<'_>, leaf: usize) -> bool {
    let node = &shared.tree.nodes[leaf];
    shared
        .wanted
        .is_none_or(|wanted| wanted[node.begin..node.end].contains(&true))
}

/// The fields of one leaf's bodies: its local expansion, then its near sources staged as
/// x, y, z, m columns in list order; zero for the bodies whose field is not wanted.
fn leaf_fields(
    shared: &Shared<'_>,
    leaf: usize,
    locals: &[f64],
    powers: &mut [f64],
) -> Result<Vec<Field>, FmmError> {
    let (tree, basis, t) = (shared.tree, shared.basis, shared.basis.len());
    let node = &tree.nodes[leaf];
    if !any_wanted(shared, leaf) {
        return Ok(vec![Field::default(); node.bodies()]);
    }
    let wanted = shared.wanted.map(|wanted| &wanted[node.begin..node.end]);
    let sources = shared.lists.p2p_of(leaf);
    let mut staged = StagedSources::default();
    let mut segments = Vec::with_capacity(sources.len());
    for &s in sources {
        let source = &tree.nodes[s as usize];
        let from = staged.len();
        staged.extend(
            &tree.positions[source.begin..source.end],
            &tree.masses[source.begin..source.end],
        );
        segments.push((s as usize == leaf, from..staged.len()));
    }
    let local = &locals[leaf * t..(leaf + 1) * t];
    let mut fields = Vec::with_capacity(node.bodies());
    for (i, x) in tree.positions[node.begin..node.end].iter().enumerate() {
        if wanted.is_some_and(|wanted| !wanted[i]) {
            fields.push(Field::default());
            continue;
        }
        let mut field = l2p(basis, local, node.center, *x, powers);
        add_near_sources(
            &mut field,
            x,
            i,
            segments.iter().cloned(),
            staged.columns(),
            shared.softening2,
        );
        fields.push(field);
    }
    if shared.softening2 == 0.0 && fields.iter().any(|f| !f.psi.is_finite()) {
        if let Some(error) = coincident_pair(tree, leaf) {
            return Err(error);
        }
    }
    Ok(fields)
}

/// The first pair of distinct bodies of `leaf` at the same position, by input index.
/// Coincident bodies always fall in the same octant, hence in one leaf.
pub(crate) fn coincident_pair(tree: &Octree, leaf: usize) -> Option<FmmError> {
    let node = &tree.nodes[leaf];
    let mut found: Option<(usize, usize, [f64; 3])> = None;
    for i in node.begin..node.end {
        for j in i + 1..node.end {
            if tree.positions[i] == tree.positions[j] {
                let (a, b) = (tree.input_index[i], tree.input_index[j]);
                let pair = (a.min(b), a.max(b), tree.positions[i]);
                if found.is_none_or(|f| (pair.0, pair.1) < (f.0, f.1)) {
                    found = Some(pair);
                }
            }
        }
    }
    found.map(|(first, second, position)| FmmError::CoincidentBodies {
        first,
        second,
        position,
    })
}
