//! `tutti-mpi-selftest <case>`: one MPI process of a transport self-test, run under
//! `mpirun -n N` by `tests/mpirun.rs`. Each process runs the case over a real MPI world,
//! checks what it got against the same computation on threads (or the expected failure
//! report), prints `rank R: ok` and exits 0, or prints what is wrong and exits 1.
//!
//! Cases: `collectives`, `rounds`, `error R K`, `panic R K`, `early R K`, `mismatch R K`,
//! `again` (a failed run, then a good one, on one world), `abort R` (rank R calls
//! `process::abort` mid-run: the launcher must end the job), `kill R` (rank R is killed
//! with SIGKILL mid-run, likewise).

#[path = "../../tests/cases/mod.rs"]
mod cases;

use std::process::ExitCode;

use cases::{check_fault, collectives, collectives_on_threads, faulty, Fault};
use tutti_backend::Resources;
use tutti_group::{CommError, Group};
use tutti_mpi::mpi::World;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let world = match World::init() {
        Ok(world) => world,
        Err(err) => {
            eprintln!("selftest: {err}");
            return ExitCode::FAILURE;
        }
    };
    let rank = world.rank();
    match run(&world, &args) {
        Ok(()) => {
            println!("rank {rank}: ok");
            ExitCode::SUCCESS
        }
        Err(why) => {
            println!("rank {rank}: FAILED: {why}");
            ExitCode::FAILURE
        }
    }
}

fn number(args: &[String], index: usize) -> Result<usize, String> {
    args.get(index)
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| format!("argument {index} of {args:?} must be a number"))
}

fn run(world: &World, args: &[String]) -> Result<(), String> {
    let device = Resources::cpu(1)
        .select()
        .map_err(|e| e.to_string())?
        .remove(0);
    let group = Group::spanning(world.fabric(), device);
    let (rank, size) = (world.rank(), world.size());
    let case = args.first().map(String::as_str).unwrap_or("");
    let fault = |fault: Fault| -> Result<(), String> {
        let (bad, at) = (number(args, 1)?, number(args, 2)?);
        let outcome = group.run(|comm| faulty(comm, fault, bad, at));
        check_fault(fault, bad, at, rank, &outcome)
    };
    match case {
        "collectives" | "rounds" => {
            let rounds = if case == "rounds" { 300 } else { 12 };
            let got = group
                .run(|comm| collectives(comm, rounds))
                .map_err(|e| e.to_string())?;
            let reference = collectives_on_threads(size, rounds);
            if got.first() == reference.get(rank) {
                Ok(())
            } else {
                Err(format!("{rounds} rounds differ from {size} threads"))
            }
        }
        "large" => {
            // Blocks of about 64 KiB and 1 MiB in alternate rounds: from the third round on,
            // the wire receives into buffers of earlier rounds (its pool), so every byte
            // must be checked to be this round's.
            let len = |round: usize, rank: usize| [65_536, 1 << 20][round % 2] + rank;
            let pattern = |round: usize, from: usize, to: usize| -> Vec<u8> {
                (0..len(round, from))
                    .map(|i| (i * 31 + round * 7 + from * 3 + to) as u8)
                    .collect()
            };
            let wrong = group
                .run(|comm| {
                    let mut wrong = 0usize;
                    for round in 0..6 {
                        let blocks: Vec<Vec<u8>> = (0..comm.size())
                            .map(|to| pattern(round, comm.rank(), to))
                            .collect();
                        let incoming = comm.all_to_all(&blocks)?;
                        for (from, block) in incoming.iter().enumerate() {
                            wrong += usize::from(*block != pattern(round, from, comm.rank()));
                        }
                    }
                    Ok::<_, CommError>(wrong)
                })
                .map_err(|e| e.to_string())?;
            if wrong == [0] {
                Ok(())
            } else {
                Err(format!("{wrong:?} large blocks arrived wrong"))
            }
        }
        "error" => fault(Fault::Error),
        "panic" => fault(Fault::Panic),
        "early" => fault(Fault::EarlyReturn),
        "mismatch" => fault(Fault::Mismatch),
        "again" => {
            let failed = group.run(|comm| faulty(comm, Fault::Error, size - 1, 3));
            check_fault(Fault::Error, size - 1, 3, rank, &failed)?;
            let sums = group
                .run(|comm| {
                    let mut x = [comm.rank() as f64];
                    comm.allreduce_sum(&mut x)?;
                    Ok::<_, CommError>(x[0])
                })
                .map_err(|e| format!("the run after a failure: {e}"))?;
            let expected = (size * (size - 1) / 2) as f64;
            if sums == [expected] {
                Ok(())
            } else {
                Err(format!(
                    "the run after a failure gave {sums:?}, not [{expected}]"
                ))
            }
        }
        "abort" | "kill" => {
            let bad = number(args, 1)?;
            let _ = group.run(|comm| {
                for round in 0..1000 {
                    if comm.rank() == bad && round == 3 {
                        if case == "kill" {
                            let pid = std::process::id().to_string();
                            let _ = std::process::Command::new("kill")
                                .args(["-KILL", &pid])
                                .status();
                        }
                        std::process::abort();
                    }
                    comm.barrier()?;
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Ok::<_, CommError>(())
            });
            Err("the job went on after a process aborted".into())
        }
        other => Err(format!("unknown case `{other}`")),
    }
}
