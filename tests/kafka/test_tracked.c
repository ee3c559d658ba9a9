/* test_tracked.c — the Tracked row of the behaviour contract on one member:
 * ack and drop settle; retry comes back before later records and its offset
 * holds the position; a crash reads every unsettled record again; out-of-order
 * settlements from 4 workers never let the committed position pass an open
 * record; max_open pauses and resumes fetching without skipping an offset; a
 * settlement after the partition is gone is stale. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstream/rdkafka.h>

#include "cstest.h"

enum { MAXREC = 4096 };

/* What one test's handler does and saw. */
typedef struct fixture {
    cst_seen *seen;
    cs_outcome outcome;
    pthread_mutex_t lock;
    int64_t order[MAXREC]; /* offsets in handling order (single partition tests) */
    int n_order;
    cs_delivery *held[MAXREC]; /* pending deliveries */
    int n_held;
    int max_held;
    int64_t hold_offset; /* this offset is held pending (-1: none) */
    int retries_left;    /* for offset retry_offset */
    int64_t retry_offset;
    bool hold_all; /* every delivery held pending */
    bool hold_odd; /* odd offsets held pending */
    _Atomic bool crashing;
} fixture;

static fixture *fixture_new(int partitions, cs_outcome outcome) {
    fixture *f = calloc(1, sizeof *f);
    f->seen = cst_seen_new(partitions, MAXREC);
    f->outcome = outcome;
    f->hold_offset = -1;
    f->retry_offset = -1;
    pthread_mutex_init(&f->lock, NULL);
    return f;
}

static void fixture_free(fixture *f) {
    cst_seen_free(f->seen);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

static cs_outcome handle(cs_delivery *d, void *user) {
    fixture *f = user;
    if (atomic_load(&f->crashing)) return CS_ACK; /* a dead process handles nothing */
    int64_t off = cs_delivery_offset(d);
    cst_seen_add(f->seen, cs_delivery_partition(d), off);
    pthread_mutex_lock(&f->lock);
    if (f->n_order < MAXREC) f->order[f->n_order++] = off;
    cs_outcome o = f->outcome;
    if (off == f->retry_offset && f->retries_left > 0) {
        f->retries_left--;
        o = CS_RETRY;
    } else if (off == f->hold_offset || f->hold_all || (f->hold_odd && off % 2 == 1)) {
        f->held[f->n_held++] = d;
        if (f->n_held > f->max_held) f->max_held = f->n_held;
        o = CS_PENDING;
    }
    pthread_mutex_unlock(&f->lock);
    return o;
}

static cs_app *start(const char *topic, const char *group, fixture *f, int workers, size_t max_open, cs_sub **sub_out) {
    cs_app *app = cs_app_new("tracked-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, handle, f);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_workers(s, workers));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_sub_drain_timeout_ms(s, 1000));
    if (max_open) CST_OK(cs_sub_max_open(s, max_open));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    if (sub_out) *sub_out = s;
    return app;
}

static void produce(const char *topic, int partitions, int n) {
    for (int i = 0; i < n; i++) CST_OK(cs_test_produce(cst_cluster, topic, i % partitions, NULL, 0, "p", 1, NULL));
}

static void stop(cs_app *app) {
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

static void settles_every_record(cs_outcome outcome) {
    char topic[128], group[160];
    cst_fresh("tracked", 2, topic, group, sizeof topic);
    produce(topic, 2, 20);
    fixture *f = fixture_new(2, outcome);
    cs_app *app = start(topic, group, f, 2, 0, NULL);
    CST_OK(cs_test_app_wait_idle(app, 30000));
    for (int p = 0; p < 2; p++) CST_OK(cs_test_wait_committed(cst_cluster, group, topic, p, 10, 10000));
    assert_int_equal(cst_seen_total(f->seen), 20);
    assert_int_equal(cst_seen_distinct(f->seen), 20);
    stop(app);
    fixture_free(f);
}

static void ack_settles_the_offset(void **state) {
    (void)state;
    settles_every_record(CS_ACK);
}

static void drop_settles_the_offset(void **state) {
    (void)state;
    settles_every_record(CS_DROP);
}

/* A retried record comes back before anything fetched after it. */
static void retry_comes_back_before_later_records(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("tracked-retry", 1, topic, group, sizeof topic);
    produce(topic, 1, 10);
    fixture *f = fixture_new(1, CS_ACK);
    f->retry_offset = 3;
    f->retries_left = 2;
    cs_sub *s;
    cs_app *app = start(topic, group, f, 1, 0, &s);
    CST_OK(cs_test_app_wait_idle(app, 30000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 10, 10000));
    int64_t want[] = {0, 1, 2, 3, 3, 3, 4, 5, 6, 7, 8, 9};
    assert_int_equal(f->n_order, 12);
    for (int i = 0; i < 12; i++) assert_int_equal(f->order[i], want[i]);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.retried, 2);
    stop(app);
    fixture_free(f);
}

typedef struct seen_n {
    fixture *f;
    size_t n;
} seen_n;

static bool seen_at_least(void *arg) {
    seen_n *s = arg;
    return cst_seen_total(s->f->seen) >= s->n;
}

/* An open record holds the position: later acks commit up to it, not past it.
 * Settled with retry, it comes back, and the position moves on once acked. */
static void open_record_holds_the_position(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("tracked-hold", 1, topic, group, sizeof topic);
    produce(topic, 1, 10);
    fixture *f = fixture_new(1, CS_ACK);
    f->hold_offset = 3;
    cs_sub *s;
    cs_app *app = start(topic, group, f, 2, 0, &s);
    seen_n all = {f, 10};
    assert_true(cst_wait(seen_at_least, &all, 30000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 3, 10000));
    /* Everything else is acked. The position must stay at 3 however often
     * the committer runs: look at it after three commit ticks that could have
     * moved it. */
    cst_wait_commit_ticks(s, 3, 10000);
    int64_t committed = -1;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(committed, 3);
    pthread_mutex_lock(&f->lock);
    assert_int_equal(f->n_held, 1);
    cs_delivery *d = f->held[0];
    f->n_held = 0;
    f->hold_offset = -1;
    pthread_mutex_unlock(&f->lock);
    assert_int_equal(cs_delivery_attempt(d), 1);
    CST_OK(cs_delivery_settle(d, CS_RETRY));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 10, 10000));
    assert_int_equal(cst_seen_count(f->seen, 0, 3), 2);
    stop(app);
    fixture_free(f);
}

