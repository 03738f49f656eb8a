//! `tutti`: list devices, run the demo, and run each workload from the command line.

mod adjoint;
mod demo;
mod devices;
mod fit;
mod fmm;
mod logger;
mod processes;
mod resources;
mod sweep;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Split one scientific computation among all the devices of a node.
#[derive(Parser)]
#[command(name = "tutti", version, about)]
struct Cli {
    /// Run as one process of an MPI job: `auto` when a launcher (mpirun, mpiexec, srun)
    /// started several processes, `on` always, `off` never. `fit demo`, `fmm`, `sweep` and
    /// `adjoint` run across processes; the others refuse to.
    #[arg(
        long,
        global = true,
        default_value = "auto",
        value_name = "auto|on|off"
    )]
    mpi: tutti_mpi::launch::MpiMode,
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logger::install();
    logger::install_panic_hook();
    let outcome = processes::Processes::start(cli.mpi).and_then(|processes| {
        let alone = |what: &str| processes.refuse_spanning(what);
        match cli.command {
            Command::Devices(args) => alone("tutti devices").and_then(|()| devices::run(&args)),
            Command::Demo(args) => alone("tutti demo").and_then(|()| demo::run(&args)),
            Command::Fmm(args) => fmm::run(&args, &processes),
            Command::Sweep(args) => sweep::run(&args, &processes),
            Command::Adjoint(args) => adjoint::run(&args, &processes),
            Command::Fit(args) => fit::run(&args, &processes),
            Command::Campaign(args) => {
                alone("tutti campaign").and_then(|()| fit::run_campaign(&args))
            }
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
