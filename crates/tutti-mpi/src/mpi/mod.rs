//! The MPI binding (feature `mpi`): the C shim's calls, the [`MpiWire`] and the [`World`].

mod ffi;
mod wire;
mod world;

pub use wire::{MpiWire, ThreadLevel};
pub use world::{MpiError, World};
