/* test_seek.c — cs_sub_seek on a running subscription: a seek back re-handles
 * exactly the records from the offset (Tracked, Auto, Transactional), a seek
 * forward skips, a seek races a record retrying from before it (the old run
 * settles as stale, the committed position never passes the open record, its
 * attempt count carries over), and seeks race a second member joining
 * (nothing lost). Runs on the embedded cluster and, as real.kafka.seek, on the
 * real broker. Timestamp seeks: tests/real/test_seek_time.c. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cstest.h"

enum { N = 20, MAX_OFF = 1000 };

typedef struct svc {
    cst_seen *seen;
    _Atomic int retry_offset; /* -1: none; this offset retries while `hold` */
    _Atomic bool hold;        /* the retried record keeps retrying */
    _Atomic int old_attempts; /* attempts of the retried record before the seek */
    _Atomic int new_attempt;  /* its attempt number at its first run after the seek (0: not yet) */
    _Atomic bool seeked;      /* set by the test once cs_sub_seek returned */
    _Atomic int assigns;
    _Atomic int hook_seek; /* what cs_sub_seek returned in the assign hook, -1 not called */
} svc;

static cs_outcome handle(cs_delivery *d, void *user) {
    svc *v = user;
    int64_t off = cs_delivery_offset(d);
    if (off == atomic_load(&v->retry_offset)) {
        if (atomic_load(&v->seeked) && atomic_load(&v->new_attempt) == 0)
            atomic_store(&v->new_attempt, cs_delivery_attempt(d));
        if (atomic_load(&v->hold)) {
            if (!atomic_load(&v->seeked)) atomic_store(&v->old_attempts, cs_delivery_attempt(d));
            return cs_delivery_retry_after(d, 20);
        }
    }
    cst_seen_add(v->seen, cs_delivery_partition(d), off);
    return CS_ACK;
}

static void on_assign(cs_sub *s, const char *topic, const int32_t *parts, size_t n, void *user) {
    svc *v = user;
    /* The hook runs on the fetch thread: a seek from it is refused, not a deadlock. */
    if (n > 0) atomic_store(&v->hook_seek, (int)cs_sub_seek(s, topic, parts[0], 0));
    atomic_fetch_add(&v->assigns, 1);
}

static svc *svc_new(int parts) {
    svc *v = calloc(1, sizeof *v);
    v->seen = cst_seen_new(parts, MAX_OFF);
    atomic_store(&v->retry_offset, -1);
    atomic_store(&v->hook_seek, -1);
    return v;
}

static void svc_free(svc *v) {
    cst_seen_free(v->seen);
    free(v);
}

static cs_app *start(const char *topic, const char *group, cs_commit_mode mode, svc *v, cs_sub **out) {
    cs_app *app = cs_app_new("seek", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, handle, v);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, mode));
    CST_OK(cs_sub_workers(s, 2));
    if (mode != CS_COMMIT_AUTO) CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_sub_drain_timeout_ms(s, 1000));
    CST_OK(cs_sub_on_assign(s, on_assign, v));
    if (mode == CS_COMMIT_AUTO) CST_OK(cs_sub_config(s, "auto.commit.interval.ms", "100"));
    if (mode == CS_COMMIT_TRANSACTIONAL) CST_OK(cs_kafka_instance_id(k, "seek-0"));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *out = s;
    return app;
}

typedef struct count_at {
    svc *v;
    int32_t partition;
    int64_t offset;
    int times;
} count_at;

static bool seen_times(void *arg) {
    count_at *c = arg;
    return cst_seen_count(c->v->seen, c->partition, c->offset) >= c->times;
}

/* ---- seek back ------------------------------------------------------------------ */

