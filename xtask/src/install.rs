//! `cargo xtask install --prefix P [--debug]`: libtutti for C users, with its headers and the
//! files pkg-config and CMake find it by; and `cargo xtask install-test`, the CI check that
//! the C examples of `docs/c-abi.md` build and run against such an install.
//!
//! The layout under the prefix:
//!
//! ```text
//! include/tutti.h, include/tutti_mpi.h
//! lib/libtutti.so (SONAME libtutti.so), lib/libtutti.a
//! lib/pkgconfig/tutti.pc
//! lib/cmake/tutti/tuttiConfig.cmake, tuttiConfigVersion.cmake (tutti::tutti, tutti::tutti_static)
//! share/tutti/fortran/tutti.f90 (when the repository has fortran/tutti.f90)
//! ```

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::header;
use crate::tools::{apt_install, cargo, describe, on_path, output, run, Failure, Workspace};

const CAPI_PACKAGE: &str = "tutti-capi";

/// What `cargo xtask install` was asked for.
#[derive(Debug, PartialEq)]
pub struct InstallOptions {
    /// Where to install: absolute (a relative `--prefix` is taken against the current
    /// directory).
    pub prefix: PathBuf,
    /// Install the debug library (`cargo build`: debug assertions on) instead of the release
    /// one.
    pub debug: bool,
}

impl InstallOptions {
    /// Parses `--prefix P` (or `--prefix=P`) and `--debug`.
    pub fn parse(args: &[String]) -> Result<Self, Failure> {
        const NEEDS_PREFIX: &str =
            "install needs `--prefix DIR`, e.g. `cargo xtask install --prefix \"$HOME/.local\"`";
        let mut prefix = None;
        let mut debug = false;
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let value = match arg.strip_prefix("--prefix=") {
                Some(value) => Some(value),
                None if arg == "--prefix" => match args.next() {
                    Some(value) if !value.starts_with('-') => Some(value.as_str()),
                    _ => return Err(Failure::new(NEEDS_PREFIX)),
                },
                None => None,
            };
            match value {
                Some(value) => {
                    if prefix.replace(checked_prefix(value)?).is_some() {
                        return Err(Failure::new("install: `--prefix` given twice"));
                    }
                }
                None if arg == "--debug" => debug = true,
                None => {
                    return Err(Failure::new(format!(
                        "install takes `--prefix DIR` and `--debug`, got `{arg}`"
                    )))
                }
            }
        }
        let prefix = prefix.ok_or_else(|| Failure::new(NEEDS_PREFIX))?;
        Ok(Self { prefix, debug })
    }
}

/// The install prefix `raw` as an absolute path, or why it cannot be one: the shell did not
/// expand a `~`, or it holds a character that pkg-config files cannot carry.
fn checked_prefix(raw: &str) -> Result<PathBuf, Failure> {
    if raw.is_empty() {
        return Err(Failure::new("install: the prefix is empty"));
    }
    if raw.starts_with('~') {
        return Err(Failure::new(format!(
            "install: prefix `{raw}`: the shell did not expand `~` (it was quoted, or follows \
             `=`); write \"$HOME/...\" or an absolute path"
        )));
    }
    if let Some(bad) = raw
        .chars()
        .find(|c| c.is_control() || matches!(c, '\\' | '"' | '\'' | '$' | '#' | '`'))
    {
        return Err(Failure::new(format!(
            "install: prefix `{}` holds {bad:?}, which a pkg-config file cannot carry; \
             choose another directory (spaces are fine)",
            raw.escape_debug()
        )));
    }
    let path = Path::new(raw);
    if path.is_absolute() {
        return Ok(path.components().collect());
    }
    let absolute = std::path::absolute(path)
        .map_err(|err| Failure::new(format!("install: making prefix `{raw}` absolute: {err}")))?;
    // `absolute` keeps `.` components on some platforms; collecting the components drops them.
    let absolute: PathBuf = absolute.components().collect();
    println!(
        "install: the relative prefix `{raw}` is {}",
        absolute.display()
    );
    checked_prefix(&absolute.to_string_lossy())
}

/// The library cargo built, and what its static archive needs at link time.
struct BuiltLibrary {
    shared: PathBuf,
    archive: PathBuf,
    /// rustc's `native-static-libs` for `libtutti.a`, e.g. `-lgcc_s -lm -lc`.
    native_static_libs: Vec<String>,
}

