/* test_batch.c — batches settled element by element: a mixed ack/drop/retry
 * batch (the retried element comes back alone, the committed position stops
 * in front of it), batch sizes never exceed N and never wait to fill, and
 * under Auto a retried element is reported unsupported and lost; `delivered`
 * counts elements while the handler histogram counts calls. One outcome for
 * the whole batch (ack, drop, retry) under Tracked and Auto. An element the
 * handler leaves CS_UNSET is a logged retry: alone under Tracked, unsupported
 * under Auto, holding the window under Transactional. After a crash, the
 * acked elements behind a retried one are read again (duplicates, not loss). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cstest.h"
#include "cstream/rdkafka.h"

enum { MAX_CALLS = 256 };

typedef struct batches {
    pthread_mutex_t lock;
    size_t sizes[MAX_CALLS];
    int64_t first[MAX_CALLS];
    int attempts_of_first[MAX_CALLS];
    int calls;
    bool gate_first;   /* the first call waits until `first_gate` opens */
    bool hold_retried; /* offset 3's second attempt waits until `retry_gate` opens */
    cst_gate first_gate, retry_gate;
    cst_seen *seen;
} batches;

static cs_outcome mixed(cs_delivery *const *b, size_t n, cs_outcome *outcomes, void *user) {
    batches *bt = user;
    pthread_mutex_lock(&bt->lock);
    int call = bt->calls++;
    if (call < MAX_CALLS) {
        bt->sizes[call] = n;
        bt->first[call] = cs_delivery_offset(b[0]);
        bt->attempts_of_first[call] = cs_delivery_attempt(b[0]);
    }
    pthread_mutex_unlock(&bt->lock);
    /* Bounded, so that a failed test cannot hang the stop. */
    bool held_retry = bt->hold_retried && cs_delivery_offset(b[0]) == 3 && cs_delivery_attempt(b[0]) == 2;
    cst_gate *gate = call == 0 && bt->gate_first ? &bt->first_gate : held_retry ? &bt->retry_gate : NULL;
    if (gate && !cst_gate_wait(gate, 60000)) fprintf(stderr, "mixed: a gate was not opened within 60 s\n");
    for (size_t i = 0; i < n; i++) {
        int64_t off = cs_delivery_offset(b[i]);
        cst_seen_add(bt->seen, cs_delivery_partition(b[i]), off);
        outcomes[i] = off == 5 ? CS_DROP : (off == 3 && cs_delivery_attempt(b[i]) == 1) ? CS_RETRY : CS_ACK;
    }
    return CS_EACH;
}

static bool calls_at_least(batches *bt, int n) {
    pthread_mutex_lock(&bt->lock);
    bool yes = bt->calls >= n;
    pthread_mutex_unlock(&bt->lock);
    return yes;
}
static bool three_calls(void *arg) { return calls_at_least(arg, 3); }
static bool one_call(void *arg) { return calls_at_least(arg, 1); }

