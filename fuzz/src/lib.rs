//! tutti's fuzz targets: each one's body, as [`targets`]`::<name>::run`, and the pieces they
//! share: splitting one input into several files, a scratch directory per thread that each
//! run writes its files into, and a reader that decodes any bytes into bounded values.
//!
//! The bodies run in two harnesses: `tests/seeds.rs` replays every committed seed
//! (`seeds/<target>/`) through them in the ordinary test build, and the libFuzzer binaries of
//! `fuzz_targets/` (feature `libfuzzer`; `cargo xtask fuzz`) fuzz them, coverage-guided,
//! under AddressSanitizer.
#![deny(missing_docs)]

use std::path::{Path, PathBuf};

/// The fuzz targets, one module each; the module's doc states what it drives and its oracle.
pub mod targets {
    pub mod capi_fmm;
    pub mod capi_train_arrays;
    pub mod ledger;
    pub mod npy_fmm;
    pub mod npy_train_dir;
    pub mod nwchem;
    pub mod xyz;
}

/// Splits `data` into 1..=`max_files` byte strings.
///
/// Framing (the seed script `make_seeds.py` writes the same): one byte whose value modulo
/// `max_files`, plus one, is the file count; then each file but the last as a two-byte
/// little-endian length followed by that many bytes (cut short where the input ends); the last
/// file is whatever remains.
pub fn split_files(data: &[u8], max_files: usize) -> Vec<&[u8]> {
    let Some((&first, mut rest)) = data.split_first() else {
        return vec![&[]];
    };
    let count = usize::from(first) % max_files.max(1) + 1;
    let mut files = Vec::with_capacity(count);
    for _ in 1..count {
        if rest.len() < 2 {
            files.push(rest);
            rest = &[];
            continue;
        }
        let length = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        let body = &rest[2..];
        let (file, remainder) = body.split_at(length.min(body.len()));
        files.push(file);
        rest = remainder;
    }
    files.push(rest);
    files
}

/// A directory private to the calling thread, created on first use and kept until the thread
/// ends (each run empties it before writing). Per thread, not per process: libFuzzer runs
/// every input on one thread, but the seed tests run the targets side by side.
pub fn scratch_dir() -> PathBuf {
    thread_local! {
        static DIR: tempfile::TempDir = {
            let base = if Path::new("/dev/shm").is_dir() {
                PathBuf::from("/dev/shm")
            } else {
                std::env::temp_dir()
            };
            match tempfile::Builder::new().prefix("tutti-fuzz-").tempdir_in(base) {
                Ok(dir) => dir,
                Err(err) => panic!("cannot create the fuzz scratch directory: {err}"),
            }
        };
    }
    DIR.with(|dir| dir.path().to_path_buf())
}

/// Empties the calling thread's scratch directory and writes `files` into it as `names[i]`;
/// returns its path.
pub fn write_scratch(names: &[String], files: &[&[u8]]) -> PathBuf {
    let dir = scratch_dir();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
    for (name, bytes) in names.iter().zip(files) {
        if let Err(err) = std::fs::write(dir.join(name), bytes) {
            panic!("cannot write the fuzz input {name}: {err}");
        }
    }
    dir
}

/// Reads little-endian values off the front of a byte string, yielding zeros once it is
/// exhausted, so a target can decode any input into a bounded structure.
pub struct Bytes<'a> {
    rest: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { rest: data }
    }

    /// The next byte, or 0.
    pub fn u8(&mut self) -> u8 {
        match self.rest.split_first() {
            Some((&byte, rest)) => {
                self.rest = rest;
                byte
            }
            None => 0,
        }
    }

    /// The next four bytes as an `i32`.
    pub fn i32(&mut self) -> i32 {
        i32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// The next eight bytes as an `f64` (any bit pattern: NaN, infinities, subnormals).
    pub fn f64(&mut self) -> f64 {
        let mut bytes = [0u8; 8];
        for byte in &mut bytes {
            *byte = self.u8();
        }
        f64::from_le_bytes(bytes)
    }

    /// The next two bytes as a fraction in [0, 1).
    pub fn unit(&mut self) -> f64 {
        f64::from(u16::from_le_bytes([self.u8(), self.u8()])) / 65536.0
    }

    /// Whether any bytes are left.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
}
