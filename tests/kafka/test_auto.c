/* test_auto.c — the Auto row of the behaviour contract, one test per cell:
 * ack and drop do nothing (librdkafka commits what it handed out), retry is
 * reported unsupported and the record does not come back, and a crash either
 * reads the handled tail again or skips records stored but not handled. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstest.h"

enum { N = 20, PARTS = 2 };

typedef struct fixture {
    cst_seen *seen;
    cs_outcome outcome;
    _Atomic bool crashing; /* the "process" is dead: handlers do nothing more */
    _Atomic bool block_first;
    pthread_mutex_t lock;
    pthread_cond_t gate;
} fixture;

static cs_outcome handle(cs_delivery *d, void *user) {
    fixture *f = user;
    if (atomic_load(&f->block_first) && cs_delivery_offset(d) == 0) {
        pthread_mutex_lock(&f->lock);
        while (!atomic_load(&f->crashing)) pthread_cond_wait(&f->gate, &f->lock);
        pthread_mutex_unlock(&f->lock);
    }
    if (atomic_load(&f->crashing)) return CS_ACK; /* dead processes handle nothing */
    cst_seen_add(f->seen, cs_delivery_partition(d), cs_delivery_offset(d));
    return f->outcome;
}

static fixture *fixture_new(cs_outcome outcome) {
    fixture *f = calloc(1, sizeof *f);
    f->seen = cst_seen_new(PARTS, N);
    f->outcome = outcome;
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->gate, NULL);
    return f;
}

static void fixture_free(fixture *f) {
    cst_seen_free(f->seen);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->gate);
    free(f);
}

