/* test_registry_protobuf.c — the registry-backed Protobuf codec
 * (cs_codec_protobuf_registry_new) through the real broker (scripts/kafka)
 * and the real Schema Registry (scripts/registry, with basic auth), run
 * through tests/with-registry and tests/with-real-broker, on the messages of
 * tests/proto/registry (shop.proto imports money.proto):
 *
 *   - round trip: refunds (shop.Refund, the second message of its file:
 *     indexes [1]) published with the codec, a Tracked subscription decoding
 *     them into the generated struct, receipts (shop.Receipt, [2]) replied
 *     with a second codec, read back and decoded; money.proto registered
 *     under its own subject and passed as the schema's reference;
 *   - a nested message (shop.Refund.Audit, [1, 1]) as a key schema, under
 *     "<topic>-key";
 *   - a record whose schema id the registry does not know, one without the
 *     magic byte and one written as another message (shop.Order) go to the
 *     dead-letter topic with the reason (the last naming both messages);
 *   - the registry down during the run: under Tracked nothing is handled
 *     while it is down, nothing is dead-lettered, every record is handled
 *     exactly once after it is back.
 *
 * Topics (so TopicName subjects) are fresh per test: the registry and the
 * broker outlive one run. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "cstest.h"
#include "cstest_registry.h"
#include "cstream/protobuf.h"
#include "cstream/publish.h"
#include "cstream/registry.h"
#include "shop.pb-c.h"

extern const char shop_proto_text[];
extern const char money_proto_text[];

/* ---- helpers ----------------------------------------------------------------- */

/* A codec for `desc`; with a topic it encodes (registering shop.proto with
 * money.proto as its reference), without it only decodes. */
static cs_codec *codec_for(cs_registry *r, const ProtobufCMessageDescriptor *desc, const char *topic, bool key) {
    cs_registry_subject_opts o = {.strategy = CS_SUBJECT_TOPIC_NAME, .topic = topic, .key = key};
    cs_codec *c = NULL;
    CST_OK(cs_codec_protobuf_registry_new(r, desc, shop_proto_text, topic ? &o : NULL, &c));
    if (topic) CST_OK(cs_codec_protobuf_registry_import(c, "money.proto", money_proto_text));
    return c;
}

/* The message-index bytes after the 5-byte header are `want` (n bytes). */
static void assert_indexes(const void *p, size_t len, const unsigned char *want, size_t n) {
    assert_true(len >= 5 + n);
    assert_memory_equal((const unsigned char *)p + 5, want, n);
}

/* Publishes n refunds, order ids 0..n-1, amount id * 100 EUR. */
static void publish_refunds(const cs_codec *c, const char *topic, int n) {
    const cs_type *t = cs_codec_protobuf_registry_type(c);
    for (int i = 0; i < n; i++) {
        Common__Money m = COMMON__MONEY__INIT;
        m.currency = "EUR";
        m.units = i * 100;
        Shop__Refund r = SHOP__REFUND__INIT;
        r.order_id = (uint64_t)i;
        r.amount = &m;
        char *buf = NULL;
        size_t len = 0;
        CST_OK(c->encode(c, t, &r, &buf, &len));
        assert_indexes(buf, len, (const unsigned char[]){2, 2}, 2); /* count 1, index 1 (zigzag) */
        CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, buf, len, NULL));
        free(buf);
    }
}

/* What handlers saw: a count per order id, the amounts. */
typedef struct seen {
    cstr_tally tally;
    _Atomic int64_t units;
    const cs_codec *reply; /* NULL: no reply */
} seen;

static cs_outcome on_refund(cs_delivery *d, void *arg) {
    seen *s = arg;
    const Shop__Refund *r = cs_delivery_decoded(d);
    cstr_tally_add(&s->tally, (int64_t)r->order_id);
    atomic_fetch_add(&s->units, r->amount ? r->amount->units : -1000000);
    if (s->reply) {
        Shop__Receipt rc = SHOP__RECEIPT__INIT;
        rc.id = r->order_id;
        rc.status = SHOP__STATUS__PAID;
        if (cs_delivery_reply_encoded(d, s->reply, cs_codec_protobuf_registry_type(s->reply), &rc) != CS_OK)
            return CS_RETRY;
    }
    return CS_ACK;
}

