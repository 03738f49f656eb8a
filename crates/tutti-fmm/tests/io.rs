//! The .npy interchange: round trip, atomic output, and shape errors.

use tutti_fmm::io::{read_masses, read_positions, write_outputs};

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tutti-fmm-io-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn outputs_round_trip_without_temporaries() {
    let dir = scratch("round-trip");
    let potential = vec![-1.5, 2.25, 0.0];
    let accel = vec![[1.0, 2.0, 3.0], [-4.0, 5.5, 6.0], [0.0, 0.0, -1e-300]];
    write_outputs(&dir, &potential, &accel).expect("write");
    assert_eq!(
        read_masses(dir.join("potential.npy")).expect("potential"),
        potential
    );
    assert_eq!(read_positions(dir.join("accel.npy")).expect("accel"), accel);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["accel.npy", "potential.npy"]);
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn wrong_shapes_and_missing_files_are_errors() {
    let dir = scratch("shapes");
    write_outputs(&dir, &[1.0, 2.0], &[[0.0; 3]; 2]).expect("write");
    let msg = read_positions(dir.join("potential.npy"))
        .expect_err("1-D")
        .to_string();
    assert!(msg.contains("expected shape (N, 3), got [2]"), "{msg}");
    let msg = read_masses(dir.join("accel.npy"))
        .expect_err("2-D")
        .to_string();
    assert!(msg.contains("expected shape (N,), got [2, 3]"), "{msg}");
    let msg = read_masses(dir.join("missing.npy"))
        .expect_err("missing")
        .to_string();
    assert!(msg.contains("missing.npy"), "{msg}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn an_unwritable_directory_leaves_nothing_behind() {
    let dir = scratch("blocked");
    std::fs::create_dir_all(&dir).expect("dir");
    // A directory where accel.npy should go makes its rename fail after potential.npy's
    // temporary was written.
    std::fs::create_dir_all(dir.join("accel.npy").join("occupied")).expect("blocker");
    let err = write_outputs(&dir, &[1.0], &[[0.0; 3]]).expect_err("blocked");
    assert!(err.to_string().contains("accel.npy"), "{err}");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains("tmp")), "{names:?}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}