/// Builds tutti-capi (release, or debug with `debug`) through `cargo rustc`, which also
/// prints the native libraries the static archive needs.
fn build_library(workspace: &Workspace, debug: bool) -> Result<BuiltLibrary, Failure> {
    let mut command = cargo();
    command.current_dir(&workspace.root).args([
        "rustc",
        "-p",
        CAPI_PACKAGE,
        "--lib",
        "--message-format=json",
    ]);
    if !debug {
        command.arg("--release");
    }
    command.args(["--", "--print", "native-static-libs"]);
    println!("$ {}", describe(&command));
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|err| Failure::new(format!("cannot start `{}`: {err}", describe(&command))))?;
    let mut shared = None;
    let mut archive = None;
    let mut native_static_libs = None;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line =
                line.map_err(|err| Failure::new(format!("reading cargo's output: {err}")))?;
            let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            match message["reason"].as_str() {
                Some("compiler-message") => {
                    let text = message["message"]["message"].as_str().unwrap_or_default();
                    if let Some(libs) = text.strip_prefix("native-static-libs:") {
                        native_static_libs =
                            Some(libs.split_whitespace().map(str::to_owned).collect());
                    } else if message["message"]["level"] != "note" {
                        // Warnings and errors, as a plain build would show them.
                        if let Some(rendered) = message["message"]["rendered"].as_str() {
                            eprint!("{rendered}");
                        }
                    }
                }
                Some("compiler-artifact") if message["target"]["name"] == "tutti" => {
                    for file in message["filenames"].as_array().into_iter().flatten() {
                        let Some(file) = file.as_str() else { continue };
                        if file.ends_with(".so") {
                            shared = Some(PathBuf::from(file));
                        } else if file.ends_with(".a") {
                            archive = Some(PathBuf::from(file));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let status = child
        .wait()
        .map_err(|err| Failure::new(format!("waiting for `{}`: {err}", describe(&command))))?;
    if !status.success() {
        return Err(Failure::new(format!(
            "`{}` failed ({status})",
            describe(&command)
        )));
    }
    let missing = |what: &str| Failure::new(format!("`{}` built no {what}", describe(&command)));
    Ok(BuiltLibrary {
        shared: shared.ok_or_else(|| missing("libtutti.so"))?,
        archive: archive.ok_or_else(|| missing("libtutti.a"))?,
        native_static_libs: native_static_libs
            .ok_or_else(|| missing("`native-static-libs` note for libtutti.a"))?,
    })
}

/// `cargo xtask install`: builds libtutti and installs it under `options.prefix`.
pub fn install(workspace: &Workspace, options: &InstallOptions) -> Result<(), Failure> {
    // An install is what C users compile against: its header must be the library's.
    header::check(workspace)?;
    let built = build_library(workspace, options.debug)?;
    let version = workspace.version(CAPI_PACKAGE)?;
    let root = &workspace.root;
    let prefix = &options.prefix;
    let cmake_dir = prefix.join("lib/cmake/tutti");
    let mut files: Vec<(PathBuf, Content)> = vec![
        (
            prefix.join("include/tutti.h"),
            Content::Copy(root.join("include/tutti.h")),
        ),
        (
            prefix.join("include/tutti_mpi.h"),
            Content::Copy(root.join("include/tutti_mpi.h")),
        ),
        (
            prefix.join("lib/libtutti.so"),
            Content::Copy(built.shared.clone()),
        ),
        (
            prefix.join("lib/libtutti.a"),
            Content::Copy(built.archive.clone()),
        ),
        (
            prefix.join("lib/pkgconfig/tutti.pc"),
            Content::Text(pkg_config_file(prefix, &version, &built.native_static_libs)),
        ),
        (
            cmake_dir.join("tuttiConfig.cmake"),
            Content::Text(cmake_config(&built.native_static_libs)),
        ),
        (
            cmake_dir.join("tuttiConfigVersion.cmake"),
            Content::Text(cmake_config_version(&version)?),
        ),
    ];
    let fortran_module = root.join("fortran/tutti.f90");
    if fortran_module.is_file() {
        files.push((
            prefix.join("share/tutti/fortran/tutti.f90"),
            Content::Copy(fortran_module),
        ));
    }
    println!(
        "==> installing tutti {version} ({} library) into {}",
        if options.debug { "debug" } else { "release" },
        prefix.display()
    );
    for (destination, content) in &files {
        install_file(destination, content)?;
        println!("  {}", destination.display());
    }
    let lib = prefix.join("lib");
    println!(
        "==> installed. Compile with `pkg-config --cflags --libs tutti` (PKG_CONFIG_PATH={}) or \
         CMake's find_package(tutti) (CMAKE_PREFIX_PATH={}); run with {} on the loader's path \
         (LD_LIBRARY_PATH, or -Wl,-rpath)",
        lib.join("pkgconfig").display(),
        prefix.display(),
        lib.display()
    );
    Ok(())
}

/// What an installed file holds.
enum Content {
    /// A copy of this file (permissions included).
    Copy(PathBuf),
    Text(String),
}

/// Writes `content` beside `destination` and renames it into place, so a program running
/// the old library keeps its (now unlinked) file intact rather than seeing it rewritten.
fn install_file(destination: &Path, content: &Content) -> Result<(), Failure> {
    let dir = destination
        .parent()
        .ok_or_else(|| Failure::new(format!("{} has no directory", destination.display())))?;
    std::fs::create_dir_all(dir)
        .map_err(|err| Failure::new(format!("creating {}: {err}", dir.display())))?;
    let name = destination
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let partial = dir.join(format!(".{name}.partial"));
    let written = match content {
        Content::Copy(source) => std::fs::copy(source, &partial).map(drop).map_err(|err| {
            Failure::new(format!(
                "copying {} to {}: {err}",
                source.display(),
                partial.display()
            ))
        }),
        Content::Text(text) => std::fs::write(&partial, text)
            .map_err(|err| Failure::new(format!("writing {}: {err}", partial.display()))),
    };
    written.and_then(|()| {
        std::fs::rename(&partial, destination).map_err(|err| {
            Failure::new(format!(
                "renaming {} to {}: {err}",
                partial.display(),
                destination.display()
            ))
        })
    })
}

/// `tutti.pc`. pkg-config splits its fields at spaces, so spaces in the prefix are escaped
/// (`checked_prefix` refuses the characters it cannot escape).
fn pkg_config_file(prefix: &Path, version: &str, native_static_libs: &[String]) -> String {
    let prefix = prefix.to_string_lossy().replace(' ', "\\ ");
    format!(
        "# tutti's pkg-config file, written by `cargo xtask install`.\n\
         prefix={prefix}\n\
         includedir=${{prefix}}/include\n\
         libdir=${{prefix}}/lib\n\
         \n\
         Name: tutti\n\
         Description: Scientific computations split among devices: the C ABI (libtutti)\n\
         Version: {version}\n\
         Cflags: -I${{includedir}}\n\
         Libs: -L${{libdir}} -ltutti\n\
         Libs.private: {}\n",
        native_static_libs.join(" ")
    )
}

/// `tuttiConfig.cmake`: the imported targets `tutti::tutti` (libtutti.so) and
/// `tutti::tutti_static` (libtutti.a), found relative to the file itself so the install can
/// be moved.
fn cmake_config(native_static_libs: &[String]) -> String {
    format!(
        r#"# tutti's CMake package, written by `cargo xtask install`:
#   find_package(tutti REQUIRED)
#   target_link_libraries(app PRIVATE tutti::tutti)         # libtutti.so
#   target_link_libraries(app PRIVATE tutti::tutti_static)  # libtutti.a
get_filename_component(_tutti_prefix "${{CMAKE_CURRENT_LIST_DIR}}/../../.." ABSOLUTE)
if(NOT TARGET tutti::tutti)
  add_library(tutti::tutti SHARED IMPORTED)
  set_target_properties(tutti::tutti PROPERTIES
    IMPORTED_LOCATION "${{_tutti_prefix}}/lib/libtutti.so"
    IMPORTED_SONAME "libtutti.so"
    INTERFACE_INCLUDE_DIRECTORIES "${{_tutti_prefix}}/include")
endif()
if(NOT TARGET tutti::tutti_static)
  add_library(tutti::tutti_static STATIC IMPORTED)
  set_target_properties(tutti::tutti_static PROPERTIES
    IMPORTED_LOCATION "${{_tutti_prefix}}/lib/libtutti.a"
    INTERFACE_INCLUDE_DIRECTORIES "${{_tutti_prefix}}/include"
    INTERFACE_LINK_LIBRARIES "{}")
endif()
unset(_tutti_prefix)
"#,
        native_static_libs.join(";")
    )
}

/// `tuttiConfigVersion.cmake`: Cargo's compatibility rule, so `find_package(tutti 0.1)`
/// accepts 0.1.x at or above the request, and `find_package(tutti 1.2)` accepts 1.y >= 1.2.
fn cmake_config_version(version: &str) -> Result<String, Failure> {
    let core = version.split(['-', '+']).next().unwrap_or(version);
    let parts: Vec<&str> = core.split('.').collect();
    let [major, minor, _patch] = parts[..] else {
        return Err(Failure::new(format!(
            "{CAPI_PACKAGE} version `{version}` is not MAJOR.MINOR.PATCH"
        )));
    };
    let same_series = if major == "0" {
        format!("PACKAGE_FIND_VERSION_MAJOR EQUAL 0 AND PACKAGE_FIND_VERSION_MINOR EQUAL {minor}")
    } else {
        format!("PACKAGE_FIND_VERSION_MAJOR EQUAL {major}")
    };
    Ok(format!(
        r#"# The version of tutti's CMake package, written by `cargo xtask install`. Compatible:
# the same major version, or for 0.x the same minor one (Cargo's rule), and not older.
set(PACKAGE_VERSION "{core}")
if(NOT DEFINED PACKAGE_FIND_VERSION OR PACKAGE_FIND_VERSION STREQUAL "")
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
elseif(PACKAGE_FIND_VERSION VERSION_LESS_EQUAL PACKAGE_VERSION AND {same_series})
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
else()
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
endif()
if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
  set(PACKAGE_VERSION_EXACT TRUE)
endif()
# A 64-bit library; a project without languages has no pointer size and is not asked.
if(NOT "${{CMAKE_SIZEOF_VOID_P}}" STREQUAL "" AND NOT "${{CMAKE_SIZEOF_VOID_P}}" STREQUAL "8")
  set(PACKAGE_VERSION "${{PACKAGE_VERSION}} (64-bit)")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
endif()
"#
    ))
}

/// The ```c blocks of `markdown` that are whole programs: they define `main` and need no MPI.
fn c_programs_in(markdown: &str) -> Vec<String> {
    fenced_blocks(markdown, "c")
        .into_iter()
        .filter(|block| block.contains("int main") && !block.contains("#include <mpi.h>"))
        .collect()
}

/// The text of every block of `markdown` fenced with ```` ```language ````.
fn fenced_blocks(markdown: &str, language: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut current, fence) {
            (None, Some(tag)) if tag.trim() == language => current = Some(String::new()),
            (Some(_), Some(tag)) if tag.trim().is_empty() => blocks.extend(current.take()),
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// `text` split into words as a POSIX shell would split pkg-config's output: at unescaped
/// whitespace, with `\x` standing for `x`.
fn shell_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// `dir` in front of the LD_LIBRARY_PATH already set.
fn library_path_with(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    if let Some(existing) = std::env::var_os("LD_LIBRARY_PATH") {
        paths.extend(std::env::split_paths(&existing));
    }
    std::env::join_paths(paths).unwrap_or_else(|_| dir.as_os_str().to_owned())
}

/// `cargo xtask install-test`: installs the debug library into a fresh prefix under
/// `target/install-test/` (its name has a space), then compiles the whole C programs of
/// `docs/c-abi.md` with the flags `pkg-config` gives, against libtutti.so and against
/// libtutti.a, runs them, and, when cmake is installed, builds the first with the doc's
/// CMake project. Every program must exit 0. The scratch directory is removed on success.
pub fn check_examples(workspace: &Workspace) -> Result<(), Failure> {
    if !on_path("gcc") {
        apt_install(&["gcc", "libc6-dev"], "gcc is not on PATH")?;
    }
    if !on_path("pkg-config") {
        apt_install(&["pkg-config"], "pkg-config is not on PATH")?;
    }
    let scratch = workspace.target_dir.join("install-test");
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)
            .map_err(|err| Failure::new(format!("removing {}: {err}", scratch.display())))?;
    }
    let prefix = scratch.join("tutti prefix");
    install(
        workspace,
        &InstallOptions {
            prefix: prefix.clone(),
            debug: true,
        },
    )?;

    let doc_path = workspace.root.join("docs/c-abi.md");
    let doc = std::fs::read_to_string(&doc_path)
        .map_err(|err| Failure::new(format!("reading {}: {err}", doc_path.display())))?;
    let programs = c_programs_in(&doc);
    if programs.is_empty() {
        return Err(Failure::new(format!(
            "{} has no ```c block with `int main`: nothing to check",
            doc_path.display()
        )));
    }

    let pkg_config = |args: &[&str]| {
        output(
            Command::new("pkg-config")
                .args(args)
                .arg("tutti")
                .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")),
        )
    };
    let version = workspace.version(CAPI_PACKAGE)?;
    let found = pkg_config(&["--modversion"])?;
    if found.trim() != version {
        return Err(Failure::new(format!(
            "pkg-config --modversion tutti says `{}`, the crate is {version}",
            found.trim()
        )));
    }
    let shared_flags = shell_words(&pkg_config(&["--cflags", "--libs"])?);
    // The archive instead of the shared library, with what it needs (Libs.private).
    let static_flags: Vec<String> = shell_words(&pkg_config(&["--cflags", "--libs", "--static"])?)
        .into_iter()
        .map(|flag| {
            if flag == "-ltutti" {
                "-l:libtutti.a".to_string()
            } else {
                flag
            }
        })
        .collect();
    let lib_dir = prefix.join("lib");
    for (index, program) in programs.iter().enumerate() {
        let name = format!("c_abi_example_{}", index + 1);
        let source = scratch.join(format!("{name}.c"));
        std::fs::write(&source, program)
            .map_err(|err| Failure::new(format!("writing {}: {err}", source.display())))?;
        println!(
            "==> docs/c-abi.md, C program {} of {}: against libtutti.so, then libtutti.a",
            index + 1,
            programs.len()
        );
        for (suffix, flags) in [("", &shared_flags), ("_static", &static_flags)] {
            let binary = scratch.join(format!("{name}{suffix}"));
            run(Command::new("gcc")
                .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
                .arg(&source)
                .arg("-o")
                .arg(&binary)
                .args(flags))?;
            let mut program = Command::new(&binary);
            program.current_dir(&scratch);
            if suffix.is_empty() {
                program.env("LD_LIBRARY_PATH", library_path_with(&lib_dir));
            }
            run(&mut program)?;
        }
    }

    if on_path("cmake") {
        check_cmake_project(&scratch, &prefix, &doc, &programs[0], &version)?;
    } else {
        println!("cmake is not on PATH: the CMake package is not checked");
    }
    println!(
        "==> install-test: {} C program(s) of docs/c-abi.md built against {} and ran",
        programs.len(),
        prefix.display()
    );
    // The debug install and the statically linked programs take about 400 MB; a failed run
    // keeps them for a look.
    std::fs::remove_dir_all(&scratch)
        .map_err(|err| Failure::new(format!("removing {}: {err}", scratch.display())))
}

/// Builds `program` with the ```cmake block of `doc` (its CMakeLists.txt for `example.c`)
/// against the install at `prefix`, runs it, and checks that `find_package` accepts this
/// version and refuses the next minor one.
fn check_cmake_project(
    scratch: &Path,
    prefix: &Path,
    doc: &str,
    program: &str,
    version: &str,
) -> Result<(), Failure> {
    println!("==> the CMake project of docs/c-abi.md against the install");
    let Some(lists) = fenced_blocks(doc, "cmake")
        .into_iter()
        .find(|block| block.contains("find_package(tutti"))
    else {
        return Err(Failure::new(
            "docs/c-abi.md has no ```cmake block with find_package(tutti",
        ));
    };
    // CMake versions are numbers only: 1.2.3-rc.1 is 1.2.3 to it.
    let version = version.split(['-', '+']).next().unwrap_or(version);
    let mut numbers = version.split('.');
    let (major, minor) = (
        numbers.next(),
        numbers.next().and_then(|m| m.parse::<u64>().ok()),
    );
    let (Some(major), Some(minor)) = (major, minor) else {
        return Err(Failure::new(format!(
            "version `{version}` has no minor number"
        )));
    };
    let next_minor = format!("{major}.{}", minor + 1);
    let source_dir = scratch.join("cmake-project");
    let build_dir = scratch.join("cmake-build");
    std::fs::create_dir_all(&source_dir)
        .map_err(|err| Failure::new(format!("creating {}: {err}", source_dir.display())))?;
    let lists = format!(
        "{lists}\n# Added by `cargo xtask install-test`: the version file's answers.\n\
         find_package(tutti {version} EXACT REQUIRED)\n\
         find_package(tutti {next_minor} QUIET)\n\
         if(tutti_FOUND)\n  \
           message(FATAL_ERROR \"find_package(tutti {next_minor}) accepted tutti {version}\")\n\
         endif()\n"
    );
    for (name, text) in [("CMakeLists.txt", lists.as_str()), ("example.c", program)] {
        let path = source_dir.join(name);
        std::fs::write(&path, text)
            .map_err(|err| Failure::new(format!("writing {}: {err}", path.display())))?;
    }
    run(Command::new("cmake")
        .arg("-S")
        .arg(&source_dir)
        .arg("-B")
        .arg(&build_dir)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
        .arg("-DCMAKE_C_FLAGS=-Wall -Wextra -Werror"))?;
    run(Command::new("cmake").arg("--build").arg(&build_dir))?;
    // CMake's build tree has the imported library's directory in its run path.
    run(Command::new(build_dir.join("example")).current_dir(scratch))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| word.to_string()).collect()
    }

    #[test]
    fn options_parse() {
        let parsed = |words: &[&str]| InstallOptions::parse(&args(words));
        let expect = |prefix: &str, debug| InstallOptions {
            prefix: PathBuf::from(prefix),
            debug,
        };
        assert_eq!(
            parsed(&["--prefix", "/opt/my tutti"]).ok(),
            Some(expect("/opt/my tutti", false))
        );
        assert_eq!(
            parsed(&["--debug", "--prefix=/opt/t/"]).ok(),
            Some(expect("/opt/t", true))
        );
        for bad in [
            &[][..],
            &["--debug"],
            &["--prefix"],
            &["--prefix", "--debug"],
            &["--prefix", "/a", "--prefix", "/b"],
            &["--prefix", "/a", "--release"],
            &["/a"],
        ] {
            assert!(parsed(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn prefixes_are_absolute_and_representable() {
        let relative = checked_prefix("./some/where").expect("a relative prefix is made absolute");
        assert!(relative.is_absolute());
        assert!(relative.ends_with("some/where"));
        assert!(!relative.to_string_lossy().contains("/./"));
        for bad in ["", "~/.local", "/a\\b", "/a\"b", "/a$b", "/a#b", "/a\nb"] {
            assert!(checked_prefix(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn pkg_config_file_escapes_spaces() {
        let text = pkg_config_file(Path::new("/opt/my tutti"), "1.2.3", &args(&["-lm", "-lc"]));
        assert!(text.contains("prefix=/opt/my\\ tutti\n"));
        assert!(text.contains("Version: 1.2.3\n"));
        assert!(text.contains("Libs: -L${libdir} -ltutti\n"));
        assert!(text.contains("Libs.private: -lm -lc\n"));
    }

    #[test]
    fn cmake_version_rule() {
        let zero = cmake_config_version("0.1.0").expect("valid");
        assert!(zero.contains("set(PACKAGE_VERSION \"0.1.0\")"));
        assert!(zero.contains("PACKAGE_FIND_VERSION_MINOR EQUAL 1"));
        let one = cmake_config_version("1.4.2-rc.1").expect("valid");
        assert!(one.contains("set(PACKAGE_VERSION \"1.4.2\")"));
        assert!(one.contains("PACKAGE_FIND_VERSION_MAJOR EQUAL 1)"));
        assert!(cmake_config_version("1.4").is_err());
    }

    #[test]
    fn programs_are_whole_c_blocks_without_mpi() {
        let doc = "text\n```c\nint main(void) { return 0; }\n```\n\
                   ```c\nTuttiWorld *w;\n```\n\
                   ```c\n#include <mpi.h>\nint main(void) { return 0; }\n```\n\
                   ```cmake\nfind_package(tutti)\n```\n\
                   ```python\nint main\n```\n";
        assert_eq!(c_programs_in(doc), ["int main(void) { return 0; }\n"]);
        assert_eq!(fenced_blocks(doc, "cmake"), ["find_package(tutti)\n"]);
    }

    #[test]
    fn shell_words_unescape() {
        for (text, words) in [
            (
                "-I/a\\ b/include -L/a\\ b/lib -ltutti \n",
                &["-I/a b/include", "-L/a b/lib", "-ltutti"][..],
            ),
            ("  ", &[]),
            ("-lm", &["-lm"]),
        ] {
            assert_eq!(shell_words(text), words, "{text:?}");
        }
    }
}
