/* test_pause.c — the application's pause of a running subscription: a paused
 * partition's records are fetched but not handled (the other partition keeps
 * flowing), nothing of it is committed, the gauge shows it and it is not
 * counted stuck; records past its share of the fetch buffer are dropped and
 * read again after the resume, exactly once, also when the resume's re-fetch
 * seek fails and is retried; a resume of a topic ends the pauses of its
 * partitions not assigned here; the pause survives a rebalance that gives the
 * partition back. Runs on the embedded cluster and, as real.kafka.pause, on
 * the real broker. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstest.h"
#include "cstream/rdkafka.h"

enum { PARTS = 2, MAX_OFF = 5000 };

typedef struct svc {
    cst_seen *seen;
    _Atomic int handled[PARTS];
} svc;

static cs_outcome handle(cs_delivery *d, void *user) {
    svc *v = user;
    cst_seen_add(v->seen, cs_delivery_partition(d), cs_delivery_offset(d));
    atomic_fetch_add(&v->handled[cs_delivery_partition(d)], 1);
    return CS_ACK;
}

static svc *svc_new(void) {
    svc *v = calloc(1, sizeof *v);
    v->seen = cst_seen_new(PARTS, MAX_OFF);
    return v;
}

static void svc_free(svc *v) {
    cst_seen_free(v->seen);
    free(v);
}

static cs_app *start(const char *topic, const char *group, svc *v, size_t buffer, cs_sub **out) {
    cs_app *app = cs_app_new("pause", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, handle, v);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_workers(s, 2));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_sub_drain_timeout_ms(s, 1000));
    if (buffer) CST_OK(cs_sub_fetch_buffer_bytes(s, buffer));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *out = s;
    return app;
}

/* The consumer's fetch position of one partition reached `end`: its records
 * were taken into cstream (or dropped past its share). */
typedef struct fetched_at {
    cs_sub *s;
    const char *topic;
    int32_t partition;
    int64_t end;
} fetched_at;

static bool fetched(void *arg) {
    fetched_at *f = arg;
    rd_kafka_t *rk = cs_sub_rdkafka_consumer(f->s);
    if (!rk) return false;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, f->topic, f->partition);
    bool yes = rd_kafka_position(rk, l) == RD_KAFKA_RESP_ERR_NO_ERROR && l->elems[0].offset >= f->end;
    rd_kafka_topic_partition_list_destroy(l);
    return yes;
}

typedef struct handled_n {
    svc *v;
    int32_t partition;
    int n;
} handled_n;

static bool handled_at_least(void *arg) {
    handled_n *h = arg;
    return atomic_load(&h->v->handled[h->partition]) >= h->n;
}

static bool assigned_both(void *arg) {
    rd_kafka_t *rk = cs_sub_rdkafka_consumer(arg);
    rd_kafka_topic_partition_list_t *l = NULL;
    if (!rk || rd_kafka_assignment(rk, &l)) return false;
    bool yes = l->cnt == PARTS;
    rd_kafka_topic_partition_list_destroy(l);
    return yes;
}

static bool assigned_fewer(void *arg) {
    rd_kafka_t *rk = cs_sub_rdkafka_consumer(arg);
    rd_kafka_topic_partition_list_t *l = NULL;
    if (!rk || rd_kafka_assignment(rk, &l)) return false;
    bool yes = l->cnt < PARTS;
    rd_kafka_topic_partition_list_destroy(l);
    return yes;
}

/* One record in each partition, handled: both are assigned and flowing. */
static void warm_up(const char *topic, svc *v) {
    for (int p = 0; p < PARTS; p++) CST_OK(cs_test_produce(cst_cluster, topic, p, NULL, 0, "w", 1, NULL));
    for (int p = 0; p < PARTS; p++) {
        handled_n h = {v, p, 1};
        assert_true(cst_wait(handled_at_least, &h, 30000));
    }
}

