//! Options of an evaluation, with documented defaults, and their validation.

use tutti_backend::{Device, KernelModule, Kernels, ProgressFn, Resources};

use crate::gpu::{M2L_MODULE, M2L_MODULE_FMAD, P2P_MODULE, P2P_MODULE_FMAD};
use crate::FmmError;

/// The largest expansion order accepted.
pub const MAX_ORDER: usize = 12;

/// The deepest tree level accepted: a cap on the refinement, which splits each cell in the
/// cube fitted to its own bodies.
pub const MAX_DEPTH: usize = 21;

/// Floating-point precision of the far-field (M2L) products.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Precision {
    /// Everything in f64.
    #[default]
    F64,
    /// Kernel derivatives and multipoles rounded to f32 and multiplied in f32; the local
    /// expansions accumulate in f64. Halves the M2L working set; accuracy-neutral while the
    /// FMM error is well above f32 rounding (about 1e-7 relative).
    F32,
}

/// The P2P and M2L modules a rank launches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernelModules {
    pub p2p: &'static KernelModule,
    pub m2l: &'static KernelModule,
}

impl KernelModules {
    /// The modules a rank on `device` launches under `kernels`, or `None` when it runs the
    /// host code; `fma` picks the modules compiled with FMA contraction.
    pub(crate) fn for_rank(kernels: Kernels, device: &Device, fma: bool) -> Option<Self> {
        kernels.on(device).then_some(if fma {
            KernelModules {
                p2p: &P2P_MODULE_FMAD,
                m2l: &M2L_MODULE_FMAD,
            }
        } else {
            KernelModules {
                p2p: &P2P_MODULE,
                m2l: &M2L_MODULE,
            }
        })
    }
}

/// The measured accuracy of each order at the default theta (0.5): the largest relative L2
/// acceleration error over the three committed distributions of `docs/fmm.md` (uniform
/// cube, Plummer sphere, thin disk, 10^4 bodies each, against their exact sums), which is
/// the Plummer sphere's at every order. Potentials are 5 to 40 times more accurate.
pub const MEASURED_ACCURACY: [(usize, f64); 9] = [
    (2, 1.23e-2),
    (3, 2.62e-3),
    (4, 6.78e-4),
    (5, 2.02e-4),
    (6, 6.58e-5),
    (7, 2.27e-5),
    (8, 7.84e-6),
    (9, 2.70e-6),
    (10, 8.53e-7),
];

/// The lowest order whose measured error ([`MEASURED_ACCURACY`], theta 0.5) is at most
/// `eps`, with that measured error: how a requested accuracy becomes options
/// ([`FmmOptions::for_accuracy`]).
///
/// Errors: [`FmmError::InvalidArgument`] for `eps` not finite and positive, or below the
/// best measured accuracy (8.53e-7 at order 10): ask for an order and theta instead.
pub fn order_for_accuracy(eps: f64) -> Result<(usize, f64), FmmError> {
    let best = MEASURED_ACCURACY[MEASURED_ACCURACY.len() - 1].1;
    if !(eps.is_finite() && eps > 0.0) {
        return Err(FmmError::invalid("eps", "a finite relative error > 0", eps));
    }
    MEASURED_ACCURACY
        .iter()
        .find(|(_, error)| *error <= eps)
        .copied()
        .ok_or_else(|| {
            FmmError::invalid(
                "eps",
                format!(
                    "a relative error >= {best:e}, the best measured (order 10, theta 0.5); \
                     for more, set the order (up to {MAX_ORDER}) and a smaller theta"
                ),
                eps,
            )
        })
}

