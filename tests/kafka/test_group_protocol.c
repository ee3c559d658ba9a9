/* test_group_protocol.c — the consumer group protocol choice (issue #32,
 * KIP-848): refused with both versions named on a librdkafka older than
 * 2.12.0, by every way of asking for it (the setters, the property, the
 * operator's variable); under it the classic-only properties are refused at
 * start, naming the property, the layer that set it and the broker setting
 * that replaces it, while the test helper's own classic timings are simply
 * left out; and a Tracked subscription under it handles every record exactly
 * once and commits every partition's end, on the embedded cluster and the
 * real broker (the same binary runs on both). The time from start to the
 * first record is printed for both protocols. */
#define _POSIX_C_SOURCE 200809L
#include <librdkafka/rdkafka.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cstest.h"

#define HAS_CONSUMER_PROTOCOL (RD_KAFKA_VERSION >= 0x020c0000)
/* The headers' version as text, for skip reasons. */
#define BUILT_MAJOR ((RD_KAFKA_VERSION >> 24) & 0xff)
#define BUILT_MINOR ((RD_KAFKA_VERSION >> 16) & 0xff)
#define BUILT_PATCH ((RD_KAFKA_VERSION >> 8) & 0xff)

/* Fails unless `got` is `want` and the message holds every needle. */
static void expect_err(cs_err want, cs_err got, const char *call, const char *const *needles) {
    const char *msg = cs_errmsg();
    if (got != want) fail_msg("%s -> %s (wanted %s): %s", call, cs_err_name(got), cs_err_name(want), msg);
    for (const char *const *n = needles; *n; n++)
        if (!strstr(msg, *n)) fail_msg("%s: message lacks \"%s\": %s", call, *n, msg);
}
#define EXPECT_ERR(...) EXPECT_ERR_(__VA_ARGS__, NULL)
#define EXPECT_ERR_(want, call, ...) expect_err((want), (call), #call, (const char *const[]){__VA_ARGS__})

static cs_outcome ack(cs_delivery *d, void *user) {
    (void)d;
    (void)user;
    return CS_ACK;
}

typedef struct run_count {
    _Atomic int handled;
} run_count;

static cs_outcome count(cs_delivery *d, void *user) {
    (void)d;
    atomic_fetch_add(&((run_count *)user)->handled, 1);
    return CS_ACK;
}

/* The floor lane: every way of asking for the consumer protocol is refused,
 * naming the version needed and the one found; nothing falls back quietly. */
static void consumer_protocol_refused_before_2_12(void **state) {
    (void)state;
    if (HAS_CONSUMER_PROTOCOL)
        cst_skip("built with librdkafka %d.%d.%d, which has the consumer protocol", BUILT_MAJOR, BUILT_MINOR,
                 BUILT_PATCH);
    char found[32];
    snprintf(found, sizeof found, "%s", rd_kafka_version_str());
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, "t", ack, NULL);
    EXPECT_ERR(CS_ERR_UNSUPPORTED, cs_kafka_group_protocol(k, CS_GROUP_PROTOCOL_CONSUMER), "2.12.0", found);
    EXPECT_ERR(CS_ERR_UNSUPPORTED, cs_sub_group_protocol(s, CS_GROUP_PROTOCOL_CONSUMER), "2.12.0", found);
    EXPECT_ERR(CS_ERR_UNSUPPORTED, cs_kafka_config(k, "group.protocol", "consumer"), "group.protocol", "2.12.0", found);
    EXPECT_ERR(CS_ERR_UNSUPPORTED, cs_sub_config(s, "group.remote.assignor", "uniform"), "group.remote.assignor",
               "2.12.0");
    /* Classic is what every librdkafka speaks: choosing it is fine. */
    CST_OK(cs_kafka_group_protocol(k, CS_GROUP_PROTOCOL_CLASSIC));
    EXPECT_ERR(CS_ERR_ARG, cs_kafka_group_protocol(k, (cs_group_protocol)7), "7");
    cs_kafka_destroy(k);

    /* The operator's variable: refused at start, never a silent classic run. */
    char topic[128], group[160];
    cst_fresh("protocol-env", 1, topic, group, sizeof topic);
    setenv("CSTREAM_KAFKA_GROUP_PROTOCOL", "consumer", 1);
    cs_app *app = cs_app_new("protocol-test", "1.0");
    k = cs_test_kafka_new(cst_cluster);
    s = cs_kafka_subscribe(k, topic, ack, NULL);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_app_add_kafka(app, k));
    EXPECT_ERR(CS_ERR_UNSUPPORTED, cs_app_start(app), "CSTREAM_KAFKA_GROUP_PROTOCOL", "2.12.0", found);
    unsetenv("CSTREAM_KAFKA_GROUP_PROTOCOL");
    cs_app_destroy(app);
}

