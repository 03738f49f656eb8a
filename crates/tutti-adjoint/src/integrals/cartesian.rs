//! Cartesian components of a shell and the map to its AOs (PySCF / libcint conventions).
//!
//! Cartesian order: x^a y^b z^c with a descending, then b descending (p: x, y, z; d: xx, xy,
//! xz, yy, yz, zz). Spherical AOs are real solid harmonics in PySCF's order m = -l..l
//! (d: xy, yz, z^2, xz, x^2-y^2), except p, which PySCF orders x, y, z. Each AO is
//! `sum_c T[c][m] g_c` with g_c the bare Cartesian primitive (radial normalization only), so a
//! spherical AO has unit norm; `T` includes the sqrt((2l+1)/(4 pi)) factor of Y_lm. In
//! Cartesian mode T is the identity for l >= 2 and the constant Y_00 = 0.2821 (s) or
//! sqrt(3/(4 pi)) = 0.4886 (p) for l <= 1, exactly as PySCF's `cart=True` AOs.

use crate::basis::{function_count, AngularKind};

/// The Cartesian exponents (a, b, c) of angular momentum `l`, in libcint order.
pub fn components(l: usize) -> Vec<[usize; 3]> {
    let mut out = Vec::with_capacity((l + 1) * (l + 2) / 2);
    for a in (0..=l).rev() {
        for b in (0..=(l - a)).rev() {
            out.push([a, b, l - a - b]);
        }
    }
    out
}

/// Number of Cartesian components of angular momentum `l`.
pub fn cartesian_count(l: usize) -> usize {
    (l + 1) * (l + 2) / 2
}

pub(crate) fn component_index(l: usize, a: usize, b: usize) -> usize {
    // Position of (a, b, l-a-b) in `components(l)`.
    let rest = l - a;
    rest * (rest + 1) / 2 + (rest - b)
}

/// A polynomial in x, y, z of fixed degree as coefficients over `components(degree)`.
type Polynomial = Vec<f64>;

fn multiply_by(poly: &Polynomial, degree: usize, axis: usize) -> Polynomial {
    let mut out = vec![0.0; cartesian_count(degree + 1)];
    for (index, [a, b, c]) in components(degree).into_iter().enumerate() {
        let (mut a, mut b, _c) = (a, b, c);
        match axis {
            0 => a += 1,
            1 => b += 1,
            _ => {}
        }
        out[component_index(degree + 1, a, b)] += poly[index];
    }
    out
}

fn multiply_by_r2(poly: &Polynomial, degree: usize) -> Polynomial {
    let mut out = vec![0.0; cartesian_count(degree + 2)];
    for axis in 0..3 {
        let once = multiply_by(poly, degree, axis);
        let twice = multiply_by(&once, degree + 1, axis);
        for (o, t) in out.iter_mut().zip(twice) {
            *o += t;
        }
    }
    out
}

