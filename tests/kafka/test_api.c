/* test_api.c — public calls that no other test pins down, each by what it
 * does rather than by its return code (both clusters):
 *
 * - CS_START_LATEST: a group without a committed offset never sees what was
 *   in the partition before it joined, and sees everything after;
 * - cs_delivery_timestamp is the CreateTime the record was produced with;
 * - cs_delivery_reason is what the attempt set, and a new attempt starts
 *   without one;
 * - cs_sub_window_records: a Transactional window closes once that many
 *   records settled (observed in the transactions counter and the committed
 *   position, with a window length too long to close it);
 * - cs_sub_commit_interval_ms under Transactional is the window length: short,
 *   windows commit while the app runs; an hour long, nothing commits before
 *   the stop closes the last window;
 * - keyless records under lanes by key are spread over every lane and each is
 *   handled once;
 * - cs_app_request_stop (here from a handler) makes cs_app_wait return CS_OK;
 * - cs_kafka_subscribe_topics with cs_delivery_topic, and cs_kafka_committed
 *   (embedded twins of what tests/real/test_bad_inputs.c and test_sasl.c use);
 * - cs_kafka_bootstrap: the servers the app really uses (its own embedded
 *   cluster's address after start, when it runs one);
 * - cs_test_cluster_clear_request_errors forgets pushed errors (embedded only). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cstest.h"
#include "cstream/rdkafka.h"

enum { MAXREC = 512 };

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- a plain librdkafka producer: records with a CreateTime of our choosing,
 * to any bootstrap address ------------------------------------------------------ */

typedef struct report {
    rd_kafka_resp_err_t err;
    int64_t offset;
    bool done;
} report;

static void on_report(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    report *r = m->_private;
    r->err = m->err;
    r->offset = m->offset;
    r->done = true;
}

/* Publishes value to topic/partition with CreateTime `timestamp` (0: now) and
 * waits for the report. Returns the offset; fails the test otherwise. */
static int64_t produce_raw(const char *brokers, const char *topic, int32_t partition, const char *value,
                           int64_t timestamp) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, err, sizeof err) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "message.timeout.ms", "20000", err, sizeof err) != RD_KAFKA_CONF_OK)
        fail_msg("raw producer: %s", err);
    rd_kafka_conf_set_dr_msg_cb(conf, on_report);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) fail_msg("raw producer: %s", err);
    report r = {0};
    rd_kafka_resp_err_t e =
        rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                          RD_KAFKA_V_VALUE((void *)value, strlen(value)), RD_KAFKA_V_TIMESTAMP(timestamp),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(&r), RD_KAFKA_V_END);
    while (!e && !r.done) rd_kafka_poll(rk, 100); /* bounded by message.timeout.ms */
    rd_kafka_destroy(rk);
    if (e || r.err)
        fail_msg("produce to %s/%d at %s: %s", topic, (int)partition, brokers, rd_kafka_err2str(e ? e : r.err));
    return r.offset;
}

/* ---- what handlers saw ---------------------------------------------------------- */

typedef struct seen {
    pthread_mutex_t lock;
    cst_seen *runs;
    _Atomic int total;
    int64_t timestamps[MAXREC]; /* partition 0: cs_delivery_timestamp by offset */
    int mismatches;             /* value did not name the delivery's topic */
    char mismatch[256];
    pthread_t threads[16]; /* distinct handler threads */
    int n_threads;
    _Atomic bool assigned;
    cs_app *app; /* to stop from the handler */
} seen;

static void seen_init(seen *s, int partitions) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    s->runs = cst_seen_new(partitions, MAXREC);
}

static void seen_free(seen *s) {
    cst_seen_free(s->runs);
    pthread_mutex_destroy(&s->lock);
}

static void note_thread(seen *s) {
    pthread_t me = pthread_self();
    for (int i = 0; i < s->n_threads; i++)
        if (pthread_equal(s->threads[i], me)) return;
    if (s->n_threads < 16) s->threads[s->n_threads++] = me;
}

