//! Collectives against a sequential reference, for groups of 1 to 5 ranks.

mod common;

use common::{cpu_group, within_limit};
use proptest::prelude::*;
use tutti_group::CommError;

/// Per-rank inputs: `blocks[r][j]` is what rank r holds for rank j (uneven lengths).
fn rank_blocks(max_size: usize) -> impl Strategy<Value = Vec<Vec<Vec<i64>>>> {
    (1..=max_size).prop_flat_map(|size| {
        prop::collection::vec(
            prop::collection::vec(prop::collection::vec(-1000i64..1000, 0..7), size),
            size,
        )
    })
}

fn floats(max_size: usize) -> impl Strategy<Value = (Vec<Vec<f64>>, usize)> {
    (1..=max_size, 0..40usize).prop_flat_map(|(size, len)| {
        (
            prop::collection::vec(prop::collection::vec(-1e6f64..1e6, len), size),
            0..size,
        )
    })
}

/// The sum in rank order, the reference for reductions.
fn sequential_sum(values: &[Vec<f64>]) -> Vec<f64> {
    let mut sum = values[0].clone();
    for contribution in &values[1..] {
        for (acc, x) in sum.iter_mut().zip(contribution) {
            *acc += *x;
        }
    }
    sum
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn all_to_all_gather_scatter_allgather_match_reference(blocks in rank_blocks(5), root_pick in 0usize..5) {
        let size = blocks.len();
        let root = root_pick % size;
        let group = cpu_group(size);
        let blocks_in = blocks.clone();
        let results = within_limit(move || {
            group.run(|comm| {
                let mine = &blocks_in[comm.rank()];
                let exchanged = comm.all_to_all(mine)?;
                let gathered = comm.gather(root, &mine[0])?;
                let scattered = comm.scatter(root, (comm.rank() == root).then_some(&mine[..]))?;
                let everyone = comm.allgather(&mine[comm.rank()])?;
                let concatenated = comm.allgather_concat(&mine[0])?;
                Ok::<_, CommError>((exchanged, gathered, scattered, everyone, concatenated))
            })
        }).expect("collectives succeed");
        for (rank, (exchanged, gathered, scattered, everyone, concatenated)) in results.into_iter().enumerate() {
            let expected: Vec<Vec<i64>> = (0..size).map(|src| blocks[src][rank].clone()).collect();
            prop_assert_eq!(exchanged, expected);
            if rank == root {
                let expected: Vec<Vec<i64>> = (0..size).map(|src| blocks[src][0].clone()).collect();
                prop_assert_eq!(gathered, Some(expected));
            } else {
                prop_assert_eq!(gathered, None);
            }
            prop_assert_eq!(&scattered, &blocks[root][rank]);
            let expected: Vec<Vec<i64>> = (0..size).map(|src| blocks[src][src].clone()).collect();
            prop_assert_eq!(everyone, expected);
            let expected: Vec<i64> = (0..size).flat_map(|src| blocks[src][0].clone()).collect();
            prop_assert_eq!(concatenated, expected);
        }
    }

    #[test]
    fn reductions_and_broadcasts_match_reference_bitwise((values, root) in floats(5)) {
        let size = values.len();
        let group = cpu_group(size);
        let values_in = values.clone();
        let results = within_limit(move || {
            group.run(|comm| {
                let mine = values_in[comm.rank()].clone();
                let mut all = mine.clone();
                comm.allreduce_sum(&mut all)?;
                let mut at_root = mine.clone();
                comm.reduce_sum(root, &mut at_root)?;
                let mut copied = mine.clone();
                comm.broadcast_slice(root, &mut copied)?;
                // Broadcast into vectors of any length.
                let mut resized = vec![0.5; comm.rank()];
                if comm.rank() == root {
                    resized = mine.clone();
                }
                comm.broadcast(root, &mut resized)?;
                Ok::<_, CommError>((all, at_root, copied, resized))
            })
        }).expect("collectives succeed");
        let sum = sequential_sum(&values);
        for (rank, (all, at_root, copied, resized)) in results.into_iter().enumerate() {
            // Fixed rank order: the same bits as the sequential sum, on every rank.
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&all), bits(&sum));
            if rank == root {
                prop_assert_eq!(bits(&at_root), bits(&sum));
            } else {
                prop_assert_eq!(&at_root, &values[rank]);
            }
            prop_assert_eq!(&copied, &values[root]);
            prop_assert_eq!(&resized, &values[root]);
        }
    }
}

