/* test_producer.c — the producer side: a publish returns after the delivery
 * report (its partition and offset are real); the queue timeout turns a full
 * local queue into an error; the shutdown flush reports what it could not
 * deliver; a reply that fails keeps its source record open and it comes back;
 * a reply that cannot be queued within its queue timeout brings its source
 * back under Tracked, and is logged and counted under Auto; a handler's
 * blocking publish waits for queue space and succeeds; a reply purged at the
 * stop leaves its source uncommitted, and the next owner handles it again. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
        cs_record r = {.topic = topic,
                       .partition = 2,
                       .key = "k",
                       .key_len = 1,
                       .value = v,
                       .value_len = strlen(v),
                       .headers = h,
                       .n_headers = 2};
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
    int attempts[4];
    int runs;
    cst_gate go; /* the test lets the current attempt continue (closed again as it does) */
    bool free;   /* every later attempt runs without waiting */
} gated;

/* GATE_WAIT_MS bounds every wait on a gate: the test thread fails with a
 * message past it, and a handler still held then goes on (and says so), so a
 * broken test ends instead of hanging its worker and the app's stop. */
enum { GATE_WAIT_MS = 30000 };

static cs_outcome reply_handler(cs_delivery *d, void *user) {
    gated *g = user;
    pthread_mutex_lock(&g->lock);
    g->attempts[g->runs < 4 ? g->runs : 3] = cs_delivery_attempt(d);
    g->runs++;
    bool wait = !g->free;
    pthread_mutex_unlock(&g->lock);
    if (wait) {
        if (!cst_gate_wait(&g->go, GATE_WAIT_MS))
            fprintf(stderr, "reply_handler: not let go within %d ms, going on\n", GATE_WAIT_MS);
        cst_gate_close(&g->go); /* the next attempt waits for its own let_go */
    }
    cs_delivery_reply(d, NULL, 0, "Paid", 4);
    return CS_ACK;
}

typedef struct runs_arg {
    gated *g;
    int n;
} runs_arg;

static bool runs_at_least(void *arg) {
    runs_arg *a = arg;
    pthread_mutex_lock(&a->g->lock);
    bool yes = a->g->runs >= a->n;
    pthread_mutex_unlock(&a->g->lock);
    return yes;
}

/* Waits at most GATE_WAIT_MS for the handler's n-th run; false if it did not come. */
static bool runs_reach(gated *g, int n) {
    runs_arg a = {g, n};
    return cst_wait(runs_at_least, &a, GATE_WAIT_MS);
}

static void wait_runs(gated *g, int n) {
    if (!runs_reach(g, n)) fail_msg("the reply handler did not run %d times within %d ms", n, GATE_WAIT_MS);
}

static void let_go(gated *g) { cst_gate_open(&g->go); }

/* Every later attempt runs without waiting; one waiting now goes on. */
static void run_freely(gated *g) {
    pthread_mutex_lock(&g->lock);
    g->free = true;
    pthread_mutex_unlock(&g->lock);
    cst_gate_open(&g->go);
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
    gated g = {.lock = PTHREAD_MUTEX_INITIALIZER};
    cst_gate_init(&g.go);
    cs_app *app = cs_app_new("reply-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_producer_config(k, "message.timeout.ms", "1500"));
    cs_sub *s = cs_kafka_subscribe(k, topic, reply_handler, &g);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
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
    run_freely(&g);
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
    cst_gate_destroy(&g.go);
}

/* ---- a reply that cannot be queued -------------------------------------------- */

/* The app of the reply tests: one subscription of `topic` under `mode`,
 * replying to `done` with a reply queue timeout of reply_queue_ms; the
 * producer's local queue holds at most `max_messages` records (NULL: the
 * default). */
static cs_app *reply_app(gated *g, cs_kafka **k_out, cs_sub **s_out, const char *topic, const char *group,
                         const char *done, cs_commit_mode mode, const char *max_messages, int reply_queue_ms,
                         int drain_ms, int flush_ms) {
    cs_app *app = cs_app_new("reply-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    if (max_messages) CST_OK(cs_kafka_producer_config(k, "queue.buffering.max.messages", max_messages));
    CST_OK(cs_kafka_flush_timeout_ms(k, flush_ms));
    cs_sub *s = cs_kafka_subscribe(k, topic, reply_handler, g);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, mode));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_sub_drain_timeout_ms(s, drain_ms));
    CST_OK(cs_sub_reply(s, done, reply_queue_ms));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    if (k_out) *k_out = k;
    if (s_out) *s_out = s;
    return app;
}

/* The value of cstream_publish_errors_total{kind="kind"} in the app's
 * /metrics page, or -1 if it is not there. */
static long long publish_errors(cs_app *app, const char *kind) {
    char labels[64];
    snprintf(labels, sizeof labels, "kind=\"%s\"", kind);
    double v;
    return cst_metric_value(app, "cstream_publish_errors_total", labels, &v) ? (long long)v : -1;
}

