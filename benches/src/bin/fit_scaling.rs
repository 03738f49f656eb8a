//! The data-parallel fit: reduction overhead against evaluation time on 1, 2 and 4 simulated
//! devices, and the makespan of a skewed six-experiment workload with and without balancing.
//!
//! Baselines in the same run: the fit on one device, and the unbalanced skewed fit.

use std::error::Error;
use std::time::Instant;

use serde_json::json;
use tutti_backend::Resources;
use tutti_benches::write_results;
use tutti_fit::example::{synthetic_experiments, ReactionExperiment, START_RATES};
use tutti_fit::{fit, Experiment, FitOptions};

/// An experiment whose evaluation costs `repeats` times the base one (the integration is
/// really repeated), with that factor as its cost estimate.
struct Weighted {
    inner: ReactionExperiment,
    repeats: usize,
}

impl Experiment for Weighted {
    fn residual_count(&self) -> usize {
        self.inner.residual_count()
    }
    fn evaluate(&self, p: &[f64], r: &mut [f64], j: &mut [f64]) -> Result<(), String> {
        for _ in 0..self.repeats {
            self.inner.evaluate(p, r, j)?;
        }
        Ok(())
    }
    fn cost_estimate(&self) -> Option<f64> {
        Some(self.repeats as f64)
    }
}

/// `options` on `devices` simulated devices.
fn on(devices: usize, options: FitOptions) -> FitOptions {
    options.with_resources(Resources::cpu(devices))
}

fn main() -> Result<(), Box<dyn Error>> {
    let experiments = synthetic_experiments(2026)?;
    // Each evaluation is made 20x heavier so the split has work to share.
    let heavy: Vec<Weighted> = experiments
        .iter()
        .map(|e| Weighted {
            inner: e.clone(),
            repeats: 20,
        })
        .collect();
    println!("fit_scaling: example fit, 6 experiments (each evaluation x20)");
    let mut scaling = Vec::new();
    let mut single = None;
    for devices in [1usize, 2, 4] {
        let started = Instant::now();
        let report = fit(&heavy, &START_RATES, &on(devices, FitOptions::default()))?;
        let wall = started.elapsed().as_secs_f64();
        let baseline = *single.get_or_insert(wall);
        let per_evaluation = |s: f64| 1e3 * s / report.evaluations as f64;
        println!(
            "  {devices} device(s): {wall:6.3} s ({:4.2}x vs 1 device); per evaluation: rank 0 evaluates \
             {:7.3} ms, exchange+sum {:6.3} ms ({:4.1}% of its time)",
            baseline / wall,
            per_evaluation(report.evaluation_seconds),
            per_evaluation(report.reduction_seconds),
            100.0 * report.reduction_seconds / (report.evaluation_seconds + report.reduction_seconds),
        );
        scaling.push(json!({
            "devices": devices, "seconds": wall, "speedup": baseline / wall,
            "evaluations": report.evaluations,
            "rank0_evaluation_seconds": report.evaluation_seconds,
            "rank0_reduction_seconds": report.reduction_seconds,
        }));
    }

    let skewed: Vec<Weighted> = experiments
        .iter()
        .zip([50usize, 50, 10, 10, 10, 10])
        .map(|(e, repeats)| Weighted {
            inner: e.clone(),
            repeats,
        })
        .collect();
    let mut balance_rows = Vec::new();
    let mut unbalanced_wall = None;
    for balance in [false, true] {
        let options = FitOptions::default().with_balance_steps(balance);
        let started = Instant::now();
        let report = fit(&skewed, &START_RATES, &on(2, options))?;
        let wall = started.elapsed().as_secs_f64();
        let baseline = *unbalanced_wall.get_or_insert(wall);
        println!(
            "  skewed costs [50,50,10,10,10,10] on 2 devices, balancing {}: {wall:6.3} s \
             ({:4.2}x vs unbalanced); modelled makespan {} -> {}",
            if balance { "on " } else { "off" },
            baseline / wall,
            report.makespan_initial,
            report.makespan_final
        );
        balance_rows.push(json!({
            "balance": balance, "seconds": wall,
            "makespan_initial": report.makespan_initial,
            "makespan_final": report.makespan_final,
        }));
    }
    let path = write_results(
        "fit_scaling",
        json!({ "scaling": scaling, "skewed_balance": balance_rows }),
    )?;
    println!("results: {}", path.display());
    Ok(())
}
