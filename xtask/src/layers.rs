//! `cargo xtask check-layers`: the crates' dependencies follow the layers of
//! `docs/architecture.md`, and every declared dependency is used where it is declared.
//!
//! Layers, bottom up: `tutti-backend` < `tutti-group`, `tutti-plan` < `tutti-mpi` < the
//! solvers workloads share (`tutti-sparse`) < the workloads (`tutti-sweep`, `tutti-fmm`,
//! `tutti-adjoint`, `tutti-fit`) < the entry points (`tutti-capi`, `tutti-cli`,
//! `tutti-benches`) < the fuzz harness (`tutti-fuzz`, which drives the C ABI and the
//! workloads). A crate may depend only on lower layers, never on a crate of its own layer (no
//! workload on another, no solver on another, group and plan only on backend, no entry point
//! on another); `xtask` depends on no tutti crate.
//!
//! A dependency is used when the crate's code names it (`dep_name::`, `use dep_name`,
//! `extern crate dep_name`, hyphens as underscores, the `package = ...` rename honoured, and
//! a workspace crate's library name, such as `tutti` for `tutti-capi`), with comments and
//! string literals ignored:
//! - `[dependencies]` by `src/` outside `#[cfg(test)]` items and test-only module files, and
//!   by the files of the `[[bin]]` targets wherever they lie (`fuzz/fuzz_targets/`, the only
//!   users of `tutti-fuzz`'s optional `libfuzzer-sys`); a dependency only tests use belongs in
//!   `[dev-dependencies]`;
//! - `[dev-dependencies]` by `tests/`, `benches/`, `examples/`, `#[cfg(test)]` code and doc
//!   comments (doctests); a dev entry repeating a non-optional normal dependency with no
//!   extra features adds nothing and is reported too;
//! - `[build-dependencies]` by `build.rs`.
//!
//! The manifests come from `cargo metadata` (already parsed by the other tasks), so no TOML
//! parser is needed. Every workspace member is checked, `fuzz/` among them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::tools::{cargo, output, Failure};

/// Where a crate sits; a crate may depend only on crates of a lower layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    Backend,
    Runtime,
    Processes,
    /// Solvers the workloads share (a stiff fit factors with the sparse LU).
    Solver,
    Workload,
    Entry,
    /// The fuzz targets' harness: drives the entry points (the C ABI) and the workloads.
    Harness,
    /// Build tooling: depends on no workspace crate.
    Tool,
}

impl Layer {
    fn describe(self) -> &'static str {
        match self {
            Layer::Backend => "backend",
            Layer::Runtime => "runtime (group, plan)",
            Layer::Processes => "process transport (mpi)",
            Layer::Solver => "shared solver (sparse)",
            Layer::Workload => "workload",
            Layer::Entry => "entry point",
            Layer::Harness => "fuzz harness",
            Layer::Tool => "tool",
        }
    }

    /// What a crate of this layer may not do with one of the same layer, in words.
    fn sideways_rule(self) -> &'static str {
        match self {
            Layer::Backend => "the backend depends on no tutti crate",
            Layer::Runtime => "group and plan depend only on the backend",
            Layer::Processes => "the process transport depends only on the runtime and backend",
            Layer::Solver => "no shared solver depends on another",
            Layer::Workload => "no workload depends on another",
            Layer::Entry => "no entry point depends on another",
            Layer::Harness => "no fuzz harness depends on another",
            Layer::Tool => "xtask depends on no tutti crate",
        }
    }
}

/// Every workspace crate and its layer. A new crate must be added here.
const LAYERS: &[(&str, Layer)] = &[
    ("tutti-backend", Layer::Backend),
    ("tutti-group", Layer::Runtime),
    ("tutti-plan", Layer::Runtime),
    ("tutti-mpi", Layer::Processes),
    ("tutti-sweep", Layer::Workload),
    ("tutti-fmm", Layer::Workload),
    ("tutti-adjoint", Layer::Workload),
    ("tutti-fit", Layer::Workload),
    ("tutti-sparse", Layer::Solver),
    ("tutti-capi", Layer::Entry),
    ("tutti-cli", Layer::Entry),
    ("tutti-benches", Layer::Entry),
    ("tutti-fuzz", Layer::Harness),
    ("xtask", Layer::Tool),
];

fn layer_of(name: &str) -> Option<Layer> {
    LAYERS
        .iter()
        .find(|(crate_name, _)| *crate_name == name)
        .map(|&(_, layer)| layer)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DepKind {
    Normal,
    Dev,
    Build,
}

impl DepKind {
    fn section(self) -> &'static str {
        match self {
            DepKind::Normal => "[dependencies]",
            DepKind::Dev => "[dev-dependencies]",
            DepKind::Build => "[build-dependencies]",
        }
    }
}

