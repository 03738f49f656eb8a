//! Sizes from headers, files and options are checked before anything is allocated: crafted
//! inputs are clear errors (or, for a huge `chi_out`, cheap), never a wrap, a panic or an abort.

use std::io::Write;
use std::path::Path;

use crate::common::random_train;
use tutti_sweep::{
    load, read_train, src, Core, CoreShape, CoreStream, Layer, NpyTrain, SrcOptions, SweepError,
    TensorTrain, TrainKind,
};

/// A version-1 `.npy` file of float64 with this shape (a Python tuple) and payload, header and
/// all written by hand so that any shape can be claimed.
fn write_npy(path: &Path, shape: &str, payload: &[f64]) {
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut file = std::fs::File::create(path).unwrap();
    file.write_all(b"\x93NUMPY\x01\x00").unwrap();
    file.write_all(&u16::try_from(header.len()).unwrap().to_le_bytes())
        .unwrap();
    file.write_all(header.as_bytes()).unwrap();
    for x in payload {
        file.write_all(&x.to_le_bytes()).unwrap();
    }
}

/// Opening and reading the train in `dir` fails with a `BadShape` naming `file` and `dim`.
fn assert_refused(dir: &Path, file: &str, dim: &str) {
    let err = NpyTrain::open(dir).unwrap_err();
    assert!(matches!(err, SweepError::BadShape { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains(file) && message.contains(dim), "{message}");
    let err = read_train::<f64>(dir).unwrap_err();
    assert!(matches!(err, SweepError::BadShape { .. }), "{err}");
}

#[test]
fn npy_shapes_whose_product_wraps_are_refused() {
    // 274177 * 67280421310721 = 2^64 + 1: the product wraps to 1, the one double each file
    // holds.
    let dir = tempfile::tempdir().unwrap();
    write_npy(
        &dir.path().join("000.npy"),
        "(1, 67280421310721, 274177)",
        &[1.0],
    );
    write_npy(
        &dir.path().join("001.npy"),
        "(274177, 67280421310721, 1)",
        &[1.0],
    );
    assert_refused(dir.path(), "000.npy", "67280421310721");

    // 3 * 12297829382473034411 = 1 (mod 2^64).
    let dir = tempfile::tempdir().unwrap();
    write_npy(
        &dir.path().join("000.npy"),
        "(1, 3, 12297829382473034411)",
        &[1.0],
    );
    assert_refused(dir.path(), "000.npy", "12297829382473034411");

    // Dims that do not fit in 64 bits at all, and a product that fits in u64 but not in memory.
    let dir = tempfile::tempdir().unwrap();
    write_npy(
        &dir.path().join("000.npy"),
        "(1, 3, 99999999999999999999999)",
        &[1.0],
    );
    let err = NpyTrain::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("64 bits"), "{err}");
    write_npy(
        &dir.path().join("000.npy"),
        "(1, 4611686018427387904, 1)",
        &[1.0],
    );
    assert_refused(dir.path(), "000.npy", "4611686018427387904");
}

#[test]
fn a_header_longer_than_its_file_is_truncated() {
    // Version 2: a 4-byte header length of 4 GiB in a 16-byte file.
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
    bytes.extend_from_slice(&u32::MAX.to_le_bytes());
    bytes.extend_from_slice(b"{}  ");
    std::fs::write(dir.path().join("000.npy"), bytes).unwrap();
    let err = NpyTrain::open(dir.path()).unwrap_err();
    assert!(matches!(err, SweepError::File { .. }), "{err}");
    assert!(err.to_string().contains("truncated"), "{err}");
}

#[test]
fn a_truncated_file_names_the_size_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("000.npy"), "(1, 2, 1099511627776)", &[1.0]);
    let err = NpyTrain::open(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("truncated") && err.contains("expected"),
        "{err}"
    );
}

