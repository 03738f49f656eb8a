//! `Comm::split`: sub-groups with the membership and numbering MPI_Comm_split gives, whose
//! collectives run independently of each other, and which an abort of the parent releases.
//! Every test runs under a time limit, so a hang fails instead of hanging CI.

mod common;

use common::{cpu_group, within_limit};
use proptest::prelude::*;
use tutti_group::{CommError, RunError};

/// The reference: the ranks of `rank`'s color, ordered by (key, rank).
fn expected_members(choices: &[(usize, usize)], rank: usize) -> Vec<usize> {
    let color = choices[rank].0;
    let mut members: Vec<usize> = (0..choices.len())
        .filter(|&r| choices[r].0 == color)
        .collect();
    members.sort_by_key(|&r| (choices[r].1, r));
    members
}

/// Per-rank (color, key) choices for a group of 1 to 6 ranks.
fn choices() -> impl Strategy<Value = Vec<(usize, usize)>> {
    (1usize..=6).prop_flat_map(|size| prop::collection::vec((0usize..3, 0usize..3), size))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Each sub-group holds exactly the ranks of its color, numbered by key; its reductions
    /// sum over its members only, in its own rank order; a different number of collectives
    /// in each sub-group does not disturb the others; and the parent stays usable.
    #[test]
    fn sub_groups_match_mpi_comm_split(choices in choices()) {
        let size = choices.len();
        let group = cpu_group(size);
        let input = choices.clone();
        let results = within_limit(move || {
            group.run(|comm| {
                let (color, key) = input[comm.rank()];
                let sub = comm.split(color, key)?;
                let members = sub.allgather_concat(&[comm.rank() as u64])?;
                // A color-dependent number of rounds: sub-groups must not wait on each other.
                let mut sum = [0.0];
                for round in 0..=color {
                    let mut x = [(comm.rank() * 10 + round) as f64];
                    sub.allreduce_sum(&mut x)?;
                    sum[0] += x[0];
                }
                let sub_rank = sub.rank();
                let sub_size = sub.size();
                drop(sub);
                let mut total = [1u64];
                comm.allreduce_sum(&mut total)?;
                Ok::<_, CommError>((members, sub_rank, sub_size, sum[0], total[0]))
            })
        }).expect("split and its collectives succeed");
        for (rank, (members, sub_rank, sub_size, sum, total)) in results.into_iter().enumerate() {
            let expected = expected_members(&choices, rank);
            let members: Vec<usize> = members.iter().map(|&m| m as usize).collect();
            prop_assert_eq!(&members, &expected);
            prop_assert_eq!(sub_size, expected.len());
            prop_assert_eq!(expected[sub_rank], rank);
            let reference: f64 = (0..=choices[rank].0)
                .map(|round| expected.iter().map(|&r| (r * 10 + round) as f64).sum::<f64>())
                .sum();
            prop_assert_eq!(sum, reference);
            prop_assert_eq!(total, size as u64);
        }
    }
}

#[test]
fn sub_groups_split_again() {
    // 6 ranks -> two rows of 3 -> each row into a pair and a single.
    let group = cpu_group(6);
    let results = within_limit(move || {
        group.run(|comm| {
            let row = comm.split(comm.rank() / 3, comm.rank())?;
            let part = row.split(usize::from(row.rank() == 2), 0)?;
            let mut x = [comm.rank() as u64];
            part.allreduce_sum(&mut x)?;
            Ok::<_, CommError>((row.rank(), part.rank(), part.size(), x[0]))
        })
    })
    .expect("nested splits succeed");
    let expected = [
        (0, 0, 2, 1),
        (1, 1, 2, 1),
        (2, 0, 1, 2),
        (0, 0, 2, 7),
        (1, 1, 2, 7),
        (2, 0, 1, 5),
    ];
    assert_eq!(results, expected);
}

