//! Successive randomized compression (SRC) of a stack: options, entry points, diagnostics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tutti_backend::{Device, Kernels, Resources};
use tutti_group::Group;
use tutti_plan::{Budget, Plan, Planner, SpillStore, Tier};

use crate::distributed::{share_train, sweep_rank, RankReport, SweepJob};
use crate::exact::{check_chi_cutoff, compress_exact, right_canonicalize, truncate_left_to_right};
use crate::layer::Layer;
use crate::shared_cores::StackPasses;
use crate::stack::Stack;
use crate::train::TensorTrain;
use crate::{Scalar, SweepError};

/// Which pass of the sweep a progress report belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// Left to right: sketched environments.
    Sketch,
    /// Right to left: QR of the sketch, projected environments.
    Orthogonalize,
}

/// One progress report: `site` of `sites` in `pass` is starting (reported by rank 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepProgress {
    /// The pass.
    pub pass: Pass,
    /// The site (0-based).
    pub site: usize,
    /// The number of sites.
    pub sites: usize,
}

impl SweepProgress {
    /// This report in the shape every workload reports in (the CLI's bar, the C and Python
    /// callbacks): task `"sweep"`, stage the pass, `done` of `total` its sites. The sketch
    /// pass visits sites 0..n-2 left to right, the orthogonalization pass n-1 down to 0.
    pub fn as_progress(&self) -> tutti_backend::Progress<'static> {
        let (stage, done, total) = match self.pass {
            Pass::Sketch => (
                "sketch (left to right)",
                self.site.saturating_add(1),
                self.sites.saturating_sub(1),
            ),
            Pass::Orthogonalize => (
                "orthogonalize (right to left)",
                self.sites.saturating_sub(self.site),
                self.sites,
            ),
        };
        tutti_backend::Progress {
            task: "sweep",
            stage,
            done: done as u64,
            total: total as u64,
            value: None,
        }
    }
}

/// A progress callback.
pub type ProgressFn = Arc<dyn Fn(SweepProgress) + Send + Sync>;

/// Options of [`src`].
///
/// Defaults ([`SrcOptions::new`]): no oversampling, no cutoff, seed 0,
/// [`Resources::default`] (every GPU, else one simulated device owning all cores), no
/// progress reports.
#[derive(Clone)]
#[non_exhaustive]
pub struct SrcOptions {
    /// The largest bond of the result (at least 1).
    pub chi_out: usize,
    /// Extra sketch columns k: the sweep keeps bonds up to `chi_out + k`, then one SVD
    /// truncation sweep brings them down to `chi_out`. 0: plain SRC.
    pub oversample: usize,
    /// Relative singular-value cutoff, in [0, 1): when positive (or with oversampling), the
    /// final SVD truncation sweep keeps at each bond only the singular values
    /// `sigma_i > cutoff * sigma_0`, `sigma_0` the largest at that bond (and at most
    /// `chi_out`, at least one). 0 keeps up to `chi_out`.
    pub cutoff: f64,
    /// The seed of the sketch: the draws for sketch column j at site k depend only on
    /// (seed, k, j).
    pub seed: u64,
    /// The devices to split the sweep among, and the memory caps its plan must honour.
    pub resources: Resources,
    /// Called by rank 0 at the start of every site of both passes.
    pub progress: Option<ProgressFn>,
    /// Whether a rank's contractions run on its device (`Device::gemm`, the permutation and
    /// sketch kernels) or on the host. Default [`Kernels::Auto`]: on the device for GPU
    /// ranks, on the host for simulated devices; [`Kernels::Always`] runs the device path on
    /// simulated devices too (the host implementations of the same calls: the host path's
    /// bits, for tests). The QR runs on the host either way.
    pub kernels: Kernels,
    /// Whether the QR of each site's sketched matrix is split among the ranks (default
    /// `false`: on 2 ranks of a 2-core host it measured no faster, see docs/sweep.md,
    /// "Distributed QR"): a distributed CholeskyQR2 (shifted CholeskyQR3 for an ill-conditioned
    /// sketch) over row blocks of the matrix, falling back to a Householder QR at rank 0 for
    /// a sketch too ill-conditioned for it. `false`: every site's QR is a Householder QR at
    /// rank 0 while the other ranks wait. One device always runs the Householder QR.
    pub distributed_qr: bool,
}

