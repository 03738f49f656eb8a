//! Element types that buffers and collectives can carry.

/// A plain-old-data element: any type that can be copied byte for byte between host and device
/// memory (`f32`, `f64`, integers, `Complex<f64>`, ...).
///
/// Implemented for every [`bytemuck::Pod`] type that is `Send + Sync + Debug`.
pub trait Element: bytemuck::Pod + Send + Sync + std::fmt::Debug {}

impl<T: bytemuck::Pod + Send + Sync + std::fmt::Debug> Element for T {}

/// An element that can be summed, for reductions.
///
/// Sums are taken in a fixed order by the callers (rank 0, 1, 2, ...), so a reduction's result
/// does not depend on timing.
pub trait Summable: Element {
    /// The additive identity.
    const ZERO: Self;
    /// `self + other`.
    fn add(self, other: Self) -> Self;
}

macro_rules! summable {
    ($($t:ty => $zero:expr),* $(,)?) => {
        $(impl Summable for $t {
            const ZERO: Self = $zero;
            #[inline]
            fn add(self, other: Self) -> Self { self + other }
        })*
    };
}

summable!(
    f32 => 0.0, f64 => 0.0,
    i32 => 0, i64 => 0, u32 => 0, u64 => 0, usize => 0,
    num_complex::Complex<f32> => num_complex::Complex::new(0.0, 0.0),
    num_complex::Complex<f64> => num_complex::Complex::new(0.0, 0.0),
);
