//! Fallible allocation of buffers whose size comes from the input.
//!
//! A size read from a file header or derived from an option is reserved with
//! `try_reserve_exact`, so a request the allocator cannot meet comes back as
//! [`SweepError::OutOfMemory`] instead of aborting the process.

use crate::SweepError;

/// The bytes of `len` elements of `T`, saturating (for messages).
fn bytes_of<T>(len: usize) -> u64 {
    u64::try_from(len)
        .unwrap_or(u64::MAX)
        .saturating_mul(std::mem::size_of::<T>() as u64)
}

/// An empty vector with room for exactly `len` elements, or `OutOfMemory` naming `what`.
pub(crate) fn try_with_capacity<T>(
    len: usize,
    what: impl FnOnce() -> String,
) -> Result<Vec<T>, SweepError> {
    let mut out = Vec::new();
    out.try_reserve_exact(len)
        .map_err(|_| SweepError::OutOfMemory {
            what: what(),
            bytes: bytes_of::<T>(len),
        })?;
    Ok(out)
}

/// `len` copies of `value`, or `OutOfMemory` naming `what`.
pub(crate) fn try_filled_vec<T: Clone>(
    len: usize,
    value: T,
    what: impl FnOnce() -> String,
) -> Result<Vec<T>, SweepError> {
    let mut out = try_with_capacity(len, what)?;
    out.resize(len, value);
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn impossible_requests_are_errors() {
        let err = try_filled_vec(usize::MAX / 2, 0.0f64, || "a test buffer".into()).unwrap_err();
        assert!(
            matches!(&err, SweepError::OutOfMemory { bytes, .. } if *bytes == u64::MAX),
            "{err}"
        );
        assert!(err.to_string().contains("a test buffer"), "{err}");
        assert_eq!(try_filled_vec(3, 1u8, String::new).unwrap(), vec![1, 1, 1]);
    }
}
