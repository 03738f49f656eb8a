//! Fits with bounds on the parameters against constrained minima known in closed form
//! (Rosenbrock held at x <= 1/2, a linear model with an active bound, a fixed parameter),
//! the gradient's sign at an active bound, wide bounds changing no bit, and bad bounds.

use tutti_backend::Resources;
use tutti_fit::example::{synthetic_experiments, START_RATES};
use tutti_fit::{fit, Bounds, Experiment, FitError, FitOptions};

mod common;

use common::Rosenbrock;

fn options() -> FitOptions {
    FitOptions::default().with_resources(Resources::cpu(1))
}

#[test]
fn rosenbrock_held_below_its_minimum_ends_on_the_bound() {
    // With x <= 1/2 the minimum is x = 1/2, y = x^2 = 1/4 (the first residual vanishes),
    // cost 0.5 (1 - 1/2)^2 = 0.125. The fit stops once a step lowers the cost by under 1e-14
    // of it; an error e in y adds 50 e^2, so e up to about sqrt(1e-14 0.125 / 50) = 5e-9 can
    // remain (measured 6.5e-11 when x is fixed), and the gradient's components 100 e (y)
    // and -1/2 - 10 e (x) follow.
    let bounds = Bounds::new(
        vec![f64::NEG_INFINITY, f64::NEG_INFINITY],
        vec![0.5, f64::INFINITY],
    )
    .expect("bounds");
    let report = fit(&[Rosenbrock], &[-1.2, 1.0], &options().with_bounds(bounds)).expect("fit");
    assert!(report.converged(), "{:?}", report.termination);
    assert_eq!(report.parameters[0], 0.5);
    assert!(
        (report.parameters[1] - 0.25).abs() < 1e-8,
        "{:?}",
        report.parameters
    );
    assert!((report.cost - 0.125).abs() < 1e-12, "{}", report.cost);
    // The gradient at the bound points out of the box: J^T r = (-20 x r0 - r1, 10 r0) with
    // r1 = 1/2 > 0, so its x component is -1/2 (the cost falls as x grows).
    let mut r = [0.0; 2];
    let mut j = [0.0; 4];
    Rosenbrock
        .evaluate(&report.parameters, &mut r, &mut j)
        .expect("evaluate");
    let gradient_x = j[0] * r[0] + j[2] * r[1];
    assert!((gradient_x + 0.5).abs() < 1e-6, "{gradient_x}");
    // The report's gradient norm counts only y, the free component.
    assert!(report.gradient_norm < 1e-6, "{}", report.gradient_norm);
}

#[test]
fn a_fixed_parameter_stays_where_it_is() {
    let bounds = Bounds::new(vec![0.5, f64::NEG_INFINITY], vec![0.5, f64::INFINITY]).expect("b");
    let report = fit(&[Rosenbrock], &[0.5, 2.0], &options().with_bounds(bounds)).expect("fit");
    assert_eq!(report.parameters[0], 0.5);
    // Within 5e-9 of y = x^2, as above.
    assert!(
        (report.parameters[1] - 0.25).abs() < 1e-8,
        "{:?}",
        report.parameters
    );
}

/// r = A p - b for a fixed 5 x 3 `A` and `b`.
struct Linear;

const A: [[f64; 3]; 5] = [
    [1.0, 2.0, 0.5],
    [0.0, 1.0, -1.0],
    [3.0, -1.0, 2.0],
    [1.0, 1.0, 1.0],
    [-2.0, 0.5, 1.0],
];
const B: [f64; 5] = [1.0, -2.0, 4.0, 3.0, 0.5];

impl Experiment for Linear {
    fn residual_count(&self) -> usize {
        5
    }
    fn evaluate(&self, p: &[f64], r: &mut [f64], j: &mut [f64]) -> Result<(), String> {
        for (i, row) in A.iter().enumerate() {
            r[i] = row.iter().zip(p).map(|(a, p)| a * p).sum::<f64>() - B[i];
            j[i * 3..(i + 1) * 3].copy_from_slice(row);
        }
        Ok(())
    }
}