/* A crash (no close, no commit) reads every unsettled record again. */
static void crash_reads_every_unsettled_record_again(void **state) {
    (void)state;
    enum { N = 40 };
    char topic[128], group[160];
    cst_fresh("tracked-crash", 1, topic, group, sizeof topic);
    produce(topic, 1, N);
    fixture *first = fixture_new(1, CS_ACK);
    first->hold_odd = true;
    cs_app *app = start(topic, group, first, 4, 0, NULL);
    seen_n all = {first, N};
    assert_true(cst_wait(seen_at_least, &all, 30000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 1, 10000)); /* 0 acked, 1 open */
    atomic_store(&first->crashing, true);
    cs_test_app_crash(app);
    int64_t committed;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(committed, 1);
    /* Held deliveries survive the crash as handles; settling them now is stale. */
    for (int i = 0; i < first->n_held; i++) assert_int_equal(cs_delivery_settle(first->held[i], CS_ACK), CS_ERR_STALE);

    fixture *second = fixture_new(1, CS_ACK);
    app = start(topic, group, second, 4, 0, NULL);
    CST_OK(cs_test_app_wait_idle(app, 60000));
    for (int64_t o = 1; o < N; o += 2) assert_int_equal(cst_seen_count(second->seen, 0, o), 1);
    assert_int_equal(cst_seen_count(second->seen, 0, 0), 0); /* committed: not read again */
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, N, 10000));
    stop(app);
    fixture_free(first);
    fixture_free(second);
}

/* The acked set: one record held open while the others ack; after a crash
 * the next owner hands out the held record again and none of those acked
 * above it (they are skipped as settled). With the set off, every record
 * above the held one is handled again (what Tracked did before the set). */
