//! With the `mpi` feature, compiles `csrc/shim.c` with the MPI compiler wrapper: `$MPICC`
//! when set, else `mpicc`. Without the feature, nothing is built and no MPI is needed.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "mpi")]
    build_shim();
}

#[cfg(feature = "mpi")]
fn build_shim() {
    println!("cargo:rerun-if-changed=csrc/shim.c");
    println!("cargo:rerun-if-env-changed=MPICC");
    let compiler = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".to_string());
    let found = std::process::Command::new(&compiler)
        .arg("-show")
        .output()
        .or_else(|_| {
            std::process::Command::new(&compiler)
                .arg("--version")
                .output()
        });
    if found.is_err() {
        // A build error naming the fix, not cc's bare "failed to find tool".
        eprintln!(
            "tutti-mpi: the `mpi` feature needs an MPI compiler wrapper, and `{compiler}` \
             could not be run. Install MPI (Debian: apt-get install openmpi-bin \
             libopenmpi-dev) or set MPICC to the cluster's mpicc."
        );
        std::process::exit(1);
    }
    // mpicc links libmpi only when it links; the shim is a static library, so the MPI
    // libraries of the wrapper's link line are named for the final link, as search paths
    // and libraries (which, unlike link arguments, reach the crates that depend on this).
    let mut build = cc::Build::new();
    build.compiler(&compiler).file("csrc/shim.c").warnings(true);
    build.compile("tutti_mpi_shim");
    for flag in link_flags(&compiler) {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
}

/// The library flags (`-L`, `-l`) of the wrapper's link line.
#[cfg(feature = "mpi")]
fn link_flags(compiler: &str) -> Vec<String> {
    let show = |arg: &str| {
        std::process::Command::new(compiler)
            .arg(arg)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    // Open MPI: --showme:link; MPICH: -link_info; both: -show.
    let line = show("--showme:link")
        .or_else(|| show("-link_info"))
        .or_else(|| show("-show"))
        .unwrap_or_default();
    line.split_whitespace()
        .filter(|w| w.starts_with("-L") || w.starts_with("-l"))
        .map(str::to_string)
        .collect()
}
