//! `cargo xtask gpu-pack`: builds the GPU test binaries and the CUDA-enabled `tutti` here, and
//! packs them with `scripts/gpu-run.sh` into `.gpu/`, for a GPU machine that has no Rust
//! toolchain and no network (`bash .gpu/run.sh` there).
//!
//! The pack holds `run.sh`, `MANIFEST` (git revision, then sha256, size and path of every
//! other file), `bin/tutti`, one `bin/test-<package>-<test>` per GPU test target, and the
//! small inputs of the command-line runs under `data/`. Binaries are release builds without
//! debug information or symbols. Above [`LIMIT`] in all they are compressed with `xz` (which
//! `run.sh` undoes); a pack still above it is refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::tools::{cargo, describe, on_path, output, run, Failure, Workspace};

/// One integration-test target that runs on a GPU: `cargo test -p PACKAGE --test TEST`.
struct GpuTest {
    package: &'static str,
    test: &'static str,
}

/// The GPU test targets, one line each; a target that does not exist (yet) is skipped with a
/// note, so a test can be listed here before it lands.
const GPU_TESTS: &[GpuTest] = &[
    GpuTest {
        package: "tutti-backend",
        test: "cuda",
    },
    GpuTest {
        package: "tutti-backend",
        test: "nvrtc",
    },
    GpuTest {
        package: "tutti-sweep",
        test: "gpu",
    },
    GpuTest {
        package: "tutti-sweep",
        test: "nvrtc",
    },
    GpuTest {
        package: "tutti-fmm",
        test: "gpu",
    },
    GpuTest {
        package: "tutti-fmm",
        test: "nvrtc",
    },
];

/// Benchmarks with a GPU column, packed as `bin/<name>`: (package, binary, features).
const GPU_BENCHES: &[(&str, &str, &str)] = &[
    ("tutti-benches", "device_gemm", "tutti-benches/cuda"),
    ("tutti-benches", "fmm_gpu", "tutti-benches/cuda"),
];

/// The features the test binaries are built with.
const TEST_FEATURES: &str = "tutti-backend/cuda,tutti-sweep/cuda,tutti-fmm/cuda";

/// The command-line binary and the feature that gives it GPUs.
const CLI_PACKAGE: &str = "tutti-cli";
const CLI_BIN: &str = "tutti";
const CLI_FEATURES: &str = "tutti-cli/cuda";

/// Inputs of the command-line runs of `run.sh`: (source below the workspace root, place in the
/// pack). Directories are copied whole.
const DATA: &[(&str, &str)] = &[
    (
        "crates/tutti-fmm/tests/data/plummer_10k/positions.npy",
        "data/fmm/positions.npy",
    ),
    (
        "crates/tutti-fmm/tests/data/plummer_10k/masses.npy",
        "data/fmm/masses.npy",
    ),
    (
        "crates/tutti-sweep/tests/data/random_small/mpo",
        "data/sweep/mpo",
    ),
    (
        "crates/tutti-sweep/tests/data/random_small/mps",
        "data/sweep/mps",
    ),
];

/// The script the pack runs on the GPU machine, below the workspace root.
const RUN_SCRIPT: &str = "scripts/gpu-run.sh";

/// The pack's directory, below the workspace root (ignored by git).
const PACK_DIR: &str = ".gpu";

/// The most the whole pack may weigh: a device run carries at most 64 MiB, the working tree
/// included.
const LIMIT: u64 = 48 << 20;

/// Release builds without debug information or symbols: the binaries are a fraction of their
/// usual size. The same values on every run, so only the first build after a change compiles.
const PROFILE_ENV: &[(&str, &str)] = &[
    ("CARGO_PROFILE_RELEASE_DEBUG", "0"),
    ("CARGO_PROFILE_RELEASE_STRIP", "symbols"),
];

/// Options of `gpu-pack`.
pub struct PackOptions {
    /// Compress the binaries with xz even when the pack is within [`LIMIT`] uncompressed.
    pub xz: bool,
}

impl PackOptions {
    /// Parses `[--xz]`.
    pub fn parse(args: &[String]) -> Result<Self, Failure> {
        let mut options = Self { xz: false };
        for arg in args {
            match arg.as_str() {
                "--xz" => options.xz = true,
                other => return Err(Failure::new(format!("gpu-pack: unknown flag `{other}`"))),
            }
        }
        Ok(options)
    }
}