/// One entry of a manifest's dependency sections.
#[derive(Clone, Debug)]
struct Dep {
    /// The package depended on.
    package: String,
    /// The name the code uses for it, when renamed (`foo = { package = "bar" }`).
    rename: Option<String>,
    /// Its library's name when it is a workspace crate whose `[lib] name` differs from the
    /// package's (`tutti` for `tutti-capi`).
    lib: Option<String>,
    kind: DepKind,
    optional: bool,
    features: Vec<String>,
}

impl Dep {
    /// The identifier the crate's code uses: the rename, else the library's name, else the
    /// package, `-` as `_`.
    fn ident(&self) -> String {
        self.rename
            .as_deref()
            .or(self.lib.as_deref())
            .unwrap_or(&self.package)
            .replace('-', "_")
    }
}

/// A workspace crate: its name and its declared dependencies.
#[derive(Clone, Debug)]
struct Manifest {
    name: String,
    deps: Vec<Dep>,
}

/// Which code a source file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// `src/` and the library or binary targets: compiled with `[dependencies]`.
    Lib,
    /// `tests/`, `benches/`, `examples/` and their targets: `[dev-dependencies]` too.
    Dev,
    /// `build.rs`: `[build-dependencies]`.
    Build,
}

/// One source file of a crate, its path relative to the crate's root.
struct Source {
    path: PathBuf,
    text: String,
    origin: Origin,
}

/// The crate's code split by which dependency section it may use, comments and literals
/// blanked.
#[derive(Default)]
struct Code {
    normal: String,
    dev: String,
    build: String,
    /// Doc comments: doctests may use dev-dependencies.
    docs: String,
}

pub fn run() -> Result<(), Failure> {
    let text = output(cargo().args(["metadata", "--format-version", "1", "--no-deps"]))?;
    let metadata: serde_json::Value = serde_json::from_str(&text)
        .map_err(|err| Failure::new(format!("cannot parse `cargo metadata`: {err}")))?;
    let packages = metadata["packages"]
        .as_array()
        .ok_or_else(|| Failure::new("`cargo metadata` lists no packages"))?;
    let libs = lib_names(packages);
    let mut manifests = Vec::new();
    let mut findings = Vec::new();
    for package in packages {
        let mut manifest = parse_manifest(package)?;
        for dep in &mut manifest.deps {
            dep.lib = libs.get(&dep.package).cloned();
        }
        let sources = read_sources(package)?;
        findings.extend(dependency_findings(&manifest, &split_code(&sources)));
        manifests.push(manifest);
    }
    findings.splice(0..0, layer_findings(&manifests));

    println!("crate layers and workspace dependencies (normal, dev and build):");
    for manifest in &manifests {
        let members: BTreeSet<&str> = manifests.iter().map(|m| m.name.as_str()).collect();
        let edges: BTreeSet<&str> = manifest
            .deps
            .iter()
            .map(|dep| dep.package.as_str())
            .filter(|package| members.contains(package))
            .collect();
        let layer = layer_of(&manifest.name).map_or("unknown", Layer::describe);
        let edges: Vec<&str> = edges.into_iter().collect();
        println!(
            "  {:<14} {:<22} -> {}",
            manifest.name,
            layer,
            edges.join(", ")
        );
    }
    if findings.is_empty() {
        println!("check-layers: {} crates, no findings", manifests.len());
        Ok(())
    } else {
        println!("check-layers: {} findings:", findings.len());
        for finding in &findings {
            println!("  - {finding}");
        }
        Err(Failure::new(format!(
            "check-layers: {} findings (listed above)",
            findings.len()
        )))
    }
}

