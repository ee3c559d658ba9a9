/* test_manual.c — manual assignment (cs_sub_partitions): a subscription on a
 * fixed set of partitions, without a group rebalance. Tracked on manual
 * partitions handles and commits; a new consumer resumes from the committed
 * position, also after a crash (attempt counts included); two instances on
 * disjoint partitions split the topic; a partition the topic lacks fails the
 * start naming the topic and the partition; Auto and Transactional commit
 * to the group too. Runs on the embedded cluster and on the real broker
 * (real.kafka.manual). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstest.h"

enum { MAXREC = 1024, PARTS = 4 };

typedef struct fixture {
    cst_seen *seen;
    _Atomic int handled;
    _Atomic int max_attempt; /* the highest cs_delivery_attempt seen */
    int64_t hold_offset;     /* this offset is held pending, never settled (-1: none) */
    _Atomic(cs_delivery *) held;
} fixture;

static cs_outcome handle(cs_delivery *d, void *user) {
    fixture *f = user;
    if (cs_delivery_offset(d) == f->hold_offset) {
        atomic_store(&f->held, d);
        return CS_PENDING; /* never settled: the crash leaves it open */
    }
    cst_seen_add(f->seen, cs_delivery_partition(d), cs_delivery_offset(d));
    int a = (int)cs_delivery_attempt(d);
    int m = atomic_load(&f->max_attempt);
    while (a > m && !atomic_compare_exchange_weak(&f->max_attempt, &m, a)) {}
    atomic_fetch_add(&f->handled, 1);
    return CS_ACK;
}

static cs_app *start_manual(const char *topic, const char *group, fixture *f, const int32_t *parts, size_t n,
                            cs_err *start_err, cs_sub **sub_out) {
    cs_app *app = cs_app_new("manual-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, handle, f);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_sub_drain_timeout_ms(s, 1000));
    CST_OK(cs_sub_max_attempts(s, 5));
    CST_OK(cs_sub_partitions(s, parts, n));
    CST_OK(cs_app_add_kafka(app, k));
    if (sub_out) *sub_out = s;
    cs_err err = cs_app_start(app);
    if (start_err) *start_err = err;
    else CST_OK(err);
    return app;
}

static void stop(cs_app *app) {
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

static void produce(const char *topic, int32_t partition, int n) {
    for (int i = 0; i < n; i++) CST_OK(cs_test_produce(cst_cluster, topic, partition, NULL, 0, "m", 1, NULL));
}

static bool held_one(void *arg) { return atomic_load(&((fixture *)arg)->held) != NULL; }

static fixture *fixture_new(void) {
    fixture *f = calloc(1, sizeof *f);
    f->seen = cst_seen_new(PARTS, MAXREC);
    f->hold_offset = -1;
    return f;
}

static void fixture_free(fixture *f) {
    cst_seen_free(f->seen);
    free(f);
}

/* Only the given partitions are read, every record once, and the positions
 * are committed to the group; a second consumer of the group (a restart)
 * reads only what came after. */
static void tracked_commits_and_a_restart_resumes(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("manual", PARTS, topic, group, sizeof topic);
    for (int p = 0; p < PARTS; p++) produce(topic, p, 10);
    fixture *f = fixture_new();
    int32_t mine[] = {1, 3};
    cs_app *app = start_manual(topic, group, f, mine, 2, NULL, NULL);
    CST_OK(cs_test_app_wait_idle(app, 30000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 1, 10, 10000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 3, 10, 10000));
    assert_int_equal(cst_seen_total(f->seen), 20);
    assert_int_equal(cst_seen_distinct(f->seen), 20);
    for (int64_t o = 0; o < 10; o++) {
        assert_int_equal(cst_seen_count(f->seen, 0, o), 0);
        assert_int_equal(cst_seen_count(f->seen, 2, o), 0);
    }
    int64_t committed = 0;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(committed, -1); /* never read: never committed */
    stop(app);

    produce(topic, 1, 5);
    fixture *g = fixture_new();
    app = start_manual(topic, group, g, mine, 2, NULL, NULL);
    CST_OK(cs_test_app_wait_idle(app, 30000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 1, 15, 10000));
    assert_int_equal(cst_seen_total(g->seen), 5); /* only the new ones */
    for (int64_t o = 10; o < 15; o++) assert_int_equal(cst_seen_count(g->seen, 1, o), 1);
    stop(app);
    fixture_free(f);
    fixture_free(g);
}

/* A crash with a record in flight: the next instance reads it again, and
 * knows it already ran once (the attempt counts of manual partitions go
 * through the same assign path as a rebalance's). */
static void a_crash_reads_the_open_record_again_with_its_attempt(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("manual-crash", 2, topic, group, sizeof topic);
    produce(topic, 0, 3);
    fixture *f = fixture_new();
    f->hold_offset = 3;
    int32_t mine[] = {0};
    cs_sub *s = NULL;
    cs_app *app = start_manual(topic, group, f, mine, 1, NULL, &s);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 3, 30000));
    produce(topic, 0, 1); /* offset 3: runs once, never settles */
    assert_true(cst_wait(held_one, f, 30000));
    cst_wait_commit_ticks(s, 3, 10000); /* its attempt is in the committed metadata */
    cs_test_app_crash(app);             /* frees the app */
    /* The held handle survives the crash; settling it now is stale. */
    assert_int_equal(cs_delivery_settle(f->held, CS_ACK), CS_ERR_STALE);

    fixture *g = fixture_new();
    app = start_manual(topic, group, g, mine, 1, NULL, NULL);
    CST_OK(cs_test_app_wait_idle(app, 30000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 4, 10000));
    assert_int_equal(cst_seen_total(g->seen), 1);
    assert_int_equal(cst_seen_count(g->seen, 0, 3), 1);
    assert_int_equal(atomic_load(&g->max_attempt), 2); /* the crashed run counted */
    stop(app);
    fixture_free(f);
    fixture_free(g);
}

