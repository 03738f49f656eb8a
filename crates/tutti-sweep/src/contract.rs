//! Exact contractions of trains: the product of a stack, inner products, norms, distances.
//!
//! All by site-by-site contraction; no dense vector of the full space is ever formed.

use faer::Par;

use crate::layer::Layer;
use crate::linalg;
use crate::stack::{Stack, StackReader};
use crate::tensor::{Axis, Tensor};
use crate::train::{Core, CoreShape, TensorTrain};
use crate::{Scalar, SweepError};

/// The product of a stack's cores at one site: axes
/// `[Left(0..L), Phys(0), Phys(L), Right(0..L)]` (the fused bonds are MPO-major:
/// layer 0's index is the slowest).
pub(crate) fn site_product<T: Scalar>(stack: &Stack, cores: &[Tensor<T>], par: Par) -> Tensor<T> {
    let depth = stack.depth();
    let mut product = cores[depth - 1].clone();
    for core in cores[..depth - 1].iter().rev() {
        product = core.contract(&product, par);
    }
    let mut order = stack.left_axes();
    order.push(Axis::Phys(0));
    order.push(Axis::Phys(depth));
    order.extend(stack.right_axes());
    product.permuted(&order)
}

/// The exact product of a stack as one train, bonds the products of the layers' bonds
/// (fused MPO-major: `a_0 * D_1 * ... + a_1 * ... + a_{L-1}`).
///
/// The result is an MPS when the stack ends in a ket or starts with a bra, else an MPO.
/// Memory: the product's cores, `sum_k D_k p_k D_{k+1}` entries with `D` the product of the
/// layers' bonds; meant for tests, baselines and small stacks.
pub fn exact_product<T: Scalar>(layers: &[&dyn Layer<T>]) -> Result<TensorTrain<T>, SweepError> {
    let stack = Stack::new(layers)?;
    let mut reader = StackReader::new(&stack, layers, false)?;
    let mut cores = Vec::with_capacity(stack.sites);
    for site in 0..stack.sites {
        let site_cores = reader.next_site(site)?;
        let product = site_product(&stack, &site_cores, faer::get_global_parallelism());
        let left = stack.fused_left(site);
        let right: usize = stack.shapes.iter().map(|s| s[site].right).product();
        let shape = stack.out_shape(site, left, right);
        cores.push(Core {
            shape,
            data: product.data,
        });
    }
    Ok(TensorTrain::from_trusted(stack.out_kind, cores))
}

fn flat<T: Scalar>(core: &Core<T>, left: Axis, right: Axis) -> Tensor<T> {
    let s = core.shape;
    Tensor::new(
        core.data.clone(),
        vec![s.left, s.phys(), s.right],
        vec![left, Axis::Phys(0), right],
    )
}

fn check_same_shape<T: Scalar>(x: &TensorTrain<T>, y: &TensorTrain<T>) -> Result<(), SweepError> {
    if x.len() != y.len() {
        return Err(SweepError::LengthMismatch {
            detail: format!("the trains have {} and {} sites", x.len(), y.len()),
        });
    }
    for (site, (a, b)) in x.cores().iter().zip(y.cores()).enumerate() {
        if (a.shape.d_out, a.shape.d_in) != (b.shape.d_out, b.shape.d_in) {
            return Err(SweepError::PhysicalMismatch {
                site,
                upper: 0,
                upper_in: a.shape.phys(),
                lower: 1,
                lower_out: b.shape.phys(),
            });
        }
    }
    Ok(())
}

/// The inner product `<x|y> = sum conj(x) y` over every index (physical legs of an MPO
/// included: the Frobenius inner product), by contraction of transfer matrices.
///
/// Errors: different lengths or physical dimensions.
pub fn inner<T: Scalar>(x: &TensorTrain<T>, y: &TensorTrain<T>) -> Result<T, SweepError> {
    check_same_shape(x, y)?;
    let mut env = Tensor::<T>::unit(vec![Axis::Left(0), Axis::Left(1)]);
    for (a, b) in x.cores().iter().zip(y.cores()) {
        let xa = flat(a, Axis::Left(0), Axis::Right(0)).conj();
        let yb = flat(b, Axis::Left(1), Axis::Right(1));
        env = env.contract(&xa, Par::Seq).contract(&yb, Par::Seq);
        env = env
            .permuted(&[Axis::Right(0), Axis::Right(1)])
            .rename(Axis::Right(0), Axis::Left(0))
            .rename(Axis::Right(1), Axis::Left(1));
    }
    Ok(env.data.first().copied().unwrap_or_else(T::zero))
}

