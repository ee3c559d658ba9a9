/* test_dead_letter.c — retry caps and dead letters (Tracked): the handler runs
 * exactly max_attempts times, then the record goes to the dead-letter topic
 * with its key, value and headers and every provenance header, and only then
 * is settled; if that publish fails the source stays open; a poison record no
 * longer holds the committed position; without a dead-letter topic the record
 * is dropped and counted; caps apply per element of a batch. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cstest.h"

typedef struct poison {
    _Atomic int runs_of_poison; /* handler runs for offset 0 */
    _Atomic int others;
} poison;

/* Offset 0 always fails; everything else is fine. */
static cs_outcome handle(cs_delivery *d, void *user) {
    poison *p = user;
    if (cs_delivery_offset(d) == 0) {
        atomic_fetch_add(&p->runs_of_poison, 1);
        cs_delivery_set_reason(d, "bank down (attempt %d)", cs_delivery_attempt(d));
        return CS_RETRY;
    }
    atomic_fetch_add(&p->others, 1);
    return CS_ACK;
}

static cs_app *start(const char *topic, const char *group, const char *dlq, int max_attempts, poison *p, cs_sub **out,
                     const char *message_timeout) {
    cs_app *app = cs_app_new("dlq-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    if (message_timeout) CST_OK(cs_kafka_producer_config(k, "message.timeout.ms", message_timeout));
    cs_sub *s = cs_kafka_subscribe(k, topic, handle, p);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_commit_interval_ms(s, 20));
    CST_OK(cs_sub_max_attempts(s, max_attempts));
    if (dlq) CST_OK(cs_sub_dead_letter(s, dlq));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    if (out) *out = s;
    return app;
}

/* ---- reading the dead-letter topic back --------------------------------------- */

typedef struct dead {
    pthread_mutex_t lock;
    int n;
    char key[32], value[32], trace[32];
    char hdr[7][64];
} dead;

static const char *provenance[7] = {"cstream.dlq.topic",     "cstream.dlq.partition", "cstream.dlq.offset",
                                    "cstream.dlq.timestamp", "cstream.dlq.group",     "cstream.dlq.attempts",
                                    "cstream.dlq.reason"};

static cs_outcome read_dead(cs_delivery *d, void *user) {
    dead *x = user;
    size_t len;
    pthread_mutex_lock(&x->lock);
    x->n++;
    const char *k = cs_delivery_key(d, &len);
    snprintf(x->key, sizeof x->key, "%.*s", (int)len, k ? k : "");
    const char *v = cs_delivery_value(d, &len);
    snprintf(x->value, sizeof x->value, "%.*s", (int)len, v ? v : "");
    const void *hv;
    if (cs_delivery_header_get(d, "trace", &hv, &len) == CS_OK)
        snprintf(x->trace, sizeof x->trace, "%.*s", (int)len, (const char *)hv);
    for (int i = 0; i < 7; i++)
        if (cs_delivery_header_get(d, provenance[i], &hv, &len) == CS_OK)
            snprintf(x->hdr[i], sizeof x->hdr[i], "%.*s", (int)len, hv ? (const char *)hv : "");
    pthread_mutex_unlock(&x->lock);
    return CS_ACK;
}

static void read_dead_letters(const char *dlq, const char *group, dead *x) {
    char reader[200];
    snprintf(reader, sizeof reader, "%s-reader", group);
    cs_app *app = cs_app_new("dlq-reader", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, dlq, read_dead, x);
    CST_OK(cs_sub_group(s, reader));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    CST_OK(cs_test_app_wait_idle(app, 30000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

static void produce_poison_and_friends(const char *topic) {
    cs_app *app = cs_app_new("dlq-seed", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_topic(k, topic, 1));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    cs_header h[] = {{"trace", "t-42", 4}};
    cs_record r = {.topic = topic,
                   .partition = 0,
                   .key = "payout-1",
                   .key_len = 8,
                   .value = "poison",
                   .value_len = 6,
                   .headers = h,
                   .n_headers = 1};
    CST_OK(cs_publish(k, &r, NULL));
    for (int i = 1; i < 10; i++) {
        cs_record ok = {.topic = topic, .partition = 0, .value = "fine", .value_len = 4};
        CST_OK(cs_publish(k, &ok, NULL));
    }
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

static void cap_reached_goes_to_the_dead_letter_topic(void **state) {
    (void)state;
    char topic[128], group[160], dlq[160];
    cst_fresh("dlq", 1, topic, group, sizeof topic);
    snprintf(dlq, sizeof dlq, "%s.dlq", topic);
    CST_OK(cs_test_topic_create(cst_cluster, dlq, 1));
    produce_poison_and_friends(topic);
    poison p = {0};
    cs_sub *s;
    cs_app *app = start(topic, group, dlq, 3, &p, &s, NULL);
    /* The poison record no longer holds the position: it reaches the end. */
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 10, 30000));
    assert_int_equal(atomic_load(&p.runs_of_poison), 3); /* exactly max_attempts */
    assert_int_equal(atomic_load(&p.others), 9);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.dead_lettered, 1);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);

    dead x = {.lock = PTHREAD_MUTEX_INITIALIZER};
    read_dead_letters(dlq, group, &x);
    assert_int_equal(x.n, 1);
    assert_string_equal(x.key, "payout-1");
    assert_string_equal(x.value, "poison");
    assert_string_equal(x.trace, "t-42");
    assert_string_equal(x.hdr[0], topic);
    assert_string_equal(x.hdr[1], "0");
    assert_string_equal(x.hdr[2], "0");
    assert_true(atoll(x.hdr[3]) > 0);
    assert_string_equal(x.hdr[4], group);
    assert_string_equal(x.hdr[5], "3");
    assert_string_equal(x.hdr[6], "bank down (attempt 3)");
}