/* Records what it was handed; a value "stop" asks the app to stop. */
static cs_outcome record(cs_delivery *d, void *user) {
    seen *s = user;
    int32_t p = cs_delivery_partition(d);
    int64_t o = cs_delivery_offset(d);
    cst_seen_add(s->runs, p, o);
    size_t len;
    const char *v = cs_delivery_value(d, &len);
    const char *topic = cs_delivery_topic(d);
    pthread_mutex_lock(&s->lock);
    note_thread(s);
    if (p == 0 && o >= 0 && o < MAXREC) s->timestamps[o] = cs_delivery_timestamp(d);
    /* Values of the multi-topic test are "<topic>:<n>": the delivery must name that topic. */
    const char *colon = v ? memchr(v, ':', len) : NULL;
    if (colon && (!topic || strlen(topic) != (size_t)(colon - v) || memcmp(topic, v, strlen(topic)))) {
        s->mismatches++;
        snprintf(s->mismatch, sizeof s->mismatch, "value %.*s handed out as a record of %s", (int)len, v,
                 topic ? topic : "(null)");
    }
    pthread_mutex_unlock(&s->lock);
    if (v && len == 4 && !memcmp(v, "stop", 4)) cs_app_request_stop(s->app);
    atomic_fetch_add(&s->total, 1);
    return CS_ACK;
}

static void on_assign(cs_sub *sub, const char *topic, const int32_t *partitions, size_t n, void *user) {
    (void)sub;
    (void)topic;
    (void)partitions;
    if (n > 0) atomic_store(&((seen *)user)->assigned, true);
}

typedef struct count_wait {
    seen *s;
    int n;
} count_wait;

static bool handled_at_least(void *arg) {
    count_wait *w = arg;
    return atomic_load(&w->s->total) >= w->n;
}

static void wait_handled(seen *s, int n) {
    count_wait w = {s, n};
    if (!cst_wait(handled_at_least, &w, 30000))
        fail_msg("%d records handled within 30 s, expected %d", atomic_load(&s->total), n);
}

static bool is_assigned(void *arg) { return atomic_load(&((seen *)arg)->assigned); }

static cs_app *start_tracked(const char *topic, const char *group, seen *s, cs_start where, int workers,
                             cs_lane_key lanes) {
    cs_app *app = cs_app_new("api-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *sub = cs_kafka_subscribe(k, topic, record, s);
    assert_non_null(sub);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_commit_interval_ms(sub, 50));
    CST_OK(cs_sub_start_at(sub, where));
    CST_OK(cs_sub_workers(sub, workers));
    CST_OK(cs_sub_lanes(sub, lanes));
    CST_OK(cs_sub_on_assign(sub, on_assign, s));
    CST_OK(cs_app_add_kafka(app, k));
    s->app = app;
    CST_OK(cs_app_start(app));
    return app;
}

static void stop(cs_app *app) {
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

/* ---- CS_START_LATEST ------------------------------------------------------------ */

static bool handled_any(void *arg) { return atomic_load(&((seen *)arg)->total) > 0; }

/* Records in the partition before the group's first assignment are never
 * handed out; records after it are, every one. Where "latest" lands is
 * decided by librdkafka's offset lookup shortly after the assignment, so the
 * test produces one record at a time until the first is handed out (a
 * record produced before the lookup answered is skipped, rightly): from that
 * one on, nothing may be missing. */
static void start_latest_skips_what_was_there_before(void **state) {
    (void)state;
    enum { BEFORE = 5, AFTER = 10 };
    char topic[128], group[160];
    cst_fresh("api-latest", 1, topic, group, sizeof topic);
    for (int i = 0; i < BEFORE; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "old", 3, NULL));
    seen s;
    seen_init(&s, 1);
    cs_app *app = start_tracked(topic, group, &s, CS_START_LATEST, 1, CS_LANES_BY_PARTITION);
    if (!cst_wait(is_assigned, &s, 30000)) fail_msg("no partition assigned within 30 s");
    int64_t first = -1, probe;
    for (int i = 0; i < 100 && atomic_load(&s.total) == 0; i++) {
        CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "new", 3, &probe));
        if (cst_wait(handled_any, &s, 300)) break;
    }
    if (atomic_load(&s.total) == 0) fail_msg("none of the records produced after the assignment was handed out");
    for (int64_t o = 0; o < MAXREC && first < 0; o++)
        if (cst_seen_count(s.runs, 0, o)) first = o;
    printf("first record handed out: offset %lld (the last probe was %lld)\n", (long long)first, (long long)probe);
    int64_t end = 0;
    for (int i = 0; i < AFTER; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "new", 3, &end));
    end++;
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, end, 30000));
    for (int64_t o = 0; o < BEFORE; o++)
        if (cst_seen_count(s.runs, 0, o))
            fail_msg("offset %lld, produced before the group started, was handed out", (long long)o);
    for (int64_t o = first; o < end; o++)
        if (cst_seen_count(s.runs, 0, o) != 1)
            fail_msg("offset %lld, produced after the start, was handed out %d times", (long long)o,
                     cst_seen_count(s.runs, 0, o));
    stop(app);
    seen_free(&s);
}

