/* test_skip_status.c — a group whose failed count is exactly CST_SKIPPED (77)
 * must not exit with the skip status: ctest would report 77 failures as a
 * skip. The group here has 77 tests that all fail on purpose; main checks the
 * status the wrapped cmocka_run_group_tests (support/cstest_skip.c, linked
 * into every test_ executable) returns, and that it still says "failed". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>

#include "cstest_skip.h"

static void fails_on_purpose(void **state) {
    (void)state;
    fail_msg("failing on purpose (one of %d)", CST_SKIPPED);
}

int main(void) {
    struct CMUnitTest tests[CST_SKIPPED];
    for (int i = 0; i < CST_SKIPPED; i++) tests[i] = (struct CMUnitTest)cmocka_unit_test(fails_on_purpose);
    int status = cmocka_run_group_tests(tests, NULL, NULL);
    printf("test_skip_status: %d failed tests gave exit status %d\n", CST_SKIPPED, status);
    if (status == CST_SKIPPED || status % 256 == CST_SKIPPED || status == 0) {
        printf("FAIL: that status reads as %s\n", status == 0 ? "a pass" : "a skip");
        return 1;
    }
    printf("OK: reported as a failure, not a skip\n");
    return 0;
}