static cs_app *start_batch_app(const char *topic, const char *group, cs_commit_mode mode, size_t max, batches *bt,
                               cs_sub **out) {
    cs_app *app = cs_app_new("batch-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe_batch(k, topic, mixed, max, bt);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, mode));
    CST_OK(cs_sub_commit_interval_ms(s, 20));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *out = s;
    return app;
}

static batches *batches_new(void) {
    batches *bt = calloc(1, sizeof *bt);
    pthread_mutex_init(&bt->lock, NULL);
    cst_gate_init(&bt->first_gate);
    cst_gate_init(&bt->retry_gate);
    bt->seen = cst_seen_new(1, 64);
    return bt;
}

static void mixed_batch_retried_element_comes_back_alone(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("batch", 1, topic, group, sizeof topic);
    batches *bt = batches_new();
    bt->gate_first = true;
    bt->hold_retried = true;
    cs_sub *s;
    cs_app *app = start_batch_app(topic, group, CS_COMMIT_TRACKED, 10, bt, &s);
    /* The first call (offset 0, alone: nothing else exists yet) holds its lane
     * while the other nine are produced, fetched and queued behind it. */
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "line", 4, NULL));
    assert_true(cst_wait(one_call, bt, 30000));
    for (int i = 1; i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "line", 4, NULL));
    cst_fetched f = {s, 10};
    assert_true(cst_wait(cst_fetched_to_end, &f, 30000));
    cst_gate_open(&bt->first_gate);
    assert_true(cst_wait(three_calls, bt, 30000)); /* [0], [1..9], then [3] alone, held */
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 3, 10000));
    int64_t committed;
    cst_wait_commit_ticks(s, 3, 10000); /* three commit ticks: it must stay in front of 3 */
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(committed, 3);
    cst_gate_open(&bt->retry_gate);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 10, 10000));
    pthread_mutex_lock(&bt->lock);
    assert_int_equal(bt->calls, 3);
    assert_int_equal(bt->sizes[0], 1);
    assert_int_equal(bt->sizes[1], 9); /* what was queued, in one batch */
    assert_int_equal(bt->first[1], 1);
    assert_int_equal(bt->sizes[2], 1); /* the retried element, alone */
    assert_int_equal(bt->first[2], 3);
    assert_int_equal(bt->attempts_of_first[2], 2);
    pthread_mutex_unlock(&bt->lock);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.acked, 9); /* 0-9 but the dropped 5; 3 on its second attempt */
    assert_int_equal(st.dropped, 1);
    assert_int_equal(st.retried, 1);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(bt->seen);
    free(bt);
}

static bool all_seen(void *arg) { return cst_seen_distinct(((batches *)arg)->seen) >= 40; }

static void batches_never_exceed_n_and_never_wait(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("batch-size", 1, topic, group, sizeof topic);
    batches *bt = batches_new();
    cs_sub *s;
    cs_app *app = start_batch_app(topic, group, CS_COMMIT_TRACKED, 4, bt, &s);
    /* A lone record on an idle subscription: handled alone, without waiting for more. */
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "x", 1, NULL));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 1, 30000));
    pthread_mutex_lock(&bt->lock);
    assert_int_equal(bt->calls, 1);
    assert_int_equal(bt->sizes[0], 1);
    pthread_mutex_unlock(&bt->lock);
    CST_OK(cs_test_produce_many(cst_cluster, topic, "x", 39));
    assert_true(cst_wait(all_seen, bt, 30000));
    pthread_mutex_lock(&bt->lock);
    size_t total = 0;
    for (int i = 0; i < bt->calls; i++) {
        assert_true(bt->sizes[i] >= 1 && bt->sizes[i] <= 4);
        total += bt->sizes[i];
    }
    printf("40 records in %d batches of at most 4\n", bt->calls);
    pthread_mutex_unlock(&bt->lock);
    assert_int_equal(total, 41); /* offset 3 came back once, alone */
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(bt->seen);
    free(bt);
}

/* The value of a subscription's series (labels subscription and group), -1 if absent. */
static long long sub_metric(cs_app *app, const char *name, const char *sub, const char *group) {
    char labels[512];
    snprintf(labels, sizeof labels, "subscription=\"%s\",group=\"%s\"", sub, group);
    double v;
    return cst_metric_value(app, name, labels, &v) ? (long long)v : -1;
}

/* delivered counts records handed to the handler (each element, each
 * attempt), the duration histogram one observation per call: /metrics and
 * cs_sub_stats say so, as the handler saw it. Returns delivered. */
