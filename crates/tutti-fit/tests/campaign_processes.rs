//! Campaigns across processes ([`Execution::Processes`]), on loopback processes (threads
//! with a process transport between them, the wire MPI replaces): the same results and
//! ledger as one process, rank 0 alone writing the ledger, resume across a change of the
//! process count, and failures that reach every process.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use tutti_backend::Resources;
use tutti_fit::ledger::read_ledger;
use tutti_fit::{
    checkpointed_map, CampaignItem, CampaignOptions, CampaignOutcome, Execution, FitError, Ledger,
    TaskContext, TaskStatus,
};
use tutti_group::Group;
use tutti_mpi::on_loopback_processes;

fn items(n: usize) -> Vec<CampaignItem<u64>> {
    (0..n)
        .map(|i| CampaignItem::new(format!("task-{i:03}"), i as u64 * 7 + 1))
        .collect()
}

/// A task whose result a mislabelled or misplaced record would get wrong; inputs divisible
/// by 5 fail on their first attempt, and 22 panics on it.
fn task(input: &u64, context: &TaskContext<'_>) -> Result<u64, String> {
    if context.attempt == 1 && input.is_multiple_of(5) {
        return Err(format!("{input} fails its first attempt"));
    }
    assert!(
        context.attempt > 1 || *input != 22,
        "22 panics on its first attempt"
    );
    Ok(input * input + u64::from(context.attempt))
}

/// Campaign options across `group`'s processes, with `local` groups of one simulated device
/// in this one.
fn across_options(group: Group, local: usize) -> CampaignOptions {
    CampaignOptions::default().with_execution(Execution::Processes {
        group,
        local: vec![Resources::cpu(1); local],
    })
}

/// `local` device groups for every process: rank r gets `local_groups[r % len]`.
fn across(
    processes: usize,
    local_groups: &[usize],
    items: &[CampaignItem<u64>],
    ledger: &Path,
) -> Vec<Result<CampaignOutcome<u64>, FitError>> {
    on_loopback_processes(processes, |group: &Group| {
        let rank = group.local_ranks().start;
        let options = across_options(group.clone(), local_groups[rank % local_groups.len()]);
        checkpointed_map(task, items, ledger, &options)
    })
    .expect("loopback processes start")
}

fn results(outcome: &CampaignOutcome<u64>) -> Vec<Option<u64>> {
    outcome.results.clone()
}

#[test]
fn processes_give_the_results_and_ledger_of_one_process() {
    let items = items(23);
    let dir = tempfile::tempdir().unwrap();
    let serial_ledger = dir.path().join("serial.json");
    let serial = checkpointed_map(task, &items, &serial_ledger, &CampaignOptions::default())
        .expect("serial campaign");
    assert_eq!(
        serial.failures.len(),
        6,
        "5 inputs divisible by 5 and the panic"
    );
    for (processes, local_groups) in [(2, &[1][..]), (3, &[2, 1]), (4, &[1, 3, 2])] {
        let ledger = dir.path().join(format!("across-{processes}.json"));
        let outcomes = across(processes, local_groups, &items, &ledger);
        for (rank, outcome) in outcomes.into_iter().enumerate() {
            let outcome = outcome.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
            assert_eq!(results(&outcome), results(&serial), "rank {rank}");
            assert_eq!(outcome.records, serial.records, "rank {rank}");
            assert_eq!((outcome.ran, outcome.reused), (23, 0));
            assert_eq!(outcome.failures, serial.failures);
        }
        // One ledger, rank 0's, with the serial run's records in item order.
        assert_eq!(read_ledger(&ledger).unwrap(), serial.records);
        let written: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(&format!("across-{processes}")))
            .collect();
        assert_eq!(
            written.len(),
            2,
            "the ledger and its lock only: {written:?}"
        );
    }
}

