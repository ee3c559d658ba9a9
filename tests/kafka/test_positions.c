/* test_positions.c — start positions and subscriptions beyond fixed topics
 * (issue #22, slice 1), on the embedded cluster and, as real.kafka.positions,
 * on the real broker:
 *
 * - start_at_offset_then_committed_wins: a new group starts partition 0 at
 *   the configured offset (the records below it are never handled) and
 *   partition 1, without one, at the earliest; restarted with another start
 *   offset, the group reads on from its committed position instead.
 * - missing_topic_fails_the_start_by_default: CS_ERR_TOPIC naming the topic.
 * - missing_topic_allowed_is_consumed_once_created: the app starts without
 *   the topic and reports it missing on /metrics (cstream_topic_unavailable),
 *   so the consumer has asked for it and not made it; once it is created (with
 *   the one partition the test asks for) and written to, its records are
 *   handled (within the 1 s metadata refresh the test sets).
 * - pattern_picks_up_new_topics: a pattern subscription handles a topic
 *   matching at start and one created while it runs; /metrics has per-topic
 *   series for both; a dead-letter or reply topic matching the pattern and a
 *   pattern without '^' are refused; '^' in a plain subscription is refused;
 *   the AsyncAPI document names the pattern.
 *
 * Timestamp start positions need the real broker (the mock answers every
 * time lookup with -1): tests/real/test_positions_time.c. Waits are for
 * conditions with bounded deadlines; nothing asserts on a sleep. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstest.h"

enum { MAXOFF = 64, WAIT_MS = 30000 };
#define REFRESH_MS "1000" /* topic.metadata.refresh.interval.ms: new topics within ~1 s */

typedef struct seen {
    cst_seen *by_offset;
    _Atomic int handled;
    char topics[4][200]; /* distinct topics seen, first come */
    _Atomic int n_topics;
} seen;

static cs_outcome record(cs_delivery *d, void *user) {
    seen *s = user;
    cst_seen_add(s->by_offset, cs_delivery_partition(d), cs_delivery_offset(d));
    atomic_fetch_add(&s->handled, 1);
    return CS_ACK;
}

static bool handled_at_least(seen *s, int n, int timeout_ms) {
    int64_t until = cst_now_ms() + timeout_ms;
    while (cst_now_ms() < until) {
        if (atomic_load(&s->handled) >= n) return true;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&s->handled) >= n;
}

static void produce_n(const char *topic, int32_t partition, int n) {
    for (int i = 0; i < n; i++) CST_OK(cs_test_produce(cst_cluster, topic, partition, NULL, 0, "v", 1, NULL));
}

/* An app with one Tracked subscription on topic (not started). */
static cs_app *app_on(const char *topic, const char *group, seen *s, cs_sub **out) {
    cs_app *app = cs_app_new("positions", "1.0");
    assert_non_null(app);
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_non_null(k);
    cs_sub *sub = cs_kafka_subscribe(k, topic, record, s);
    assert_non_null(sub);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_config(sub, "topic.metadata.refresh.interval.ms", REFRESH_MS));
    CST_OK(cs_app_add_kafka(app, k));
    *out = sub;
    return app;
}

static void start_at_offset_then_committed_wins(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("pos-offset", 2, topic, group, sizeof topic);
    produce_n(topic, 0, 10);
    produce_n(topic, 1, 5);
    seen s = {.by_offset = cst_seen_new(2, MAXOFF)};
    cs_sub *sub;
    cs_app *app = app_on(topic, group, &s, &sub);
    CST_OK(cs_sub_start_at_offset(sub, topic, 0, 6));
    CST_OK(cs_app_start(app));
    assert_true(handled_at_least(&s, 4 + 5, WAIT_MS));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 10, WAIT_MS));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 1, 5, WAIT_MS));
    cs_app_destroy(app);
    for (int64_t o = 0; o < 6; o++) assert_int_equal(cst_seen_count(s.by_offset, 0, o), 0);
    for (int64_t o = 6; o < 10; o++) assert_int_equal(cst_seen_count(s.by_offset, 0, o), 1);
    for (int64_t o = 0; o < 5; o++) assert_int_equal(cst_seen_count(s.by_offset, 1, o), 1); /* earliest */
    assert_int_equal(atomic_load(&s.handled), 9);

    /* The group has a position now: a start offset no longer applies. */
    produce_n(topic, 0, 2);
    seen again = {.by_offset = cst_seen_new(2, MAXOFF)};
    app = app_on(topic, group, &again, &sub);
    CST_OK(cs_sub_start_at_offset(sub, topic, 0, 2));
    CST_OK(cs_app_start(app));
    assert_true(handled_at_least(&again, 2, WAIT_MS));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 12, WAIT_MS));
    cs_app_destroy(app);
    assert_int_equal(atomic_load(&again.handled), 2);
    assert_int_equal(cst_seen_count(again.by_offset, 0, 10), 1);
    assert_int_equal(cst_seen_count(again.by_offset, 0, 11), 1);
    cst_seen_free(s.by_offset);
    cst_seen_free(again.by_offset);
}

