/* test_registry_codec.c — the registry-backed Avro codec
 * (cs_codec_avro_registry_new) through the real broker (scripts/kafka) and
 * the real Schema Registry (scripts/registry, with basic auth), run through
 * tests/with-registry and tests/with-real-broker:
 *
 *   - round trip: a publish encoded with the codec, a Tracked subscription
 *     decoding it, a reply encoded with a second codec (the reply topic's
 *     subject), read back and decoded: values and schema ids as written;
 *   - evolution both ways through the registry: a v2 reader reads v1 data
 *     with the v2 default applied; v2 registered under the same subject (a
 *     BACKWARD-compatible change), a v1 reader reads v2 data;
 *   - a key schema: the key is registered under "<topic>-key" and decodes;
 *   - a record whose schema id the registry does not know, and one without
 *     the magic byte, go to the dead-letter topic (Tracked) with the reason;
 *   - the registry down at start and for a while (scripts/registry stop,
 *     then restart): under Tracked nothing is handled while it is down,
 *     nothing is dead-lettered, and every record is handled exactly once
 *     after it is back; the start-up check (cs_registry_ping) says
 *     CS_ERR_UNAVAILABLE naming the URL;
 *   - under Auto, the same outage: the worker waits in place and every record
 *     is handled once it is back;
 *   - basic auth: a wrong password is CS_ERR_UNAVAILABLE (retried, the
 *     record is never given up), the right one works (every test uses it);
 *   - a schema the subject's compatibility refuses: encode fails with
 *     CS_ERR_ENCODE naming the subject, nothing is published.
 *
 * Topics (so TopicName subjects) are fresh per test: the registry and the
 * broker outlive one run. The outage tests stop and restart the registry. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "cstest.h"
#include "cstest_registry.h"
#include "cstream/avro.h"
#include "cstream/publish.h"
#include "cstream/registry.h"

/* v1 and v2 of one record; v2 adds a field with a default (BACKWARD). */
#define PAYOUT_V1                                                                                                      \
    "{\"type\":\"record\",\"name\":\"Payout\",\"namespace\":\"bank\",\"fields\":["                                     \
    "{\"name\":\"id\",\"type\":\"long\"},{\"name\":\"amount\",\"type\":\"long\"}]}"
#define PAYOUT_V2                                                                                                      \
    "{\"type\":\"record\",\"name\":\"Payout\",\"namespace\":\"bank\",\"fields\":["                                     \
    "{\"name\":\"id\",\"type\":\"long\"},{\"name\":\"amount\",\"type\":\"long\"},"                                     \
    "{\"name\":\"currency\",\"type\":\"string\",\"default\":\"EUR\"}]}"
/* Changes amount's type with no default: BACKWARD refuses it after v1. */
#define PAYOUT_V3_BAD                                                                                                  \
    "{\"type\":\"record\",\"name\":\"Payout\",\"namespace\":\"bank\",\"fields\":["                                     \
    "{\"name\":\"id\",\"type\":\"long\"},{\"name\":\"cents\",\"type\":\"string\"}]}"

typedef struct payout_v1 {
    int64_t id, amount;
} payout_v1;
static const cs_field payout_v1_fields[] = {
    CS_FIELD_I64(payout_v1, id, CS_REQUIRED),
    CS_FIELD_I64(payout_v1, amount, CS_REQUIRED),
};
static CS_TYPE(payout_v1_type, payout_v1, payout_v1_fields);

typedef struct payout_v2 {
    int64_t id, amount;
    char *currency;
} payout_v2;
static const cs_field payout_v2_fields[] = {
    CS_FIELD_I64(payout_v2, id, CS_REQUIRED),
    CS_FIELD_I64(payout_v2, amount, CS_REQUIRED),
    CS_FIELD_STRING(payout_v2, currency, CS_REQUIRED),
};
static CS_TYPE(payout_v2_type, payout_v2, payout_v2_fields);

