/*
 * Sparse direct solves from C: a factorization handle analysed once, factored, refactored
 * and solved.
 *
 * The matrix is an unsymmetric 2-D convection-diffusion operator (5-point Laplacian plus an
 * upwind first difference along x) on a 20 x 15 grid, built here in C both as CSR (0-based)
 * and as CSC (1-based, as Fortran would give it). With x_i = 1 + i / n and b = A x the
 * solution must come back to 1e-12 on 1 and 3 simulated devices, from both layouts, with the
 * same bits; a refactorization with 2 A halves it exactly. Then the error paths: a singular
 * matrix, a solve before any factorization, a wrong entry count, a released handle.
 *
 * complex128 (options.dtype = TUTTI_DTYPE_COMPLEX128, C99 double complex values passed as
 * their pairs of doubles): a 4 x 4 unsymmetric matrix of Gaussian integers and a solution x
 * of Gaussian integers, so b = A x is exact in floating point; the solve gives x back to
 * 1e-14 (A is diagonally dominant: cond(A) < 10, so the error is a few eps), the same bits
 * on 1 and 2 devices; the float64 functions on a complex handle, the complex ones on a real
 * handle and a NaN imaginary part are refused.
 *
 * Prints each check; exits non-zero when any fails.
 */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tutti.h"

enum { NX = 20, NY = 15, N = NX * NY };

/* A(i, j) for grid points i and j that are neighbours (or equal): diagonal 4 + c, -1 to each
 * neighbour, and -c more to the upwind (x - 1) neighbour. */
static double entry(int i, int j) {
    const double c = 0.75;
    if (i == j) return 4.0 + c;
    if (j == i - 1 && i % NX != 0) return -1.0 - c;
    return -1.0;
}

/* The neighbours of point i (itself included), in increasing order; returns how many. */
static int neighbours(int i, int out[5]) {
    int x = i % NX, y = i / NX, count = 0;
    if (y > 0) out[count++] = i - NX;
    if (x > 0) out[count++] = i - 1;
    out[count++] = i;
    if (x < NX - 1) out[count++] = i + 1;
    if (y < NY - 1) out[count++] = i + NX;
    return count;
}

/* Compressed arrays: by rows (A(i, j) over row i's neighbours j) or by columns (A(i, j)
 * over column j's neighbours i), indices shifted by base. Returns the entry count. */
static int64_t compress(int by_columns, int64_t base, int64_t *pointers, int64_t *indices,
                        double *values) {
    int64_t k = 0;
    pointers[0] = base;
    for (int outer = 0; outer < N; outer++) {
        int list[5];
        int count = neighbours(outer, list);
        for (int t = 0; t < count; t++) {
            indices[k] = list[t] + base;
            values[k] = by_columns ? entry(list[t], outer) : entry(outer, list[t]);
            k++;
        }
        pointers[outer + 1] = k + base;
    }
    return k;
}

/* Analyses, factors and solves on `devices` devices; x gets the solution. */
/* The complex system, CSR: A = [[4+i, 1-i, 0, 0], [-1, 5, 2i, 0], [0, 1+2i, 6-i, -1],
 * [i, 0, -2, 3+3i]], row 3's entries given out of order. */
static const int64_t cz_pointers[5] = {0, 2, 5, 8, 11};
static const int64_t cz_indices[11] = {0, 1, 0, 1, 2, 1, 2, 3, 3, 0, 2};
static double complex cz_values(int k) {
    const double complex values[11] = {4 + I, 1 - I, -1, 5, 2 * I, 1 + 2 * I,
                                       6 - I, -1, 3 + 3 * I, I, -2};
    return values[k];
}

/* Analyses the complex system for complex128 on `devices` devices, factors it and solves
 * for the two right-hand sides of b (4 x 2, column-major) in place. */
