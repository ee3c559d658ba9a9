/* test_attempts_meta.c — the attempt counts in committed offset metadata:
 * round trips, the size bound, and hostile text from the cluster. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "attempts_meta.h"

static void round_trip(void **state) {
    (void)state;
    int64_t off[3] = {5, 9, 1000000000000LL};
    uint32_t att[3] = {1, 3, 4000000000u};
    char buf[CS_META_MAX];
    assert_int_equal(cs__meta_encode(buf, sizeof buf, false, off, att, 3), 3);
    assert_string_equal(buf, "cs1;c=0;a=5:1,9:3,1000000000000:4000000000");
    bool clean = true;
    int64_t o[8];
    uint32_t a[8];
    size_t n = 0;
    assert_int_equal(cs__meta_decode(buf, strlen(buf), &clean, o, a, 8, &n), 0);
    assert_false(clean);
    assert_int_equal(n, 3);
    assert_int_equal(o[2], off[2]);
    assert_int_equal(a[2], att[2]);
    assert_int_equal(cs__meta_encode(buf, sizeof buf, true, off, att, 0), 0);
    assert_string_equal(buf, "cs1;c=1;a=");
    assert_int_equal(cs__meta_decode(buf, strlen(buf), &clean, o, a, 8, &n), 0);
    assert_true(clean);
    assert_int_equal(n, 0);
}

static void bounded_keeps_the_lowest(void **state) {
    (void)state;
    int64_t off[200];
    uint32_t att[200];
    for (int i = 0; i < 200; i++) off[i] = 1000000 + i, att[i] = 2;
    char buf[CS_META_MAX];
    size_t written = cs__meta_encode(buf, sizeof buf, false, off, att, 200);
    assert_true(written > 10 && written < 200);
    assert_true(strlen(buf) < CS_META_MAX);
    bool clean;
    int64_t o[200];
    uint32_t a[200];
    size_t n;
    assert_int_equal(cs__meta_decode(buf, strlen(buf), &clean, o, a, 200, &n), 0);
    assert_int_equal(n, written);
    assert_int_equal(o[0], 1000000); /* the lowest offsets are the ones kept */
}

static void hostile_text_is_rejected(void **state) {
    (void)state;
    const char *bad[] = {"",
                         "cs2;c=0;a=",
                         "cs1;c=2;a=",
                         "cs1;c=0;b=",
                         "cs1;c=0;a=5",
                         "cs1;c=0;a=5:",
                         "cs1;c=0;a=:5",
                         "cs1;c=0;a=5:1,",
                         "cs1;c=0;a=9:1,5:1",
                         "cs1;c=0;a=5:1,5:2",
                         "cs1;c=0;a=-5:1",
                         "cs1;c=0;a=5:99999999999",
                         "cs1;c=0;a=99999999999999999999:1",
                         "cs1;c=0;a=5:1x",
                         "some consumer's own metadata"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        bool clean = false;
        int64_t o[4];
        uint32_t a[4];
        size_t n = 7;
        assert_int_equal(cs__meta_decode(bad[i], strlen(bad[i]), &clean, o, a, 4, &n), -1);
        assert_int_equal(n, 0);
        assert_true(clean); /* nothing is assumed from text that is not ours */
    }
    bool clean;
    size_t n;
    assert_int_equal(cs__meta_decode(NULL, 0, &clean, NULL, NULL, 0, &n), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(bounded_keeps_the_lowest),
        cmocka_unit_test(hostile_text_is_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
