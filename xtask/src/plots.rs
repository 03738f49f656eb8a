//! `cargo xtask plots`: the figures of the docs (`docs/figures/*.svg`), drawn from the
//! benches' results (`benches/results/*.json`) by `scripts/plots.py` with matplotlib.
//!
//! matplotlib lives in a throwaway virtualenv, `target/plots-venv` (made with `python3 -m venv`
//! on first use and reused after). Its version is pinned ([`MATPLOTLIB_VERSION`]): the SVGs
//! are deterministic for one matplotlib, so the same JSON gives the same bytes on every
//! machine. The script skips a figure whose data is missing and fails on malformed JSON.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::tools::{on_path, run, succeeds, Failure, Workspace};

/// The matplotlib the figures are drawn with.
const MATPLOTLIB_VERSION: &str = "3.11.2";

/// The script, the results it reads and where the figures go, relative to the workspace root.
const SCRIPT: &str = "scripts/plots.py";
const RESULTS: &str = "benches/results";
const FIGURES: &str = "docs/figures";

/// Regenerates every figure (see the module documentation).
pub fn run_all(workspace: &Workspace) -> Result<(), Failure> {
    let started = Instant::now();
    let python = ensure_venv(&workspace.target_dir.join("plots-venv"))?;
    let prepared = started.elapsed();
    run(Command::new(&python)
        .current_dir(&workspace.root)
        .arg(SCRIPT)
        .args(["--results", RESULTS, "--out", FIGURES]))?;
    println!(
        "==> plots: {FIGURES}/ written in {:.1} s ({:.1} s preparing the virtualenv)",
        started.elapsed().as_secs_f64(),
        prepared.as_secs_f64()
    );
    Ok(())
}

/// The Python of the virtualenv `venv` with the pinned matplotlib, made or repaired as needed.
fn ensure_venv(venv: &Path) -> Result<std::path::PathBuf, Failure> {
    let python = venv.join("bin").join("python");
    if !python.is_file() {
        if !on_path("python3") {
            return Err(Failure::new("plots: python3 is not on PATH"));
        }
        println!("==> plots: creating the virtualenv {}", venv.display());
        run(Command::new("python3").arg("-m").arg("venv").arg(venv)).map_err(|failure| {
            Failure::new(format!(
                "{failure}; on Debian or Ubuntu `python3 -m venv` needs the python3-venv package"
            ))
        })?;
    }
    let check = format!(
        "import sys, matplotlib; sys.exit(matplotlib.__version__ != '{MATPLOTLIB_VERSION}')"
    );
    if !succeeds(Command::new(&python).args(["-c", &check])) {
        let requirement = format!("matplotlib=={MATPLOTLIB_VERSION}");
        println!(
            "==> plots: installing {requirement} into {}",
            venv.display()
        );
        run(Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            &requirement,
        ]))
        .map_err(|failure| {
            Failure::new(format!(
                "{failure}; remove {} to start from a fresh virtualenv",
                venv.display()
            ))
        })?;
    }
    Ok(python)
}
