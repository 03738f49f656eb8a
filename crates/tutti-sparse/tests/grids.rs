//! The solver on the matrices it is for (Laplacians, convection-diffusion, reaction-diffusion
//! Jacobians on 2-D and 3-D grids), ordered by geometric and by automatic nested
//! dissection: residuals at rounding level, agreement with faer's sparse LU (COLAMD and
//! supernodal, an independent code), fill close to George's estimate, and the bits of one
//! rank on 1-4 ranks.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::faer_solve;
use tutti_backend::{GpuUse, Resources};
use tutti_group::Group;
use tutti_sparse::models::{convection_diffusion, laplacian, reaction_diffusion};
use tutti_sparse::ordering::{Grid, OrderingOptions};
use tutti_sparse::{
    analyse, CsrMatrix, FactorOptions, Factorization, OrderingMethod, SolveOptions,
    SplitFactorization,
};

/// A right-hand side with entries of both signs and several scales.
fn rhs(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * 7919) % 1000) as f64 / 500.0 - 1.0)
        .collect()
}

/// `||A x - b||_inf / (||A||_inf ||x||_inf)`.
fn relative_residual(a: &CsrMatrix, x: &[f64], b: &[f64]) -> f64 {
    let mut ax = vec![0.0; b.len()];
    a.matvec(x, &mut ax).unwrap();
    let r = ax
        .iter()
        .zip(b)
        .fold(0.0f64, |m, (p, q)| m.max((p - q).abs()));
    let x_norm = x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    r / (a.norm_inf() * x_norm)
}

fn max_rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

fn grid(dims: &[usize], block: usize) -> Grid {
    Grid {
        dims: dims.to_vec(),
        periodic: vec![false; dims.len()],
        block,
    }
}

/// Solves `a x = b` with `method` and checks the residual and faer's answer.
fn check(name: &str, a: &CsrMatrix, method: &OrderingMethod) {
    let symbolic = analyse(a, method).unwrap();
    let lu = Factorization::new(Arc::clone(&symbolic), a, FactorOptions::default()).unwrap();
    let b = rhs(a.rows());
    let mut x = b.clone();
    let info = lu
        .solve_in_place(&mut x, 1, &SolveOptions::default())
        .unwrap();
    let residual = relative_residual(a, &x, &b);
    // The bound of the issue: a backward-stable solve on these well-scaled matrices.
    assert!(
        residual <= 1e-13,
        "{name}: residual {residual:.2e}, {info:?}"
    );
    let reference = faer_solve(a, &b);
    // Condition numbers here stay below ~1e4 (Laplacians of at most 48 points a side):
    // two backward-stable solvers agree to about cond * eps.
    let gap = max_rel_diff(&x, &reference);
    assert!(gap <= 1e-10, "{name}: {gap:.2e} from faer's sparse LU");
    assert_eq!(lu.perturbed_pivots(), 0, "{name}");
}

#[test]
fn laplacians_solve_to_rounding_with_either_ordering() {
    for dims in [vec![48, 48], vec![12, 12, 12], vec![9, 17, 5]] {
        let a = laplacian(&dims).unwrap();
        let name = format!("Laplacian {dims:?}");
        check(
            &name,
            &a,
            &OrderingMethod::Grid {
                grid: grid(&dims, 1),
                leaf_size: 64,
            },
        );
        check(&name, &a, &OrderingMethod::default());
    }
}

#[test]
fn unsymmetric_and_coupled_matrices_solve_to_rounding() {
    let dims = [40, 40];
    check(
        "convection-diffusion, Peclet 50",
        &convection_diffusion(&dims, 50.0).unwrap(),
        &OrderingMethod::Grid {
            grid: grid(&dims, 1),
            leaf_size: 64,
        },
    );
    let a = reaction_diffusion(&[20, 20], 2, 1.0).unwrap();
    check(
        "reaction-diffusion, 2 species, grid order",
        &a,
        &OrderingMethod::Grid {
            grid: grid(&[20, 20], 2),
            leaf_size: 64,
        },
    );
    check(
        "reaction-diffusion, 2 species, automatic order in blocks",
        &a,
        &OrderingMethod::NestedDissection(OrderingOptions {
            leaf_size: 64,
            block: 2,
        }),
    );
    let a3 = reaction_diffusion(&[8, 8, 8], 3, 1.0).unwrap();
    check(
        "reaction-diffusion 3-D, 3 species",
        &a3,
        &OrderingMethod::Grid {
            grid: grid(&[8, 8, 8], 3),
            leaf_size: 96,
        },
    );
}

#[test]
fn fill_on_a_square_grid_is_close_to_georges_estimate() {
    // George's nested dissection of a k x k 5-point grid: nnz(L) about (31/4) k^2 log2 k
    // for Cholesky; L and U together twice that. Our leaves are dense blocks of up to 16
    // points, which adds a little.
    for k in [63usize, 127] {
        let a = laplacian(&[k, k]).unwrap();
        let symbolic = analyse(
            &a,
            &OrderingMethod::Grid {
                grid: grid(&[k, k], 1),
                leaf_size: 16,
            },
        )
        .unwrap();
        let stats = symbolic.statistics();
        let estimate = 2.0 * 31.0 / 4.0 * (k * k) as f64 * (k as f64).log2();
        let ratio = stats.factor_nnz as f64 / estimate;
        assert!(
            (0.5..=1.5).contains(&ratio),
            "k {k}: nnz(L+U) {} is {ratio:.2} x George's {estimate:.0}",
            stats.factor_nnz
        );
    }
}

#[test]
fn a_grid_split_among_ranks_gives_the_bits_of_one_rank() {
    let dims = [24, 24];
    let a = reaction_diffusion(&dims, 2, 0.5).unwrap();
    let symbolic = analyse(
        &a,
        &OrderingMethod::Grid {
            grid: grid(&dims, 2),
            leaf_size: 32,
        },
    )
    .unwrap();
    let alone = Factorization::new(Arc::clone(&symbolic), &a, FactorOptions::default()).unwrap();
    let b: Vec<f64> = [rhs(a.rows()), rhs(a.rows()).iter().rev().copied().collect()].concat();
    let mut want = b.clone();
    alone
        .solve_in_place(&mut want, 2, &SolveOptions::default())
        .unwrap();
    for ranks in 1..=4 {
        let group = Group::from_resources(&Resources::cpu(ranks), GpuUse::HostOnly).unwrap();
        let split = SplitFactorization::new(
            &group,
            Arc::clone(&symbolic),
            &a,
            FactorOptions::default(),
            &Resources::cpu(ranks),
        )
        .unwrap();
        let mut x = b.clone();
        split
            .solve_in_place(&group, &mut x, 2, &SolveOptions::default())
            .unwrap();
        assert!(
            x.iter().zip(&want).all(|(p, q)| p.to_bits() == q.to_bits()),
            "{ranks} ranks"
        );
    }
}
