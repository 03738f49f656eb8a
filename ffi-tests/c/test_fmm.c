/*
 * tutti_fmm from C: potentials and accelerations of 2000 bodies by the fast multipole method.
 *
 * The bodies come from a fixed linear congruential generator (unit cube, strengths in
 * [0.5, 1.5), a fifth of them negative). The FMM at default options must match a direct sum
 * computed here in C to a relative L2 error of 1e-4 on accelerations and potentials; 1 and 2
 * devices must give the same bits; tutti_direct_sum must agree with the C sum to rounding.
 * Then the error paths: a NaN position, negative softening, coincident bodies, bad options,
 * NULL inputs. Prints each check; exits non-zero when any fails.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tutti.h"

#define N 2000

static uint64_t lcg_state = 2026;

/* A double in [0, 1) from a 64-bit LCG (Knuth's MMIX constants). */
static double next_uniform(void) {
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg_state >> 11) / 9007199254740992.0;
}

/* phi_i = -sum m_j / r_ij, a_i = -sum m_j (x_i - x_j) / r_ij^3, j != i (G = 1, no softening). */
static void direct_sum_c(int n, const double *x, const double *m, double *phi, double *acc) {
    for (int i = 0; i < n; i++) {
        double p = 0, ax = 0, ay = 0, az = 0;
        for (int j = 0; j < n; j++) {
            if (j == i) continue;
            double dx = x[3 * i] - x[3 * j], dy = x[3 * i + 1] - x[3 * j + 1],
                   dz = x[3 * i + 2] - x[3 * j + 2];
            double r2 = dx * dx + dy * dy + dz * dz, r = sqrt(r2);
            p -= m[j] / r;
            double f = m[j] / (r2 * r);
            ax -= f * dx, ay -= f * dy, az -= f * dz;
        }
        phi[i] = p;
        acc[3 * i] = ax, acc[3 * i + 1] = ay, acc[3 * i + 2] = az;
    }
}

static double relative_l2(int len, const double *approx, const double *exact) {
    double diff = 0, norm = 0;
    for (int k = 0; k < len; k++) {
        diff += (approx[k] - exact[k]) * (approx[k] - exact[k]);
        norm += exact[k] * exact[k];
    }
    return sqrt(diff / norm);
}

static int all_equal(int len, const double *values, double value) {
    for (int k = 0; k < len; k++)
        if (values[k] != value) return 0;
    return 1;
}

