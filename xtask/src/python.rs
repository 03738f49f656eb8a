//! The Python package as users get it: `pip wheel ./python` (which builds libtutti with
//! cargo and bundles it), the wheel installed into a fresh virtualenv, and `python/tests` run
//! against that installation from outside the checkout.

use std::path::Path;
use std::process::Command;

use crate::tools::{apt_install, run, Failure, Workspace};

/// The quimb the test virtualenv gets, so that `python/tests/test_sweep_quimb.py` runs (with
/// `TUTTI_EXPECT_INSTALLED=1` a missing quimb fails it). Pinned because those tests check
/// quimb's index conventions (an MPO's upper index is its output), which a release could
/// change. 1.16.0 is the newest that installs on CPython 3.11 (December 2026); it brings
/// numba, llvmlite, scipy, cotengra, autoray and cytoolz: about 400 MB, 7 s measured on the
/// 2-core development machine without pip's cache.
const QUIMB: &str = "quimb==1.16.0";

/// Builds the wheel with libtutti in `cargo_profile` (`debug` or `release`), installs it into
/// a new virtualenv in the system's temporary folder (outside the checkout, as a user's
/// would be), and runs the pytest suite from there.
///
/// The virtualenv sees the system's site-packages, so numpy and pytest (which
/// `ensure_ffi_tools` installed) need no download; [`QUIMB`] is installed into it. tutti
/// itself comes only from the wheel, and the tests check that (`TUTTI_EXPECT_INSTALLED=1`, no
/// `TUTTI_LIB`, no `PYTHONPATH`).
pub fn test_installed_wheel(workspace: &Workspace, cargo_profile: &str) -> Result<(), Failure> {
    let root = &workspace.root;
    let build = std::env::temp_dir().join(format!("tutti-python-test-{cargo_profile}"));
    for stale in [&build, &root.join("python").join("build")] {
        if stale.exists() {
            std::fs::remove_dir_all(stale)
                .map_err(|err| Failure::new(format!("removing {}: {err}", stale.display())))?;
        }
    }
    std::fs::create_dir_all(&build)
        .map_err(|err| Failure::new(format!("creating {}: {err}", build.display())))?;
    let venv = build.join("venv");
    let wheels = build.join("wheels");
    println!("==> Python: a fresh virtualenv at {}", venv.display());
    if run(&mut python_venv(&venv)).is_err() {
        apt_install(&["python3-venv"], "python3 -m venv failed")?;
        run(&mut python_venv(&venv))?;
    }
    let python = venv.join("bin").join("python");
    let pip = |args: &[&str]| {
        let mut command = Command::new(&python);
        command
            .args(["-m", "pip"])
            .args(args)
            .args(["--disable-pip-version-check", "--quiet"])
            .env_remove("PYTHONPATH")
            .env_remove("TUTTI_LIB");
        command
    };

    println!("==> Python: pip wheel ./python (libtutti: cargo's {cargo_profile} profile)");
    let mut wheel = pip(&["wheel"]);
    wheel
        .args(["--no-deps", "-w"])
        .arg(&wheels)
        .arg(root.join("python"))
        .current_dir(root)
        .env("TUTTI_CARGO_PROFILE", cargo_profile)
        .env("CARGO_TARGET_DIR", &workspace.target_dir);
    run(&mut wheel)?;
    let built = single_wheel(&wheels)?;
    println!("==> Python: installing {}", built.display());
    run(pip(&["install"]).arg(&built))?;
    println!("==> Python: installing {QUIMB} (for test_sweep_quimb.py)");
    run(&mut pip(&["install", QUIMB]))?;

    println!("==> Python: python/tests against the installed package");
    run(Command::new(&python)
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-q"])
        .arg(root.join("python").join("tests"))
        .current_dir(&build)
        .env_remove("PYTHONPATH")
        .env_remove("TUTTI_LIB")
        .env("TUTTI_EXPECT_INSTALLED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1"))
}

fn python_venv(venv: &Path) -> Command {
    let mut command = Command::new("python3");
    command
        .args(["-m", "venv", "--system-site-packages"])
        .arg(venv);
    command
}

/// The one `.whl` in `dir`.
fn single_wheel(dir: &Path) -> Result<std::path::PathBuf, Failure> {
    let entries = std::fs::read_dir(dir)
        .map_err(|err| Failure::new(format!("reading {}: {err}", dir.display())))?;
    let wheels: Vec<_> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .collect();
    match wheels.as_slice() {
        [wheel] => Ok(wheel.clone()),
        _ => Err(Failure::new(format!(
            "expected one wheel in {}, found {}",
            dir.display(),
            wheels.len()
        ))),
    }
}
