//! Progress of long runs on standard error: a bar (indicatif) when standard error is a
//! terminal, plain lines otherwise, so that a log file never receives a carriage return.
//!
//! The libraries report through their options' callbacks ([`ProgressFn`]); [`reporter`]
//! makes the callback this CLI gives them. `-q` turns it off. Log lines written while a bar
//! is drawn go above it ([`suspend`]).

use std::io::{IsTerminal, Write};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tutti_backend::{Progress, ProgressFn};

/// The bar on the terminal, while one is drawn.
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Whether progress is shown at all (`-q` hides it).
static ENABLED: Mutex<bool> = Mutex::new(true);

/// The least time between two plain lines of one stage.
const LINE_INTERVAL: Duration = Duration::from_secs(2);

/// Shows progress or not (`-q`).
pub fn set_enabled(enabled: bool) {
    *ENABLED.lock().unwrap_or_else(PoisonError::into_inner) = enabled;
}

/// Runs `write` with the bar, if one is drawn, cleared from the terminal meanwhile.
pub fn suspend<T>(write: impl FnOnce() -> T) -> T {
    let bar = BAR.lock().unwrap_or_else(PoisonError::into_inner).clone();
    match bar {
        Some(bar) => bar.suspend(write),
        None => write(),
    }
}

/// A progress callback drawing on standard error, or `None` when progress is hidden or this
/// process does not print (`prints`: the printing process of an MPI job).
pub fn reporter(prints: bool) -> Option<ProgressFn> {
    if !prints || !*ENABLED.lock().unwrap_or_else(PoisonError::into_inner) {
        return None;
    }
    if std::io::stderr().is_terminal() {
        Some(ProgressFn::new(draw_bar))
    } else {
        let lines = Mutex::new(Lines::default());
        Some(ProgressFn::new(move |progress| {
            lines
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .write(progress);
        }))
    }
}

/// Clears the bar, if one is left (a run that failed midway).
pub fn finish() {
    if let Some(bar) = BAR.lock().unwrap_or_else(PoisonError::into_inner).take() {
        bar.finish_and_clear();
    }
}

/// What a report says, in one line: `scf: iteration 7/128  -74.962928`.
pub fn describe(progress: &Progress<'_>) -> String {
    let mut text = format!("{}: {}", progress.task, progress.stage);
    if progress.total > 0 {
        text += &format!(" {}/{}", progress.done, progress.total);
    } else {
        text += &format!(" {}", progress.done);
    }
    if let Some(value) = progress.value {
        text += &format!("  {value:.10e}");
    }
    text
}

fn draw_bar(progress: &Progress<'_>) {
    let mut slot = BAR.lock().unwrap_or_else(PoisonError::into_inner);
    let bar = slot.get_or_insert_with(|| {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar
    });
    if progress.total > 0 {
        bar.set_length(progress.total);
    }
    bar.set_position(progress.done);
    let mut message = format!("{}: {}", progress.task, progress.stage);
    if let Some(value) = progress.value {
        message += &format!("  {value:.8e}");
    }
    bar.set_message(message);
    // An iteration limit is not a count: the bar ends with its task's last stage instead.
    let last_phase = progress.total > 0 && progress.done >= progress.total;
    if last_phase {
        bar.finish_and_clear();
        *slot = None;
    }
}

/// Plain lines: one per stage change, and within a stage at most one per
/// [`LINE_INTERVAL`], the last step always.
#[derive(Default)]
struct Lines {
    stage: String,
    last_line: Option<Instant>,
}

impl Lines {
    fn write(&mut self, progress: &Progress<'_>) {
        let new_stage = self.stage != progress.stage;
        let due = self
            .last_line
            .is_none_or(|last| last.elapsed() >= LINE_INTERVAL);
        let last_step = progress.total > 0 && progress.done >= progress.total;
        if new_stage || due || last_step {
            self.stage = progress.stage.to_owned();
            self.last_line = Some(Instant::now());
            let _ = writeln!(std::io::stderr().lock(), "{}", describe(progress));
        }
    }
}
