//! `tutti_fit` through the C ABI, called from Rust as C would: bounds (`options->lower`,
//! `options->upper`), the covariance rank of a rank-deficient fit, and the termination
//! reason.
//!
//! The model is y = a * exp(b * x), four experiments of five points at x = e + 0.25 i, with
//! exact data from (a, b) = (2, -0.5). A bound that excludes the truth puts the solution on
//! that bound; the other parameter must then be the minimum of the reduced problem (the
//! bounded parameter held at its bound), which a one-parameter fit finds independently.

use std::ffi::{c_int, c_void};
use std::ptr;

use tutti::boundary::last_error;
use tutti::{
    tutti_fit, tutti_fit_options_default, TuttiFitOptions, TuttiFitResult, TuttiStatus,
    TUTTI_TERMINATION_COST, TUTTI_TERMINATION_GRADIENT, TUTTI_TERMINATION_MAX_ITERATIONS,
    TUTTI_TERMINATION_STEP,
};

const INVALID: c_int = TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT as c_int;
const COUNTS: [c_int; 4] = [5, 5, 5, 5];
const TRUE: [f64; 2] = [2.0, -0.5];

/// The abscissa of residual `i` of experiment `e`.
fn abscissa(experiment: c_int, i: usize) -> f64 {
    f64::from(experiment) + 0.25 * i as f64
}

/// Writes the residuals and the Jacobian (row-major, `columns` of them per row) of the
/// exponential model at (a, b); `columns` picks which derivatives are written: `[0, 1]` for
/// both parameters, `[1]` for b alone, `[0]` for a alone.
///
/// # Safety
/// `r` holds `m` doubles, `j` `m * columns.len()`.
unsafe fn exponential_at(
    experiment: c_int,
    (a, b): (f64, f64),
    columns: &[usize],
    r: *mut f64,
    m: c_int,
    j: *mut f64,
) {
    let m = m as usize;
    let n = columns.len();
    // SAFETY: the lengths are the caller's promise.
    let (r, j) = unsafe {
        (
            std::slice::from_raw_parts_mut(r, m),
            std::slice::from_raw_parts_mut(j, m * n),
        )
    };
    for i in 0..m {
        let x = abscissa(experiment, i);
        r[i] = a * (b * x).exp() - TRUE[0] * (TRUE[1] * x).exp();
        let derivatives = [(b * x).exp(), a * x * (b * x).exp()];
        for (k, &column) in columns.iter().enumerate() {
            j[i * n + k] = derivatives[column];
        }
    }
}

/// The full problem: parameters (a, b).
unsafe extern "C" fn exponential(
    _: *mut c_void,
    experiment: c_int,
    p: *const f64,
    _: c_int,
    r: *mut f64,
    m: c_int,
    j: *mut f64,
) -> c_int {
    // SAFETY: tutti passes 2 parameters, m residuals and 2 m Jacobian entries.
    unsafe {
        let (a, b) = (*p, *p.add(1));
        exponential_at(experiment, (a, b), &[0, 1], r, m, j);
    }
    0
}

/// One parameter of the model held at a value, the other fitted.
#[derive(Clone, Copy, Debug)]
struct Held {
    /// 0 for a, 1 for b.
    index: usize,
    value: f64,
}

/// The reduced problem: `user_data` is a `Held`; the one parameter is the other one.
unsafe extern "C" fn reduced(
    user_data: *mut c_void,
    experiment: c_int,
    p: *const f64,
    _: c_int,
    r: *mut f64,
    m: c_int,
    j: *mut f64,
) -> c_int {
    // SAFETY: the test passes a pointer to a Held; tutti 1 parameter, m residuals and m
    // Jacobian entries.
    unsafe {
        let held = *(user_data as *const Held);
        let free = *p;
        let (point, column) = if held.index == 0 {
            ((held.value, free), 1)
        } else {
            ((free, held.value), 0)
        };
        exponential_at(experiment, point, &[column], r, m, j);
    }
    0
}

