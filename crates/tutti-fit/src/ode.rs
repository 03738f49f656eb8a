//! An adaptive Runge–Kutta integrator (Dormand–Prince 5(4)) for the example model.

/// Tolerances and limits of [`integrate`].
#[derive(Clone, Copy, Debug)]
pub struct OdeOptions {
    /// Relative tolerance per component.
    pub rtol: f64,
    /// Absolute tolerance per component.
    pub atol: f64,
    /// Most steps (accepted and rejected) per call.
    pub max_steps: usize,
}

impl Default for OdeOptions {
    fn default() -> Self {
        Self {
            rtol: 1e-10,
            atol: 1e-12,
            max_steps: 200_000,
        }
    }
}

// Dormand–Prince 5(4) tableau.
const C: [f64; 7] = [0.0, 1.0 / 5.0, 3.0 / 10.0, 4.0 / 5.0, 8.0 / 9.0, 1.0, 1.0];
const A: [[f64; 6]; 7] = [
    [0.0; 6],
    [1.0 / 5.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [3.0 / 40.0, 9.0 / 40.0, 0.0, 0.0, 0.0, 0.0],
    [44.0 / 45.0, -56.0 / 15.0, 32.0 / 9.0, 0.0, 0.0, 0.0],
    [
        19372.0 / 6561.0,
        -25360.0 / 2187.0,
        64448.0 / 6561.0,
        -212.0 / 729.0,
        0.0,
        0.0,
    ],
    [
        9017.0 / 3168.0,
        -355.0 / 33.0,
        46732.0 / 5247.0,
        49.0 / 176.0,
        -5103.0 / 18656.0,
        0.0,
    ],
    [
        35.0 / 384.0,
        0.0,
        500.0 / 1113.0,
        125.0 / 192.0,
        -2187.0 / 6784.0,
        11.0 / 84.0,
    ],
];
/// Fifth-order weights (equal to the last row of `A`: first same as last).
const B5: [f64; 7] = [
    35.0 / 384.0,
    0.0,
    500.0 / 1113.0,
    125.0 / 192.0,
    -2187.0 / 6784.0,
    11.0 / 84.0,
    0.0,
];
/// Fourth-order weights, for the error estimate.
const B4: [f64; 7] = [
    5179.0 / 57600.0,
    0.0,
    7571.0 / 16695.0,
    393.0 / 640.0,
    -92097.0 / 339200.0,
    187.0 / 2100.0,
    1.0 / 40.0,
];

/// Integrates `dy/dt = f(t, y)` from `t0` with `y0`, returning `y` at each of `times`
/// (increasing, all `>= t0`), landing on each exactly.
///
/// Errors: times out of order, a non-finite state, or more than `max_steps` steps.
pub fn integrate(
    f: impl Fn(f64, &[f64], &mut [f64]),
    t0: f64,
    y0: &[f64],
    times: &[f64],
    options: &OdeOptions,
) -> Result<Vec<Vec<f64>>, String> {
    let n = y0.len();
    let mut t = t0;
    let mut y = y0.to_vec();
    let mut k = vec![vec![0.0; n]; 7];
    let mut stage = vec![0.0; n];
    let mut y5 = vec![0.0; n];
    let mut out = Vec::with_capacity(times.len());
    let span = times.last().map_or(0.0, |&last| last - t0);
    let mut h = (span.abs() * 1e-3).max(1e-6);
    let mut steps = 0;
    f(t, &y, &mut k[0]);
    for &target in times {
        if target < t {
            return Err(format!(
                "output time {target} is before the current time {t}"
            ));
        }
        while t < target {
            steps += 1;
            if steps > options.max_steps {
                return Err(format!(
                    "more than {} steps before t = {target} (stiff or diverging)",
                    options.max_steps
                ));
            }
            let last_step = t + h >= target;
            let step = if last_step { target - t } else { h };
            for s in 1..7 {
                for i in 0..n {
                    let increment: f64 = (0..s).map(|j| A[s][j] * k[j][i]).sum();
                    stage[i] = y[i] + step * increment;
                }
                f(t + C[s] * step, &stage, &mut k[s]);
            }
            let mut error = 0.0_f64;
            for i in 0..n {
                y5[i] = y[i] + step * (0..7).map(|j| B5[j] * k[j][i]).sum::<f64>();
                let y4 = y[i] + step * (0..7).map(|j| B4[j] * k[j][i]).sum::<f64>();
                let scale = options.atol + options.rtol * y[i].abs().max(y5[i].abs());
                error = error.max(((y5[i] - y4) / scale).abs());
            }
            if !error.is_finite() {
                return Err(format!("the state became non-finite near t = {t}"));
            }
            if error <= 1.0 {
                t = if last_step { target } else { t + step };
                y.copy_from_slice(&y5);
                // First same as last: the seventh stage is f at the new point.
                let (first, rest) = k.split_at_mut(6);
                first[0].copy_from_slice(&rest[0]);
            }
            let factor = if error == 0.0 {
                5.0
            } else {
                (0.9 * error.powf(-0.2)).clamp(0.2, 5.0)
            };
            if !(last_step && error <= 1.0) {
                h = step * factor;
            }
        }
        out.push(y.clone());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_decay_and_a_harmonic_oscillator_are_exact_to_tolerance() {
        let decay = integrate(
            |_, y, dy| dy[0] = -2.0 * y[0],
            0.0,
            &[1.0],
            &[0.5, 1.0, 3.0],
            &OdeOptions::default(),
        )
        .unwrap();
        for (y, t) in decay.iter().zip([0.5, 1.0, 3.0]) {
            let exact = (-2.0_f64 * t).exp();
            assert!(
                (y[0] - exact).abs() < 1e-10 * exact.max(1e-2),
                "{} vs {exact}",
                y[0]
            );
        }
        let oscillator = integrate(
            |_, y, dy| {
                dy[0] = y[1];
                dy[1] = -y[0];
            },
            0.0,
            &[1.0, 0.0],
            &[std::f64::consts::PI, 10.0],
            &OdeOptions::default(),
        )
        .unwrap();
        assert!((oscillator[0][0] + 1.0).abs() < 1e-9 && oscillator[0][1].abs() < 1e-9);
        assert!((oscillator[1][0] - 10.0_f64.cos()).abs() < 1e-9);
    }

    #[test]
    fn times_out_of_order_are_an_error() {
        let err = integrate(
            |_, _, dy| dy[0] = 1.0,
            0.0,
            &[0.0],
            &[2.0, 1.0],
            &OdeOptions::default(),
        )
        .unwrap_err();
        assert!(err.contains("before"), "{err}");
    }
}
