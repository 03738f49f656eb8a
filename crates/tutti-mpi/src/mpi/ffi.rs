//! The C shim's functions (`csrc/shim.c`): MPI calls with Fortran-integer handles.

use std::ffi::{c_char, c_int, c_void};

/// An MPI handle as a Fortran integer (`MPI_Fint`, a C `int` in Open MPI and MPICH; checked
/// at start-up against the shim's `sizeof(MPI_Fint)`).
pub(crate) type Fint = c_int;

extern "C" {
    pub(crate) fn tutti_mpi_success() -> c_int;
    pub(crate) fn tutti_mpi_fint_bytes() -> c_int;
    pub(crate) fn tutti_mpi_initialized(flag: *mut c_int) -> c_int;
    pub(crate) fn tutti_mpi_finalized(flag: *mut c_int) -> c_int;
    pub(crate) fn tutti_mpi_init_thread(level: c_int, provided: *mut c_int) -> c_int;
    pub(crate) fn tutti_mpi_query_thread(provided: *mut c_int) -> c_int;
    pub(crate) fn tutti_mpi_is_thread_main(flag: *mut c_int) -> c_int;
    pub(crate) fn tutti_mpi_finalize() -> c_int;
    pub(crate) fn tutti_mpi_comm_world() -> Fint;
    pub(crate) fn tutti_mpi_comm_dup(comm: Fint, out: *mut Fint) -> c_int;
    pub(crate) fn tutti_mpi_comm_split_shared(comm: Fint, key: c_int, out: *mut Fint) -> c_int;
    pub(crate) fn tutti_mpi_comm_free(comm: Fint) -> c_int;
    pub(crate) fn tutti_mpi_comm_rank(comm: Fint, rank: *mut c_int) -> c_int;
    pub(crate) fn tutti_mpi_comm_size(comm: Fint, size: *mut c_int) -> c_int;
    pub(crate) fn tutti_mpi_ialltoall_bytes(
        send: *const c_void,
        receive: *mut c_void,
        piece: c_int,
        comm: Fint,
        request: *mut Fint,
    ) -> c_int;
    pub(crate) fn tutti_mpi_isend_bytes(
        data: *const c_void,
        count: c_int,
        dest: c_int,
        tag: c_int,
        comm: Fint,
        request: *mut Fint,
    ) -> c_int;
    pub(crate) fn tutti_mpi_irecv_bytes(
        data: *mut c_void,
        count: c_int,
        source: c_int,
        tag: c_int,
        comm: Fint,
        request: *mut Fint,
    ) -> c_int;
    pub(crate) fn tutti_mpi_test(request: *mut Fint, done: *mut c_int) -> c_int;
    pub(crate) fn tutti_mpi_test_received(
        request: *mut Fint,
        done: *mut c_int,
        received: *mut c_int,
    ) -> c_int;
    pub(crate) fn tutti_mpi_alltoall_bytes(
        send: *const c_void,
        receive: *mut c_void,
        piece: c_int,
        comm: Fint,
    ) -> c_int;
    pub(crate) fn tutti_mpi_request_null() -> Fint;
    pub(crate) fn tutti_mpi_abort(comm: Fint, code: c_int) -> c_int;
    pub(crate) fn tutti_mpi_error_string(
        code: c_int,
        text: *mut c_char,
        capacity: c_int,
        len: *mut c_int,
    ) -> c_int;
    pub(crate) fn tutti_mpi_library_version(
        text: *mut c_char,
        capacity: c_int,
        len: *mut c_int,
    ) -> c_int;
}

/// The text of an MPI error code.
pub(crate) fn error_text(code: c_int) -> String {
    let mut text = vec![0u8; 1024];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds `capacity` bytes, the shim writes at most capacity - 1 of
    // them plus a NUL and the length through `len`, a valid pointer to a local.
    unsafe {
        tutti_mpi_error_string(code, text.as_mut_ptr().cast(), 1024, &mut len);
    }
    text.truncate(usize::try_from(len).unwrap_or(0));
    let text = String::from_utf8_lossy(&text).into_owned();
    if text.is_empty() {
        format!("MPI error code {code}")
    } else {
        text
    }
}

/// `Ok` for `MPI_SUCCESS`, else the error's text after `what`.
pub(crate) fn check(code: c_int, what: &str) -> Result<(), String> {
    // SAFETY: a constant getter of the shim, no arguments.
    if code == unsafe { tutti_mpi_success() } {
        Ok(())
    } else {
        Err(format!("{what}: {}", error_text(code)))
    }
}
