/* test_dlq_headers.c — the dead-letter record's headers
 * (cs__dead_letter_headers, src/kafka/producer/dead_letter.c) from a record whose
 * headers come from a fake source: originals in order, then the provenance
 * headers; a header the source cannot read, or one without a name, is left
 * out instead of reaching librdkafka with a NULL name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/delivery_internal.h"
#include "kafka/kafka_internal.h"
#include "core/partition.h"

typedef struct fake {
    const char *name[4];
    const char *value[4];
    bool broken[4];
    size_t n;
} fake;

static void fake_release(void *msg) { (void)msg; }
static size_t fake_count(void *msg) { return ((fake *)msg)->n; }
static int fake_at(void *msg, size_t i, const char **name, const void **value, size_t *len) {
    fake *f = msg;
    if (i >= f->n || f->broken[i]) return -1;
    *name = f->name[i];
    *value = f->value[i];
    *len = f->value[i] ? strlen(f->value[i]) : 0;
    return 0;
}
static const cs_source_ops fake_ops = {fake_release, fake_count, fake_at};

/* A partition of no pipeline whose records' headers come from fake_ops. */
static cs_part *fake_part(const char *topic, int32_t partition) {
    cs_delivery_pool *spares = cs__delivery_pool_new(0);
    assert_non_null(spares);
    cs_part *part = cs__part_new(NULL, topic, partition, &fake_ops, false, spares);
    cs__delivery_pool_unref(spares); /* the partition holds its own reference */
    assert_non_null(part);
    return part;
}

static void originals_then_provenance(void **state) {
    (void)state;
    fake f = {
        .name = {"trace", "broken", NULL, "empty"}, .value = {"t1", "x", "y", NULL}, .broken = {false, true}, .n = 4};
    cs_part *part = fake_part("payouts", 3);
    cs_delivery d = {
        .topic = "payouts", .partition = 3, .offset = 118, .timestamp = -1, .attempt = 5, .msg = &f, .part = part};
    cs_header h[4 + CS_DLQ_HEADERS];
    cs_dlq_numbers nums;
    size_t n = cs__dead_letter_headers(&d, "payouts", "bank refused", h, 4 + CS_DLQ_HEADERS, &nums);
    /* "broken" cannot be read and the third has no name: both left out */
    assert_int_equal(n, 2 + CS_DLQ_HEADERS);
    assert_string_equal(h[0].name, "trace");
    assert_memory_equal(h[0].value, "t1", 2);
    assert_string_equal(h[1].name, "empty");
    assert_null(h[1].value); /* a null value stays null */
    const char *want[CS_DLQ_HEADERS][2] = {{"cstream.dlq.topic", "payouts"},      {"cstream.dlq.partition", "3"},
                                           {"cstream.dlq.offset", "118"},         {"cstream.dlq.timestamp", "-1"},
                                           {"cstream.dlq.group", "payouts"},      {"cstream.dlq.attempts", "5"},
                                           {"cstream.dlq.reason", "bank refused"}};
    for (size_t i = 0; i < CS_DLQ_HEADERS; i++) {
        assert_non_null(h[2 + i].name);
        assert_string_equal(h[2 + i].name, want[i][0]);
        assert_int_equal(h[2 + i].len, strlen(want[i][1]));
        assert_memory_equal(h[2 + i].value, want[i][1], h[2 + i].len);
    }
    /* every name is set: this array goes to rd_kafka_header_add, which strlen()s names */
    rd_kafka_headers_t *hdrs = cs__headers_new(h, n);
    assert_int_equal(rd_kafka_header_cnt(hdrs), n);
    rd_kafka_headers_destroy(hdrs);
    cs__part_unref(part);
}

static void too_small_writes_nothing(void **state) {
    (void)state;
    fake f = {.n = 0};
    cs_part *part = fake_part("t", 0);
    cs_delivery d = {.topic = "t", .msg = &f, .part = part};
    cs_header h[CS_DLQ_HEADERS];
    cs_dlq_numbers nums;
    assert_int_equal(cs__dead_letter_headers(&d, NULL, NULL, h, CS_DLQ_HEADERS - 1, &nums), 0);
    assert_int_equal(cs__dead_letter_headers(&d, NULL, NULL, h, CS_DLQ_HEADERS, &nums), CS_DLQ_HEADERS);
    assert_string_equal(h[4].value, ""); /* no group: an empty value, not a NULL strlen */
    assert_string_equal(h[6].value, "");
    cs__part_unref(part);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(originals_then_provenance),
        cmocka_unit_test(too_small_writes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