#[test]
fn in_memory_shapes_whose_product_wraps_are_refused() {
    let wrapping = CoreShape {
        left: 1,
        d_out: 67280421310721,
        d_in: 1,
        right: 274177,
    };
    assert_eq!(wrapping.checked_len(), None);
    assert_eq!(wrapping.len(), usize::MAX);
    let err = TensorTrain::<f64>::from_arrays(
        TrainKind::Mps,
        vec![
            (vec![1, 67280421310721, 274177], vec![1.0]),
            (vec![274177, 67280421310721, 1], vec![1.0]),
        ],
    )
    .unwrap_err();
    assert!(matches!(err, SweepError::BadShape { site: 0, .. }), "{err}");
    let err = TensorTrain::<f64>::new(
        TrainKind::Mps,
        vec![Core {
            shape: CoreShape {
                left: 1,
                d_out: 3,
                d_in: 1,
                right: 12297829382473034411,
            },
            data: vec![1.0],
        }],
    )
    .unwrap_err();
    assert!(matches!(err, SweepError::BadShape { .. }), "{err}");
}

#[test]
fn a_huge_chi_out_is_clamped_to_the_largest_possible_bond() {
    // A 3-site bond-1 train: every bond of the product is 1, so the sketch is one column.
    let psi: TensorTrain<f64> = random_train(TrainKind::Mps, &[(2, 1); 3], 1, 1.0, 3);
    let chi = i32::MAX as usize;
    let (out, info) = src(&[&psi as &dyn Layer<f64>], &SrcOptions::new(chi)).unwrap();
    assert_eq!(out.bonds(), vec![1, 1, 1, 1]);
    assert_eq!(info.sketch_width, 1);
    assert!(tutti_sweep::distance(&out, &psi).unwrap() < 1e-12);
    // Neither may chi_out + oversample overflow.
    let options = SrcOptions::new(usize::MAX).with_oversample(usize::MAX);
    let (out, info) = src(&[&psi as &dyn Layer<f64>], &options).unwrap();
    assert_eq!(out.bonds(), vec![1, 1, 1, 1]);
    assert_eq!(info.sketch_width, 1);
    // A train with real bonds: the clamp is the product's largest bond (here 2 x 3 = 6 at
    // most: phys 2 per site, bonds 3), and the result is exact.
    let h: TensorTrain<f64> = random_train(TrainKind::Mpo, &[(2, 2); 4], 2, 1.0, 4);
    let phi: TensorTrain<f64> = random_train(TrainKind::Mps, &[(2, 1); 4], 3, 1.0, 5);
    let (out, info) = src(&[&h as &dyn Layer<f64>, &phi], &SrcOptions::new(chi)).unwrap();
    assert!(info.sketch_width <= 6, "{}", info.sketch_width);
    let exact = tutti_sweep::exact_product(&[&h as &dyn Layer<f64>, &phi]).unwrap();
    let error = tutti_sweep::distance(&out, &exact).unwrap() / tutti_sweep::norm(&exact);
    assert!(error < 1e-10, "{error}");
}

/// A layer that announces the shapes of `train` but streams only its first `cores` cores, the
/// last one with `drop` entries cut off.
struct Lying {
    train: TensorTrain<f64>,
    cores: usize,
    drop: usize,
}

impl Layer<f64> for Lying {
    fn name(&self) -> String {
        "lying".into()
    }
    fn kind(&self) -> TrainKind {
        self.train.kind()
    }
    fn shapes(&self) -> Vec<CoreShape> {
        self.train.shapes()
    }
    fn stream(&self, reverse: bool) -> Result<CoreStream<'_, f64>, SweepError> {
        let mut cores: Vec<Core<f64>> = self.train.cores()[..self.cores].to_vec();
        if let Some(last) = cores.last_mut() {
            last.data.truncate(last.data.len() - self.drop);
        }
        if reverse {
            cores.reverse();
        }
        Ok(Box::new(cores.into_iter().map(Ok)))
    }
}