static void start_offset_arguments_are_checked(void **state) {
    (void)state;
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    seen s = {0};
    cs_sub *sub = cs_kafka_subscribe(k, "orders", record, &s);
    assert_int_equal(cs_sub_start_at_offset(sub, "payments", 0, 1), CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "payments"));
    assert_int_equal(cs_sub_start_at_offset(sub, "orders", -1, 1), CS_ERR_ARG);
    assert_int_equal(cs_sub_start_at_offset(sub, "orders", 0, -5), CS_ERR_ARG);
    assert_int_equal(cs_sub_start_at_time(sub, -1), CS_ERR_ARG);
    CST_OK(cs_sub_start_at_time(sub, 1700000000000));
    cs_kafka_destroy(k);
}

static void missing_topic_fails_the_start_by_default(void **state) {
    (void)state;
    char topic[128], group[160];
    cs_test_unique_name(topic, sizeof topic, "pos-missing-default");
    cs_test_unique_name(group, sizeof group, "g");
    seen s = {0};
    cs_sub *sub;
    cs_app *app = app_on(topic, group, &s, &sub);
    assert_int_equal(cs_app_start(app), CS_ERR_TOPIC);
    assert_non_null(strstr(cs_errmsg(), topic));
    assert_non_null(strstr(cs_errmsg(), "cs_sub_allow_missing_topics"));
    cs_app_destroy(app);
}

typedef struct reported_missing {
    cs_app *app;
    char labels[512]; /* the subscription's topic series */
} reported_missing;

static bool topic_reported_missing(void *arg) {
    reported_missing *r = arg;
    return cst_metric(r->app, "cstream_topic_unavailable", r->labels) == 1;
}

static void missing_topic_allowed_is_consumed_once_created(void **state) {
    (void)state;
    char topic[128], group[160];
    cs_test_unique_name(topic, sizeof topic, "pos-missing-allowed");
    cs_test_unique_name(group, sizeof group, "g");
    seen s = {.by_offset = cst_seen_new(1, MAXOFF)};
    cs_sub *sub;
    cs_app *app = app_on(topic, group, &s, &sub);
    CST_OK(cs_sub_allow_missing_topics(sub, 1));
    /* cstream refreshes metadata every 30 s by default: the topic created
     * below could wait that long to be seen, as long as the whole wait under
     * the sanitizers. This test is about what happens once it is seen.
     * Not a whole second: the join starts on a refresh, the embedded cluster
     * answers a JoinGroup 3 or 5 s later, and a refresh that lands while the
     * group leader waits for its assignor's metadata makes librdkafka rejoin
     * (rd_kafka_cgrp_metadata_update_check sees the join state
     * wait-metadata): with 1000 ms every answer met a refresh and the group
     * rejoined for over 30 s, 1 run in 5 under ASan. */
    CST_OK(cs_sub_config(sub, "topic.metadata.refresh.interval.ms", "1300"));
    CST_OK(cs_app_start(app));
    /* The consumer has asked for the topic and been told it does not exist:
     * it must not have created it (the embedded cluster once did, with 4
     * partitions, making the create below fail). */
    reported_missing r = {.app = app};
    snprintf(r.labels, sizeof r.labels, "subscription=\"%s\",group=\"%s\",topic=\"%s\"", topic, group, topic);
    assert_true(cst_wait(topic_reported_missing, &r, WAIT_MS));
    CST_OK(cs_test_topic_create(cst_cluster, topic, 1));
    produce_n(topic, 0, 3);
    assert_true(handled_at_least(&s, 3, WAIT_MS));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 3, WAIT_MS));
    cs_app_destroy(app);
    for (int64_t o = 0; o < 3; o++) assert_int_equal(cst_seen_count(s.by_offset, 0, o), 1);
    cst_seen_free(s.by_offset);
}