static bool one_reported(void *arg) {
    reports *r = arg;
    return atomic_load(&r->ok) + atomic_load(&r->failed) >= 1;
}

typedef struct settled_arg {
    cs_sub *s;
    uint64_t acked;
} settled_arg;

static bool acked_at_least(void *arg) {
    settled_arg *a = arg;
    cs_sub_stats st;
    cs_sub_stats_get(a->s, &st);
    return st.acked >= a->acked;
}

/* With the broker down, one record fills a local queue of one: the reply
 * queued behind it cannot get in before its queue timeout, whatever the
 * machine's speed (nothing is delivered while the broker is down). */
static void fill_the_local_queue(cs_kafka *k, const char *topic, reports *rep) {
    CST_OK(cs_test_cluster_set_down(cst_cluster, 1));
    cs_record filler = {.topic = topic, .partition = 0, .value = "filler", .value_len = 6};
    CST_OK(cs_publish_async(k, &filler, count_report, rep));
}

/* Tracked: the reply's queue timeout runs out, the ack becomes a retry and
 * the handler runs again; nothing is committed until a reply gets out. */
static void unqueued_reply_brings_the_source_back_under_tracked(void **state) {
    (void)state;
    if (!cs_test_cluster_is_embedded(cst_cluster)) {
        cst_skip("embedded cluster only: it takes the broker down, which only the embedded cluster can do in-process");
    }
    char topic[128], group[160], done[160];
    cst_fresh("unqueued-tracked", 1, topic, group, sizeof topic);
    snprintf(done, sizeof done, "%s.done", topic);
    CST_OK(cs_test_topic_create(cst_cluster, done, 1));
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "payout", 6, NULL));
    gated g = {.lock = PTHREAD_MUTEX_INITIALIZER};
    cst_gate_init(&g.go);
    cs_kafka *k;
    cs_sub *s;
    cs_app *app = reply_app(&g, &k, &s, topic, group, done, CS_COMMIT_TRACKED, "1", 300, 10000, 10000);

    wait_runs(&g, 1);
    reports rep = {0};
    fill_the_local_queue(k, done, &rep);
    cst_capture c;
    cst_capture_start(&c);
    let_go(&g); /* its reply waits 300 ms for space, then the source comes back */
    bool again = runs_reach(&g, 2);
    char *log = cst_capture_stop(&c);
    long long reply_errors = publish_errors(app, "reply");
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    CST_OK(cs_test_cluster_set_down(cst_cluster, 0));
    if (!again) fail_msg("the source did not come back within %d ms; the log said:\n%s", GATE_WAIT_MS, log);
    int64_t committed; /* the second attempt is still held: nothing can have settled the source */
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    bool unqueued = strstr(log, "reply not queued") && strstr(log, done) && strstr(log, "queue_timeout");
    if (!unqueued) fail_msg("no \"reply not queued\" line naming %s and the queue timeout in:\n%s", done, log);
    free(log);
    pthread_mutex_lock(&g.lock);
    assert_int_equal(g.attempts[1], 2); /* the same record, as a retry */
    pthread_mutex_unlock(&g.lock);
    assert_true(committed <= 0); /* the source is still open */
    assert_int_equal(st.retried, 1);
    assert_int_equal(st.acked, 0);
    assert_int_equal(reply_errors, 1);

    /* Once the filler is out, the next attempt's reply fits and settles it. */
    if (!cst_wait(one_reported, &rep, 30000))
        fail_msg("the filler was not reported within 30 s of the broker's return");
    assert_int_equal(atomic_load(&rep.ok), 1);
    run_freely(&g);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 1, 60000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_gate_destroy(&g.go);
}

/* Auto: nothing can be gated, so the source is acked all the same; the reply
 * that did not get in is logged and counted, and the record is not run again. */
