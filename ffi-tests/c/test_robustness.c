/*
 * The C ABI against the bad inputs of the hardening review (docs/c-abi.md, "Contract"): each
 * must give an error status (or, where the input is legal, TUTTI_OK), never a crash, an
 * abort, a read past the caller's memory or a hang.
 *
 * Every case runs in a fork()ed child that must exit 0 within its alarm, so one crash is one
 * clear failure line instead of a dead test binary. The parent never calls tutti itself (a
 * child of a process with running library threads could deadlock). Cases: inconsistent train
 * shapes with the cores right before a PROT_NONE page (H5); aliased outputs (M3); foreign,
 * stack, interior, page-start and stale pointers to tutti_free_c and as train handles (M2);
 * allocation sizes from a tiny input: an XYZ count of 10^11, a fit with INT_MAX residuals and
 * 1000 parameters, SRC with chi_out = INT_MAX (H1); stderr a broken pipe (M1). Runs in
 * about a second, also under AddressSanitizer/UBSan. Exits non-zero when a check fails.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "tutti.h"

static const char *name_of(int status) { return tutti_status_name(status); }

/* Two pages, the second PROT_NONE; returns the first (NULL on failure). */
static unsigned char *guarded_page(size_t *page_out) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *base = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    if (mprotect((unsigned char *)base + page, page, PROT_NONE) != 0) return NULL;
    *page_out = page;
    return base;
}

/* A train from n_sites MPS shapes and cores; returns the status, *out the handle. */
static int mps(int n_sites, const int *shapes, const double *const *cores, TuttiTrain **out) {
    *out = NULL;
    return tutti_train_from_arrays(TUTTI_TRAIN_MPS, TUTTI_DTYPE_FLOAT64, n_sites, shapes, cores, out);
}

/* ---- H5: shapes are checked in full before any core is read ------------------------- */
static void case_inconsistent_shapes(void) {
    size_t page;
    unsigned char *base = guarded_page(&page);
    CHECK(base != NULL, "mmap and mprotect a guard page");
    if (!base) return;
    /* Two cores of two doubles each; the second ends exactly at the guard page. */
    double *end = (double *)(base + page);
    double *core0 = end - 4, *core1 = end - 2;
    core0[0] = 0.5, core0[1] = 0.25, core1[0] = 1.0, core1[1] = -1.0;
    const double *cores[2] = {core0, core1};
    static const int bad[][6] = {
        {1, 2, 100000, 1, 2, 1}, /* the review's case: bond 100000 against 1 */
        {1, 2, 1, 1, 2, 100000}, /* last right bond not 1: site 1 would claim 200000 doubles */
        {100000, 2, 1, 1, 2, 1}, /* first left bond not 1 */
        {1, 2, 0, 0, 2, 1},      /* a zero dimension */
        {1, 2, -3, -3, 2, 1},    /* a negative one */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TuttiTrain *train;
        int status = mps(2, bad[i], cores, &train);
        CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && train == NULL,
              "shapes {%d,%d,%d, %d,%d,%d} before a guard page: INVALID_ARGUMENT (got %s: %s)",
              bad[i][0], bad[i][1], bad[i][2], bad[i][3], bad[i][4], bad[i][5], name_of(status),
              tutti_last_error());
    }
    static const int good[6] = {1, 2, 1, 1, 2, 1};
    TuttiTrain *train;
    int status = mps(2, good, cores, &train);
    CHECK(status == TUTTI_OK, "consistent shapes ending at the guard page: OK (got %s: %s)",
          name_of(status), tutti_last_error());
    CHECK(tutti_train_free(train) == TUTTI_OK, "the train is released");
}

/* ---- M3: an output overlapping another output or an input ---------------------------- */
static void case_aliased_outputs(void) {
    double positions[6] = {0, 0, 0, 1, 0, 0}, masses[2] = {1, 1};
    double out[6] = {7, 7, 7, 7, 7, 7};
    int status = tutti_fmm(2, positions, masses, NULL, out, out);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "tutti_fmm(potential_out == accel_out): %s (%s)",
          name_of(status), tutti_last_error());
    CHECK(out[0] == 7 && out[5] == 7, "nothing was written");
    status = tutti_fmm(2, positions, masses, NULL, NULL, positions);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "tutti_fmm(accel_out == positions): %s (%s)",
          name_of(status), tutti_last_error());
    CHECK(positions[3] == 1 && positions[0] == 0, "the positions are untouched");
    status = tutti_direct_sum(2, positions, masses, 0.0, out, out + 1);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "tutti_direct_sum(accel_out inside potential_out): %s",
          name_of(status));
    double potential[2], accel[6];
    status = tutti_fmm(2, positions, masses, NULL, potential, accel);
    CHECK(status == TUTTI_OK && potential[0] == -1.0, "distinct outputs: OK, phi_0 = -1 (%g)", potential[0]);

    int v = -1;
    status = tutti_version(&v, &v, &v);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && v == -1, "tutti_version(&v, &v, &v): %s",
          name_of(status));
}

