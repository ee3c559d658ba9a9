/* test_lag.c — issue #30 on the real broker: the lag metric
 * (cstream_lag_records) of a subscription whose input topic is written in
 * transactions (a chained Transactional stage) reaches 0 once everything is
 * handled and committed.
 *
 * A transactional producer leaves a control record (the commit or abort
 * marker) after the records of each transaction, so the log of such a topic
 * ends with a marker: its end offset is one past the marker. The marker is
 * not a record: librdkafka never hands it out, and a position taken from
 * the last handled record stops on it, one short of the end.
 *
 * - inputs in two committed transactions (markers in the middle and at the
 *   end): the Transactional subscription handles all of them, its committed
 *   position reaches the end offset and its lag 0 (before the fix: the
 *   position stayed on the trailing marker, lag 1, committed = end - 1);
 * - a transaction left open upstream (its records flushed, not committed):
 *   a read_committed consumer cannot read them, so they are not lag (the
 *   high watermark counts them, the last stable offset does not); once it
 *   aborts, the aborted records and their marker are passed and the lag is
 *   0 again;
 * - the same for a Tracked subscription (its commits stop on the marker
 *   just the same).
 *
 * Real broker only: the embedded cluster writes no markers and keeps no
 * transactional offsets. */
#include <cstream/rdkafka.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstest.h"

enum { PER_TXN = 20 };

/* ---- an upstream transactional producer ------------------------------------ */

static rd_kafka_t *txn_producer(const char *id) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *kv[][2] = {
        {"bootstrap.servers", cs_test_cluster_brokers(cst_cluster)}, {"transactional.id", id}, {"linger.ms", "1"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], err, sizeof err) != RD_KAFKA_CONF_OK)
            fail_msg("transactional producer: %s", err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) fail_msg("transactional producer: %s", err);
    rd_kafka_error_t *e = rd_kafka_init_transactions(rk, 30000);
    if (e) fail_msg("init_transactions: %s", rd_kafka_error_string(e));
    return rk;
}

static void txn_ok(rd_kafka_error_t *e, const char *what) {
    if (e) fail_msg("%s: %s", what, rd_kafka_error_string(e));
}

/* Begins a transaction and writes n records to topic/partition, flushed
 * (on the broker, not committed). */
static void txn_write(rd_kafka_t *rk, const char *topic, int32_t partition, int n) {
    txn_ok(rd_kafka_begin_transaction(rk), "begin_transaction");
    for (int i = 0; i < n; i++) {
        char v[32];
        int len = snprintf(v, sizeof v, "v%d", i);
        rd_kafka_resp_err_t err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                                                    RD_KAFKA_V_VALUE(v, (size_t)len),
                                                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (err) fail_msg("produce: %s", rd_kafka_err2str(err));
    }
    if (rd_kafka_flush(rk, 30000)) fail_msg("flush: records not delivered within 30 s");
}

/* ---- the subscription -------------------------------------------------------- */

static cs_outcome transform(cs_delivery *d, void *user) {
    (void)user;
    char v[64];
    int n = snprintf(v, sizeof v, "%d:%lld", (int)cs_delivery_partition(d), (long long)cs_delivery_offset(d));
    return cs_delivery_reply(d, NULL, 0, v, (size_t)n) == CS_OK ? CS_ACK : CS_RETRY;
}

static cs_app *start(cs_commit_mode mode, const char *topic, const char *group, const char *out, cs_sub **sub) {
    cs_app *app = cs_app_new("lag-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_instance_id(k, group));
    cs_sub *s = cs_kafka_subscribe(k, topic, transform, NULL);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, mode));
    CST_OK(cs_sub_reply(s, out, 5000));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *sub = s;
    return app;
}

/* ---- the metric ---------------------------------------------------------------- */

typedef struct lag_arg {
    cs_app *app;
    const char *topic, *group;
    int32_t partition;
    int64_t end;           /* committed position wanted (-1: any) */
    double lag, committed; /* last seen */
} lag_arg;

static void read_lag(lag_arg *a) {
    char labels[512];
    snprintf(labels, sizeof labels, "subscription=\"%s\",group=\"%s\",topic=\"%s\",partition=\"%d\"", a->topic,
             a->group, a->topic, (int)a->partition);
    a->lag = cst_metric(a->app, "cstream_lag_records", labels);
    a->committed = cst_metric(a->app, "cstream_committed_offset", labels);
}

/* The position reached `end` and the lag is 0. */
static bool settled(void *arg) {
    lag_arg *a = arg;
    read_lag(a);
    return a->lag == 0 && (a->end < 0 || a->committed == (double)a->end);
}

static void wait_settled(lag_arg *a, const char *when) {
    if (!cst_wait(settled, a, 60000))
        fail_msg("%s: lag %.0f and committed offset %.0f after 60 s on %s/%d (end offset %lld): the lag does not "
                 "reach 0",
                 when, a->lag, a->committed, a->topic, (int)a->partition, (long long)a->end);
    printf("%s: %s/%d lag %.0f, committed %.0f, end %lld\n", when, a->topic, (int)a->partition, a->lag, a->committed,
           (long long)a->end);
}

/* The partition's end as a ListOffsets request sees it: with isolation.level
 * read_committed, librdkafka 2.0.2 asks for the last stable offset (LSO), with
 * read_uncommitted for the high watermark. */
