/* test_producer.c — the producer side: a publish returns after the delivery
 * report (its partition and offset are real); the queue timeout turns a full
 * local queue into an error; the shutdown flush reports what it could not
 * deliver; a reply that fails keeps its source record open and it comes back. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cstest.h"

static cs_app *producer_app(cs_kafka **k_out, const char *topic, int queue_timeout_ms, const char *max_messages,
                            int flush_timeout_ms) {
    cs_app *app = cs_app_new("producer-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_topic(k, topic, 1)); /* only checked: it exists */
    CST_OK(cs_kafka_queue_timeout_ms(k, queue_timeout_ms));
    CST_OK(cs_kafka_flush_timeout_ms(k, flush_timeout_ms));
    if (max_messages) CST_OK(cs_kafka_producer_config(k, "queue.buffering.max.messages", max_messages));
    CST_OK(cs_kafka_producer_config(k, "linger.ms", "0"));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *k_out = k;
    return app;
}

/* ---- publish returns after the delivery report ----------------------------- */

typedef struct readback {
    pthread_mutex_t lock;
    char value[8][32];
    char key[8][32];
    char header[8][32];
    int header_null[8];
    int n;
} readback;

static cs_outcome read_one(cs_delivery *d, void *user) {
    readback *r = user;
    int64_t o = cs_delivery_offset(d);
    if (o < 0 || o >= 8) return CS_ACK;
    size_t len;
    const char *v = cs_delivery_value(d, &len);
    pthread_mutex_lock(&r->lock);
    snprintf(r->value[o], sizeof r->value[o], "%.*s", (int)len, v ? v : "");
    const char *key = cs_delivery_key(d, &len);
    snprintf(r->key[o], sizeof r->key[o], "%.*s", (int)len, key ? key : "(null)");
    const void *hv;
    if (cs_delivery_header_get(d, "trace", &hv, &len) == CS_OK)
        snprintf(r->header[o], sizeof r->header[o], "%.*s", (int)len, hv ? (const char *)hv : "");
    r->header_null[o] = cs_delivery_header_get(d, "empty", &hv, &len) == CS_OK && hv == NULL;
    r->n++;
    pthread_mutex_unlock(&r->lock);
    return CS_ACK;
}

static void publish_returns_after_the_delivery_report(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("publish", 3, topic, group, sizeof topic);
    cs_kafka *k;
    cs_app *app = producer_app(&k, topic, 5000, NULL, 5000);
    for (int i = 0; i < 3; i++) {
        char v[16];
        snprintf(v, sizeof v, "v%d", i);
        cs_header h[] = {{"trace", "t-1", 3}, {"empty", NULL, 0}};
        cs_record r = {.topic = topic, .partition = 2, .key = "k", .key_len = 1, .value = v, .value_len = strlen(v),
                       .headers = h, .n_headers = 2};
        cs_published where = {-1, -1};
        CST_OK(cs_publish(k, &r, &where));
        assert_int_equal(where.partition, 2);
        assert_int_equal(where.offset, i); /* the broker's offset, known only from the report */
    }
    CST_OK(cs_app_stop(app));
    assert_int_equal(cs_kafka_unflushed_records(k), 0);
    cs_app_destroy(app);

    /* Read them back where the reports said they are. */
    readback rb = {.lock = PTHREAD_MUTEX_INITIALIZER};
    app = cs_app_new("readback", "1.0");
    k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, read_one, &rb);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    CST_OK(cs_test_app_wait_idle(app, 30000));
    assert_int_equal(rb.n, 3);
    for (int i = 0; i < 3; i++) {
        char v[16];
        snprintf(v, sizeof v, "v%d", i);
        assert_string_equal(rb.value[i], v);
        assert_string_equal(rb.key[i], "k");
        assert_string_equal(rb.header[i], "t-1");
        assert_true(rb.header_null[i]);
    }
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

/* ---- queue timeout and flush with the broker down --------------------------- */

typedef struct reports {
    _Atomic int ok, failed;
} reports;

static void count_report(const cs_published *where, cs_err err, void *opaque) {
    reports *r = opaque;
    if (err == CS_OK && where) atomic_fetch_add(&r->ok, 1);
    else atomic_fetch_add(&r->failed, 1);
}

static bool all_reported(void *arg) {
    reports *r = arg;
    return atomic_load(&r->ok) + atomic_load(&r->failed) >= 5;
}

