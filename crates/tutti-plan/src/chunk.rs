//! Chunk sizes: how many items to process at once so the working set fits.

use crate::PlanError;

/// A split of `items` items into chunks of at most `size` items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunking {
    /// Items per chunk (the last chunk may hold fewer); 0 only when there are no items.
    pub size: usize,
    /// Chunks needed to cover every item: `items.div_ceil(size)`, 0 when there are none.
    pub count: usize,
}

/// The largest chunk of items whose working set fits in `available` bytes.
///
/// A chunk of `k` items needs `fixed_bytes + k * bytes_per_item` bytes. The chunk size is
/// `min(items, (available - fixed_bytes) / bytes_per_item)`: every item at once when
/// `bytes_per_item` is 0. Zero items give zero chunks of size 0, whatever the bytes. The
/// arithmetic cannot overflow.
///
/// Errors: [`PlanError::ChunkDoesNotFit`] when there are items and not even a chunk of one
/// fits (`fixed_bytes + bytes_per_item > available`).
///
/// ```
/// use tutti_plan::{largest_chunk, Chunking};
///
/// // 1000 B available, 100 B fixed, 64 B per item: 14 items per chunk (996 B), 8 chunks.
/// assert_eq!(largest_chunk(100, 64, 100, 1000)?, Chunking { size: 14, count: 8 });
/// # Ok::<(), tutti_plan::PlanError>(())
/// ```
pub fn largest_chunk(
    items: usize,
    bytes_per_item: u64,
    fixed_bytes: u64,
    available: u64,
) -> Result<Chunking, PlanError> {
    if items == 0 {
        return Ok(Chunking { size: 0, count: 0 });
    }
    let does_not_fit = || PlanError::ChunkDoesNotFit {
        fixed_bytes,
        bytes_per_item,
        available,
    };
    let room = available
        .checked_sub(fixed_bytes)
        .ok_or_else(does_not_fit)?;
    let size = match room.checked_div(bytes_per_item) {
        // Nothing per item: all items at once.
        None => items,
        // More than usize::MAX items fit: all of them.
        Some(fitting) => usize::try_from(fitting).map_or(items, |fitting| fitting.min(items)),
    };
    if size == 0 {
        return Err(does_not_fit());
    }
    Ok(Chunking {
        size,
        count: items.div_ceil(size),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(items: usize, per_item: u64, fixed: u64, available: u64, size: usize, count: usize) {
        assert_eq!(
            largest_chunk(items, per_item, fixed, available).expect("fits"),
            Chunking { size, count },
            "largest_chunk({items}, {per_item}, {fixed}, {available})"
        );
    }

    #[test]
    fn chunk_sizes_are_exact() {
        check(100, 64, 100, 1000, 14, 8);
        check(100, 10, 0, 1000, 100, 1);
        check(100, 10, 0, 999, 99, 2);
        check(7, 3, 1, 10, 3, 3);
        check(7, 3, 1, 4, 1, 7);
        check(5, 0, 10, 10, 5, 1);
        check(0, 8, 1000, 10, 0, 0);
        check(usize::MAX, 1, 0, u64::MAX, usize::MAX, 1);
        check(3, u64::MAX, 0, u64::MAX, 1, 3);
        check(3, 1, u64::MAX - 2, u64::MAX, 2, 2);
    }

    #[test]
    fn one_item_that_does_not_fit_is_an_error_with_numbers() {
        let err = largest_chunk(10, 512, 1024, 1400).unwrap_err();
        assert!(matches!(err, PlanError::ChunkDoesNotFit { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            "a chunk of one item needs 1.5 KiB (1.0 KiB fixed + 512 B per item), 1.4 KiB available"
        );
        let err = largest_chunk(10, 0, 11, 10).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a chunk of one item needs 11 B (11 B fixed + 0 B per item), 10 B available"
        );
        assert!(largest_chunk(1, u64::MAX, u64::MAX, u64::MAX).is_err());
    }
}
