//! Spill files: a private scratch directory that disappears with its owner.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use tutti_backend::Resources;

use crate::PlanError;

/// Bytes converted per step when writing or reading `f64` blocks.
const BLOCK_BYTES: usize = 64 * 1024;

/// Names of stores made by this process, so that two never collide.
static NEXT_STORE: AtomicU64 = AtomicU64::new(0);

/// A fresh directory for spill files, removed with everything in it when the store is
/// dropped: on success, on an early error return and while unwinding from a panic.
///
/// The directory is `tutti-spill-<pid>-<n>` under the scratch directory, created with
/// permissions `0700`; `n` counts the stores of the process, skipping names that already
/// exist, so stores never share a directory. Files are named by the caller (letters, digits,
/// `.`, `_` and `-`, not starting with `.`) and hold raw bytes; `f64` blocks are written
/// little-endian. Every byte written through the store counts against its limit, if it
/// has one; removing a file gives its bytes back.
///
/// Writers and readers borrow the store, so none outlives its directory. Finish or drop a
/// file's writer before opening or removing that file.
///
/// ```
/// use tutti_plan::SpillStore;
///
/// let scratch = std::env::temp_dir();
/// let store = SpillStore::create(&scratch)?.with_limit(1 << 20);
/// let mut writer = store.create_file("environment.000")?;
/// writer.write_f64s(&[1.0, 2.5, -3.0])?;
/// assert_eq!(writer.finish()?, 24);
/// let mut values = [0.0; 3];
/// store.open_file("environment.000")?.read_f64s(&mut values)?;
/// assert_eq!(values, [1.0, 2.5, -3.0]);
/// let dir = store.dir().to_path_buf();
/// drop(store);
/// assert!(!dir.exists());
/// # Ok::<(), tutti_plan::PlanError>(())
/// ```
#[derive(Debug)]
pub struct SpillStore {
    dir: PathBuf,
    limit: Option<u64>,
    ledger: Mutex<Ledger>,
    removed: bool,
}

/// Bytes written so far, in all and per file.
#[derive(Debug, Default)]
struct Ledger {
    used: u64,
    files: BTreeMap<String, u64>,
}

impl SpillStore {
    /// Creates a fresh spill directory under `scratch_dir`, with no limit.
    ///
    /// Errors: [`PlanError::Io`] when the directory cannot be created (for instance when
    /// `scratch_dir` does not exist or is not writable).
    pub fn create(scratch_dir: impl AsRef<Path>) -> Result<Self, PlanError> {
        let scratch_dir = scratch_dir.as_ref();
        let pid = std::process::id();
        loop {
            let n = NEXT_STORE.fetch_add(1, Ordering::Relaxed);
            let dir = scratch_dir.join(format!("tutti-spill-{pid}-{n}"));
            match create_private_dir(&dir) {
                Ok(()) => {
                    return Ok(Self {
                        dir,
                        limit: None,
                        ledger: Mutex::new(Ledger::default()),
                        removed: false,
                    })
                }
                // Left behind by an earlier process with the same id: try the next name.
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(source) => {
                    return Err(PlanError::Io {
                        what: "creating the spill directory",
                        path: dir,
                        source,
                    })
                }
            }
        }
    }

    /// Creates a fresh spill directory under the scratch directory of `resources`, limited
    /// to its scratch limit, if it has one.
    ///
    /// Errors: [`PlanError::Backend`] when the scratch directory is missing or not a
    /// directory; [`PlanError::Io`] as for [`SpillStore::create`].
    pub fn for_resources(resources: &Resources) -> Result<Self, PlanError> {
        let store = Self::create(resources.checked_scratch_dir()?)?;
        Ok(match resources.scratch_limit {
            Some(limit) => store.with_limit(limit),
            None => store,
        })
    }

    /// The same store, refusing writes that would take its files past `bytes` in all.
    pub fn with_limit(mut self, bytes: u64) -> Self {
        self.limit = Some(bytes);
        self
    }

    /// The store's directory. It exists until the store is dropped or closed.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The limit on bytes written, if any.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Bytes held by the store's files (written and not yet removed).
    pub fn used(&self) -> u64 {
        self.ledger().used
    }

    /// The names of the store's files, in sorted order.
    pub fn file_names(&self) -> Vec<String> {
        self.ledger().files.keys().cloned().collect()
    }

