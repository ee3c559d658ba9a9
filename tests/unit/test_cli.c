/* test_cli.c — the command line of cs_app_main (src/ops/cli.c) without
 * running an app: the parser, the --partition number, and reset-offsets'
 * flags, times and numbers (src/ops/cli_reset.c; the command itself runs on
 * the real broker, tests/real/test_reset_offsets.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "ops/cli.h"

static cs_app *app;

static int parse(cs__cli_options *o, int argc, char **argv) {
    FILE *null = fopen("/dev/null", "w");
    memset(o, 0, sizeof *o);
    int rc = cs__cli_parse(argc, argv, "svc", app, o, null, null);
    fclose(null);
    return rc;
}

static void publish_flags(void **state) {
    (void)state;
    char *argv[] = {"svc",      "publish", "orders",      "--key",         "k",
                    "--header", "a=b",     "--header=c=", "--partition=3", "--lines"};
    cs__cli_options o;
    assert_int_equal(parse(&o, 10, argv), 0);
    assert_string_equal(o.command, "publish");
    assert_string_equal(o.topic, "orders");
    assert_string_equal(o.key, "k");
    assert_int_equal(o.n_headers, 2);
    assert_string_equal(o.headers[1], "c=");
    assert_string_equal(o.partition, "3");
    assert_true(o.lines);
    cs__cli_options_free(&o);
}

static void usage_errors(void **state) {
    (void)state;
    char *missing[] = {"svc", "publish", "t", "--partition"};
    char *no_eq[] = {"svc", "publish", "t", "--header", "nope"};
    char *no_topic[] = {"svc", "publish"};
    char *docs_http[] = {"svc", "docs", "--http", "1.2.3.4:1"};
    char *unknown[] = {"svc", "serve"};
    cs__cli_options o;
    assert_int_equal(parse(&o, 4, missing), 2);
    cs__cli_options_free(&o);
    assert_int_equal(parse(&o, 5, no_eq), 2);
    cs__cli_options_free(&o);
    assert_int_equal(parse(&o, 2, no_topic), 2);
    cs__cli_options_free(&o);
    assert_int_equal(parse(&o, 4, docs_http), 2);
    cs__cli_options_free(&o);
    assert_int_equal(parse(&o, 2, unknown), 2);
    cs__cli_options_free(&o);
}

/* Found while writing the fuzz harness: strtol took "" as 0, so
 * `publish --partition=` wrote to partition 0 instead of failing. */
static void partition_is_plain_digits(void **state) {
    (void)state;
    int32_t p = -5;
    assert_int_equal(cs__cli_partition("0", &p), 0);
    assert_int_equal(p, 0);
    assert_int_equal(cs__cli_partition("2147483647", &p), 0);
    assert_int_equal(p, 2147483647);
    const char *bad[] = {"", " 7", "+7", "-0", "-1", "7 ", "7x", "0x10", "2147483648", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        p = -5;
        assert_int_equal(cs__cli_partition(bad[i], &p), -1);
        assert_int_equal(p, -5); /* untouched */
    }
}

static void reset_offsets_flags(void **state) {
    (void)state;
    char *argv[] = {"svc", "reset-offsets", "--group",    "g",  "--topic",
                    "a",   "--topic=b:0,2", "--shift-by", "-5", "--execute"};
    cs__cli_options o;
    assert_int_equal(parse(&o, 10, argv), 0);
    assert_string_equal(o.command, "reset-offsets");
    assert_string_equal(o.group, "g");
    assert_int_equal(o.n_scopes, 2);
    assert_string_equal(o.scopes[1], "b:0,2");
    assert_string_equal(o.reset_to, "shift");
    assert_string_equal(o.reset_value, "-5");
    assert_true(o.execute);
    cs__cli_options_free(&o);

    char *bare[] = {"svc", "reset-offsets", "--to-latest"};
    assert_int_equal(parse(&o, 3, bare), 0);
    assert_string_equal(o.reset_to, "latest");
    assert_false(o.execute); /* a dry run unless asked */
    cs__cli_options_free(&o);

    char *none[] = {"svc", "reset-offsets", "--group", "g"};
    char *two[] = {"svc", "reset-offsets", "--to-earliest", "--to-offset", "3"};
    char *no_value[] = {"svc", "reset-offsets", "--to-offset"};
    char *http[] = {"svc", "reset-offsets", "--to-earliest", "--http", "1.2.3.4:1"};
    char *execute_elsewhere[] = {"svc", "run", "--execute"};
    assert_int_equal(parse(&o, 4, none), 2);
    cs__cli_options_free(&o);
    assert_int_equal(parse(&o, 5, two), 2);
    cs__cli_options_free(&o);
    assert_int_equal(parse(&o, 3, no_value), 2);
    cs__cli_options_free(&o);
    assert_int_equal(parse(&o, 5, http), 2);
    cs__cli_options_free(&o);
    assert_int_equal(parse(&o, 3, execute_elsewhere), 2);
    cs__cli_options_free(&o);
}

static void reset_offsets_times_and_numbers(void **state) {
    (void)state;
    int64_t ms = 0;
    assert_int_equal(cs__cli_parse_datetime("1970-01-01T00:00:00Z", &ms), 0);
    assert_int_equal(ms, 0);
    assert_int_equal(cs__cli_parse_datetime("2026-12-01T10:00:00.250Z", &ms), 0);
    assert_int_equal(ms, 1796119200250LL);
    assert_int_equal(cs__cli_parse_datetime("2026-12-01T12:00:00.250+02:00", &ms), 0);
    assert_int_equal(ms, 1796119200250LL); /* the same instant */
    assert_int_equal(cs__cli_parse_datetime("2026-12-01T05:30:00-04:30", &ms), 0);
    assert_int_equal(ms, 1796119200000LL);
    const char *bad[] = {"",
                         "2026-12-01",
                         "2026-12-01T10:00:00",  /* no zone: local time is a trap */
                         "2026-13-01T10:00:00Z", /* month 13 */
                         "2026-12-01T10:00:00.Z",
                         "2026-12-01T10:00:00+2:00",
                         "2026-12-01T10:00:00Zjunk",
                         "1796119200250"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ms = -7;
        if (cs__cli_parse_datetime(bad[i], &ms) != -1) fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(ms, -7);
    }
    int64_t v = 0;
    assert_int_equal(cs__cli_parse_i64("-12", &v), 0);
    assert_int_equal(v, -12);
    assert_int_equal(cs__cli_parse_i64("+3", &v), 0);
    assert_int_equal(v, 3);
    const char *bad_n[] = {"", "-", " 1", "1 ", "1x", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad_n / sizeof *bad_n; i++) assert_int_equal(cs__cli_parse_i64(bad_n[i], &v), -1);
}

int main(void) {
    app = cs_app_new("svc", "1.0.0");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(publish_flags),
        cmocka_unit_test(usage_errors),
        cmocka_unit_test(partition_is_plain_digits),
        cmocka_unit_test(reset_offsets_flags),
        cmocka_unit_test(reset_offsets_times_and_numbers),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cs_app_destroy(app);
    return rc;
}