static void crash_after_acks_above_an_open_record(bool acked_set) {
    enum { N = 40, HELD = 5 };
    char topic[128], group[160];
    cst_fresh(acked_set ? "tracked-acked-set" : "tracked-no-set", 1, topic, group, sizeof topic);
    produce(topic, 1, N);
    fixture *first = fixture_new(1, CS_ACK);
    first->hold_offset = HELD;
    cs_app *app = cs_app_new("tracked-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, handle, first);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_workers(s, 4));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_sub_acked_set(s, acked_set));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    seen_n all = {first, N};
    assert_true(cst_wait(seen_at_least, &all, 30000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, HELD, 10000));
    /* Every record but the held one is acked once all were seen (the handler
     * acks before it returns); the ticks after that commit the set. */
    cst_wait_commit_ticks(s, 3, 10000);
    atomic_store(&first->crashing, true);
    cs_test_app_crash(app);
    /* The held delivery survives the crash as a handle; settling it now is
     * stale, and frees it. */
    for (int i = 0; i < first->n_held; i++) assert_int_equal(cs_delivery_settle(first->held[i], CS_ACK), CS_ERR_STALE);
    int64_t committed;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(committed, HELD);

    fixture *second = fixture_new(1, CS_ACK);
    app = cs_app_new("tracked-test", "1.0");
    k = cs_test_kafka_new(cst_cluster);
    s = cs_kafka_subscribe(k, topic, handle, second);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_workers(s, 4));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_sub_acked_set(s, acked_set));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, N, 60000));
    assert_int_equal(cst_seen_count(second->seen, 0, HELD), 1); /* open at the crash: handled again */
    for (int64_t o = 0; o < HELD; o++) assert_int_equal(cst_seen_count(second->seen, 0, o), 0); /* below the position */
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    for (int64_t o = HELD + 1; o < N; o++) assert_int_equal(cst_seen_count(second->seen, 0, o), acked_set ? 0 : 1);
    assert_int_equal(st.skipped_settled, acked_set ? N - HELD - 1 : 0);
    stop(app);
    fixture_free(first);
    fixture_free(second);
}

static void crash_skips_what_was_acked_above_an_open_record(void **state) {
    (void)state;
    crash_after_acks_above_an_open_record(true);
}

static void crash_without_acked_set_reads_above_the_open_record_again(void **state) {
    (void)state;
    crash_after_acks_above_an_open_record(false);
}

/* ---- metadata that does not verify: nothing is skipped ------------------------ */

/* The cs2 checksum (src/core/attempts_meta.h): FNV-1a 32 of the text before ";x=". */
static void seal(char *meta, size_t cap) {
    uint32_t h = 2166136261u;
    for (const char *c = meta; *c; c++) h = (h ^ (unsigned char)*c) * 16777619u;
    size_t len = strlen(meta);
    snprintf(meta + len, cap - len, ";x=%08x", (unsigned)h);
}

/* Commits `pos` with `meta` for partition 0 as a member of `group` (a plain
 * librdkafka consumer that joins, commits and leaves): what another client,
 * or a damaged commit, leaves for the next cstream owner. */
