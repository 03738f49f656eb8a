//! The Gaussian Khatri–Rao sketch, drawn by key so any device can draw any column.
//!
//! Column j of the sketch is `g_0^(j) ⊗ g_1^(j) ⊗ ... ⊗ g_{n-2}^(j)`, one Gaussian vector per
//! site over the product's fused physical leg. The draws for (site k, column j) come from a
//! ChaCha8 stream keyed by (seed, k, j) alone, so they do not depend on which device draws them
//! or how the columns are split.

use std::ops::Range;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::memory::try_with_capacity;
use crate::{Scalar, SweepError};

/// The generator of sketch column `column` at `site`.
fn column_rng(seed: u64, site: usize, column: usize) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&(site as u64).to_le_bytes());
    key[16..24].copy_from_slice(&(column as u64).to_le_bytes());
    key[24..].copy_from_slice(b"tuttiSRC");
    ChaCha8Rng::from_seed(key)
}

/// The sketch vectors of `columns` at `site`: row-major (columns.len() x phys), row i the
/// vector of column `columns.start + i` (N(0,1) entries, complex Ginibre for complex `T`).
///
/// Errors: `OutOfMemory` when the block cannot be allocated.
pub(crate) fn sketch_block<T: Scalar>(
    seed: u64,
    site: usize,
    columns: Range<usize>,
    phys: usize,
) -> Result<Vec<T>, SweepError> {
    let len = columns.len().saturating_mul(phys);
    let mut out = try_with_capacity(len, || {
        format!(
            "the sketch vectors of site {site} ({} columns x {phys})",
            columns.len()
        )
    })?;
    for column in columns {
        let mut rng = column_rng(seed, site, column);
        out.extend((0..phys).map(|_| T::gaussian(&mut rng)));
    }
    Ok(out)
}

/// The contiguous block of `0..total` that rank `rank` of `size` owns: sizes differ by at most
/// one, the first `total % size` ranks holding the larger blocks (some may be empty).
pub(crate) fn block(total: usize, size: usize, rank: usize) -> Range<usize> {
    let base = total / size;
    let extra = total % size;
    let start = rank * base + rank.min(extra);
    let len = base + usize::from(rank < extra);
    start..start + len
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn columns_do_not_depend_on_the_split() {
        let draw = |seed, site, columns| sketch_block::<f64>(seed, site, columns, 4).unwrap();
        let whole = draw(7, 3, 0..10);
        let mut pieces = Vec::new();
        for rank in 0..3 {
            pieces.extend(draw(7, 3, block(10, 3, rank)));
        }
        assert_eq!(whole, pieces);
        assert_ne!(whole, draw(7, 4, 0..10));
        assert_ne!(whole, draw(8, 3, 0..10));
    }

    #[test]
    fn blocks_cover_the_range() {
        for total in 0..9 {
            for size in 1..5 {
                let mut next = 0;
                for rank in 0..size {
                    let b = block(total, size, rank);
                    assert_eq!(b.start, next);
                    next = b.end;
                }
                assert_eq!(next, total);
            }
        }
    }
}
