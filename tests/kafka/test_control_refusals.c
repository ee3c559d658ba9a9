/* test_control_refusals.c — the seeks and pauses that would wait for a fetch
 * thread which cannot serve them are refused at once with CS_ERR_STATE: from
 * any subscription's assign hook (a fetch thread; two hooks seeking each
 * other's subscription would deadlock), from a handler while a revoke drains
 * (the drain waits for that handler), and while CSTREAM_TXN_BARRIER=1 holds
 * handlers at the window gate. Runs on the embedded cluster and, as
 * real.kafka.control_refusals, on the real broker. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cstest.h"

/* What the handler of offset 0 does. */
typedef enum { DO_NOTHING, SEEK_WHEN_REVOKING, PAUSE } handler_does;

typedef struct svc {
    handler_does does;
    cs_sub *self;               /* the subscription this svc serves */
    cs_sub *other;              /* the assign hook pauses this subscription (NULL: nothing) */
    _Atomic int hook_result;    /* what that returned, -1 not called */
    char hook_message[512];     /* its message (written before hook_result) */
    _Atomic bool revoking;      /* the revoke hook ran */
    _Atomic int handler_result; /* what the handler's call returned, -1 not called */
    char handler_message[512];  /* its message (written before handler_result) */
} svc;

static cs_outcome handle(cs_delivery *d, void *user) {
    svc *v = user;
    if (cs_delivery_offset(d) != 0 || v->does == DO_NOTHING || atomic_load(&v->handler_result) >= 0) return CS_ACK;
    if (v->does == SEEK_WHEN_REVOKING) {
        /* Held until the revoke started: its drain now waits for this handler. */
        int64_t deadline = cst_now_ms() + 60000;
        while (!atomic_load(&v->revoking) && cst_now_ms() < deadline) {
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    cs_err err = v->does == PAUSE ? cs_sub_pause(v->self)
                                  : cs_sub_seek(v->self, cs_delivery_topic(d), cs_delivery_partition(d), 0);
    snprintf(v->handler_message, sizeof v->handler_message, "%s", cs_errmsg());
    atomic_store(&v->handler_result, (int)err);
    return CS_ACK;
}

static void on_assign(cs_sub *s, const char *topic, const int32_t *parts, size_t n, void *user) {
    (void)s, (void)topic, (void)parts;
    svc *v = user;
    if (!v->other || n == 0 || atomic_load(&v->hook_result) >= 0) return;
    cs_err err = cs_sub_pause(v->other);
    snprintf(v->hook_message, sizeof v->hook_message, "%s", cs_errmsg());
    atomic_store(&v->hook_result, (int)err);
}

static void on_revoke(cs_sub *s, const char *topic, const int32_t *parts, size_t n, void *user) {
    (void)s, (void)topic, (void)parts, (void)n;
    atomic_store(&((svc *)user)->revoking, true);
}

static svc *svc_new(void) {
    svc *v = calloc(1, sizeof *v);
    atomic_store(&v->hook_result, -1);
    atomic_store(&v->handler_result, -1);
    return v;
}

static cs_app *start(const char *topic, const char *group, cs_commit_mode mode, svc *v, cs_sub **out) {
    cs_app *app = cs_app_new("refusals", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, handle, v);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, mode));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_sub_drain_timeout_ms(s, 30000)); /* a refusal that waited would wait this long */
    CST_OK(cs_sub_on_assign(s, on_assign, v));
    CST_OK(cs_sub_on_revoke(s, on_revoke, v));
    v->self = s;
    if (mode == CS_COMMIT_TRANSACTIONAL) CST_OK(cs_kafka_instance_id(k, "refusals-0"));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *out = s;
    return app;
}

static bool result_set(void *arg) { return atomic_load((_Atomic int *)arg) >= 0; }

/* B's assign hook pauses A, another running subscription: refused (a fetch
 * thread), where it used to wait for A's fetch thread. */
static void hook_refused_for_other_subscription(void **state) {
    (void)state;
    char ta[128], ga[160], tb[128], gb[160];
    cst_fresh("refuse-hook-a", 1, ta, ga, sizeof ta);
    cst_fresh("refuse-hook-b", 1, tb, gb, sizeof tb);
    svc *a = svc_new(), *b = svc_new();
    cs_sub *sa, *sb;
    cs_app *app_a = start(ta, ga, CS_COMMIT_TRACKED, a, &sa);
    CST_OK(cs_test_app_wait_idle(app_a, 60000));
    b->other = sa;
    cs_app *app_b = start(tb, gb, CS_COMMIT_TRACKED, b, &sb);
    assert_true(cst_wait(result_set, &b->hook_result, 60000));
    assert_int_equal(atomic_load(&b->hook_result), CS_ERR_STATE);
    if (!strstr(b->hook_message, "assign or revoke hook")) fail_msg("message: %s", b->hook_message);
    CST_OK(cs_app_stop(app_b));
    cs_app_destroy(app_b);
    CST_OK(cs_app_stop(app_a));
    cs_app_destroy(app_a);
    free(a);
    free(b);
}

/* A handler seeks while its partition's revoke drains (a second member
 * joined): refused at once, "a rebalance is in progress", rather than
 * waiting out the drain for itself. */
static void handler_refused_during_revoke(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("refuse-revoke", 1, topic, group, sizeof topic);
    svc *a = svc_new(), *b = svc_new();
    a->does = SEEK_WHEN_REVOKING;
    cs_sub *sa, *sb;
    cs_app *app_a = start(topic, group, CS_COMMIT_TRACKED, a, &sa);
    CST_OK(cs_test_app_wait_idle(app_a, 60000));
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "x", 1, NULL));
    cs_app *app_b = start(topic, group, CS_COMMIT_TRACKED, b, &sb); /* A's revoke starts */
    assert_true(cst_wait(result_set, &a->handler_result, 60000));
    assert_int_equal(atomic_load(&a->handler_result), CS_ERR_STATE);
    if (!strstr(a->handler_message, "rebalance is in progress")) fail_msg("message: %s", a->handler_message);
    CST_OK(cs_app_stop(app_b));
    cs_app_destroy(app_b);
    CST_OK(cs_app_stop(app_a));
    cs_app_destroy(app_a);
    free(a);
    free(b);
}

/* CSTREAM_TXN_BARRIER=1: a handler's pause is refused (the window's close
 * waits for the handler, the handler would wait for the fetch thread). */
static void refused_under_txn_barrier(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("refuse-barrier", 1, topic, group, sizeof topic);
    svc *v = svc_new();
    v->does = PAUSE;
    cs_sub *s;
    setenv("CSTREAM_TXN_BARRIER", "1", 1);
    cs_app *app = start(topic, group, CS_COMMIT_TRANSACTIONAL, v, &s);
    unsetenv("CSTREAM_TXN_BARRIER"); /* read once, at the subscription's start */
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "x", 1, NULL));
    assert_true(cst_wait(result_set, &v->handler_result, 60000));
    assert_int_equal(atomic_load(&v->handler_result), CS_ERR_STATE);
    if (!strstr(v->handler_message, "CSTREAM_TXN_BARRIER")) fail_msg("message: %s", v->handler_message);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    free(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hook_refused_for_other_subscription),
        cmocka_unit_test(handler_refused_during_revoke),
        cmocka_unit_test(refused_under_txn_barrier),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
