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
    CampaignOptions, Execution, FitOptions, FitReport, TaskStatus, Termination,
};
use tutti_group::Group;

use crate::failure::Failure;
use crate::processes::Processes;
use crate::report::{device_kind, print_json, Text};
use crate::resources::DeviceArgs;

mod brusselator;

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
        /// Print the memory plan (Jacobian blocks, residuals, contributions, normal matrix
        /// on each device) and exit; exits non-zero with the numbers when it does not fit.
        #[arg(long)]
        plan: bool,
        /// The devices the experiments are split over, and memory caps.
        #[command(flatten)]
        devices: DeviceArgs,
    },
    /// Fit the Brusselator's A, B and alpha to synthetic noisy snapshots of several runs
    /// (each with its own forcing disc and initial amplitude), the Jacobian from the BDF
    /// integrator's forward sensitivities; print the recovered and true values.
    Brusselator(brusselator::BrusselatorArgs),
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

pub fn run(args: &FitArgs, processes: &Processes, json: bool) -> Result<(), Failure> {
    match &args.command {
        FitCommand::Demo {
            seed,
            plan,
            devices,
        } => {
            let inputs = json!({ "seed": seed, "plan": plan, "resources": devices.to_json() });
            let reporting = Reporting { json, inputs };
            demo(processes, &devices.resources(), *seed, *plan, &reporting)
        }
        FitCommand::Brusselator(args) => brusselator::run(args, processes, json),
        FitCommand::Bootstrap {
            replicates,
            ledger,
            seed,
            plan,
            devices,
        } => {
            let inputs = json!({
                "replicates": replicates,
                "ledger": ledger,
                "seed": seed,
                "plan": plan,
                "resources": devices.to_json(),
            });
            let reporting = Reporting { json, inputs };
            bootstrap(
                processes,
                *replicates,
                ledger.as_deref(),
                &devices.resources(),
                *seed,
                *plan,
                &reporting,
            )
        }
    }
}

pub fn run_campaign(args: &CampaignArgs, json: bool) -> Result<(), Failure> {
    match &args.command {
        CampaignCommand::Status { ledger } => status(ledger, json),
    }
}

/// What a fit subcommand prints: text, or with `--json` one object holding `inputs`.
struct Reporting {
    json: bool,
    inputs: serde_json::Value,
}

/// The example fit on `devices` simulated devices.
pub fn example_fit(devices: usize, seed: u64) -> Result<FitReport, Failure> {
    let resources = Resources::cpu(devices);
    let group = Group::from_resources(&resources, tutti_fit::GPU_USE)?;
    example_fit_on(&group, &resources, seed)
}

/// The example fit on `group`, planned against `resources`.
fn example_fit_on(group: &Group, resources: &Resources, seed: u64) -> Result<FitReport, Failure> {
    let experiments = synthetic_experiments(seed)?;
    let options = FitOptions::default().with_resources(resources.clone());
    Ok(fit_on(group, &experiments, &START_RATES, &options)?)
}

/// The plan of the example fit on `resources` as text, or its refusal with the numbers.
fn plan_text(resources: &Resources, seed: u64) -> Result<String, Failure> {
    let experiments = synthetic_experiments(seed)?;
    let options = FitOptions::default().with_resources(resources.clone());
    Ok(plan(&experiments, START_RATES.len(), &options)?.to_string())
}

/// Prints the plan of the example fit on `resources` (with `--json`, as the `plan` field of
/// `command`'s object), or refuses with its numbers.
fn print_plan(
    resources: &Resources,
    seed: u64,
    command: &str,
    reporting: &Reporting,
) -> Result<(), Failure> {
    let started = Instant::now();
    let plan = plan_text(resources, seed)?;
    if reporting.json {
        let fields = json!({ "inputs": reporting.inputs, "plan": plan });
        print_json(command, started, fields);
    } else {
        print!("{plan}");
    }
    Ok(())
}

