//! Least-squares fits over experiments split among devices, and checkpointed campaigns.
//!
//! - [`fit`] minimizes `0.5 * sum |r|^2` over [`Experiment`]s split across the devices of
//!   [`FitOptions::resources`] by Levenberg–Marquardt; its sums are taken in experiment
//!   order, so the iterates are the same bits on any number of devices, and
//!   [`FitOptions::balance_steps`] can move experiments between ranks without changing them.
//!   [`plan`] lists its buffers for the memory planner; a fit that does not fit is refused
//!   up front. A robust [`Loss`] (scipy's `huber`, `soft_l1`, `cauchy`, `arctan`) tames
//!   outliers, a [`FitCallback`] can watch and stop it between iterations, and its gradient
//!   and cost tests do not depend on units (MINPACK's gradient cosine, a relative decrease).
//! - [`checkpointed_map`] runs many independent tasks (bootstrap replicates, parameter
//!   scans) with a JSON [`ledger`] rewritten atomically after every task, so a campaign
//!   killed at any point resumes without losing, duplicating or mislabelling a result.
//!
//! - [`bdf`] integrates stiff systems (variable-order, variable-step BDF/NDF) with modified
//!   Newton iterations against a sparse factorization from `tutti-sparse`, and carries
//!   forward sensitivities to parameters along (staggered direct method);
//!   [`brusselator`] is the stiff 2-D (and 3-D) reaction-diffusion model it is tested and
//!   benchmarked on.
//!
//! This crate depends on the runtime (`tutti-backend`, `tutti-group`, `tutti-plan`) and the
//! shared sparse solver (`tutti-sparse`).
#![deny(missing_docs)]

/// What this workload runs on a GPU: nothing yet, so `auto` keeps it on simulated devices,
/// which run the same host code as a GPU rank would on the same share of the cores. An
/// explicit GPU request still opens the GPUs (their ranks compute on the host).
pub const GPU_USE: tutti_backend::GpuUse = tutti_backend::GpuUse::HostOnly;

mod balance;
pub mod bdf;
mod bounds;
pub mod brusselator;
mod campaign;
mod error;
pub mod example;
mod experiment;
mod groups;
pub mod ledger;
mod linalg;
mod loss;
pub mod ode;
mod solver;

pub use balance::{block_assignment, lpt_assignment, makespan};
pub use bounds::Bounds;
pub use campaign::{
    checkpointed_map, summarize_ledger, CampaignItem, CampaignOptions, CampaignOutcome, Execution,
    LedgerSummary, TaskContext, TaskFailure,
};
pub use error::FitError;
pub use experiment::Experiment;
pub use groups::resource_groups;
pub use ledger::{Ledger, TaskRecord, TaskStatus};
pub use loss::Loss;
pub use solver::{
    fit, fit_on, plan, FitCallback, FitIteration, FitOptions, FitReport, Termination,
};