impl std::fmt::Debug for SrcOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SrcOptions")
            .field("chi_out", &self.chi_out)
            .field("oversample", &self.oversample)
            .field("cutoff", &self.cutoff)
            .field("seed", &self.seed)
            .field("resources", &self.resources)
            .field("progress", &self.progress.is_some())
            .field("kernels", &self.kernels)
            .field("distributed_qr", &self.distributed_qr)
            .finish()
    }
}

impl SrcOptions {
    /// Options for a result with bonds <= `chi_out`, every other option at its default.
    pub fn new(chi_out: usize) -> Self {
        Self {
            chi_out,
            oversample: 0,
            cutoff: 0.0,
            seed: 0,
            resources: Resources::default(),
            progress: None,
            kernels: Kernels::Auto,
            distributed_qr: false,
        }
    }

    /// With `k` extra sketch columns.
    pub fn with_oversample(mut self, k: usize) -> Self {
        self.oversample = k;
        self
    }

    /// With a relative singular-value cutoff.
    pub fn with_cutoff(mut self, cutoff: f64) -> Self {
        self.cutoff = cutoff;
        self
    }

    /// With this seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Split among these devices, within their caps.
    pub fn with_resources(mut self, resources: Resources) -> Self {
        self.resources = resources;
        self
    }

    /// With a progress callback.
    pub fn with_progress(mut self, progress: ProgressFn) -> Self {
        self.progress = Some(progress);
        self
    }

    /// With the contractions on the devices or the host, as `kernels` says.
    pub fn with_kernels(mut self, kernels: Kernels) -> Self {
        self.kernels = kernels;
        self
    }

    /// With the QR of the sketched matrices split among the ranks (`true`) or at rank 0.
    pub fn with_distributed_qr(mut self, distributed_qr: bool) -> Self {
        self.distributed_qr = distributed_qr;
        self
    }
}

/// Diagnostics of [`src`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SrcInfo {
    /// The sketch width: `chi_out + oversample`, at most the largest bond the product can
    /// have (wider sketches could not raise any bond; a huge `chi_out` costs nothing).
    pub sketch_width: usize,
    /// The bonds of the result, `[1, ..., 1]`.
    pub bonds: Vec<usize>,
    /// `||result||` (the Frobenius norm of site 0: the result is right-canonical).
    pub norm: f64,
    /// The number of devices (ranks) the sweep was split among.
    pub devices: usize,
    /// Wall-clock seconds of the whole call.
    pub seconds: f64,
    /// Whether the stack was too short (2 sites) and was contracted exactly instead.
    pub exact_fallback: bool,
    /// The weight (sum of squared singular values) the final truncation sweep discarded.
    pub truncated_weight: f64,
    /// How the sketched matrices were factored, as rank 0 saw it.
    pub qr: QrInfo,
    /// Where the sketched environments lived between the passes, and the bytes spilled.
    pub environments: EnvironmentInfo,
    /// The memory plan the sweep ran under (see [`plan`]).
    pub plan: Plan,
}

/// Where the sketched environments lived between the two passes of a sweep, part of
/// [`SrcInfo`]: how many sites' environments the memory plan put on each tier, and what the
/// disk tier cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EnvironmentInfo {
    /// Environments held where the ranks compute.
    pub on_device: usize,
    /// Environments kept in host memory.
    pub on_host: usize,
    /// Environments written to spill files in the scratch directory and read back.
    pub on_disk: usize,
    /// Bytes written to spill files, summed over the ranks of this process (a process of a
    /// group spanning processes counts its own rank).
    pub spilled_bytes: u64,
}

/// Diagnostics of the QR of the sketched matrices (one per site, n-1 down to 1), part of
/// [`SrcInfo`].
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct QrInfo {
    /// Sites whose QR was split among the ranks (distributed CholeskyQR2 or shifted
    /// CholeskyQR3).
    pub distributed: usize,
    /// Of those, the sites that took the shifted path (an ill-conditioned sketch).
    pub shifted: usize,
    /// Sites factored by Householder QR at rank 0: every site on one device or with
    /// [`SrcOptions::distributed_qr`] off, else the sketches too ill-conditioned for the
    /// distributed QR (numerically rank-deficient, condition number near 1e16 or beyond).
    pub householder: usize,
    /// The largest `||Q^H Q - I||_F` the distributed QRs reached, measured over the ranks (0
    /// when none ran); at most `2 (sqrt(m n + n(n+1)) + n) 2^-53` for an `m x n` sketch.
    pub worst_orthogonality: f64,
    /// Wall-clock seconds rank 0 spent in the QR step of the right-to-left pass:
    /// exchanging the sketched matrix, factoring it, and handing out the new core's rows.
    pub seconds: f64,
}

