/* test_typed_publish.c — typed publishes (cs_publish_encoded, _async,
 * _with_key) and typed keys in subscriptions (cs_sub_decode_key,
 * cs_delivery_decoded_key) through the real broker (scripts/kafka) and the
 * real Schema Registry (scripts/registry, basic auth), run through
 * tests/with-registry and tests/with-real-broker:
 *
 *   - a typed publish registers its value schema under "<topic>-value" and
 *     its key schema under "<topic>-key"; a Tracked subscription decodes
 *     both before the handler, which sees each record once with its key;
 *   - a publish whose schema the subject's compatibility refuses fails with
 *     CS_ERR_ENCODE naming the topic and the subject, sync and async (whose
 *     completion then never runs), and nothing is published; a codec whose
 *     registry cannot be reached gives CS_ERR_UNAVAILABLE, nothing published;
 *   - a key that does not decode goes to the dead-letter topic (Tracked)
 *     with "key does not decode" in its reason; the handler never sees it;
 *   - Transactional: outputs a handler publishes with
 *     cs_delivery_publish_encoded commit with the input's offset, once each
 *     under read_committed, in the registry's wire format; those of an
 *     attempt that ended in a retry never become visible;
 *   - registry down, Tracked and Transactional: a handler whose encoded
 *     reply answers CS_ERR_UNAVAILABLE retries; those runs take nothing from
 *     max_attempts (more runs than the cap, the service restarted twice
 *     meanwhile under Tracked, nothing dead-lettered, no window aborted under
 *     Transactional), the record backs off in place (its WARN line), and
 *     once the registry is back every record is replied to once, in order.
 *
 * Topics (so TopicName subjects) are fresh per test: the registry and the
 * broker outlive one run. Only the last test stops the registry (and
 * restarts it, also after a failure). */
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

#define PAYOUT_V1                                                                                                      \
    "{\"type\":\"record\",\"name\":\"Payout\",\"namespace\":\"bank\",\"fields\":["                                     \
    "{\"name\":\"id\",\"type\":\"long\"},{\"name\":\"amount\",\"type\":\"long\"}]}"
/* Changes amount's type with no default: BACKWARD refuses it after v1. */
#define PAYOUT_V3_BAD                                                                                                  \
    "{\"type\":\"record\",\"name\":\"Payout\",\"namespace\":\"bank\",\"fields\":["                                     \
    "{\"name\":\"id\",\"type\":\"long\"},{\"name\":\"cents\",\"type\":\"string\"}]}"

typedef struct payout {
    int64_t id, amount;
} payout;
static const cs_field payout_fields[] = {
    CS_FIELD_I64(payout, id, CS_REQUIRED),
    CS_FIELD_I64(payout, amount, CS_REQUIRED),
};
static CS_TYPE(payout_type, payout, payout_fields);

typedef struct bad_payout {
    int64_t id;
    char *cents;
} bad_payout;
static const cs_field bad_payout_fields[] = {CS_FIELD_I64(bad_payout, id, CS_REQUIRED),
                                             CS_FIELD_STRING(bad_payout, cents, CS_REQUIRED)};
static CS_TYPE(bad_payout_type, bad_payout, bad_payout_fields);

typedef struct account_key {
    char *account;
} account_key;
static const cs_field account_key_fields[] = {CS_FIELD_STRING(account_key, account, CS_REQUIRED)};
static CS_TYPE(account_key_type, account_key, account_key_fields);

/* ---- helpers ----------------------------------------------------------------- */

/* What the handler saw: a count per payout id, and whether each key matched. */
#define MAX_IDS 16
typedef struct seen {
    pthread_mutex_t lock;
    int count[MAX_IDS];
    int key_ok[MAX_IDS];
    int total;
} seen;

