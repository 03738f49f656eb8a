//! The campaign ledger: one JSON file recording every finished task, rewritten atomically,
//! and held by one process at a time.
//!
//! Format (`"format": "tutti-ledger"`, `"version": 1`):
//!
//! ```json
//! { "format": "tutti-ledger", "version": 1,
//!   "tasks": [ { "task_id": "replicate-0", "input_hash": "fnv1a64:9c2f...", "status": "accepted",
//!                "attempts": 1, "result": { ... } },
//!              { "task_id": "replicate-1", "input_hash": "fnv1a64:01be...", "status": "failed",
//!                "attempts": 2, "error": "did not converge" } ] }
//! ```
//!
//! A task appears once it has finished; a task interrupted mid-run is simply absent and runs
//! again on resume. The input hash is FNV-1a (64 bit) of the item's JSON serialization: a
//! check that a record belongs to the same input, not a cryptographic digest. Items should
//! therefore serialize deterministically (structs, vectors, `BTreeMap`, not `HashMap`).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::FitError;

/// The `format` field of every ledger.
pub const LEDGER_FORMAT: &str = "tutti-ledger";
/// The ledger format version this crate writes and reads.
pub const LEDGER_VERSION: u32 = 1;

/// How a finished task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    /// It returned a result, which the ledger holds.
    Accepted,
    /// It returned an error (or panicked); it runs again on resume.
    Failed,
}

/// One finished task in the ledger.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The task's id, stable across restarts.
    pub task_id: String,
    /// `fnv1a64:<16 hex digits>` of the item's JSON.
    pub input_hash: String,
    /// Accepted or failed.
    pub status: TaskStatus,
    /// How many times it has run to completion (accepted or failed).
    pub attempts: u32,
    /// The result of an accepted task, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// The error of a failed task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct LedgerFile {
    format: String,
    version: u32,
    tasks: Vec<TaskRecord>,
}

/// The FNV-1a 64-bit hash of `bytes`, as `fnv1a64:<hex>`.
pub fn input_hash(bytes: &[u8]) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = bytes.iter().fold(OFFSET, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    });
    format!("fnv1a64:{hash:016x}")
}

/// Reads a ledger's records without taking its lock (for summaries).
///
/// Errors: unreadable file, or a file that is not a version-1 tutti ledger.
pub fn read_ledger(path: &Path) -> Result<Vec<TaskRecord>, FitError> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| FitError::io(format!("reading ledger {}", path.display()), err))?;
    parse_ledger(path, &text)
}

fn parse_ledger(path: &Path, text: &str) -> Result<Vec<TaskRecord>, FitError> {
    let bad = |reason: String| FitError::BadLedger {
        path: path.to_path_buf(),
        reason,
    };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|err| bad(format!("not valid JSON ({err})")))?;
    match value.get("format").and_then(|f| f.as_str()) {
        Some(LEDGER_FORMAT) => {}
        Some(other) => return Err(bad(format!("format is '{other}', not '{LEDGER_FORMAT}'"))),
        None => {
            return Err(bad(format!(
                "not a {LEDGER_FORMAT} file (no \"format\" field)"
            )))
        }
    }
    let file: LedgerFile =
        serde_json::from_value(value).map_err(|err| bad(format!("malformed ({err})")))?;
    if file.version != LEDGER_VERSION {
        return Err(bad(format!(
            "version {} is not supported (this build reads version {LEDGER_VERSION})",
            file.version
        )));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(duplicate) = file.tasks.iter().find(|t| !seen.insert(t.task_id.as_str())) {
        return Err(bad(format!("task '{}' appears twice", duplicate.task_id)));
    }
    Ok(file.tasks)
}

/// An open ledger: its records, and the lock that keeps other processes out until it is
/// dropped.
pub struct Ledger {
    path: PathBuf,
    records: Vec<TaskRecord>,
    index: HashMap<String, usize>,
    _lock: LedgerLock,
}