fn demo(
    processes: &Processes,
    resources: &Resources,
    seed: u64,
    show_plan: bool,
    reporting: &Reporting,
) -> Result<(), Failure> {
    if show_plan {
        processes.refuse_spanning("tutti fit demo --plan")?;
        return print_plan(resources, seed, "fit demo", reporting);
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
    if reporting.json {
        // `seconds` (the whole run) is added by print_json.
        let mut fields = report_fields(&report, processes, &group);
        fields["inputs"] = reporting.inputs.clone();
        fields["true_parameters"] = json!(TRUE_RATES);
        print_json("fit demo", started, fields);
        return Ok(());
    }
    print_fit(Text::new(false), &report, devices, seconds);
    Ok(())
}

/// The `--json` fields every fit subcommand reports: the parameters, their standard
/// errors, the cost and how the fit ended, where it ran.
fn report_fields(report: &FitReport, processes: &Processes, group: &Group) -> serde_json::Value {
    json!({
        "parameters": report.parameters,
        "standard_errors": report.standard_errors().unwrap_or_default(),
        "cost": report.cost,
        "gradient_norm": report.gradient_norm,
        "gradient_cosine": report.gradient_cosine,
        "residuals": report.residual_count,
        "iterations": report.iterations,
        "evaluations": report.evaluations,
        "termination": termination_name(report.termination),
        "converged": report.converged(),
        "processes": processes.size(),
        "devices": report.devices,
        "model_devices": report.model_devices,
        "device_kind": device_kind(group.devices()),
        "timings": {
            "evaluation": report.evaluation_seconds,
            "reduction": report.reduction_seconds,
        },
    })
}

/// Why a fit stopped, as `--json` spells it.
fn termination_name(termination: Termination) -> &'static str {
    match termination {
        Termination::Gradient => "gradient",
        Termination::Step => "step",
        Termination::Cost => "cost",
        Termination::MaxIterations => "max_iterations",
        Termination::Callback => "callback",
    }
}

/// What a fit's table shows besides the report: its title and the parameters' names and
/// true values.
pub struct FitTable<'a> {
    /// The first line.
    pub title: &'a str,
    /// The name column's heading.
    pub heading: &'a str,
    /// The parameters' names.
    pub names: &'a [&'a str],
    /// The values the synthetic data were made with.
    pub truth: &'a [f64],
}

/// Prints the recovered and true rates with standard errors to `text`.
pub fn print_fit(text: Text, report: &FitReport, devices: usize, seconds: f64) {
    let title = format!(
        "fit: reaction network A+B<->C->D, 6 experiments, {} residuals, {devices} device(s)",
        report.residual_count
    );
    let table = FitTable {
        title: &title,
        heading: "rate",
        names: &["k1", "k2", "k3"],
        truth: &TRUE_RATES,
    };
    print_table(text, &table, report, seconds);
}

