/*
 * tutti_fit from C: a fit whose residuals come from a C callback.
 *
 * The model y = a * exp(b * x) is fitted to exact data made with (a, b) = (2, -0.5), four
 * experiments of five points; the fit must recover them to 1e-10 on 1 to 4 simulated devices,
 * with the same bits. Then the error paths: NULL callback, a failing callback, a bad count,
 * zero devices, an unknown ordinal, a GPU request without a GPU, a memory cap too small.
 *
 * Bounds: a <= 1.5 (and, separately, a fixed at 1.5 by equal bounds) keeps the truth out of
 * reach, so the solution has a = 1.5 exactly and b at the minimum of the reduced problem
 * (a held at 1.5), which a one-parameter fit finds independently. Either fit may stop
 * anywhere the cost is flat to rounding, within sqrt(2 eps cost / curvature) = 2e-9 of that
 * minimum (cost 0.33, curvature 37), so they must agree to 2e-8 relative. Bad bounds are
 * TUTTI_ERROR_INVALID_ARGUMENT naming the entry.
 *
 * Rank: y = (p0 + p1) x against y = 3x, where only the sum is determined: the fit returns
 * finite parameters with p0 + p1 = 3, covariance rank 1 and the pseudo-inverse of
 * J^T J = 55 [[1, 1], [1, 1]], every entry 1/220.
 *
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

/* The reduced problem: a held at *(const double *)user_data, the one parameter is b. */
static int exponential_b(void *user_data, int e, const double *p, int n, double *r, int m,
                         double *jac) {
    (void)n;
    double a = *(const double *)user_data;
    for (int i = 0; i < m; i++) {
        double x = e + 0.25 * i;
        r[i] = a * exp(p[0] * x) - 2.0 * exp(-0.5 * x);
        jac[i] = a * x * exp(p[0] * x);
    }
    return 0;
}