/* ---- M2: pointers tutti did not hand out, or already released ------------------------ */
static void case_foreign_pointers(void) {
    int status;
    void *heap = malloc(64);
    status = tutti_free_c((char *)heap + 16);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "tutti_free_c(malloc'd + 16): %s", name_of(status));
    status = tutti_free_c(heap);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "tutti_free_c(malloc'd): %s", name_of(status));
    free(heap);

    _Alignas(16) unsigned char stack[64];
    memset(stack, 0, sizeof stack);
    memcpy(stack, "fubittut", 8); /* "tuttibuf" read as a little-endian u64 */
    stack[8] = 16;                /* payload_bytes */
    status = tutti_free_c(stack + 16);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "tutti_free_c(a stack buffer with a fake header): %s",
          name_of(status));

    TuttiDeviceInfo info;
    status = tutti_device_info(TUTTI_KIND_CPU, 1, 0, &info);
    CHECK(status == TUTTI_OK, "tutti_device_info gives a tutti buffer (%s)", name_of(status));
    if (status == TUTTI_OK) {
        status = tutti_free_c(info.name + 16);
        CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "tutti_free_c(interior of a live buffer): %s",
              name_of(status));
        status = tutti_free_c(info.name + 1);
        CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "tutti_free_c(misaligned interior): %s",
              name_of(status));
        CHECK(tutti_free_c(info.name) == TUTTI_OK, "the live buffer itself is released");
        status = tutti_free_c(info.name);
        CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "an immediate double free: %s", name_of(status));
    }

    /* The start of a page right after an unmapped one: the header would be unreadable. */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *pages = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(pages != MAP_FAILED, "mmap two pages");
    if (pages != MAP_FAILED) {
        munmap(pages, page);
        status = tutti_free_c(pages + page);
        CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "tutti_free_c(page start after an unmapped page): %s",
              name_of(status));
        status = tutti_train_free((TuttiTrain *)(void *)pages);
        CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "tutti_train_free(an unmapped page): %s",
              name_of(status));
        double norm = -1;
        status = tutti_train_norm((const TuttiTrain *)(void *)pages, &norm);
        CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && norm == -1, "tutti_train_norm(an unmapped page): %s",
              name_of(status));
        munmap(pages + page, page);
    }
}

static void case_stale_double_free(void) {
    /* A released buffer, then a live one of another size; releasing the first again must be
     * refused without reading its (freed) header. Same address = the documented ABA case. */
    TuttiDeviceInfo info;
    int status = tutti_device_info(TUTTI_KIND_CPU, 1, 0, &info);
    CHECK(status == TUTTI_OK, "tutti_device_info (%s)", name_of(status));
    if (status != TUTTI_OK) return;
    char *stale = info.name;
    CHECK(tutti_free_c(stale) == TUTTI_OK, "the first buffer is released");
    char *json = NULL;
    TuttiRhfResult result;
    status = tutti_rhf_energy("2\nH2\nH 0 0 0\nH 0 0 0.74\n", "sto-3g", NULL, &result, &json);
    CHECK(status == TUTTI_OK, "an RHF energy gives a newer buffer (%s: %s)", name_of(status),
          tutti_last_error());
    if ((void *)json != (void *)stale) {
        status = tutti_free_c(stale);
        CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "the stale pointer, freed again: %s",
              name_of(status));
    } else {
        printf("note  the newer buffer reused the stale address (ABA, undetectable by design)\n");
    }
    CHECK(tutti_free_c(json) == TUTTI_OK, "the newer buffer is still live and released");

    /* The same for train handles. */
    static const int shapes[3] = {1, 2, 1};
    static const double data[2] = {1, 2};
    const double *cores[1] = {data};
    TuttiTrain *train;
    CHECK(mps(1, shapes, cores, &train) == TUTTI_OK, "a train");
    CHECK(tutti_train_free(train) == TUTTI_OK, "released");
    status = tutti_train_free(train);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT, "the same handle again: %s", name_of(status));

    TuttiRhfGradient g = {0};
    CHECK(tutti_rhf_gradient_free(&g) == TUTTI_OK, "a zero-initialised TuttiRhfGradient is a no-op");
}

/* ---- H1: sizes from a tiny input must be errors, never an abort ---------------------- */
static void case_huge_xyz_count(void) {
    TuttiRhfResult result;
    memset(&result, 0, sizeof result);
    int status = tutti_rhf_energy("100000000000\nx\nH 0 0 0\n", "sto-3g", NULL, &result, NULL);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT || status == TUTTI_ERROR_OUT_OF_MEMORY,
          "XYZ count 10^11 with one atom line: an error, not an abort (got %s: %s)", name_of(status),
          tutti_last_error());
}

