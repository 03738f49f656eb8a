//! `cargo xtask nvrtc-check`: compiles every kernel module of the workspace (tutti-backend's,
//! tutti-fmm's and tutti-sweep's) with NVRTC, on a machine without a GPU or a CUDA install.
//!
//! It fetches the `nvidia-cuda-nvrtc` wheel for CUDA 13 from PyPI with pip (once: the wheel
//! and its unpacked libraries stay in `target/nvrtc/`), then runs the `nvrtc` test target of
//! every package of [`PACKAGES`] with its `cuda` feature, in one cargo invocation (one build
//! shares the dependencies), with `LD_LIBRARY_PATH` and
//! `TUTTI_CUDA_LIB_DIR` naming the wheel's `nvidia/cu13/lib` and `TUTTI_REQUIRE_NVRTC=1`, so
//! a library that does not load fails instead of skipping. The tests check each entry's PTX
//! signature against its `Param`s and that ptxas spills nothing; this task prints each
//! kernel's registers and spills at the end.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::tools::{cargo, describe, run, Failure, Workspace};

/// The wheel: NVRTC 13.0, the release cudarc's `cuda-13000` feature targets.
const WHEEL: &str = "nvidia-cuda-nvrtc==13.0.88";

/// The packages whose `nvrtc` test target compiles their kernel modules.
const PACKAGES: &[&str] = &["tutti-backend", "tutti-fmm", "tutti-sweep"];

/// The library the tests need, as the wheel names it.
const LIBRARY: &str = "libnvrtc.so.13";

/// The pip platform tags to accept: the wheel is tagged `manylinux2010` (glibc 2.12).
fn platforms() -> Result<&'static [&'static str], Failure> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(&[
            "manylinux_2_17_x86_64",
            "manylinux_2_12_x86_64",
            "manylinux2010_x86_64",
        ]),
        "aarch64" => Ok(&["manylinux_2_17_aarch64", "manylinux2014_aarch64"]),
        other => Err(Failure::new(format!(
            "nvrtc-check: no NVRTC wheel for {other} (x86_64 and aarch64 Linux only)"
        ))),
    }
}

/// Runs the NVRTC checks (see the module documentation).
pub fn run_check(workspace: &Workspace) -> Result<(), Failure> {
    let started = Instant::now();
    let cache = workspace.target_dir.join("nvrtc");
    let lib_dir = match find_library(&cache.join("unpacked")) {
        Some(dir) => {
            println!("==> nvrtc-check: using {}", dir.display());
            dir
        }
        None => fetch(&cache)?,
    };
    let fetched = started.elapsed();

    let features: Vec<String> = PACKAGES.iter().map(|p| format!("{p}/cuda")).collect();
    let mut command = cargo();
    command
        .current_dir(&workspace.root)
        .arg("test")
        .args(PACKAGES.iter().flat_map(|package| ["-p", package]))
        .args(["--features", &features.join(","), "--test", "nvrtc"])
        .args(["--", "--nocapture", "--test-threads=1"])
        .env("LD_LIBRARY_PATH", library_path(&lib_dir))
        .env("TUTTI_CUDA_LIB_DIR", &lib_dir)
        .env("TUTTI_REQUIRE_NVRTC", "1");
    let report = run_collecting(&mut command, "nvrtc: ")?;
    println!(
        "==> nvrtc-check: passed in {:.1} s ({:.1} s fetching the library)",
        started.elapsed().as_secs_f64(),
        fetched.as_secs_f64()
    );
    println!("registers and spills per kernel:");
    for line in report {
        println!("  {line}");
    }
    Ok(())
}

/// Downloads the wheel into `cache/wheel` and unpacks it into `cache/unpacked`; returns the
/// folder holding the library.
fn fetch(cache: &Path) -> Result<PathBuf, Failure> {
    let wheel_dir = cache.join("wheel");
    let unpacked = cache.join("unpacked");
    println!(
        "==> nvrtc-check: downloading {WHEEL} from PyPI into {}",
        wheel_dir.display()
    );
    let mut download = Command::new("python3");
    download
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        .args(platforms()?.iter().flat_map(|tag| ["--platform", tag]))
        .arg(WHEEL)
        .arg("-d")
        .arg(&wheel_dir);
    run(&mut download)?;
    let wheel = std::fs::read_dir(&wheel_dir)
        .map_err(|err| Failure::new(format!("reading {}: {err}", wheel_dir.display())))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| {
                    name.starts_with("nvidia_cuda_nvrtc-13.") && name.ends_with(".whl")
                })
        })
        .ok_or_else(|| {
            Failure::new(format!(
                "pip left no nvidia_cuda_nvrtc wheel in {}",
                wheel_dir.display()
            ))
        })?;
    // A wheel is a zip file; Python's zipfile unpacks it without other tools.
    let _ = std::fs::remove_dir_all(&unpacked);
    run(Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(&wheel)
        .arg(&unpacked))?;
    find_library(&unpacked).ok_or_else(|| {
        Failure::new(format!(
            "{} has no {LIBRARY} (expected under nvidia/cu13/lib)",
            wheel.display()
        ))
    })
}

/// The folder under `root` that holds [`LIBRARY`] and its builtins, if any.
fn find_library(root: &Path) -> Option<PathBuf> {
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names = Vec::new();
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                names.push(name.to_string());
            }
        }
        let builtins = names
            .iter()
            .any(|name| name.starts_with("libnvrtc-builtins.so"));
        if builtins && names.iter().any(|name| name == LIBRARY) {
            return Some(dir);
        }
    }
    None
}

/// `dir`, then the inherited `LD_LIBRARY_PATH`.
fn library_path(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    if let Some(inherited) = std::env::var_os("LD_LIBRARY_PATH") {
        paths.extend(std::env::split_paths(&inherited));
    }
    std::env::join_paths(paths).unwrap_or_else(|_| dir.as_os_str().to_owned())
}

/// Runs `command` with its output shown as it comes; returns what follows `prefix` on each
/// standard-output line that holds it. A non-zero exit is a failure naming the command.
fn run_collecting(command: &mut Command, prefix: &str) -> Result<Vec<String>, Failure> {
    println!("$ {}", describe(command));
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|err| Failure::new(format!("cannot start `{}`: {err}", describe(command))))?;
    let mut collected = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            println!("{line}");
            // libtest prints `test name ... ` without a newline: the line may start with it.
            if let Some(at) = line.find(prefix) {
                collected.push(line[at + prefix.len()..].to_string());
            }
        }
    }
    let status = child
        .wait()
        .map_err(|err| Failure::new(format!("waiting for `{}`: {err}", describe(command))))?;
    if status.success() {
        Ok(collected)
    } else {
        Err(Failure::new(format!(
            "`{}` failed ({status})",
            describe(command)
        )))
    }
}
