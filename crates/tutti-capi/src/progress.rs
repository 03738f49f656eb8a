//! Progress of long calls, reported to a C function pointer: the C face of
//! `tutti_backend::progress`. Every workload's options carry a [`TuttiProgressCallback`]; a
//! NULL `report` (the default) means no reports.

use std::ffi::{c_char, c_int, c_void, CString};

use tutti_backend::{Progress, ProgressFn};

/// One progress report: `done` of `total` steps of `stage` of `task`. Valid only during the
/// call that receives it (copy the strings to keep them).
#[repr(C)]
#[derive(Debug)]
pub struct TuttiProgress {
    /// The workload, NUL-terminated: "fmm", "scf", "fit" or "sweep".
    pub task: *const c_char,
    /// The step just finished (a phase such as "far field", "iteration") or, for the sweep,
    /// the pass in progress ("sketch (left to right)", "orthogonalize (right to left)"),
    /// NUL-terminated.
    pub stage: *const c_char,
    /// Steps done, counting this one.
    pub done: u64,
    /// Steps in all; 0 when unknown (for iterations it is the iteration limit).
    pub total: u64,
    /// The figure the stage tracks when `has_value` is 1: the SCF energy (hartree), the
    /// fit's cost. NaN when `has_value` is 0.
    pub value: f64,
    /// 1 when `value` holds a figure, else 0.
    pub has_value: c_int,
}

/// Receives a progress report: `user_data` as given in the `TuttiProgressCallback`, and the
/// report, valid only during the call.
///
/// It is called on the thread of the reporting rank (rank 0; in a call split among MPI
/// processes, only on the process holding rank 0), between the steps it reports, never
/// concurrently with itself for one call; it should return quickly. It must not call back
/// into tutti for the same workload.
pub type TuttiProgressFn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, progress: *const TuttiProgress)>;

/// Where a long call reports its progress. The default (`report` NULL) reports nothing.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TuttiProgressCallback {
    /// The function called with each report; NULL for none.
    pub report: TuttiProgressFn,
    /// Passed back to `report` untouched.
    pub user_data: *mut c_void,
}

impl Default for TuttiProgressCallback {
    fn default() -> Self {
        Self {
            report: None,
            user_data: std::ptr::null_mut(),
        }
    }
}

impl PartialEq for TuttiProgressCallback {
    /// Equal when both report to the same function address with the same `user_data`.
    fn eq(&self, other: &Self) -> bool {
        let address = |report: TuttiProgressFn| report.map(|f| f as usize);
        address(self.report) == address(other.report) && self.user_data == other.user_data
    }
}

/// The caller's function and `user_data`, moved into a Rust closure.
#[derive(Clone, Copy)]
struct CallbackTarget {
    report: unsafe extern "C" fn(*mut c_void, *const TuttiProgress),
    user_data: *mut c_void,
}

// SAFETY: tutti never dereferences `user_data`; it only hands it back to `report`, which the
// caller lets run on a thread of the library's (documented on `TuttiProgressFn`).
unsafe impl Send for CallbackTarget {}
// SAFETY: as above; the library reports from one thread at a time for one call.
unsafe impl Sync for CallbackTarget {}

impl CallbackTarget {
    fn call(&self, progress: &Progress<'_>) {
        let task = c_string(progress.task);
        let stage = c_string(progress.stage);
        let report = TuttiProgress {
            task: task.as_ptr(),
            stage: stage.as_ptr(),
            done: progress.done,
            total: progress.total,
            value: progress.value.unwrap_or(f64::NAN),
            has_value: c_int::from(progress.value.is_some()),
        };
        // SAFETY: `report` is the caller's function with the documented signature; the
        // report and its strings outlive the call.
        unsafe { (self.report)(self.user_data, &report) }
    }
}

/// `text` NUL-terminated, with any interior NUL dropped (the library's names have none).
fn c_string(text: &str) -> CString {
    CString::new(text).unwrap_or_else(|_| CString::new(text.replace('\0', "")).unwrap_or_default())
}

impl TuttiProgressCallback {
    /// The library's callback, or `None` when `report` is NULL.
    pub(crate) fn to_rust(self) -> Option<ProgressFn> {
        let target = CallbackTarget {
            report: self.report?,
            user_data: self.user_data,
        };
        Some(ProgressFn::new(move |progress| target.call(progress)))
    }

