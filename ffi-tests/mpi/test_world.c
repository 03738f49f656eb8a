/*
 * The C ABI over MPI processes (run under `mpirun -n N` by `cargo xtask mpi-test`): a host
 * program that initialises MPI itself passes its communicator to tutti, gets FMM results
 * bitwise equal to the same call on N simulated devices in one process (and with two devices
 * per process, to 2N devices), survives a tutti error on one process (the others get
 * TUTTI_ERROR_REMOTE with its message) and a failure of its own told through
 * tutti_world_fail, keeps using its own communicator, does it again on each half of a split
 * communicator, and finalises. A sparse LU handle made over the world solves to the bits of
 * the same number of devices in one process on every process, outlives its world, and a NaN
 * value in one process's factorization fails that process alone (the others:
 * TUTTI_ERROR_REMOTE).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "check.h"
#include "tutti.h"
#include "tutti_mpi.h"

enum { N = 1500 };

/* The sparse matrix: an unsymmetric 5-point stencil on a GRID x GRID grid. */
enum { GRID = 24, SPARSE_N = GRID * GRID, SPARSE_RHS = 2 };

/* Deterministic bodies in [-1, 1)^3 and masses in [0.5, 1.5), the same on every process. */
static void bodies(double *positions, double *masses) {
    unsigned long long state = 12345;
    for (int i = 0; i < 4 * N; i++) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(state >> 11) / 9007199254740992.0;
        if (i < 3 * N) {
            positions[i] = 2.0 * u - 1.0;
        } else {
            masses[i - 3 * N] = 0.5 + u;
        }
    }
}

/* The FMM over `world`, `per_process` devices in each process, against the same call on
 * `devices` devices in this process. */
static void fmm_over_k(TuttiWorld *world, int per_process, int devices, const char *what) {
    static double positions[3 * N], masses[N];
    static double potential[N], accel[3 * N], local_potential[N], local_accel[3 * N];
    bodies(positions, masses);
    TuttiFmmOptions options;
    CHECK(tutti_fmm_options_default(&options) == TUTTI_OK, "%s: default options", what);
    options.resources.kind = TUTTI_KIND_CPU;
    options.resources.devices = per_process;
    options.resources.world = world;
    int status = tutti_fmm(N, positions, masses, &options, potential, accel);
    CHECK(status == TUTTI_OK, "%s: tutti_fmm over the world (%s)", what, tutti_last_error());

    TuttiFmmOptions local;
    tutti_fmm_options_default(&local);
    local.resources.kind = TUTTI_KIND_CPU;
    local.resources.devices = devices;
    status = tutti_fmm(N, positions, masses, &local, local_potential, local_accel);
    CHECK(status == TUTTI_OK, "%s: tutti_fmm on %d devices", what, devices);
    CHECK(memcmp(potential, local_potential, sizeof potential) == 0 &&
              memcmp(accel, local_accel, sizeof accel) == 0,
          "%s: bitwise equal to %d devices in one process", what, devices);
}

/* The FMM over `world`, one device per process. */
static void fmm_over(TuttiWorld *world, int devices, const char *what) {
    fmm_over_k(world, 1, devices, what);
}

/* The stencil's CSR arrays (the same on every process); returns the entry count. */
static int64_t stencil(int64_t *pointers, int64_t *indices, double *values) {
    int64_t nnz = 0;
    pointers[0] = 0;
    for (int y = 0; y < GRID; y++) {
        for (int x = 0; x < GRID; x++) {
            int row = x + GRID * y;
            const int neighbour[5] = {row - GRID, row - 1, row, row + 1, row + GRID};
            const int inside[5] = {y > 0, x > 0, 1, x < GRID - 1, y < GRID - 1};
            const double weight[5] = {-1.2, -1.3, 4.5, -0.7, -0.8};
            for (int k = 0; k < 5; k++) {
                if (inside[k]) {
                    indices[nnz] = neighbour[k];
                    values[nnz++] = weight[k];
                }
            }
            pointers[row + 1] = nnz;
        }
    }
    return nnz;
}

/* Two deterministic right-hand sides, column-major. */
static void right_hand_sides(double *b) {
    for (int i = 0; i < SPARSE_N * SPARSE_RHS; i++) {
        b[i] = (double)(i % 7) - 3.0 + 0.125 * (double)(i % 3);
    }
}

/* Analyses the stencil on `per_process` devices in each process of `world` (NULL: this
 * process alone). */
