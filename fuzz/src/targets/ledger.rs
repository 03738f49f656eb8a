//! The campaign ledger: bytes as a ledger file, read, opened, one record added, read back.
//! Oracle: no panic; what was read survives a record and a re-read unchanged, and the new
//! record is there.

use tutti_fit::ledger::{input_hash, read_ledger};
use tutti_fit::{Ledger, TaskRecord, TaskStatus};

/// Runs one input through the target: returns when the oracle (the module's doc) holds,
/// panics where it fails.
pub fn run(data: &[u8]) {
    let dir = crate::write_scratch(&["ledger.json".to_string()], &[data]);
    let path = dir.join("ledger.json");
    let Ok(before) = read_ledger(&path) else {
        return;
    };
    let Ok(mut ledger) = Ledger::open(&path) else {
        return;
    };
    assert_eq!(ledger.records(), before.as_slice());
    let id = "fuzz-new-task";
    let record = TaskRecord {
        task_id: id.to_string(),
        input_hash: input_hash(id.as_bytes()),
        status: TaskStatus::Accepted,
        attempts: 1,
        result: Some(serde_json::json!({ "value": 1.5 })),
        error: None,
    };
    if ledger.record(record.clone()).is_err() {
        return;
    }
    drop(ledger);
    let after = match read_ledger(&path) {
        Ok(after) => after,
        Err(err) => panic!("a ledger tutti wrote does not read back: {err}"),
    };
    assert!(after
        .iter()
        .any(|r| r.task_id == id && r.result == record.result));
    for old in before.iter().filter(|r| r.task_id != id) {
        assert!(after.contains(old), "record {} lost", old.task_id);
    }
}
