//! [`Execution::Processes`](super::Execution::Processes): a campaign across the processes of
//! a group with one rank in each, rank 0 holding the ledger.
//!
//! The run is one [`Group::run`], so a failure anywhere (a ledger rank 0 cannot open, items
//! that differ between processes, a record that does not read back) ends it on every
//! process with the origin's rank and text. In order:
//!
//! 1. every process checks that all hold the same items (a digest of ids and input hashes),
//!    and tells the others how many local device groups it has;
//! 2. rank 0 opens the ledger and broadcasts the pending tasks (item index and attempt);
//! 3. rounds: round `k` hands the next `slots` pending tasks out, rank `p` taking those of its
//!    slots (its local groups, numbered after rank `p - 1`'s), which run side by side; rank 0
//!    gathers the records and writes each to the ledger before the next round starts;
//! 4. rank 0 broadcasts the final records of all items, from which every process builds the
//!    same outcome.

use std::ops::Range;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tutti_backend::Resources;
use tutti_group::{Comm, Group};

use super::{
    input_hash, open_ledger, outcome, pending_tasks, report_progress, run_task, CampaignItem,
    CampaignOptions, CampaignOutcome, TaskContext, TaskRecord,
};
use crate::FitError;

/// The rank that opens and writes the ledger.
const LEDGER_RANK: usize = 0;

