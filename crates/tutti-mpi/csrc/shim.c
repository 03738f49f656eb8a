/*
 * The few MPI calls tutti-mpi makes, compiled with the MPI compiler wrapper against the
 * system's own mpi.h. Handles cross to Rust as Fortran integers (MPI_Fint), which are plain
 * integers in every MPI implementation, so the Rust side needs no binding of mpi.h and no
 * libclang. Every function returns the MPI error code (MPI_SUCCESS = 0) and writes its
 * results through pointers. Nothing here allocates or keeps state.
 */
#include <mpi.h>
#include <string.h>

int tutti_mpi_success(void) { return MPI_SUCCESS; }

int tutti_mpi_initialized(int *flag) { return MPI_Initialized(flag); }

int tutti_mpi_finalized(int *flag) { return MPI_Finalized(flag); }

/* level: 0 single, 1 funneled, 2 serialized, 3 multiple; *provided in the same scale. */
static int level_of(int mpi_level) {
    if (mpi_level == MPI_THREAD_SINGLE) return 0;
    if (mpi_level == MPI_THREAD_FUNNELED) return 1;
    if (mpi_level == MPI_THREAD_SERIALIZED) return 2;
    return 3;
}

static int mpi_level(int level) {
    switch (level) {
    case 0: return MPI_THREAD_SINGLE;
    case 1: return MPI_THREAD_FUNNELED;
    case 2: return MPI_THREAD_SERIALIZED;
    default: return MPI_THREAD_MULTIPLE;
    }
}

int tutti_mpi_init_thread(int level, int *provided) {
    int got = MPI_THREAD_SINGLE;
    int code = MPI_Init_thread(NULL, NULL, mpi_level(level), &got);
    *provided = level_of(got);
    return code;
}

int tutti_mpi_query_thread(int *provided) {
    int got = MPI_THREAD_SINGLE;
    int code = MPI_Query_thread(&got);
    *provided = level_of(got);
    return code;
}

int tutti_mpi_is_thread_main(int *flag) { return MPI_Is_thread_main(flag); }

int tutti_mpi_finalize(void) { return MPI_Finalize(); }

MPI_Fint tutti_mpi_comm_world(void) { return MPI_Comm_c2f(MPI_COMM_WORLD); }

/* A private duplicate with errors returned, not fatal: tutti's traffic never matches the
 * host program's, and an MPI error becomes a tutti error. */
int tutti_mpi_comm_dup(MPI_Fint comm, MPI_Fint *out) {
    MPI_Comm dup = MPI_COMM_NULL;
    int code = MPI_Comm_dup(MPI_Comm_f2c(comm), &dup);
    if (code != MPI_SUCCESS) return code;
    code = MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    *out = MPI_Comm_c2f(dup);
    return code;
}

int tutti_mpi_comm_split_shared(MPI_Fint comm, int key, MPI_Fint *out) {
    MPI_Comm node = MPI_COMM_NULL;
    int code = MPI_Comm_split_type(MPI_Comm_f2c(comm), MPI_COMM_TYPE_SHARED, key,
                                   MPI_INFO_NULL, &node);
    *out = MPI_Comm_c2f(node);
    return code;
}

int tutti_mpi_comm_free(MPI_Fint comm) {
    MPI_Comm c = MPI_Comm_f2c(comm);
    return MPI_Comm_free(&c);
}

int tutti_mpi_comm_rank(MPI_Fint comm, int *rank) { return MPI_Comm_rank(MPI_Comm_f2c(comm), rank); }

int tutti_mpi_comm_size(MPI_Fint comm, int *size) { return MPI_Comm_size(MPI_Comm_f2c(comm), size); }

int tutti_mpi_ialltoall_bytes(const void *send, void *receive, int piece, MPI_Fint comm,
                              MPI_Fint *request) {
    MPI_Request r = MPI_REQUEST_NULL;
    int code = MPI_Ialltoall(send, piece, MPI_BYTE, receive, piece, MPI_BYTE,
                             MPI_Comm_f2c(comm), &r);
    *request = MPI_Request_c2f(r);
    return code;
}

int tutti_mpi_isend_bytes(const void *data, int count, int dest, int tag, MPI_Fint comm,
                          MPI_Fint *request) {
    MPI_Request r = MPI_REQUEST_NULL;
    int code = MPI_Isend(data, count, MPI_BYTE, dest, tag, MPI_Comm_f2c(comm), &r);
    *request = MPI_Request_c2f(r);
    return code;
}

int tutti_mpi_irecv_bytes(void *data, int count, int source, int tag, MPI_Fint comm,
                          MPI_Fint *request) {
    MPI_Request r = MPI_REQUEST_NULL;
    int code = MPI_Irecv(data, count, MPI_BYTE, source, tag, MPI_Comm_f2c(comm), &r);
    *request = MPI_Request_c2f(r);
    return code;
}

/* Tests one request; a completed one is freed by MPI and written back as MPI_REQUEST_NULL. */
int tutti_mpi_test(MPI_Fint *request, int *done) {
    MPI_Request r = MPI_Request_f2c(*request);
    int code = MPI_Test(&r, done, MPI_STATUS_IGNORE);
    *request = MPI_Request_c2f(r);
    return code;
}

MPI_Fint tutti_mpi_request_null(void) { return MPI_Request_c2f(MPI_REQUEST_NULL); }

int tutti_mpi_abort(MPI_Fint comm, int code) { return MPI_Abort(MPI_Comm_f2c(comm), code); }

/* Copies the `got` bytes MPI wrote to `buffer` into `text` (at most capacity - 1 of them,
 * NUL-terminated) and their count into *len; none when the MPI call failed. */
static int copy_text(int status, const char *buffer, int got, char *text, int capacity,
                     int *len) {
    if (status != MPI_SUCCESS) got = 0;
    if (got > capacity - 1) got = capacity - 1;
    if (got < 0) got = 0;
    memcpy(text, buffer, (size_t)got);
    text[got] = '\0';
    *len = got;
    return status;
}

int tutti_mpi_error_string(int code, char *text, int capacity, int *len) {
    char buffer[MPI_MAX_ERROR_STRING];
    int got = 0;
    int status = MPI_Error_string(code, buffer, &got);
    return copy_text(status, buffer, got, text, capacity, len);
}

int tutti_mpi_library_version(char *text, int capacity, int *len) {
    char buffer[MPI_MAX_LIBRARY_VERSION_STRING];
    int got = 0;
    int status = MPI_Get_library_version(buffer, &got);
    return copy_text(status, buffer, got, text, capacity, len);
}

int tutti_mpi_fint_bytes(void) { return (int)sizeof(MPI_Fint); }

/* A blocking MPI_Alltoall of `piece` bytes per pair: the raw baseline of the benchmarks. */
int tutti_mpi_alltoall_bytes(const void *send, void *receive, int piece, MPI_Fint comm) {
    return MPI_Alltoall(send, piece, MPI_BYTE, receive, piece, MPI_BYTE, MPI_Comm_f2c(comm));
}

/* Tests one receive; when it completes, *received is the byte count that arrived. */
int tutti_mpi_test_received(MPI_Fint *request, int *done, int *received) {
    MPI_Request r = MPI_Request_f2c(*request);
    MPI_Status status;
    int code = MPI_Test(&r, done, &status);
    *request = MPI_Request_c2f(r);
    if (code == MPI_SUCCESS && *done) {
        code = MPI_Get_count(&status, MPI_BYTE, received);
    }
    return code;
}
