//! tutti workload `adjoint`: Gaussian-basis integrals and restricted Hartree–Fock in pure
//! Rust, the foundation of the gradient of the RHF energy with respect to basis-set
//! parameters.
//!
//! - [`Molecule`]: nuclei in bohr (XYZ files in Angstrom, converted with
//!   [`molecule::ANGSTROM_PER_BOHR`], PySCF's value), nuclear repulsion.
//! - [`BasisSet`] / [`Basis`]: shipped sets (sto-3g, 6-31g, 6-31g*, cc-pvdz, def2-svp,
//!   def2-tzvp for H–Ar) or NWChem-format files; PySCF's normalization and AO order.
//! - [`integrals`]: S, T, V and ERIs (McMurchie–Davidson) over shells up to l = 4, spherical
//!   or Cartesian; [`boys`]: the Boys function.
//! - [`fock`]: Coulomb and exchange matrices, serial reference and rayon-threaded over shell
//!   pairs; [`scf`]: RHF with DIIS.
//!
//! ```
//! use tutti_adjoint::{rhf, AngularKind, Basis, BasisSet, Molecule, ScfOptions};
//!
//! let h2 = Molecule::from_bohr(&[("H", [0.0, 0.0, 0.0]), ("H", [0.0, 0.0, 1.4])])?;
//! let basis = Basis::new(&h2, &BasisSet::named("sto-3g")?, AngularKind::Spherical)?;
//! let result = rhf(&h2, &basis, &ScfOptions::default())?;
//! assert!((result.energy - -1.1167).abs() < 1e-3);
//! # Ok::<(), tutti_adjoint::AdjointError>(())
//! ```
#![deny(missing_docs)]

pub mod basis;
pub mod boys;
mod error;
pub mod fock;
pub mod integrals;
pub mod molecule;
pub mod scf;
pub mod summary;

pub use basis::{AngularKind, Basis, BasisSet, Shell, ShellData};
pub use error::{AdjointError, Result};
pub use molecule::{Atom, Molecule};
pub use scf::{rhf, rhf_on_pool, RhfResult, ScfOptions, Timings};
pub use summary::EnergySummary;