/// One file of the pack.
struct Packed {
    /// Path below the pack's directory.
    path: String,
    bytes: u64,
}

/// Builds the binaries, writes `.gpu/` and prints what it holds.
pub fn run_all(workspace: &Workspace, options: &PackOptions) -> Result<(), Failure> {
    let started = Instant::now();
    let targets = existing_targets(workspace)?;

    let tests: Vec<&GpuTest> = GPU_TESTS
        .iter()
        .filter(|gpu_test| {
            let present = targets.iter().any(|(package, kind, name)| {
                package == gpu_test.package && kind == "test" && name == gpu_test.test
            });
            if !present {
                println!(
                    "note: {} has no test target `{}` yet; skipped",
                    gpu_test.package, gpu_test.test
                );
            }
            present
        })
        .collect();
    if tests.is_empty() {
        return Err(Failure::new("none of the GPU test targets exists"));
    }

    let mut test_build = cargo();
    test_build.args(["test", "--release", "--no-run"]);
    let mut packages: Vec<&str> = tests.iter().map(|gpu_test| gpu_test.package).collect();
    packages.sort_unstable();
    packages.dedup();
    for package in packages {
        test_build.args(["-p", package]);
    }
    for gpu_test in &tests {
        test_build.args(["--test", gpu_test.test]);
    }
    test_build.args(["--features", TEST_FEATURES]);
    let build_started = Instant::now();
    let artifacts = build(&mut test_build)?;
    let mut binaries = Vec::new();
    for gpu_test in &tests {
        let manifest = workspace.package_dir(gpu_test.package)?.join("Cargo.toml");
        let executable =
            find_executable(&artifacts, &manifest, "test", gpu_test.test).ok_or_else(|| {
                Failure::new(format!(
                    "cargo built no executable for {} --test {}",
                    gpu_test.package, gpu_test.test
                ))
            })?;
        binaries.push((
            format!("bin/test-{}-{}", gpu_test.package, gpu_test.test),
            executable,
        ));
    }

    let mut cli_build = cargo();
    cli_build.args([
        "build",
        "--release",
        "-p",
        CLI_PACKAGE,
        "--bin",
        CLI_BIN,
        "--features",
        CLI_FEATURES,
    ]);
    let artifacts = build(&mut cli_build)?;
    let manifest = workspace.package_dir(CLI_PACKAGE)?.join("Cargo.toml");
    let cli = find_executable(&artifacts, &manifest, "bin", CLI_BIN)
        .ok_or_else(|| Failure::new(format!("cargo built no executable for {CLI_BIN}")))?;
    binaries.push((format!("bin/{CLI_BIN}"), cli));

    for &(package, bin, features) in GPU_BENCHES {
        let mut bench_build = cargo();
        bench_build.args([
            "build",
            "--release",
            "-p",
            package,
            "--bin",
            bin,
            "--features",
            features,
        ]);
        let artifacts = build(&mut bench_build)?;
        let manifest = workspace.package_dir(package)?.join("Cargo.toml");
        let executable = find_executable(&artifacts, &manifest, "bin", bin).ok_or_else(|| {
            Failure::new(format!(
                "cargo built no executable for {package} --bin {bin}"
            ))
        })?;
        binaries.push((format!("bin/{bin}"), executable));
    }
    let build_seconds = build_started.elapsed().as_secs_f64();

    let pack = workspace.root.join(PACK_DIR);
    write_pack(workspace, &pack, &binaries)?;
    let mut files = list_files(&pack)?;
    let raw_total: u64 = files.iter().map(|file| file.bytes).sum();
    if options.xz || raw_total > LIMIT {
        println!(
            "==> compressing the binaries with xz ({} uncompressed{})",
            mib(raw_total),
            if options.xz { ", --xz" } else { "" }
        );
        compress(&pack, &binaries)?;
        files = list_files(&pack)?;
    }
    let total: u64 = files.iter().map(|file| file.bytes).sum();
    if total > LIMIT {
        remove_pack(&pack)?;
        return Err(Failure::new(format!(
            "the pack would be {} (limit {}): removed it; build fewer GPU tests into it",
            mib(total),
            mib(LIMIT)
        )));
    }
    write_manifest(workspace, &pack, &files)?;

    println!("==> {}/ ({})", pack.display(), mib(total));
    let (data, rest): (Vec<&Packed>, Vec<&Packed>) = files
        .iter()
        .partition(|file| file.path.starts_with("data/"));
    for file in rest {
        println!("{:>12}  {}", file.bytes, file.path);
    }
    println!(
        "{:>12}  data/ ({} files)",
        data.iter().map(|file| file.bytes).sum::<u64>(),
        data.len()
    );
    println!(
        "{:>12}  total ({} of the {} limit); built in {build_seconds:.0} s, {:.0} s in all",
        total,
        mib(total),
        mib(LIMIT),
        started.elapsed().as_secs_f64()
    );
    println!(
        "run it on the GPU machine with `bash {PACK_DIR}/run.sh` (carry `{PACK_DIR}`); \
         here `TUTTI_GPU_RUN_DRY=1 bash {PACK_DIR}/run.sh` checks it without a GPU"
    );
    Ok(())
}