static cs_app *start_app(const char *name, const char *topic, const char *group, const cs_codec *c, seen *s,
                         const char *reply_topic, const char *dlq, cs_sub **sub_out) {
    cs_app *app = cs_app_new(name, "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_topic(k, topic, 1));
    if (reply_topic) CST_OK(cs_kafka_topic(k, reply_topic, 1));
    if (dlq) CST_OK(cs_kafka_topic(k, dlq, 1));
    cs_sub *sub = cs_kafka_subscribe(k, topic, on_refund, s);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_decode(sub, c, cs_codec_protobuf_registry_type(c)));
    if (reply_topic) CST_OK(cs_sub_reply(sub, reply_topic, 5000));
    if (dlq) {
        CST_OK(cs_sub_max_attempts(sub, 3));
        CST_OK(cs_sub_dead_letter(sub, dlq));
    }
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    if (sub_out) *sub_out = sub;
    return app;
}

/* ---- round trip ---------------------------------------------------------------- */

typedef struct receipts {
    const cs_codec *c;
    int n, paid;
    uint64_t id_sum;
    int32_t schema_id;
} receipts;

static void on_receipt(const rd_kafka_message_t *m, void *arg) {
    receipts *r = arg;
    Shop__Receipt got;
    const cs_type *t = cs_codec_protobuf_registry_type(r->c);
    if (r->c->decode(r->c, t, m->payload, m->len, &got) != CS_OK) fail_msg("receipt: %s", cs_errmsg());
    assert_indexes(m->payload, m->len, (const unsigned char[]){2, 4}, 2); /* count 1, index 2 */
    r->id_sum += got.id;
    r->paid += got.status == SHOP__STATUS__PAID;
    r->schema_id = cstr_wire_id(m->payload, m->len);
    r->n++;
    cs_codec_free_value(r->c, t, &got);
}

static void round_trip_with_reference(void **state) {
    (void)state;
    char topic[128], group[160], out[160], path[64];
    cst_fresh("pb-rt", 1, topic, group, sizeof topic);
    cstr_fresh_topic("pb-rt-receipt", out, sizeof out);
    cs_registry *reg = cstr_client();
    cs_codec *in = codec_for(reg, &shop__refund__descriptor, topic, false);
    cs_codec *reply = codec_for(reg, &shop__receipt__descriptor, out, false);
    assert_string_equal(in->schema_format, CS_SCHEMA_FORMAT_PROTOBUF3);
    int32_t in_id = -1, out_id = -1;
    CST_OK(cs_codec_registry_schema_id(in, cs_codec_protobuf_registry_type(in), &in_id));
    CST_OK(cs_codec_registry_schema_id(reply, cs_codec_protobuf_registry_type(reply), &out_id));
    /* money.proto has its own subject, and the schema refers to it. */
    cstr_body b;
    assert_int_equal(cstr_request("GET", "/subjects/money.proto/versions", NULL, &b), 200);
    snprintf(path, sizeof path, "/schemas/ids/%d", in_id);
    assert_int_equal(cstr_request("GET", path, NULL, &b), 200);
    if (!strstr(b.buf, "\"references\"") || !strstr(b.buf, "\"subject\":\"money.proto\""))
        fail_msg("schema %d has no reference to money.proto: %s", in_id, b.buf);
    assert_non_null(strstr(b.buf, "PROTOBUF"));

    seen s = {.tally = CSTR_TALLY_INIT, .reply = reply};
    cs_registry *reg2 = cstr_client(); /* the consumer's own client: it must ask the registry */
    cs_codec *dec = codec_for(reg2, &shop__refund__descriptor, NULL, false);
    cs_app *app = start_app("pb-rt", topic, group, dec, &s, out, NULL, NULL);
    publish_refunds(in, topic, 5);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 5, 30000));
    cstr_assert_each_once(&s.tally, 5, "refund");
    assert_int_equal(atomic_load(&s.units), (0 + 1 + 2 + 3 + 4) * 100);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);

    cs_codec *rdec = codec_for(reg2, &shop__receipt__descriptor, NULL, false);
    receipts r = {.c = rdec};
    assert_int_equal(cst_read_records(out, 1, on_receipt, &r, 20000), 5);
    assert_int_equal(r.n, 5);
    assert_int_equal(r.paid, 5);
    assert_int_equal(r.id_sum, 0 + 1 + 2 + 3 + 4);
    assert_int_equal(r.schema_id, out_id);
    /* Each schema id was looked up once, not once per record. */
    cs_registry_stats st;
    CST_OK(cs_registry_stats_get(reg2, &st));
    assert_int_equal(st.lookups, 2);
    cs_codec_registry_destroy(rdec);
    cs_codec_registry_destroy(dec);
    cs_codec_registry_destroy(in);
    cs_codec_registry_destroy(reply);
    cs_registry_destroy(reg2);
    cs_registry_destroy(reg);
}

