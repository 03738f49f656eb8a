//! tutti's C ABI: the library `libtutti.so` / `libtutti.a` and its header `include/tutti.h`.
//!
//! # The contract, for every entry point
//!
//! - Every function is `#[no_mangle] pub extern "C"` and returns an `int` holding one value
//!   of [`TuttiStatus`]: `TUTTI_OK` (0) on success, a negative error kind otherwise. Callers
//!   must treat any negative value as an error, including kinds added by later versions.
//! - Panics never cross the boundary: each entry point runs inside
//!   [`boundary::ffi_call`], which turns a panic into `TUTTI_ERROR_PANIC`.
//! - Each call of an entry point that returns a status replaces the calling thread's last
//!   error message: empty on success, a sentence naming the function and the argument at
//!   fault on failure. [`tutti_last_error`] reads it.
//! - Outputs are written only on success; on failure the caller's memory is left untouched.
//! - NULL pointers and empty inputs are errors (`TUTTI_ERROR_NULL_POINTER`,
//!   `TUTTI_ERROR_INVALID_ARGUMENT`), never crashes, with one exception: a NULL options
//!   pointer means the defaults, for every function that takes options. Each pointer
//!   argument is checked by the helpers of [`boundary`].
//! - Every workload call says where it runs through the `resources` field of its options
//!   ([`TuttiResources`]): device kind, count or ordinals, memory caps, scratch directory.
//! - The free_c contract: every buffer or object the library returns is allocated by Rust
//!   and released exactly once with [`tutti_free_c`] (never with C's `free`). Freeing NULL is
//!   a no-op.
//!
//! # Layout
//!
//! The core, shared by every entry point: [`status`] (the status enum and the error a call
//! fails with), [`boundary`] (the panic boundary, the last error and the argument checks),
//! [`memory`] (buffers handed to C and [`tutti_free_c`]), [`resources`] (`TuttiResources`: where
//! every workload call runs). Entry points live in one module per
//! area: [`version`], [`devices`], [`fit`], [`fmm`], [`adjoint`], [`adjoint_gradient`],
//! [`train`], [`sweep`], [`sparse`], [`world`] (MPI processes), and [`progress`] (the callback every
//! workload's options carry); a workload adds its own module on the same core. The modules are ordinary
//! Rust, tested from Rust; the `cdylib` and `staticlib` are a thin artifact over them.
//!
//! The header is generated from this crate by cbindgen (`cargo xtask header`): doc comments
//! here are the C documentation.
#![deny(missing_docs)]

pub mod adjoint;
pub mod adjoint_gradient;
pub mod boundary;
pub mod devices;
pub mod fit;
pub mod fmm;
pub mod memory;
pub mod progress;
pub mod resources;
pub mod sparse;
pub mod status;
pub mod sweep;
pub mod train;
pub mod version;
pub mod world;

pub use adjoint::{
    tutti_rhf_energy, tutti_rhf_energy_bohr, tutti_rhf_matrices_free, tutti_rhf_options_default,
    TuttiRhfMatrices, TuttiRhfOptions, TuttiRhfResult,
};
pub use adjoint_gradient::{
    tutti_gradient_options_default, tutti_rhf_gradient, tutti_rhf_gradient_free,
    TuttiGradientOptions, TuttiGradientShell, TuttiGradientTimings, TuttiRhfGradient,
};
pub use boundary::tutti_last_error;
pub use devices::{
    tutti_device_count, tutti_device_info, TuttiDeviceInfo, TuttiKind, TUTTI_MAX_SIMULATED_DEVICES,
};
pub use fit::{
    tutti_fit, tutti_fit_options_default, TuttiFitOptions, TuttiFitResult, TuttiResidualFn,
    TUTTI_TERMINATION_CALLBACK, TUTTI_TERMINATION_COST, TUTTI_TERMINATION_GRADIENT,
    TUTTI_TERMINATION_MAX_ITERATIONS, TUTTI_TERMINATION_STEP,
};
pub use fmm::{
    tutti_direct_sum, tutti_fmm, tutti_fmm_options_default, tutti_fmm_targets, TuttiFmmOptions,
};
pub use memory::tutti_free_c;
pub use progress::{TuttiProgress, TuttiProgressCallback, TuttiProgressFn};
pub use resources::{tutti_resources_default, TuttiKernels, TuttiResources, TUTTI_ALL_DEVICES};
pub use sparse::{
    tutti_sparse_analyse, tutti_sparse_factor, tutti_sparse_factor_c128, tutti_sparse_free,
    tutti_sparse_info, tutti_sparse_options_default, tutti_sparse_solve, tutti_sparse_solve_c128,
    TuttiSparse, TuttiSparseInfo, TuttiSparseLayout, TuttiSparseOptions, TuttiSparseSolveInfo,
};
pub use status::{tutti_status_name, Error, TuttiStatus};
pub use sweep::{tutti_src, tutti_src_options_default, TuttiSrcOptions};
pub use train::{
    tutti_train_distance, tutti_train_free, tutti_train_from_arrays, tutti_train_from_dir,
    tutti_train_info, tutti_train_norm, tutti_train_shapes, tutti_train_site,
    tutti_train_write_dir, TuttiDtype, TuttiTrain, TuttiTrainKind,
};
pub use version::tutti_version;
pub use world::{tutti_world_free, tutti_world_from_fcomm, tutti_world_info, TuttiWorld};
