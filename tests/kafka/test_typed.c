/* test_typed.c — typed subscriptions with hostile input: tombstones, null
 * keys, headers with null values, non-UTF-8 strings, deeply nested JSON and
 * wrong types never crash anything; each record that does not decode is
 * counted and dropped (its position moves on), the good ones reach the
 * handler decoded, raw bytes still available. Typed keys (cs_sub_decode_key)
 * with typed publishes (cs_publish_encoded_with_key): a key that does not
 * decode, a null key included, is counted and dropped like a value. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstest.h"
#include "cstream/publish.h"

typedef struct item {
    char *name;
    int64_t qty;
} item;
static const cs_field item_fields[] = {
    CS_FIELD_STRING(item, name, CS_REQUIRED),
    CS_FIELD_I64(item, qty, CS_OPTIONAL),
};
static CS_TYPE(item_type, item, item_fields);

typedef struct seen {
    pthread_mutex_t lock;
    char names[8][32];
    size_t raw_len[8];
    int n;
} seen;

static cs_outcome handle(cs_delivery *d, void *user) {
    seen *s = user;
    const item *it = cs_delivery_decoded(d);
    size_t len;
    cs_delivery_value(d, &len); /* raw bytes stay available */
    pthread_mutex_lock(&s->lock);
    if (s->n < 8) {
        snprintf(s->names[s->n], sizeof s->names[s->n], "%s", it->name);
        s->raw_len[s->n] = len;
        s->n++;
    }
    pthread_mutex_unlock(&s->lock);
    return CS_ACK;
}

static void hostile_input_is_counted_and_dropped(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("typed", 1, topic, group, sizeof topic);
    /* The hostile records, then two good ones. */
    CST_OK(cs_test_produce(cst_cluster, topic, 0, "k", 1, NULL, 0, NULL));                        /* tombstone */
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "{\"name\":\"\xff\xfe\"}", 14, NULL)); /* bad UTF-8 */
    size_t depth = 100000;
    char *deep = malloc(depth * 2 + 1);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[depth * 2] = '\0';
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, deep, depth * 2, NULL)); /* deep nesting */
    free(deep);
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "{\"name\":7}", 10, NULL));        /* wrong type */
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "not json", 8, NULL));             /* not JSON */
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "{\"name\":\"ok-1\"}", 15, NULL)); /* null key, good */
    seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    cs_app *app = cs_app_new("typed", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_topic(k, topic, 1));
    cs_sub *sub = cs_kafka_subscribe(k, topic, handle, &s);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_decode(sub, &cs_codec_json, &item_type));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    /* A good record with a header whose value is null. */
    cs_header h[] = {{"trace", NULL, 0}};
    cs_record r = {.topic = topic,
                   .partition = 0,
                   .value = "{\"name\":\"ok-2\",\"qty\":3}",
                   .value_len = 23,
                   .headers = h,
                   .n_headers = 1};
    CST_OK(cs_publish(k, &r, NULL));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 7, 30000));
    cs_sub_stats st;
    cs_sub_stats_get(sub, &st);
    assert_int_equal(st.decode_failures, 5);
    assert_int_equal(st.delivered, 2);
    pthread_mutex_lock(&s.lock);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.names[0], "ok-1");
    assert_string_equal(s.names[1], "ok-2");
    assert_int_equal(s.raw_len[1], 23);
    pthread_mutex_unlock(&s.lock);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

static void decode_needs_a_valid_table(void **state) {
    (void)state;
    typedef struct bad {
        int64_t a;
    } bad;
    static const cs_field twice[] = {CS_FIELD_I64(bad, a, CS_REQUIRED), CS_FIELD_I64(bad, a, CS_REQUIRED)};
    static CS_TYPE(bad_type, bad, twice);
    cs_kafka *k = cs_kafka_new("127.0.0.1:1");
    cs_sub *sub = cs_kafka_subscribe(k, "t", handle, NULL);
    assert_int_equal(cs_sub_decode(sub, &cs_codec_json, &bad_type), CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "\"a\""));
    cs_kafka_destroy(k);
}

typedef struct order_key {
    char *order;
} order_key;
static const cs_field order_key_fields[] = {CS_FIELD_STRING(order_key, order, CS_REQUIRED)};
static CS_TYPE(order_key_type, order_key, order_key_fields);

typedef struct keyed {
    pthread_mutex_t lock;
    char orders[4][32];
    int n, value_decoded;
} keyed;

static cs_outcome handle_keyed(cs_delivery *d, void *user) {
    keyed *s = user;
    const order_key *k = cs_delivery_decoded_key(d);
    pthread_mutex_lock(&s->lock);
    if (s->n < 4) snprintf(s->orders[s->n++], sizeof s->orders[0], "%s", k ? k->order : "(no key)");
    if (cs_delivery_decoded(d)) s->value_decoded++;
    pthread_mutex_unlock(&s->lock);
    return CS_ACK;
}

/* Keys only (no value codec): the value stays raw bytes. */
static void typed_keys_are_decoded_bad_ones_dropped(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("typed-keys", 1, topic, group, sizeof topic);
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));             /* null key */
    CST_OK(cs_test_produce(cst_cluster, topic, 0, "not json", 8, "v", 1, NULL));       /* bad key */
    CST_OK(cs_test_produce(cst_cluster, topic, 0, "{\"order\":7}", 11, "v", 1, NULL)); /* wrong type */
    keyed s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    cs_app *app = cs_app_new("typed-keys", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_topic(k, topic, 1));
    cs_sub *sub = cs_kafka_subscribe(k, topic, handle_keyed, &s);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_decode_key(sub, &cs_codec_json, &order_key_type));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    order_key key = {"o-1"};
    item value = {"widget", 2};
    CST_OK(cs_publish_encoded_with_key(k, topic, &cs_codec_json, &order_key_type, &key, &cs_codec_json, &item_type,
                                       &value, NULL));
    /* A value that does not encode (a required string is NULL): nothing published. */
    item bad = {NULL, 1};
    assert_int_equal(cs_publish_encoded(k, topic, NULL, 0, &cs_codec_json, &item_type, &bad, NULL), CS_ERR_ENCODE);
    assert_non_null(strstr(cs_errmsg(), "\"name\""));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 4, 30000));
    cs_sub_stats st;
    cs_sub_stats_get(sub, &st);
    assert_int_equal(st.decode_failures, 3);
    assert_int_equal(st.delivered, 1);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.orders[0], "o-1");
    assert_int_equal(s.value_decoded, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hostile_input_is_counted_and_dropped),
        cmocka_unit_test(decode_needs_a_valid_table),
        cmocka_unit_test(typed_keys_are_decoded_bad_ones_dropped),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
