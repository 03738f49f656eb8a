//! The library's version.
//!
//! The header carries the same version as macros (`TUTTI_VERSION_MAJOR`, `_MINOR`, `_PATCH`
//! and the string `TUTTI_VERSION`), written by `cargo xtask header` from this crate's
//! version; compare them with [`tutti_version`] to detect a header/library mismatch.

use std::ffi::c_int;

use crate::boundary::{check_disjoint, ffi_call, Out, Region};

/// The crate version, e.g. `"0.1.0"`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `(major, minor, patch)` of this library.
pub const fn version() -> (c_int, c_int, c_int) {
    (
        parse_decimal(env!("CARGO_PKG_VERSION_MAJOR")),
        parse_decimal(env!("CARGO_PKG_VERSION_MINOR")),
        parse_decimal(env!("CARGO_PKG_VERSION_PATCH")),
    )
}

/// Parses a version component at compile time; cargo guarantees plain decimal digits.
const fn parse_decimal(text: &str) -> c_int {
    let bytes = text.as_bytes();
    let mut value: c_int = 0;
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit(), "version components are decimal");
        value = value * 10 + (bytes[i] - b'0') as c_int;
        i += 1;
    }
    value
}

/// Writes the library's version to `*major`, `*minor` and `*patch`.
///
/// Errors: `TUTTI_ERROR_NULL_POINTER` if any of the three is NULL,
/// `TUTTI_ERROR_INVALID_ARGUMENT` if two are the same (nothing is written).
///
/// # Safety
/// Each pointer is NULL or valid for writing an `int`.
#[no_mangle]
pub unsafe extern "C" fn tutti_version(
    major: *mut c_int,
    minor: *mut c_int,
    patch: *mut c_int,
) -> c_int {
    ffi_call("tutti_version", || {
        check_disjoint(&[
            Region::output("major", major, 1),
            Region::output("minor", minor, 1),
            Region::output("patch", patch, 1),
        ])?;
        // SAFETY: each pointer is NULL or valid for writes (the caller's promise), and the
        // three are disjoint (checked above).
        let (major, minor, patch) = unsafe {
            (
                Out::new(major, "major")?,
                Out::new(minor, "minor")?,
                Out::new(patch, "patch")?,
            )
        };
        let (x, y, z) = version();
        major.write(x);
        minor.write(y);
        patch.write(z);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::TuttiStatus;

    /// The value of `#define NAME value` in the header text.
    fn header_define<'a>(header: &'a str, name: &str) -> Option<&'a str> {
        header.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("#define") && words.next() == Some(name))
                .then(|| line.split_once(name).map(|(_, value)| value.trim()))
                .flatten()
        })
    }

    #[test]
    fn version_matches_the_crate() {
        let (major, minor, patch) = version();
        assert_eq!(format!("{major}.{minor}.{patch}"), VERSION);
    }

    #[test]
    fn header_macros_match_the_crate_version() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../include/tutti.h");
        let header = std::fs::read_to_string(path)
            .unwrap_or_else(|err| panic!("{path}: {err}; run `cargo xtask header`"));
        let (major, minor, patch) = version();
        let stale = "include/tutti.h is stale: run `cargo xtask header`";
        assert_eq!(
            header_define(&header, "TUTTI_VERSION_MAJOR"),
            Some(major.to_string().as_str()),
            "{stale}"
        );
        assert_eq!(
            header_define(&header, "TUTTI_VERSION_MINOR"),
            Some(minor.to_string().as_str()),
            "{stale}"
        );
        assert_eq!(
            header_define(&header, "TUTTI_VERSION_PATCH"),
            Some(patch.to_string().as_str()),
            "{stale}"
        );
        assert_eq!(
            header_define(&header, "TUTTI_VERSION"),
            Some(format!("\"{VERSION}\"").as_str()),
            "{stale}"
        );
    }

    #[test]
    fn tutti_version_writes_all_three_or_nothing() {
        let (mut x, mut y, mut z) = (-1, -1, -1);
        // SAFETY: valid pointers to locals.
        let status = unsafe { tutti_version(&mut x, &mut y, &mut z) };
        assert_eq!(status, 0);
        assert_eq!((x, y, z), version());

        let (mut x, mut y) = (-1, -1);
        // SAFETY: valid pointers or NULL.
        let status = unsafe { tutti_version(&mut x, &mut y, std::ptr::null_mut()) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_NULL_POINTER.code());
        assert_eq!((x, y), (-1, -1), "outputs are written only on success");
        assert_eq!(
            crate::boundary::last_error(),
            "tutti_version: argument `patch` is NULL"
        );

        let mut same = -1;
        let ptr: *mut c_int = &mut same;
        // SAFETY: one valid pointer, passed twice; refused before any write.
        let status = unsafe { tutti_version(ptr, &mut x, ptr) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert_eq!((same, x), (-1, -1), "outputs are written only on success");
        assert!(crate::boundary::last_error().contains("`major`"));
        assert!(crate::boundary::last_error().contains("`patch`"));
    }
}
