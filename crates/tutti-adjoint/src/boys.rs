//! The Boys function F_m(T) = integral_0^1 t^(2m) exp(-T t^2) dt, the radial kernel of every
//! Coulomb integral over Gaussians.
//!
//! Fast path ([`boys`]): below a T that depends on the highest order wanted, F_{m_max}(T) is
//! a Taylor expansion of degree [`TAYLOR_DEGREE`] about the nearest point of a grid of
//! spacing [`GRID_STEP`] (dF_m/dT = -F_{m+1}, so the table holds
//! F_0..F_{MAX_M + TAYLOR_DEGREE + 1} at each grid point), and the lower orders follow by the
//! stable downward recursion F_{m-1} = (2T F_m + exp(-T)) / (2m - 1). From that T on (36.5
//! for m_max = 0, rising to 92.25 for m_max = 24, never above [`ASYMPTOTIC_T`]) the
//! asymptotic form F_m = (2m-1)!! / 2^(m+1) * sqrt(pi / T^(2m+1)) is exact to below 2^-56
//! relative for every m <= m_max (a bound on Gamma(m + 1/2, T) / Gamma(m + 1/2)), and costs
//! no table read: the table (152 KB) outgrows the fastest caches, so its reads are what the
//! function waits on. The grid values come from the slow evaluation [`boys_slow`] (a convergent
//! series of positive terms, or a continued fraction for the upper incomplete gamma
//! function); measured accuracy of the fast path against it: see the tests and docs/adjoint.md.

use std::sync::OnceLock;

/// The largest order m the fast path supports: four shells of l = 6 (g functions raised by
/// two for exponent derivatives).
pub const MAX_M: usize = 24;
/// Spacing of the interpolation grid.
pub const GRID_STEP: f64 = 0.2;
/// Degree of the Taylor expansion about the nearest grid point.
pub const TAYLOR_DEGREE: usize = 12;
/// The asymptotic form is used from this T at the latest (its relative error is below 1e-17
/// for m <= 24); the table's grid ends here.
pub const ASYMPTOTIC_T: f64 = 100.0;

const COLUMNS: usize = MAX_M + TAYLOR_DEGREE + 2;

struct Table {
    values: Vec<f64>,
    /// For each m_max, the T from which the asymptotic form is exact to double precision
    /// for every m <= m_max ([`asymptotic_from`]).
    asymptotic_from: [f64; MAX_M + 1],
}

/// The smallest T (on a grid of 1/4, at most [`ASYMPTOTIC_T`]) from which the asymptotic
/// form's relative error, Gamma(a, T) / Gamma(a) with a = m + 1/2, is below 2^-56 for
/// every order up to `m`: bounded by T^(a-1) e^(-T) / ((1 - (a-1)/T) Gamma(a)) for T > a - 1
/// (and by T^(a-1) e^(-T) / Gamma(a) for a < 1), in logarithms.
fn asymptotic_from(m: usize) -> f64 {
    let limit = -56.0 * std::f64::consts::LN_2;
    let log_error = |order: usize, t: f64| {
        let a = order as f64 + 0.5;
        // ln Gamma(a) for half-integer a: Gamma(a) = sqrt(pi) prod_{j<order} (j + 1/2).
        let log_gamma = 0.5 * std::f64::consts::PI.ln()
            + (0..order).map(|j| (j as f64 + 0.5).ln()).sum::<f64>();
        let tail = if a > 1.0 { 1.0 - (a - 1.0) / t } else { 1.0 };
        if tail <= 0.0 {
            return f64::INFINITY;
        }
        (a - 1.0) * t.ln() - t - tail.ln() - log_gamma
    };
    let mut t = 1.0;
    while t < ASYMPTOTIC_T && (0..=m).any(|order| log_error(order, t) > limit) {
        t += 0.25;
    }
    t.min(ASYMPTOTIC_T)
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let points = (ASYMPTOTIC_T / GRID_STEP).round() as usize + 2;
        let mut values = vec![0.0; points * COLUMNS];
        for (i, row) in values.chunks_mut(COLUMNS).enumerate() {
            let t = i as f64 * GRID_STEP;
            let top = COLUMNS - 1;
            row[top] = boys_slow(top, t);
            let decay = (-t).exp();
            for m in (1..=top).rev() {
                row[m - 1] = (2.0 * t * row[m] + decay) / (2 * m - 1) as f64;
            }
        }
        Table {
            values,
            asymptotic_from: std::array::from_fn(asymptotic_from),
        }
    })
}

