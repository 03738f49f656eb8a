//! `cargo xtask mpi-test`: the MPI transport over real processes. Installs Open MPI (Debian's
//! `openmpi-bin` and `libopenmpi-dev`, as root) when `mpicc` or `mpirun` is missing, lints
//! tutti-mpi and the CLI with their `mpi` features, and runs tutti-mpi's tests and the CLI's
//! `mpirun` tests with `TUTTI_REQUIRE_MPI=1`, so that the `mpirun` cases (2, 3 and 4
//! processes; `tutti fit demo` against threads) cannot skip.

use crate::tools::{apt_install, cargo, on_path, run, Failure};

pub fn run_all() -> Result<(), Failure> {
    if !on_path("mpicc") || !on_path("mpirun") {
        apt_install(
            &["openmpi-bin", "libopenmpi-dev"],
            "mpicc or mpirun is not on PATH",
        )?;
    }
    run(cargo().args([
        "clippy",
        "-p",
        "tutti-mpi",
        "-p",
        "tutti-cli",
        "--features",
        "tutti-mpi/mpi,tutti-cli/mpi",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    run(cargo()
        .args(["test", "-p", "tutti-mpi", "--features", "mpi"])
        .env("TUTTI_REQUIRE_MPI", "1"))?;
    // The CLI's own tests ran in the suite; only its mpirun cases need the feature.
    run(cargo()
        .args([
            "test",
            "-p",
            "tutti-cli",
            "--features",
            "mpi",
            "--test",
            "mpirun",
        ])
        .env("TUTTI_REQUIRE_MPI", "1"))
}