/* ---- a nested message, as a key ------------------------------------------------- */

static void nested_message_key_schema(void **state) {
    (void)state;
    char topic[128], group[160], subj[200];
    cst_fresh("pb-key", 1, topic, group, sizeof topic);
    cs_registry *reg = cstr_client();
    cs_codec *kc = codec_for(reg, &shop__refund__audit__descriptor, topic, true);
    Shop__Refund__Audit a = SHOP__REFUND__AUDIT__INIT;
    a.who = "clerk-7";
    char *buf = NULL;
    size_t len = 0;
    CST_OK(kc->encode(kc, cs_codec_protobuf_registry_type(kc), &a, &buf, &len));
    assert_indexes(buf, len, (const unsigned char[]){4, 2, 2}, 3); /* count 2, indexes 1, 1 */
    snprintf(subj, sizeof subj, "/subjects/%s-key/versions", topic);
    cstr_body b;
    assert_int_equal(cstr_request("GET", subj, NULL, &b), 200);

    cs_registry *fresh = cstr_client();
    cs_codec *dec = codec_for(fresh, &shop__refund__audit__descriptor, NULL, false);
    Shop__Refund__Audit got;
    const cs_type *t = cs_codec_protobuf_registry_type(dec);
    CST_OK(dec->decode(dec, t, buf, len, &got));
    assert_string_equal(got.who, "clerk-7");
    cs_codec_free_value(dec, t, &got);
    /* The same bytes to a codec of another message: refused, naming both. */
    cs_codec *other = codec_for(fresh, &shop__refund__descriptor, NULL, false);
    Shop__Refund r;
    assert_int_equal(other->decode(other, cs_codec_protobuf_registry_type(other), buf, len, &r), CS_ERR_DECODE);
    assert_non_null(strstr(cs_errmsg(), "shop.Refund.Audit"));
    assert_non_null(strstr(cs_errmsg(), "decodes shop.Refund"));
    free(buf);
    cs_codec_registry_destroy(other);
    cs_codec_registry_destroy(dec);
    cs_codec_registry_destroy(kc);
    cs_registry_destroy(fresh);
    cs_registry_destroy(reg);
}

/* ---- dead letters ---------------------------------------------------------------- */

typedef struct dead {
    int n, unknown_id, no_magic, other_type;
} dead;

static void on_dead(const rd_kafka_message_t *m, void *arg) {
    dead *d = arg;
    char reason[600];
    if (!cst_header(m, "cstream.dlq.reason", reason, sizeof reason)) fail_msg("dead letter without a reason");
    d->n++;
    if (strstr(reason, "schema id 2147483000")) d->unknown_id++;
    if (strstr(reason, "wire format")) d->no_magic++;
    if (strstr(reason, "shop.Order") && strstr(reason, "shop.Refund")) d->other_type++;
}

