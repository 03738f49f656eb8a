//! The entry points: build the tree and the interaction lists once, split the target leaves
//! among the ranks, run every rank, and gather the results in input order.

use std::time::Instant;

use tutti_group::{CommError, Group};
use tutti_plan::{largest_chunk, Budget, Plan, Planner};

use crate::basis::Basis;
use crate::evaluate::{gather_outputs, report_phase, run_rank, RankOutput, Shared};
use crate::memory::{plan_memory, Footprint};
use crate::operators::LANES;
use crate::options::{validate_bodies, FmmOptions, Precision};
use crate::partition::Partition;
use crate::traversal::InteractionLists;
use crate::tree::Octree;
use crate::FmmError;

/// Bytes staged per P2P source body: x, y, z and the strength in f64.
const P2P_BYTES_PER_SOURCE: u64 = 32;

/// Potentials and accelerations of every body, in input order, and how they were computed.
#[derive(Clone, Debug)]
pub struct FmmOutput {
    /// `potential[i] = -sum_{j != i} m_j / sqrt(r_ij^2 + eps^2)` (N).
    pub potential: Vec<f64>,
    /// `accel[i] = -sum_{j != i} m_j (x_i - x_j) / (r_ij^2 + eps^2)^(3/2)` (N, 3).
    pub accel: Vec<[f64; 3]>,
    /// Diagnostics.
    pub info: FmmInfo,
}

/// What an evaluation did: tree shape, interaction counts, the split among ranks, chunks
/// and timings (seconds of wall time).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct FmmInfo {
    /// Bodies.
    pub bodies: usize,
    /// Tree nodes.
    pub nodes: usize,
    /// Leaves.
    pub leaves: usize,
    /// Depth of the deepest leaf (root = 0).
    pub depth: usize,
    /// Expansion order used.
    pub order: usize,
    /// Multipole-to-local (cell-cell) interactions.
    pub m2l_pairs: usize,
    /// Leaf-leaf direct interactions.
    pub p2p_pairs: usize,
    /// Ranks (devices).
    pub ranks: usize,
    /// Leaves evaluated by each rank.
    pub leaves_per_rank: Vec<usize>,
    /// Multipoles each rank received from the others.
    pub exchanged_per_rank: Vec<usize>,
    /// M2L pair slots per chunk (pairs go in groups of four per target). On a rank running
    /// the kernels with [`crate::Precision::F32`], whose derivatives the device holds in f64,
    /// a chunk takes half as many.
    pub m2l_chunk: usize,
    /// P2P source bodies staged per chunk by the host code (a rank running the kernels
    /// stages nothing: its P2P is one launch).
    pub p2p_chunk: usize,
    /// Most M2L chunks on any rank.
    pub m2l_chunks: usize,
    /// Most P2P chunks on any rank (1 on a rank running the kernels).
    pub p2p_chunks: usize,
    /// Ranks that ran M2L and P2P as device kernels ([`crate::Kernels`]); the others ran
    /// the host code.
    pub kernel_ranks: usize,
    /// Building the tree and the interaction lists.
    pub setup_seconds: f64,
    /// The ranks' work, from start to the last rank's end.
    pub evaluate_seconds: f64,
}

/// Evaluates the potential and acceleration of every body, split among the devices of
/// `options.resources` (one rank each; the default is one simulated device using all cores,
/// or every GPU).
///
/// `positions` (N, 3) and `masses` (N,) in any consistent units, G = 1; strengths may be
/// negative (electrostatics).
///
/// One tree and one set of interaction lists serve every rank; the target leaves are split
/// along the Morton curve by estimated cost, each rank computes the multipoles of its own
/// subtrees, receives those it needs from their owners, and evaluates its bodies. The result
/// does not depend on the number of devices (the same operations in the same order).
///
/// Before any work the large objects (tree, expansions, fields, working memory) are planned
/// with `tutti-plan` ([`plan`] shows the table): a memory cap that cannot hold them is an
/// error up front.
///
/// Errors: every bad option or input before any work ([`FmmError::InvalidArgument`],
/// [`FmmError::LengthMismatch`], [`FmmError::NonFinite`]); device selection errors;
/// [`FmmError::Plan`] when the devices or caps cannot hold the evaluation;
/// [`FmmError::CoincidentBodies`] when two distinct bodies share a position and the softening
/// is 0; and the first error of any rank.
pub fn fmm(
    positions: &[[f64; 3]],
    masses: &[f64],
    options: &FmmOptions,
) -> Result<FmmOutput, FmmError> {
    options.validate()?;
    validate_bodies(positions, masses)?;
    let group = Group::from_resources(&options.resources, crate::GPU_USE)?;
    fmm_on(&group, positions, masses, options)
}