static void pause_holds_records(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("pause-hold", PARTS, topic, group, sizeof topic);
    svc *v = svc_new();
    cs_sub *s;
    cs_app *app = start(topic, group, v, 0, &s);
    warm_up(topic, v);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 1, 30000));

    assert_int_equal(cs_sub_pause_partition(s, topic, 7), CS_ERR_STATE);
    char want[200];
    snprintf(want, sizeof want, "%s/7 is not assigned", topic);
    if (!strstr(cs_errmsg(), want)) fail_msg("error does not name the partition: %s", cs_errmsg());

    CST_OK(cs_sub_pause_partition(s, topic, 0));
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.paused_partitions, 1);
    assert_true(cst_metric(app, "cstream_paused_partitions", NULL) == 1.0);

    enum { M = 30 };
    for (int i = 0; i < M; i++) {
        CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "p", 1, NULL));
        CST_OK(cs_test_produce(cst_cluster, topic, 1, NULL, 0, "q", 1, NULL));
    }
    /* Partition 1 flows; partition 0 is fetched to its end but not handled. */
    handled_n h1 = {v, 1, 1 + M};
    assert_true(cst_wait(handled_at_least, &h1, 30000));
    fetched_at f0 = {s, topic, 0, 1 + M};
    assert_true(cst_wait(fetched, &f0, 30000));
    cst_wait_commit_ticks(s, 3, 30000); /* each had the chance to commit past the paused records */
    assert_int_equal(atomic_load(&v->handled[0]), 1);
    int64_t committed = -1;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(committed, 1);
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.stuck_pauses, 0);

    CST_OK(cs_sub_resume_partition(s, topic, 0));
    handled_n h0 = {v, 0, 1 + M};
    assert_true(cst_wait(handled_at_least, &h0, 30000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 1 + M, 30000));
    for (int64_t o = 0; o < 1 + M; o++) assert_int_equal(cst_seen_count(v->seen, 0, o), 1);
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.paused_partitions, 0);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    svc_free(v);
}

static bool shed(void *arg) { return cs_test_sub_sheds(arg) > 0; }

/* A small buffer: the paused partition keeps its share, the rest is dropped
 * (and librdkafka stops fetching it) and fetched again after the resume; the
 * other partition is never held up. `failures`: re-fetch seeks that fail
 * first (each retried 200 ms later; nothing is taken meanwhile). */
static void sheds_and_reads_again(const char *name, unsigned failures) {
    char topic[128], group[160];
    cst_fresh(name, PARTS, topic, group, sizeof topic);
    svc *v = svc_new();
    cs_sub *s;
    cs_app *app = start(topic, group, v, 64 * 1024, &s);
    warm_up(topic, v);
    CST_OK(cs_sub_pause_partition(s, topic, 0));
    enum { BIG = 2000, SMALL = 300 };
    cst_produce_sized(topic, 0, BIG, 500); /* about 1 MB: 16 times the whole buffer */
    assert_true(cst_wait(shed, s, 60000));
    cst_produce_sized(topic, 1, SMALL, 500);
    handled_n h1 = {v, 1, 1 + SMALL};
    assert_true(cst_wait(handled_at_least, &h1, 60000));
    assert_int_equal(atomic_load(&v->handled[0]), 1);
    if (failures) CST_OK(cs_test_sub_fail_refetches(s, failures));
    CST_OK(cs_sub_resume(s));
    handled_n h0 = {v, 0, 1 + BIG};
    assert_true(cst_wait(handled_at_least, &h0, 60000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 1 + BIG, 60000));
    for (int64_t o = 0; o < 1 + BIG; o++)
        if (cst_seen_count(v->seen, 0, o) != 1)
            fail_msg("offset %lld handled %d times", (long long)o, cst_seen_count(v->seen, 0, o));
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.stuck_pauses, 0);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    svc_free(v);
}

static void pause_sheds_past_its_share(void **state) {
    (void)state;
    sheds_and_reads_again("pause-shed", 0);
}