/* Two instances of one group on disjoint partitions split the topic between
 * them, each commits its own, and neither disturbs the other (no rebalance). */
static void two_instances_on_disjoint_partitions(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("manual-two", PARTS, topic, group, sizeof topic);
    for (int p = 0; p < PARTS; p++) produce(topic, p, 8);
    fixture *a = fixture_new(), *b = fixture_new();
    int32_t pa[] = {0, 1}, pb[] = {2, 3};
    cs_app *app_a = start_manual(topic, group, a, pa, 2, NULL, NULL);
    cs_app *app_b = start_manual(topic, group, b, pb, 2, NULL, NULL);
    CST_OK(cs_test_app_wait_idle(app_a, 30000));
    CST_OK(cs_test_app_wait_idle(app_b, 30000));
    for (int p = 0; p < PARTS; p++) CST_OK(cs_test_wait_committed(cst_cluster, group, topic, p, 8, 10000));
    for (int64_t o = 0; o < 8; o++) {
        assert_int_equal(cst_seen_count(a->seen, 0, o), 1);
        assert_int_equal(cst_seen_count(a->seen, 1, o), 1);
        assert_int_equal(cst_seen_count(b->seen, 2, o), 1);
        assert_int_equal(cst_seen_count(b->seen, 3, o), 1);
    }
    assert_int_equal(cst_seen_total(a->seen), 16);
    assert_int_equal(cst_seen_total(b->seen), 16);
    /* One stops; the other keeps reading its own, and only its own. */
    stop(app_a);
    for (int p = 0; p < PARTS; p++) produce(topic, p, 2);
    CST_OK(cs_test_app_wait_idle(app_b, 30000));
    assert_int_equal(cst_seen_total(b->seen), 20);
    assert_int_equal(cst_seen_total(a->seen), 16);
    stop(app_b);
    fixture_free(a);
    fixture_free(b);
}

