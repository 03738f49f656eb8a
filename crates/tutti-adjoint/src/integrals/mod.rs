//! Integrals over contracted Gaussian shells by the McMurchie–Davidson scheme: Hermite
//! expansions of Gaussian products ([`hermite`]), one-electron operators
//! ([`one_electron`]) and electron repulsion over shell quartets ([`eri`]).

pub mod cartesian;
pub mod columns;
pub mod eri;
pub mod functions;
pub mod hermite;
pub mod one_electron;
pub(crate) mod pair_rows;

pub use eri::{EriEngine, EriWorkspace};
pub use one_electron::{kinetic, nuclear_attraction, overlap};
