//! The start-up handshake: every process of a world runs the same tutti build over the same
//! MPI library, or none of them starts.
//!
//! Processes of different tutti versions would speak different round protocols, and a
//! binary built against one MPI run under another's launcher misreads its handles; both fail
//! later in ways that name neither cause. So adopting an MPI world exchanges one
//! fixed-size text per process (the tutti version, the round protocol, the pointer width
//! and the MPI library's version line) and every process refuses a world whose texts differ,
//! naming the first process that differs and both texts.

use crate::header::HEADER_BYTES;
use crate::wire::Wire;

/// Bytes of each process's build text in the handshake (longer texts are cut).
pub(crate) const BUILD_TEXT_BYTES: usize = 256;

/// What must be equal on every process: this build and the MPI library it runs over.
pub(crate) fn build_text(library_version: &str) -> String {
    format!(
        "tutti {}; round protocol with {HEADER_BYTES}-byte headers; {}-bit; {}",
        env!("CARGO_PKG_VERSION"),
        usize::BITS,
        library_version
    )
}

/// `text` as one piece of the handshake: cut to [`BUILD_TEXT_BYTES`] (at a character
/// boundary) and padded with NULs.
fn piece(text: &str) -> Vec<u8> {
    let mut end = text.len().min(BUILD_TEXT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut piece = text.as_bytes()[..end].to_vec();
    piece.resize(BUILD_TEXT_BYTES, 0);
    piece
}

/// Checks the pieces every process sent (`received`, process-major) against this one's
/// `text`.
pub(crate) fn check_builds(text: &str, received: &[u8]) -> Result<(), String> {
    let mine = piece(text);
    let shown = |piece: &[u8]| {
        let end = piece.iter().position(|&b| b == 0).unwrap_or(piece.len());
        String::from_utf8_lossy(&piece[..end]).into_owned()
    };
    let pieces: Vec<&[u8]> = received.chunks(BUILD_TEXT_BYTES).collect();
    let first = pieces.first().copied().unwrap_or(&mine[..]);
    match pieces.iter().position(|piece| *piece != first) {
        None if first == &mine[..] => Ok(()),
        None => Err(format!(
            "this process runs `{text}`, the others `{}`",
            shown(first)
        )),
        Some(rank) => Err(format!(
            "the processes run different builds: rank 0 runs `{}` and rank {rank} runs `{}`; \
             build every process from one tutti against the MPI its launcher belongs to",
            shown(first),
            shown(pieces[rank])
        )),
    }
}

/// The handshake over `wire`: collective; `Err` on every process alike when builds differ.
pub(crate) fn handshake<W: Wire>(wire: &mut W, library_version: &str) -> Result<(), String> {
    let text = build_text(library_version);
    let send = piece(&text).repeat(wire.size());
    let received = wire
        .all_to_all(send, BUILD_TEXT_BYTES)
        .map_err(|err| format!("the start-up handshake failed: {err}"))?;
    check_builds(&text, &received)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_builds_pass_and_the_first_difference_is_named() {
        let text = build_text("Open MPI v4.1.4");
        let same = piece(&text).repeat(3);
        assert_eq!(check_builds(&text, &same), Ok(()));
        let other = build_text("MPICH Version: 4.0.2");
        let mixed = [piece(&text), piece(&text), piece(&other)].concat();
        let err = check_builds(&text, &mixed).unwrap_err();
        assert!(err.contains("rank 2 runs `tutti"), "{err}");
        assert!(err.contains("MPICH Version: 4.0.2"), "{err}");
        assert!(
            err.contains("rank 0 runs") && err.contains("Open MPI v4.1.4"),
            "{err}"
        );
    }

    #[test]
    fn long_texts_are_cut_at_a_character_boundary() {
        let long = format!("{}é", "x".repeat(BUILD_TEXT_BYTES - 1));
        let cut = piece(&long);
        assert_eq!(cut.len(), BUILD_TEXT_BYTES);
        assert_eq!(cut[BUILD_TEXT_BYTES - 1], 0, "the two-byte é does not fit");
        assert_eq!(check_builds(&long, &cut.repeat(2)), Ok(()));
    }

    #[test]
    fn a_handshake_over_a_loopback_agrees() {
        let wires = crate::loopback(3, std::time::Duration::from_secs(30));
        let outcomes: Vec<Result<(), String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = wires
                .into_iter()
                .enumerate()
                .map(|(rank, mut wire)| {
                    scope.spawn(move || {
                        let library = if rank == 1 { "MPI B" } else { "MPI A" };
                        handshake(&mut wire, library)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for outcome in outcomes {
            let err = outcome.unwrap_err();
            assert!(
                err.contains("rank 1 runs") && err.contains("MPI B"),
                "{err}"
            );
        }
    }
}
