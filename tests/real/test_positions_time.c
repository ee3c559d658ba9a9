/* test_positions_time.c — what needs a real broker among the start positions
 * and pattern subscriptions (issue #22, slice 1); librdkafka 2.0.2's mock
 * answers every time lookup with -1 and cannot delete a topic.
 *
 * - start_at_time_handles_exactly_the_records_from_then: records produced
 *   with explicit CreateTime values, one second apart; a new group starting
 *   at a time handles exactly the records at and after it on partition 0,
 *   and on partition 1, whose records are all older, starts at the end (only
 *   a record written after the start is handled).
 * - pattern_series_go_with_a_deleted_topic: a pattern subscription handles
 *   two matching topics; once one of them is deleted, its per-topic /metrics
 *   series are gone (the label set does not keep every topic ever matched),
 *   the other topic's stay and it is still consumed, and the stop completes.
 *
 * Waits are for conditions with bounded deadlines; nothing asserts on a sleep. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cstest.h"
#include "cstream/rdkafka.h"

enum { MAXOFF = 64, WAIT_MS = 30000, RECORDS = 10, STEP_MS = 1000, FROM = 6 };
#define REFRESH_MS "1000"

typedef struct seen {
    cst_seen *by_offset;
    _Atomic int handled;
} seen;

static cs_outcome record(cs_delivery *d, void *user) {
    seen *s = user;
    cst_seen_add(s->by_offset, cs_delivery_partition(d), cs_delivery_offset(d));
    atomic_fetch_add(&s->handled, 1);
    return CS_ACK;
}

static bool wait_handled(seen *s, int n) {
    int64_t until = cst_now_ms() + WAIT_MS;
    while (atomic_load(&s->handled) < n && cst_now_ms() < until) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&s->handled) >= n;
}

/* Writes one record with CreateTime `ts_ms` to topic/partition and waits for it. */
static void produce_at(rd_kafka_t *rk, const char *topic, int32_t partition, int64_t ts_ms) {
    rd_kafka_resp_err_t err =
        rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition), RD_KAFKA_V_VALUE("v", 1),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_TIMESTAMP(ts_ms), RD_KAFKA_V_END);
    if (err) fail_msg("produce to %s/%d: %s", topic, (int)partition, rd_kafka_err2str(err));
    if (rd_kafka_flush(rk, 10000)) fail_msg("produce to %s/%d: not delivered in 10 s", topic, (int)partition);
}

static rd_kafka_t *producer(void) {
    char why[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", cs_test_cluster_brokers(cst_cluster), why, sizeof why))
        fail_msg("%s", why);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof why);
    if (!rk) fail_msg("%s", why);
    return rk;
}

static void start_at_time_handles_exactly_the_records_from_then(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("pos-time", 2, topic, group, sizeof topic);
    rd_kafka_t *rk = producer();
    int64_t t0 = 1700000000000; /* a fixed past: CreateTime is the producer's */
    for (int i = 0; i < RECORDS; i++) produce_at(rk, topic, 0, t0 + (int64_t)i * STEP_MS);
    for (int i = 0; i < 3; i++) produce_at(rk, topic, 1, t0 + (int64_t)i * STEP_MS);

    seen s = {.by_offset = cst_seen_new(2, MAXOFF)};
    cs_app *app = cs_app_new("positions-time", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *sub = cs_kafka_subscribe(k, topic, record, &s);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    /* Half a step before record FROM: the first record at or after it is FROM. */
    CST_OK(cs_sub_start_at_time(sub, t0 + (int64_t)FROM * STEP_MS - STEP_MS / 2));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    assert_true(wait_handled(&s, RECORDS - FROM));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, RECORDS, WAIT_MS));
    /* Partition 1 started at its end (resolved when its fetch started, with
     * partition 0's, which has handled and committed everything by now): a
     * record written now is the only one of it handled. */
    produce_at(rk, topic, 1, t0 + 100 * STEP_MS);
    assert_true(wait_handled(&s, RECORDS - FROM + 1));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 1, 4, WAIT_MS));
    cs_app_destroy(app);
    rd_kafka_destroy(rk);

    for (int64_t o = 0; o < FROM; o++) assert_int_equal(cst_seen_count(s.by_offset, 0, o), 0);
    for (int64_t o = FROM; o < RECORDS; o++) assert_int_equal(cst_seen_count(s.by_offset, 0, o), 1);
    for (int64_t o = 0; o < 3; o++) assert_int_equal(cst_seen_count(s.by_offset, 1, o), 0);
    assert_int_equal(cst_seen_count(s.by_offset, 1, 3), 1);
    assert_int_equal(atomic_load(&s.handled), RECORDS - FROM + 1);
    cst_seen_free(s.by_offset);
}

