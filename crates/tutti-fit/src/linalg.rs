//! Small dense symmetric solves for the trust-region step (n = the parameter count, small).

/// Solves `a x = b` for a symmetric positive definite `a` (n x n, row-major) by Cholesky;
/// `None` when `a` is not numerically positive definite.
pub(crate) fn cholesky_solve(a: &[f64], b: &[f64]) -> Option<Vec<f64>> {
    let n = b.len();
    let l = cholesky(a, n)?;
    // Forward: l y = b; backward: l^T x = y.
    let mut y = vec![0.0; n];
    for i in 0..n {
        let sum: f64 = (0..i).map(|k| l[i * n + k] * y[k]).sum();
        y[i] = (b[i] - sum) / l[i * n + i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let sum: f64 = (i + 1..n).map(|k| l[k * n + i] * x[k]).sum();
        x[i] = (y[i] - sum) / l[i * n + i];
    }
    Some(x)
}

/// The inverse of a symmetric positive definite matrix, or `None`.
pub(crate) fn spd_inverse(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut inverse = vec![0.0; n * n];
    for column in 0..n {
        let mut unit = vec![0.0; n];
        unit[column] = 1.0;
        let x = cholesky_solve(a, &unit)?;
        for row in 0..n {
            inverse[row * n + column] = x[row];
        }
    }
    Some(inverse)
}

/// The lower Cholesky factor of `a` (row-major), or `None` if a pivot is not positive.
fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let sum: f64 = (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum();
            if i == j {
                let pivot = a[i * n + i] - sum;
                if !(pivot > 0.0 && pivot.is_finite()) {
                    return None;
                }
                l[i * n + i] = pivot.sqrt();
            } else {
                l[i * n + j] = (a[i * n + j] - sum) / l[j * n + j];
            }
        }
    }
    Some(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solves_and_inverts_a_known_system() {
        // a = [[4, 2], [2, 3]], b = [2, 1] -> x = [0.5, 0]; a^-1 = [[3, -2], [-2, 4]] / 8.
        let a = [4.0, 2.0, 2.0, 3.0];
        let x = cholesky_solve(&a, &[2.0, 1.0]).unwrap();
        assert!((x[0] - 0.5).abs() < 1e-15 && x[1].abs() < 1e-15);
        let inverse = spd_inverse(&a, 2).unwrap();
        for (got, want) in inverse.iter().zip([3.0 / 8.0, -0.25, -0.25, 0.5]) {
            assert!((got - want).abs() < 1e-15);
        }
        assert!(cholesky_solve(&[1.0, 2.0, 2.0, 1.0], &[1.0, 1.0]).is_none());
    }
}
