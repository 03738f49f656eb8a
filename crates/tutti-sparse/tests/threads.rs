//! Independent subtrees factored and solved on several threads of one rank give the bits of
//! one thread: the solutions and perturbed pivots are the same on pools of 1 to 4 threads,
//! and a split factorization whose rank has several threads, or one on a device's threads
//! without a group, matches too.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::rhs;
use tutti_backend::{GpuUse, Resources};
use tutti_group::Group;
use tutti_sparse::models::{convection_diffusion, laplacian};
use tutti_sparse::{
    analyse, CsrMatrix, FactorOptions, Factorization, OrderingMethod, SolveOptions,
    SplitFactorization,
};

/// `Factorization::new` and a solve of two right-hand sides on a pool of `threads`.
fn factor_and_solve(a: &CsrMatrix, threads: usize) -> (Vec<f64>, usize) {
    let symbolic = analyse(a, &OrderingMethod::default()).unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let lu = pool
        .install(|| Factorization::new(symbolic, a, FactorOptions::default()))
        .unwrap();
    // Two right-hand sides, solved on the same pool (subtrees on its threads too).
    let mut x = [rhs(a.rows(), 5), rhs(a.rows(), 6)].concat();
    pool.install(|| lu.solve_in_place(&mut x, 2, &SolveOptions::default()))
        .unwrap();
    (x, lu.perturbed_pivots())
}

fn bits(x: &[f64]) -> Vec<u64> {
    x.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn threads_of_one_rank_give_the_bits_of_one_thread() {
    // A 3-D Laplacian (METIS's dissection, a deep tree) and an unsymmetric 2-D operator.
    let cube = laplacian(&[12, 12, 12]).unwrap();
    let plane = convection_diffusion(&[40, 40], 5.0).unwrap();
    for (name, a) in [
        ("laplacian 12^3", &cube),
        ("convection-diffusion 40^2", &plane),
    ] {
        let (want, want_perturbed) = factor_and_solve(a, 1);
        for threads in 2..=4 {
            let (x, perturbed) = factor_and_solve(a, threads);
            assert_eq!(perturbed, want_perturbed, "{name}, {threads} threads");
            assert_eq!(bits(&x), bits(&want), "{name}, {threads} threads");
        }
    }
}

#[test]
fn a_rank_with_several_threads_gives_the_bits_of_one_thread() {
    let a = laplacian(&[10, 10, 10]).unwrap();
    let (both, _) = factor_and_solve(&a, 1);
    let want = &both[..a.rows()];
    let symbolic = analyse(&a, &OrderingMethod::default()).unwrap();
    // One device of every core, and two devices sharing them.
    for resources in [Resources::cpu(1), Resources::cpu(2)] {
        let group = Group::from_resources(&resources, GpuUse::HostOnly).unwrap();
        let split = SplitFactorization::new(
            &group,
            Arc::clone(&symbolic),
            &a,
            FactorOptions::default(),
            &resources,
        )
        .unwrap();
        let mut x = rhs(a.rows(), 5);
        split
            .solve_in_place(&group, &mut x, 1, &SolveOptions::default())
            .unwrap();
        assert_eq!(bits(&x), bits(want), "{} device(s)", group.size());
    }
    // One device's threads without a group.
    let devices = Resources::cpu(1).select_for(GpuUse::HostOnly).unwrap();
    let lu = Factorization::on_device(&devices[0], symbolic, &a, FactorOptions::default()).unwrap();
    let mut x = rhs(a.rows(), 5);
    lu.solve_in_place(&mut x, 1, &SolveOptions::default())
        .unwrap();
    assert_eq!(bits(&x), bits(want), "on_device");
}