/// y = (p0 + p1) x against y = 3x at x = 1..5: p0 and p1 enter only through their sum, so
/// J^T J = 55 [[1, 1], [1, 1]] has rank 1.
unsafe extern "C" fn sum_only(
    _: *mut c_void,
    _: c_int,
    p: *const f64,
    _: c_int,
    r: *mut f64,
    m: c_int,
    j: *mut f64,
) -> c_int {
    // SAFETY: tutti passes 2 parameters, m residuals and 2 m Jacobian entries.
    unsafe {
        let sum = *p + *p.add(1);
        for i in 0..m as usize {
            let x = (i + 1) as f64;
            *r.add(i) = sum * x - 3.0 * x;
            *j.add(2 * i) = x;
            *j.add(2 * i + 1) = x;
        }
    }
    0
}

/// What a successful fit wrote.
struct Fitted {
    parameters: Vec<f64>,
    covariance: Vec<f64>,
    result: TuttiFitResult,
}

/// Runs `tutti_fit` with `options` (the defaults on one CPU device, changed by `set`).
fn run(
    callback: tutti::TuttiResidualFn,
    user_data: *mut c_void,
    counts: &[c_int],
    initial: &[f64],
    set: impl FnOnce(&mut TuttiFitOptions),
) -> Result<Fitted, (c_int, String)> {
    let mut options = TuttiFitOptions::default();
    // SAFETY: a local struct.
    assert_eq!(unsafe { tutti_fit_options_default(&mut options) }, 0);
    options.resources.kind = tutti::TuttiKind::TUTTI_KIND_CPU as c_int;
    options.resources.devices = 1;
    set(&mut options);
    let n = initial.len();
    let mut parameters = vec![f64::NAN; n];
    let mut covariance = vec![f64::NAN; n * n];
    let mut result = TuttiFitResult::default();
    // SAFETY: every array has its documented length; the bounds the options point to (if
    // any) hold n doubles and outlive the call.
    let status = unsafe {
        tutti_fit(
            callback,
            user_data,
            counts.len() as c_int,
            counts.as_ptr(),
            n as c_int,
            initial.as_ptr(),
            &options,
            parameters.as_mut_ptr(),
            covariance.as_mut_ptr(),
            &mut result,
        )
    };
    if status != 0 {
        assert!(parameters.iter().all(|p| p.is_nan()), "outputs untouched");
        return Err((status, last_error()));
    }
    Ok(Fitted {
        parameters,
        covariance,
        result,
    })
}

/// Tolerances that stop on the gradient or the step rather than on the cost, so that a fit
/// goes on until rounding stops it: the default cost tolerance (1e-14 of the cost) would
/// stop it up to about 1e-8 from the minimum.
fn tight(options: &mut TuttiFitOptions) {
    options.cost_tolerance = 1e-300;
    options.gradient_tolerance = 1e-13;
}

/// The one-parameter fit of the reduced problem with `held` fixed.
fn reduced_fit(held: Held, start: f64) -> f64 {
    let mut held = held;
    let fitted = run(
        Some(reduced),
        ptr::addr_of_mut!(held).cast(),
        &COUNTS,
        &[start],
        tight,
    )
    .unwrap_or_else(|(status, message)| panic!("reduced fit: {status}: {message}"));
    assert_eq!(fitted.result.covariance_rank, 1);
    fitted.parameters[0]
}

/// `(J^T J)^-1` of the full model at `p`, inverted directly (2 x 2).
fn inverse_normal_matrix(p: &[f64]) -> [f64; 4] {
    let mut normal = [0.0; 4];
    for experiment in 0..4 {
        for i in 0..5 {
            let x = abscissa(experiment, i);
            let row = [(p[1] * x).exp(), p[0] * x * (p[1] * x).exp()];
            for (k, entry) in normal.iter_mut().enumerate() {
                *entry += row[k / 2] * row[k % 2];
            }
        }
    }
    let det = normal[0] * normal[3] - normal[1] * normal[2];
    [
        normal[3] / det,
        -normal[1] / det,
        -normal[2] / det,
        normal[0] / det,
    ]
}

