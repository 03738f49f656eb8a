//! Collective bandwidth on G simulated devices, against the plain host operation.
//!
//! For each device count, an allreduce and an allgather of a vector of f64 per rank; the
//! baseline is the same arithmetic done sequentially on one thread (summing G vectors, or
//! concatenating them), in the same process. The ratio is the cost of going through the group.
//!
//! Then the latency of small collectives (an allreduce of one f64, many rounds in one run),
//! what a model axis pays for every Newton solve, beside a round of a group of one.

use std::error::Error;

use serde_json::json;
use tutti_backend::{GpuUse, Resources};
use tutti_benches::{best_time, write_results};
use tutti_group::{CommError, Group};

const LEN: usize = 1 << 20;

fn main() -> Result<(), Box<dyn Error>> {
    println!("collectives: {LEN} f64 per rank ({} MiB)", (LEN * 8) >> 20);
    let mut rows = Vec::new();
    for devices in [2usize, 3, 4] {
        let inputs: Vec<Vec<f64>> = (0..devices)
            .map(|r| (0..LEN).map(|i| (i + r) as f64 * 0.5).collect())
            .collect();
        let (baseline_sum, _) = best_time(5, || {
            let mut acc = inputs[0].clone();
            for input in &inputs[1..] {
                for (a, x) in acc.iter_mut().zip(input) {
                    *a += x;
                }
            }
            acc
        });
        let (baseline_concat, _) = best_time(5, || inputs.concat());
        let group = Group::from_resources(&Resources::cpu(devices), GpuUse::HostOnly)?;
        let (allreduce, _) = best_time(5, || {
            group.run(|comm| {
                let mut data = inputs[comm.rank()].clone();
                comm.allreduce_sum(&mut data)?;
                Ok::<_, CommError>(data[1])
            })
        });
        let (allgather, _) = best_time(5, || {
            group.run(|comm| Ok::<_, CommError>(comm.allgather_concat(&inputs[comm.rank()])?.len()))
        });
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        println!(
            "  G={devices}: allreduce {:7.2} ms vs sequential sum {:6.2} ms ({:5.1}x); \
             allgather {:7.2} ms vs concat {:6.2} ms ({:5.1}x)",
            ms(allreduce),
            ms(baseline_sum),
            allreduce.as_secs_f64() / baseline_sum.as_secs_f64(),
            ms(allgather),
            ms(baseline_concat),
            allgather.as_secs_f64() / baseline_concat.as_secs_f64(),
        );
        rows.push(json!({
            "devices": devices,
            "allreduce_seconds": allreduce.as_secs_f64(),
            "sequential_sum_seconds": baseline_sum.as_secs_f64(),
            "allgather_seconds": allgather.as_secs_f64(),
            "concat_seconds": baseline_concat.as_secs_f64(),
        }));
    }
    let latency = small_message_latency()?;
    let path = write_results(
        "collectives",
        json!({ "len_per_rank": LEN, "runs": rows, "latency": latency }),
    )?;
    println!("results: {}", path.display());
    Ok(())
}

/// Rounds of the latency measurement.
const ROUNDS: usize = 20_000;

/// Microseconds per allreduce of one f64, on groups of 1 (no exchange: the baseline), 2, 3
/// and 4 simulated devices.
fn small_message_latency() -> Result<Vec<serde_json::Value>, Box<dyn Error>> {
    println!("latency: {ROUNDS} allreduces of one f64 in one run");
    let mut rows = Vec::new();
    let mut solo = None;
    for devices in [1usize, 2, 3, 4] {
        let group = Group::from_resources(&Resources::cpu(devices), GpuUse::HostOnly)?;
        let (elapsed, _) = best_time(3, || {
            group.run(|comm| {
                let mut x = [1.0];
                for _ in 0..ROUNDS {
                    comm.allreduce_sum(&mut x)?;
                }
                Ok::<_, CommError>(x[0])
            })
        });
        let micros = elapsed.as_secs_f64() * 1e6 / ROUNDS as f64;
        let baseline = *solo.get_or_insert(micros);
        println!(
            "  G={devices}: {micros:8.2} us per allreduce ({:6.1}x a group of one)",
            micros / baseline
        );
        rows.push(json!({ "devices": devices, "microseconds_per_allreduce": micros }));
    }
    Ok(rows)
}
