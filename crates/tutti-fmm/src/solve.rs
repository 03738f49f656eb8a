//! The entry points: build the tree and the interaction lists once, split the target leaves
//! among the ranks, run every rank, and gather the results in input order. Evaluation at
//! separate targets puts the sources and the targets into one body set and reads each
//! target's field from its body.

use std::collections::hash_map::{Entry, HashMap};
use std::time::Instant;

use tutti_group::{CommError, Group};
use tutti_plan::{largest_chunk, Budget, Plan, Planner};

use crate::basis::Basis;
use crate::direct::field_at_target;
use crate::evaluate::{gather_outputs, report_phase, run_rank, RankOutput, Shared};
use crate::memory::{plan_memory, Footprint};
use crate::operators::LANES;
use crate::options::{validate_bodies, validate_targets, FmmOptions, Precision};
use crate::partition::Partition;
use crate::traversal::InteractionLists;
use crate::tree::Octree;
use crate::FmmError;

/// Bytes staged per P2P source body: x, y, z and the strength in f64.
const P2P_BYTES_PER_SOURCE: u64 = 32;

/// Potentials and accelerations of every body ([`fmm`]) or every target
/// ([`fmm_at_targets`]), in input order, and how they were computed.
#[derive(Clone, Debug)]
pub struct FmmOutput {
    /// `potential[i] = -sum_{j != i} m_j / sqrt(r_ij^2 + eps^2)` (N); at targets
    /// `-sum_j m_j / sqrt(|t_i - x_j|^2 + eps^2)` (M), without the sources at `t_i`.
    pub potential: Vec<f64>,
    /// `accel[i] = -sum_{j != i} m_j (x_i - x_j) / (r_ij^2 + eps^2)^(3/2)` (N, 3); at
    /// targets `-sum_j m_j (t_i - x_j) / (|t_i - x_j|^2 + eps^2)^(3/2)` (M, 3), without the
    /// sources at `t_i`.
    pub accel: Vec<[f64; 3]>,
    /// Diagnostics.
    pub info: FmmInfo,
}

/// What an evaluation did: tree shape, interaction counts, the split among ranks, chunks
/// and timings (seconds of wall time).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct FmmInfo {
    /// Bodies in the tree: the sources, and for [`fmm_at_targets`] also one body of strength
    /// 0 for each distinct target position that no source occupies.
    pub bodies: usize,
    /// Targets evaluated by [`fmm_at_targets`]; 0 for [`fmm`], which evaluates the bodies.
    pub targets: usize,
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
    /// Building the tree and the interaction lists (and for [`fmm_at_targets`] the body set
    /// of sources and targets).
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
    evaluate_bodies(group, positions, masses, None, options)
}

/// Evaluates the potential and acceleration at each target point from the sources, split
/// among the devices of `options.resources` as [`fmm`] splits its bodies: FMM3D's
/// `lfmm3d` with sources and targets in one tree.
///
/// `sources` (N, 3) and `masses` (N,) as for [`fmm`]; `targets` (M, 3). The output has one
/// entry per target, in target order, with [`fmm`]'s sign convention:
///
/// ```text
/// phi(t) = -sum_j m_j / sqrt(|t - x_j|^2 + eps^2)
/// a(t)   = -sum_j m_j (t - x_j) / (|t - x_j|^2 + eps^2)^(3/2)
/// ```
///
/// where the sum leaves out every source at exactly the target's position (equal
/// coordinates, -0.0 equal to 0.0): a target at a source gets that source's own field, as
/// in FMM3D, where self-interaction is ignored. Duplicate targets get identical values.
/// [`crate::direct_at_targets`] is the direct sum with this convention.
///
/// The tree holds the sources and, with strength 0, each distinct target position that no
/// source occupies; a target reads the field of its body (a target at a source reads the
/// source's, bitwise what [`fmm`] gives that source when every target is at a source). The
/// result does not depend on the number of devices. A target whose value comes out
/// non-finite (it lies so close to another body, within about 1e-162, that their squared
/// distance underflows to 0) is summed directly instead. No targets give an empty output,
/// and no sources an output of zeros, without building a tree.
///
/// Errors: those of [`fmm`], with the sources named `positions` as there;
/// [`FmmError::NonFinite`] for a target coordinate (argument `targets`, the target's
/// index); [`FmmError::CoincidentBodies`] when two sources share a position and the
/// softening is 0, before any work.
///
/// ```
/// use tutti_fmm::{direct_at_targets, fmm_at_targets, FmmOptions};
///
/// let sources = vec![[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]];
/// let masses = vec![1.0, -2.0];
/// // One target off the sources, and one at the first source, which it leaves out.
/// let targets = vec![[0.0, 2.0, 0.0], [0.0, 0.0, 0.0]];
/// let out = fmm_at_targets(&sources, &masses, &targets, &FmmOptions::default())?;
/// assert_eq!(out.potential[1], 2.0);
/// assert_eq!(out.accel[1], [-2.0, 0.0, 0.0]);
/// let (phi, acc) = direct_at_targets(&sources, &masses, &targets, 0.0)?;
/// assert!((out.potential[0] - phi[0]).abs() < 1e-14);
/// assert!((out.accel[0][1] - acc[0][1]).abs() < 1e-14);
/// # Ok::<(), tutti_fmm::FmmError>(())
/// ```
pub fn fmm_at_targets(
    sources: &[[f64; 3]],
    masses: &[f64],
    targets: &[[f64; 3]],
    options: &FmmOptions,
) -> Result<FmmOutput, FmmError> {
    options.validate()?;
    validate_bodies(sources, masses)?;
    validate_targets(targets)?;
    let group = Group::from_resources(&options.resources, crate::GPU_USE)?;
    fmm_at_targets_on(&group, sources, masses, targets, options)
}