/* ---- cs_delivery_timestamp -------------------------------------------------------- */

/* Three records with CreateTimes an hour in the past (within what a broker
 * accepts by default), a second apart, plus a few ms so none is a round
 * number a clock could produce by chance. */
static void delivery_timestamp_is_the_create_time(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("api-ts", 1, topic, group, sizeof topic);
    int64_t base = wall_ms() - 3600 * 1000 - 123;
    int64_t want[3];
    for (int i = 0; i < 3; i++) {
        want[i] = base + i * 1000 + 7 * i;
        assert_int_equal(produce_raw(cs_test_cluster_brokers(cst_cluster), topic, 0, "t", want[i]), i);
    }
    seen s;
    seen_init(&s, 1);
    cs_app *app = start_tracked(topic, group, &s, CS_START_EARLIEST, 1, CS_LANES_BY_PARTITION);
    CST_OK(cs_test_app_wait_idle(app, 30000));
    stop(app);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cst_seen_count(s.runs, 0, i), 1);
        if (s.timestamps[i] != want[i])
            fail_msg("offset %d: cs_delivery_timestamp %lld, produced with CreateTime %lld", i,
                     (long long)s.timestamps[i], (long long)want[i]);
    }
    seen_free(&s);
}

/* ---- cs_delivery_reason ------------------------------------------------------------- */

typedef struct reasons {
    pthread_mutex_t lock;
    int runs;
    bool null_before[2]; /* per attempt: no reason before the handler set one */
    char after[2][64];   /* attempt 1: what cs_delivery_reason said after setting it */
} reasons;

static cs_outcome give_reason_once(cs_delivery *d, void *user) {
    reasons *r = user;
    int a = cs_delivery_attempt(d);
    pthread_mutex_lock(&r->lock);
    r->runs++;
    if (a >= 1 && a <= 2) {
        r->null_before[a - 1] = cs_delivery_reason(d) == NULL;
        if (a == 1) {
            cs_delivery_set_reason(d, "bank answered %d", 503);
            const char *got = cs_delivery_reason(d);
            snprintf(r->after[0], sizeof r->after[0], "%s", got ? got : "(null)");
        }
    }
    pthread_mutex_unlock(&r->lock);
    return a == 1 ? CS_RETRY : CS_ACK;
}

/* The reason is the one this attempt set (formatted), and the retry starts
 * without it: a reason belongs to one attempt. */
static void delivery_reason_belongs_to_its_attempt(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("api-reason", 1, topic, group, sizeof topic);
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "r", 1, NULL));
    reasons r = {.lock = PTHREAD_MUTEX_INITIALIZER};
    cs_app *app = cs_app_new("api-reason", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, give_reason_once, &r);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 1, 30000));
    stop(app);
    assert_int_equal(r.runs, 2);
    assert_true(r.null_before[0]);
    assert_string_equal(r.after[0], "bank answered 503");
    if (!r.null_before[1]) fail_msg("the second attempt started with the first attempt's reason");
}

