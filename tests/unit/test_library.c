/* test_library.c — the librdkafka version check (src/kafka/library.c): a
 * run-time librdkafka older than the headers cstream was built with is
 * refused with both versions named; the same or a newer one runs. The
 * refusal of a real older library loaded at run time is
 * tests/unit/check_rdkafka_mismatch.sh (the current lane). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kafka/kafka_internal.h"
#include "cstream/error.h"

#define V(major, minor, rev)                                                                                           \
    ((int)(((unsigned)(major) << 24) | ((unsigned)(minor) << 16) | ((unsigned)(rev) << 8) | 0xffu))

static void older_library_is_refused(void **state) {
    (void)state;
    assert_int_equal(cs__rdkafka_check_version("cs_app_start", V(2, 14, 2), V(2, 0, 2)), CS_ERR_UNSUPPORTED);
    const char *msg = cs_errmsg();
    assert_non_null(strstr(msg, "cs_app_start"));
    assert_non_null(strstr(msg, "librdkafka 2.0.2, older than the librdkafka 2.14.2 headers"));
}

static void same_or_newer_library_runs(void **state) {
    (void)state;
    assert_int_equal(cs__rdkafka_check_version("cs_app_start", V(2, 0, 2), V(2, 0, 2)), CS_OK);
    assert_int_equal(cs__rdkafka_check_version("cs_app_start", V(2, 0, 2), V(2, 14, 2)), CS_OK);
}

static void prerelease_is_named_as_such(void **state) {
    (void)state;
    int pre = V(2, 15, 0) & ~0xff; /* 2.15.0, pre-release 0 */
    assert_int_equal(cs__rdkafka_check_version("x", V(2, 15, 0), pre), CS_ERR_UNSUPPORTED);
    assert_non_null(strstr(cs_errmsg(), "librdkafka 2.15.0-pre0, older than"));
}

static void running_version_is_the_loaded_one(void **state) {
    (void)state;
    char built[32], running[32];
    cs__rdkafka_versions(built, running, sizeof built);
    assert_string_equal(running, rd_kafka_version_str());
    assert_int_equal(cs__rdkafka_built_version(), RD_KAFKA_VERSION);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(older_library_is_refused),
        cmocka_unit_test(same_or_newer_library_runs),
        cmocka_unit_test(prerelease_is_named_as_such),
        cmocka_unit_test(running_version_is_the_loaded_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