/// [`fmm`] on a group made by the caller: the way to evaluate across processes, on a
/// [`Group::spanning`] group whose other ranks are other MPI processes running the same
/// program on the same bodies and options. Every process builds the same tree and
/// partition, evaluates its own leaves, and then gathers every rank's fields, so every
/// process returns the whole output, bitwise equal to that of a group of as many threads.
/// `options.resources` still gives the memory caps the plan is checked against; the group
/// gives the devices.
pub fn fmm_on(
    group: &Group,
    positions: &[[f64; 3]],
    masses: &[f64],
    options: &FmmOptions,
) -> Result<FmmOutput, FmmError> {
    // Every fallible step before the run goes through `before_run`, so that a failure here
    // releases the other processes of a spanning group from the run's first round.
    group.before_run(
        options
            .validate()
            .and_then(|()| validate_bodies(positions, masses)),
    )?;
    let ranks = group.size();
    let n = positions.len();
    if n == 0 {
        // Every path of a spanning group meets the others in one run: a process that failed
        // its checks waits in that run's first round (`before_run`).
        if group.is_spanning() {
            group.run(|_| Ok::<(), FmmError>(()))?;
        }
        return Ok(FmmOutput {
            potential: Vec::new(),
            accel: Vec::new(),
            info: FmmInfo {
                order: options.order,
                ranks,
                leaves_per_rank: vec![0; ranks],
                exchanged_per_rank: vec![0; ranks],
                ..FmmInfo::default()
            },
        });
    }

    let setup = Instant::now();
    let Setup {
        tree,
        basis,
        lists,
        partition,
    } = Setup::build(positions, masses, options, ranks);
    let setup_seconds = setup.elapsed().as_secs_f64();
    let reports = group.local_ranks().start == 0;
    if reports {
        report_phase(options.progress.as_ref(), 0);
    }
    let footprint = Footprint {
        tree: &tree,
        lists: &lists,
        basis: &basis,
        partition: &partition,
    };
    let working_memory = group
        .before_run(plan_memory(&footprint, group.devices(), options))?
        .working_memory;
    let derivative_bytes = match options.far_field {
        Precision::F32 => 4,
        _ => 8,
    } * basis.len() as u64;
    // M2L pairs go in groups of LANES per target; a chunk counts the groups' lanes.
    let m2l_slots: usize = (0..tree.nodes.len())
        .map(|a| lists.m2l_of(a).len().div_ceil(LANES) * LANES)
        .sum();
    let (m2l_chunk, p2p_chunk) = match options.chunk_items {
        Some(items) => (items, items),
        None => group.before_run(
            largest_chunk(m2l_slots.max(1), derivative_bytes, 0, working_memory).and_then(|m2l| {
                largest_chunk(usize::MAX, P2P_BYTES_PER_SOURCE, 0, working_memory)
                    .map(|p2p| (m2l.size, p2p.size))
            }),
        )?,
    };

    let shared = Shared {
        tree: &tree,
        lists: &lists,
        basis: &basis,
        partition: &partition,
        softening2: options.softening * options.softening,
        precision: options.far_field,
        m2l_chunk,
        p2p_chunk,
        kernels: options.kernels,
        fma: options.fused_multiply_add,
        progress: options.progress.as_ref(),
    };
    let start = Instant::now();
    let outputs: Vec<RankOutput> = if group.is_spanning() {
        // This process holds one rank: it gathers the others' fields to assemble the output.
        let mut gathered = group.run(|comm| gather_outputs(comm, run_rank(comm, &shared)?))?;
        gathered
            .pop()
            .ok_or_else(|| FmmError::Comm(CommError::Transport("no result of this rank".into())))?
    } else {
        group.run(|comm| run_rank(comm, &shared))?
    };
    let evaluate_seconds = start.elapsed().as_secs_f64();

    let mut potential = vec![0.0; n];
    let mut accel = vec![[0.0; 3]; n];
    for output in &outputs {
        for (sorted, field) in output.bodies.clone().zip(&output.fields) {
            let input = tree.input_index[sorted];
            potential[input] = -field.psi;
            accel[input] = field.grad;
        }
    }
    let info = FmmInfo {
        bodies: n,
        nodes: tree.nodes.len(),
        leaves: tree.leaves.len(),
        depth: tree.depth(),
        order: options.order,
        m2l_pairs: lists.m2l.len(),
        p2p_pairs: lists.p2p.len(),
        ranks,
        leaves_per_rank: partition.leaf_ranges.iter().map(|r| r.len()).collect(),
        exchanged_per_rank: outputs.iter().map(|o| o.exchanged_multipoles).collect(),
        m2l_chunk,
        p2p_chunk,
        m2l_chunks: outputs.iter().map(|o| o.m2l_chunks).max().unwrap_or(0),
        p2p_chunks: outputs.iter().map(|o| o.p2p_chunks).max().unwrap_or(0),
        kernel_ranks: outputs.iter().filter(|o| o.kernels).count(),
        setup_seconds,
        evaluate_seconds,
    };
    if reports {
        report_phase(options.progress.as_ref(), 4);
    }
    Ok(FmmOutput {
        potential,
        accel,
        info,
    })
}

