//! Checkpointed campaigns: many independent tasks whose results survive interruption.

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tutti_backend::{Progress, ProgressFn, Resources};

use tutti_group::Group;

use crate::ledger::{check_finite, input_hash, Ledger, TaskRecord, TaskStatus};
use crate::FitError;

mod processes;

/// One item of a campaign: its input, under an id that stays the same across restarts.
#[derive(Clone, Debug, PartialEq)]
pub struct CampaignItem<I> {
    /// The task's id (unique within the campaign).
    pub task_id: String,
    /// The task's input.
    pub input: I,
}

impl<I> CampaignItem<I> {
    /// An item with this id and input.
    pub fn new(task_id: impl Into<String>, input: I) -> Self {
        Self {
            task_id: task_id.into(),
            input,
        }
    }
}

/// Where tasks run.
#[derive(Clone, Debug, Default)]
pub enum Execution {
    /// One after another on the calling thread (the default); a task receives
    /// [`Resources::default`].
    #[default]
    Serial,
    /// One task at a time per group, the groups in parallel (see
    /// [`crate::resource_groups`]); a task receives its group's [`Resources`] in
    /// [`TaskContext::resources`], e.g. for [`crate::FitOptions::with_resources`].
    Groups(Vec<Resources>),
    /// Across the processes of `group`, which has one rank in each (a group spanning the
    /// processes of an MPI job, [`Group::spanning`]): every process runs its share of the
    /// tasks, one at a time on each of its `local` device groups, and rank 0 alone opens and
    /// writes the ledger (the other processes never touch its file). Every process must call
    /// [`checkpointed_map`] with the same items; every process returns the same outcome.
    ///
    /// The tasks go out in rounds: each round hands every local group of every process its
    /// next task, and ends when rank 0 has recorded them all, so a round lasts as long as its
    /// slowest task (tasks of similar cost suit this; bootstrap replicates do). A process
    /// killed mid-round loses that round's tasks only, which rerun on resume.
    Processes {
        /// One rank per process.
        group: Group,
        /// This process's device groups (see [`crate::resource_groups`]); at least one.
        local: Vec<Resources>,
    },
}

/// Options of [`checkpointed_map`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CampaignOptions {
    /// Keep the ledger's accepted results and run only failed and missing tasks (default
    /// true). With `false`, an existing ledger is an error: it is never overwritten.
    pub resume: bool,
    /// Where tasks run (default [`Execution::Serial`]).
    pub execution: Execution,
    /// Called as each task of this run finishes (accepted or failed), by the process that
    /// keeps the ledger: task `"campaign"`, stage the task's id, `done` of `total` the tasks
    /// this run had pending (tasks the ledger already held do not count). Default `None`.
    /// Each finished task is also logged through the [`log`] facade at level `debug`.
    pub progress: Option<ProgressFn>,
}

impl Default for CampaignOptions {
    fn default() -> Self {
        Self {
            resume: true,
            execution: Execution::Serial,
            progress: None,
        }
    }
}

impl CampaignOptions {
    /// These options with `resume` set.
    pub fn with_resume(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    /// These options with `execution` set.
    pub fn with_execution(mut self, execution: Execution) -> Self {
        self.execution = execution;
        self
    }

    /// These options with a progress callback (see [`CampaignOptions::progress`]).
    pub fn with_progress(mut self, progress: ProgressFn) -> Self {
        self.progress = Some(progress);
        self
    }
}

/// What a task is told about its run.
pub struct TaskContext<'a> {
    /// The task's id.
    pub task_id: &'a str,
    /// 1 on the first run, 2 on the rerun of a failed task, ...
    pub attempt: u32,
    /// The resources it runs on: its group's for [`Execution::Groups`] and
    /// [`Execution::Processes`], [`Resources::default`] for [`Execution::Serial`].
    pub resources: &'a Resources,
}

