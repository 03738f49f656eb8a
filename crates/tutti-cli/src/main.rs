//! `tutti`: list devices, run the demo, and run each workload from the command line.

mod demo;
mod devices;
mod resources;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Split one scientific computation among all the devices of a node.
#[derive(Parser)]
#[command(name = "tutti", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the devices: kind, memory, threads, and which pairs have peer access.
    Devices(devices::DevicesArgs),
    /// Run a short demonstration on simulated devices and check its results.
    Demo(demo::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Devices(args) => devices::run(&args),
        Command::Demo(args) => demo::run(&args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