static void commit_as_another_client(const char *group, const char *topic, int64_t pos, const char *meta) {
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *kv[][2] = {{"bootstrap.servers", cs_test_cluster_brokers(cst_cluster)},
                           {"group.id", group},
                           {"enable.auto.commit", "false"},
                           {"session.timeout.ms", "6000"},
                           {"fetch.wait.max.ms", "10"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        assert_int_equal(rd_kafka_conf_set(conf, kv[i][0], kv[i][1], err, sizeof err), RD_KAFKA_CONF_OK);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    assert_non_null(rk);
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(sub, topic, RD_KAFKA_PARTITION_UA);
    assert_int_equal(rd_kafka_subscribe(rk, sub), 0);
    rd_kafka_topic_partition_list_destroy(sub);
    bool assigned = false;
    for (int i = 0; i < 300 && !assigned; i++) { /* the mock's first assignment takes ~3 s */
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (m) rd_kafka_message_destroy(m);
        rd_kafka_topic_partition_list_t *a = NULL;
        if (!rd_kafka_assignment(rk, &a) && a) {
            assigned = a->cnt > 0;
            rd_kafka_topic_partition_list_destroy(a);
        }
    }
    assert_true(assigned);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_t *e = rd_kafka_topic_partition_list_add(l, topic, 0);
    e->offset = pos;
    e->metadata = strdup(meta);
    e->metadata_size = strlen(meta);
    assert_int_equal(rd_kafka_commit(rk, l, 0), 0);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

/* Position 5 of 20 records, with metadata that claims 6..19 settled; what a
 * Tracked owner then hands to its handler. */
static void forged_set(const char *meta, bool valid) {
    enum { N = 20, POS = 5 };
    char topic[128], group[160];
    cst_fresh("tracked-forged", 1, topic, group, sizeof topic);
    produce(topic, 1, N);
    commit_as_another_client(group, topic, POS, meta);
    fixture *f = fixture_new(1, CS_ACK);
    cs_sub *s;
    cs_app *app = start(topic, group, f, 4, 0, &s);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, N, 60000));
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(cst_seen_count(f->seen, 0, POS), 1);
    for (int64_t o = POS + 1; o < N; o++) assert_int_equal(cst_seen_count(f->seen, 0, o), valid ? 0 : 1);
    assert_int_equal(st.skipped_settled, valid ? N - POS - 1 : 0);
    stop(app);
    fixture_free(f);
}

static void metadata_that_does_not_verify_skips_nothing(void **state) {
    (void)state;
    char meta[256];
    /* The control: a well-formed set (runs 1 open, 14 settled: varints 01 0e) is honoured. */
    snprintf(meta, sizeof meta, "cs2;p=5;c=1;a=;s=RAQ4;r=15");
    seal(meta, sizeof meta);
    forged_set(meta, true);
    /* One character changed after sealing: the checksum refuses it. */
    meta[strlen(meta) - 12] = '6';
    forged_set(meta, false);
    /* Sealed, but written for position 4 while the group holds 5. */
    snprintf(meta, sizeof meta, "cs2;p=4;c=1;a=;s=RAg4;r=16");
    seal(meta, sizeof meta);
    forged_set(meta, false);
    /* Sealed, but reaching past the high watermark (20): 1 open, 100 settled. */
    snprintf(meta, sizeof meta, "cs2;p=5;c=1;a=;s=RAWQ;r=101");
    seal(meta, sizeof meta);
    forged_set(meta, false);
    /* Not cstream's, and a newer version. */
    forged_set("{\"consumer\":\"someone else\"}", false);
    forged_set("cs3;p=5;anything", false);
}

/* ---- out-of-order settlement with 4 workers over 3 partitions ----------------- */

enum { OOO_PARTS = 3, OOO_N = 600 };

typedef struct ooo {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    cs_delivery *queue[OOO_N * 2];
    int head, tail;
    _Atomic bool settled[OOO_PARTS][OOO_N + 1];
    _Atomic int settled_count;
    _Atomic bool done;
    unsigned seed;
} ooo;

static void mark_settled(ooo *o, cs_delivery *d) {
    atomic_store(&o->settled[cs_delivery_partition(d)][cs_delivery_offset(d)], true);
    atomic_fetch_add(&o->settled_count, 1);
}

static cs_outcome ooo_handle(cs_delivery *d, void *user) {
    ooo *o = user;
    pthread_mutex_lock(&o->lock);
    int r = rand_r(&o->seed) % 3;
    if (r == 0) { /* settle later, from another thread */
        o->queue[o->tail++ % (OOO_N * 2)] = d;
        pthread_cond_signal(&o->cv);
        pthread_mutex_unlock(&o->lock);
        return CS_PENDING;
    }
    int delay = rand_r(&o->seed) % 2000;
    pthread_mutex_unlock(&o->lock);
    usleep((useconds_t)delay);
    mark_settled(o, d); /* before the framework sees it: the check below is then sound */
    return CS_ACK;
}

static void *ooo_settler(void *arg) {
    ooo *o = arg;
    for (;;) {
        pthread_mutex_lock(&o->lock);
        while (o->head == o->tail && !atomic_load(&o->done)) pthread_cond_wait(&o->cv, &o->lock);
        if (o->head == o->tail) {
            pthread_mutex_unlock(&o->lock);
            return NULL;
        }
        /* Settle a random queued one: out of order on purpose. */
        int n = o->tail - o->head;
        int pick = o->head + rand_r(&o->seed) % n;
        cs_delivery *d = o->queue[pick % (OOO_N * 2)];
        o->queue[pick % (OOO_N * 2)] = o->queue[o->head % (OOO_N * 2)];
        o->head++;
        int delay = rand_r(&o->seed) % 5000;
        pthread_mutex_unlock(&o->lock);
        usleep((useconds_t)delay);
        mark_settled(o, d);
        if (cs_delivery_settle(d, CS_ACK) != CS_OK) fprintf(stderr, "settle: %s\n", cs_errmsg());
    }
}

static void out_of_order_acks_never_pass_an_open_record(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("tracked-ooo", OOO_PARTS, topic, group, sizeof topic);
    CST_OK(cs_test_produce_many(cst_cluster, topic, "payout-", OOO_N));
    ooo *o = calloc(1, sizeof *o);
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->cv, NULL);
    o->seed = (unsigned)getpid();
    printf("seed %u\n", o->seed);
    pthread_t settler;
    pthread_create(&settler, NULL, ooo_settler, o);

    cs_app *app = cs_app_new("ooo", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, ooo_handle, o);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_workers(s, 4));
    CST_OK(cs_sub_commit_interval_ms(s, 10));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));

    int64_t end[OOO_PARTS] = {0};
    int checks = 0;
    for (int p = 0; p < OOO_PARTS; p++) {
        int64_t hi;
        CST_OK(cs_test_produce(cst_cluster, topic, p, NULL, 0, "end", 3, &hi));
        end[p] = hi + 1;
    }
    int64_t deadline = cst_now_ms() + 60000;
    for (;;) {
        bool finished = true;
        for (int p = 0; p < OOO_PARTS; p++) {
            int64_t c;
            CST_OK(cs_test_committed(cst_cluster, group, topic, p, &c));
            checks++;
            for (int64_t off = 0; off < c && off < OOO_N; off++)
                if (!atomic_load(&o->settled[p][off]))
                    fail_msg("partition %d committed %lld but offset %lld is still open", p, (long long)c,
                             (long long)off);
            if (c < end[p]) finished = false;
            if (c < end[p] && cst_now_ms() > deadline)
                fail_msg("partition %d committed %lld, not its end %lld, within 60 s (%d of %d records settled)", p,
                         (long long)c, (long long)end[p], atomic_load(&o->settled_count), OOO_N + OOO_PARTS);
        }
        if (finished) break;
    }
    printf("committed position checked %d times against open records\n", checks);
    assert_int_equal(atomic_load(&o->settled_count), OOO_N + OOO_PARTS);
    stop(app);
    atomic_store(&o->done, true);
    pthread_mutex_lock(&o->lock);
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->lock);
    pthread_join(settler, NULL);
    free(o);
}