static void pattern_arguments_are_checked(void **state) {
    (void)state;
    seen s = {0};
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_null(cs_kafka_subscribe(k, "^payments\\..*", record, &s));
    assert_non_null(strstr(cs_errmsg(), "cs_kafka_subscribe_pattern"));
    assert_null(cs_kafka_subscribe_pattern(k, "payments\\..*", record, &s));
    assert_null(cs_kafka_subscribe_pattern(k, "^payments(", record, &s));
    assert_non_null(strstr(cs_errmsg(), "^payments("));
    cs_sub *sub = cs_kafka_subscribe_pattern(k, "^payments\\..*", record, &s);
    assert_non_null(sub);
    assert_int_equal(cs_sub_dead_letter(sub, "payments.dlq"), CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "payments.dlq"));
    assert_int_equal(cs_sub_reply(sub, "payments.done", 1000), CS_ERR_ARG);
    CST_OK(cs_sub_dead_letter(sub, "payments-dlq"));
    CST_OK(cs_sub_reply(sub, "done.payments", 1000));
    CST_OK(cs_sub_start_at_offset(sub, "payments.eu", 0, 3));
    assert_int_equal(cs_sub_start_at_offset(sub, "refunds.eu", 0, 3), CS_ERR_ARG);
    cs_kafka_destroy(k);
}

/* A label value as /metrics writes it: backslashes doubled. */
static void escape_label(const char *v, char *out, size_t size) {
    size_t j = 0;
    for (; *v && j + 2 < size; v++) {
        if (*v == '\\') out[j++] = '\\';
        out[j++] = *v;
    }
    out[j] = '\0';
}

static void pattern_picks_up_new_topics(void **state) {
    (void)state;
    char prefix[128], group[160], first[200], later[200], pattern[260];
    cs_test_unique_name(prefix, sizeof prefix, "pospat");
    cs_test_unique_name(group, sizeof group, "g");
    snprintf(first, sizeof first, "%s.eu", prefix);
    snprintf(later, sizeof later, "%s.us", prefix);
    snprintf(pattern, sizeof pattern, "^%s\\..*", prefix);
    CST_OK(cs_test_topic_create(cst_cluster, first, 1));
    produce_n(first, 0, 2);

    seen s = {.by_offset = cst_seen_new(1, MAXOFF)};
    cs_app *app = cs_app_new("positions", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *sub = cs_kafka_subscribe_pattern(k, pattern, record, &s);
    assert_non_null(sub);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_config(sub, "topic.metadata.refresh.interval.ms", REFRESH_MS));
    /* Once in CI (2.0.2, ctest -j) the rejoin after the new topic never got
     * an assignment within 30 s; not reproduced in 17 runs under load since.
     * The group's story goes into this test's output, for the next time. */
    CST_OK(cs_sub_config(sub, "debug", "cgrp"));
    cs_log_set_level(CS_LOG_DEBUG);
    CST_OK(cs_app_add_kafka(app, k));

    char *doc = NULL;
    CST_OK(cs_app_asyncapi(app, 0, &doc));
    assert_non_null(strstr(doc, "x-cstream-topic-pattern"));
    free(doc);

    CST_OK(cs_app_start(app));
    assert_true(handled_at_least(&s, 2, WAIT_MS));
    CST_OK(cs_test_topic_create(cst_cluster, later, 1));
    produce_n(later, 0, 3);
    assert_true(handled_at_least(&s, 5, WAIT_MS));
    CST_OK(cs_test_wait_committed(cst_cluster, group, first, 0, 2, WAIT_MS));
    CST_OK(cs_test_wait_committed(cst_cluster, group, later, 0, 3, WAIT_MS));

    char labels[1024], escaped[300];
    escape_label(pattern, escaped, sizeof escaped);
    snprintf(labels, sizeof labels, "subscription=\"%s\",group=\"%s\",topic=\"%s\",outcome=\"ack\"", escaped, group,
             first);
    assert_true(cst_metric(app, "cstream_records_total", labels) == 2);
    snprintf(labels, sizeof labels, "subscription=\"%s\",group=\"%s\",topic=\"%s\",outcome=\"ack\"", escaped, group,
             later);
    assert_true(cst_metric(app, "cstream_records_total", labels) == 3);
    cs_app_destroy(app);
    cs_log_set_level(CS_LOG_INFO);
    assert_int_equal(atomic_load(&s.handled), 5);
    cst_seen_free(s.by_offset);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(start_offset_arguments_are_checked),
        cmocka_unit_test(pattern_arguments_are_checked),
        cmocka_unit_test(missing_topic_fails_the_start_by_default),
        cmocka_unit_test(start_at_offset_then_committed_wins),
        cmocka_unit_test(missing_topic_allowed_is_consumed_once_created),
        cmocka_unit_test(pattern_picks_up_new_topics),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