/// A task that failed, as [`CampaignOutcome::failures`] lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskFailure {
    /// The task.
    pub task_id: String,
    /// Its error (or panic message).
    pub error: String,
    /// How many times it has run.
    pub attempts: u32,
}

/// The outcome of a campaign.
#[derive(Debug)]
pub struct CampaignOutcome<O> {
    /// One entry per item, in item order: `Some(result)` for accepted tasks.
    pub results: Vec<Option<O>>,
    /// Tasks that failed, in item order.
    pub failures: Vec<TaskFailure>,
    /// The ledger records of the items, in item order.
    pub records: Vec<TaskRecord>,
    /// How many accepted results were taken from the ledger instead of being run.
    pub reused: usize,
    /// How many tasks ran in this call.
    pub ran: usize,
}

/// Runs `task` on every item not already accepted in the ledger at `ledger_path`, recording
/// each finished task there before the next result is handed out, and returns every result
/// in item order.
///
/// - The ledger is rewritten atomically after every task (see [`Ledger::record`]), so an
///   interruption at any point loses at most the tasks that were running, which rerun on
///   resume; a recorded accepted result is never computed again. Tasks run *at least once*:
///   one interrupted after it returned but before its record was written runs again, so a
///   task's side effects must tolerate a repeat.
/// - With `resume` (the default), accepted tasks are taken from the ledger, failed and
///   missing ones run (their `attempts` count on). A recorded task whose item changed is
///   refused with [`FitError::InputChanged`], so a result is never paired with the wrong
///   input.
/// - A damaged or foreign ledger is an error and is left untouched; a ledger held by
///   another process is refused ([`FitError::LedgerLocked`]).
/// - A task that returns `Err` or panics is recorded as failed; the campaign goes on. So is
///   one whose result cannot be stored: a NaN or infinity anywhere in it (JSON has neither),
///   or JSON that does not read back as `O`.
/// - Without `resume`, an existing ledger is refused ([`FitError::LedgerExists`]), checked
///   while its lock is held.
///
/// Errors also: duplicate task ids, items that cannot be serialized, results that cannot be
/// stored or read back, I/O errors.
pub fn checkpointed_map<I, O, F>(
    task: F,
    items: &[CampaignItem<I>],
    ledger_path: &Path,
    options: &CampaignOptions,
) -> Result<CampaignOutcome<O>, FitError>
where
    I: Serialize + Sync,
    O: Serialize + DeserializeOwned + Send,
    F: Fn(&I, &TaskContext<'_>) -> Result<O, String> + Sync,
{
    let groups = match &options.execution {
        Execution::Processes { group, local } => {
            // Bad items on one process only must not leave the others waiting.
            let hashes = group.before_run(input_hashes(items))?;
            return processes::run(&task, items, &hashes, ledger_path, options, group, local);
        }
        Execution::Serial => None,
        Execution::Groups(groups) if groups.is_empty() => {
            return Err(FitError::invalid(
                "execution",
                "at least one group is needed",
            ))
        }
        Execution::Groups(groups) => Some(groups),
    };
    let hashes = input_hashes(items)?;
    let ledger = open_ledger(ledger_path, options.resume)?;
    let pending = pending_tasks(&ledger, items, &hashes)?;

    let ledger = Mutex::new(ledger);
    let first_error: Mutex<Option<FitError>> = Mutex::new(None);
    let stop = AtomicBool::new(false);
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let run_one = |resources: &Resources| loop {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Some(&(i, attempt)) = pending.get(next.fetch_add(1, Ordering::SeqCst)) else {
            return;
        };
        let record = run_task(&task, &items[i], &hashes[i], attempt, resources);
        let done = finished.fetch_add(1, Ordering::SeqCst) + 1;
        report_progress(options, &record, done, pending.len());
        let mut guard = ledger.lock().unwrap_or_else(|poison| poison.into_inner());
        if let Err(err) = guard.record(record) {
            stop.store(true, Ordering::SeqCst);
            first_error
                .lock()
                .unwrap_or_else(|poison| poison.into_inner())
                .get_or_insert(err);
            return;
        }
    };
    match groups {
        None => run_one(&Resources::default()),
        Some(groups) => std::thread::scope(|scope| {
            for group in groups {
                let run_one = &run_one;
                scope.spawn(move || run_one(group));
            }
        }),
    }
    if let Some(err) = first_error
        .into_inner()
        .unwrap_or_else(|poison| poison.into_inner())
    {
        return Err(err);
    }

    let ledger = ledger
        .into_inner()
        .unwrap_or_else(|poison| poison.into_inner());
    let records = items
        .iter()
        .map(|item| {
            ledger.get(&item.task_id).cloned().ok_or_else(|| {
                FitError::io(
                    format!("task '{}' has no ledger record after running", item.task_id),
                    std::io::Error::other("missing record"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    outcome(records, ledger_path, pending.len())
}

/// The input hash of every item, after checking that no task id appears twice.
fn input_hashes<I: Serialize>(items: &[CampaignItem<I>]) -> Result<Vec<String>, FitError> {
    let mut seen = HashSet::new();
    if let Some(item) = items
        .iter()
        .find(|item| !seen.insert(item.task_id.as_str()))
    {
        return Err(FitError::invalid(
            "items",
            format!("task id '{}' appears more than once", item.task_id),
        ));
    }
    items
        .iter()
        .map(|item| {
            serde_json::to_vec(&item.input)
                .map(|bytes| input_hash(&bytes))
                .map_err(|err| {
                    FitError::invalid(
                        "items",
                        format!("task '{}' cannot be serialized: {err}", item.task_id),
                    )
                })
        })
        .collect()
}

/// The ledger at `path`: opened for `resume`, else created. Without resume the ledger must
/// not exist; that is checked under its lock, so a campaign starting at the same time cannot
/// create it between the check and the first record.
fn open_ledger(path: &Path, resume: bool) -> Result<Ledger, FitError> {
    if resume {
        Ledger::open(path)
    } else {
        Ledger::create(path)
    }
}

/// The tasks to run, as (item index, attempt), in item order: accepted records of unchanged
/// items are reused; a record whose item changed is refused.
fn pending_tasks<I>(
    ledger: &Ledger,
    items: &[CampaignItem<I>],
    hashes: &[String],
) -> Result<Vec<(usize, u32)>, FitError> {
    let mut pending = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match ledger.get(&item.task_id) {
            Some(record) if record.input_hash != hashes[i] => {
                return Err(FitError::InputChanged {
                    task_id: item.task_id.clone(),
                    recorded: record.input_hash.clone(),
                    now: hashes[i].clone(),
                })
            }
            Some(record) if record.status == TaskStatus::Accepted => {}
            // Saturating: a crafted or ancient count never wraps back to a first attempt.
            Some(record) => pending.push((i, record.attempts.saturating_add(1))),
            None => pending.push((i, 1)),
        }
    }
    Ok(pending)
}

/// Runs one task and returns its record: accepted with its result, or failed with its error,
/// its panic message, or the reason its result cannot be stored.
fn run_task<I, O, F>(
    task: &F,
    item: &CampaignItem<I>,
    hash: &str,
    attempt: u32,
    resources: &Resources,
) -> TaskRecord
where
    O: Serialize + DeserializeOwned,
    F: Fn(&I, &TaskContext<'_>) -> Result<O, String>,
{
    let context = TaskContext {
        task_id: &item.task_id,
        attempt,
        resources,
    };
    let outcome = match catch_unwind(AssertUnwindSafe(|| task(&item.input, &context))) {
        Ok(outcome) => outcome,
        Err(payload) => Err(format!(
            "panicked: {}",
            tutti_backend::panic_message(payload.as_ref())
        )),
    };
    let (status, result, error) = match outcome.and_then(|result| storable(&result)) {
        Ok(value) => (TaskStatus::Accepted, Some(value), None),
        Err(error) => (TaskStatus::Failed, None, Some(error)),
    };
    TaskRecord {
        task_id: item.task_id.clone(),
        input_hash: hash.to_string(),
        status,
        attempts: attempt,
        result,
        error,
    }
}

/// Reports a finished task, the `done`-th of `total` pending: a `debug` log line, and the
/// options' callback.
fn report_progress(options: &CampaignOptions, record: &TaskRecord, done: usize, total: usize) {
    log::debug!(
        "campaign: task '{}' {} (attempt {})",
        record.task_id,
        match record.status {
            TaskStatus::Accepted => "accepted",
            TaskStatus::Failed => "failed",
        },
        record.attempts
    );
    tutti_backend::progress::report(
        options.progress.as_ref(),
        Progress {
            task: "campaign",
            stage: &record.task_id,
            done: done as u64,
            total: total as u64,
            value: None,
        },
    );
}

/// The outcome from the ledger records of the items, in item order, after `ran` tasks ran.
fn outcome<O: DeserializeOwned>(
    records: Vec<TaskRecord>,
    ledger_path: &Path,
    ran: usize,
) -> Result<CampaignOutcome<O>, FitError> {
    let mut outcome = CampaignOutcome {
        results: Vec::with_capacity(records.len()),
        failures: Vec::new(),
        records: Vec::with_capacity(records.len()),
        reused: records.len().saturating_sub(ran),
        ran,
    };
    for record in records {
        let result = match (&record.status, &record.result) {
            (TaskStatus::Accepted, Some(value)) => Some(
                serde_json::from_value(value.clone()).map_err(|err| FitError::BadLedger {
                    path: ledger_path.to_path_buf(),
                    reason: format!(
                        "the result of task '{}' does not read back as the expected type ({err})",
                        record.task_id
                    ),
                })?,
            ),
            _ => {
                outcome.failures.push(TaskFailure {
                    task_id: record.task_id.clone(),
                    error: record.error.clone().unwrap_or_default(),
                    attempts: record.attempts,
                });
                None
            }
        };
        outcome.results.push(result);
        outcome.records.push(record);
    }
    Ok(outcome)
}

/// The JSON of a task's result, if it can be stored and read back as `O`: JSON has no NaN
/// or infinity (`serde_json` would write `null`, and every later resume would fail to read
/// the result back), so a result holding one is refused, and the task recorded as failed.
fn storable<O: Serialize + DeserializeOwned>(result: &O) -> Result<serde_json::Value, String> {
    check_finite(result).map_err(|err| format!("result not storable: {err}"))?;
    let value =
        serde_json::to_value(result).map_err(|err| format!("result not storable: {err}"))?;
    serde_json::from_value::<O>(value.clone()).map_err(|err| {
        format!("result not storable: its JSON does not read back as the result type ({err})")
    })?;
    Ok(value)
}

/// Counts of a ledger's tasks, for `tutti campaign status`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LedgerSummary {
    /// Tasks recorded.
    pub tasks: usize,
    /// Tasks accepted.
    pub accepted: usize,
    /// Tasks failed.
    pub failed: usize,
    /// Runs in all (attempts summed).
    pub attempts: u64,
}

/// Summarizes the ledger at `path` without taking its lock.
pub fn summarize_ledger(path: &Path) -> Result<(LedgerSummary, Vec<TaskRecord>), FitError> {
    let records = crate::ledger::read_ledger(path)?;
    let summary = LedgerSummary {
        tasks: records.len(),
        accepted: records
            .iter()
            .filter(|r| r.status == TaskStatus::Accepted)
            .count(),
        failed: records
            .iter()
            .filter(|r| r.status == TaskStatus::Failed)
            .count(),
        attempts: records.iter().map(|r| u64::from(r.attempts)).sum(),
    };
    Ok((summary, records))
}
