//! A [`SplitFactorization`] over a group spanning processes (threads over the loopback wire,
//! each with its own spanning group, as MPI processes would be): every process solves with
//! the bits of as many in-process ranks, and a process whose plan is refused fails the
//! others' runs instead of leaving them waiting.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{path_tree, random_tridiagonal, rhs};
use tutti_backend::{GpuUse, Resources};
use tutti_group::Group;
use tutti_sparse::{FactorOptions, SolveOptions, SparseError, SplitFactorization, Symbolic};

#[test]
fn processes_solve_with_the_bits_of_as_many_ranks_in_one_process() {
    let n = 4000;
    let a = random_tridiagonal(n, 23);
    let symbolic = Arc::new(Symbolic::new(&a, path_tree(n, 8)).unwrap());
    let b: Vec<f64> = (0..2).flat_map(|k| rhs(n, 60 + k)).collect();
    for size in [2, 3] {
        let threads = Group::from_resources(&Resources::cpu(size), GpuUse::HostOnly).unwrap();
        let split = SplitFactorization::new(
            &threads,
            Arc::clone(&symbolic),
            &a,
            FactorOptions::default(),
            &Resources::cpu(size),
        )
        .unwrap();
        let mut want = b.clone();
        split
            .solve_in_place(&threads, &mut want, 2, &SolveOptions::default())
            .unwrap();
        let solutions = tutti_mpi::on_loopback_processes(size, |group| {
            let split = SplitFactorization::new(
                group,
                Arc::clone(&symbolic),
                &a,
                FactorOptions::default(),
                &Resources::cpu(1),
            )?;
            assert_eq!(split.parts().len(), 1, "one rank per process");
            let mut x = b.clone();
            let info = split.solve_in_place(group, &mut x, 2, &SolveOptions::default())?;
            assert!(info.backward_error < 1e-14, "{info:?}");
            Ok::<_, SparseError>(x)
        })
        .unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (process, x) in solutions.into_iter().enumerate() {
            assert_eq!(
                bits(&x.unwrap()),
                bits(&want),
                "process {process} of {size}"
            );
        }
    }
}

#[test]
fn a_plan_refused_on_one_process_fails_the_others_runs() {
    let n = 20_000;
    let a = random_tridiagonal(n, 5);
    let symbolic = Arc::new(Symbolic::new(&a, path_tree(n, 64)).unwrap());
    let outcomes = tutti_mpi::on_loopback_processes(3, |group| {
        // Process 1's device is capped at 1 KiB: nothing fits.
        let resources = if group.local_ranks().start == 1 {
            Resources::cpu(1).with_device_memory_cap(1024)
        } else {
            Resources::cpu(1)
        };
        SplitFactorization::new(
            group,
            Arc::clone(&symbolic),
            &a,
            FactorOptions::default(),
            &resources,
        )
        .map(|_| ())
    })
    .unwrap();
    assert!(
        matches!(&outcomes[1], Err(SparseError::Plan(_))),
        "{:?}",
        outcomes[1]
    );
    for process in [0, 2] {
        let error = outcomes[process].as_ref().unwrap_err();
        assert!(
            matches!(error, SparseError::Group { .. }),
            "process {process}: {error}"
        );
        assert!(
            error.to_string().contains("rank 1"),
            "process {process}: {error}"
        );
    }
}

/// Processes given different values, or different right-hand sides, are told so on every
/// process (naming the rank that differs) instead of factoring or solving a mixture.
#[test]
fn processes_given_different_values_or_right_hand_sides_all_fail() {
    let n = 3000;
    let a = random_tridiagonal(n, 31);
    // One value, in the last bit, on process 2 only.
    let mut values = a.values().to_vec();
    values[n / 2] = f64::from_bits(values[n / 2].to_bits() ^ 1);
    let other =
        tutti_sparse::CsrMatrix::try_new(n, n, a.indptr().to_vec(), a.indices().to_vec(), values)
            .unwrap();
    let symbolic = Arc::new(Symbolic::new(&a, path_tree(n, 8)).unwrap());
    let b = rhs(n, 4);
    let outcomes = tutti_mpi::on_loopback_processes(3, |group| {
        let mine = if group.local_ranks().start == 2 {
            &other
        } else {
            &a
        };
        SplitFactorization::new(
            group,
            Arc::clone(&symbolic),
            mine,
            FactorOptions::default(),
            &Resources::cpu(1),
        )
        .map(|_| ())
    })
    .unwrap();
    for (process, outcome) in outcomes.iter().enumerate() {
        let error = outcome.as_ref().unwrap_err();
        assert!(
            error.to_string().contains("different matrices") && error.to_string().contains("[2]"),
            "process {process}: {error}"
        );
    }
    let outcomes = tutti_mpi::on_loopback_processes(3, |group| {
        let split = SplitFactorization::new(
            group,
            Arc::clone(&symbolic),
            &a,
            FactorOptions::default(),
            &Resources::cpu(1),
        )?;
        let mut x = b.clone();
        if group.local_ranks().start == 1 {
            x[0] += 1.0;
        }
        split
            .solve_in_place(group, &mut x, 1, &SolveOptions::default())
            .map(|_| ())
    })
    .unwrap();
    for (process, outcome) in outcomes.iter().enumerate() {
        let error = outcome.as_ref().unwrap_err();
        assert!(
            error.to_string().contains("different right-hand sides")
                && error.to_string().contains("[1]"),
            "process {process}: {error}"
        );
    }
}
