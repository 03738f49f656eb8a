//! Every rank of a split factorization must factor the same matrix and solve for the same
//! right-hand sides; in a group spanning processes nothing else makes them agree, and a
//! rank given other values would silently make wrong factors. A digest of what each rank
//! was given (pattern and values; right-hand sides), gathered once per factorization and
//! per solve, turns that into an error on every rank. The digest is for accidents, not
//! adversaries: a word-wise multiplicative mix of the values' bits, four lanes wide (about
//! a third of a nanosecond per value), next to which the factorization's cost is large.

use tutti_group::Comm;

use crate::{Scalar, SparseError};

/// Lanes mixed independently, so the multiplications overlap.
const LANES: usize = 4;

/// A digest of words.
#[derive(Clone, Debug)]
pub(crate) struct Digest {
    lanes: [u64; LANES],
    count: u64,
}

impl Digest {
    /// An empty digest.
    pub fn new() -> Self {
        Self {
            lanes: [
                0x243f_6a88_85a3_08d3,
                0x1319_8a2e_0370_7344,
                0xa409_3822_299f_31d0,
                0x082e_fa98_ec4e_6c89,
            ],
            count: 0,
        }
    }

    /// Mixes `words` in.
    pub fn words(&mut self, words: impl IntoIterator<Item = u64>) -> &mut Self {
        let mut lane = (self.count % LANES as u64) as usize;
        for word in words {
            let mixed = (self.lanes[lane] ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            self.lanes[lane] = mixed.rotate_left(29);
            lane = (lane + 1) % LANES;
            self.count = self.count.wrapping_add(1);
        }
        self
    }

    /// Mixes the bits of `values` in (both parts of a complex value).
    pub fn values<T: Scalar>(&mut self, values: &[T]) -> &mut Self {
        self.words(values.iter().flat_map(|v| {
            let (re, im) = v.parts();
            [re.to_bits(), im.to_bits()].into_iter().take(T::PACKED)
        }))
    }

    /// The digest.
    pub fn finish(&self) -> u64 {
        self.lanes
            .iter()
            .fold(self.count, |h, &lane| {
                (h ^ lane).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            })
            .rotate_left(31)
    }
}

/// Gathers every rank's `digest` of `what` and fails on every rank alike when any differs
/// from rank 0's.
///
/// Errors: [`SparseError::InvalidArgument`] naming the ranks that differ; a collective's.
pub(crate) fn agree(comm: &Comm<'_>, digest: u64, what: &str) -> Result<(), SparseError> {
    let all = comm.allgather(&[digest])?;
    let first = all.first().and_then(|d| d.first()).copied();
    let differing: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, d)| d.first().copied() != first)
        .map(|(rank, _)| rank)
        .collect();
    if differing.is_empty() {
        return Ok(());
    }
    Err(SparseError::argument(format!(
        "the ranks were given different {what}: those of rank(s) {differing:?} differ from \
         rank 0's (every rank, in every process, passes the same)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bit_anywhere_changes_the_digest() {
        let values: Vec<f64> = (0..37).map(|i| i as f64 * 0.25 - 3.0).collect();
        let reference = Digest::new().values(&values).finish();
        assert_eq!(Digest::new().values(&values).finish(), reference);
        for i in 0..values.len() {
            let mut changed = values.clone();
            changed[i] = f64::from_bits(changed[i].to_bits() ^ 1);
            assert_ne!(
                Digest::new().values(&changed).finish(),
                reference,
                "value {i}"
            );
        }
        // Order and length count.
        let mut swapped = values.clone();
        swapped.swap(3, 4);
        assert_ne!(Digest::new().values(&swapped).finish(), reference);
        assert_ne!(Digest::new().values(&values[..36]).finish(), reference);
        let mut zero = values.clone();
        zero.push(0.0);
        assert_ne!(Digest::new().values(&zero).finish(), reference);
    }
}