/* The reply: its schema is the table's own (cs_avro_schema_of). */
typedef struct done {
    int64_t id;
    char *status;
} done;
static const cs_field done_fields[] = {
    CS_FIELD_I64(done, id, CS_REQUIRED),
    CS_FIELD_STRING(done, status, CS_REQUIRED),
};
static CS_TYPE(done_type, done, done_fields);

typedef struct account_key {
    char *account;
} account_key;
static const cs_field account_key_fields[] = {CS_FIELD_STRING(account_key, account, CS_REQUIRED)};
static CS_TYPE(account_key_type, account_key, account_key_fields);

/* ---- helpers ----------------------------------------------------------------- */

/* Publishes n v1 payouts id 0..n-1 (amount id * 100) encoded with `c`. */
static void publish_v1(const cs_codec *c, const char *topic, int n) {
    for (int i = 0; i < n; i++) {
        payout_v1 p = {i, i * 100};
        char *buf = NULL;
        size_t len = 0;
        CST_OK(c->encode(c, &payout_v1_type, &p, &buf, &len));
        CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, buf, len, NULL));
        free(buf);
    }
}

/* What handlers saw: a count per payout id, the amounts. */
typedef struct seen {
    cstr_tally tally;
    _Atomic int64_t amount_sum;
    const cs_codec *reply; /* NULL: no reply */
} seen;

static cs_outcome on_payout(cs_delivery *d, void *user) {
    seen *s = user;
    const payout_v1 *p = cs_delivery_decoded(d);
    cstr_tally_add(&s->tally, p->id);
    atomic_fetch_add(&s->amount_sum, p->amount);
    if (s->reply) {
        done r = {.id = p->id, .status = "paid"};
        if (cs_delivery_reply_encoded(d, s->reply, &done_type, &r) != CS_OK) return CS_RETRY;
    }
    return CS_ACK;
}

static cs_app *start_app(const char *name, const char *topic, const char *group, cs_commit_mode mode, const cs_codec *c,
                         seen *s, const char *reply_topic, const char *dlq, cs_sub **sub_out) {
    cs_app *app = cs_app_new(name, "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_topic(k, topic, 1));
    if (reply_topic) CST_OK(cs_kafka_topic(k, reply_topic, 1));
    if (dlq) CST_OK(cs_kafka_topic(k, dlq, 1));
    cs_sub *sub = cs_kafka_subscribe(k, topic, on_payout, s);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, mode));
    CST_OK(cs_sub_decode(sub, c, &payout_v1_type));
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

typedef struct replies {
    const cs_codec *c;
    int n;
    int64_t id_sum;
    int32_t schema_id;
} replies;

static void on_reply(const rd_kafka_message_t *m, void *arg) {
    replies *r = arg;
    done d;
    if (r->c->decode(r->c, &done_type, m->payload, m->len, &d) != CS_OK) fail_msg("reply: %s", cs_errmsg());
    assert_string_equal(d.status, "paid");
    r->id_sum += d.id;
    r->schema_id = cstr_wire_id(m->payload, m->len);
    r->n++;
    cs_value_free(&done_type, &d);
}

