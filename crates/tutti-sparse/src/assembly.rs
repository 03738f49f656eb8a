//! A caller's compressed arrays (rows or columns, any order, duplicates allowed) mapped once
//! onto the canonical CSR pattern, so that each new set of values in the caller's order
//! becomes a [`CsrMatrix`] without sorting again: what a C or Python caller that refactors
//! with new values needs.

use crate::csr::CsrMatrix;
use crate::{Scalar, SparseError};

/// Which way the caller's arrays are compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compressed {
    /// By rows (CSR): `pointers` has `rows + 1` entries, `indices` holds columns.
    Rows,
    /// By columns (CSC, scipy's `csc_matrix` and `splu`'s input): `pointers` has `cols + 1`
    /// entries, `indices` holds rows.
    Columns,
}

/// The map from a caller's entries to the slots of the canonical pattern.
///
/// Entry `k` of the caller's arrays lands in slot `slots[k]` of the pattern's values;
/// duplicates share a slot and are summed in the caller's order, so the sum is the same
/// bits on every call.
#[derive(Clone, Debug, PartialEq)]
pub struct Assembly {
    pattern: CsrMatrix,
    slots: Vec<usize>,
}

impl Assembly {
    /// Maps the compressed arrays of a `rows x cols` matrix (0-based indices).
    ///
    /// Errors ([`SparseError::InvalidMatrix`]): `pointers` of the wrong length, not
    /// starting at 0, decreasing, or not ending at `indices.len()`; an index out of range;
    /// sizes too large to allocate ([`SparseError::TooLarge`]).
    pub fn new(
        rows: usize,
        cols: usize,
        pointers: &[usize],
        indices: &[usize],
        layout: Compressed,
    ) -> Result<Self, SparseError> {
        let (outer, inner) = match layout {
            Compressed::Rows => (rows, cols),
            Compressed::Columns => (cols, rows),
        };
        let (outer_name, inner_name) = match layout {
            Compressed::Rows => ("row", "column"),
            Compressed::Columns => ("column", "row"),
        };
        check_pointers(pointers, outer, indices.len(), outer_name)?;
        let mut triplets = try_vec(indices.len())?;
        for o in 0..outer {
            for &i in &indices[pointers[o]..pointers[o + 1]] {
                if i >= inner {
                    return Err(SparseError::invalid(format!(
                        "{outer_name} {o} has {inner_name} {i}, out of range for {inner} \
                         {inner_name}s"
                    )));
                }
                triplets.push(match layout {
                    Compressed::Rows => (o, i, 0.0),
                    Compressed::Columns => (i, o, 0.0),
                });
            }
        }
        let pattern = CsrMatrix::from_triplets(rows, cols, &triplets)?;
        let mut slots = try_vec(triplets.len())?;
        for &(i, j, _) in &triplets {
            let start = pattern.indptr()[i];
            let (columns, _) = pattern.row(i);
            let offset = columns
                .binary_search(&j)
                .map_err(|_| SparseError::invalid(format!("entry ({i}, {j}) lost its slot")))?;
            slots.push(start + offset);
        }
        Ok(Self { pattern, slots })
    }

    /// The canonical pattern (values zero): what [`crate::analyse`] orders.
    pub fn pattern(&self) -> &CsrMatrix {
        &self.pattern
    }

    /// The number of the caller's entries (duplicates counted).
    pub fn entries(&self) -> usize {
        self.slots.len()
    }

    /// The matrix with `values` (real or complex) in the caller's order, duplicates summed.
    ///
    /// Errors: `values` of another length than [`Assembly::entries`]
    /// ([`SparseError::LengthMismatch`]); a value that is not finite
    /// ([`SparseError::NonFinite`], at its row and column).
    pub fn matrix<T: Scalar>(&self, values: &[T]) -> Result<CsrMatrix<T>, SparseError> {
        if values.len() != self.slots.len() {
            return Err(SparseError::LengthMismatch {
                what: "values",
                got: values.len(),
                expected: self.slots.len(),
            });
        }
        let mut summed = try_vec(self.pattern.nnz())?;
        summed.resize(self.pattern.nnz(), T::ZERO);
        for (&slot, &value) in self.slots.iter().zip(values) {
            if !value.is_finite() {
                let row = self
                    .pattern
                    .indptr()
                    .partition_point(|&start| start <= slot)
                    - 1;
                let col = self.pattern.indices()[slot];
                return Err(SparseError::NonFinite {
                    row,
                    col,
                    value: value.non_finite_part(),
                });
            }
            summed[slot] += value;
        }
        self.pattern.with_values_of(summed)
    }
}

