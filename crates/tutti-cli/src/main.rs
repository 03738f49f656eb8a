//! `tutti`: list devices, run the demo, and run each workload from the command line.
//!
//! Exit status: 0 success, 1 the computation failed, 2 bad usage or bad input, 101 a bug
//! (a panic); `--json` prints one JSON object on standard output. docs/cli.md has both.

mod adjoint;
mod demo;
mod devices;
mod failure;
mod fit;
mod fmm;
mod logger;
mod ode;
mod processes;
mod progress;
mod report;
mod resources;
mod sparse;
mod sweep;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Split one scientific computation among all the devices of a node.
#[derive(Parser)]
#[command(name = "tutti", version, about)]
struct Cli {
    /// Run as one process of an MPI job: `auto` when a launcher (mpirun, mpiexec, srun)
    /// started several processes, `on` always, `off` never. `fit demo`, `fmm`, `sweep`,
    /// `adjoint` and `sparse solve` run across processes; the others refuse to.
    #[arg(
        long,
        global = true,
        default_value = "auto",
        value_name = "auto|on|off"
    )]
    mpi: tutti_mpi::launch::MpiMode,
    /// Print one JSON object on standard output instead of the text report: the inputs, the
    /// results, the files written, the accuracy measured, timings, devices and versions
    /// (docs/cli.md lists the fields). Text the report would have printed goes to standard
    /// error or is left out.
    #[arg(long, global = true)]
    json: bool,
    /// More log lines: -v debug, -vv trace (TUTTI_LOG or RUST_LOG, when set, decide
    /// instead).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    verbose: u8,
    /// Fewer lines: -q warnings and errors only, and no progress; -qq errors only.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    quiet: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the devices: kind, memory, threads, and which pairs have peer access.
    Devices(devices::DevicesArgs),
    /// Run a short demonstration on simulated devices and check its results.
    Demo(demo::DemoArgs),
    /// Potentials and accelerations of N bodies by the fast multipole method.
    Fmm(fmm::FmmArgs),
    /// Compress the product of a stack of tensor trains by successive randomized compression.
    Sweep(sweep::SweepArgs),
    /// Gaussian-basis RHF energies and their gradients w.r.t. basis parameters (adjoint).
    Adjoint(adjoint::AdjointArgs),
    /// Least-squares fits over experiments split among devices.
    Fit(fit::FitArgs),
    /// Checkpointed campaigns: inspect a ledger.
    Campaign(fit::CampaignArgs),
    /// Sparse linear systems by a multifrontal LU split among devices.
    Sparse(sparse::SparseArgs),
    /// Stiff ODE systems by a variable-order BDF method over the sparse LU.
    Ode(ode::OdeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logger::install(i16::from(cli.verbose) - i16::from(cli.quiet));
    progress::set_enabled(cli.quiet == 0);
    logger::install_panic_hook();
    let json = cli.json;
    let outcome = processes::Processes::start(cli.mpi).and_then(|processes| {
        let alone = |what: &str| processes.refuse_spanning(what);
        match cli.command {
            Command::Devices(args) => {
                alone("tutti devices").and_then(|()| devices::run(&args, json))
            }
            Command::Demo(args) => alone("tutti demo").and_then(|()| demo::run(&args, json)),
            Command::Fmm(args) => fmm::run(&args, &processes, json),
            Command::Sweep(args) => sweep::run(&args, &processes, json),
            Command::Adjoint(args) => adjoint::run(&args, &processes, json),
            Command::Fit(args) => fit::run(&args, &processes, json),
            Command::Campaign(args) => {
                alone("tutti campaign").and_then(|()| fit::run_campaign(&args, json))
            }
            Command::Sparse(args) => sparse::run(&args, &processes, json),
            Command::Ode(args) => alone("tutti ode").and_then(|()| ode::run(&args, json)),
        }
    });
    progress::finish();
    // 0 success, 1 the computation failed, 2 bad usage or input (clap's code for a command
    // line it cannot parse); a panic exits with 101.
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {failure}");
            ExitCode::from(failure.exit_code())
        }
    }
}
