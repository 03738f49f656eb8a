//! McMurchie–Davidson building blocks: Hermite expansion coefficients E and the Hermite
//! Coulomb integrals R (Helgaker, Jorgensen, Olsen, ch. 9).

use std::sync::OnceLock;

use crate::boys::boys;

/// 1-D Hermite expansion coefficients of the product of two Cartesian Gaussians,
/// x_A^i exp(-a x_A^2) x_B^j exp(-b x_B^2) = `sum_t E[i][j][t] Lambda_t(x_P; p)`, for
/// i <= `max_i`, j <= `max_j`, t <= i + j, stored at `(i * (max_j + 1) + j) * stride + t`
/// with `stride = max_i + max_j + 1`. `separation` = A_x - B_x (bohr). `E[0][0][0]` carries the
/// Gaussian product factor exp(-a b / p * separation^2).
pub fn expansion(max_i: usize, max_j: usize, a: f64, b: f64, separation: f64, out: &mut Vec<f64>) {
    let stride = max_i + max_j + 1;
    out.clear();
    out.resize((max_i + 1) * (max_j + 1) * stride, 0.0);
    let p = a + b;
    let half_inverse_p = 0.5 / p;
    let pa = -b / p * separation; // P - A
    let pb = a / p * separation; // P - B
    let at = |i: usize, j: usize| (i * (max_j + 1) + j) * stride;
    out[0] = (-a * b / p * separation * separation).exp();
    // Raise i along j = 0, then raise j for each i.
    for i in 0..max_i {
        let (from, to) = (at(i, 0), at(i + 1, 0));
        for t in 0..=(i + 1) {
            let mut value = 0.0;
            if t >= 1 {
                value += half_inverse_p * out[from + t - 1];
            }
            if t <= i {
                value += pa * out[from + t];
            }
            if t < i {
                value += (t + 1) as f64 * out[from + t + 1];
            }
            out[to + t] = value;
        }
    }
    for i in 0..=max_i {
        for j in 0..max_j {
            let (from, to) = (at(i, j), at(i, j + 1));
            let top = i + j;
            for t in 0..=(top + 1) {
                let mut value = 0.0;
                if t >= 1 {
                    value += half_inverse_p * out[from + t - 1];
                }
                if t <= top {
                    value += pb * out[from + t];
                }
                if t < top {
                    value += (t + 1) as f64 * out[from + t + 1];
                }
                out[to + t] = value;
            }
        }
    }
}

/// Hermite Coulomb integrals R_{tuv}(alpha, PC) for t + u + v <= `order`, in a dense cube
/// indexed `(t * d + u) * d + v` with `d = order + 1` (entries beyond the simplex are
/// unspecified). `scratch` is resized as needed.
pub fn coulomb(order: usize, alpha: f64, pc: [f64; 3], out: &mut Vec<f64>, scratch: &mut Vec<f64>) {
    let t_arg = alpha * (pc[0] * pc[0] + pc[1] * pc[1] + pc[2] * pc[2]);
    let mut boys_values = [0.0; crate::boys::MAX_M + 1];
    boys(t_arg, &mut boys_values[..=order]);
    coulomb_from_boys(order, alpha, pc, &boys_values, out, scratch);
}