/* ---- Transactional windows ---------------------------------------------------------- *
 * What a transaction committed is seen in the subscription's counters:
 * `transactions`, and `outputs` (each record replies once, and a transaction
 * carries the replies of the records below the position it commits). The
 * committed position itself is checked on the real broker only: the embedded
 * cluster does not store offsets sent in a transaction (LIBRDKAFKA-NOTES.md). */

typedef struct held {
    pthread_mutex_t lock;
    cs_delivery *d[MAXREC]; /* by offset (partition 0) */
    int n;
    _Atomic int acked; /* handler acks (when not holding) */
    bool hold;
} held;

static cs_outcome hold_or_ack(cs_delivery *d, void *user) {
    held *h = user;
    int64_t o = cs_delivery_offset(d);
    if (cs_delivery_reply(d, NULL, 0, "r", 1) != CS_OK) return CS_RETRY;
    pthread_mutex_lock(&h->lock);
    bool keep = h->hold && o >= 0 && o < MAXREC;
    if (keep) {
        h->d[o] = d;
        h->n++;
    }
    pthread_mutex_unlock(&h->lock);
    if (keep) return CS_PENDING;
    atomic_fetch_add(&h->acked, 1);
    return CS_ACK;
}

static cs_app *start_transactional(const char *topic, const char *group, held *h, int interval_ms,
                                   size_t window_records, cs_sub **out) {
    char replies[200];
    snprintf(replies, sizeof replies, "%s-out", topic);
    CST_OK(cs_test_topic_create(cst_cluster, replies, 1));
    cs_app *app = cs_app_new("api-txn", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_instance_id(k, group));
    cs_sub *s = cs_kafka_subscribe(k, topic, hold_or_ack, h);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRANSACTIONAL));
    CST_OK(cs_sub_commit_interval_ms(s, interval_ms));
    CST_OK(cs_sub_reply(s, replies, 5000));
    if (window_records) CST_OK(cs_sub_window_records(s, window_records));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *out = s;
    return app;
}

static cs_sub_stats stats(cs_sub *s) {
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    return st;
}

/* On the real broker: the group's committed position is `want`. */
static void check_committed(const char *group, const char *topic, int64_t want) {
    if (cs_test_cluster_is_embedded(cst_cluster)) return; /* not stored there, see above */
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, want, 30000));
    int64_t off;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &off));
    assert_int_equal(off, want);
}

static bool all_held(void *arg) {
    held *h = arg;
    pthread_mutex_lock(&h->lock);
    int n = h->n;
    pthread_mutex_unlock(&h->lock);
    return n >= 12;
}

typedef struct txn_wait {
    cs_sub *s;
    uint64_t n;
} txn_wait;

static bool transactions_reached(void *arg) {
    txn_wait *w = arg;
    return stats(w->s).transactions >= w->n;
}

/* The window is an hour long, so only window_records can close it: records
 * are settled five at a time (the handler keeps them pending; four, then the
 * fifth), and each five make one transaction that carries their five replies and commits the
 * position past them. The last two are fewer than five: they wait for the stop. */
