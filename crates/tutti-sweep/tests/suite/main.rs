//! The sweep's integration tests, in one binary: one link instead of seven.
//!
//! Tests that must be alone in their process stay in binaries of their own: `plan.rs` (a
//! counting global allocator) and `loader.rs` (counts the process's loader threads).
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too; failures are test failures

#[path = "../common/mod.rs"]
mod common;

mod devices;
mod distributed_qr;
mod errors;
mod exactness;
mod hardening;
mod io;
mod properties;
mod reference;
mod shared_reading;
mod tiers;