static int refuse(void *user, int e, const double *p, int n, double *r, int m, double *j) {
    (void)user, (void)e, (void)p, (void)n, (void)r, (void)m, (void)j;
    return 1;
}

static void case_huge_fit(void) {
    enum { N = 1000 };
    static double initial[N], parameters[N];
    int counts[1] = {INT_MAX};
    TuttiFitResult result;
    int status = tutti_fit(refuse, NULL, 1, counts, N, initial, NULL, parameters, NULL, &result);
    CHECK(status == TUTTI_ERROR_OUT_OF_MEMORY || status == TUTTI_ERROR_INVALID_ARGUMENT,
          "tutti_fit with INT_MAX residuals and 1000 parameters: an error, not an abort (got %s: %s)",
          name_of(status), tutti_last_error());
}

static TuttiTrain *ones(int n_sites) {
    static const int shape[3] = {1, 2, 1};
    static const double data[2] = {1, 1};
    int shapes[3 * 8];
    const double *cores[8];
    for (int k = 0; k < n_sites; k++) {
        memcpy(&shapes[3 * k], shape, sizeof shape);
        cores[k] = data;
    }
    TuttiTrain *train;
    int status = mps(n_sites, shapes, cores, &train);
    CHECK(status == TUTTI_OK, "a %d-site bond-1 train (%s)", n_sites, name_of(status));
    return train;
}

static void case_huge_chi(void) {
    TuttiTrain *psi = ones(3);
    const TuttiTrain *stack[1] = {psi};
    TuttiSrcOptions options;
    tutti_src_options_default(&options);
    options.chi_out = INT_MAX;
    TuttiTrain *out = NULL;
    int status = tutti_src(stack, 1, &options, &out);
    CHECK(status == TUTTI_OK, "tutti_src with chi_out = INT_MAX on a 3-site bond-1 train: OK (got %s: %s)",
          name_of(status), tutti_last_error());
    double norm = 0;
    if (status == TUTTI_OK) {
        tutti_train_norm(out, &norm);
        CHECK(norm > 2.828 && norm < 2.829, "its norm is sqrt(8) (%g)", norm);
    }
    tutti_train_free(out);
    tutti_train_free(psi);
}

/* ---- M1: the library must not depend on a writable stderr ---------------------------- */
static void case_broken_stderr(void) {
    int fds[2];
    CHECK(pipe(fds) == 0, "a pipe");
    signal(SIGPIPE, SIG_IGN);
    close(fds[0]); /* no reader: every write to fd 2 fails with EPIPE */
    CHECK(dup2(fds[1], 2) == 2, "stderr is the pipe's write end");
    TuttiTrain *psi = ones(2);
    const TuttiTrain *stack[1] = {psi};
    TuttiSrcOptions options;
    tutti_src_options_default(&options);
    options.chi_out = 2;
    for (int call = 1; call <= 2; call++) {
        TuttiTrain *out = NULL;
        int status = tutti_src(stack, 1, &options, &out);
        CHECK(status == TUTTI_OK, "2-site tutti_src with stderr a broken pipe, call %d: OK (got %s: %s)",
              call, name_of(status), tutti_last_error());
        tutti_train_free(out);
    }
    tutti_train_free(psi);
}

/* Runs `body` in a child that must exit 0 within `seconds`. */
static void run_case(const char *name, void (*body)(void), unsigned seconds) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        CHECK(0, "%s: fork failed", name);
        return;
    }
    if (pid == 0) {
        failures = 0; /* this child's checks only */
        alarm(seconds);
        printf("--- %s\n", name);
        body();
        fflush(stdout);
        _exit(failures == 0 ? 0 : 1);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    if (WIFSIGNALED(status)) {
        CHECK(0, "%s: the child died of signal %d (%s)", name, WTERMSIG(status),
              WTERMSIG(status) == SIGALRM ? "timed out" : strsignal(WTERMSIG(status)));
    } else {
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: the child exited %d", name,
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

int main(void) {
    run_case("H5 inconsistent shapes before a guard page", case_inconsistent_shapes, 30);
    run_case("M3 aliased outputs", case_aliased_outputs, 30);
    run_case("M2 foreign pointers", case_foreign_pointers, 30);
    run_case("M2 stale double free", case_stale_double_free, 30);
    run_case("H1 XYZ count 10^11", case_huge_xyz_count, 30);
    run_case("H1 fit with INT_MAX residuals", case_huge_fit, 30);
    run_case("H1 SRC with chi_out = INT_MAX", case_huge_chi, 30);
    run_case("M1 stderr a broken pipe", case_broken_stderr, 30);
    return CHECK_SUMMARY();
}
