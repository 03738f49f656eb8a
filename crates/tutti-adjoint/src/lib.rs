//! tutti workload: adjoint (under construction).
#![deny(missing_docs)]
