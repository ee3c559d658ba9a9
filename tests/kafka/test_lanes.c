/* test_lanes.c — ordered lanes by key and delayed retries (Tracked):
 * per-key order holds with 8 lanes, 1,000 keys, random handler delays and
 * retries, while different keys of one partition run concurrently; a
 * retry_after comes back no sooner than its delay, does not block another key,
 * holds the committed position, and a stop during its delay leaves it to be
 * read again. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cstest.h"

enum { KEYS = 1000, PER_KEY = 5, N = KEYS * PER_KEY };

typedef struct order {
    pthread_mutex_t lock;
    int runs[KEYS][PER_KEY * 4]; /* seqs in the order the handler ran them, per key */
    int n_runs[KEYS];
    int acked[KEYS]; /* next seq expected to be acked */
    int violations;
    _Atomic int running, max_running;
    _Atomic int total_acked;
    unsigned seed;
} order;

static cs_outcome keyed(cs_delivery *d, void *user) {
    order *o = user;
    int running = atomic_fetch_add(&o->running, 1) + 1;
    int max = atomic_load(&o->max_running);
    while (running > max && !atomic_compare_exchange_weak(&o->max_running, &max, running)) {}
    size_t len;
    const char *v = cs_delivery_value(d, &len);
    int key = -1, seq = -1;
    char buf[32];
    snprintf(buf, sizeof buf, "%.*s", (int)len, v ? v : "");
    sscanf(buf, "%d:%d", &key, &seq);
    pthread_mutex_lock(&o->lock);
    unsigned r = (unsigned)rand_r(&o->seed);
    if (key >= 0 && key < KEYS && o->n_runs[key] < PER_KEY * 4) o->runs[key][o->n_runs[key]++] = seq;
    bool retry = cs_delivery_attempt(d) == 1 && r % 20 == 0;
    if (!retry) {
        if (seq != o->acked[key]) o->violations++;
        o->acked[key]++;
    }
    pthread_mutex_unlock(&o->lock);
    usleep(r % 300);
    atomic_fetch_sub(&o->running, 1);
    if (!retry) atomic_fetch_add(&o->total_acked, 1);
    return retry ? CS_RETRY : CS_ACK;
}

static void count_failure(const cs_published *where, cs_err err, void *opaque) {
    (void)where;
    if (err) atomic_fetch_add((_Atomic int *)opaque, 1);
}

static bool all_acked(void *arg) { return atomic_load(&((order *)arg)->total_acked) >= N; }

static void per_key_order_holds_with_8_lanes(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("lanes", 1, topic, group, sizeof topic);
    order *o = calloc(1, sizeof *o);
    pthread_mutex_init(&o->lock, NULL);
    o->seed = (unsigned)getpid();
    printf("seed %u\n", o->seed);
    /* Keys interleaved: key k's records are spread through the partition. */
    _Atomic int failures = 0;
    {
        cs_app *pub = cs_app_new("lanes-seed", "1.0");
        cs_kafka *pk = cs_test_kafka_new(cst_cluster);
        CST_OK(cs_kafka_topic(pk, topic, 1));
        CST_OK(cs_kafka_producer_config(pk, "linger.ms", "5"));
        CST_OK(cs_app_add_kafka(pub, pk));
        CST_OK(cs_app_start(pub));
        for (int seq = 0; seq < PER_KEY; seq++)
            for (int k = 0; k < KEYS; k++) {
                char key[16], value[32];
                int kl = snprintf(key, sizeof key, "k%d", k);
                int vl = snprintf(value, sizeof value, "%d:%d", k, seq);
                cs_record r = {.topic = topic,
                               .partition = 0,
                               .key = key,
                               .key_len = (size_t)kl,
                               .value = value,
                               .value_len = (size_t)vl};
                CST_OK(cs_publish_async(pk, &r, count_failure, &failures));
            }
        CST_OK(cs_app_stop(pub));
        cs_app_destroy(pub);
        assert_int_equal(atomic_load(&failures), 0);
    }
    cs_app *app = cs_app_new("lanes", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, keyed, o);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_workers(s, 8));
    CST_OK(cs_sub_lanes(s, CS_LANES_BY_KEY));
    CST_OK(cs_sub_max_open(s, 2000));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    assert_true(cst_wait(all_acked, o, 120000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, N, 30000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    int retries = 0;
    for (int key = 0; key < KEYS; key++) {
        assert_int_equal(o->acked[key], PER_KEY);
        retries += o->n_runs[key] - PER_KEY;
        for (int i = 1; i < o->n_runs[key]; i++)
            if (o->runs[key][i] < o->runs[key][i - 1])
                fail_msg("key %d: seq %d ran after seq %d", key, o->runs[key][i], o->runs[key][i - 1]);
    }
    printf("%d records, %d keys, %d retries, up to %d handlers at once in one partition\n", N, KEYS, retries,
           atomic_load(&o->max_running));
    assert_int_equal(o->violations, 0);
    assert_true(retries > 0);
    assert_true(atomic_load(&o->max_running) > 1); /* keys of one partition ran concurrently */
    free(o);
}

/* ---- retry_after ---------------------------------------------------------------- */

typedef struct delayed {
    pthread_mutex_t lock;
    char events[16][16]; /* "A1", "B1", "A2" ... in the order they ran */
    int64_t at_ms[16];   /* when each ran (CLOCK_MONOTONIC, the clock cstream's delays use) */
    int n;
    int delay_ms;
} delayed;

static cs_outcome delay_a(cs_delivery *d, void *user) {
    delayed *dl = user;
    size_t len;
    const char *key = cs_delivery_key(d, &len);
    pthread_mutex_lock(&dl->lock);
    if (dl->n < 16) {
        /* cst_now_ms: whole milliseconds of CLOCK_MONOTONIC, truncated like
         * cstream's own clock, so a delay of d ms due at (its now + d) is
         * never seen to come back sooner. */
        dl->at_ms[dl->n] = cst_now_ms();
        snprintf(dl->events[dl->n++], 16, "%.*s%d", (int)len, key, cs_delivery_attempt(d));
    }
    pthread_mutex_unlock(&dl->lock);
    if (key && key[0] == 'A' && cs_delivery_attempt(d) == 1) return cs_delivery_retry_after(d, dl->delay_ms);
    return CS_ACK;
}

/* A's first run and B's both happened (in either order: they are in
 * different lanes, and B can run first, seen under ASan). */
static bool a1_and_b1_ran(void *arg) {
    delayed *dl = arg;
    pthread_mutex_lock(&dl->lock);
    bool a = false, b = false;
    for (int i = 0; i < dl->n; i++) {
        a |= !strcmp(dl->events[i], "A1");
        b |= !strcmp(dl->events[i], "B1");
    }
    pthread_mutex_unlock(&dl->lock);
    return a && b;
}

/* B's run returned and its ack was counted (A's run asked for a retry). */
static bool b_acked(void *arg) {
    cs_sub_stats st;
    cs_sub_stats_get(arg, &st);
    return st.acked >= 1;
}

static cs_app *start_delayed(const char *topic, const char *group, delayed *dl, cs_sub **out) {
    cs_app *app = cs_app_new("retry-after", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, delay_a, dl);
    if (out) *out = s;
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_workers(s, 2));
    CST_OK(cs_sub_lanes(s, CS_LANES_BY_KEY));
    CST_OK(cs_sub_commit_interval_ms(s, 20));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    return app;
}

