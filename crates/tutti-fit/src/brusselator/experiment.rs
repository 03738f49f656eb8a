//! Fitting the Brusselator's `A`, `B` and `alpha` to noisy snapshots: one
//! [`BrusselatorExperiment`] per run (its own forcing disc and initial amplitude), residuals
//! at a subgrid of points and a few times, the Jacobian from the integrator's forward
//! sensitivities.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

use tutti_group::Comm;

use super::Brusselator;
use crate::bdf::{integrate_sensitivities, integrate_sensitivities_on, BdfOptions};
use crate::Experiment;

/// The parameters the synthetic data are made with: `A`, `B`, `alpha` (the tutorial's).
pub const TRUE_PARAMETERS: [f64; 3] = [3.4, 1.0, 10.0];
/// Where the example fit starts: 3% off in `A`, 5% in `B`, 10% in `alpha`. The model
/// oscillates (`A > 1 + B^2`), so its cost has other minima in the phase of the oscillation
/// further away.
pub const START_PARAMETERS: [f64; 3] = [3.3, 1.05, 9.0];
/// The observation times (the forcing starts at 1.1).
pub const OBSERVATION_TIMES: [f64; 4] = [1.0, 2.0, 3.0, 4.0];

/// The forcing discs' centres the synthetic experiments cycle through.
const DISC_CENTRES: [[f64; 2]; 4] = [[0.3, 0.6], [0.7, 0.3], [0.5, 0.5], [0.25, 0.25]];

/// One run of the Brusselator observed at some unknowns and times.
#[derive(Clone, Debug, PartialEq)]
pub struct BrusselatorExperiment {
    /// The grid, forcing and disc of this run (its `a`, `b`, `alpha` are replaced by the
    /// fitted parameters at each evaluation).
    pub model: Brusselator,
    /// The initial state (`2 n^2` values, `(u, v)` per point).
    pub initial: Vec<f64>,
    /// The observation times (increasing, after 0).
    pub times: Vec<f64>,
    /// The observed unknowns (indices into the state).
    pub observed: Vec<usize>,
    /// The data: `data[t * observed.len() + o]` is unknown `observed[o]` at `times[t]`.
    pub data: Vec<f64>,
    /// The noise's standard deviation (residuals are divided by it).
    pub sigma: f64,
    /// The integrator's tolerances.
    pub options: BdfOptions,
}

impl BrusselatorExperiment {
    /// The observed unknowns at the observation times and their sensitivities to `A`, `B`,
    /// `alpha`: `(values[t * m + o], sensitivities[(t * m + o) * 3 + k])`, `m` observed.
    pub fn simulate(&self, parameters: &[f64]) -> Result<(Vec<f64>, Vec<f64>), String> {
        self.simulate_with(None, parameters)
    }

    /// [`BrusselatorExperiment::simulate`] on every rank of a model group together, each
    /// sparse factorization split among its ranks: the same bits as on one rank.
    pub fn simulate_on(
        &self,
        model: &Comm<'_>,
        parameters: &[f64],
    ) -> Result<(Vec<f64>, Vec<f64>), String> {
        self.simulate_with(Some(model), parameters)
    }

    fn simulate_with(
        &self,
        group: Option<&Comm<'_>>,
        parameters: &[f64],
    ) -> Result<(Vec<f64>, Vec<f64>), String> {
        let &[a, b, alpha] = parameters else {
            return Err(format!(
                "the Brusselator has 3 parameters (A, B, alpha), not {}",
                parameters.len()
            ));
        };
        let mut model = self.model.clone();
        (model.a, model.b, model.alpha) = (a, b, alpha);
        let n = self.initial.len();
        let s0 = vec![0.0; 3 * n];
        let (y0, times, options) = (&self.initial, &self.times, &self.options);
        let solution = match group {
            Some(group) => integrate_sensitivities_on(group, &model, 0.0, y0, &s0, times, options),
            None => integrate_sensitivities(&model, 0.0, y0, &s0, times, options),
        }
        .map_err(|err| format!("A = {a}, B = {b}, alpha = {alpha}: {err}"))?;
        let m = self.observed.len();
        let mut values = Vec::with_capacity(self.times.len() * m);
        let mut sensitivities = Vec::with_capacity(self.times.len() * m * 3);
        for (y, s) in solution.y.iter().zip(&solution.sensitivities) {
            for &unknown in &self.observed {
                values.push(y[unknown]);
                sensitivities.extend((0..3).map(|k| s[k * n + unknown]));
            }
        }
        Ok((values, sensitivities))
    }
}

