//! The ledger's files under hostile or damaged conditions: symbolic links planted at the
//! temporary and lock names, temporaries left by a killed run, results JSON cannot hold,
//! attempt counts at their limit, and a ledger appearing while a `resume = false` campaign
//! starts.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize, Serializer};
use tutti_fit::ledger::{input_hash, read_ledger};
use tutti_fit::{
    checkpointed_map, CampaignItem, CampaignOptions, FitError, TaskContext, TaskStatus,
};

const NAME: &str = "campaign.json";

fn items(n: usize) -> Vec<CampaignItem<u64>> {
    (0..n)
        .map(|i| CampaignItem::new(format!("task-{i:03}"), i as u64 * 7 + 1))
        .collect()
}

fn square(input: &u64, _: &TaskContext<'_>) -> Result<u64, String> {
    Ok(input * input)
}

fn expected(items: &[CampaignItem<u64>]) -> Vec<Option<u64>> {
    items.iter().map(|i| Some(i.input * i.input)).collect()
}

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A victim file outside the campaign's directory, and its content.
fn victim(outside: &tempfile::TempDir) -> (PathBuf, &'static [u8]) {
    let path = outside.path().join("victim");
    let content = b"precious: must never be overwritten\n";
    std::fs::write(&path, content).expect("victim");
    (path, content)
}

#[test]
fn symlinks_planted_at_temporary_names_are_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let (victim, content) = victim(&outside);
    let ledger = dir.path().join(NAME);
    // The name older versions used (`<ledger>.tmp-<pid>`, this process's pid), and other
    // names an attacker might guess.
    let pid = std::process::id();
    for planted in [
        format!("{NAME}.tmp-{pid}"),
        format!(".{NAME}.tmp-{pid}"),
        format!(".{NAME}.tmp"),
        format!("{NAME}.tmp"),
    ] {
        symlink(&victim, dir.path().join(planted)).unwrap();
    }
    let items = items(5);
    let outcome = checkpointed_map(square, &items, &ledger, &CampaignOptions::default()).unwrap();
    assert_eq!(outcome.results, expected(&items));
    assert_eq!(std::fs::read(&victim).unwrap(), content, "victim untouched");
    let meta = std::fs::symlink_metadata(&ledger).unwrap();
    assert!(meta.file_type().is_file(), "the ledger is a regular file");
    assert_eq!(read_ledger(&ledger).unwrap().len(), 5);
    // The old-style orphan (a link) was swept under the lock, never its target.
    assert!(!names(dir.path()).contains(&format!("{NAME}.tmp-{pid}")));
    let again = checkpointed_map(square, &items, &ledger, &CampaignOptions::default()).unwrap();
    assert_eq!((again.ran, again.reused), (0, 5));
}

#[test]
fn a_symlink_at_the_lock_name_is_refused_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let ledger = dir.path().join(NAME);
    // A dangling link: following it would create the target.
    let target = outside.path().join("created-through-the-lock");
    symlink(&target, dir.path().join(format!("{NAME}.lock"))).unwrap();
    let err = checkpointed_map(square, &items(2), &ledger, &CampaignOptions::default())
        .expect_err("a symbolic link at the lock's name");
    assert!(matches!(err, FitError::Io { .. }), "{err}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(!target.exists(), "the link's target was not created");
    assert!(!ledger.exists());

    // Also a link to an existing file: refused, the file untouched.
    let (victim, content) = victim(&outside);
    std::fs::remove_file(dir.path().join(format!("{NAME}.lock"))).unwrap();
    symlink(&victim, dir.path().join(format!("{NAME}.lock"))).unwrap();
    assert!(checkpointed_map(square, &items(2), &ledger, &CampaignOptions::default()).is_err());
    assert_eq!(std::fs::read(&victim).unwrap(), content);
}

#[test]
fn temporaries_left_by_a_killed_run_do_not_block_the_retry_and_are_swept() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join(NAME);
    let items = items(4);
    checkpointed_map(square, &items[..2], &ledger, &CampaignOptions::default()).unwrap();
    let pid = std::process::id();
    // What killed writers leave: half-written files under the old and the new naming, and a
    // directory where the old code would have put its temporary (it failed with EISDIR).
    std::fs::write(
        dir.path().join(format!("{NAME}.tmp-{pid}")),
        b"{\"format\": \"tu",
    )
    .unwrap();
    std::fs::write(dir.path().join(format!("{NAME}.tmp-1")), b"{").unwrap();
    std::fs::write(dir.path().join(format!(".{NAME}.a1B2c3.tmp")), b"{\"fo").unwrap();
    std::fs::create_dir(dir.path().join(format!("{NAME}.tmp-{}", pid + 1))).unwrap();
    // Not the ledger's temporaries: left alone.
    std::fs::write(dir.path().join("other.json.tmp-7"), b"x").unwrap();
    std::fs::write(dir.path().join(format!("{NAME}.tmp-notes")), b"x").unwrap();

    let outcome = checkpointed_map(square, &items, &ledger, &CampaignOptions::default()).unwrap();
    assert_eq!(outcome.results, expected(&items));
    assert_eq!((outcome.ran, outcome.reused), (2, 2));
    assert_eq!(
        names(dir.path()),
        [
            NAME.to_string(),
            format!("{NAME}.lock"),
            format!("{NAME}.tmp-{}", pid + 1),
            format!("{NAME}.tmp-notes"),
            "other.json.tmp-7".to_string(),
        ]
    );
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Estimate {
    value: f64,
    spread: Option<f64>,
}