static void seek_back(cs_commit_mode mode) {
    char topic[128], group[160];
    cst_fresh("seek-back", 1, topic, group, sizeof topic);
    for (int i = 0; i < N; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    svc *v = svc_new(1);
    cs_sub *s;
    cs_app *app = start(topic, group, mode, v, &s);
    count_at last = {v, 0, N - 1, 1};
    assert_true(cst_wait(seen_times, &last, 30000));
    if (mode != CS_COMMIT_TRANSACTIONAL) /* the embedded cluster keeps no transaction's offsets */
        CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, N, 30000));

    /* Not assigned here, not subscribed: clear errors naming them, nothing moved. */
    assert_int_equal(cs_sub_seek(s, topic, 3, 0), CS_ERR_STATE);
    char want[200];
    snprintf(want, sizeof want, "%s/3 is not assigned", topic);
    if (!strstr(cs_errmsg(), want)) fail_msg("error does not name the partition: %s", cs_errmsg());
    assert_int_equal(cs_sub_seek(s, "no-such-topic", 0, 0), CS_ERR_STATE);
    assert_non_null(strstr(cs_errmsg(), "no-such-topic"));
    assert_int_equal(cs_sub_seek(s, topic, 0, -5), CS_ERR_ARG);
    assert_int_equal(atomic_load(&v->hook_seek), CS_ERR_STATE);

    CST_OK(cs_sub_seek(s, topic, 0, 5));
    last.times = 2;
    assert_true(cst_wait(seen_times, &last, 30000));
    CST_OK(cs_test_app_wait_idle(app, 30000));
    for (int64_t o = 0; o < N; o++)
        if (cst_seen_count(v->seen, 0, o) != (o < 5 ? 1 : 2))
            fail_msg("offset %lld handled %d times, want %d", (long long)o, cst_seen_count(v->seen, 0, o),
                     o < 5 ? 1 : 2);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.seeks, 1);
    double seeks = cst_metric(app, "cstream_seeks_total", NULL);
    assert_true(seeks == 1.0);
    if (mode != CS_COMMIT_TRANSACTIONAL) CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, N, 30000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    svc_free(v);
}

static void seek_back_tracked(void **state) {
    (void)state;
    seek_back(CS_COMMIT_TRACKED);
}

static void seek_back_auto(void **state) {
    (void)state;
    seek_back(CS_COMMIT_AUTO);
}

static void seek_back_transactional(void **state) {
    (void)state;
    seek_back(CS_COMMIT_TRANSACTIONAL);
}

/* ---- seek forward --------------------------------------------------------------- */

static bool fetched(void *arg) { return cst_fetched_to_end(arg); }

/* Paused before anything is handed out, the records are all fetched, the seek
 * moves past the first 15, the resume hands out only the rest. */
static void seek_forward_skips(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("seek-fwd", 1, topic, group, sizeof topic);
    svc *v = svc_new(1);
    cs_sub *s;
    cs_app *app = start(topic, group, CS_COMMIT_TRACKED, v, &s);
    CST_OK(cs_sub_pause(s));
    for (int i = 0; i < N; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    cst_fetched f = {s, N};
    assert_true(cst_wait(fetched, &f, 30000));
    assert_int_equal(cst_seen_total(v->seen), 0);
    CST_OK(cs_sub_seek(s, topic, 0, 15));
    CST_OK(cs_sub_resume(s));
    count_at last = {v, 0, N - 1, 1};
    assert_true(cst_wait(seen_times, &last, 30000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, N, 30000));
    for (int64_t o = 0; o < N; o++)
        if (cst_seen_count(v->seen, 0, o) != (o < 15 ? 0 : 1))
            fail_msg("offset %lld handled %d times", (long long)o, cst_seen_count(v->seen, 0, o));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    svc_free(v);
}

/* ---- a seek racing a retry ------------------------------------------------------- */

static bool retried_enough(void *arg) { return atomic_load(&((svc *)arg)->old_attempts) >= 3; }
static bool new_run_seen(void *arg) { return atomic_load(&((svc *)arg)->new_attempt) > 0; }

static void seek_races_retry(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("seek-retry", 1, topic, group, sizeof topic);
    for (int i = 0; i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    svc *v = svc_new(1);
    atomic_store(&v->retry_offset, 5);
    atomic_store(&v->hold, true);
    cs_sub *s;
    cs_app *app = start(topic, group, CS_COMMIT_TRACKED, v, &s);
    assert_true(cst_wait(retried_enough, v, 30000));
    /* Offsets 0-4 settled, 5 open (retrying), 6-9 settled: the group holds 5. */
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 5, 30000));
    CST_OK(cs_sub_seek(s, topic, 0, 2));
    atomic_store(&v->seeked, true);
    /* The old run of 5 comes back from its delay as stale; the new epoch's 5
     * keeps retrying: the position must not pass it. */
    assert_true(cst_wait(new_run_seen, v, 30000));
    cst_wait_commit_ticks(s, 5, 30000);
    int64_t committed = -1;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    if (committed > 5) fail_msg("committed %lld passed the open record 5", (long long)committed);
    /* Its count went on from the runs before the seek. */
    if (atomic_load(&v->new_attempt) <= atomic_load(&v->old_attempts))
        fail_msg("attempt after the seek %d, before it %d", atomic_load(&v->new_attempt),
                 atomic_load(&v->old_attempts));
    atomic_store(&v->hold, false);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 10, 30000));
    CST_OK(cs_test_app_wait_idle(app, 30000));
    /* 0-1 once, 2-4 and 6-9 twice (before and after the seek), 5 once (after). */
    for (int64_t o = 0; o < 10; o++) {
        int want = o < 2 ? 1 : o == 5 ? 1 : 2;
        if (cst_seen_count(v->seen, 0, o) != want)
            fail_msg("offset %lld handled %d times, want %d", (long long)o, cst_seen_count(v->seen, 0, o), want);
    }
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    svc_free(v);
}