/// Prints a fit's parameters beside the true ones, with standard errors and `|z|`, and its
/// cost, chi^2 per degree of freedom, iterations and termination.
pub fn print_table(text: Text, table: &FitTable<'_>, report: &FitReport, seconds: f64) {
    let errors = report.standard_errors().unwrap_or_default();
    writeln!(text, "{}", table.title);
    let width = table
        .names
        .iter()
        .map(|name| name.len())
        .fold(table.heading.len(), usize::max);
    writeln!(
        text,
        "  {:<width$} {:>12} {:>12} {:>10} {:>8}",
        table.heading, "fitted", "true", "std err", "|z|"
    );
    for (k, (fitted, truth)) in report.parameters.iter().zip(table.truth).enumerate() {
        let se = errors.get(k).copied().unwrap_or(f64::NAN);
        let name = table.names.get(k).copied().unwrap_or("?");
        writeln!(
            text,
            "  {name:<width$} {fitted:>12.6} {truth:>12.6} {se:>10.2e} {:>8.2}",
            (fitted - truth).abs() / se
        );
    }
    let dof = report
        .residual_count
        .saturating_sub(report.parameters.len())
        .max(1);
    writeln!(
        text,
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
    reporting: &Reporting,
) -> Result<(), Failure> {
    if replicates == 0 {
        return Err(Failure::input("--replicates must be at least 1"));
    }
    if show_plan {
        processes.refuse_spanning("tutti fit bootstrap --plan")?;
    }
    let (spanning, local) = match processes.share(resources, tutti_fit::GPU_USE)? {
        Some((group, share)) => (Some(group), share),
        None => (None, processes.alone_share(resources)),
    };
    // Checks that may fail in one process only join the campaign's first round as failed.
    let (groups, kind) = before_campaign(spanning.as_ref(), one_per_device(&local))?;
    let devices = groups.len();
    if show_plan {
        return print_plan(&groups[0], seed, "fit bootstrap", reporting);
    }
    let ledger = ledger
        .ok_or_else(|| Failure::input("`--ledger FILE` is needed unless `--plan` is given"))?;
    let (experiments, base) = before_campaign(
        spanning.as_ref(),
        synthetic_experiments(seed)
            .map_err(Failure::from)
            .and_then(|experiments| {
                let options = FitOptions::default().with_resources(groups[0].clone());
                let base = fit(&experiments, &START_RATES, &options)?;
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
    let options = CampaignOptions::default().with_execution(execution);
    let options = match crate::progress::reporter(processes.prints()) {
        Some(report) => options.with_progress(report),
        None => options,
    };
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
    let outcome = checkpointed_map(task, &items, ledger, &options)?;
    if !processes.prints() {
        return Ok(());
    }
    let accepted: Vec<&ReplicateResult> = outcome.results.iter().flatten().collect();
    // The 95% interval of each rate over the accepted replicates.
    let intervals: Vec<(f64, f64)> = (0..base.parameters.len())
        .map(|k| {
            let values: Vec<f64> = accepted.iter().map(|r| r.parameters[k]).collect();
            (
                quantile(&values, 0.025).unwrap_or(f64::NAN),
                quantile(&values, 0.975).unwrap_or(f64::NAN),
            )
        })
        .collect();
    if reporting.json {
        let rates: Vec<serde_json::Value> = base
            .parameters
            .iter()
            .zip(TRUE_RATES)
            .zip(&intervals)
            .map(|((fitted, truth), (low, high))| {
                json!({ "fitted": fitted, "low": low, "high": high, "true": truth })
            })
            .collect();
        let failures: Vec<serde_json::Value> = outcome
            .failures
            .iter()
            .map(|failure| json!({ "task": failure.task_id, "error": failure.error }))
            .collect();
        let fields = json!({
            "inputs": reporting.inputs,
            "replicates": replicates,
            "reused": outcome.reused,
            "ran": outcome.ran,
            "accepted": accepted.len(),
            "failed": outcome.failures.len(),
            "failures": failures,
            "rates": rates,
            "interval": [0.025, 0.975],
            "processes": processes.size(),
            "devices": devices,
            "device_kind": kind,
            "outputs": { "ledger": ledger },
        });
        print_json("fit bootstrap", started, fields);
        return Ok(());
    }
    println!(
        "bootstrap: {replicates} replicates ({} taken from the ledger, {} run) in {:.2} s on {where_}; {} failed",
        outcome.reused,
        outcome.ran,
        started.elapsed().as_secs_f64(),
        outcome.failures.len()
    );
    println!(
        "  {:<4} {:>12} {:>12} {:>12} {:>12}",
        "rate", "fitted", "2.5%", "97.5%", "true"
    );
    let rates = base.parameters.iter().zip(TRUE_RATES).zip(&intervals);
    for (k, ((fitted, truth), (low, high))) in rates.enumerate() {
        println!(
            "  k{:<3} {fitted:>12.6} {low:>12.6} {high:>12.6} {truth:>12.6}",
            k + 1
        );
    }
    Ok(())
}

/// Groups of one device, one per device `resources` selects, and the devices' kind (as
/// `--json` reports it).
fn one_per_device(resources: &Resources) -> Result<(Vec<Resources>, serde_json::Value), Failure> {
    let devices = resources.select_for(tutti_fit::GPU_USE)?;
    let groups = resource_groups(resources, &vec![1; devices.len()])?;
    Ok((groups, device_kind(&devices)))
}

/// `result`, told to the other processes first when it is an error ([`Group::before_run`]).
fn before_campaign<T>(spanning: Option<&Group>, result: Result<T, Failure>) -> Result<T, Failure> {
    match spanning {
        Some(group) => group.before_run(result),
        None => result,
    }
}

/// Summarizes `ledger`. The ledger is this subcommand's only input: failing to read it is
/// an input failure, like a damaged one.
fn status(ledger: &Path, json: bool) -> Result<(), Failure> {
    let started = Instant::now();
    let (summary, records) = summarize_ledger(ledger).map_err(|e| Failure::input(e.to_string()))?;
    let failed = records.iter().filter(|r| r.status == TaskStatus::Failed);
    if json {
        let failures: Vec<serde_json::Value> = failed
            .map(|record| {
                json!({
                    "task": record.task_id,
                    "attempts": record.attempts,
                    "error": record.error,
                })
            })
            .collect();
        let fields = json!({
            "inputs": { "ledger": ledger },
            "tasks": summary.tasks,
            "accepted": summary.accepted,
            "failed": summary.failed,
            "attempts": summary.attempts,
            "failures": failures,
        });
        print_json("campaign status", started, fields);
        return Ok(());
    }
    println!(
        "{}: {} task(s): {} accepted, {} failed, {} run(s) in all",
        ledger.display(),
        summary.tasks,
        summary.accepted,
        summary.failed,
        summary.attempts
    );
    for record in failed {
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
        let text = Reporting {
            json: false,
            inputs: serde_json::Value::Null,
        };
        assert!(print_plan(&Resources::cpu(2), 2026, "fit demo", &text).is_ok());
        let alone = Processes::start(tutti_mpi::launch::MpiMode::Off).unwrap();
        let err = demo(&alone, &Resources::cpu(0), 2026, false, &text).unwrap_err();
        assert!(err.message().contains("zero devices"), "{err}");
        assert_eq!(err.exit_code(), 2);
        let err = plan_text(&Resources::cpu(1).with_device_memory_cap(1024), 2026).unwrap_err();
        assert!(
            err.message().contains("does not fit") && err.message().contains("contributions"),
            "{err}"
        );
        assert_eq!(err.exit_code(), 2);
        let report = example_fit(2, 2026).unwrap();
        assert_eq!(report.devices, 2);
        assert!(report.converged());
    }
}
