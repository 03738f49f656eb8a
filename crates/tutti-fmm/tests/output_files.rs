//! Writing `potential.npy` and `accel.npy` into a directory others can write: symbolic links
//! planted at the temporary or output names are never followed, and leftovers from a
//! killed run never block a retry.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use tutti_fmm::io::{read_masses, read_positions, write_outputs};

const POTENTIAL: [f64; 3] = [-1.5, 2.25, 0.0];
const ACCEL: [[f64; 3]; 3] = [[1.0, 2.0, 3.0], [-4.0, 5.5, 6.0], [0.0, 0.0, -1e-300]];

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn assert_outputs(dir: &Path) {
    for name in ["potential.npy", "accel.npy"] {
        let meta = std::fs::symlink_metadata(dir.join(name)).expect("output");
        assert!(meta.file_type().is_file(), "{name} is a regular file");
    }
    assert_eq!(
        read_masses(dir.join("potential.npy")).expect("potential"),
        POTENTIAL
    );
    assert_eq!(read_positions(dir.join("accel.npy")).expect("accel"), ACCEL);
}

/// Victim files outside the output directory.
fn victims(outside: &Path, count: usize) -> Vec<PathBuf> {
    (0..count)
        .map(|i| {
            let path = outside.join(format!("victim-{i}"));
            std::fs::write(&path, b"precious").expect("victim");
            path
        })
        .collect()
}

#[test]
fn symlinks_at_predictable_temporary_names_are_not_followed() {
    let dir = tempfile::tempdir().expect("dir");
    let outside = tempfile::tempdir().expect("outside");
    let pid = std::process::id();
    // The names older versions used (`.<name>.tmp-<pid>`), and other guesses.
    let planted: Vec<String> = ["potential.npy", "accel.npy"]
        .iter()
        .flat_map(|name| {
            [
                format!(".{name}.tmp-{pid}"),
                format!(".{name}.tmp"),
                format!("{name}.tmp"),
            ]
        })
        .collect();
    let targets = victims(outside.path(), planted.len());
    for (name, target) in planted.iter().zip(&targets) {
        symlink(target, dir.path().join(name)).expect("plant");
    }
    write_outputs(dir.path(), &POTENTIAL, &ACCEL).expect("write");
    for target in &targets {
        assert_eq!(std::fs::read(target).expect("victim"), b"precious");
    }
    assert_outputs(dir.path());
    let mut expected = planted.clone();
    expected.extend(["accel.npy".to_string(), "potential.npy".to_string()]);
    expected.sort();
    assert_eq!(names(dir.path()), expected, "no temporary left behind");
}

#[test]
fn symlinks_at_the_output_names_are_replaced_not_followed() {
    let dir = tempfile::tempdir().expect("dir");
    let outside = tempfile::tempdir().expect("outside");
    let targets = victims(outside.path(), 2);
    symlink(&targets[0], dir.path().join("potential.npy")).expect("plant");
    symlink(&targets[1], dir.path().join("accel.npy")).expect("plant");
    write_outputs(dir.path(), &POTENTIAL, &ACCEL).expect("write");
    for target in &targets {
        assert_eq!(std::fs::read(target).expect("victim"), b"precious");
    }
    assert_outputs(dir.path());
}

#[test]
fn leftovers_of_a_killed_run_do_not_block_a_retry() {
    let dir = tempfile::tempdir().expect("dir");
    let pid = std::process::id();
    // A half-written temporary, and a directory where the old code put its temporary.
    std::fs::write(
        dir.path().join(format!(".potential.npy.tmp-{pid}")),
        b"\x93NUMPY",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join(format!(".accel.npy.tmp-{pid}"))).unwrap();
    write_outputs(dir.path(), &POTENTIAL, &ACCEL).expect("write despite leftovers");
    assert_outputs(dir.path());
}

#[test]
fn a_failed_write_leaves_no_temporary() {
    let dir = tempfile::tempdir().expect("dir");
    // A non-empty directory at an output's name cannot be replaced by a file.
    std::fs::create_dir_all(dir.path().join("accel.npy").join("keep")).unwrap();
    assert!(write_outputs(dir.path(), &POTENTIAL, &ACCEL).is_err());
    let left: Vec<String> = names(dir.path())
        .into_iter()
        .filter(|name| name.contains("tmp"))
        .collect();
    assert!(left.is_empty(), "temporaries left: {left:?}");
}