#[test]
fn a_non_finite_result_is_recorded_as_failed_and_the_ledger_stays_resumable() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join(NAME);
    let items = items(4);
    // Task 1 returns NaN, task 2 an infinite spread (which JSON would store as null and
    // read back as None), on their first attempt only.
    let task = |input: &u64, context: &TaskContext<'_>| {
        let first = context.attempt == 1;
        Ok(Estimate {
            value: if first && *input == items[1].input {
                f64::NAN
            } else {
                *input as f64
            },
            spread: if first && *input == items[2].input {
                Some(f64::INFINITY)
            } else {
                Some(0.5)
            },
        })
    };
    let first = checkpointed_map(task, &items, &ledger, &CampaignOptions::default()).unwrap();
    assert_eq!(
        first.results[0],
        Some(Estimate {
            value: 1.0,
            spread: Some(0.5)
        })
    );
    assert_eq!(
        (first.results[1].as_ref(), first.results[2].as_ref()),
        (None, None)
    );
    let failed: Vec<(&str, &str)> = first
        .failures
        .iter()
        .map(|f| (f.task_id.as_str(), f.error.as_str()))
        .collect();
    assert_eq!(
        failed,
        [
            (
                "task-001",
                "result not storable: value holds NaN, which JSON cannot store"
            ),
            (
                "task-002",
                "result not storable: spread holds inf, which JSON cannot store"
            ),
        ]
    );
    let text = std::fs::read_to_string(&ledger).unwrap();
    assert!(!text.contains("null"), "nothing stored as null:\n{text}");

    let second = checkpointed_map(task, &items, &ledger, &CampaignOptions::default()).unwrap();
    assert!(second.failures.is_empty());
    assert_eq!((second.ran, second.reused), (2, 2));
    assert_eq!(
        second.results[1],
        Some(Estimate {
            value: 8.0,
            spread: Some(0.5)
        })
    );
    let attempts: Vec<u32> = second.records.iter().map(|r| r.attempts).collect();
    assert_eq!(attempts, [1, 2, 2, 1]);
}

#[test]
fn an_attempt_count_at_its_limit_saturates_instead_of_wrapping() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join(NAME);
    let items = items(1);
    let hash = input_hash(&serde_json::to_vec(&items[0].input).unwrap());
    let crafted = serde_json::json!({
        "format": "tutti-ledger", "version": 1,
        "tasks": [{ "task_id": "task-000", "input_hash": hash, "status": "failed",
                    "attempts": u32::MAX, "error": "earlier failure" }],
    });
    std::fs::write(&ledger, crafted.to_string()).unwrap();
    let seen = std::sync::Mutex::new(Vec::new());
    let task = |input: &u64, context: &TaskContext<'_>| {
        seen.lock().unwrap().push(context.attempt);
        Ok::<_, String>(input * input)
    };
    let outcome = checkpointed_map(task, &items, &ledger, &CampaignOptions::default()).unwrap();
    assert_eq!(*seen.lock().unwrap(), [u32::MAX]);
    assert_eq!(outcome.results, [Some(1)]);
    assert_eq!(outcome.records[0].attempts, u32::MAX);
    assert_eq!(outcome.records[0].status, TaskStatus::Accepted);
}

/// An input whose serialization creates the ledger, standing in for another campaign that
/// creates it while this one starts (after an unlocked existence check would have passed).
struct RacingInput {
    ledger: PathBuf,
}

impl Serialize for RacingInput {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if !self.ledger.exists() {
            std::fs::write(
                &self.ledger,
                br#"{"format": "tutti-ledger", "version": 1, "tasks": []}"#,
            )
            .map_err(serde::ser::Error::custom)?;
        }
        serializer.serialize_u64(1)
    }
}

