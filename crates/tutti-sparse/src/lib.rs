//! A multifrontal sparse LU for tutti, over a nested-dissection tree fixed independently of
//! the device count.
//!
//! - [`CsrMatrix`]: sparse matrices, real (`CsrMatrix<f64>`, the default) or complex
//!   (`CsrMatrix<c64>`), validated on construction (rows sorted, duplicates summed, every
//!   entry finite); [`matrix_market`] reads and writes `.mtx` files, real and complex;
//!   [`Assembly`] maps a caller's compressed rows or columns onto it once, for refactoring
//!   with new values in the caller's order.
//! - [`models`]: the matrices of the tests and benchmarks (Laplacians, convection-diffusion,
//!   reaction-diffusion Jacobians on 2-D and 3-D grids, b coupled species per point; a
//!   damped Helmholtz and a time-harmonic convection-diffusion operator in complex).
//! - [`Scalar`]: what the solver factors in, `f64` or [`c64`] (faer's complex double),
//!   sealed. Every numeric type below takes it as a parameter defaulting to `f64`;
//!   magnitudes (pivoting, norms, backward errors) are `|z|`.
//! - [`Graph`]: the adjacency of `A + A^T`, what the ordering dissects.
//! - [`ordering`]: nested dissection, geometric for grids and by level structures for any
//!   graph, giving a [`SeparatorTree`]: the fill-reducing order and the assembly tree.
//! - [`Symbolic`]: the analysis of a pattern (fronts, assembly maps, predicted fill and
//!   flops), made once and shared by every [`Factorization`] of that pattern.
//! - [`Factorization`]: the multifrontal LU (partial pivoting among each front's fully
//!   summed rows, static perturbation of tiny pivots), refactorization with new values, and
//!   solves with iterative refinement for one or many right-hand sides.
//! - [`SplitFactorization`], [`factor_on`], [`solve_on`]: one factorization split among the
//!   ranks of a `tutti_group` group (the model axis): subtrees on their ranks, shared fronts
//!   by their owners, bitwise the factors and solutions of one rank.
//!
//! ```
//! use std::sync::Arc;
//! use tutti_backend::{GpuUse, Resources};
//! use tutti_group::Group;
//! use tutti_sparse::models::laplacian;
//! use tutti_sparse::{
//!     analyse, FactorOptions, Factorization, OrderingMethod, SolveOptions, SplitFactorization,
//! };
//!
//! // A 2-D Laplacian, analysed once (nested dissection), factored, solved.
//! let a = laplacian(&[32, 32])?;
//! let symbolic = analyse(&a, &OrderingMethod::default())?;
//! let lu = Factorization::new(Arc::clone(&symbolic), &a, FactorOptions::default())?;
//! let b = vec![1.0; a.rows()];
//! let mut x = b.clone();
//! let info = lu.solve_in_place(&mut x, 1, &SolveOptions::default())?;
//! assert!(info.backward_error < 1e-14);
//!
//! // The same factorization split among four simulated devices: the same bits.
//! let resources = Resources::cpu(4);
//! let group = Group::from_resources(&resources, GpuUse::HostOnly)?;
//! let split = SplitFactorization::new(&group, symbolic, &a, FactorOptions::default(), &resources)?;
//! let mut y = b.clone();
//! split.solve_in_place(&group, &mut y, 1, &SolveOptions::default())?;
//! assert_eq!(x, y);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Complex matrices take the same path, the analysis included (it is pattern-only):
//!
//! ```
//! use std::sync::Arc;
//! use tutti_backend::{GpuUse, Resources};
//! use tutti_group::Group;
//! use tutti_sparse::models::helmholtz;
//! use tutti_sparse::{
//!     analyse, c64, FactorOptions, Factorization, OrderingMethod, SolveOptions,
//!     SplitFactorization,
//! };
//!
//! // -Δu - (k^2 + iσ) u on a 32 x 32 grid, scaled by h^2: complex symmetric, indefinite.
//! let a = helmholtz(&[32, 32], c64::new(0.5, 0.05))?;
//! let symbolic = analyse(&a, &OrderingMethod::default())?;
//! let lu = Factorization::new(Arc::clone(&symbolic), &a, FactorOptions::default())?;
//! let b = vec![c64::new(1.0, -1.0); a.rows()];
//! let mut x = b.clone();
//! let info = lu.solve_in_place(&mut x, 1, &SolveOptions::default())?;
//! assert!(info.backward_error < 1e-14);
//!
//! // Split among two simulated devices: the same bits.
//! let resources = Resources::cpu(2);
//! let group = Group::from_resources(&resources, GpuUse::HostOnly)?;
//! let split = SplitFactorization::new(&group, symbolic, &a, FactorOptions::default(), &resources)?;
//! let mut y = b.clone();
//! split.solve_in_place(&group, &mut y, 1, &SolveOptions::default())?;
//! assert_eq!(x, y);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod agreement;
mod analyse;
mod assembly;
mod csr;
mod dense;
mod distributed;
mod error;
mod footprint;
mod forest;
mod forest_solve;
mod graph;
mod mapping;
pub mod matrix_market;
pub mod models;
mod numeric;
pub mod ordering;
mod scalar;
mod shared_assembly;
mod shared_front;
mod shared_solve;
mod solve;
mod symbolic;
mod tree;

pub use analyse::{analyse, OrderingMethod};
pub use assembly::{Assembly, Compressed};
pub use csr::CsrMatrix;
pub use distributed::{factor_on, solve_on, RankFactors, SplitFactorization};
pub use error::SparseError;
/// faer's complex double, `num_complex::Complex<f64>`: the complex [`Scalar`].
pub use faer::c64;
pub use footprint::{plan, plan_for};
pub use graph::Graph;
pub use numeric::{FactorOptions, Factorization};
pub use scalar::Scalar;
pub use solve::{SolveInfo, SolveOptions};
pub use symbolic::{Statistics, Symbolic};
pub use tree::{SeparatorTree, TreeNode};