/// [`fmm_at_targets`] on a group made by the caller, as [`fmm_on`] is [`fmm`] on one: on a
/// [`Group::spanning`] group every process passes the same sources, targets and options,
/// and every process returns the whole output.
pub fn fmm_at_targets_on(
    group: &Group,
    sources: &[[f64; 3]],
    masses: &[f64],
    targets: &[[f64; 3]],
    options: &FmmOptions,
) -> Result<FmmOutput, FmmError> {
    group.before_run(
        options
            .validate()
            .and_then(|()| validate_bodies(sources, masses))
            .and_then(|()| validate_targets(targets)),
    )?;
    if sources.is_empty() || targets.is_empty() {
        join_empty_run(group)?;
        return Ok(FmmOutput {
            potential: vec![0.0; targets.len()],
            accel: vec![[0.0; 3]; targets.len()],
            info: FmmInfo {
                targets: targets.len(),
                ..empty_info(options, group.size())
            },
        });
    }
    let setup = Instant::now();
    let set = group.before_run(TargetSet::new(sources, masses, targets, options.softening))?;
    let set_seconds = setup.elapsed().as_secs_f64();
    let bodies = evaluate_bodies(
        group,
        &set.positions,
        &set.masses,
        Some(&set.wanted),
        options,
    )?;
    let (potential, accel) = set.read(sources, masses, targets, &bodies, options.softening);
    Ok(FmmOutput {
        potential,
        accel,
        info: FmmInfo {
            targets: targets.len(),
            setup_seconds: bodies.info.setup_seconds + set_seconds,
            ..bodies.info
        },
    })
}

/// Joins the others of a spanning group in an empty run: every path of such a group meets
/// the others in one run (a process that failed its checks waits in that run's first
/// round, `before_run`).
fn join_empty_run(group: &Group) -> Result<(), FmmError> {
    if group.is_spanning() {
        group.run(|_| Ok::<(), FmmError>(()))?;
    }
    Ok(())
}

/// What an evaluation of nothing reports.
fn empty_info(options: &FmmOptions, ranks: usize) -> FmmInfo {
    FmmInfo {
        order: options.order,
        ranks,
        leaves_per_rank: vec![0; ranks],
        exchanged_per_rank: vec![0; ranks],
        ..FmmInfo::default()
    }
}

