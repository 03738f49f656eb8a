//! Fitting the Brusselator's `A`, `B`, `alpha` to synthetic noisy snapshots
//! (`brusselator::synthetic_experiments`: 4 runs on 8 x 8 with different forcing discs and
//! initial amplitudes, both species at every second point, 4 times, noise 1e-3), the
//! Jacobian from the integrator's forward sensitivities.

use tutti_backend::Resources;
use tutti_fit::brusselator::{
    synthetic_experiments, SyntheticSetup, START_PARAMETERS as START, TRUE_PARAMETERS,
};
use tutti_fit::{fit, FitError, FitOptions, FitReport};

fn fit_on(devices: usize, max_iterations: usize) -> FitReport {
    fit_on_mesh(&SyntheticSetup::default(), devices, 1, max_iterations)
}

/// A fit of `setup`'s experiments on `devices` simulated devices, `model_devices` per
/// experiment.
fn fit_on_mesh(
    setup: &SyntheticSetup,
    devices: usize,
    model_devices: usize,
    max_iterations: usize,
) -> FitReport {
    let experiments = synthetic_experiments(setup).expect("data");
    let mut options = FitOptions::default()
        .with_resources(Resources::cpu(devices))
        .with_model_devices(model_devices)
        .with_max_iterations(max_iterations);
    // The integrator's rtol 1e-6 leaves the cost uncertain in about its 5th digit: stop when
    // steps no longer change it or the parameters at that level (as `tutti fit brusselator`).
    options.cost_tolerance = 1e-5;
    options.step_tolerance = 1e-5;
    fit(&experiments, &START, &options).expect("fit")
}

#[test]
fn the_fit_recovers_a_b_and_alpha_within_their_standard_errors() {
    let report = fit_on(2, 40);
    assert!(report.converged(), "{:?}", report.termination);
    let errors = report.standard_errors().expect("covariance");
    for (k, name) in ["A", "B", "alpha"].iter().enumerate() {
        let z = (report.parameters[k] - TRUE_PARAMETERS[k]) / errors[k];
        // Measured: A 3.40010 +- 8.9e-5, B 0.999955 +- 7.0e-5, alpha 9.67 +- 0.37 (|z| 1.1,
        // 0.64, 0.89). Three standard errors.
        assert!(
            z.abs() <= 3.0,
            "{name}: {} +- {} against {}",
            report.parameters[k],
            errors[k],
            TRUE_PARAMETERS[k]
        );
    }
    // chi^2 per degree of freedom: 1 +- sqrt(2 / 509) = 0.063 for 512 residuals and 3
    // parameters; measured 1.09. Three of its standard deviations.
    let dof = (report.residual_count - 3) as f64;
    let chi2 = 2.0 * report.cost / dof;
    assert!(
        (chi2 - 1.0).abs() <= 3.0 * (2.0 / dof).sqrt(),
        "chi^2/dof {chi2}"
    );
    // alpha is the weakly identified one: diffusion smooths the grid within milliseconds, and
    // only the forcing disc keeps a gradient that depends on it.
    assert!(errors[2] / TRUE_PARAMETERS[2] > 100.0 * errors[0] / TRUE_PARAMETERS[0]);
}

#[test]
fn the_iterates_are_the_same_bits_on_every_data_x_model_mesh() {
    // (data x model) = 1 x 1, 2 x 1, 1 x 2, 2 x 2: the experiments split over the data axis
    // are summed in experiment order, and each Newton matrix split over the model axis is
    // factored with the same bits as on one device.
    // A 6 x 6 grid and 2 experiments keep it quick: the split factorization of a grid this
    // small is all messages (a 1 x 2 mesh took 6x a 1 x 1 one on 8 x 8).
    let setup = SyntheticSetup {
        n: 6,
        experiments: 2,
        ..SyntheticSetup::default()
    };
    let reference = fit_on_mesh(&setup, 1, 1, 3);
    // Three iterations from START already moved the parameters towards the data.
    assert_ne!(reference.parameters, START.to_vec());
    for (devices, model_devices) in [(2, 1), (2, 2), (4, 2)] {
        let report = fit_on_mesh(&setup, devices, model_devices, 3);
        let mesh = format!("{} x {model_devices}", devices / model_devices);
        assert_eq!(report.parameters, reference.parameters, "{mesh}");
        assert_eq!(report.cost.to_bits(), reference.cost.to_bits(), "{mesh}");
        assert_eq!(report.covariance, reference.covariance, "{mesh}");
        assert_eq!(report.iterations, reference.iterations, "{mesh}");
        assert_eq!(
            (report.devices, report.model_devices),
            (devices, model_devices)
        );
    }
}

#[test]
fn a_model_axis_that_does_not_divide_the_devices_is_refused() {
    let experiments = synthetic_experiments(&SyntheticSetup::default()).expect("data");
    for model_devices in [0, 2] {
        let options = FitOptions::default()
            .with_resources(Resources::cpu(3))
            .with_model_devices(model_devices);
        let err = fit(&experiments, &START, &options).unwrap_err();
        assert!(
            matches!(err, FitError::InvalidArgument { .. }) && err.to_string().contains("model"),
            "{err}"
        );
    }
}
