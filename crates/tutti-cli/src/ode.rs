//! `tutti ode`: stiff systems integrated by `tutti_fit::bdf` (variable-order BDF, Newton
//! iterations against a `tutti-sparse` factorization). One built-in model so far: the
//! Brusselator of DifferentialEquations.jl's stiff tutorial, in 2-D (the tutorial's) or 3-D
//! (`--dims 3`: the 7-point Laplacian, the forcing on a ball). `--model-devices K` integrates
//! on K devices together (the model axis): every rank steps the whole state and each Newton
//! matrix is factored and solved split among them, with the bits of one device.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand};
use serde_json::json;
use tutti_backend::{Device, Resources};
use tutti_fit::bdf::{
    integrate, integrate_on, BdfOptions, BdfSolution, BdfStatistics, OdeError, StiffSystem,
};
use tutti_fit::brusselator::Brusselator;
use tutti_group::{Group, RunError};
use tutti_plan::npy;

use crate::failure::Failure;
use crate::report::{device_kind, print_json};
use crate::resources::DeviceArgs;

/// Options of `tutti ode`.
#[derive(Args)]
pub struct OdeArgs {
    #[command(subcommand)]
    command: OdeCommand,
}

#[derive(Subcommand)]
enum OdeCommand {
    /// The Brusselator (alpha = 10, periodic unit square or cube, the forcing disc or ball
    /// switched on at t >= 1.1) from t = 0 to `--t-end`.
    Brusselator(BrusselatorArgs),
}

/// Options of `tutti ode brusselator`.
#[derive(Args)]
struct BrusselatorArgs {
    /// Grid points per axis (at least 3): 2 N^DIMS unknowns.
    #[arg(long, default_value_t = 32)]
    n: usize,
    /// Space dimensions: 2 (the tutorial's N x N problem) or 3 (N x N x N, the 7-point
    /// Laplacian, the forcing on a ball).
    #[arg(long, default_value_t = 2)]
    dims: usize,
    /// The end time.
    #[arg(long, default_value_t = 11.5)]
    t_end: f64,
    /// Relative tolerance.
    #[arg(long, default_value_t = 1e-6)]
    rtol: f64,
    /// Absolute tolerance.
    #[arg(long, default_value_t = 1e-9)]
    atol: f64,
    /// Write `u.npy` and `v.npy` at `--t-end` into this directory: N x N (axis 0 the y
    /// index, axis 1 the x index) in 2-D, N x N x N (z, y, x) in 3-D.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Devices the integration runs on together (the model axis): each Newton matrix is
    /// factored and solved split among them, every one stepping the whole state, with the
    /// bits of one device. The device flags must select exactly this many (without `-d` or
    /// `--ordinals`, this many of `--kind`); within one process only.
    #[arg(long, default_value_t = 1)]
    model_devices: usize,
    /// The devices of the model axis.
    #[command(flatten)]
    devices: DeviceArgs,
}

impl BrusselatorArgs {
    /// The resources of the model axis: the device flags, with `--devices K` standing in
    /// for a count or ordinals not given (the flags' own default, every GPU or one simulated
    /// device, is not the model axis's).
    fn model_resources(&self) -> Result<Resources, Failure> {
        if self.model_devices == 0 {
            return Err(Failure::input(
                "`--model-devices` is 0: the integration needs at least one device",
            ));
        }
        let mut flags = self.devices.clone();
        if flags.devices.is_none() && flags.ordinals.is_none() {
            flags.devices = Some(self.model_devices);
        }
        Ok(flags.resources())
    }

