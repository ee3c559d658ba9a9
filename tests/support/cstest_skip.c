/* cstest_skip.c — skips that ctest sees (cst_skip in cstest.h).
 *
 * cmocka counts a skipped test as passed in its exit status, so ctest would
 * report a binary whose tests all skipped as "Passed". Every test binary links
 * this file with cmocka's _skip and _cmocka_run_group_tests wrapped
 * (-Wl,--wrap, tests/CMakeLists.txt), which needs no change to any main:
 *  - a skip with a reason (cst_skip) is counted, printed, and appended to the
 *    file named by CSTEST_SKIP_LOG (set by ctest; `make test` lists it);
 *  - a bare skip() fails its test instead: every skip says why;
 *  - a group with no failure but a skip makes the binary exit with
 *    CST_SKIPPED, every ctest entry's SKIP_RETURN_CODE.
 * cmocka runs the tests of a group one after the other on the main thread, so
 * the state here needs no lock. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cstest_skip.h"

static char reason[512]; /* "<test>: <why>", set by cst_skip until its skip() */
static bool has_reason;
static int skipped;

void cst_skip_reason_(const char *test, const char *fmt, ...) {
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(reason, sizeof reason, "%s: %s", test, why);
    has_reason = true;
}

/* One line "<ctest entry>: <test>: <why>" to the list `make test` prints. */
static void log_skip(void) {
    const char *path = getenv("CSTEST_SKIP_LOG");
    if (!path || !*path) return;
    const char *entry = getenv("CSTEST_NAME");
    char line[700];
    int n = snprintf(line, sizeof line, "%s: %s\n", entry ? entry : "?", reason);
    if (n <= 0) return;
    if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644); /* O_APPEND: entries run in parallel */
    if (fd < 0) {
        fprintf(stderr, "cstest: cannot append to the skip list %s\n", path);
        return;
    }
    ssize_t w = write(fd, line, (size_t)n);
    (void)w;
    close(fd);
}

void __real__skip(const char *const file, const int line);
void __wrap__skip(const char *const file, const int line) {
    if (!has_reason) {
        print_error("ERROR: skip() without a reason at %s:%d: use cst_skip(\"why\"), so that the skip is listed\n",
                    file, line);
        _fail(file, line);
        return;
    }
    has_reason = false;
    skipped++;
    printf("[ SKIP     ] %s\n", reason);
    fflush(stdout);
    log_skip();
    __real__skip(file, line);
}

int __real__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests, const size_t num_tests,
                                   CMFixtureFunction group_setup, CMFixtureFunction group_teardown);
int __wrap__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests, const size_t num_tests,
                                   CMFixtureFunction group_setup, CMFixtureFunction group_teardown) {
    /* CST_FILTER / CST_SKIP (cmocka patterns, * and ?) pick the tests of
     * any test binary: tests/CMakeLists.txt runs some binaries again under
     * another configuration, without the tests that do not apply to it. */
    if (getenv("CST_FILTER") && *getenv("CST_FILTER")) cmocka_set_test_filter(getenv("CST_FILTER"));
    if (getenv("CST_SKIP") && *getenv("CST_SKIP")) cmocka_set_skip_filter(getenv("CST_SKIP"));
    int failed = __real__cmocka_run_group_tests(group_name, tests, num_tests, group_setup, group_teardown);
    if (failed == 0 && skipped > 0) {
        printf("cstest: no test failed, %d skipped: exit status %d (ctest reports the entry as skipped)\n", skipped,
               CST_SKIPPED);
        return CST_SKIPPED;
    }
    /* A failed count that reads as the skip status (77, or 77 + 256k once
     * the exit status is cut to 8 bits) would report failures as a skip:
     * failures are reported as at most CST_SKIPPED - 1. */
    return failed > 0 && failed >= CST_SKIPPED ? CST_SKIPPED - 1 : failed;
}
