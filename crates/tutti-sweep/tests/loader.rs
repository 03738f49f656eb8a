//! A disk train's loader thread never outlives the stream that started it (found by the
//! `npy_train_dir` fuzz target: LeakSanitizer saw a detached loader still exiting after the
//! call had returned). Alone in its test binary, so no other test's loader is counted.
#![allow(clippy::unwrap_used)]

mod common;

use common::random_train;
use tutti_sweep::{write_train, Layer, NpyTrain, TensorTrain, TrainKind};

/// The kernel's flag of a task inside `do_exit` (`PF_EXITING`, field 9 of its `stat`).
const PF_EXITING: u64 = 0x4;

/// Threads of this process whose name starts like the loader's (names are cut at 15 bytes)
/// and that are not exiting. A joined thread can stay listed for a moment after the join
/// returns (the kernel wakes the joiner before it removes the task), always with
/// `PF_EXITING` set; a loader left running has it clear.
fn loaders() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter(|task| {
            let path = task.as_ref().unwrap().path();
            let named = std::fs::read_to_string(path.join("comm"))
                .is_ok_and(|name| name.starts_with("tutti-sweep-lo"));
            // The fields after the command name: state (3), ppid, pgrp, session, tty_nr,
            // tpgid, flags (9).
            let exiting = std::fs::read_to_string(path.join("stat"))
                .ok()
                .and_then(|stat| {
                    let (_, rest) = stat.rsplit_once(')')?;
                    rest.split_whitespace().nth(6)?.parse::<u64>().ok()
                })
                .is_none_or(|flags| flags & PF_EXITING != 0);
            named && !exiting
        })
        .count()
}

#[test]
fn dropping_a_stream_early_joins_its_loader() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("psi");
    let train: TensorTrain<f64> = random_train(TrainKind::Mps, &[(2, 1); 8], 4, 1.0, 21);
    write_train(&train, &dir).unwrap();
    let disk = NpyTrain::open(&dir).unwrap();
    for _ in 0..20 {
        let mut stream = Layer::<f64>::stream(&disk, false).unwrap();
        let first = stream.next().unwrap().unwrap();
        assert_eq!(first, train.cores()[0]);
        // The loader is blocked handing over the next core; dropping must stop and join it.
        drop(stream);
        assert_eq!(loaders(), 0, "a loader thread outlived its stream");
    }
    // A stream read to the end leaves none either.
    assert_eq!(disk.read::<f64>().unwrap(), train);
    assert_eq!(loaders(), 0);
}
