//! The rows of a shell pair's expansion table. A row is one product of output functions
//! (m_a, m_b) of the two sets, in block order (m_a major): the sets' Cartesian-to-output
//! transforms are folded into the table, so a kernel's block comes out over the output
//! functions with no transform after it. A row's Hermite indices are those any of its
//! Cartesian products (c_a, c_b) can reach: t <= c_a,x + c_b,x, and so on per axis.
//!
//! Folding costs longer rows for functions of several monomials (d_z2 = 2 z^2 - x^2 - y^2):
//! the rows of a d-d pair hold 391 entries over 25 rows instead of 336 over 36 Cartesian
//! products; but a quartet's other side then runs over 25 rows instead of 36, and the four
//! transforms of its block (8% of a J/K build of c2h6/def2-TZVP) are gone.

use super::functions::FunctionShell;

/// A pair's row layout (see the module doc).
#[derive(Clone, Debug, Default)]
pub(crate) struct PairRows {
    /// The Hermite indices (into `hermite_indices(order)`) of each row, rows concatenated,
    /// each row's in ascending order.
    pub(crate) pattern: Vec<usize>,
    /// Where each row starts in `pattern` (rows + 1 entries).
    pub(crate) row_starts: Vec<usize>,
    /// The Cartesian products of each row, (c_a, c_b, transform product), rows
    /// concatenated.
    pub(crate) terms: Vec<(usize, usize, f64)>,
    /// Where each row starts in `terms` (rows + 1 entries).
    pub(crate) term_starts: Vec<usize>,
}

impl PairRows {
    /// The layout of the pair (a, b), over `hermite`, the Hermite indices of order
    /// `a.degree + b.degree`.
    pub(crate) fn new(a: &FunctionShell, b: &FunctionShell, hermite: &[[usize; 3]]) -> Self {
        let mut rows = Self {
            row_starts: vec![0],
            term_starts: vec![0],
            ..Self::default()
        };
        for ma in 0..a.functions {
            for mb in 0..b.functions {
                for ca in 0..a.monomials.len() {
                    let factor_a = a.transform[ca * a.functions + ma];
                    if factor_a == 0.0 {
                        continue;
                    }
                    for cb in 0..b.monomials.len() {
                        let factor_b = b.transform[cb * b.functions + mb];
                        if factor_b != 0.0 {
                            rows.terms.push((ca, cb, factor_a * factor_b));
                        }
                    }
                }
                let terms = &rows.terms[rows.term_starts[rows.term_starts.len() - 1]..];
                for (h, index) in hermite.iter().enumerate() {
                    if terms
                        .iter()
                        .any(|&(ca, cb, _)| reaches(a.monomials[ca], b.monomials[cb], *index))
                    {
                        rows.pattern.push(h);
                    }
                }
                rows.row_starts.push(rows.pattern.len());
                rows.term_starts.push(rows.terms.len());
            }
        }
        rows
    }

    /// Number of rows (output function products).
    pub(crate) fn len(&self) -> usize {
        self.row_starts.len() - 1
    }
}

/// Whether the Cartesian product of monomials `a` and `b` has a non-zero Hermite
/// coefficient at `index`: t <= a_x + b_x, u <= a_y + b_y, v <= a_z + b_z.
pub(crate) fn reaches(a: [usize; 3], b: [usize; 3], index: [usize; 3]) -> bool {
    (0..3).all(|axis| index[axis] <= a[axis] + b[axis])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::basis::{AngularKind, Shell};
    use crate::integrals::hermite::hermite_indices;

    fn shell(l: usize) -> FunctionShell {
        let shell = Shell {
            l,
            center: [0.0; 3],
            atom: 0,
            exponents: vec![1.0],
            coefficients: vec![1.0],
            contraction: vec![1.0],
        };
        FunctionShell::from_shell(&shell, AngularKind::Spherical)
    }

    /// The entry counts of the folded rows: by hand for d with s, and p with p (one
    /// monomial per function, so each row is its product's box); the d-d and f-f totals
    /// are the module doc's figures, from an independent count (sympy's real solid
    /// harmonics' monomials, boxes united per row).
    #[test]
    fn folded_rows_hold_the_union_of_their_products_patterns() {
        let entries = |la: usize, lb: usize| {
            let (a, b) = (shell(la), shell(lb));
            let rows = PairRows::new(&a, &b, &hermite_indices(la + lb));
            assert_eq!(rows.len(), a.functions * b.functions);
            rows.pattern.len()
        };
        // d_xy, d_yz, d_xz: 4 each with an s; d_x2-y2: t <= 2 or u <= 2 (5); d_z2: 7.
        assert_eq!(entries(2, 0), 4 + 4 + 4 + 5 + 7);
        assert_eq!(entries(2, 2), 391);
        assert_eq!(entries(3, 3), 2143);
        // s and p: one monomial per function, the Cartesian boxes: p_x p_x reaches t <= 2
        // (3 entries), p_x p_y t, u <= 1 (4).
        assert_eq!(entries(1, 1), 3 * 3 + 6 * 4);
        let p = shell(1);
        let rows = PairRows::new(&p, &p, &hermite_indices(2));
        for row in 0..rows.len() {
            let terms = rows.term_starts[row + 1] - rows.term_starts[row];
            assert_eq!(terms, 1, "a p function is one monomial");
        }
    }
}