static cs_outcome on_payout(cs_delivery *d, void *user) {
    seen *s = user;
    const payout *p = cs_delivery_decoded(d);
    const account_key *k = cs_delivery_decoded_key(d);
    char want[32];
    snprintf(want, sizeof want, "acct-%lld", (long long)p->id);
    pthread_mutex_lock(&s->lock);
    if (p->id >= 0 && p->id < MAX_IDS) {
        s->count[p->id]++;
        if (k && k->account && !strcmp(k->account, want)) s->key_ok[p->id]++;
    }
    s->total++;
    pthread_mutex_unlock(&s->lock);
    return CS_ACK;
}

/* An app whose Tracked subscription on `topic` decodes values with `vdec`
 * and keys with `kdec`, with `dlq` as its dead-letter topic (NULL: none). */
static cs_app *start_app(const char *topic, const char *group, const cs_codec *vdec, const cs_codec *kdec,
                         const char *dlq, seen *s, cs_kafka **k_out) {
    cs_app *app = cs_app_new("typed-publish", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_topic(k, topic, 1));
    if (dlq) CST_OK(cs_kafka_topic(k, dlq, 1));
    cs_sub *sub = cs_kafka_subscribe(k, topic, on_payout, s);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_decode(sub, vdec, &payout_type));
    CST_OK(cs_sub_decode_key(sub, kdec, &account_key_type));
    if (dlq) {
        CST_OK(cs_sub_max_attempts(sub, 3));
        CST_OK(cs_sub_dead_letter(sub, dlq));
    }
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *k_out = k;
    return app;
}

typedef struct async_done {
    atomic_int calls;
    atomic_int ok;
} async_done;

static void on_async(const cs_published *where, cs_err err, void *opaque) {
    async_done *a = opaque;
    if (err == CS_OK && where) atomic_fetch_add(&a->ok, 1);
    atomic_fetch_add(&a->calls, 1);
}

static bool async_finished(void *arg) { return atomic_load(&((async_done *)arg)->calls) > 0; }

/* ---- typed publish, typed key ---------------------------------------------------- */

typedef struct ids {
    int n;
    int32_t key_id, value_id;
} ids;

static void on_record_ids(const rd_kafka_message_t *m, void *arg) {
    ids *i = arg;
    i->key_id = cstr_wire_id(m->key, m->key_len);
    i->value_id = cstr_wire_id(m->payload, m->len);
    i->n++;
}

