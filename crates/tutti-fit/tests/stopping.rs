//! The stopping rules do not depend on units: scaling every residual by 1e6 (or 2^20), or
//! giving one parameter units 1e-6 (or 2^-20) times as large, changes neither why a fit stops
//! nor when, on a noisy linear model, the reaction-network example, Rosenbrock (zero residual
//! at the minimum) and robust fits. (Fits that end on the step test are checked with scaled
//! residuals only: that test's Euclidean norm mixes the parameters' units.) The gradient
//! test is MINPACK's cosine, whose zero-residual, zero-column and bounded cases are checked
//! too.

use tutti_backend::Resources;
use tutti_fit::example::{synthetic_experiments, START_RATES};
use tutti_fit::{fit, Bounds, Experiment, FitOptions, FitReport, Loss, Termination};

mod common;

use common::Rosenbrock;

/// `inner` seen in other units: residuals times `residual_factor`, and parameter `j`
/// measured in units `unit[j]` times the original ones (the fit's `p'_j` is `p_j / unit[j]`).
struct Units<'a, E> {
    inner: &'a E,
    residual_factor: f64,
    unit: Vec<f64>,
}

impl<E: Experiment> Experiment for Units<'_, E> {
    fn residual_count(&self) -> usize {
        self.inner.residual_count()
    }
    fn evaluate(&self, p: &[f64], r: &mut [f64], j: &mut [f64]) -> Result<(), String> {
        let n = p.len();
        let original: Vec<f64> = p.iter().zip(&self.unit).map(|(p, u)| p * u).collect();
        self.inner.evaluate(&original, r, j)?;
        for (r, row) in r.iter_mut().zip(j.chunks_exact_mut(n)) {
            *r *= self.residual_factor;
            for (entry, u) in row.iter_mut().zip(&self.unit) {
                *entry *= self.residual_factor * u;
            }
        }
        Ok(())
    }
}

/// Points of y = 0.3 - 1.1 x + 0.7 x^2 with fixed "noise": a linear least-squares problem.
struct Quadratic;

impl Experiment for Quadratic {
    fn residual_count(&self) -> usize {
        20
    }
    fn evaluate(&self, c: &[f64], r: &mut [f64], j: &mut [f64]) -> Result<(), String> {
        for i in 0..20 {
            let x = i as f64 * 0.15 - 1.5;
            let y = 0.3 - 1.1 * x + 0.7 * x * x + 0.01 * ((i * 37) % 7) as f64;
            r[i] = c[0] + c[1] * x + c[2] * x * x - y;
            j[i * 3..i * 3 + 3].copy_from_slice(&[1.0, x, x * x]);
        }
        Ok(())
    }
}

/// `y = a exp(-k t) + c` with one gross outlier, residuals weighted by 0.05.
struct Decay;

impl Experiment for Decay {
    fn residual_count(&self) -> usize {
        25
    }
    fn evaluate(&self, p: &[f64], r: &mut [f64], j: &mut [f64]) -> Result<(), String> {
        for i in 0..25 {
            let t = i as f64 * 0.25;
            let wiggle = 0.05 * (((i * 17) % 11) as f64 / 5.0 - 1.0);
            let outlier = if i == 7 { 2.0 } else { 0.0 };
            let y = 5.0 * (-1.3 * t).exp() + 0.5 + wiggle + outlier;
            let e = (-p[1] * t).exp();
            r[i] = (p[0] * e + p[2] - y) / 0.05;
            j[3 * i..3 * i + 3].copy_from_slice(&[e / 0.05, -p[0] * t * e / 0.05, 20.0]);
        }
        Ok(())
    }
}