#[test]
fn resume_across_processes_reruns_only_failed_and_missing_tasks() {
    let items = items(17);
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("campaign.json");
    // One process records the first 9 items; 3 processes then finish the campaign.
    checkpointed_map(task, &items[..9], &ledger, &CampaignOptions::default()).unwrap();
    let calls = AtomicUsize::new(0);
    let counted = |input: &u64, context: &TaskContext<'_>| {
        calls.fetch_add(1, Ordering::SeqCst);
        task(input, context)
    };
    let outcomes = on_loopback_processes(3, |group: &Group| {
        let options = across_options(group.clone(), 1);
        checkpointed_map(counted, &items, &ledger, &options)
    })
    .unwrap();
    // Of the first 9 (inputs 1, 8, ..., 57), 15, 22 and 50 failed, and 8 items were missing.
    let outcome = outcomes.into_iter().next().unwrap().unwrap();
    assert_eq!((outcome.ran, outcome.reused), (3 + 8, 6));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        11,
        "each pending task ran once"
    );
    for (item, record) in items.iter().zip(&outcome.records) {
        let rerun = [15, 22, 50].contains(&item.input);
        assert_eq!(
            record.attempts,
            if rerun { 2 } else { 1 },
            "{}",
            item.task_id
        );
    }
    let reread = read_ledger(&ledger).unwrap();
    assert_eq!(reread.len(), 17);
    assert_eq!(
        reread
            .iter()
            .filter(|r| r.status == TaskStatus::Failed)
            .count(),
        outcome.failures.len()
    );
}

#[test]
fn a_ledger_rank_0_cannot_open_fails_every_process_with_its_reason() {
    let items = items(6);
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("campaign.json");
    let _held = Ledger::open(&ledger).expect("this test holds the ledger");
    let outcomes = across(3, &[1], &items, &ledger);
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        match (rank, outcome) {
            (0, Err(FitError::LedgerLocked { .. })) => {}
            (_, Err(FitError::RankFailed { rank: 0, message })) if rank > 0 => {
                assert!(
                    message.contains("is in use by another process"),
                    "{message}"
                );
            }
            (rank, other) => panic!("rank {rank}: {other:?}"),
        }
    }
}

#[test]
fn processes_holding_different_items_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("campaign.json");
    let outcomes = on_loopback_processes(3, |group: &Group| {
        let mut mine = items(5);
        if group.local_ranks().start == 2 {
            mine[3].input += 1;
        }
        let options = across_options(group.clone(), 1);
        checkpointed_map(task, &mine, &ledger, &options)
    })
    .unwrap();
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        let err = outcome.expect_err("different items must be refused");
        assert!(
            err.to_string().contains("rank 2's differ from rank 0's"),
            "rank {rank}: {err}"
        );
    }
    assert!(!ledger.exists(), "nothing was recorded");
}

#[test]
fn a_process_without_local_groups_fails_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("campaign.json");
    let outcomes = across(2, &[1, 0], &items(4), &ledger);
    let errors: Vec<String> = outcomes
        .into_iter()
        .map(|o| o.expect_err("must fail").to_string())
        .collect();
    assert!(errors[1].contains("at least one local group"), "{errors:?}");
    assert!(errors[0].contains("rank 1 failed"), "{errors:?}");
    // A group with several ranks in this process is not one rank per process.
    let group = Group::from_resources(&Resources::cpu(2), tutti_fit::GPU_USE).unwrap();
    let options = across_options(group, 1);
    let err = checkpointed_map(task, &items(2), &ledger, &options).unwrap_err();
    assert!(
        err.to_string().contains("one rank in this process"),
        "{err}"
    );
}

#[test]
fn items_one_process_refuses_fail_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("campaign.json");
    let outcomes = on_loopback_processes(3, |group: &Group| {
        let mut mine = items(4);
        if group.local_ranks().start == 1 {
            mine[2].task_id = mine[0].task_id.clone();
        }
        let options = across_options(group.clone(), 1);
        checkpointed_map(task, &mine, &ledger, &options)
    })
    .unwrap();
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        let err = outcome
            .expect_err("a duplicate id on one process fails all")
            .to_string();
        assert!(err.contains("appears more than once"), "rank {rank}: {err}");
        if rank != 1 {
            assert!(err.starts_with("rank 1 failed"), "rank {rank}: {err}");
        }
    }
}
