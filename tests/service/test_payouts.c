/* test_payouts.c — the payouts service's own tests, written the way a service
 * author tests with cstream: the app runs in-process on the test cluster, and
 * the bank and the analytics store are replaced by clients that fail once.
 * The payout comes back under Tracked and is paid (its Paid reply lands on
 * payouts.done); the page view does not come back under Auto. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "cstest.h"
#include "service.h"

static bool fail_first_call(flaky *f, void *arg) {
    (void)arg;
    return f->calls == 1;
}

static void test_timings(cs_kafka *k) {
    cs_kafka_config(k, "session.timeout.ms", "6000");
    cs_kafka_config(k, "fetch.wait.max.ms", "10");
    cs_kafka_config(k, "auto.commit.interval.ms", "100");
}

/* Paid replies seen on payouts.done. */
typedef struct replies {
    pthread_mutex_t lock;
    char last[64];
    int n;
} replies;

static cs_outcome collect_reply(cs_delivery *d, void *user) {
    replies *r = user;
    size_t len;
    const char *v = cs_delivery_value(d, &len);
    pthread_mutex_lock(&r->lock);
    snprintf(r->last, sizeof r->last, "%.*s", (int)len, v ? v : "");
    r->n++;
    pthread_mutex_unlock(&r->lock);
    return CS_ACK;
}

/* The service with its own topics and groups (a fresh prefix per test), on
 * this test's cluster. */
static void new_service(clients *cl, payouts_service *svc) {
    char prefix[96];
    cs_test_unique_name(prefix, sizeof prefix, "svc");
    strcat(prefix, "-");
    payouts_options opt = {.brokers = cs_test_cluster_brokers(cst_cluster), .clients = cl, .tune = test_timings,
                           .prefix = prefix};
    CST_OK(payouts_service_new(&opt, svc));
    CST_OK(cs_test_topic_create(cst_cluster, svc->names.payouts, 4));
    CST_OK(cs_test_topic_create(cst_cluster, svc->names.payouts_done, 4));
    CST_OK(cs_test_topic_create(cst_cluster, svc->names.payouts_dlq, 1));
    CST_OK(cs_test_topic_create(cst_cluster, svc->names.page_views, 4));
    CST_OK(cs_test_topic_create(cst_cluster, svc->names.statements, 4));
}

static void publish(cs_kafka *k, const char *topic, const char *value) {
    cs_record r = {.topic = topic, .partition = -1, .key = "1", .key_len = 1, .value = value, .value_len = strlen(value)};
    CST_OK(cs_publish(k, &r, NULL));
}

typedef struct svc_wait {
    payouts_service *svc;
    clients *cl;
} svc_wait;

static bool payout_paid(void *arg) {
    svc_wait *w = arg;
    return bank_paid(&w->cl->bank) == 1;
}

static bool view_handled(void *arg) {
    svc_wait *w = arg;
    cs_sub_stats st;
    cs_sub_stats_get(w->svc->count_view, &st);
    return st.delivered >= 1;
}