static int solve_complex(int devices, double complex *b, TuttiSparseSolveInfo *info) {
    TuttiSparseOptions options;
    tutti_sparse_options_default(&options);
    options.resources.kind = TUTTI_KIND_CPU;
    options.resources.devices = devices;
    options.dtype = TUTTI_DTYPE_COMPLEX128;
    double complex values[11];
    for (int k = 0; k < 11; k++) values[k] = cz_values(k);
    TuttiSparse *lu = NULL;
    int status = tutti_sparse_analyse(4, cz_pointers, cz_indices, &options, &lu);
    if (status != TUTTI_OK) return status;
    status = tutti_sparse_factor_c128(lu, (const double *)values, 11);
    if (status == TUTTI_OK) status = tutti_sparse_solve_c128(lu, (double *)b, 2, info);
    tutti_sparse_free(lu);
    return status;
}

/* The complex128 checks. */
static void complex_checks(void) {
    const double complex exact[4] = {1 + I, 2, -I, 3 - 2 * I};
    double complex b[8] = {0}, first[8];
    for (int row = 0; row < 4; row++) {
        for (int64_t k = cz_pointers[row]; k < cz_pointers[row + 1]; k++) {
            b[row] += cz_values((int)k) * exact[cz_indices[k]];
        }
        b[4 + row] = 2 * b[row]; /* x = 2 exact */
    }
    const double complex b_in[8] = {b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]};
    for (int devices = 1; devices <= 2; devices++) {
        double complex x[8];
        memcpy(x, b_in, sizeof x);
        TuttiSparseSolveInfo info;
        int status = solve_complex(devices, x, &info);
        CHECK(status == TUTTI_OK, "complex128 on %d device(s): solved (%d: %s)", devices, status,
              tutti_last_error());
        double error = 0.0;
        for (int i = 0; i < 8; i++) {
            error = fmax(error, cabs(x[i] - (i < 4 ? 1.0 : 2.0) * exact[i % 4]));
        }
        CHECK(error < 1e-14 && info.backward_error < 1e-15,
              "complex128: max |x - exact| = %.3e, backward error %.3e", error,
              info.backward_error);
        if (devices == 1) {
            memcpy(first, x, sizeof x);
        } else {
            CHECK(memcmp(first, x, sizeof x) == 0, "complex128: the same bits on 2 devices");
        }
    }

    /* The other dtype's functions are refused by name; the refused solve leaves b alone. */
    TuttiSparseOptions options;
    tutti_sparse_options_default(&options);
    options.dtype = TUTTI_DTYPE_COMPLEX128;
    TuttiSparse *complex_lu = NULL, *real_lu = NULL;
    CHECK(tutti_sparse_analyse(4, cz_pointers, cz_indices, &options, &complex_lu) == TUTTI_OK,
          "analyse for complex128");
    double parts[22], real_b[4] = {1, 2, 3, 4};
    for (int k = 0; k < 11; k++) {
        parts[2 * k] = creal(cz_values(k));
        parts[2 * k + 1] = cimag(cz_values(k));
    }
    CHECK(tutti_sparse_factor(complex_lu, parts, 11) == TUTTI_ERROR_INVALID_ARGUMENT &&
              strstr(tutti_last_error(), "call tutti_sparse_factor_c128") != NULL,
          "tutti_sparse_factor on a complex handle: %s", tutti_last_error());
    CHECK(tutti_sparse_factor_c128(complex_lu, parts, 11) == TUTTI_OK,
          "tutti_sparse_factor_c128 with (re, im) pairs");
    CHECK(tutti_sparse_solve(complex_lu, real_b, 1, NULL) == TUTTI_ERROR_INVALID_ARGUMENT &&
              real_b[0] == 1 && real_b[3] == 4,
          "tutti_sparse_solve on a complex handle, b untouched: %s", tutti_last_error());
    parts[7] = NAN; /* the imaginary part of A(1, 1) */
    CHECK(tutti_sparse_factor_c128(complex_lu, parts, 11) == TUTTI_ERROR_INVALID_ARGUMENT &&
              strstr(tutti_last_error(), "entry (1, 1) is NaN") != NULL,
          "a NaN imaginary part is refused: %s", tutti_last_error());
    tutti_sparse_free(complex_lu);
    CHECK(tutti_sparse_analyse(4, cz_pointers, cz_indices, NULL, &real_lu) == TUTTI_OK,
          "analyse for float64");
    CHECK(tutti_sparse_factor_c128(real_lu, parts, 11) == TUTTI_ERROR_INVALID_ARGUMENT &&
              strstr(tutti_last_error(), "call tutti_sparse_factor instead") != NULL,
          "tutti_sparse_factor_c128 on a real handle: %s", tutti_last_error());
    tutti_sparse_free(real_lu);
}

