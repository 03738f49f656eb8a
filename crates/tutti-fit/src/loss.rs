//! Robust losses: the cost of each residual as scipy's `least_squares` defines it, and the
//! rescaling of residuals and Jacobian rows that lets a Gauss–Newton solver minimize it.
//!
//! With `C` the scale (scipy's `f_scale`) and `z = (r / C)^2`, residual `r` costs
//! `0.5 C^2 rho(z)`. Its gradient is `rho'(z) r J_row` and its Gauss–Newton curvature (with
//! Triggs' second-order correction) `(rho'(z) + 2 rho''(z) z) J_row^T J_row`; scaling the
//! residual to `rho' r / s` and the row to `s J_row`, `s = sqrt(rho' + 2 rho'' z)` (at least
//! `sqrt(eps)`), gives exactly these as the plain least-squares gradient `J^T r` and
//! curvature `J^T J` of the scaled problem, which the solver then treats as any other.

use crate::FitError;

/// The loss `rho(z)` of a residual, `z = (r / C)^2` with `C` the scale
/// ([`crate::FitOptions::loss_scale`]); the residual costs `0.5 C^2 rho(z)`. The names and
/// formulas are those of scipy's `least_squares(loss=...)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Loss {
    /// `rho(z) = z`: ordinary least squares; the scale has no effect (the default).
    #[default]
    Linear,
    /// `rho(z) = z` for `z <= 1`, `2 sqrt(z) - 1` beyond: quadratic within the scale,
    /// linear outside it.
    Huber,
    /// `rho(z) = 2 (sqrt(1 + z) - 1)`: a smooth approximation of the absolute value (the
    /// pseudo-Huber loss).
    SoftL1,
    /// `rho(z) = ln(1 + z)`: weakens outliers severely; the cost is no longer convex.
    Cauchy,
    /// `rho(z) = arctan(z)`: bounds any residual's cost by `0.5 C^2 pi / 2`.
    Arctan,
}

impl Loss {
    /// Every loss, in declaration order.
    pub const ALL: [Loss; 5] = [
        Loss::Linear,
        Loss::Huber,
        Loss::SoftL1,
        Loss::Cauchy,
        Loss::Arctan,
    ];

    /// The loss's name as scipy spells it: `linear`, `huber`, `soft_l1`, `cauchy`, `arctan`.
    pub fn name(self) -> &'static str {
        match self {
            Loss::Linear => "linear",
            Loss::Huber => "huber",
            Loss::SoftL1 => "soft_l1",
            Loss::Cauchy => "cauchy",
            Loss::Arctan => "arctan",
        }
    }

    /// The loss named `name` (see [`Loss::name`]), `None` for another name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|loss| loss.name() == name)
    }

    /// `(rho(z), rho'(z), rho''(z))` for `z >= 0`, the scale not applied.
    pub fn rho(self, z: f64) -> [f64; 3] {
        match self {
            Loss::Linear => [z, 1.0, 0.0],
            Loss::Huber if z <= 1.0 => [z, 1.0, 0.0],
            Loss::Huber => {
                let root = z.sqrt();
                [2.0 * root - 1.0, 1.0 / root, -0.5 / (z * root)]
            }
            Loss::SoftL1 => {
                let t = 1.0 + z;
                let root = t.sqrt();
                [2.0 * (root - 1.0), 1.0 / root, -0.5 / (t * root)]
            }
            Loss::Cauchy => {
                let t = 1.0 + z;
                [z.ln_1p(), 1.0 / t, -1.0 / (t * t)]
            }
            Loss::Arctan => {
                let t = 1.0 + z * z;
                [z.atan(), 1.0 / t, -2.0 * z / (t * t)]
            }
        }
    }
}

/// Refuses a scale that is not a positive finite number.
pub(crate) fn check_scale(scale: f64) -> Result<(), FitError> {
    if scale.is_finite() && scale > 0.0 {
        Ok(())
    } else {
        Err(FitError::invalid(
            "loss_scale",
            format!("{scale}, expected a positive finite number (the residuals' soft margin)"),
        ))
    }
}

/// One experiment's cost under `loss` with scale `scale`, its residuals (`m`) and row-major
/// Jacobian (`m x n`) rescaled in place so that the plain least-squares gradient and
/// curvature of the rescaled ones are the robust cost's (see the module's doc). Under
/// [`Loss::Linear`] nothing is rescaled and the cost is `0.5 |r|^2`.
pub(crate) fn apply(
    loss: Loss,
    scale: f64,
    residuals: &mut [f64],
    jacobian: &mut [f64],
    n: usize,
) -> f64 {
    if loss == Loss::Linear {
        return 0.5 * residuals.iter().map(|r| r * r).sum::<f64>();
    }
    let scale_squared = scale * scale;
    let mut rho_sum = 0.0;
    for (r, row) in residuals
        .iter_mut()
        .zip(jacobian.chunks_exact_mut(n.max(1)))
    {
        let z = (*r / scale) * (*r / scale);
        let [rho, first, second] = loss.rho(z);
        rho_sum += rho;
        // rho'' of the scaled loss C^2 rho(r^2 / C^2) in r^2 is rho''(z) / C^2, so the
        // correction 2 rho'' r^2 is 2 rho''(z) z. At most eps it is clamped (as scipy does),
        // which keeps the curvature positive where Huber's and the others' vanishes.
        let row_scale = (first + 2.0 * second * z).max(f64::EPSILON).sqrt();
        *r *= first / row_scale;
        for entry in row.iter_mut() {
            *entry *= row_scale;
        }
    }
    0.5 * scale_squared * rho_sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivatives_match_central_differences() {
        for loss in Loss::ALL {
            for z in [0.01, 0.3, 0.9, 1.7, 4.0, 30.0] {
                let h = 1e-6 * z;
                let [rho, first, second] = loss.rho(z);
                let [below, first_below, _] = loss.rho(z - h);
                let [above, first_above, _] = loss.rho(z + h);
                let d1 = (above - below) / (2.0 * h);
                let d2 = (first_above - first_below) / (2.0 * h);
                assert!(rho >= 0.0);
                assert!(
                    (d1 - first).abs() <= 1e-7 * first.abs().max(1e-3),
                    "{loss:?} {z}"
                );
                assert!(
                    (d2 - second).abs() <= 1e-6 * second.abs().max(1e-3),
                    "{loss:?} {z}"
                );
            }
            assert_eq!(Loss::from_name(loss.name()), Some(loss));
        }
        assert_eq!(Loss::from_name("l2"), None);
    }

    #[test]
    fn the_rescaled_problem_has_the_robust_gradient() {
        // One residual r = 3 with row (2, -1), scale 1.5: the robust gradient is
        // rho'(z) r J_row with z = 4.
        for loss in Loss::ALL {
            let (mut r, mut j) = ([3.0], [2.0, -1.0]);
            let cost = apply(loss, 1.5, &mut r, &mut j, 2);
            let [rho, first, _] = loss.rho(4.0);
            assert!((cost - 0.5 * 2.25 * rho).abs() < 1e-15, "{loss:?}");
            for (k, want) in [2.0, -1.0].iter().enumerate() {
                let got = j[k] * r[0];
                assert!((got - first * 3.0 * want).abs() < 1e-12, "{loss:?}");
            }
        }
        assert!(check_scale(0.0).is_err() && check_scale(f64::NAN).is_err());
        assert!(check_scale(f64::INFINITY).is_err() && check_scale(2.0).is_ok());
    }
}
