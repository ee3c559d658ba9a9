/* test_stop_locks.c — a graceful stop holds no lock across the consumer's
 * close (src/kafka/broker/kafka.c, stop_everything). The close blocks on the group,
 * and its revoke callback runs the service's on_revoke hook on the stopping
 * thread, so a lock held across it
 *   - deadlocks a revoke hook that reads the subscription's counters
 *     (cs_sub_stats_get) on its own thread, and
 *   - makes every /metrics scrape (cs_app_metrics, which the HTTP route
 *     serves) wait for the whole close.
 * A slow close is made deterministic by a revoke hook that holds the close
 * until the test has scraped, for at most HOLD_MS; every wait has a deadline,
 * so the old code fails these tests instead of hanging them. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cstest.h"

enum {
    HANDLED_MS = 30000, /* the first record reaches the handler */
    STOP_MS = 30000,    /* a stop returns (it commits and leaves the group) */
    HOLD_MS = 10000,    /* the revoke hook holds the close at most this long for a scrape */
};

typedef struct fixture {
    cs_app *app;
    cs_sub *sub;
    char topic[128], group[160];
    _Atomic int handled;
    /* the revoke hook */
    bool hook_reads_stats; /* (a): cs_sub_stats_get from the hook */
    bool hook_holds;       /* (b): the close waits for the test's scrape */
    _Atomic int revokes;
    _Atomic int64_t delivered_in_hook;
    cst_gate in_hook, scraped; /* the hook holds the close; the test has scraped */
    _Atomic bool hold_expired; /* stored before the hook returns, so before the close goes on */
    /* the stopping thread */
    pthread_t stopper;
    _Atomic bool stopped;
    cs_err stop_err;
} fixture;

static cs_outcome handler(cs_delivery *d, void *user) {
    (void)d;
    atomic_fetch_add(&((fixture *)user)->handled, 1);
    return CS_ACK;
}

static void on_revoke(cs_sub *s, const char *topic, const int32_t *partitions, size_t n, void *user) {
    (void)topic, (void)partitions, (void)n;
    fixture *f = user;
    atomic_fetch_add(&f->revokes, 1);
    if (f->hook_reads_stats) {
        cs_sub_stats st;
        cs_sub_stats_get(s, &st);
        atomic_store(&f->delivered_in_hook, (int64_t)st.delivered);
    }
    if (!f->hook_holds) return;
    cst_gate_open(&f->in_hook);
    atomic_store(&f->hold_expired, !cst_gate_wait(&f->scraped, HOLD_MS));
}

static bool handled_one(void *arg) { return atomic_load(&((fixture *)arg)->handled) >= 1; }
static bool stopped(void *arg) { return atomic_load(&((fixture *)arg)->stopped); }

/* A Tracked subscription on a fresh 1-partition topic holding one record,
 * started, its record handled. */