static void typed_publish_registers_and_typed_key_decodes(void **state) {
    (void)state;
    enum { N = 5 };
    char topic[128], group[160], subject[200];
    cst_fresh("typed-pub", 1, topic, group, sizeof topic);
    cs_registry *reg = cstr_client();
    cs_codec *kc = cstr_avro_codec(reg, NULL, topic, true);
    cs_codec *vc = cstr_avro_codec(reg, PAYOUT_V1, topic, false);
    /* The subscription's own client: it learns the schemas from the ids. */
    cs_registry *reg2 = cstr_client();
    cs_codec *kdec = cstr_avro_codec(reg2, NULL, NULL, false);
    cs_codec *vdec = cstr_avro_codec(reg2, PAYOUT_V1, NULL, false);
    seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    cs_kafka *k;
    cs_app *app = start_app(topic, group, vdec, kdec, NULL, &s, &k);

    for (int i = 0; i < N - 1; i++) {
        char acct[32];
        snprintf(acct, sizeof acct, "acct-%d", i);
        account_key key = {acct};
        payout p = {i, i * 100};
        cs_published where = {-1, -1};
        CST_OK(cs_publish_encoded_with_key(k, topic, kc, &account_key_type, &key, vc, &payout_type, &p, &where));
        assert_int_equal(where.offset, i);
    }
    /* The async twin, with the key encoded by hand (raw key bytes). */
    account_key last_key = {"acct-4"};
    char *kb = NULL;
    size_t kl = 0;
    CST_OK(kc->encode(kc, &account_key_type, &last_key, &kb, &kl));
    payout last = {N - 1, (N - 1) * 100};
    async_done a = {0};
    CST_OK(cs_publish_encoded_async(k, topic, kb, kl, vc, &payout_type, &last, on_async, &a));
    free(kb);
    assert_true(cst_wait(async_finished, &a, 20000));
    assert_int_equal(atomic_load(&a.ok), 1);

    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, N, 30000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    assert_int_equal(s.total, N);
    for (int i = 0; i < N; i++) {
        if (s.count[i] != 1) fail_msg("payout %d handled %d times", i, s.count[i]);
        if (s.key_ok[i] != 1) fail_msg("payout %d: its decoded key was not acct-%d", i, i);
    }
    snprintf(subject, sizeof subject, "%s-value", topic);
    assert_int_equal(cstr_subject_status(subject), 200);
    snprintf(subject, sizeof subject, "%s-key", topic);
    assert_int_equal(cstr_subject_status(subject), 200);

    ids got = {0};
    assert_int_equal(cst_read_records(topic, 1, on_record_ids, &got, 20000), N);
    int32_t key_id = -1, value_id = -1;
    CST_OK(cs_codec_registry_schema_id(kc, &account_key_type, &key_id));
    CST_OK(cs_codec_registry_schema_id(vc, &payout_type, &value_id));
    assert_int_equal(got.key_id, key_id);
    assert_int_equal(got.value_id, value_id);
    /* Registered once per codec, not once per record. */
    cs_registry_stats st;
    CST_OK(cs_registry_stats_get(reg, &st));
    assert_true(st.requests <= 2);

    cs_codec_registry_destroy(kdec);
    cs_codec_registry_destroy(vdec);
    cs_codec_registry_destroy(kc);
    cs_codec_registry_destroy(vc);
    cs_registry_destroy(reg2);
    cs_registry_destroy(reg);
}

/* ---- refused publishes ------------------------------------------------------------ */

static void count_record(const rd_kafka_message_t *m, void *arg) {
    (void)m;
    (*(int *)arg)++;
}

static void refused_publish_publishes_nothing(void **state) {
    (void)state;
    char topic[128], group[160], subject[200];
    cst_fresh("typed-refused", 1, topic, group, sizeof topic);
    snprintf(subject, sizeof subject, "%s-value", topic);
    cstr_set_compatibility(subject, "BACKWARD");
    cs_registry *reg = cstr_client();
    cs_codec *v1 = cstr_avro_codec(reg, PAYOUT_V1, topic, false);
    cs_codec *v3 = cstr_avro_codec(reg, PAYOUT_V3_BAD, topic, false);
    /* A registry nobody listens on: port 1 on loopback refuses at once. */
    cs_registry *gone = cs_registry_new("http://127.0.0.1:1");
    cs_codec *unreachable = cstr_avro_codec(gone, PAYOUT_V1, topic, false);

    cs_app *app = cs_app_new("typed-refused", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_topic(k, topic, 1));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));

    payout p = {1, 100};
    CST_OK(cs_publish_encoded(k, topic, "k", 1, v1, &payout_type, &p, NULL));
    bad_payout b = {2, "200"};
    assert_int_equal(cs_publish_encoded(k, topic, "k", 1, v3, &bad_payout_type, &b, NULL), CS_ERR_ENCODE);
    assert_non_null(strstr(cs_errmsg(), subject));
    assert_non_null(strstr(cs_errmsg(), "incompatible"));
    assert_non_null(strstr(cs_errmsg(), "nothing published"));
    assert_non_null(strstr(cs_errmsg(), topic));
    async_done a = {0};
    assert_int_equal(cs_publish_encoded_async(k, topic, NULL, 0, v3, &bad_payout_type, &b, on_async, &a),
                     CS_ERR_ENCODE);
    assert_int_equal(cs_publish_encoded(k, topic, NULL, 0, unreachable, &payout_type, &p, NULL), CS_ERR_UNAVAILABLE);
    assert_non_null(strstr(cs_errmsg(), "127.0.0.1:1"));
    /* An unencodable key publishes nothing either, the value being fine. */
    account_key nokey = {NULL};
    cs_codec *kc = cstr_avro_codec(reg, NULL, topic, true);
    assert_int_equal(cs_publish_encoded_with_key(k, topic, kc, &account_key_type, &nokey, v1, &payout_type, &p, NULL),
                     CS_ERR_ENCODE);
    assert_non_null(strstr(cs_errmsg(), "key of type account_key"));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    assert_int_equal(atomic_load(&a.calls), 0);

    int n = 0;
    assert_int_equal(cst_read_records(topic, 1, count_record, &n, 20000), 1);
    assert_int_equal(n, 1);
    cs_codec_registry_destroy(kc);
    cs_codec_registry_destroy(unreachable);
    cs_codec_registry_destroy(v3);
    cs_codec_registry_destroy(v1);
    cs_registry_destroy(gone);
    cs_registry_destroy(reg);
}