static void window_closes_after_window_records(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("api-window", 1, topic, group, sizeof topic);
    for (int i = 0; i < 12; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "w", 1, NULL));
    held h = {.lock = PTHREAD_MUTEX_INITIALIZER, .hold = true};
    cs_sub *s;
    cs_app *app = start_transactional(topic, group, &h, 3600000, 5, &s);
    if (!cst_wait(all_held, &h, 30000)) fail_msg("the 12 records were not all handed out within 30 s");
    assert_int_equal(stats(s).transactions, 0);
    for (int round = 1; round <= 2; round++) {
        int first = (round - 1) * 5;
        for (int o = first; o < first + 4; o++) CST_OK(cs_delivery_settle(h.d[o], CS_ACK));
        /* Four settled: not yet. The pause only gives a window that closes
         * too early time to show it (the fetch thread looks at least every
         * 100 ms); the right behaviour passes however long it is. An early
         * transaction still under way here shows below, as 4 outputs. */
        usleep(300 * 1000);
        if (stats(s).transactions != (uint64_t)round - 1)
            fail_msg("round %d: a window closed after 4 settled records, window_records is 5", round);
        CST_OK(cs_delivery_settle(h.d[first + 4], CS_ACK));
        txn_wait w = {s, (uint64_t)round};
        if (!cst_wait(transactions_reached, &w, 30000))
            fail_msg("round %d: %d records settled, window_records 5: %llu transactions within 30 s, expected %d",
                     round, round * 5, (unsigned long long)stats(s).transactions, round);
        check_committed(group, topic, round * 5); /* 10 and 11 are still pending */
        assert_int_equal(stats(s).transactions, round);
        assert_int_equal(stats(s).outputs, round * 5);
    }
    CST_OK(cs_delivery_settle(h.d[10], CS_ACK));
    CST_OK(cs_delivery_settle(h.d[11], CS_ACK));
    CST_OK(cs_app_stop(app)); /* the stop closes the last window */
    assert_int_equal(stats(s).transactions, 3);
    assert_int_equal(stats(s).outputs, 12);
    cs_app_destroy(app);
    check_committed(group, topic, 12);
}

static bool three_committed(void *arg) {
    cs_sub_stats st = stats(arg);
    return st.transactions >= 1 && st.outputs >= 3;
}

/* A 50 ms window: the records commit while the app runs. */
static void short_window_commits_while_running(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("api-interval", 1, topic, group, sizeof topic);
    for (int i = 0; i < 3; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "i", 1, NULL));
    held h = {.lock = PTHREAD_MUTEX_INITIALIZER};
    cs_sub *s;
    cs_app *app = start_transactional(topic, group, &h, 50, 0, &s);
    if (!cst_wait(three_committed, s, 30000))
        fail_msg("a 50 ms window: %llu transactions, %llu outputs committed within 30 s of running, expected the 3 "
                 "records' replies",
                 (unsigned long long)stats(s).transactions, (unsigned long long)stats(s).outputs);
    check_committed(group, topic, 3);
    stop(app);
}

static bool acked_three(void *arg) { return atomic_load(&((held *)arg)->acked) >= 3; }

/* An hour-long window (and window_records at its default, 10000): the three
 * records are handled, and nothing commits until the stop closes the window,
 * in one transaction. The pauses below only give a wrong window length (the
 * default is 100 ms, and the embedded cluster's first transaction takes
 * several hundred ms) the chance to show itself while the app runs; if it
 * did not, the count of transactions at the stop does. */
static void hour_long_window_commits_only_at_the_stop(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("api-interval-long", 1, topic, group, sizeof topic);
    for (int i = 0; i < 3; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "i", 1, NULL));
    held h = {.lock = PTHREAD_MUTEX_INITIALIZER};
    cs_sub *s;
    cs_app *app = start_transactional(topic, group, &h, 3600000, 0, &s);
    if (!cst_wait(acked_three, &h, 30000)) fail_msg("the 3 records were not handled within 30 s");
    for (int i = 0; i < 20; i++) {
        usleep(100 * 1000);
        cs_sub_stats st = stats(s);
        if (st.transactions != 0 || st.outputs != 0)
            fail_msg("a window of 3600000 ms committed within %d ms (%llu transactions, %llu outputs)", (i + 1) * 100,
                     (unsigned long long)st.transactions, (unsigned long long)st.outputs);
    }
    check_committed(group, topic, -1);
    CST_OK(cs_app_stop(app));
    assert_int_equal(stats(s).transactions, 1);
    assert_int_equal(stats(s).outputs, 3);
    cs_app_destroy(app);
    check_committed(group, topic, 3);
}

/* ---- keyless records under lanes by key ----------------------------------------------- */

/* Keyless records of one partition are spread over the lanes (each lane is
 * one worker thread): with 4 lanes and 200 records, all 4 threads run some,
 * and every record is handled exactly once and committed. */
