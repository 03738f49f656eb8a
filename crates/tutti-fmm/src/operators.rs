//! The expansion operators in the Cartesian Taylor basis (Dehnen's formulation).
//!
//! With D_n(r) the derivatives of the kernel g(r) = (|r|^2 + eps^2)^(-1/2) and
//! x^n / n! = x^a y^b z^c / (a! b! c!):
//!
//! - multipole of a cell about its centre z: `M_n = sum_j m_j (z - x_j)^n / n!`, so that far
//!   away `psi(x) = sum_n M_n D_n(x - z)`;
//! - local expansion about a target centre c: `psi(x) = sum_k L_k (x - c)^k / k!`;
//! - M2L: `L_k += sum_{|n| + |k| <= p} M_n D_{n+k}(c - z)`;
//! - M2M and L2L shift exactly (binomial theorem), so only M2L truncates.

use crate::basis::Basis;
use crate::kernel::Field;
use crate::options::Precision;

/// P2M: the multipole `out` (zeroed by the caller) of bodies about `center`.
pub(crate) fn p2m(
    basis: &Basis,
    center: [f64; 3],
    positions: &[[f64; 3]],
    masses: &[f64],
    out: &mut [f64],
) {
    let mut powers = vec![0.0; basis.len()];
    for (x, &m) in positions.iter().zip(masses) {
        basis.scaled_powers(
            [center[0] - x[0], center[1] - x[1], center[2] - x[2]],
            &mut powers,
        );
        for (o, &w) in out.iter_mut().zip(&powers) {
            *o += m * w;
        }
    }
}

/// M2M: adds the child's multipole about `child_center` to `parent` about `parent_center`.
pub(crate) fn m2m(
    basis: &Basis,
    child: &[f64],
    child_center: [f64; 3],
    parent_center: [f64; 3],
    parent: &mut [f64],
    powers: &mut [f64],
) {
    let d = [0, 1, 2].map(|a| parent_center[a] - child_center[a]);
    basis.scaled_powers(d, powers);
    for &[n, k, rest] in &basis.shift {
        parent[n as usize] += child[k as usize] * powers[rest as usize];
    }
}

/// L2L: adds the parent's local expansion about `parent_center` to `child` about
/// `child_center`.
pub(crate) fn l2l(
    basis: &Basis,
    parent: &[f64],
    parent_center: [f64; 3],
    child_center: [f64; 3],
    child: &mut [f64],
    powers: &mut [f64],
) {
    let d = [0, 1, 2].map(|a| child_center[a] - parent_center[a]);
    basis.scaled_powers(d, powers);
    for &[n, k, rest] in &basis.shift {
        child[k as usize] += parent[n as usize] * powers[rest as usize];
    }
}

/// L2P: the far field of the local expansion `local` about `center` at `x`.
pub(crate) fn l2p(
    basis: &Basis,
    local: &[f64],
    center: [f64; 3],
    x: [f64; 3],
    powers: &mut [f64],
) -> Field {
    basis.scaled_powers(
        [x[0] - center[0], x[1] - center[1], x[2] - center[2]],
        powers,
    );
    let psi = local.iter().zip(powers.iter()).map(|(l, w)| l * w).sum();
    let mut grad = [0.0; 3];
    for (k, raised) in basis.raise.iter().enumerate() {
        for axis in 0..3 {
            grad[axis] += local[raised[axis] as usize] * powers[k];
        }
    }
    Field { psi, grad }
}

/// M2L pairs of one target evaluated together, interleaved lane by lane.
pub(crate) const LANES: usize = 4;

/// Kernel derivatives of groups of [`LANES`] M2L pairs, in the far-field precision,
/// interleaved: entry n of lane l at `n * LANES + l`.
#[derive(Clone, Debug)]
pub(crate) enum Derivatives {
    /// f64 values, `len() * LANES` per group.
    F64(Vec<f64>),
    /// f32 values, `len() * LANES` per group.
    F32(Vec<f32>),
}

impl Derivatives {
    /// Room for `groups` groups in `precision`.
    pub(crate) fn zeros(precision: Precision, groups: usize, terms: usize) -> Self {
        let len = groups * terms * LANES;
        match precision {
            Precision::F32 => Self::F32(vec![0.0; len]),
            _ => Self::F64(vec![0.0; len]),
        }
    }
}

