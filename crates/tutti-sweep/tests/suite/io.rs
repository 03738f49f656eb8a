//! The `.npy` directory format: round trips, lazy streaming, and unreadable files.

use std::io::Write;

use crate::common::{random_train, same_bits};
use tutti_backend::Resources;
use tutti_sweep::{
    read_train, src, write_train, Complex64, Layer, NpyTrain, SrcOptions, SweepError, TensorTrain,
    TrainKind,
};

fn rect_mpo() -> TensorTrain<f64> {
    random_train(TrainKind::Mpo, &[(2, 3), (3, 2), (2, 2), (1, 2)], 3, 1.0, 1)
}

#[test]
fn round_trips_real_and_complex() {
    let dir = tempfile::tempdir().unwrap();
    let mpo = rect_mpo();
    write_train(&mpo, dir.path().join("mpo")).unwrap();
    assert!(same_bits(
        &read_train::<f64>(dir.path().join("mpo")).unwrap(),
        &mpo
    ));
    let z: TensorTrain<Complex64> = random_train(TrainKind::Mps, &[(2, 1); 5], 4, 1.0, 2);
    write_train(&z, dir.path().join("z")).unwrap();
    assert!(same_bits(
        &read_train::<Complex64>(dir.path().join("z")).unwrap(),
        &z
    ));
    // Rewriting replaces the old train; no temporary directory is left behind.
    let short: TensorTrain<f64> = random_train(TrainKind::Mps, &[(2, 1); 3], 2, 1.0, 3);
    write_train(&short, dir.path().join("z")).unwrap();
    assert!(same_bits(
        &read_train::<f64>(dir.path().join("z")).unwrap(),
        &short
    ));
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // Real files are promoted when read as complex; complex files are refused as real.
    let promoted = read_train::<Complex64>(dir.path().join("mpo")).unwrap();
    assert_eq!(
        promoted.cores()[1].data[4],
        Complex64::new(mpo.cores()[1].data[4], 0.0)
    );
    write_train(&z, dir.path().join("z2")).unwrap();
    let err = read_train::<f64>(dir.path().join("z2")).unwrap_err();
    assert!(err.to_string().contains("complex128"), "{err}");
}

#[test]
fn disk_layers_stream_to_the_same_bits() {
    let dir = tempfile::tempdir().unwrap();
    let h: TensorTrain<f64> = random_train(TrainKind::Mpo, &[(2, 2); 6], 3, 1.0, 4);
    let psi: TensorTrain<f64> = random_train(TrainKind::Mps, &[(2, 1); 6], 5, 1.0, 5);
    write_train(&h, dir.path().join("h")).unwrap();
    write_train(&psi, dir.path().join("psi")).unwrap();
    let (h_disk, psi_disk) = (
        NpyTrain::open(dir.path().join("h")).unwrap(),
        NpyTrain::open(dir.path().join("psi")).unwrap(),
    );
    let options = SrcOptions::new(6).with_seed(9);
    let (memory, _) = src(&[&h as &dyn Layer<f64>, &psi], &options).unwrap();
    let (disk, _) = src(&[&h_disk as &dyn Layer<f64>, &psi_disk], &options).unwrap();
    assert!(same_bits(&memory, &disk));
    let (mixed, _) = src(
        &[&h_disk as &dyn Layer<f64>, &psi],
        &options.clone().with_resources(Resources::cpu(2)),
    )
    .unwrap();
    assert!(tutti_sweep::distance(&mixed, &memory).unwrap() < 1e-12);
}

fn write_raw(path: &std::path::Path, descr: &str, shape: &str, payload: &[u8]) {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut file = std::fs::File::create(path).unwrap();
    file.write_all(b"\x93NUMPY\x01\x00").unwrap();
    file.write_all(&(header.len() as u16).to_le_bytes())
        .unwrap();
    file.write_all(header.as_bytes()).unwrap();
    file.write_all(payload).unwrap();
}

#[test]
fn unreadable_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let psi: TensorTrain<f64> = random_train(TrainKind::Mps, &[(2, 1); 4], 3, 1.0, 6);
    let base = dir.path().join("psi");
    write_train(&psi, &base).unwrap();

    // Truncated: the header promises more data than the file holds.
    let site1 = base.join("001.npy");
    let bytes = std::fs::read(&site1).unwrap();
    std::fs::write(&site1, &bytes[..bytes.len() - 8]).unwrap();
    let err = NpyTrain::open(&base).unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
    assert!(err.to_string().contains("001.npy"), "{err}");

    // Wrong dtype.
    write_raw(&site1, "<i8", "(3, 2, 3)", &[0u8; 18 * 8]);
    let err = NpyTrain::open(&base).unwrap_err();
    assert!(err.to_string().contains("<i8"), "{err}");

    // Not an .npy file at all.
    std::fs::write(&site1, b"hello").unwrap();
    assert!(matches!(
        NpyTrain::open(&base).unwrap_err(),
        SweepError::File { .. }
    ));

    // A gap in the numbering, and an empty directory.
    std::fs::remove_file(&site1).unwrap();
    let err = NpyTrain::open(&base).unwrap_err();
    assert!(err.to_string().contains("001.npy is missing"), "{err}");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(NpyTrain::open(&empty)
        .unwrap_err()
        .to_string()
        .contains("no site files"));

    // Bond mismatch between files names the site and both dims.
    write_raw(&site1, "<f8", "(3, 2, 2)", &[0u8; 12 * 8]);
    let err = NpyTrain::open(&base).unwrap_err().to_string();
    assert!(
        err.contains("site 1 has right bond 2 but site 2 has left bond 3"),
        "{err}"
    );
}

#[test]
fn a_file_failing_during_the_sweep_surfaces_on_every_device_count() {
    let dir = tempfile::tempdir().unwrap();
    let h: TensorTrain<f64> = random_train(TrainKind::Mpo, &[(2, 2); 5], 3, 1.0, 7);
    let psi: TensorTrain<f64> = random_train(TrainKind::Mps, &[(2, 1); 5], 3, 1.0, 8);
    write_train(&psi, dir.path().join("psi")).unwrap();
    let disk = NpyTrain::open(dir.path().join("psi")).unwrap();
    // Corrupt a core after opening: a NaN in site 3 is found while streaming.
    let path = dir.path().join("psi/003.npy");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 8;
    bytes[at..].copy_from_slice(&f64::NAN.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    for g in [None, Some(1), Some(3)] {
        let mut options = SrcOptions::new(4);
        if let Some(g) = g {
            options = options.with_resources(Resources::cpu(g));
        }
        let err = src(&[&h as &dyn Layer<f64>, &disk], &options).unwrap_err();
        assert!(
            matches!(err, SweepError::NonFinite { site: 3, .. }),
            "G {g:?}: {err}"
        );
    }
}