int main(void) {
    double *positions = malloc(3 * N * sizeof(double)), *masses = malloc(N * sizeof(double));
    double *phi_c = malloc(N * sizeof(double)), *acc_c = malloc(3 * N * sizeof(double));
    double *phi1 = malloc(N * sizeof(double)), *acc1 = malloc(3 * N * sizeof(double));
    double *phi2 = malloc(N * sizeof(double)), *acc2 = malloc(3 * N * sizeof(double));
    for (int k = 0; k < 3 * N; k++) positions[k] = next_uniform();
    for (int i = 0; i < N; i++) masses[i] = (i % 5 == 0 ? -1.0 : 1.0) * (0.5 + next_uniform());
    direct_sum_c(N, positions, masses, phi_c, acc_c);

    TuttiFmmOptions options;
    CHECK(tutti_fmm_options_default(&options) == TUTTI_OK, "default options");
    CHECK(options.order == 7 && options.theta == 0.5 && options.leaf_size == 64 &&
              options.softening == 0.0 && options.f32_far_field == 0 &&
              options.resources.kind == TUTTI_KIND_AUTO &&
              options.resources.devices == TUTTI_ALL_DEVICES && options.resources.ordinals == NULL &&
              options.resources.device_memory_bytes == 0,
          "defaults: order %d, theta %g, leaf size %d, softening %g, f32 %d, kind %d, devices %d",
          options.order, options.theta, options.leaf_size, options.softening,
          options.f32_far_field, options.resources.kind, options.resources.devices);
    options.resources.kind = TUTTI_KIND_CPU;

    int status = tutti_fmm(N, positions, masses, &options, phi1, acc1);
    CHECK(status == TUTTI_OK, "tutti_fmm on 1 device returns TUTTI_OK (%d: %s)", status,
          tutti_last_error());
    double accel_error = relative_l2(3 * N, acc1, acc_c);
    double potential_error = relative_l2(N, phi1, phi_c);
    CHECK(accel_error <= 1e-4, "accelerations within 1e-4 of the C direct sum (rel. L2 %.2e)",
          accel_error);
    CHECK(potential_error <= 1e-4, "potentials within 1e-4 of the C direct sum (rel. L2 %.2e)",
          potential_error);

    for (int devices = 2; devices <= 4; devices++) {
        options.resources.devices = devices;
        status = tutti_fmm(N, positions, masses, &options, phi2, acc2);
        CHECK(status == TUTTI_OK, "tutti_fmm on %d devices returns TUTTI_OK (%d: %s)", devices,
              status, tutti_last_error());
        CHECK(memcmp(phi1, phi2, N * sizeof(double)) == 0 &&
                  memcmp(acc1, acc2, 3 * N * sizeof(double)) == 0,
              "%d devices give the same bits as 1", devices);
    }
    const int twice[2] = {0, 0};
    options.resources.devices = TUTTI_ALL_DEVICES;
    options.resources.ordinals = twice;
    options.resources.ordinal_count = 2;
    status = tutti_fmm(N, positions, masses, &options, phi2, acc2);
    CHECK(status == TUTTI_OK && memcmp(acc1, acc2, 3 * N * sizeof(double)) == 0,
          "two ranks on ordinal 0 give the same bits (%d: %s)", status, tutti_last_error());

    /* Device requests that cannot be met: each a clear error, outputs untouched. */
    for (int k = 0; k < N; k++) phi2[k] = -1.0;
    TuttiFmmOptions refused;
    tutti_fmm_options_default(&refused);
    refused.resources.devices = 0;
    status = tutti_fmm(N, positions, masses, &refused, phi2, NULL);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT &&
              strstr(tutti_last_error(), "options->resources.devices is 0"),
          "zero devices: \"%s\"", tutti_last_error());
    tutti_fmm_options_default(&refused);
    const int unknown[1] = {300};
    refused.resources.kind = TUTTI_KIND_CPU;
    refused.resources.ordinals = unknown;
    refused.resources.ordinal_count = 1;
    status = tutti_fmm(N, positions, masses, &refused, phi2, NULL);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "300"),
          "an unknown ordinal: \"%s\"", tutti_last_error());
    tutti_fmm_options_default(&refused);
    refused.resources.kind = TUTTI_KIND_GPU;
    status = tutti_fmm(N, positions, masses, &refused, phi2, NULL);
    CHECK(status == TUTTI_ERROR_UNSUPPORTED || status == TUTTI_ERROR_DEVICE,
          "a GPU request without CUDA or a GPU: \"%s\"", tutti_last_error());
    tutti_fmm_options_default(&refused);
    refused.resources.kind = TUTTI_KIND_CPU;
    refused.resources.devices = 2;
    refused.resources.device_memory_bytes = 16 << 10;
    status = tutti_fmm(N, positions, masses, &refused, phi2, NULL);
    CHECK(status == TUTTI_ERROR_OUT_OF_MEMORY && strstr(tutti_last_error(), "does not fit"),
          "a 16 KiB device cap is refused up front: \"%s\"", tutti_last_error());
    CHECK(all_equal(N, phi2, -1.0), "outputs untouched on refusals");

    status = tutti_fmm(N, positions, masses, NULL, phi2, NULL);
    CHECK(status == TUTTI_OK && memcmp(phi1, phi2, N * sizeof(double)) == 0,
          "NULL options are the defaults; a NULL accel_out is skipped");

    status = tutti_direct_sum(N, positions, masses, 0.0, phi2, acc2);
    CHECK(status == TUTTI_OK && relative_l2(3 * N, acc2, acc_c) < 1e-13 &&
              relative_l2(N, phi2, phi_c) < 1e-13,
          "tutti_direct_sum agrees with the C sum to rounding (%d: %s)", status,
          tutti_last_error());

    status = tutti_fmm(0, NULL, NULL, NULL, NULL, NULL);
    CHECK(status == TUTTI_OK, "zero bodies: TUTTI_OK, nothing read or written");

    /* Error paths: outputs stay untouched. */
    for (int k = 0; k < N; k++) phi2[k] = -1.0;
    positions[3 * 17 + 2] = NAN;
    status = tutti_fmm(N, positions, masses, NULL, phi2, NULL);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "`positions`") &&
              strstr(tutti_last_error(), "body 17"),
          "a NaN position is TUTTI_ERROR_INVALID_ARGUMENT naming it: \"%s\"", tutti_last_error());
    CHECK(all_equal(N, phi2, -1.0), "outputs untouched on failure");
    positions[3 * 17 + 2] = 0.5;

    TuttiFmmOptions bad;
    tutti_fmm_options_default(&bad);
    bad.softening = -1.0;
    status = tutti_fmm(N, positions, masses, &bad, phi2, NULL);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "softening"),
          "negative softening is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    tutti_fmm_options_default(&bad);
    bad.order = 13;
    status = tutti_fmm(N, positions, masses, &bad, phi2, NULL);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "order"),
          "order 13 is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());

    memcpy(&positions[3 * 9], &positions[3 * 4], 3 * sizeof(double));
    status = tutti_fmm(N, positions, masses, NULL, phi2, NULL);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "bodies 4 and 9") &&
              strstr(tutti_last_error(), "softening"),
          "coincident bodies are TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    CHECK(all_equal(N, phi2, -1.0), "outputs untouched on failure");
    tutti_fmm_options_default(&bad);
    bad.softening = 1e-3;
    status = tutti_fmm(N, positions, masses, &bad, phi2, NULL);
    CHECK(status == TUTTI_OK, "with softening the coincident bodies are fine (%s)",
          tutti_last_error());

    status = tutti_fmm(N, NULL, masses, NULL, phi2, NULL);
    CHECK(status == TUTTI_ERROR_NULL_POINTER && strstr(tutti_last_error(), "positions"),
          "NULL positions are TUTTI_ERROR_NULL_POINTER: \"%s\"", tutti_last_error());
    status = tutti_fmm(-5, positions, masses, NULL, phi2, NULL);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "`n`"),
          "a negative n is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());

    free(positions), free(masses), free(phi_c), free(acc_c);
    free(phi1), free(acc1), free(phi2), free(acc2);
    return CHECK_SUMMARY();
}