static void start(fixture *f, const char *prefix) {
    cst_gate_init(&f->in_hook);
    cst_gate_init(&f->scraped);
    cst_fresh(prefix, 1, f->topic, f->group, sizeof f->topic);
    CST_OK(cs_test_produce(cst_cluster, f->topic, 0, NULL, 0, "v", 1, NULL));
    f->app = cs_app_new(prefix, "1.0");
    assert_non_null(f->app);
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_non_null(k);
    f->sub = cs_kafka_subscribe(k, f->topic, handler, f);
    assert_non_null(f->sub);
    CST_OK(cs_sub_group(f->sub, f->group));
    CST_OK(cs_sub_commit_mode(f->sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_on_revoke(f->sub, on_revoke, f));
    CST_OK(cs_app_add_kafka(f->app, k));
    CST_OK(cs_app_start(f->app));
    if (!cst_wait(handled_one, f, HANDLED_MS)) fail_msg("the record was not handled within %d s", HANDLED_MS / 1000);
}

static void *stop_main(void *arg) {
    fixture *f = arg;
    f->stop_err = cs_app_stop(f->app);
    atomic_store(&f->stopped, true);
    return NULL;
}

static void stop_in_background(fixture *f) { assert_int_equal(pthread_create(&f->stopper, NULL, stop_main, f), 0); }

/* Waits for the background stop; on a deadline the stopping thread is left
 * behind (it is stuck: nothing can be freed safely). */
static void join_stop(fixture *f, const char *why_stuck) {
    if (!cst_wait(stopped, f, STOP_MS)) {
        pthread_detach(f->stopper);
        fail_msg("cs_app_stop had not returned %d s after it started: %s (revoke hooks entered: %d)", STOP_MS / 1000,
                 why_stuck, atomic_load(&f->revokes));
    }
    pthread_join(f->stopper, NULL);
    CST_OK(f->stop_err);
}

static void finish(fixture *f) {
    cs_app_destroy(f->app);
    cst_gate_destroy(&f->in_hook);
    cst_gate_destroy(&f->scraped);
}

/* (a) The hook reads the counters during the graceful stop's close: the read
 * answers with the closing consumer's live counters, and the stop returns. */
static void revoke_hook_reads_the_stats_during_a_graceful_stop(void **state) {
    (void)state;
    static fixture f; /* static: a stuck stop keeps using it after the test failed */
    memset(&f, 0, sizeof f);
    atomic_store(&f.delivered_in_hook, -1);
    f.hook_reads_stats = true;
    start(&f, "stoplock-hook");
    stop_in_background(&f);
    join_stop(&f, "the on_revoke hook's cs_sub_stats_get waits for a lock its own (stopping) thread holds across "
                  "the consumer close");
    assert_true(atomic_load(&f.revokes) >= 1);              /* the close ran the hook */
    assert_int_equal(atomic_load(&f.delivered_in_hook), 1); /* the live counters, not zeros */
    cs_sub_stats after;
    cs_sub_stats_get(f.sub, &after); /* the final counters, kept after the consumer closed */
    assert_int_equal(after.delivered, 1);
    assert_int_equal(after.acked, 1);
    finish(&f);
}

/* The value of the first series of `family` labelled subscription="sub" (and
 * any labels after it) in a metrics body, or -1. */
static long long series_value(const char *body, const char *family, const char *sub) {
    char labels[256];
    snprintf(labels, sizeof labels, "subscription=\"%s\"", sub);
    double v;
    return cst_metric_in(body, family, labels, &v) ? (long long)v : -1;
}

/* (b) /metrics answers while a close is slow: the revoke hook holds the close
 * until the test has scraped (at most HOLD_MS). With a lock held across the
 * close, the scrape waits for the hold to expire. */
static void metrics_answer_while_a_close_is_slow(void **state) {
    (void)state;
    static fixture f;
    memset(&f, 0, sizeof f);
    f.hook_holds = true;
    start(&f, "stoplock-scrape");
    stop_in_background(&f);
    if (!cst_gate_wait(&f.in_hook, STOP_MS))
        fail_msg("the stop did not reach the revoke hook within %d s", STOP_MS / 1000);

    /* The close is now held in the hook, on the stopping thread. */
    char *body = NULL;
    cs_err err = cs_app_metrics(f.app, &body);
    /* Expired, the hook stored it before the close went on, so before the
     * scrape (held behind the close, if it is) answered. */
    bool expired = atomic_load(&f.hold_expired);
    cst_gate_open(&f.scraped);
    join_stop(&f, "the close did not finish after the scrape released the revoke hook");
    if (expired)
        fail_msg("the scrape answered only after the revoke hook had held the close for %d s: /metrics waits for "
                 "the whole consumer close",
                 HOLD_MS / 1000);
    CST_OK(err);
    /* The closing consumer's live numbers: its record was handled and acked. */
    long long delivered = series_value(body, "cstream_subscription_delivered_total", f.topic);
    long long acked = series_value(body, "cstream_subscription_acked_total", f.topic);
    if (delivered != 1 || acked != 1)
        fail_msg("during the close /metrics said delivered=%lld acked=%lld for %s, want 1 and 1:\n%s", delivered, acked,
                 f.topic, body);
    free(body);
    finish(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(revoke_hook_reads_the_stats_during_a_graceful_stop),
        cmocka_unit_test(metrics_answer_while_a_close_is_slow),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