/* ---- a key that does not decode ---------------------------------------------------- */

typedef struct dead {
    int n, key_reason;
} dead;

static void on_dead(const rd_kafka_message_t *m, void *arg) {
    dead *d = arg;
    char reason[600];
    if (!cst_header(m, "cstream.dlq.reason", reason, sizeof reason)) fail_msg("dead letter without a reason");
    d->n++;
    if (strstr(reason, "key does not decode as account_key") && strstr(reason, "wire format")) d->key_reason++;
    else fprintf(stderr, "dead letter reason: %s\n", reason);
}

static void undecodable_key_is_dead_lettered(void **state) {
    (void)state;
    char topic[128], group[160], dlq[160], dgroup[160];
    cst_fresh("typed-badkey", 1, topic, group, sizeof topic);
    cst_fresh("typed-badkey-dead", 1, dlq, dgroup, sizeof dlq);
    cs_registry *reg = cstr_client();
    cs_codec *kc = cstr_avro_codec(reg, NULL, topic, true);
    cs_codec *vc = cstr_avro_codec(reg, PAYOUT_V1, topic, false);
    cs_codec *dec = cstr_avro_codec(reg, NULL, NULL, false);
    seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    cs_kafka *k;
    cs_app *app = start_app(topic, group, dec, dec, dlq, &s, &k);
    payout bad = {0, 0}, good = {1, 100};
    account_key key = {"acct-1"};
    /* A raw key, not in the registry's wire format, with a good value. */
    CST_OK(cs_publish_encoded(k, topic, "plain", 5, vc, &payout_type, &bad, NULL));
    CST_OK(cs_publish_encoded_with_key(k, topic, kc, &account_key_type, &key, vc, &payout_type, &good, NULL));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 2, 30000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    assert_int_equal(s.total, 1);
    assert_int_equal(s.count[1], 1);
    assert_int_equal(s.key_ok[1], 1);
    dead d = {0};
    assert_int_equal(cst_read_records(dlq, 1, on_dead, &d, 20000), 1);
    assert_int_equal(d.key_reason, 1);
    cs_codec_registry_destroy(dec);
    cs_codec_registry_destroy(kc);
    cs_codec_registry_destroy(vc);
    cs_registry_destroy(reg);
}

/* ---- Transactional: typed outputs of a delivery ------------------------------------- */

typedef struct transformer {
    const cs_codec *out_codec;
    const char *out;
    _Atomic int retried, publish_failures;
} transformer;

/* What an attempt that then retries adds to its output's amount: such an
 * output must never become visible. */
#define DISCARDED_MARK 1000000

/* Publishes a doubled payout for each input; an even id's first attempt
 * publishes a marked one, then asks for a retry, so its output must be
 * discarded. (A window rewound meanwhile re-runs records with their attempt
 * counts kept, so no run but a first one is ever marked.) */