static long long delivered_agrees(cs_app *app, const char *topic, const char *group, batches *bt) {
    pthread_mutex_lock(&bt->lock);
    long long calls = bt->calls, elements = 0;
    for (int i = 0; i < bt->calls; i++) elements += (long long)bt->sizes[i];
    pthread_mutex_unlock(&bt->lock);
    long long delivered = sub_metric(app, "cstream_subscription_delivered_total", topic, group);
    long long observed = sub_metric(app, "cstream_handler_duration_seconds_count", topic, group);
    printf("%lld elements in %lld handler calls: delivered_total %lld, handler_duration_seconds_count %lld\n", elements,
           calls, delivered, observed);
    assert_int_equal(delivered, elements);
    assert_int_equal(observed, calls);
    return delivered;
}

static void auto_batch_retry_is_unsupported_and_lost(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("batch-auto", 1, topic, group, sizeof topic);
    for (int i = 0; i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "x", 1, NULL));
    batches *bt = batches_new();
    cs_sub *s;
    cs_app *app = start_batch_app(topic, group, CS_COMMIT_AUTO, 10, bt, &s);
    CST_OK(cs_test_app_wait_idle(app, 30000));
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.retry_unsupported, 1); /* offset 3, once */
    assert_int_equal(st.delivered, 10);
    assert_int_equal(cst_seen_count(bt->seen, 0, 3), 1); /* not back */
    assert_int_equal(delivered_agrees(app, topic, group, bt), 10);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(bt->seen);
    free(bt);
}

/* ---- one outcome for the whole batch --------------------------------------- */

/* What the next handlers do; each subscription has its own. */
typedef struct plan {
    batches *bt;
    cs_outcome whole;      /* returned for the whole batch, outcomes[] untouched */
    bool retry_first_run;  /* instead: CS_RETRY for a batch on its first attempt, CS_ACK after */
    int64_t unset_offset;  /* forgetful: this offset is left CS_UNSET on its first attempt (-1: none) */
    bool unset_always;     /* forgetful: ... and on every attempt */
    bool hold_unset_retry; /* forgetful: the unset offset's second attempt waits for the gate */
    int64_t delay_offset;  /* forgetful: this offset asks for a retry 10 min later (-1: none) */
    bool reply;            /* forgetful: each element gets a reply carrying its offset */
} plan;

static plan plan_of(batches *bt) { return (plan){.bt = bt, .unset_offset = -1, .delay_offset = -1}; }

/* Records the call, then waits at a gate when asked: the first call with
 * gate_first (first_gate), or the unset offset's second attempt with
 * hold_unset_retry (retry_gate).
 * The wait is bounded, so a failed test cannot hang the stop. */
static void note_call(plan *pl, cs_delivery *const *b, size_t n) {
    batches *bt = pl->bt;
    pthread_mutex_lock(&bt->lock);
    int call = bt->calls++;
    if (call < MAX_CALLS) {
        bt->sizes[call] = n;
        bt->first[call] = cs_delivery_offset(b[0]);
        bt->attempts_of_first[call] = cs_delivery_attempt(b[0]);
    }
    pthread_mutex_unlock(&bt->lock);
    bool held_retry =
        pl->hold_unset_retry && cs_delivery_offset(b[0]) == pl->unset_offset && cs_delivery_attempt(b[0]) == 2;
    cst_gate *gate = call == 0 && bt->gate_first ? &bt->first_gate : held_retry ? &bt->retry_gate : NULL;
    if (gate && !cst_gate_wait(gate, 60000)) fprintf(stderr, "note_call: a gate was not opened within 60 s\n");
    for (size_t i = 0; i < n; i++) cst_seen_add(bt->seen, cs_delivery_partition(b[i]), cs_delivery_offset(b[i]));
}

/* One outcome for all elements; outcomes[] is never written (it stays CS_UNSET). */
static cs_outcome whole_batch(cs_delivery *const *b, size_t n, cs_outcome *outcomes, void *user) {
    (void)outcomes;
    plan *pl = user;
    note_call(pl, b, n);
    if (pl->retry_first_run) return cs_delivery_attempt(b[0]) == 1 ? CS_RETRY : CS_ACK;
    return pl->whole;
}

