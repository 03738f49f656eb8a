//! tutti's build tasks, run as `cargo xtask <task>` (a cargo alias in `.cargo/config.toml`).
//!
//! - `header [--check]`: generate `include/tutti.h` with cbindgen, or check it is current.
//! - `check-layers`: the crates depend only on lower layers, and use every dependency they
//!   declare, in the section it is declared in (`layers.rs`).
//! - `ffi-test [--debug-only]`: build libtutti and run the C, Fortran and Python tests of the
//!   C ABI, against the debug and the release library (or the debug one only, as CI does).
//! - `python-test [--release]`: build the Python wheel (libtutti inside), install it into a
//!   fresh virtualenv and run `python/tests` against it (`python.rs`).
//! - `demo [ARGS...]`: `cargo run --release -p tutti-cli -- demo ARGS...`.
//! - `bench [NAME...]`: run the named binaries of `tutti-benches` (all when none is named).
//! - `plots`: draw `docs/figures/*.svg` from `benches/results/*.json` with `scripts/plots.py`
//!   (matplotlib in a virtualenv under `target/plots-venv`; `plots.rs`).
//! - `fuzz [--seconds N] [--runs N] [TARGET...]`: build the libFuzzer targets of `fuzz/` and run
//!   each for N seconds (default 60) or N executions.
//! - `campaign-chaos [--kills N] [--replicates N] [--seed N] [--dev-cli]`: SIGKILL a checkpointed
//!   campaign N times at random moments, resume it, check it against an uninterrupted run,
//!   then fail a ledger write on a full "disk" and rerun.
//! - `gpu-pack [--xz]`: build the GPU test binaries and the CUDA `tutti` (release, stripped)
//!   into `.gpu/` with `scripts/gpu-run.sh` as `run.sh` and a `MANIFEST` (`gpu_pack.rs`).
//! - `nvrtc-check`: fetch NVRTC (the CUDA 13 wheel from PyPI, cached in `target/nvrtc/`) and
//!   compile every kernel module of tutti-backend with it: signatures, registers, spills.
//! - `mpi-test`: install Open MPI if missing, lint tutti-mpi with `--features mpi` and run its
//!   tests, the `mpirun` cases with 2, 3 and 4 processes among them (`mpi.rs`).
//! - `install --prefix P [--debug]`: build libtutti (release, or debug) and install it with
//!   its headers, `tutti.pc` and a CMake package under P (`install.rs`).
//! - `install-test`: install the debug library under `target/install-test/` and build and run
//!   the C programs of `docs/c-abi.md` against it with pkg-config (and CMake when installed).
//! - `ci`: install missing tools, then formatting, the layer check, lints, tests, the cuda
//!   build, the header check and the FFI tests, failing fast.

mod chaos;
mod ci;
mod ffi;
mod fuzz;
mod gpu_pack;
mod header;
mod install;
mod layers;
mod mpi;
mod nvrtc;
mod plots;
mod python;
mod tools;

use std::process::ExitCode;

use tools::{cargo, run, Failure, Workspace};

const USAGE: &str = "\
usage: cargo xtask <task> [args]

