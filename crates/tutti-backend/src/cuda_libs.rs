//! Finding the CUDA libraries beyond the driver (cuBLAS, cuSOLVER), without ever panicking.
//!
//! cudarc opens each library by bare name (`libcublas.so`, `libcublas.so.13`, `.so.12`, ...)
//! on first use and panics when none loads. Before the first call into a library, tutti:
//! 1. preloads it by absolute path from `TUTTI_CUDA_LIB_DIR` when that is set (every file of
//!    that folder whose name starts with the library's stem and `.so`, with `RTLD_GLOBAL`), so
//!    that the bare-name open finds the already-loaded library by its SONAME: this is how the
//!    CUDA wheels from PyPI (`site-packages/nvidia/cu13/lib`) are used without
//!    `LD_LIBRARY_PATH`;
//! 2. asks cudarc's `is_culib_present`, which tries the same names without panicking, and
//!    turns a `false` into an error naming the library and what to set.
//!
//! Both answers are cached for the process.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::panic::catch_unwind;
use std::path::Path;
use std::sync::OnceLock;

use crate::panic::panic_message;
use crate::BackendError;

/// The environment variable naming a folder of CUDA libraries to load first.
pub const LIB_DIR_VARIABLE: &str = "TUTTI_CUDA_LIB_DIR";

/// A CUDA library tutti loads at run time.
pub(crate) struct Library {
    /// Its name in messages ("cuBLAS").
    pub(crate) name: &'static str,
    /// The file-name stems to preload, dependencies first (`["libcublasLt", "libcublas"]`).
    pub(crate) stems: &'static [&'static str],
    /// cudarc's probe: whether one of its candidate names loads.
    pub(crate) probe: unsafe fn() -> bool,
    /// The outcome, once probed.
    pub(crate) state: &'static OnceLock<Result<(), String>>,
}

/// Makes sure `library` can be loaded before any call into it.
///
/// Errors: [`BackendError::Cuda`] on `device` naming the library, the folder tried and what
/// to set when it cannot be loaded.
pub(crate) fn require(library: &Library, device: &str) -> Result<(), BackendError> {
    library
        .state
        .get_or_init(|| probe(library))
        .clone()
        .map_err(|message| BackendError::Cuda {
            device: device.to_string(),
            message,
        })
}

fn probe(library: &Library) -> Result<(), String> {
    let preloaded = std::env::var_os(LIB_DIR_VARIABLE)
        .map(|dir| preload(Path::new(&dir), library.stems))
        .transpose()?;
    // SAFETY: cudarc's probe only opens candidate library names with `libloading` and closes
    // them; no symbol is called. Loading runs the library's initialisers, as first use would.
    let present = catch_unwind(|| unsafe { (library.probe)() });
    match present {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!(
            "the {} library could not be loaded ({}): put its folder on LD_LIBRARY_PATH or \
             set {LIB_DIR_VARIABLE} to it (pip's CUDA 13 wheels put it in \
             site-packages/nvidia/cu13/lib; CUDA 12 installs name it .so.12, also accepted)",
            library.name,
            match preloaded {
                Some(0) => format!(
                    "{LIB_DIR_VARIABLE} holds no {}.so*",
                    library.stems.join(".so*, ")
                ),
                Some(_) => format!("the files preloaded from {LIB_DIR_VARIABLE} do not match"),
                None => "not found on the library search path".to_string(),
            }
        )),
        Err(panic) => Err(format!(
            "probing the {} library failed: {}",
            library.name,
            panic_message(panic.as_ref())
        )),
    }
}

/// Opens every `<stem>.so*` file of `dir` by absolute path, globally; returns how many.
fn preload(dir: &Path, stems: &[&str]) -> Result<usize, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|err| format!("{LIB_DIR_VARIABLE}={}: {err}", dir.display()))?;
    let mut names: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .collect();
    names.sort();
    let mut loaded = 0;
    for stem in stems {
        let prefix = format!("{stem}.so");
        for path in &names {
            let matches = path
                .file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(&prefix) && !name.contains(".alt."));
            if !matches {
                continue;
            }
            let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
                continue;
            };
            // SAFETY: `c_path` is a NUL-terminated path; dlopen runs the library's
            // initialisers (as cudarc's own open would) and the handle is kept for the life of
            // the process on purpose, so the library stays loaded for cudarc's bare-name open.
            let handle =
                unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
            if !handle.is_null() {
                loaded += 1;
            }
        }
    }
    Ok(loaded)
}

/// cuBLAS (`libcublas`, which needs `libcublasLt`).
pub(crate) static CUBLAS: Library = Library {
    name: "cuBLAS",
    stems: &["libcublasLt", "libcublas"],
    probe: cudarc::cublas::sys::is_culib_present,
    state: &CUBLAS_STATE,
};
static CUBLAS_STATE: OnceLock<Result<(), String>> = OnceLock::new();

/// cuSOLVER (`libcusolver`, which needs cuBLAS and cuSPARSE).
pub(crate) static CUSOLVER: Library = Library {
    name: "cuSOLVER",
    stems: &[
        "libcublasLt",
        "libcublas",
        "libcusparse",
        "libnvJitLink",
        "libcusolver",
    ],
    probe: cudarc::cusolver::sys::is_culib_present,
    state: &CUSOLVER_STATE,
};
static CUSOLVER_STATE: OnceLock<Result<(), String>> = OnceLock::new();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_counts_only_matching_files() {
        let dir = std::env::temp_dir().join(format!("tutti-libs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary folder");
        // Not real libraries: dlopen fails on them, so nothing is counted as loaded.
        for name in ["libcublas.so.13", "libcublas.alt.so.13", "libother.so"] {
            std::fs::write(dir.join(name), b"not an ELF file").expect("write");
        }
        assert_eq!(preload(&dir, &["libcublas"]), Ok(0));
        let missing = preload(&dir.join("absent"), &["libcublas"]).expect_err("no folder");
        assert!(missing.contains(LIB_DIR_VARIABLE), "{missing}");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
