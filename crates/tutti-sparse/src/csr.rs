//! Compressed sparse row matrices: validated on construction, rows sorted, duplicates summed.

use crate::{Scalar, SparseError};

/// A sparse matrix in compressed sparse row form, real (`T = f64`, the default) or complex
/// (`T = c64`).
///
/// Row `i` holds the columns `indices[indptr[i]..indptr[i + 1]]`, strictly increasing, with
/// their `values`. Explicit zeros are kept: they are part of the pattern a factorization is
/// analysed for (a Jacobian whose entry vanishes at one time step keeps its slot).
#[derive(Clone, Debug, PartialEq)]
pub struct CsrMatrix<T = f64> {
    rows: usize,
    cols: usize,
    indptr: Vec<usize>,
    indices: Vec<usize>,
    values: Vec<T>,
}

impl<T: Scalar> CsrMatrix<T> {
    /// A matrix from its compressed rows (scipy's `csr_matrix((data, indices, indptr))`).
    /// Columns within a row may come in any order; duplicates are summed (as scipy's
    /// `sum_duplicates`).
    ///
    /// Errors: `indptr` not of length `rows + 1`, not starting at 0, decreasing, or not
    /// ending at the number of entries; `indices` and `values` of different lengths; a
    /// column `>= cols`; a value that is not finite.
    pub fn try_new(
        rows: usize,
        cols: usize,
        indptr: Vec<usize>,
        indices: Vec<usize>,
        values: Vec<T>,
    ) -> Result<Self, SparseError> {
        if indptr.len() != rows.saturating_add(1) {
            return Err(SparseError::invalid(format!(
                "indptr has {} entries for {rows} rows (rows + 1 needed)",
                indptr.len()
            )));
        }
        if indices.len() != values.len() {
            return Err(SparseError::invalid(format!(
                "{} column indices but {} values",
                indices.len(),
                values.len()
            )));
        }
        if indptr[0] != 0 {
            return Err(SparseError::invalid(format!(
                "indptr starts at {}, not 0",
                indptr[0]
            )));
        }
        if let Some(row) = (0..rows).find(|&i| indptr[i] > indptr[i + 1]) {
            return Err(SparseError::invalid(format!(
                "indptr decreases at row {row} ({} then {})",
                indptr[row],
                indptr[row + 1]
            )));
        }
        if indptr[rows] != indices.len() {
            return Err(SparseError::invalid(format!(
                "indptr ends at {} but there are {} entries",
                indptr[rows],
                indices.len()
            )));
        }
        for i in 0..rows {
            for p in indptr[i]..indptr[i + 1] {
                let j = indices[p];
                if j >= cols {
                    return Err(SparseError::invalid(format!(
                        "row {i} has column {j}, out of range for {cols} columns"
                    )));
                }
                if !values[p].is_finite() {
                    return Err(SparseError::NonFinite {
                        row: i,
                        col: j,
                        value: values[p].non_finite_part(),
                    });
                }
            }
        }
        Ok(Self::canonical(rows, cols, &indptr, &indices, &values))
    }

    /// A matrix from `(row, column, value)` triplets in any order, duplicates summed.
    ///
    /// Errors: an index out of range, a value that is not finite, a row count too large to
    /// allocate its row pointers.
    pub fn from_triplets(
        rows: usize,
        cols: usize,
        triplets: &[(usize, usize, T)],
    ) -> Result<Self, SparseError> {
        let mut counts = zeros(rows, "the row pointers")?;
        for (k, &(i, j, value)) in triplets.iter().enumerate() {
            if i >= rows || j >= cols {
                return Err(SparseError::invalid(format!(
                    "triplet {k} is at ({i}, {j}), outside a {rows} x {cols} matrix"
                )));
            }
            if !value.is_finite() {
                return Err(SparseError::NonFinite {
                    row: i,
                    col: j,
                    value: value.non_finite_part(),
                });
            }
            counts[i + 1] += 1;
        }
        for i in 0..rows {
            counts[i + 1] += counts[i];
        }
        let mut next = counts.clone();
        let mut indices = vec![0; triplets.len()];
        let mut values = vec![T::ZERO; triplets.len()];
        for &(i, j, value) in triplets {
            indices[next[i]] = j;
            values[next[i]] = value;
            next[i] += 1;
        }
        Ok(Self::canonical(rows, cols, &counts, &indices, &values))
    }

    /// A matrix from its compressed columns (scipy's `csc_matrix((data, indices, indptr))`),
    /// with the checks of [`CsrMatrix::try_new`] on the columns.
    pub fn from_csc(
        rows: usize,
        cols: usize,
        colptr: Vec<usize>,
        row_indices: Vec<usize>,
        values: Vec<T>,
    ) -> Result<Self, SparseError> {
        // The CSC arrays of A are the CSR arrays of A^T.
        Self::try_new(cols, rows, colptr, row_indices, values)?.transpose()
    }