tasks:
  header [--check]   generate include/tutti.h with cbindgen; --check fails if it is stale
  check-layers       fail when a crate depends on its own or a higher layer, or declares a
                     dependency its code does not use (or uses only in tests)
  ffi-test [--debug-only]
                     build libtutti, run the C, Fortran (gfortran) and Python (pytest) tests
                     against the debug and the release library (CI: the debug one only)
  python-test [--release]
                     pip wheel ./python (libtutti built by cargo, debug unless --release),
                     install it into a fresh virtualenv and run python/tests against it
  demo [ARGS...]     cargo run --release -p tutti-cli -- demo ARGS...
  bench [NAME...]    run the tutti-benches binaries NAME... (all of them when none is named)
  plots              draw docs/figures/*.svg from benches/results/*.json (scripts/plots.py,
                     matplotlib in a virtualenv under target/plots-venv)
  fuzz [--seconds N] [--runs N] [TARGET...]
                     build the fuzz targets of fuzz/ (stable toolchain, RUSTC_BOOTSTRAP=1)
                     and run each for N seconds (default 60) or N executions
  campaign-chaos [--kills N] [--replicates N] [--seed N] [--dev-cli]
                     kill a checkpointed campaign N times (default 200), resume, compare with
                     an uninterrupted run; then a ledger write on a full disk, and a rerun
  gpu-pack [--xz]    build the GPU tests and `tutti` (release, cuda, stripped) into .gpu/ with
                     run.sh and a MANIFEST, for `bash .gpu/run.sh` on a GPU machine without
                     Rust; xz-compressed above 48 MiB (or with --xz), refused if still above
  nvrtc-check        download NVRTC (CUDA 13 wheel, PyPI; cached in target/nvrtc) and run
                     tutti-backend's NVRTC tests with it: PTX signatures, registers, no spills
  mpi-test           install Open MPI if missing (apt-get, as root), lint tutti-mpi with its
                     mpi feature and run its tests: mpirun with 2, 3 and 4 processes
  install --prefix P [--debug]
                     build libtutti (release, or debug) and install P/include/tutti.h,
                     P/lib/libtutti.{so,a}, P/lib/pkgconfig/tutti.pc and P/lib/cmake/tutti
  install-test       install the debug library into target/install-test and build and run
                     the C programs of docs/c-abi.md against it (pkg-config; CMake if present)
  ci                 install missing tools, then fmt, check-layers, clippy, test, cuda clippy,
                     header check, ffi-test; stops at the first failure
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("xtask: error: {failure}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(args: &[String]) -> Result<(), Failure> {
    let Some((task, rest)) = args.split_first() else {
        print!("{USAGE}");
        return Err(Failure::new("no task given"));
    };
    match task.as_str() {
        "header" => match rest {
            [] => header::generate(&Workspace::load()?),
            [flag] if flag == "--check" => header::check(&Workspace::load()?),
            _ => Err(Failure::new(format!(
                "header takes only `--check`, got {rest:?}"
            ))),
        },
        "check-layers" => {
            no_args(task, rest)?;
            layers::run()
        }
        "ffi-test" => match rest {
            [] => ffi::run_all(&Workspace::load()?),
            [flag] if flag == "--debug-only" => ffi::run_debug(&Workspace::load()?),
            _ => Err(Failure::new(format!(
                "ffi-test takes only `--debug-only`, got {rest:?}"
            ))),
        },
        "python-test" => {
            let profile = match rest {
                [] => "debug",
                [flag] if flag == "--release" => "release",
                _ => {
                    return Err(Failure::new(format!(
                        "python-test takes only `--release`, got {rest:?}"
                    )))
                }
            };
            python::test_installed_wheel(&Workspace::load()?, profile)
        }
        "demo" => run(cargo()
            .args(["run", "--release", "-p", "tutti-cli", "--", "demo"])
            .args(rest)),
        "bench" => bench(&Workspace::load()?, rest),
        "plots" => {
            no_args(task, rest)?;
            plots::run_all(&Workspace::load()?)
        }
        "campaign-chaos" => chaos::run_all(&Workspace::load()?, &chaos::ChaosOptions::parse(rest)?),
        "fuzz" => fuzz::run_all(&Workspace::load()?, &fuzz::FuzzBudget::parse(rest)?),
        "gpu-pack" => gpu_pack::run_all(&Workspace::load()?, &gpu_pack::PackOptions::parse(rest)?),
        "nvrtc-check" => {
            no_args(task, rest)?;
            nvrtc::run_check(&Workspace::load()?)
        }
        "mpi-test" => {
            no_args(task, rest)?;
            mpi::run_all()
        }
        "install" => install::install(&Workspace::load()?, &install::InstallOptions::parse(rest)?),
        "install-test" => {
            no_args(task, rest)?;
            install::check_examples(&Workspace::load()?)
        }
        "ci" => {
            no_args(task, rest)?;
            ci::run_all()
        }
        "help" | "-h" | "--help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => {
            eprint!("{USAGE}");
            Err(Failure::new(format!("unknown task `{other}`")))
        }
    }
}

fn no_args(task: &str, rest: &[String]) -> Result<(), Failure> {
    if rest.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "{task} takes no arguments, got {rest:?}"
        )))
    }
}

/// Runs `cargo run --release -p tutti-benches --bin NAME` for each name, or for every binary
/// of the package when none is named.
fn bench(workspace: &Workspace, names: &[String]) -> Result<(), Failure> {
    const PACKAGE: &str = "tutti-benches";
    let names: Vec<String> = if names.is_empty() {
        let bins = workspace.binaries(PACKAGE)?;
        if bins.is_empty() {
            return Err(Failure::new(format!("{PACKAGE} has no binaries to run")));
        }
        bins
    } else {
        names.to_vec()
    };
    for name in &names {
        println!("==> bench {name}");
        run(cargo().args(["run", "--release", "-p", PACKAGE, "--bin", name]))?;
    }
    Ok(())
}
