//! `include/tutti.h`, generated from `crates/tutti-capi` by cbindgen.

use std::path::PathBuf;

use crate::tools::{Failure, Workspace};

const CAPI_PACKAGE: &str = "tutti-capi";

fn header_path(workspace: &Workspace) -> PathBuf {
    workspace.root.join("include").join("tutti.h")
}

/// The version macros, from the C ABI crate's version.
fn version_macros(version: &str) -> Result<String, Failure> {
    let core = version.split(['-', '+']).next().unwrap_or(version);
    let parts: Vec<&str> = core.split('.').collect();
    let [major, minor, patch] = parts[..] else {
        return Err(Failure::new(format!(
            "{CAPI_PACKAGE} version `{version}` is not MAJOR.MINOR.PATCH"
        )));
    };
    Ok(format!(
        "\n/**\n * The version of tutti this header belongs to. tutti_version() gives the version \
         of the\n * library actually loaded; they should be equal.\n */\n\
         #define TUTTI_VERSION_MAJOR {major}\n\
         #define TUTTI_VERSION_MINOR {minor}\n\
         #define TUTTI_VERSION_PATCH {patch}\n\
         #define TUTTI_VERSION \"{version}\""
    ))
}

/// The header as cbindgen writes it now.
pub fn render(workspace: &Workspace) -> Result<Vec<u8>, Failure> {
    let config_path = workspace.root.join("cbindgen.toml");
    let mut config = cbindgen::Config::from_file(&config_path)
        .map_err(|err| Failure::new(format!("{}: {err}", config_path.display())))?;
    config.after_includes = Some(version_macros(&workspace.version(CAPI_PACKAGE)?)?);
    let bindings = cbindgen::Builder::new()
        .with_crate(workspace.package_dir(CAPI_PACKAGE)?)
        .with_config(config)
        .generate()
        .map_err(|err| Failure::new(format!("cbindgen failed on {CAPI_PACKAGE}: {err}")))?;
    let mut text = Vec::new();
    bindings.write(&mut text);
    Ok(text)
}

/// `cargo xtask header`: writes `include/tutti.h`.
pub fn generate(workspace: &Workspace) -> Result<(), Failure> {
    let text = render(workspace)?;
    let path = header_path(workspace);
    if std::fs::read(&path).is_ok_and(|old| old == text) {
        println!("{} is up to date", path.display());
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|err| Failure::new(format!("creating {}: {err}", dir.display())))?;
    }
    // Write beside it, then rename: a reader never sees half a header.
    let partial = path.with_extension("h.partial");
    std::fs::write(&partial, &text)
        .and_then(|()| std::fs::rename(&partial, &path))
        .map_err(|err| Failure::new(format!("writing {}: {err}", path.display())))?;
    println!("wrote {}", path.display());
    Ok(())
}

/// `cargo xtask header --check`: fails when `include/tutti.h` differs from what cbindgen
/// generates now.
pub fn check(workspace: &Workspace) -> Result<(), Failure> {
    let fresh = render(workspace)?;
    let path = header_path(workspace);
    let current = std::fs::read(&path).map_err(|err| {
        Failure::new(format!(
            "{}: {err}; run `cargo xtask header` and commit it",
            path.display()
        ))
    })?;
    if current == fresh {
        println!("{} is up to date", path.display());
        return Ok(());
    }
    Err(Failure::new(format!(
        "{} is stale: {}. Run `cargo xtask header` and commit the result.",
        path.display(),
        first_difference(
            &String::from_utf8_lossy(&current),
            &String::from_utf8_lossy(&fresh)
        )
    )))
}

/// Where two texts first differ, for the stale-header message.
fn first_difference(current: &str, fresh: &str) -> String {
    let mut current_lines = current.lines();
    let mut fresh_lines = fresh.lines();
    for line in 1.. {
        match (current_lines.next(), fresh_lines.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (Some(a), Some(b)) => {
                return format!("line {line} is `{a}` but cbindgen generates `{b}`");
            }
            (Some(a), None) => return format!("line {line} `{a}` is not generated any more"),
            (None, Some(b)) => return format!("line {line} `{b}` is missing"),
            (None, None) => break,
        }
    }
    "the line endings differ".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_macros_come_from_the_version() {
        let macros = version_macros("1.22.333-rc.1").expect("valid version");
        assert!(macros.contains("#define TUTTI_VERSION_MAJOR 1\n"));
        assert!(macros.contains("#define TUTTI_VERSION_MINOR 22\n"));
        assert!(macros.contains("#define TUTTI_VERSION_PATCH 333\n"));
        assert!(macros.ends_with("#define TUTTI_VERSION \"1.22.333-rc.1\""));
        assert!(version_macros("1.2").is_err());
    }

    #[test]
    fn first_difference_names_the_line() {
        assert_eq!(
            first_difference("a\nb\nc\n", "a\nB\nc\n"),
            "line 2 is `b` but cbindgen generates `B`"
        );
        assert_eq!(first_difference("a\n", "a\nb\n"), "line 2 `b` is missing");
        assert_eq!(
            first_difference("a\nb\n", "a\n"),
            "line 2 `b` is not generated any more"
        );
    }
}