static void payout_comes_back_and_is_paid_view_does_not(void **state) {
    (void)state;
    clients cl;
    payouts_service svc;
    new_service(&cl, &svc);

    /* A reader of payouts.done, in the same app. */
    replies rep = {.lock = PTHREAD_MUTEX_INITIALIZER};
    cs_sub *done = cs_kafka_subscribe(svc.kafka, svc.names.payouts_done, collect_reply, &rep);
    CST_OK(cs_sub_group(done, "payouts-test-reader"));
    CST_OK(cs_app_start(svc.app));
    /* The start-up hook built the clients; now make them fail once. */
    pthread_mutex_lock(&cl.bank.flaky.lock);
    cl.bank.flaky.should_fail = fail_first_call;
    pthread_mutex_unlock(&cl.bank.flaky.lock);
    pthread_mutex_lock(&cl.counters.flaky.lock);
    cl.counters.flaky.should_fail = fail_first_call;
    pthread_mutex_unlock(&cl.counters.flaky.lock);

    publish(svc.kafka, svc.names.payouts, "{\"id\":7,\"amount_cents\":1250}");
    publish(svc.kafka, svc.names.page_views, "{\"page\":\"/pricing\"}");
    svc_wait w = {&svc, &cl};
    assert_true(cst_wait(payout_paid, &w, 30000));
    assert_true(cst_wait(view_handled, &w, 30000));
    CST_OK(cs_test_app_wait_idle(svc.app, 30000));

    cs_sub_stats pay, view;
    cs_sub_stats_get(svc.pay_out, &pay);
    cs_sub_stats_get(svc.count_view, &view);
    assert_int_equal(pay.delivered, 2); /* failed once, came back, paid */
    assert_int_equal(pay.retried, 1);
    assert_int_equal(pay.acked, 1);
    assert_int_equal(view.delivered, 1); /* failed once, did not come back */
    assert_int_equal(view.retry_unsupported, 1);
    assert_int_equal(counters_counted(&cl.counters), 0);
    pthread_mutex_lock(&rep.lock);
    assert_int_equal(rep.n, 1);
    assert_string_equal(rep.last, "{\"payout_id\":7}");
    pthread_mutex_unlock(&rep.lock);
    CST_OK(cs_app_stop(svc.app));
    assert_int_equal(cs_kafka_unflushed_records(svc.kafka), 0);
    cs_app_destroy(svc.app);
}

typedef struct line_wait {
    payouts_service *svc;
    uint64_t n;
} line_wait;

static bool lines_settled(void *arg) {
    line_wait *w = arg;
    cs_sub_stats st;
    cs_sub_stats_get(w->svc->reconcile, &st);
    return st.acked + st.dropped >= w->n;
}

static bool payouts_settled(void *arg) {
    line_wait *w = arg;
    cs_sub_stats st;
    cs_sub_stats_get(w->svc->pay_out, &st);
    return st.acked + st.dropped >= w->n; /* undecodable records count as dropped */
}

/* Statement lines in batches: the empty one is dropped, the others matched;
 * a payout that does not decode never reaches pay_out, is counted and dropped,
 * and the zero payout is dropped by the handler. */
static void reconcile_and_bad_input(void **state) {
    (void)state;
    clients cl;
    payouts_service svc;
    new_service(&cl, &svc);
    CST_OK(cs_app_start(svc.app));
    publish(svc.kafka, svc.names.statements, "{\"payout_id\":1,\"amount_cents\":100}");
    publish(svc.kafka, svc.names.statements, "{\"payout_id\":2,\"amount_cents\":0}");
    publish(svc.kafka, svc.names.statements, "{\"payout_id\":3,\"amount_cents\":300}");
    publish(svc.kafka, svc.names.payouts, "{\"id\":\"seven\"}");          /* wrong type */
    publish(svc.kafka, svc.names.payouts, "{\"id\":8,\"amount_cents\":0}"); /* zero: dropped */
    cs_record tombstone = {.topic = svc.names.payouts, .partition = -1, .key = "9", .key_len = 1};
    CST_OK(cs_publish(svc.kafka, &tombstone, NULL));
    line_wait lines = {&svc, 3}, pays = {&svc, 3};
    assert_true(cst_wait(lines_settled, &lines, 30000));
    assert_true(cst_wait(payouts_settled, &pays, 30000));
    cs_sub_stats rec, pay;
    cs_sub_stats_get(svc.reconcile, &rec);
    cs_sub_stats_get(svc.pay_out, &pay);
    assert_int_equal(rec.acked, 2);
    assert_int_equal(rec.dropped, 1);
    assert_int_equal(ledger_matched(&cl.ledger), 2);
    assert_int_equal(pay.decode_failures, 2); /* the wrong type and the tombstone */
    assert_int_equal(pay.dead_lettered, 2);   /* Tracked with a dead-letter topic: they go there */
    assert_int_equal(pay.dropped, 1 + 2);     /* the zero payout, and both dead-lettered ones (settled) */
    assert_int_equal(pay.delivered, 1);       /* only the zero payout reached the handler */
    assert_int_equal(bank_paid(&cl.bank), 0);
    CST_OK(cs_app_stop(svc.app));
    cs_app_destroy(svc.app);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(payout_comes_back_and_is_paid_view_does_not),
        cmocka_unit_test(reconcile_and_bad_input),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
