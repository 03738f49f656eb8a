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
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tutti_plan::files::{parent_dir, AtomicFile, TEMPORARY_SUFFIX};

use crate::FitError;

mod finite;

pub(crate) use finite::check_finite;

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
    /// Temporaries left in the ledger's directory by an earlier, interrupted writer
    /// (`.<name>.<random>.tmp`, and the `<name>.tmp-<pid>` of older versions) are removed
    /// once the lock is held.
    ///
    /// Errors: another process holds the lock ([`FitError::LedgerLocked`]); the lock file is a
    /// symbolic link (refused, never followed); the file exists but is damaged or foreign
    /// (it is never overwritten); I/O errors.
    pub fn open(path: &Path) -> Result<Self, FitError> {
        Self::open_locked(path, true)
    }

    /// Starts a new ledger at `path`, taking its lock; an existing file there (checked while
    /// the lock is held, so no other campaign can create it in between) is refused with
    /// [`FitError::LedgerExists`] and left untouched. Nothing is written until the first
    /// [`Ledger::record`].
    ///
    /// Errors: as [`Ledger::open`], and [`FitError::LedgerExists`].
    pub fn create(path: &Path) -> Result<Self, FitError> {
        Self::open_locked(path, false)
    }

    fn open_locked(path: &Path, resume: bool) -> Result<Self, FitError> {
        let lock = LedgerLock::acquire(path)?;
        remove_orphan_temporaries(path);
        if !resume {
            // `symlink_metadata`: a dangling symbolic link is an existing entry too.
            return match std::fs::symlink_metadata(path) {
                Ok(_) => Err(FitError::LedgerExists {
                    path: path.to_path_buf(),
                }),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Self {
                    path: path.to_path_buf(),
                    records: Vec::new(),
                    index: HashMap::new(),
                    _lock: lock,
                }),
                Err(err) => Err(FitError::io(
                    format!("checking for a ledger at {}", path.display()),
                    err,
                )),
            };
        }
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
    /// atomically: a new temporary file with an unpredictable name in the same directory
    /// (created exclusively, so a planted file or symbolic link is never opened), flushed to
    /// disk, renamed over the ledger, and the directory flushed. An interruption leaves
    /// either the old or the new ledger, never a partial one; a failed write removes its
    /// temporary.
    ///
    /// On error the ledger in memory and on disk are unchanged.
    pub fn record(&mut self, record: TaskRecord) -> Result<(), FitError> {
        let previous = match self.index.get(&record.task_id) {
            Some(&i) => Some(std::mem::replace(&mut self.records[i], record)),
            None => {
                self.index
                    .insert(record.task_id.clone(), self.records.len());
                self.records.push(record);
                None
            }
        };
        let written = self.write();
        if written.is_err() {
            // Keep memory in step with the file, which still holds the previous state.
            match previous {
                Some(previous) => {
                    let i = self.index[&previous.task_id];
                    self.records[i] = previous;
                }
                None => {
                    if let Some(added) = self.records.pop() {
                        self.index.remove(&added.task_id);
                    }
                }
            }
        }
        written
    }

    fn write(&self) -> Result<(), FitError> {
        let file = LedgerFile {
            format: LEDGER_FORMAT.into(),
            version: LEDGER_VERSION,
            tasks: self.records.clone(),
        };
        let mut text = serde_json::to_vec_pretty(&file)
            .map_err(|err| FitError::io("serializing the ledger", std::io::Error::other(err)))?;
        text.push(b'\n');
        // `.<ledger>.<random>.tmp` beside the ledger, flushed, then renamed over it; on any
        // error below, dropping `temporary` removes it.
        let mut temporary = AtomicFile::create(&self.path).map_err(|err| {
            FitError::io(
                format!(
                    "creating a temporary ledger in {}",
                    parent_dir(&self.path).display()
                ),
                err,
            )
        })?;
        let name = temporary.temporary_path().display().to_string();
        temporary
            .write_all(&text)
            .map_err(|e| FitError::io(format!("writing {name}"), e))?;
        temporary
            .commit()
            .map_err(|err| FitError::io(format!("renaming into {}", self.path.display()), err))?;
        Ok(())
    }
}

/// Whether `entry` (a name in the ledger's directory) is a temporary of the ledger named
/// `ledger`: `.<ledger>.<random>.tmp` (this version) or `<ledger>.tmp-<pid>` (older ones).
fn is_orphan_temporary(entry: &str, ledger: &str) -> bool {
    if let Some(pid) = entry
        .strip_prefix(ledger)
        .and_then(|rest| rest.strip_prefix(".tmp-"))
    {
        return !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
    }
    entry
        .strip_prefix('.')
        .and_then(|rest| rest.strip_prefix(ledger))
        .and_then(|rest| rest.strip_prefix('.'))
        .and_then(|rest| rest.strip_suffix(TEMPORARY_SUFFIX))
        .is_some_and(|random| {
            !random.is_empty() && random.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

/// Removes the temporaries a killed or failed writer left next to the ledger at `path`. Runs
/// under the lock, so no live writer of this ledger can own them. Best effort: a leftover
/// cannot block a later write (temporaries get fresh random names), it only takes space.
fn remove_orphan_temporaries(path: &Path) {
    let (Some(ledger), dir) = (path.file_name().and_then(|n| n.to_str()), parent_dir(path)) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        // `file_type` does not follow links: a planted symbolic link is itself removed,
        // never its target; directories are left alone.
        let removable = entry
            .file_type()
            .is_ok_and(|t| t.is_file() || t.is_symlink());
        if removable && is_orphan_temporary(name, ledger) {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => log::info!(
                    "ledger {}: removed the leftover temporary {name}",
                    path.display()
                ),
                Err(err) => log::warn!(
                    "ledger {}: could not remove the leftover temporary {name}: {err}",
                    path.display()
                ),
            }
        }
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
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
        // O_NOFOLLOW: a symbolic link planted at the lock's name is refused (ELOOP), never
        // followed to create or lock its target. The lock is never written, so a planted
        // regular file or hard link is harmless.
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o666)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|err| {
                let what = if err.raw_os_error() == Some(libc::ELOOP) {
                    format!("opening lock {} (a symbolic link, refused)", path.display())
                } else {
                    format!("opening lock {}", path.display())
                };
                FitError::io(what, err)
            })?;
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
        let named = std::fs::symlink_metadata(&path).map(|m| (m.dev(), m.ino()));
        match (held, named) {
            (Ok(a), Ok(b)) if a == b => Ok(Self { _file: file }),
            _ => Err(FitError::LedgerLocked {
                path: ledger.to_path_buf(),
                lock: path,
            }),
        }
    }
}