/* `sub` (if not NULL) gets the subscription, for its counters. */
static cs_app *start_app(const char *topic, const char *group, fixture *f, const char *commit_interval, cs_sub **sub) {
    cs_app *app = cs_app_new("auto-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_non_null(k);
    if (commit_interval) CST_OK(cs_kafka_config(k, "auto.commit.interval.ms", commit_interval));
    cs_sub *s = cs_kafka_subscribe(k, topic, handle, f);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    if (sub) *sub = s;
    return app;
}

/* Produces N records over the partitions; returns the end offset of each. */
static void produce(const char *topic, int64_t end[PARTS]) {
    for (int p = 0; p < PARTS; p++) end[p] = 0;
    for (int i = 0; i < N; i++) {
        char v[16];
        snprintf(v, sizeof v, "r%d", i);
        int64_t off;
        CST_OK(cs_test_produce(cst_cluster, topic, i % PARTS, NULL, 0, v, strlen(v), &off));
        end[i % PARTS] = off + 1;
    }
}

/* Every record handled once and committed; the counters say each was settled
 * with `outcome` and that no retry was refused (nothing here asked for one). */
static void run_to_end(cs_outcome outcome) {
    char topic[128], group[160];
    cst_fresh("auto", PARTS, topic, group, sizeof topic);
    int64_t end[PARTS];
    produce(topic, end);
    fixture *f = fixture_new(outcome);
    cs_sub *sub;
    cs_app *app = start_app(topic, group, f, NULL, &sub);
    CST_OK(cs_test_app_wait_idle(app, 30000));
    for (int p = 0; p < PARTS; p++) CST_OK(cs_test_wait_committed(cst_cluster, group, topic, p, end[p], 10000));
    for (int p = 0; p < PARTS; p++)
        for (int64_t o = 0; o < end[p]; o++) assert_int_equal(cst_seen_count(f->seen, p, o), 1);
    cs_sub_stats st;
    cs_sub_stats_get(sub, &st);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    assert_int_equal(st.delivered, N);
    assert_int_equal(st.acked, outcome == CS_ACK ? N : 0);
    assert_int_equal(st.dropped, outcome == CS_DROP ? N : 0);
    assert_int_equal(st.retry_unsupported, 0);
    assert_int_equal(st.retried, 0);
    fixture_free(f);
}

static void ack_commits_each_record_once(void **state) {
    (void)state;
    run_to_end(CS_ACK);
}

static void drop_commits_like_ack(void **state) {
    (void)state;
    run_to_end(CS_DROP);
}

static cs_sub *retry_sub;
static cs_outcome always_retry(cs_delivery *d, void *user) {
    cst_seen_add(user, cs_delivery_partition(d), cs_delivery_offset(d));
    return CS_RETRY;
}

static void retry_is_unsupported_and_not_redelivered(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("auto-retry", PARTS, topic, group, sizeof topic);
    int64_t end[PARTS];
    produce(topic, end);
    cst_seen *seen = cst_seen_new(PARTS, N);
    cs_app *app = cs_app_new("auto-retry", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    retry_sub = cs_kafka_subscribe(k, topic, always_retry, seen);
    CST_OK(cs_sub_group(retry_sub, group));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    CST_OK(cs_test_app_wait_idle(app, 30000));
    /* Idle means nothing queued: a record that came back would be counted twice. */
    for (int p = 0; p < PARTS; p++)
        for (int64_t o = 0; o < end[p]; o++) assert_int_equal(cst_seen_count(seen, p, o), 1);
    cs_sub_stats st;
    cs_sub_stats_get(retry_sub, &st);
    assert_int_equal(st.retry_unsupported, N);
    assert_int_equal(st.retried, 0);
    /* The position moved past every retried record: they are lost. */
    for (int p = 0; p < PARTS; p++) CST_OK(cs_test_wait_committed(cst_cluster, group, topic, p, end[p], 10000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(seen);
}

/* Auto commits on a timer: a crash before the next commit reads the handled
 * tail again. The interval is set long so that no commit happens at all. */
static void crash_reads_handled_tail_again(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("auto-tail", PARTS, topic, group, sizeof topic);
    int64_t end[PARTS];
    produce(topic, end);
    fixture *first = fixture_new(CS_ACK);
    cs_app *app = start_app(topic, group, first, "600000", NULL);
    CST_OK(cs_test_app_wait_idle(app, 30000));
    assert_int_equal(cst_seen_distinct(first->seen), N);
    cs_test_app_crash(app);

    fixture *second = fixture_new(CS_ACK);
    app = start_app(topic, group, second, NULL, NULL);
    CST_OK(cs_test_app_wait_idle(app, 60000));
    assert_int_equal(cst_seen_distinct(second->seen), N); /* every handled record read again */
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    fixture_free(first);
    fixture_free(second);
}

static void *crash_app(void *app) {
    cs_test_app_crash(app);
    return NULL;
}

/* Auto stores a position when the record is handed out: records queued behind
 * a slow handler are committed before they are handled, and a crash skips them. */
static void crash_skips_stored_but_unhandled(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("auto-skip", 1, topic, group, sizeof topic);
    for (int i = 0; i < N; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "x", 1, NULL));
    fixture *first = fixture_new(CS_ACK);
    atomic_store(&first->block_first, true);
    cs_app *app = start_app(topic, group, first, NULL, NULL);
    /* All N were handed to cstream's queue and stored; the handler is stuck on offset 0. */
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, N, 30000));
    assert_int_equal(cst_seen_total(first->seen), 0);
    pthread_mutex_lock(&first->lock);
    atomic_store(&first->crashing, true);
    pthread_cond_broadcast(&first->gate);
    pthread_mutex_unlock(&first->lock);
    pthread_t t;
    pthread_create(&t, NULL, crash_app, app);
    pthread_join(t, NULL);

    fixture *second = fixture_new(CS_ACK);
    app = start_app(topic, group, second, NULL, NULL);
    CST_OK(cs_test_app_wait_idle(app, 60000));
    /* Nobody handled any of the N records: all skipped. */
    assert_int_equal(cst_seen_total(first->seen) + cst_seen_total(second->seen), 0);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    fixture_free(first);
    fixture_free(second);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ack_commits_each_record_once),
        cmocka_unit_test(drop_commits_like_ack),
        cmocka_unit_test(retry_is_unsupported_and_not_redelivered),
        cmocka_unit_test(crash_reads_handled_tail_again),
        cmocka_unit_test(crash_skips_stored_but_unhandled),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
