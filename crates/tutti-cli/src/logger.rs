//! The CLI's logger: the libraries report notes through the `log` facade, and this is where
//! they reach the terminal (standard error, one line each, above the progress bar if one is
//! drawn).
//!
//! The level: `TUTTI_LOG`, else `RUST_LOG` (a bare level: `off`, `error`, `warn`, `info`,
//! `debug`, `trace`), else `info` moved by `-v`/`-q` (`-v` debug, `-vv` trace, `-q` warn,
//! `-qq` error). A failed write (a closed or broken standard error) is ignored: logging
//! never stops a computation.

use std::io::Write;

use log::{Level, LevelFilter, Log, Metadata, Record};

struct StderrLogger;

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        crate::progress::suspend(|| {
            let mut stderr = std::io::stderr().lock();
            let _ = match record.level() {
                Level::Info => writeln!(stderr, "{}", record.args()),
                level => writeln!(
                    stderr,
                    "{}: {}",
                    level.as_str().to_lowercase(),
                    record.args()
                ),
            };
        });
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

/// Installs the logger at the level `TUTTI_LOG` or `RUST_LOG` names, else at `info` moved
/// by `verbosity` (`-v` counts up, `-q` down). An unknown level is reported once and the
/// flags' level used.
pub fn install(verbosity: i16) {
    static LOGGER: StderrLogger = StderrLogger;
    let from_flags = match verbosity {
        i16::MIN..=-2 => LevelFilter::Error,
        -1 => LevelFilter::Warn,
        0 => LevelFilter::Info,
        1 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    };
    let level = ["TUTTI_LOG", "RUST_LOG"]
        .iter()
        .find_map(|name| std::env::var(name).ok().map(|text| (name, text)))
        .map_or(from_flags, |(name, text)| {
            text.trim().parse::<LevelFilter>().unwrap_or_else(|_| {
                let _ = writeln!(
                    std::io::stderr(),
                    "warning: {name}={text:?} is not a level (off, error, warn, info, debug, trace); using {}",
                    from_flags.as_str().to_lowercase()
                );
                from_flags
            })
        });
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}

/// The exit status when standard output's reader went away: a shell's for SIGPIPE.
pub const BROKEN_PIPE_EXIT: i32 = 141;

/// Replaces Rust's panic message (and backtrace hint) with one line that says it is a bug in
/// tutti, where, and what to send; the process still exits with status 101. A write to a
/// closed standard output exits with [`BROKEN_PIPE_EXIT`] instead, silently.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let message = tutti_backend::panic_message(info.payload());
        // `tutti ... | head`: the reader closed standard output, and `println!` panics on
        // the broken pipe. Not a bug: exit as a program killed by SIGPIPE reports itself to
        // a shell (128 + 13), without a word.
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let _ = writeln!(
            std::io::stderr(),
            "internal error{place}: {message}\nthis is a bug in tutti: please report it with the command line and input"
        );
    }));
}
