/* test_lanes.c — ordered lanes by key and delayed retries (Tracked):
 * per-key order holds with 8 lanes, 1,000 keys, random handler delays and
 * retries, while different keys of one partition run concurrently; a
 * retry_after comes back no sooner than its delay, does not block another key,
 * holds the committed position, and a stop during its delay leaves it to be
 * read again. Lanes by partition stay spread over the partitions held now
 * through three cooperative rebalances (issue #30): every worker has a
 * partition, and each partition's records run on one worker. */
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
 * uncommitted and the next start reads it again, and only it. */
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
    assert_true(again.n >= 1);
    /* A is read again, and its attempt count survived the stop (kept in the
     * committed metadata): this is its second attempt. B, acked above the
     * position, is not handed out again: the commits after its ack carried
     * it in the acked set (cs_sub_acked_set). */
    int a = 0, b = 0;
    for (int i = 0; i < again.n; i++) b += again.events[i][0] == 'B';
    while (a < again.n && again.events[a][0] != 'A') a++;
    assert_true(a < again.n);
    assert_string_equal(again.events[a], "A2");
    assert_int_equal(b, 0);
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

/* ---- lanes by partition across rebalances ---------------------------------- */

/* Member A (4 workers, lanes by partition) subscribes to topics x, y and z, 2
 * partitions each; B subscribes to y only, C to z only, all in one
 * cooperative-sticky group. The subscriptions leave the assignor no choice:
 * C alone holds z; A joins and gets x and y (rebalance 1, C keeps z); B joins
 * and takes y from A (rebalance 2, the only partitions B may have); C leaves
 * and A gets z (rebalance 3). A then holds x0, x1, z0 and z1: four partitions
 * for four workers. Lanes chosen in the order partitions were first seen put
 * z on the lanes of x (the 5th and 6th partitions seen go to lanes 0 and 1)
 * and left two workers idle. */
enum { SPREAD_WORKERS = 4, SPREAD_TOPICS = 3, SPREAD_PARTS = 2, SPREAD_ROUND = 25 };
enum { TOPIC_X, TOPIC_Y, TOPIC_Z };

typedef struct spread {
    char topics[SPREAD_TOPICS][128];
    pthread_mutex_t lock;
    bool held[SPREAD_TOPICS][SPREAD_PARTS];        /* A's assignment now, from its hooks */
    int worker[SPREAD_TOPICS][SPREAD_PARTS];       /* the worker that ran the partition's records this round, -1 none */
    bool two_workers[SPREAD_TOPICS][SPREAD_PARTS]; /* its records ran on two workers in one round */
    int handled[SPREAD_TOPICS][SPREAD_PARTS];      /* records handled this round */
    _Atomic int workers_seen;                      /* A's worker threads numbered as they first run a record */
} spread;

/* The number of the worker thread running A's handler (a worker is a lane). */
static _Thread_local int spread_worker_no = -1;

static int spread_topic(const spread *s, const char *topic) {
    for (int t = 0; t < SPREAD_TOPICS; t++)
        if (!strcmp(s->topics[t], topic)) return t;
    return -1;
}

static cs_outcome spread_handle(cs_delivery *d, void *user) {
    spread *s = user;
    if (spread_worker_no < 0) spread_worker_no = atomic_fetch_add(&s->workers_seen, 1);
    int t = spread_topic(s, cs_delivery_topic(d));
    int32_t p = cs_delivery_partition(d);
    if (t < 0 || p < 0 || p >= SPREAD_PARTS) return CS_ACK;
    pthread_mutex_lock(&s->lock);
    if (s->worker[t][p] >= 0 && s->worker[t][p] != spread_worker_no) s->two_workers[t][p] = true;
    s->worker[t][p] = spread_worker_no;
    s->handled[t][p]++;
    pthread_mutex_unlock(&s->lock);
    return CS_ACK;
}

static void spread_mark(spread *s, const char *topic, const int32_t *parts, size_t n, bool held) {
    int t = spread_topic(s, topic);
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; t >= 0 && i < n; i++)
        if (parts[i] >= 0 && parts[i] < SPREAD_PARTS) s->held[t][parts[i]] = held;
    pthread_mutex_unlock(&s->lock);
}

static void spread_assigned(cs_sub *sub, const char *topic, const int32_t *parts, size_t n, void *user) {
    (void)sub;
    spread_mark(user, topic, parts, n, true);
}

static void spread_revoked(cs_sub *sub, const char *topic, const int32_t *parts, size_t n, void *user) {
    (void)sub;
    spread_mark(user, topic, parts, n, false);
}

/* A cst_wait predicate: A holds exactly the partitions of the topics in `want`. */
typedef struct spread_want {
    spread *s;
    bool topics[SPREAD_TOPICS];
} spread_want;

static bool spread_holds(void *arg) {
    spread_want *w = arg;
    pthread_mutex_lock(&w->s->lock);
    bool same = true;
    for (int t = 0; t < SPREAD_TOPICS; t++)
        for (int p = 0; p < SPREAD_PARTS; p++) same &= w->s->held[t][p] == w->topics[t];
    pthread_mutex_unlock(&w->s->lock);
    return same;
}

static bool spread_round_done(void *arg) {
    spread *s = arg;
    pthread_mutex_lock(&s->lock);
    bool done = true;
    for (int t = 0; t < SPREAD_TOPICS; t++)
        for (int p = 0; p < SPREAD_PARTS; p++)
            if (s->held[t][p] && s->handled[t][p] < SPREAD_ROUND) done = false;
    pthread_mutex_unlock(&s->lock);
    return done;
}

static _Atomic int other_assigns;