static void keyless_records_spread_over_lanes_by_key(void **state) {
    (void)state;
    enum { N = 200, LANES = 4 };
    char topic[128], group[160];
    cst_fresh("api-keyless", 1, topic, group, sizeof topic);
    for (int i = 0; i < N; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "k", 1, NULL));
    seen s;
    seen_init(&s, 1);
    cs_app *app = start_tracked(topic, group, &s, CS_START_EARLIEST, LANES, CS_LANES_BY_KEY);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, N, 30000));
    stop(app);
    assert_int_equal(cst_seen_distinct(s.runs), N);
    assert_int_equal(cst_seen_total(s.runs), N);
    if (s.n_threads != LANES)
        fail_msg("keyless records ran on %d handler threads, expected all %d lanes", s.n_threads, LANES);
    seen_free(&s);
}

/* ---- cs_app_request_stop and cs_app_wait --------------------------------------------- */

typedef struct waiter {
    cs_app *app;
    _Atomic bool returned;
    cs_err err;
    char msg[512];
} waiter;

static void *wait_main(void *arg) {
    waiter *w = arg;
    w->err = cs_app_wait(w->app);
    snprintf(w->msg, sizeof w->msg, "%s", cs_errmsg());
    atomic_store(&w->returned, true);
    return NULL;
}

static bool wait_returned(void *arg) { return atomic_load(&((waiter *)arg)->returned); }

/* A handler asks for the stop (any thread may): cs_app_wait returns CS_OK,
 * the graceful stop commits the record, and asking again is harmless. */
static void request_stop_ends_wait_with_ok(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("api-stop", 1, topic, group, sizeof topic);
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "go", 2, NULL));
    seen s;
    seen_init(&s, 1);
    cs_app *app = start_tracked(topic, group, &s, CS_START_EARLIEST, 1, CS_LANES_BY_PARTITION);
    waiter w = {.app = app};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_main, &w), 0);
    wait_handled(&s, 1);
    /* Running, a record handled, no stop asked for: cs_app_wait still waits. */
    assert_false(atomic_load(&w.returned));
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "stop", 4, NULL));
    if (!cst_wait(wait_returned, &w, 30000)) {
        /* The waiting thread cannot be recovered: end the binary, do not hang until ctest's timeout. */
        fprintf(stderr, "FAILED: cs_app_wait did not return within 30 s of cs_app_request_stop\n");
        fflush(stderr);
        _exit(1);
    }
    pthread_join(t, NULL);
    if (w.err != CS_OK) fail_msg("cs_app_wait -> %s (%s), expected CS_OK", cs_err_name(w.err), w.msg);
    cs_app_request_stop(app); /* idempotent */
    CST_OK(cs_app_stop(app));
    CST_OK(cs_app_wait(app)); /* asked after the stop: still no error to report */
    cs_app_destroy(app);
    assert_int_equal(cst_seen_count(s.runs, 0, 1), 1);
    int64_t off;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &off));
    assert_int_equal(off, 2);
    seen_free(&s);
}

/* ---- cs_kafka_subscribe_topics, cs_delivery_topic, cs_kafka_committed ---------------- */

typedef struct committed_wait {
    cs_kafka *k;
    const char *group, *topic;
    int32_t partition;
    int64_t at_least, last;
    cs_err err;
} committed_wait;

static bool kafka_committed_reached(void *arg) {
    committed_wait *w = arg;
    w->err = cs_kafka_committed(w->k, w->group, w->topic, w->partition, &w->last);
    return w->err == CS_OK && w->last >= w->at_least;
}

static void wait_kafka_committed(cs_kafka *k, const char *group, const char *topic, int32_t p, int64_t at_least) {
    committed_wait w = {k, group, topic, p, at_least, -1, CS_OK};
    if (!cst_wait(kafka_committed_reached, &w, 30000))
        fail_msg("cs_kafka_committed(%s, %s/%d): %lld (%s), expected >= %lld within 30 s", group, topic, (int)p,
                 (long long)w.last, cs_err_name(w.err), (long long)at_least);
}