/// The minimiser of |A p - b| over (p1, p2) with p0 fixed at `p0`: the 2 x 2 normal
/// equations of the last two columns against `b - p0 A[:, 0]`, by Cramer's rule.
fn linear_with_p0(p0: f64) -> [f64; 2] {
    let (mut m, mut v) = ([[0.0; 2]; 2], [0.0; 2]);
    for (row, b) in A.iter().zip(B) {
        let target = b - p0 * row[0];
        for i in 0..2 {
            v[i] += row[i + 1] * target;
            for k in 0..2 {
                m[i][k] += row[i + 1] * row[k + 1];
            }
        }
    }
    let det = m[0][0] * m[1][1] - m[0][1] * m[1][0];
    [
        (v[0] * m[1][1] - m[0][1] * v[1]) / det,
        (m[0][0] * v[1] - v[0] * m[1][0]) / det,
    ]
}

#[test]
fn a_linear_model_with_an_active_bound_has_the_reduced_problems_solution() {
    let free = fit(&[Linear], &[0.0; 3], &options()).expect("unbounded");
    let p0 = free.parameters[0];
    // Hold p0 a quarter below its unconstrained value, from above and from below.
    for (lower, upper) in [(f64::NEG_INFINITY, p0 - 0.25), (p0 + 0.25, f64::INFINITY)] {
        let bound = if upper.is_finite() { upper } else { lower };
        let bounds = Bounds::new(
            vec![lower, f64::NEG_INFINITY, f64::NEG_INFINITY],
            vec![upper, f64::INFINITY, f64::INFINITY],
        )
        .expect("bounds");
        let start = [bound, 0.0, 0.0];
        let report = fit(&[Linear], &start, &options().with_bounds(bounds)).expect("bounded");
        assert!(report.converged(), "{:?}", report.termination);
        assert_eq!(report.parameters[0], bound);
        let expected = linear_with_p0(bound);
        for (k, (got, expected)) in report.parameters[1..].iter().zip(expected).enumerate() {
            // A linear problem: Gauss-Newton is exact, so rounding only.
            assert!(
                (got - expected).abs() <= 1e-10 * (1.0 + expected.abs()),
                "p{}: {got} against {expected}",
                k + 1
            );
        }
        assert!(report.cost > free.cost);
    }
}

#[test]
fn bounds_that_never_bind_change_no_bit() {
    let experiments = synthetic_experiments(2026).expect("data");
    let free = fit(&experiments, &START_RATES, &options()).expect("free");
    let bounds = Bounds::new(vec![0.0; 3], vec![100.0; 3]).expect("bounds");
    let bounded = fit(&experiments, &START_RATES, &options().with_bounds(bounds)).expect("bounded");
    assert_eq!(free.parameters, bounded.parameters);
    assert_eq!(free.cost.to_bits(), bounded.cost.to_bits());
    assert_eq!(free.iterations, bounded.iterations);
}

#[test]
fn bad_bounds_are_refused_before_anything_runs() {
    let invalid = |result: Result<Bounds, FitError>, needle: &str| {
        let err = result.expect_err("bad bounds");
        assert!(
            matches!(&err, FitError::InvalidArgument { argument: "bounds", message } if message.contains(needle)),
            "{err}"
        );
    };
    invalid(
        Bounds::new(vec![0.0], vec![1.0, 2.0]),
        "1 lower and 2 upper",
    );
    invalid(Bounds::new(vec![2.0], vec![1.0]), "[2, 1]");
    invalid(Bounds::new(vec![f64::NAN], vec![1.0]), "NaN");
    let bounds = Bounds::new(vec![0.0, 0.0], vec![1.0, 1.0]).expect("bounds");
    let err = fit(
        &[Rosenbrock],
        &[0.5, 2.0],
        &options().with_bounds(bounds.clone()),
    )
    .expect_err("outside");
    assert!(
        matches!(&err, FitError::InvalidArgument { argument: "initial", message } if message.contains("parameter 1 is 2, outside its bounds [0, 1]")),
        "{err}"
    );
    let err = fit(&[Linear], &[0.5; 3], &options().with_bounds(bounds)).expect_err("length");
    assert!(
        matches!(&err, FitError::InvalidArgument { argument: "bounds", message } if message.contains("2 pairs for 3 parameters")),
        "{err}"
    );
}