static void other_assigned(cs_sub *sub, const char *topic, const int32_t *parts, size_t n, void *user) {
    (void)sub, (void)topic, (void)parts, (void)n, (void)user;
    atomic_fetch_add(&other_assigns, 1);
}

static cs_outcome other_handle(cs_delivery *d, void *user) {
    (void)d, (void)user;
    return CS_ACK;
}

static bool other_assigned_since(void *arg) { return atomic_load(&other_assigns) > *(int *)arg; }

static cs_app *start_spread_member(const char *const *topics, size_t n_topics, const char *group, int workers,
                                   cs_handler_fn handler, cs_partitions_fn assigned, cs_partitions_fn revoked,
                                   void *user) {
    cs_app *app = cs_app_new("lanes-spread", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe_topics(k, topics, n_topics, handler, user);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_workers(s, workers));
    CST_OK(cs_sub_lanes(s, CS_LANES_BY_PARTITION));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_sub_config(s, "partition.assignment.strategy", "cooperative-sticky"));
    CST_OK(cs_sub_on_assign(s, assigned, user));
    if (revoked) CST_OK(cs_sub_on_revoke(s, revoked, user));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    return app;
}

/* One round of records to every partition A holds; true once A handled them all. */
static bool spread_round(spread *s) {
    pthread_mutex_lock(&s->lock);
    for (int t = 0; t < SPREAD_TOPICS; t++)
        for (int p = 0; p < SPREAD_PARTS; p++) {
            s->worker[t][p] = -1;
            s->two_workers[t][p] = false;
            s->handled[t][p] = 0;
        }
    bool held[SPREAD_TOPICS][SPREAD_PARTS];
    memcpy(held, s->held, sizeof held);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < SPREAD_ROUND; i++)
        for (int t = 0; t < SPREAD_TOPICS; t++)
            for (int p = 0; p < SPREAD_PARTS; p++)
                if (held[t][p]) CST_OK(cs_test_produce(cst_cluster, s->topics[t], p, NULL, 0, "v", 1, NULL));
    return cst_wait(spread_round_done, s, 30000);
}

static void lanes_by_partition_stay_spread_over_rebalances(void **state) {
    (void)state;
    spread *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    char group[160];
    cst_fresh("lanes-spread-x", SPREAD_PARTS, s->topics[TOPIC_X], group, sizeof group);
    cst_fresh("lanes-spread-y", SPREAD_PARTS, s->topics[TOPIC_Y], NULL, sizeof s->topics[TOPIC_Y]);
    cst_fresh("lanes-spread-z", SPREAD_PARTS, s->topics[TOPIC_Z], NULL, sizeof s->topics[TOPIC_Z]);
    const char *all[] = {s->topics[TOPIC_X], s->topics[TOPIC_Y], s->topics[TOPIC_Z]};

    int before = atomic_load(&other_assigns);
    cs_app *c = start_spread_member(&all[TOPIC_Z], 1, group, 1, other_handle, other_assigned, NULL, NULL);
    assert_true(cst_wait(other_assigned_since, &before, 60000)); /* C holds z */

    cs_app *a = start_spread_member(all, 3, group, SPREAD_WORKERS, spread_handle, spread_assigned, spread_revoked, s);
    spread_want x_and_y = {s, {[TOPIC_X] = true, [TOPIC_Y] = true}};
    assert_true(cst_wait(spread_holds, &x_and_y, 60000)); /* rebalance 1 */
    assert_true(spread_round(s));

    before = atomic_load(&other_assigns);
    cs_app *b = start_spread_member(&all[TOPIC_Y], 1, group, 1, other_handle, other_assigned, NULL, NULL);
    spread_want x_only = {s, {[TOPIC_X] = true}};
    assert_true(cst_wait(spread_holds, &x_only, 60000)); /* rebalance 2: B took y */
    assert_true(cst_wait(other_assigned_since, &before, 60000));

    CST_OK(cs_app_stop(c));
    cs_app_destroy(c);
    spread_want x_and_z = {s, {[TOPIC_X] = true, [TOPIC_Z] = true}};
    assert_true(cst_wait(spread_holds, &x_and_z, 60000)); /* rebalance 3: C left, A got z */

    assert_true(spread_round(s));
    bool busy[SPREAD_WORKERS] = {false};
    int n_busy = 0;
    pthread_mutex_lock(&s->lock);
    for (int t = 0; t < SPREAD_TOPICS; t++)
        for (int p = 0; p < SPREAD_PARTS; p++) {
            if (!s->held[t][p]) continue;
            int w = s->worker[t][p];
            printf("%s/%d: worker %d%s\n", s->topics[t], p, w, s->two_workers[t][p] ? " (and another)" : "");
            if (s->two_workers[t][p]) fail_msg("%s/%d ran on two workers in one round", s->topics[t], p);
            assert_true(w >= 0 && w < SPREAD_WORKERS);
            if (!busy[w]) n_busy++;
            busy[w] = true;
        }
    pthread_mutex_unlock(&s->lock);
    printf("%d of %d workers have a partition A holds now\n", n_busy, SPREAD_WORKERS);
    assert_int_equal(n_busy, SPREAD_WORKERS);

    CST_OK(cs_app_stop(b));
    cs_app_destroy(b);
    CST_OK(cs_app_stop(a));
    cs_app_destroy(a);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(per_key_order_holds_with_8_lanes),
        cmocka_unit_test(retry_after_does_not_block_another_key),
        cmocka_unit_test(retry_after_comes_back_after_its_delay),
        cmocka_unit_test(lanes_by_partition_stay_spread_over_rebalances),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