/* Starts an app whose one subscription is configured by `configure`, and
 * returns cs_app_start's result (the app is destroyed). */
static cs_err start_result(void (*configure)(cs_kafka *k, cs_sub *s)) {
    char topic[128], group[160];
    cst_fresh("protocol-refused", 1, topic, group, sizeof topic);
    cs_app *app = cs_app_new("protocol-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_topic(k, topic, 1));
    cs_sub *s = cs_kafka_subscribe(k, topic, ack, NULL);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    configure(k, s);
    CST_OK(cs_app_add_kafka(app, k));
    cs_err err = cs_app_start(app);
    if (!err) cs_app_stop(app);
    cs_app_destroy(app);
    return err;
}

static void session_by_sub(cs_kafka *k, cs_sub *s) {
    CST_OK(cs_kafka_group_protocol(k, CS_GROUP_PROTOCOL_CONSUMER));
    CST_OK(cs_sub_config(s, "session.timeout.ms", "7000"));
}

static void strategy_by_env(cs_kafka *k, cs_sub *s) {
    CST_OK(cs_sub_group_protocol(s, CS_GROUP_PROTOCOL_CONSUMER));
    (void)k;
}

static void heartbeat_by_broker(cs_kafka *k, cs_sub *s) {
    (void)s;
    CST_OK(cs_kafka_config(k, "group.protocol", "consumer"));
    CST_OK(cs_kafka_config(k, "heartbeat.interval.ms", "1000"));
}

/* Under the consumer protocol a classic-only property is refused at start,
 * naming it, who set it and what replaces it. */
static void classic_only_properties_refused(void **state) {
    (void)state;
    if (!HAS_CONSUMER_PROTOCOL)
        cst_skip("needs librdkafka >= 2.12.0, built with %d.%d.%d", BUILT_MAJOR, BUILT_MINOR, BUILT_PATCH);
    EXPECT_ERR(CS_ERR_CONFIG, start_result(session_by_sub), "session.timeout.ms", "cs_sub_config",
               "group.consumer.session.timeout.ms");
    setenv("CSTREAM_KAFKA_PARTITION_ASSIGNMENT_STRATEGY", "cooperative-sticky", 1);
    cs_err err = start_result(strategy_by_env);
    unsetenv("CSTREAM_KAFKA_PARTITION_ASSIGNMENT_STRATEGY");
    EXPECT_ERR(CS_ERR_CONFIG, err, "partition.assignment.strategy",
               "environment CSTREAM_KAFKA_PARTITION_ASSIGNMENT_STRATEGY", "group.remote.assignor");
    EXPECT_ERR(CS_ERR_CONFIG, start_result(heartbeat_by_broker), "heartbeat.interval.ms", "cs_kafka_config",
               "group.consumer.heartbeat.interval.ms");
}

/* A Tracked app of one subscription on `topic` in `group` under the consumer
 * protocol, counting its records in *n; not started. */
static cs_app *consumer_protocol_app(cs_test_cluster *cluster, const char *topic, const char *group, run_count *n) {
    cs_app *app = cs_app_new("protocol-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cluster);
    CST_OK(cs_kafka_group_protocol(k, CS_GROUP_PROTOCOL_CONSUMER));
    cs_sub *s = cs_kafka_subscribe(k, topic, count, n);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_app_add_kafka(app, k));
    return app;
}

/* A broker that does not serve the consumer protocol answers the member's
 * ConsumerGroupHeartbeat with UNSUPPORTED_VERSION (pushed on the embedded
 * cluster here): the app stops with an error that says so, names the group,
 * the broker's answer, what the broker needs and the librdkafka found, and
 * commits nothing. Embedded only: the real broker serves it. */
static void broker_refusing_the_protocol_is_a_clear_stop(void **state) {
    (void)state;
    if (!HAS_CONSUMER_PROTOCOL)
        cst_skip("needs librdkafka >= 2.12.0, built with %d.%d.%d", BUILT_MAJOR, BUILT_MINOR, BUILT_PATCH);
    if (!cs_test_cluster_is_embedded(cst_cluster)) cst_skip("the real broker serves the consumer protocol");
    enum { CONSUMER_GROUP_HEARTBEAT = 68, UNSUPPORTED_VERSION = 35 };
    char topic[128], group[160];
    cst_fresh("protocol-refused-by-broker", 1, topic, group, sizeof topic);
    for (int i = 0; i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "p", 1, NULL));
    const int refusals[] = {UNSUPPORTED_VERSION};
    CST_OK(cs_test_cluster_push_request_errors(cst_cluster, CONSUMER_GROUP_HEARTBEAT, 1, refusals));
    run_count n = {0};
    cs_app *app = consumer_protocol_app(cst_cluster, topic, group, &n);
    CST_OK(cs_app_start(app));
    EXPECT_ERR(CS_ERR_FATAL, cs_app_wait(app), "refused the consumer group protocol", group, "UNSUPPORTED_VERSION",
               "Kafka 4.0", "group.protocol=classic", rd_kafka_version_str());
    cs_app_stop(app);
    cs_app_destroy(app);
    CST_OK(cs_test_cluster_clear_request_errors(cst_cluster, CONSUMER_GROUP_HEARTBEAT));
    assert_int_equal(atomic_load(&n.handled), 0);
    int64_t committed = 0;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_true(committed < 0); /* nothing committed */
}

