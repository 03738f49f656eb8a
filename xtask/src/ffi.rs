//! `cargo xtask ffi-test`: the C, Fortran and Python programs that link the built libtutti.

use std::path::Path;
use std::process::Command;

use crate::tools::{cargo, ensure_ffi_tools, on_path, run, succeeds, Failure, Workspace};

/// Which build of libtutti a suite runs against.
#[derive(Clone, Copy)]
enum Profile {
    /// `cargo build`: debug assertions on.
    Debug,
    /// `cargo build --release`: what users link (overflow checks on, debug assertions off).
    Release,
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Release => "release",
        }
    }
}

/// Runs every suite against the debug library, then against the release library.
pub fn run_all(workspace: &Workspace) -> Result<(), Failure> {
    ensure_ffi_tools()?;
    for profile in [Profile::Debug, Profile::Release] {
        run_suites(workspace, profile)?;
    }
    println!("==> ffi-test: all passed (debug and release libraries)");
    Ok(())
}

/// Runs every suite against the debug library only (debug assertions and overflow checks
/// on, C under ASan and UBSan, Fortran under valgrind): what CI runs, since the release
/// build of the whole stack cost it about five minutes of its 45.
pub fn run_debug(workspace: &Workspace) -> Result<(), Failure> {
    ensure_ffi_tools()?;
    run_suites(workspace, Profile::Debug)?;
    println!("==> ffi-test: all passed (debug library)");
    Ok(())
}