static void unqueued_reply_is_logged_and_counted_under_auto(void **state) {
    (void)state;
    if (!cs_test_cluster_is_embedded(cst_cluster)) {
        cst_skip("embedded cluster only: it takes the broker down, which only the embedded cluster can do in-process");
    }
    char topic[128], group[160], done[160];
    cst_fresh("unqueued-auto", 1, topic, group, sizeof topic);
    snprintf(done, sizeof done, "%s.done", topic);
    CST_OK(cs_test_topic_create(cst_cluster, done, 1));
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "payout", 6, NULL));
    gated g = {.lock = PTHREAD_MUTEX_INITIALIZER};
    cst_gate_init(&g.go);
    cs_kafka *k;
    cs_sub *s;
    cs_app *app = reply_app(&g, &k, &s, topic, group, done, CS_COMMIT_AUTO, "1", 300, 10000, 10000);

    wait_runs(&g, 1);
    reports rep = {0};
    fill_the_local_queue(k, done, &rep);
    cst_capture c;
    cst_capture_start(&c);
    let_go(&g);
    settled_arg acked = {s, 1};
    bool settled = cst_wait(acked_at_least, &acked, 30000);
    char *log = cst_capture_stop(&c);
    long long reply_errors = publish_errors(app, "reply");
    CST_OK(cs_test_cluster_set_down(cst_cluster, 0));
    if (!settled) fail_msg("the source was not acked within 30 s; the log said:\n%s", log);
    bool unqueued = strstr(log, "reply not queued") && strstr(log, done) && strstr(log, "queue_timeout");
    if (!unqueued) fail_msg("no \"reply not queued\" line naming %s and the queue timeout in:\n%s", done, log);
    free(log);
    assert_int_equal(reply_errors, 1);

    if (!cst_wait(one_reported, &rep, 30000))
        fail_msg("the filler was not reported within 30 s of the broker's return");
    assert_int_equal(atomic_load(&rep.ok), 1);
    CST_OK(cs_app_stop(app));
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.acked, 1);
    assert_int_equal(st.retried, 0);
    assert_int_equal(st.retry_unsupported, 0);
    pthread_mutex_lock(&g.lock);
    assert_int_equal(g.runs, 1); /* nothing brought it back */
    pthread_mutex_unlock(&g.lock);
    cs_app_destroy(app);
    cst_gate_destroy(&g.go);
}

/* ---- a blocking publish waits for queue space ---------------------------------- */

typedef struct pressing {
    pthread_mutex_t lock;
    cs_kafka *k;
    const char *out;
    cst_gate entered, go; /* the handler holds its record; the test lets it go on */
    cs_err err;           /* the blocking publish's */
    char errmsg[256];
    cs_published where;
    reports fillers;
} pressing;

/* Fills the local queue (room for 2) with two asynchronous publishes, then
 * publishes a third record blocking: it must wait for the fillers' reports. */
static cs_outcome press_handler(cs_delivery *d, void *user) {
    (void)d;
    pressing *p = user;
    cst_gate_open(&p->entered);
    if (!cst_gate_wait(&p->go, GATE_WAIT_MS))
        fprintf(stderr, "press_handler: not let go within %d ms, going on\n", GATE_WAIT_MS);
    cs_kafka *k = p->k;
    cs_record r = {.topic = p->out, .partition = 0, .value = "filler", .value_len = 6};
    for (int i = 0; i < 2; i++)
        if (cs_publish_async(k, &r, count_report, &p->fillers) != CS_OK) atomic_fetch_add(&p->fillers.failed, 1);
    r.value = "pressed";
    r.value_len = 7;
    cs_published where = {-1, -1};
    cs_err err = cs_publish(k, &r, &where);
    pthread_mutex_lock(&p->lock);
    p->err = err;
    snprintf(p->errmsg, sizeof p->errmsg, "%s", err ? cs_errmsg() : "");
    p->where = where;
    pthread_mutex_unlock(&p->lock);
    return CS_ACK;
}

/* The handler's blocking publish finds the local queue full (two fillers the
 * slowed broker answers only after 1 s) and waits for space instead of
 * failing: it returns CS_OK with the record's place behind the fillers, and
 * the handler acks. The 1 s round trip is what makes the queue full when the
 * third publish comes, microseconds after the second; it only decides whether
 * a broken wait is caught (a publish that fails when the queue is full fails
 * here unless the handler thread stalls 1 s between two calls), never whether
 * a working one passes. */
static void blocking_publish_waits_for_queue_space(void **state) {
    (void)state;
    if (!cs_test_cluster_is_embedded(cst_cluster)) {
        cst_skip("embedded cluster only: it slows the broker down, which only the embedded cluster can do in-process");
    }
    char topic[128], group[160], out[160];
    cst_fresh("pressed", 1, topic, group, sizeof topic);
    snprintf(out, sizeof out, "%s.out", topic);
    CST_OK(cs_test_topic_create(cst_cluster, out, 1));
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "work", 4, NULL));
    pressing p = {.lock = PTHREAD_MUTEX_INITIALIZER, .out = out, .err = -1};
    cst_gate_init(&p.entered);
    cst_gate_init(&p.go);
    cs_app *app = cs_app_new("pressed-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    p.k = k;
    CST_OK(cs_kafka_producer_config(k, "queue.buffering.max.messages", "2"));
    CST_OK(cs_kafka_queue_timeout_ms(k, 30000));
    cs_sub *s = cs_kafka_subscribe(k, topic, press_handler, &p);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));

    /* Slowed only once the handler holds its record: joining the group at
     * a 1 s round trip would take long. */
    if (!cst_gate_wait(&p.entered, GATE_WAIT_MS)) fail_msg("the handler did not run within %d ms", GATE_WAIT_MS);
    CST_OK(cs_test_broker_set_rtt(cst_cluster, 1, 1000));
    cst_gate_open(&p.go);
    settled_arg acked = {s, 1};
    bool settled = cst_wait(acked_at_least, &acked, 60000);
    CST_OK(cs_test_broker_set_rtt(cst_cluster, 1, 0));
    if (!settled) fail_msg("the handler did not ack its record within 60 s");

    pthread_mutex_lock(&p.lock);
    if (p.err != CS_OK) fail_msg("the blocking publish failed (%s): %s", cs_err_name(p.err), p.errmsg);
    assert_int_equal(p.where.partition, 0);
    assert_int_equal(p.where.offset, 2); /* behind the two fillers */
    pthread_mutex_unlock(&p.lock);
    assert_int_equal(atomic_load(&p.fillers.ok), 2);
    assert_int_equal(atomic_load(&p.fillers.failed), 0);
    assert_int_equal(publish_errors(app, "publish"), 0);
    CST_OK(cs_app_stop(app));
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.delivered, 1); /* slowed, not failed: it ran once */
    assert_int_equal(st.acked, 1);
    assert_int_equal(st.retried, 0);
    cs_app_destroy(app);
    cst_gate_destroy(&p.entered);
    cst_gate_destroy(&p.go);
}