/// M2L of a group of up to [`LANES`] pairs with one target: adds
/// `sum_lanes sum_n M_n D_{n+k}` to `local[k]` for every k. `multipoles` and `derivatives`
/// are interleaved by lane (unused lanes hold zeros); the lanes are summed in a fixed order.
pub(crate) fn m2l_f64(basis: &Basis, multipoles: &[f64], derivatives: &[f64], local: &mut [f64]) {
    for (k, l) in local.iter_mut().enumerate() {
        let targets = &basis.m2l[basis.m2l_start[k]..basis.m2l_start[k + 1]];
        let mut sum = [0.0; LANES];
        for (m, &nk) in multipoles.chunks_exact(LANES).zip(targets) {
            let at = nk as usize * LANES;
            let d = &derivatives[at..at + LANES];
            for lane in 0..LANES {
                sum[lane] += m[lane] * d[lane];
            }
        }
        *l += (sum[0] + sum[1]) + (sum[2] + sum[3]);
    }
}

/// [`m2l_f64`] with f32 multipoles and derivatives: products in f32, sums in f64.
pub(crate) fn m2l_f32(basis: &Basis, multipoles: &[f32], derivatives: &[f32], local: &mut [f64]) {
    for (k, l) in local.iter_mut().enumerate() {
        let targets = &basis.m2l[basis.m2l_start[k]..basis.m2l_start[k + 1]];
        let mut sum = [0.0; LANES];
        for (m, &nk) in multipoles.chunks_exact(LANES).zip(targets) {
            let at = nk as usize * LANES;
            let d = &derivatives[at..at + LANES];
            for lane in 0..LANES {
                sum[lane] += f64::from(m[lane] * d[lane]);
            }
        }
        *l += (sum[0] + sum[1]) + (sum[2] + sum[3]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::add_source;

    /// A far cluster seen through P2M -> M2M -> M2L -> L2L -> L2P converges to the direct sum
    /// as p grows.
    #[test]
    fn operator_chain_converges_to_direct_sum() {
        let sources = [[0.1, 0.05, -0.02], [-0.08, 0.02, 0.07], [0.03, -0.09, 0.01]];
        let masses = [1.0, -0.5, 2.0];
        let target = [4.05, 0.93, -1.02];
        let mut exact = Field::default();
        for (s, &m) in sources.iter().zip(&masses) {
            add_source(&mut exact, &target, s, m, 0.0);
        }
        let mut previous = f64::INFINITY;
        for p in [2, 4, 6, 8, 10] {
            let basis = Basis::new(p);
            let t = basis.len();
            let mut powers = vec![0.0; t];
            let child_center = [0.02, 0.0, 0.01];
            let parent_center = [0.0, 0.0, 0.0];
            let mut child = vec![0.0; t];
            p2m(&basis, child_center, &sources, &masses, &mut child);
            let mut parent = vec![0.0; t];
            m2m(
                &basis,
                &child,
                child_center,
                parent_center,
                &mut parent,
                &mut powers,
            );
            let local_parent_center = [4.0, 1.0, -1.0];
            let local_child_center = [4.1, 0.9, -1.05];
            let mut d = vec![0.0; t];
            let r = [0, 1, 2].map(|a| local_parent_center[a] - parent_center[a]);
            basis.kernel_derivatives(r, 0.0, &mut d);
            // One pair in lane 0, the other lanes empty.
            let lane0 = |values: &[f64]| {
                let mut out = vec![0.0; values.len() * LANES];
                for (n, &v) in values.iter().enumerate() {
                    out[n * LANES] = v;
                }
                out
            };
            let mut local_parent = vec![0.0; t];
            m2l_f64(&basis, &lane0(&parent), &lane0(&d), &mut local_parent);
            let mut local_child = vec![0.0; t];
            l2l(
                &basis,
                &local_parent,
                local_parent_center,
                local_child_center,
                &mut local_child,
                &mut powers,
            );
            let field = l2p(
                &basis,
                &local_child,
                local_child_center,
                target,
                &mut powers,
            );
            let err = (0..3)
                .map(|a| (field.grad[a] - exact.grad[a]).powi(2))
                .sum::<f64>()
                .sqrt()
                / exact.grad.iter().map(|g| g * g).sum::<f64>().sqrt();
            let err_psi = ((field.psi - exact.psi) / exact.psi).abs();
            assert!(err < previous * 0.5, "p={p}: {err} after {previous}");
            assert!(
                err_psi < 1e-1_f64.powi(p as i32 / 2 + 1),
                "p={p}: {err_psi}"
            );
            previous = err;
        }
        assert!(previous < 1e-8, "{previous}");
    }
}