#[test]
fn without_resume_a_ledger_created_while_starting_is_still_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join(NAME);
    let items = [CampaignItem::new(
        "task-000",
        RacingInput {
            ledger: ledger.clone(),
        },
    )];
    let before_run = std::fs::read(&ledger).ok();
    assert_eq!(before_run, None);
    let task = |_: &RacingInput, _: &TaskContext<'_>| Ok::<_, String>(1u64);
    let options = CampaignOptions::default().with_resume(false);
    let err = checkpointed_map(task, &items, &ledger, &options).expect_err("the ledger exists");
    assert!(matches!(err, FitError::LedgerExists { .. }), "{err}");
    assert!(read_ledger(&ledger).unwrap().is_empty(), "left untouched");
}

#[test]
fn without_resume_a_new_ledger_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join(NAME);
    let items = items(3);
    let options = CampaignOptions::default().with_resume(false);
    let outcome = checkpointed_map(square, &items, &ledger, &options).unwrap();
    assert_eq!(outcome.results, expected(&items));
    assert_eq!(read_ledger(&ledger).unwrap().len(), 3);
    // A dangling symbolic link at the ledger's name counts as an existing ledger.
    let other = dir.path().join("other.json");
    symlink(dir.path().join("nowhere"), &other).unwrap();
    let err = checkpointed_map(square, &items, &other, &options).unwrap_err();
    assert!(matches!(err, FitError::LedgerExists { .. }), "{err}");
}

/// The environment variable that turns [`ledger_write_limit_child`] on.
const LIMIT_CHILD: &str = "TUTTI_TEST_LEDGER_WRITE_LIMIT";

/// Not a test on its own: the child process of the full-disk test (does nothing unless the
/// parent sets the environment variable). It records two tasks, then caps the size of any
/// file it writes (`RLIMIT_FSIZE`, like a disk filling up: writes past it fail with EFBIG)
/// and runs a campaign whose ledger outgrows the cap.
#[test]
fn ledger_write_limit_child() {
    let Ok(ledger) = std::env::var(LIMIT_CHILD) else {
        return;
    };
    let ledger = PathBuf::from(ledger);
    let items = items(40);
    checkpointed_map(square, &items[..2], &ledger, &CampaignOptions::default()).unwrap();
    let size = std::fs::metadata(&ledger).unwrap().len();
    let limit = libc::rlimit {
        rlim_cur: size + 400,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain system calls on this process; ignoring SIGXFSZ turns the signal a
    // write past the cap would raise into the EFBIG error the ledger must handle.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    let err = checkpointed_map(square, &items, &ledger, &CampaignOptions::default())
        .expect_err("the ledger outgrows the cap");
    assert!(matches!(err, FitError::Io { .. }), "{err}");
    println!("write limit reached: {err}");
}

#[test]
fn a_full_disk_stops_the_campaign_leaving_the_last_ledger_and_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join(NAME);
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "ledger_write_limit_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(LIMIT_CHILD, &ledger)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("write limit reached"),
        "child failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    // The last complete ledger, and nothing else, is left.
    let kept = read_ledger(&ledger).unwrap();
    assert!(kept.len() >= 2 && kept.len() < 40, "{} records", kept.len());
    assert_eq!(
        names(dir.path()),
        [NAME.to_string(), format!("{NAME}.lock")]
    );
    // Space again: the rerun finishes from where it stopped.
    let items = items(40);
    let outcome = checkpointed_map(square, &items, &ledger, &CampaignOptions::default()).unwrap();
    assert_eq!(outcome.results, expected(&items));
    assert_eq!(outcome.reused, kept.len());
    assert!(outcome.records.iter().all(|r| r.attempts == 1));
}

#[test]
fn results_read_back_from_the_ledger_are_bitwise_what_the_task_returned() {
    // Values serde_json's fast float parser reads 1 ulp off (1.9996503485949066 as
    // ...064); the workspace enables its `float_roundtrip` feature so a resumed campaign
    // hands out exactly the results its first run computed.
    let values = [
        1.9996503485949066,
        1.9976007308762673,
        0.49727880132605284,
        f64::MIN_POSITIVE,
        5e-324,
        f64::MAX,
        -0.1,
    ];
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join(NAME);
    let items: Vec<CampaignItem<u64>> = (0..values.len())
        .map(|i| CampaignItem::new(format!("task-{i}"), i as u64))
        .collect();
    let task = |input: &u64, _: &TaskContext<'_>| Ok(values[*input as usize]);
    checkpointed_map(task, &items, &ledger, &CampaignOptions::default()).unwrap();
    let never = |_: &u64, _: &TaskContext<'_>| -> Result<f64, String> { Err("ran".into()) };
    let resumed = checkpointed_map(never, &items, &ledger, &CampaignOptions::default()).unwrap();
    assert_eq!(resumed.reused, values.len());
    for (got, want) in resumed.results.iter().zip(values) {
        assert_eq!(got.map(f64::to_bits), Some(want.to_bits()), "{want:e}");
    }
}