/// Writes F_0(T), ..., F_{out.len()-1}(T) into `out`.
///
/// Contract: `t >= 0` and finite, `out.len() <= MAX_M + 1` (panics otherwise: callers are the
/// integral kernels, which never exceed it). Relative accuracy about 1e-15 over the whole
/// range (see the property tests).
pub fn boys(t: f64, out: &mut [f64]) {
    let Some(m_max) = out.len().checked_sub(1) else {
        return;
    };
    assert!(m_max <= MAX_M, "Boys order {m_max} exceeds MAX_M = {MAX_M}");
    debug_assert!(t >= 0.0 && t.is_finite(), "Boys argument {t}");
    let table = table();
    if t >= table.asymptotic_from[m_max] {
        let mut value = 0.5 * (std::f64::consts::PI / t).sqrt();
        let half_inverse = 0.5 / t;
        for (m, slot) in out.iter_mut().enumerate() {
            *slot = value;
            value *= (2 * m + 1) as f64 * half_inverse;
        }
        return;
    }
    // Nearest grid point (t >= 0, so truncating t/h + 1/2 rounds).
    let index = (t * (1.0 / GRID_STEP) + 0.5) as usize;
    let row = &table.values[index * COLUMNS..(index + 1) * COLUMNS];
    let delta = index as f64 * GRID_STEP - t;
    // Horner form of sum_k F_{m+k}(t_i) delta^k / k!  (delta = t_i - t), each step's
    // delta / (k + 1) formed first: the chain of dependent operations then holds no
    // division (the divisions had made this function a sixth of a Fock build's cycles).
    let factors: [f64; TAYLOR_DEGREE] = std::array::from_fn(|k| delta * RECIPROCALS[k + 1]);
    let mut value = row[m_max + TAYLOR_DEGREE];
    for k in (0..TAYLOR_DEGREE).rev() {
        value = row[m_max + k] + value * factors[k];
    }
    out[m_max] = value;
    if m_max > 0 {
        let decay = (-t).exp();
        let two_t = 2.0 * t;
        for m in (1..=m_max).rev() {
            out[m - 1] = (two_t * out[m] + decay) * RECIPROCALS[2 * m - 1];
        }
    }
}

/// 1 / n for n = 0..=2 MAX_M (the first entry unused): the Taylor steps' 1 / (k + 1) and the
/// downward recursion's 1 / (2m - 1), as multiplications.
const RECIPROCALS: [f64; 2 * MAX_M + 1] = {
    let mut out = [0.0; 2 * MAX_M + 1];
    let mut n = 1;
    while n <= 2 * MAX_M {
        out[n] = 1.0 / n as f64;
        n += 1;
    }
    out
};

/// Slow evaluation of F_m(T) for any m and T >= 0: for T < 50 (or T < m + 1.5) the series
/// F_m(T) = exp(-T) sum_k (2T)^k / ((2m+1)(2m+3)...(2m+2k+1)) with compensated summation;
/// above, F_m(T) = Gamma(m+1/2) / (2 T^(m+1/2)) - exp(-T) CF / 2 with CF the continued
/// fraction of the upper incomplete gamma function (modified Lentz). Used to build the grid
/// and as the test reference.
pub fn boys_slow(m: usize, t: f64) -> f64 {
    if t < 50.0 || t < m as f64 + 1.5 {
        boys_series(m, t)
    } else {
        boys_continued_fraction(m, t)
    }
}

/// F_m(T) by its series of positive terms, compensated summation (any T >= 0; slow for
/// large T).
fn boys_series(m: usize, t: f64) -> f64 {
    {
        let mut term = 1.0 / (2 * m + 1) as f64;
        let mut sum = term;
        let mut compensation = 0.0;
        let mut k = 0usize;
        loop {
            k += 1;
            term *= 2.0 * t / (2 * m + 2 * k + 1) as f64;
            // Neumaier summation: all terms are positive, so this only guards the last bits.
            let next = sum + term;
            if sum.abs() >= term.abs() {
                compensation += (sum - next) + term;
            } else {
                compensation += (term - next) + sum;
            }
            sum = next;
            if term < 1e-18 * sum && k as f64 > t {
                break;
            }
        }
        (-t).exp() * (sum + compensation)
    }
}

