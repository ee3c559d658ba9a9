/* test_trace.c — the W3C traceparent check (src/core/trace.c): what cstream
 * carries and what it treats as absent. Pure function, no cluster. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/trace.h"

#define VALID "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static bool valid(const char *s) { return cs__traceparent_valid(s, strlen(s)); }

static void test_valid(void **state) {
    (void)state;
    assert_int_equal(strlen(VALID), CS_TRACEPARENT_LEN);
    assert_true(valid(VALID));
    assert_true(valid("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")); /* not sampled */
    assert_true(valid("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03")); /* later version, same size */
    assert_true(valid("00-00000000000000000000000000000001-0000000000000001-01")); /* ids with one bit set */
}

static void test_invalid(void **state) {
    (void)state;
    assert_false(cs__traceparent_valid(NULL, 0));
    assert_false(valid(""));
    assert_false(valid("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"));  /* uppercase */
    assert_false(valid("00-00000000000000000000000000000000-00f067aa0ba902b7-01"));  /* zero trace id */
    assert_false(valid("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"));  /* zero parent id */
    assert_false(valid("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));  /* forbidden version */
    assert_false(valid("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-")); /* 56 characters */
    assert_false(valid("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1"));   /* 54 characters */
    assert_false(valid("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));  /* separator */
    assert_false(valid("00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01"));  /* dash misplaced */
    assert_false(valid("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g"));  /* not hex */
    assert_false(valid(" 0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));  /* space */
    /* The length is the header's, not up to a NUL: a NUL inside is not hex. */
    char with_nul[CS_TRACEPARENT_LEN];
    memcpy(with_nul, VALID, sizeof with_nul);
    with_nul[40] = '\0';
    assert_false(cs__traceparent_valid(with_nul, sizeof with_nul));
    assert_true(cs__traceparent_valid(VALID "trailing bytes not looked at", CS_TRACEPARENT_LEN));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
