//! `tutti devices`: what the node has.

use clap::Args;
use tutti_backend::{format_bytes, gpu_count, peer_access_matrix, BackendError};

use crate::resources::DeviceArgs;

/// Options of `tutti devices`.
#[derive(Args)]
pub struct DevicesArgs {
    #[command(flatten)]
    devices: DeviceArgs,
}

pub fn run(args: &DevicesArgs) -> Result<(), String> {
    match gpu_count() {
        Ok(n) => println!("CUDA: built in, {n} GPU(s) found"),
        Err(BackendError::CudaNotBuilt) => {
            println!("CUDA: not built in (rebuild with `--features cuda` for GPUs)")
        }
        Err(err) => println!("CUDA: built in, but no GPU usable: {err}"),
    }
    let devices = args
        .devices
        .resources()
        .select()
        .map_err(|e| e.to_string())?;
    println!(
        "{:<5} {:<7} {:<28} {:>7} {:>11} {:>11}",
        "rank", "device", "name", "threads", "free", "total"
    );
    for device in &devices {
        let info = device.info().map_err(|e| e.to_string())?;
        println!(
            "{:<5} {:<7} {:<28} {:>7} {:>11} {:>11}",
            info.index,
            device.to_string(),
            info.name,
            info.threads,
            format_bytes(info.memory.free),
            format_bytes(info.memory.total),
        );
    }
    if devices.len() > 1 {
        println!("peer access (row reads column directly):");
        let matrix = peer_access_matrix(&devices);
        print!("      ");
        for column in 0..devices.len() {
            print!(" {column:>3}");
        }
        println!();
        for (row, line) in matrix.iter().enumerate() {
            print!("  {row:>3} ");
            for &access in line {
                print!(" {:>3}", if access { "yes" } else { "no" });
            }
            println!();
        }
    }
    Ok(())
}
