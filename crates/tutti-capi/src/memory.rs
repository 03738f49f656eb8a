//! Buffers handed to C, and [`tutti_free_c`], which releases them.
//!
//! Every live buffer's address is in a registry ([`Registry`]): [`tutti_free_c`] looks a
//! pointer up there before touching any memory, so a pointer tutti did not hand out (from
//! `malloc`, the stack, the inside of a buffer, an unmapped page) or one already released is
//! refused without being read. Every buffer also starts with a 16-byte header recording its
//! length and a marker, from which the allocation's layout is rebuilt. The payload after the
//! header is aligned to 16 bytes, enough for any C scalar.
//!
//! One misuse stays undetectable: after a buffer A is released, the allocator may give the
//! same address to a new tutti buffer B; releasing A again then releases B (the "ABA" case).

use std::alloc::{self, Layout};
use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, c_void};
use std::mem::{align_of, size_of};
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::boundary::ffi_call;
use crate::status::{Error, TuttiStatus};

/// Alignment of every payload, as C's `max_align_t` on common 64-bit targets.
const PAYLOAD_ALIGN: usize = 16;
/// Marks a live buffer: "tuttibuf".
const LIVE: u64 = u64::from_be_bytes(*b"tuttibuf");
/// Marks a buffer already released: "freedbuf".
const FREED: u64 = u64::from_be_bytes(*b"freedbuf");

/// The addresses of the live objects of one kind that tutti handed to C (buffers, train
/// handles): inserted when an object is made, removed when it is released. Lookups never
/// dereference the address, so any pointer value can be asked about safely.
#[derive(Debug)]
pub struct Registry {
    live: Mutex<BTreeSet<usize>>,
}

impl Registry {
    /// An empty registry.
    pub const fn new() -> Self {
        Self {
            live: Mutex::new(BTreeSet::new()),
        }
    }

    fn live(&self) -> MutexGuard<'_, BTreeSet<usize>> {
        // The set is consistent after any panic (each operation is one insert or remove).
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `address` as live.
    pub fn insert(&self, address: usize) {
        self.live().insert(address);
    }

    /// Whether `address` is live.
    pub fn contains(&self, address: usize) -> bool {
        self.live().contains(&address)
    }

    /// Forgets `address`; whether it was live. Of two threads releasing the same address at
    /// once, exactly one sees `true`.
    pub fn remove(&self, address: usize) -> bool {
        self.live().remove(&address)
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

/// The payload addresses of every live buffer from [`alloc_c`].
static LIVE_BUFFERS: Registry = Registry::new();

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
    let payload = unsafe { base.add(HEADER_BYTES) };
    LIVE_BUFFERS.insert(payload.as_ptr().addr());
    Ok(payload)
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
/// The pointer is looked up in the registry of live buffers before any memory is read, so a
/// foreign, interior or already released pointer is refused untouched.
///
/// Errors: `TUTTI_ERROR_INVALID_ARGUMENT` for a pointer that is not a live tutti buffer
/// (released already, or allocated elsewhere), or whose header was overwritten.
///
/// # Safety
/// `ptr` is NULL or any pointer value: only a live buffer's header is ever read. A buffer
/// released twice whose address a newer tutti buffer now has releases the newer one (see the
/// module documentation).
pub unsafe fn free_c(ptr: *mut c_void) -> Result<(), Error> {
    if ptr.is_null() {
        return Ok(());
    }
    let not_ours = |why: &str| {
        Error::invalid_argument(format!(
            "argument `ptr` ({ptr:p}) {why}: release only what tutti returned, exactly once"
        ))
    };
    // Removing it first also makes two racing releases of one buffer release it once.
    if !LIVE_BUFFERS.remove(ptr.addr()) {
        return Err(not_ours(
            "is not a live tutti buffer (released already, or not returned by tutti)",
        ));
    }
    // SAFETY: a live payload from alloc_c (the registry says so), which placed a header
    // HEADER_BYTES before it in the same allocation, aligned to 16.
    let header = unsafe { ptr.cast::<u8>().sub(HEADER_BYTES).cast::<Header>() };
    // SAFETY: header is aligned and within the allocation (see above).
    let (marker, payload_bytes) = unsafe { ((*header).marker, (*header).payload_bytes) };
    let layout = match (marker, layout_for(payload_bytes)) {
        (LIVE, Some(layout)) => layout,
        // The caller wrote before the start of its buffer: leak it rather than hand the
        // allocator a wrong layout.
        _ => {
            return Err(not_ours(
                "has a corrupt header (memory before it was overwritten)",
            ))
        }
    };
    // SAFETY: the header is valid for writes; the marker helps a debugger spot a stale
    // pointer.
    unsafe { (*header).marker = FREED };
    // SAFETY: header is the start of an allocation made by alloc_c with exactly this layout,
    // released once (it was live and is no longer registered).
    unsafe { alloc::dealloc(header.cast::<u8>(), layout) };
    Ok(())
}

/// Releases a buffer or string returned by tutti. Freeing NULL is a no-op returning
/// `TUTTI_OK`.
///
/// Every buffer tutti returns (strings such as `TuttiDeviceInfo.name`, arrays, serialized
/// results) must be released exactly once with this function, never with C's `free`.
///
/// Returns `TUTTI_ERROR_INVALID_ARGUMENT` when `ptr` is not a live tutti buffer (allocated
/// elsewhere, on the stack, pointing inside a buffer, or already released): tutti keeps a
/// registry of the buffers it handed out and looks `ptr` up there before reading any memory,
/// so such a pointer is left alone, never read.
///
/// One mistake cannot be detected: after a buffer A is released, a later tutti call may get
/// the same address for a new buffer B; releasing A a second time then releases B (and B's
/// owner later gets `TUTTI_ERROR_INVALID_ARGUMENT`). Set a pointer to NULL after releasing
/// it.
///
/// # Safety
/// `ptr` is NULL or a pointer returned by tutti that has not been released yet; the checks
/// above make the other cases errors, except the one just described.
#[no_mangle]
pub unsafe extern "C" fn tutti_free_c(ptr: *mut c_void) -> c_int {
    // SAFETY: the caller's promise is free_c's contract.
    ffi_call("tutti_free_c", || unsafe { free_c(ptr) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn is_payload_aligned<T>(ptr: *const T) -> bool {
        ptr.addr().is_multiple_of(PAYLOAD_ALIGN)
    }

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