/// Whether the note on 2-site stacks was logged (once per process; an atomic, not a `Once`,
/// so that nothing can be poisoned by a logger that fails).
static SHORT_TRAIN_NOTED: AtomicBool = AtomicBool::new(false);

/// Compresses the product of a stack of trains to bonds <= `chi_out` in one randomized sweep.
///
/// `layers` are in mathematical order: `src(&[u3, u2, u1, psi], ..)` is U3·U2·U1|psi>. An MPS
/// may appear only first (a bra, NOT conjugated: `[phi, a, b]` is phi^T A B) or last (a ket);
/// the result is an MPS if there is one, else an MPO. Layers may be in memory
/// ([`TensorTrain`]) or on disk ([`crate::NpyTrain`], streamed site by site).
///
/// The method (Camaño, Epperly & Tropp): a Gaussian Khatri–Rao sketch of width
/// `s = chi_out + oversample` is contracted left to right into sketched environments; a right
/// to left sweep then forms at each site the sketched matrix (environment x stacked cores x
/// projected right environment), whose QR gives the new right-orthonormal core, and the next
/// projected environment. With oversampling or a cutoff, one SVD truncation sweep follows.
/// The result is right-canonical (sites 1..n-1 right-orthonormal, site 0 carries the norm) with
/// bonds <= `chi_out`; it is exact (to rounding) when `s` is at least every bond of the exact
/// product's minimal representation.
///
/// The sweep is split among the devices of `options.resources` by sketch columns (one rank
/// per device; a group of one runs inline on the caller's thread); any device count gives
/// the one-device result to rounding, and the same seed and device count give the same bits
/// run to run. Before any work the sweep's large objects are planned within the devices'
/// memory (and the caps of `options.resources`) by [`plan`]: a working set that does not fit
/// is refused up front with the planner's numbers. Environments the plan puts on the host
/// tier are moved there between the passes; those it puts on the disk tier are spilled to a
/// private directory under the scratch directory of `options.resources` (within its scratch
/// limit) and read back, one site ahead, during the right-to-left pass; the directory is
/// removed when the call returns, fails or unwinds. The tiers never change the result's bits.
///
/// Stacks of two sites are contracted exactly ([`compress_exact`]; a note goes to the `log`
/// facade at info level, once); one site is an error. The library never prints.
///
/// The sketch width is clamped to the largest bond the product can have at any site (the
/// smaller of the physical dimensions on either side and the product of the layers' bonds),
/// so `chi_out` may be anything from 1 up: `usize::MAX` means "exact".
///
/// Errors: an empty stack, trains of different lengths, an MPS in the middle, a bra times a
/// ket, mismatched physical legs or bonds, a single site, `chi_out = 0`, a cutoff outside
/// [0, 1), unusable devices ([`SweepError::Group`]: none, an unknown ordinal, a GPU request
/// without CUDA, a cap larger than a device), a plan that does not fit
/// ([`SweepError::Plan`]), unreadable or non-finite cores, a spill file that cannot be
/// written or read.
pub fn src<T: Scalar>(
    layers: &[&dyn Layer<T>],
    options: &SrcOptions,
) -> Result<(TensorTrain<T>, SrcInfo), SweepError> {
    checked_stack(layers, options)?;
    let group = Group::from_resources(&options.resources, crate::GPU_USE)?;
    src_on(&group, layers, options)
}

