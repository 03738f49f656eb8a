//! Running commands, finding the workspace, and installing missing tools.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Why a task failed, for people.
#[derive(Debug)]
pub struct Failure(String);

impl Failure {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The cargo that runs this xtask (`$CARGO`), else `cargo` on PATH.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// The command line as a person would type it.
pub fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `command` with inherited output; a non-zero exit is a failure naming the command.
pub fn run(command: &mut Command) -> Result<(), Failure> {
    println!("$ {}", describe(command));
    let status = command
        .status()
        .map_err(|err| Failure::new(format!("cannot start `{}`: {err}", describe(command))))?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "`{}` failed ({status})",
            describe(command)
        )))
    }
}

/// Runs `command` quietly and returns its standard output; a non-zero exit is a failure
/// carrying its standard error.
pub fn output(command: &mut Command) -> Result<String, Failure> {
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|err| Failure::new(format!("cannot start `{}`: {err}", describe(command))))?;
    if !out.status.success() {
        return Err(Failure::new(format!(
            "`{}` failed ({}): {}",
            describe(command),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    String::from_utf8(out.stdout)
        .map_err(|_| Failure::new(format!("`{}` printed non-UTF-8", describe(command))))
}

/// Whether `command` runs and exits 0, with its output discarded.
pub fn succeeds(command: &mut Command) -> bool {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// What `cargo metadata` says about the workspace.
pub struct Workspace {
    /// The workspace root (where the root Cargo.toml is).
    pub root: PathBuf,
    /// Where cargo puts build outputs (`target/` unless configured otherwise).
    pub target_dir: PathBuf,
    metadata: serde_json::Value,
}

impl Workspace {
    pub fn load() -> Result<Self, Failure> {
        let text = output(cargo().args(["metadata", "--format-version", "1", "--no-deps"]))?;
        let metadata: serde_json::Value = serde_json::from_str(&text)
            .map_err(|err| Failure::new(format!("cannot parse `cargo metadata`: {err}")))?;
        let path = |key: &str| {
            metadata[key]
                .as_str()
                .map(PathBuf::from)
                .ok_or_else(|| Failure::new(format!("`cargo metadata` has no `{key}`")))
        };
        Ok(Self {
            root: path("workspace_root")?,
            target_dir: path("target_directory")?,
            metadata,
        })
    }

    fn package(&self, name: &str) -> Result<&serde_json::Value, Failure> {
        self.metadata["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|package| package["name"] == name)
            .ok_or_else(|| Failure::new(format!("package `{name}` is not in the workspace")))
    }

    /// The version of package `name`.
    pub fn version(&self, name: &str) -> Result<String, Failure> {
        self.package(name)?["version"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Failure::new(format!("package `{name}` has no version")))
    }

    /// The directory holding package `name`'s Cargo.toml.
    pub fn package_dir(&self, name: &str) -> Result<PathBuf, Failure> {
        self.package(name)?["manifest_path"]
            .as_str()
            .and_then(|manifest| Path::new(manifest).parent())
            .map(Path::to_path_buf)
            .ok_or_else(|| Failure::new(format!("package `{name}` has no manifest path")))
    }

    /// The names of package `name`'s binary targets.
    pub fn binaries(&self, name: &str) -> Result<Vec<String>, Failure> {
        Ok(self.package(name)?["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|target| {
                target["kind"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|kind| kind == "bin"))
            })
            // A binary that needs a feature (`mpi_compare`: MPI and mpirun) is run by name.
            .filter(|target| {
                target["required-features"]
                    .as_array()
                    .is_none_or(|features| features.is_empty())
            })
            .filter_map(|target| target["name"].as_str().map(str::to_owned))
            .collect())
    }
}

/// Whether `program` is an executable on PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            let candidate = dir.join(program);
            std::fs::metadata(&candidate).is_ok_and(|meta| {
                use std::os::unix::fs::PermissionsExt;
                meta.is_file() && meta.permissions().mode() & 0o111 != 0
            })
        })
    })
}

fn is_root() -> bool {
    output(Command::new("id").arg("-u")).is_ok_and(|uid| uid.trim() == "0")
}

/// Installs Debian packages with apt-get; only root may.
pub fn apt_install(packages: &[&str], why: &str) -> Result<(), Failure> {
    if !is_root() {
        return Err(Failure::new(format!(
            "{why}; install it with `sudo apt-get install -y {}` (xtask installs it itself only \
             when run as root)",
            packages.join(" ")
        )));
    }
    if !on_path("apt-get") {
        return Err(Failure::new(format!(
            "{why}, and apt-get is not available: install {} with the system's package manager",
            packages.join(" ")
        )));
    }
    println!("==> {why}: installing {} with apt-get", packages.join(" "));
    run(Command::new("apt-get")
        .args(["update", "-q"])
        .env("DEBIAN_FRONTEND", "noninteractive"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

/// Whether python3 can import `module`.
fn python_has(module: &str) -> bool {
    succeeds(Command::new("python3").args(["-c", &format!("import {module}")]))
}

/// Makes sure gcc, gfortran, python3, pytest and numpy are there, installing gfortran (apt-get,
/// as root), pytest and numpy (pip, else apt-get) when missing.
/// Makes `module` importable by `python3`: with pip when it is missing, else with apt-get
/// (`apt_package`, as root).
pub fn ensure_python_module(module: &str, apt_package: &str) -> Result<(), Failure> {
    if python_has(module) {
        return Ok(());
    }
    println!("==> python3 cannot import {module}: installing it with pip");
    let pip = run(Command::new("python3").args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--root-user-action=ignore",
        module,
    ]));
    if let Err(failure) = pip {
        println!("pip could not install {module} ({failure}); trying apt-get");
        apt_install(&[apt_package], &format!("python3 cannot import {module}"))?;
    }
    if !python_has(module) {
        return Err(Failure::new(format!(
            "{module} is still not importable by python3 after installing it"
        )));
    }
    Ok(())
}

pub fn ensure_ffi_tools() -> Result<(), Failure> {
    if !on_path("gcc") {
        apt_install(&["gcc", "libc6-dev"], "gcc is not on PATH")?;
    }
    if !on_path("gfortran") {
        apt_install(&["gfortran"], "gfortran is not on PATH")?;
    }
    if !on_path("python3") {
        apt_install(&["python3"], "python3 is not on PATH")?;
    }
    // numpy: the Python tests of tensor trains compare against dense numpy products.
    ensure_python_module("pytest", "python3-pytest")?;
    ensure_python_module("numpy", "python3-numpy")?;
    Ok(())
}
