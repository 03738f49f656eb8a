//! One-electron integrals over contracted shells: overlap S, kinetic T, nuclear attraction V;
//! whole matrices over a basis, or one block over two function shells ([`block`]).

use faer::Mat;

use super::functions::FunctionShell;
use super::hermite::{coulomb, expansion};
use crate::basis::Basis;
use crate::molecule::Molecule;

/// A one-electron operator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operator<'c> {
    /// The overlap <a|b>.
    Overlap,
    /// The kinetic energy -1/2 <a|nabla^2|b>.
    Kinetic,
    /// Nuclear attraction sum_C -Z_C <a|1/|r - C||b> over point charges (Z_C, C in bohr).
    Nuclear(&'c [(f64, [f64; 3])]),
}

/// The overlap matrix S (nao x nao, symmetric, unit diagonal for spherical AOs).
pub fn overlap(basis: &Basis) -> Mat<f64> {
    matrix(basis, Operator::Overlap)
}

/// The kinetic-energy matrix T = -1/2 <i|nabla^2|j> (nao x nao, hartree).
pub fn kinetic(basis: &Basis) -> Mat<f64> {
    matrix(basis, Operator::Kinetic)
}

/// The nuclear-attraction matrix V = sum_C -Z_C <i|1/|r - C||j> over the molecule's nuclei
/// (point charges; nao x nao, hartree).
pub fn nuclear_attraction(basis: &Basis, molecule: &Molecule) -> Mat<f64> {
    let charges = point_charges(molecule);
    matrix(basis, Operator::Nuclear(&charges))
}

/// The nuclei of `molecule` as (charge, position) point charges.
pub fn point_charges(molecule: &Molecule) -> Vec<(f64, [f64; 3])> {
    molecule
        .atoms()
        .iter()
        .map(|atom| (f64::from(atom.charge), atom.position))
        .collect()
}

/// The block <a|O|b> over the output functions of two function shells (row-major,
/// `a.functions` x `b.functions`).
pub fn block(a: &FunctionShell, b: &FunctionShell, operator: Operator<'_>) -> Vec<f64> {
    let cart = cartesian_block(a, b, operator);
    to_functions(
        &cart,
        &a.transform,
        &b.transform,
        a.monomials.len(),
        b.monomials.len(),
        a.functions,
        b.functions,
    )
}

fn matrix(basis: &Basis, operator: Operator<'_>) -> Mat<f64> {
    let nao = basis.nao();
    let mut out = Mat::<f64>::zeros(nao, nao);
    let sets: Vec<FunctionShell> = basis
        .shells()
        .iter()
        .map(|shell| FunctionShell::from_shell(shell, basis.kind()))
        .collect();
    for (a, set_a) in sets.iter().enumerate() {
        for (b, set_b) in sets.iter().enumerate().take(a + 1) {
            let values = block(set_a, set_b, operator);
            let (na, nb) = (set_a.functions, set_b.functions);
            let (oa, ob) = (basis.offsets()[a], basis.offsets()[b]);
            for i in 0..na {
                for j in 0..nb {
                    out[(oa + i, ob + j)] = values[i * nb + j];
                    out[(ob + j, oa + i)] = values[i * nb + j];
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

/// The Cartesian block (monomials of a x monomials of b, row-major) of one operator over two
/// function shells (weights included).
fn cartesian_block(
    shell_a: &FunctionShell,
    shell_b: &FunctionShell,
    operator: Operator<'_>,
) -> Vec<f64> {
    let (la, lb) = (shell_a.degree, shell_b.degree);
    let comps_a = &shell_a.monomials;
    let comps_b = &shell_b.monomials;
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
    for (&a, &da) in shell_a.exponents.iter().zip(&shell_a.weights) {
        for (&b, &db) in shell_b.exponents.iter().zip(&shell_b.weights) {
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
                Operator::Nuclear(charges) => {
                    let center_p = [
                        (a * shell_a.center[0] + b * shell_b.center[0]) / p,
                        (a * shell_a.center[1] + b * shell_b.center[1]) / p,
                        (a * shell_a.center[2] + b * shell_b.center[2]) / p,
                    ];
                    let order = la + lb;
                    let d = order + 1;
                    let prefactor = 2.0 * std::f64::consts::PI / p;
                    for (charge, position) in charges.iter() {
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