static void round_trip_publish_consume_reply(void **state) {
    (void)state;
    char topic[128], group[160], out[160];
    cst_fresh("avro-rt", 1, topic, group, sizeof topic);
    cstr_fresh_topic("avro-rt-done", out, sizeof out);
    cs_registry *reg = cstr_client();
    cs_codec *in = cstr_avro_codec(reg, PAYOUT_V1, topic, false);
    cs_codec *reply = cstr_avro_codec(reg, NULL, out, false);
    int32_t in_id = -1, out_id = -1;
    CST_OK(cs_codec_registry_schema_id(in, &payout_v1_type, &in_id));
    CST_OK(cs_codec_registry_schema_id(reply, &done_type, &out_id));
    assert_int_not_equal(in_id, out_id);

    seen s = {.tally = CSTR_TALLY_INIT, .reply = reply};
    cs_registry *reg2 = cstr_client(); /* the consumer's own client: it must ask the registry */
    cs_codec *dec = cstr_avro_codec(reg2, NULL, NULL, false);
    cs_app *app = start_app("avro-rt", topic, group, CS_COMMIT_TRACKED, dec, &s, out, NULL, NULL);
    publish_v1(in, topic, 5);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 5, 30000));
    cstr_assert_each_once(&s.tally, 5, "payout");
    assert_int_equal(atomic_load(&s.amount_sum), (0 + 1 + 2 + 3 + 4) * 100);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);

    replies r = {.c = dec};
    assert_int_equal(cst_read_records(out, 1, on_reply, &r, 20000), 5);
    assert_int_equal(r.n, 5);
    assert_int_equal(r.id_sum, 0 + 1 + 2 + 3 + 4);
    assert_int_equal(r.schema_id, out_id);
    /* reg2 looked up each schema id once (the payouts' and the replies'),
     * not once per record: 10 records, 2 lookups; its requests are those and
     * the start-up readiness probe. */
    cs_registry_stats st;
    CST_OK(cs_registry_stats_get(reg2, &st));
    assert_int_equal(st.lookups, 2);
    assert_int_equal(st.requests, 3);
    cs_codec_registry_destroy(dec);
    cs_codec_registry_destroy(in);
    cs_codec_registry_destroy(reply);
    cs_registry_destroy(reg2);
    cs_registry_destroy(reg);
}

/* ---- evolution ----------------------------------------------------------------- */

static void evolution_both_ways(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("avro-evo", 1, topic, group, sizeof topic);
    cs_registry *reg = cstr_client();
    cs_codec *w1 = cstr_avro_codec(reg, PAYOUT_V1, topic, false);
    cs_codec *w2 = cstr_avro_codec(reg, PAYOUT_V2, topic, false);
    payout_v1 p1 = {7, 700};
    payout_v2 p2 = {8, 800, "CHF"};
    char *b1 = NULL, *b2 = NULL;
    size_t l1 = 0, l2 = 0;
    CST_OK(w1->encode(w1, &payout_v1_type, &p1, &b1, &l1));
    CST_OK(w2->encode(w2, &payout_v2_type, &p2, &b2, &l2)); /* v2 under the same subject: BACKWARD allows it */
    assert_int_not_equal(cstr_wire_id(b1, l1), cstr_wire_id(b2, l2));

    cs_registry *fresh = cstr_client();
    cs_codec *r2 = cstr_avro_codec(fresh, PAYOUT_V2, NULL, false);
    cs_codec *r1 = cstr_avro_codec(fresh, PAYOUT_V1, NULL, false);
    payout_v2 got2;
    CST_OK(r2->decode(r2, &payout_v2_type, b1, l1, &got2)); /* v2 reads v1: the default */
    assert_int_equal(got2.id, 7);
    assert_int_equal(got2.amount, 700);
    assert_string_equal(got2.currency, "EUR");
    cs_value_free(&payout_v2_type, &got2);
    payout_v1 got1;
    CST_OK(r1->decode(r1, &payout_v1_type, b2, l2, &got1)); /* v1 reads v2: currency skipped */
    assert_int_equal(got1.id, 8);
    assert_int_equal(got1.amount, 800);
    /* Each writer schema was fetched once, then kept prepared by the codecs. */
    for (int i = 0; i < 3; i++) {
        CST_OK(r2->decode(r2, &payout_v2_type, b1, l1, &got2));
        cs_value_free(&payout_v2_type, &got2);
    }
    cs_registry_stats st;
    CST_OK(cs_registry_stats_get(fresh, &st));
    assert_int_equal(st.requests, 2);
    free(b1);
    free(b2);
    cs_codec_registry_destroy(r1);
    cs_codec_registry_destroy(r2);
    cs_codec_registry_destroy(w1);
    cs_codec_registry_destroy(w2);
    cs_registry_destroy(fresh);
    cs_registry_destroy(reg);
}