static void escape_label(const char *v, char *out, size_t size) {
    size_t j = 0;
    for (; *v && j + 2 < size; v++) {
        if (*v == '\\') out[j++] = '\\';
        out[j++] = *v;
    }
    out[j] = '\0';
}

static bool series_gone(cs_app *app, const char *labels) {
    int64_t until = cst_now_ms() + WAIT_MS;
    while (cst_now_ms() < until) {
        if (cst_metric(app, "cstream_records_total", labels) < 0) return true;
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
    }
    return false;
}

static void pattern_series_go_with_a_deleted_topic(void **state) {
    (void)state;
    char prefix[128], group[160], keep[200], gone[200], pattern[260];
    cs_test_unique_name(prefix, sizeof prefix, "pospat");
    cs_test_unique_name(group, sizeof group, "g");
    snprintf(keep, sizeof keep, "%s.keep", prefix);
    snprintf(gone, sizeof gone, "%s.gone", prefix);
    snprintf(pattern, sizeof pattern, "^%s\\..*", prefix);
    CST_OK(cs_test_topic_create(cst_cluster, keep, 1));
    CST_OK(cs_test_topic_create(cst_cluster, gone, 1));
    CST_OK(cs_test_produce(cst_cluster, keep, 0, NULL, 0, "v", 1, NULL));
    CST_OK(cs_test_produce(cst_cluster, gone, 0, NULL, 0, "v", 1, NULL));

    seen s = {.by_offset = cst_seen_new(1, MAXOFF)};
    cs_app *app = cs_app_new("positions-pattern", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *sub = cs_kafka_subscribe_pattern(k, pattern, record, &s);
    assert_non_null(sub);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_config(sub, "topic.metadata.refresh.interval.ms", REFRESH_MS));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    assert_true(wait_handled(&s, 2));

    char escaped[300], keep_labels[1024], gone_labels[1024];
    escape_label(pattern, escaped, sizeof escaped);
    snprintf(keep_labels, sizeof keep_labels, "subscription=\"%s\",group=\"%s\",topic=\"%s\",outcome=\"ack\"", escaped,
             group, keep);
    snprintf(gone_labels, sizeof gone_labels, "subscription=\"%s\",group=\"%s\",topic=\"%s\",outcome=\"ack\"", escaped,
             group, gone);
    assert_true(cst_metric(app, "cstream_records_total", gone_labels) == 1);

    CST_OK(cs_test_topic_delete(cst_cluster, gone));
    assert_true(series_gone(app, gone_labels));
    CST_OK(cs_test_produce(cst_cluster, keep, 0, NULL, 0, "v", 1, NULL));
    assert_true(wait_handled(&s, 3));
    assert_true(cst_metric(app, "cstream_records_total", keep_labels) == 2);
    int64_t stop_start = cst_now_ms();
    cs_app_destroy(app);
    assert_true(cst_now_ms() - stop_start < 20000); /* bounded, though a topic it read was deleted */
    cst_seen_free(s.by_offset);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(start_at_time_handles_exactly_the_records_from_then),
        cmocka_unit_test(pattern_series_go_with_a_deleted_topic),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
