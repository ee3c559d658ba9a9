/* test_outcomes.c — an outcome that is none of ack, drop, retry and pending
 * (CS_UNSET or CS_EACH from a record handler, CS_EACH or a value outside the
 * enum in a batch's outcomes[]) is a logged retry like an unset element: it
 * counts toward max_attempts (so it ends, here with no dead-letter topic as
 * `exhausted`, with the reason "invalid outcome"), and a batch's invalid
 * elements come back in fetch order. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstest.h"
#include "cstream/rdkafka.h"

/* Outside the enum on purpose: what a handler with a bad cast returns. */
#define OUT_OF_RANGE ((cs_outcome)77)

/* ---- a record handler: invalid on every attempt -------------------------- */

typedef struct seen_ctx {
    cst_seen *seen;
} seen_ctx;

/* Offsets 0, 1 and 2 get CS_UNSET, CS_EACH and an out-of-range value on every
 * attempt; the others are acked. */
static cs_outcome invalid_record(cs_delivery *d, void *user) {
    seen_ctx *c = user;
    int64_t off = cs_delivery_offset(d);
    cst_seen_add(c->seen, 0, off);
    switch (off) {
    case 0: return CS_UNSET;
    case 1: return CS_EACH;
    case 2: return OUT_OF_RANGE;
    default: return CS_ACK;
    }
}

static void invalid_record_outcome_reaches_max_attempts(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("outcome-one", 1, topic, group, sizeof topic);
    for (int i = 0; i < 5; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "x", 1, NULL));
    seen_ctx c = {cst_seen_new(1, 16)};
    cst_capture cap;
    cst_capture_start(&cap);
    cs_app *app = cs_app_new("outcome-one", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, invalid_record, &c);
    cs_err err = s ? cs_sub_group(s, group) : CS_ERR_ARG;
    if (!err) err = cs_sub_commit_mode(s, CS_COMMIT_TRACKED);
    if (!err) err = cs_sub_commit_interval_ms(s, 20);
    if (!err) err = cs_sub_max_attempts(s, 3);
    if (!err) err = cs_app_add_kafka(app, k);
    if (!err) err = cs_app_start(app);
    /* Without the cap the three would retry for ever: nothing past offset 0 is committed. */
    cs_err committed = err ? err : cs_test_wait_committed(cst_cluster, group, topic, 0, 5, 30000);
    char *log = cst_capture_stop(&cap);
    if (err) fail_msg("start: %s\n--- captured:\n%s", cs_errmsg(), log);
    if (committed) fail_msg("offset 5 not committed within 30 s (%s)\n--- captured:\n%s", cs_errmsg(), log);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.exhausted, 3);
    assert_int_equal(st.retried, 6); /* two retries each, the third attempt gives up */
    assert_int_equal(st.acked, 2);
    for (int64_t o = 0; o < 3; o++) assert_int_equal(cst_seen_count(c.seen, 0, o), 3);
    char line[1024], want[256];
    if (!cst_log_line(log, "record handler returned an invalid outcome", line, sizeof line))
        fail_msg("no \"invalid outcome\" ERROR line\n--- captured:\n%s", log);
    printf("%s\n", line);
    assert_non_null(strstr(line, "ERROR"));
    assert_non_null(strstr(line, " commit=tracked "));
    snprintf(want, sizeof want, " topic=%s partition=0 offset=0 attempt=1 outcome=%d ", topic, (int)CS_UNSET);
    if (!strstr(line, want)) fail_msg("the line lacks%s:\n%s", want, line);
    for (int64_t o = 0; o < 3; o++) {
        snprintf(want, sizeof want, "topic=%s partition=0 offset=%lld attempts=3 reason=\"invalid outcome\"", topic,
                 (long long)o);
        if (!strstr(log, want)) fail_msg("no give-up line with %s\n--- captured:\n%s", want, log);
    }
    free(log);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(c.seen);
}

/* ---- a batch handler ----------------------------------------------------- */

enum { MAX_CALLS = 64 };

typedef struct calls {
    cst_gate gate; /* the first call waits here until the rest is fetched */
    pthread_mutex_t lock;
    int n;
    int64_t first[MAX_CALLS];
    size_t size[MAX_CALLS];
    int attempt[MAX_CALLS];
    bool forever; /* invalid on every attempt, not just the first */
} calls;

static bool one_call(void *arg) {
    calls *c = arg;
    pthread_mutex_lock(&c->lock);
    bool yes = c->n >= 1;
    pthread_mutex_unlock(&c->lock);
    return yes;
}

/* Offsets 2, 5 and 7 get CS_EACH, an out-of-range value and a negative one
 * (on their first attempt, or on every one with `forever`); the rest acks. */
