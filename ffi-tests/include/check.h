/*
 * The check counter shared by the C tests of the C ABI: CHECK(cond, format, ...) prints
 * "ok" or "FAIL" with a description, and CHECK_SUMMARY() prints the closing
 * "N passed, M failed" line and gives the exit status.
 */
#ifndef TUTTI_FFI_CHECK_H
#define TUTTI_FFI_CHECK_H

#include <stdio.h>

static int failures = 0;
static int checks = 0;

/* Counts and prints one check; on failure also the condition and where it is. */
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        checks++;                                                              \
        int passed_ = (cond);                                                  \
        printf(passed_ ? "ok    " : "FAIL  ");                                 \
        printf(__VA_ARGS__);                                                   \
        if (!passed_) {                                                        \
            failures++;                                                        \
            printf("\n      %s:%d: %s is false", __FILE__, __LINE__, #cond); \
        }                                                                      \
        printf("\n");                                                         \
    } while (0)

/* Prints the closing line; evaluates to the process exit status. */
#define CHECK_SUMMARY() \
    (printf("%d passed, %d failed\n", checks - failures, failures), failures == 0 ? 0 : 1)

#endif