    /// The sweep's callback, its reports in the common shape (`SweepProgress::as_progress`).
    pub(crate) fn to_sweep(self) -> Option<tutti_sweep::ProgressFn> {
        let report = self.to_rust()?;
        Some(std::sync::Arc::new(move |p: tutti_sweep::SweepProgress| {
            report.report(&p.as_progress())
        }))
    }
}

/// A callback that records what it receives, for the tests of every workload's module.
#[cfg(test)]
pub(crate) mod recording {
    use super::*;
    use std::ffi::CStr;
    use std::sync::Mutex;

    /// One report as received: task, stage, done, total, value.
    pub(crate) type Report = (String, String, u64, u64, Option<f64>);

    /// The reports received, in order.
    #[derive(Default)]
    pub(crate) struct Seen(Mutex<Vec<Report>>);

    impl Seen {
        /// A callback that appends to `self`, which must outlive the calls.
        pub(crate) fn callback(&self) -> TuttiProgressCallback {
            TuttiProgressCallback {
                report: Some(record),
                user_data: self as *const Seen as *mut c_void,
            }
        }

        /// The reports so far.
        pub(crate) fn reports(&self) -> Vec<Report> {
            self.0.lock().map(|r| r.clone()).unwrap_or_default()
        }
    }

    unsafe extern "C" fn record(user_data: *mut c_void, progress: *const TuttiProgress) {
        // SAFETY: `Seen::callback` passes a live `Seen`, and the library a valid report.
        let (seen, p) = unsafe { (&*(user_data as *const Seen), &*progress) };
        // SAFETY: NUL-terminated strings valid during the call.
        let text = |s: *const c_char| unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
        let value = (p.has_value != 0).then_some(p.value);
        if p.has_value == 0 {
            assert!(p.value.is_nan(), "a report without a value carries NaN");
        }
        if let Ok(mut reports) = seen.0.lock() {
            reports.push((text(p.task), text(p.stage), p.done, p.total, value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::recording::Seen;
    use super::*;

    #[test]
    fn a_null_report_gives_no_callback_and_a_function_gets_every_field() {
        assert!(TuttiProgressCallback::default().to_rust().is_none());
        let seen = Seen::default();
        let callback = seen.callback();
        let progress = callback.to_rust().unwrap();
        progress.report(&Progress {
            task: "scf",
            stage: "iteration",
            done: 3,
            total: 128,
            value: Some(-74.96),
        });
        progress.report(&Progress {
            task: "fmm",
            stage: "far\0field",
            done: 3,
            total: 5,
            value: None,
        });
        assert_eq!(
            seen.reports(),
            vec![
                ("scf".into(), "iteration".into(), 3, 128, Some(-74.96)),
                ("fmm".into(), "farfield".into(), 3, 5, None),
            ]
        );
        assert_eq!(callback, callback);
        assert_ne!(callback, TuttiProgressCallback::default());
    }

    #[test]
    fn sweep_reports_arrive_in_the_common_shape() {
        let seen = Seen::default();
        let sweep = seen.callback().to_sweep().unwrap();
        let report = |pass, site| tutti_sweep::SweepProgress {
            pass,
            site,
            sites: 4,
        };
        sweep(report(tutti_sweep::Pass::Sketch, 0));
        sweep(report(tutti_sweep::Pass::Sketch, 2));
        sweep(report(tutti_sweep::Pass::Orthogonalize, 3));
        sweep(report(tutti_sweep::Pass::Orthogonalize, 0));
        let reports = seen.reports();
        let steps: Vec<(&str, u64, u64)> = reports
            .iter()
            .map(|(task, stage, done, total, value)| {
                assert_eq!((task.as_str(), *value), ("sweep", None));
                (stage.as_str(), *done, *total)
            })
            .collect();
        assert_eq!(
            steps,
            [
                ("sketch (left to right)", 1, 3),
                ("sketch (left to right)", 3, 3),
                ("orthogonalize (right to left)", 1, 4),
                ("orthogonalize (right to left)", 4, 4),
            ]
        );
    }
}