/// [`coulomb`] from the Boys values F_0..=F_order at alpha |PC|^2 (`boys_values`, at least
/// `order + 1` of them), computed by the caller: a caller with many primitive quartets
/// evaluates them all first, so that their table reads overlap.
pub fn coulomb_from_boys(
    order: usize,
    alpha: f64,
    pc: [f64; 3],
    boys_values: &[f64],
    out: &mut Vec<f64>,
    scratch: &mut Vec<f64>,
) {
    let d = order + 1;
    let cube = d * d * d;
    // Every entry read below is written first, so the buffers only grow, never get zeroed.
    if out.len() < cube {
        out.resize(cube, 0.0);
    }
    if scratch.len() < cube {
        scratch.resize(cube, 0.0);
    }
    let boys_values = &boys_values[..d];
    if order == 0 {
        out[0] = boys_values[0];
        return;
    }
    if order == 1 {
        // R_000 = F_0, R_100 = X (-2 alpha) F_1, and likewise for y and z (d = 2).
        let first = -2.0 * alpha * boys_values[1];
        out[0] = boys_values[0];
        out[4] = pc[0] * first;
        out[2] = pc[1] * first;
        out[1] = pc[2] * first;
        return;
    }
    if order == 2 {
        // g_n = (-2 alpha)^n F_n; R_200 = g_1 + X^2 g_2, R_110 = X Y g_2, ... (d = 3).
        let g1 = -2.0 * alpha * boys_values[1];
        let g2 = 4.0 * alpha * alpha * boys_values[2];
        let [x, y, z] = pc;
        let at = |t: usize, u: usize, v: usize| (t * 3 + u) * 3 + v;
        out[at(0, 0, 0)] = boys_values[0];
        out[at(1, 0, 0)] = x * g1;
        out[at(0, 1, 0)] = y * g1;
        out[at(0, 0, 1)] = z * g1;
        out[at(2, 0, 0)] = g1 + x * x * g2;
        out[at(0, 2, 0)] = g1 + y * y * g2;
        out[at(0, 0, 2)] = g1 + z * z * g2;
        out[at(1, 1, 0)] = x * y * g2;
        out[at(1, 0, 1)] = x * z * g2;
        out[at(0, 1, 1)] = y * z * g2;
        return;
    }
    let work = &mut scratch[..cube];
    let Some(schedule) = schedule(order) else {
        recursion_by_loops(order, alpha, pc, boys_values, out, work);
        return;
    };
    // Level n holds R^n_{tuv} for t + u + v <= order - n; go from n = order down to 0,
    // alternating between `out` and `work` so that level 0 ends in `out`. Each level runs
    // the schedule's steps of degree <= order - n: the same arithmetic, entry by entry, as
    // `recursion_by_loops`, without its branches and index arithmetic.
    let minus_two_alpha = -2.0 * alpha;
    let mut power = minus_two_alpha.powi(order as i32);
    let mut levels: [&mut [f64]; 2] = [&mut out[..cube], work];
    for n in (0..=order).rev() {
        let (current, previous) = if (n % 2) == 0 {
            let [a, b] = &mut levels;
            (&mut **a, &**b)
        } else {
            let [a, b] = &mut levels;
            (&mut **b, &**a)
        };
        current[0] = power * boys_values[n];
        let top = order - n;
        for step in &schedule.single[..schedule.single_ends[top]] {
            current[step.target] = pc[step.axis] * previous[step.first];
        }
        for step in &schedule.double[..schedule.double_ends[top]] {
            let mut value = pc[step.axis] * previous[step.first];
            value += step.coefficient * previous[step.second];
            current[step.target] = value;
        }
        if n > 0 {
            power /= minus_two_alpha;
        }
    }
}

