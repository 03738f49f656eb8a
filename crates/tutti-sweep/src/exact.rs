//! The optimal baseline: contract the stack exactly, then truncate by SVD; and the
//! canonicalisation and truncation sweeps shared with SRC.

use faer::get_global_parallelism;

use crate::contract::exact_product;
use crate::layer::Layer;
use crate::linalg::{kept_rank, lq, qr, svd};
use crate::tensor::gemm_row_major;
use crate::train::{Core, CoreShape, TensorTrain};
use crate::{Scalar, SweepError};

/// Diagnostics of [`compress_exact`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ExactInfo {
    /// `||X||` of the exact product X.
    pub norm: f64,
    /// The sum of the squared discarded singular values, `||X - X_chi||^2`.
    pub discarded_weight: f64,
    /// `sqrt(discarded_weight) / ||X||`: the relative error of the result, the smallest any
    /// train with these bonds reaches (up to the sweep's sequential truncation).
    pub relative_error: f64,
    /// The bonds of the exact product before truncation.
    pub exact_bonds: Vec<usize>,
}

/// Contracts the stack exactly and truncates it to bonds <= `chi` by SVD: the optimal
/// baseline SRC is measured against.
///
/// The exact product (bonds = products of the layers' bonds) is left-canonicalised by QR, then
/// truncated right to left by SVD, keeping at each bond at most `chi` singular values and only
/// those above `cutoff * sigma_max` (see [`crate::SrcOptions::cutoff`]). The result is
/// right-canonical (site 0 carries the norm). Memory and time grow with the exact bonds:
/// this is a baseline, not the fast path.
///
/// Errors: those of the stack ([`crate::src`]), `chi = 0`, a negative or non-finite cutoff.
pub fn compress_exact<T: Scalar>(
    layers: &[&dyn Layer<T>],
    chi: usize,
    cutoff: f64,
) -> Result<(TensorTrain<T>, ExactInfo), SweepError> {
    check_chi_cutoff(chi, cutoff)?;
    let product = exact_product(layers)?;
    let exact_bonds = product.bonds();
    let canonical = left_canonicalize(product);
    let norm = canonical
        .cores()
        .last()
        .map(|c| c.data.iter().map(|x| x.abs2()).sum::<f64>().sqrt())
        .unwrap_or(0.0);
    let (train, discarded_weight) = truncate_right_to_left(canonical, chi, cutoff)?;
    let relative_error = if norm > 0.0 {
        discarded_weight.sqrt() / norm
    } else {
        0.0
    };
    Ok((
        train,
        ExactInfo {
            norm,
            discarded_weight,
            relative_error,
            exact_bonds,
        },
    ))
}

pub(crate) fn check_chi_cutoff(chi: usize, cutoff: f64) -> Result<(), SweepError> {
    if chi == 0 {
        return Err(SweepError::InvalidOption {
            name: "chi_out",
            value: "0".into(),
            expected: "at least 1",
        });
    }
    if !cutoff.is_finite() || !(0.0..1.0).contains(&cutoff) {
        return Err(SweepError::InvalidOption {
            name: "cutoff",
            value: cutoff.to_string(),
            expected: "a relative singular-value cutoff in [0, 1)",
        });
    }
    Ok(())
}

/// `core (Dl x p*Dr)` with its left bond multiplied by `m (rows x Dl)`: a core with left bond
/// `rows`.
fn absorb_left<T: Scalar>(m: &[T], rows: usize, core: &Core<T>) -> Core<T> {
    let s = core.shape;
    let width = s.phys() * s.right;
    let mut data = vec![T::zero(); rows * width];
    // The same parallelism as the QR and SVD of these sweeps (faer's global setting): the
    // baseline should not be held to one thread where SRC uses them all.
    gemm_row_major(
        &mut data,
        m,
        &core.data,
        rows,
        s.left,
        width,
        get_global_parallelism(),
    );
    Core {
        shape: CoreShape { left: rows, ..s },
        data,
    }
}

/// `core (Dl*p x Dr)` with its right bond multiplied by `m (Dr x cols)`.
fn absorb_right<T: Scalar>(core: &Core<T>, m: &[T], cols: usize) -> Core<T> {
    let s = core.shape;
    let height = s.left * s.phys();
    let mut data = vec![T::zero(); height * cols];
    gemm_row_major(
        &mut data,
        &core.data,
        m,
        height,
        s.right,
        cols,
        get_global_parallelism(),
    );
    Core {
        shape: CoreShape { right: cols, ..s },
        data,
    }
}

