//! The expansion basis: Cartesian multi-indices n = (a, b, c) of total degree |n| <= p, in
//! graded order (by degree, then lexicographically descending in a, then b), and the tables
//! every operator loops over.
//!
//! Multi-indices of degree <= q are exactly the first `terms(q)` indices, so truncating an
//! expansion to a lower degree is taking a prefix.

/// Number of multi-indices of total degree <= q: (q+1)(q+2)(q+3)/6.
pub(crate) fn terms(q: usize) -> usize {
    (q + 1) * (q + 2) * (q + 3) / 6
}

/// The recurrence for the derivatives of the kernel, as columns: the terms of index n are
/// `start[n]..start[n + 1]`, each `coefficient * x[axis] * D[source]` (`axis == 3` means no
/// coordinate factor). The M2L kernel takes the same columns.
#[derive(Clone, Debug, Default)]
pub(crate) struct Recurrence {
    pub start: Vec<u32>,
    pub source: Vec<u32>,
    pub axis: Vec<u32>,
    pub coefficient: Vec<f64>,
}

/// A borrowed [`Recurrence`] (the M2L kernel's host twin builds one from its arguments).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecurrenceColumns<'a> {
    pub start: &'a [u32],
    pub source: &'a [u32],
    pub axis: &'a [u32],
    pub coefficient: &'a [f64],
}

impl Recurrence {
    /// Number of terms.
    pub(crate) fn len(&self) -> usize {
        self.source.len()
    }

    /// The columns, borrowed.
    pub(crate) fn columns(&self) -> RecurrenceColumns<'_> {
        RecurrenceColumns {
            start: &self.start,
            source: &self.source,
            axis: &self.axis,
            coefficient: &self.coefficient,
        }
    }

    fn push(&mut self, source: u16, axis: u8, coefficient: f64) {
        self.source.push(u32::from(source));
        self.axis.push(u32::from(axis));
        self.coefficient.push(coefficient);
    }
}

impl RecurrenceColumns<'_> {
    /// Fills `out` with the derivatives d^n g(r) of g(r) = (|r|^2 + softening^2)^(-1/2) at
    /// `r`, for every n < `out.len()` (the columns must cover that many indices, every
    /// source below its term's index). The M2L kernel (`gpu/m2l.cu`) performs these
    /// operations in this order.
    pub(crate) fn derivatives(&self, r: [f64; 3], softening2: f64, out: &mut [f64]) {
        let s = r[0] * r[0] + r[1] * r[1] + r[2] * r[2] + softening2;
        let inv_s = 1.0 / s;
        out[0] = inv_s.sqrt();
        let factor = [r[0], r[1], r[2], 1.0];
        for index in 1..out.len() {
            let mut sum = 0.0;
            for term in self.start[index] as usize..self.start[index + 1] as usize {
                let f = factor[(self.axis[term] as usize).min(3)];
                sum += self.coefficient[term] * f * out[self.source[term] as usize];
            }
            out[index] = sum * inv_s;
        }
    }
}

/// Multi-index tables for one expansion order p.
#[derive(Clone, Debug)]
pub(crate) struct Basis {
    /// The order p.
    #[cfg_attr(not(test), allow(dead_code))] // read by the tests
    pub order: usize,
    /// The multi-indices, graded.
    pub exponents: Vec<[u8; 3]>,
    /// Total degree of each multi-index.
    #[cfg_attr(not(test), allow(dead_code))] // read by the tests
    pub degree: Vec<u8>,
    /// For index >= 1: (index of n - e_i, axis i, 1/n_i) with i the first nonzero axis, so
    /// that x^n/n! = x^(n-e_i)/(n-e_i)! * x_i / n_i.
    pub lower: Vec<(u16, u8, f64)>,
    /// For |k| <= p-1 and each axis i: index of k + e_i.
    pub raise: Vec<[u16; 3]>,
    /// Recurrence for the derivatives of the kernel.
    pub recurrence: Recurrence,
    /// M2L: for target index k, `m2l[m2l_start[k]..m2l_start[k+1]]` holds the index of n + k
    /// for n = 0.., over every n with |n| + |k| <= p.
    pub m2l: Vec<u16>,
    /// Offsets into `m2l`.
    pub m2l_start: Vec<usize>,
    /// Shift triples (n, k, n - k) for every k <= n componentwise, |n| <= p.
    pub shift: Vec<[u16; 3]>,
}