static void without_dead_letter_topic_dropped_and_counted(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("dlq-none", 1, topic, group, sizeof topic);
    produce_poison_and_friends(topic);
    poison p = {0};
    cs_sub *s;
    cs_app *app = start(topic, group, NULL, 2, &p, &s, NULL);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 10, 30000));
    assert_int_equal(atomic_load(&p.runs_of_poison), 2);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.exhausted, 1);
    assert_int_equal(st.dead_lettered, 0);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

static bool poison_ran(void *arg) { return atomic_load(&((poison *)arg)->runs_of_poison) >= 2; }

/* A failed dead-letter publish settles its record as a retry: after the
 * handler's own retry, `retried` counts the failed dead-letter rounds. */
typedef struct failed_dlq {
    cs_sub *s;
    uint64_t retried;
} failed_dlq;

static bool dead_letter_failed(void *arg) {
    failed_dlq *f = arg;
    cs_sub_stats st;
    cs_sub_stats_get(f->s, &st);
    return st.retried >= f->retried;
}

static void failed_dead_letter_keeps_the_source_open(void **state) {
    (void)state;
    if (!cs_test_cluster_is_embedded(cst_cluster)) {
        cst_skip("embedded cluster only: it injects a topic error, which only the embedded cluster does in-process");
    }
    char topic[128], group[160], dlq[160];
    cst_fresh("dlq-fail", 1, topic, group, sizeof topic);
    snprintf(dlq, sizeof dlq, "%s.dlq", topic);
    CST_OK(cs_test_topic_create(cst_cluster, dlq, 1));
    produce_poison_and_friends(topic);
    poison p = {0};
    cs_sub *s;
    cs_app *app = start(topic, group, dlq, 2, &p, &s, "500");
    CST_OK(cs_test_topic_set_error(cst_cluster, dlq, 3 /* UNKNOWN_TOPIC_OR_PARTITION */));
    assert_true(cst_wait(poison_ran, &p, 30000));
    /* The dead-letter publish keeps failing: the record stays open, the
     * position stays in front of it, and the handler does not run again. */
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 0, 10000));
    failed_dlq rounds = {s, 1 + 2}; /* the handler's retry, then two failed dead-letter rounds */
    if (!cst_wait(dead_letter_failed, &rounds, 30000)) fail_msg("no two failed dead-letter rounds within 30 s");
    cst_wait_commit_ticks(s, 3, 10000); /* then commit ticks that could have moved the position */
    int64_t committed;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(committed, 0);
    assert_int_equal(atomic_load(&p.runs_of_poison), 2);
    CST_OK(cs_test_topic_set_error(cst_cluster, dlq, 0));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 10, 30000));
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.dead_lettered, 1);
    assert_int_equal(atomic_load(&p.runs_of_poison), 2);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

/* ---- batches: caps per element --------------------------------------------------- */

static cs_outcome batch_handle(cs_delivery *const *b, size_t n, cs_outcome *out, void *user) {
    poison *p = user;
    for (size_t i = 0; i < n; i++) {
        if (cs_delivery_offset(b[i]) == 0) {
            atomic_fetch_add(&p->runs_of_poison, 1);
            out[i] = CS_RETRY;
        } else {
            atomic_fetch_add(&p->others, 1);
            out[i] = CS_ACK;
        }
    }
    return CS_EACH;
}

static void batch_caps_apply_per_element(void **state) {
    (void)state;
    char topic[128], group[160], dlq[160];
    cst_fresh("dlq-batch", 1, topic, group, sizeof topic);
    snprintf(dlq, sizeof dlq, "%s.dlq", topic);
    CST_OK(cs_test_topic_create(cst_cluster, dlq, 1));
    produce_poison_and_friends(topic);
    poison p = {0};
    cs_app *app = cs_app_new("dlq-batch", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe_batch(k, topic, batch_handle, 10, &p);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_max_attempts(s, 2));
    CST_OK(cs_sub_dead_letter(s, dlq));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 10, 30000));
    assert_int_equal(atomic_load(&p.runs_of_poison), 2);
    assert_int_equal(atomic_load(&p.others), 9);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.dead_lettered, 1);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cap_reached_goes_to_the_dead_letter_topic),
        cmocka_unit_test(without_dead_letter_topic_dropped_and_counted),
        cmocka_unit_test(failed_dead_letter_keeps_the_source_open),
        cmocka_unit_test(batch_caps_apply_per_element),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
