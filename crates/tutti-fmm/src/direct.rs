//! The direct O(N^2) sums (the references, at the bodies or at separate targets) and the
//! sampled accuracy diagnostic.

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::kernel::{add_source, Field};
use crate::options::{validate_bodies, validate_targets};
use crate::FmmError;

/// Potential (length `targets.len()`) and acceleration of each listed target body, by direct
/// summation over every other body (rayon over targets).
///
/// Convention: `phi_i = -sum_{j != i} m_j / sqrt(r_ij^2 + softening^2)` and
/// `a_i = -sum_{j != i} m_j (x_i - x_j) / (r_ij^2 + softening^2)^(3/2)` (G = 1).
///
/// Errors: the input checks of [`crate::fmm`], a target index `>= N`
/// ([`FmmError::InvalidArgument`] for `targets`), and [`FmmError::CoincidentBodies`] when a
/// target shares its position with another body and `softening` is 0.
pub fn direct_sum(
    positions: &[[f64; 3]],
    masses: &[f64],
    softening: f64,
    targets: &[usize],
) -> Result<(Vec<f64>, Vec<[f64; 3]>), FmmError> {
    validate_bodies(positions, masses)?;
    if !(softening >= 0.0 && softening.is_finite()) {
        return Err(FmmError::invalid(
            "softening",
            "a finite number >= 0",
            softening,
        ));
    }
    if let Some(&bad) = targets.iter().find(|&&t| t >= positions.len()) {
        return Err(FmmError::invalid(
            "targets",
            format!("body indices below N = {}", positions.len()),
            bad,
        ));
    }
    let softening2 = softening * softening;
    let fields: Vec<Result<Field, FmmError>> = targets
        .par_iter()
        .map(|&i| {
            let mut field = Field::default();
            let x = positions[i];
            for (j, (source, &m)) in positions.iter().zip(masses).enumerate() {
                if j == i {
                    continue;
                }
                if softening2 == 0.0 && *source == x {
                    return Err(FmmError::CoincidentBodies {
                        first: i.min(j),
                        second: i.max(j),
                        position: x,
                    });
                }
                add_source(&mut field, &x, source, m, softening2);
            }
            Ok(field)
        })
        .collect();
    let mut potential = Vec::with_capacity(targets.len());
    let mut accel = Vec::with_capacity(targets.len());
    for field in fields {
        let field = field?;
        potential.push(-field.psi);
        accel.push(field.grad);
    }
    Ok((potential, accel))
}

/// [`direct_sum`] on every body.
pub fn direct(
    positions: &[[f64; 3]],
    masses: &[f64],
    softening: f64,
) -> Result<(Vec<f64>, Vec<[f64; 3]>), FmmError> {
    let all: Vec<usize> = (0..positions.len()).collect();
    direct_sum(positions, masses, softening, &all)
}

/// Potential (length `targets.len()`) and acceleration at each target point, by direct
/// summation over the sources (rayon over targets): the reference of
/// [`crate::fmm_at_targets`].
///
/// Convention: `phi(t) = -sum_j m_j / sqrt(|t - x_j|^2 + softening^2)` and
/// `a(t) = -sum_j m_j (t - x_j) / (|t - x_j|^2 + softening^2)^(3/2)` (G = 1), where the sum
/// leaves out every source at exactly the target's position (equal coordinates, -0.0 equal
/// to 0.0). Sources do not act on one another, so coincident sources are no error here.
///
/// Errors: the input checks of [`crate::fmm`] on `sources` (named `positions`) and `masses`,
/// [`FmmError::NonFinite`] for a target coordinate (argument `targets`), and
/// [`FmmError::InvalidArgument`] for a `softening` that is negative or not finite.
pub fn direct_at_targets(
    sources: &[[f64; 3]],
    masses: &[f64],
    targets: &[[f64; 3]],
    softening: f64,
) -> Result<(Vec<f64>, Vec<[f64; 3]>), FmmError> {
    validate_bodies(sources, masses)?;
    validate_targets(targets)?;
    if !(softening >= 0.0 && softening.is_finite()) {
        return Err(FmmError::invalid(
            "softening",
            "a finite number >= 0",
            softening,
        ));
    }
    let softening2 = softening * softening;
    let fields: Vec<Field> = targets
        .par_iter()
        .map(|target| field_at_target(sources, masses, target, softening2))
        .collect();
    Ok(fields.into_iter().map(|f| (-f.psi, f.grad)).unzip())
}

/// The field at `target` of every source not at exactly its position, summed in source
/// order.
pub(crate) fn field_at_target(
    sources: &[[f64; 3]],
    masses: &[f64],
    target: &[f64; 3],
    softening2: f64,
) -> Field {
    let mut field = Field::default();
    for (source, &m) in sources.iter().zip(masses) {
        if source != target {
            add_source(&mut field, target, source, m, softening2);
        }
    }
    field
}

/// `||approx - exact||_2 / ||exact||_2` over rows of any width; 0 when both are zero, and
/// infinite when only `exact` is zero. Lengths must match (the shorter one bounds the sum).
pub fn relative_l2<const W: usize>(approx: &[[f64; W]], exact: &[[f64; W]]) -> f64 {
    let (mut diff, mut norm) = (0.0, 0.0);
    for (a, e) in approx.iter().zip(exact) {
        for w in 0..W {
            diff += (a[w] - e[w]) * (a[w] - e[w]);
            norm += e[w] * e[w];
        }
    }
    if diff == 0.0 {
        0.0
    } else {
        (diff / norm).sqrt()
    }
}

/// Relative L2 errors of an evaluation on a sample of targets, against the direct sum.
#[derive(Clone, Debug, PartialEq)]
pub struct SampledError {
    /// Input indices of the sampled targets, ascending.
    pub targets: Vec<usize>,
    /// Relative L2 error of the accelerations (3-vectors) over the sample.
    pub accel: f64,
    /// Relative L2 error of the potentials over the sample.
    pub potential: f64,
}

/// Measures the relative L2 error of `potential` (N) and `accel` (N, 3) on `samples`
/// targets drawn without replacement (all of them when `samples >= N`), keyed by `seed`
/// only, against [`direct_sum`] with the same `softening`.
pub fn sampled_error(
    positions: &[[f64; 3]],
    masses: &[f64],
    softening: f64,
    potential: &[f64],
    accel: &[[f64; 3]],
    samples: usize,
    seed: u64,
) -> Result<SampledError, FmmError> {
    let n = positions.len();
    if potential.len() != n || accel.len() != n {
        return Err(FmmError::invalid(
            "potential/accel",
            format!("N = {n} rows each"),
            format!("{} and {}", potential.len(), accel.len()),
        ));
    }
    let mut targets = if samples >= n {
        (0..n).collect()
    } else {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        sample(&mut rng, n, samples).into_vec()
    };
    targets.sort_unstable();
    let (exact_potential, exact_accel) = direct_sum(positions, masses, softening, &targets)?;
    let approx_accel: Vec<[f64; 3]> = targets.iter().map(|&i| accel[i]).collect();
    let approx_potential: Vec<[f64; 1]> = targets.iter().map(|&i| [potential[i]]).collect();
    let exact_potential: Vec<[f64; 1]> = exact_potential.into_iter().map(|p| [p]).collect();
    Ok(SampledError {
        accel: relative_l2(&approx_accel, &exact_accel),
        potential: relative_l2(&approx_potential, &exact_potential),
        targets,
    })
}
