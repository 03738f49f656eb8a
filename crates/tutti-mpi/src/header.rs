//! The header every rank sends every other rank at the start of a round, and the verdict all
//! ranks draw from the headers they received: the same verdict everywhere, since each rank's
//! headers differ only in the block length meant for the receiver.

use crate::wire::WireError;

/// Bytes of one encoded header.
pub(crate) const HEADER_BYTES: usize = 40;

/// What a rank is doing in a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// An exchange: the rank sends blocks and expects blocks.
    Exchange,
    /// The rank failed; its text is its error's.
    Failed,
    /// The rank finished its work and makes no more exchanges.
    Left,
}

impl Status {
    fn code(self) -> u64 {
        match self {
            Self::Exchange => 0,
            Self::Failed => 1,
            Self::Left => 2,
        }
    }

    fn from_code(code: u64) -> Option<Self> {
        match code {
            0 => Some(Self::Exchange),
            1 => Some(Self::Failed),
            2 => Some(Self::Left),
            _ => None,
        }
    }
}

/// One rank's header to one receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) status: Status,
    /// The round, counted from 0 in each session: a check that the ranks are in step.
    pub(crate) round: u64,
    /// A hash of the rank's signature text (0 outside an exchange).
    pub(crate) signature_hash: u64,
    /// Bytes of the block this rank sends the receiver.
    pub(crate) block_len: u64,
    /// Bytes of this rank's text (failure message or signature), sent when the verdict
    /// needs the texts.
    pub(crate) text_len: u64,
}

impl Header {
    pub(crate) fn encode(&self, out: &mut [u8]) {
        let words = [
            self.status.code(),
            self.round,
            self.signature_hash,
            self.block_len,
            self.text_len,
        ];
        for (chunk, word) in out.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
    }

    pub(crate) fn decode(bytes: &[u8], from: usize) -> Result<Self, WireError> {
        let word = |index: usize| {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(&bytes[index * 8..index * 8 + 8]);
            u64::from_le_bytes(raw)
        };
        let status = Status::from_code(word(0)).ok_or_else(|| {
            WireError(format!(
                "rank {from} sent a round header with an unknown status {} (a different \
                 tutti build on that rank?)",
                word(0)
            ))
        })?;
        Ok(Self {
            status,
            round: word(1),
            signature_hash: word(2),
            block_len: word(3),
            text_len: word(4),
        })
    }
}

/// FNV-1a, 64 bits: the signature texts are short and only compared for equality (a hash
/// collision would let a mismatch through as an exchange of the wrong shapes, which the
/// typed collectives then reject by length).
pub(crate) fn text_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// What every rank concludes from one round's headers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every rank exchanges with the same signature: move the blocks.
    Exchange,
    /// Every rank left: the run ended cleanly.
    AllLeft,
    /// Some rank failed; the lowest failing rank is the origin everyone reports.
    Failed { origin: usize },
    /// Some rank left while others called an exchange.
    Left { rank: usize, waiting: Vec<usize> },
    /// The ranks called different collectives.
    Mismatch,
}

impl Verdict {
    /// Whether the texts of the round must be exchanged to report this verdict.
    pub(crate) fn needs_texts(&self) -> bool {
        !matches!(self, Self::Exchange | Self::AllLeft)
    }
}

/// The verdict from `headers[i]`, the header received from rank `i`.
pub(crate) fn verdict(headers: &[Header], round: u64) -> Result<Verdict, WireError> {
    if let Some((rank, header)) = headers.iter().enumerate().find(|(_, h)| h.round != round) {
        return Err(WireError(format!(
            "rank {rank} is in round {} of the run while this rank is in round {round}: the \
             ranks are out of step (a rank of another run on the same communicator?)",
            header.round
        )));
    }
    let ranks_with = |status: Status| -> Vec<usize> {
        (0..headers.len())
            .filter(|&r| headers[r].status == status)
            .collect()
    };
    if let Some(&origin) = ranks_with(Status::Failed).first() {
        return Ok(Verdict::Failed { origin });
    }
    let left = ranks_with(Status::Left);
    if left.len() == headers.len() {
        return Ok(Verdict::AllLeft);
    }
    if let Some(&rank) = left.first() {
        return Ok(Verdict::Left {
            rank,
            waiting: ranks_with(Status::Exchange),
        });
    }
    let first = headers.first().map_or(0, |h| h.signature_hash);
    if headers.iter().any(|h| h.signature_hash != first) {
        return Ok(Verdict::Mismatch);
    }
    Ok(Verdict::Exchange)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(status: Status, hash: u64) -> Header {
        Header {
            status,
            round: 3,
            signature_hash: hash,
            block_len: 0,
            text_len: 0,
        }
    }

    #[test]
    fn encoding_round_trips() {
        let original = Header {
            status: Status::Left,
            round: u64::MAX - 1,
            signature_hash: 0x0123_4567_89ab_cdef,
            block_len: 1 << 40,
            text_len: 17,
        };
        let mut bytes = [0u8; HEADER_BYTES];
        original.encode(&mut bytes);
        assert_eq!(Header::decode(&bytes, 0), Ok(original));
        bytes[0] = 9;
        assert!(Header::decode(&bytes, 2)
            .unwrap_err()
            .0
            .contains("rank 2 sent a round header with an unknown status 9"));
    }

    #[test]
    fn failure_outranks_leaving_and_mismatch() {
        let headers = [
            header(Status::Left, 0),
            header(Status::Exchange, 1),
            header(Status::Failed, 0),
            header(Status::Failed, 0),
        ];
        assert_eq!(verdict(&headers, 3), Ok(Verdict::Failed { origin: 2 }));
    }

    #[test]
    fn leaving_while_others_wait_names_both() {
        let headers = [
            header(Status::Exchange, 5),
            header(Status::Left, 0),
            header(Status::Exchange, 5),
        ];
        assert_eq!(
            verdict(&headers, 3),
            Ok(Verdict::Left {
                rank: 1,
                waiting: vec![0, 2]
            })
        );
        let all_left = [header(Status::Left, 0), header(Status::Left, 0)];
        assert_eq!(verdict(&all_left, 3), Ok(Verdict::AllLeft));
    }

    #[test]
    fn signatures_decide_between_exchange_and_mismatch() {
        let same = [header(Status::Exchange, 7), header(Status::Exchange, 7)];
        assert_eq!(verdict(&same, 3), Ok(Verdict::Exchange));
        let different = [header(Status::Exchange, 7), header(Status::Exchange, 8)];
        assert_eq!(verdict(&different, 3), Ok(Verdict::Mismatch));
        assert_ne!(
            text_hash("barrier<()>"),
            text_hash("allreduce_sum<f64> len 1")
        );
    }

    #[test]
    fn ranks_out_of_step_are_a_wire_error() {
        let mut headers = [header(Status::Exchange, 7), header(Status::Exchange, 7)];
        headers[1].round = 4;
        let err = verdict(&headers, 3).unwrap_err();
        assert!(err.0.contains("rank 1 is in round 4"), "{err}");
    }
}
