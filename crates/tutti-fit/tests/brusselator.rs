//! The Brusselator model. 2-D: its Jacobian against central differences of its right-hand
//! side and against `tutti_sparse::models::brusselator_jacobian` (written separately), and
//! its BDF solution on an 8 x 8 grid against scipy's Radau on a numpy transcription of the
//! tutorial's definition (`tests/data/brusselator.py`). 3-D: its Jacobian and parameter
//! derivatives against central differences, the 2-D problem in every z-plane of a
//! z-invariant state (right-hand side and integration before the forcing), the forcing
//! ball's points, and the refused sizes.

use tutti_fit::bdf::{integrate, BdfOptions, ParametricSystem, StiffSystem};
use tutti_fit::brusselator::Brusselator;
use tutti_sparse::SparseError;

/// A state near the initial one with every entry different.
fn perturbed_state(model: &Brusselator) -> Vec<f64> {
    model
        .initial_state()
        .iter()
        .enumerate()
        .map(|(k, v)| v + 0.3 + 0.01 * ((k * 7919) % 101) as f64)
        .collect()
}

/// The largest `|analytic - difference| / (1 + |analytic|)` over all of `df/dy` (pattern
/// and outside it) at `t = 2` (the forcing on), by central differences with steps
/// `1e-6 (1 + |y|)`.
fn jacobian_against_differences(model: &Brusselator) -> f64 {
    let y = perturbed_state(model);
    let pattern = model.jacobian_pattern();
    let mut values = vec![0.0; pattern.nnz()];
    model.jacobian(2.0, &y, &mut values).expect("jacobian");
    let n = model.dimension();
    let (mut plus, mut minus) = (vec![0.0; n], vec![0.0; n]);
    let mut largest: f64 = 0.0;
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
            largest = largest.max((difference - analytic).abs() / (1.0 + analytic.abs()));
        }
    }
    largest
}

#[test]
fn the_jacobian_is_the_derivative_of_the_right_hand_side() {
    let model = Brusselator::new(6).expect("model");
    let largest = jacobian_against_differences(&model);
    // Central differences of a quadratic in each variable are exact up to rounding:
    // entries reach alpha (n - 1)^2 = 250, so rounding of f (~1e3 * eps / step)
    // allows about 1e-6 absolute.
    assert!(largest < 1e-5, "{largest:e}");
}

#[test]
fn the_3d_jacobian_is_the_derivative_of_the_right_hand_side() {
    let model = Brusselator::with_dims(4, 3).expect("model");
    assert_eq!(model.dims(), 3);
    assert_eq!(model.dimension(), 2 * 4 * 4 * 4);
    // Each row: the point's u and v, and its species at the 6 neighbours.
    assert_eq!(model.jacobian_pattern().nnz(), 8 * model.dimension());
    let largest = jacobian_against_differences(&model);
    // As in 2-D, f is at most quadratic in each unknown, so the differences are exact but
    // for rounding: |f| stays below about 1e3 (entries alpha (n - 1)^2 = 90 times states
    // of a few units), and eps 1e3 / 1e-6 is about 2e-7. Measured: 1.7e-8.
    eprintln!("3-D Jacobian: largest difference {largest:.2e}");
    assert!(largest < 1e-5, "{largest:e}");
}

/// `state`, a 2-D state, repeated in each of `n` z-planes.
fn stacked(state: &[f64], n: usize) -> Vec<f64> {
    state.repeat(n)
}

