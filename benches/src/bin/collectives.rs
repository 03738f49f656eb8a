//! Collective bandwidth on G simulated devices, against the plain host operation.
//!
//! For each device count, an allreduce and an allgather of a vector of f64 per rank; the
//! baseline is the same arithmetic done sequentially on one thread (summing G vectors, or
//! concatenating them), in the same process. The ratio is the cost of going through the group.

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
    let path = write_results("collectives", json!({ "len_per_rank": LEN, "runs": rows }))?;
    println!("results: {}", path.display());
    Ok(())
}