/* y = (p0 + p1) x against y = 3x at x = 1..m: the parameters enter only as their sum. */
static int sum_only(void *user_data, int e, const double *p, int n, double *r, int m,
                    double *jac) {
    (void)user_data, (void)e;
    for (int i = 0; i < m; i++) {
        double x = i + 1;
        r[i] = (p[0] + p[1]) * x - 3.0 * x;
        jac[i * n + 0] = x;
        jac[i * n + 1] = x;
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

    /* Bounds. The reference: b fitted alone with a held at 1.5. The cost tolerance is off
     * (1e-300) so that each fit goes on until rounding stops it. */
    double held = 1.5;
    TuttiFitOptions tight;
    tutti_fit_options_default(&tight);
    tight.resources.kind = TUTTI_KIND_CPU;
    tight.resources.devices = 1;
    tight.cost_tolerance = 1e-300;
    double reduced = 0;
    const double reduced_start = 0.0;
    status = tutti_fit(exponential_b, &held, 4, counts, 1, &reduced_start, &tight, &reduced, NULL,
                       &result);
    CHECK(status == TUTTI_OK && result.covariance_rank == 1,
          "the reduced fit (a held at 1.5): b = %.15f (%d: %s)", reduced, status,
          tutti_last_error());
    const double upper_a[2] = {1.5, INFINITY};
    const double fixed_lower[2] = {1.5, -INFINITY};
    const double fixed_start[2] = {1.5, 0.0};
    struct {
        const char *what;
        const double *lower, *upper, *start;
    } bounded_cases[2] = {
        {"a <= 1.5 (lower NULL)", NULL, upper_a, initial},
        {"a fixed at 1.5 by equal bounds", fixed_lower, upper_a, fixed_start},
    };
    for (int c = 0; c < 2; c++) {
        TuttiFitOptions bounded = tight;
        bounded.lower = bounded_cases[c].lower;
        bounded.upper = bounded_cases[c].upper;
        double solution[2] = {0, 0}, covariance[4] = {0, 0, 0, 0};
        status = tutti_fit(exponential, &calls, 4, counts, 2, bounded_cases[c].start, &bounded,
                           solution, covariance, &result);
        CHECK(status == TUTTI_OK, "%s: TUTTI_OK (%d: %s)", bounded_cases[c].what, status,
              tutti_last_error());
        CHECK(solution[0] == 1.5, "%s: a = %.17g, exactly the bound", bounded_cases[c].what,
              solution[0]);
        CHECK(fabs(solution[1] - reduced) <= 2e-8 * fabs(reduced),
              "%s: b = %.15f, the reduced fit's %.15f (%.1e apart, <= 2e-8 relative)",
              bounded_cases[c].what, solution[1], reduced, fabs(solution[1] - reduced));
        CHECK(result.converged == 1 && result.covariance_rank == 2 && covariance[0] > 0 &&
                  covariance[3] > 0 && result.cost > 0.3,
              "%s: converged (termination %d), cost %.4f, full-rank covariance",
              bounded_cases[c].what, result.termination, result.cost);
    }

    /* Bad bounds: TUTTI_ERROR_INVALID_ARGUMENT naming the entry; nothing written. */
    const double crossed_lower[2] = {0.0, 1.0}, crossed_upper[2] = {5.0, -1.0};
    const double nan_lower[2] = {NAN, -INFINITY};
    const double start_outside[2] = {0.5, INFINITY};
    struct {
        const double *lower, *upper;
        const char *needle;
    } bad_cases[3] = {
        {crossed_lower, crossed_upper, "options->lower[1] is 1, above options->upper[1]"},
        {nan_lower, NULL, "options->lower[0] is NaN"},
        {NULL, start_outside, "initial[0] is 1, outside its bounds"},
    };
    for (int c = 0; c < 3; c++) {
        TuttiFitOptions bad = tight;
        bad.lower = bad_cases[c].lower;
        bad.upper = bad_cases[c].upper;
        parameters[0] = parameters[1] = -1;
        status = tutti_fit(exponential, &calls, 4, counts, 2, initial, &bad, parameters, NULL,
                           &result);
        CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT &&
                  strstr(tutti_last_error(), bad_cases[c].needle) && parameters[0] == -1,
              "bad bounds are TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    }

    /* A rank-deficient J^T J: parameters and the pseudo-inverse, not an error. */
    const int five[1] = {5};
    double sum_parameters[2] = {0, 0}, pseudo[4] = {0, 0, 0, 0};
    status = tutti_fit(sum_only, NULL, 1, five, 2, initial, NULL, sum_parameters, pseudo, &result);
    CHECK(status == TUTTI_OK, "the rank-deficient fit returns TUTTI_OK (%d: %s)", status,
          tutti_last_error());
    CHECK(isfinite(sum_parameters[0]) && isfinite(sum_parameters[1]) &&
              fabs(sum_parameters[0] + sum_parameters[1] - 3.0) < 1e-10,
          "finite parameters (%.15f, %.15f) whose sum is 3", sum_parameters[0],
          sum_parameters[1]);
    CHECK(result.covariance_rank == 1, "covariance rank %d, n - 1 = 1", result.covariance_rank);
    double worst = 0;
    for (int k = 0; k < 4; k++) {
        worst = fmax(worst, fabs(pseudo[k] * 220.0 - 1.0));
    }
    CHECK(worst < 1e-12, "the covariance is the pseudo-inverse, every entry 1/220 (%.1e off)",
          worst);

    /* The termination reason. */
    TuttiFitOptions once = tight;
    once.max_iterations = 1;
    status = tutti_fit(exponential, &calls, 4, counts, 2, initial, &once, parameters, NULL,
                       &result);
    CHECK(status == TUTTI_OK && result.termination == TUTTI_TERMINATION_MAX_ITERATIONS &&
              result.converged == 0,
          "one iteration: TUTTI_TERMINATION_MAX_ITERATIONS, not converged (termination %d)",
          result.termination);
    status = tutti_fit(exponential, &calls, 4, counts, 2, initial, NULL, parameters, NULL, &result);
    CHECK(status == TUTTI_OK && result.converged == 1 &&
              (result.termination == TUTTI_TERMINATION_GRADIENT ||
               result.termination == TUTTI_TERMINATION_STEP ||
               result.termination == TUTTI_TERMINATION_COST),
          "a converged fit says which tolerance stopped it (termination %d)", result.termination);

    return CHECK_SUMMARY();
}
