/* test_payouts.c — the payouts service's own tests, written the way a service
 * author tests with cstream: the app runs in-process on the test cluster, and
 * the bank and the analytics store are replaced by clients that fail once.
 * The payout comes back under Tracked and is paid (its Paid reply lands on
 * payouts.done); the page view does not come back under Auto. Dead letters
 * are read back from payouts.dlq with a plain librdkafka consumer
 * (cst_read_records): the original key and value, and every provenance
 * header naming where the record came from and why it was given up. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "cstest.h"
#include "cstream/rdkafka.h"
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
    payouts_options opt = {
        .brokers = cs_test_cluster_brokers(cst_cluster), .clients = cl, .tune = test_timings, .prefix = prefix};
    CST_OK(payouts_service_new(&opt, svc));
    CST_OK(cs_test_topic_create(cst_cluster, svc->names.payouts, 4));
    CST_OK(cs_test_topic_create(cst_cluster, svc->names.payouts_done, 4));
    CST_OK(cs_test_topic_create(cst_cluster, svc->names.payouts_dlq, 1));
    CST_OK(cs_test_topic_create(cst_cluster, svc->names.page_views, 4));
    CST_OK(cs_test_topic_create(cst_cluster, svc->names.statements, 4));
}

static void publish(cs_kafka *k, const char *topic, const char *value) {
    cs_record r = {
        .topic = topic, .partition = -1, .key = "1", .key_len = 1, .value = value, .value_len = strlen(value)};
    CST_OK(cs_publish(k, &r, NULL));
}

static cs_published publish_keyed(cs_kafka *k, const char *topic, const char *key, const char *value) {
    cs_record r = {.topic = topic,
                   .partition = -1,
                   .key = key,
                   .key_len = strlen(key),
                   .value = value,
                   .value_len = value ? strlen(value) : 0};
    cs_published where;
    CST_OK(cs_publish(k, &r, &where));
    return where;
}

/* ---- payouts.dlq read back ----------------------------------------------------- */

enum { MAX_DEAD = 8 };

/* One record as a plain consumer sees it: on payouts.dlq its headers, on
 * payouts (the source) its position and CreateTime. */
typedef struct seen_record {
    int32_t partition;
    int64_t offset, timestamp;
    char key[32], value[128];
    bool null_value;
    char topic[128], src_partition[16], src_offset[24], src_timestamp[24], group[128], attempts[8], reason[256];
    int n_dlq_headers; /* how many of the 7 provenance headers it has */
} seen_record;

typedef struct seen_records {
    seen_record r[MAX_DEAD];
    int n;
} seen_records;

static void keep_record(const rd_kafka_message_t *m, void *arg) {
    seen_records *s = arg;
    if (s->n == MAX_DEAD) fail_msg("more than %d records where at most %d were expected", MAX_DEAD, MAX_DEAD);
    seen_record *r = &s->r[s->n++];
    memset(r, 0, sizeof *r);
    r->partition = m->partition;
    r->offset = m->offset;
    r->timestamp = rd_kafka_message_timestamp(m, NULL);
    snprintf(r->key, sizeof r->key, "%.*s", (int)m->key_len, m->key ? (const char *)m->key : "");
    r->null_value = m->payload == NULL;
    snprintf(r->value, sizeof r->value, "%.*s", (int)m->len, m->payload ? (const char *)m->payload : "");
    struct {
        const char *name;
        char *into;
        size_t size;
    } h[] = {{"cstream.dlq.topic", r->topic, sizeof r->topic},
             {"cstream.dlq.partition", r->src_partition, sizeof r->src_partition},
             {"cstream.dlq.offset", r->src_offset, sizeof r->src_offset},
             {"cstream.dlq.timestamp", r->src_timestamp, sizeof r->src_timestamp},
             {"cstream.dlq.group", r->group, sizeof r->group},
             {"cstream.dlq.attempts", r->attempts, sizeof r->attempts},
             {"cstream.dlq.reason", r->reason, sizeof r->reason}};
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
        if (cst_header(m, h[i].name, h[i].into, h[i].size)) r->n_dlq_headers++;
}

static const seen_record *dead_letter_of(const seen_records *dlq, cs_published src) {
    char partition[16], offset[24];
    snprintf(partition, sizeof partition, "%d", (int)src.partition);
    snprintf(offset, sizeof offset, "%lld", (long long)src.offset);
    for (int i = 0; i < dlq->n; i++)
        if (!strcmp(dlq->r[i].src_partition, partition) && !strcmp(dlq->r[i].src_offset, offset)) return &dlq->r[i];
    fail_msg("no record on the dead-letter topic has cstream.dlq.partition=%s cstream.dlq.offset=%s", partition,
             offset);
    return NULL;
}

static int64_t source_timestamp(const seen_records *src, cs_published at) {
    for (int i = 0; i < src->n; i++)
        if (src->r[i].partition == at.partition && src->r[i].offset == at.offset) return src->r[i].timestamp;
    fail_msg("the source record %d/%lld was not read back", (int)at.partition, (long long)at.offset);
    return -1;
}

