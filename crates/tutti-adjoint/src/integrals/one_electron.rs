//! One-electron integrals over contracted shells: overlap S, kinetic T, nuclear attraction V.

use faer::Mat;

use super::cartesian::{cartesian_count, components, transform};
use super::hermite::{coulomb, expansion};
use crate::basis::{function_count, Basis, Shell};
use crate::molecule::Molecule;

/// Which one-electron operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    Overlap,
    Kinetic,
    Nuclear,
}

/// The overlap matrix S (nao x nao, symmetric, unit diagonal for spherical AOs).
pub fn overlap(basis: &Basis) -> Mat<f64> {
    matrix(basis, &[], Operator::Overlap)
}

/// The kinetic-energy matrix T = -1/2 <i|nabla^2|j> (nao x nao, hartree).
pub fn kinetic(basis: &Basis) -> Mat<f64> {
    matrix(basis, &[], Operator::Kinetic)
}

/// The nuclear-attraction matrix V = sum_C -Z_C <i|1/|r - C||j> over the molecule's nuclei
/// (point charges; nao x nao, hartree).
pub fn nuclear_attraction(basis: &Basis, molecule: &Molecule) -> Mat<f64> {
    let charges: Vec<(f64, [f64; 3])> = molecule
        .atoms()
        .iter()
        .map(|atom| (f64::from(atom.charge), atom.position))
        .collect();
    matrix(basis, &charges, Operator::Nuclear)
}

fn matrix(basis: &Basis, charges: &[(f64, [f64; 3])], operator: Operator) -> Mat<f64> {
    let nao = basis.nao();
    let mut out = Mat::<f64>::zeros(nao, nao);
    let shells = basis.shells();
    let transforms: Vec<Vec<f64>> = (0..=basis.max_l())
        .map(|l| transform(l, basis.kind()))
        .collect();
    for (a, shell_a) in shells.iter().enumerate() {
        for (b, shell_b) in shells.iter().enumerate().take(a + 1) {
            let cart = cartesian_block(shell_a, shell_b, charges, operator);
            let na = function_count(shell_a.l, basis.kind());
            let nb = function_count(shell_b.l, basis.kind());
            let block = to_functions(
                &cart,
                &transforms[shell_a.l],
                &transforms[shell_b.l],
                cartesian_count(shell_a.l),
                cartesian_count(shell_b.l),
                na,
                nb,
            );
            let (oa, ob) = (basis.offsets()[a], basis.offsets()[b]);
            for i in 0..na {
                for j in 0..nb {
                    out[(oa + i, ob + j)] = block[i * nb + j];
                    out[(ob + j, oa + i)] = block[i * nb + j];
                }
            }
        }
    }
    out
}

/// Two-index transform: block[m][n] = sum_{c,d} ta[c][m] tb[d][n] cart[c][d].
fn to_functions(
    cart: &[f64],
    ta: &[f64],
    tb: &[f64],
    ca: usize,
    cb: usize,
    na: usize,
    nb: usize,
) -> Vec<f64> {
    let mut half = vec![0.0; ca * nb];
    for c in 0..ca {
        for d in 0..cb {
            let value = cart[c * cb + d];
            if value == 0.0 {
                continue;
            }
            for n in 0..nb {
                half[c * nb + n] += value * tb[d * nb + n];
            }
        }
    }
    let mut out = vec![0.0; na * nb];
    for c in 0..ca {
        for m in 0..na {
            let factor = ta[c * na + m];
            if factor == 0.0 {
                continue;
            }
            for n in 0..nb {
                out[m * nb + n] += factor * half[c * nb + n];
            }
        }
    }
    out
}