/// F_m(T) through the upper incomplete gamma function's continued fraction (T > m + 1.5).
fn boys_continued_fraction(m: usize, t: f64) -> f64 {
    let a = m as f64 + 0.5;
    {
        // Gamma(a) = (2m-1)!! sqrt(pi) / 2^m.
        let mut gamma = std::f64::consts::PI.sqrt();
        for j in 0..m {
            gamma *= j as f64 + 0.5;
        }
        // Upper incomplete gamma: Gamma(a, t) = exp(-t) t^a / (t + 1 - a - 1(1-a)/(t + 3 - a - ...)).
        let tiny = 1e-300;
        let mut b = t + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut fraction = d;
        for i in 1..1000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let step = d * c;
            fraction *= step;
            if (step - 1.0).abs() < 1e-17 {
                break;
            }
        }
        gamma / (2.0 * t.powf(a)) - 0.5 * (-t).exp() * fraction
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn relative(a: f64, b: f64) -> f64 {
        (a - b).abs() / b.abs()
    }

    #[test]
    fn known_values() {
        // F_m(0) = 1/(2m+1).
        let mut out = vec![0.0; MAX_M + 1];
        boys(0.0, &mut out);
        for (m, value) in out.iter().enumerate() {
            assert!(relative(*value, 1.0 / (2 * m + 1) as f64) < 1e-15);
        }
        // F_0(T) = sqrt(pi/T) erf(sqrt T) / 2; erf(1) = 0.8427007929497148693412...
        let f0 = 0.5 * std::f64::consts::PI.sqrt() * 0.842_700_792_949_714_9;
        assert!(relative(boys_slow(0, 1.0), f0) < 2e-16);
        boys(1.0, &mut out[..1]);
        assert!(relative(out[0], f0) < 2e-16);
    }

    #[test]
    fn series_and_continued_fraction_agree_where_both_apply() {
        // The two branches of the slow reference are independent evaluations.
        for m in 0..=MAX_M + TAYLOR_DEGREE + 1 {
            for step in 0..40 {
                let t = m as f64 + 8.0 + step as f64 * 2.5;
                let series = boys_series(m, t);
                let fraction = boys_continued_fraction(m, t);
                assert!(
                    relative(series, fraction) < 1e-14,
                    "m={m} t={t}: {series} vs {fraction}"
                );
            }
        }
    }

    /// Where the asymptotic form takes over (the lowest T its bound allows for the orders
    /// wanted), every order it returns matches the slow evaluation: the bound is not too
    /// loose. The T rise with the order and stay on the table's grid.
    #[test]
    fn the_asymptotic_form_is_exact_where_it_takes_over() {
        let from = table().asymptotic_from;
        for (m_max, &t) in from.iter().enumerate() {
            assert!(t > 30.0 && t <= ASYMPTOTIC_T, "m_max {m_max}: {t}");
            if m_max > 0 {
                assert!(
                    t >= from[m_max - 1],
                    "m_max {m_max}: {t} < {}",
                    from[m_max - 1]
                );
            }
            let mut out = vec![0.0; m_max + 1];
            boys(t, &mut out);
            for (m, value) in out.iter().enumerate() {
                let reference = boys_slow(m, t);
                // The form's own error is below 2^-56 here; its m multiplications round by
                // up to m ulps (2.7e-15 at m = 24). A cutoff 10 too low would err by 3e-13.
                assert!(
                    relative(*value, reference) < 4e-15,
                    "m_max {m_max}, m {m}, T {t}: {value} vs {reference}"
                );
            }
        }
    }

    #[test]
    fn dense_scan_against_slow_reference() {
        // Off-grid points (an irrational step) over the whole range, every order.
        let mut worst: f64 = 0.0;
        let mut out = vec![0.0; MAX_M + 1];
        let mut t = 0.0;
        while t < 130.0 {
            boys(t, &mut out);
            for (m, value) in out.iter().enumerate() {
                worst = worst.max(relative(*value, boys_slow(m, t)));
            }
            t += 0.013_725_029;
        }
        println!("Boys fast vs slow: max relative error {worst:.2e}");
        assert!(worst < 1e-14, "{worst:e}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn fast_matches_slow_reference(t in prop_oneof![0.0..1.0f64, 0.0..40.0f64, 0.0..130.0f64, 1e-12..1e-6f64], m_max in 0usize..=MAX_M) {
            let mut out = vec![0.0; m_max + 1];
            boys(t, &mut out);
            for (m, value) in out.iter().enumerate() {
                let reference = boys_slow(m, t);
                prop_assert!(relative(*value, reference) < 1e-14,
                    "m={} t={} fast={} slow={} rel={:e}", m, t, value, reference, relative(*value, reference));
            }
        }
    }
}
