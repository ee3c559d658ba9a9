/* test_typed_protobuf.c — a subscription decoding Protobuf end to end: payouts
 * published as protobuf-c's bytes reach the handler as the generated message
 * (nested, repeated, oneof and map fields in place), a record that does not
 * decode is counted and dropped, and the handler's typed reply, encoded by
 * the codec, is what a plain consumer reads back. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstest.h"
#include "cstream/protobuf.h"
#include "payments.pb-c.h"

#define WAIT_MS 30000
#define GOOD_RECORDS 2

extern const char payments_proto_text[]; /* tests/proto/payments.proto, embedded at build time */

typedef struct seen {
    pthread_mutex_t lock;
    const cs_codec *party_codec;
    uint64_t ids[GOOD_RECORDS];
    char payee[GOOD_RECORDS][32];
    int64_t limit[GOOD_RECORDS];
    uint64_t card[GOOD_RECORDS];
    int n;
} seen;

static cs_outcome handle(cs_delivery *d, void *user) {
    seen *s = user;
    const Payments__Payout *p = cs_delivery_decoded(d);
    pthread_mutex_lock(&s->lock);
    if (s->n < GOOD_RECORDS) {
        s->ids[s->n] = p->id;
        snprintf(s->payee[s->n], sizeof s->payee[s->n], "%s", p->payee->name);
        s->limit[s->n] = p->n_limits == 1 ? p->limits[0]->value : -1;
        s->card[s->n] = p->route_case == PAYMENTS__PAYOUT__ROUTE_CARD_TOKEN ? p->card_token : 0;
        s->n++;
    }
    pthread_mutex_unlock(&s->lock);
    /* Reply with the payee, typed: a Party encoded by its own codec. */
    Payments__Party reply = PAYMENTS__PARTY__INIT;
    char name[64];
    snprintf(name, sizeof name, "paid:%s", p->payee->name);
    reply.name = name;
    cs_err err = cs_delivery_reply_encoded(d, s->party_codec, cs_codec_protobuf_type(s->party_codec), &reply);
    return err == CS_OK ? CS_ACK : CS_RETRY;
}

static void produce_payout(const char *topic, uint64_t id, const char *payee, int64_t limit, uint64_t card) {
    Payments__Party party = PAYMENTS__PARTY__INIT;
    party.name = (char *)payee;
    Payments__Payout__LimitsEntry entry = PAYMENTS__PAYOUT__LIMITS_ENTRY__INIT;
    entry.key = "daily";
    entry.has_value = 1;
    entry.value = limit;
    Payments__Payout__LimitsEntry *entries[] = {&entry};
    Payments__Payout p = PAYMENTS__PAYOUT__INIT;
    p.id = id;
    p.amount_cents = 100;
    p.payee = &party;
    p.n_limits = 1;
    p.limits = entries;
    p.route_case = PAYMENTS__PAYOUT__ROUTE_CARD_TOKEN;
    p.card_token = card;
    size_t len = payments__payout__get_packed_size(&p);
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    payments__payout__pack(&p, buf);
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, buf, len, NULL));
    free(buf);
}

typedef struct replies {
    char names[4][32];
    int n;
} replies;

static void read_reply(const void *value, size_t len, void *arg) {
    replies *r = arg;
    Payments__Party *party = payments__party__unpack(NULL, len, value);
    if (r->n < 4) snprintf(r->names[r->n++], sizeof r->names[0], "%s", party ? party->name : "(does not unpack)");
    payments__party__free_unpacked(party, NULL);
}

static void protobuf_subscription_decodes_and_replies(void **state) {
    (void)state;
    char topic[128], group[160], reply_topic[160];
    cst_fresh("typed-pb", 1, topic, group, sizeof topic);
    snprintf(reply_topic, sizeof reply_topic, "%s-replies", topic);
    CST_OK(cs_test_topic_create(cst_cluster, reply_topic, 1));
    produce_payout(topic, 118, "Ada", 5000, 77);
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0,
                           "\x0a\x05"
                           "ab",
                           4, NULL)); /* does not decode */
    produce_payout(topic, 119, "Bob", -3, 78);

    cs_codec *payout_codec, *party_codec;
    CST_OK(cs_codec_protobuf_new(&payments__payout__descriptor, payments_proto_text, &payout_codec));
    CST_OK(cs_codec_protobuf_new(&payments__party__descriptor, NULL, &party_codec));
    seen s = {.lock = PTHREAD_MUTEX_INITIALIZER, .party_codec = party_codec};
    cs_app *app = cs_app_new("typed-pb", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_topic(k, topic, 1));
    cs_sub *sub = cs_kafka_subscribe(k, topic, handle, &s);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_decode(sub, payout_codec, cs_codec_protobuf_type(payout_codec)));
    CST_OK(cs_sub_reply(sub, reply_topic, 1000));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 3, WAIT_MS));
    cs_sub_stats st;
    cs_sub_stats_get(sub, &st);
    assert_int_equal(st.decode_failures, 1);
    assert_int_equal(st.delivered, GOOD_RECORDS);
    pthread_mutex_lock(&s.lock);
    assert_int_equal(s.n, GOOD_RECORDS);
    assert_int_equal(s.ids[0], 118);
    assert_string_equal(s.payee[0], "Ada");
    assert_int_equal(s.limit[0], 5000);
    assert_int_equal(s.card[0], 77);
    assert_int_equal(s.ids[1], 119);
    assert_string_equal(s.payee[1], "Bob");
    assert_int_equal(s.limit[1], -3);
    assert_int_equal(s.card[1], 78);
    pthread_mutex_unlock(&s.lock);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);

    replies r = {0};
    assert_int_equal(cst_read_committed(reply_topic, 1, read_reply, &r, WAIT_MS), GOOD_RECORDS);
    assert_string_equal(r.names[0], "paid:Ada");
    assert_string_equal(r.names[1], "paid:Bob");
    cs_codec_protobuf_destroy(payout_codec);
    cs_codec_protobuf_destroy(party_codec);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(protobuf_subscription_decodes_and_replies),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
