//! Checkpointed campaigns: resume, failures, changed inputs, damaged ledgers, locks, and a
//! campaign killed with SIGKILL and resumed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tutti_backend::Resources;
use tutti_fit::ledger::read_ledger;
use tutti_fit::{
    checkpointed_map, resource_groups, CampaignItem, CampaignOptions, Execution, FitError, Ledger,
    TaskContext, TaskStatus,
};

fn items(n: usize) -> Vec<CampaignItem<u64>> {
    (0..n)
        .map(|i| CampaignItem::new(format!("task-{i:03}"), i as u64 * 7 + 1))
        .collect()
}

/// The task's result for an input: something a mislabelled result would get wrong.
fn square(input: &u64) -> u64 {
    input * input
}

fn ledger_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("campaign.json")
}

#[test]
fn results_come_back_in_item_order_and_resume_reruns_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&dir);
    let calls = AtomicUsize::new(0);
    let task = |input: &u64, _: &TaskContext<'_>| {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(square(input))
    };
    let items = items(12);
    let outcome = checkpointed_map(task, &items, &ledger, &CampaignOptions::default()).unwrap();
    let expected: Vec<Option<u64>> = items.iter().map(|i| Some(square(&i.input))).collect();
    assert_eq!(outcome.results, expected);
    assert_eq!((outcome.ran, outcome.reused), (12, 0));
    assert!(outcome.failures.is_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 12);

    let again = checkpointed_map(task, &items, &ledger, &CampaignOptions::default()).unwrap();
    assert_eq!(again.results, expected);
    assert_eq!((again.ran, again.reused), (0, 12));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        12,
        "accepted tasks never run twice"
    );
    assert!(again.records.iter().all(|r| r.attempts == 1));
}

#[test]
fn failed_and_panicking_tasks_are_recorded_and_rerun_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&dir);
    let items = items(6);
    let flaky = |input: &u64, context: &TaskContext<'_>| {
        if context.attempt == 1 && *input == items[2].input {
            return Err("did not converge".to_string());
        }
        if context.attempt == 1 && *input == items[4].input {
            panic!("diverged");
        }
        Ok(square(input))
    };
    let first = checkpointed_map(flaky, &items, &ledger, &CampaignOptions::default()).unwrap();
    assert_eq!(first.results[2], None);
    assert_eq!(first.results[4], None);
    assert_eq!(first.failures.len(), 2);
    assert_eq!(first.failures[0].task_id, "task-002");
    assert_eq!(first.failures[0].error, "did not converge");
    assert_eq!(first.failures[1].error, "panicked: diverged");

    let second = checkpointed_map(flaky, &items, &ledger, &CampaignOptions::default()).unwrap();
    assert!(second.failures.is_empty());
    assert_eq!((second.ran, second.reused), (2, 4));
    assert_eq!(second.results[2], Some(square(&items[2].input)));
    assert_eq!(second.records[2].attempts, 2);
    assert_eq!(second.records[4].attempts, 2);
    assert_eq!(second.records[0].attempts, 1);
}

#[test]
fn a_changed_input_is_refused_and_the_ledger_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&dir);
    let task = |input: &u64, _: &TaskContext<'_>| Ok::<_, String>(square(input));
    let mut items = items(4);
    checkpointed_map(task, &items, &ledger, &CampaignOptions::default()).unwrap();
    let before = std::fs::read(&ledger).unwrap();
    items[1].input += 1;
    let err = checkpointed_map(task, &items, &ledger, &CampaignOptions::default()).unwrap_err();
    assert!(
        matches!(&err, FitError::InputChanged { task_id, .. } if task_id == "task-001"),
        "{err}"
    );
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
}