/* ---- key schema ----------------------------------------------------------------- */

typedef struct keys {
    const cs_codec *c;
    char account[64];
    int32_t id;
} keys;

static void on_keyed(const rd_kafka_message_t *m, void *arg) {
    keys *k = arg;
    account_key ak;
    if (k->c->decode(k->c, &account_key_type, m->key, m->key_len, &ak) != CS_OK) fail_msg("key: %s", cs_errmsg());
    snprintf(k->account, sizeof k->account, "%s", ak.account);
    k->id = cstr_wire_id(m->key, m->key_len);
    cs_value_free(&account_key_type, &ak);
}

static void key_schema(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("avro-key", 1, topic, group, sizeof topic);
    cs_registry *reg = cstr_client();
    cs_codec *kc = cstr_avro_codec(reg, NULL, topic, true);
    cs_codec *vc = cstr_avro_codec(reg, PAYOUT_V1, topic, false);
    account_key key = {"acct-42"};
    payout_v1 p = {1, 100};
    char *kb = NULL, *vb = NULL;
    size_t kl = 0, vl = 0;
    CST_OK(kc->encode(kc, &account_key_type, &key, &kb, &kl));
    CST_OK(vc->encode(vc, &payout_v1_type, &p, &vb, &vl));
    CST_OK(cs_test_produce(cst_cluster, topic, 0, kb, kl, vb, vl, NULL));

    cs_registry *fresh = cstr_client();
    cs_codec *dec = cstr_avro_codec(fresh, NULL, NULL, false);
    keys k = {.c = dec};
    assert_int_equal(cst_read_records(topic, 1, on_keyed, &k, 20000), 1);
    assert_string_equal(k.account, "acct-42");
    char subj[200];
    snprintf(subj, sizeof subj, "%s-key", topic);
    assert_int_equal(cstr_subject_status(subj), 200);
    snprintf(subj, sizeof subj, "%s-value", topic);
    assert_int_equal(cstr_subject_status(subj), 200);
    /* Registered under "<topic>-key": a new codec for the same key subject
     * registering the same schema is answered the key's id. */
    cs_codec *again = cstr_avro_codec(fresh, NULL, topic, true);
    int32_t id = -1;
    CST_OK(cs_codec_registry_schema_id(again, &account_key_type, &id));
    assert_int_equal(id, k.id);
    assert_int_not_equal(id, cstr_wire_id(vb, vl));
    free(kb);
    free(vb);
    cs_codec_registry_destroy(again);
    cs_codec_registry_destroy(dec);
    cs_codec_registry_destroy(kc);
    cs_codec_registry_destroy(vc);
    cs_registry_destroy(fresh);
    cs_registry_destroy(reg);
}

/* ---- dead letters ---------------------------------------------------------------- */

typedef struct dead {
    int n, unknown_id, no_magic;
} dead;

static void on_dead(const rd_kafka_message_t *m, void *arg) {
    dead *d = arg;
    char reason[600];
    if (!cst_header(m, "cstream.dlq.reason", reason, sizeof reason)) fail_msg("dead letter without a reason");
    d->n++;
    if (strstr(reason, "schema id 2147483000")) d->unknown_id++;
    if (strstr(reason, "wire format")) d->no_magic++;
}