/* Settles every element by name except the ones the plan says to forget. */
static cs_outcome forgetful(cs_delivery *const *b, size_t n, cs_outcome *outcomes, void *user) {
    plan *pl = user;
    note_call(pl, b, n);
    for (size_t i = 0; i < n; i++) {
        int64_t off = cs_delivery_offset(b[i]);
        if (pl->reply) {
            char v[32];
            int len = snprintf(v, sizeof v, "%lld", (long long)off);
            if (cs_delivery_reply(b[i], NULL, 0, v, (size_t)len) != CS_OK) {
                outcomes[i] = CS_RETRY;
                continue;
            }
        }
        if (off == pl->unset_offset && (pl->unset_always || cs_delivery_attempt(b[i]) == 1))
            continue; /* the bug under test */
        outcomes[i] = off == pl->delay_offset ? cs_delivery_retry_after(b[i], 600000) : CS_ACK;
    }
    return CS_EACH;
}

typedef struct whole_case {
    const char *name;
    plan pl;
    char topic[128], group[160];
    cs_sub *s;
} whole_case;

/* Three subscriptions in one app, each on its own topic of 10 records: the
 * handler acks all, drops all, or retries all (Tracked: once; Auto: always). */
static cs_app *start_whole_cases(whole_case *c, cs_commit_mode mode) {
    cs_app *app = cs_app_new("batch-whole", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    for (int i = 0; i < 3; i++) {
        c[i].pl.bt = batches_new();
        cst_fresh(c[i].name, 1, c[i].topic, c[i].group, sizeof c[i].topic);
        for (int r = 0; r < 10; r++) CST_OK(cs_test_produce(cst_cluster, c[i].topic, 0, NULL, 0, "x", 1, NULL));
        c[i].s = cs_kafka_subscribe_batch(k, c[i].topic, whole_batch, 10, &c[i].pl);
        assert_non_null(c[i].s);
        CST_OK(cs_sub_group(c[i].s, c[i].group));
        CST_OK(cs_sub_commit_mode(c[i].s, mode));
        CST_OK(cs_sub_commit_interval_ms(c[i].s, 20));
    }
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    return app;
}

static void free_whole_cases(whole_case *c) {
    for (int i = 0; i < 3; i++) {
        cst_seen_free(c[i].pl.bt->seen);
        free(c[i].pl.bt);
    }
}

/* Each of offsets 0..9 seen exactly `times` times. */
static void assert_each_seen(batches *bt, int times) {
    for (int64_t o = 0; o < 10; o++) assert_int_equal(cst_seen_count(bt->seen, 0, o), times);
}

static void whole_batch_outcome_tracked(void **state) {
    (void)state;
    whole_case c[3] = {{.name = "batch-all-ack"}, {.name = "batch-all-drop"}, {.name = "batch-all-retry"}};
    for (int i = 0; i < 3; i++) c[i].pl = plan_of(NULL);
    c[0].pl.whole = CS_ACK;
    c[1].pl.whole = CS_DROP;
    c[2].pl.retry_first_run = true;
    cs_app *app = start_whole_cases(c, CS_COMMIT_TRACKED);
    for (int i = 0; i < 3; i++) CST_OK(cs_test_wait_committed(cst_cluster, c[i].group, c[i].topic, 0, 10, 30000));
    cs_sub_stats st[3];
    for (int i = 0; i < 3; i++) cs_sub_stats_get(c[i].s, &st[i]);
    assert_int_equal(st[0].acked, 10);
    assert_int_equal(st[0].dropped + st[0].retried, 0);
    assert_each_seen(c[0].pl.bt, 1);
    assert_int_equal(st[1].dropped, 10);
    assert_int_equal(st[1].acked + st[1].retried, 0);
    assert_each_seen(c[1].pl.bt, 1);
    /* Retry all: every element came back once, alone, and was acked then. */
    assert_int_equal(st[2].retried, 10);
    assert_int_equal(st[2].acked, 10);
    assert_each_seen(c[2].pl.bt, 2);
    batches *bt = c[2].pl.bt;
    pthread_mutex_lock(&bt->lock);
    int second_runs = 0;
    for (int i = 0; i < bt->calls; i++)
        if (bt->attempts_of_first[i] == 2) {
            assert_int_equal(bt->sizes[i], 1);
            second_runs++;
        }
    pthread_mutex_unlock(&bt->lock);
    assert_int_equal(second_runs, 10);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    free_whole_cases(c);
}

static void whole_batch_outcome_auto(void **state) {
    (void)state;
    whole_case c[3] = {{.name = "batch-auto-ack"}, {.name = "batch-auto-drop"}, {.name = "batch-auto-retry"}};
    for (int i = 0; i < 3; i++) c[i].pl = plan_of(NULL);
    c[0].pl.whole = CS_ACK;
    c[1].pl.whole = CS_DROP;
    c[2].pl.whole = CS_RETRY;
    cs_app *app = start_whole_cases(c, CS_COMMIT_AUTO);
    CST_OK(cs_test_app_wait_idle(app, 30000));
    cs_sub_stats st[3];
    for (int i = 0; i < 3; i++) cs_sub_stats_get(c[i].s, &st[i]);
    assert_int_equal(st[0].acked, 10);
    assert_int_equal(st[0].dropped + st[0].retry_unsupported, 0);
    assert_int_equal(st[1].dropped, 10);
    assert_int_equal(st[1].acked + st[1].retry_unsupported, 0);
    assert_int_equal(st[2].retry_unsupported, 10); /* reported, and none comes back */
    assert_int_equal(st[2].acked + st[2].dropped + st[2].retried, 0);
    for (int i = 0; i < 3; i++) assert_each_seen(c[i].pl.bt, 1);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    free_whole_cases(c);
}

/* ---- an element nobody settled --------------------------------------------- */

/* acked_set: cs_sub_acked_set (Tracked; on by default). */
static cs_app *start_forgetful(const char *topic, const char *group, cs_commit_mode mode, plan *pl, int acked_set,
                               cs_sub **out) {
    cs_app *app = cs_app_new("batch-unset", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe_batch(k, topic, forgetful, 10, pl);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, mode));
    if (mode == CS_COMMIT_TRACKED) CST_OK(cs_sub_acked_set(s, acked_set));
    CST_OK(cs_sub_commit_interval_ms(s, 20));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *out = s;
    return app;
}

