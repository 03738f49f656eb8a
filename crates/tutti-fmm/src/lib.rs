//! tutti workload `fmm`: the 3-D Laplace fast multipole method, split among devices by
//! domains.
//!
//! For N bodies with positions x_j and strengths m_j (masses, or charges of either sign) it
//! computes, with G = 1 and optional Plummer softening eps,
//!
//! ```text
//! phi_i = -sum_{j != i} m_j / sqrt(r_ij^2 + eps^2)
//! a_i   = -sum_{j != i} m_j (x_i - x_j) / (r_ij^2 + eps^2)^(3/2)
//! ```
//!
//! in O(N) time to a chosen accuracy. [`fmm_at_targets`] evaluates the same field at
//! separate target points instead, leaving out any source at exactly a target's position.
//!
//! Method (details in `docs/fmm.md`):
//! - an adaptive octree over Morton-sorted bodies, leaves of at most `leaf_size` bodies
//!   unless at the depth cap `max_depth`;
//! - Cartesian Taylor expansions of total degree p (Dehnen 2000, 2014): P2M, M2M, M2L, L2L,
//!   L2P, with the kernel derivatives from a recurrence that also covers softening;
//! - interaction lists from a dual-tree traversal with the opening criterion
//!   `r_A + r_B < theta |z_A - z_B|`, near leaves summed directly (P2P);
//! - the target leaves split among ranks along the Morton curve by estimated cost; each rank
//!   computes its subtrees' multipoles and receives the others it needs through an
//!   all-to-all; M2L and P2P run in chunks bounded by the working memory (`tutti-plan`).
//!
//! The result does not depend on the number of devices: every expansion is built from the
//! same operations in the same order.
//!
//! ```
//! use tutti_fmm::{direct, fmm, FmmOptions};
//!
//! let positions = vec![[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0]];
//! let masses = vec![1.0, 2.0, -0.5];
//! let out = fmm(&positions, &masses, &FmmOptions::default())?;
//! let (phi, acc) = direct(&positions, &masses, 0.0)?;
//! assert!((out.potential[0] - phi[0]).abs() < 1e-14);
//! assert!((out.accel[0][0] - acc[0][0]).abs() < 1e-14);
//! assert_eq!(out.potential[0], -(2.0 / 1.0 - 0.5 / 2.0));
//! # Ok::<(), tutti_fmm::FmmError>(())
//! ```
#![deny(missing_docs)]

/// What this workload runs on a GPU: nothing yet, so `auto` keeps it on simulated devices,
/// which run the same host code as a GPU rank would on the same share of the cores. An
/// explicit GPU request still opens the GPUs (their ranks compute on the host).
pub const GPU_USE: tutti_backend::GpuUse = tutti_backend::GpuUse::HostOnly;

/// The phases an evaluation reports to [`FmmOptions::progress`], in order: the tree and
/// interaction lists; P2M and M2M with the multipole exchange; M2L and L2L; L2P and P2P;
/// the fields gathered in input order.
pub const PHASES: [&str; 5] = ["tree", "upward", "far field", "near field", "gather"];

mod basis;
mod direct;
mod error;
mod evaluate;
mod far;
pub mod gpu;
pub mod io;
mod kernel;
mod memory;
mod near;
mod operators;
mod options;
mod partition;
mod solve;
mod traversal;
mod tree;

pub use direct::{direct, direct_at_targets, direct_sum, relative_l2, sampled_error, SampledError};
pub use error::FmmError;
pub use options::{
    order_for_accuracy, FmmOptions, Precision, MAX_DEPTH, MAX_ORDER, MEASURED_ACCURACY,
};
pub use solve::{fmm, fmm_at_targets, fmm_at_targets_on, fmm_on, plan, FmmInfo, FmmOutput};
pub use tutti_backend::{Kernels, Progress, ProgressFn};