/* ---- a reply purged at the stop leaves its source to the next owner ----------- */

/* Every Produce request fails with a retriable error (NOT_ENOUGH_REPLICAS), so
 * the reply is retried in the producer, never delivered, and still there when
 * the stop's flush times out: the stop commits without its source and purges
 * it. The next member of the group reads the record again. */
static void purged_reply_leaves_its_source_to_the_next_owner(void **state) {
    (void)state;
    if (!cs_test_cluster_is_embedded(cst_cluster)) {
        cst_skip(
            "embedded cluster only: it makes the broker refuse every produce, which only the embedded cluster can do");
    }
    /* Enough refusals for 100 s of the producer's resends (retry.backoff.ms
     * is 100); the test needs a second or two, then clears the rest. */
    enum { NOT_ENOUGH_REPLICAS = 19, REFUSALS = 1000 };
    char topic[128], group[160], done[160];
    cst_fresh("purged", 1, topic, group, sizeof topic);
    snprintf(done, sizeof done, "%s.done", topic);
    CST_OK(cs_test_topic_create(cst_cluster, done, 1));
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "payout", 6, NULL));
    static int refusals[REFUSALS];
    for (int i = 0; i < REFUSALS; i++) refusals[i] = NOT_ENOUGH_REPLICAS;
    CST_OK(cs_test_cluster_push_request_errors(cst_cluster, 0, REFUSALS, refusals));
    gated g = {.lock = PTHREAD_MUTEX_INITIALIZER, .free = true};
    cst_gate_init(&g.go);
    cs_kafka *k;
    cs_sub *s;
    cs_app *app = reply_app(&g, &k, &s, topic, group, done, CS_COMMIT_TRACKED, NULL, 5000, 300, 300);
    wait_runs(&g, 1);
    CST_OK(cs_app_stop(app)); /* the handler acked; its reply is stuck */
    size_t unflushed = cs_kafka_unflushed_records(k);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    cs_app_destroy(app);
    CST_OK(cs_test_cluster_clear_request_errors(cst_cluster, 0));
    int64_t committed;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(unflushed, 1); /* the reply, purged */
    assert_true(committed <= 0);    /* its source stayed open */
    assert_int_equal(st.acked, 0);
    pthread_mutex_lock(&g.lock);
    assert_int_equal(g.runs, 1);
    pthread_mutex_unlock(&g.lock);

    /* The next owner: the record is handled again, and this time it settles. */
    app = reply_app(&g, &k, &s, topic, group, done, CS_COMMIT_TRACKED, NULL, 5000, 10000, 10000);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 1, 60000));
    CST_OK(cs_app_stop(app));
    assert_int_equal(cs_kafka_unflushed_records(k), 0);
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.acked, 1);
    pthread_mutex_lock(&g.lock);
    assert_int_equal(g.runs, 2);
    pthread_mutex_unlock(&g.lock);
    cs_app_destroy(app);
    cst_gate_destroy(&g.go);
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
        cs_record r = {
            .topic = p->topic, .partition = -1, .key = v, .key_len = strlen(v), .value = v, .value_len = strlen(v)};
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
        cmocka_unit_test(unqueued_reply_brings_the_source_back_under_tracked),
        cmocka_unit_test(unqueued_reply_is_logged_and_counted_under_auto),
        cmocka_unit_test(blocking_publish_waits_for_queue_space),
        cmocka_unit_test(purged_reply_leaves_its_source_to_the_next_owner),
        cmocka_unit_test(idempotent_publishes_land_once_across_broker_restart),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