/// The same train with sites 0..n-2 left-orthonormal (QR, left to right); the last core
/// carries the norm. Bonds may shrink to the ranks' upper bounds.
pub(crate) fn left_canonicalize<T: Scalar>(train: TensorTrain<T>) -> TensorTrain<T> {
    let kind = train.kind();
    let mut cores = train.into_cores();
    for k in 0..cores.len().saturating_sub(1) {
        let s = cores[k].shape;
        let (q, r) = qr(&cores[k].data, s.left * s.phys(), s.right);
        let rank = (s.left * s.phys()).min(s.right);
        cores[k] = Core {
            shape: CoreShape { right: rank, ..s },
            data: q,
        };
        cores[k + 1] = absorb_left(&r, rank, &cores[k + 1]);
    }
    TensorTrain::from_trusted(kind, cores)
}

/// The same train with sites 1..n-1 right-orthonormal (LQ, right to left); site 0 carries
/// the norm.
pub(crate) fn right_canonicalize<T: Scalar>(train: TensorTrain<T>) -> TensorTrain<T> {
    let kind = train.kind();
    let mut cores = train.into_cores();
    for k in (1..cores.len()).rev() {
        let s = cores[k].shape;
        let width = s.phys() * s.right;
        let (l, q) = lq(&cores[k].data, s.left, width);
        let rank = s.left.min(width);
        cores[k] = Core {
            shape: CoreShape { left: rank, ..s },
            data: q,
        };
        cores[k - 1] = absorb_right(&cores[k - 1], &l, rank);
    }
    TensorTrain::from_trusted(kind, cores)
}

/// SVD truncation right to left of a left-canonical train (sites 0..n-2 left-orthonormal):
/// optimal at every bond; returns the right-canonical result and the discarded weight.
pub(crate) fn truncate_right_to_left<T: Scalar>(
    train: TensorTrain<T>,
    chi: usize,
    cutoff: f64,
) -> Result<(TensorTrain<T>, f64), SweepError> {
    let kind = train.kind();
    let mut cores = train.into_cores();
    let mut discarded = 0.0;
    for k in (1..cores.len()).rev() {
        let s = cores[k].shape;
        let width = s.phys() * s.right;
        let (u, sigma, vh) = svd(&cores[k].data, s.left, width, k)?;
        let full = sigma.len();
        let keep = kept_rank(&sigma, chi, cutoff);
        discarded += sigma[keep..].iter().map(|x| x * x).sum::<f64>();
        let mut us = Vec::with_capacity(s.left * keep);
        for i in 0..s.left {
            for j in 0..keep {
                us.push(u[i * full + j] * T::from_real(sigma[j]));
            }
        }
        cores[k] = Core {
            shape: CoreShape { left: keep, ..s },
            data: vh[..keep * width].to_vec(),
        };
        cores[k - 1] = absorb_right(&cores[k - 1], &us, keep);
    }
    Ok((TensorTrain::from_trusted(kind, cores), discarded))
}

/// SVD truncation left to right of a right-canonical train (sites 1..n-1 right-orthonormal):
/// optimal at every bond; returns the left-canonical result and the discarded weight.
pub(crate) fn truncate_left_to_right<T: Scalar>(
    train: TensorTrain<T>,
    chi: usize,
    cutoff: f64,
) -> Result<(TensorTrain<T>, f64), SweepError> {
    let kind = train.kind();
    let mut cores = train.into_cores();
    let mut discarded = 0.0;
    for k in 0..cores.len().saturating_sub(1) {
        let s = cores[k].shape;
        let height = s.left * s.phys();
        let (u, sigma, vh) = svd(&cores[k].data, height, s.right, k)?;
        let full = sigma.len();
        let keep = kept_rank(&sigma, chi, cutoff);
        discarded += sigma[keep..].iter().map(|x| x * x).sum::<f64>();
        let mut kept_u = Vec::with_capacity(height * keep);
        for i in 0..height {
            kept_u.extend_from_slice(&u[i * full..i * full + keep]);
        }
        let mut svh = Vec::with_capacity(keep * s.right);
        for i in 0..keep {
            let scale = T::from_real(sigma[i]);
            svh.extend(
                vh[i * s.right..(i + 1) * s.right]
                    .iter()
                    .map(|&v| scale * v),
            );
        }
        cores[k] = Core {
            shape: CoreShape { right: keep, ..s },
            data: kept_u,
        };
        cores[k + 1] = absorb_left(&svh, keep, &cores[k + 1]);
    }
    Ok((TensorTrain::from_trusted(kind, cores), discarded))
}
