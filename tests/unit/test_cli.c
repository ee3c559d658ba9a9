/* test_cli.c — the command line of cs_app_main (src/core/cli.c) without
 * running an app: the parser and the --partition number. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

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

int main(void) {
    app = cs_app_new("svc", "1.0.0");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(publish_flags),
        cmocka_unit_test(usage_errors),
        cmocka_unit_test(partition_is_plain_digits),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cs_app_destroy(app);
    return rc;
}