/* A broker that does not offer the protocol at all (before Kafka 3.7, or
 * without "consumer" in group.coordinator.rebalance.protocols: ApiVersions
 * lists no ConsumerGroupHeartbeat, withdrawn here on an embedded cluster of
 * its own). librdkafka retries for ever and says so only at debug level, so
 * cstream names the likely cause in one WARN after 30 s, with the way out;
 * nothing is handled or committed meanwhile. Embedded only, like the one
 * above. */
static void broker_without_the_protocol_is_named(void **state) {
    (void)state;
    if (!HAS_CONSUMER_PROTOCOL)
        cst_skip("needs librdkafka >= 2.12.0, built with %d.%d.%d", BUILT_MAJOR, BUILT_MINOR, BUILT_PATCH);
    if (!cs_test_cluster_is_embedded(cst_cluster)) cst_skip("the real broker serves the consumer protocol");
    enum { CONSUMER_GROUP_HEARTBEAT = 68 };
    cs_test_cluster *old = NULL;
    CST_OK(cs_test_cluster_new_embedded(1, &old));
    CST_OK(cs_test_cluster_withdraw_api(old, CONSUMER_GROUP_HEARTBEAT));
    char topic[128], group[160];
    cst_fresh("protocol-not-offered", 1, topic, group, sizeof topic);
    CST_OK(cs_test_topic_create(old, topic, 1));
    CST_OK(cs_test_produce(old, topic, 0, NULL, 0, "p", 1, NULL));
    run_count n = {0};
    cs_app *app = consumer_protocol_app(old, topic, group, &n);
    /* The WARN is the point: shown even when the suite runs with
     * CSTREAM_LOG_LEVEL=error, which is put back after. */
    const char *env_level = getenv("CSTREAM_LOG_LEVEL");
    bool quiet = env_level && !strcasecmp(env_level, "error");
    if (quiet) cs_log_set_level(CS_LOG_WARN);
    cst_capture cap;
    cst_capture_start(&cap);
    CST_OK(cs_app_start(app));
    char *log = NULL;
    for (int64_t deadline = cst_now_ms() + 45000;; nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL)) {
        free(log);
        log = cst_slurp(cap.path); /* so far */
        if (strstr(log, "has not let this member in") || cst_now_ms() > deadline) break;
    }
    free(log);
    log = cst_capture_stop(&cap);
    if (quiet) cs_log_set_level(CS_LOG_ERROR);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    const char *needles[] = {"has not let this member in",
                             group,
                             "group.protocol=consumer",
                             "Kafka 4.0",
                             "group.coordinator.rebalance.protocols",
                             "group.protocol=classic",
                             NULL};
    for (size_t i = 0; needles[i]; i++)
        if (!strstr(log, needles[i])) fail_msg("no \"%s\" in the log within 45 s:\n%s", needles[i], log);
    free(log);
    assert_int_equal(atomic_load(&n.handled), 0);
    int64_t committed = 0;
    CST_OK(cs_test_committed(old, group, topic, 0, &committed));
    assert_true(committed < 0);
    cs_test_cluster_destroy(old);
}