/// Fits `experiments` seen in the units of `residual_factor` and `unit` from `initial`
/// (in the original units); `options` is given the loss scale in the new residual units.
fn fit_in_units<E: Experiment>(
    experiments: &[E],
    initial: &[f64],
    options: &FitOptions,
    residual_factor: f64,
    unit: &[f64],
) -> FitReport {
    let scaled: Vec<Units<E>> = experiments
        .iter()
        .map(|inner| Units {
            inner,
            residual_factor,
            unit: unit.to_vec(),
        })
        .collect();
    let start: Vec<f64> = initial.iter().zip(unit).map(|(p, u)| p / u).collect();
    let mut options = options.clone();
    options.loss_scale *= residual_factor;
    fit(&scaled, &start, &options).expect("fit")
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The fit of `experiments` in its own units, with its residuals times 1e6 and times 2^20,
/// and (unless it stops on the step, whose norm mixes the parameters' units) with each
/// parameter in units 1e-6 and 2^-20 times as large: the same termination and iteration
/// count each time. The power-of-two scalings are exact in floating point, so they also
/// give the same bits (in the original units): every decision of the solver is unit-free,
/// while `|J^T r|`, the former gradient measure, scales by the factor squared.
fn check_units<E: Experiment>(
    name: &str,
    experiments: &[E],
    initial: &[f64],
    options: &FitOptions,
) -> FitReport {
    let n = initial.len();
    let plain = fit_in_units(experiments, initial, options, 1.0, &vec![1.0; n]);
    eprintln!(
        "{name}: {:?} after {} iterations, cosine {:.1e}, |J^T r| {:.1e}",
        plain.termination, plain.iterations, plain.gradient_cosine, plain.gradient_norm
    );
    let exact = 2.0_f64.powi(20);
    let mut variants = Vec::new();
    for factor in [1e6, exact] {
        variants.push((format!("residuals x {factor:e}"), factor, vec![1.0; n]));
    }
    if plain.termination != Termination::Step {
        for j in 0..n {
            for factor in [1e6, exact] {
                let mut unit = vec![1.0; n];
                unit[j] = 1.0 / factor;
                variants.push((format!("parameter {j} in units / {factor:e}"), 1.0, unit));
            }
        }
    }
    for (label, factor, unit) in variants {
        let other = fit_in_units(experiments, initial, options, factor, &unit);
        eprintln!(
            "  {label}: {:?} after {} iterations, cosine {:.1e}, |J^T r| {:.1e}",
            other.termination, other.iterations, other.gradient_cosine, other.gradient_norm
        );
        assert_eq!(
            (other.termination, other.iterations),
            (plain.termination, plain.iterations),
            "{name}, {label}"
        );
        let back: Vec<f64> = other
            .parameters
            .iter()
            .zip(&unit)
            .map(|(p, u)| p * u)
            .collect();
        if factor == exact || unit.contains(&(1.0 / exact)) {
            assert_eq!(bits(&back), bits(&plain.parameters), "{name}, {label}");
            assert_eq!(
                other.gradient_cosine, plain.gradient_cosine,
                "{name}, {label}"
            );
            if factor == exact {
                assert_eq!(other.gradient_norm, plain.gradient_norm * exact * exact);
            }
        } else {
            for (k, p) in back.iter().enumerate() {
                let want = plain.parameters[k];
                assert!(
                    (p - want).abs() <= 1e-6 * want.abs().max(1e-3),
                    "{name}, {label}: p{k} {p} against {want}"
                );
            }
        }
    }
    plain
}

fn one_device() -> FitOptions {
    FitOptions::default().with_resources(Resources::cpu(1))
}

#[test]
fn a_linear_model_stops_alike_in_any_units() {
    let report = check_units("quadratic", &[Quadratic], &[0.0, 0.0, 0.0], &one_device());
    // A linear problem: the fourth step lands within rounding of the minimum (cosine
    // 5.5e-13), and the cost test, met by the same step, ends the fit; without the cost
    // test the gradient test ends it, at the same point.
    assert_eq!(report.termination, Termination::Cost);
    let mut options = one_device();
    options.cost_tolerance = 0.0;
    let gradient = check_units(
        "quadratic, no cost test",
        &[Quadratic],
        &[0.0, 0.0, 0.0],
        &options,
    );
    assert_eq!(gradient.termination, Termination::Gradient);
    assert!(
        gradient.gradient_cosine <= 1e-10,
        "{}",
        gradient.gradient_cosine
    );
    assert_eq!(gradient.parameters, report.parameters);
}

#[test]
fn the_reaction_network_stops_alike_in_any_units() {
    // At the default cost tolerance (1e-14) the example stops where its cost's rounding
    // (the integrator's, at rtol 1e-10) decides whether a step is accepted, so residuals
    // rounded differently (times 1e6) take another path there; 1e-10 stops it one
    // iteration before that floor (its last step lowers the cost by 2.9e-11 of it).
    let mut options = one_device();
    options.cost_tolerance = 1e-10;
    let experiments = synthetic_experiments(2026).expect("data");
    let report = check_units("reaction network", &experiments, &START_RATES, &options);
    assert!(report.converged(), "{:?}", report.termination);
}

#[test]
fn rosenbrock_stops_alike_in_any_units() {
    // A zero-residual problem: near the minimum r lies in the range of J, so the cosine
    // stays near 1 until r vanishes and the step test stops the fit.
    let report = check_units("rosenbrock", &[Rosenbrock], &[-1.2, 1.0], &one_device());
    assert!(report.converged(), "{:?}", report.termination);
    assert!(report.cost < 1e-20, "{}", report.cost);
}

#[test]
fn a_robust_fit_stops_alike_in_any_units() {
    for loss in [Loss::SoftL1, Loss::Cauchy] {
        let options = one_device().with_loss(loss, 3.0);
        let report = check_units(loss.name(), &[Decay], &[4.0, 1.0, 0.3], &options);
        assert!(report.converged(), "{loss:?}: {:?}", report.termination);
    }
}

/// r = p - 3, exactly zero at the start.
struct AtMinimum;

impl Experiment for AtMinimum {
    fn residual_count(&self) -> usize {
        1
    }
    fn evaluate(&self, p: &[f64], r: &mut [f64], j: &mut [f64]) -> Result<(), String> {
        r[0] = p[0] - 3.0;
        j[0] = 1.0;
        Ok(())
    }
}

/// r = (p0 - 1, 2 (p0 - 1)): the second parameter has a zero column.
struct ZeroColumn;

impl Experiment for ZeroColumn {
    fn residual_count(&self) -> usize {
        2
    }
    fn evaluate(&self, p: &[f64], r: &mut [f64], j: &mut [f64]) -> Result<(), String> {
        r.copy_from_slice(&[p[0] - 1.0 + 0.1, 2.0 * (p[0] - 1.0) - 0.05]);
        j.copy_from_slice(&[1.0, 0.0, 2.0, 0.0]);
        Ok(())
    }
}

#[test]
fn zero_residuals_and_zero_columns_have_a_defined_cosine() {
    // All residuals zero: a minimum, the cosine is 0 and the fit stops at once.
    let report = fit(&[AtMinimum], &[3.0], &one_device()).expect("fit");
    assert_eq!(
        (report.termination, report.iterations),
        (Termination::Gradient, 0)
    );
    assert_eq!(report.gradient_cosine, 0.0);
    // A parameter nothing depends on has a zero column: it is left out of the measure
    // rather than dividing by zero, and the other converges.
    // (It ends on the step at a cosine of 7.4e-10: 3.7e-11 from the minimum, where the
    // cost's rounding rejects every further step; see `FitOptions::gradient_tolerance`.)
    let report = fit(&[ZeroColumn], &[0.0, 5.0], &one_device()).expect("fit");
    assert!(report.converged(), "{:?}", report.termination);
    assert!(
        report.gradient_cosine.is_finite() && report.gradient_cosine <= 1e-8,
        "{}",
        report.gradient_cosine
    );
    assert!(
        (report.parameters[0] - 1.0).abs() < 1e-9,
        "{:?}",
        report.parameters
    );
    assert_eq!(report.parameters[1], 5.0);
}

#[test]
fn the_cosine_counts_the_components_the_bounds_leave_free() {
    // Rosenbrock held at x <= 1/2: the gradient's x component stays -1/2 at the bound, a
    // cosine near 1, yet the fit converges on the free component.
    let bounds = Bounds::new(
        vec![f64::NEG_INFINITY, f64::NEG_INFINITY],
        vec![0.5, f64::INFINITY],
    )
    .expect("bounds");
    let report = fit(
        &[Rosenbrock],
        &[-1.2, 1.0],
        &one_device().with_bounds(bounds),
    )
    .expect("fit");
    assert!(report.converged(), "{:?}", report.termination);
    assert!(report.gradient_cosine < 1e-6, "{}", report.gradient_cosine);
}
