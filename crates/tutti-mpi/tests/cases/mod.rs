//! Scenarios run by the loopback tests (threads as processes) and by the MPI self-test
//! binary under `mpirun` (real processes): one closure per case, and what every rank must
//! see. The reference for results is the same closure on a group of threads, in-process.

#![allow(dead_code)] // each includer uses its own subset

use tutti_group::{Comm, CommError, Group, RunError};

/// A case's own error, as a workload would have.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseError {
    Injected { rank: usize, round: usize },
    Comm(CommError),
}

impl std::fmt::Display for CaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Injected { rank, round } => {
                write!(f, "injected failure on rank {rank} after {round} rounds")
            }
            Self::Comm(err) => write!(f, "{err}"),
        }
    }
}

impl From<CommError> for CaseError {
    fn from(err: CommError) -> Self {
        Self::Comm(err)
    }
}

/// A pseudo-random f64 in [-1, 1) from a counter (splitmix64), the same in every process.
fn value(seed: u64) -> f64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

/// Every collective once or more, with uneven lengths; returns the bits of every result.
pub fn collectives(comm: &Comm<'_>, rounds: usize) -> Result<Vec<u64>, CommError> {
    let (rank, size) = (comm.rank(), comm.size());
    let mut bits = Vec::new();
    for round in 0..rounds {
        let seed = |i: usize| ((round * 64 + rank) * 4096 + i) as u64;
        let mut x: Vec<f64> = (0..5 + round % 3).map(|i| value(seed(i))).collect();
        comm.allreduce_sum(&mut x)?;
        bits.extend(x.iter().map(|v| v.to_bits()));

        let root = round % size;
        let mut message: Vec<f64> = if rank == root {
            (0..round % 4).map(|i| value(seed(100 + i))).collect()
        } else {
            Vec::new()
        };
        comm.broadcast(root, &mut message)?;
        bits.extend(message.iter().map(|v| v.to_bits()));

        let mine: Vec<i64> = (0..(rank + round) % 4)
            .map(|i| (rank * 10 + i) as i64)
            .collect();
        let gathered = comm.allgather_concat(&mine)?;
        bits.extend(gathered.iter().map(|&v| v as u64));

        let send: Vec<Vec<f64>> = (0..size)
            .map(|dest| {
                (0..(rank + dest + round) % 3)
                    .map(|i| value(seed(200 + dest * 8 + i)))
                    .collect()
            })
            .collect();
        let received = comm.all_to_all(&send)?;
        for block in received {
            bits.push(block.len() as u64);
            bits.extend(block.iter().map(|v| v.to_bits()));
        }

        let mut partial: Vec<f64> = (0..3).map(|i| value(seed(300 + i))).collect();
        comm.reduce_sum(root, &mut partial)?;
        if rank == root {
            bits.extend(partial.iter().map(|v| v.to_bits()));
        }
        comm.barrier()?;
    }
    Ok(bits)
}

/// The results of [`collectives`] on a group of `size` threads: the reference.
pub fn collectives_on_threads(size: usize, rounds: usize) -> Vec<Vec<u64>> {
    let devices = tutti_backend::Resources::cpu(size)
        .select()
        .expect("simulated devices");
    Group::new(devices)
        .expect("a group")
        .run(|comm| collectives(comm, rounds))
        .expect("the thread run")
}

/// Allreduces until `rounds` are done, failing (or panicking, or returning early) on
/// `rank` after `at` rounds.
pub fn faulty(comm: &Comm<'_>, fault: Fault, rank: usize, at: usize) -> Result<f64, CaseError> {
    let mut total = 0.0;
    for round in 0..at + 20 {
        if comm.rank() == rank && round == at {
            match fault {
                Fault::Error => return Err(CaseError::Injected { rank, round }),
                Fault::Panic => panic!("injected panic on rank {rank} after {round} rounds"),
                Fault::EarlyReturn => return Ok(total),
                Fault::Mismatch => {
                    comm.barrier()?;
                    continue;
                }
            }
        }
        let mut x = [1.0, comm.rank() as f64];
        comm.allreduce_sum(&mut x)?;
        total += x[1];
    }
    Ok(total)
}

