//! Buffers handed to C, and [`tutti_free_c`], which releases them.
//!
//! Every buffer starts with a 16-byte header recording its length and a marker, so that
//! [`tutti_free_c`] can rebuild the allocation's layout from the pointer alone and can
//! reject most pointers tutti did not hand out (or already freed) instead of corrupting the
//! heap. The payload after the header is aligned to 16 bytes, enough for any C scalar.

use std::alloc::{self, Layout};
use std::ffi::{c_char, c_int, c_void};
use std::mem::{align_of, size_of};
use std::ptr::NonNull;

use crate::boundary::ffi_call;
use crate::status::{Error, TuttiStatus};

/// Alignment of every payload, as C's `max_align_t` on common 64-bit targets.
const PAYLOAD_ALIGN: usize = 16;
/// Marks a live buffer: "tuttibuf".
const LIVE: u64 = u64::from_be_bytes(*b"tuttibuf");
/// Marks a buffer already released: "freedbuf".
const FREED: u64 = u64::from_be_bytes(*b"freedbuf");

#[repr(C, align(16))]
struct Header {
    marker: u64,
    payload_bytes: usize,
}

const HEADER_BYTES: usize = size_of::<Header>();
const _: () = assert!(HEADER_BYTES == PAYLOAD_ALIGN && align_of::<Header>() == PAYLOAD_ALIGN);

fn layout_for(payload_bytes: usize) -> Option<Layout> {
    let total = HEADER_BYTES.checked_add(payload_bytes)?;
    Layout::from_size_align(total, PAYLOAD_ALIGN).ok()
}

/// Allocates an uninitialised buffer of `payload_bytes` bytes for C, released with
/// [`tutti_free_c`]. The pointer is aligned to 16 bytes (and never NULL, even for 0 bytes).
///
/// Errors: `TUTTI_ERROR_OUT_OF_MEMORY` when the host cannot provide it.
pub fn alloc_c(payload_bytes: usize) -> Result<NonNull<u8>, Error> {
    let out_of_memory = || {
        Error::new(
            TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY,
            format!(
                "cannot allocate {} of host memory for a result",
                tutti_backend::format_bytes(payload_bytes as u64)
            ),
        )
    };
    let layout = layout_for(payload_bytes).ok_or_else(out_of_memory)?;
    // SAFETY: the layout has a non-zero size (it includes the header).
    let base = unsafe { alloc::alloc(layout) };
    let base = NonNull::new(base).ok_or_else(out_of_memory)?;
    // SAFETY: base is valid for writes of the layout's size, aligned to 16 >= align of
    // Header, and the header fits (the layout includes it).
    unsafe {
        base.cast::<Header>().write(Header {
            marker: LIVE,
            payload_bytes,
        });
    }
    // SAFETY: HEADER_BYTES is within the allocation (its size is HEADER_BYTES + payload).
    Ok(unsafe { base.add(HEADER_BYTES) })
}

/// Copies `values` into a new C buffer, released with [`tutti_free_c`].
///
/// `T` must be a plain C type (no destructor runs when C frees it) aligned to at most 16.
pub fn array_to_c<T: Copy>(values: &[T]) -> Result<NonNull<T>, Error> {
    const { assert!(align_of::<T>() <= PAYLOAD_ALIGN) };
    let bytes = size_of_val(values);
    let ptr = alloc_c(bytes)?.cast::<T>();
    // SAFETY: ptr is valid for writes of `bytes` bytes and aligned for T (checked at
    // compile time); it does not overlap `values`, which the caller still borrows.
    unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), ptr.as_ptr(), values.len()) };
    Ok(ptr)
}

/// Copies `text` into a new NUL-terminated C string, released with [`tutti_free_c`].
///
/// A NUL byte inside `text` is written as `\0`, so the C string holds the whole text.
pub fn string_to_c(text: &str) -> Result<NonNull<c_char>, Error> {
    let escaped;
    let text = if text.contains('\0') {
        escaped = text.replace('\0', "\\0");
        escaped.as_str()
    } else {
        text
    };
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.extend_from_slice(text.as_bytes());
    bytes.push(0);
    Ok(array_to_c(&bytes)?.cast())
}

