//! Spill stores: files round-trip, limits hold, and the directory goes away on success,
//! on error and on panic.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tutti_backend::Resources;
use tutti_plan::{PlanError, SpillStore};

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("read scratch dir")
        .map(|entry| entry.expect("entry").path())
        .collect()
}

#[test]
fn files_round_trip_and_the_directory_goes_on_success() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let store = SpillStore::create(scratch.path()).expect("store");
    let dir = store.dir().to_path_buf();
    assert_eq!(dir.parent(), Some(scratch.path()));
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("utf-8 name");
    assert!(
        name.starts_with(&format!("tutti-spill-{}-", std::process::id())),
        "{name}"
    );

    let values: Vec<f64> = (0..20_000).map(|i| f64::from(i) * 0.25 - 7.0).collect();
    let mut writer = store.create_file("core.000").expect("create");
    writer.write_f64s(&values).expect("write f64s");
    writer.write_bytes(b"tail").expect("write bytes");
    assert_eq!(writer.finish().expect("finish"), 160_004);
    assert_eq!(store.used(), 160_004);
    assert_eq!(store.file_names(), ["core.000"]);

    let mut reader = store.open_file("core.000").expect("open");
    assert_eq!(reader.len(), 160_004);
    let mut back = vec![0.0; values.len()];
    reader.read_f64s(&mut back).expect("read f64s");
    assert_eq!(back, values);
    let mut tail = Vec::new();
    reader.read_to_end(&mut tail).expect("read rest");
    assert_eq!(tail, b"tail");

    drop(store);
    assert!(!dir.exists());
    assert!(entries(scratch.path()).is_empty());
}

fn spill_then_fail(scratch: &Path, dir: &Mutex<PathBuf>) -> Result<(), PlanError> {
    let store = SpillStore::create(scratch)?.with_limit(100);
    *dir.lock().expect("lock") = store.dir().to_path_buf();
    let mut writer = store.create_file("block")?;
    writer.write_bytes(&[7; 60])?;
    writer.write_bytes(&[7; 60])?; // past the limit: returns early
    Ok(())
}

#[test]
fn the_directory_goes_on_an_error_return() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = Mutex::new(PathBuf::new());
    let err = spill_then_fail(scratch.path(), &dir).unwrap_err();
    assert!(
        matches!(
            err,
            PlanError::ScratchLimitExceeded {
                requested: 60,
                used: 60,
                limit: 100,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "writing 60 B to spill file 'block' exceeds the scratch limit of 100 B (60 B already written)"
    );
    let dir = dir.into_inner().expect("lock");
    assert!(dir.starts_with(scratch.path()) && dir != scratch.path());
    assert!(!dir.exists());
    assert!(entries(scratch.path()).is_empty());
}

#[test]
fn the_directory_goes_on_panic() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = Mutex::new(PathBuf::new());
    let result = std::panic::catch_unwind(|| {
        let store = SpillStore::create(scratch.path()).expect("store");
        *dir.lock().expect("lock") = store.dir().to_path_buf();
        let mut writer = store.create_file("block").expect("create");
        writer.write_f64s(&[1.0; 100]).expect("write");
        panic!("a workload fails while spilling");
    });
    assert!(result.is_err());
    let dir = dir
        .into_inner()
        .unwrap_or_else(|poison| poison.into_inner());
    assert!(dir.starts_with(scratch.path()) && dir != scratch.path());
    assert!(!dir.exists());
    assert!(entries(scratch.path()).is_empty());
}

#[test]
fn two_stores_in_one_directory_do_not_collide() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let first = SpillStore::create(scratch.path()).expect("first");
    let second = SpillStore::create(scratch.path()).expect("second");
    assert_ne!(first.dir(), second.dir());
    for (store, byte) in [(&first, 1u8), (&second, 2u8)] {
        let mut writer = store.create_file("same-name").expect("create");
        writer.write_bytes(&[byte; 8]).expect("write");
        writer.finish().expect("finish");
    }
    let second_dir = second.dir().to_path_buf();
    drop(second);
    assert!(!second_dir.exists());
    let mut back = [0u8; 8];
    first
        .open_file("same-name")
        .expect("open")
        .read_bytes(&mut back)
        .expect("read");
    assert_eq!(back, [1; 8]);
    assert_eq!(entries(scratch.path()), [first.dir().to_path_buf()]);
}

