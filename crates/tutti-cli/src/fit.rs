//! `tutti fit` and `tutti campaign`: the example fit, bootstrap campaigns, ledger status.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tutti_backend::Resources;
use tutti_fit::example::{
    bootstrap_replicate, quantile, synthetic_experiments, START_RATES, TRUE_RATES,
};
use tutti_fit::{
    checkpointed_map, fit, fit_on, plan, resource_groups, summarize_ledger, CampaignItem,
    CampaignOptions, Execution, FitOptions, FitReport, TaskStatus,
};
use tutti_group::Group;

use crate::processes::Processes;
use crate::resources::DeviceArgs;

/// Options of `tutti fit`.
#[derive(Args)]
pub struct FitArgs {
    #[command(subcommand)]
    command: FitCommand,
}

#[derive(Subcommand)]
enum FitCommand {
    /// Fit the example reaction network (six experiments, three rate constants) and print
    /// the recovered and true rates.
    Demo {
        /// Seed of the synthetic noise.
        #[arg(long, default_value_t = 2026)]
        seed: u64,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Print the memory plan (Jacobian blocks, residuals, contributions, normal matrix
        /// on each device) and exit; exits non-zero with the numbers when it does not fit.
        #[arg(long)]
        plan: bool,
        /// The devices the experiments are split over, and memory caps.
        #[command(flatten)]
        devices: DeviceArgs,
    },
    /// Refit R residual-bootstrap replicates of the example as a checkpointed campaign
    /// (kill it and rerun the same command to finish), then print confidence intervals.
    Bootstrap {
        /// Number of replicates.
        #[arg(long, default_value_t = 50)]
        replicates: usize,
        /// The campaign's ledger (JSON); rerunning with it resumes.
        #[arg(long, required_unless_present = "plan")]
        ledger: Option<PathBuf>,
        /// Seed of the synthetic noise and of the replicates.
        #[arg(long, default_value_t = 2026)]
        seed: u64,
        /// Print the memory plan of one replicate's fit on one device and exit; exits
        /// non-zero with the numbers when it does not fit.
        #[arg(long)]
        plan: bool,
        /// The devices; one replicate runs on each at a time.
        #[command(flatten)]
        devices: DeviceArgs,
    },
}

/// Options of `tutti campaign`.
#[derive(Args)]
pub struct CampaignArgs {
    #[command(subcommand)]
    command: CampaignCommand,
}

#[derive(Subcommand)]
enum CampaignCommand {
    /// Summarize a campaign ledger: tasks accepted, failed, attempts.
    Status {
        /// The ledger file.
        ledger: PathBuf,
    },
}

pub fn run(args: &FitArgs, processes: &Processes) -> Result<(), String> {
    match &args.command {
        FitCommand::Demo {
            seed,
            json,
            plan,
            devices,
        } => demo(processes, &devices.resources(), *seed, *json, *plan),
        FitCommand::Bootstrap {
            replicates,
            ledger,
            seed,
            plan,
            devices,
        } => bootstrap(
            processes,
            *replicates,
            ledger.as_deref(),
            &devices.resources(),
            *seed,
            *plan,
        ),
    }
}

pub fn run_campaign(args: &CampaignArgs) -> Result<(), String> {
    match &args.command {
        CampaignCommand::Status { ledger } => status(ledger),
    }
}

/// The example fit on `devices` simulated devices.
pub fn example_fit(devices: usize, seed: u64) -> Result<FitReport, String> {
    let resources = Resources::cpu(devices);
    let group = Group::from_resources(&resources, tutti_fit::GPU_USE).map_err(|e| e.to_string())?;
    example_fit_on(&group, &resources, seed)
}

/// The example fit on `group`, planned against `resources`.
fn example_fit_on(group: &Group, resources: &Resources, seed: u64) -> Result<FitReport, String> {
    let experiments = synthetic_experiments(seed)?;
    let options = FitOptions::default().with_resources(resources.clone());
    fit_on(group, &experiments, &START_RATES, &options).map_err(|e| e.to_string())
}

/// Prints the plan of the example fit on `resources`, or refuses with its numbers.
fn print_plan(resources: &Resources, seed: u64) -> Result<(), String> {
    let experiments = synthetic_experiments(seed)?;
    let options = FitOptions::default().with_resources(resources.clone());
    let plan = plan(&experiments, START_RATES.len(), &options).map_err(|e| e.to_string())?;
    print!("{plan}");
    Ok(())
}

fn demo(
    processes: &Processes,
    resources: &Resources,
    seed: u64,
    as_json: bool,
    show_plan: bool,
) -> Result<(), String> {
    if show_plan {
        processes.refuse_spanning("tutti fit demo --plan")?;
        return print_plan(resources, seed);
    }
    let started = Instant::now();
    let group = processes.group(resources, tutti_fit::GPU_USE)?;
    let report = example_fit_on(&group, resources, seed)?;
    // Every process holds the same report; rank 0 prints it.
    if !processes.prints() {
        return Ok(());
    }
    let devices = report.devices;
    let seconds = started.elapsed().as_secs_f64();
    let errors = report.standard_errors().unwrap_or_default();
    if as_json {
        let value = json!({
            "parameters": report.parameters,
            "true_parameters": TRUE_RATES,
            "standard_errors": errors,
            "cost": report.cost,
            "iterations": report.iterations,
            "evaluations": report.evaluations,
            "converged": report.converged(),
            "devices": devices,
            "seconds": seconds,
        });
        println!("{value}");
        return Ok(());
    }
    print_fit(&report, devices, seconds);
    Ok(())
}

/// Prints the recovered and true rates with standard errors.
pub fn print_fit(report: &FitReport, devices: usize, seconds: f64) {
    let errors = report.standard_errors().unwrap_or_default();
    println!(
        "fit: reaction network A+B<->C->D, 6 experiments, {} residuals, {devices} device(s)",
        report.residual_count
    );
    println!(
        "  {:<4} {:>12} {:>12} {:>10} {:>8}",
        "rate", "fitted", "true", "std err", "|z|"
    );
    for (k, (fitted, truth)) in report.parameters.iter().zip(TRUE_RATES).enumerate() {
        let se = errors.get(k).copied().unwrap_or(f64::NAN);
        println!(
            "  k{:<3} {fitted:>12.6} {truth:>12.6} {se:>10.2e} {:>8.2}",
            k + 1,
            (fitted - truth).abs() / se
        );
    }
    let dof = report
        .residual_count
        .saturating_sub(report.parameters.len())
        .max(1);
    println!(
        "  cost {:.4e}  chi2/dof {:.3}  iterations {}  evaluations {}  {:?}  {:.3} s",
        report.cost,
        2.0 * report.cost / dof as f64,
        report.iterations,
        report.evaluations,
        report.termination,
        seconds
    );
}

/// The input of one bootstrap replicate: what the ledger's hash covers.
#[derive(Serialize)]
struct ReplicateInput {
    seed: u64,
    replicate: usize,
}

#[derive(Serialize, Deserialize)]
struct ReplicateResult {
    parameters: Vec<f64>,
    cost: f64,
    iterations: usize,
}

/// A residual bootstrap of the example fit as a checkpointed campaign: alone, one replicate
/// runs on each device at a time; over MPI, every process runs its share of the replicates on
/// its node share of the devices, and rank 0 alone writes the ledger and prints. Every
/// process makes the synthetic data and the base fit itself (both deterministic, on one
/// device).
fn bootstrap(
    processes: &Processes,
    replicates: usize,
    ledger: Option<&Path>,
    resources: &Resources,
    seed: u64,
    show_plan: bool,
) -> Result<(), String> {
    if replicates == 0 {
        return Err("--replicates must be at least 1".into());
    }
    if show_plan {
        processes.refuse_spanning("tutti fit bootstrap --plan")?;
    }
    let (spanning, local) = match processes.share(resources, tutti_fit::GPU_USE)? {
        Some((group, share)) => (Some(group), share),
        None => (None, processes.alone_share(resources)),
    };
    // Checks that may fail in one process only join the campaign's first round as failed.
    let groups = before_campaign(spanning.as_ref(), one_per_device(&local))?;
    let devices = groups.len();
    if show_plan {
        return print_plan(&groups[0], seed);
    }
    let ledger = ledger.ok_or("`--ledger FILE` is needed unless `--plan` is given")?;
    let (experiments, base) = before_campaign(
        spanning.as_ref(),
        synthetic_experiments(seed).and_then(|experiments| {
            let options = FitOptions::default().with_resources(groups[0].clone());
            let base = fit(&experiments, &START_RATES, &options).map_err(|e| e.to_string())?;
            Ok((experiments, base))
        }),
    )?;
    let items: Vec<CampaignItem<ReplicateInput>> = (0..replicates)
        .map(|replicate| {
            CampaignItem::new(
                format!("replicate-{replicate:05}"),
                ReplicateInput { seed, replicate },
            )
        })
        .collect();
    let where_ = match &spanning {
        Some(_) => format!(
            "{} processes ({devices} device(s) in rank 0's)",
            processes.size()
        ),
        None => format!("{devices} device(s)"),
    };
    let execution = match spanning {
        Some(group) => Execution::Processes {
            group,
            local: groups,
        },
        None => Execution::Groups(groups),
    };
    let options = CampaignOptions::default()
        .with_execution(execution)
        .with_progress(true);
    let started = Instant::now();
    let task = |input: &ReplicateInput, context: &tutti_fit::TaskContext<'_>| {
        // Replicate r draws from its own stream of the seed: independent of devices and order.
        let replicate_seed =
            input.seed ^ (input.replicate as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let data = bootstrap_replicate(&experiments, &base.parameters, replicate_seed)?;
        let options = FitOptions::default().with_resources(context.resources.clone());
        let report = fit(&data, &base.parameters, &options).map_err(|e| e.to_string())?;
        if !report.converged() {
            return Err(format!(
                "did not converge in {} iterations",
                report.iterations
            ));
        }
        Ok(ReplicateResult {
            parameters: report.parameters,
            cost: report.cost,
            iterations: report.iterations,
        })
    };
    let outcome = checkpointed_map(task, &items, ledger, &options).map_err(|e| e.to_string())?;
    if !processes.prints() {
        return Ok(());
    }
    println!(
        "bootstrap: {replicates} replicates ({} taken from the ledger, {} run) in {:.2} s on {where_}; {} failed",
        outcome.reused,
        outcome.ran,
        started.elapsed().as_secs_f64(),
        outcome.failures.len()
    );
    let accepted: Vec<&ReplicateResult> = outcome.results.iter().flatten().collect();
    println!(
        "  {:<4} {:>12} {:>12} {:>12} {:>12}",
        "rate", "fitted", "2.5%", "97.5%", "true"
    );
    for (k, (fitted, truth)) in base.parameters.iter().zip(TRUE_RATES).enumerate() {
        let values: Vec<f64> = accepted.iter().map(|r| r.parameters[k]).collect();
        let low = quantile(&values, 0.025).unwrap_or(f64::NAN);
        let high = quantile(&values, 0.975).unwrap_or(f64::NAN);
        println!(
            "  k{:<3} {fitted:>12.6} {low:>12.6} {high:>12.6} {truth:>12.6}",
            k + 1
        );
    }
    Ok(())
}

/// Groups of one device, one per device `resources` selects.
fn one_per_device(resources: &Resources) -> Result<Vec<Resources>, String> {
    let devices = resources
        .select_for(tutti_fit::GPU_USE)
        .map_err(|e| e.to_string())?
        .len();
    resource_groups(resources, &vec![1; devices]).map_err(|e| e.to_string())
}

/// `result`, told to the other processes first when it is an error ([`Group::before_run`]).
fn before_campaign<T>(spanning: Option<&Group>, result: Result<T, String>) -> Result<T, String> {
    match spanning {
        Some(group) => group.before_run(result),
        None => result,
    }
}

fn status(ledger: &Path) -> Result<(), String> {
    let (summary, records) = summarize_ledger(ledger).map_err(|e| e.to_string())?;
    println!(
        "{}: {} task(s): {} accepted, {} failed, {} run(s) in all",
        ledger.display(),
        summary.tasks,
        summary.accepted,
        summary.failed,
        summary.attempts
    );
    for record in records.iter().filter(|r| r.status == TaskStatus::Failed) {
        println!(
            "  failed: {} (attempt {}): {}",
            record.task_id,
            record.attempts,
            record.error.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        fit: FitArgs,
    }

    #[test]
    fn the_shared_device_flags_and_plan_parse_on_both_subcommands() {
        let probe = Probe::try_parse_from(["probe", "demo", "-d", "3", "--kind", "cpu", "--plan"])
            .expect("valid flags");
        let FitCommand::Demo { plan, devices, .. } = &probe.fit.command else {
            panic!("not demo");
        };
        assert!(*plan);
        assert_eq!(devices.resources(), Resources::cpu(3));
        // --ledger is needed unless --plan is given.
        assert!(Probe::try_parse_from(["probe", "bootstrap"]).is_err());
        assert!(
            Probe::try_parse_from(["probe", "bootstrap", "--plan", "--ordinals", "0,1"]).is_ok()
        );
    }

    #[test]
    fn the_plan_prints_and_device_errors_are_refused() {
        assert!(print_plan(&Resources::cpu(2), 2026).is_ok());
        let alone = Processes::start(tutti_mpi::launch::MpiMode::Off).unwrap();
        let err = demo(&alone, &Resources::cpu(0), 2026, false, false).unwrap_err();
        assert!(err.contains("zero devices"), "{err}");
        let err = print_plan(&Resources::cpu(1).with_device_memory_cap(1024), 2026).unwrap_err();
        assert!(
            err.contains("does not fit") && err.contains("contributions"),
            "{err}"
        );
        let report = example_fit(2, 2026).unwrap();
        assert_eq!(report.devices, 2);
        assert!(report.converged());
    }
}