impl Experiment for BrusselatorExperiment {
    fn residual_count(&self) -> usize {
        self.data.len()
    }

    fn evaluate(
        &self,
        parameters: &[f64],
        residuals: &mut [f64],
        jacobian: &mut [f64],
    ) -> Result<(), String> {
        let simulated = self.simulate(parameters)?;
        self.fill(simulated, residuals, jacobian);
        Ok(())
    }

    fn evaluate_on(
        &self,
        model: &Comm<'_>,
        parameters: &[f64],
        residuals: &mut [f64],
        jacobian: &mut [f64],
    ) -> Result<(), String> {
        let simulated = self.simulate_on(model, parameters)?;
        self.fill(simulated, residuals, jacobian);
        Ok(())
    }

    fn cost_estimate(&self) -> Option<f64> {
        // Every experiment integrates the same grid over the same times.
        Some(1.0)
    }
}

impl BrusselatorExperiment {
    /// The weighted residuals and Jacobian from simulated values and sensitivities.
    fn fill(
        &self,
        (values, sensitivities): (Vec<f64>, Vec<f64>),
        residuals: &mut [f64],
        jacobian: &mut [f64],
    ) {
        for (row, (value, datum)) in values.iter().zip(&self.data).enumerate() {
            residuals[row] = (value - datum) / self.sigma;
        }
        for (entry, sensitivity) in jacobian.iter_mut().zip(&sensitivities) {
            *entry = sensitivity / self.sigma;
        }
    }
}

/// What [`synthetic_experiments`] makes.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticSetup {
    /// Points per axis of the grid.
    pub n: usize,
    /// How many experiments.
    pub experiments: usize,
    /// Every `stride`-th point along each axis is observed (both species).
    pub stride: usize,
    /// The noise's standard deviation.
    pub sigma: f64,
    /// The seed of the noise.
    pub seed: u64,
    /// The integrator's tolerances, for the data and the fit.
    pub options: BdfOptions,
}

impl Default for SyntheticSetup {
    /// An 8 x 8 grid, 4 experiments, every second point, noise 1e-3, rtol 1e-6.
    fn default() -> Self {
        Self {
            n: 8,
            experiments: 4,
            stride: 2,
            sigma: 1e-3,
            seed: 2026,
            // A trial step far from the data can make the system hard to integrate: such
            // an evaluation fails within 20000 steps and the fit rejects the step.
            options: BdfOptions {
                rtol: 1e-6,
                atol: 1e-9,
                max_steps: 20_000,
                ..BdfOptions::default()
            },
        }
    }
}

/// Experiments made from [`TRUE_PARAMETERS`] with Gaussian noise: experiment `e` has the
/// forcing disc centred at the `e`-th of four centres (cycling) and the initial state
/// scaled by `1 + 0.1 e`, and draws its noise from the stream `(seed, e)`, so the data do
/// not depend on how the experiments are split.
pub fn synthetic_experiments(setup: &SyntheticSetup) -> Result<Vec<BrusselatorExperiment>, String> {
    if setup.experiments == 0 || setup.stride == 0 {
        return Err("at least one experiment and a stride of at least 1 are needed".into());
    }
    let noise = Normal::new(0.0, setup.sigma).map_err(|err| format!("sigma: {err}"))?;
    let base = Brusselator::new(setup.n).map_err(|err| err.to_string())?;
    let n = setup.n;
    let observed: Vec<usize> = (0..n)
        .step_by(setup.stride)
        .flat_map(|j| (0..n).step_by(setup.stride).map(move |i| i + n * j))
        .flat_map(|point| [2 * point, 2 * point + 1])
        .collect();
    (0..setup.experiments)
        .map(|e| {
            let mut model = base.clone();
            model.disc.0 = DISC_CENTRES[e % DISC_CENTRES.len()];
            let scale = 1.0 + 0.1 * e as f64;
            let initial = base.initial_state().iter().map(|v| v * scale).collect();
            let mut experiment = BrusselatorExperiment {
                model,
                initial,
                times: OBSERVATION_TIMES.to_vec(),
                observed: observed.clone(),
                data: Vec::new(),
                sigma: setup.sigma,
                options: setup.options,
            };
            let (values, _) = experiment.simulate(&TRUE_PARAMETERS)?;
            let mut rng = ChaCha8Rng::seed_from_u64(setup.seed);
            rng.set_stream(e as u64);
            experiment.data = values.iter().map(|v| v + noise.sample(&mut rng)).collect();
            Ok(experiment)
        })
        .collect()
}
