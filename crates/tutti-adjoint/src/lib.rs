//! tutti workload `adjoint`: Gaussian-basis integrals, restricted Hartree–Fock and the
//! analytic gradient of the RHF energy with respect to every basis-set exponent and
//! contraction coefficient, in pure Rust.
//!
//! - [`Molecule`]: nuclei in bohr (XYZ files in Angstrom, converted with
//!   [`molecule::ANGSTROM_PER_BOHR`], PySCF's value), nuclear repulsion.
//! - [`BasisSet`] / [`Basis`]: shipped sets (sto-3g, 6-31g, 6-31g*, cc-pvdz, def2-svp,
//!   def2-tzvp for H–Ar) or NWChem-format files; PySCF's normalization and AO order.
//! - [`integrals`]: S, T, V and ERIs (McMurchie–Davidson) over shells up to l = 4, spherical
//!   or Cartesian, and over any function shell with its own Cartesian-to-output map (e.g.
//!   the l + 2 exponent derivative of a primitive); [`boys`]: the Boys function.
//! - [`fock`]: Coulomb and exchange matrices, serial reference and a build split among
//!   ranks (each rank's share of the shell pairs threaded on its device's pool);
//!   [`scf`]: RHF with DIIS from a superposition of atomic densities, with incremental,
//!   density-screened J/K builds.
//! - [`gradient`]: dE/d alpha_i and dE/d c_i for every primitive of every shell (PySCF's
//!   parameter convention), a serial reference and a path split among ranks over shell
//!   pairs; per-atom and per-element results, JSON.
//! - Where it runs: [`ScfOptions::resources`] (a `tutti_backend::Resources`): one rank per
//!   device, partial sums combined in rank order, so any device count gives the same bits
//!   run to run and agrees with one device to rounding. [`plan`] / [`plan_gradient`] list
//!   the large objects for `tutti-plan`; a run that does not fit the caps is refused before
//!   any work.
//!
//! ```
//! use tutti_adjoint::{rhf, AngularKind, Basis, BasisSet, Molecule, ScfOptions};
//!
//! let h2 = Molecule::from_bohr(&[("H", [0.0, 0.0, 0.0]), ("H", [0.0, 0.0, 1.4])])?;
//! let basis = Basis::new(&h2, &BasisSet::named("sto-3g")?, AngularKind::Spherical)?;
//! let result = rhf(&h2, &basis, &ScfOptions::default())?;
//! assert!((result.energy - -1.1167).abs() < 1e-3);
//!
//! let gradient = tutti_adjoint::rhf_gradient(&h2, &basis, &Default::default())?;
//! // E does not change when all coefficients of a shell are scaled together.
//! let shell = &gradient.shells[0];
//! let scaling: f64 = shell.coefficients.iter().zip(&shell.grad_coefficients).map(|(c, g)| c * g).sum();
//! assert!(scaling.abs() < 1e-10);
//! # Ok::<(), tutti_adjoint::AdjointError>(())
//! ```
#![deny(missing_docs)]

/// What this workload runs on a GPU: nothing yet, so `auto` keeps it on simulated devices,
/// which run the same host code as a GPU rank would on the same share of the cores. An
/// explicit GPU request still opens the GPUs (their ranks compute on the host).
pub const GPU_USE: tutti_backend::GpuUse = tutti_backend::GpuUse::HostOnly;

pub mod basis;
pub mod boys;
mod error;
pub mod fock;
pub mod gradient;
mod guess;
pub mod integrals;
pub mod molecule;
mod plan;
pub mod scf;
mod split;
pub mod summary;

pub use basis::{AngularKind, Basis, BasisSet, Shell, ShellData};
pub use error::{AdjointError, Result};
pub use gradient::{
    rhf_gradient, rhf_gradient_on, ElementGradient, GradientOptions, GradientTimings, RhfGradient,
    ShellGradient,
};
pub use molecule::{Atom, Molecule};
pub use plan::{plan, plan_gradient};
pub use scf::{initial_density, rhf, rhf_on, InitialGuess, RhfResult, ScfOptions, Timings};
#[doc(hidden)]
pub use scf::{Fault, FaultPoint};
pub use summary::EnergySummary;