/* A partition the topic does not have: the start fails and says which. */
static void a_bad_partition_names_topic_and_partition(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("manual-bad", 2, topic, group, sizeof topic);
    fixture *f = fixture_new();
    int32_t parts[] = {0, 7};
    cs_err err = CS_OK;
    cs_app *app = start_manual(topic, group, f, parts, 2, &err, NULL);
    assert_int_equal(err, CS_ERR_TOPIC);
    const char *msg = cs_errmsg();
    if (!strstr(msg, topic) || !strstr(msg, "no partition 7")) fail_msg("message does not name both: %s", msg);
    cs_app_destroy(app);
    /* Before start: a negative or repeated partition is refused at once. */
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, handle, f);
    int32_t neg[] = {-1}, twice[] = {1, 1};
    assert_int_equal(cs_sub_partitions(s, neg, 1), CS_ERR_ARG);
    assert_int_equal(cs_sub_partitions(s, twice, 2), CS_ERR_ARG);
    assert_int_equal(cs_sub_partitions(s, NULL, 0), CS_ERR_ARG);
    /* A pattern names no topic to take partitions of. */
    cs_sub *p = cs_kafka_subscribe_pattern(k, "^manual-bad-.*", handle, f);
    assert_non_null(p);
    int32_t one[] = {0};
    assert_int_equal(cs_sub_partitions(p, one, 1), CS_ERR_ARG);
    if (!strstr(cs_errmsg(), "pattern")) fail_msg("message does not say why: %s", cs_errmsg());
    cs_kafka_destroy(k);
    fixture_free(f);
}

/* Auto on manual partitions: librdkafka's periodic commit stores what was
 * handed out under the group, as with a subscribe. */
static void auto_commits_to_the_group(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("manual-auto", 2, topic, group, sizeof topic);
    produce(topic, 0, 6);
    produce(topic, 1, 6);
    fixture *f = fixture_new();
    cs_app *app = cs_app_new("manual-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, handle, f);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_config(s, "auto.commit.interval.ms", "100"));
    int32_t mine[] = {0};
    CST_OK(cs_sub_partitions(s, mine, 1));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 6, 30000));
    stop(app);
    assert_int_equal(cst_seen_total(f->seen), 6);
    int64_t other = 0;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 1, &other));
    assert_int_equal(other, -1); /* not assigned: never read, never committed */
    fixture_free(f);
}

/* Transactional on manual partitions: no group generation, the positions go
 * into each transaction with the consumer's group metadata (generation -1)
 * and the broker stores them under the group; outputs are committed once.
 * On the embedded cluster the mock stores no transactional offsets: there
 * the test checks that the replies arrive. */
static cs_outcome reply_offset(cs_delivery *d, void *user) {
    fixture *f = user;
    char v[32];
    int n = snprintf(v, sizeof v, "%d:%lld", (int)cs_delivery_partition(d), (long long)cs_delivery_offset(d));
    atomic_fetch_add(&f->handled, 1);
    return cs_delivery_reply(d, NULL, 0, v, (size_t)n) == CS_OK ? CS_ACK : CS_RETRY;
}

static void count_value(const void *value, size_t len, void *arg) {
    (void)value;
    (void)len;
    (*(long *)arg)++;
}

static void transactional_commits_positions_into_its_transactions(void **state) {
    (void)state;
    char topic[128], group[160], out[160];
    cst_fresh("manual-txn", 2, topic, group, sizeof topic);
    snprintf(out, sizeof out, "%s.out", topic);
    CST_OK(cs_test_topic_create(cst_cluster, out, 1));
    produce(topic, 1, 12);
    fixture *f = fixture_new();
    cs_app *app = cs_app_new("manual-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_instance_id(k, group));
    cs_sub *s = cs_kafka_subscribe(k, topic, reply_offset, f);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRANSACTIONAL));
    CST_OK(cs_sub_reply(s, out, 5000));
    int32_t mine[] = {1};
    CST_OK(cs_sub_partitions(s, mine, 1));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    if (!cs_test_cluster_is_embedded(cst_cluster)) {
        CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 1, 12, 30000));
    } else {
        int64_t deadline = cst_now_ms() + 30000;
        while (atomic_load(&f->handled) < 12 && cst_now_ms() < deadline) cs_test_app_wait_idle(app, 1000);
    }
    stop(app);
    long replies = 0;
    assert_int_equal(cst_read_committed(out, 1, count_value, &replies, 30000), 12);
    assert_int_equal(atomic_load(&f->handled), 12);
    fixture_free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tracked_commits_and_a_restart_resumes),
        cmocka_unit_test(a_crash_reads_the_open_record_again_with_its_attempt),
        cmocka_unit_test(two_instances_on_disjoint_partitions),
        cmocka_unit_test(a_bad_partition_names_topic_and_partition),
        cmocka_unit_test(auto_commits_to_the_group),
        cmocka_unit_test(transactional_commits_positions_into_its_transactions),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
