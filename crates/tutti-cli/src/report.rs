//! What a subcommand prints: its text report, or with `--json` one JSON object on standard
//! output (docs/cli.md lists the fields of each subcommand's object).

use std::fmt;
use std::time::Instant;

use serde_json::{json, Value};
use tutti_backend::Device;

/// Prints the `--json` object of `command` as one line of standard output: `fields` (an
/// object) with `command`, `versions` and `seconds` (wall time since `started`) added.
pub fn print_json(command: &str, started: Instant, fields: Value) {
    let mut object = match fields {
        Value::Object(map) => map,
        other => {
            let mut map = serde_json::Map::new();
            map.insert("result".into(), other);
            map
        }
    };
    object.insert("command".into(), command.into());
    object.insert("versions".into(), versions());
    object.insert("seconds".into(), started.elapsed().as_secs_f64().into());
    println!("{}", Value::Object(object));
}

/// The versions of this `tutti` (its libraries share the workspace's version).
pub fn versions() -> Value {
    json!({ "tutti": env!("CARGO_PKG_VERSION") })
}

/// The kind of `devices` (`"cpu"` or `"gpu"`; both joined with `+` if mixed, `null` for
/// none).
pub fn device_kind(devices: &[Device]) -> Value {
    let mut kinds: Vec<&str> = devices.iter().map(|d| d.kind().name()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.is_empty() {
        Value::Null
    } else {
        kinds.join("+").into()
    }
}

/// Where a subcommand's text lines go: standard output, or standard error when standard
/// output holds the `--json` object. Written with `write!`/`writeln!`, which call
/// [`Text::write_fmt`]; like `print!`, a failed write to standard output panics.
#[derive(Clone, Copy, Debug)]
pub struct Text {
    to_stderr: bool,
}

impl Text {
    /// Lines for standard error when `json`, else for standard output.
    pub fn new(json: bool) -> Self {
        Self { to_stderr: json }
    }

    /// Writes `args` to the stream this text goes to.
    pub fn write_fmt(&self, args: fmt::Arguments<'_>) {
        if self.to_stderr {
            eprint!("{args}");
        } else {
            print!("{args}");
        }
    }
}
