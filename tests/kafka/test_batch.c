/* test_batch.c — batches settled element by element: a mixed ack/drop/retry
 * batch (the retried element comes back alone, the committed position stops
 * in front of it), batch sizes never exceed N and never wait to fill, and
 * under Auto a retried element is reported unsupported and lost. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cstest.h"
#include "cstream/rdkafka.h"

enum { MAX_CALLS = 256 };

typedef struct batches {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    size_t sizes[MAX_CALLS];
    int64_t first[MAX_CALLS];
    int attempts_of_first[MAX_CALLS];
    int calls;
    bool gate_first;    /* the first call waits until opened */
    bool hold_retried;  /* offset 3's second attempt waits until opened */
    bool open;
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
    pthread_cond_broadcast(&bt->cv);
    bool wait = (call == 0 && bt->gate_first) ||
                (bt->hold_retried && cs_delivery_offset(b[0]) == 3 && cs_delivery_attempt(b[0]) == 2);
    while (wait && !bt->open) pthread_cond_wait(&bt->cv, &bt->lock);
    bt->open = false;
    pthread_mutex_unlock(&bt->lock);
    for (size_t i = 0; i < n; i++) {
        int64_t off = cs_delivery_offset(b[i]);
        cst_seen_add(bt->seen, cs_delivery_partition(b[i]), off);
        outcomes[i] = off == 5 ? CS_DROP : (off == 3 && cs_delivery_attempt(b[i]) == 1) ? CS_RETRY : CS_ACK;
    }
    return CS_EACH;
}

static void open_gate(batches *bt) {
    pthread_mutex_lock(&bt->lock);
    bt->open = true;
    pthread_cond_broadcast(&bt->cv);
    pthread_mutex_unlock(&bt->lock);
}

static bool calls_at_least(batches *bt, int n) {
    pthread_mutex_lock(&bt->lock);
    bool yes = bt->calls >= n;
    pthread_mutex_unlock(&bt->lock);
    return yes;
}
static bool three_calls(void *arg) { return calls_at_least(arg, 3); }
static bool one_call(void *arg) { return calls_at_least(arg, 1); }

typedef struct fetched {
    cs_sub *sub;
    int64_t end;
} fetched;

/* The consumer has fetched (and so queued in cstream) everything up to end. */
static bool fetched_to_end(void *arg) {
    fetched *f = arg;
    rd_kafka_t *rk = cs_sub_rdkafka_consumer(f->sub);
    rd_kafka_topic_partition_list_t *l = NULL;
    if (!rk || rd_kafka_assignment(rk, &l)) return false;
    bool yes = l->cnt == 1 && rd_kafka_position(rk, l) == RD_KAFKA_RESP_ERR_NO_ERROR && l->elems[0].offset >= f->end;
    rd_kafka_topic_partition_list_destroy(l);
    return yes;
}

static cs_app *start_batch_app(const char *topic, const char *group, cs_commit_mode mode, size_t max, batches *bt,
                               cs_sub **out) {
    cs_app *app = cs_app_new("batch-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe_batch(k, topic, mixed, max, bt);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit(s, mode));
    CST_OK(cs_sub_commit_interval_ms(s, 20));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *out = s;
    return app;
}

static batches *batches_new(void) {
    batches *bt = calloc(1, sizeof *bt);
    pthread_mutex_init(&bt->lock, NULL);
    pthread_cond_init(&bt->cv, NULL);
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
    fetched f = {s, 10};
    assert_true(cst_wait(fetched_to_end, &f, 30000));
    open_gate(bt);
    assert_true(cst_wait(three_calls, bt, 30000)); /* [0], [1..9], then [3] alone, held */
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 3, 10000));
    int64_t committed;
    cst_wait_commit_ticks(s, 3, 10000); /* three commit ticks: it must stay in front of 3 */
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(committed, 3);
    open_gate(bt);
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
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(bt->seen);
    free(bt);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mixed_batch_retried_element_comes_back_alone),
        cmocka_unit_test(batches_never_exceed_n_and_never_wait),
        cmocka_unit_test(auto_batch_retry_is_unsupported_and_lost),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