#[test]
fn a_group_of_one_splits_into_itself() {
    let group = cpu_group(1);
    let results = group
        .run(|comm| {
            let sub = comm.split(7, 3)?;
            let mut x = [2.5];
            sub.allreduce_sum(&mut x)?;
            Ok::<_, CommError>((sub.rank(), sub.size(), x[0]))
        })
        .expect("a solo split succeeds");
    assert_eq!(results, vec![(0, 1, 2.5)]);
}

#[test]
fn split_against_another_collective_is_a_mismatch() {
    let group = cpu_group(2);
    let outcome = within_limit(move || {
        group.run(|comm| {
            if comm.rank() == 0 {
                comm.split(0, 0).map(|_| ())
            } else {
                comm.barrier()
            }
        })
    });
    match outcome {
        Err(RunError::Failed {
            error: CommError::Mismatch(message),
            ..
        }) => assert!(message.contains("split"), "{message}"),
        other => panic!("expected a mismatch naming split, got {other:?}"),
    }
}

#[derive(Debug, PartialEq, thiserror::Error)]
enum TaskError {
    #[error("bad input on rank {0}")]
    BadInput(usize),
    #[error(transparent)]
    Comm(#[from] CommError),
}

#[test]
fn a_failure_in_one_sub_group_releases_the_others() {
    // Ranks 0-1 and 2-3 form two sub-groups; rank 3 fails after rank 2 blocked in their
    // sub-group's collective and ranks 0-1 blocked in theirs waiting for a third round that
    // never comes (rank 1 waits in the parent). Every rank must be released, and the caller
    // gets rank 3's own error.
    let group = cpu_group(4);
    let outcome = within_limit(move || {
        group.run(|comm| {
            let sub = comm.split(comm.rank() / 2, 0)?;
            match comm.rank() {
                3 => {
                    std::thread::sleep(std::time::Duration::from_millis(30));
                    Err(TaskError::BadInput(3))
                }
                1 => {
                    comm.barrier()?;
                    Ok(())
                }
                _ => {
                    let mut x = [1.0];
                    sub.allreduce_sum(&mut x)?;
                    Ok(())
                }
            }
        })
    });
    match outcome {
        Err(RunError::Failed { rank, error }) => {
            assert_eq!(rank, 3);
            assert_eq!(error, TaskError::BadInput(3));
        }
        other => panic!("expected rank 3's own error, got {other:?}"),
    }
}

#[test]
fn the_failing_rank_is_reported_over_the_members_its_departure_released() {
    // A rank returning an error drops its sub-group handle before the run records the error,
    // so its sub-group's members learn it left, and fail, first. Widen that window: the run
    // must still report the rank that failed on its own, not the echo.
    let group = cpu_group(4);
    let outcome = within_limit(move || {
        group.run(|comm| {
            let sub = comm.split(comm.rank() / 2, 0)?;
            if comm.rank() == 3 {
                drop(sub);
                std::thread::sleep(std::time::Duration::from_millis(100));
                return Err(TaskError::BadInput(3));
            }
            let mut x = [1.0];
            sub.allreduce_sum(&mut x)?;
            comm.barrier()?;
            Ok(())
        })
    });
    match outcome {
        Err(RunError::Failed { rank, error }) => {
            assert_eq!(rank, 3);
            assert_eq!(error, TaskError::BadInput(3));
        }
        other => panic!("expected rank 3's own error, got {other:?}"),
    }
}

#[test]
fn a_member_that_drops_its_sub_group_is_reported_as_gone() {
    let group = cpu_group(2);
    let outcome = within_limit(move || {
        group.run(|comm| {
            let sub = comm.split(0, 0)?;
            if comm.rank() == 1 {
                drop(sub);
                // Stay in the run (the parent would report the abort otherwise) until rank 0
                // has been told.
                comm.barrier()?;
                return Ok(());
            }
            let mut x = [1.0];
            let seen = sub.allreduce_sum(&mut x);
            comm.barrier()?;
            seen
        })
    });
    match outcome {
        Err(RunError::Failed {
            rank: 0,
            error: CommError::RankLeft { rank: 1, .. },
        }) => {}
        other => panic!("expected rank 0 to learn that rank 1 left, got {other:?}"),
    }
}