impl Basis {
    /// Tables for order `order` (validated by the caller to be at most `MAX_ORDER`).
    pub(crate) fn new(order: usize) -> Self {
        let mut exponents = Vec::with_capacity(terms(order));
        for degree in 0..=order {
            for a in (0..=degree).rev() {
                for b in (0..=degree - a).rev() {
                    let c = degree - a - b;
                    exponents.push([a as u8, b as u8, c as u8]);
                }
            }
        }
        let side = order + 1;
        let mut lookup = vec![u16::MAX; side * side * side];
        let key = |n: [u8; 3]| (n[0] as usize * side + n[1] as usize) * side + n[2] as usize;
        for (index, &n) in exponents.iter().enumerate() {
            lookup[key(n)] = index as u16;
        }
        let index_of = |n: [u8; 3]| lookup[key(n)];
        let degree: Vec<u8> = exponents.iter().map(|n| n[0] + n[1] + n[2]).collect();

        let mut lower = vec![(0, 0, 0.0)];
        let mut recurrence = Recurrence {
            start: vec![0, 0],
            ..Recurrence::default()
        };
        for &n in &exponents[1..] {
            let i = n.iter().position(|&e| e > 0).unwrap_or(0);
            let mut below = n;
            below[i] -= 1;
            lower.push((index_of(below), i as u8, 1.0 / f64::from(n[i])));
            // s D_n = -[ sum_{j != i} (2 n_j x_j D_{n-e_j} + n_j (n_j - 1) D_{n-2e_j})
            //           + (2 n_i - 1) x_i D_{n-e_i} + (n_i - 1)^2 D_{n-2e_i} ],  s = r^2 + eps^2,
            // from applying d^(n-e_i) to s d_i f = -x_i f for f = s^(-1/2).
            for j in 0..3 {
                let nj = f64::from(n[j]);
                let (linear, quadratic) = if j == i {
                    (2.0 * nj - 1.0, (nj - 1.0) * (nj - 1.0))
                } else {
                    (2.0 * nj, nj * (nj - 1.0))
                };
                if n[j] >= 1 && linear != 0.0 {
                    let mut m = n;
                    m[j] -= 1;
                    recurrence.push(index_of(m), j as u8, -linear);
                }
                if n[j] >= 2 && quadratic != 0.0 {
                    let mut m = n;
                    m[j] -= 2;
                    recurrence.push(index_of(m), 3, -quadratic);
                }
            }
            // At most 6 terms per index of at most MAX_ORDER's basis: a u32 holds the count.
            recurrence.start.push(recurrence.len() as u32);
        }

        let below_top = terms(order.saturating_sub(1));
        let raise = exponents[..below_top]
            .iter()
            .map(|&k| {
                let up = |axis: usize| {
                    let mut m = k;
                    m[axis] += 1;
                    index_of(m)
                };
                [up(0), up(1), up(2)]
            })
            .collect();

        let mut m2l = Vec::new();
        let mut m2l_start = vec![0];
        for &k in &exponents {
            let room = order - usize::from(k[0] + k[1] + k[2]);
            for &n in &exponents[..terms(room)] {
                m2l.push(index_of([n[0] + k[0], n[1] + k[1], n[2] + k[2]]));
            }
            m2l_start.push(m2l.len());
        }

        let mut shift = Vec::new();
        for (n_index, &n) in exponents.iter().enumerate() {
            for (k_index, &k) in exponents.iter().enumerate() {
                if k[0] <= n[0] && k[1] <= n[1] && k[2] <= n[2] {
                    let rest = index_of([n[0] - k[0], n[1] - k[1], n[2] - k[2]]);
                    shift.push([n_index as u16, k_index as u16, rest]);
                }
            }
        }

        Self {
            order,
            exponents,
            degree,
            lower,
            raise,
            recurrence,
            m2l,
            m2l_start,
            shift,
        }
    }

