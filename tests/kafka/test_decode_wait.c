/* test_decode_wait.c — a codec that cannot decode a record now
 * (CS_ERR_UNAVAILABLE: e.g. its Schema Registry is down) holds the record at
 * the head of its lane: under Tracked the records behind it with the same
 * key are handled after it, never before, and nothing is dead-lettered,
 * dropped or handled twice. Found in review: the first version sent the
 * waiting record to the delay heap and the lane's next records overtook it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstest.h"

typedef struct item {
    char *name;
} item;
static const cs_field item_fields[] = {CS_FIELD_STRING(item, name, CS_REQUIRED)};
static CS_TYPE(item_type, item, item_fields);

/* How many times the codec answers "try later" for the record named
 * "first" before it decodes it. */
enum { UNAVAILABLE_TIMES = 3 };
static _Atomic int unavailable_left;
static _Atomic int unavailable_answers;
/* Batches: how many records the handler had run when the codec last said
 * "try later". */
static _Atomic int handled_so_far;
static _Atomic int handled_at_last_answer;

static bool names_first(const char *data, size_t len) {
    static const char needle[] = "\"first\"";
    for (size_t i = 0; i + sizeof needle - 1 <= len; i++)
        if (!memcmp(data + i, needle, sizeof needle - 1)) return true;
    return false;
}

static cs_err flaky_decode(const cs_codec *c, const cs_type *type, const void *data, size_t len, void *out) {
    (void)c;
    if (names_first(data, len) && atomic_fetch_sub(&unavailable_left, 1) > 0) {
        atomic_fetch_add(&unavailable_answers, 1);
        atomic_store(&handled_at_last_answer, atomic_load(&handled_so_far));
        return CS_ERR_UNAVAILABLE;
    }
    return cs_codec_json.decode(&cs_codec_json, type, data, len, out);
}

enum { RECORDS = 4 };
typedef struct order {
    pthread_mutex_t lock;
    char names[RECORDS * 2][16];
    int n;
} order;

static cs_outcome handle(cs_delivery *d, void *user) {
    order *o = user;
    const item *it = cs_delivery_decoded(d);
    pthread_mutex_lock(&o->lock);
    if (o->n < RECORDS * 2) snprintf(o->names[o->n++], sizeof o->names[0], "%s", it->name);
    pthread_mutex_unlock(&o->lock);
    return CS_ACK;
}

/* The records, all of one key on partition 0, and the codec's answers armed:
 * "first" gets UNAVAILABLE_TIMES "try later" before it decodes. */
static void produce_and_arm(const char *topic, const char *const names[RECORDS]) {
    for (int i = 0; i < RECORDS; i++) {
        char value[64];
        int n = snprintf(value, sizeof value, "{\"name\":\"%s\"}", names[i]);
        CST_OK(cs_test_produce(cst_cluster, topic, 0, "same-key", 8, value, (size_t)n, NULL));
    }
    atomic_store(&unavailable_left, UNAVAILABLE_TIMES);
    atomic_store(&unavailable_answers, 0);
}

static cs_codec flaky_codec(void) {
    cs_codec flaky = cs_codec_json;
    flaky.name = "flaky-json";
    flaky.decode = flaky_decode;
    return flaky;
}

/* Every record handled once, in the order produced: none overtook the one
 * waiting for its codec. */
static void assert_handled_in_order(order *o, const char *const *names) {
    pthread_mutex_lock(&o->lock);
    assert_int_equal(o->n, RECORDS);
    for (int i = 0; i < RECORDS; i++)
        if (strcmp(o->names[i], names[i]))
            fail_msg("handled %d was %s, not %s: a record overtook the one waiting for its codec", i, o->names[i],
                     names[i]);
    pthread_mutex_unlock(&o->lock);
}

static void a_waiting_record_keeps_its_place_in_its_lane(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("decode-wait", 1, topic, group, sizeof topic);
    const char *names[RECORDS] = {"first", "second", "third", "fourth"};
    produce_and_arm(topic, names);
    cs_codec flaky = flaky_codec();
    order o = {.lock = PTHREAD_MUTEX_INITIALIZER};
    cs_app *app = cs_app_new("decode-wait", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_topic(k, topic, 1));
    cs_sub *sub = cs_kafka_subscribe(k, topic, handle, &o);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_workers(sub, 4)); /* idle workers that could overtake, if the lane let them */
    CST_OK(cs_sub_lanes(sub, CS_LANES_BY_KEY));
    CST_OK(cs_sub_max_attempts(sub, 1)); /* a wait must not count as an attempt */
    CST_OK(cs_sub_decode(sub, &flaky, &item_type));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, RECORDS, 60000));
    CST_OK(cs_app_stop(app));
    assert_int_equal(atomic_load(&unavailable_answers), UNAVAILABLE_TIMES);
    cs_sub_stats st;
    cs_sub_stats_get(sub, &st);
    assert_int_equal(st.decode_failures, 0);
    assert_handled_in_order(&o, names);
    cs_app_destroy(app);
}

static cs_outcome handle_batch(cs_delivery *const *batch, size_t n, cs_outcome *outcomes, void *user) {
    (void)outcomes;
    for (size_t i = 0; i < n; i++) {
        handle(batch[i], user);
        atomic_fetch_add(&handled_so_far, 1);
    }
    return CS_ACK;
}

/* A batch handler: the elements before the waiting one run first (they are
 * in flight, and holding them would hold a revoke of their partitions for
 * the whole outage), the waiting one and those after it later, in order. */
static void a_batch_runs_what_precedes_the_waiting_record(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("decode-wait-batch", 1, topic, group, sizeof topic);
    const char *names[RECORDS] = {"zero", "first", "second", "third"};
    produce_and_arm(topic, names);
    atomic_store(&handled_so_far, 0);
    atomic_store(&handled_at_last_answer, -1);
    cs_codec flaky = flaky_codec();
    order o = {.lock = PTHREAD_MUTEX_INITIALIZER};
    cs_app *app = cs_app_new("decode-wait-batch", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_topic(k, topic, 1));
    cs_sub *sub = cs_kafka_subscribe_batch(k, topic, handle_batch, RECORDS, &o);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_decode(sub, &flaky, &item_type));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, RECORDS, 60000));
    CST_OK(cs_app_stop(app));
    assert_int_equal(atomic_load(&unavailable_answers), UNAVAILABLE_TIMES);
    assert_handled_in_order(&o, names);
    /* "zero" came in the same batch (all four were fetched before the start)
     * or in an earlier one: either way it ran before the wait ended. */
    if (atomic_load(&handled_at_last_answer) < 1)
        fail_msg("the record before the waiting one was held for the whole wait (handled %d when it ended)",
                 atomic_load(&handled_at_last_answer));
    cs_app_destroy(app);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_waiting_record_keeps_its_place_in_its_lane),
        cmocka_unit_test(a_batch_runs_what_precedes_the_waiting_record),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