impl Ledger {
    /// Opens (or starts, if the file does not exist) the ledger at `path`, taking its lock.
    ///
    /// Errors: another process holds the lock; the file exists but is damaged or foreign
    /// (it is never overwritten); I/O errors.
    pub fn open(path: &Path) -> Result<Self, FitError> {
        let lock = LedgerLock::acquire(path)?;
        let records = match std::fs::read_to_string(path) {
            Ok(text) => parse_ledger(path, &text)?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(err) => {
                return Err(FitError::io(
                    format!("reading ledger {}", path.display()),
                    err,
                ))
            }
        };
        let index = records
            .iter()
            .enumerate()
            .map(|(i, record)| (record.task_id.clone(), i))
            .collect();
        Ok(Self {
            path: path.to_path_buf(),
            records,
            index,
            _lock: lock,
        })
    }

    /// The ledger's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every record, in the order tasks first finished.
    pub fn records(&self) -> &[TaskRecord] {
        &self.records
    }

    /// The record of `task_id`, if it has finished before.
    pub fn get(&self, task_id: &str) -> Option<&TaskRecord> {
        self.index.get(task_id).map(|&i| &self.records[i])
    }

    /// Stores `record` (replacing an earlier one of the same task) and rewrites the file
    /// atomically: a temporary file in the same directory, flushed to disk, renamed over the
    /// ledger, and the directory flushed. An interruption leaves either the old or the new
    /// ledger, never a partial one.
    pub fn record(&mut self, record: TaskRecord) -> Result<(), FitError> {
        match self.index.get(&record.task_id) {
            Some(&i) => self.records[i] = record,
            None => {
                self.index
                    .insert(record.task_id.clone(), self.records.len());
                self.records.push(record);
            }
        }
        self.write()
    }

    fn write(&self) -> Result<(), FitError> {
        let file = LedgerFile {
            format: LEDGER_FORMAT.into(),
            version: LEDGER_VERSION,
            tasks: self.records.clone(),
        };
        let text = serde_json::to_vec_pretty(&file)
            .map_err(|err| FitError::io("serializing the ledger", std::io::Error::other(err)))?;
        let temporary = sibling(&self.path, &format!(".tmp-{}", std::process::id()));
        let io = |what: &str, err| FitError::io(format!("{what} {}", temporary.display()), err);
        let mut out = File::create(&temporary).map_err(|e| io("creating", e))?;
        out.write_all(&text).map_err(|e| io("writing", e))?;
        out.write_all(b"\n").map_err(|e| io("writing", e))?;
        out.sync_all().map_err(|e| io("flushing", e))?;
        drop(out);
        std::fs::rename(&temporary, &self.path).map_err(|err| {
            let _ = std::fs::remove_file(&temporary);
            FitError::io(format!("renaming into {}", self.path.display()), err)
        })?;
        if let Some(dir) = parent_dir(&self.path) {
            // Flushing the directory makes the rename itself durable; not every file system
            // allows opening a directory, and the data is already safe in either file.
            if let Ok(dir) = File::open(dir) {
                let _ = dir.sync_all();
            }
        }
        Ok(())
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

fn parent_dir(path: &Path) -> Option<&Path> {
    match path.parent() {
        Some(dir) if dir.as_os_str().is_empty() => Some(Path::new(".")),
        other => other,
    }
}

/// An exclusive lock (`flock`) on `<ledger>.lock`, released when dropped or when the process dies
/// (so a killed campaign can be resumed at once).
struct LedgerLock {
    _file: File,
}

impl LedgerLock {
    fn acquire(ledger: &Path) -> Result<Self, FitError> {
        use std::os::unix::fs::MetadataExt;
        let path = sibling(ledger, ".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|err| FitError::io(format!("opening lock {}", path.display()), err))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(FitError::LedgerLocked {
                    path: ledger.to_path_buf(),
                    lock: path,
                })
            }
            Err(std::fs::TryLockError::Error(err)) => {
                return Err(FitError::io(format!("locking {}", path.display()), err))
            }
        }
        // The lock file is never removed, so the path always names the locked file; check
        // anyway, in case someone deleted it between our open and our lock.
        let held = file.metadata().map(|m| (m.dev(), m.ino()));
        let named = std::fs::metadata(&path).map(|m| (m.dev(), m.ino()));
        match (held, named) {
            (Ok(a), Ok(b)) if a == b => Ok(Self { _file: file }),
            _ => Err(FitError::LedgerLocked {
                path: ledger.to_path_buf(),
                lock: path,
            }),
        }
    }
}
