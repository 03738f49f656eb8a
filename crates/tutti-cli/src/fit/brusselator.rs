//! `tutti fit brusselator`: the Brusselator's `A`, `B` and `alpha` fitted to synthetic noisy
//! snapshots of several runs, the Jacobian from the BDF integrator's forward sensitivities.

use std::time::Instant;

use clap::Args;
use serde_json::json;
use tutti_fit::bdf::BdfOptions;
use tutti_fit::brusselator::{
    synthetic_experiments, SyntheticSetup, START_PARAMETERS, TRUE_PARAMETERS,
};
use tutti_fit::{fit_on, FitOptions};

use super::{print_table, report_fields, FitTable};
use crate::failure::Failure;
use crate::processes::Processes;
use crate::report::{print_json, Text};
use crate::resources::DeviceArgs;

/// Options of `tutti fit brusselator`.
#[derive(Args)]
pub struct BrusselatorArgs {
    /// Grid points per axis (at least 3).
    #[arg(long, default_value_t = 8)]
    n: usize,
    /// Runs of the model, each with its own forcing disc and initial amplitude.
    #[arg(long, default_value_t = 4)]
    experiments: usize,
    /// Both species are observed at every STRIDE-th point along each axis.
    #[arg(long, default_value_t = 2)]
    stride: usize,
    /// The noise's standard deviation.
    #[arg(long, default_value_t = 1e-3)]
    noise: f64,
    /// Seed of the synthetic noise.
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    /// The integrator's relative tolerance (its absolute tolerance is rtol / 1000).
    #[arg(long, default_value_t = 1e-6)]
    rtol: f64,
    /// Most iterations of the fit.
    #[arg(long, default_value_t = 40)]
    max_iterations: usize,
    /// Devices each experiment runs on together (the model axis of a data x model mesh):
    /// its Newton matrices are factored split among them. Must divide the device count;
    /// within one process only.
    #[arg(long, default_value_t = 1)]
    model_devices: usize,
    /// The devices the experiments are split over.
    #[command(flatten)]
    devices: DeviceArgs,
}

impl BrusselatorArgs {
    /// The synthetic setup these options describe, or what is wrong with them.
    fn setup(&self) -> Result<SyntheticSetup, Failure> {
        if self.n < 3
            || self.experiments == 0
            || self.stride == 0
            || self.max_iterations == 0
            || self.model_devices == 0
        {
            return Err(Failure::input(
                "--n must be at least 3 and --experiments, --stride, --max-iterations, \
                 --model-devices at least 1",
            ));
        }
        if !(self.noise.is_finite() && self.noise > 0.0) {
            return Err(Failure::input("--noise must be positive and finite"));
        }
        if !(self.rtol > 0.0 && self.rtol < 1.0) {
            return Err(Failure::input("--rtol must lie in (0, 1)"));
        }
        let defaults = SyntheticSetup::default();
        Ok(SyntheticSetup {
            n: self.n,
            experiments: self.experiments,
            stride: self.stride,
            sigma: self.noise,
            seed: self.seed,
            options: BdfOptions {
                rtol: self.rtol,
                atol: self.rtol * 1e-3,
                ..defaults.options
            },
        })
    }
}

/// Runs `tutti fit brusselator`.
pub fn run(args: &BrusselatorArgs, processes: &Processes, json: bool) -> Result<(), Failure> {
    let setup = args.setup()?;
    let resources = args.devices.resources();
    let started = Instant::now();
    let group = processes.group(&resources, tutti_fit::GPU_USE)?;
    let experiments = synthetic_experiments(&setup)?;
    let mut options = FitOptions::default()
        .with_resources(resources)
        .with_max_iterations(args.max_iterations)
        .with_model_devices(args.model_devices);
    // The integrator's error makes the cost uncertain from about rtol * 10 relative on: stop
    // when a step no longer changes the cost or the parameters at that level.
    options.cost_tolerance = (10.0 * args.rtol).min(1e-3);
    options.step_tolerance = options.cost_tolerance;
    let report = fit_on(&group, &experiments, &START_PARAMETERS, &options)?;
    if !processes.prints() {
        return Ok(());
    }
    let seconds = started.elapsed().as_secs_f64();
    if json {
        let mut fields = report_fields(&report, processes, &group);
        fields["inputs"] = json!({
            "n": args.n,
            "experiments": args.experiments,
            "stride": args.stride,
            "noise": args.noise,
            "seed": args.seed,
            "rtol": args.rtol,
            "max_iterations": args.max_iterations,
            "model_devices": args.model_devices,
            "resources": args.devices.to_json(),
        });
        fields["parameter_names"] = json!(["A", "B", "alpha"]);
        fields["start_parameters"] = json!(START_PARAMETERS);
        fields["true_parameters"] = json!(TRUE_PARAMETERS);
        print_json("fit brusselator", started, fields);
        return Ok(());
    }
    let mesh = if report.model_devices > 1 {
        format!(
            " ({} x {} data x model)",
            report.devices / report.model_devices,
            report.model_devices
        )
    } else {
        String::new()
    };
    let title = format!(
        "fit: Brusselator {n} x {n}, A, B, alpha from {} experiment(s), {} residuals, \
         {} device(s){mesh}",
        args.experiments,
        report.residual_count,
        report.devices,
        n = args.n
    );
    let table = FitTable {
        title: &title,
        heading: "param",
        names: &["A", "B", "alpha"],
        truth: &TRUE_PARAMETERS,
    };
    print_table(Text::new(false), &table, &report, seconds);
    Ok(())
}
