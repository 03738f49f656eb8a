//! Output files that appear complete or not at all: written under a fresh temporary name
//! beside the destination, flushed to disk, then renamed into place.
//!
//! The temporary is `.<name>.<random>.tmp` in the destination's directory, created
//! exclusively (`O_CREAT | O_EXCL`: a file or symbolic link planted there is never opened,
//! and a leftover from a killed run cannot collide) with mode 0666 less the umask, as
//! `File::create` would give the output. Dropping an uncommitted file removes its temporary,
//! so an error or a panic leaves nothing behind; a killed process leaves at most a
//! temporary, which [`temporary_prefix`] lets a caller recognise and sweep.

use std::ffi::OsString;
use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// The suffix of every temporary.
pub const TEMPORARY_SUFFIX: &str = ".tmp";

/// `.<file name>.`: how the temporaries of `path` begin (a random part and
/// [`TEMPORARY_SUFFIX`] follow). Empty name parts give `"..".`
pub fn temporary_prefix(path: &Path) -> OsString {
    let mut prefix = OsString::from(".");
    if let Some(name) = path.file_name() {
        prefix.push(name);
    }
    prefix.push(".");
    prefix
}

/// The directory `path` lives in (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// A file being written for `path`; it replaces `path` only on [`AtomicFile::commit`].
#[derive(Debug)]
pub struct AtomicFile {
    destination: PathBuf,
    temporary: NamedTempFile,
}

impl AtomicFile {
    /// Creates the temporary for `path` in `path`'s directory (which must exist).
    ///
    /// Errors: `path` has no file name, or the temporary cannot be created.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        if path.file_name().is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} does not name a file", path.display()),
            ));
        }
        let temporary = tempfile::Builder::new()
            .prefix(&temporary_prefix(path))
            .suffix(TEMPORARY_SUFFIX)
            .permissions(Permissions::from_mode(0o666))
            .tempfile_in(parent_dir(path))?;
        Ok(Self {
            destination: path.to_path_buf(),
            temporary,
        })
    }

    /// Where the file goes on commit.
    pub fn destination(&self) -> &Path {
        &self.destination
    }

    /// The temporary's path (for messages).
    pub fn temporary_path(&self) -> &Path {
        self.temporary.path()
    }

    /// The open temporary, for writers that take a `&File`.
    pub fn as_file(&self) -> &File {
        self.temporary.as_file()
    }

    /// Flushes the temporary to disk, renames it over the destination (replacing whatever
    /// entry has that name; a symbolic link there is replaced, not followed), and flushes the
    /// directory so the rename is durable where the file system allows it.
    ///
    /// Errors: flushing or renaming failed; the temporary is then removed and the
    /// destination is as it was.
    pub fn commit(self) -> io::Result<()> {
        self.temporary.as_file().sync_all()?;
        let dir = parent_dir(&self.destination).to_path_buf();
        self.temporary
            .persist(&self.destination)
            .map_err(|error| error.error)?;
        // Not every file system allows opening a directory, and the data is already safe
        // under one name or the other.
        if let Ok(handle) = File::open(dir) {
            let _ = handle.sync_all();
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.temporary.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.temporary.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_committed_file_replaces_the_old_one_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("out.json");
        std::fs::write(&path, "old").expect("old");
        let mut file = AtomicFile::create(&path).expect("create");
        let temporary = file.temporary_path().to_path_buf();
        let name = temporary
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(
            name.starts_with(".out.json.") && name.ends_with(".tmp"),
            "{name}"
        );
        file.write_all(b"new").expect("write");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "old");
        file.commit().expect("commit");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "new");
        assert_eq!(entries(dir.path()), vec!["out.json".to_string()]);
    }

    #[test]
    fn an_uncommitted_file_is_removed_and_the_destination_untouched() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("out.npy");
        std::fs::write(&path, "old").expect("old");
        {
            let mut file = AtomicFile::create(&path).expect("create");
            file.write_all(b"partial").expect("write");
        }
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "old");
        assert_eq!(entries(dir.path()), vec!["out.npy".to_string()]);
    }

    #[test]
    fn a_symbolic_link_at_the_destination_is_replaced_not_followed() {
        let dir = tempfile::tempdir().expect("dir");
        let target = dir.path().join("precious");
        std::fs::write(&target, "keep").expect("target");
        let path = dir.path().join("out");
        std::os::unix::fs::symlink(&target, &path).expect("link");
        let mut file = AtomicFile::create(&path).expect("create");
        file.write_all(b"data").expect("write");
        file.commit().expect("commit");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "keep");
        assert!(!std::fs::symlink_metadata(&path)
            .expect("meta")
            .file_type()
            .is_symlink());
    }

    #[test]
    fn no_file_name_or_no_directory_is_an_error() {
        assert!(AtomicFile::create("/").is_err());
        let dir = tempfile::tempdir().expect("dir");
        assert!(AtomicFile::create(dir.path().join("missing/out")).is_err());
        assert_eq!(parent_dir(Path::new("bare")), Path::new("."));
        assert_eq!(
            temporary_prefix(Path::new("a/b.c")),
            OsString::from(".b.c.")
        );
    }
}