static TuttiSparse *sparse_analyse(TuttiWorld *world, int per_process, const char *what) {
    static int64_t pointers[SPARSE_N + 1], indices[5 * SPARSE_N];
    static double values[5 * SPARSE_N];
    stencil(pointers, indices, values);
    TuttiSparseOptions options;
    CHECK(tutti_sparse_options_default(&options) == TUTTI_OK, "%s: default options", what);
    options.resources.kind = TUTTI_KIND_CPU;
    options.resources.devices = per_process;
    options.resources.world = world;
    TuttiSparse *lu = NULL;
    int status = tutti_sparse_analyse(SPARSE_N, pointers, indices, &options, &lu);
    CHECK(status == TUTTI_OK && lu != NULL, "%s: tutti_sparse_analyse (%s)", what,
          tutti_last_error());
    return lu;
}

/* Factors `lu` with the stencil's values and solves into `x`; 1 when both succeed. */
static int sparse_solve(TuttiSparse *lu, double *x, const char *what) {
    static int64_t pointers[SPARSE_N + 1], indices[5 * SPARSE_N];
    static double values[5 * SPARSE_N];
    int64_t nnz = stencil(pointers, indices, values);
    int status = tutti_sparse_factor(lu, values, nnz);
    CHECK(status == TUTTI_OK, "%s: tutti_sparse_factor (%s)", what, tutti_last_error());
    right_hand_sides(x);
    TuttiSparseSolveInfo info;
    int solved = tutti_sparse_solve(lu, x, SPARSE_RHS, &info);
    CHECK(solved == TUTTI_OK && info.backward_error < 1e-14,
          "%s: tutti_sparse_solve (%s), backward error %.1e", what, tutti_last_error(),
          info.backward_error);
    return status == TUTTI_OK && solved == TUTTI_OK;
}

/* The solution on `devices` devices in this process. */
static void sparse_in_one_process(int devices, double *x) {
    TuttiSparse *lu = sparse_analyse(NULL, devices, "sparse in one process");
    sparse_solve(lu, x, "sparse in one process");
    CHECK(tutti_sparse_free(lu) == TUTTI_OK, "tutti_sparse_free");
}

/* A sparse LU over `world`, `per_process` devices in each process, against the same on
 * `devices` devices in this process: every process gets the whole solution, bitwise. */
static void sparse_over_k(TuttiWorld *world, int per_process, int devices, const char *what) {
    static double x[SPARSE_N * SPARSE_RHS], local_x[SPARSE_N * SPARSE_RHS];
    TuttiSparse *lu = sparse_analyse(world, per_process, what);
    TuttiSparseInfo info;
    CHECK(tutti_sparse_info(lu, &info) == TUTTI_OK && info.devices == devices,
          "%s: tutti_sparse_info counts the %d ranks of every process (%d)", what, devices,
          info.devices);
    sparse_solve(lu, x, what);
    CHECK(tutti_sparse_free(lu) == TUTTI_OK, "%s: tutti_sparse_free", what);
    sparse_in_one_process(devices, local_x);
    CHECK(memcmp(x, local_x, sizeof x) == 0, "%s: bitwise equal to %d devices in one process",
          what, devices);
}

/* A handle outlives the world it was made with, and a NaN value in the last process's
 * factorization fails that process with its own status and the others with
 * TUTTI_ERROR_REMOTE; the handle then factors and solves as before. */