/// [`coulomb_from_boys`] for `W` primitive quartets at once, one per lane, each scaled by a
/// factor of its own: `levels[n][l]` = s_l (-2 alpha_l)^n F_n(T_l) for n <= `order` (the
/// caller's Boys values times its scale s_l, e.g. the quartet's prefactor), `pc[axis][l]`
/// the lane's P - C. Writes s_l R_{tuv} of every lane into the cube `out` (entry
/// `(t * d + u) * d + v`, d = order + 1, one array of lanes per entry), using `scratch` as
/// the other level. The recursion is linear in the levels, so the scale carries through.
/// The steps are the schedule's ([`schedule`]), each over a whole array of lanes: the
/// per-step work of indices and bounds is shared by the `W` quartets.
///
/// Returns `false`, writing nothing, above the scheduled orders (the caller then takes the
/// quartets one at a time).
pub(crate) fn coulomb_lanes<const W: usize>(
    order: usize,
    pc: &[[f64; W]; 3],
    levels: &[[f64; W]],
    out: &mut [[f64; W]],
    scratch: &mut [[f64; W]],
) -> bool {
    if order == 0 {
        out[0] = levels[0];
        return true;
    }
    let Some(schedule) = schedule(order) else {
        return false;
    };
    let d = order + 1;
    let cube = d * d * d;
    let mut buffers: [&mut [[f64; W]]; 2] = [&mut out[..cube], &mut scratch[..cube]];
    // Level n in buffer n % 2, from n = order down to 0 (which ends in `out`).
    for n in (0..=order).rev() {
        let [even, odd] = &mut buffers;
        let (current, previous): (&mut [[f64; W]], &[[f64; W]]) = if n % 2 == 0 {
            (&mut **even, &**odd)
        } else {
            (&mut **odd, &**even)
        };
        current[0] = levels[n];
        let top = order - n;
        for step in &schedule.single[..schedule.single_ends[top]] {
            let (x, source) = (&pc[step.axis], &previous[step.first]);
            current[step.target] = std::array::from_fn(|l| x[l] * source[l]);
        }
        for step in &schedule.double[..schedule.double_ends[top]] {
            let (x, first, second) = (
                &pc[step.axis],
                &previous[step.first],
                &previous[step.second],
            );
            let coefficient = step.coefficient;
            current[step.target] =
                std::array::from_fn(|l| x[l] * first[l] + coefficient * second[l]);
        }
    }
    true
}

/// The highest order whose recursion is scheduled ([`schedule`]); higher orders run
/// [`recursion_by_loops`].
pub(crate) const SCHEDULED_ORDER: usize = 24;

/// One entry of the recursion R^n_{tuv} = X_a R^{n+1}_{..k-1..} + (k - 1) R^{n+1}_{..k-2..},
/// along the first axis `a` with a non-zero index k: cube offsets of the entry and of its
/// sources.
#[derive(Clone, Copy, Debug)]
struct Step {
    target: usize,
    first: usize,
    second: usize,
    axis: usize,
    coefficient: f64,
}

/// The recursion's steps of one order, by degree t + u + v (ascending), split into those
/// with one term (k = 1) and those with two; `*_ends[g]` is the number of steps of degree
/// at most `g`.
#[derive(Debug)]
struct Schedule {
    single: Vec<Step>,
    single_ends: Vec<usize>,
    double: Vec<Step>,
    double_ends: Vec<usize>,
}

impl Schedule {
    fn new(order: usize) -> Self {
        let d = order + 1;
        let index = |[t, u, v]: [usize; 3]| (t * d + u) * d + v;
        let (mut single, mut double) = (Vec::new(), Vec::new());
        let (mut single_ends, mut double_ends) = (vec![0], vec![0]);
        for degree in 1..=order {
            for tuv in hermite_indices(order)
                .into_iter()
                .filter(|tuv| tuv.iter().sum::<usize>() == degree)
            {
                let axis = tuv.iter().position(|&k| k > 0).unwrap_or(0);
                let k = tuv[axis];
                let mut first = tuv;
                first[axis] -= 1;
                let mut step = Step {
                    target: index(tuv),
                    first: index(first),
                    second: 0,
                    axis,
                    coefficient: 0.0,
                };
                if k > 1 {
                    let mut second = first;
                    second[axis] -= 1;
                    step.second = index(second);
                    step.coefficient = (k - 1) as f64;
                    double.push(step);
                } else {
                    single.push(step);
                }
            }
            single_ends.push(single.len());
            double_ends.push(double.len());
        }
        Self {
            single,
            single_ends,
            double,
            double_ends,
        }
    }
}

/// The schedule of `order`, built on first use; `None` above [`SCHEDULED_ORDER`].
fn schedule(order: usize) -> Option<&'static Schedule> {
    static SCHEDULES: [OnceLock<Schedule>; SCHEDULED_ORDER + 1] =
        [const { OnceLock::new() }; SCHEDULED_ORDER + 1];
    SCHEDULES
        .get(order)
        .map(|cell| cell.get_or_init(|| Schedule::new(order)))
}