/// Runs the campaign across `group`'s processes; see the module's documentation.
pub(super) fn run<I, O, F>(
    task: &F,
    items: &[CampaignItem<I>],
    hashes: &[String],
    ledger_path: &Path,
    options: &CampaignOptions,
    group: &Group,
    local: &[Resources],
) -> Result<CampaignOutcome<O>, FitError>
where
    I: Sync,
    O: Serialize + DeserializeOwned + Send,
    F: Fn(&I, &TaskContext<'_>) -> Result<O, String> + Sync,
{
    let checked = if local.is_empty() {
        Err(FitError::invalid(
            "execution",
            "Execution::Processes needs at least one local group",
        ))
    } else if group.local_ranks().len() != 1 {
        Err(FitError::invalid(
            "execution",
            format!(
                "Execution::Processes needs a group with one rank in this process, and this \
                 one has {} here: use Execution::Groups within one process",
                group.local_ranks().len()
            ),
        ))
    } else {
        Ok(())
    };
    group.before_run(checked)?;
    let digest = items_digest(items, hashes);
    let mut ran = group.run(|comm| {
        let slots = agree(comm, &digest, local.len())?;
        let mut ledger = None;
        let mut plan = Vec::new();
        if comm.rank() == LEDGER_RANK {
            let opened = open_ledger(ledger_path, options.resume)?;
            for (i, attempt) in pending_tasks(&opened, items, hashes)? {
                plan.extend([i as u64, u64::from(attempt)]);
            }
            ledger = Some(opened);
        }
        comm.broadcast(LEDGER_RANK, &mut plan)?;
        let pending = decode_plan(&plan, items.len())?;

        let total: usize = slots.iter().sum();
        let first: usize = slots[..comm.rank()].iter().sum();
        let mut finished = 0;
        for round in pending.chunks(total) {
            let mine = clip(first..first + local.len(), round.len());
            let records = run_round(task, items, hashes, &round[mine], local);
            let sent = serde_json::to_vec(&records).map_err(to_io("sending task records"))?;
            let Some(blocks) = comm.gather(LEDGER_RANK, &sent)? else {
                continue;
            };
            let ledger = ledger.as_mut().ok_or_else(|| lost("the ledger"))?;
            let mut start = 0;
            for (rank, block) in blocks.iter().enumerate() {
                let theirs = clip(start..start + slots[rank], round.len());
                start += slots[rank];
                for record in received(block, rank, &round[theirs], items)? {
                    finished += 1;
                    report_progress(options, &record, finished, pending.len());
                    ledger.record(record)?;
                }
            }
        }

        let mut last = Vec::new();
        if let Some(ledger) = &ledger {
            let records = items
                .iter()
                .map(|item| ledger.get(&item.task_id).ok_or_else(|| lost(&item.task_id)))
                .collect::<Result<Vec<_>, _>>()?;
            last = serde_json::to_vec(&records).map_err(to_io("sending the ledger"))?;
        }
        comm.broadcast(LEDGER_RANK, &mut last)?;
        let records: Vec<TaskRecord> =
            serde_json::from_slice(&last).map_err(to_io("reading the ledger from rank 0"))?;
        if records.len() != items.len() {
            return Err(lost("the ledger's records"));
        }
        Ok((records, pending.len()))
    })?;
    let (records, pending) = ran.pop().ok_or_else(|| lost("this process's result"))?;
    outcome(records, ledger_path, pending)
}

/// Checks that every process holds the items of `digest` and returns the number of local
/// groups of each rank.
fn agree(comm: &Comm<'_>, digest: &str, local: usize) -> Result<Vec<usize>, FitError> {
    let digests = comm.allgather(digest.as_bytes())?;
    if let Some(rank) = digests.iter().position(|d| d != &digests[0]) {
        return Err(FitError::invalid(
            "items",
            format!(
                "the processes hold different items: rank {rank}'s differ from rank 0's (ids \
                 or inputs); every process must pass the same items"
            ),
        ));
    }
    let counts = comm.allgather(&[local as u64])?;
    counts
        .iter()
        .map(|count| match count.as_slice() {
            &[n] if n > 0 => usize::try_from(n).map_err(|_| lost("a group count")),
            _ => Err(lost("a group count")),
        })
        .collect()
}

/// A digest of the items' ids and input hashes, equal on processes holding the same items.
fn items_digest<I>(items: &[CampaignItem<I>], hashes: &[String]) -> String {
    let mut bytes = Vec::new();
    for (item, hash) in items.iter().zip(hashes) {
        bytes.extend_from_slice(item.task_id.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(hash.as_bytes());
        bytes.push(0);
    }
    input_hash(&bytes)
}

/// The pending tasks rank 0 broadcast, as (item index, attempt) pairs, checked.
fn decode_plan(plan: &[u64], items: usize) -> Result<Vec<(usize, u32)>, FitError> {
    if !plan.len().is_multiple_of(2) {
        return Err(lost("the plan of tasks"));
    }
    plan.chunks_exact(2)
        .map(|pair| {
            let i = usize::try_from(pair[0]).ok().filter(|&i| i < items);
            match (i, u32::try_from(pair[1])) {
                (Some(i), Ok(attempt)) => Ok((i, attempt)),
                _ => Err(lost("the plan of tasks")),
            }
        })
        .collect()
}

/// `range` clipped to `0..len`.
fn clip(range: Range<usize>, len: usize) -> Range<usize> {
    range.start.min(len)..range.end.min(len)
}

/// Runs `tasks`, the i-th on `local[i]`, side by side, and returns their records in order.
fn run_round<I, O, F>(
    task: &F,
    items: &[CampaignItem<I>],
    hashes: &[String],
    tasks: &[(usize, u32)],
    local: &[Resources],
) -> Vec<TaskRecord>
where
    I: Sync,
    O: Serialize + DeserializeOwned,
    F: Fn(&I, &TaskContext<'_>) -> Result<O, String> + Sync,
{
    let run = |&(i, attempt): &(usize, u32), resources: &Resources| {
        run_task(task, &items[i], &hashes[i], attempt, resources)
    };
    match tasks {
        [] => Vec::new(),
        [one] => vec![run(one, &local[0])],
        _ => std::thread::scope(|scope| {
            let handles: Vec<_> = tasks
                .iter()
                .zip(local)
                .map(|(pair, resources)| scope.spawn(move || run(pair, resources)))
                .collect();
            handles
                .into_iter()
                .map(|handle| match handle.join() {
                    Ok(record) => record,
                    // `run_task` catches the task's panics; one here is this crate's bug.
                    Err(payload) => std::panic::resume_unwind(payload),
                })
                .collect()
        }),
    }
}

/// The records rank `rank` sent for its tasks `expected` of the round, checked to be theirs.
fn received<I>(
    block: &[u8],
    rank: usize,
    expected: &[(usize, u32)],
    items: &[CampaignItem<I>],
) -> Result<Vec<TaskRecord>, FitError> {
    let records: Vec<TaskRecord> = serde_json::from_slice(block)
        .map_err(to_io(&format!("reading the task records of rank {rank}")))?;
    let matches = records.len() == expected.len()
        && records.iter().zip(expected).all(|(record, &(i, attempt))| {
            record.task_id == items[i].task_id && record.attempts == attempt
        });
    if !matches {
        return Err(FitError::Group(format!(
            "rank {rank} sent records of other tasks than it was given"
        )));
    }
    Ok(records)
}

fn to_io(what: &str) -> impl Fn(serde_json::Error) -> FitError + '_ {
    move |err| FitError::io(what, std::io::Error::other(err))
}

/// An internal inconsistency of the protocol (a bug, or processes of different builds).
fn lost(what: &str) -> FitError {
    FitError::Group(format!(
        "campaign across processes: {what} is missing or malformed (processes of different \
         tutti builds?)"
    ))
}