static int64_t end_offset(const char *topic, int32_t partition, bool stable) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", cs_test_cluster_brokers(cst_cluster), err, sizeof err) ||
        rd_kafka_conf_set(conf, "isolation.level", stable ? "read_committed" : "read_uncommitted", err, sizeof err))
        fail_msg("offsets client: %s", err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) fail_msg("offsets client: %s", err);
    int64_t lo = -1, hi = -1;
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, topic, partition, &lo, &hi, 10000);
    rd_kafka_destroy(rk);
    if (e) fail_msg("end offset of %s/%d: %s", topic, (int)partition, rd_kafka_err2str(e));
    return hi;
}

/* The coordinator writes a transaction's markers after it answered the
 * commit or abort: the last stable offset moves a moment later. */
typedef struct stable_arg {
    const char *topic;
    int32_t partition;
    int64_t want, seen;
} stable_arg;

static bool stable_at(void *arg) {
    stable_arg *a = arg;
    a->seen = end_offset(a->topic, a->partition, true);
    return a->seen == a->want;
}

static void wait_stable(const char *topic, int32_t partition, int64_t want) {
    stable_arg a = {topic, partition, want, -1};
    if (!cst_wait(stable_at, &a, 30000))
        fail_msg("last stable offset of %s/%d is %lld, not %lld, 30 s after the transaction ended", topic,
                 (int)partition, (long long)a.seen, (long long)want);
}

/* The consumer's cached high watermark (from its last fetch) reached `want`:
 * it fetched after the open records were written. */
typedef struct hw_arg {
    cs_sub *s;
    const char *topic;
    int64_t want, seen;
} hw_arg;

static bool fetched_high(void *arg) {
    hw_arg *a = arg;
    int64_t lo = -1;
    rd_kafka_t *rk = cs_sub_rdkafka_consumer(a->s);
    return rk && rd_kafka_get_watermark_offsets(rk, a->topic, 0, &lo, &a->seen) == RD_KAFKA_RESP_ERR_NO_ERROR &&
           a->seen == a->want;
}

/* Everything handled: replies counted by the subscription. */
typedef struct handled_arg {
    cs_sub *s;
    uint64_t acked;
} handled_arg;

static bool handled(void *arg) {
    handled_arg *h = arg;
    cs_sub_stats st;
    cs_sub_stats_get(h->s, &st);
    return st.acked >= h->acked;
}

static void lag_reaches_zero(cs_commit_mode mode, const char *prefix) {
    char topic[128], group[160], out[160], id[200];
    cst_fresh(prefix, 2, topic, group, sizeof topic);
    snprintf(out, sizeof out, "%s.out", topic);
    CST_OK(cs_test_topic_create(cst_cluster, out, 2));
    snprintf(id, sizeof id, "%s.upstream", topic);
    rd_kafka_t *up = txn_producer(id);
    /* Two committed transactions on partition 0: a marker after each. */
    for (int t = 0; t < 2; t++) {
        txn_write(up, topic, 0, PER_TXN);
        txn_ok(rd_kafka_commit_transaction(up, 30000), "commit_transaction");
    }
    int64_t end0 = 2 * PER_TXN + 2; /* 40 records and 2 markers */
    wait_stable(topic, 0, end0);
    assert_int_equal(end_offset(topic, 0, false), end0);

    cs_sub *s;
    cs_app *app = start(mode, topic, group, out, &s);
    handled_arg h = {s, 2 * PER_TXN};
    assert_true(cst_wait(handled, &h, 60000));
    lag_arg a = {.app = app, .topic = topic, .group = group, .partition = 0, .end = end0};
    wait_settled(&a, "committed transactions handled");

    /* A transaction left open upstream: its records are on the broker
     * (flushed) but a read_committed reader cannot read them. */
    txn_write(up, topic, 0, PER_TXN);
    int64_t hw = end_offset(topic, 0, false); /* the high watermark, past the open records */
    assert_int_equal(hw, end0 + PER_TXN);
    assert_int_equal(end_offset(topic, 0, true), end0); /* the last stable offset, before them */
    /* A plain record on partition 1, written after them: once it is handled,
     * a fetch response that came after the open records were written has been
     * read, and the lag of partition 0 is what that response said. */
    CST_OK(cs_test_produce(cst_cluster, topic, 1, "k", 1, "plain", 5, NULL));
    h.acked++;
    assert_true(cst_wait(handled, &h, 60000));
    lag_arg a1 = {.app = app, .topic = topic, .group = group, .partition = 1, .end = end_offset(topic, 1, false)};
    wait_settled(&a1, "plain record handled");
    hw_arg seen = {s, topic, hw, -1};
    if (!cst_wait(fetched_high, &seen, 30000))
        fail_msg("the consumer's high watermark of %s/0 is %lld, not %lld", topic, (long long)seen.seen, (long long)hw);
    a.end = end0; /* nothing readable past the last stable offset */
    wait_settled(&a, "transaction open upstream");

    /* It aborts: the aborted records and the abort marker are passed. */
    txn_ok(rd_kafka_abort_transaction(up, 30000), "abort_transaction");
    a.end = hw + 1; /* the abort marker */
    wait_stable(topic, 0, a.end);
    assert_int_equal(end_offset(topic, 0, false), a.end);
    wait_settled(&a, "open transaction aborted");

    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.acked, 2 * PER_TXN + 1); /* the aborted records were never handed out */
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    rd_kafka_destroy(up);
}

static void transactional_lag_reaches_zero(void **state) {
    (void)state;
    lag_reaches_zero(CS_COMMIT_TRANSACTIONAL, "lag-txn");
}

static void tracked_lag_reaches_zero(void **state) {
    (void)state;
    lag_reaches_zero(CS_COMMIT_TRACKED, "lag-tracked");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transactional_lag_reaches_zero),
        cmocka_unit_test(tracked_lag_reaches_zero),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
