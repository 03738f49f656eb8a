//! Function shells: what the integral kernels integrate over. A function shell is a set of
//! functions sharing one centre and one set of primitive exponents: Cartesian monomials
//! x^a y^b z^c (any list, of degree at most `degree`) times sum_i w_i exp(-alpha_i r^2), mapped
//! to its output functions by its own Cartesian-to-output transform. An ordinary shell is one
//! ([`FunctionShell::from_shell`]); so is the exponent derivative of one primitive of a shell
//! ([`FunctionShell::primitive_derivatives`]: the l + 2 monomials of r^2 g and the l monomials
//! of g side by side), which lets a derivative sit in a quartet next to ordinary shells.

use super::cartesian::{component_index, components, transform};
use crate::basis::{function_count, AngularKind, Shell};

/// A set of functions over one centre and one contraction (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionShell {
    /// Centre, bohr.
    pub center: [f64; 3],
    /// Primitive exponents alpha_i, 1/bohr^2.
    pub exponents: Vec<f64>,
    /// Weight w_i of each bare primitive (an ordinary shell's normalized contraction).
    pub weights: Vec<f64>,
    /// Largest total degree among `monomials`.
    pub degree: usize,
    /// The Cartesian exponents (a, b, c) of the monomials.
    pub monomials: Vec<[usize; 3]>,
    /// Output function m = `sum_c transform[c * functions + m]` monomial c (row-major,
    /// `monomials.len()` rows by `functions` columns).
    pub transform: Vec<f64>,
    /// Number of output functions.
    pub functions: usize,
}

impl FunctionShell {
    /// The functions (AOs) of an ordinary shell.
    pub fn from_shell(shell: &Shell, kind: AngularKind) -> Self {
        let monomials = components(shell.l);
        let transform = transform(shell.l, kind);
        let functions = function_count(shell.l, kind);
        Self {
            center: shell.center,
            exponents: shell.exponents.clone(),
            weights: shell.contraction.clone(),
            degree: shell.l,
            monomials,
            transform,
            functions,
        }
    }

    /// For primitive `primitive` of `shell` with weight w: 2 n functions (n the shell's AO
    /// count), first w r^2 g_m, then w g_m, where g_m is AO m of the shell built from the bare
    /// primitive r^l exp(-alpha r^2) alone. -w r^2 g_m is d(w g_m)/d alpha at fixed w.
    pub fn primitive_derivatives(
        shell: &Shell,
        primitive: usize,
        weight: f64,
        kind: AngularKind,
    ) -> Self {
        let l = shell.l;
        let plain = components(l);
        let raised = components(l + 2);
        let base = transform(l, kind);
        let n = function_count(l, kind);
        let rows = raised.len() + plain.len();
        let mut map = vec![0.0; rows * 2 * n];
        // r^2 x^a y^b z^c = x^(a+2) y^b z^c + x^a y^(b+2) z^c + x^a y^b z^(c+2).
        for (c, [a, b, _]) in plain.iter().copied().enumerate() {
            for row in [
                component_index(l + 2, a + 2, b),
                component_index(l + 2, a, b + 2),
                component_index(l + 2, a, b),
            ] {
                for m in 0..n {
                    map[row * 2 * n + m] += base[c * n + m];
                }
            }
            let row = raised.len() + c;
            for m in 0..n {
                map[row * 2 * n + n + m] = base[c * n + m];
            }
        }
        let mut monomials = raised;
        monomials.extend(plain);
        Self {
            center: shell.center,
            exponents: vec![shell.exponents[primitive]],
            weights: vec![weight],
            degree: l + 2,
            monomials,
            transform: map,
            functions: 2 * n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrals::one_electron::{block, Operator};

    fn shell(l: usize, exponent: f64, center: [f64; 3]) -> Shell {
        Shell {
            l,
            center,
            atom: 0,
            exponents: vec![exponent],
            coefficients: vec![1.0],
            contraction: vec![1.0],
        }
    }

    /// -<r^2 g|b> = d<g|b>/d alpha for bare primitives, by central differences, for every
    /// l up to g, spherical and Cartesian, and the plain half equals the shell itself.
    #[test]
    fn raised_half_is_the_exponent_derivative() {
        let other =
            FunctionShell::from_shell(&shell(2, 0.7, [0.3, -0.4, 0.9]), AngularKind::Spherical);
        for kind in [AngularKind::Spherical, AngularKind::Cartesian] {
            for l in 0..=4 {
                let alpha = 1.3;
                let base = shell(l, alpha, [0.1, 0.2, -0.3]);
                let derivative = FunctionShell::primitive_derivatives(&base, 0, 1.0, kind);
                let values = block(&derivative, &other, Operator::Overlap);
                let n = function_count(l, kind);
                let nb = other.functions;
                let overlap_at = |a: f64| {
                    block(
                        &FunctionShell::from_shell(&shell(l, a, base.center), kind),
                        &other,
                        Operator::Overlap,
                    )
                };
                let h = 1e-4;
                let (plus, minus, plain) = (
                    overlap_at(alpha + h),
                    overlap_at(alpha - h),
                    overlap_at(alpha),
                );
                for k in 0..n * nb {
                    let numeric = (plus[k] - minus[k]) / (2.0 * h);
                    let raised = values[k];
                    assert!(
                        (numeric + raised).abs() < 1e-7 * (1.0 + raised.abs()),
                        "l={l} {kind:?} {k}: {numeric} vs {}",
                        -raised
                    );
                    assert!((values[n * nb + k] - plain[k]).abs() < 1e-15);
                }
            }
        }
    }
}