static void sparse_failure_and_lifetime(int rank, int size) {
    static int64_t pointers[SPARSE_N + 1], indices[5 * SPARSE_N];
    static double values[5 * SPARSE_N];
    static double x[SPARSE_N * SPARSE_RHS], local_x[SPARSE_N * SPARSE_RHS];
    TuttiWorld *world = NULL;
    CHECK(tutti_world_from_comm(MPI_COMM_WORLD, &world) == TUTTI_OK, "a world for the LU");
    TuttiSparse *lu = sparse_analyse(world, 1, "sparse, world released after analysis");
    CHECK(tutti_world_free(world) == TUTTI_OK, "the world released before its handle");

    int64_t nnz = stencil(pointers, indices, values);
    if (rank == size - 1) {
        values[11] = NAN;
    }
    int status = tutti_sparse_factor(lu, values, nnz);
    char expected[64];
    snprintf(expected, sizeof expected, "rank %d failed", size - 1);
    if (rank == size - 1) {
        CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "NaN"),
              "sparse: the process with a NaN value gets its own error (%s)",
              tutti_last_error());
    } else {
        CHECK(status == TUTTI_ERROR_REMOTE && strstr(tutti_last_error(), expected) != NULL &&
                  strstr(tutti_last_error(), "NaN") != NULL,
              "sparse: rank %d gets TUTTI_ERROR_REMOTE naming rank %d (%s)", rank, size - 1,
              tutti_last_error());
    }
    sparse_solve(lu, x, "sparse after the failure, without its world");
    /* Frees tutti's duplicate communicator: on every process, before MPI_Finalize. */
    CHECK(tutti_sparse_free(lu) == TUTTI_OK, "tutti_sparse_free of the last holder");
    sparse_in_one_process(size, local_x);
    CHECK(memcmp(x, local_x, sizeof x) == 0, "sparse: bitwise equal to %d devices", size);
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    TuttiWorld *world = NULL;
    CHECK(tutti_world_from_comm(MPI_COMM_WORLD, &world) == TUTTI_OK && world != NULL,
          "rank %d: tutti_world_from_comm (%s)", rank, tutti_last_error());
    int r = -1, s = -1, local_rank = -1, local_size = -1;
    CHECK(tutti_world_info(world, &r, &s, &local_rank, &local_size) == TUTTI_OK,
          "tutti_world_info");
    CHECK(r == rank && s == size, "rank %d of %d, as MPI says", r, s);
    CHECK(local_size == size && local_rank == rank, "one node: local rank %d of %d",
          local_rank, local_size);

    fmm_over(world, size, "MPI_COMM_WORLD");
    /* Processes x local devices: two ranks in each process (MPI_THREAD_SERIALIZED). */
    fmm_over_k(world, 2, 2 * size, "two devices per process");
    sparse_over_k(world, 1, size, "sparse LU over MPI_COMM_WORLD");
    sparse_over_k(world, 2, 2 * size, "sparse LU, two devices per process");
    sparse_failure_and_lifetime(rank, size);

    /* A NaN mass on the last process only: it fails its own check, the others learn why. */
    static double positions[3 * N], masses[N], potential[N], accel[3 * N];
    bodies(positions, masses);
    if (rank == size - 1) {
        masses[7] = NAN;
    }
    TuttiFmmOptions options;
    tutti_fmm_options_default(&options);
    options.resources.kind = TUTTI_KIND_CPU;
    options.resources.devices = 1;
    options.resources.world = world;
    int status = tutti_fmm(N, positions, masses, &options, potential, accel);
    char expected[64];
    snprintf(expected, sizeof expected, "rank %d failed", size - 1);
    if (rank == size - 1) {
        CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "the bad process: its own error (%s)",
              tutti_last_error());
    } else {
        CHECK(status == TUTTI_ERROR_REMOTE && strstr(tutti_last_error(), expected) != NULL &&
                  strstr(tutti_last_error(), "of body 7 is NaN") != NULL,
              "rank %d: TUTTI_ERROR_REMOTE naming rank %d and its message (%s)", rank, size - 1,
              tutti_last_error());
    }

    /* The host's own check fails on the last process: it tells the others instead of
     * calling, and they return TUTTI_ERROR_REMOTE with its message. */
    bodies(positions, masses);
    if (rank == size - 1) {
        CHECK(tutti_world_fail(world, "the input file of this process is bad") == TUTTI_OK,
              "tutti_world_fail (%s)", tutti_last_error());
    } else {
        status = tutti_fmm(N, positions, masses, &options, potential, accel);
        CHECK(status == TUTTI_ERROR_REMOTE && strstr(tutti_last_error(), expected) != NULL &&
                  strstr(tutti_last_error(), "the input file of this process is bad") != NULL,
              "rank %d: the host's own failure arrives as TUTTI_ERROR_REMOTE (%s)", rank,
              tutti_last_error());
    }
    CHECK(tutti_world_fail(NULL, "x") == TUTTI_ERROR_NULL_POINTER, "a NULL world is refused");

    /* The host's communicator is untouched: a collective of its own still works. */
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == size * (size - 1) / 2, "MPI_Allreduce on the host communicator after it");

    /* The world serves the next call after a failure. */
    fmm_over(world, size, "after the failure");
    CHECK(tutti_world_free(world) == TUTTI_OK, "tutti_world_free");

    /* Each half of a split communicator is a world of its own. */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int half_size = 0;
    MPI_Comm_size(half, &half_size);
    TuttiWorld *half_world = NULL;
    CHECK(tutti_world_from_comm(half, &half_world) == TUTTI_OK, "a world over half");
    tutti_world_info(half_world, &r, &s, NULL, NULL);
    CHECK(s == half_size, "the half has %d processes", s);
    fmm_over(half_world, half_size, "half of MPI_COMM_WORLD");
    CHECK(tutti_world_free(half_world) == TUTTI_OK, "tutti_world_free of the half");
    MPI_Comm_free(&half);

    CHECK(tutti_world_from_comm(MPI_COMM_WORLD, NULL) == TUTTI_ERROR_NULL_POINTER,
          "a NULL world_out is refused");
    int failed = CHECK_SUMMARY();
    MPI_Finalize();
    if (failed == 0) {
        printf("rank %d: ok\n", rank);
    }
    return failed;
}