/// [`src`] on a group made by the caller: the way to sweep across processes, on a
/// [`Group::spanning`] group whose other ranks are other MPI processes running the same
/// program on the same layers and options. Every process reads the layers itself and
/// computes its block of sketch columns; rank 0's result train is then broadcast, so every
/// process returns it, equal to the result of a group of as many threads (the same ranks
/// do the same arithmetic). `options.resources` still gives the memory caps the plan is
/// checked against; the group gives the devices.
pub fn src_on<T: Scalar>(
    group: &Group,
    layers: &[&dyn Layer<T>],
    options: &SrcOptions,
) -> Result<(TensorTrain<T>, SrcInfo), SweepError> {
    let started = Instant::now();
    // A failure before the run releases the other processes of a spanning group.
    let (stack, width) = group.before_run(checked_stack(layers, options))?;
    let devices = group.size();
    // The budget is this process's devices; the columns are split among all ranks.
    let plan = group.before_run(plan_on(
        &stack,
        layers,
        width,
        (group.devices(), devices),
        &options.resources,
    ))?;
    log::debug!("tutti-sweep: memory plan\n{plan}");
    let environment_tiers = environment_tiers(&plan, stack.sites);
    // The spill directory lives as long as this call: it goes on success, on error and
    // while unwinding from a panic.
    let spill =
        if environment_tiers.contains(&Tier::Disk) {
            Some(group.before_run(
                SpillStore::for_resources(&options.resources).map_err(SweepError::from),
            )?)
        } else {
            None
        };
    if stack.sites == 2 {
        // Every path of a spanning group meets the others in one run: a process that failed
        // its checks above waits in that run's first round (`before_run`).
        if group.is_spanning() {
            group.run(|_| Ok::<(), SweepError>(()))?;
        }
        if !SHORT_TRAIN_NOTED.swap(true, Ordering::Relaxed) {
            log::info!(
                "tutti-sweep: a 2-site stack is contracted exactly (SRC needs 3 sites or more)"
            );
        }
        let (train, exact) = compress_exact(layers, options.chi_out, options.cutoff)?;
        let info = SrcInfo {
            sketch_width: width,
            bonds: train.bonds(),
            norm: crate::contract::norm(&train),
            devices,
            seconds: started.elapsed().as_secs_f64(),
            exact_fallback: true,
            truncated_weight: exact.discarded_weight,
            qr: QrInfo::default(),
            environments: EnvironmentInfo::default(),
            plan,
        };
        return Ok((train, info));
    }
    let job = SweepJob {
        stack: &stack,
        width,
        seed: options.seed,
        progress: options.progress.as_ref(),
        kernels: options.kernels,
        distributed_qr: options.distributed_qr,
        environment_tiers: &environment_tiers,
        spill: spill.as_ref(),
    };
    // This process's ranks read the layers once per pass, together.
    let passes = StackPasses::new(&stack, layers, group.local_ranks().len());
    // A process of a group spanning processes holds one rank: rank 0 shares its train, so
    // that every process returns the result.
    let results = if group.is_spanning() {
        group.run(|comm| {
            let (train, qr) = sweep_rank(comm, &passes, &job)?;
            Ok::<_, SweepError>((Some(share_train(comm, train)?), qr))
        })?
    } else {
        group.run(|comm| sweep_rank(comm, &passes, &job))?
    };
    let spilled_bytes = results
        .iter()
        .fold(0u64, |sum, (_, report)| sum.saturating_add(report.spilled));
    let (train, RankReport { qr, .. }) = results
        .into_iter()
        .next()
        .and_then(|(train, report)| Some((train?, report)))
        .ok_or_else(|| SweepError::RankStart {
            rank: 0,
            message: "rank 0 returned no result".into(),
        })?;
    // The result is good: a spill directory that cannot be removed (its files are gone
    // already) is worth a warning, not the loss of the result.
    if let Some(store) = spill {
        if let Err(error) = store.close() {
            log::warn!("tutti-sweep: {error}");
        }
    }
    let count = |tier| {
        environment_tiers[1..]
            .iter()
            .filter(|&&t| t == tier)
            .count()
    };
    let environments = EnvironmentInfo {
        on_device: count(Tier::Device),
        on_host: count(Tier::Host),
        on_disk: count(Tier::Disk),
        spilled_bytes,
    };
    let (train, truncated_weight) = if options.oversample > 0 || options.cutoff > 0.0 {
        let (left, weight) = truncate_left_to_right(train, options.chi_out, options.cutoff)?;
        (right_canonicalize(left), weight)
    } else {
        (train, 0.0)
    };
    let norm = train
        .cores()
        .first()
        .map(|c| c.data.iter().map(|x| x.abs2()).sum::<f64>().sqrt())
        .unwrap_or(0.0);
    let info = SrcInfo {
        sketch_width: width,
        bonds: train.bonds(),
        norm,
        devices,
        seconds: started.elapsed().as_secs_f64(),
        exact_fallback: false,
        truncated_weight,
        qr,
        environments,
        plan,
    };
    Ok((train, info))
}