fn max_relative(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
    a.iter()
        .zip(b)
        .fold(0.0_f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

#[test]
fn a_bound_that_excludes_the_truth_holds_the_solution_on_it() {
    const INF: f64 = f64::INFINITY;
    // (lower, upper, initial, (the parameter that ends on its bound, that bound)).
    let cases = [
        // a <= 1.5 from above.
        ([-INF, -INF], [1.5, INF], [1.0, 0.0], (0, 1.5)),
        // b >= -0.3 from below.
        ([-INF, -0.3], [INF, INF], [1.0, 0.0], (1, -0.3)),
        // a fixed at 1.5 by equal bounds.
        ([1.5, -INF], [1.5, INF], [1.5, 0.0], (0, 1.5)),
        // A box on both, the lower side of b's active.
        ([0.0, -0.4], [5.0, 0.0], [1.0, -0.1], (1, -0.4)),
    ];
    for (lower, upper, initial, (index, value)) in cases {
        let held = Held { index, value };
        let bounded = run(Some(exponential), ptr::null_mut(), &COUNTS, &initial, |o| {
            tight(o);
            o.lower = lower.as_ptr();
            o.upper = upper.as_ptr();
        })
        .unwrap_or_else(|(status, message)| panic!("{lower:?} {upper:?}: {status}: {message}"));
        let free = 1 - held.index;
        assert_eq!(
            bounded.parameters[held.index], held.value,
            "{lower:?} {upper:?}: the parameter sits exactly on its bound"
        );
        let expected = reduced_fit(held, initial[free]);
        let difference = (bounded.parameters[free] - expected).abs();
        // Either fit may stop anywhere the cost is flat to rounding: within
        // sqrt(2 eps cost / curvature) of the minimum, 2e-9 to 5.7e-9 relative here (cost 0.08
        // to 0.35, curvature 6 to 37); the two fits, at most twice that apart.
        assert!(
            difference < 2e-8 * expected.abs(),
            "{lower:?} {upper:?}: the free parameter {} against the reduced fit's {expected} \
             ({difference:e} apart)",
            bounded.parameters[free]
        );
        assert_eq!(bounded.result.converged, 1);
        assert!(
            bounded.result.cost > 1e-6,
            "the bound keeps the exact fit out of reach"
        );
        // The covariance is the unconstrained problem's at the bounded solution.
        assert_eq!(bounded.result.covariance_rank, 2);
        let inverse = inverse_normal_matrix(&bounded.parameters);
        let error = max_relative(&bounded.covariance, &inverse);
        assert!(error < 1e-10, "covariance vs (J^T J)^-1: {error:e}");
    }
}

#[test]
fn bounds_that_hold_the_truth_change_nothing() {
    let free = run(
        Some(exponential),
        ptr::null_mut(),
        &COUNTS,
        &[1.0, 0.0],
        |_| {},
    )
    .expect("unbounded fit");
    let lower = [0.0, -1.0];
    let upper = [5.0, 0.0];
    let boxed = run(
        Some(exponential),
        ptr::null_mut(),
        &COUNTS,
        &[1.0, 0.0],
        |o| {
            o.lower = lower.as_ptr();
            o.upper = upper.as_ptr();
        },
    )
    .expect("bounded fit");
    for fitted in [&free, &boxed] {
        assert!(
            (fitted.parameters[0] - TRUE[0]).abs() < 1e-10
                && (fitted.parameters[1] - TRUE[1]).abs() < 1e-10,
            "{:?}",
            fitted.parameters
        );
        assert_eq!(fitted.result.covariance_rank, 2);
    }
}

#[test]
fn bad_bounds_are_invalid_arguments_naming_the_entry() {
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    // (lower, upper, initial, what the message names).
    let cases = [
        (
            Some([nan, 0.0]),
            None,
            [1.0, 0.0],
            "options->lower[0] is NaN",
        ),
        (
            None,
            Some([1.0, nan]),
            [1.0, 0.0],
            "options->upper[1] is NaN",
        ),
        (
            Some([inf, 0.0]),
            None,
            [1.0, 0.0],
            "options->lower[0] is inf",
        ),
        (
            None,
            Some([2.0, -inf]),
            [1.0, 0.0],
            "options->upper[1] is -inf",
        ),
        (
            Some([0.0, 1.0]),
            Some([2.0, -1.0]),
            [1.0, 0.0],
            "options->lower[1] is 1, above options->upper[1] = -1",
        ),
        (
            Some([1.5, -inf]),
            None,
            [1.0, 0.0],
            "initial[0] is 1, outside its bounds",
        ),
        (
            None,
            Some([inf, -0.25]),
            [1.0, 0.0],
            "initial[1] is 0, outside its bounds",
        ),
    ];
    for (lower, upper, initial, needle) in cases {
        let outcome = run(Some(exponential), ptr::null_mut(), &COUNTS, &initial, |o| {
            o.lower = lower.as_ref().map_or(ptr::null(), |l| l.as_ptr());
            o.upper = upper.as_ref().map_or(ptr::null(), |u| u.as_ptr());
        });
        let Err((status, message)) = outcome else {
            panic!("{lower:?} {upper:?} {initial:?} was accepted")
        };
        assert_eq!(status, INVALID, "{message}");
        assert!(
            message.starts_with("tutti_fit: ") && message.contains(needle),
            "expected `{needle}` in: {message}"
        );
    }
}

#[test]
fn a_rank_deficient_fit_returns_its_parameters_and_the_pseudo_inverse() {
    let fitted = run(Some(sum_only), ptr::null_mut(), &[5], &[1.0, 0.0], |_| {})
        .unwrap_or_else(|(status, message)| panic!("{status}: {message}"));
    let [p0, p1] = [fitted.parameters[0], fitted.parameters[1]];
    assert!(p0.is_finite() && p1.is_finite());
    assert_eq!(fitted.result.covariance_rank, 1, "rank n - 1");
    assert_eq!(fitted.result.converged, 1);
    assert!(
        (p0 + p1 - 3.0).abs() < 1e-10,
        "the sum is fitted: {p0} + {p1}"
    );
    // The damped steps are symmetric in p0 and p1: the undetermined difference stays where
    // it started.
    assert!((p0 - p1 - 1.0).abs() < 1e-10, "p0 - p1 = {}", p0 - p1);
    // pinv(55 [[1, 1], [1, 1]]) = [[1, 1], [1, 1]] / 220.
    let expected = [1.0 / 220.0; 4];
    let error = max_relative(&fitted.covariance, &expected);
    assert!(error < 1e-12, "{:?}: {error:e}", fitted.covariance);
}

#[test]
fn the_termination_reason_is_reported() {
    let converged = run(
        Some(exponential),
        ptr::null_mut(),
        &COUNTS,
        &[1.0, 0.0],
        |_| {},
    )
    .expect("fit");
    assert!(
        [
            TUTTI_TERMINATION_GRADIENT,
            TUTTI_TERMINATION_STEP,
            TUTTI_TERMINATION_COST
        ]
        .contains(&converged.result.termination),
        "{:?}",
        converged.result
    );
    assert_eq!(converged.result.converged, 1);
    let stopped = run(
        Some(exponential),
        ptr::null_mut(),
        &COUNTS,
        &[1.0, 0.0],
        |o| {
            o.max_iterations = 1;
        },
    )
    .expect("fit");
    assert_eq!(stopped.result.termination, TUTTI_TERMINATION_MAX_ITERATIONS);
    assert_eq!(
        (stopped.result.converged, stopped.result.iterations),
        (0, 1)
    );
}