#[test]
fn damaged_or_foreign_ledgers_are_errors_and_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&dir);
    let task = |input: &u64, _: &TaskContext<'_>| Ok::<_, String>(square(input));
    for (content, says) in [
        (
            &b"{\"format\": \"tutti-ledger\", \"version\": 1, \"tasks\": [{\"task_id\""[..],
            "not valid JSON",
        ),
        (b"{\"results\": [1, 2, 3]}", "no \"format\" field"),
        (
            b"{\"format\": \"other-tool\", \"version\": 1, \"tasks\": []}",
            "'other-tool'",
        ),
        (
            b"{\"format\": \"tutti-ledger\", \"version\": 9, \"tasks\": []}",
            "version 9",
        ),
    ] {
        std::fs::write(&ledger, content).unwrap();
        let err =
            checkpointed_map(task, &items(3), &ledger, &CampaignOptions::default()).unwrap_err();
        assert!(matches!(err, FitError::BadLedger { .. }), "{err}");
        assert!(err.to_string().contains(says), "{err}");
        assert_eq!(std::fs::read(&ledger).unwrap(), content, "left untouched");
    }
}

#[test]
fn an_existing_ledger_without_resume_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&dir);
    let task = |input: &u64, _: &TaskContext<'_>| Ok::<_, String>(square(input));
    checkpointed_map(task, &items(2), &ledger, &CampaignOptions::default()).unwrap();
    let options = CampaignOptions::default().with_resume(false);
    let err = checkpointed_map(task, &items(2), &ledger, &options).unwrap_err();
    assert!(matches!(err, FitError::LedgerExists { .. }), "{err}");
}

#[test]
fn duplicate_task_ids_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let task = |input: &u64, _: &TaskContext<'_>| Ok::<_, String>(square(input));
    let mut items = items(3);
    items[2].task_id = items[0].task_id.clone();
    let err =
        checkpointed_map(task, &items, &ledger_in(&dir), &CampaignOptions::default()).unwrap_err();
    assert!(err.to_string().contains("task-000"), "{err}");
}

#[test]
fn a_held_ledger_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&dir);
    let held = Ledger::open(&ledger).unwrap();
    let task = |input: &u64, _: &TaskContext<'_>| Ok::<_, String>(square(input));
    let err = checkpointed_map(task, &items(2), &ledger, &CampaignOptions::default()).unwrap_err();
    assert!(matches!(err, FitError::LedgerLocked { .. }), "{err}");
    drop(held);
    checkpointed_map(task, &items(2), &ledger, &CampaignOptions::default()).unwrap();
}

#[test]
fn device_groups_share_the_work_and_results_keep_item_order() {
    let dir = tempfile::tempdir().unwrap();
    let groups = resource_groups(&Resources::cpu(4), &[2, 2]).unwrap();
    let options = CampaignOptions::default().with_execution(Execution::Groups(groups));
    let task = |input: &u64, context: &TaskContext<'_>| {
        let devices = context.resources.select().map_err(|e| e.to_string())?;
        assert_eq!(devices.len(), 2);
        std::thread::sleep(Duration::from_millis(2));
        Ok::<_, String>((square(input), devices[0].ordinal()))
    };
    let items = items(20);
    let outcome = checkpointed_map(task, &items, &ledger_in(&dir), &options).unwrap();
    for (item, result) in items.iter().zip(&outcome.results) {
        let (value, first_device) = result.unwrap();
        assert_eq!(value, square(&item.input));
        assert!(first_device == 0 || first_device == 2);
    }
    assert_eq!(read_ledger(&ledger_in(&dir)).unwrap().len(), 20);
}

/// Environment variable that turns [`campaign_child_process`] into the campaign to kill.
const CHILD_LEDGER: &str = "TUTTI_FIT_TEST_CHILD_LEDGER";
const KILL_ITEMS: usize = 40;

/// The slow task of the kill test: logs each execution, then answers.
fn logged_task(
    log: &Path,
    delay: Duration,
) -> impl Fn(&u64, &TaskContext<'_>) -> Result<u64, String> + Sync + '_ {
    move |input, context| {
        std::thread::sleep(delay);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| e.to_string())?;
        writeln!(file, "{}", context.task_id).map_err(|e| e.to_string())?;
        Ok(square(input))
    }
}

/// Not a test on its own: the child process of the kill test (does nothing unless the
/// parent sets the environment variable).
#[test]
fn campaign_child_process() {
    let Ok(ledger) = std::env::var(CHILD_LEDGER) else {
        return;
    };
    let ledger = PathBuf::from(ledger);
    let log = ledger.with_extension("log");
    let task = logged_task(&log, Duration::from_millis(40));
    checkpointed_map(
        task,
        &items(KILL_ITEMS),
        &ledger,
        &CampaignOptions::default(),
    )
    .unwrap();
}