/* One subscription to two topics: every record handled once, each delivery
 * names the topic it came from, and cs_kafka_committed (through the app's
 * broker, before and while it runs) agrees with the cluster. */
static void subscribe_topics_names_each_record_topic(void **state) {
    (void)state;
    char a[128], b[128], group[160];
    cst_fresh("api-topics-a", 2, a, group, sizeof a);
    cst_fresh("api-topics-b", 1, b, NULL, sizeof b);
    char value[160];
    const int64_t ends[3] = {4, 2, 3}; /* a/0, a/1, b/0: different, so a mixed-up partition shows */
    for (int i = 0; i < 6; i++) {
        snprintf(value, sizeof value, "%s:%d", a, i);
        CST_OK(cs_test_produce(cst_cluster, a, i < 4 ? 0 : 1, NULL, 0, value, strlen(value), NULL));
    }
    for (int i = 0; i < 3; i++) {
        snprintf(value, sizeof value, "%s:%d", b, i);
        CST_OK(cs_test_produce(cst_cluster, b, 0, NULL, 0, value, strlen(value), NULL));
    }
    seen s;
    seen_init(&s, 2);
    cs_app *app = cs_app_new("api-topics", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    int64_t off;
    CST_OK(cs_kafka_committed(k, group, a, 0, &off)); /* configured servers: works before start */
    assert_int_equal(off, -1);
    const char *topics[] = {a, b};
    cs_sub *sub = cs_kafka_subscribe_topics(k, topics, 2, record, &s);
    assert_non_null(sub);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_commit_interval_ms(sub, 50));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    wait_handled(&s, 9);
    const char *topic_of[3] = {a, a, b};
    const int32_t partition_of[3] = {0, 1, 0};
    for (int i = 0; i < 3; i++) {
        CST_OK(cs_test_wait_committed(cst_cluster, group, topic_of[i], partition_of[i], ends[i], 30000));
        CST_OK(cs_kafka_committed(k, group, topic_of[i], partition_of[i], &off));
        if (off != ends[i])
            fail_msg("cs_kafka_committed(%s/%d) = %lld, the cluster says %lld", topic_of[i], (int)partition_of[i],
                     (long long)off, (long long)ends[i]);
    }
    assert_int_equal(atomic_load(&s.total), 9);
    pthread_mutex_lock(&s.lock);
    if (s.mismatches) fail_msg("%d deliveries named the wrong topic, e.g. %s", s.mismatches, s.mismatch);
    pthread_mutex_unlock(&s.lock);
    CST_OK(cs_kafka_committed(k, "api-no-such-group", b, 0, &off));
    assert_int_equal(off, -1);
    stop(app);
    seen_free(&s);
}

/* ---- cs_kafka_bootstrap ------------------------------------------------------------------ */

/* A broker made with no servers. With CSTREAM_BROKERS unset (the embedded
 * run) the app starts its own embedded cluster: before start there is no
 * address and cs_kafka_committed says the cluster is not running; after
 * start cs_kafka_bootstrap is an address where a plain librdkafka producer
 * reaches that cluster, and cs_kafka_committed reads it. With CSTREAM_BROKERS
 * set (the real-broker run) the broker uses those servers from the start. */