static void unknown_id_and_no_magic_are_dead_lettered(void **state) {
    (void)state;
    char topic[128], group[160], dlq[160];
    cst_fresh("avro-dlq", 1, topic, group, sizeof topic);
    cstr_fresh_topic("avro-dlq-dead", dlq, sizeof dlq);
    cs_registry *reg = cstr_client();
    cs_codec *c = cstr_avro_codec(reg, PAYOUT_V1, topic, false);
    /* id 2147483000 (0x7FFFFD78), which no registry here has handed out. */
    static const unsigned char unknown[] = {0, 0x7f, 0xff, 0xfd, 0x78, 2, 4};
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, unknown, sizeof unknown, NULL));
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "{\"id\":1}", 8, NULL)); /* JSON: no magic byte */
    seen s = {.tally = CSTR_TALLY_INIT};
    cs_app *app = start_app("avro-dlq", topic, group, CS_COMMIT_TRACKED, c, &s, NULL, dlq, NULL);
    publish_v1(c, topic, 1);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 3, 30000));
    cstr_assert_each_once(&s.tally, 1, "payout");
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    dead d = {0};
    assert_int_equal(cst_read_records(dlq, 1, on_dead, &d, 20000), 2);
    assert_int_equal(d.unknown_id, 1);
    assert_int_equal(d.no_magic, 1);
    cs_codec_registry_destroy(c);
    cs_registry_destroy(reg);
}

/* ---- outages ---------------------------------------------------------------------- */

/* Under `mode`, with the registry down from before the start: nothing is
 * handled or dead-lettered while it is down, each record exactly once after. */
static void outage(cs_commit_mode mode, const char *prefix) {
    char topic[128], group[160], dlq[160];
    cst_fresh(prefix, 1, topic, group, sizeof topic);
    cstr_fresh_topic("avro-down-dead", dlq, sizeof dlq);
    const int n = 20;
    cs_registry *reg = cstr_client();
    cs_codec *c = cstr_avro_codec(reg, PAYOUT_V1, topic, false);
    publish_v1(c, topic, n); /* registered while the registry is up */

    cstr_stop();
    cs_registry *creg = cstr_client(); /* nothing cached: every id needs the registry */
    assert_int_equal(cs_registry_ping(creg), CS_ERR_UNAVAILABLE);
    assert_non_null(strstr(cs_errmsg(), cstr_url));
    cs_codec *dec = cstr_avro_codec(creg, NULL, NULL, false);
    seen s = {.tally = CSTR_TALLY_INIT};
    cs_sub *sub = NULL;
    cst_capture cap;
    cst_capture_start(&cap);
    cs_app *app = start_app(prefix, topic, group, mode, dec, &s, NULL, mode == CS_COMMIT_TRACKED ? dlq : NULL, &sub);
    bool tried = cst_wait(cstr_tried_twice, creg, 30000);
    char *log = cst_capture_stop(&cap);
    assert_true(tried);
    /* The start says so, naming the registry; readiness says not ready. */
    char line[1024];
    if (!cst_log_line(log, "codec not ready at start", line, sizeof line) || !strstr(line, cstr_url))
        fail_msg("no start-up warning naming %s in:\n%s", cstr_url, log);
    free(log);
    char why[512] = "";
    assert_int_equal(dec->ready(dec, why, sizeof why), 0);
    assert_non_null(strstr(why, cstr_url));
    assert_int_equal(cstr_tally_total(&s.tally), 0);
    cstr_restart();
    cstr_want w = {&s.tally, n};
    assert_true(cst_wait(cstr_reached, &w, 60000));
    assert_int_equal(dec->ready(dec, why, sizeof why), 1);
    /* /metrics carries the registry client's counters. */
    char labels[256];
    snprintf(labels, sizeof labels, "subscription=\"%s\",codec=\"avro\"", topic);
    double v = -1;
    assert_true(cst_metric_value(app, "cstream_codec_registry_unavailable_total", labels, &v));
    assert_true(v >= 2);
    assert_true(cst_metric_value(app, "cstream_codec_registry_lookups_total", labels, &v));
    assert_true(v >= 3);
    if (mode == CS_COMMIT_TRACKED) CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, n, 30000));
    cstr_assert_each_once(&s.tally, n, "payout");
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

static void outage_tracked_loses_nothing(void **state) {
    (void)state;
    outage(CS_COMMIT_TRACKED, "avro-down-t");
}