/// The 2-norm `||x||` (Frobenius for an MPO), by a left-to-right QR sweep: backward stable,
/// so small norms (of differences) are accurate to rounding of the cores, not of the square.
pub fn norm<T: Scalar>(x: &TensorTrain<T>) -> f64 {
    let mut carry = vec![T::one()];
    let mut rows = 1;
    for core in x.cores() {
        let s = core.shape;
        let (p, right) = (s.phys(), s.right);
        let mut m = vec![T::zero(); rows * p * right];
        crate::tensor::gemm_row_major(
            &mut m,
            &carry,
            &core.data,
            rows,
            s.left,
            p * right,
            Par::Seq,
        );
        let (_, r) = linalg::qr(&m, rows * p, right);
        rows = (rows * p).min(right);
        carry = r;
    }
    carry.iter().map(|v| v.abs2()).sum::<f64>().sqrt()
}

/// `||x - y||`, as the norm of the difference train (bonds Dx + Dy), so it is accurate even
/// when `x` and `y` agree to rounding.
///
/// Errors: different lengths or physical dimensions.
pub fn distance<T: Scalar>(x: &TensorTrain<T>, y: &TensorTrain<T>) -> Result<f64, SweepError> {
    check_same_shape(x, y)?;
    Ok(norm(&difference(x, y)))
}

/// The train `x - y` with block bonds `Dx + Dy`.
pub(crate) fn difference<T: Scalar>(x: &TensorTrain<T>, y: &TensorTrain<T>) -> TensorTrain<T> {
    let n = x.len();
    let mut cores = Vec::with_capacity(n);
    for site in 0..n {
        let (a, b) = (&x.cores()[site], &y.cores()[site]);
        let (sa, sb) = (a.shape, b.shape);
        let p = sa.phys();
        let left = if site == 0 { 1 } else { sa.left + sb.left };
        let right = if site + 1 == n {
            1
        } else {
            sa.right + sb.right
        };
        let mut data = vec![T::zero(); left * p * right];
        // x's block at offset (0, 0); y's at (Dx_left, Dx_right), clipped at the ends, with a
        // minus sign on y's last core (or its only core).
        let (yl, yr) = (
            if site == 0 { 0 } else { sa.left },
            if site + 1 == n { 0 } else { sa.right },
        );
        let sign = if site + 1 == n { -T::one() } else { T::one() };
        for l in 0..sa.left {
            for q in 0..p {
                for r in 0..sa.right {
                    data[(l * p + q) * right + r] = a.data[(l * p + q) * sa.right + r];
                }
            }
        }
        for l in 0..sb.left {
            for q in 0..p {
                for r in 0..sb.right {
                    let v = sign * b.data[(l * p + q) * sb.right + r];
                    data[((l + yl) * p + q) * right + r + yr] += v;
                }
            }
        }
        let shape = CoreShape { left, right, ..sa };
        cores.push(Core { shape, data });
    }
    TensorTrain::from_trusted(x.kind(), cores)
}

/// Whether every core but the first is right-orthonormal: the largest entry of
/// `sum_{p,r} A[a,p,r] conj(A[b,p,r]) - delta_ab` over sites 1..n.
pub fn right_orthonormality_error<T: Scalar>(x: &TensorTrain<T>) -> f64 {
    let mut worst = 0.0f64;
    for core in x.cores().iter().skip(1) {
        let s = core.shape;
        let width = s.phys() * s.right;
        for a in 0..s.left {
            for b in 0..s.left {
                let mut sum = T::zero();
                for c in 0..width {
                    sum += core.data[a * width + c] * core.data[b * width + c].conj();
                }
                let target = if a == b { T::one() } else { T::zero() };
                worst = worst.max((sum - target).abs2().sqrt());
            }
        }
    }
    worst
}
