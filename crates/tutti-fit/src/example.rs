//! The example model: a small reaction network fitted to six synthetic experiments.
//!
//! Species A, B, C, D react as `A + B -> C` (rate k1), `C -> A + B` (k2), `C -> D` (k3),
//! mass-action kinetics. An experiment starts from its own `(A0, B0)` with `C0 = D0 = 0`
//! and observes A, C and D at eight times, with Gaussian noise of standard deviation
//! `sigma`. Its Jacobian comes from forward sensitivities `S = dy/dk`, integrated with the
//! state: `dS/dt = (df/dy) S + df/dk`.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use crate::ode::{integrate, OdeOptions};
use crate::Experiment;

/// The rate constants the synthetic data are made with: k1, k2, k3.
pub const TRUE_RATES: [f64; 3] = [2.0, 0.5, 0.3];
/// Where the example fit starts.
pub const START_RATES: [f64; 3] = [1.0, 1.0, 1.0];
/// The observation times.
pub const TIMES: [f64; 8] = [0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
/// The species observed: indices into (A, B, C, D).
pub const OBSERVED: [usize; 3] = [0, 2, 3];
/// The six experiments' initial (A0, B0).
pub const INITIAL_CONDITIONS: [[f64; 2]; 6] = [
    [1.0, 0.5],
    [1.0, 1.0],
    [0.5, 1.0],
    [2.0, 1.0],
    [1.0, 2.0],
    [1.5, 1.5],
];
/// The noise's standard deviation.
pub const SIGMA: f64 = 0.002;

const SPECIES: usize = 4;
const RATES: usize = 3;

/// One experiment of the example: initial state, observations, noise level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReactionExperiment {
    /// Initial concentrations of A, B, C, D.
    pub initial: [f64; SPECIES],
    /// Observation times (increasing, > 0).
    pub times: Vec<f64>,
    /// Observed A, C, D at each time: `observed[t * 3 + s]`.
    pub observed: Vec<f64>,
    /// The noise's standard deviation (residuals are divided by it).
    pub sigma: f64,
    /// A relative cost for balancing (e.g. larger for stiffer experiments); `None` to
    /// balance by measured time.
    pub cost: Option<f64>,
}

/// The right-hand side of state and sensitivities, `z = (y, S)` with `S` row-major 4 x 3.
fn rhs(rates: &[f64], z: &[f64], dz: &mut [f64]) {
    let (k1, k2, k3) = (rates[0], rates[1], rates[2]);
    let (a, b, c) = (z[0], z[1], z[2]);
    let (r1, r2, r3) = (k1 * a * b, k2 * c, k3 * c);
    dz[0] = -r1 + r2;
    dz[1] = -r1 + r2;
    dz[2] = r1 - r2 - r3;
    dz[3] = r3;
    // df/dy (4 x 4) and df/dk (4 x 3).
    let dfdy = [
        [-k1 * b, -k1 * a, k2, 0.0],
        [-k1 * b, -k1 * a, k2, 0.0],
        [k1 * b, k1 * a, -k2 - k3, 0.0],
        [0.0, 0.0, k3, 0.0],
    ];
    let dfdk = [
        [-a * b, c, 0.0],
        [-a * b, c, 0.0],
        [a * b, -c, -c],
        [0.0, 0.0, c],
    ];
    let s = &z[SPECIES..];
    for i in 0..SPECIES {
        for j in 0..RATES {
            let coupling: f64 = (0..SPECIES).map(|l| dfdy[i][l] * s[l * RATES + j]).sum();
            dz[SPECIES + i * RATES + j] = coupling + dfdk[i][j];
        }
    }
}

impl ReactionExperiment {
    /// The model's observed species and their sensitivities at the observation times:
    /// `(values[t][s], sensitivities[t][s][k])`.
    #[allow(clippy::type_complexity)]
    pub fn simulate(&self, rates: &[f64]) -> Result<(Vec<Vec<f64>>, Vec<Vec<Vec<f64>>>), String> {
        if rates.len() != RATES {
            return Err(format!(
                "expected {RATES} rate constants, got {}",
                rates.len()
            ));
        }
        let mut z0 = vec![0.0; SPECIES + SPECIES * RATES];
        z0[..SPECIES].copy_from_slice(&self.initial);
        let states = integrate(
            |_, z, dz| rhs(rates, z, dz),
            0.0,
            &z0,
            &self.times,
            &OdeOptions::default(),
        )?;
        let values = states
            .iter()
            .map(|z| OBSERVED.iter().map(|&s| z[s]).collect())
            .collect();
        let sensitivities = states
            .iter()
            .map(|z| {
                OBSERVED
                    .iter()
                    .map(|&s| (0..RATES).map(|k| z[SPECIES + s * RATES + k]).collect())
                    .collect()
            })
            .collect();
        Ok((values, sensitivities))
    }
}

impl Experiment for ReactionExperiment {
    fn residual_count(&self) -> usize {
        self.times.len() * OBSERVED.len()
    }

    fn evaluate(
        &self,
        rates: &[f64],
        residuals: &mut [f64],
        jacobian: &mut [f64],
    ) -> Result<(), String> {
        let (values, sensitivities) = self.simulate(rates)?;
        let mut row = 0;
        for (t, observed) in self.observed.chunks_exact(OBSERVED.len()).enumerate() {
            for s in 0..OBSERVED.len() {
                residuals[row] = (values[t][s] - observed[s]) / self.sigma;
                for k in 0..RATES {
                    jacobian[row * RATES + k] = sensitivities[t][s][k] / self.sigma;
                }
                row += 1;
            }
        }
        Ok(())
    }

