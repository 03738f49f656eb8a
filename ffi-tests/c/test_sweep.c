/*
 * tutti_src from C: an MPO applied to an MPS, compressed by SRC, against a dense product the
 * test computes itself.
 *
 * H (4 sites, d = 2, bond 3) and psi (bond 2) are filled with fixed numbers. With chi = 8,
 * above every exact bond of H psi (1, 2, 4, 2, 1), SRC must reproduce the dense vector H psi
 * (contracted here site by site) to 1e-12 relative, on 1 to 4 simulated devices; the result is read
 * back through tutti_train_info / tutti_train_shapes / tutti_train_site. Then a mixed stack
 * (real H, complex psi) against the same dense product done in complex arithmetic, a
 * directory round trip, and the error paths: a bond mismatch (TUTTI_ERROR_INVALID_ARGUMENT
 * naming the site), an MPS in the middle of a stack, chi_out = 0, NULL handles. Every handle
 * is released (the test also runs under AddressSanitizer). Exits non-zero when a check fails.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tutti.h"

#define SITES 4
#define D 2
#define DH 3
#define DP 2
#define DIM 16   /* D^SITES */
#define MAXB 16  /* the largest bond any train here has */

/* Fixed entries in [-1, 1]. */
static double entry(int site, int index, double salt) { return sin(0.37 * index + 1.3 * site + salt); }

static int left_bond(int site, int bond) { return site == 0 ? 1 : bond; }
static int right_bond(int site, int bond) { return site == SITES - 1 ? 1 : bond; }

/*
 * The dense vector of an MPS with `width` doubles per entry (1 real, 2 complex), given its
 * shapes (3 per site) and cores: out[s0 s1 s2 s3] (site 0 most significant), interleaved
 * re/im when width is 2.
 */
static void dense_mps(const int *shapes, double *const *cores, int width, double *out) {
    /* env[prefix][bond] (complex as re/im pairs, always) */
    static double env[DIM * MAXB * 2], next[DIM * MAXB * 2];
    int prefix = 1, bond = 1;
    env[0] = 1.0, env[1] = 0.0;
    for (int k = 0; k < SITES; k++) {
        int l = shapes[3 * k], d = shapes[3 * k + 1], r = shapes[3 * k + 2];
        memset(next, 0, sizeof next);
        for (int p = 0; p < prefix; p++)
            for (int a = 0; a < l; a++)
                for (int s = 0; s < d; s++)
                    for (int b = 0; b < r; b++) {
                        const double *e = &env[2 * (p * bond + a)];
                        const double *c = &cores[k][width * ((a * d + s) * r + b)];
                        double cr = c[0], ci = width == 2 ? c[1] : 0.0;
                        double *o = &next[2 * ((p * d + s) * r + b)];
                        o[0] += e[0] * cr - e[1] * ci;
                        o[1] += e[0] * ci + e[1] * cr;
                    }
        prefix *= d, bond = r;
        memcpy(env, next, sizeof env);
    }
    for (int i = 0; i < DIM; i++) {
        out[width * i] = env[2 * i];
        if (width == 2) out[2 * i + 1] = env[2 * i + 1];
    }
}

/* The dense H psi: y[o] = sum_i H[o][i] psi[i], with H dense from the MPO cores. */
static void dense_h_psi(double *const *h, const double *psi, int width, double *y) {
    /* Dense H by contracting the MPO like an MPS with d = 4 (index o_k i_k per site). */
    static double hd[DIM * DIM];
    int shapes[3 * SITES];
    for (int k = 0; k < SITES; k++) {
        shapes[3 * k] = left_bond(k, DH), shapes[3 * k + 1] = D * D, shapes[3 * k + 2] = right_bond(k, DH);
    }
    /* dense_mps gives index (o0 i0)(o1 i1)...; DIM * DIM entries (run at full size) */
    static double env[DIM * DIM * DH], next[DIM * DIM * DH];
    int prefix = 1, bond = 1;
    env[0] = 1.0;
    for (int k = 0; k < SITES; k++) {
        int l = shapes[3 * k], d = shapes[3 * k + 1], r = shapes[3 * k + 2];
        memset(next, 0, sizeof next);
        for (int p = 0; p < prefix; p++)
            for (int a = 0; a < l; a++)
                for (int s = 0; s < d; s++)
                    for (int b = 0; b < r; b++)
                        next[(p * d + s) * r + b] += env[p * bond + a] * h[k][(a * d + s) * r + b];
        prefix *= d, bond = r;
        memcpy(env, next, sizeof env);
    }
    for (int x = 0; x < DIM * DIM; x++) {
        /* x = (o0 i0 o1 i1 o2 i2 o3 i3) in base 2, o0 most significant */
        int o = 0, i = 0;
        for (int k = 0; k < SITES; k++) {
            int pair = (x >> (2 * (SITES - 1 - k))) & 3;
            o = 2 * o + (pair >> 1), i = 2 * i + (pair & 1);
        }
        hd[o * DIM + i] = env[x];
    }
    for (int o = 0; o < DIM; o++) {
        double re = 0, im = 0;
        for (int i = 0; i < DIM; i++) {
            re += hd[o * DIM + i] * psi[width * i];
            if (width == 2) im += hd[o * DIM + i] * psi[2 * i + 1];
        }
        y[width * o] = re;
        if (width == 2) y[2 * o + 1] = im;
    }
}

