/*
 * tutti_fit from C: a fit whose residuals come from a C callback.
 *
 * The model y = a * exp(b * x) is fitted to exact data made with (a, b) = (2, -0.5), four
 * experiments of five points; the fit must recover them to 1e-10 on 1 to 4 simulated devices,
 * with the same bits. Then the error paths: NULL callback, a failing callback, a bad count,
 * zero devices, an unknown ordinal, a GPU request without a GPU, a memory cap too small.
 * Prints each check; exits non-zero when any fails.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tutti.h"

/* The callback: residuals and Jacobian of experiment `e`; counts its calls in user_data
 * (atomically: tutti may call it from several threads at once). */
static int exponential(void *user_data, int e, const double *p, int n, double *r, int m,
                       double *jac) {
    __atomic_fetch_add((int *)user_data, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < m; i++) {
        double x = e + 0.25 * i;
        r[i] = p[0] * exp(p[1] * x) - 2.0 * exp(-0.5 * x);
        jac[i * n + 0] = exp(p[1] * x);
        jac[i * n + 1] = p[0] * x * exp(p[1] * x);
    }
    return 0;
}

static int failing(void *user_data, int e, const double *p, int n, double *r, int m,
                   double *jac) {
    (void)user_data, (void)e, (void)p, (void)n, (void)r, (void)m, (void)jac;
    return 3;
}

int main(void) {
    const int counts[4] = {5, 5, 5, 5};
    const double initial[2] = {1.0, 0.0};
    double first[2] = {0, 0};
    for (int devices = 1; devices <= 4; devices++) {
        TuttiFitOptions options;
        CHECK(tutti_fit_options_default(&options) == TUTTI_OK, "default options");
        if (devices == 1) {
            CHECK(options.resources.kind == TUTTI_KIND_AUTO &&
                      options.resources.devices == TUTTI_ALL_DEVICES &&
                      options.resources.ordinals == NULL && options.max_iterations == 200,
                  "defaults: every device of the default kind, 200 iterations");
        }
        options.resources.kind = TUTTI_KIND_CPU;
        options.resources.devices = devices;
        double parameters[2] = {0, 0}, covariance[4] = {0, 0, 0, 0};
        TuttiFitResult result;
        int calls = 0;
        int status = tutti_fit(exponential, &calls, 4, counts, 2, initial, &options, parameters,
                               covariance, &result);
        CHECK(status == TUTTI_OK, "tutti_fit on %d device(s) returns TUTTI_OK (%d: %s)", devices,
              status, tutti_last_error());
        CHECK(fabs(parameters[0] - 2.0) < 1e-10 && fabs(parameters[1] + 0.5) < 1e-10,
              "recovers (a, b) = (%.12f, %.12f), exact (2, -0.5)", parameters[0], parameters[1]);
        CHECK(result.converged == 1 && result.cost < 1e-20 && result.iterations > 0,
              "converged in %d iterations, cost %.2e", result.iterations, result.cost);
        CHECK(calls >= 4 * result.evaluations, "the callback ran for every experiment (%d calls)",
              calls);
        CHECK(covariance[0] > 0 && covariance[3] > 0 && fabs(covariance[1] - covariance[2]) < 1e-12,
              "covariance is symmetric with a positive diagonal");
        if (devices == 1) {
            memcpy(first, parameters, sizeof first);
        } else {
            CHECK(memcmp(first, parameters, sizeof first) == 0,
                  "%d devices give the same bits as 1", devices);
        }
    }

    double parameters[2] = {-1, -1};
    TuttiFitResult result;
    int status = tutti_fit(NULL, NULL, 4, counts, 2, initial, NULL, parameters, NULL, &result);
    CHECK(status == TUTTI_ERROR_NULL_POINTER && strstr(tutti_last_error(), "residual_fn"),
          "a NULL callback is TUTTI_ERROR_NULL_POINTER: \"%s\"", tutti_last_error());
    status = tutti_fit(failing, NULL, 4, counts, 2, initial, NULL, parameters, NULL, &result);
    CHECK(status == TUTTI_ERROR_CALLBACK && strstr(tutti_last_error(), "returned 3"),
          "a failing callback is TUTTI_ERROR_CALLBACK: \"%s\"", tutti_last_error());
    CHECK(parameters[0] == -1 && parameters[1] == -1, "outputs untouched on failure");
    status = tutti_fit(exponential, NULL, 0, counts, 2, initial, NULL, parameters, NULL, &result);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "n_experiments"),
          "zero experiments is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());


    /* Where it runs: the errors of TuttiResources, and a cap the plan cannot hold. */
    TuttiFitOptions refused;
    tutti_fit_options_default(&refused);
    refused.resources.kind = TUTTI_KIND_CPU;
    refused.resources.devices = 0;
    int calls = 0;
    status = tutti_fit(exponential, &calls, 4, counts, 2, initial, &refused, parameters, NULL,
                       &result);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "resources.devices"),
          "zero devices is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    const int unknown[1] = {100000};
    refused.resources.devices = TUTTI_ALL_DEVICES;
    refused.resources.ordinals = unknown;
    refused.resources.ordinal_count = 1;
    status = tutti_fit(exponential, &calls, 4, counts, 2, initial, &refused, parameters, NULL,
                       &result);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "100000"),
          "an unknown ordinal is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    int gpus = 0;
    if (tutti_device_count(TUTTI_KIND_GPU, &gpus) != TUTTI_OK || gpus == 0) {
        tutti_fit_options_default(&refused);
        refused.resources.kind = TUTTI_KIND_GPU;
        status = tutti_fit(exponential, &calls, 4, counts, 2, initial, &refused, parameters,
                           NULL, &result);
        CHECK(status == TUTTI_ERROR_UNSUPPORTED || status == TUTTI_ERROR_DEVICE,
              "a GPU request without a GPU is refused (%d: \"%s\")", status, tutti_last_error());
    }
    tutti_fit_options_default(&refused);
    refused.resources.kind = TUTTI_KIND_CPU;
    refused.resources.devices = 2;
    refused.resources.device_memory_bytes = 256;
    calls = 0;
    status = tutti_fit(exponential, &calls, 4, counts, 2, initial, &refused, parameters, NULL,
                       &result);
    CHECK(status == TUTTI_ERROR_OUT_OF_MEMORY && strstr(tutti_last_error(), "contributions") &&
              calls == 0,
          "a 256-byte cap is refused before any evaluation: \"%s\"", tutti_last_error());
    CHECK(parameters[0] == -1 && parameters[1] == -1, "outputs untouched when refused");

    return CHECK_SUMMARY();
}