#[test]
fn a_z_invariant_state_has_the_2d_right_hand_side_in_every_plane() {
    let n = 5;
    let flat = Brusselator::new(n).expect("2-D");
    let cube = Brusselator::with_dims(n, 3).expect("3-D");
    // The initial states already agree, plane by plane, to the bit.
    assert_eq!(cube.initial_state(), stacked(&flat.initial_state(), n));
    let state = perturbed_state(&flat);
    let (mut plane, mut volume) = (vec![0.0; flat.dimension()], vec![0.0; cube.dimension()]);
    for t in [0.0, 0.5, 1.0] {
        flat.rhs(t, &state, &mut plane).expect("2-D rhs");
        cube.rhs(t, &stacked(&state, n), &mut volume)
            .expect("3-D rhs");
        for (k, got) in volume.chunks(plane.len()).enumerate() {
            for (unknown, (a, b)) in got.iter().zip(&plane).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "t = {t}, plane {k}, unknown {unknown}: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn before_the_forcing_the_3d_solution_is_the_2d_one_in_every_plane() {
    let n = 5;
    let flat = Brusselator::new(n).expect("2-D");
    let cube = Brusselator::with_dims(n, 3).expect("3-D");
    let (rtol, atol) = (1e-6, 1e-9);
    let options = BdfOptions {
        rtol,
        atol,
        ..BdfOptions::default()
    };
    let times = [0.5, 1.0];
    let plane = integrate(&flat, 0.0, &flat.initial_state(), &times, &options).expect("2-D");
    let volume = integrate(&cube, 0.0, &cube.initial_state(), &times, &options).expect("3-D");
    for ((t, flat_y), cube_y) in times.iter().zip(&plane.y).zip(&volume.y) {
        let mut largest: f64 = 0.0;
        for slice in cube_y.chunks(flat_y.len()) {
            for (a, b) in slice.iter().zip(flat_y) {
                largest = largest.max((a - b).abs() / (atol + rtol * b.abs()));
            }
        }
        // Each integration is within a few tolerances of the same z-invariant solution (the
        // 8 x 8 comparison with Radau measures 2.4 at t = 1), so they differ by at most a
        // few tolerances; in practice the 3-D run takes the same steps and only the LU's
        // rounding across planes separates them. Measured: 9.4e-9 and 3.6e-9 tolerances at
        // t = 0.5 and 1.
        eprintln!("t = {t}: 3-D planes vs 2-D, largest difference {largest:.2e} tolerances");
        assert!(largest < 5.0, "t = {t}: {largest} tolerances");
    }
}

#[test]
fn the_3d_forcing_is_on_the_ball_from_its_start() {
    // n = 16: dx = 1/15, the centre (0.3, 0.6, 0.5) is at indices (4.5, 9, 7.5) and the
    // radius 0.1 is 1.5 dx, so the ball holds i in {4, 5}, j in {8, 9, 10}, k in {7, 8}
    // (squared distances at most 1.5 dx^2 inside, at least 2.5 dx^2 outside, against 2.25).
    let n = 16;
    let cube = Brusselator::with_dims(n, 3).expect("3-D");
    let state = perturbed_state(&cube);
    let (mut before, mut after) = (vec![0.0; cube.dimension()], vec![0.0; cube.dimension()]);
    cube.rhs(1.0, &state, &mut before).expect("rhs");
    cube.rhs(1.1, &state, &mut after).expect("rhs");
    let mut forced = 0;
    for k in 0..n {
        for j in 0..n {
            for i in 0..n {
                let point = i + n * j + n * n * k;
                let inside = (4..=5).contains(&i) && (8..=10).contains(&j) && (7..=8).contains(&k);
                let u = before[2 * point] + if inside { 5.0 } else { 0.0 };
                assert_eq!(after[2 * point], u, "u at ({i}, {j}, {k})");
                assert_eq!(after[2 * point + 1], before[2 * point + 1]);
                forced += usize::from(inside);
            }
        }
    }
    assert_eq!(forced, 12);
}

#[test]
fn the_3d_parameter_derivatives_agree_with_central_differences() {
    let base = Brusselator::with_dims(4, 3).expect("3-D");
    let y = perturbed_state(&base);
    let unknowns = base.dimension();
    let mut columns = vec![0.0; 3 * unknowns];
    base.rhs_parameter_derivatives(2.0, &y, &mut columns)
        .expect("df/dp");
    let parameters = [base.a, base.b, base.alpha];
    let (mut plus, mut minus) = (vec![0.0; unknowns], vec![0.0; unknowns]);
    let mut largest: f64 = 0.0;
    for (p, column) in columns.chunks(unknowns).enumerate() {
        let step = 1e-6 * (1.0 + parameters[p].abs());
        let with = |delta: f64| {
            let mut model = base.clone();
            let mut values = parameters;
            values[p] += delta;
            (model.a, model.b, model.alpha) = (values[0], values[1], values[2]);
            model
        };
        with(step).rhs(2.0, &y, &mut plus).expect("rhs");
        with(-step).rhs(2.0, &y, &mut minus).expect("rhs");
        for (row, analytic) in column.iter().enumerate() {
            let difference = (plus[row] - minus[row]) / (2.0 * step);
            largest = largest.max((difference - analytic).abs() / (1.0 + analytic.abs()));
        }
    }
    // f is linear in A, B and alpha, so the differences are exact but for rounding of f
    // (|f| up to about 1e3: eps 1e3 / 1e-5 is about 2e-8). Measured: 5.8e-9.
    eprintln!("3-D df/dp: largest difference {largest:.2e}");
    assert!(largest < 1e-6, "{largest:e}");
}

#[test]
fn bad_dimensions_and_sizes_are_refused() {
    let check = |n: usize, dims: usize, invalid: bool| match Brusselator::with_dims(n, dims) {
        Err(SparseError::InvalidArgument { .. }) if invalid => {}
        Err(SparseError::TooLarge { .. }) if !invalid => {}
        other => panic!("n = {n}, dims = {dims}: {other:?}"),
    };
    check(4, 1, true);
    check(4, 4, true);
    check(2, 3, true);
    check(2, 2, true);
    let message = Brusselator::with_dims(2, 3)
        .expect_err("2 x 2 x 2")
        .to_string();
    assert!(message.contains("at least 3 x 3 x 3"), "{message}");
    let message = Brusselator::with_dims(4, 4).expect_err("4-D").to_string();
    assert!(message.contains("2 or 3"), "{message}");
    // n^3 overflows; 2 n^3 overflows; the entries 8 (2 n^3) overflow; the entries fit in
    // usize but not in memory.
    check(1 << 22, 3, false);
    check(1 << 21, 3, false);
    check(1 << 20, 3, false);
    check(1 << 19, 3, false);
    check(1 << 31, 2, false);
    check(1 << 30, 2, false);
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