/* ---- a Tracked subscription under each protocol -------------------------------- */

enum { PARTS = 4, RECORDS = 2000 };

typedef struct run {
    cst_seen *seen;
    _Atomic int64_t first_ms; /* monotonic ms of the first record, 0 before */
} run;

static cs_outcome track(cs_delivery *d, void *user) {
    run *r = user;
    int64_t none = 0;
    atomic_compare_exchange_strong(&r->first_ms, &none, cst_now_ms());
    cst_seen_add(r->seen, cs_delivery_partition(d), cs_delivery_offset(d));
    return CS_ACK;
}

static bool first_record(void *arg) { return atomic_load(&((run *)arg)->first_ms) != 0; }

/* Every record handled exactly once and every partition's end committed;
 * returns the ms from cs_app_start to the first record. */
static int64_t tracked_run(cs_group_protocol protocol, const char *assignor) {
    char topic[128], group[160];
    cst_fresh("protocol-tracked", PARTS, topic, group, sizeof topic);
    for (int i = 0; i < RECORDS; i++) CST_OK(cs_test_produce(cst_cluster, topic, i % PARTS, NULL, 0, "p", 1, NULL));
    run r = {.seen = cst_seen_new(PARTS, RECORDS)};
    cs_app *app = cs_app_new("protocol-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_group_protocol(k, protocol));
    if (assignor) CST_OK(cs_kafka_config(k, "group.remote.assignor", assignor));
    cs_sub *s = cs_kafka_subscribe(k, topic, track, &r);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_workers(s, 4));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_app_add_kafka(app, k));
    int64_t started = cst_now_ms();
    CST_OK(cs_app_start(app));
    assert_true(cst_wait(first_record, &r, 60000));
    int64_t first = atomic_load(&r.first_ms) - started;
    CST_OK(cs_test_app_wait_idle(app, 60000));
    for (int p = 0; p < PARTS; p++)
        CST_OK(cs_test_wait_committed(cst_cluster, group, topic, p, RECORDS / PARTS, 30000));
    assert_int_equal(cst_seen_total(r.seen), RECORDS);
    assert_int_equal(cst_seen_distinct(r.seen), RECORDS);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(r.seen);
    return first;
}

static void tracked_consumes_everything_under_consumer_protocol(void **state) {
    (void)state;
    if (!HAS_CONSUMER_PROTOCOL)
        cst_skip("needs librdkafka >= 2.12.0, built with %d.%d.%d", BUILT_MAJOR, BUILT_MINOR, BUILT_PATCH);
    int64_t consumer = tracked_run(CS_GROUP_PROTOCOL_CONSUMER, NULL);
    int64_t classic = tracked_run(CS_GROUP_PROTOCOL_CLASSIC, NULL);
    printf("time to first record after cs_app_start (%s): consumer protocol %lld ms, classic %lld ms\n",
           cs_test_cluster_is_embedded(cst_cluster) ? "embedded cluster" : "real broker", (long long)consumer,
           (long long)classic);
}