static void undecodable_records_are_dead_lettered(void **state) {
    (void)state;
    char topic[128], group[160], dlq[160];
    cst_fresh("pb-dlq", 1, topic, group, sizeof topic);
    cstr_fresh_topic("pb-dlq-dead", dlq, sizeof dlq);
    cs_registry *reg = cstr_client();
    cs_codec *c = codec_for(reg, &shop__refund__descriptor, topic, false);
    cs_codec *oc = codec_for(reg, &shop__order__descriptor, topic, false);
    static const unsigned char unknown[] = {0, 0x7f, 0xff, 0xfd, 0x78, 0, 8, 1};
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, unknown, sizeof unknown, NULL));
    static const unsigned char bare[] = {8, 1}; /* a bare Protobuf message: no magic byte */
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, bare, sizeof bare, NULL));
    Shop__Order o = SHOP__ORDER__INIT;
    o.id = 9;
    char *buf = NULL;
    size_t len = 0;
    CST_OK(oc->encode(oc, cs_codec_protobuf_registry_type(oc), &o, &buf, &len));
    assert_indexes(buf, len, (const unsigned char[]){0}, 1); /* [0]: the one byte 0 */
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, buf, len, NULL));
    free(buf);
    seen s = {.tally = CSTR_TALLY_INIT};
    cs_app *app = start_app("pb-dlq", topic, group, c, &s, NULL, dlq, NULL);
    publish_refunds(c, topic, 1);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 4, 30000));
    cstr_assert_each_once(&s.tally, 1, "refund");
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    dead d = {0};
    assert_int_equal(cst_read_records(dlq, 1, on_dead, &d, 20000), 3);
    assert_int_equal(d.unknown_id, 1);
    assert_int_equal(d.no_magic, 1);
    assert_int_equal(d.other_type, 1);
    cs_codec_registry_destroy(oc);
    cs_codec_registry_destroy(c);
    cs_registry_destroy(reg);
}

/* ---- outage ------------------------------------------------------------------------ */

static void outage_during_the_run_loses_nothing(void **state) {
    (void)state;
    char topic[128], group[160], dlq[160];
    cst_fresh("pb-down", 1, topic, group, sizeof topic);
    cstr_fresh_topic("pb-down-dead", dlq, sizeof dlq);
    const int n = 5;
    cs_registry *reg = cstr_client();
    cs_codec *c = codec_for(reg, &shop__refund__descriptor, topic, false);
    publish_refunds(c, topic, n);      /* registered while the registry is up */
    cs_registry *creg = cstr_client(); /* nothing cached: the id needs the registry */
    cs_codec *dec = codec_for(creg, &shop__refund__descriptor, NULL, false);
    seen s = {.tally = CSTR_TALLY_INIT};
    cstr_stop();
    cs_sub *sub = NULL;
    cs_app *app = start_app("pb-down", topic, group, dec, &s, NULL, dlq, &sub);
    assert_true(cst_wait(cstr_tried_twice, creg, 30000));
    assert_int_equal(cstr_tally_total(&s.tally), 0);
    cstr_restart();
    cstr_want w = {&s.tally, n};
    assert_true(cst_wait(cstr_reached, &w, 60000));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, n, 30000));
    cstr_assert_each_once(&s.tally, n, "refund");
    cs_sub_stats st;
    cs_sub_stats_get(sub, &st);
    assert_int_equal(st.decode_failures, 0);
    assert_int_equal(st.dead_lettered, 0);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cs_codec_registry_destroy(dec);
    cs_codec_registry_destroy(c);
    cs_registry_destroy(creg);
    cs_registry_destroy(reg);
}

int main(void) {
    if (!cstr_init()) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_with_reference),
        cmocka_unit_test(nested_message_key_schema),
        cmocka_unit_test(undecodable_records_are_dead_lettered),
        cmocka_unit_test_setup(outage_during_the_run_loses_nothing, cstr_up),
    };
    int failed = cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
    cstr_up(NULL);
    return failed;
}
