//! The 2-D Brusselator model: its Jacobian against central differences of its right-hand
//! side and against `tutti_sparse::models::brusselator_jacobian` (written separately), and
//! its BDF solution on an 8 x 8 grid against scipy's Radau on a numpy transcription of the
//! tutorial's definition (`tests/data/brusselator.py`).

use tutti_fit::bdf::{integrate, BdfOptions, StiffSystem};
use tutti_fit::brusselator::Brusselator;

/// A state near the initial one with every entry different.
fn perturbed_state(model: &Brusselator) -> Vec<f64> {
    model
        .initial_state()
        .iter()
        .enumerate()
        .map(|(k, v)| v + 0.3 + 0.01 * ((k * 7919) % 101) as f64)
        .collect()
}

#[test]
fn the_jacobian_is_the_derivative_of_the_right_hand_side() {
    let model = Brusselator::new(6).expect("model");
    let y = perturbed_state(&model);
    let pattern = model.jacobian_pattern();
    let mut values = vec![0.0; pattern.nnz()];
    model.jacobian(2.0, &y, &mut values).expect("jacobian");
    let n = model.dimension();
    let (mut plus, mut minus) = (vec![0.0; n], vec![0.0; n]);
    for column in 0..n {
        let step = 1e-6 * (1.0 + y[column].abs());
        let mut shifted = y.clone();
        shifted[column] += step;
        model.rhs(2.0, &shifted, &mut plus).expect("rhs");
        shifted[column] -= 2.0 * step;
        model.rhs(2.0, &shifted, &mut minus).expect("rhs");
        for row in 0..n {
            let difference = (plus[row] - minus[row]) / (2.0 * step);
            let (columns, _) = pattern.row(row);
            let analytic = columns
                .binary_search(&column)
                .map_or(0.0, |k| values[pattern.indptr()[row] + k]);
            // Central differences of a quadratic in each variable are exact up to rounding:
            // entries reach alpha (n - 1)^2 = 250, so rounding of f (~1e3 * eps / step)
            // allows about 1e-6 absolute.
            assert!(
                (difference - analytic).abs() < 1e-5 * (1.0 + analytic.abs()),
                "d f_{row} / d y_{column}: {analytic} analytic, {difference} by differences"
            );
        }
    }
}

#[test]
fn the_jacobian_agrees_with_the_sparse_crates_model() {
    let model = Brusselator::new(7).expect("model");
    let y = perturbed_state(&model);
    let (u, v): (Vec<f64>, Vec<f64>) = y.chunks(2).map(|p| (p[0], p[1])).unzip();
    let reference =
        tutti_sparse::models::brusselator_jacobian(7, model.alpha, &u, &v).expect("reference");
    let pattern = model.jacobian_pattern();
    assert!(pattern.same_pattern(&reference));
    let mut values = vec![0.0; pattern.nnz()];
    model.jacobian(0.0, &y, &mut values).expect("jacobian");
    for (k, (a, b)) in values.iter().zip(reference.values()).enumerate() {
        assert!(
            (a - b).abs() <= 1e-12 * b.abs().max(1.0),
            "entry {k}: {a} vs {b}"
        );
    }
}

#[test]
fn an_8_by_8_brusselator_follows_radau_through_the_forcing() {
    let reference: serde_json::Value =
        serde_json::from_str(include_str!("data/brusselator.json")).expect("reference");
    let n = reference["n"].as_u64().expect("n") as usize;
    let t_eval: Vec<f64> = reference["t"]
        .as_array()
        .expect("t")
        .iter()
        .map(|t| t.as_f64().expect("a time"))
        .collect();
    let model = Brusselator::new(n).expect("model");
    let (rtol, atol) = (1e-8, 1e-10);
    let solution = integrate(
        &model,
        0.0,
        &model.initial_state(),
        &t_eval,
        &BdfOptions {
            rtol,
            atol,
            ..BdfOptions::default()
        },
    )
    .expect("integrates");
    for ((t, got), exact) in solution
        .t
        .iter()
        .zip(&solution.y)
        .zip(reference["y"].as_array().expect("y"))
    {
        let exact: Vec<f64> = exact
            .as_array()
            .expect("a state")
            .iter()
            .map(|v| v.as_f64().expect("a number"))
            .collect();
        let error = got
            .iter()
            .zip(&exact)
            .map(|(g, e)| (g - e).abs() / (atol + rtol * e.abs()))
            .fold(0.0, f64::max);
        // The global error under a local control, across the forcing's switch inside a
        // step: measured 2.4, 3.4 and 27.8 tolerances at t = 1, 2 and 11.5.
        assert!(error < 100.0, "t = {t}: {error:.1} tolerances");
    }
    let stats = solution.statistics;
    assert!(stats.jacobians < stats.steps, "{stats:?}");
}