/* ---- max_open and stale settlements ------------------------------------------ */

static bool held_reached(void *arg) {
    fixture *f = arg;
    pthread_mutex_lock(&f->lock);
    bool yes = f->n_held >= 10;
    pthread_mutex_unlock(&f->lock);
    return yes;
}

static void max_open_pauses_and_resumes_without_skipping(void **state) {
    (void)state;
    enum { N = 100, CAP = 10 };
    char topic[128], group[160];
    cst_fresh("tracked-cap", 1, topic, group, sizeof topic);
    produce(topic, 1, N);
    fixture *f = fixture_new(1, CS_ACK);
    f->hold_all = true;
    cs_sub *s;
    cs_app *app = start(topic, group, f, 2, CAP, &s);
    for (int round = 0; round < N / CAP; round++) {
        assert_true(cst_wait(held_reached, f, 30000));
        pthread_mutex_lock(&f->lock);
        assert_true(f->max_held <= CAP); /* never more open than the cap */
        cs_delivery *batch[CAP];
        int n = f->n_held;
        memcpy(batch, f->held, sizeof(cs_delivery *) * (size_t)n);
        f->n_held = 0;
        pthread_mutex_unlock(&f->lock);
        for (int i = n - 1; i >= 0; i--) CST_OK(cs_delivery_settle(batch[i], CS_ACK));
    }
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, N, 10000));
    for (int64_t o = 0; o < N; o++) assert_int_equal(cst_seen_count(f->seen, 0, o), 1);
    assert_true(f->max_held <= CAP);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_true(st.pauses >= N / CAP - 1);
    stop(app);
    fixture_free(f);
}

