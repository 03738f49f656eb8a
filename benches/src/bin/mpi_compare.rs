//! The MPI transport's overhead, under `mpirun -n P` (feature `mpi`): one exchange of 1, 64
//! and 4096 KiB per pair of ranks over the transport (one round: the header all-to-all,
//! then the blocks) beside a raw blocking `MPI_Alltoall` of the same bytes on the same
//! communicator, and beside the same exchange among P threads; then the fit and the FMM on P
//! processes beside P threads in one process, checked bitwise equal.
//!
//! `cargo build --release -p tutti-benches --features mpi --bin mpi_compare`, then
//! `mpirun -n 2 --bind-to none target/release/mpi_compare`: without `--bind-to none` Open
//! MPI binds each process to one core, and the P-thread baseline, which runs inside rank
//! 0's process, would get one core for its P threads. Rank 0 prints and writes
//! `benches/results/mpi_compare.json`, with the MPI library's version.

use std::error::Error;
use std::hint::black_box;
use std::time::{Duration, Instant};

use serde_json::json;
use tutti_backend::Resources;
use tutti_benches::{write_results, SplitMix};
use tutti_fit::example::{synthetic_experiments, START_RATES};
use tutti_fit::{fit, fit_on, FitOptions};
use tutti_fmm::{fmm, fmm_on, FmmOptions};
use tutti_group::{CommError, Group};
use tutti_mpi::mpi::World;

const REPEATS: u32 = 30;

/// Mean seconds of one exchange of `bytes` per pair among the ranks of `group`.
fn transport_seconds(group: &Group, bytes: usize) -> Result<f64, Box<dyn Error>> {
    let seconds = group.run(|comm| {
        let blocks: Vec<Vec<u8>> = (0..comm.size())
            .map(|dest| vec![(comm.rank() * 7 + dest) as u8; bytes])
            .collect();
        black_box(comm.all_to_all(&blocks)?);
        comm.barrier()?;
        let started = Instant::now();
        for _ in 0..REPEATS {
            black_box(comm.all_to_all(&blocks)?);
        }
        Ok::<_, CommError>(started.elapsed().as_secs_f64() / f64::from(REPEATS))
    })?;
    Ok(seconds[0])
}

/// Mean seconds of a raw `MPI_Alltoall` of `bytes` per pair on the world's communicator.
fn raw_seconds(world: &World, bytes: usize) -> Result<f64, Box<dyn Error>> {
    let fabric = world.fabric();
    let mut wire = fabric.wire();
    let send: Vec<u8> = (0..world.size())
        .flat_map(|dest| std::iter::repeat_n((world.rank() * 7 + dest) as u8, bytes))
        .collect();
    black_box(wire.raw_all_to_all(&send, bytes)?);
    let started = Instant::now();
    for _ in 0..REPEATS {
        black_box(wire.raw_all_to_all(&send, bytes)?);
    }
    Ok(started.elapsed().as_secs_f64() / f64::from(REPEATS))
}

fn bodies(n: usize) -> (Vec<[f64; 3]>, Vec<f64>) {
    let mut random = SplitMix(2026);
    let positions = (0..n)
        .map(|_| [random.next_unit(), random.next_unit(), random.next_unit()])
        .collect();
    let masses = (0..n).map(|_| 0.5 + random.next_unit()).collect();
    (positions, masses)
}

fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}

