//! The C ABI against the bad inputs of the hardening review, called from Rust as C would:
//! inconsistent train shapes (H5), pointers tutti did not hand out (M2), aliased outputs
//! (M3). Caller memory sits right before a `PROT_NONE` page where a read past it would
//! otherwise go unnoticed, so reading too far crashes the test instead of passing.

use std::ffi::{c_int, c_void};
use std::ptr;

use tutti::boundary::last_error;
use tutti::memory::{alloc_c, string_to_c};
use tutti::{
    tutti_fit, tutti_fmm, tutti_free_c, tutti_train_free, tutti_train_from_arrays,
    tutti_train_norm, tutti_version, TuttiFitOptions, TuttiFitResult, TuttiStatus, TuttiTrain,
};

const INVALID: c_int = TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT as c_int;

/// Two pages: the first readable and writable, the second `PROT_NONE`.
struct GuardedPage {
    base: *mut u8,
    page: usize,
}

impl GuardedPage {
    fn new() -> Self {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).expect("page");
        // SAFETY: an anonymous private mapping of two pages; the result is checked.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED, "mmap");
        let base = base.cast::<u8>();
        // SAFETY: the second page of the mapping just made.
        let status = unsafe { libc::mprotect(base.add(page).cast(), page, libc::PROT_NONE) };
        assert_eq!(status, 0, "mprotect");
        Self { base, page }
    }

    /// `count` doubles ending exactly at the guard page, set to `values`.
    fn doubles_at_end(&self, values: &[f64]) -> *const f64 {
        let bytes = std::mem::size_of_val(values);
        // SAFETY: the last `bytes` bytes of the readable page, 8-aligned (page - 8k).
        unsafe {
            let start = self.base.add(self.page - bytes).cast::<f64>();
            ptr::copy_nonoverlapping(values.as_ptr(), start, values.len());
            start
        }
    }

    /// The first byte of the `PROT_NONE` page.
    fn guard(&self) -> *mut u8 {
        self.base.wrapping_add(self.page)
    }
}

impl Drop for GuardedPage {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new, not used after this.
        unsafe { libc::munmap(self.base.cast(), 2 * self.page) };
    }
}

#[test]
fn inconsistent_train_shapes_are_refused_before_any_core_is_read() {
    let guard = GuardedPage::new();
    // Two cores of two doubles each, the second right before the guard page; the first at
    // the start of the page, so a claimed core of 200000 doubles would run into the guard.
    let first = guard.base.cast::<f64>();
    // SAFETY: the first two doubles of the readable page.
    unsafe { ptr::copy_nonoverlapping([0.5, 0.25].as_ptr(), first, 2) };
    let second = guard.doubles_at_end(&[1.0, -1.0]);
    for (shapes, needle) in [
        // The review's case: site 0's right bond 100000 against site 1's left bond 1.
        ([1, 2, 100_000, 1, 2, 1], "bond mismatch at site 1"),
        // The last right bond is not 1: site 1 would claim 200000 doubles.
        ([1, 2, 1, 1, 2, 100_000], "the last right bond is 100000"),
        // The first left bond is not 1.
        ([100_000, 2, 1, 1, 2, 1], "the first left bond is 100000"),
        // The chain holds at site 0's end only by a zero.
        ([1, 2, 0, 0, 2, 1], "dimension below 1"),
    ] {
        for cores in [[first.cast_const(), second], [second, second]] {
            let mut out: *mut TuttiTrain = ptr::null_mut();
            // SAFETY: shapes holds 6 ints, cores 2 pointers to 2 doubles each, out a local.
            let status = unsafe {
                tutti_train_from_arrays(0, 0, 2, shapes.as_ptr(), cores.as_ptr(), &mut out)
            };
            assert_eq!(status, INVALID, "{shapes:?}: {}", last_error());
            assert!(
                last_error().contains(needle),
                "{shapes:?}: {}",
                last_error()
            );
            assert!(out.is_null(), "no output on failure");
        }
    }
    // Consistent shapes at the very end of the page are read exactly.
    let mut out: *mut TuttiTrain = ptr::null_mut();
    let shapes: [c_int; 6] = [1, 2, 1, 1, 2, 1];
    let cores = [second, second];
    // SAFETY: as above.
    let status =
        unsafe { tutti_train_from_arrays(0, 0, 2, shapes.as_ptr(), cores.as_ptr(), &mut out) };
    assert_eq!(status, 0, "{}", last_error());
    let mut norm = -1.0;
    // SAFETY: a live handle and a local.
    assert_eq!(unsafe { tutti_train_norm(out, &mut norm) }, 0);
    assert!((norm - 2.0).abs() < 1e-12, "{norm}");
    // SAFETY: a live handle, released once.
    assert_eq!(unsafe { tutti_train_free(out) }, 0);
}