/* ---- seeks racing a rebalance ---------------------------------------------------- */

enum { RB_PARTS = 4, RB_N = 200 };

typedef struct seeker {
    cs_sub *s;
    const char *topic;
    svc *b;
    _Atomic int ok, refused;
} seeker;

/* Seeks every partition of A's back to 0 until B has partitions. */
static void *seek_loop(void *arg) {
    seeker *k = arg;
    int64_t until = cst_now_ms() + 60000;
    while (atomic_load(&k->b->assigns) == 0 && cst_now_ms() < until) {
        cs_err err = cs_sub_seek(k->s, k->topic, -1, 0);
        if (err == CS_OK) atomic_fetch_add(&k->ok, 1);
        else if (err == CS_ERR_STATE) atomic_fetch_add(&k->refused, 1); /* nothing assigned in between */
        else fail_msg("seek: %s", cs_errmsg());
        struct timespec pace = {0, 5 * 1000 * 1000}; /* pacing only: a seek every 5 ms, no timing asserted */
        nanosleep(&pace, NULL);
    }
    return NULL;
}

static void seek_races_rebalance(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("seek-rebalance", RB_PARTS, topic, group, sizeof topic);
    CST_OK(cs_test_produce_many(cst_cluster, topic, "r-", RB_N));
    svc *a = svc_new(RB_PARTS), *b = svc_new(RB_PARTS);
    cs_sub *sa, *sb;
    cs_app *app_a = start(topic, group, CS_COMMIT_TRACKED, a, &sa);
    CST_OK(cs_test_app_wait_idle(app_a, 30000));
    seeker k = {.s = sa, .topic = topic, .b = b};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, seek_loop, &k), 0);
    cs_app *app_b = start(topic, group, CS_COMMIT_TRACKED, b, &sb);
    pthread_join(t, NULL);
    assert_true(atomic_load(&b->assigns) > 0);
    assert_true(atomic_load(&k.ok) > 0);
    CST_OK(cs_test_produce_many(cst_cluster, topic, "s-", RB_N));
    /* Everything ends committed, and every committed record was handled. */
    for (int p = 0; p < RB_PARTS; p++) {
        int64_t end;
        CST_OK(cs_test_end_offset(cst_cluster, topic, p, &end));
        CST_OK(cs_test_wait_committed(cst_cluster, group, topic, p, end, 60000));
        for (int64_t o = 0; o < end; o++)
            if (!cst_seen_count(a->seen, p, o) && !cst_seen_count(b->seen, p, o))
                fail_msg("%s/%d@%lld committed but never handled", topic, p, (long long)o);
    }
    printf("seeks applied %d, refused while unassigned %d\n", atomic_load(&k.ok), atomic_load(&k.refused));
    CST_OK(cs_app_stop(app_b));
    cs_app_destroy(app_b);
    CST_OK(cs_app_stop(app_a));
    cs_app_destroy(app_a);
    svc_free(a);
    svc_free(b);
}

/* Before start and after stop: a clear refusal, no crash. */
static void seek_needs_a_running_subscription(void **state) {
    (void)state;
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    svc *v = svc_new(1);
    cs_sub *s = cs_kafka_subscribe(k, "not-started", handle, v);
    assert_int_equal(cs_sub_seek(s, "not-started", 0, 0), CS_ERR_STATE);
    assert_non_null(strstr(cs_errmsg(), "not running"));
    assert_int_equal(cs_sub_pause(s), CS_ERR_STATE);
    assert_int_equal(cs_sub_seek(NULL, "t", 0, 0), CS_ERR_ARG);
    cs_kafka_destroy(k);
    svc_free(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seek_needs_a_running_subscription),
        cmocka_unit_test(seek_back_tracked),
        cmocka_unit_test(seek_back_auto),
        cmocka_unit_test(seek_back_transactional),
        cmocka_unit_test(seek_forward_skips),
        cmocka_unit_test(seek_races_retry),
        cmocka_unit_test(seek_races_rebalance),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