/// The library name of each workspace crate whose `[lib] name` is not its package's name.
fn lib_names(packages: &[serde_json::Value]) -> BTreeMap<String, String> {
    let library = |kind: &serde_json::Value| {
        matches!(
            kind.as_str(),
            Some("lib" | "rlib" | "dylib" | "cdylib" | "staticlib" | "proc-macro")
        )
    };
    let mut names = BTreeMap::new();
    for package in packages {
        let Some(name) = package["name"].as_str() else {
            continue;
        };
        let lib = package["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|target| target["kind"].as_array().into_iter().flatten().any(library))
            .and_then(|target| target["name"].as_str());
        if let Some(lib) = lib.filter(|lib| lib.replace('-', "_") != name.replace('-', "_")) {
            names.insert(name.to_owned(), lib.to_owned());
        }
    }
    names
}

fn parse_manifest(package: &serde_json::Value) -> Result<Manifest, Failure> {
    let name = package["name"]
        .as_str()
        .ok_or_else(|| Failure::new("a package in `cargo metadata` has no name"))?
        .to_owned();
    let mut deps = Vec::new();
    for dep in package["dependencies"].as_array().into_iter().flatten() {
        let kind = match dep["kind"].as_str() {
            None => DepKind::Normal,
            Some("dev") => DepKind::Dev,
            Some("build") => DepKind::Build,
            Some(other) => {
                return Err(Failure::new(format!(
                    "{name}: unknown dependency kind `{other}` in `cargo metadata`"
                )))
            }
        };
        deps.push(Dep {
            package: dep["name"]
                .as_str()
                .ok_or_else(|| Failure::new(format!("{name}: a dependency has no name")))?
                .to_owned(),
            rename: dep["rename"].as_str().map(str::to_owned),
            lib: None,
            kind,
            optional: dep["optional"].as_bool().unwrap_or(false),
            features: dep["features"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect(),
        });
    }
    Ok(Manifest { name, deps })
}

/// Every `.rs` file of a package: `src/`, `tests/`, `benches/`, `examples/`, `build.rs`, and
/// any target whose file lies elsewhere.
fn read_sources(package: &serde_json::Value) -> Result<Vec<Source>, Failure> {
    let manifest_path = package["manifest_path"]
        .as_str()
        .ok_or_else(|| Failure::new("a package in `cargo metadata` has no manifest path"))?;
    let root = Path::new(manifest_path)
        .parent()
        .ok_or_else(|| Failure::new(format!("{manifest_path} has no parent directory")))?;
    let mut files: BTreeMap<PathBuf, Origin> = BTreeMap::new();
    for (dir, origin) in [
        ("src", Origin::Lib),
        ("tests", Origin::Dev),
        ("benches", Origin::Dev),
        ("examples", Origin::Dev),
    ] {
        for file in rust_files(&root.join(dir))? {
            files.insert(file, origin);
        }
    }
    for target in package["targets"].as_array().into_iter().flatten() {
        let Some(path) = target["src_path"].as_str() else {
            continue;
        };
        let kinds: Vec<&str> = target["kind"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|k| k.as_str())
            .collect();
        let origin = if kinds.contains(&"custom-build") {
            Origin::Build
        } else if kinds
            .iter()
            .any(|k| matches!(*k, "test" | "bench" | "example"))
        {
            Origin::Dev
        } else {
            Origin::Lib
        };
        files.entry(PathBuf::from(path)).or_insert(origin);
    }
    files
        .into_iter()
        .map(|(path, origin)| {
            let text = std::fs::read_to_string(&path)
                .map_err(|err| Failure::new(format!("reading {}: {err}", path.display())))?;
            let path = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            Ok(Source { path, text, origin })
        })
        .collect()
}

/// The `.rs` files under `dir`, recursively (none when it does not exist).
fn rust_files(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let mut found = Vec::new();
    if !dir.is_dir() {
        return Ok(found);
    }
    let entries = std::fs::read_dir(dir)
        .map_err(|err| Failure::new(format!("reading {}: {err}", dir.display())))?;
    for entry in entries {
        let path = entry
            .map_err(|err| Failure::new(format!("reading {}: {err}", dir.display())))?
            .path();
        if path.is_dir() {
            found.extend(rust_files(&path)?);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
    Ok(found)
}

/// Layer violations among the workspace's crates, and crates missing from [`LAYERS`].
fn layer_findings(manifests: &[Manifest]) -> Vec<String> {
    let members: BTreeSet<&str> = manifests.iter().map(|m| m.name.as_str()).collect();
    let mut findings = Vec::new();
    for manifest in manifests {
        let Some(layer) = layer_of(&manifest.name) else {
            findings.push(format!(
                "{}: not in the layer table of xtask/src/layers.rs; add it with its layer",
                manifest.name
            ));
            continue;
        };
        let mut seen = BTreeSet::new();
        for dep in &manifest.deps {
            if !members.contains(dep.package.as_str()) || !seen.insert(dep.package.as_str()) {
                continue;
            }
            let Some(dep_layer) = layer_of(&dep.package) else {
                continue; // reported as a crate of its own
            };
            let name = &manifest.name;
            let package = &dep.package;
            let section = dep.kind.section();
            if layer == Layer::Tool {
                findings.push(format!(
                    "{name} depends on {package} ({section}): {}",
                    layer.sideways_rule()
                ));
            } else if dep_layer > layer {
                findings.push(format!(
                    "{name} ({}) depends on {package} ({}, a layer above) in {section}",
                    layer.describe(),
                    dep_layer.describe()
                ));
            } else if dep_layer == layer {
                findings.push(format!(
                    "{name} depends on {package} ({section}): {}",
                    layer.sideways_rule()
                ));
            }
        }
    }
    findings
}

/// Unused or misplaced dependencies of one crate, given its code.
fn dependency_findings(manifest: &Manifest, code: &Code) -> Vec<String> {
    let name = &manifest.name;
    let mut findings = Vec::new();
    for dep in &manifest.deps {
        let ident = dep.ident();
        let in_normal = uses(&code.normal, &ident);
        let in_dev = uses(&code.dev, &ident);
        let in_build = uses(&code.build, &ident);
        let in_docs = uses(&lex(&code.docs).code, &ident);
        let package = &dep.package;
        match dep.kind {
            DepKind::Normal if !in_normal => findings.push(if in_dev {
                format!(
                    "{name}: {package} is used only by tests, benches or examples: move it to \
                     [dev-dependencies]"
                )
            } else if in_build {
                format!(
                    "{name}: {package} is used only by build.rs: move it to [build-dependencies]"
                )
            } else {
                format!("{name}: {package} is declared in [dependencies] and never used")
            }),
            DepKind::Dev => {
                let normal = manifest.deps.iter().find(|other| {
                    other.kind == DepKind::Normal && other.package == dep.package && !other.optional
                });
                if normal.is_some_and(|n| dep.features.iter().all(|f| n.features.contains(f))) {
                    findings.push(format!(
                        "{name}: {package} is in both [dependencies] and [dev-dependencies]; the \
                         dev entry adds nothing: drop it"
                    ));
                } else if !in_dev && !in_docs {
                    findings.push(format!(
                        "{name}: {package} is declared in [dev-dependencies] and no test, bench, \
                         example, #[cfg(test)] code or doctest uses it"
                    ));
                }
            }
            DepKind::Build if !in_build => findings.push(format!(
                "{name}: {package} is declared in [build-dependencies] and build.rs never uses it"
            )),
            DepKind::Normal | DepKind::Build => {}
        }
    }
    findings
}

/// Splits a crate's files into the code each dependency section serves.
fn split_code(sources: &[Source]) -> Code {
    let lexed: Vec<(&Source, Lexed)> = sources.iter().map(|s| (s, lex(&s.text))).collect();
    // Module files declared by `#[cfg(test)] mod name;`: test code, with their submodules.
    let mut test_dirs: Vec<PathBuf> = Vec::new();
    let mut test_files: Vec<PathBuf> = Vec::new();
    let mut parts: Vec<(Origin, String, String, String)> = Vec::new();
    for (source, lexed) in &lexed {
        let split = split_tests(&lexed.code);
        let dir = module_dir(&source.path);
        for module in &split.test_modules {
            test_files.push(dir.join(format!("{module}.rs")));
            test_dirs.push(dir.join(module));
        }
        parts.push((source.origin, split.normal, split.test, lexed.docs.clone()));
    }
    let mut code = Code::default();
    for ((source, _), (origin, normal, test, docs)) in lexed.iter().zip(parts) {
        let test_only = test_files.contains(&source.path)
            || test_dirs.iter().any(|dir| source.path.starts_with(dir));
        let target = match origin {
            Origin::Lib if test_only => &mut code.dev,
            Origin::Lib => &mut code.normal,
            Origin::Dev => &mut code.dev,
            Origin::Build => &mut code.build,
        };
        target.push_str(&normal);
        target.push('\n');
        code.dev.push_str(&test);
        code.dev.push('\n');
        code.docs.push_str(&docs);
        code.docs.push('\n');
    }
    code
}

/// Where the files of `path`'s child modules live: beside `lib.rs`, `main.rs` and `mod.rs`,
/// else in the directory named after the file.
fn module_dir(path: &Path) -> PathBuf {
    let parent = path.parent().unwrap_or(Path::new("")).to_path_buf();
    match path.file_stem().and_then(|s| s.to_str()) {
        Some("lib" | "main" | "mod") | None => parent,
        Some(stem) => parent.join(stem),
    }
}

/// A file's code with comments and literals blanked, and its doc comments' text.
struct Lexed {
    code: String,
    docs: String,
}

/// Blanks comments, string and char literals (so braces and names inside them are not
/// code), keeping lifetimes, and collects doc comments.
fn lex(text: &str) -> Lexed {
    let bytes = text.as_bytes();
    let mut code = Vec::with_capacity(bytes.len());
    let mut docs = String::new();
    let mut i = 0;
    let ident_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    while i < bytes.len() {
        let rest = &bytes[i..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |n| i + n);
            let doc = (rest.starts_with(b"///") && !rest.starts_with(b"////"))
                || rest.starts_with(b"//!");
            if doc {
                docs.push_str(&text[i + 3..end]);
                docs.push('\n');
            }
            code.resize(code.len() + (end - i), b' ');
            i = end;
        } else if rest.starts_with(b"/*") {
            let doc = (rest.starts_with(b"/**") && !rest.starts_with(b"/**/"))
                || rest.starts_with(b"/*!");
            let mut depth = 0usize;
            let mut j = i;
            while j < bytes.len() {
                if bytes[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if bytes[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            if doc {
                docs.push_str(&String::from_utf8_lossy(&bytes[i..j]));
                docs.push('\n');
            }
            blank(&mut code, &bytes[i..j]);
            i = j;
        } else if let Some(end) = raw_string_end(bytes, i) {
            blank(&mut code, &bytes[i..end]);
            i = end;
        } else if bytes[i] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(bytes.len());
            blank(&mut code, &bytes[i..end]);
            i = end;
        } else if bytes[i] == b'\''
            && (i == 0
                || !ident_byte(bytes[i - 1])
                || (bytes[i - 1] == b'b' && (i == 1 || !ident_byte(bytes[i - 2]))))
        {
            match char_literal_end(bytes, i) {
                Some(end) => {
                    blank(&mut code, &bytes[i..end]);
                    i = end;
                }
                None => {
                    code.push(b'\'');
                    i += 1;
                }
            }
        } else {
            code.push(bytes[i]);
            i += 1;
        }
    }
    Lexed {
        code: String::from_utf8_lossy(&code).into_owned(),
        docs,
    }
}

/// Appends spaces for `span`, keeping its newlines.
fn blank(code: &mut Vec<u8>, span: &[u8]) {
    code.extend(span.iter().map(|&b| if b == b'\n' { b'\n' } else { b' ' }));
}

/// The end of a raw string (`r"..."`, `r#"..."#`, `br`, `cr`) starting at `i`, if one does.
fn raw_string_end(bytes: &[u8], i: usize) -> Option<usize> {
    if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
        return None;
    }
    let mut j = i;
    if matches!(bytes.get(j), Some(b'b' | b'c')) {
        j += 1;
    }
    if bytes.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let hashes = bytes[j..].iter().take_while(|&&b| b == b'#').count();
    j += hashes;
    if bytes.get(j) != Some(&b'"') {
        return None;
    }
    let mut closing = vec![b'"'];
    closing.extend(std::iter::repeat_n(b'#', hashes));
    let body = j + 1;
    let end = bytes[body..]
        .windows(closing.len())
        .position(|w| w == closing.as_slice())
        .map_or(bytes.len(), |n| body + n + closing.len());
    Some(end)
}

/// The end of a char literal starting at the quote at `i`; `None` for a lifetime.
fn char_literal_end(bytes: &[u8], i: usize) -> Option<usize> {
    let first = *bytes.get(i + 1)?;
    if first == b'\\' {
        // An escape: '\n', '\'', '\u{1F600}'.
        let close = bytes[i + 3..].iter().position(|&b| b == b'\'')?;
        return Some(i + 3 + close + 1);
    }
    let width = match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    };
    (bytes.get(i + 1 + width) == Some(&b'\'')).then_some(i + 2 + width)
}

/// A file's code split into what every build sees and what only test builds see.
struct Split {
    normal: String,
    test: String,
    /// `name` of each `#[cfg(test)] mod name;` (a module in its own file).
    test_modules: Vec<String>,
}

/// Moves the items under `#[cfg(test)]` / `#[cfg(all(test, ..))]` (and a whole file under
/// `#![cfg(test)]`) out of the normal code. `code` is lexed: no comments or literals.
fn split_tests(code: &str) -> Split {
    let bytes = code.as_bytes();
    let mut normal = String::new();
    let mut test = String::new();
    let mut test_modules = Vec::new();
    let mut start = 0;
    let mut search = 0;
    while let Some(offset) = code[search..].find('#') {
        let at = search + offset;
        search = at + 1;
        let inner = bytes.get(at + 1) == Some(&b'!');
        let open = at + 1 + usize::from(inner);
        if bytes.get(open) != Some(&b'[') {
            continue;
        }
        let Some(close) = matching(bytes, open) else {
            break;
        };
        let attribute: String = code[open + 1..close]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if attribute != "cfg(test)" && !attribute.starts_with("cfg(all(test,") {
            continue;
        }
        if inner {
            return Split {
                normal: String::new(),
                test: code.to_owned(),
                test_modules,
            };
        }
        // Skip further attributes, then find the item's end: its `;` or its closing brace.
        let mut j = close + 1;
        loop {
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            if bytes.get(j) == Some(&b'#') && bytes.get(j + 1) == Some(&b'[') {
                match matching(bytes, j + 1) {
                    Some(end) => j = end + 1,
                    None => break,
                }
            } else {
                break;
            }
        }
        let item_start = j;
        let mut depth = 0usize;
        let mut end = bytes.len();
        while j < bytes.len() {
            match bytes[j] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth = depth.saturating_sub(1),
                b';' if depth == 0 => {
                    end = j + 1;
                    break;
                }
                b'{' if depth == 0 => {
                    end = matching(bytes, j).map_or(bytes.len(), |c| c + 1);
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        let item = &code[item_start..end];
        if item.ends_with(';') {
            let words: Vec<&str> = item
                .trim_end_matches(';')
                .split_whitespace()
                .filter(|w| !w.starts_with("pub"))
                .collect();
            if let ["mod", module] = words.as_slice() {
                test_modules.push((*module).to_owned());
            }
        }
        normal.push_str(&code[start..at]);
        test.push_str(&code[at..end]);
        test.push('\n');
        start = end;
        search = end;
    }
    normal.push_str(&code[start..]);
    Split {
        normal,
        test,
        test_modules,
    }
}

/// The index of the bracket closing the one at `open` (`[`, `(` or `{`), counting all three.
fn matching(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, &b) in bytes.iter().enumerate().skip(open) {
        match b {
            b'[' | b'(' | b'{' => depth += 1,
            b']' | b')' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether lexed `code` names the crate `ident`: `ident::`, `use ident`, `extern crate
/// ident`; not a path segment (`crate::ident::`) or a field (`x.ident`).
fn uses(code: &str, ident: &str) -> bool {
    let bytes = code.as_bytes();
    let ident_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut search = 0;
    while let Some(offset) = code[search..].find(ident) {
        let at = search + offset;
        let end = at + ident.len();
        search = end;
        if (at > 0 && ident_byte(bytes[at - 1])) || bytes.get(end).is_some_and(|&b| ident_byte(b)) {
            continue;
        }
        let before = code[..at].trim_end();
        if before.ends_with("::") || before.ends_with('.') {
            continue;
        }
        let after = code[end..].trim_start();
        let keyword_before = |keyword: &str| {
            before
                .strip_suffix(keyword)
                .is_some_and(|prefix| prefix.as_bytes().last().is_none_or(|&b| !ident_byte(b)))
        };
        if after.starts_with("::") || keyword_before("use") || keyword_before("crate") {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep(package: &str, kind: DepKind) -> Dep {
        Dep {
            package: package.to_owned(),
            rename: None,
            lib: None,
            kind,
            optional: false,
            features: Vec::new(),
        }
    }

    fn manifest(name: &str, deps: &[(&str, DepKind)]) -> Manifest {
        Manifest {
            name: name.to_owned(),
            deps: deps.iter().map(|&(p, k)| dep(p, k)).collect(),
        }
    }

    fn source(path: &str, origin: Origin, text: &str) -> Source {
        Source {
            path: PathBuf::from(path),
            text: text.to_owned(),
            origin,
        }
    }

    const N: DepKind = DepKind::Normal;
    const D: DepKind = DepKind::Dev;

    #[test]
    fn layers_allow_only_downward_edges() {
        let crates = [
            manifest("tutti-backend", &[("libc", N)]),
            manifest("tutti-group", &[("tutti-backend", N)]),
            manifest("tutti-plan", &[("tutti-backend", N), ("tutti-group", N)]),
            manifest("tutti-fmm", &[("tutti-group", N), ("tutti-sweep", D)]),
            manifest("tutti-sweep", &[("tutti-capi", N)]),
            manifest("tutti-capi", &[("tutti-fmm", N), ("tutti-cli", N)]),
            manifest("tutti-cli", &[("tutti-fmm", N), ("tutti-plan", N)]),
            manifest("xtask", &[("tutti-backend", D)]),
            manifest("tutti-new", &[]),
        ];
        let findings = layer_findings(&crates);
        assert_eq!(
            findings,
            [
                "tutti-plan depends on tutti-group ([dependencies]): group and plan depend only \
                 on the backend",
                "tutti-fmm depends on tutti-sweep ([dev-dependencies]): no workload depends on \
                 another",
                "tutti-sweep (workload) depends on tutti-capi (entry point, a layer above) in \
                 [dependencies]",
                "tutti-capi depends on tutti-cli ([dependencies]): no entry point depends on \
                 another",
                "xtask depends on tutti-backend ([dev-dependencies]): xtask depends on no tutti \
                 crate",
                "tutti-new: not in the layer table of xtask/src/layers.rs; add it with its layer",
            ]
        );
    }

    #[test]
    fn the_fuzz_harness_sits_above_the_entry_points() {
        let crates = [
            manifest("tutti-capi", &[]),
            manifest("tutti-fit", &[]),
            manifest("tutti-fuzz", &[("tutti-capi", N), ("tutti-fit", N)]),
            manifest("tutti-cli", &[("tutti-fuzz", D)]),
        ];
        assert_eq!(
            layer_findings(&crates),
            [
                "tutti-cli (entry point) depends on tutti-fuzz (fuzz harness, a layer above) in \
              [dev-dependencies]"
            ]
        );
    }

    #[test]
    fn a_library_named_apart_from_its_package_is_used_by_its_own_name() {
        let packages: Vec<serde_json::Value> = serde_json::from_str(
            r#"[
                {"name": "tutti-capi", "targets": [
                    {"name": "tutti", "kind": ["rlib", "cdylib", "staticlib"]}]},
                {"name": "tutti-fit", "targets": [{"name": "tutti_fit", "kind": ["lib"]}]},
                {"name": "tutti-fuzz", "targets": [
                    {"name": "xyz", "kind": ["bin"]},
                    {"name": "tutti_fuzz", "kind": ["lib"]}]}
            ]"#,
        )
        .unwrap();
        let libs = lib_names(&packages);
        assert_eq!(libs.len(), 1);
        assert_eq!(libs.get("tutti-capi").map(String::as_str), Some("tutti"));
        let crate_ = Manifest {
            name: "tutti-fuzz".to_owned(),
            deps: vec![
                Dep {
                    lib: Some("tutti".to_owned()),
                    ..dep("tutti-capi", N)
                },
                dep("libfuzzer-sys", N),
            ],
        };
        // The library uses the C ABI under its library name; only a binary target's file,
        // outside `src/`, uses libfuzzer-sys.
        let sources = [
            source("src/lib.rs", Origin::Lib, "use tutti::tutti_fmm;"),
            source(
                "fuzz_targets/xyz.rs",
                Origin::Lib,
                "libfuzzer_sys::fuzz_target!(|data: &[u8]| run(data));",
            ),
        ];
        assert!(dependency_findings(&crate_, &split_code(&sources)).is_empty());
        let unused = [source("src/lib.rs", Origin::Lib, "use tutti_capi::x;")];
        assert_eq!(
            dependency_findings(&crate_, &split_code(&unused)),
            [
                "tutti-fuzz: tutti-capi is declared in [dependencies] and never used",
                "tutti-fuzz: libfuzzer-sys is declared in [dependencies] and never used",
            ]
        );
    }

    #[test]
    fn a_dependency_is_used_by_paths_and_use_statements_only() {
        let code = |text: &str| lex(text).code;
        assert!(uses(&code("fn f() { tutti_plan::plan(); }"), "tutti_plan"));
        assert!(uses(&code("use rayon::prelude::*;"), "rayon"));
        assert!(uses(&code("pub use tutti_group;"), "tutti_group"));
        assert!(uses(&code("extern crate libc;"), "libc"));
        assert!(uses(
            &code("#[derive(thiserror :: Error)] enum E {}"),
            "thiserror"
        ));
        // Comments, strings, other paths, fields and longer names are not uses.
        assert!(!uses(
            &code("// tutti_plan::plan()\n/* rayon::x */"),
            "tutti_plan"
        ));
        assert!(!uses(
            &code(r#"let s = "rayon::join"; let r = r"rayon::x";"#),
            "rayon"
        ));
        assert!(!uses(&code("crate::log::warn(); self.log.push(1);"), "log"));
        assert!(!uses(
            &code("let rand_x = rand_chacha::Rng::new();"),
            "rand"
        ));
        assert!(!uses(&code("fn faer() {} // faer"), "faer"));
        assert!(!uses(&code("let reuse = 1; reuse serde;"), "serde"));
    }

    #[test]
    fn the_lexer_keeps_lifetimes_and_blanks_literals_and_comments() {
        let lexed = lex("fn f<'a>(x: &'a str) -> char { '{' }\n/// doc serde::x\nlet s = '\\'';");
        assert!(lexed.code.contains("<'a>(x: &'a str)"), "{}", lexed.code);
        assert!(!lexed.code.contains("'{'"));
        assert_eq!(lexed.code.matches('{').count(), 1);
        assert!(lexed.docs.contains("serde::x"));
        assert!(!lexed.code.contains("serde"));
        assert!(lex("/* a /* nested */ b */ x").code.trim() == "x");
        assert!(lex("let c = 'é'; y").code.trim_end().ends_with("; y"));
        assert!(!lex("if b == b'{' { x }").code.contains("'{'"));
        assert_eq!(
            lex("let r = br#\"}\"#; z").code,
            format!("let r = {}; z", " ".repeat(7))
        );
    }

    #[test]
    fn cfg_test_items_and_module_files_are_test_code() {
        let lib = "use tutti_backend::Device;\n\
                   #[cfg(test)]\nmod tests {\n  use proptest::prelude::*;\n  fn f() { if true { } }\n}\n\
                   #[cfg(test)] #[allow(dead_code)] use tempfile::TempDir;\n\
                   #[cfg(all(test, feature = \"x\"))] fn g() -> [u8; 2] { [0; 2] }\n\
                   #[cfg(test)]\npub(crate) mod fixtures;\n\
                   #[cfg(not(test))] fn h() { log::info!(\"\"); }\n";
        let split = split_tests(&lex(lib).code);
        assert!(split.normal.contains("tutti_backend::Device"));
        assert!(split.normal.contains("log::info!"));
        for name in ["proptest", "tempfile", "fn g"] {
            assert!(split.test.contains(name), "{name} not in the test code");
            assert!(!split.normal.contains(name), "{name} in the normal code");
        }
        assert_eq!(split.test_modules, ["fixtures"]);
        assert!(split_tests("#![cfg(test)]\nuse a::b;").normal.is_empty());
    }

    #[test]
    fn unused_and_misplaced_dependencies_are_reported() {
        let crate_ = Manifest {
            name: "tutti-x".to_owned(),
            deps: vec![
                dep("tutti-backend", N),
                dep("tutti-plan", N),
                dep("bytemuck", N),
                dep("serde-json", N),
                dep("rayon", N),
                dep("proptest", D),
                dep("tempfile", D),
                dep("thiserror", N),
                dep("thiserror", D),
                Dep {
                    rename: Some("npy".to_owned()),
                    ..dep("npyz", N)
                },
                dep("cc", DepKind::Build),
            ],
        };
        let sources = [
            source(
                "src/lib.rs",
                Origin::Lib,
                "//! Uses tutti_plan::Plan in prose only.\n\
                 use tutti_backend::Device;\n#[derive(thiserror::Error)] struct E;\n\
                 fn f() { npy::read(); }\nmod a;\n#[cfg(test)] mod tests;\n",
            ),
            source(
                "src/a.rs",
                Origin::Lib,
                "#[cfg(test)] mod t { use bytemuck::Pod; }",
            ),
            source("src/tests.rs", Origin::Lib, "use serde_json::json;"),
            source("src/tests/more.rs", Origin::Lib, "use rayon::join;"),
            source("tests/it.rs", Origin::Dev, "use proptest::prelude::*;"),
            source("build.rs", Origin::Build, "fn main() {}"),
        ];
        let findings = dependency_findings(&crate_, &split_code(&sources));
        assert_eq!(
            findings,
            [
                "tutti-x: tutti-plan is declared in [dependencies] and never used",
                "tutti-x: bytemuck is used only by tests, benches or examples: move it to \
                 [dev-dependencies]",
                "tutti-x: serde-json is used only by tests, benches or examples: move it to \
                 [dev-dependencies]",
                "tutti-x: rayon is used only by tests, benches or examples: move it to \
                 [dev-dependencies]",
                "tutti-x: tempfile is declared in [dev-dependencies] and no test, bench, \
                 example, #[cfg(test)] code or doctest uses it",
                "tutti-x: thiserror is in both [dependencies] and [dev-dependencies]; the dev \
                 entry adds nothing: drop it",
                "tutti-x: cc is declared in [build-dependencies] and build.rs never uses it",
            ]
        );
    }
}