/* The resume's seek back to the first dropped record fails twice: the
 * partition takes nothing until it succeeds, so the records after the
 * dropped ones never pass for a gap (which skipped the dropped ones). */
static void pause_refetch_retried(void **state) {
    (void)state;
    sheds_and_reads_again("pause-refetch", 2);
}

/* Paused partition 0 on A; B joins and leaves; A gets 0 back, still paused. */
static void pause_survives_rebalance(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("pause-rebalance", PARTS, topic, group, sizeof topic);
    svc *a = svc_new(), *b = svc_new();
    cs_sub *sa, *sb;
    cs_app *app_a = start(topic, group, a, 0, &sa);
    warm_up(topic, a);
    CST_OK(cs_sub_pause_partition(sa, topic, 0));
    cs_app *app_b = start(topic, group, b, 0, &sb);
    CST_OK(cs_test_app_wait_idle(app_b, 60000)); /* B has its share */
    CST_OK(cs_app_stop(app_b));
    cs_app_destroy(app_b);
    assert_true(cst_wait(assigned_both, sa, 60000));
    enum { M = 20 };
    for (int i = 0; i < M; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "p", 1, NULL));
    fetched_at f0 = {sa, topic, 0, 1 + M};
    assert_true(cst_wait(fetched, &f0, 30000));
    cst_wait_commit_ticks(sa, 3, 30000);
    assert_int_equal(atomic_load(&a->handled[0]), 1);
    cs_sub_stats st;
    cs_sub_stats_get(sa, &st);
    assert_int_equal(st.paused_partitions, 1);
    CST_OK(cs_sub_resume_partition(sa, topic, 0));
    handled_n h0 = {a, 0, 1 + M};
    assert_true(cst_wait(handled_at_least, &h0, 30000));
    CST_OK(cs_app_stop(app_a));
    cs_app_destroy(app_a);
    svc_free(a);
    svc_free(b);
}

/* A pauses both partitions (topic, -1); B joins and takes one; A resumes the
 * topic while it holds only the other (or none): both pauses end, so once B
 * leaves, both partitions flow on A. */
static void resume_topic_forgets_unassigned(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("pause-topic", PARTS, topic, group, sizeof topic);
    svc *a = svc_new(), *b = svc_new();
    cs_sub *sa, *sb;
    cs_app *app_a = start(topic, group, a, 0, &sa);
    warm_up(topic, a);
    CST_OK(cs_sub_pause_partition(sa, topic, -1));
    cs_app *app_b = start(topic, group, b, 0, &sb);
    CST_OK(cs_test_app_wait_idle(app_b, 60000));      /* B has its share */
    assert_true(cst_wait(assigned_fewer, sa, 60000)); /* A holds one partition or none */
    CST_OK(cs_sub_resume_partition(sa, topic, -1));   /* also with none: the pauses listed end */
    CST_OK(cs_app_stop(app_b));
    cs_app_destroy(app_b);
    assert_true(cst_wait(assigned_both, sa, 60000));
    enum { M = 10 };
    for (int p = 0; p < PARTS; p++)
        for (int i = 0; i < M; i++) CST_OK(cs_test_produce(cst_cluster, topic, p, NULL, 0, "p", 1, NULL));
    for (int p = 0; p < PARTS; p++) {
        handled_n h = {a, p, 1 + M};
        if (!cst_wait(handled_at_least, &h, 30000))
            fail_msg("partition %d still paused: handled %d of %d", p, atomic_load(&a->handled[p]), 1 + M);
    }
    cs_sub_stats st;
    cs_sub_stats_get(sa, &st);
    assert_int_equal(st.paused_partitions, 0);
    CST_OK(cs_app_stop(app_a));
    cs_app_destroy(app_a);
    svc_free(a);
    svc_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pause_holds_records),      cmocka_unit_test(pause_sheds_past_its_share),
        cmocka_unit_test(pause_refetch_retried),    cmocka_unit_test(resume_topic_forgets_unassigned),
        cmocka_unit_test(pause_survives_rebalance),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
