//! Fault injection: a failing or panicking rank releases the others, and the caller gets the
//! original error. Every test runs under a time limit, so a hang fails instead of hanging.

mod common;

use common::{cpu_group, within_limit};
use tutti_group::{CommError, Group, GroupError, RunError};

/// A workload's own error type, as a real caller would have.
#[derive(Debug, PartialEq, thiserror::Error)]
enum TaskError {
    #[error("bad input on rank {0}")]
    BadInput(usize),
    #[error(transparent)]
    Comm(#[from] CommError),
}

#[test]
fn failing_rank_releases_ranks_blocked_in_a_barrier() {
    for size in 2..=5 {
        let failing = size - 1;
        let group = cpu_group(size);
        let outcome = within_limit(move || {
            group.run(|comm| {
                if comm.rank() == failing {
                    // Let the others block first, so the abort really wakes them.
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    return Err(TaskError::BadInput(comm.rank()));
                }
                comm.barrier()?;
                Ok(())
            })
        });
        match outcome {
            Err(RunError::Failed { rank, error }) => {
                assert_eq!(rank, failing);
                assert_eq!(error, TaskError::BadInput(failing), "the original error");
            }
            other => panic!("expected rank {failing}'s own error, got {other:?}"),
        }
    }
}

#[test]
fn released_ranks_see_aborted() {
    let group = cpu_group(3);
    let outcome = within_limit({
        move || {
            let seen = std::sync::Mutex::new(Vec::new());
            let outcome = group.run(|comm| {
                if comm.rank() == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    return Err(TaskError::BadInput(0));
                }
                let mut x = [1.0];
                let result = comm.allreduce_sum(&mut x);
                seen.lock().expect("lock").push(result.clone());
                result.map_err(TaskError::from)
            });
            (outcome, seen.into_inner().expect("lock"))
        }
    });
    let (outcome, seen) = outcome;
    assert!(matches!(outcome, Err(RunError::Failed { rank: 0, .. })));
    assert_eq!(seen, vec![Err(CommError::Aborted), Err(CommError::Aborted)]);
}

#[test]
fn panicking_rank_reports_its_message() {
    let group = cpu_group(4);
    let outcome = within_limit(move || {
        group.run(|comm| {
            let mut x = vec![comm.rank() as f64; 8];
            for step in 0..50 {
                if comm.rank() == 2 && step == 17 {
                    panic!("diverged at step {step}");
                }
                comm.allreduce_sum(&mut x)?;
            }
            Ok::<_, CommError>(x[0])
        })
    });
    match outcome {
        Err(RunError::Panicked { rank, message }) => {
            assert_eq!(rank, 2);
            assert_eq!(message, "diverged at step 17");
        }
        other => panic!("expected the panic of rank 2, got {other:?}"),
    }
}

#[test]
fn group_of_one_catches_its_panic_and_error() {
    let group = cpu_group(1);
    let outcome = group.run(|_| -> Result<(), CommError> { panic!("solo panic") });
    assert!(
        matches!(outcome, Err(RunError::Panicked { rank: 0, ref message }) if message == "solo panic")
    );
    let outcome = group.run(|comm| Err::<(), _>(TaskError::BadInput(comm.rank())));
    assert_eq!(
        outcome.unwrap_err().into_error(),
        Some(TaskError::BadInput(0))
    );
}

#[test]
fn random_failures_never_hang_and_always_report_the_origin() {
    // Many runs with the failure at a different rank and round each time, to shake out races
    // between the abort and ranks entering or leaving collectives.
    let outcomes = within_limit(|| {
        let mut outcomes = Vec::new();
        for trial in 0..200usize {
            let size = 2 + trial % 4;
            let failing = (trial * 7) % size;
            let fail_round = (trial * 13) % 9;
            let group = cpu_group(size);
            let outcome = group.run(|comm| {
                for round in 0..10 {
                    if comm.rank() == failing && round == fail_round {
                        return Err(TaskError::BadInput(comm.rank()));
                    }
                    match round % 3 {
                        0 => comm.barrier()?,
                        1 => {
                            let mut x = [round as i64];
                            comm.allreduce_sum(&mut x)?;
                        }
                        _ => {
                            let blocks = vec![vec![1u8; round]; comm.size()];
                            comm.all_to_all(&blocks)?;
                        }
                    }
                }
                Ok(())
            });
            outcomes.push((failing, outcome.map_err(|e| (e.rank(), e.into_error()))));
        }
        outcomes
    });
    for (failing, outcome) in outcomes {
        assert_eq!(
            outcome,
            Err((failing, Some(TaskError::BadInput(failing)))),
            "the failing rank's own error"
        );
    }
}

