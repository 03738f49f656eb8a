//! The round protocol over threads standing in for processes: collectives bitwise equal to
//! a group of threads, and every fault (error, panic, early return, mismatch) reported the
//! same way by every "process". Each test runs under a time limit, so a hang fails.

mod cases;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use cases::{check_fault, collectives, collectives_on_threads, faulty, Fault};
use proptest::prelude::*;
use tutti_backend::Resources;
use tutti_group::{CommError, Fabric, Group, RunError};
use tutti_mpi::{loopback, LoopbackWire, SpanningFabric};

/// A hang fails the test after this long instead of hanging CI.
const HANG_LIMIT: Duration = Duration::from_secs(60);

/// Runs `work` on `size` threads, each its own "process" with a spanning group over a
/// loopback wire; returns each one's value, in rank order. Fails on a hang.
fn processes<T, F>(size: usize, work: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Group, Arc<SpanningFabric<LoopbackWire>>) -> T + Send + Sync + 'static,
{
    let (done, results) = mpsc::channel();
    let work = Arc::new(work);
    for wire in loopback(size, HANG_LIMIT) {
        let (done, work) = (done.clone(), Arc::clone(&work));
        std::thread::spawn(move || {
            let rank = tutti_mpi::Wire::rank(&wire);
            let fabric = Arc::new(SpanningFabric::new(wire));
            let device = Resources::cpu(1).select().expect("a device").remove(0);
            let group = Group::spanning(fabric.clone(), device);
            let _ = done.send((rank, work(group, fabric)));
        });
    }
    drop(done);
    let mut outcomes: Vec<Option<T>> = (0..size).map(|_| None).collect();
    for _ in 0..size {
        match results.recv_timeout(HANG_LIMIT + Duration::from_secs(5)) {
            Ok((rank, value)) => outcomes[rank] = Some(value),
            Err(_) => panic!("a process hung or panicked outside its group"),
        }
    }
    outcomes
        .into_iter()
        .map(|v| v.expect("every rank"))
        .collect()
}

#[test]
fn collectives_are_bitwise_those_of_threads() {
    for size in 1..=4 {
        let reference = collectives_on_threads(size, 12);
        let spanning = processes(size, |group, _| {
            let mut results = group.run(|comm| collectives(comm, 12)).expect("the run");
            assert_eq!(
                results.len(),
                1,
                "a spanning group returns its own rank only"
            );
            results.remove(0)
        });
        assert_eq!(spanning, reference, "{size} processes");
    }
}

#[test]
fn three_hundred_rounds_stay_in_step() {
    let reference = collectives_on_threads(3, 50);
    let spanning = processes(3, |group, _| {
        group
            .run(|comm| collectives(comm, 50))
            .expect("the run")
            .remove(0)
    });
    assert_eq!(spanning, reference);
}

#[test]
fn spanning_groups_say_where_their_ranks_are() {
    let seen = processes(3, |group, fabric| {
        (
            group.size(),
            group.local_ranks(),
            group.is_spanning(),
            fabric.rank(),
        )
    });
    for (rank, (size, local, spanning, fabric_rank)) in seen.into_iter().enumerate() {
        assert_eq!(
            (size, local, spanning, fabric_rank),
            (3, rank..rank + 1, true, rank)
        );
    }
}

fn fault_case(fault: Fault, size: usize, rank: usize, at: usize) {
    let outcomes = processes(size, move |group, _| {
        group.run(|comm| faulty(comm, fault, rank, at))
    });
    for (this, outcome) in outcomes.iter().enumerate() {
        if let Err(why) = check_fault(fault, rank, at, this, outcome) {
            panic!("{fault:?} on rank {rank} of {size} after {at} rounds: {why}");
        }
    }
}

#[test]
fn an_error_on_one_rank_reaches_every_process_with_its_text() {
    for size in 2..=4 {
        for rank in 0..size {
            fault_case(Fault::Error, size, rank, 5);
        }
    }
    fault_case(Fault::Error, 3, 1, 0);
}

#[test]
fn a_panic_on_one_rank_reaches_every_process() {
    fault_case(Fault::Panic, 3, 2, 4);
    fault_case(Fault::Panic, 2, 0, 0);
}

#[test]
fn an_early_return_fails_every_process() {
    fault_case(Fault::EarlyReturn, 3, 1, 3);
    fault_case(Fault::EarlyReturn, 2, 0, 2);
    fault_case(Fault::EarlyReturn, 4, 3, 0);
}