/* Offsets 1..9 in one batch behind a first call (offset 0) that waits at the
 * gate while they are produced and fetched (as in the mixed test). */
static void feed_one_then_nine(const char *topic, cs_sub *s, batches *bt) {
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "line", 4, NULL));
    assert_true(cst_wait(one_call, bt, 30000));
    for (int i = 1; i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "line", 4, NULL));
    cst_fetched f = {s, 10};
    assert_true(cst_wait(cst_fetched_to_end, &f, 30000));
    cst_gate_open(&bt->first_gate);
}

#define UNSET_LINE "batch handler left an element unset"

/* The ERROR line about the unset offset 3 of topic: there, an ERROR, with
 * the commit mode in its commit= field. */
static void check_unset_line(const char *log, const char *topic, const char *mode) {
    char line[1024], want[256];
    if (!cst_log_line(log, UNSET_LINE, line, sizeof line))
        fail_msg("no \"%s\" line\n--- captured:\n%s", UNSET_LINE, log);
    printf("%s\n", line);
    if (!strstr(line, "ERROR")) fail_msg("the unset line is not an ERROR:\n%s", line);
    snprintf(want, sizeof want, " topic=%s partition=0 offset=3 ", topic);
    if (!strstr(line, want)) fail_msg("the unset line lacks%s:\n%s", want, line);
    snprintf(want, sizeof want, " commit=%s ", mode);
    if (!strstr(line, want)) fail_msg("the unset line lacks%s:\n%s", want, line);
}