    /// The devices of the model axis, opened: exactly `--model-devices` of them.
    fn model_axis(&self) -> Result<Vec<Device>, Failure> {
        let devices = self.model_resources()?.select_for(tutti_fit::GPU_USE)?;
        if devices.len() != self.model_devices {
            return Err(Failure::input(format!(
                "`--model-devices` is {} but the device flags select {} device(s): the \
                 integration runs on exactly the devices selected; pass `-d {}` (or as many \
                 `--ordinals`), or `--model-devices {}`",
                self.model_devices,
                devices.len(),
                self.model_devices,
                devices.len()
            )));
        }
        Ok(devices)
    }
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
    if !matches!(args.dims, 2 | 3) {
        return Err(Failure::input(format!(
            "`--dims` is {}: the Brusselator is built in 2 or 3 dimensions",
            args.dims
        )));
    }
    let model = Brusselator::with_dims(args.n, args.dims)
        .map_err(|e| Failure::input(format!("`--n`: {e}")))?;
    let devices = args.model_axis()?;
    let kind = device_kind(&devices);
    let unknowns = model.dimension();
    // The state files' shape, slowest axis first: (y, x) or (z, y, x).
    let shape = vec![args.n; args.dims];
    let grid = shape
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(" x ");
    let options = BdfOptions {
        rtol: args.rtol,
        atol: args.atol,
        ..BdfOptions::default()
    };
    log::info!(
        "integrating the {}-D Brusselator on {grid} ({unknowns} unknowns) to t = {} on {} \
         device(s)",
        args.dims,
        args.t_end,
        devices.len()
    );
    let integrated = Instant::now();
    let solution = integrate_on_devices(&model, devices, args.t_end, &options)?;
    let seconds = integrated.elapsed().as_secs_f64();
    let state = solution.y.last().cloned().unwrap_or_default();
    let (u, v): (Vec<f64>, Vec<f64>) = state.chunks(2).map(|p| (p[0], p[1])).unzip();
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).map_err(|e| {
            Failure::computation(format!("creating {}: {e}", dir.display())).in_output()
        })?;
        let npy_shape: Vec<u64> = shape.iter().map(|&extent| extent as u64).collect();
        for (name, values) in [("u.npy", &u), ("v.npy", &v)] {
            npy::write_f64(dir.join(name), &npy_shape, values)
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
                "inputs": {
                    "n": args.n,
                    "dims": args.dims,
                    "t_end": args.t_end,
                    "rtol": args.rtol,
                    "atol": args.atol,
                    "out": args.out,
                    "model_devices": args.model_devices,
                    "resources": args.devices.to_json(),
                },
                "processes": 1,
                "devices": args.model_devices,
                "model_devices": args.model_devices,
                "device_kind": kind,
                "dims": args.dims,
                "grid": shape,
                "unknowns": unknowns,
                "integration_seconds": seconds,
                "statistics": statistics_json(&stats),
                "mean_u": mean(&u),
                "mean_v": mean(&v),
                "outputs": args.out.as_ref().map(|d| json!({ "u": d.join("u.npy"), "v": d.join("v.npy"), "shape": shape })),
            }),
        );
        return Ok(());
    }
    println!(
        "ode brusselator: {}-D, {grid} grid ({unknowns} unknowns), t = 0 to {}, rtol {:e}, atol {:e}",
        args.dims, args.t_end, args.rtol, args.atol
    );
    if args.model_devices > 1 {
        println!(
            "devices:  {} {} (model axis: each Newton matrix factored split among them)",
            args.model_devices,
            kind.as_str().unwrap_or("?")
        );
    }
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

/// `model` integrated from its initial state at t = 0 to `t_end`: on the calling thread for
/// one device, else by [`integrate_on`] on a group of `devices` (rank 0's solution; every
/// rank's is the same, bitwise that of one device).
fn integrate_on_devices(
    model: &Brusselator,
    devices: Vec<Device>,
    t_end: f64,
    options: &BdfOptions,
) -> Result<BdfSolution, Failure> {
    let y0 = model.initial_state();
    if devices.len() == 1 {
        return Ok(integrate(model, 0.0, &y0, &[t_end], options)?);
    }
    let group = Group::new(devices)?;
    let mut solutions = group
        .run(|comm| integrate_on(comm, model, 0.0, &y0, &[t_end], options))
        .map_err(|error| match error {
            RunError::Failed { error, .. } => Failure::from(error),
            other => Failure::computation(other.to_string()),
        })?;
    if solutions.is_empty() {
        return Err(Failure::computation("the group ran no rank"));
    }
    Ok(solutions.swap_remove(0))
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