/// Options of an FMM evaluation. `FmmOptions::default()` reaches a relative L2 error below
/// 1e-4 on accelerations and potentials for uniform, Plummer and thin-disk bodies
/// (see `docs/fmm.md`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct FmmOptions {
    /// Expansion order p (total degree of the Cartesian Taylor expansions), 1..=[`MAX_ORDER`].
    /// Default 7. The error falls roughly like theta^p.
    pub order: usize,
    /// Opening angle theta in (0, 1): a source cell B acts on a target cell A through its
    /// expansions when `r_A + r_B < theta * |z_A - z_B|` (radii and centres of the cells'
    /// bodies); otherwise the larger cell is split, and two leaves interact directly. Default 0.5.
    pub theta: f64,
    /// Largest number of bodies in a leaf, >= 1, unless the leaf is at `max_depth`. Default 64.
    pub leaf_size: usize,
    /// Deepest tree level, 1..=[`MAX_DEPTH`]; bounds the depth (and memory) for clustered or
    /// coincident bodies. Default 21.
    pub max_depth: usize,
    /// Plummer softening length epsilon >= 0: the kernel is 1/sqrt(r^2 + epsilon^2), in the
    /// units of the positions. Default 0 (exact Newtonian; coincident distinct bodies are then
    /// an error).
    pub softening: f64,
    /// Precision of the far-field products. Default [`Precision::F64`].
    pub far_field: Precision,
    /// Working memory per rank for the chunked M2L and P2P phases, in bytes; `None` (default)
    /// takes a quarter of the device budget from `tutti-plan`, at most 256 MiB.
    pub working_memory: Option<u64>,
    /// Items per chunk (M2L pairs, or P2P source bodies), overriding the size derived from
    /// the working memory. `None` by default. Must be >= 1.
    pub chunk_items: Option<usize>,
    /// Whether M2L and P2P run as device kernels or host code (tree, P2M, M2M, L2L and L2P
    /// run on the host either way). Default [`Kernels::Auto`]: kernels on GPUs, host code on
    /// simulated devices; [`Kernels::Always`] runs the kernels' host twins on simulated
    /// devices, the GPU path's bits without a GPU.
    pub kernels: Kernels,
    /// Whether GPU kernels may fuse multiply-adds (FMA). Default `true`: a GPU's results then
    /// agree with the host's to about 1e-15 relative. `false` makes the GPU perform the host
    /// code's operations in its order, so its results are the host's bit for bit, at some
    /// cost in speed. Simulated devices compute the host's bits either way.
    pub fused_multiply_add: bool,
    /// Where the evaluation runs: the devices (one rank each), their memory caps and the
    /// scratch space. Default [`Resources::default`]: every GPU, else one simulated device
    /// using all cores.
    pub resources: Resources,
    /// Called after each phase ([`PHASES`](crate::PHASES): task `"fmm"`, `done` of 5) by
    /// the process holding rank 0. Default `None`.
    pub progress: Option<ProgressFn>,
}

impl Default for FmmOptions {
    fn default() -> Self {
        Self {
            order: 7,
            theta: 0.5,
            leaf_size: 64,
            max_depth: MAX_DEPTH,
            softening: 0.0,
            far_field: Precision::F64,
            working_memory: None,
            chunk_items: None,
            kernels: Kernels::Auto,
            fused_multiply_add: true,
            resources: Resources::default(),
            progress: None,
        }
    }
}

impl FmmOptions {
    /// The defaults with the order chosen for a requested relative L2 error `eps` on
    /// accelerations ([`order_for_accuracy`]; theta stays 0.5).
    pub fn for_accuracy(eps: f64) -> Result<Self, FmmError> {
        let (order, _) = order_for_accuracy(eps)?;
        Ok(Self::default().with_order(order))
    }

    /// Sets the progress callback (see [`FmmOptions::progress`]).
    pub fn with_progress(mut self, progress: ProgressFn) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Sets the expansion order p.
    pub fn with_order(mut self, order: usize) -> Self {
        self.order = order;
        self
    }

    /// Sets the opening angle theta.
    pub fn with_theta(mut self, theta: f64) -> Self {
        self.theta = theta;
        self
    }

    /// Sets the leaf-size bound.
    pub fn with_leaf_size(mut self, leaf_size: usize) -> Self {
        self.leaf_size = leaf_size;
        self
    }