    /// Creates the file `name` for writing.
    ///
    /// Errors: [`PlanError::InvalidSpillName`]; [`PlanError::SpillFileExists`] when the
    /// store already has a file of that name; [`PlanError::Io`].
    pub fn create_file(&self, name: &str) -> Result<SpillWriter<'_>, PlanError> {
        check_name(name)?;
        let path = self.dir.join(name);
        {
            let mut ledger = self.ledger();
            if ledger.files.contains_key(name) {
                return Err(PlanError::SpillFileExists {
                    name: name.to_string(),
                    dir: self.dir.clone(),
                });
            }
            ledger.files.insert(name.to_string(), 0);
        }
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|source| {
                self.ledger().files.remove(name);
                PlanError::Io {
                    what: "creating spill file",
                    path,
                    source,
                }
            })?;
        Ok(SpillWriter {
            store: self,
            name: name.to_string(),
            file: BufWriter::new(file),
            written: 0,
        })
    }

    /// Opens the file `name` for reading from its start.
    ///
    /// Errors: [`PlanError::InvalidSpillName`]; [`PlanError::SpillFileNotFound`] when the
    /// store has no file of that name; [`PlanError::Io`].
    pub fn open_file(&self, name: &str) -> Result<SpillReader<'_>, PlanError> {
        let path = self.existing(name)?;
        let io_error = |source| PlanError::Io {
            what: "opening spill file",
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(io_error)?;
        let len = file.metadata().map_err(io_error)?.len();
        Ok(SpillReader {
            store: self,
            name: name.to_string(),
            file: BufReader::new(file),
            len,
        })
    }

    /// Removes the file `name` and gives its bytes back to the limit.
    ///
    /// Errors: [`PlanError::InvalidSpillName`]; [`PlanError::SpillFileNotFound`];
    /// [`PlanError::Io`].
    pub fn remove_file(&self, name: &str) -> Result<(), PlanError> {
        let path = self.existing(name)?;
        {
            let mut ledger = self.ledger();
            let bytes = ledger.files.remove(name).unwrap_or(0);
            ledger.used = ledger.used.saturating_sub(bytes);
        }
        std::fs::remove_file(&path).map_err(|source| PlanError::Io {
            what: "removing spill file",
            path,
            source,
        })
    }

    /// Removes the directory and everything in it now, reporting any error (dropping the
    /// store does the same but cannot report).
    ///
    /// Errors: [`PlanError::Io`] when the directory cannot be removed.
    pub fn close(mut self) -> Result<(), PlanError> {
        self.removed = true;
        std::fs::remove_dir_all(&self.dir).map_err(|source| PlanError::Io {
            what: "removing the spill directory",
            path: self.dir.clone(),
            source,
        })
    }

    /// The path of the existing file `name`.
    fn existing(&self, name: &str) -> Result<PathBuf, PlanError> {
        check_name(name)?;
        if !self.ledger().files.contains_key(name) {
            return Err(PlanError::SpillFileNotFound {
                name: name.to_string(),
                dir: self.dir.clone(),
            });
        }
        Ok(self.dir.join(name))
    }

    /// Counts `bytes` about to be written to `name` against the limit.
    fn reserve(&self, name: &str, bytes: u64) -> Result<(), PlanError> {
        let mut ledger = self.ledger();
        let used = ledger.used;
        let total = used.checked_add(bytes);
        if let Some(limit) = self.limit {
            if total.is_none_or(|total| total > limit) {
                return Err(PlanError::ScratchLimitExceeded {
                    name: name.to_string(),
                    requested: bytes,
                    used,
                    limit,
                });
            }
        }
        ledger.used = total.unwrap_or(u64::MAX);
        if let Some(file) = ledger.files.get_mut(name) {
            *file = file.saturating_add(bytes);
        }
        Ok(())
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        // The ledger is consistent after every statement, so a panic elsewhere while it
        // was held leaves nothing to repair.
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for SpillStore {
    fn drop(&mut self) {
        if !self.removed {
            // Nothing to report to from a destructor; `close` reports.
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

fn check_name(name: &str) -> Result<(), PlanError> {
    let invalid = |reason| {
        Err(PlanError::InvalidSpillName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("it is empty");
    }
    if name.len() > 200 {
        return invalid("it is longer than 200 bytes");
    }
    if name.starts_with('.') {
        return invalid("it starts with '.'");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return invalid("use only letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

/// A spill file being written. Bytes are buffered; [`SpillWriter::finish`] flushes them
/// and reports errors (dropping the writer flushes too, silently).
#[derive(Debug)]
pub struct SpillWriter<'store> {
    store: &'store SpillStore,
    name: String,
    file: BufWriter<File>,
    written: u64,
}

impl SpillWriter<'_> {
    /// The file's name in its store.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Appends `bytes`.
    ///
    /// Errors: [`PlanError::ScratchLimitExceeded`] (nothing is written);
    /// [`PlanError::Io`].
    pub fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), PlanError> {
        self.store.reserve(&self.name, bytes.len() as u64)?;
        self.file
            .write_all(bytes)
            .map_err(|source| self.io_error("writing spill file", source))?;
        self.written = self.written.saturating_add(bytes.len() as u64);
        Ok(())
    }

    /// Appends `values`, 8 bytes each, little-endian.
    ///
    /// Errors: as [`SpillWriter::write_bytes`]; on a limit error nothing is written.
    pub fn write_f64s(&mut self, values: &[f64]) -> Result<(), PlanError> {
        let bytes = (values.len() as u64).saturating_mul(8);
        self.store.reserve(&self.name, bytes)?;
        let mut block = Vec::with_capacity(BLOCK_BYTES.min(values.len() * 8));
        for chunk in values.chunks(BLOCK_BYTES / 8) {
            block.clear();
            block.extend(chunk.iter().flat_map(|value| value.to_le_bytes()));
            self.file
                .write_all(&block)
                .map_err(|source| self.io_error("writing spill file", source))?;
        }
        self.written = self.written.saturating_add(bytes);
        Ok(())
    }

    /// Flushes the file and returns the bytes written.
    ///
    /// Errors: [`PlanError::Io`].
    pub fn finish(mut self) -> Result<u64, PlanError> {
        self.file
            .flush()
            .map_err(|source| self.io_error("flushing spill file", source))?;
        Ok(self.written)
    }

    fn io_error(&self, what: &'static str, source: io::Error) -> PlanError {
        PlanError::Io {
            what,
            path: self.store.dir.join(&self.name),
            source,
        }
    }
}

impl Write for SpillWriter<'_> {
    /// Writes all of `buf` or nothing; a write past the scratch limit fails with
    /// [`io::ErrorKind::StorageFull`].
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.write_bytes(buf) {
            Ok(()) => Ok(buf.len()),
            Err(PlanError::Io { source, .. }) => Err(source),
            Err(err) => Err(io::Error::new(io::ErrorKind::StorageFull, err.to_string())),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A spill file being read from its start.
#[derive(Debug)]
pub struct SpillReader<'store> {
    store: &'store SpillStore,
    name: String,
    file: BufReader<File>,
    len: u64,
}

impl SpillReader<'_> {
    /// The file's name in its store.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file's length in bytes when it was opened.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file was empty when it was opened.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fills `out` with the next `out.len()` bytes.
    ///
    /// Errors: [`PlanError::Io`], including when the file ends first.
    pub fn read_bytes(&mut self, out: &mut [u8]) -> Result<(), PlanError> {
        self.file
            .read_exact(out)
            .map_err(|source| self.io_error(source))
    }

    /// Fills `out` with the next `out.len()` values, 8 bytes each, little-endian.
    ///
    /// Errors: [`PlanError::Io`], including when the file ends first.
    pub fn read_f64s(&mut self, out: &mut [f64]) -> Result<(), PlanError> {
        let mut block = vec![0u8; BLOCK_BYTES.min(out.len() * 8)];
        for chunk in out.chunks_mut(BLOCK_BYTES / 8) {
            let bytes = &mut block[..chunk.len() * 8];
            self.file
                .read_exact(bytes)
                .map_err(|source| self.io_error(source))?;
            for (value, le) in chunk.iter_mut().zip(bytes.chunks_exact(8)) {
                let mut word = [0u8; 8];
                word.copy_from_slice(le);
                *value = f64::from_le_bytes(word);
            }
        }
        Ok(())
    }

    fn io_error(&self, source: io::Error) -> PlanError {
        PlanError::Io {
            what: "reading spill file",
            path: self.store.dir.join(&self.name),
            source,
        }
    }
}

impl Read for SpillReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_plain() {
        for (name, reason) in [
            ("", "empty"),
            (".hidden", "starts with '.'"),
            ("..", "starts with '.'"),
            ("a/b", "letters, digits"),
            ("a b", "letters, digits"),
            ("nul\0", "letters, digits"),
        ] {
            let err = check_name(name).unwrap_err();
            assert!(err.to_string().contains(reason), "{name:?}: {err}");
        }
        assert!(check_name(&"x".repeat(201)).is_err());
        for name in ["core.000", "left_env-3", "A"] {
            assert!(check_name(name).is_ok(), "{name}");
        }
    }
}