    /// Sorted rows with duplicates summed, from arrays already checked.
    fn canonical(
        rows: usize,
        cols: usize,
        indptr: &[usize],
        indices: &[usize],
        values: &[T],
    ) -> Self {
        let mut out_ptr = Vec::with_capacity(rows + 1);
        let mut out_indices = Vec::with_capacity(indices.len());
        let mut out_values = Vec::with_capacity(values.len());
        out_ptr.push(0);
        let mut row: Vec<(usize, T)> = Vec::new();
        for i in 0..rows {
            row.clear();
            row.extend((indptr[i]..indptr[i + 1]).map(|p| (indices[p], values[p])));
            // A stable sort keeps duplicates in input order, so their sum is reproducible.
            row.sort_by_key(|&(j, _)| j);
            for &(j, value) in &row {
                if out_indices.len() > out_ptr[i] && out_indices.last() == Some(&j) {
                    if let Some(last) = out_values.last_mut() {
                        *last += value;
                    }
                } else {
                    out_indices.push(j);
                    out_values.push(value);
                }
            }
            out_ptr.push(out_indices.len());
        }
        Self {
            rows,
            cols,
            indptr: out_ptr,
            indices: out_indices,
            values: out_values,
        }
    }

    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The number of stored entries.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    /// Row pointers: row `i` is `indptr()[i]..indptr()[i + 1]`.
    pub fn indptr(&self) -> &[usize] {
        &self.indptr
    }

    /// Column indices, row after row, increasing within a row.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }

    /// Values, in the order of [`CsrMatrix::indices`].
    pub fn values(&self) -> &[T] {
        &self.values
    }

    /// Row `i`'s columns and values.
    ///
    /// Panics if `i >= rows()`.
    pub fn row(&self, i: usize) -> (&[usize], &[T]) {
        let range = self.indptr[i]..self.indptr[i + 1];
        (&self.indices[range.clone()], &self.values[range])
    }

    /// The same pattern with new values (a Jacobian at a new state).
    ///
    /// Errors: `values` of another length, or not finite.
    pub fn with_values(&self, values: Vec<T>) -> Result<Self, SparseError> {
        if values.len() != self.nnz() {
            return Err(SparseError::LengthMismatch {
                what: "values",
                got: values.len(),
                expected: self.nnz(),
            });
        }
        self.check_finite(&values)?;
        Ok(Self {
            values,
            ..self.clone()
        })
    }

    /// This pattern with `values` of scalar type `U`.
    ///
    /// Errors: `values` of another length, or not finite.
    pub(crate) fn with_values_of<U: Scalar>(
        &self,
        values: Vec<U>,
    ) -> Result<CsrMatrix<U>, SparseError> {
        let pattern = CsrMatrix {
            rows: self.rows,
            cols: self.cols,
            indptr: self.indptr.clone(),
            indices: self.indices.clone(),
            values: Vec::new(),
        };
        check_len("values", values.len(), self.nnz())?;
        pattern.check_finite(&values)?;
        Ok(CsrMatrix { values, ..pattern })
    }

    /// Errors with the first entry of `values` (on this pattern) that is not finite.
    pub(crate) fn check_finite(&self, values: &[T]) -> Result<(), SparseError> {
        match values.iter().position(|v| !v.is_finite()) {
            None => Ok(()),
            Some(p) => {
                let row = self.indptr.partition_point(|&start| start <= p) - 1;
                Err(SparseError::NonFinite {
                    row,
                    col: self.indices[p],
                    value: values[p].non_finite_part(),
                })
            }
        }
    }

    /// Whether `other` has exactly this pattern (dimensions, row pointers, columns).
    pub fn same_pattern<U: Scalar>(&self, other: &CsrMatrix<U>) -> bool {
        self.rows == other.rows
            && self.cols == other.cols
            && self.indptr == other.indptr
            && self.indices == other.indices
    }

    /// `y = A x`.
    ///
    /// Errors: `x` or `y` of the wrong length.
    pub fn matvec(&self, x: &[T], y: &mut [T]) -> Result<(), SparseError> {
        check_len("x", x.len(), self.cols)?;
        check_len("y", y.len(), self.rows)?;
        for (i, out) in y.iter_mut().enumerate() {
            let (cols, vals) = self.row(i);
            *out = cols.iter().zip(vals).map(|(&j, &a)| a * x[j]).sum();
        }
        Ok(())
    }