#[test]
fn mismatched_lengths_are_reported_as_an_error() {
    let group = cpu_group(3);
    let outcome = within_limit(move || {
        group.run(|comm| {
            let mut x = vec![1.0f64; 10 + comm.rank()];
            comm.allreduce_sum(&mut x)?;
            Ok::<_, CommError>(())
        })
    });
    let error = outcome
        .expect_err("mismatch")
        .into_error()
        .expect("an error");
    match error {
        CommError::Mismatch(message) => {
            assert!(message.contains("len 10"), "{message}");
            assert!(
                message.contains("len 11") || message.contains("len 12"),
                "{message}"
            );
        }
        other => panic!("expected a mismatch, got {other}"),
    }
}

#[test]
fn mismatched_collectives_are_reported_as_an_error() {
    let group = cpu_group(2);
    let outcome = within_limit(move || {
        group.run(|comm| {
            if comm.rank() == 0 {
                comm.barrier()?;
            } else {
                let mut x = vec![1u8];
                comm.broadcast(1, &mut x)?;
            }
            Ok::<_, CommError>(())
        })
    });
    let error = outcome
        .expect_err("mismatch")
        .into_error()
        .expect("an error");
    assert!(
        matches!(&error, CommError::Mismatch(m) if m.contains("barrier") && m.contains("broadcast")),
        "{error}"
    );
    // Different element types are a mismatch too, not a misread of bytes.
    let group = cpu_group(2);
    let outcome = within_limit(move || {
        group.run(|comm| {
            if comm.rank() == 0 {
                comm.allgather(&[1.0f64])?;
            } else {
                comm.allgather(&[1u64])?;
            }
            Ok::<_, CommError>(())
        })
    });
    let error = outcome
        .expect_err("mismatch")
        .into_error()
        .expect("an error");
    assert!(
        matches!(&error, CommError::Mismatch(m) if m.contains("f64") && m.contains("u64")),
        "{error}"
    );
}

#[test]
fn rank_returning_early_releases_the_waiting_ranks() {
    let group = cpu_group(3);
    let outcome = within_limit(move || {
        group.run(|comm| {
            if comm.rank() != 1 {
                comm.barrier()?;
            }
            Ok::<_, CommError>(())
        })
    });
    let error = outcome
        .expect_err("rank 1 left")
        .into_error()
        .expect("an error");
    assert!(
        matches!(error, CommError::RankLeft { rank: 1, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("barrier"), "{error}");
}

#[test]
fn bad_collective_arguments_are_errors_not_hangs() {
    let group = cpu_group(3);
    let outcome = within_limit(move || {
        group.run(|comm| {
            let blocks = vec![vec![1.0f64]; 2]; // one block short
            let mine = comm.scatter(0, Some(&blocks[..]))?;
            Ok::<_, CommError>(mine)
        })
    });
    let error = outcome
        .expect_err("short scatter")
        .into_error()
        .expect("an error");
    assert!(
        matches!(&error, CommError::InvalidArgument { op: "scatter", message } if message.contains("2 blocks")),
        "{error}"
    );
    let group = cpu_group(2);
    let outcome = within_limit(move || group.run(|comm| comm.gather(5, &[1u8])));
    assert!(outcome.unwrap_err().to_string().contains("root 5"));
}

#[test]
fn an_empty_group_is_refused() {
    assert!(matches!(Group::new(Vec::new()), Err(GroupError::Empty)));
}

#[test]
fn a_rank_waiting_outside_a_collective_sees_the_abort_through_its_probe() {
    for size in 2..=4 {
        let group = cpu_group(size);
        let outcome = within_limit(move || {
            let polls = std::sync::atomic::AtomicUsize::new(0);
            let outcome = group.run(|comm| {
                let probe = comm.abort_probe();
                if comm.rank() == size - 1 {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    return Err(TaskError::BadInput(comm.rank()));
                }
                assert!(!probe.is_aborted(), "not aborted before anyone failed");
                // A shared reader's wait: no collective, only the probe.
                while !probe.is_aborted() {
                    polls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err::<(), _>(TaskError::Comm(CommError::Aborted))
            });
            (outcome, polls.into_inner())
        });
        let (outcome, polls) = outcome;
        assert!(polls > 0, "the waiting ranks polled before the failure");
        match outcome {
            Err(RunError::Failed { rank, error }) => {
                assert_eq!(rank, size - 1);
                assert_eq!(error, TaskError::BadInput(size - 1), "the original error");
            }
            other => panic!("expected rank {}'s own error, got {other:?}", size - 1),
        }
    }
}

#[test]
fn a_group_of_one_is_never_aborted_by_itself() {
    let group = cpu_group(1);
    let seen = group
        .run(|comm| Ok::<_, TaskError>(comm.abort_probe().is_aborted()))
        .expect("runs");
    assert_eq!(seen, vec![false]);
}