static void unset_element_tracked_comes_back_alone(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("batch-unset", 1, topic, group, sizeof topic);
    batches *bt = batches_new();
    bt->gate_first = true;
    plan pl = plan_of(bt);
    pl.unset_offset = 3;
    cst_capture cap;
    cst_capture_start(&cap);
    cs_sub *s;
    cs_app *app = start_forgetful(topic, group, CS_COMMIT_TRACKED, &pl, 1, &s);
    feed_one_then_nine(topic, s, bt);
    cs_err committed = cs_test_wait_committed(cst_cluster, group, topic, 0, 10, 30000);
    char *log = cst_capture_stop(&cap);
    CST_OK(committed);
    check_unset_line(log, topic, "tracked");
    free(log);
    pthread_mutex_lock(&bt->lock);
    assert_int_equal(bt->calls, 3);
    assert_int_equal(bt->sizes[1], 9); /* 3 was unset in a batch of nine */
    assert_int_equal(bt->first[2], 3); /* and came back alone */
    assert_int_equal(bt->sizes[2], 1);
    assert_int_equal(bt->attempts_of_first[2], 2);
    pthread_mutex_unlock(&bt->lock);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.retried, 1);
    assert_int_equal(st.acked, 10); /* 3 on its second attempt, not on the one that forgot it */
    assert_int_equal(delivered_agrees(app, topic, group, bt), 11); /* in 3 calls */
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(bt->seen);
    free(bt);
}

static void unset_element_auto_is_unsupported(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("batch-unset-auto", 1, topic, group, sizeof topic);
    for (int i = 0; i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "x", 1, NULL));
    batches *bt = batches_new();
    plan pl = plan_of(bt);
    pl.unset_offset = 3;
    cst_capture cap;
    cst_capture_start(&cap);
    cs_sub *s;
    cs_app *app = start_forgetful(topic, group, CS_COMMIT_AUTO, &pl, 1, &s);
    cs_err idle = cs_test_app_wait_idle(app, 30000);
    char *log = cst_capture_stop(&cap);
    if (idle) fail_msg("not idle within 30 s: %s\n--- captured:\n%s", cs_errmsg(), log);
    check_unset_line(log, topic, "auto");
    free(log);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.retry_unsupported, 1); /* offset 3 */
    assert_int_equal(st.acked, 9);
    assert_int_equal(st.delivered, 10);
    assert_int_equal(cst_seen_count(bt->seen, 0, 3), 1); /* not redelivered */
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(bt->seen);
    free(bt);
}

/* An element forgotten on every attempt counts its attempts: max_attempts
 * ends it, with the reason cstream gave it. */
static void unset_element_reaches_max_attempts(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("batch-unset-cap", 1, topic, group, sizeof topic);
    for (int i = 0; i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "x", 1, NULL));
    batches *bt = batches_new();
    plan pl = plan_of(bt);
    pl.unset_offset = 3;
    pl.unset_always = true;
    cst_capture cap;
    cst_capture_start(&cap);
    cs_app *app = cs_app_new("batch-unset-cap", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe_batch(k, topic, forgetful, 10, &pl);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_commit_interval_ms(s, 20));
    CST_OK(cs_sub_max_attempts(s, 2));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    cs_err committed = cs_test_wait_committed(cst_cluster, group, topic, 0, 10, 30000);
    char *log = cst_capture_stop(&cap);
    CST_OK(committed);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.exhausted, 1); /* offset 3, after its second attempt */
    assert_int_equal(st.retried, 1);
    assert_int_equal(st.acked, 9);
    assert_int_equal(cst_seen_count(bt->seen, 0, 3), 2);
    char want[256];
    snprintf(want, sizeof want,
             "topic=%s partition=0 offset=3 attempts=2 reason=\"batch handler left the outcome unset\"", topic);
    assert_non_null(strstr(log, want));
    free(log);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(bt->seen);
    free(bt);
}

