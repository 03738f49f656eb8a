//! The element types a tensor train may hold: `f64` and `Complex64` (complex128).

use num_complex::Complex64;
use rand::Rng;
use rand_distr::StandardNormal;

/// An element type of a tensor train: `f64` or [`Complex64`].
///
/// Everything the sweep needs from a number: arithmetic, conjugation, the `.npy` dtype, the
/// dense kernels (faer), the collectives (`tutti_backend::Element`, and `Summable` for the
/// reductions), the device's compute
/// calls and kernels (`BlasScalar`, which also gives `COMPLEX`, `zero` and `one`;
/// `Permutable`) and Gaussian draws.
pub trait Scalar:
    faer::traits::ComplexField<Real = f64>
    + tutti_backend::Element
    + tutti_backend::Summable
    + tutti_backend::BlasScalar
    + tutti_backend::kernel::builtin::Permutable
    + npyz::AutoSerialize
    + npyz::Deserialize
    + Copy
    + Default
    + PartialEq
    + Send
    + Sync
    + std::fmt::Debug
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Neg<Output = Self>
    + std::ops::AddAssign
    + std::ops::MulAssign
    + 'static
{
    /// Its numpy dtype string (little endian): `<f8` or `<c16`.
    const DTYPE: &'static str;
    /// Its name in messages: `float64` or `complex128`.
    const NAME: &'static str;
    /// The real number `x`.
    fn from_real(x: f64) -> Self;
    /// The value of a complex number, or `None` where this type cannot hold it (a complex
    /// number with a nonzero imaginary part read as `f64` is refused before this is called).
    fn from_complex(z: Complex64) -> Self;
    /// This value as a complex number.
    fn to_complex(self) -> Complex64;
    /// The complex conjugate (the value itself for `f64`).
    fn conj(self) -> Self;
    /// |x|^2.
    fn abs2(self) -> f64;
    /// The real part.
    fn re(self) -> f64;
    /// Whether every component is finite (neither NaN nor infinite).
    fn finite(self) -> bool;
    /// One standard Gaussian draw: N(0,1) for `f64`; complex Ginibre (N(0,1/2) + i N(0,1/2))
    /// for `Complex64`, so that E|x|^2 = 1 either way.
    fn gaussian<R: Rng>(rng: &mut R) -> Self;
}

impl Scalar for f64 {
    const DTYPE: &'static str = "<f8";
    const NAME: &'static str = "float64";
    fn from_real(x: f64) -> Self {
        x
    }
    fn from_complex(z: Complex64) -> Self {
        z.re
    }
    fn to_complex(self) -> Complex64 {
        Complex64::new(self, 0.0)
    }
    fn conj(self) -> Self {
        self
    }
    fn abs2(self) -> f64 {
        self * self
    }
    fn re(self) -> f64 {
        self
    }
    fn finite(self) -> bool {
        self.is_finite()
    }
    fn gaussian<R: Rng>(rng: &mut R) -> Self {
        rng.sample(StandardNormal)
    }
}

impl Scalar for Complex64 {
    const DTYPE: &'static str = "<c16";
    const NAME: &'static str = "complex128";
    fn from_real(x: f64) -> Self {
        Complex64::new(x, 0.0)
    }
    fn from_complex(z: Complex64) -> Self {
        z
    }
    fn to_complex(self) -> Complex64 {
        self
    }
    fn conj(self) -> Self {
        Complex64::conj(&self)
    }
    fn abs2(self) -> f64 {
        self.norm_sqr()
    }
    fn re(self) -> f64 {
        self.re
    }
    fn finite(self) -> bool {
        self.re.is_finite() && self.im.is_finite()
    }
    fn gaussian<R: Rng>(rng: &mut R) -> Self {
        let re: f64 = rng.sample(StandardNormal);
        let im: f64 = rng.sample(StandardNormal);
        Complex64::new(re, im) * std::f64::consts::FRAC_1_SQRT_2
    }
}