static void bootstrap_is_the_cluster_in_use(void **state) {
    (void)state;
    const char *env = getenv("CSTREAM_BROKERS");
    bool own = !(env && *env);
    char topic[128], group[160];
    cs_test_unique_name(topic, sizeof topic, "api-own");
    snprintf(group, sizeof group, "%s-group", topic);
    if (!own) CST_OK(cs_test_topic_create(cst_cluster, topic, 1));
    seen s;
    seen_init(&s, 1);
    cs_app *app = cs_app_new("api-bootstrap", "1.0");
    cs_kafka *k = cs_kafka_new(NULL);
    assert_non_null(k);
    CST_OK(cs_kafka_config(k, "fetch.wait.max.ms", "10"));
    int64_t off = 0;
    if (own) {
        assert_null(cs_kafka_bootstrap(k));
        assert_int_equal(cs_kafka_is_embedded(k), 1);
        assert_int_equal(cs_kafka_committed(k, group, topic, 0, &off), CS_ERR_STATE);
    } else {
        assert_non_null(cs_kafka_bootstrap(k));
        assert_string_equal(cs_kafka_bootstrap(k), env);
        assert_int_equal(cs_kafka_is_embedded(k), 0);
        CST_OK(cs_kafka_committed(k, group, topic, 0, &off));
        assert_int_equal(off, -1);
    }
    CST_OK(cs_kafka_topic(k, topic, 1)); /* created on the embedded cluster, checked on a real one */
    cs_sub *sub = cs_kafka_subscribe(k, topic, record, &s);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_commit_interval_ms(sub, 50));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    const char *addr = cs_kafka_bootstrap(k);
    assert_non_null(addr);
    printf("bootstrap after start: %s (%s)\n", addr, own ? "the app's own embedded cluster" : "CSTREAM_BROKERS");
    if (own) assert_string_not_equal(addr, cs_test_cluster_brokers(cst_cluster)); /* its own, not the test's */
    else assert_string_equal(addr, env);
    assert_int_equal(produce_raw(addr, topic, 0, "hello", 0), 0);
    wait_handled(&s, 1);
    wait_kafka_committed(k, group, topic, 0, 1);
    stop(app);
    assert_int_equal(cst_seen_count(s.runs, 0, 0), 1);
    seen_free(&s);
}

/* ---- cs_test_cluster_clear_request_errors ------------------------------------------------------- */

/* Three Produce errors pushed, one used up by a publish that fails with it,
 * the rest cleared: the next publish succeeds. Without the clear it would
 * meet the second pushed error. */
static void clear_request_errors_forgets_pushed_errors(void **state) {
    (void)state;
    if (!cs_test_cluster_is_embedded(cst_cluster)) {
        /* Documented: fault injection is the embedded cluster's alone. */
        assert_int_equal(cs_test_cluster_clear_request_errors(cst_cluster, 0), CS_ERR_UNSUPPORTED);
        cst_skip("embedded cluster only: cs_test_cluster_clear_request_errors clears errors pushed into the embedded "
                 "cluster; a real "
                 "broker cannot be told to fail requests (it answered CS_ERR_UNSUPPORTED, as documented)");
    }
    char topic[128];
    cst_fresh("api-clear", 1, topic, NULL, sizeof topic);
    const int too_large[3] = {10, 10, 10}; /* MESSAGE_TOO_LARGE: not retried by the producer */
    CST_OK(cs_test_cluster_push_request_errors(cst_cluster, 0 /* Produce */, 3, too_large));
    cs_err err = cs_test_produce(cst_cluster, topic, 0, NULL, 0, "x", 1, NULL);
    if (err == CS_OK) fail_msg("the publish after pushing Produce errors succeeded: the push had no effect");
    printf("publish with an error pushed: %s: %s\n", cs_err_name(err), cs_errmsg());
    CST_OK(cs_test_cluster_clear_request_errors(cst_cluster, 0));
    int64_t off = -1;
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "y", 1, &off));
    assert_int_equal(off, 0); /* the failed one was never written */
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "z", 1, &off));
    assert_int_equal(off, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(start_latest_skips_what_was_there_before),
        cmocka_unit_test(delivery_timestamp_is_the_create_time),
        cmocka_unit_test(delivery_reason_belongs_to_its_attempt),
        cmocka_unit_test(window_closes_after_window_records),
        cmocka_unit_test(short_window_commits_while_running),
        cmocka_unit_test(hour_long_window_commits_only_at_the_stop),
        cmocka_unit_test(keyless_records_spread_over_lanes_by_key),
        cmocka_unit_test(request_stop_ends_wait_with_ok),
        cmocka_unit_test(subscribe_topics_names_each_record_topic),
        cmocka_unit_test(bootstrap_is_the_cluster_in_use),
        cmocka_unit_test(clear_request_errors_forgets_pushed_errors),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
