//! Replays every committed seed (`seeds/<target>/*`, sorted by name) through its target's body,
//! in the ordinary test build: the regression half of fuzzing (the crafted inputs of
//! `make_seeds.py` and the `found_*` inputs the fuzzers found), without the sanitizer build.
//! Coverage-guided fuzzing is `cargo xtask fuzz`.
//!
//! Each seed runs under `catch_unwind`, so one failing seed does not hide the others: the
//! failure names every seed file whose oracle failed, with its panic message.

use std::panic::catch_unwind;
use std::path::{Path, PathBuf};

/// The crate's root, where `seeds/` and `fuzz_targets/` are.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The names of the entries of `dir` (files when `files`, else directories), sorted.
fn entries(dir: &Path, files: bool) -> Vec<PathBuf> {
    let listing = match std::fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(err) => panic!("reading {}: {err}", dir.display()),
    };
    let mut found = Vec::new();
    for entry in listing {
        let path = match entry {
            Ok(entry) => entry.path(),
            Err(err) => panic!("reading {}: {err}", dir.display()),
        };
        if path.is_file() == files {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// Runs `run` on every seed of `target`; fails naming each seed that panicked.
fn replay(target: &str, run: fn(&[u8])) {
    let dir = root().join("seeds").join(target);
    let seeds = entries(&dir, true);
    assert!(
        !seeds.is_empty(),
        "{} holds no seeds: the test of `{target}` would check nothing",
        dir.display()
    );
    let mut failures = Vec::new();
    for seed in &seeds {
        let bytes = match std::fs::read(seed) {
            Ok(bytes) => bytes,
            Err(err) => panic!("reading {}: {err}", seed.display()),
        };
        if let Err(payload) = catch_unwind(|| run(&bytes)) {
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("(a panic without a message)");
            failures.push(format!("  {}: {message}", seed.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of the {} seeds of `{target}` fail its oracle:\n{}",
        failures.len(),
        seeds.len(),
        failures.join("\n")
    );
}

/// One test per target, and the list of them.
macro_rules! seed_tests {
    ($($target:ident),* $(,)?) => {
        $(
            #[test]
            fn $target() {
                replay(stringify!($target), tutti_fuzz::targets::$target::run);
            }
        )*

        /// The targets the tests above replay, sorted.
        const TARGETS: &[&str] = &[$(stringify!($target)),*];
    };
}

seed_tests!(
    capi_fmm,
    capi_train_arrays,
    ledger,
    npy_fmm,
    npy_train_dir,
    nwchem,
    xyz,
);

/// The file or directory names of `paths`, without the `.rs` of a source file.
fn names(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .filter_map(|path| path.file_name()?.to_str())
        .map(|name| name.trim_end_matches(".rs").to_owned())
        .collect()
}

/// A target added to `fuzz_targets/` or a seed directory added to `seeds/` without a test
/// above would never be replayed.
#[test]
fn every_target_and_seed_directory_is_replayed() {
    let binaries = names(&entries(&root().join("fuzz_targets"), true));
    let seed_dirs = names(&entries(&root().join("seeds"), false));
    assert_eq!(binaries, TARGETS, "fuzz_targets/ against the seed tests");
    assert_eq!(seed_dirs, TARGETS, "seeds/ against the seed tests");
}