#[test]
fn a_mismatched_collective_is_reported_by_rank_0_everywhere() {
    fault_case(Fault::Mismatch, 3, 2, 2);
    fault_case(Fault::Mismatch, 2, 0, 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn failures_anywhere_are_reported_everywhere(
        size in 2usize..=4,
        rank_pick in 0usize..4,
        at in 0usize..12,
        kind in 0usize..4,
    ) {
        let fault = [Fault::Error, Fault::Panic, Fault::EarlyReturn, Fault::Mismatch][kind];
        fault_case(fault, size, rank_pick % size, at);
    }
}

#[test]
fn the_fabric_serves_the_next_run_after_a_failure() {
    let sums = processes(3, |group, _| {
        let failed = group.run(|comm| faulty(comm, Fault::Error, 1, 2));
        assert!(failed.is_err());
        group
            .run(|comm| {
                let mut x = [comm.rank() as f64];
                comm.allreduce_sum(&mut x)?;
                Ok::<_, CommError>(x[0])
            })
            .expect("the second run")
            .remove(0)
    });
    assert_eq!(sums, vec![3.0, 3.0, 3.0]);
}

#[test]
fn a_second_session_on_a_busy_fabric_is_refused() {
    let (wire,) = {
        let mut wires = loopback(1, HANG_LIMIT);
        (wires.remove(0),)
    };
    let fabric = SpanningFabric::new(wire);
    let first = fabric.open().expect("the first session");
    let second = fabric.open().err().expect("a second session is refused");
    assert!(
        second.to_string().contains("another run is using"),
        "{second}"
    );
    drop(first);
    assert!(fabric.open().is_ok(), "free again once the first has ended");
}

#[test]
fn a_vanished_process_breaks_the_fabric_with_a_transport_error() {
    let mut wires = loopback(2, HANG_LIMIT);
    let survivor = wires.remove(0);
    drop(wires); // rank 1 "dies" before the run
    let fabric = Arc::new(SpanningFabric::new(survivor));
    let device = Resources::cpu(1).select().expect("a device").remove(0);
    let group = Group::spanning(fabric.clone(), device);
    let outcome = group.run(|comm| comm.barrier());
    match outcome {
        Err(RunError::Failed {
            rank: 0,
            error: CommError::Transport(text),
        }) => {
            assert!(text.contains("rank 1 is gone"), "{text}");
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
    let again = fabric.open().err().expect("a broken fabric refuses runs");
    assert!(again.to_string().contains("unusable"), "{again}");
}

#[test]
fn a_failure_before_the_run_releases_the_processes_in_it() {
    let outcomes: Vec<Result<(), String>> = processes(3, |group, _| {
        let rank = group.local_ranks().start;
        let prepared: Result<(), String> = if rank == 1 {
            Err("bad input on this process".into())
        } else {
            Ok(())
        };
        match group.before_run(prepared) {
            Err(own) => Err(format!("own: {own}")),
            Ok(()) => match group.run(|comm| comm.barrier()) {
                Err(RunError::Remote { rank, message }) => Err(format!("remote {rank}: {message}")),
                other => Err(format!("unexpected: {other:?}")),
            },
        }
    });
    assert_eq!(
        outcomes,
        vec![
            Err("remote 1: bad input on this process".to_string()),
            Err("own: bad input on this process".to_string()),
            Err("remote 1: bad input on this process".to_string()),
        ]
    );
}

/// Like [`processes`], with `counts[p]` simulated devices (ranks) in process `p`: a group
/// made by [`Group::spanning_devices`].
fn processes_with<T, F>(counts: &[usize], work: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Result<Group, tutti_group::GroupError>) -> T + Send + Sync + 'static,
{
    let counts: Arc<Vec<usize>> = Arc::new(counts.to_vec());
    processes(counts.len(), move |_, fabric| {
        let count = counts[fabric.rank()];
        let devices = if count == 0 {
            Vec::new()
        } else {
            Resources::cpu(count).select().expect("devices")
        };
        work(Group::spanning_devices(fabric, devices))
    })
}

/// Layouts of ranks over processes for the tests of several ranks per process.
const LAYOUTS: [&[usize]; 5] = [&[2, 1], &[1, 2], &[2, 2], &[1, 3, 2], &[3]];

#[test]
fn several_ranks_per_process_give_the_collectives_of_threads() {
    for counts in LAYOUTS {
        let total: usize = counts.iter().sum();
        let reference = collectives_on_threads(total, 12);
        let per_process = processes_with(counts, |group| {
            let group = group.expect("the group");
            let where_ = (group.size(), group.local_ranks());
            (
                where_,
                group.run(|comm| collectives(comm, 12)).expect("the run"),
            )
        });
        let mut start = 0;
        let mut all = Vec::new();
        for (p, ((size, local), results)) in per_process.into_iter().enumerate() {
            assert_eq!(size, total, "{counts:?}");
            assert_eq!(local, start..start + counts[p], "{counts:?}: process {p}");
            start += counts[p];
            all.extend(results);
        }
        assert_eq!(all, reference, "{counts:?} against {total} threads");
    }
}

/// `fault` on global rank `rank` of a group laid out as `counts`: every process must report
/// it as a group of threads would, the process holding `rank` as its own failure.
fn layout_fault_case(fault: Fault, counts: &'static [usize], rank: usize, at: usize) {
    let outcomes = processes_with(counts, move |group| {
        let group = group.expect("the group");
        let local = group.local_ranks();
        (local, group.run(|comm| faulty(comm, fault, rank, at)))
    });
    for (local, outcome) in &outcomes {
        let this = if local.contains(&rank) {
            rank
        } else {
            local.start
        };
        match fault {
            Fault::Error | Fault::Panic => {
                if let Err(why) = check_fault(fault, rank, at, this, outcome) {
                    panic!("{fault:?} on rank {rank} of {counts:?} after {at}: {why}");
                }
            }
            // Every process reports the same rank and text, naming the rank that returned
            // (which rank reports it may differ from threads: a process finds its own
            // rank's departure before the others can).
            Fault::EarlyReturn => {
                let reports: Vec<(usize, String)> = outcomes
                    .iter()
                    .map(|(_, outcome)| match outcome {
                        Err(RunError::Failed { rank, error }) => (*rank, error.to_string()),
                        Err(RunError::Remote { rank, message }) => (*rank, message.clone()),
                        other => panic!("early return on rank {rank} of {counts:?}: {other:?}"),
                    })
                    .collect();
                assert!(
                    reports.iter().all(|r| r == &reports[0]),
                    "early return on rank {rank} of {counts:?}: {reports:?}"
                );
                let named = format!("rank {rank} returned while rank(s)");
                assert!(reports[0].1.starts_with(&named), "{reports:?}");
            }
            // A mismatch inside one process is worded by that process's first rank (see
            // `a_mismatch_inside_one_process_names_its_ranks`): every process must fail.
            Fault::Mismatch => assert!(
                outcome.is_err(),
                "{fault:?} on rank {rank} of {counts:?}: ranks {local:?} got {outcome:?}"
            ),
        }
    }
}

#[test]
fn a_failure_on_any_rank_of_several_per_process_reaches_every_process() {
    for counts in [&[2, 1][..], &[1, 2, 2]] {
        let total: usize = counts.iter().sum();
        for rank in 0..total {
            layout_fault_case(Fault::Error, counts, rank, 3);
        }
        layout_fault_case(Fault::Panic, counts, total - 1, 2);
        layout_fault_case(Fault::Error, counts, 1, 0);
    }
}

#[test]
fn early_returns_and_mismatches_among_several_ranks_per_process_fail_every_process() {
    for counts in [&[2, 1][..], &[1, 2, 2], &[3]] {
        let total: usize = counts.iter().sum();
        for rank in [0, total - 1] {
            layout_fault_case(Fault::EarlyReturn, counts, rank, 2);
            layout_fault_case(Fault::Mismatch, counts, rank, 1);
        }
    }
}

#[test]
fn a_mismatch_inside_one_process_names_its_ranks() {
    let outcomes = processes_with(&[1, 2], |group| {
        group.expect("the group").run(|comm| {
            if comm.rank() == 2 {
                comm.barrier()
            } else {
                let mut x = [1.0];
                comm.allreduce_sum(&mut x)
            }
        })
    });
    let detail = "rank 1 called reduce_sum<f64> root 0 len 1 while rank 2 called barrier<()>";
    match &outcomes[1] {
        Err(RunError::Failed {
            rank: 1,
            error: CommError::Mismatch(text),
        }) => assert_eq!(text, detail),
        other => panic!("the process of ranks 1 and 2: {other:?}"),
    }
    match &outcomes[0] {
        Err(RunError::Remote { rank: 1, message }) => {
            assert_eq!(message, &format!("collective mismatch: {detail}"));
        }
        other => panic!("the process of rank 0: {other:?}"),
    }
}

#[test]
fn a_group_of_several_ranks_per_process_serves_the_next_run() {
    let sums = processes_with(&[2, 1, 2], |group| {
        let group = group.expect("the group");
        assert!(group.run(|comm| faulty(comm, Fault::Error, 3, 2)).is_err());
        group
            .run(|comm| {
                let mut x = [comm.rank() as f64];
                comm.allreduce_sum(&mut x)?;
                Ok::<_, CommError>(x[0])
            })
            .expect("the second run")
    });
    assert_eq!(sums, vec![vec![10.0, 10.0], vec![10.0], vec![10.0, 10.0]]);
}

#[test]
fn a_process_without_devices_fails_the_group_everywhere() {
    let made = processes_with(&[2, 0, 1], |group| {
        group.map(|g| g.size()).map_err(|e| e.to_string())
    });
    for outcome in made {
        assert_eq!(
            outcome,
            Err("a group needs at least one device".to_string())
        );
    }
}

#[test]
fn a_rank_carrying_on_after_a_mismatch_in_its_process_is_released() {
    // Ranks 1 and 2 share a process and mismatch; rank 1 (and rank 0 elsewhere) go on to
    // a barrier while rank 2 gives up: the barrier must fail, not wait for rank 2.
    let outcomes = processes_with(&[1, 2], |group| {
        group.expect("the group").run(|comm| {
            let first = if comm.rank() == 2 {
                comm.barrier()
            } else {
                let mut x = [1.0];
                comm.allreduce_sum(&mut x)
            };
            match (comm.rank(), first) {
                (2, Err(err)) => Err(err),
                (_, Err(_)) => comm.barrier(),
                (_, Ok(())) => Ok(()),
            }
        })
    });
    for outcome in &outcomes {
        assert!(outcome.is_err(), "{outcome:?}");
    }
}