/// Builds libtutti in `profile`, then compiles and runs every `ffi-tests/c/*.c` with gcc
/// (plain and under AddressSanitizer), every `fortran/tests/*.f90` with gfortran (under
/// valgrind when it is installed, for the debug library), and the pytest suite of
/// `python/tests` against it.
fn run_suites(workspace: &Workspace, profile: Profile) -> Result<(), Failure> {
    println!("==> ffi-test against the {} library", profile.name());
    let root = &workspace.root;
    let mut build_lib = cargo();
    build_lib.args(["build", "-p", "tutti-capi"]);
    if let Profile::Release = profile {
        build_lib.arg("--release");
    }
    run(&mut build_lib)?;
    let lib_dir = workspace.target_dir.join(profile.name());
    let library = lib_dir.join("libtutti.so");
    if !library.is_file() {
        return Err(Failure::new(format!(
            "the build did not produce {}",
            library.display()
        )));
    }
    let build = root.join("ffi-tests").join("build").join(profile.name());
    std::fs::create_dir_all(&build)
        .map_err(|err| Failure::new(format!("creating {}: {err}", build.display())))?;
    let link = |command: &mut Command| {
        command
            .arg(format!("-L{}", lib_dir.display()))
            .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
            .arg("-ltutti")
            .arg("-lm");
    };

    let c_flags = [
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Wpedantic",
        "-Werror",
        "-g",
    ];
    let sanitizers = sanitizers_available(&build);
    for c_source in programs(&root.join("ffi-tests/c"), "c")? {
        let stem = c_source
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        println!("==> C: ffi-tests/c/{stem}.c");
        let c_binary = build.join(format!("{stem}_c"));
        let mut gcc = Command::new("gcc");
        gcc.args(c_flags)
            .arg(format!("-I{}", root.join("include").display()))
            .arg(format!("-I{}", root.join("ffi-tests/include").display()))
            .arg(&c_source)
            .arg("-o")
            .arg(&c_binary);
        link(&mut gcc);
        run(&mut gcc)?;
        run(Command::new(&c_binary).current_dir(root))?;

        if !sanitizers {
            println!("gcc cannot link -fsanitize=address,undefined here: skipped");
            continue;
        }
        println!("==> C under AddressSanitizer and UBSan: {stem}.c");
        let asan_binary = build.join(format!("{stem}_c_asan"));
        let mut gcc = Command::new("gcc");
        gcc.args(c_flags)
            .args([
                "-fsanitize=address,undefined",
                "-fno-omit-frame-pointer",
                "-fno-sanitize-recover=all",
            ])
            .arg(format!("-I{}", root.join("include").display()))
            .arg(format!("-I{}", root.join("ffi-tests/include").display()))
            .arg(&c_source)
            .arg("-o")
            .arg(&asan_binary);
        link(&mut gcc);
        run(&mut gcc)?;
        run(Command::new(&asan_binary)
            .current_dir(root)
            .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0"))?;
    }

    fortran_suite(root, &build, profile, &link)?;

    crate::python::test_installed_wheel(workspace, profile.name())?;
    Ok(())
}

/// gfortran's flags for the module and the tests: the standard the module promises, every
/// warning an error, the runtime checks (bounds, pointers, recursion) on.
const FORTRAN_FLAGS: [&str; 5] = ["-std=f2008", "-Wall", "-Werror", "-fcheck=all", "-g"];

/// Compiles the Fortran module `fortran/tutti.f90` and the tests' check module once, then
/// builds each `fortran/tests/*.f90` (name order) against them and libtutti and runs it:
/// under valgrind for the debug library when valgrind is installed, plainly otherwise.
fn fortran_suite(
    root: &Path,
    build: &Path,
    profile: Profile,
    link: &dyn Fn(&mut Command),
) -> Result<(), Failure> {
    let modules = build.join("fortran");
    std::fs::create_dir_all(&modules)
        .map_err(|err| Failure::new(format!("creating {}: {err}", modules.display())))?;
    let mut objects = Vec::new();
    for (source, object) in [
        ("fortran/tutti.f90", "tutti.o"),
        ("fortran/tests/support/checks.f90", "checks.o"),
    ] {
        println!("==> Fortran: compiling {source}");
        let object = modules.join(object);
        run(Command::new("gfortran")
            .args(FORTRAN_FLAGS)
            .arg("-J")
            .arg(&modules)
            .arg("-c")
            .arg(root.join(source))
            .arg("-o")
            .arg(&object))?;
        objects.push(object);
    }
    let valgrind = matches!(profile, Profile::Debug) && on_path("valgrind");
    for source in programs(&root.join("fortran/tests"), "f90")? {
        let stem = source
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        println!("==> Fortran: fortran/tests/{stem}.f90");
        let binary = build.join(format!("{stem}_f"));
        let mut gfortran = Command::new("gfortran");
        gfortran
            .args(FORTRAN_FLAGS)
            .arg("-J")
            .arg(&modules)
            .arg(&source)
            .args(&objects)
            .arg("-o")
            .arg(&binary);
        link(&mut gfortran);
        run(&mut gfortran)?;
        if valgrind {
            println!("(under valgrind)");
            // Only definite leaks are shown and counted: the threads of the global rayon
            // pool are never joined, so their thread-local buffers are "possibly lost".
            run(Command::new("valgrind")
                .args([
                    "--quiet",
                    "--error-exitcode=99",
                    "--leak-check=full",
                    "--show-leak-kinds=definite",
                    "--errors-for-leak-kinds=definite",
                ])
                .arg(&binary)
                .current_dir(root))?;
        } else {
            println!("(plainly: valgrind runs only against the debug library, when installed)");
            run(Command::new(&binary).current_dir(root))?;
        }
    }
    Ok(())
}

/// The test programs of one language: every `*.{extension}` file directly in `dir`, in name
/// order.
fn programs(dir: &Path, extension: &str) -> Result<Vec<std::path::PathBuf>, Failure> {
    let entries = std::fs::read_dir(dir)
        .map_err(|err| Failure::new(format!("reading {}: {err}", dir.display())))?;
    let mut programs: Vec<_> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file() && path.extension().is_some_and(|ext| ext == extension))
        .collect();
    programs.sort();
    Ok(programs)
}

/// Whether gcc can build and run a trivial program with the sanitizers (libasan and
/// libubsan are part of Debian's gcc, but not of every toolchain).
fn sanitizers_available(build: &Path) -> bool {
    let source = build.join("sanitizer_probe.c");
    let binary = build.join("sanitizer_probe");
    std::fs::write(&source, "int main(void) { return 0; }\n").is_ok()
        && succeeds(
            Command::new("gcc")
                .arg("-fsanitize=address,undefined")
                .arg(&source)
                .arg("-o")
                .arg(&binary),
        )
        && succeeds(&mut Command::new(&binary))
}

/// `dir` in front of any PYTHONPATH already set.
pub fn join_python_path(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    if let Some(existing) = std::env::var_os("PYTHONPATH") {
        paths.extend(std::env::split_paths(&existing));
    }
    std::env::join_paths(paths).unwrap_or_else(|_| dir.as_os_str().to_owned())
}