/// The recursion of [`coulomb`] for `order` >= 3 by nested loops over the simplex: the
/// reference the schedule is tested against, and the path above [`SCHEDULED_ORDER`].
fn recursion_by_loops(
    order: usize,
    alpha: f64,
    pc: [f64; 3],
    boys_values: &[f64],
    out: &mut [f64],
    work: &mut [f64],
) {
    let d = order + 1;
    let cube = d * d * d;
    let index = |t: usize, u: usize, v: usize| (t * d + u) * d + v;
    // Level n holds R^n_{tuv} for t + u + v <= order - n; go from n = order down to 0,
    // alternating between `out` and `work` so that level 0 ends in `out`.
    let minus_two_alpha = -2.0 * alpha;
    let mut power = minus_two_alpha.powi(order as i32);
    let mut levels: [&mut [f64]; 2] = [&mut out[..cube], work];
    for n in (0..=order).rev() {
        let (current, previous) = if (n % 2) == 0 {
            let [a, b] = &mut levels;
            (&mut **a, &**b)
        } else {
            let [a, b] = &mut levels;
            (&mut **b, &**a)
        };
        current[0] = power * boys_values[n];
        let top = order - n;
        for t in 0..=top {
            for u in 0..=(top - t) {
                for v in 0..=(top - t - u) {
                    if t + u + v == 0 {
                        continue;
                    }
                    let value = if t > 0 {
                        let mut value = pc[0] * previous[index(t - 1, u, v)];
                        if t > 1 {
                            value += (t - 1) as f64 * previous[index(t - 2, u, v)];
                        }
                        value
                    } else if u > 0 {
                        let mut value = pc[1] * previous[index(0, u - 1, v)];
                        if u > 1 {
                            value += (u - 1) as f64 * previous[index(0, u - 2, v)];
                        }
                        value
                    } else {
                        let mut value = pc[2] * previous[index(0, 0, v - 1)];
                        if v > 1 {
                            value += (v - 1) as f64 * previous[index(0, 0, v - 2)];
                        }
                        value
                    };
                    current[index(t, u, v)] = value;
                }
            }
        }
        if n > 0 {
            power /= minus_two_alpha;
        }
    }
}