/* Reads a train's cores back and returns its dense vector; 0 on success. */
static int train_dense(const TuttiTrain *train, int width, double *out) {
    int kind = -1, dtype = -1, sites = -1;
    if (tutti_train_info(train, &kind, &dtype, &sites) != TUTTI_OK || kind != TUTTI_TRAIN_MPS ||
        sites != SITES || dtype != (width == 2 ? TUTTI_DTYPE_COMPLEX128 : TUTTI_DTYPE_FLOAT64))
        return 1;
    int shapes[3 * SITES];
    if (tutti_train_shapes(train, shapes, 3 * SITES) != TUTTI_OK) return 1;
    double *cores[SITES] = {0};
    int failed = 0;
    for (int k = 0; k < SITES; k++) {
        size_t len = (size_t)shapes[3 * k] * shapes[3 * k + 1] * shapes[3 * k + 2] * width;
        if (shapes[3 * k] > MAXB || shapes[3 * k + 2] > MAXB) failed = 1;
        cores[k] = malloc(len * sizeof(double));
        if (!failed && tutti_train_site(train, k, cores[k], len) != TUTTI_OK) failed = 1;
    }
    if (!failed) dense_mps(shapes, cores, width, out);
    for (int k = 0; k < SITES; k++) free(cores[k]);
    return failed;
}

/* The relative 2-norm difference of two vectors of n doubles. */
static double relative_difference(const double *a, const double *b, int n) {
    double diff = 0, scale = 0;
    for (int i = 0; i < n; i++) diff += (a[i] - b[i]) * (a[i] - b[i]), scale += b[i] * b[i];
    return sqrt(diff / scale);
}