/// The memory plan [`src`] makes before any work: the sweep's large objects (the layers'
/// cores its streams hold, the sketch vectors of a site, the contraction work buffers, the
/// buffers of the collectives, the sketched environments, the result), sized from the
/// stack's shapes and the sketch width, placed by [`tutti_plan::Planner`] within
/// [`Budget::from_devices`] of the devices `options.resources` selects (their free memory,
/// the caps, the host's memory and the scratch disk).
///
/// The per-site objects must live on the device tier; the core copies may move to the host
/// tier; each site's sketched environment (`environment k`, k = 1..n-1) goes to the device,
/// host or disk tier, those the right-to-left pass reads first (high k) first. When some
/// environment is off the device, `staged environments` (two of the largest, the one in use
/// and the next) join the per-site objects and the plan is made again. On simulated devices
/// the device and host tiers are both host memory. A 2-site stack, contracted exactly
/// instead, plans that contraction: the layers loaded and the product's cores with their
/// factorisation.
///
/// Errors: those of [`src`]'s checks of the stack and options, [`SweepError::Group`] for
/// unusable devices, [`SweepError::Plan`] when an object fits on no tier (the message gives
/// what was needed and what was free: with the scratch limit, a sweep that would spill more
/// is refused here, before any work).
pub fn plan<T: Scalar>(layers: &[&dyn Layer<T>], options: &SrcOptions) -> Result<Plan, SweepError> {
    let (stack, width) = checked_stack(layers, options)?;
    let devices = options
        .resources
        .select_for(crate::GPU_USE)
        .map_err(tutti_group::GroupError::from)?;
    plan_on(
        &stack,
        layers,
        width,
        (&devices, devices.len()),
        &options.resources,
    )
}

/// The validated stack and the clamped sketch width.
fn checked_stack<T: Scalar>(
    layers: &[&dyn Layer<T>],
    options: &SrcOptions,
) -> Result<(Stack, usize), SweepError> {
    check_chi_cutoff(options.chi_out, options.cutoff)?;
    let stack = Stack::new(layers)?;
    if stack.sites < 2 {
        return Err(SweepError::InvalidStack {
            detail: "a single site: there is no bond to compress".into(),
        });
    }
    // No bond of the result can exceed the product's largest possible bond, so neither can a
    // useful sketch: clamping keeps every rank and result as it was and bounds the buffers.
    let width = options
        .chi_out
        .saturating_add(options.oversample)
        .min(stack.max_bond());
    Ok((stack, width))
}

/// The plan of one sweep within the budget of `devices` (this process's), its sketch
/// columns split among `ranks` ranks (over all processes).
fn plan_on<T: Scalar>(
    stack: &Stack,
    layers: &[&dyn Layer<T>],
    width: usize,
    (devices, ranks): (&[Device], usize),
    resources: &Resources,
) -> Result<Plan, SweepError> {
    let planner = Planner::new(Budget::from_devices(devices, resources)?);
    if stack.sites == 2 {
        return Ok(planner.plan(&crate::footprint::exact_objects::<T>(stack))?);
    }
    let mut objects = crate::footprint::objects(stack, layers, width, ranks);
    let plan = planner.plan(&objects)?;
    if environment_tiers(&plan, stack.sites)
        .iter()
        .all(|&tier| tier == Tier::Device)
    {
        return Ok(plan);
    }
    let largest = (1..stack.sites)
        .filter_map(|k| plan.placement(&crate::footprint::environment_name(k)))
        .map(|p| p.object.count())
        .max()
        .unwrap_or(0);
    let element = std::mem::size_of::<T>() as u64;
    objects.insert(0, crate::footprint::staged_environments(element, largest));
    Ok(planner.plan(&objects)?)
}

/// The tier of each site's environment in `plan` (index 0, and any site the plan does not
/// name, on the device tier).
fn environment_tiers(plan: &Plan, sites: usize) -> Vec<Tier> {
    (0..sites)
        .map(|k| {
            plan.tier_of(&crate::footprint::environment_name(k))
                .unwrap_or(Tier::Device)
        })
        .collect()
}

/// `a · b` compressed to bonds <= `options.chi_out`: [`src`] on the stack `[a, b]` (an
/// operator times a state or an operator, or a bra times an operator).
pub fn apply<T: Scalar>(
    a: &dyn Layer<T>,
    b: &dyn Layer<T>,
    options: &SrcOptions,
) -> Result<(TensorTrain<T>, SrcInfo), SweepError> {
    src(&[a, b], options)
}

/// One train compressed to bonds <= `options.chi_out`: [`src`] on the stack `[train]`.
pub fn compress<T: Scalar>(
    train: &dyn Layer<T>,
    options: &SrcOptions,
) -> Result<(TensorTrain<T>, SrcInfo), SweepError> {
    src(&[train], options)
}
