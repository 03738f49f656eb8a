//! The scalars the solver factors: `f64` and faer's `c64` (`num_complex::Complex<f64>`).
//!
//! [`Scalar`] carries what the kernels need beyond faer's field arithmetic: the magnitude
//! that pivoting compares, finiteness, the replacement of a tiny pivot, and the packing of
//! values into the `f64`s that the group's collectives move. It is sealed: the kernels'
//! bitwise guarantees are argued for these two types only.

use std::borrow::Cow;
use std::fmt::Debug;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

use faer::c64;
use faer::traits::ComplexField;

mod sealed {
    /// Only this crate implements [`super::Scalar`].
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for faer::c64 {}
}

/// A scalar the sparse LU factors in: `f64` or [`c64`] (faer's complex double,
/// `num_complex::Complex<f64>`). Sealed.
///
/// - Magnitudes (pivot search, perturbation threshold, norms, backward errors) are the
///   modulus `|z| = hypot(re, im)`; for `f64`, `|x|`.
/// - A tiny pivot `z` is replaced by `replacement * z / |z|` (its phase kept), or by
///   `replacement` when `z = 0`; for `f64` this is `replacement` with `z`'s sign, `-0.0`
///   included.
/// - The group's collectives move `f64`s: a complex value travels as the pair `(re, im)`.
pub trait Scalar:
    ComplexField<Real = f64>
    + Copy
    + Debug
    + PartialEq
    + Send
    + Sync
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + Sum
    + 'static
    + sealed::Sealed
{
    /// Zero.
    const ZERO: Self;
    /// `f64`s per value in a packed message: 1 for `f64`, 2 (`re`, `im`) for `c64`.
    const PACKED: usize;
    /// The field's name in a Matrix Market header: `real` or `complex`.
    const FIELD: &'static str;

    /// The real number `re`.
    fn from_real(re: f64) -> Self;

    /// `re + i im`, or `None` when the type cannot hold it (an `f64` with `im != 0`).
    fn from_parts(re: f64, im: f64) -> Option<Self>;

    /// The real and imaginary parts (`(x, 0.0)` for an `f64` x).
    fn parts(self) -> (f64, f64);

    /// The magnitude pivoting and norms use: `|z|`.
    fn magnitude(self) -> f64;

    /// Whether every part is finite.
    fn is_finite(self) -> bool;

    /// The complex conjugate (the value itself for `f64`).
    fn conjugate(self) -> Self;

    /// A tiny pivot's replacement of magnitude `replacement`: `replacement * z / |z|`, or
    /// `replacement` when `z` is zero (for `f64`: `replacement` with `z`'s sign).
    fn perturbed(self, replacement: f64) -> Self;

    /// The part to report for a value that is not finite: the real part if it is not
    /// finite, else the imaginary part.
    fn non_finite_part(self) -> f64 {
        let (re, im) = self.parts();
        if re.is_finite() {
            im
        } else {
            re
        }
    }

    /// Appends `values` to `out` as `f64`s ([`Scalar::PACKED`] per value).
    fn pack(values: &[Self], out: &mut Vec<f64>);

    /// The values packed in `packed` (borrowed for `f64`), or `None` when its length is not
    /// a multiple of [`Scalar::PACKED`].
    fn unpack(packed: &[f64]) -> Option<Cow<'_, [Self]>>;
}

impl Scalar for f64 {
    const ZERO: Self = 0.0;
    const PACKED: usize = 1;
    const FIELD: &'static str = "real";

    fn from_real(re: f64) -> Self {
        re
    }

    fn from_parts(re: f64, im: f64) -> Option<Self> {
        (im == 0.0).then_some(re)
    }

    fn parts(self) -> (f64, f64) {
        (self, 0.0)
    }

    fn magnitude(self) -> f64 {
        self.abs()
    }

    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }

    fn conjugate(self) -> Self {
        self
    }

    fn perturbed(self, replacement: f64) -> Self {
        if self.is_sign_negative() {
            -replacement
        } else {
            replacement
        }
    }

    fn pack(values: &[Self], out: &mut Vec<f64>) {
        out.extend_from_slice(values);
    }

    fn unpack(packed: &[f64]) -> Option<Cow<'_, [Self]>> {
        Some(Cow::Borrowed(packed))
    }
}

impl Scalar for c64 {
    const ZERO: Self = c64::new(0.0, 0.0);
    const PACKED: usize = 2;
    const FIELD: &'static str = "complex";

    fn from_real(re: f64) -> Self {
        c64::new(re, 0.0)
    }

    fn from_parts(re: f64, im: f64) -> Option<Self> {
        Some(c64::new(re, im))
    }

    fn parts(self) -> (f64, f64) {
        (self.re, self.im)
    }

    fn magnitude(self) -> f64 {
        self.re.hypot(self.im)
    }

    fn is_finite(self) -> bool {
        self.re.is_finite() && self.im.is_finite()
    }

    fn conjugate(self) -> Self {
        c64::new(self.re, -self.im)
    }

    fn perturbed(self, replacement: f64) -> Self {
        let size = self.magnitude();
        if size == 0.0 {
            c64::new(replacement, 0.0)
        } else {
            c64::new(
                replacement * (self.re / size),
                replacement * (self.im / size),
            )
        }
    }

    fn pack(values: &[Self], out: &mut Vec<f64>) {
        out.reserve(2 * values.len());
        for value in values {
            out.push(value.re);
            out.push(value.im);
        }
    }

    fn unpack(packed: &[f64]) -> Option<Cow<'_, [Self]>> {
        if !packed.len().is_multiple_of(2) {
            return None;
        }
        Some(Cow::Owned(
            packed
                .chunks_exact(2)
                .map(|pair| c64::new(pair[0], pair[1]))
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_perturbation_keeps_the_sign_bits_of_today() {
        for (pivot, want) in [(1e-30, 2.0), (-1e-30, -2.0), (0.0, 2.0), (-0.0, -2.0)] {
            assert_eq!(pivot.perturbed(2.0).to_bits(), f64::to_bits(want));
        }
    }

    #[test]
    fn complex_perturbation_keeps_the_phase() {
        let z = c64::new(3e-30, -4e-30);
        let p = z.perturbed(10.0);
        assert!(
            (p.re - 6.0).abs() < 1e-14 && (p.im + 8.0).abs() < 1e-14,
            "{p:?}"
        );
        assert_eq!(c64::ZERO.perturbed(2.0), c64::new(2.0, 0.0));
        assert_eq!(c64::new(3.0, 4.0).magnitude(), 5.0);
    }

    #[test]
    fn packing_round_trips() {
        let values = [c64::new(1.0, -2.0), c64::new(-0.0, 3.5)];
        let mut packed = Vec::new();
        c64::pack(&values, &mut packed);
        assert_eq!(packed, [1.0, -2.0, -0.0, 3.5]);
        assert_eq!(c64::unpack(&packed).as_deref(), Some(&values[..]));
        assert!(c64::unpack(&packed[..3]).is_none());
        let reals = [1.0, -0.0];
        let mut packed = Vec::new();
        f64::pack(&reals, &mut packed);
        assert_eq!(f64::unpack(&packed).as_deref(), Some(&reals[..]));
        assert!(c64::new(1.0, f64::NAN).non_finite_part().is_nan());
        assert!(!Scalar::is_finite(c64::new(f64::INFINITY, 0.0)));
    }
}
