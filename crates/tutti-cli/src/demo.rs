//! `tutti demo`: a short run on an embedded default that checks what it computes.

use std::time::Instant;

use clap::Args;
use tutti_backend::{format_bytes, DeviceRequest, KindRequest, Resources};
use tutti_group::{CommError, Group, RunError};
use tutti_plan::{Budget, ObjectSpec, Planner, SpillStore, Tier};

/// Options of `tutti demo`.
#[derive(Args)]
pub struct DemoArgs {
    /// Number of devices.
    #[arg(long, short = 'd', default_value_t = 4)]
    devices: usize,
    /// Device kind: cpu (simulated), gpu, or auto.
    #[arg(long, default_value = "cpu")]
    kind: KindRequest,
    /// Elements per rank in the collective round trip.
    #[arg(long, default_value_t = 1 << 18)]
    len: usize,
}

pub fn run(args: &DemoArgs) -> Result<(), String> {
    let resources = Resources::default()
        .with_kind(args.kind)
        .with_devices(DeviceRequest::Count(args.devices));
    let group = Group::from_resources(&resources).map_err(|e| e.to_string())?;
    let names: Vec<String> = group.devices().iter().map(ToString::to_string).collect();
    println!(
        "tutti {} demo: {} rank(s) on {}",
        env!("CARGO_PKG_VERSION"),
        group.size(),
        names.join(", ")
    );
    collective_round_trip(&group, args.len)?;
    abort_round_trip(&group)?;
    plan_and_spill(&resources)?;
    println!("demo: all checks passed");
    Ok(())
}

/// Rank r's contribution to the reduction: values that do not sum exactly in floating point,
/// so only a fixed summation order reproduces the reference bit for bit.
fn contribution(rank: usize, len: usize) -> Vec<f64> {
    (0..len)
        .map(|i| ((i as f64) * 0.37 + rank as f64).sin() / (rank as f64 + 1.0))
        .collect()
}

/// Allreduce, uneven scatter and gather, and all-to-all, each checked against a sequential
/// reference computed on the host.
fn collective_round_trip(group: &Group, len: usize) -> Result<(), String> {
    let size = group.size();
    println!(
        "collectives: {len} f64 per rank ({} per rank)",
        format_bytes((len * 8) as u64)
    );
    let mut reference = contribution(0, len);
    for rank in 1..size {
        for (acc, x) in reference.iter_mut().zip(contribution(rank, len)) {
            *acc += x;
        }
    }
    // Uneven blocks: rank r gets r + 1 parts of the scattered vector.
    let scattered: Vec<f64> = (0..size * (size + 1) / 2).map(|i| i as f64).collect();
    let started = Instant::now();
    let per_rank = group
        .run(|comm| {
            let rank = comm.rank();
            let mut sum = comm.device().upload(&contribution(rank, len))?;
            let t0 = Instant::now();
            comm.allreduce_sum_buffer(&mut sum)?;
            let allreduce_time = t0.elapsed();
            let sum = sum.to_host_vec()?;
            let sum_matches = sum
                .iter()
                .zip(&reference)
                .all(|(a, b)| a.to_bits() == b.to_bits());

            let blocks = (rank == 0).then(|| {
                let mut start = 0;
                (0..comm.size())
                    .map(|r| {
                        let block = scattered[start..start + r + 1].to_vec();
                        start += r + 1;
                        block
                    })
                    .collect::<Vec<_>>()
            });
            let mine = comm.scatter(0, blocks.as_deref())?;
            let doubled: Vec<f64> = mine.iter().map(|x| 2.0 * x).collect();
            let gathered = comm.gather(0, &doubled)?.map(|blocks| blocks.concat());

            let outgoing: Vec<Vec<u64>> = (0..comm.size())
                .map(|dest| vec![(rank * 100 + dest) as u64; dest + 1])
                .collect();
            let incoming = comm.all_to_all(&outgoing)?;
            let all_to_all_ok = incoming
                .iter()
                .enumerate()
                .all(|(src, block)| block == &vec![(src * 100 + rank) as u64; rank + 1]);
            Ok::<_, CommError>((sum_matches, allreduce_time, gathered, all_to_all_ok))
        })
        .map_err(|e| e.to_string())?;
    let elapsed = started.elapsed();
    let reduce_ok = per_rank.iter().all(|r| r.0);
    let slowest = per_rank.iter().map(|r| r.1).max().unwrap_or_default();
    let expected_gather: Vec<f64> = scattered.iter().map(|x| 2.0 * x).collect();
    let gather_ok = per_rank[0].2.as_ref() == Some(&expected_gather);
    let all_to_all_ok = per_rank.iter().all(|r| r.3);
    let verdict = |ok: bool| if ok { "ok" } else { "FAILED" };
    println!(
        "  allreduce_sum  {:>9.3} ms  bitwise equal to the sequential sum on every rank: {}",
        slowest.as_secs_f64() * 1e3,
        verdict(reduce_ok)
    );
    println!(
        "  scatter/gather uneven blocks (rank r holds r+1 values), doubled and gathered back: {}",
        verdict(gather_ok)
    );
    println!(
        "  all_to_all     uneven blocks, every (source, destination) pair checked: {}",
        verdict(all_to_all_ok)
    );
    println!(
        "  round trip     {:>9.3} ms in all",
        elapsed.as_secs_f64() * 1e3
    );
    if reduce_ok && gather_ok && all_to_all_ok {
        Ok(())
    } else {
        Err("a collective returned a wrong result".into())
    }
}

