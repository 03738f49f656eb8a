//! Progress of long work, reported through a callback the caller gives: the libraries never
//! print. Every workload reports in the same shape, so one display (the CLI's progress bar,
//! a Python callable, a C function pointer) serves them all.

use std::fmt;
use std::sync::Arc;

/// One report: `done` of `total` steps of a stage of a task.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress<'a> {
    /// The workload: `"fmm"`, `"scf"`, `"fit"`, `"campaign"` (the sweep reports its own
    /// `SweepProgress`, which the CLI shows as `"sweep"`).
    pub task: &'a str,
    /// The step just finished: a phase (`"tree"`, `"far field"`), `"iteration"`, a
    /// campaign task's id.
    pub stage: &'a str,
    /// Steps done, counting this one.
    pub done: u64,
    /// Steps in all; 0 when unknown (an iteration's limit is not its count, but is given).
    pub total: u64,
    /// The figure the stage tracks, when it has one: the SCF energy (hartree), the fit's
    /// cost.
    pub value: Option<f64>,
}

/// A progress callback, shared by an options struct's clones and compared by identity.
///
/// It is called on the thread of the reporting rank (rank 0 of the group), between the
/// steps it reports, so it should return quickly; it may be called from any thread.
#[derive(Clone)]
pub struct ProgressFn(Arc<dyn Fn(&Progress<'_>) + Send + Sync>);

impl ProgressFn {
    /// Wraps a closure.
    pub fn new(report: impl Fn(&Progress<'_>) + Send + Sync + 'static) -> Self {
        Self(Arc::new(report))
    }

    /// Reports `progress`.
    pub fn report(&self, progress: &Progress<'_>) {
        (self.0)(progress)
    }
}

/// Calls `progress` when there is one: the form the workloads use.
pub fn report(progress: Option<&ProgressFn>, report: Progress<'_>) {
    if let Some(progress) = progress {
        progress.report(&report);
    }
}

impl fmt::Debug for ProgressFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProgressFn(..)")
    }
}

impl PartialEq for ProgressFn {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn reports_reach_the_closure_and_clones_compare_equal() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let progress = ProgressFn::new(move |p| {
            sink.lock()
                .unwrap()
                .push((p.stage.to_owned(), p.done, p.total));
        });
        let clone = progress.clone();
        assert_eq!(progress, clone);
        assert_ne!(progress, ProgressFn::new(|_| {}));
        report(
            Some(&clone),
            Progress {
                task: "fmm",
                stage: "tree",
                done: 1,
                total: 5,
                value: None,
            },
        );
        report(
            None,
            Progress {
                task: "fmm",
                stage: "tree",
                done: 2,
                total: 5,
                value: None,
            },
        );
        assert_eq!(*seen.lock().unwrap(), vec![("tree".to_owned(), 1, 5)]);
    }
}