static void outage_auto_waits_in_place(void **state) {
    (void)state;
    outage(CS_COMMIT_AUTO, "avro-down-a");
}

/* ---- auth and compatibility ------------------------------------------------------ */

static void wrong_password_is_unavailable_not_undecodable(void **state) {
    (void)state;
    if (!cstr_user) fail_msg("the registry runs without --auth: start it with scripts/registry start --auth");
    char topic[128], group[160];
    cst_fresh("avro-auth", 1, topic, group, sizeof topic);
    cs_registry *reg = cstr_client();
    cs_codec *c = cstr_avro_codec(reg, PAYOUT_V1, topic, false);
    payout_v1 p = {3, 300};
    char *buf = NULL;
    size_t len = 0;
    CST_OK(c->encode(c, &payout_v1_type, &p, &buf, &len));
    cs_registry *bad = cstr_client_as("not-the-password");
    cs_codec *dec = cstr_avro_codec(bad, NULL, NULL, false);
    payout_v1 got;
    assert_int_equal(dec->decode(dec, &payout_v1_type, buf, len, &got), CS_ERR_UNAVAILABLE);
    assert_non_null(strstr(cs_errmsg(), "401"));
    cs_codec *enc = cstr_avro_codec(bad, PAYOUT_V1, topic, false);
    char *out = NULL;
    assert_int_equal(enc->encode(enc, &payout_v1_type, &p, &out, &len), CS_ERR_UNAVAILABLE);
    assert_null(out);
    free(buf);
    cs_codec_registry_destroy(enc);
    cs_codec_registry_destroy(dec);
    cs_codec_registry_destroy(c);
    cs_registry_destroy(bad);
    cs_registry_destroy(reg);
}

typedef struct v1b {
    int64_t id;
    char *cents;
} v1b;
static const cs_field v1b_fields[] = {CS_FIELD_I64(v1b, id, CS_REQUIRED), CS_FIELD_STRING(v1b, cents, CS_REQUIRED)};
static CS_TYPE(v1b_type, v1b, v1b_fields);

static void incompatible_schema_is_refused_naming_the_subject(void **state) {
    (void)state;
    char topic[128], group[160], subject[200];
    cst_fresh("avro-compat", 1, topic, group, sizeof topic);
    snprintf(subject, sizeof subject, "subject %s-value", topic);
    cstr_set_compatibility(subject + strlen("subject "), "BACKWARD");
    cs_registry *reg = cstr_client();
    cs_codec *v1 = cstr_avro_codec(reg, PAYOUT_V1, topic, false);
    cs_codec *v3 = cstr_avro_codec(reg, PAYOUT_V3_BAD, topic, false);
    int32_t id;
    CST_OK(cs_codec_registry_schema_id(v1, &payout_v1_type, &id));
    v1b p = {1, "100"};
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(v3->encode(v3, &v1b_type, &p, &out, &len), CS_ERR_ENCODE);
    assert_null(out);
    assert_non_null(strstr(cs_errmsg(), subject));
    assert_non_null(strstr(cs_errmsg(), "incompatible"));
    cs_codec_registry_destroy(v3);
    cs_codec_registry_destroy(v1);
    cs_registry_destroy(reg);
}

int main(void) {
    if (!cstr_init()) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_publish_consume_reply),
        cmocka_unit_test(evolution_both_ways),
        cmocka_unit_test(key_schema),
        cmocka_unit_test(unknown_id_and_no_magic_are_dead_lettered),
        cmocka_unit_test(wrong_password_is_unavailable_not_undecodable),
        cmocka_unit_test(incompatible_schema_is_refused_naming_the_subject),
        cmocka_unit_test_setup(outage_tracked_loses_nothing, cstr_up),
        cmocka_unit_test_setup(outage_auto_waits_in_place, cstr_up),
    };
    int failed = cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
    cstr_up(NULL);
    return failed;
}