/// The fields of validated bodies on `group`, in input order; `wanted` (input order) says
/// whose fields are read, the others' may be left zero. The work of [`fmm_on`] after its
/// checks.
fn evaluate_bodies(
    group: &Group,
    positions: &[[f64; 3]],
    masses: &[f64],
    wanted: Option<&[bool]>,
    options: &FmmOptions,
) -> Result<FmmOutput, FmmError> {
    let ranks = group.size();
    let n = positions.len();
    if n == 0 {
        join_empty_run(group)?;
        return Ok(FmmOutput {
            potential: Vec::new(),
            accel: Vec::new(),
            info: empty_info(options, ranks),
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
    let wanted: Option<Vec<bool>> =
        wanted.map(|wanted| tree.input_index.iter().map(|&i| wanted[i]).collect());
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
        wanted: wanted.as_deref(),
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
        targets: 0,
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

/// Sources and targets as one body set (FMM3D's one tree over both): the sources in input
/// order, then each distinct target position that no source occupies, with strength 0. A
/// body of strength 0 adds nothing to any expansion or direct sum, and no two bodies of
/// strength 0 share a position (their 0 * inf would be NaN).
struct TargetSet {
    positions: Vec<[f64; 3]>,
    masses: Vec<f64>,
    /// Whether some target reads each body's field.
    wanted: Vec<bool>,
    /// The body whose field each target reads: the first source at its position (whose own
    /// field leaves that source out), else the target's own body.
    body_of_target: Vec<usize>,
    /// The other sources at the position of a source that a target reads (possible only
    /// with softening), whose contributions the target's field must also leave out.
    also_at: HashMap<usize, Vec<usize>>,
}

impl TargetSet {
    /// The body set of validated sources and targets.
    ///
    /// Errors: [`FmmError::CoincidentBodies`] for two sources at one position when
    /// `softening` is 0 (the pair with the smallest second index).
    fn new(
        sources: &[[f64; 3]],
        masses: &[f64],
        targets: &[[f64; 3]],
        softening: f64,
    ) -> Result<Self, FmmError> {
        let mut body_at: HashMap<[u64; 3], usize> =
            HashMap::with_capacity(sources.len() + targets.len());
        let mut also_at: HashMap<usize, Vec<usize>> = HashMap::new();
        for (j, position) in sources.iter().enumerate() {
            match body_at.entry(position_key(position)) {
                Entry::Vacant(slot) => {
                    slot.insert(j);
                }
                Entry::Occupied(slot) => {
                    let first = *slot.get();
                    if softening == 0.0 {
                        return Err(FmmError::CoincidentBodies {
                            first,
                            second: j,
                            position: sources[first],
                        });
                    }
                    also_at.entry(first).or_default().push(j);
                }
            }
        }
        let mut positions = sources.to_vec();
        let mut body_masses = masses.to_vec();
        let mut wanted = vec![false; sources.len()];
        let mut body_of_target = Vec::with_capacity(targets.len());
        for target in targets {
            let body = *body_at.entry(position_key(target)).or_insert_with(|| {
                positions.push(*target);
                body_masses.push(0.0);
                wanted.push(false);
                positions.len() - 1
            });
            wanted[body] = true;
            body_of_target.push(body);
        }
        also_at.retain(|&first, _| wanted[first]);
        Ok(Self {
            positions,
            masses: body_masses,
            wanted,
            body_of_target,
            also_at,
        })
    }

    /// Each target's potential and acceleration, from the fields of the bodies (input
    /// order); a non-finite one is summed directly over the sources instead.
    fn read(
        &self,
        sources: &[[f64; 3]],
        masses: &[f64],
        targets: &[[f64; 3]],
        bodies: &FmmOutput,
        softening: f64,
    ) -> (Vec<f64>, Vec<[f64; 3]>) {
        let softening2 = softening * softening;
        self.body_of_target
            .iter()
            .zip(targets)
            .map(|(&body, target)| {
                let mut potential = bodies.potential[body];
                let accel = bodies.accel[body];
                if let Some(others) = self.also_at.get(&body) {
                    // A source at distance 0 added m / sqrt(0 + eps^2) to psi (-psi to the
                    // potential) and nothing to the gradient.
                    let inv = 1.0 / softening2.sqrt();
                    for &other in others {
                        potential += masses[other] * inv;
                    }
                }
                if potential.is_finite() && accel.iter().all(|a| a.is_finite()) {
                    (potential, accel)
                } else {
                    let field = field_at_target(sources, masses, target, softening2);
                    (-field.psi, field.grad)
                }
            })
            .unzip()
    }
}

/// A position's coordinates as bit patterns, -0.0 taken as 0.0: equal keys exactly for
/// equal (finite) positions.
fn position_key(position: &[f64; 3]) -> [u64; 3] {
    position.map(|x| if x == 0.0 { 0 } else { x.to_bits() })
}
