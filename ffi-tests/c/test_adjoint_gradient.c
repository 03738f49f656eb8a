/*
 * tutti_rhf_gradient from C: the gradient of the RHF energy of water/sto-3g with respect to
 * every exponent and contraction coefficient, against PySCF finite differences; 1 vs 2
 * devices and serial vs split; the arrays and the JSON released (AddressSanitizer checks
 * for leaks); the error paths.
 *
 * Reference: /work/shared/reference/adjoint/h2o_sto3g.json (PySCF 2.14.0, conv_tol 1e-12),
 * water with r(OH) = 0.9572 A and angle 104.52 deg (the file's bohr coordinates, written
 * below in Angstrom), PySCF's built-in sto-3g written to an NWChem file so that the
 * parameters are PySCF's digits: "e_rhf", and "gradient.flat_richardson", central finite
 * differences of the energy (exponent step 1e-4 relative, coefficient step 1e-5 absolute)
 * with Richardson extrapolation. Tolerance: relative 1e-6, absolute 1e-8 for tiny values.
 * Prints each check; exits non-zero when any fails.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tutti.h"

static const double PYSCF_H2O_STO3G = -74.96292824643292;

/*
 * h2o_sto3g.json "gradient.flat_richardson": for each atom (O, H, H), each shell (O: s, s,
 * p from the SP shell; H: s), the three dE/dalpha_i then the three dE/dc_i.
 */
static const double PYSCF_FD[30] = {
    /* O 1s */
    -0.00454578252269413, 0.009360970764342292, 0.016171199121206816,
    1.171628446764809, 0.25308802271695185, -0.7113737924650345,
    /* O 2s */
    -0.006927601369552419, -0.03787756122893911, 0.02833851474853007,
    -0.06869106930669962, -0.033246210999019844, 0.009163384599257066,
    /* O 2p */
    -0.09035962881441541, 0.0892641506233285, 1.1930220281643462,
    -1.771296897364512, 0.7778341914862114, -0.5013380977914039,
    /* H 1s (atom 1) */
    0.0001222605181735594, -0.006504721318924833, -0.050006811009561676,
    0.01670402625109091, -0.005959731671130914, 0.0013775325176842062,
    /* H 1s (atom 2) */
    0.00012226035567690613, -0.0065047212430016516, -0.050006811009561676,
    0.016704025303700593, -0.005959733092216386, 0.0013775296755132631,
};

static const char *WATER_XYZ =
    "3\n"
    "water, r(OH) = 0.9572 A, angle 104.52 deg\n"
    "O   0.0   0.0         0.0\n"
    "H   0.0   0.7569503272636612   0.585882276618295\n"
    "H   0.0  -0.7569503272636612   0.585882276618295\n";

/* PySCF 2.14's built-in sto-3g for H and O, in NWChem format. */
static const char *PYSCF_STO3G =
    "BASIS \"ao basis\" SPHERICAL\n"
    "H    S\n"
    "      3.42525091             0.15432897\n"
    "      0.62391373             0.53532814\n"
    "      0.16885540             0.44463454\n"
    "O    S\n"
    "    130.70932                0.15432897\n"
    "     23.808861               0.53532814\n"
    "      6.4436083              0.44463454\n"
    "O    SP\n"
    "      5.0331513             -0.09996723             0.15591627\n"
    "      1.1695961              0.39951283             0.60768372\n"
    "      0.3803890              0.70011547             0.39195739\n"
    "END\n";

