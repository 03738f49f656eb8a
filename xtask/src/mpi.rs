//! `cargo xtask mpi-test`: the MPI transport over real processes. Installs Open MPI (Debian's
//! `openmpi-bin` and `libopenmpi-dev`, as root) when `mpicc` or `mpirun` is missing, lints
//! tutti-mpi and the CLI with their `mpi` features, and runs tutti-mpi's tests and the CLI's
//! `mpirun` tests with `TUTTI_REQUIRE_MPI=1`, so that the `mpirun` cases (2, 3 and 4
//! processes; the CLI's workloads against threads) cannot skip; then builds libtutti with
//! `--features mpi` and runs the C and Fortran programs of `ffi-tests/mpi/` and the Python
//! program `python/tests/mpi/world.py` (over mpi4py, pip-installed when missing) under
//! `mpirun`.

use std::process::Command;

use crate::tools::{
    apt_install, cargo, ensure_ffi_tools, ensure_python_module, on_path, run, Failure, Workspace,
};

/// The features that build tutti with MPI.
const MPI_FEATURES: &str = "tutti-mpi/mpi,tutti-cli/mpi,tutti-capi/mpi";

/// Processes of the C and Fortran programs' `mpirun`: odd, so the split halves differ.
const HOST_PROGRAM_PROCESSES: usize = 3;

pub fn run_all() -> Result<(), Failure> {
    if !on_path("mpicc") || !on_path("mpirun") {
        apt_install(
            &["openmpi-bin", "libopenmpi-dev"],
            "mpicc or mpirun is not on PATH",
        )?;
    }
    // gfortran for mpifort, numpy for the Python program; then mpi4py, whose wheel loads the
    // MPI library installed above.
    ensure_ffi_tools()?;
    ensure_python_module("mpi4py", "python3-mpi4py")?;
    // The lint and the tests select the whole workspace, as the suite's steps do, and add
    // the `mpi` features: cargo then unifies the dependencies' features as it did there and
    // rebuilds only what the features change (tutti-mpi and the crates above it). Selecting
    // single packages (`-p`) re-resolved them and rebuilt about 4 minutes of dependencies
    // on a clean clone.
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--features",
        &format!("{MPI_FEATURES},tutti-benches/mpi"),
        "--",
        "-D",
        "warnings",
    ]))?;
    run(cargo()
        .args([
            "test",
            "--workspace",
            "--exclude",
            "tutti-benches",
            "--features",
            MPI_FEATURES,
            "--test",
            "mpirun",
            // The C ABI's sparse handle over loopback worlds (tutti-capi with `mpi`).
            "--test",
            "sparse_world",
        ])
        .env("TUTTI_REQUIRE_MPI", "1"))?;
    host_programs(&Workspace::load()?)
}

/// The C and Fortran programs of `ffi-tests/mpi/` and the Python program of
/// `python/tests/mpi/`, which initialise MPI themselves (Python through mpi4py) and pass
/// their communicator to libtutti (built with `--features mpi`), under `mpirun`: every
/// process must print `rank R: ok`.
fn host_programs(workspace: &Workspace) -> Result<(), Failure> {
    // The library alone, as `ffi-test` builds it next (without `mpi`): the two share every
    // dependency, so the features' re-resolution for a single package is paid once.
    run(cargo().args(["build", "-p", "tutti-capi", "--features", "mpi"]))?;
    let root = &workspace.root;
    let lib_dir = workspace.target_dir.join("debug");
    let build = root.join("ffi-tests").join("build").join("mpi");
    std::fs::create_dir_all(&build)
        .map_err(|err| Failure::new(format!("creating {}: {err}", build.display())))?;
    let link = |command: &mut Command| {
        command
            .arg(format!("-L{}", lib_dir.display()))
            .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
            .arg("-ltutti")
            .arg("-lm");
    };
    let c_binary = build.join("test_world_c");
    let mut mpicc = Command::new("mpicc");
    mpicc
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g"])
        .arg(format!("-I{}", root.join("include").display()))
        .arg(format!("-I{}", root.join("ffi-tests/include").display()))
        .arg(root.join("ffi-tests/mpi/test_world.c"))
        .arg("-o")
        .arg(&c_binary);
    link(&mut mpicc);
    run(&mut mpicc)?;
    let fortran_binary = build.join("test_world_f");
    let mut mpifort = Command::new("mpifort");
    mpifort
        .args(["-std=f2008", "-Wall", "-fcheck=all", "-g"])
        .arg("-J")
        .arg(&build)
        .arg(root.join("fortran/tutti.f90"))
        .arg(root.join("ffi-tests/mpi/test_world.f90"))
        .arg("-o")
        .arg(&fortran_binary);
    link(&mut mpifort);
    run(&mut mpifort)?;
    let python_program = root
        .join("python")
        .join("tests")
        .join("mpi")
        .join("world.py");
    let programs: [(&str, Vec<&std::path::Path>); 3] = [
        ("the C program", vec![&c_binary]),
        ("the Fortran program", vec![&fortran_binary]),
        (
            "the Python program",
            vec![std::path::Path::new("python3"), &python_program],
        ),
    ];
    for (what, command) in programs {
        let shown: Vec<String> = command.iter().map(|p| p.display().to_string()).collect();
        let shown = shown.join(" ");
        println!("==> mpirun -n {HOST_PROGRAM_PROCESSES} {shown} ({what})");
        let mut mpirun = Command::new("timeout");
        mpirun
            .args(["120", "mpirun", "-n", &HOST_PROGRAM_PROCESSES.to_string()])
            .args(["--timeout", "100"])
            .args(&command)
            .current_dir(root)
            .env("TUTTI_LIB", lib_dir.join("libtutti.so"))
            .env(
                "PYTHONPATH",
                crate::ffi::join_python_path(&root.join("python")),
            )
            .envs(OPEN_MPI_CONTAINER_ENV.iter().copied());
        let out = mpirun
            .output()
            .map_err(|err| Failure::new(format!("cannot start mpirun: {err}")))?;
        let log = String::from_utf8_lossy(&out.stdout);
        print!("{log}{}", String::from_utf8_lossy(&out.stderr));
        if !out.status.success() {
            return Err(Failure::new(format!(
                "mpirun -n {HOST_PROGRAM_PROCESSES} {shown} failed ({})",
                out.status
            )));
        }
        for rank in 0..HOST_PROGRAM_PROCESSES {
            if !log.contains(&format!("rank {rank}: ok")) {
                return Err(Failure::new(format!(
                    "{shown}: rank {rank} did not report ok"
                )));
            }
        }
    }
    Ok(())
}

/// tutti_mpi::launch::OPEN_MPI_CONTAINER_ENV (xtask depends on no tutti crate).
const OPEN_MPI_CONTAINER_ENV: &[(&str, &str)] = &[
    ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
    ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
    ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
    ("OMPI_MCA_btl_vader_single_copy_mechanism", "none"),
    ("OMPI_MCA_mpi_yield_when_idle", "1"),
];