static void settle_after_stop_is_stale_and_read_again(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("tracked-stale", 1, topic, group, sizeof topic);
    produce(topic, 1, 5);
    fixture *f = fixture_new(1, CS_ACK);
    f->hold_offset = 2;
    cs_app *app = start(topic, group, f, 1, 0, NULL);
    seen_n all = {f, 5};
    assert_true(cst_wait(seen_at_least, &all, 30000));
    stop(app); /* the drain deadline passes with offset 2 pending */
    int64_t committed;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(committed, 2);
    assert_int_equal(cs_delivery_settle(f->held[0], CS_ACK), CS_ERR_STALE);
    assert_non_null(strstr(cs_errmsg(), topic));

    fixture *again = fixture_new(1, CS_ACK);
    app = start(topic, group, again, 1, 0, NULL);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 5, 30000));
    assert_int_equal(cst_seen_count(again->seen, 0, 2), 1);
    assert_int_equal(cst_seen_count(again->seen, 0, 1), 0);
    stop(app);
    fixture_free(f);
    fixture_free(again);
}

/* ---- handler time limit -------------------------------------------------------- */

typedef struct slow {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool released;
    int runs;
} slow;

static cs_outcome slow_handler(cs_delivery *d, void *user) {
    slow *sl = user;
    pthread_mutex_lock(&sl->lock);
    sl->runs++;
    while (cs_delivery_offset(d) == 0 && !sl->released) pthread_cond_wait(&sl->cv, &sl->lock);
    pthread_mutex_unlock(&sl->lock);
    return CS_ACK;
}

static bool one_slow_reported(void *arg) {
    cs_sub_stats st;
    cs_sub_stats_get(arg, &st);
    return st.slow_handlers >= 1;
}

static void handler_past_its_time_limit_is_reported(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("tracked-slow", 1, topic, group, sizeof topic);
    produce(topic, 1, 3);
    slow sl = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    cs_app *app = cs_app_new("slow", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, slow_handler, &sl);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_handler_time_limit_ms(s, 100));
    CST_OK(cs_sub_commit_interval_ms(s, 20));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    assert_true(cst_wait(one_slow_reported, s, 30000)); /* reported while it still runs */
    pthread_mutex_lock(&sl.lock);
    sl.released = true;
    pthread_cond_broadcast(&sl.cv);
    pthread_mutex_unlock(&sl.lock);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 3, 10000));
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.slow_handlers, 1); /* one run, reported once */
    assert_int_equal(sl.runs, 3);
    stop(app);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ack_settles_the_offset),
        cmocka_unit_test(drop_settles_the_offset),
        cmocka_unit_test(retry_comes_back_before_later_records),
        cmocka_unit_test(open_record_holds_the_position),
        cmocka_unit_test(crash_reads_every_unsettled_record_again),
        cmocka_unit_test(crash_skips_what_was_acked_above_an_open_record),
        cmocka_unit_test(crash_without_acked_set_reads_above_the_open_record_again),
        cmocka_unit_test(metadata_that_does_not_verify_skips_nothing),
        cmocka_unit_test(out_of_order_acks_never_pass_an_open_record),
        cmocka_unit_test(max_open_pauses_and_resumes_without_skipping),
        cmocka_unit_test(settle_after_stop_is_stale_and_read_again),
        cmocka_unit_test(handler_past_its_time_limit_is_reported),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