/* Writes PYSCF_STO3G to a new temporary file; its path goes to `path` (at least 32 bytes). */
static int write_basis_file(char *path) {
    strcpy(path, "/tmp/tutti_grad_sto3g_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return 0;
    FILE *file = fdopen(fd, "w");
    if (!file) {
        close(fd);
        return 0;
    }
    int ok = fputs(PYSCF_STO3G, file) >= 0;
    return fclose(file) == 0 && ok;
}

/*
 * The gradient in the reference's order (per shell: exponents, then coefficients), written
 * to `flat` (room for `capacity`); returns how many values, or -1 when the layout is broken.
 */
static int flatten(const TuttiRhfGradient *g, double *flat, int capacity) {
    int count = 0;
    for (int s = 0; s < g->n_shells; s++) {
        const TuttiGradientShell *shell = &g->shells[s];
        if (shell->offset < 0 || shell->offset + shell->primitives > g->n_primitives) return -1;
        if (count + 2 * shell->primitives > capacity) return -1;
        for (int i = 0; i < shell->primitives; i++)
            flat[count++] = g->grad_exponents[shell->offset + i];
        for (int i = 0; i < shell->primitives; i++)
            flat[count++] = g->grad_coefficients[shell->offset + i];
    }
    return count;
}

/* The largest |a - b| / max(|b|, 1) over n values. */
static double max_relative_difference(const double *a, const double *b, int n) {
    double worst = 0.0;
    for (int k = 0; k < n; k++) {
        double scale = fabs(b[k]) > 1.0 ? fabs(b[k]) : 1.0;
        double diff = fabs(a[k] - b[k]) / scale;
        if (diff > worst) worst = diff;
    }
    return worst;
}

int main(void) {
    char path[32];
    CHECK(write_basis_file(path), "wrote PySCF's sto-3g to %s", path);

    TuttiGradientOptions options;
    CHECK(tutti_gradient_options_default(&options) == TUTTI_OK &&
              options.rhf.resources.devices == TUTTI_ALL_DEVICES &&
              options.rhf.resources.kind == TUTTI_KIND_AUTO &&
              options.rhf.max_iterations == 128 && options.rhf.cartesian == 0 &&
              options.serial == 0,
          "default options: the default resources, 128 iterations, spherical, split");

    /* 1 simulated device, with the JSON document. */
    options.rhf.resources.kind = TUTTI_KIND_CPU;
    options.rhf.resources.devices = 1;
    TuttiRhfGradient one;
    char *json = NULL;
    int status = tutti_rhf_gradient(WATER_XYZ, path, &options, &one, &json);
    CHECK(status == TUTTI_OK && json != NULL, "h2o/sto-3g gradient on 1 device (%d: %s)", status,
          tutti_last_error());
    if (status != TUTTI_OK) {
        remove(path);
        return CHECK_SUMMARY();
    }
    CHECK(fabs(one.energy - PYSCF_H2O_STO3G) < 1e-8, "E = %.12f Eh, PySCF %.12f Eh", one.energy,
          PYSCF_H2O_STO3G);
    CHECK(one.n_shells == 5 && one.n_primitives == 15 && one.iterations > 1 &&
              one.devices == 1,
          "5 shells, 15 primitives (30 parameters), %d SCF iterations", one.iterations);
    static const int layout[5][4] = {{0, 0, 3, 0}, {0, 0, 3, 3}, {0, 1, 3, 6}, {1, 0, 3, 9},
                                     {2, 0, 3, 12}};
    int layout_ok = one.n_shells == 5;
    for (int s = 0; layout_ok && s < 5; s++) {
        const TuttiGradientShell *shell = &one.shells[s];
        layout_ok = shell->atom == layout[s][0] && shell->l == layout[s][1] &&
                    shell->primitives == layout[s][2] && shell->offset == layout[s][3];
    }
    CHECK(layout_ok, "shells (atom, l, primitives, offset): O s, O s, O p, H s, H s");
    CHECK(one.n_primitives == 15 && one.exponents[0] == 130.70932 &&
              one.coefficients[8] == 0.39195739 && one.exponents[14] == 0.1688554,
          "exponents and coefficients are the basis file's digits");

    double flat[30] = {0};
    int n = flatten(&one, flat, 30);
    CHECK(n == 30, "30 parameters in the reference's order");
    int within = 0;
    double worst = 0.0;
    for (int k = 0; k < n && n == 30; k++) {
        double diff = fabs(flat[k] - PYSCF_FD[k]);
        double allowed = fmax(1e-6 * fabs(PYSCF_FD[k]), 1e-8);
        if (diff <= allowed) within++;
        else printf("      parameter %d: %.12e vs PySCF FD %.12e\n", k, flat[k], PYSCF_FD[k]);
        if (diff / allowed > worst) worst = diff / allowed;
    }
    CHECK(within == 30,
          "all 30 dE/dparameter match PySCF finite differences (rel 1e-6, abs 1e-8; worst at "
          "%.2f of the tolerance)",
          worst);
    /* Renormalization makes E invariant under scaling one shell's coefficients. */
    double invariance = 0.0;
    for (int s = 0; s < one.n_shells; s++) {
        double sum = 0.0;
        for (int i = 0; i < one.shells[s].primitives; i++) {
            int k = one.shells[s].offset + i;
            sum += one.coefficients[k] * one.grad_coefficients[k];
        }
        invariance = fmax(invariance, fabs(sum));
    }
    CHECK(invariance < 1e-8, "sum_i c_i dE/dc_i = 0 per shell (largest %.1e)", invariance);
    CHECK(json[0] == '{' && strstr(json, "\"energy\"") && strstr(json, "\"grad_exponents\"") &&
              strstr(json, "\"grad_coefficients\"") && strstr(json, "\"elements\""),
          "the JSON has energy, basis shells with gradients, per-element sums");
    CHECK(tutti_free_c(json) == TUTTI_OK, "the JSON is released with tutti_free_c");

    /* 2 devices, and the serial reference: the same to round-off. */
    options.rhf.resources.devices = 2;
    TuttiRhfGradient two;
    status = tutti_rhf_gradient(WATER_XYZ, path, &options, &two, NULL);
    CHECK(status == TUTTI_OK, "h2o/sto-3g gradient on 2 devices (%d: %s)", status,
          tutti_last_error());
    if (status == TUTTI_OK) {
        double two_flat[30];
        int m = flatten(&two, two_flat, 30);
        double diff = m == 30 ? max_relative_difference(two_flat, flat, 30) : INFINITY;
        CHECK(m == 30 && two.devices == 2 &&
                  fabs((two.energy - one.energy) / one.energy) <= 1e-12 && diff <= 1e-10,
              "2 devices agree with 1: energy %.1e relative (<= 1e-12), gradient %.1e relative "
              "(<= 1e-10)",
              fabs((two.energy - one.energy) / one.energy), diff);
        CHECK(tutti_rhf_gradient_free(&two) == TUTTI_OK && two.shells == NULL &&
                  two.grad_exponents == NULL && two.n_primitives == 0,
              "tutti_rhf_gradient_free releases the arrays and resets the struct");
        CHECK(tutti_rhf_gradient_free(&two) == TUTTI_OK,
              "a second free of the reset struct is a no-op");
    }
    /* The serial loops from the same (1-device) SCF as `one`. */
    options.rhf.resources.devices = 1;
    options.serial = 1;
    TuttiRhfGradient serial;
    status = tutti_rhf_gradient(WATER_XYZ, path, &options, &serial, NULL);
    CHECK(status == TUTTI_OK, "serial reference implementation (%d: %s)", status,
          tutti_last_error());
    if (status == TUTTI_OK) {
        double serial_flat[30];
        int m = flatten(&serial, serial_flat, 30);
        double diff = m == 30 ? max_relative_difference(serial_flat, flat, 30) : INFINITY;
        CHECK(m == 30 && diff <= 1e-12, "serial agrees with split to %.1e relative", diff);
        /* Release each array on its own: also allowed by the contract. */
        CHECK(tutti_free_c(serial.shells) == TUTTI_OK &&
                  tutti_free_c(serial.exponents) == TUTTI_OK &&
                  tutti_free_c(serial.coefficients) == TUTTI_OK &&
                  tutti_free_c(serial.grad_exponents) == TUTTI_OK &&
                  tutti_free_c(serial.grad_coefficients) == TUTTI_OK,
              "each array can also be released with tutti_free_c");
    }
    CHECK(tutti_rhf_gradient_free(&one) == TUTTI_OK && tutti_rhf_gradient_free(NULL) == TUTTI_OK,
          "released; freeing NULL is a no-op");
    remove(path);

    /* Errors: a status, a message naming the function, outputs untouched. */
    TuttiRhfGradient untouched = {.energy = 42.0};
    json = NULL;
    status = tutti_rhf_gradient(WATER_XYZ, "no-such-basis", NULL, &untouched, &json);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT &&
              strstr(tutti_last_error(), "tutti_rhf_gradient: unknown basis set `no-such-basis`"),
          "an unknown basis is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    status = tutti_rhf_gradient("1\n\nH 0 0 0\n", "sto-3g", NULL, &untouched, &json);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "even"),
          "an odd electron count is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    status = tutti_rhf_gradient(NULL, "sto-3g", NULL, &untouched, NULL);
    CHECK(status == TUTTI_ERROR_NULL_POINTER && strstr(tutti_last_error(), "xyz_text"),
          "NULL xyz_text is TUTTI_ERROR_NULL_POINTER: \"%s\"", tutti_last_error());
    status = tutti_rhf_gradient(WATER_XYZ, NULL, NULL, &untouched, NULL);
    CHECK(status == TUTTI_ERROR_NULL_POINTER && strstr(tutti_last_error(), "basis"),
          "NULL basis is TUTTI_ERROR_NULL_POINTER: \"%s\"", tutti_last_error());
    status = tutti_rhf_gradient(WATER_XYZ, "sto-3g", NULL, NULL, NULL);
    CHECK(status == TUTTI_ERROR_NULL_POINTER && strstr(tutti_last_error(), "result_out"),
          "NULL result_out is TUTTI_ERROR_NULL_POINTER: \"%s\"", tutti_last_error());
    CHECK(tutti_gradient_options_default(NULL) == TUTTI_ERROR_NULL_POINTER,
          "NULL options to tutti_gradient_options_default is TUTTI_ERROR_NULL_POINTER");
    status = tutti_rhf_gradient(WATER_XYZ, "/nonexistent/basis.nw", NULL, &untouched, NULL);
    CHECK(status == TUTTI_ERROR_IO && strstr(tutti_last_error(), "/nonexistent/basis.nw"),
          "a missing basis file is TUTTI_ERROR_IO: \"%s\"", tutti_last_error());
    tutti_gradient_options_default(&options);
    options.serial = 2;
    status = tutti_rhf_gradient(WATER_XYZ, "sto-3g", &options, &untouched, NULL);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "options->serial"),
          "serial = 2 is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    tutti_gradient_options_default(&options);
    options.rhf.max_iterations = 2;
    status = tutti_rhf_gradient(WATER_XYZ, "sto-3g", &options, &untouched, NULL);
    CHECK(status == TUTTI_ERROR_NOT_CONVERGED,
          "2 SCF iterations is TUTTI_ERROR_NOT_CONVERGED: \"%s\"", tutti_last_error());
    CHECK(untouched.energy == 42.0 && untouched.shells == NULL && json == NULL,
          "outputs untouched after every failure");

    return CHECK_SUMMARY();
}