/// Releases a buffer from [`alloc_c`], [`array_to_c`] or [`string_to_c`]. NULL is a no-op.
///
/// Errors: `TUTTI_ERROR_INVALID_ARGUMENT` for a pointer that is misaligned or lacks the
/// header of a live tutti buffer (freed twice, or allocated elsewhere).
///
/// # Safety
/// `ptr` is NULL or was returned by tutti and has not been released. A pointer from elsewhere
/// or a second release is undefined behaviour, which the header check detects in the common
/// cases but cannot rule out.
pub unsafe fn free_c(ptr: *mut c_void) -> Result<(), Error> {
    if ptr.is_null() {
        return Ok(());
    }
    let not_ours = |why: &str| {
        Error::invalid_argument(format!(
            "argument `ptr` ({ptr:p}) {why}: release only what tutti returned, exactly once"
        ))
    };
    if !is_payload_aligned(ptr) {
        return Err(not_ours("was not returned by tutti"));
    }
    // SAFETY: by the caller's promise ptr came from alloc_c, which placed a header
    // HEADER_BYTES before it in the same allocation.
    let header = unsafe { ptr.cast::<u8>().sub(HEADER_BYTES).cast::<Header>() };
    // SAFETY: header is aligned and within the allocation (see above).
    let (marker, payload_bytes) = unsafe { ((*header).marker, (*header).payload_bytes) };
    match marker {
        LIVE => {}
        FREED => return Err(not_ours("was already released")),
        _ => return Err(not_ours("was not returned by tutti")),
    }
    let layout = layout_for(payload_bytes).ok_or_else(|| not_ours("has a corrupt header"))?;
    // SAFETY: the header is valid for writes; marking it makes an immediate second release
    // detectable in the common case.
    unsafe { (*header).marker = FREED };
    // SAFETY: header is the start of an allocation made by alloc_c with exactly this layout.
    unsafe { alloc::dealloc(header.cast::<u8>(), layout) };
    Ok(())
}

fn is_payload_aligned<T>(ptr: *const T) -> bool {
    ptr.addr().is_multiple_of(PAYLOAD_ALIGN)
}

/// Releases a buffer or string returned by tutti. Freeing NULL is a no-op returning
/// `TUTTI_OK`.
///
/// Every buffer tutti returns (strings such as `TuttiDeviceInfo.name`, arrays, serialized
/// results) must be released exactly once with this function, never with C's `free`.
///
/// Returns `TUTTI_ERROR_INVALID_ARGUMENT` when `ptr` is recognisably not a live tutti buffer
/// (misaligned, allocated elsewhere, or already released); the memory is then left alone.
///
/// # Safety
/// `ptr` is NULL or a pointer returned by tutti that has not been released yet. Anything else
/// is undefined behaviour; the check above catches common mistakes but not all.
#[no_mangle]
pub unsafe extern "C" fn tutti_free_c(ptr: *mut c_void) -> c_int {
    // SAFETY: the caller's promise is free_c's contract.
    ffi_call("tutti_free_c", || unsafe { free_c(ptr) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn freeing_null_is_a_no_op() {
        // SAFETY: NULL is always allowed.
        assert_eq!(unsafe { tutti_free_c(std::ptr::null_mut()) }, 0);
        assert_eq!(crate::boundary::last_error(), "");
    }

    #[test]
    fn strings_round_trip_and_are_released() {
        for text in [
            "",
            "host (simulated)",
            "NVIDIA H200 \u{2014} 141 GiB",
            "a\0b",
        ] {
            let ptr = string_to_c(text).expect("allocates");
            assert!(is_payload_aligned(ptr.as_ptr()));
            // SAFETY: string_to_c returns a NUL-terminated string.
            let copy = unsafe { CStr::from_ptr(ptr.as_ptr()) }
                .to_str()
                .map(str::to_owned);
            assert_eq!(copy.as_deref(), Ok(text.replace('\0', "\\0").as_str()));
            // SAFETY: ptr came from string_to_c and is released once.
            assert_eq!(unsafe { tutti_free_c(ptr.as_ptr().cast()) }, 0);
        }
    }

    #[test]
    fn arrays_round_trip() {
        let values = [1.5_f64, -2.0, 3.25];
        let ptr = array_to_c(&values).expect("allocates");
        // SAFETY: array_to_c returned three initialised f64s.
        let copy = unsafe { std::slice::from_raw_parts(ptr.as_ptr(), 3) }.to_vec();
        assert_eq!(copy, values);
        // SAFETY: ptr came from array_to_c and is released once.
        assert_eq!(unsafe { tutti_free_c(ptr.as_ptr().cast()) }, 0);

        let empty = array_to_c::<u32>(&[]).expect("allocates");
        // SAFETY: empty came from array_to_c and is released once.
        assert_eq!(unsafe { free_c(empty.as_ptr().cast()) }, Ok(()));
    }

    #[test]
    fn foreign_and_misaligned_pointers_are_refused() {
        // A buffer laid out like a tutti allocation, but without the marker.
        #[repr(C, align(16))]
        struct Fake([u64; 4]);
        let mut fake = Fake([0; 4]);
        let payload = fake.0.as_mut_ptr().wrapping_add(2).cast::<c_void>();
        // SAFETY: the 16 bytes before payload are inside `fake`, readable and aligned.
        let status = unsafe { tutti_free_c(payload) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        let message = crate::boundary::last_error();
        assert!(message.contains("not returned by tutti"), "{message}");
        assert_eq!(fake.0, [0; 4], "a refused pointer is left alone");
        let ptr = alloc_c(8).expect("allocates");
        let misaligned = ptr.as_ptr().wrapping_add(1).cast::<c_void>();
        // SAFETY: misaligned pointers are refused before any access.
        let status = unsafe { tutti_free_c(misaligned) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(crate::boundary::last_error().contains("tutti_free_c: argument `ptr`"));
        // SAFETY: ptr came from alloc_c and is released once.
        assert_eq!(unsafe { free_c(ptr.as_ptr().cast()) }, Ok(()));
    }
}