    /// Number of coefficients of an expansion.
    pub(crate) fn len(&self) -> usize {
        self.exponents.len()
    }

    /// Fills `out` (length `len()`) with d^n / n! for every multi-index n.
    pub(crate) fn scaled_powers(&self, d: [f64; 3], out: &mut [f64]) {
        out[0] = 1.0;
        for index in 1..out.len() {
            let (below, axis, inv) = self.lower[index];
            out[index] = out[below as usize] * d[axis as usize] * inv;
        }
    }

    /// Fills `out` (length `len()`) with the derivatives d^n g(r) of the kernel
    /// g(r) = (|r|^2 + softening^2)^(-1/2) at `r`, for every multi-index n.
    pub(crate) fn kernel_derivatives(&self, r: [f64; 3], softening2: f64, out: &mut [f64]) {
        self.recurrence.columns().derivatives(r, softening2, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graded_prefixes_and_counts() {
        for p in 1..=12 {
            let basis = Basis::new(p);
            assert_eq!(basis.len(), terms(p));
            for q in 0..=p {
                assert!(basis.degree[..terms(q)]
                    .iter()
                    .all(|&d| usize::from(d) <= q));
            }
        }
    }

    #[test]
    fn derivatives_match_closed_forms_and_finite_differences() {
        let basis = Basis::new(8);
        let r = [0.3, -0.7, 1.1];
        let mut d = vec![0.0; basis.len()];
        basis.kernel_derivatives(r, 0.0, &mut d);
        let norm = (r[0] * r[0] + r[1] * r[1] + r[2] * r[2]).sqrt();
        let idx = |n: [u8; 3]| basis.exponents.iter().position(|&m| m == n).expect("index");
        assert!((d[0] - 1.0 / norm).abs() < 1e-15);
        assert!((d[idx([1, 0, 0])] + r[0] / norm.powi(3)).abs() < 1e-14);
        let xx = 3.0 * r[0] * r[0] / norm.powi(5) - 1.0 / norm.powi(3);
        assert!((d[idx([2, 0, 0])] - xx).abs() < 1e-14);
        let xy = 3.0 * r[0] * r[1] / norm.powi(5);
        assert!((d[idx([1, 1, 0])] - xy).abs() < 1e-14);
        // Every derivative of degree m+1 against a central difference of degree m, with and
        // without softening.
        for softening2 in [0.0, 0.09] {
            basis.kernel_derivatives(r, softening2, &mut d);
            let h = 1e-5;
            for (index, &n) in basis.exponents.iter().enumerate() {
                if basis.degree[index] as usize >= basis.order {
                    continue;
                }
                for axis in 0..3 {
                    let mut plus = r;
                    let mut minus = r;
                    plus[axis] += h;
                    minus[axis] -= h;
                    let mut dp = vec![0.0; basis.len()];
                    let mut dm = vec![0.0; basis.len()];
                    basis.kernel_derivatives(plus, softening2, &mut dp);
                    basis.kernel_derivatives(minus, softening2, &mut dm);
                    let fd = (dp[index] - dm[index]) / (2.0 * h);
                    let mut up = n;
                    up[axis] += 1;
                    let exact = d[idx(up)];
                    assert!(
                        (fd - exact).abs() <= 1e-6 * (1.0 + exact.abs()),
                        "n={n:?} axis={axis}: {fd} vs {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn laplacian_of_derivatives_vanishes() {
        let basis = Basis::new(6);
        let mut d = vec![0.0; basis.len()];
        basis.kernel_derivatives([0.5, 0.2, -0.4], 0.0, &mut d);
        let idx = |n: [u8; 3]| basis.exponents.iter().position(|&m| m == n).expect("index");
        for (index, &n) in basis.exponents.iter().enumerate() {
            if basis.degree[index] as usize + 2 > basis.order {
                continue;
            }
            let lap: f64 = (0..3)
                .map(|axis| {
                    let mut m = n;
                    m[axis] += 2;
                    d[idx(m)]
                })
                .sum();
            assert!(lap.abs() < 1e-10 * d[index].abs().max(1.0), "{n:?}: {lap}");
        }
    }
}