static cs_outcome double_payout(cs_delivery *d, void *user) {
    transformer *t = user;
    const payout *p = cs_delivery_decoded(d);
    bool retry = p->id % 2 == 0 && cs_delivery_attempt(d) == 1;
    payout doubled = {p->id, p->amount * 2 + (retry ? DISCARDED_MARK : 0)};
    if (cs_delivery_publish_encoded(d, t->out, NULL, 0, t->out_codec, &payout_type, &doubled)) {
        atomic_fetch_add(&t->publish_failures, 1);
        return CS_RETRY;
    }
    if (retry) {
        atomic_fetch_add(&t->retried, 1);
        return CS_RETRY;
    }
    return CS_ACK;
}

typedef struct outputs {
    const cs_codec *dec;
    int32_t want_id;
    int count[MAX_IDS];
    int wrong_value, wrong_id;
} outputs;

static void on_output(const rd_kafka_message_t *m, void *arg) {
    outputs *o = arg;
    if (cstr_wire_id(m->payload, m->len) != o->want_id) o->wrong_id++;
    payout p = {0};
    CST_OK(o->dec->decode(o->dec, &payout_type, m->payload, m->len, &p));
    if (p.id < 0 || p.id >= MAX_IDS) fail_msg("output with id %lld", (long long)p.id);
    o->count[p.id]++;
    if (p.amount != p.id * 100 * 2) o->wrong_value++; /* a marked output leaked, or a wrong one */
}