#[test]
fn a_campaign_killed_mid_run_resumes_without_losing_or_duplicating() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&dir);
    let log = ledger.with_extension("log");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "campaign_child_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_LEDGER, &ledger)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the child has accepted a few tasks (it holds the lock all the while).
    let started = Instant::now();
    let accepted_before_kill = loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the child made no progress"
        );
        if let Ok(records) = read_ledger(&ledger) {
            if records.len() >= 5 {
                break records;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // A second process may not open the ledger while the first runs.
    let task = |input: &u64, _: &TaskContext<'_>| Ok::<_, String>(square(input));
    let err = checkpointed_map(
        task,
        &items(KILL_ITEMS),
        &ledger,
        &CampaignOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, FitError::LedgerLocked { .. }), "{err}");

    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let recorded_at_kill = read_ledger(&ledger).unwrap();
    assert!(recorded_at_kill.len() >= accepted_before_kill.len());
    assert!(recorded_at_kill.len() < KILL_ITEMS, "killed before the end");

    // Resume in this process: the lock died with the child.
    let outcome = checkpointed_map(
        logged_task(&log, Duration::ZERO),
        &items(KILL_ITEMS),
        &ledger,
        &CampaignOptions::default(),
    )
    .unwrap();
    let expected: Vec<Option<u64>> = items(KILL_ITEMS)
        .iter()
        .map(|i| Some(square(&i.input)))
        .collect();
    assert_eq!(outcome.results, expected, "nothing lost or mislabelled");
    assert_eq!(outcome.reused, recorded_at_kill.len());
    let final_records = read_ledger(&ledger).unwrap();
    assert_eq!(final_records.len(), KILL_ITEMS);
    assert!(final_records
        .iter()
        .all(|r| r.status == TaskStatus::Accepted && r.attempts == 1));

    // Every task recorded before the kill ran exactly once in all.
    let executions = std::fs::read_to_string(&log).unwrap();
    for record in &recorded_at_kill {
        let runs = executions.lines().filter(|l| *l == record.task_id).count();
        assert_eq!(runs, 1, "task {} ran {runs} times", record.task_id);
    }
    // And every task ran at least once.
    for item in items(KILL_ITEMS) {
        assert!(executions.lines().any(|l| l == item.task_id));
    }
}

/// Progress counts this run's pending tasks: every task once, `done` rising to `total`,
/// over two device groups; a resumed run with one task left reports 1 of 1.
#[test]
fn progress_reports_each_pending_task_once() {
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&dir);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let progress = tutti_backend::ProgressFn::new(move |p| {
        assert_eq!(p.task, "campaign");
        sink.lock()
            .unwrap()
            .push((p.stage.to_owned(), p.done, p.total));
    });
    let groups = resource_groups(&Resources::cpu(2), &[1, 1]).unwrap();
    let options = CampaignOptions::default()
        .with_execution(Execution::Groups(groups))
        .with_progress(progress);
    let fail_once = AtomicUsize::new(0);
    let task = |input: &u64, context: &TaskContext<'_>| {
        if context.task_id == "task-003" && fail_once.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err("the first try of task-003 fails".to_string());
        }
        Ok(square(input))
    };
    let items = items(6);
    checkpointed_map(task, &items, &ledger, &options).unwrap();
    let mut first = seen.lock().unwrap().clone();
    let done: Vec<u64> = first.iter().map(|(_, done, _)| *done).collect();
    assert_eq!(done, (1..=6).collect::<Vec<_>>());
    assert!(first.iter().all(|(_, _, total)| *total == 6));
    first.sort();
    let ids: Vec<String> = first.into_iter().map(|(id, _, _)| id).collect();
    let expected: Vec<String> = items.iter().map(|item| item.task_id.clone()).collect();
    assert_eq!(ids, expected);

    seen.lock().unwrap().clear();
    checkpointed_map(task, &items, &ledger, &options).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![("task-003".to_owned(), 1, 1)]);
}