static int solve_with(int devices, int by_columns, int64_t base, const double *b, double *x) {
    static int64_t pointers[N + 1], indices[5 * N];
    static double values[5 * N];
    int64_t nnz = compress(by_columns, base, pointers, indices, values);
    TuttiSparseOptions options;
    tutti_sparse_options_default(&options);
    options.resources.kind = TUTTI_KIND_CPU;
    options.resources.devices = devices;
    options.layout = by_columns ? TUTTI_SPARSE_CSC : TUTTI_SPARSE_CSR;
    options.index_base = (int)base;
    TuttiSparse *lu = NULL;
    int status = tutti_sparse_analyse(N, pointers, indices, &options, &lu);
    if (status != TUTTI_OK) return status;
    status = tutti_sparse_factor(lu, values, nnz);
    memcpy(x, b, sizeof(double) * N);
    TuttiSparseSolveInfo info;
    if (status == TUTTI_OK) status = tutti_sparse_solve(lu, x, 1, &info);
    if (status == TUTTI_OK && info.backward_error > 1e-15) status = -100;
    tutti_sparse_free(lu);
    return status;
}

int main(void) {
    static double exact[N], b[N], x[N], first[N];
    for (int i = 0; i < N; i++) exact[i] = 1.0 + (double)i / N;
    for (int i = 0; i < N; i++) {
        int list[5], count = neighbours(i, list);
        b[i] = 0.0;
        for (int t = 0; t < count; t++) b[i] += entry(i, list[t]) * exact[list[t]];
    }

    TuttiSparseOptions defaults;
    CHECK(tutti_sparse_options_default(&defaults) == TUTTI_OK &&
              defaults.layout == TUTTI_SPARSE_CSR && defaults.index_base == 0 &&
              defaults.block == 1 && defaults.grid_dims[0] == 0 &&
              defaults.max_refinements == 3 && defaults.dtype == TUTTI_DTYPE_FLOAT64,
          "defaults: CSR, 0-based, nested dissection, 3 refinement steps, float64");

    const struct {
        int devices, by_columns;
        int64_t base;
    } runs[] = {{1, 0, 0}, {3, 0, 0}, {1, 1, 1}, {3, 1, 1}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        int status = solve_with(runs[r].devices, runs[r].by_columns, runs[r].base, b, x);
        CHECK(status == TUTTI_OK, "%s, base %d, %d device(s): solved (%d: %s)",
              runs[r].by_columns ? "CSC" : "CSR", (int)runs[r].base, runs[r].devices, status,
              tutti_last_error());
        double error = 0.0;
        for (int i = 0; i < N; i++) error = fmax(error, fabs(x[i] - exact[i]));
        CHECK(error < 1e-12, "max |x - exact| = %.3e", error);
        if (r == 0) {
            memcpy(first, x, sizeof x);
        } else {
            CHECK(memcmp(first, x, sizeof x) == 0, "the same bits as CSR on 1 device");
        }
    }

    /* Refactor with 2 A on the same handle: x halves exactly. */
    static int64_t pointers[N + 1], indices[5 * N];
    static double values[5 * N];
    int64_t nnz = compress(0, 0, pointers, indices, values);
    TuttiSparse *lu = NULL;
    CHECK(tutti_sparse_analyse(N, pointers, indices, NULL, &lu) == TUTTI_OK && lu != NULL,
          "analyse with default options");
    TuttiSparseInfo info;
    CHECK(tutti_sparse_info(lu, &info) == TUTTI_OK && info.unknowns == N &&
              info.matrix_nnz == nnz && info.factored == 0 && info.factor_nnz >= nnz,
          "info before factoring: %lld unknowns, %lld entries, nnz(L+U) %lld",
          (long long)info.unknowns, (long long)info.matrix_nnz, (long long)info.factor_nnz);
    memcpy(x, b, sizeof x);
    CHECK(tutti_sparse_solve(lu, x, 1, NULL) == TUTTI_ERROR_INVALID_ARGUMENT,
          "a solve before any factorization is refused: %s", tutti_last_error());
    CHECK(tutti_sparse_factor(lu, values, nnz - 1) == TUTTI_ERROR_INVALID_ARGUMENT,
          "a wrong entry count is refused: %s", tutti_last_error());
    for (int64_t k = 0; k < nnz; k++) values[k] *= 2.0;
    CHECK(tutti_sparse_factor(lu, values, nnz) == TUTTI_OK, "refactor with 2 A");
    static double two_rhs[2 * N];
    memcpy(two_rhs, b, sizeof b);
    memcpy(two_rhs + N, b, sizeof b);
    CHECK(tutti_sparse_solve(lu, two_rhs, 2, NULL) == TUTTI_OK, "solve two right-hand sides");
    int halved = 1;
    for (int i = 0; i < 2 * N; i++) halved &= fabs(two_rhs[i] - 0.5 * first[i % N]) < 1e-13;
    CHECK(halved, "both solutions are half the first");
    CHECK(tutti_sparse_info(lu, &info) == TUTTI_OK && info.factored == 1 &&
              info.perturbed_pivots == 0 && info.devices >= 1,
          "info after factoring: factored on %d device(s)", info.devices);
    CHECK(tutti_sparse_free(lu) == TUTTI_OK, "free");
    CHECK(tutti_sparse_free(lu) == TUTTI_ERROR_INVALID_ARGUMENT,
          "a released handle is refused: %s", tutti_last_error());
    CHECK(tutti_sparse_free(NULL) == TUTTI_OK, "freeing NULL is a no-op");

    /* Singular: [[1, 1], [1, 1]] factors (a pivot perturbed) but cannot be solved. */
    const int64_t sp[3] = {0, 2, 4}, si[4] = {0, 1, 0, 1};
    const double sv[4] = {1.0, 1.0, 1.0, 1.0};
    TuttiSparse *singular = NULL;
    CHECK(tutti_sparse_analyse(2, sp, si, NULL, &singular) == TUTTI_OK, "analyse [[1,1],[1,1]]");
    CHECK(tutti_sparse_factor(singular, sv, 4) == TUTTI_OK, "factor it");
    double rhs[2] = {1.0, 2.0};
    CHECK(tutti_sparse_solve(singular, rhs, 1, NULL) == TUTTI_ERROR_SINGULAR &&
              rhs[0] == 1.0 && rhs[1] == 2.0,
          "its solve is TUTTI_ERROR_SINGULAR, b untouched: %s", tutti_last_error());
    CHECK(strcmp(tutti_status_name(TUTTI_ERROR_SINGULAR), "TUTTI_ERROR_SINGULAR") == 0,
          "the status has its name");
    tutti_sparse_free(singular);

    /* Structurally singular: row 1 is empty. */
    const int64_t ep[3] = {0, 2, 2}, ei[2] = {0, 1};
    TuttiSparse *empty = NULL;
    CHECK(tutti_sparse_analyse(2, ep, ei, NULL, &empty) == TUTTI_ERROR_SINGULAR && empty == NULL,
          "an empty row is TUTTI_ERROR_SINGULAR at analysis: %s", tutti_last_error());

    complex_checks();
    return CHECK_SUMMARY();
}