    fn cost_estimate(&self) -> Option<f64> {
        self.cost
    }
}

/// The six example experiments with noise drawn from `seed`: experiment `e` draws from its
/// own stream `(seed, e)`, so the data do not depend on how experiments are split.
pub fn synthetic_experiments(seed: u64) -> Result<Vec<ReactionExperiment>, String> {
    let noise = Normal::new(0.0, SIGMA).map_err(|e| e.to_string())?;
    INITIAL_CONDITIONS
        .iter()
        .enumerate()
        .map(|(e, &[a0, b0])| {
            let mut experiment = ReactionExperiment {
                initial: [a0, b0, 0.0, 0.0],
                times: TIMES.to_vec(),
                observed: Vec::new(),
                sigma: SIGMA,
                cost: None,
            };
            let (values, _) = experiment.simulate(&TRUE_RATES)?;
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(e as u64);
            experiment.observed = values
                .iter()
                .flatten()
                .map(|v| v + noise.sample(&mut rng))
                .collect();
            Ok(experiment)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sensitivities agree with central finite differences of the state.
    #[test]
    fn sensitivities_match_finite_differences() {
        let experiment = synthetic_experiments(1).unwrap().remove(3);
        let rates = [1.7, 0.6, 0.25];
        let (_, sensitivities) = experiment.simulate(&rates).unwrap();
        for k in 0..RATES {
            let h = 1e-5 * rates[k];
            let mut up = rates;
            up[k] += h;
            let mut down = rates;
            down[k] -= h;
            let (plus, _) = experiment.simulate(&up).unwrap();
            let (minus, _) = experiment.simulate(&down).unwrap();
            for t in 0..TIMES.len() {
                for s in 0..OBSERVED.len() {
                    let fd = (plus[t][s] - minus[t][s]) / (2.0 * h);
                    let analytic = sensitivities[t][s][k];
                    // Central differences: O(h^2) ~ 1e-10 truncation plus ~1e-10/h rounding.
                    assert!(
                        (fd - analytic).abs() < 1e-6 * (1.0 + analytic.abs()),
                        "t{t} s{s} k{k}: {fd} vs {analytic}"
                    );
                }
            }
        }
    }

    #[test]
    fn mass_is_conserved() {
        let experiment = synthetic_experiments(1).unwrap().remove(0);
        let (values, _) = experiment.simulate(&TRUE_RATES).unwrap();
        // A + C + D is conserved (each C holds one A; D comes from C).
        for v in &values {
            assert!((v[0] + v[1] + v[2] - 1.0).abs() < 1e-9, "{v:?}");
        }
    }
}

/// A residual-bootstrap replicate of `experiments`: each experiment's observations are
/// replaced by the fitted model's values plus residuals of the same experiment drawn with
/// replacement, from the stream `(seed, experiment)`. Refitting replicates gives the
/// sampling distribution of the fitted rates.
pub fn bootstrap_replicate(
    experiments: &[ReactionExperiment],
    fitted: &[f64],
    seed: u64,
) -> Result<Vec<ReactionExperiment>, String> {
    use rand::Rng;
    experiments
        .iter()
        .enumerate()
        .map(|(e, experiment)| {
            let (values, _) = experiment.simulate(fitted)?;
            let model: Vec<f64> = values.into_iter().flatten().collect();
            let residuals: Vec<f64> = experiment
                .observed
                .iter()
                .zip(&model)
                .map(|(observed, value)| observed - value)
                .collect();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(e as u64);
            let mut replicate = experiment.clone();
            replicate.observed = model
                .iter()
                .map(|value| value + residuals[rng.random_range(0..residuals.len())])
                .collect();
            Ok(replicate)
        })
        .collect()
}

/// The `q`-quantile (0..=1) of `values` by linear interpolation between order statistics;
/// `None` for no values.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let position = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (low, high) = (position.floor() as usize, position.ceil() as usize);
    let weight = position - low as f64;
    Some(sorted[low] * (1.0 - weight) + sorted[high] * weight)
}

#[cfg(test)]
mod bootstrap_tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_between_order_statistics() {
        let values = [4.0, 1.0, 3.0, 2.0, 5.0];
        assert_eq!(quantile(&values, 0.0), Some(1.0));
        assert_eq!(quantile(&values, 0.5), Some(3.0));
        assert_eq!(quantile(&values, 0.125), Some(1.5));
        assert_eq!(quantile(&values, 1.0), Some(5.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn a_replicate_reuses_the_residuals_of_its_own_experiment() {
        let experiments = synthetic_experiments(3).unwrap();
        let replicate = bootstrap_replicate(&experiments, &TRUE_RATES, 11).unwrap();
        for (original, copy) in experiments.iter().zip(&replicate) {
            let (values, _) = original.simulate(&TRUE_RATES).unwrap();
            let model: Vec<f64> = values.into_iter().flatten().collect();
            let residuals: Vec<f64> = original
                .observed
                .iter()
                .zip(&model)
                .map(|(o, m)| o - m)
                .collect();
            for (observed, value) in copy.observed.iter().zip(&model) {
                let drawn = observed - value;
                assert!(
                    residuals.iter().any(|r| (r - drawn).abs() < 1e-15),
                    "{drawn} is not a residual"
                );
            }
        }
        // Deterministic per seed, different across seeds.
        assert_eq!(
            replicate,
            bootstrap_replicate(&experiments, &TRUE_RATES, 11).unwrap()
        );
        assert_ne!(
            replicate,
            bootstrap_replicate(&experiments, &TRUE_RATES, 12).unwrap()
        );
    }
}