static void transactional_outputs_are_published_once(void **state) {
    (void)state;
    enum { N = 6 };
    char in[128], group[160], out[128];
    cst_fresh("typed-txn-in", 1, in, group, sizeof in);
    cstr_fresh_topic("typed-txn-out", out, sizeof out);
    cs_registry *reg = cstr_client();
    cs_codec *in_enc = cstr_avro_codec(reg, PAYOUT_V1, in, false);
    cs_codec *out_enc = cstr_avro_codec(reg, PAYOUT_V1, out, false);
    cs_codec *dec = cstr_avro_codec(reg, PAYOUT_V1, NULL, false);

    transformer t = {.out_codec = out_enc, .out = out};
    cs_app *app = cs_app_new("typed-txn", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_instance_id(k, in)); /* Transactional needs one: the fresh topic's name is unique */
    CST_OK(cs_kafka_topic(k, in, 1));
    CST_OK(cs_kafka_topic(k, out, 1));
    cs_sub *sub = cs_kafka_subscribe(k, in, double_payout, &t);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, CS_COMMIT_TRANSACTIONAL));
    CST_OK(cs_sub_decode(sub, dec, &payout_type));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    for (int i = 0; i < N; i++) {
        payout p = {i, i * 100};
        CST_OK(cs_publish_encoded(k, in, NULL, 0, in_enc, &payout_type, &p, NULL));
    }
    CST_OK(cs_test_wait_committed(cst_cluster, group, in, 0, N, 60000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    assert_int_equal(atomic_load(&t.publish_failures), 0);
    assert_true(atomic_load(&t.retried) >= N / 2);

    outputs o = {.dec = dec};
    CST_OK(cs_codec_registry_schema_id(out_enc, &payout_type, &o.want_id));
    assert_int_equal(cst_read_records(out, 1, on_output, &o, 20000), N);
    for (int i = 0; i < N; i++)
        if (o.count[i] != 1) fail_msg("payout %d has %d committed outputs", i, o.count[i]);
    assert_int_equal(o.wrong_value, 0);
    assert_int_equal(o.wrong_id, 0);
    cs_codec_registry_destroy(dec);
    cs_codec_registry_destroy(out_enc);
    cs_codec_registry_destroy(in_enc);
    cs_registry_destroy(reg);
}

/* ---- an encode during a registry outage takes no attempt --------------------------- */

typedef struct replier {
    const cs_codec *codec;
    _Atomic int unavailable, errors;
    pthread_mutex_t lock;
    int64_t acked_ids[MAX_IDS]; /* ids in the order they were acked */
    int acks;
} replier;

static cs_outcome reply_payout(cs_delivery *d, void *user) {
    replier *r = user;
    size_t len;
    const char *v = cs_delivery_value(d, &len);
    char id[16] = "";
    memcpy(id, v, len < sizeof id - 1 ? len : sizeof id - 1); /* a value is not NUL-terminated */
    payout p = {strtoll(id, NULL, 10), 7};
    cs_err err = cs_delivery_reply_encoded(d, r->codec, &payout_type, &p);
    if (err == CS_ERR_UNAVAILABLE) {
        atomic_fetch_add(&r->unavailable, 1);
        return CS_RETRY;
    }
    if (err) { /* asserted on the test's thread */
        atomic_fetch_add(&r->errors, 1);
        return CS_RETRY;
    }
    pthread_mutex_lock(&r->lock);
    if (r->acks < MAX_IDS) r->acked_ids[r->acks++] = p.id;
    pthread_mutex_unlock(&r->lock);
    return CS_ACK;
}

typedef struct runs_past {
    replier *r;
    int n;
} runs_past;

static bool unavailable_reached(void *arg) {
    runs_past *w = arg;
    return atomic_load(&w->r->unavailable) >= w->n;
}

static void on_reply(const rd_kafka_message_t *m, void *arg) {
    outputs *o = arg;
    payout p = {0};
    CST_OK(o->dec->decode(o->dec, &payout_type, m->payload, m->len, &p));
    if (p.id < 0 || p.id >= MAX_IDS) fail_msg("reply with id %lld", (long long)p.id);
    o->count[p.id]++;
}

enum { OUTAGE_N = 3, OUTAGE_CAP = 2, STALL_MS = 1000 };

static cs_app *start_replier(const char *in, const char *group, const char *out, const char *dlq, cs_commit_mode mode,
                             replier *r, cs_sub **sub_out) {
    cs_app *app = cs_app_new("typed-outage", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    if (mode == CS_COMMIT_TRANSACTIONAL) CST_OK(cs_kafka_instance_id(k, in)); /* unique: the fresh topic's name */
    CST_OK(cs_kafka_topic(k, out, 1));
    CST_OK(cs_kafka_topic(k, dlq, 1));
    cs_sub *sub = cs_kafka_subscribe(k, in, reply_payout, r);
    CST_OK(cs_sub_group(sub, group));
    CST_OK(cs_sub_commit_mode(sub, mode));
    CST_OK(cs_sub_reply(sub, out, 5000));
    CST_OK(cs_sub_max_attempts(sub, OUTAGE_CAP));
    CST_OK(cs_sub_dead_letter(sub, dlq));
    if (mode == CS_COMMIT_TRANSACTIONAL) CST_OK(cs_sub_stall_timeout_ms(sub, STALL_MS));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *sub_out = sub;
    return app;
}

/* The registry is down before the start, so the reply codec (never used
 * yet) cannot register its schema: every run of the first record ends in
 * CS_ERR_UNAVAILABLE and a retry. More such runs than the cap allows, and
 * (Tracked) the service stopped and started twice meanwhile, so that an
 * attempt counted for a run that has not happened yet would reach the
 * next owner through the committed metadata: nothing may be dead-lettered.
 * Transactional: with a 1 s stall timeout, no window is aborted for it. */
static void encode_outage(cs_commit_mode mode, const char *prefix) {
    char in[128], group[160], out[128], dlq[128];
    cst_fresh(prefix, 1, in, group, sizeof in);
    cstr_fresh_topic("typed-outage-out", out, sizeof out);
    cstr_fresh_topic("typed-outage-dead", dlq, sizeof dlq);
    cs_registry *reg = cstr_client();
    cs_codec *out_enc = cstr_avro_codec(reg, PAYOUT_V1, out, false); /* never registered yet: needs the registry */
    cs_codec *dec = cstr_avro_codec(reg, PAYOUT_V1, NULL, false);
    for (int i = 0; i < OUTAGE_N; i++) {
        char v[8];
        snprintf(v, sizeof v, "%d", i);
        CST_OK(cs_test_produce(cst_cluster, in, 0, NULL, 0, v, strlen(v), NULL));
    }

    cstr_stop();
    replier r = {.codec = out_enc, .lock = PTHREAD_MUTEX_INITIALIZER};
    cs_sub *sub;
    cs_sub_stats st;
    cst_capture cap;
    cst_capture_start(&cap);
    cs_app *app = start_replier(in, group, out, dlq, mode, &r, &sub);
    runs_past w = {&r, OUTAGE_CAP + 3};
    assert_true(cst_wait(unavailable_reached, &w, 60000));
    for (int restart = 0; mode == CS_COMMIT_TRACKED && restart < 2; restart++) {
        CST_OK(cs_app_stop(app));
        cs_app_destroy(app);
        app = start_replier(in, group, out, dlq, mode, &r, &sub);
        w.n = atomic_load(&r.unavailable) + OUTAGE_CAP + 1;
        assert_true(cst_wait(unavailable_reached, &w, 60000));
    }
    cs_sub_stats_get(sub, &st);
    assert_int_equal(st.dead_lettered, 0);
    assert_int_equal(st.acked, 0);
    cstr_restart();
    CST_OK(cs_test_wait_committed(cst_cluster, group, in, 0, OUTAGE_N, 60000));
    CST_OK(cs_app_stop(app));
    cs_sub_stats_get(sub, &st);
    cs_app_destroy(app);
    char *log = cst_capture_stop(&cap);
    char line[1024];
    if (!cst_log_line(log, "record retried after its schema registry was unavailable", line, sizeof line) ||
        !strstr(line, "wait_ms="))
        fail_msg("no back-off line in:\n%s", log);
    free(log);
    assert_int_equal(atomic_load(&r.errors), 0);
    assert_int_equal(st.dead_lettered, 0);
    assert_int_equal(st.aborts, 0);
    assert_int_equal(r.acks, OUTAGE_N);
    for (int i = 0; i < OUTAGE_N; i++) assert_int_equal(r.acked_ids[i], i);

    outputs o = {.dec = dec};
    assert_int_equal(cst_read_records(out, 1, on_reply, &o, 20000), OUTAGE_N);
    for (int i = 0; i < OUTAGE_N; i++)
        if (o.count[i] != 1) fail_msg("payout %d has %d replies", i, o.count[i]);
    dead none = {0};
    assert_int_equal(cst_read_records(dlq, 1, on_dead, &none, 20000), 0);
    cs_codec_registry_destroy(dec);
    cs_codec_registry_destroy(out_enc);
    cs_registry_destroy(reg);
}

static void encode_outage_takes_no_attempt_tracked(void **state) {
    (void)state;
    encode_outage(CS_COMMIT_TRACKED, "typed-outage-tracked");
}

static void encode_outage_takes_no_attempt_transactional(void **state) {
    (void)state;
    encode_outage(CS_COMMIT_TRANSACTIONAL, "typed-outage-txn");
}

int main(void) {
    if (!cstr_init()) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(typed_publish_registers_and_typed_key_decodes),
        cmocka_unit_test(refused_publish_publishes_nothing),
        cmocka_unit_test(undecodable_key_is_dead_lettered),
        cmocka_unit_test(transactional_outputs_are_published_once),
        cmocka_unit_test_setup(encode_outage_takes_no_attempt_tracked, cstr_up),
        cmocka_unit_test_setup(encode_outage_takes_no_attempt_transactional, cstr_up),
    };
    int failed = cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
    cstr_up(NULL);
    return failed;
}