static bool window_aborted(void *arg) {
    cs_sub_stats st;
    cs_sub_stats_get(arg, &st);
    return st.aborts >= 1;
}

static bool ten_outputs(void *arg) {
    cs_sub_stats st;
    cs_sub_stats_get(arg, &st);
    return st.outputs >= 10;
}

static void count_offset(const void *value, size_t len, void *arg) {
    char text[32];
    if (len >= sizeof text) len = sizeof text - 1;
    memcpy(text, value, len);
    text[len] = '\0';
    cst_seen_add(arg, 0, atoll(text));
}

/* Offset 3 is left unset on its first attempt, and its second attempt waits:
 * the unset element holds the window as a retry does, until the stall timeout
 * aborts it; the partition is then read again and every output is committed
 * exactly once. Were the element acked, nothing would ever abort. */
static void unset_element_transactional_holds_window(void **state) {
    (void)state;
    char topic[128], group[160], out[128];
    cst_fresh("batch-unset-txn", 1, topic, group, sizeof topic);
    cst_fresh("batch-unset-txn-out", 1, out, NULL, sizeof out);
    batches *bt = batches_new();
    bt->gate_first = true;
    plan pl = plan_of(bt);
    pl.unset_offset = 3;
    pl.hold_unset_retry = true;
    pl.reply = true;
    cs_app *app = cs_app_new("batch-unset-txn", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_instance_id(k, group));
    CST_OK(cs_kafka_topic(k, out, 1));
    cs_sub *s = cs_kafka_subscribe_batch(k, topic, forgetful, 10, &pl);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRANSACTIONAL));
    CST_OK(cs_sub_commit_interval_ms(s, 20));
    CST_OK(cs_sub_stall_timeout_ms(s, 1000));
    CST_OK(cs_sub_reply(s, out, 5000));
    CST_OK(cs_app_add_kafka(app, k));
    cst_capture cap;
    cst_capture_start(&cap);
    cs_err started = cs_app_start(app);
    if (started) {
        char *log = cst_capture_stop(&cap);
        fail_msg("start: %s\n--- captured:\n%s", cs_errmsg(), log);
    }
    /* The capture ends before anything is asserted (a failure would land in it). */
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "line", 4, NULL));
    bool called = cst_wait(one_call, bt, 30000);
    for (int i = 1; called && i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "line", 4, NULL));
    cst_fetched f = {s, 10};
    bool all_fetched = called && cst_wait(cst_fetched_to_end, &f, 30000);
    cst_gate_open(&bt->first_gate); /* 3 is unset in a batch with 4..9, which settle */
    bool aborted = all_fetched && cst_wait(window_aborted, s, 30000);
    char *log = cst_capture_stop(&cap);
    if (!called || !all_fetched || !aborted)
        fail_msg("%s\n--- captured:\n%s",
                 !called        ? "no handler call within 30 s"
                 : !all_fetched ? "offsets 1..9 not fetched within 30 s"
                                : "no aborted window within 30 s",
                 log);
    check_unset_line(log, topic, "transactional");
    free(log);
    cst_gate_open(&bt->retry_gate); /* the held second attempt is stale by now */
    assert_true(cst_wait(ten_outputs, s, 60000));
    CST_OK(cs_app_stop(app));
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    printf("aborts %llu, transactions %llu, runs of 3/4: %d %d\n", (unsigned long long)st.aborts,
           (unsigned long long)st.transactions, cst_seen_count(bt->seen, 0, 3), cst_seen_count(bt->seen, 0, 4));
    assert_int_equal(st.outputs, 10);
    assert_true(cst_seen_count(bt->seen, 0, 3) >= 3); /* unset, held (then stale), read again */
    assert_true(cst_seen_count(bt->seen, 0, 4) >= 2); /* acked behind it: in the aborted window, then again */
    cst_seen *outputs = cst_seen_new(1, 64);
    assert_int_equal(cst_read_committed(out, 1, count_offset, outputs, 60000), 10);
    for (int64_t o = 0; o < 10; o++) assert_int_equal(cst_seen_count(outputs, 0, o), 1);
    cst_seen_free(outputs);
    cs_app_destroy(app);
    cst_seen_free(bt->seen);
    free(bt);
}