/// The last rank fails in the middle of a run; the others are released and the original
/// error comes back.
fn abort_round_trip(group: &Group) -> Result<(), String> {
    if group.size() < 2 {
        return Ok(());
    }
    let failing = group.size() - 1;
    let started = Instant::now();
    let outcome = group.run(|comm| {
        for step in 0..5 {
            if comm.rank() == failing && step == 3 {
                return Err(format!("injected failure at step {step}"));
            }
            comm.barrier().map_err(|e| e.to_string())?;
        }
        Ok(())
    });
    let released_in = started.elapsed();
    match outcome {
        Err(RunError::Failed { rank, error }) if rank == failing => {
            println!(
                "abort: rank {rank} failed (\"{error}\"); the other ranks were released and \
                 the original error returned in {:.3} ms: ok",
                released_in.as_secs_f64() * 1e3
            );
            Ok(())
        }
        Err(other) => Err(format!("abort returned the wrong error: {other}")),
        Ok(_) => Err("the injected failure was not reported".into()),
    }
}

/// A plan for a made-up out-of-core problem on devices capped at 64 MiB, a refusal of one
/// that cannot fit, and a spill file written, read back and removed.
fn plan_and_spill(resources: &Resources) -> Result<(), String> {
    const CAP: u64 = 64 << 20;
    let capped = resources.clone().with_device_memory_cap(CAP);
    let devices = capped.select().map_err(|e| e.to_string())?;
    let budget = Budget::from_devices(&devices, &capped).map_err(|e| e.to_string())?;
    let objects = [
        ObjectSpec::shared("operator cores", 4 << 20, 8).first_used_at(0),
        ObjectSpec::per_device("sketch environments", 24 << 20, 1).first_used_at(1),
        ObjectSpec::shared("state cores", 256 << 20, 4).first_used_at(2),
    ];
    let plan = Planner::new(budget)
        .plan(&objects)
        .map_err(|e| e.to_string())?;
    println!("plan: devices capped at {}", format_bytes(CAP));
    for line in plan.to_string().lines() {
        println!("  {line}");
    }
    let expected = [Tier::Device, Tier::Device, Tier::Host];
    let placed_as_expected = objects
        .iter()
        .zip(expected)
        .all(|(object, tier)| plan.tier_of(object.name()) == Some(tier));
    if !placed_as_expected {
        return Err("the planner placed the demo objects unexpectedly".into());
    }

    let too_big = Budget::new(devices.len(), CAP, 1 << 30, 1 << 30).map_err(|e| e.to_string())?;
    match Planner::new(too_big).plan(&[ObjectSpec::per_device("dense operator", 40 << 30, 1)]) {
        Err(refusal) => println!("plan: an infeasible problem is refused up front: {refusal}"),
        Ok(_) => return Err("the planner accepted an infeasible problem".into()),
    }

    let store = SpillStore::for_resources(&capped).map_err(|e| e.to_string())?;
    let dir = store.dir().to_path_buf();
    let values: Vec<f64> = (0..1 << 16).map(|i| (i as f64).sqrt()).collect();
    let mut writer = store.create_file("demo-block").map_err(|e| e.to_string())?;
    writer.write_f64s(&values).map_err(|e| e.to_string())?;
    let written = writer.finish().map_err(|e| e.to_string())?;
    let mut back = vec![0.0; values.len()];
    store
        .open_file("demo-block")
        .and_then(|mut reader| reader.read_f64s(&mut back))
        .map_err(|e| e.to_string())?;
    store.close().map_err(|e| e.to_string())?;
    let round_trip_ok = back == values && !dir.exists();
    println!(
        "spill: wrote {} to {}, read it back {}, directory removed: {}",
        format_bytes(written),
        dir.display(),
        if back == values {
            "identical"
        } else {
            "DIFFERENT"
        },
        if dir.exists() { "no" } else { "yes" }
    );
    if round_trip_ok {
        Ok(())
    } else {
        Err("the spill round trip failed".into())
    }
}