static void queue_timeout_when_the_local_queue_is_full(void **state) {
    (void)state;
    if (!cs_test_cluster_is_embedded(cst_cluster)) {
        cst_skip("embedded cluster only: it takes the broker down, which only the embedded cluster can do in-process");
    }
    char topic[128];
    cst_fresh("qfull", 1, topic, NULL, sizeof topic);
    cs_kafka *k;
    cs_app *app = producer_app(&k, topic, 300, "5", 10000);
    CST_OK(cs_test_cluster_set_down(cst_cluster, 1));
    reports rep = {0};
    cs_record r = {.topic = topic, .partition = -1, .value = "x", .value_len = 1};
    for (int i = 0; i < 5; i++) CST_OK(cs_publish_async(k, &r, count_report, &rep));
    cs_err err = cs_publish(k, &r, NULL); /* the sixth does not fit */
    assert_int_equal(err, CS_ERR_TIMEOUT);
    assert_non_null(strstr(cs_errmsg(), topic));
    assert_non_null(strstr(cs_errmsg(), "queue_timeout"));
    CST_OK(cs_test_cluster_set_down(cst_cluster, 0));
    assert_true(cst_wait(all_reported, &rep, 30000));
    assert_int_equal(atomic_load(&rep.ok), 5);
    CST_OK(cs_app_stop(app));
    assert_int_equal(cs_kafka_unflushed_records(k), 0);
    cs_app_destroy(app);
}

static void flush_reports_unflushed_records(void **state) {
    (void)state;
    if (!cs_test_cluster_is_embedded(cst_cluster)) {
        cst_skip("embedded cluster only: it takes the broker down, which only the embedded cluster can do in-process");
    }
    char topic[128];
    cst_fresh("flush", 1, topic, NULL, sizeof topic);
    cs_kafka *k;
    cs_app *app = producer_app(&k, topic, 1000, NULL, 500);
    CST_OK(cs_test_cluster_set_down(cst_cluster, 1));
    reports rep = {0};
    cs_record r = {.topic = topic, .partition = -1, .value = "x", .value_len = 1};
    for (int i = 0; i < 5; i++) CST_OK(cs_publish_async(k, &r, count_report, &rep));
    CST_OK(cs_app_stop(app));
    assert_int_equal(cs_kafka_unflushed_records(k), 5);
    assert_int_equal(atomic_load(&rep.failed), 5); /* every undelivered record is reported */
    cs_app_destroy(app);
    CST_OK(cs_test_cluster_set_down(cst_cluster, 0));

    app = producer_app(&k, topic, 1000, NULL, 10000);
    reports rep2 = {0};
    for (int i = 0; i < 5; i++) CST_OK(cs_publish_async(k, &r, count_report, &rep2));
    CST_OK(cs_app_stop(app));
    assert_int_equal(cs_kafka_unflushed_records(k), 0);
    assert_int_equal(atomic_load(&rep2.ok), 5);
    cs_app_destroy(app);
}

/* ---- a failed reply keeps its source open ------------------------------------- */

typedef struct gated {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int attempts[4];
    int runs;
    bool go;   /* the test lets the current attempt continue */
    bool free; /* every later attempt runs without waiting */
} gated;

static cs_outcome reply_handler(cs_delivery *d, void *user) {
    gated *g = user;
    pthread_mutex_lock(&g->lock);
    g->attempts[g->runs < 4 ? g->runs : 3] = cs_delivery_attempt(d);
    g->runs++;
    pthread_cond_broadcast(&g->cv);
    while (!g->go && !g->free) pthread_cond_wait(&g->cv, &g->lock);
    g->go = false;
    pthread_mutex_unlock(&g->lock);
    cs_delivery_reply(d, NULL, 0, "Paid", 4);
    return CS_ACK;
}

static void wait_runs(gated *g, int n) {
    pthread_mutex_lock(&g->lock);
    while (g->runs < n) pthread_cond_wait(&g->cv, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static void let_go(gated *g) {
    pthread_mutex_lock(&g->lock);
    g->go = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->lock);
}

static void failed_reply_keeps_the_source_open(void **state) {
    (void)state;
    if (!cs_test_cluster_is_embedded(cst_cluster)) {
        cst_skip("embedded cluster only: it takes the broker down, which only the embedded cluster can do in-process");
    }
    char topic[128], group[160], done[160];
    cst_fresh("reply", 1, topic, group, sizeof topic);
    snprintf(done, sizeof done, "%s.done", topic);
    CST_OK(cs_test_topic_create(cst_cluster, done, 1));
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "payout", 6, NULL));
    gated g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    cs_app *app = cs_app_new("reply-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_producer_config(k, "message.timeout.ms", "1500"));
    cs_sub *s = cs_kafka_subscribe(k, topic, reply_handler, &g);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_sub_reply(s, done, 1000));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));

    wait_runs(&g, 1);
    CST_OK(cs_test_cluster_set_down(cst_cluster, 1));
    let_go(&g); /* the reply cannot be delivered: it times out, the source comes back */
    wait_runs(&g, 2);
    CST_OK(cs_test_cluster_set_down(cst_cluster, 0));
    int64_t committed;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_true(committed <= 0); /* the source is still open */
    /* From here on every attempt runs freely: if the broker's absence also
     * cost the group membership, the record is read once more, which is fine. */
    pthread_mutex_lock(&g.lock);
    g.free = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.lock);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 1, 60000));
    pthread_mutex_lock(&g.lock);
    assert_true(g.runs >= 2);
    assert_int_equal(g.attempts[0], 1);
    assert_int_equal(g.attempts[1], 2); /* a failed reply counts as an attempt */
    pthread_mutex_unlock(&g.lock);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_true(st.retried >= 1);
    assert_true(st.acked >= 1);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