#[test]
fn hundreds_of_rounds_in_a_row() {
    for size in [2, 3, 5] {
        let group = cpu_group(size);
        let totals = within_limit(move || {
            group.run(|comm| {
                let mut checks = 0u64;
                for round in 0..300u64 {
                    let rank = comm.rank() as u64;
                    let mut x = [round * 10 + rank, 1];
                    comm.allreduce_sum(&mut x)?;
                    let n = comm.size() as u64;
                    assert_eq!(x, [round * 10 * n + n * (n - 1) / 2, n]);
                    let blocks: Vec<Vec<u64>> = (0..comm.size())
                        .map(|j| vec![round, rank, j as u64])
                        .collect();
                    let received = comm.all_to_all(&blocks)?;
                    for (src, block) in received.iter().enumerate() {
                        assert_eq!(block, &vec![round, src as u64, rank]);
                    }
                    if round % 7 == 0 {
                        comm.barrier()?;
                    }
                    checks += 1;
                }
                Ok::<_, CommError>(checks)
            })
        })
        .expect("rounds succeed");
        assert_eq!(totals, vec![300; size]);
    }
}

#[test]
fn group_of_one_runs_inline_and_collectives_are_identities() {
    let group = cpu_group(1);
    let caller = std::thread::current().id();
    let result = group
        .run(|comm| {
            assert_eq!(
                std::thread::current().id(),
                caller,
                "runs on the caller's thread"
            );
            let mut x = vec![1.5, -2.0];
            comm.allreduce_sum(&mut x)?;
            let blocks = comm.all_to_all(&[vec![7u8, 8]])?;
            let scattered = comm.scatter(0, Some(&[vec![3i32]]))?;
            comm.barrier()?;
            Ok::<_, CommError>((x, blocks, scattered))
        })
        .expect("inline run");
    assert_eq!(
        result,
        vec![(vec![1.5, -2.0], vec![vec![7u8, 8]], vec![3i32])]
    );
}

#[test]
fn buffer_collectives_on_simulated_devices() {
    for size in 1..=4 {
        let group = cpu_group(size);
        let results = within_limit(move || {
            group.run(|comm| {
                let device = comm.device();
                let mut buffer = device.upload(&[comm.rank() as f64, 1.0])?;
                comm.allreduce_sum_buffer(&mut buffer)?;
                let mut root_copy = device.upload(&[comm.rank() as i64 + 100; 3])?;
                comm.broadcast_buffer(comm.size() - 1, &mut root_copy)?;
                let mine = device.upload(&vec![comm.rank() as u32; comm.rank() + 1])?;
                let gathered = comm.allgather_buffer(&mine)?;
                Ok::<_, CommError>((
                    buffer.to_host_vec()?,
                    root_copy.to_host_vec()?,
                    gathered.to_host_vec()?,
                ))
            })
        })
        .expect("buffer collectives");
        let n = size as f64;
        let expected_gather: Vec<u32> = (0..size as u32)
            .flat_map(|r| vec![r; r as usize + 1])
            .collect();
        for (sum, copy, gathered) in results {
            assert_eq!(sum, vec![n * (n - 1.0) / 2.0, n]);
            assert_eq!(copy, vec![size as i64 - 1 + 100; 3]);
            assert_eq!(gathered, expected_gather);
        }
    }
}