    /// The transpose, with sorted rows.
    ///
    /// Errors: [`SparseError::TooLarge`] when the transpose's row pointers (one per column)
    /// cannot be allocated.
    pub fn transpose(&self) -> Result<CsrMatrix<T>, SparseError> {
        let mut counts = zeros(self.cols, "the transpose's row pointers")?;
        for &j in &self.indices {
            counts[j + 1] += 1;
        }
        for j in 0..self.cols {
            counts[j + 1] += counts[j];
        }
        let mut next = counts.clone();
        let mut indices = vec![0; self.nnz()];
        let mut values = vec![T::ZERO; self.nnz()];
        for i in 0..self.rows {
            let (cols, vals) = self.row(i);
            for (&j, &v) in cols.iter().zip(vals) {
                indices[next[j]] = i;
                values[next[j]] = v;
                next[j] += 1;
            }
        }
        // Rows of A are visited in order, so every row of A^T is already sorted.
        Ok(CsrMatrix {
            rows: self.cols,
            cols: self.rows,
            indptr: counts,
            indices,
            values,
        })
    }

    /// The largest row sum of magnitudes, `||A||_inf` (with `|z|` for a complex entry).
    pub fn norm_inf(&self) -> f64 {
        (0..self.rows)
            .map(|i| self.row(i).1.iter().map(|v| v.magnitude()).sum::<f64>())
            .fold(0.0, f64::max)
    }

    /// The largest magnitude of an entry (`|z|` for a complex entry).
    pub fn max_abs(&self) -> f64 {
        self.values.iter().fold(0.0, |m, v| m.max(v.magnitude()))
    }

    /// The same matrix with complex values (imaginary parts zero).
    pub fn to_complex(&self) -> CsrMatrix<faer::c64> {
        CsrMatrix {
            rows: self.rows,
            cols: self.cols,
            indptr: self.indptr.clone(),
            indices: self.indices.clone(),
            values: self
                .values
                .iter()
                .map(|v| {
                    let (re, im) = v.parts();
                    faer::c64::new(re, im)
                })
                .collect(),
        }
    }
}

/// `len + 1` zeros (row pointers), allocated fallibly: a dimension from input too large to
/// hold is an error, not an abort.
fn zeros(len: usize, what: &'static str) -> Result<Vec<usize>, SparseError> {
    let too_large = || SparseError::TooLarge {
        what,
        detail: format!("{len} + 1 entries"),
    };
    let count = len.checked_add(1).ok_or_else(too_large)?;
    let mut out = Vec::new();
    out.try_reserve_exact(count).map_err(|_| too_large())?;
    out.resize(count, 0);
    Ok(out)
}

/// Errors unless `got == expected`.
pub(crate) fn check_len(
    what: &'static str,
    got: usize,
    expected: usize,
) -> Result<(), SparseError> {
    if got == expected {
        Ok(())
    } else {
        Err(SparseError::LengthMismatch {
            what,
            got,
            expected,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_summed_and_rows_sorted() -> Result<(), SparseError> {
        let a = CsrMatrix::try_new(
            2,
            3,
            vec![0, 3, 4],
            vec![2, 0, 2, 1],
            vec![1.0, 2.0, 3.0, 4.0],
        )?;
        assert_eq!(a.indptr(), &[0, 2, 3]);
        assert_eq!(a.indices(), &[0, 2, 1]);
        assert_eq!(a.values(), &[2.0, 4.0, 4.0]);
        let t =
            CsrMatrix::from_triplets(2, 3, &[(1, 1, 4.0), (0, 2, 1.0), (0, 0, 2.0), (0, 2, 3.0)])?;
        assert_eq!(t, a);
        assert_eq!(a.transpose()?.transpose()?, a);
        let mut y = [0.0; 2];
        a.matvec(&[1.0, 10.0, 100.0], &mut y)?;
        assert_eq!(y, [402.0, 40.0]);
        Ok(())
    }

    #[test]
    fn malformed_arrays_are_errors() {
        let bad = [
            CsrMatrix::try_new(2, 2, vec![0, 1], vec![0], vec![1.0]),
            CsrMatrix::try_new(2, 2, vec![1, 1, 1], vec![0], vec![1.0]),
            CsrMatrix::try_new(2, 2, vec![0, 2, 1], vec![0], vec![1.0]),
            CsrMatrix::try_new(2, 2, vec![0, 1, 2], vec![0, 2], vec![1.0, 1.0]),
            CsrMatrix::try_new(2, 2, vec![0, 1, 2], vec![0, 1], vec![1.0]),
            CsrMatrix::try_new(2, 2, vec![0, 1, 1], vec![0], vec![f64::NAN]),
        ];
        for result in bad {
            assert!(result.is_err(), "{result:?}");
        }
    }
}