/* The dead letter of the record published at `src`: its key and value, and
 * provenance headers naming the source topic, partition, offset, CreateTime,
 * the service's group, the handler runs and the reason. */
static void check_dead_letter(const payouts_service *svc, const seen_records *dlq, const seen_records *sources,
                              cs_published src, const char *key, const char *value, const char *attempts,
                              const char *reason_prefix) {
    const seen_record *d = dead_letter_of(dlq, src);
    assert_int_equal(d->n_dlq_headers, 7);
    assert_string_equal(d->key, key);
    if (value) {
        assert_false(d->null_value);
        assert_string_equal(d->value, value);
    } else {
        assert_true(d->null_value); /* a tombstone stays a tombstone */
    }
    assert_string_equal(d->topic, svc->names.payouts);
    char ts[24];
    snprintf(ts, sizeof ts, "%lld", (long long)source_timestamp(sources, src));
    assert_string_equal(d->src_timestamp, ts);
    assert_string_equal(d->group, svc->names.group);
    assert_string_equal(d->attempts, attempts);
    if (strncmp(d->reason, reason_prefix, strlen(reason_prefix)))
        fail_msg("cstream.dlq.reason is \"%s\", expected it to start with \"%s\"", d->reason, reason_prefix);
}

static void read_back(const payouts_service *svc, seen_records *dlq, seen_records *sources) {
    memset(dlq, 0, sizeof *dlq);
    memset(sources, 0, sizeof *sources);
    assert_true(cst_read_records(svc->names.payouts_dlq, 1, keep_record, dlq, 30000) >= 0);
    assert_true(cst_read_records(svc->names.payouts, 4, keep_record, sources, 30000) >= 0);
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
    cs_published wrong = publish_keyed(svc.kafka, svc.names.payouts, "1", "{\"id\":\"seven\"}"); /* wrong type */
    publish(svc.kafka, svc.names.payouts, "{\"id\":8,\"amount_cents\":0}");                      /* zero: dropped */
    cs_published tomb = publish_keyed(svc.kafka, svc.names.payouts, "9", NULL);
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

    /* What payouts.dlq holds: the two records that did not decode, as they
     * were, and why. The handler never ran for them: 0 attempts. */
    seen_records dlq, sources;
    read_back(&svc, &dlq, &sources);
    assert_int_equal(dlq.n, 2);
    check_dead_letter(&svc, &dlq, &sources, wrong, "1", "{\"id\":\"seven\"}", "0", "does not decode as payout: ");
    check_dead_letter(&svc, &dlq, &sources, tomb, "9", NULL, "0", "does not decode as payout: ");
}

static bool payout_settled(void *arg) {
    payouts_service *svc = arg;
    cs_sub_stats st;
    cs_sub_stats_get(svc->pay_out, &st);
    return st.dropped >= 1;
}

/* A payout above the bank's limit is refused on every attempt: after the 5th
 * it goes to payouts.dlq with the handler's reason, and is paid never. */
static void payout_above_the_limit_is_dead_lettered_after_5_attempts(void **state) {
    (void)state;
    clients cl;
    payouts_service svc;
    new_service(&cl, &svc);
    CST_OK(cs_app_start(svc.app));
    char big[96];
    snprintf(big, sizeof big, "{\"id\":11,\"amount_cents\":%llu}", (unsigned long long)BANK_LIMIT_CENTS * 2);
    cs_published src = publish_keyed(svc.kafka, svc.names.payouts, "11", big);
    assert_true(cst_wait(payout_settled, &svc, 30000));
    CST_OK(
        cs_test_wait_committed(cst_cluster, svc.names.group, svc.names.payouts, src.partition, src.offset + 1, 30000));
    cs_sub_stats pay;
    cs_sub_stats_get(svc.pay_out, &pay);
    assert_int_equal(pay.delivered, 5);
    assert_int_equal(pay.retried, 4);
    assert_int_equal(pay.dead_lettered, 1);
    assert_int_equal(bank_paid(&cl.bank), 0);
    CST_OK(cs_app_stop(svc.app));
    cs_app_destroy(svc.app);

    seen_records dlq, sources;
    read_back(&svc, &dlq, &sources);
    assert_int_equal(dlq.n, 1);
    char reason[96];
    snprintf(reason, sizeof reason, "amount %llu above the bank's limit", (unsigned long long)BANK_LIMIT_CENTS * 2);
    check_dead_letter(&svc, &dlq, &sources, src, "11", big, "5", reason);
    assert_string_equal(dlq.r[0].reason, reason); /* the whole reason, nothing after it */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(payout_comes_back_and_is_paid_view_does_not),
        cmocka_unit_test(reconcile_and_bad_input),
        cmocka_unit_test(payout_above_the_limit_is_dead_lettered_after_5_attempts),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
