//! tutti workload `sweep`: successive randomized compression (SRC) of tensor-train stacks,
//! one sweep split among the devices of a node.
//!
//! Users of tensor networks apply operators (MPOs) to states (MPS), multiply operators, or
//! compress a train, and need the result at a bond dimension chi. [`src`] does this for a
//! whole stack in one randomized sweep (Camaño, Epperly & Tropp), far cheaper than contracting
//! then truncating ([`compress_exact`], the optimal baseline).
//!
//! - Trains: [`TensorTrain`] (MPS or MPO, `f64` or complex128, rectangular physical legs) in
//!   memory, [`NpyTrain`] on disk (the `.npy` directory format, streamed lazily by a loader
//!   thread), both [`Layer`]s of a stack; [`write_train`] writes the format atomically.
//! - Stacks are in mathematical order: `[U3, U2, U1, psi]` is U3·U2·U1|psi>; an MPS may only
//!   come first (a bra, NOT conjugated) or last (a ket).
//! - [`src`], [`apply`], [`compress`] with [`SrcOptions`] (chi_out, oversample, cutoff, seed,
//!   resources); [`compress_exact`]; [`inner`], [`norm`], [`distance`] by contraction.
//! - Split among devices ([`SrcOptions::resources`], a `tutti_backend::Resources`): each
//!   rank owns a block of sketch columns; draws are keyed by (seed, site, column), so any
//!   device count gives the one-device result to rounding, bitwise repeatable run to run.
//! - Planned: [`plan`] lists the sweep's large objects for `tutti-plan` within the devices'
//!   memory and caps; [`src`] makes the same plan first and refuses one that does not fit.
//!
//! ```
//! use tutti_sweep::{heisenberg_xxz, src, Layer, SrcOptions, TensorTrain, TrainKind};
//! # fn main() -> Result<(), tutti_sweep::SweepError> {
//! // A product state |up up ... up> on 6 sites, and H of the XXZ chain.
//! let up = (0..6).map(|_| (vec![1, 2, 1], vec![1.0, 0.0])).collect();
//! let psi = TensorTrain::<f64>::from_arrays(TrainKind::Mps, up)?;
//! let h = heisenberg_xxz(6, 1.0, 0.5, 0.0)?;
//! let (h_psi, info) = src(&[&h as &dyn Layer<f64>, &psi], &SrcOptions::new(4).with_seed(1))?;
//! // <up..up| H |up..up> = 5 bonds * Delta/4.
//! assert!((tutti_sweep::inner(&psi, &h_psi)? - 5.0 * 0.5 / 4.0).abs() < 1e-12);
//! assert!(info.bonds.iter().all(|&b| b <= 4));
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

/// What this workload runs on a GPU: nothing yet, so `auto` keeps it on simulated devices,
/// which run the same host code as a GPU rank would on the same share of the cores. An
/// explicit GPU request still opens the GPUs (their ranks compute on the host).
pub const GPU_USE: tutti_backend::GpuUse = tutti_backend::GpuUse::HostOnly;

mod cholesky_qr;
mod contract;
#[doc(hidden)]
pub mod device_check;
mod device_tensor;
mod distributed;
mod environments;
mod error;
mod exact;
mod executor;
mod footprint;
pub mod gpu;
mod layer;
mod linalg;
mod memory;
mod models;
mod npy_io;
mod scalar;
mod shared_cores;
mod sketch;
mod src;
mod stack;
mod tensor;
mod train;

pub use contract::{distance, exact_product, inner, norm, right_orthonormality_error};
pub use error::SweepError;
pub use exact::{compress_exact, ExactInfo};
pub use layer::{load, CoreStream, Layer};
pub use models::heisenberg_xxz;
pub use npy_io::{read_train, write_train, FileDtype, NpyTrain};
pub use scalar::Scalar;
pub use src::{
    apply, compress, plan, src, src_on, EnvironmentInfo, Pass, ProgressFn, QrInfo, SrcInfo,
    SrcOptions, SweepProgress,
};
pub use train::{Core, CoreShape, TensorTrain, TrainKind};
pub use tutti_backend::Complex64;