static int events(delayed *dl) {
    pthread_mutex_lock(&dl->lock);
    int n = dl->n;
    pthread_mutex_unlock(&dl->lock);
    return n;
}

/* A waits (for longer than the test runs); B, behind it in the partition,
 * runs meanwhile; the position stays in front of A; a stop leaves A
 * uncommitted and the next start reads it again. */
static void retry_after_does_not_block_another_key(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("retry-after", 1, topic, group, sizeof topic);
    CST_OK(cs_test_produce(cst_cluster, topic, 0, "A", 1, "a", 1, NULL));
    CST_OK(cs_test_produce(cst_cluster, topic, 0, "B", 1, "b", 1, NULL));
    delayed dl = {.lock = PTHREAD_MUTEX_INITIALIZER, .delay_ms = 600000};
    cs_sub *s;
    cs_app *app = start_delayed(topic, group, &dl, &s);
    assert_true(cst_wait(a1_and_b1_ran, &dl, 30000));
    assert_true(cst_wait(b_acked, s, 30000));
    assert_int_equal(events(&dl), 2); /* A1 and B1; A waits */
    /* Commit ticks after B's ack, each of which could have moved the position
     * past A: not just the first commit, which may have come before it. */
    cst_wait_commit_ticks(s, 3, 10000);
    int64_t committed;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(committed, 0); /* B is acked, the position stays in front of A */
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(committed, 0);

    delayed again = {.lock = PTHREAD_MUTEX_INITIALIZER, .delay_ms = 0};
    app = start_delayed(topic, group, &again, NULL);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 2, 30000));
    pthread_mutex_lock(&again.lock);
    assert_true(again.n >= 2);
    /* Read again, and its attempt count survived the stop (kept in the
     * committed metadata): this is its second attempt. B is read again too,
     * in another lane, and may run first (seen under TSan): look for A's event. */
    int a = 0;
    while (a < again.n && again.events[a][0] != 'A') a++;
    assert_true(a < again.n);
    assert_string_equal(again.events[a], "A2");
    pthread_mutex_unlock(&again.lock);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

static void retry_after_comes_back_after_its_delay(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("retry-after-back", 1, topic, group, sizeof topic);
    CST_OK(cs_test_produce(cst_cluster, topic, 0, "A", 1, "a", 1, NULL));
    delayed dl = {.lock = PTHREAD_MUTEX_INITIALIZER, .delay_ms = 200};
    cs_app *app = start_delayed(topic, group, &dl, NULL);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 1, 30000));
    pthread_mutex_lock(&dl.lock);
    assert_int_equal(dl.n, 2);
    assert_string_equal(dl.events[0], "A1");
    assert_string_equal(dl.events[1], "A2");
    int64_t waited = dl.at_ms[1] - dl.at_ms[0];
    pthread_mutex_unlock(&dl.lock);
    /* A lower bound only: the record may come back any time after its delay. */
    printf("A came back %lld ms after its first run (delay %d ms)\n", (long long)waited, dl.delay_ms);
    if (waited < dl.delay_ms)
        fail_msg("A came back %lld ms after cs_delivery_retry_after(%d)", (long long)waited, dl.delay_ms);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(per_key_order_holds_with_8_lanes),
        cmocka_unit_test(retry_after_does_not_block_another_key),
        cmocka_unit_test(retry_after_comes_back_after_its_delay),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