/// Every (package, kind, target name) of the workspace's members, from `cargo metadata`.
fn existing_targets(workspace: &Workspace) -> Result<Vec<(String, String, String)>, Failure> {
    let text = output(cargo().current_dir(&workspace.root).args([
        "metadata",
        "--format-version",
        "1",
        "--no-deps",
    ]))?;
    let metadata: serde_json::Value = serde_json::from_str(&text)
        .map_err(|err| Failure::new(format!("cannot parse `cargo metadata`: {err}")))?;
    let mut targets = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let Some(package_name) = package["name"].as_str() else {
            continue;
        };
        for target in package["targets"].as_array().into_iter().flatten() {
            let Some(name) = target["name"].as_str() else {
                continue;
            };
            for kind in target["kind"].as_array().into_iter().flatten() {
                if let Some(kind) = kind.as_str() {
                    targets.push((package_name.to_owned(), kind.to_owned(), name.to_owned()));
                }
            }
        }
    }
    Ok(targets)
}

/// Runs a cargo build with the pack's profile settings and JSON messages, its diagnostics and
/// progress going to the terminal; returns the `compiler-artifact` messages.
fn build(command: &mut Command) -> Result<Vec<serde_json::Value>, Failure> {
    command.arg("--message-format=json-render-diagnostics");
    for (key, value) in PROFILE_ENV {
        command.env(key, value);
    }
    let shown = PROFILE_ENV
        .iter()
        .map(|(key, value)| format!("{key}={value} "))
        .collect::<String>();
    println!("$ {shown}{}", describe(command));
    let started = Instant::now();
    let out = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|err| Failure::new(format!("cannot start `{}`: {err}", describe(command))))?;
    if !out.status.success() {
        return Err(Failure::new(format!(
            "`{}` failed ({})",
            describe(command),
            out.status
        )));
    }
    println!("    ({:.0} s)", started.elapsed().as_secs_f64());
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .collect())
}

/// The executable cargo reported for target `name` of `kind` in the package whose manifest is
/// `manifest`.
fn find_executable(
    artifacts: &[serde_json::Value],
    manifest: &Path,
    kind: &str,
    name: &str,
) -> Option<PathBuf> {
    artifacts
        .iter()
        .filter(|message| message["manifest_path"].as_str().map(Path::new) == Some(manifest))
        .filter(|message| message["target"]["name"] == name)
        .filter(|message| {
            message["target"]["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k == kind))
        })
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
}

fn io_error(what: &str, path: &Path, err: std::io::Error) -> Failure {
    Failure::new(format!("{what} {}: {err}", path.display()))
}

fn remove_pack(pack: &Path) -> Result<(), Failure> {
    match std::fs::remove_dir_all(pack) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(io_error("removing", pack, err)),
    }
}

/// Replaces `pack` with the binaries, the run script and the data files.
fn write_pack(
    workspace: &Workspace,
    pack: &Path,
    binaries: &[(String, PathBuf)],
) -> Result<(), Failure> {
    remove_pack(pack)?;
    for (place, source) in binaries {
        copy_file(source, &pack.join(place))?;
    }
    let script = pack.join("run.sh");
    copy_file(&workspace.root.join(RUN_SCRIPT), &script)?;
    set_executable(&script)?;
    for (source, place) in DATA {
        copy_tree(&workspace.root.join(source), &pack.join(place))?;
    }
    Ok(())
}