#[test]
fn stale_directories_of_the_same_name_are_skipped() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let probe = SpillStore::create(scratch.path()).expect("probe");
    let probe_name = probe
        .dir()
        .file_name()
        .and_then(|n| n.to_str())
        .expect("name");
    let n: u64 = probe_name
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("counter");
    drop(probe);
    // Squat the next few names, as a crashed process with our pid might have.
    for k in 1..=3 {
        let stale = scratch
            .path()
            .join(format!("tutti-spill-{}-{}", std::process::id(), n + k));
        std::fs::create_dir(stale).expect("stale dir");
    }
    let store = SpillStore::create(scratch.path()).expect("store");
    assert!(store.dir().exists());
    assert_eq!(entries(store.dir()).len(), 0);
}

#[test]
fn the_limit_counts_every_file_and_removal_gives_bytes_back() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let store = SpillStore::create(scratch.path())
        .expect("store")
        .with_limit(160);
    assert_eq!(store.limit(), Some(160));
    let mut a = store.create_file("a").expect("a");
    a.write_f64s(&[0.0; 10]).expect("80 bytes");
    let mut b = store.create_file("b").expect("b");
    b.write_f64s(&[0.0; 10]).expect("80 more");
    let err = b.write_bytes(&[0]).unwrap_err();
    assert!(
        matches!(err, PlanError::ScratchLimitExceeded { used: 160, .. }),
        "{err}"
    );
    // Through io::Write the refusal reads as a full disk.
    let io_err = b.write(&[0]).unwrap_err();
    assert_eq!(io_err.kind(), std::io::ErrorKind::StorageFull);
    assert!(
        io_err.to_string().contains("scratch limit of 160 B"),
        "{io_err}"
    );
    assert_eq!(a.finish().expect("finish a"), 80);
    assert_eq!(b.finish().expect("finish b"), 80);
    assert_eq!(store.used(), 160);

    store.remove_file("a").expect("remove a");
    assert_eq!(store.used(), 80);
    assert_eq!(store.file_names(), ["b"]);
    let mut c = store.create_file("c").expect("c");
    c.write_all(&[1; 80]).expect("fits again");
    c.finish().expect("finish c");
}

#[test]
fn for_resources_uses_the_scratch_dir_and_limit() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let resources = Resources::cpu(1)
        .with_scratch_dir(scratch.path())
        .with_scratch_limit(4096);
    let store = SpillStore::for_resources(&resources).expect("store");
    assert!(store.dir().starts_with(scratch.path()));
    assert_eq!(store.limit(), Some(4096));

    let missing = Resources::cpu(1).with_scratch_dir(scratch.path().join("missing"));
    let err = SpillStore::for_resources(&missing).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn misuse_is_a_clear_error() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let err = SpillStore::create(scratch.path().join("missing")).unwrap_err();
    assert!(
        err.to_string().starts_with("creating the spill directory"),
        "{err}"
    );

    let store = SpillStore::create(scratch.path()).expect("store");
    let writer = store.create_file("x").expect("x");
    let err = store.create_file("x").unwrap_err();
    assert!(matches!(err, PlanError::SpillFileExists { .. }), "{err}");
    writer.finish().expect("finish");

    let err = store.open_file("y").unwrap_err();
    assert!(matches!(err, PlanError::SpillFileNotFound { .. }), "{err}");
    assert!(
        err.to_string().starts_with("no spill file 'y' in "),
        "{err}"
    );
    assert!(store.remove_file("y").is_err());
    let err = store.create_file("../escape").unwrap_err();
    assert!(matches!(err, PlanError::InvalidSpillName { .. }), "{err}");

    // Reading past the end names the file.
    let mut values = [0.0; 1];
    let err = store
        .open_file("x")
        .expect("open")
        .read_f64s(&mut values)
        .unwrap_err();
    assert!(err.to_string().starts_with("reading spill file "), "{err}");
    assert!(err.to_string().contains("/x:"), "{err}");
}

#[test]
fn close_removes_now_and_reports() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let store = SpillStore::create(scratch.path()).expect("store");
    let dir = store.dir().to_path_buf();
    store.create_file("x").expect("x").finish().expect("finish");
    store.close().expect("close");
    assert!(!dir.exists());
}

#[test]
fn threads_write_their_own_files_concurrently() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let store = SpillStore::create(scratch.path())
        .expect("store")
        .with_limit(4 * 8000);
    std::thread::scope(|scope| {
        for rank in 0..4 {
            let store = &store;
            scope.spawn(move || {
                let mut writer = store.create_file(&format!("rank{rank}")).expect("create");
                writer.write_f64s(&[f64::from(rank); 1000]).expect("write");
                writer.finish().expect("finish");
            });
        }
    });
    assert_eq!(store.used(), 32_000);
    for rank in 0..4 {
        let mut values = [0.0; 1000];
        store
            .open_file(&format!("rank{rank}"))
            .expect("open")
            .read_f64s(&mut values)
            .expect("read");
        assert!(values.iter().all(|&v| v == f64::from(rank)));
    }
}
