/*
 * The basic C ABI from C: version, device count, device info, errors, tutti_free_c.
 *
 * Built and run by `cargo xtask ffi-test` (plain and under AddressSanitizer). Prints each
 * check; exits non-zero when any fails.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tutti.h"

/* Whether the calling thread's last error contains `needle`. */
static int last_error_mentions(const char *needle) {
    const char *message = tutti_last_error();
    return message != NULL && strstr(message, needle) != NULL;
}

static void check_version(void) {
    int major = -1, minor = -1, patch = -1;
    int status = tutti_version(&major, &minor, &patch);
    CHECK(status == TUTTI_OK, "tutti_version returns TUTTI_OK (got %d)", status);
    CHECK(major == TUTTI_VERSION_MAJOR && minor == TUTTI_VERSION_MINOR &&
              patch == TUTTI_VERSION_PATCH,
          "library version %d.%d.%d equals the header's %d.%d.%d", major, minor, patch,
          TUTTI_VERSION_MAJOR, TUTTI_VERSION_MINOR, TUTTI_VERSION_PATCH);
    char text[64];
    snprintf(text, sizeof text, "%d.%d.%d", major, minor, patch);
    CHECK(strcmp(text, TUTTI_VERSION) == 0, "TUTTI_VERSION \"%s\" equals \"%s\"", TUTTI_VERSION,
          text);
    CHECK(strcmp(tutti_last_error(), "") == 0, "tutti_last_error is empty after a success");

    /* Error path: a NULL output. Nothing is written to the others. */
    major = minor = -1;
    status = tutti_version(&major, &minor, NULL);
    CHECK(status == TUTTI_ERROR_NULL_POINTER,
          "tutti_version(.., NULL) returns TUTTI_ERROR_NULL_POINTER (got %d)", status);
    CHECK(major == -1 && minor == -1, "outputs are untouched on failure");
    CHECK(last_error_mentions("patch"), "the message names the argument: \"%s\"",
          tutti_last_error());
    CHECK(strcmp(tutti_status_name(status), "TUTTI_ERROR_NULL_POINTER") == 0,
          "tutti_status_name(%d) is \"%s\"", status, tutti_status_name(status));
}

static int check_device_count(void) {
    int count = -1;
    int status = tutti_device_count(TUTTI_KIND_CPU, &count);
    CHECK(status == TUTTI_OK, "tutti_device_count(CPU) returns TUTTI_OK (got %d: %s)", status,
          tutti_last_error());
    CHECK(count >= 1 && count <= TUTTI_MAX_SIMULATED_DEVICES * 1024,
          "the CPU device count (host cores) is %d", count);

    int auto_count = -1;
    status = tutti_device_count(TUTTI_KIND_AUTO, &auto_count);
    CHECK(status == TUTTI_OK && auto_count >= 1, "tutti_device_count(AUTO) = %d", auto_count);

    int gpus = -1;
    status = tutti_device_count(TUTTI_KIND_GPU, &gpus);
    CHECK((status == TUTTI_OK && gpus >= 0) ||
              (status < 0 && gpus == -1 && strlen(tutti_last_error()) > 0),
          "tutti_device_count(GPU): status %d (%s), count %d, message \"%s\"", status,
          tutti_status_name(status), gpus, tutti_last_error());
    if (status == TUTTI_OK && gpus == 0) {
        CHECK(auto_count == count, "with no GPU, AUTO counts the CPU devices (%d)", auto_count);
    }

    int untouched = -7;
    status = tutti_device_count(42, &untouched);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && untouched == -7,
          "an unknown kind is TUTTI_ERROR_INVALID_ARGUMENT (got %d)", status);
    CHECK(last_error_mentions("kind"), "the message names `kind`: \"%s\"", tutti_last_error());

    status = tutti_device_count(TUTTI_KIND_CPU, NULL);
    CHECK(status == TUTTI_ERROR_NULL_POINTER, "a NULL count is TUTTI_ERROR_NULL_POINTER");
    return count;
}

static void check_device_info(int cores) {
    int count = cores >= 2 ? 2 : 1;
    for (int index = 0; index < count; index++) {
        TuttiDeviceInfo info;
        memset(&info, 0xff, sizeof info);
        int status = tutti_device_info(TUTTI_KIND_CPU, count, index, &info);
        CHECK(status == TUTTI_OK, "tutti_device_info(CPU, %d, %d) returns TUTTI_OK (got %d: %s)",
              count, index, status, tutti_last_error());
        if (status != TUTTI_OK) {
            continue;
        }
        CHECK(info.index == index, "info.index %d equals the requested index %d", info.index,
              index);
        CHECK(info.kind == TUTTI_KIND_CPU, "info.kind is TUTTI_KIND_CPU (%d)", info.kind);
        CHECK(info.ordinal == index, "info.ordinal is %d", info.ordinal);
        CHECK(info.threads >= 1 && info.threads <= cores, "info.threads %d is in 1..=%d",
              info.threads, cores);
        CHECK(info.total_bytes > 0 && info.free_bytes <= info.total_bytes,
              "free %llu <= total %llu bytes", (unsigned long long)info.free_bytes,
              (unsigned long long)info.total_bytes);
        CHECK(info.name != NULL && strcmp(info.name, "host (simulated)") == 0,
              "info.name is \"%s\"", info.name ? info.name : "(null)");
        status = tutti_free_c(info.name);
        CHECK(status == TUTTI_OK, "tutti_free_c(info.name) returns TUTTI_OK (got %d)", status);
    }

    /* Error paths: the output stays untouched and the message names the argument. */
    TuttiDeviceInfo info;
    memset(&info, 0, sizeof info);
    int status = tutti_device_info(TUTTI_KIND_CPU, count, count, &info);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT,
          "index %d of %d is TUTTI_ERROR_INVALID_ARGUMENT (got %d)", count, count, status);
    CHECK(last_error_mentions("index"), "the message names `index`: \"%s\"", tutti_last_error());
    CHECK(info.name == NULL && info.total_bytes == 0, "info is untouched on failure");

    status = tutti_device_info(TUTTI_KIND_CPU, 0, 0, &info);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT && last_error_mentions("count"),
          "count 0 is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"", tutti_last_error());

    status = tutti_device_info(TUTTI_KIND_CPU, TUTTI_MAX_SIMULATED_DEVICES + 1, 0, &info);
    CHECK(status == TUTTI_ERROR_INVALID_ARGUMENT,
          "%d simulated devices is TUTTI_ERROR_INVALID_ARGUMENT: \"%s\"",
          TUTTI_MAX_SIMULATED_DEVICES + 1, tutti_last_error());

    status = tutti_device_info(TUTTI_KIND_CPU, 1, 0, NULL);
    CHECK(status == TUTTI_ERROR_NULL_POINTER && last_error_mentions("out"),
          "a NULL out is TUTTI_ERROR_NULL_POINTER: \"%s\"", tutti_last_error());
}

static void check_free_c(void) {
    int status = tutti_free_c(NULL);
    CHECK(status == TUTTI_OK, "tutti_free_c(NULL) is a no-op returning TUTTI_OK");
    CHECK(strcmp(tutti_status_name(INT_MIN), "TUTTI_ERROR_UNKNOWN") == 0,
          "an unknown status is named TUTTI_ERROR_UNKNOWN");
}

int main(void) {
    check_version();
    int cores = check_device_count();
    check_device_info(cores > 0 ? cores : 1);
    check_free_c();
    return CHECK_SUMMARY();
}