/* ---- idempotent producer across a real broker restart ---------------------- */

enum { RESTART_N = 3000 };

typedef struct landed {
    pthread_mutex_t lock;
    int count[RESTART_N];
    int total;
} landed;

static cs_outcome count_landed(cs_delivery *d, void *user) {
    landed *l = user;
    size_t len;
    const char *v = cs_delivery_value(d, &len);
    char buf[32];
    snprintf(buf, sizeof buf, "%.*s", (int)len, v ? v : "");
    int i = atoi(buf + 2); /* "r-<i>" */
    pthread_mutex_lock(&l->lock);
    if (i >= 0 && i < RESTART_N) l->count[i]++;
    l->total++;
    pthread_mutex_unlock(&l->lock);
    return CS_ACK;
}

static bool reported_third(void *arg) {
    reports *r = arg;
    return atomic_load(&r->ok) + atomic_load(&r->failed) >= RESTART_N / 3;
}

static bool reported_all(void *arg) {
    reports *r = arg;
    return atomic_load(&r->ok) + atomic_load(&r->failed) >= RESTART_N;
}

typedef struct publisher {
    cs_kafka *k;
    const char *topic;
    reports *rep;
} publisher;

static void *publish_slowly(void *arg) {
    publisher *p = arg;
    for (int i = 0; i < RESTART_N; i++) {
        char v[32];
        snprintf(v, sizeof v, "r-%d", i);
        cs_record r = {.topic = p->topic, .partition = -1, .key = v, .key_len = strlen(v), .value = v, .value_len = strlen(v)};
        if (cs_publish_async(p->k, &r, count_report, p->rep) != CS_OK) {
            fprintf(stderr, "publish %d: %s\n", i, cs_errmsg());
            atomic_fetch_add(&p->rep->failed, 1);
        }
        if (i % 10 == 0) usleep(10 * 1000); /* spread the publishes over the restart */
    }
    return NULL;
}

static void idempotent_publishes_land_once_across_broker_restart(void **state) {
    (void)state;
    if (cs_test_cluster_is_embedded(cst_cluster)) {
        cst_skip("real broker only: it restarts the real broker (the embedded cluster only checks sequence numbers "
                 "of transactional producers)");
    }
    char topic[128], group[160];
    cst_fresh("idempotent", 3, topic, group, sizeof topic);
    cs_app *app = cs_app_new("idempotent", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_topic(k, topic, 3));
    CST_OK(cs_kafka_producer_config(k, "enable.idempotence", "true"));
    CST_OK(cs_kafka_queue_timeout_ms(k, 60000));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    reports rep = {0};
    publisher pub = {k, topic, &rep};
    pthread_t t;
    pthread_create(&t, NULL, publish_slowly, &pub);
    assert_true(cst_wait(reported_third, &rep, 60000));
    assert_int_equal(system(CSTREAM_SOURCE_DIR "/scripts/kafka restart >/dev/null"), 0);
    pthread_join(t, NULL);
    assert_true(cst_wait(reported_all, &rep, 120000));
    assert_int_equal(atomic_load(&rep.failed), 0);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);

    landed *l = calloc(1, sizeof *l);
    pthread_mutex_init(&l->lock, NULL);
    app = cs_app_new("idempotent-reader", "1.0");
    k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, count_landed, l);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    CST_OK(cs_test_app_wait_idle(app, 60000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    int missing = 0, doubled = 0;
    for (int i = 0; i < RESTART_N; i++) {
        missing += l->count[i] == 0;
        doubled += l->count[i] > 1;
    }
    printf("published %d across a broker restart: landed %d, missing %d, duplicated %d\n", RESTART_N, l->total, missing,
           doubled);
    assert_int_equal(missing, 0);
    assert_int_equal(doubled, 0);
    free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(publish_returns_after_the_delivery_report),
        cmocka_unit_test(queue_timeout_when_the_local_queue_is_full),
        cmocka_unit_test(flush_reports_unflushed_records),
        cmocka_unit_test(failed_reply_keeps_the_source_open),
        cmocka_unit_test(idempotent_publishes_land_once_across_broker_restart),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