#[test]
fn pointers_tutti_did_not_hand_out_are_refused_untouched() {
    let status_of = |ptr: *mut c_void| {
        // SAFETY: tutti_free_c must refuse any pointer it did not hand out without reading it.
        unsafe { tutti_free_c(ptr) }
    };
    // malloc'd memory, with a copy of a live tutti header in front of the payload.
    let live = alloc_c(16).expect("a tutti buffer");
    // SAFETY: the 16 bytes before a live payload are its header, readable.
    let header: [u8; 16] = unsafe { ptr::read(live.as_ptr().sub(16).cast()) };
    // SAFETY: malloc of 64 bytes, checked; the header copy fits.
    let foreign = unsafe { libc::malloc(64).cast::<u8>() };
    assert!(!foreign.is_null());
    // SAFETY: foreign holds 64 bytes.
    unsafe { ptr::copy_nonoverlapping(header.as_ptr(), foreign, 16) };
    assert_eq!(status_of(foreign.wrapping_add(16).cast()), INVALID);
    assert!(
        last_error().contains("not a live tutti buffer"),
        "{}",
        last_error()
    );
    // SAFETY: still ours: tutti did not release it.
    unsafe { libc::free(foreign.cast()) };

    // A stack buffer that looks exactly like a tutti allocation.
    #[repr(C, align(16))]
    struct Fake([u8; 32]);
    let mut fake = Fake([0; 32]);
    fake.0[..16].copy_from_slice(&header);
    let before = fake.0;
    assert_eq!(
        status_of(fake.0.as_mut_ptr().wrapping_add(16).cast()),
        INVALID
    );
    assert_eq!(fake.0, before, "a refused pointer is left alone");

    // The inside of a live buffer, and a pointer misaligned into it.
    let buffer = alloc_c(64).expect("a tutti buffer");
    assert_eq!(status_of(buffer.as_ptr().wrapping_add(16).cast()), INVALID);
    assert_eq!(status_of(buffer.as_ptr().wrapping_add(1).cast()), INVALID);

    // The start of a page after an unreadable one: the header would be in the guard page.
    let guard = GuardedPage::new();
    assert_eq!(
        status_of(guard.guard().wrapping_add(guard.page).cast()),
        INVALID
    );
    assert_eq!(status_of(guard.guard().cast()), INVALID);

    // A double free, immediate and after other allocations.
    assert_eq!(status_of(buffer.as_ptr().cast()), 0, "{}", last_error());
    assert_eq!(status_of(buffer.as_ptr().cast()), INVALID);
    let stale = string_to_c("stale").expect("a string");
    // SAFETY: released once here.
    assert_eq!(unsafe { tutti_free_c(stale.as_ptr().cast()) }, 0);
    let newer = string_to_c("newer, a different size").expect("a string");
    if newer.as_ptr().cast::<u8>() != stale.as_ptr().cast::<u8>() {
        assert_eq!(status_of(stale.as_ptr().cast()), INVALID);
    } // else: the documented ABA case, undetectable; the newer buffer is released below.
    assert_eq!(status_of(newer.as_ptr().cast()), 0);
    assert_eq!(status_of(live.as_ptr().cast()), 0);
}