fn copy_file(source: &Path, destination: &Path) -> Result<(), Failure> {
    if let Some(parent) = destination.parent() {
        std::fs::create_dir_all(parent).map_err(|err| io_error("creating", parent, err))?;
    }
    std::fs::copy(source, destination).map_err(|err| {
        Failure::new(format!(
            "copying {} to {}: {err}",
            source.display(),
            destination.display()
        ))
    })?;
    Ok(())
}

/// Copies a file, or a directory with everything below it.
fn copy_tree(source: &Path, destination: &Path) -> Result<(), Failure> {
    let meta = std::fs::metadata(source).map_err(|err| io_error("reading", source, err))?;
    if !meta.is_dir() {
        return copy_file(source, destination);
    }
    std::fs::create_dir_all(destination).map_err(|err| io_error("creating", destination, err))?;
    let entries = std::fs::read_dir(source).map_err(|err| io_error("listing", source, err))?;
    for entry in entries {
        let entry = entry.map_err(|err| io_error("listing", source, err))?;
        copy_tree(&entry.path(), &destination.join(entry.file_name()))?;
    }
    Ok(())
}

fn set_executable(path: &Path) -> Result<(), Failure> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|err| io_error("making executable", path, err))
}

/// Replaces each binary by `NAME.xz` (`run.sh` unpacks it).
fn compress(pack: &Path, binaries: &[(String, PathBuf)]) -> Result<(), Failure> {
    if !on_path("xz") {
        return Err(Failure::new(
            "the pack needs compressing but xz is not on PATH (apt-get install xz-utils)",
        ));
    }
    let mut xz = Command::new("xz");
    xz.args(["-6", "--threads=0", "--force"]).current_dir(pack);
    for (place, _) in binaries {
        xz.arg(place);
    }
    run(&mut xz)
}

/// Every file below `pack` (sorted), with its size.
fn list_files(pack: &Path) -> Result<Vec<Packed>, Failure> {
    fn walk(dir: &Path, prefix: &str, files: &mut Vec<Packed>) -> Result<(), Failure> {
        let entries = std::fs::read_dir(dir).map_err(|err| io_error("listing", dir, err))?;
        for entry in entries {
            let entry = entry.map_err(|err| io_error("listing", dir, err))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = format!("{prefix}{name}");
            let meta = entry
                .metadata()
                .map_err(|err| io_error("reading", &entry.path(), err))?;
            if meta.is_dir() {
                walk(&entry.path(), &format!("{path}/"), files)?;
            } else {
                files.push(Packed {
                    path,
                    bytes: meta.len(),
                });
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(pack, "", &mut files)?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// Writes `MANIFEST`: `#` lines (revision, build), then `SHA256  SIZE  PATH` per file.
fn write_manifest(workspace: &Workspace, pack: &Path, files: &[Packed]) -> Result<(), Failure> {
    let git = |args: &[&str]| output(Command::new("git").current_dir(&workspace.root).args(args));
    let revision = git(&["rev-parse", "HEAD"])
        .map(|text| text.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
        .map(|text| !text.trim().is_empty())
        .unwrap_or(false);
    let mut sha256sum = Command::new("sha256sum");
    sha256sum.current_dir(pack).arg("--");
    for file in files {
        sha256sum.arg(&file.path);
    }
    let sums = output(&mut sha256sum)?;
    if sums.lines().count() != files.len() {
        return Err(Failure::new(format!(
            "sha256sum printed {} lines for {} files",
            sums.lines().count(),
            files.len()
        )));
    }
    let mut manifest = format!(
        "# tutti GPU pack (cargo xtask gpu-pack); check with: grep -v '^#' MANIFEST | awk '{{print $1\"  \"$3}}' | sha256sum -c\n\
         # revision {revision}{}\n\
         # tests built with --release --features {TEST_FEATURES}; {CLI_BIN} with --features {CLI_FEATURES}; {}\n\
         # sha256 bytes path\n",
        if dirty { " (with uncommitted changes)" } else { "" },
        PROFILE_ENV
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for (line, file) in sums.lines().zip(files) {
        let hash = line.split_whitespace().next().unwrap_or_default();
        manifest.push_str(&format!("{hash}  {}  {}\n", file.bytes, file.path));
    }
    let path = pack.join("MANIFEST");
    std::fs::write(&path, manifest).map_err(|err| io_error("writing", &path, err))
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}