#[test]
fn a_stream_cut_short_is_not_a_shorter_train() {
    let psi: TensorTrain<f64> = random_train(TrainKind::Mps, &[(2, 1); 4], 2, 1.0, 6);
    let short = Lying {
        train: psi.clone(),
        cores: 2,
        drop: 0,
    };
    let err = load(&short).unwrap_err();
    assert!(matches!(err, SweepError::LengthMismatch { .. }), "{err}");
    let ragged = Lying {
        train: psi,
        cores: 4,
        drop: 1,
    };
    let err = load(&ragged).unwrap_err();
    assert!(matches!(err, SweepError::BadShape { site: 3, .. }), "{err}");
    // The sweep checks what it is streamed as well.
    let err = src(&[&ragged as &dyn Layer<f64>], &SrcOptions::new(2)).unwrap_err();
    assert!(matches!(err, SweepError::BadShape { .. }), "{err}");
}

/// The body of [`two_site_stacks_never_print`], run in a child whose stderr is a closed pipe.
#[test]
fn two_site_child() {
    if std::env::var_os("TUTTI_SWEEP_TWO_SITE_CHILD").is_none() {
        return;
    }
    let psi: TensorTrain<f64> = random_train(TrainKind::Mps, &[(2, 1); 2], 2, 1.0, 7);
    for _ in 0..2 {
        let (_, info) = src(&[&psi as &dyn Layer<f64>], &SrcOptions::new(2)).unwrap();
        assert!(info.exact_fallback);
    }
}

#[test]
fn two_site_stacks_never_print() {
    let psi: TensorTrain<f64> = random_train(TrainKind::Mps, &[(2, 1); 2], 2, 1.0, 7);
    let (_, info) = src(&[&psi as &dyn Layer<f64>], &SrcOptions::new(2)).unwrap();
    assert!(info.exact_fallback);
    // With stderr a broken pipe, a library that prints fails (and used to poison a `Once`,
    // failing every later call too).
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "hardening::two_site_child", "--test-threads=1"])
        .env("TUTTI_SWEEP_TWO_SITE_CHILD", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert!(status.success(), "the child failed: {status}");
}

/// The names beside `dir` other than `keep` (temporaries a write may have left).
fn siblings(parent: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(parent)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !keep.contains(&name.as_str()))
        .collect()
}

#[test]
fn writers_racing_for_one_directory_leave_one_complete_train() {
    // The old temporary `.<name>.tmp-<pid>` was shared by every writer of a process: one
    // writer's clean-up deleted the other's half-written files. Each write now has its own.
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("psi");
    let a: TensorTrain<f64> = random_train(TrainKind::Mps, &[(2, 1); 6], 8, 1.0, 11);
    let b: TensorTrain<f64> = random_train(TrainKind::Mps, &[(2, 1); 6], 8, 1.0, 12);
    for _ in 0..10 {
        std::thread::scope(|scope| {
            for train in [&a, &b] {
                let dir = &dir;
                scope.spawn(move || {
                    // Losing the race is an I/O error; never a panic, never a mixed train.
                    if let Err(err) = tutti_sweep::write_train(train, dir) {
                        assert!(matches!(err, SweepError::Io { .. }), "{err}");
                    }
                });
            }
        });
        let back = read_train::<f64>(&dir).unwrap();
        assert!(
            back == a || back == b,
            "the directory holds neither train whole"
        );
    }
}

#[test]
fn a_symlink_at_the_destination_is_refused_and_its_target_untouched() {
    let scratch = tempfile::tempdir().unwrap();
    let victim = scratch.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("000.npy"), b"not a train").unwrap();
    let link = scratch.path().join("out");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let train: TensorTrain<f64> = random_train(TrainKind::Mps, &[(2, 1); 3], 2, 1.0, 5);
    let err = tutti_sweep::write_train(&train, &link).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(
        std::fs::read(victim.join("000.npy")).unwrap(),
        b"not a train"
    );
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    // A real directory is written, replaced, and nothing is left beside it.
    let dir = scratch.path().join("psi");
    tutti_sweep::write_train(&train, &dir).unwrap();
    let other: TensorTrain<f64> = random_train(TrainKind::Mps, &[(3, 1); 4], 2, 1.0, 6);
    tutti_sweep::write_train(&other, &dir).unwrap();
    assert_eq!(read_train::<f64>(&dir).unwrap(), other);
    assert_eq!(
        siblings(scratch.path(), &["victim", "out", "psi"]),
        Vec::<String>::new()
    );
}