#[test]
fn handles_tutti_did_not_make_are_refused_untouched() {
    let guard = GuardedPage::new();
    let unreadable = guard.guard().cast::<TuttiTrain>();
    let mut norm = -1.0;
    // SAFETY: the handle is looked up before it is read.
    let status = unsafe { tutti_train_norm(unreadable, &mut norm) };
    assert_eq!(status, INVALID, "{}", last_error());
    assert!(
        last_error().contains("not a live train handle"),
        "{}",
        last_error()
    );
    // SAFETY: as above.
    assert_eq!(unsafe { tutti_train_free(unreadable) }, INVALID);
    let zeros = vec![0_u64; 64];
    // SAFETY: a readable, aligned buffer that is no handle.
    let status = unsafe { tutti_train_free(zeros.as_ptr().cast_mut().cast()) };
    assert_eq!(status, INVALID);

    let shapes: [c_int; 3] = [1, 2, 1];
    let core = [1.0, 2.0];
    let cores = [core.as_ptr()];
    let mut train: *mut TuttiTrain = ptr::null_mut();
    // SAFETY: arrays of the stated lengths and a local.
    let status =
        unsafe { tutti_train_from_arrays(0, 0, 1, shapes.as_ptr(), cores.as_ptr(), &mut train) };
    assert_eq!(status, 0, "{}", last_error());
    // SAFETY: released once, then refused.
    assert_eq!(unsafe { tutti_train_free(train) }, 0);
    // SAFETY: the released handle is refused without being read.
    assert_eq!(unsafe { tutti_train_free(train) }, INVALID);
    // SAFETY: as above.
    assert_eq!(unsafe { tutti_train_norm(train, &mut norm) }, INVALID);
}

#[test]
fn aliased_outputs_are_refused_and_nothing_is_written() {
    // FMM: the review's two cases, and a partial overlap.
    let positions = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0];
    let masses = [1.0, 1.0];
    let mut out = [7.0_f64; 6];
    let out_ptr = out.as_mut_ptr();
    // SAFETY: arrays of the stated lengths; the overlap is refused before any write.
    let status = unsafe {
        tutti_fmm(
            2,
            positions.as_ptr(),
            masses.as_ptr(),
            ptr::null(),
            out_ptr,
            out_ptr,
        )
    };
    assert_eq!(status, INVALID, "{}", last_error());
    assert!(last_error().contains("`potential_out`"), "{}", last_error());
    assert!(last_error().contains("`accel_out`"), "{}", last_error());
    assert_eq!(out, [7.0; 6], "outputs are written only on success");
    // SAFETY: as above (accel_out inside potential_out's tail).
    let status = unsafe {
        tutti_fmm(
            2,
            positions.as_ptr(),
            masses.as_ptr(),
            ptr::null(),
            out_ptr,
            out_ptr.wrapping_add(1),
        )
    };
    assert_eq!(status, INVALID, "{}", last_error());
    let mut positions_copy = positions;
    let p = positions_copy.as_mut_ptr();
    // SAFETY: accel_out is the positions array: refused before it is written.
    let status = unsafe { tutti_fmm(2, p, masses.as_ptr(), ptr::null(), ptr::null_mut(), p) };
    assert_eq!(status, INVALID, "{}", last_error());
    assert!(last_error().contains("`positions`"), "{}", last_error());
    assert_eq!(positions_copy, positions);
    // Distinct outputs still work.
    let mut potential = [0.0; 2];
    let mut accel = [0.0; 6];
    // SAFETY: arrays of the stated lengths.
    let status = unsafe {
        tutti_fmm(
            2,
            positions.as_ptr(),
            masses.as_ptr(),
            ptr::null(),
            potential.as_mut_ptr(),
            accel.as_mut_ptr(),
        )
    };
    assert_eq!(status, 0, "{}", last_error());
    assert!((potential[0] + 1.0).abs() < 1e-12, "{potential:?}");

    // Fit: parameters_out inside covariance_out.
    unsafe extern "C" fn line(
        _: *mut c_void,
        _: c_int,
        p: *const f64,
        _: c_int,
        r: *mut f64,
        _: c_int,
        j: *mut f64,
    ) -> c_int {
        // SAFETY: the fit's contract: 1 parameter, 1 residual.
        unsafe {
            *r = *p - 3.0;
            *j = 1.0;
        }
        0
    }
    let counts = [1];
    let initial = [0.0];
    let mut shared = [9.0_f64; 1];
    let mut result = TuttiFitResult::default();
    let s = shared.as_mut_ptr();
    // SAFETY: arrays of the stated lengths; the overlap is refused before the fit runs.
    let status = unsafe {
        tutti_fit(
            Some(line),
            ptr::null_mut(),
            1,
            counts.as_ptr(),
            1,
            initial.as_ptr(),
            ptr::null(),
            s,
            s,
            &mut result,
        )
    };
    assert_eq!(status, INVALID, "{}", last_error());
    assert!(
        last_error().contains("`covariance_out`"),
        "{}",
        last_error()
    );
    assert_eq!(shared, [9.0]);
    let mut initial_copy = initial;
    let i = initial_copy.as_mut_ptr();
    // SAFETY: parameters_out is the initial array: refused.
    let status = unsafe {
        tutti_fit(
            Some(line),
            ptr::null_mut(),
            1,
            counts.as_ptr(),
            1,
            i,
            ptr::null(),
            i,
            ptr::null_mut(),
            &mut result,
        )
    };
    assert_eq!(status, INVALID, "{}", last_error());

    // Version: one int for all three.
    let mut v = -1;
    let mut w = -1;
    let vp: *mut c_int = &mut v;
    // SAFETY: valid pointers, two of them the same: refused before any write.
    let status = unsafe { tutti_version(&mut w, vp, vp) };
    assert_eq!(status, INVALID, "{}", last_error());
    assert_eq!((v, w), (-1, -1));
}

