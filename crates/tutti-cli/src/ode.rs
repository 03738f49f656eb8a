//! `tutti ode`: stiff systems integrated by `tutti_fit::bdf` (variable-order BDF, Newton
//! iterations against a `tutti-sparse` factorization). One built-in model so far: the 2-D
//! Brusselator of DifferentialEquations.jl's stiff tutorial.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand};
use serde_json::json;
use tutti_fit::bdf::{integrate, BdfOptions, BdfStatistics, OdeError};
use tutti_fit::brusselator::Brusselator;
use tutti_plan::npy;

use crate::failure::Failure;
use crate::report::print_json;

/// Options of `tutti ode`.
#[derive(Args)]
pub struct OdeArgs {
    #[command(subcommand)]
    command: OdeCommand,
}

#[derive(Subcommand)]
enum OdeCommand {
    /// The 2-D Brusselator (alpha = 10, periodic unit square, the forcing disc switched on
    /// at t >= 1.1) from t = 0 to `--t-end`.
    Brusselator(BrusselatorArgs),
}

/// Options of `tutti ode brusselator`.
#[derive(Args)]
struct BrusselatorArgs {
    /// Grid points per axis (at least 3): 2 N^2 unknowns.
    #[arg(long, default_value_t = 32)]
    n: usize,
    /// The end time.
    #[arg(long, default_value_t = 11.5)]
    t_end: f64,
    /// Relative tolerance.
    #[arg(long, default_value_t = 1e-6)]
    rtol: f64,
    /// Absolute tolerance.
    #[arg(long, default_value_t = 1e-9)]
    atol: f64,
    /// Write `u.npy` and `v.npy` (N x N, row j = y index) at `--t-end` into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
}

impl From<OdeError> for Failure {
    fn from(error: OdeError) -> Self {
        match error {
            OdeError::InvalidArgument { .. } => Failure::input(error.to_string()),
            other => Failure::computation(other.to_string()),
        }
    }
}

/// Runs `tutti ode`.
pub fn run(args: &OdeArgs, json: bool) -> Result<(), Failure> {
    match &args.command {
        OdeCommand::Brusselator(args) => run_brusselator(args, json),
    }
}

fn run_brusselator(args: &BrusselatorArgs, json: bool) -> Result<(), Failure> {
    let started = Instant::now();
    if !(args.t_end > 0.0 && args.t_end.is_finite()) {
        return Err(Failure::input(format!(
            "`--t-end` is {}: a positive finite time is needed",
            args.t_end
        )));
    }
    let model = Brusselator::new(args.n).map_err(|e| Failure::input(format!("`--n`: {e}")))?;
    let options = BdfOptions {
        rtol: args.rtol,
        atol: args.atol,
        ..BdfOptions::default()
    };
    log::info!(
        "integrating the Brusselator on {0} x {0} ({1} unknowns) to t = {2}",
        args.n,
        2 * args.n * args.n,
        args.t_end
    );
    let integrated = Instant::now();
    let solution = integrate(&model, 0.0, &model.initial_state(), &[args.t_end], &options)?;
    let seconds = integrated.elapsed().as_secs_f64();
    let state = solution.y.last().cloned().unwrap_or_default();
    let (u, v): (Vec<f64>, Vec<f64>) = state.chunks(2).map(|p| (p[0], p[1])).unzip();
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).map_err(|e| {
            Failure::computation(format!("creating {}: {e}", dir.display())).in_output()
        })?;
        let shape = [args.n as u64, args.n as u64];
        for (name, values) in [("u.npy", &u), ("v.npy", &v)] {
            npy::write_f64(dir.join(name), &shape, values)
                .map_err(|e| Failure::computation(e.to_string()).in_output())?;
        }
    }
    let stats = solution.statistics;
    let mean = |w: &[f64]| w.iter().sum::<f64>() / w.len().max(1) as f64;
    if json {
        print_json(
            "ode brusselator",
            started,
            json!({
                "inputs": { "n": args.n, "t_end": args.t_end, "rtol": args.rtol, "atol": args.atol, "out": args.out },
                "unknowns": 2 * args.n * args.n,
                "integration_seconds": seconds,
                "statistics": statistics_json(&stats),
                "mean_u": mean(&u),
                "mean_v": mean(&v),
                "outputs": args.out.as_ref().map(|d| json!({ "u": d.join("u.npy"), "v": d.join("v.npy") })),
            }),
        );
        return Ok(());
    }
    println!(
        "ode brusselator: {0} x {0} grid ({1} unknowns), t = 0 to {2}, rtol {3:e}, atol {4:e}",
        args.n,
        2 * args.n * args.n,
        args.t_end,
        args.rtol,
        args.atol
    );
    println!(
        "steps:    {} accepted, {} error-test and {} Newton failures; orders 1-5: {:?}",
        stats.steps,
        stats.error_test_failures,
        stats.newton_failures,
        &stats.steps_at_order[1..]
    );
    println!(
        "work:     {} evaluations of f, {} Jacobians, {} factorizations, {} Newton iterations",
        stats.rhs_evaluations, stats.jacobians, stats.factorizations, stats.newton_iterations
    );
    println!("time:     {seconds:.3} s");
    println!(
        "state:    mean u {:.6}, mean v {:.6} at t = {}",
        mean(&u),
        mean(&v),
        args.t_end
    );
    if let Some(dir) = &args.out {
        println!("wrote:    {}", dir.display());
    }
    Ok(())
}

fn statistics_json(stats: &BdfStatistics) -> serde_json::Value {
    json!({
        "steps": stats.steps,
        "error_test_failures": stats.error_test_failures,
        "newton_failures": stats.newton_failures,
        "newton_iterations": stats.newton_iterations,
        "rhs_evaluations": stats.rhs_evaluations,
        "jacobians": stats.jacobians,
        "factorizations": stats.factorizations,
        "steps_at_order": &stats.steps_at_order[1..],
    })
}