/* Operations name the protocol: one app with a subscription under each; the
 * AsyncAPI document (before start, from the layers), the assignment's log
 * line and /metrics say which one joined with which. */
static void operations_name_the_protocol(void **state) {
    (void)state;
    if (!HAS_CONSUMER_PROTOCOL)
        cst_skip("needs librdkafka >= 2.12.0, built with %d.%d.%d", BUILT_MAJOR, BUILT_MINOR, BUILT_PATCH);
    char topic[2][128], group[2][160];
    run r[2];
    cs_app *app = cs_app_new("protocol-ops", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    for (int i = 0; i < 2; i++) {
        cst_fresh(i ? "protocol-ops-consumer" : "protocol-ops-classic", 1, topic[i], group[i], sizeof topic[i]);
        CST_OK(cs_test_produce(cst_cluster, topic[i], 0, NULL, 0, "p", 1, NULL));
        r[i] = (run){.seen = cst_seen_new(1, 1)};
        cs_sub *s = cs_kafka_subscribe(k, topic[i], track, &r[i]);
        CST_OK(cs_sub_group(s, group[i]));
        CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
        if (i) CST_OK(cs_sub_group_protocol(s, CS_GROUP_PROTOCOL_CONSUMER));
    }
    CST_OK(cs_app_add_kafka(app, k));
    char *doc = NULL;
    CST_OK(cs_app_asyncapi(app, 0, &doc));
    assert_non_null(strstr(doc, "\"x-cstream-group-protocol\": \"classic\""));
    assert_non_null(strstr(doc, "\"x-cstream-group-protocol\": \"consumer\""));
    free(doc);
    cs_log_set_level(CS_LOG_INFO); /* the assignment's line, whatever CSTREAM_LOG_LEVEL says */
    cst_capture cap;
    cst_capture_start(&cap);
    CST_OK(cs_app_start(app));
    bool both = cst_wait(first_record, &r[0], 60000) && cst_wait(first_record, &r[1], 60000);
    char *log = cst_capture_stop(&cap);
    assert_true(both);
    for (int i = 0; i < 2; i++) {
        char needle[1024];
        snprintf(needle, sizeof needle, "group=%s topic=%s partition=0 protocol=%s", group[i], topic[i],
                 i ? "consumer" : "classic");
        if (!strstr(log, needle)) fail_msg("no assignment line with \"%s\" in:\n%s", needle, log);
    }
    free(log);
    char *metrics = NULL;
    CST_OK(cs_app_metrics(app, &metrics));
    for (int i = 0; i < 2; i++) {
        char needle[1024];
        snprintf(needle, sizeof needle,
                 "cstream_consumer_group_protocol{subscription=\"%s\",group=\"%s\",protocol=\"%s\"} 1", topic[i],
                 group[i], i ? "consumer" : "classic");
        if (!strstr(metrics, needle)) fail_msg("/metrics lacks %s", needle);
    }
    free(metrics);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    for (int i = 0; i < 2; i++) cst_seen_free(r[i].seen);
}

/* The broker's assignor named by the passthrough property. */
static void tracked_with_remote_assignor(void **state) {
    (void)state;
    if (!HAS_CONSUMER_PROTOCOL)
        cst_skip("needs librdkafka >= 2.12.0, built with %d.%d.%d", BUILT_MAJOR, BUILT_MINOR, BUILT_PATCH);
    tracked_run(CS_GROUP_PROTOCOL_CONSUMER, "range");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(consumer_protocol_refused_before_2_12),
        cmocka_unit_test(classic_only_properties_refused),
        cmocka_unit_test(broker_refusing_the_protocol_is_a_clear_stop),
        cmocka_unit_test(broker_without_the_protocol_is_named),
        cmocka_unit_test(tracked_consumes_everything_under_consumer_protocol),
        cmocka_unit_test(tracked_with_remote_assignor),
        cmocka_unit_test(operations_name_the_protocol),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