static cs_outcome invalid_elements(cs_delivery *const *b, size_t n, cs_outcome *outcomes, void *user) {
    calls *c = user;
    pthread_mutex_lock(&c->lock);
    int call = c->n++;
    if (call < MAX_CALLS) {
        c->first[call] = cs_delivery_offset(b[0]);
        c->size[call] = n;
        c->attempt[call] = cs_delivery_attempt(b[0]);
    }
    pthread_mutex_unlock(&c->lock);
    if (call == 0 && !cst_gate_wait(&c->gate, 60000)) fprintf(stderr, "invalid_elements: the gate never opened\n");
    for (size_t i = 0; i < n; i++) {
        int64_t off = cs_delivery_offset(b[i]);
        bool bad = c->forever || cs_delivery_attempt(b[i]) == 1;
        outcomes[i] = !bad ? CS_ACK : off == 2 ? CS_EACH : off == 5 ? OUT_OF_RANGE : off == 7 ? (cs_outcome)-1 : CS_ACK;
    }
    return CS_EACH;
}

static cs_app *start_batch(const char *topic, const char *group, calls *c, int max_attempts, cs_sub **out) {
    cs_app *app = cs_app_new("outcome-batch", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe_batch(k, topic, invalid_elements, 10, c);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_commit_interval_ms(s, 20));
    if (max_attempts) CST_OK(cs_sub_max_attempts(s, max_attempts));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *out = s;
    return app;
}

/* Offset 0 alone in a first call that waits while 1..9 are produced and
 * fetched, so that 1..9 make the second call, one batch. */
static void feed_one_then_nine(const char *topic, cs_sub *s, calls *c) {
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "x", 1, NULL));
    if (!cst_wait(one_call, c, 30000)) fail_msg("the batch handler was not called within 30 s");
    for (int i = 1; i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "x", 1, NULL));
    cst_fetched f = {s, 10};
    if (!cst_wait(cst_fetched_to_end, &f, 30000)) fail_msg("offsets 1..9 not fetched within 30 s");
    cst_gate_open(&c->gate);
}

static calls *calls_new(void) {
    calls *c = calloc(1, sizeof *c);
    cst_gate_init(&c->gate);
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

static void calls_free(calls *c) {
    cst_gate_destroy(&c->gate);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static void invalid_batch_elements_come_back_in_order(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("outcome-batch", 1, topic, group, sizeof topic);
    calls *c = calls_new();
    cst_capture cap;
    cst_capture_start(&cap);
    cs_sub *s;
    cs_app *app = start_batch(topic, group, c, 0, &s);
    feed_one_then_nine(topic, s, c);
    cs_err committed = cs_test_wait_committed(cst_cluster, group, topic, 0, 10, 30000);
    char *log = cst_capture_stop(&cap);
    if (committed) fail_msg("offset 10 not committed within 30 s (%s)\n--- captured:\n%s", cs_errmsg(), log);
    pthread_mutex_lock(&c->lock);
    int calls_made = c->n;
    int64_t again[3] = {-1, -1, -1};
    int k = 0;
    for (int i = 0; i < c->n && i < MAX_CALLS; i++)
        if (c->attempt[i] == 2 && k < 3) {
            assert_int_equal(c->size[i], 1); /* each came back alone */
            again[k++] = c->first[i];
        }
    pthread_mutex_unlock(&c->lock);
    assert_int_equal(calls_made, 5); /* 0; 1..9; then 2, 5 and 7 alone */
    assert_int_equal(c->size[1], 9);
    if (again[0] != 2 || again[1] != 5 || again[2] != 7)
        fail_msg("the invalid elements came back as %lld, %lld, %lld; want 2, 5, 7 (fetch order)", (long long)again[0],
                 (long long)again[1], (long long)again[2]);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.retried, 3);
    assert_int_equal(st.acked, 10);
    char line[1024];
    if (!cst_log_line(log, "batch handler returned an invalid outcome", line, sizeof line))
        fail_msg("no \"invalid outcome\" ERROR line\n--- captured:\n%s", log);
    printf("%s\n", line);
    assert_non_null(strstr(line, "ERROR"));
    assert_non_null(strstr(line, " commit=tracked "));
    free(log);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    calls_free(c);
}

static void invalid_batch_element_reaches_max_attempts(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("outcome-batch-cap", 1, topic, group, sizeof topic);
    calls *c = calls_new();
    c->forever = true;
    cst_gate_open(&c->gate); /* no need to hold the first call */
    for (int i = 0; i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "x", 1, NULL));
    cst_capture cap;
    cst_capture_start(&cap);
    cs_sub *s;
    cs_app *app = start_batch(topic, group, c, 2, &s);
    cs_err committed = cs_test_wait_committed(cst_cluster, group, topic, 0, 10, 30000);
    char *log = cst_capture_stop(&cap);
    if (committed) fail_msg("offset 10 not committed within 30 s (%s)\n--- captured:\n%s", cs_errmsg(), log);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.exhausted, 3); /* 2, 5 and 7 after their second attempt */
    assert_int_equal(st.retried, 3);
    assert_int_equal(st.acked, 7);
    char want[256];
    snprintf(want, sizeof want, "topic=%s partition=0 offset=5 attempts=2 reason=\"invalid outcome\"", topic);
    if (!strstr(log, want)) fail_msg("no give-up line with %s\n--- captured:\n%s", want, log);
    free(log);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    calls_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(invalid_record_outcome_reaches_max_attempts),
        cmocka_unit_test(invalid_batch_elements_come_back_in_order),
        cmocka_unit_test(invalid_batch_element_reaches_max_attempts),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
