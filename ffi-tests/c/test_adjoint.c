/*
 * tutti_rhf_energy from C: RHF energies of water against PySCF, thread-count agreement, the
 * JSON summary released with tutti_free_c, and the error paths.
 *
 * Reference energies: PySCF 2.14.0, conv_tol 1e-12, water with r(OH) = 0.9572 A and angle
 * 104.52 deg (the reference files' bohr coordinates, written below in Angstrom), from
 * crates/tutti-adjoint/tests/data:
 * - h2o_sto3g.json, "e_rhf": PySCF's built-in sto-3g, whose digits differ slightly from
 *   the shipped basis_set_exchange export; this test writes those digits to an NWChem file
 *   and passes its path, so the comparison is one to one;
 * - h2o_def2tzvp.json, "e_rhf": made from the shipped def2-tzvp file itself, so the shipped
 *   name is compared directly.
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
static const double PYSCF_H2O_DEF2TZVP = -76.05904289524872;

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
    strcpy(path, "/tmp/tutti_sto3g_XXXXXX");
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

int main(void) {
    char path[32];
    CHECK(write_basis_file(path), "wrote PySCF's sto-3g to %s", path);

    /* H2O/sto-3g with PySCF's basis digits, on 1, 2 and 3 simulated devices. */
    TuttiRhfOptions options;
    CHECK(tutti_rhf_options_default(&options) == TUTTI_OK &&
              options.resources.kind == TUTTI_KIND_AUTO &&
              options.resources.devices == TUTTI_ALL_DEVICES && options.max_iterations == 128 &&
              options.cartesian == 0 && options.gradient_tolerance == 1e-5,
          "default options: the default resources, 128 iterations, spherical, "
          "gradient_tolerance 1e-5 (PySCF's criterion)");
    /* The density criterion first (gradient_tolerance 0), the reference of the checks below. */
    options.gradient_tolerance = 0.0;
    TuttiRhfResult serial, threaded;
    options.resources.kind = TUTTI_KIND_CPU;
    options.resources.devices = 1;
    int status = tutti_rhf_energy(WATER_XYZ, path, &options, &serial, NULL);
    CHECK(status == TUTTI_OK, "h2o/sto-3g on 1 device returns TUTTI_OK (%d: %s)", status,
          tutti_last_error());
    CHECK(fabs(serial.energy - PYSCF_H2O_STO3G) < 1e-8,
          "E = %.12f Eh, PySCF %.12f Eh, |diff| = %.1e < 1e-8", serial.energy, PYSCF_H2O_STO3G,
          fabs(serial.energy - PYSCF_H2O_STO3G));
    CHECK(serial.nao == 7 && serial.electrons == 10 && serial.converged == 1 &&
              serial.iterations > 1,
          "7 AOs, 10 electrons, converged in %d iterations", serial.iterations);
    CHECK(fabs(serial.electronic_energy + serial.nuclear_repulsion - serial.energy) < 1e-10 &&
              fabs(serial.nuclear_repulsion - 9.194964854506077) < 1e-10,
          "E = E_el + E_nuc, E_nuc = %.12f Eh (PySCF 9.194964854506)", serial.nuclear_repulsion);

    /* PySCF's criterion (orbital gradient below 1e-5): as few iterations, the same energy. */
    TuttiRhfResult by_gradient = {0};
    options.gradient_tolerance = 1e-5;
    status = tutti_rhf_energy(WATER_XYZ, path, &options, &by_gradient, NULL);
    CHECK(status == TUTTI_OK && by_gradient.converged == 1 &&
              by_gradient.iterations <= serial.iterations &&
              fabs(by_gradient.energy - serial.energy) < 1e-9 &&
              by_gradient.orbital_gradient < 1e-5,
          "gradient_tolerance 1e-5: %d iterations (density criterion: %d), |dE| = %.1e < 1e-9, "
          "orbital gradient %.1e < 1e-5 (%d)",
          by_gradient.iterations, serial.iterations, fabs(by_gradient.energy - serial.energy),
          by_gradient.orbital_gradient, status);
    options.gradient_tolerance = -1e-5;
    status = tutti_rhf_energy(WATER_XYZ, path, &options, &by_gradient, NULL);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT &&
              strstr(tutti_last_error(), "options->gradient_tolerance"),
          "a negative gradient_tolerance is TUTTI_ERROR_INVALID_ARGUMENT (%d: %s)", status,
          tutti_last_error());
    options.gradient_tolerance = 0.0;

    options.resources.devices = 2;
    char *json = NULL;
    status = tutti_rhf_energy(WATER_XYZ, path, &options, &threaded, &json);
    CHECK(status == TUTTI_OK && json != NULL, "h2o/sto-3g on 2 devices with JSON (%d: %s)",
          status, tutti_last_error());
    CHECK(fabs((threaded.energy - serial.energy) / serial.energy) <= 1e-12,
          "2 devices agree with 1 to %.1e relative (<= 1e-12)",
          fabs((threaded.energy - serial.energy) / serial.energy));
    if (json) {
        CHECK(json[0] == '{' && strstr(json, "\"energy\":") && strstr(json, "\"nao\":7") &&
                  strstr(json, "\"iterations\":") && strstr(json, "\"devices\":2"),
              "the JSON summary has energy, nao, iterations, devices");
        CHECK(tutti_free_c(json) == TUTTI_OK, "the JSON buffer is released with tutti_free_c");
    }
    TuttiRhfResult three;
    options.resources.devices = 3;
    status = tutti_rhf_energy(WATER_XYZ, path, &options, &three, NULL);
    CHECK(status == TUTTI_OK && fabs((three.energy - serial.energy) / serial.energy) <= 1e-12,
          "3 devices agree with 1 to %.1e relative (%d)",
          fabs((three.energy - serial.energy) / serial.energy), status);

    /* Device requests that cannot be met, and a cap the run cannot fit in: typed errors. */
    TuttiRhfResult refused = {0};
    refused.energy = 42.0;
    options.resources.devices = 0;
    status = tutti_rhf_energy(WATER_XYZ, path, &options, &refused, NULL);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "resources"),
          "zero devices: TUTTI_ERROR_INVALID_ARGUMENT (%d: %s)", status, tutti_last_error());
    const int ordinals[2] = {0, 100000};
    options.resources.devices = TUTTI_ALL_DEVICES;
    options.resources.ordinals = ordinals;
    options.resources.ordinal_count = 2;
    status = tutti_rhf_energy(WATER_XYZ, path, &options, &refused, NULL);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "100000"),
          "unknown ordinal: TUTTI_ERROR_INVALID_ARGUMENT (%d: %s)", status, tutti_last_error());
    options.resources.ordinals = NULL;
    options.resources.ordinal_count = 0;
    options.resources.devices = 2;
    options.resources.device_memory_bytes = 1024;
    status = tutti_rhf_energy(WATER_XYZ, path, &options, &refused, NULL);
    CHECK(status == TUTTI_ERROR_OUT_OF_MEMORY && strstr(tutti_last_error(), "memory plan"),
          "a 1 KiB device cap: TUTTI_ERROR_OUT_OF_MEMORY with the plan (%d: %s)", status,
          tutti_last_error());
    options.resources.device_memory_bytes = 0;
    options.resources.kind = TUTTI_KIND_GPU;
    options.resources.devices = 1;
    status = tutti_rhf_energy(WATER_XYZ, path, &options, &refused, NULL);
    CHECK(status == TUTTI_OK || status == TUTTI_ERROR_UNSUPPORTED ||
              status == TUTTI_ERROR_DEVICE,
          "a GPU request: runs on a GPU, or is unsupported / a device error here (%d: %s)",
          status, status == TUTTI_OK ? "" : tutti_last_error());
    CHECK(status == TUTTI_OK || refused.energy == 42.0, "a failed call writes no result");
    options.resources.kind = TUTTI_KIND_CPU;
    remove(path);

    /* The shipped sto-3g (basis_set_exchange digits): close to PySCF's, not identical. */
    TuttiRhfResult shipped;
    status = tutti_rhf_energy(WATER_XYZ, "STO-3G", NULL, &shipped, NULL);
    CHECK(status == TUTTI_OK && fabs(shipped.energy - PYSCF_H2O_STO3G) < 1e-6,
          "shipped sto-3g by name (NULL options): E = %.12f Eh, %.1e from PySCF's digits",
          shipped.energy, fabs(shipped.energy - PYSCF_H2O_STO3G));

    /* def2-tzvp (d and f on O): the reference was made from the shipped file. */
    TuttiRhfResult tzvp;
    status = tutti_rhf_energy(WATER_XYZ, "def2-tzvp", NULL, &tzvp, NULL);
    CHECK(status == TUTTI_OK && tzvp.nao == 43 && fabs(tzvp.energy - PYSCF_H2O_DEF2TZVP) < 1e-8,
          "h2o/def2-tzvp: E = %.12f Eh, PySCF %.12f Eh, |diff| = %.1e < 1e-8", tzvp.energy,
          PYSCF_H2O_DEF2TZVP, fabs(tzvp.energy - PYSCF_H2O_DEF2TZVP));

    /* The same water from atomic numbers and bohr coordinates. */
    const int numbers[3] = {8, 1, 1};
    const double bohr[9] = {0.0, 0.0, 0.0, 0.0, 1.4304288084282137, 1.107157044045246,
                            0.0, -1.4304288084282137, 1.107157044045246};
    TuttiRhfResult from_bohr;
    status = tutti_rhf_energy_bohr(3, numbers, bohr, "def2-tzvp", NULL, &from_bohr, NULL);
    CHECK(status == TUTTI_OK && fabs(from_bohr.energy - tzvp.energy) < 1e-10,
          "tutti_rhf_energy_bohr gives the same energy (%.1e)",
          fabs(from_bohr.energy - tzvp.energy));

    /* Errors: outputs untouched, a status and a message. */
    TuttiRhfResult untouched = {.energy = 42.0};
    json = NULL;
    status = tutti_rhf_energy(WATER_XYZ, "no-such-basis", NULL, &untouched, &json);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT &&
              strstr(tutti_last_error(), "tutti_rhf_energy: unknown basis set `no-such-basis`") &&
              strstr(tutti_last_error(), "def2-tzvp"),
          "an unknown basis is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    CHECK(untouched.energy == 42.0 && json == NULL, "outputs untouched on failure");
    status = tutti_rhf_energy(WATER_XYZ, "/nonexistent/basis.nw", NULL, &untouched, NULL);
    CHECK(status == TUTTI_ERROR_IO && strstr(tutti_last_error(), "/nonexistent/basis.nw"),
          "a missing basis file is TUTTI_ERROR_IO: \"%s\"", tutti_last_error());
    status = tutti_rhf_energy("1\n\nXx 0 0 0\n", "sto-3g", NULL, &untouched, NULL);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && strstr(tutti_last_error(), "`Xx`"),
          "an unknown element is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());
    status = tutti_rhf_energy(NULL, "sto-3g", NULL, &untouched, NULL);
    CHECK(status == TUTTI_ERROR_NULL_POINTER && strstr(tutti_last_error(), "xyz_text"),
          "NULL xyz_text is TUTTI_ERROR_NULL_POINTER: \"%s\"", tutti_last_error());
    tutti_rhf_options_default(&options);
    options.max_iterations = 2;
    status = tutti_rhf_energy(WATER_XYZ, "sto-3g", &options, &untouched, NULL);
    CHECK(status == TUTTI_ERROR_NOT_CONVERGED &&
              strcmp(tutti_status_name(status), "TUTTI_ERROR_NOT_CONVERGED") == 0 &&
              strstr(tutti_last_error(), "did not converge in 2 iterations") &&
              strstr(tutti_last_error(), "orbital gradient"),
          "2 iterations is TUTTI_ERROR_NOT_CONVERGED: \"%s\"", tutti_last_error());
    CHECK(untouched.energy == 42.0, "the result is untouched after every failure");

    return CHECK_SUMMARY();
}