fn main() -> Result<(), Box<dyn Error>> {
    let world = World::init()?;
    let (rank, size) = (world.rank(), world.size());
    let resources = tutti_mpi::node_share(
        &Resources::cpu(1),
        world.local_rank(),
        world.local_size(),
        tutti_mpi::Node::here(),
    );
    let device = resources.select()?.remove(0);
    let group = Group::spanning(world.fabric(), device);
    let threads = Group::new(Resources::cpu(size).select()?)?;
    let lead = rank == 0;
    let cores_here = tutti_backend::system::host_cores();
    if lead {
        println!("mpi_compare: {size} processes, {}", world.library_version());
        if cores_here < size {
            println!(
                "note: this process may run on {cores_here} core(s), so the {size}-thread \
                 baseline is starved: run mpirun with --bind-to none"
            );
        }
        println!(
            "{:>9} {:>14} {:>14} {:>14} {:>10} {:>10}",
            "KiB/pair", "transport s", "raw MPI s", "threads s", "vs raw", "vs threads"
        );
    }
    let mut exchanges = Vec::new();
    for kib in [1usize, 64, 4096] {
        let bytes = kib * 1024;
        let transport = transport_seconds(&group, bytes)?;
        let raw = raw_seconds(&world, bytes)?;
        // The thread baseline runs in rank 0's process only; the others wait for the next
        // collective meanwhile.
        let on_threads = if lead {
            transport_seconds(&threads, bytes)?
        } else {
            f64::NAN
        };
        if lead {
            println!(
                "{kib:>9} {transport:>14.3e} {raw:>14.3e} {on_threads:>14.3e} {:>10.2} {:>10.2}",
                transport / raw,
                transport / on_threads
            );
        }
        exchanges.push(json!({
            "kib_per_pair": kib,
            "transport_seconds": transport,
            "raw_mpi_alltoall_seconds": raw,
            "threads_seconds": on_threads,
            "transport_over_raw": transport / raw,
            "transport_over_threads": transport / on_threads,
        }));
    }

    let experiments = synthetic_experiments(2026)?;
    let options = FitOptions::default();
    let started = Instant::now();
    let over_processes = fit_on(&group, &experiments, &START_RATES, &options)?;
    let fit_processes = seconds(started.elapsed());
    let (positions, masses) = bodies(20_000);
    let fmm_options = FmmOptions::default();
    let started = Instant::now();
    let fmm_processes = fmm_on(&group, &positions, &masses, &fmm_options)?;
    let fmm_processes_seconds = seconds(started.elapsed());
    if !lead {
        return Ok(());
    }
    let started = Instant::now();
    let on_threads = fit(
        &experiments,
        &START_RATES,
        &options.clone().with_resources(Resources::cpu(size)),
    )?;
    let fit_threads = seconds(started.elapsed());
    let started = Instant::now();
    let fmm_threads = fmm(
        &positions,
        &masses,
        &fmm_options.with_resources(Resources::cpu(size)),
    )?;
    let fmm_threads_seconds = seconds(started.elapsed());
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let fit_bitwise = bits(&over_processes.parameters) == bits(&on_threads.parameters)
        && over_processes.cost.to_bits() == on_threads.cost.to_bits();
    let fmm_bitwise = bits(&fmm_processes.potential) == bits(&fmm_threads.potential);
    println!(
        "fit:  {size} processes {fit_processes:.3} s, {size} threads {fit_threads:.3} s (ratio {:.2}), bitwise equal: {fit_bitwise}",
        fit_processes / fit_threads
    );
    println!(
        "fmm:  {size} processes {fmm_processes_seconds:.3} s, {size} threads {fmm_threads_seconds:.3} s (ratio {:.2}), bitwise equal: {fmm_bitwise} (N = 20000)",
        fmm_processes_seconds / fmm_threads_seconds
    );
    let path = write_results(
        "mpi_compare",
        json!({
            "processes": size,
            "cores_rank_0_may_use": cores_here,
            "mpi_library": world.library_version(),
            "thread_level": format!("{:?}", world.thread_level()),
            "launcher": tutti_mpi::launch::detect_here()?.map(|l| l.launcher.to_string()),
            "exchange": exchanges,
            "fit": {
                "processes_seconds": fit_processes,
                "threads_seconds": fit_threads,
                "bitwise_equal": fit_bitwise,
            },
            "fmm": {
                "bodies": positions.len(),
                "processes_seconds": fmm_processes_seconds,
                "threads_seconds": fmm_threads_seconds,
                "bitwise_equal": fmm_bitwise,
            },
        }),
    )?;
    println!("wrote {}", path.display());
    if !(fit_bitwise && fmm_bitwise) {
        return Err("processes and threads differ".into());
    }
    Ok(())
}