/// What a rank does wrong in [`faulty`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Error,
    Panic,
    EarlyReturn,
    Mismatch,
}

/// Checks what `this` rank got from a [`faulty`] run of `size` ranks; `Err` says what is
/// wrong.
pub fn check_fault(
    fault: Fault,
    rank: usize,
    at: usize,
    this: usize,
    outcome: &Result<Vec<f64>, RunError<CaseError>>,
) -> Result<(), String> {
    let got = format!("{outcome:?}");
    let fail = |why: &str| Err(format!("rank {this}: {why}; got {got}"));
    match (fault, outcome) {
        (Fault::Error, Err(RunError::Failed { rank: r, error })) if this == rank => {
            if *r == rank && *error == (CaseError::Injected { rank, round: at }) {
                Ok(())
            } else {
                fail("expected its own injected error")
            }
        }
        (Fault::Error, Err(RunError::Remote { rank: r, message })) if this != rank => {
            let expected = format!("injected failure on rank {rank} after {at} rounds");
            if *r == rank && *message == expected {
                Ok(())
            } else {
                fail(&format!("expected rank {rank}'s text `{expected}`"))
            }
        }
        (Fault::Panic, Err(RunError::Panicked { rank: r, message })) if this == rank => {
            if *r == rank && message.contains("injected panic") {
                Ok(())
            } else {
                fail("expected its own panic")
            }
        }
        (Fault::Panic, Err(RunError::Remote { rank: r, message })) if this != rank => {
            if *r == rank && message.starts_with("panicked: injected panic") {
                Ok(())
            } else {
                fail("expected the remote panic's text")
            }
        }
        (Fault::EarlyReturn, outcome) => {
            // The lowest rank left waiting reports the early return; everyone fails.
            let waiting = usize::from(rank == 0);
            let text = format!("rank {rank} returned while rank(s)");
            match outcome {
                Err(RunError::Failed {
                    rank: r,
                    error: CaseError::Comm(CommError::RankLeft { rank: left, .. }),
                }) if this == waiting && *r == waiting && *left == rank => Ok(()),
                Err(RunError::Remote { rank: r, message })
                    if this != waiting && *r == waiting && message.starts_with(&text) =>
                {
                    Ok(())
                }
                _ => fail(&format!(
                    "expected rank {waiting}'s report of the early return"
                )),
            }
        }
        (Fault::Mismatch, outcome) => {
            // An allreduce is a reduce to rank 0 and a broadcast: the reduce is what meets
            // the stray barrier.
            let reduce = "reduce_sum<f64> root 0 len 2";
            let text = if rank == 0 {
                format!(
                    "collective mismatch: rank 0 called barrier<()> while rank 1 called {reduce}"
                )
            } else {
                format!(
                    "collective mismatch: rank 0 called {reduce} while rank {rank} called barrier<()>"
                )
            };
            match outcome {
                Err(RunError::Failed {
                    rank: 0,
                    error: CaseError::Comm(CommError::Mismatch(_)),
                }) if this == 0 => {
                    let message = outcome
                        .as_ref()
                        .err()
                        .map(|e| e.to_string())
                        .unwrap_or_default();
                    if message.contains(&text) {
                        Ok(())
                    } else {
                        fail(&format!("expected `{text}`"))
                    }
                }
                Err(RunError::Remote { rank: 0, message }) if this != 0 && *message == text => {
                    Ok(())
                }
                _ => fail(&format!("expected rank 0's `{text}`")),
            }
        }
        _ => fail(&format!(
            "unexpected outcome for {fault:?} on rank {rank} after {at}"
        )),
    }
}