/* ---- a crash with acked elements behind a retried one ---------------------- */

typedef struct acked_arg {
    cs_sub *s;
    uint64_t n;
} acked_arg;

static bool acked_at_least(void *arg) {
    acked_arg *a = arg;
    cs_sub_stats st;
    cs_sub_stats_get(a->s, &st);
    return st.acked >= a->n;
}

/* Offset 3, in a batch with 1..9, asks for a retry far in the future; 4..9 are
 * acked. The process crashes (nothing is committed on the way out): the next
 * member of the group reads 3..9 again. 4..9 are duplicates; nothing is lost. */
static void acked_behind_retry_read_again_after_crash(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("batch-crash", 1, topic, group, sizeof topic);
    batches *before = batches_new();
    before->gate_first = true;
    plan pl = plan_of(before);
    pl.delay_offset = 3;
    cs_sub *s;
    /* Without the acked set (cs_sub_acked_set, tests/kafka/test_tracked.c
     * covers it): every element acked behind the open retry is read again. */
    cs_app *app = start_forgetful(topic, group, CS_COMMIT_TRACKED, &pl, 0, &s);
    feed_one_then_nine(topic, s, before);
    acked_arg a = {s, 9}; /* 0-2 and 4-9 */
    assert_true(cst_wait(acked_at_least, &a, 30000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 3, 10000));
    int64_t committed;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(committed, 3); /* in front of the open retry, though 4..9 are acked */
    pthread_mutex_lock(&before->lock);
    assert_int_equal(before->sizes[1], 9); /* 3 and the acked 4..9 were one batch */
    assert_int_equal(before->first[1], 1);
    pthread_mutex_unlock(&before->lock);
    cs_test_app_crash(app);

    batches *after = batches_new();
    plan pl2 = plan_of(after);
    app = start_forgetful(topic, group, CS_COMMIT_TRACKED, &pl2, 0, &s);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 10, 60000));
    CST_OK(cs_app_stop(app));
    int lost = 0, duplicated = 0;
    for (int64_t o = 0; o < 10; o++) {
        bool acked_before = cst_seen_count(before->seen, 0, o) > 0 && o != 3; /* 3 only asked for a retry */
        int n = cst_seen_count(after->seen, 0, o);                            /* all acked */
        lost += !acked_before && n == 0;
        duplicated += acked_before && n > 0;
        assert_int_equal(n, o < 3 ? 0 : 1); /* below the committed position: not read again */
    }
    printf("after the crash: lost %d, acked elements read again %d\n", lost, duplicated);
    assert_int_equal(lost, 0);
    assert_int_equal(duplicated, 6); /* 4..9 */
    cs_app_destroy(app);
    cst_seen_free(before->seen);
    free(before);
    cst_seen_free(after->seen);
    free(after);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mixed_batch_retried_element_comes_back_alone),
        cmocka_unit_test(batches_never_exceed_n_and_never_wait),
        cmocka_unit_test(auto_batch_retry_is_unsupported_and_lost),
        cmocka_unit_test(whole_batch_outcome_tracked),
        cmocka_unit_test(whole_batch_outcome_auto),
        cmocka_unit_test(unset_element_tracked_comes_back_alone),
        cmocka_unit_test(unset_element_auto_is_unsupported),
        cmocka_unit_test(unset_element_reaches_max_attempts),
        cmocka_unit_test(unset_element_transactional_holds_window),
        cmocka_unit_test(acked_behind_retry_read_again_after_crash),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
