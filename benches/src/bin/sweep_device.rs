//! The sweep's site contractions through the device executor against the host path.
//!
//! One left-to-right step of H psi at one site (the sketched environment times the state's
//! core, then times H's core), D_H = 8, D_psi = 256 and 512, 64 sketch columns: the host's
//! `contract_strided` in the pool of one simulated device, and the device executor
//! (`Device::gemm` calls) on the same device, operands resident. Prints the times and their
//! ratio (device / host); writes `benches/results/sweep_device.json`. With `--no-write`
//! nothing is written.

use std::error::Error;

use serde_json::json;
use tutti_backend::Resources;
use tutti_sweep::device_check::site_contraction_seconds;

fn main() -> Result<(), Box<dyn Error>> {
    let write = !std::env::args().any(|arg| arg == "--no-write");
    let device = Resources::cpu(1).select()?.remove(0);
    let (d_h, width, repeats) = (8, 64, 5);
    let mut rows = Vec::new();
    for d_psi in [256, 512] {
        let (host, on_device) = site_contraction_seconds(&device, d_psi, d_h, width, repeats)?;
        println!(
            "D_psi {d_psi}, D_H {d_h}, {width} columns, {} threads: host {:.2} ms, \
             device executor {:.2} ms, ratio {:.3}",
            device.threads(),
            host * 1e3,
            on_device * 1e3,
            on_device / host
        );
        rows.push(json!({
            "d_psi": d_psi,
            "d_h": d_h,
            "columns": width,
            "threads": device.threads(),
            "host_s": host,
            "device_s": on_device,
            "device_over_host": on_device / host,
        }));
    }
    if write {
        let path = tutti_benches::write_results("sweep_device", json!({ "runs": rows }))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