/// The Hermite indices (t, u, v) with t + u + v <= `order`, in a fixed order.
pub fn hermite_indices(order: usize) -> Vec<[usize; 3]> {
    let mut out = Vec::new();
    for t in 0..=order {
        for u in 0..=(order - t) {
            for v in 0..=(order - t - u) {
                out.push([t, u, v]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generic recursion, for orders with a closed form shortcut.
    fn generic(order: usize, alpha: f64, pc: [f64; 3]) -> Vec<f64> {
        // Evaluate at a higher order with the generic path, then read the low-order simplex.
        let high = order.max(3);
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        coulomb(high, alpha, pc, &mut out, &mut scratch);
        let d = high + 1;
        let mut low = vec![0.0; (order + 1).pow(3)];
        for [t, u, v] in hermite_indices(order) {
            low[(t * (order + 1) + u) * (order + 1) + v] = out[(t * d + u) * d + v];
        }
        low
    }

    #[test]
    fn the_scheduled_recursion_has_the_bits_of_the_loops() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut uniform = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for order in 3..=SCHEDULED_ORDER {
            for _ in 0..4 {
                let alpha = 0.01 + 20.0 * uniform();
                let pc = [
                    4.0 * uniform() - 2.0,
                    4.0 * uniform() - 2.0,
                    4.0 * uniform() - 2.0,
                ];
                let (mut out, mut scratch) = (Vec::new(), Vec::new());
                coulomb(order, alpha, pc, &mut out, &mut scratch);
                let d = order + 1;
                let t_arg = alpha * (pc[0] * pc[0] + pc[1] * pc[1] + pc[2] * pc[2]);
                let mut boys_values = vec![0.0; d];
                boys(t_arg, &mut boys_values);
                let (mut want, mut work) = (vec![0.0; d * d * d], vec![0.0; d * d * d]);
                recursion_by_loops(order, alpha, pc, &boys_values, &mut want, &mut work);
                for [t, u, v] in hermite_indices(order) {
                    let at = (t * d + u) * d + v;
                    assert_eq!(
                        out[at].to_bits(),
                        want[at].to_bits(),
                        "order {order} {t}{u}{v}"
                    );
                }
            }
        }
    }

    #[test]
    fn shortcuts_match_the_generic_recursion() {
        for (alpha, pc) in [
            (0.7, [0.3, -1.2, 0.5]),
            (13.0, [0.01, 0.0, -0.02]),
            (0.05, [4.0, 2.0, -3.0]),
        ] {
            for order in 0..=2 {
                let (mut out, mut scratch) = (Vec::new(), Vec::new());
                coulomb(order, alpha, pc, &mut out, &mut scratch);
                let reference = generic(order, alpha, pc);
                for [t, u, v] in hermite_indices(order) {
                    let index = (t * (order + 1) + u) * (order + 1) + v;
                    let (a, b) = (out[index], reference[index]);
                    assert!(
                        (a - b).abs() <= 1e-14 * b.abs().max(1e-300),
                        "order {order} {t}{u}{v}: {a} vs {b}"
                    );
                }
            }
        }
    }

    /// Each lane of the batched recursion is its quartet's [`coulomb`] times the lane's
    /// scale, for every scheduled order: the same steps, with the levels' powers of
    /// -2 alpha built upwards instead of downwards, a few ulps apart. At T = alpha |PC|^2
    /// up to 6 the recursion amplifies those ulps to at most ~1.5e-13 of the entry or of
    /// the order's largest entry; at large T and high order its cancellation amplifies them
    /// far more in both (the ERI tests bound what that does to integrals: nothing above
    /// rounding, as such R are tiny).
    #[test]
    fn lanes_are_their_quartets_scaled() {
        const W: usize = 4;
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut uniform = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for order in 0..=SCHEDULED_ORDER {
            let d = order + 1;
            let cube = d * d * d;
            let alphas: [f64; W] = std::array::from_fn(|_| 0.01 + 2.0 * uniform());
            let scales: [f64; W] = std::array::from_fn(|_| 0.5 + uniform());
            let mut pc = [[0.0; W]; 3];
            for axis in pc.iter_mut() {
                for value in axis.iter_mut() {
                    *value = 2.0 * uniform() - 1.0;
                }
            }
            let mut levels = vec![[0.0; W]; d];
            for lane in 0..W {
                let point = [pc[0][lane], pc[1][lane], pc[2][lane]];
                let t_arg = alphas[lane] * point.iter().map(|x| x * x).sum::<f64>();
                let mut boys_values = vec![0.0; d];
                boys(t_arg, &mut boys_values);
                let mut power = scales[lane];
                for (level, value) in levels.iter_mut().zip(&boys_values) {
                    level[lane] = power * value;
                    power *= -2.0 * alphas[lane];
                }
            }
            let (mut out, mut scratch) = (vec![[0.0; W]; cube], vec![[0.0; W]; cube]);
            assert!(coulomb_lanes(order, &pc, &levels, &mut out, &mut scratch));
            for lane in 0..W {
                let point = [pc[0][lane], pc[1][lane], pc[2][lane]];
                let (mut want, mut work) = (Vec::new(), Vec::new());
                coulomb(order, alphas[lane], point, &mut want, &mut work);
                let largest = hermite_indices(order)
                    .iter()
                    .map(|[t, u, v]| want[(t * d + u) * d + v].abs())
                    .fold(0.0, f64::max);
                for [t, u, v] in hermite_indices(order) {
                    let at = (t * d + u) * d + v;
                    let expected = scales[lane] * want[at];
                    let error = (out[at][lane] - expected).abs();
                    assert!(
                        error <= 1e-12 * (expected.abs() + scales[lane] * largest),
                        "order {order} lane {lane} {t}{u}{v}: {} vs {expected}",
                        out[at][lane]
                    );
                }
            }
        }
    }
}