int main(void) {
    /* H: (Dl, 2, 2, Dr) cores; psi: (Dl, 2, Dr), real and complex (width 2) copies. */
    int h_shapes[4 * SITES], psi_shapes[3 * SITES];
    double *h_cores[SITES], *psi_cores[SITES], *psi_complex[SITES];
    for (int k = 0; k < SITES; k++) {
        int hl = left_bond(k, DH), hr = right_bond(k, DH), pl = left_bond(k, DP), pr = right_bond(k, DP);
        int h4[4] = {hl, D, D, hr}, p3[3] = {pl, D, pr};
        memcpy(&h_shapes[4 * k], h4, sizeof h4);
        memcpy(&psi_shapes[3 * k], p3, sizeof p3);
        int hn = hl * D * D * hr, pn = pl * D * pr;
        h_cores[k] = malloc(hn * sizeof(double));
        psi_cores[k] = malloc(pn * sizeof(double));
        psi_complex[k] = malloc(2 * pn * sizeof(double));
        for (int i = 0; i < hn; i++) h_cores[k][i] = entry(k, i, 0.1);
        for (int i = 0; i < pn; i++) {
            psi_cores[k][i] = entry(k, i, 2.0);
            psi_complex[k][2 * i] = entry(k, i, 2.0);
            psi_complex[k][2 * i + 1] = entry(k, i, 4.5);
        }
    }
    TuttiTrain *h = NULL, *psi = NULL, *psi_c = NULL;
    int status = tutti_train_from_arrays(TUTTI_TRAIN_MPO, TUTTI_DTYPE_FLOAT64, SITES, h_shapes,
                                         (const double *const *)h_cores, &h);
    CHECK(status == TUTTI_OK && h, "an MPO from arrays (%s)", tutti_last_error());
    status = tutti_train_from_arrays(TUTTI_TRAIN_MPS, TUTTI_DTYPE_FLOAT64, SITES, psi_shapes,
                                     (const double *const *)psi_cores, &psi);
    CHECK(status == TUTTI_OK && psi, "an MPS from arrays (%s)", tutti_last_error());
    status = tutti_train_from_arrays(TUTTI_TRAIN_MPS, TUTTI_DTYPE_COMPLEX128, SITES, psi_shapes,
                                     (const double *const *)psi_complex, &psi_c);
    CHECK(status == TUTTI_OK && psi_c, "a complex MPS from arrays (%s)", tutti_last_error());

    /* The reference: dense psi, then dense H times it, all in this file. */
    double psi_dense[DIM], expected[DIM], psi_dense_c[2 * DIM], expected_c[2 * DIM];
    dense_mps(psi_shapes, psi_cores, 1, psi_dense);
    dense_h_psi(h_cores, psi_dense, 1, expected);
    dense_mps(psi_shapes, psi_complex, 2, psi_dense_c);
    dense_h_psi(h_cores, psi_dense_c, 2, expected_c);

    TuttiSrcOptions options;
    CHECK(tutti_src_options_default(&options) == TUTTI_OK &&
              options.resources.kind == TUTTI_KIND_AUTO &&
              options.resources.devices == TUTTI_ALL_DEVICES &&
              options.resources.ordinals == NULL && options.chi_out == 0,
          "default options: the default resources, chi_out to be set");
    options.chi_out = 8;
    options.seed = 7;
    options.resources.kind = TUTTI_KIND_CPU;
    const TuttiTrain *stack[2] = {h, psi};
    for (int devices = 1; devices <= 4; devices++) {
        options.resources.devices = devices;
        TuttiTrain *result = NULL;
        status = tutti_src(stack, 2, &options, &result);
        CHECK(status == TUTTI_OK && result, "tutti_src on %d device(s) (%d: %s)", devices, status,
              tutti_last_error());
        double got[DIM];
        CHECK(result && train_dense(result, 1, got) == 0, "the result reads back as a 4-site MPS");
        double error = relative_difference(got, expected, DIM);
        CHECK(error < 1e-12, "H psi equals the dense product to %.2e relative", error);
        int shapes[3 * SITES];
        CHECK(tutti_train_shapes(result, shapes, 3 * SITES) == TUTTI_OK && shapes[2] == 2 &&
                  shapes[5] == 4 && shapes[8] == 2,
              "exact bonds 1, 2, 4, 2, 1");
        double norm = 0, expected_norm = 0;
        for (int i = 0; i < DIM; i++) expected_norm += expected[i] * expected[i];
        CHECK(tutti_train_norm(result, &norm) == TUTTI_OK &&
                  fabs(norm - sqrt(expected_norm)) < 1e-12 * norm,
              "tutti_train_norm %.12f equals the dense norm", norm);
        CHECK(tutti_train_free(result) == TUTTI_OK, "released");
    }

    /* A mixed stack is computed in complex128. */
    const TuttiTrain *mixed[2] = {h, psi_c};
    options.resources.devices = 2;
    TuttiTrain *result_c = NULL;
    status = tutti_src(mixed, 2, &options, &result_c);
    CHECK(status == TUTTI_OK, "tutti_src on real H, complex psi (%s)", tutti_last_error());
    double got_c[2 * DIM];
    CHECK(result_c && train_dense(result_c, 2, got_c) == 0, "a complex128 MPS comes back");
    double error_c = relative_difference(got_c, expected_c, 2 * DIM);
    CHECK(error_c < 1e-12, "complex H psi equals the dense product to %.2e relative", error_c);

    /* A directory round trip. */
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/tutti-test-sweep-%d", (int)getpid());
    TuttiTrain *back = NULL;
    double distance = -1;
    CHECK(tutti_train_write_dir(result_c, dir) == TUTTI_OK &&
              tutti_train_from_dir(dir, &back) == TUTTI_OK &&
              tutti_train_distance(result_c, back, &distance) == TUTTI_OK && distance < 1e-13,
          "written to %s and read back (distance %.1e; %s)", dir, distance, tutti_last_error());
    for (int k = 0; k < SITES; k++) {
        char file[300];
        snprintf(file, sizeof file, "%s/%03d.npy", dir, k);
        remove(file);
    }
    rmdir(dir);

    /* Errors. A bond mismatch: site 2's left bond 3 against site 1's right bond 2. */
    int bad_shapes[3 * SITES];
    memcpy(bad_shapes, psi_shapes, sizeof bad_shapes);
    bad_shapes[3 * 2] = 3;
    TuttiTrain *bad = NULL;
    status = tutti_train_from_arrays(TUTTI_TRAIN_MPS, TUTTI_DTYPE_FLOAT64, SITES, bad_shapes,
                                     (const double *const *)h_cores, &bad);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && bad == NULL &&
              strstr(tutti_last_error(), "bond mismatch at site 2"),
          "a bond mismatch is TUTTI_ERROR_INVALID_ARGUMENT naming the site: \"%s\"",
          tutti_last_error());
    const TuttiTrain *middle[3] = {h, psi, h};
    TuttiTrain *none = NULL;
    status = tutti_src(middle, 3, &options, &none);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && none == NULL,
          "an MPS in the middle is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    options.chi_out = 0;
    status = tutti_src(stack, 2, &options, &none);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "chi_out"),
          "chi_out = 0 is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    options.chi_out = 8;
    const TuttiTrain *with_null[2] = {h, NULL};
    status = tutti_src(with_null, 2, &options, &none);
    CHECK(status == TUTTI_ERROR_NULL_POINTER && strstr(tutti_last_error(), "stack[1]"),
          "a NULL train is TUTTI_ERROR_NULL_POINTER: \"%s\"", tutti_last_error());
    /* NULL options are the defaults, whose chi_out 0 must be set. */
    status = tutti_src(stack, 2, NULL, &none);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "chi_out"),
          "NULL options are the defaults (chi_out 0): \"%s\"", tutti_last_error());

    /* Where it runs: the errors of TuttiResources, and a cap the plan cannot hold. */
    TuttiSrcOptions refused = options;
    refused.resources.devices = 0;
    status = tutti_src(stack, 2, &refused, &none);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "resources"),
          "zero devices is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    const int unknown[2] = {0, 100000};
    refused.resources.devices = TUTTI_ALL_DEVICES;
    refused.resources.ordinals = unknown;
    refused.resources.ordinal_count = 2;
    status = tutti_src(stack, 2, &refused, &none);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "100000"),
          "an unknown ordinal is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    const int repeated[2] = {0, 0};
    refused.resources.ordinals = repeated;
    TuttiTrain *twice = NULL;
    status = tutti_src(stack, 2, &refused, &twice);
    CHECK(status == TUTTI_OK && twice, "two ranks on one device run (%s)", tutti_last_error());
    tutti_train_free(twice);
    int gpus = 0;
    if (tutti_device_count(TUTTI_KIND_GPU, &gpus) != TUTTI_OK || gpus == 0) {
        refused = options;
        refused.resources.kind = TUTTI_KIND_GPU;
        refused.resources.devices = TUTTI_ALL_DEVICES;
        status = tutti_src(stack, 2, &refused, &none);
        CHECK(status == TUTTI_ERROR_UNSUPPORTED || status == TUTTI_ERROR_DEVICE,
              "a GPU request without a GPU is refused (%d: \"%s\")", status, tutti_last_error());
    }
    refused = options;
    refused.resources.device_memory_bytes = 256;
    status = tutti_src(stack, 2, &refused, &none);
    CHECK(status == TUTTI_ERROR_OUT_OF_MEMORY && none == NULL &&
              strstr(tutti_last_error(), "memory plan"),
          "a 256-byte cap is refused before any work: \"%s\"", tutti_last_error());

    status = tutti_train_from_dir("/nonexistent/tutti", &none);
    CHECK(status == TUTTI_ERROR_IO, "a missing directory is TUTTI_ERROR_IO: \"%s\"",
          tutti_last_error());
    CHECK(tutti_train_free(NULL) == TUTTI_OK, "freeing NULL is a no-op");

    tutti_train_free(back);
    tutti_train_free(result_c);
    tutti_train_free(h);
    tutti_train_free(psi);
    tutti_train_free(psi_c);
    for (int k = 0; k < SITES; k++) {
        free(h_cores[k]);
        free(psi_cores[k]);
        free(psi_complex[k]);
    }
    return CHECK_SUMMARY();
}
