//! The boundary every entry point crosses: the panic guard, the thread's last error, and
//! the checks of pointer and integer arguments.
//!
//! An entry point has one shape:
//!
//! ```
//! # use std::ffi::c_int;
//! # use tutti::boundary::{ffi_call, Out};
//! /// Writes 42 to `*answer`.
//! ///
//! /// # Safety
//! /// `answer` is NULL or valid for writing an `int`.
//! #[no_mangle]
//! pub unsafe extern "C" fn tutti_example_answer(answer: *mut c_int) -> c_int {
//!     ffi_call("tutti_example_answer", || {
//!         // SAFETY: the caller passes NULL or a pointer valid for writes (documented above).
//!         let answer = unsafe { Out::new(answer, "answer") }?;
//!         // ... all the work, which may fail; outputs are written last, on success only:
//!         answer.write(42);
//!         Ok(())
//!     })
//! }
//! # // SAFETY: a valid pointer to a local.
//! # let mut value = 0;
//! # assert_eq!(unsafe { tutti_example_answer(&mut value) }, 0);
//! # assert_eq!(value, 42);
//! ```

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::mem::MaybeUninit;
use std::panic::{self, AssertUnwindSafe};

use tutti_backend::panic_message;

use crate::status::{Error, TuttiStatus};

thread_local! {
    /// The message of the last call on this thread; empty after a success.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Runs the body of the entry point `function` and returns its status as an `int`.
///
/// This is the one panic boundary: a panic in `body` becomes `TUTTI_ERROR_PANIC` with the
/// panic's message. It also sets the thread's last error: empty on success, else
/// `"{function}: {message}"`.
pub fn ffi_call<F>(function: &str, body: F) -> c_int
where
    F: FnOnce() -> Result<(), Error>,
{
    let outcome = panic::catch_unwind(AssertUnwindSafe(body));
    let error = match outcome {
        Ok(Ok(())) => {
            set_last_error("");
            return TuttiStatus::TUTTI_OK.code();
        }
        Ok(Err(error)) => error,
        Err(payload) => Error::new(
            TuttiStatus::TUTTI_ERROR_PANIC,
            format!(
                "internal panic: {} (this is a bug in tutti; please report it)",
                panic_message(payload.as_ref())
            ),
        ),
    };
    set_last_error(&format!("{function}: {}", error.message()));
    error.status().code()
}

/// Replaces the calling thread's last error message.
///
/// A NUL byte, which C strings cannot hold, is written as `\0`.
pub fn set_last_error(message: &str) {
    let message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // try_with: during thread teardown the slot may be gone; the message is then dropped.
    let _ = LAST_ERROR.try_with(|slot| {
        let mut slot = slot.borrow_mut();
        // An empty message stays the same allocation: nothing to replace.
        if !(message.is_empty() && slot.is_empty()) {
            *slot = message;
        }
    });
}

/// The calling thread's last error message, as Rust sees it.
pub fn last_error() -> String {
    LAST_ERROR
        .try_with(|slot| slot.borrow().to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The message of the last tutti call on the calling thread: empty when that call succeeded,
/// else a sentence naming the function and the argument or condition at fault.
///
/// Never NULL. The string belongs to tutti and is borrowed: it stays valid until the next
/// tutti call on the same thread (which replaces it; also a call made inside a `tutti_fit`
/// callback); copy it to keep it. Do not free it.
/// Each thread has its own message.
#[no_mangle]
pub extern "C" fn tutti_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|slot| slot.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// An output argument `T *name`, checked: not NULL and aligned for `T`.
///
/// Check every output first, do the work, then [`Out::write`] the results: outputs are
/// written only on success.
#[derive(Debug)]
pub struct Out<'a, T> {
    slot: &'a mut MaybeUninit<T>,
}

impl<'a, T> Out<'a, T> {
    /// Checks the output pointer `ptr` of the argument called `name`.
    ///
    /// Errors: `TUTTI_ERROR_NULL_POINTER` for NULL, `TUTTI_ERROR_INVALID_ARGUMENT` for a
    /// pointer not aligned for `T`.
    ///
    /// # Safety
    /// `ptr` is NULL or valid for writes of a `T` for `'a`, and nothing else accesses that
    /// memory during `'a`.
    pub unsafe fn new(ptr: *mut T, name: &str) -> Result<Self, Error> {
        check_pointer(ptr.cast_const(), name)?;
        // SAFETY: not NULL and aligned (checked above), valid for writes and unaliased for
        // 'a (the caller's promise); MaybeUninit makes no claim about the old contents.
        let slot = unsafe { &mut *ptr.cast::<MaybeUninit<T>>() };
        Ok(Self { slot })
    }

    /// Writes the result. The old value is overwritten without being dropped.
    pub fn write(self, value: T) {
        self.slot.write(value);
    }
}

/// An options argument `const T *ptr`: NULL means the defaults, for every function;
/// otherwise it must be aligned for `T`, and the options are copied.
///
/// Errors: `TUTTI_ERROR_INVALID_ARGUMENT` for a misaligned pointer.
///
/// # Safety
/// `ptr` is NULL or valid for reads of one initialised `T`, unchanged during the call.
pub unsafe fn input_options<T: Default + Copy>(ptr: *const T, name: &str) -> Result<T, Error> {
    if ptr.is_null() {
        return Ok(T::default());
    }
    check_pointer(ptr, name)?;
    // SAFETY: not NULL and aligned (checked above); valid for reads (the caller's promise).
    Ok(unsafe { *ptr })
}

/// Writes `T::default()` to the output `T *ptr`: the body of every `tutti_*_default`.
///
/// Errors: those of [`Out::new`] (NULL, misaligned).
///
/// # Safety
/// `ptr` is NULL or valid for writes of a `T`, unaliased during the call.
pub unsafe fn write_default<T: Default>(ptr: *mut T, name: &str) -> Result<(), Error> {
    // SAFETY: NULL or valid for writes (the caller's promise).
    let out = unsafe { Out::new(ptr, name) }?;
    out.write(T::default());
    Ok(())
}

/// An input array `const T *ptr` of `len` elements, checked: not NULL, aligned, not empty.
///
/// Errors: `TUTTI_ERROR_NULL_POINTER` for NULL; `TUTTI_ERROR_INVALID_ARGUMENT` for
/// `len == 0`, for a misaligned pointer, or for an array larger than memory.
///
/// # Safety
/// `ptr` is NULL or valid for reads of `len` initialised `T`s for `'a`, not written during
/// `'a`.
pub unsafe fn input_slice<'a, T>(ptr: *const T, len: usize, name: &str) -> Result<&'a [T], Error> {
    check_pointer(ptr, name)?;
    check_array_len::<T>(len, name)?;
    // SAFETY: not NULL, aligned, non-empty with a size that fits in isize (checked above);
    // valid for reads of `len` elements for 'a (the caller's promise).
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A caller-owned output array `T *ptr` of `len` elements, checked like [`input_slice`].
///
/// # Safety
/// `ptr` is NULL or valid for reads and writes of `len` initialised `T`s for `'a`, and
/// nothing else accesses that memory during `'a`.
pub unsafe fn output_slice<'a, T>(
    ptr: *mut T,
    len: usize,
    name: &str,
) -> Result<&'a mut [T], Error> {
    check_pointer(ptr.cast_const(), name)?;
    check_array_len::<T>(len, name)?;
    // SAFETY: as in input_slice, plus the caller's promise of exclusive access.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// An input string `const char *ptr`, checked: not NULL, UTF-8.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that stays unchanged for `'a`.
pub unsafe fn input_str<'a>(ptr: *const c_char, name: &str) -> Result<&'a str, Error> {
    check_pointer(ptr, name)?;
    // SAFETY: not NULL; NUL-terminated and unchanged for 'a (the caller's promise).
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str().map_err(|err| {
        Error::invalid_argument(format!("argument `{name}` is not valid UTF-8: {err}"))
    })
}

fn check_pointer<T>(ptr: *const T, name: &str) -> Result<(), Error> {
    if ptr.is_null() {
        return Err(Error::null_pointer(name));
    }
    if !ptr.is_aligned() {
        return Err(Error::invalid_argument(format!(
            "argument `{name}` ({ptr:p}) is not aligned to {} bytes",
            std::mem::align_of::<T>()
        )));
    }
    Ok(())
}

fn check_array_len<T>(len: usize, name: &str) -> Result<(), Error> {
    if len == 0 {
        return Err(Error::invalid_argument(format!(
            "argument `{name}` is empty: its length must be at least 1"
        )));
    }
    if len
        .checked_mul(std::mem::size_of::<T>())
        .is_none_or(|bytes| bytes > isize::MAX as usize)
    {
        return Err(Error::invalid_argument(format!(
            "argument `{name}` has length {len}, larger than memory"
        )));
    }
    Ok(())
}

/// A caller buffer as a range of addresses, for [`check_disjoint`]: its argument name, start
/// and length in bytes, and whether tutti writes it.
///
/// Making a `Region` reads nothing: it only records the address, so it is made (and checked)
/// before any slice or reference to the caller's memory exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region<'n> {
    name: &'n str,
    start: usize,
    bytes: usize,
    written: bool,
}

impl<'n> Region<'n> {
    /// An input the call only reads: `len` elements of `T` at `ptr` (NULL: no region).
    pub fn input<T>(name: &'n str, ptr: *const T, len: usize) -> Self {
        Self::new(
            name,
            ptr.addr(),
            len.saturating_mul(std::mem::size_of::<T>()),
            false,
        )
    }

    /// An output the call writes: `len` elements of `T` at `ptr` (NULL: no region).
    pub fn output<T>(name: &'n str, ptr: *mut T, len: usize) -> Self {
        Self::new(
            name,
            ptr.addr(),
            len.saturating_mul(std::mem::size_of::<T>()),
            true,
        )
    }

    fn new(name: &'n str, start: usize, bytes: usize, written: bool) -> Self {
        // NULL is "not passed": the argument's own check reports it where it is required.
        let bytes = if start == 0 { 0 } else { bytes };
        Self {
            name,
            start,
            bytes,
            written,
        }
    }

    fn end(&self) -> usize {
        self.start.saturating_add(self.bytes)
    }

    fn overlaps(&self, other: &Self) -> bool {
        self.bytes > 0 && other.bytes > 0 && self.start < other.end() && other.start < self.end()
    }
}

/// Checks that no output region shares a byte with another output or with an input (inputs
/// may share memory with each other). NULL and empty regions are skipped.
///
/// Call it before forming any slice or reference from the arguments: two overlapping
/// `&mut` (or a `&mut` over a `&`) are undefined behaviour in Rust, and results written
/// through one output into another (or into an input still being read) are garbage in C.
///
/// Errors: `TUTTI_ERROR_INVALID_ARGUMENT` naming the first two arguments that overlap.
pub fn check_disjoint(regions: &[Region<'_>]) -> Result<(), Error> {
    for (i, a) in regions.iter().enumerate() {
        for b in &regions[i + 1..] {
            if (a.written || b.written) && a.overlaps(b) {
                return Err(Error::invalid_argument(format!(
                    "arguments `{}` ({:#x}, {} bytes) and `{}` ({:#x}, {} bytes) overlap: an \
                     output must not share memory with another output or with an input",
                    a.name, a.start, a.bytes, b.name, b.start, b.bytes
                )));
            }
        }
    }
    Ok(())
}

/// A count argument `int name` that must be at least 1, as a `usize`.
pub fn positive_count(value: c_int, name: &str) -> Result<usize, Error> {
    if value < 1 {
        return Err(Error::invalid_argument(format!(
            "argument `{name}` must be at least 1, got {value}"
        )));
    }
    Ok(value as usize)
}

/// An index argument `int name` into something with `len` items, as a `usize`.
pub fn index_in(value: c_int, len: usize, name: &str) -> Result<usize, Error> {
    match usize::try_from(value) {
        Ok(index) if index < len => Ok(index),
        _ => Err(Error::invalid_argument(format!(
            "argument `{name}` is {value}, out of range: expected 0 <= {name} < {len}"
        ))),
    }
}

/// A `usize` result for an `int` output, or `TUTTI_ERROR_INVALID_ARGUMENT` naming `what`
/// when it does not fit.
pub fn to_c_int(value: usize, what: &str) -> Result<c_int, Error> {
    c_int::try_from(value)
        .map_err(|_| Error::invalid_argument(format!("{what} is {value}, too large for an int")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> Result<(), Error> {
        Ok(())
    }

    fn last_error_c() -> String {
        let ptr = tutti_last_error();
        assert!(!ptr.is_null());
        // SAFETY: tutti_last_error returns a NUL-terminated string valid until the next call
        // on this thread; it is copied at once.
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn success_returns_ok_and_clears_the_message() {
        ffi_call("tutti_first", || Err(Error::invalid_argument("bad")));
        assert_eq!(last_error_c(), "tutti_first: bad");
        assert_eq!(ffi_call("tutti_second", ok), 0);
        assert_eq!(last_error_c(), "");
    }

    #[test]
    fn an_error_returns_its_status_and_names_the_function() {
        let status = ffi_call("tutti_thing", || Err(Error::null_pointer("out")));
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_NULL_POINTER.code());
        assert_eq!(last_error_c(), "tutti_thing: argument `out` is NULL");
        assert_eq!(last_error(), last_error_c());
    }

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        let status = ffi_call("tutti_boom", || panic!("the sky fell"));
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_PANIC.code());
        let message = last_error_c();
        assert!(
            message.starts_with("tutti_boom: internal panic: the sky fell"),
            "{message}"
        );

        let value = 7;
        let status = ffi_call("tutti_boom", || panic!("formatted {value}"));
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_PANIC.code());
        assert!(last_error_c().contains("formatted 7"));

        let status = ffi_call("tutti_boom", || std::panic::panic_any(12_u8));
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_PANIC.code());
        assert!(last_error_c().contains("a panic with a non-text payload"));
    }

    #[test]
    fn the_last_error_belongs_to_its_thread() {
        ffi_call("tutti_main", || Err(Error::invalid_argument("main thread")));
        let other = std::thread::spawn(|| {
            let before = last_error_c();
            ffi_call("tutti_other", || {
                Err(Error::invalid_argument("other thread"))
            });
            (before, last_error_c())
        })
        .join()
        .expect("thread");
        assert_eq!(
            other,
            ("".to_string(), "tutti_other: other thread".to_string())
        );
        assert_eq!(last_error_c(), "tutti_main: main thread");
    }

    #[test]
    fn nul_bytes_in_messages_are_escaped() {
        ffi_call("tutti_nul", || Err(Error::invalid_argument("a\0b")));
        assert_eq!(last_error_c(), "tutti_nul: a\\0b");
    }

    #[test]
    fn out_rejects_null_and_misaligned_pointers() {
        // SAFETY: NULL is allowed by Out::new's contract.
        let err = unsafe { Out::<u64>::new(std::ptr::null_mut(), "count") }.expect_err("rejected");
        assert_eq!(err.status(), TuttiStatus::TUTTI_ERROR_NULL_POINTER);
        assert!(err.message().contains("`count`"));

        let mut words = [0_u64; 2];
        let misaligned = words
            .as_mut_ptr()
            .cast::<u8>()
            .wrapping_add(1)
            .cast::<u64>();
        // SAFETY: a misaligned pointer is rejected before any access.
        let err = unsafe { Out::new(misaligned, "count") }.expect_err("rejected");
        assert_eq!(err.status(), TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT);
        assert!(err.message().contains("aligned"), "{}", err.message());

        let mut value = 0_u64;
        // SAFETY: a valid pointer to a local.
        let out = unsafe { Out::new(&mut value, "count") }.expect("valid pointer");
        out.write(5);
        assert_eq!(value, 5);
    }

    #[test]
    fn outputs_are_untouched_on_failure() {
        let mut value: c_int = -99;
        let ptr: *mut c_int = &mut value;
        let status = ffi_call("tutti_fails_late", || {
            // SAFETY: a valid pointer to a local.
            let _out = unsafe { Out::new(ptr, "value") }?;
            Err(Error::invalid_argument("failed before writing"))
        });
        assert!(status < 0);
        assert_eq!(value, -99);
    }

    #[test]
    fn slices_and_strings_are_checked() {
        let data = [1.0_f64, 2.0];
        // SAFETY: NULL is allowed by the contract.
        let err = unsafe { input_slice::<f64>(std::ptr::null(), 2, "x") }.expect_err("rejected");
        assert_eq!(err.status(), TuttiStatus::TUTTI_ERROR_NULL_POINTER);
        // SAFETY: a valid array; zero length is rejected before any access.
        let err = unsafe { input_slice(data.as_ptr(), 0, "x") }.expect_err("rejected");
        assert_eq!(err.status(), TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT);
        assert!(err.message().contains("empty"));
        // SAFETY: a huge length is rejected before any access.
        let err = unsafe { input_slice(data.as_ptr(), usize::MAX / 2, "x") }.expect_err("rejected");
        assert!(
            err.message().contains("larger than memory"),
            "{}",
            err.message()
        );
        // SAFETY: a valid array of two elements.
        let slice = unsafe { input_slice(data.as_ptr(), 2, "x") }.expect("valid");
        assert_eq!(slice, &data);

        let mut out = [0_i32; 3];
        // SAFETY: a valid array of three elements.
        let slice = unsafe { output_slice(out.as_mut_ptr(), 3, "y") }.expect("valid");
        slice.copy_from_slice(&[1, 2, 3]);
        assert_eq!(out, [1, 2, 3]);

        // SAFETY: a static NUL-terminated string.
        assert_eq!(unsafe { input_str(c"path".as_ptr(), "path") }, Ok("path"));
        let bad = [0xff_u8, 0];
        // SAFETY: a NUL-terminated byte string.
        let err = unsafe { input_str(bad.as_ptr().cast(), "path") }.expect_err("rejected");
        assert!(err.message().contains("UTF-8"));
        // SAFETY: NULL is allowed by the contract.
        let err = unsafe { input_str(std::ptr::null(), "path") }.expect_err("rejected");
        assert_eq!(err.status(), TuttiStatus::TUTTI_ERROR_NULL_POINTER);
    }

    #[test]
    fn overlapping_outputs_are_refused_and_inputs_may_share() {
        let mut buffer = [0.0_f64; 8];
        let base = buffer.as_mut_ptr();
        let at = |i: usize| base.wrapping_add(i);
        let check =
            |regions: &[Region<'_>]| check_disjoint(regions).map_err(|e| e.message().to_string());
        // Disjoint outputs, touching at a boundary.
        assert_eq!(
            check(&[Region::output("a", at(0), 4), Region::output("b", at(4), 4)]),
            Ok(())
        );
        // Two inputs may be the same memory; NULL and empty regions are skipped.
        assert_eq!(
            check(&[
                Region::input("x", at(0).cast_const(), 8),
                Region::input("y", at(0).cast_const(), 8),
                Region::output("n", std::ptr::null_mut::<f64>(), 8),
                Region::output("e", at(2), 0),
            ]),
            Ok(())
        );
        // The same output twice, an output inside an input, one byte of overlap.
        for regions in [
            [Region::output("a", at(0), 1), Region::output("b", at(0), 1)],
            [
                Region::input("x", at(0).cast_const(), 8),
                Region::output("b", at(7), 1),
            ],
            [
                Region::output("a", at(0), 4),
                Region::input("y", at(3).cast_const(), 1),
            ],
        ] {
            let message = check(&regions).expect_err("overlap");
            assert!(
                message.contains(&format!("`{}`", regions[0].name)),
                "{message}"
            );
            assert!(
                message.contains(&format!("`{}`", regions[1].name)),
                "{message}"
            );
            assert!(message.contains("overlap"), "{message}");
        }
        // A huge claimed length saturates instead of wrapping around.
        let err = check_disjoint(&[
            Region::output("a", at(0), usize::MAX),
            Region::output("b", at(1), 1),
        ])
        .expect_err("overlap");
        assert_eq!(err.status(), TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT);
    }

    #[test]
    fn integer_arguments_are_checked() {
        assert_eq!(positive_count(3, "count"), Ok(3));
        for bad in [0, -1, c_int::MIN] {
            let err = positive_count(bad, "count").expect_err("rejected");
            assert!(err
                .message()
                .contains(&format!("`count` must be at least 1, got {bad}")));
        }
        assert_eq!(index_in(0, 2, "index"), Ok(0));
        assert_eq!(index_in(1, 2, "index"), Ok(1));
        for bad in [2, -1, 100] {
            let err = index_in(bad, 2, "index").expect_err("rejected");
            assert!(err.message().contains("`index`"), "{}", err.message());
            assert!(
                err.message().contains("0 <= index < 2"),
                "{}",
                err.message()
            );
        }
        assert_eq!(to_c_int(7, "x"), Ok(7));
        assert!(to_c_int(usize::MAX, "x").is_err());
    }
}