/// Real solid harmonics of degree `l` as Cartesian polynomials, in the order m = -l..l, with
/// the Y_lm normalization (Helgaker, Jorgensen, Olsen, eqs. 6.4.70-6.4.73 recursion).
fn solid_harmonics(l: usize) -> Vec<Polynomial> {
    // cos[l][m] = C_lm, sin[l][m] = S_lm for m = 0..=l (S_l0 unused).
    let mut cos: Vec<Vec<Polynomial>> = vec![vec![vec![1.0]]];
    let mut sin: Vec<Vec<Polynomial>> = vec![vec![vec![0.0]]];
    for n in 0..l {
        let mut next_cos = Vec::with_capacity(n + 2);
        let mut next_sin = Vec::with_capacity(n + 2);
        for m in 0..=n {
            // C_{n+1,m} = ((2n+1) z C_nm - sqrt((n+m)(n-m)) r^2 C_{n-1,m}) / sqrt((n+m+1)(n-m+1))
            let denominator = (((n + m + 1) * (n - m + 1)) as f64).sqrt();
            let lower = ((n + m) * (n - m)) as f64;
            let mut c = multiply_by(&cos[n][m], n, 2);
            let mut s = multiply_by(&sin[n][m], n, 2);
            for value in c.iter_mut().chain(s.iter_mut()) {
                *value *= (2 * n + 1) as f64;
            }
            if n >= 1 && m < n {
                let c_low = multiply_by_r2(&cos[n - 1][m], n - 1);
                let s_low = multiply_by_r2(&sin[n - 1][m], n - 1);
                for (value, low) in c.iter_mut().zip(c_low) {
                    *value -= lower.sqrt() * low;
                }
                for (value, low) in s.iter_mut().zip(s_low) {
                    *value -= lower.sqrt() * low;
                }
            }
            next_cos.push(c.into_iter().map(|v| v / denominator).collect());
            next_sin.push(s.into_iter().map(|v| v / denominator).collect());
        }
        // C_{n+1,n+1} = f (x C_nn - y S_nn), S_{n+1,n+1} = f (y C_nn + x S_nn),
        // f = sqrt(2^delta(n,0) (2n+1) / (2n+2)).
        let factor =
            ((if n == 0 { 2.0 } else { 1.0 }) * (2 * n + 1) as f64 / (2 * n + 2) as f64).sqrt();
        let xc = multiply_by(&cos[n][n], n, 0);
        let yc = multiply_by(&cos[n][n], n, 1);
        let xs = multiply_by(&sin[n][n], n, 0);
        let ys = multiply_by(&sin[n][n], n, 1);
        next_cos.push(xc.iter().zip(&ys).map(|(a, b)| factor * (a - b)).collect());
        next_sin.push(yc.iter().zip(&xs).map(|(a, b)| factor * (a + b)).collect());
        cos.push(next_cos);
        sin.push(next_sin);
    }
    let normalization = ((2 * l + 1) as f64 / (4.0 * std::f64::consts::PI)).sqrt();
    let mut out = Vec::with_capacity(2 * l + 1);
    for m in (1..=l).rev() {
        out.push(sin[l][m].clone());
    }
    out.push(cos[l][0].clone());
    out.extend(cos[l].iter().skip(1).cloned());
    for poly in &mut out {
        for value in poly.iter_mut() {
            *value *= normalization;
        }
    }
    out
}

/// The transform T (row-major, `cartesian_count(l)` rows by `function_count(l, kind)`
/// columns): AO m = `sum_c T[c][m] g_c`.
pub fn transform(l: usize, kind: AngularKind) -> Vec<f64> {
    let ncart = cartesian_count(l);
    let nfunc = function_count(l, kind);
    let mut out = vec![0.0; ncart * nfunc];
    match kind {
        AngularKind::Cartesian => {
            let scale = match l {
                0 => (1.0 / (4.0 * std::f64::consts::PI)).sqrt(),
                1 => (3.0 / (4.0 * std::f64::consts::PI)).sqrt(),
                _ => 1.0,
            };
            for c in 0..ncart {
                out[c * nfunc + c] = scale;
            }
        }
        AngularKind::Spherical => {
            let harmonics = solid_harmonics(l);
            // PySCF orders p as x, y, z (m = +1, -1, 0).
            let order: Vec<usize> = if l == 1 {
                vec![2, 0, 1]
            } else {
                (0..nfunc).collect()
            };
            for (column, &m) in order.iter().enumerate() {
                for c in 0..ncart {
                    out[c * nfunc + column] = harmonics[m][c];
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_order_is_libcint() {
        assert_eq!(
            components(2),
            vec![
                [2, 0, 0],
                [1, 1, 0],
                [1, 0, 1],
                [0, 2, 0],
                [0, 1, 1],
                [0, 0, 2]
            ]
        );
        for l in 0..7 {
            for (index, [a, b, _]) in components(l).into_iter().enumerate() {
                assert_eq!(component_index(l, a, b), index);
            }
        }
    }

    #[test]
    fn d_harmonics_match_pyscf() {
        let t = transform(2, AngularKind::Spherical);
        // pyscf.gto.cart2sph(2): dxy = 1.0925 xy, dz2 = -0.3154 xx - 0.3154 yy + 0.6308 zz.
        assert!((t[5] - 1.092_548_430_592_079_2).abs() < 1e-15);
        assert!((t[2] + 0.315_391_565_252_52).abs() < 1e-14);
        assert!((t[5 * 5 + 2] - 0.630_783_130_505_04).abs() < 1e-14);
        assert!((t[4] - 0.546_274_215_296_039_6).abs() < 1e-15);
    }
}