    /// Sets the depth cap.
    pub fn with_max_depth(mut self, max_depth: usize) -> Self {
        self.max_depth = max_depth;
        self
    }

    /// Sets the Plummer softening length.
    pub fn with_softening(mut self, softening: f64) -> Self {
        self.softening = softening;
        self
    }

    /// Sets the far-field precision.
    pub fn with_far_field(mut self, precision: Precision) -> Self {
        self.far_field = precision;
        self
    }

    /// Sets the working memory per rank, in bytes.
    pub fn with_working_memory(mut self, bytes: u64) -> Self {
        self.working_memory = Some(bytes);
        self
    }

    /// Overrides the chunk size (items per chunk).
    pub fn with_chunk_items(mut self, items: usize) -> Self {
        self.chunk_items = Some(items);
        self
    }

    /// Sets where M2L and P2P run.
    pub fn with_kernels(mut self, kernels: Kernels) -> Self {
        self.kernels = kernels;
        self
    }

    /// Lets GPU kernels fuse multiply-adds (`true`), or keeps the host's bits (`false`).
    pub fn with_fused_multiply_add(mut self, fma: bool) -> Self {
        self.fused_multiply_add = fma;
        self
    }

    /// Runs on these devices.
    pub fn with_resources(mut self, resources: Resources) -> Self {
        self.resources = resources;
        self
    }

    /// Checks every option against its documented range.
    pub fn validate(&self) -> Result<(), FmmError> {
        if !(1..=MAX_ORDER).contains(&self.order) {
            return Err(FmmError::invalid(
                "order",
                format!("an integer in 1..={MAX_ORDER}"),
                self.order,
            ));
        }
        if !(self.theta > 0.0 && self.theta < 1.0) {
            return Err(FmmError::invalid(
                "theta",
                "a number in the open interval (0, 1)",
                self.theta,
            ));
        }
        if self.leaf_size == 0 {
            return Err(FmmError::invalid("leaf_size", "an integer >= 1", 0));
        }
        if !(1..=MAX_DEPTH).contains(&self.max_depth) {
            return Err(FmmError::invalid(
                "max_depth",
                format!("an integer in 1..={MAX_DEPTH}"),
                self.max_depth,
            ));
        }
        if !(self.softening >= 0.0 && self.softening.is_finite()) {
            return Err(FmmError::invalid(
                "softening",
                "a finite number >= 0",
                self.softening,
            ));
        }
        if self.working_memory == Some(0) {
            return Err(FmmError::invalid("working_memory", "a byte count >= 1", 0));
        }
        if self.chunk_items == Some(0) {
            return Err(FmmError::invalid("chunk_items", "an integer >= 1", 0));
        }
        Ok(())
    }
}

/// Checks the bodies: equal lengths, finite positions and strengths.
pub(crate) fn validate_bodies(positions: &[[f64; 3]], masses: &[f64]) -> Result<(), FmmError> {
    if positions.len() != masses.len() {
        return Err(FmmError::LengthMismatch {
            positions: positions.len(),
            masses: masses.len(),
        });
    }
    for (index, position) in positions.iter().enumerate() {
        if let Some(&value) = position.iter().find(|x| !x.is_finite()) {
            return Err(FmmError::NonFinite {
                argument: "positions",
                index,
                value,
            });
        }
    }
    if let Some((index, &value)) = masses.iter().enumerate().find(|(_, m)| !m.is_finite()) {
        return Err(FmmError::NonFinite {
            argument: "masses",
            index,
            value,
        });
    }
    Ok(())
}

/// Checks target points: finite coordinates (argument `targets`, index the target's).
pub(crate) fn validate_targets(targets: &[[f64; 3]]) -> Result<(), FmmError> {
    for (index, target) in targets.iter().enumerate() {
        if let Some(&value) = target.iter().find(|x| !x.is_finite()) {
            return Err(FmmError::NonFinite {
                argument: "targets",
                index,
                value,
            });
        }
    }
    Ok(())
}
