//! How one computation split among G simulated devices scales, against a single thread.
//!
//! The work is a sum of a smooth function over a large index range, split into contiguous
//! blocks by rank; each rank runs its block on its device's thread pool (its share of the
//! cores), and the partial sums meet in an allreduce. Baseline: the same sum on one thread,
//! in the same process. Prints the time per device count and the speedup over the baseline.

use std::error::Error;

use rayon::prelude::*;
use serde_json::json;
use tutti_backend::{GpuUse, Resources};
use tutti_benches::{best_time, write_results};
use tutti_group::{CommError, Group};

const TERMS: usize = 40_000_000;

fn term(i: usize) -> f64 {
    let x = i as f64 * 1e-7;
    (x.sin() * x.cos()).abs().sqrt()
}

fn main() -> Result<(), Box<dyn Error>> {
    let (serial, serial_sum) = best_time(3, || {
        (0..std::hint::black_box(TERMS)).map(term).sum::<f64>()
    });
    println!(
        "group_scaling: {TERMS} terms; baseline one thread {:.1} ms",
        serial.as_secs_f64() * 1e3
    );
    let mut rows = Vec::new();
    for devices in [1usize, 2, 4] {
        let group = Group::from_resources(&Resources::cpu(devices), GpuUse::HostOnly)?;
        let (time, sums) = best_time(3, || {
            group.run(|comm| {
                let (rank, size) = (comm.rank(), comm.size());
                let (start, end) = (TERMS * rank / size, TERMS * (rank + 1) / size);
                let pool = comm.device().thread_pool()?;
                let partial: f64 = pool.install(|| {
                    (start..end)
                        .into_par_iter()
                        .with_min_len(1 << 16)
                        .map(term)
                        .sum()
                });
                let mut total = [partial];
                comm.allreduce_sum(&mut total)?;
                Ok::<_, CommError>(total[0])
            })
        });
        let sum = sums?[0];
        let relative_difference = ((sum - serial_sum) / serial_sum).abs();
        let speedup = serial.as_secs_f64() / time.as_secs_f64();
        println!(
            "  {devices} device(s): {:8.1} ms  speedup over one thread {speedup:5.2}x  \
             (sum differs from serial by {relative_difference:.1e} relative)",
            time.as_secs_f64() * 1e3
        );
        rows.push(json!({
            "devices": devices,
            "seconds": time.as_secs_f64(),
            "speedup_vs_one_thread": speedup,
            "relative_difference_vs_serial": relative_difference,
        }));
    }
    let path = write_results(
        "group_scaling",
        json!({ "terms": TERMS, "serial_seconds": serial.as_secs_f64(), "runs": rows }),
    )?;
    println!("results: {}", path.display());
    Ok(())
}