/// The memory plan of [`fmm`] on these bodies and options, without evaluating: the table
/// `tutti fmm --plan` prints (`Display`). It builds the tree and the interaction lists, so
/// it costs the evaluation's setup.
///
/// Errors: those of [`fmm`] before any rank runs, [`FmmError::Plan`] included.
pub fn plan(
    positions: &[[f64; 3]],
    masses: &[f64],
    options: &FmmOptions,
) -> Result<Plan, FmmError> {
    options.validate()?;
    validate_bodies(positions, masses)?;
    let group = Group::from_resources(&options.resources, crate::GPU_USE)?;
    if positions.is_empty() {
        let budget = Budget::from_devices(group.devices(), &options.resources)?;
        return Ok(Planner::new(budget).plan(&[])?);
    }
    let setup = Setup::build(positions, masses, options, group.size());
    let footprint = Footprint {
        tree: &setup.tree,
        lists: &setup.lists,
        basis: &setup.basis,
        partition: &setup.partition,
    };
    Ok(plan_memory(&footprint, group.devices(), options)?.plan)
}

/// What every rank shares: the tree, the basis, the interaction lists and the split.
pub(crate) struct Setup {
    pub(crate) tree: Octree,
    pub(crate) basis: Basis,
    pub(crate) lists: InteractionLists,
    pub(crate) partition: Partition,
}

impl Setup {
    pub(crate) fn build(
        positions: &[[f64; 3]],
        masses: &[f64],
        options: &FmmOptions,
        ranks: usize,
    ) -> Self {
        let tree = Octree::build(positions, masses, options.leaf_size, options.max_depth);
        let basis = Basis::new(options.order);
        // An M2L costs about as much as this many direct body pairs.
        let direct_limit = basis.m2l.len() / 8;
        let lists = InteractionLists::build(&tree, options.theta, direct_limit);
        let partition = Partition::new(&tree, &lists, &basis, ranks);
        Self {
            tree,
            basis,
            lists,
            partition,
        }
    }
}