/// `r = p - 3` for every parameter: one residual per parameter, the identity Jacobian.
unsafe extern "C" fn shifted_identity(
    _: *mut c_void,
    _: c_int,
    p: *const f64,
    n: c_int,
    r: *mut f64,
    _: c_int,
    j: *mut f64,
) -> c_int {
    let n = n as usize;
    // SAFETY: the fit's contract: n parameters, n residuals, n x n Jacobian entries.
    unsafe {
        for i in 0..n {
            *r.add(i) = *p.add(i) - 3.0;
            for k in 0..n {
                *j.add(i * n + k) = if i == k { 1.0 } else { 0.0 };
            }
        }
    }
    0
}

#[test]
fn fit_bounds_are_read_exactly_and_never_written() {
    // The bounds end at the guard page: reading past n_parameters doubles would crash.
    let guard = GuardedPage::new();
    let upper = guard.doubles_at_end(&[2.0, 10.0]);
    let lower = [0.0, 0.0];
    let options = TuttiFitOptions {
        lower: lower.as_ptr(),
        upper,
        ..TuttiFitOptions::default()
    };
    let counts = [2];
    let initial = [1.0, 1.0];
    let mut parameters = [0.0; 2];
    let mut result = TuttiFitResult::default();
    // SAFETY: arrays of the stated lengths; the bounds hold 2 doubles each.
    let status = unsafe {
        tutti_fit(
            Some(shifted_identity),
            ptr::null_mut(),
            1,
            counts.as_ptr(),
            2,
            initial.as_ptr(),
            &options,
            parameters.as_mut_ptr(),
            ptr::null_mut(),
            &mut result,
        )
    };
    assert_eq!(status, 0, "{}", last_error());
    assert_eq!(parameters[0], 2.0, "held at its upper bound");
    // The gradient there is p - 3: the default gradient tolerance, 1e-10, bounds the error.
    assert!((parameters[1] - 3.0).abs() <= 1e-10, "{parameters:?}");

    // parameters_out is the lower bounds: refused before anything is written.
    let mut shared = [0.0, 0.0];
    let options = TuttiFitOptions {
        lower: shared.as_ptr(),
        ..TuttiFitOptions::default()
    };
    // SAFETY: as above; the overlap is the case under test.
    let status = unsafe {
        tutti_fit(
            Some(shifted_identity),
            ptr::null_mut(),
            1,
            counts.as_ptr(),
            2,
            initial.as_ptr(),
            &options,
            shared.as_mut_ptr(),
            ptr::null_mut(),
            &mut result,
        )
    };
    assert_eq!(status, INVALID, "{}", last_error());
    assert!(
        last_error().contains("`options->lower`") && last_error().contains("`parameters_out`"),
        "{}",
        last_error()
    );
    assert_eq!(shared, [0.0, 0.0]);
}