/// Checks compressed pointers: `outer + 1` of them, from 0, never decreasing, ending at
/// `entries`.
fn check_pointers(
    pointers: &[usize],
    outer: usize,
    entries: usize,
    name: &str,
) -> Result<(), SparseError> {
    if pointers.len() != outer.saturating_add(1) {
        return Err(SparseError::invalid(format!(
            "the pointers have {} entries for {outer} {name}s ({name}s + 1 needed)",
            pointers.len()
        )));
    }
    if pointers[0] != 0 {
        return Err(SparseError::invalid(format!(
            "the pointers start at {}, not 0",
            pointers[0]
        )));
    }
    if let Some(o) = (0..outer).find(|&o| pointers[o] > pointers[o + 1]) {
        return Err(SparseError::invalid(format!(
            "the pointers decrease at {name} {o} ({} then {})",
            pointers[o],
            pointers[o + 1]
        )));
    }
    if pointers[outer] != entries {
        return Err(SparseError::invalid(format!(
            "the pointers end at {} but there are {entries} indices",
            pointers[outer]
        )));
    }
    Ok(())
}

/// An empty vector with room for `len` items, or [`SparseError::TooLarge`].
fn try_vec<T>(len: usize) -> Result<Vec<T>, SparseError> {
    let mut out = Vec::new();
    out.try_reserve_exact(len)
        .map_err(|_| SparseError::TooLarge {
            what: "the matrix's entries",
            detail: format!("{len} entries"),
        })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [[1, 0, 2], [0, 3, 0], [4, 0, 5]] with entry (0, 2) given twice (1.5 + 0.5).
    #[test]
    fn rows_and_columns_give_the_same_matrix() {
        let expected = CsrMatrix::from_triplets(
            3,
            3,
            &[
                (0, 0, 1.0),
                (0, 2, 2.0),
                (1, 1, 3.0),
                (2, 0, 4.0),
                (2, 2, 5.0),
            ],
        )
        .expect("valid");
        // Rows, columns unsorted, a duplicate.
        let by_rows = Assembly::new(3, 3, &[0, 3, 4, 6], &[2, 0, 2, 1, 2, 0], Compressed::Rows)
            .expect("valid rows");
        let a = by_rows
            .matrix(&[1.5, 1.0, 0.5, 3.0, 5.0, 4.0])
            .expect("finite");
        assert_eq!(a, expected);
        // Columns.
        let by_columns = Assembly::new(3, 3, &[0, 2, 3, 5], &[2, 0, 1, 0, 2], Compressed::Columns)
            .expect("valid columns");
        assert_eq!(
            by_columns
                .matrix(&[4.0, 1.0, 3.0, 2.0, 5.0])
                .expect("finite"),
            expected
        );
        assert_eq!(by_columns.entries(), 5);
        assert_eq!(by_rows.entries(), 6);
        assert_eq!(by_rows.pattern().nnz(), 5);
    }

    #[test]
    fn rectangular_columns_are_transposed_right() {
        // 2 x 3: [[1, 0, 2], [0, 3, 0]] by columns.
        let cols =
            Assembly::new(2, 3, &[0, 1, 2, 3], &[0, 1, 0], Compressed::Columns).expect("valid");
        let a = cols.matrix(&[1.0, 3.0, 2.0]).expect("finite");
        assert_eq!((a.rows(), a.cols()), (2, 3));
        assert_eq!(a.indptr(), &[0, 2, 3]);
        assert_eq!(a.indices(), &[0, 2, 1]);
        assert_eq!(a.values(), &[1.0, 2.0, 3.0]);
    }

    #[test]
    fn bad_arrays_and_values_are_errors() {
        let invalid = [
            Assembly::new(2, 2, &[0, 1], &[0], Compressed::Rows),
            Assembly::new(2, 2, &[1, 1, 1], &[0], Compressed::Rows),
            Assembly::new(2, 2, &[0, 2, 1], &[0, 1], Compressed::Rows),
            Assembly::new(2, 2, &[0, 1, 3], &[0, 1], Compressed::Rows),
            Assembly::new(2, 2, &[0, 1, 2], &[0, 2], Compressed::Rows),
            Assembly::new(2, 3, &[0, 1, 2, 3], &[0, 1, 2], Compressed::Columns),
        ];
        for result in invalid {
            assert!(
                matches!(result, Err(SparseError::InvalidMatrix { .. })),
                "{result:?}"
            );
        }
        let assembly =
            Assembly::new(2, 2, &[0, 1, 2], &[1, 0], Compressed::Columns).expect("valid");
        assert!(matches!(
            assembly.matrix(&[1.0]),
            Err(SparseError::LengthMismatch {
                got: 1,
                expected: 2,
                ..
            })
        ));
        // Entry 1 of the columns is (0, 1).
        assert!(matches!(
            assembly.matrix(&[1.0, f64::NAN]),
            Err(SparseError::NonFinite { row: 0, col: 1, .. })
        ));
    }
}