/// The Cartesian block (ncart_a x ncart_b, row-major) of one operator over two contracted
/// shells (contraction coefficients included).
fn cartesian_block(
    shell_a: &Shell,
    shell_b: &Shell,
    charges: &[(f64, [f64; 3])],
    operator: Operator,
) -> Vec<f64> {
    let (la, lb) = (shell_a.l, shell_b.l);
    let comps_a = components(la);
    let comps_b = components(lb);
    let mut out = vec![0.0; comps_a.len() * comps_b.len()];
    let extra = if operator == Operator::Kinetic { 2 } else { 0 };
    let max_j = lb + extra;
    let stride = la + max_j + 1;
    let at = |i: usize, j: usize, t: usize| (i * (max_j + 1) + j) * stride + t;
    let separation = [
        shell_a.center[0] - shell_b.center[0],
        shell_a.center[1] - shell_b.center[1],
        shell_a.center[2] - shell_b.center[2],
    ];
    let mut e = [Vec::new(), Vec::new(), Vec::new()];
    let mut r = Vec::new();
    let mut scratch = Vec::new();
    for (&a, &da) in shell_a.exponents.iter().zip(&shell_a.contraction) {
        for (&b, &db) in shell_b.exponents.iter().zip(&shell_b.contraction) {
            if da == 0.0 || db == 0.0 {
                continue;
            }
            let p = a + b;
            let weight = da * db;
            for axis in 0..3 {
                expansion(la, max_j, a, b, separation[axis], &mut e[axis]);
            }
            match operator {
                Operator::Overlap | Operator::Kinetic => {
                    let root = (std::f64::consts::PI / p).sqrt();
                    // 1-D overlaps s[axis](i, j) = E^{ij}_0 sqrt(pi/p).
                    let s = |axis: usize, i: usize, j: usize| e[axis][at(i, j, 0)] * root;
                    let kinetic_1d = |axis: usize, i: usize, j: usize| {
                        let mut value = -2.0 * b * b * s(axis, i, j + 2)
                            + b * (2 * j + 1) as f64 * s(axis, i, j);
                        if j >= 2 {
                            value -= 0.5 * (j * (j - 1)) as f64 * s(axis, i, j - 2);
                        }
                        value
                    };
                    for (ia, ca) in comps_a.iter().enumerate() {
                        for (ib, cb) in comps_b.iter().enumerate() {
                            let sx = s(0, ca[0], cb[0]);
                            let sy = s(1, ca[1], cb[1]);
                            let sz = s(2, ca[2], cb[2]);
                            let value = if operator == Operator::Overlap {
                                sx * sy * sz
                            } else {
                                kinetic_1d(0, ca[0], cb[0]) * sy * sz
                                    + sx * kinetic_1d(1, ca[1], cb[1]) * sz
                                    + sx * sy * kinetic_1d(2, ca[2], cb[2])
                            };
                            out[ia * comps_b.len() + ib] += weight * value;
                        }
                    }
                }
                Operator::Nuclear => {
                    let center_p = [
                        (a * shell_a.center[0] + b * shell_b.center[0]) / p,
                        (a * shell_a.center[1] + b * shell_b.center[1]) / p,
                        (a * shell_a.center[2] + b * shell_b.center[2]) / p,
                    ];
                    let order = la + lb;
                    let d = order + 1;
                    let prefactor = 2.0 * std::f64::consts::PI / p;
                    for (charge, position) in charges {
                        let pc = [
                            center_p[0] - position[0],
                            center_p[1] - position[1],
                            center_p[2] - position[2],
                        ];
                        coulomb(order, p, pc, &mut r, &mut scratch);
                        let scale = -charge * prefactor * weight;
                        for (ia, ca) in comps_a.iter().enumerate() {
                            for (ib, cb) in comps_b.iter().enumerate() {
                                let mut value = 0.0;
                                for t in 0..=(ca[0] + cb[0]) {
                                    let ex = e[0][at(ca[0], cb[0], t)];
                                    for u in 0..=(ca[1] + cb[1]) {
                                        let exy = ex * e[1][at(ca[1], cb[1], u)];
                                        for v in 0..=(ca[2] + cb[2]) {
                                            value += exy
                                                * e[2][at(ca[2], cb[2], v)]
                                                * r[(t * d + u) * d + v];
                                        }
                                    }
                                }
                                out[ia * comps_b.len() + ib] += scale * value;
                            }
                        }
                    }
                }
            }
        }
    }
    out
}
