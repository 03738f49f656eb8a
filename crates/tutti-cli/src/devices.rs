//! `tutti devices`: what the node has.

use std::time::Instant;

use clap::Args;
use serde_json::{json, Value};
use tutti_backend::{format_bytes, gpu_count, peer_access_matrix, BackendError};

use crate::failure::Failure;
use crate::report::{device_kind, print_json};
use crate::resources::DeviceArgs;

/// Options of `tutti devices`.
#[derive(Args)]
pub struct DevicesArgs {
    #[command(flatten)]
    devices: DeviceArgs,
}

pub fn run(args: &DevicesArgs, json: bool) -> Result<(), Failure> {
    let started = Instant::now();
    let gpus = gpu_count();
    let devices = args.devices.resources().select()?;
    let infos = devices
        .iter()
        .map(|device| device.info())
        .collect::<Result<Vec<_>, _>>()?;
    let matrix = (devices.len() > 1).then(|| peer_access_matrix(&devices));
    if json {
        let cuda = match &gpus {
            Ok(n) => json!({ "built": true, "gpus": n, "error": null }),
            Err(BackendError::CudaNotBuilt) => {
                json!({ "built": false, "gpus": null, "error": null })
            }
            Err(err) => json!({ "built": true, "gpus": null, "error": err.to_string() }),
        };
        let listing: Vec<Value> = devices
            .iter()
            .zip(&infos)
            .map(|(device, info)| {
                json!({
                    "rank": info.index,
                    "device": device.to_string(),
                    "kind": info.kind.name(),
                    "name": info.name,
                    "threads": info.threads,
                    "memory_free": info.memory.free,
                    "memory_total": info.memory.total,
                })
            })
            .collect();
        print_json(
            "devices",
            started,
            json!({
                "inputs": { "resources": args.devices.to_json() },
                "cuda": cuda,
                "devices": devices.len(),
                "device_kind": device_kind(&devices),
                "device_info": listing,
                "peer_access": matrix,
            }),
        );
        return Ok(());
    }
    match &gpus {
        Ok(n) => println!("CUDA: built in, {n} GPU(s) found"),
        Err(BackendError::CudaNotBuilt) => {
            println!("CUDA: not built in (rebuild with `--features cuda` for GPUs)")
        }
        Err(err) => println!("CUDA: built in, but no GPU usable: {err}"),
    }
    println!(
        "{:<5} {:<7} {:<28} {:>7} {:>11} {:>11}",
        "rank", "device", "name", "threads", "free", "total"
    );
    for (device, info) in devices.iter().zip(&infos) {
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
    if let Some(matrix) = matrix {
        println!("peer access (row reads column directly):");
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
