/* test_log_json.c — --log-format json: a text log body ("message key=value
 * key=\"quoted value\" ...") becomes one JSON object with ts, level, msg and
 * the fields (integers as numbers), escaped and never cut in a way that leaves
 * invalid JSON for ordinary lines. Pure function, no cluster. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "base/log.h"

static void check(const char *body, const char *want) {
    char out[1024];
    size_t n = cs__log_json_line(out, sizeof out, "2024-01-02T03:04:05.678Z", "INFO", body);
    assert_int_equal(n, strlen(out));
    assert_string_equal(out, want);
}

static void test_fields(void **state) {
    (void)state;
    check("partition assigned subscription=payouts group=g topic=payouts partition=2",
          "{\"ts\":\"2024-01-02T03:04:05.678Z\",\"level\":\"info\",\"msg\":\"partition assigned\","
          "\"subscription\":\"payouts\",\"group\":\"g\",\"topic\":\"payouts\",\"partition\":2}");
}

static void test_quoted_and_escapes(void **state) {
    (void)state;
    check("reply not queued topic=a.b reason=\"queue \"full\" now\" offset=-12 id=007",
          "{\"ts\":\"2024-01-02T03:04:05.678Z\",\"level\":\"info\",\"msg\":\"reply not queued\","
          "\"topic\":\"a.b\",\"reason\":\"queue \\\"full\\\" now\",\"offset\":-12,\"id\":\"007\"}");
    check("tab\there back\\slash",
          "{\"ts\":\"2024-01-02T03:04:05.678Z\",\"level\":\"info\",\"msg\":\"tab\\u0009here back\\\\slash\"}");
}

/* A delivery's trace id is a string member, even when all its digits are decimal. */
static void test_trace_id(void **state) {
    (void)state;
    check("record dropped after its last attempt topic=t partition=0 offset=3 attempts=1 reason=\"x\" "
          "trace_id=4bf92f3577b34da6a3ce929d0e0e4736",
          "{\"ts\":\"2024-01-02T03:04:05.678Z\",\"level\":\"info\",\"msg\":\"record dropped after its last attempt\","
          "\"topic\":\"t\",\"partition\":0,\"offset\":3,\"attempts\":1,\"reason\":\"x\","
          "\"trace_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\"}");
    check("m trace_id=12345678901234567890123456789012",
          "{\"ts\":\"2024-01-02T03:04:05.678Z\",\"level\":\"info\",\"msg\":\"m\","
          "\"trace_id\":\"12345678901234567890123456789012\"}");
}

static void test_parsers(void **state) {
    (void)state;
    assert_int_equal(cs__log_level_parse("DEBUG"), CS_LOG_DEBUG);
    assert_int_equal(cs__log_level_parse("warn"), CS_LOG_WARN);
    assert_int_equal(cs__log_level_parse("loud"), -1);
    assert_int_equal(cs__log_format_parse("json"), CS_LOG_JSON);
    assert_int_equal(cs__log_format_parse("Text"), CS_LOG_TEXT);
    assert_int_equal(cs__log_format_parse("xml"), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_quoted_and_escapes),
        cmocka_unit_test(test_trace_id),
        cmocka_unit_test(test_parsers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
