//! Least-squares fits over experiments split among devices, and checkpointed campaigns.
//!
//! - [`fit`] minimizes `0.5 * sum |r|^2` over [`Experiment`]s split across the data axis of a
//!   [`Mesh`] by Levenberg–Marquardt; its sums are taken in experiment order, so the iterates
//!   are the same bits on any number of devices, and [`FitOptions::balance_steps`] can move
//!   experiments between ranks without changing them.
//! - [`checkpointed_map`] runs many independent tasks (bootstrap replicates, parameter
//!   scans) with a JSON [`ledger`] rewritten atomically after every task, so a campaign
//!   killed at any point resumes without losing, duplicating or mislabelling a result.
//!
//! This crate depends on the runtime (`tutti-backend`, `tutti-group`) only.
#![deny(missing_docs)]

mod balance;
mod campaign;
mod error;
pub mod example;
mod experiment;
pub mod ledger;
mod linalg;
mod mesh;
pub mod ode;
mod solver;

pub use balance::{block_assignment, lpt_assignment, makespan};
pub use campaign::{
    checkpointed_map, summarize_ledger, CampaignItem, CampaignOptions, CampaignOutcome, Execution,
    LedgerSummary, TaskContext, TaskFailure,
};
pub use error::FitError;
pub use experiment::Experiment;
pub use ledger::{Ledger, TaskRecord, TaskStatus};
pub use mesh::{mesh_groups, Axis, Mesh};
pub use solver::{fit, FitOptions, FitReport, Termination};
