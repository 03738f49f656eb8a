//! Facts about the host: memory, cores and file-system space.

use std::path::Path;

use crate::BackendError;

/// Host memory as the operating system reports it, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostMemory {
    /// Physical memory.
    pub total: u64,
    /// Memory available to new allocations without swapping (`MemAvailable` on Linux).
    pub available: u64,
}

/// Reads the host's memory figures (`/proc/meminfo` on Linux, `sysconf` elsewhere).
pub fn host_memory() -> Result<HostMemory, BackendError> {
    if let Ok(text) = std::fs::read_to_string("/proc/meminfo") {
        if let Some(memory) = parse_meminfo(&text) {
            return Ok(memory);
        }
    }
    // SAFETY: sysconf only reads system configuration values; it has no pointer arguments.
    let (pages, available_pages, page_size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_AVPHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages <= 0 || page_size <= 0 {
        return Err(BackendError::Io {
            what: "host memory size".into(),
            source: std::io::Error::last_os_error(),
        });
    }
    let total = (pages as u64).saturating_mul(page_size as u64);
    let available = (available_pages.max(0) as u64).saturating_mul(page_size as u64);
    Ok(HostMemory { total, available })
}

/// Parses `MemTotal` and `MemAvailable` (in kB) from the text of `/proc/meminfo`.
fn parse_meminfo(text: &str) -> Option<HostMemory> {
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|line| line.starts_with(name))?;
        let kib: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib.saturating_mul(1024))
    };
    let total = field("MemTotal:")?;
    let available = field("MemAvailable:").or_else(|| field("MemFree:"))?;
    Some(HostMemory { total, available })
}

/// The number of cores this process may run on.
pub fn host_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Free and total space of the file system holding `path`, in bytes (`statvfs`).
///
/// The free figure is what an unprivileged user may still write (`f_bavail`).
pub fn filesystem_space(path: &Path) -> Result<(u64, u64), BackendError> {
    use std::os::unix::ffi::OsStrExt;
    let scratch_error = |reason: String| BackendError::Scratch {
        path: path.to_path_buf(),
        reason,
    };
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| scratch_error("path contains a NUL byte".into()))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: c_path is a valid NUL-terminated string and stat points to writable memory of the
    // right size; statvfs writes the struct fully on success.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(scratch_error(std::io::Error::last_os_error().to_string()));
    }
    // SAFETY: statvfs returned 0, so it initialised the struct.
    let stat = unsafe { stat.assume_init() };
    // `c_ulong` and `fsblkcnt_t` are 32-bit on some targets: the casts are no-ops only here.
    #[allow(clippy::unnecessary_cast)]
    let (fragment, available, blocks) = (
        stat.f_frsize as u64,
        stat.f_bavail as u64,
        stat.f_blocks as u64,
    );
    Ok((
        available.saturating_mul(fragment),
        blocks.saturating_mul(fragment),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_is_parsed_in_bytes() {
        let text = "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n";
        let memory = parse_meminfo(text).expect("parses");
        assert_eq!(memory.total, 24_576_000 * 1024);
        assert_eq!(memory.available, 20_000_000 * 1024);
    }

    #[test]
    fn meminfo_without_available_falls_back_to_free() {
        let memory = parse_meminfo("MemTotal: 10 kB\nMemFree: 4 kB\n").expect("parses");
        assert_eq!(memory.available, 4096);
    }

    #[test]
    fn host_facts_are_plausible() {
        let memory = host_memory().expect("host memory");
        assert!(memory.total > 0 && memory.available <= memory.total);
        assert!(host_cores() >= 1);
        let (free, total) = filesystem_space(&std::env::temp_dir()).expect("statvfs");
        assert!(total > 0 && free <= total);
    }

    #[test]
    fn filesystem_space_of_missing_path_is_an_error() {
        let err = filesystem_space(Path::new("/no/such/dir/tutti")).expect_err("expected an error");
        assert!(err.to_string().contains("/no/such/dir/tutti"), "{err}");
    }
}
