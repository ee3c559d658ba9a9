/*
 * test_protobuf.c - unit tests for the Protobuf codec (src/codec/protobuf_*.c)
 * on the messages of tests/proto/payments.proto: round trips of every scalar
 * type, nested and repeated messages, packed arrays, enums, each oneof
 * branch and maps, the bytes checked against protobuf-c's own pack; proto2
 * required fields missing on decode and on encode, named; truncated, wrongly
 * typed and random input (CS_ERR_DECODE with a reason, never a crash, the
 * value left zeroed); nesting bounded at CS_PROTOBUF_MAX_DEPTH both ways; the
 * codec's accessors and argument checks. Random input
 * replays with CS_TEST_SEED=<seed>.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cstream/error.h"
#include "cstream/protobuf.h"
#include "payments.pb-c.h"

extern const char payments_proto_text[]; /* tests/proto/payments.proto, embedded at build time */

#define RANDOM_ROUNDS 20000 /* random payloads per run: enough to reach nested fields, well under a second */
#define RANDOM_MAX_LEN 64

static cs_codec *payout_codec, *scalars_codec;

static int setup(void **state) {
    (void)state;
    if (cs_codec_protobuf_new(&payments__payout__descriptor, payments_proto_text, &payout_codec) != CS_OK) return -1;
    return cs_codec_protobuf_new(&payments__scalars__descriptor, NULL, &scalars_codec) == CS_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    cs_codec_protobuf_destroy(payout_codec);
    cs_codec_protobuf_destroy(scalars_codec);
    return 0;
}

/* protobuf-c's own bytes for a message. */
static uint8_t *pack(const ProtobufCMessage *m, size_t *len) {
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(*len + 1);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(m, buf), *len);
    return buf;
}

/* Encodes m with the codec, checks the bytes are protobuf-c's, decodes them
 * into *out (the caller frees it with cs_codec_free_value). */
static void round_trip(cs_codec *c, const ProtobufCMessage *m, void *out) {
    const cs_type *t = cs_codec_protobuf_type(c);
    char *bytes = NULL;
    size_t len = 0, want_len;
    assert_int_equal(c->encode(c, t, m, &bytes, &len), CS_OK);
    uint8_t *want = pack(m, &want_len);
    assert_int_equal(len, want_len);
    assert_memory_equal(bytes, want, len);
    free(want);
    assert_int_equal(c->decode(c, t, bytes, len, out), CS_OK);
    free(bytes);
}

static void decode_fails(cs_codec *c, const void *data, size_t len, const char *needle) {
    const cs_type *t = cs_codec_protobuf_type(c);
    unsigned char *out = malloc(t->size);
    assert_non_null(out);
    memset(out, 0xa5, t->size);
    assert_int_equal(c->decode(c, t, data, len, out), CS_ERR_DECODE);
    if (needle && !strstr(cs_errmsg(), needle)) fail_msg("message \"%s\" lacks \"%s\"", cs_errmsg(), needle);
    for (size_t i = 0; i < t->size; i++) assert_int_equal(out[i], 0); /* left zeroed */
    cs_codec_free_value(c, t, out);                                   /* and safe to free */
    free(out);
}

static void test_every_scalar_round_trips(void **state) {
    (void)state;
    static const uint8_t blob[] = {0, 1, 2, 0xff, 0};
    Payments__Scalars s = PAYMENTS__SCALARS__INIT;
    s.has_f_double = s.has_f_float = s.has_f_int32 = s.has_f_int64 = s.has_f_uint32 = s.has_f_uint64 = 1;
    s.has_f_sint32 = s.has_f_sint64 = s.has_f_fixed32 = s.has_f_fixed64 = s.has_f_sfixed32 = 1;
    s.has_f_sfixed64 = s.has_f_bool = s.has_f_bytes = 1;
    s.f_double = -DBL_MAX;
    s.f_float = FLT_MIN;
    s.f_int32 = INT32_MIN;
    s.f_int64 = INT64_MIN;
    s.f_uint32 = UINT32_MAX;
    s.f_uint64 = UINT64_MAX;
    s.f_sint32 = -1;
    s.f_sint64 = INT64_MAX;
    s.f_fixed32 = 0xdeadbeef;
    s.f_fixed64 = 0x0123456789abcdefULL;
    s.f_sfixed32 = -7;
    s.f_sfixed64 = INT64_MIN + 1;
    s.f_bool = 1;
    s.f_string = "grüße \xf0\x9f\x92\xb6";
    s.f_bytes = (ProtobufCBinaryData){sizeof blob, (uint8_t *)blob};
    Payments__Scalars got;
    round_trip(scalars_codec, &s.base, &got);
    assert_ptr_equal(got.base.descriptor, &payments__scalars__descriptor);
    assert_true(got.f_double == -DBL_MAX && got.f_float == FLT_MIN);
    assert_true(got.f_int32 == INT32_MIN && got.f_int64 == INT64_MIN);
    assert_true(got.f_uint32 == UINT32_MAX && got.f_uint64 == UINT64_MAX);
    assert_true(got.f_sint32 == -1 && got.f_sint64 == INT64_MAX);
    assert_true(got.f_fixed32 == 0xdeadbeef && got.f_fixed64 == 0x0123456789abcdefULL);
    assert_true(got.f_sfixed32 == -7 && got.f_sfixed64 == INT64_MIN + 1);
    assert_true(got.has_f_bool && got.f_bool);
    assert_string_equal(got.f_string, s.f_string);
    assert_int_equal(got.f_bytes.len, sizeof blob);
    assert_memory_equal(got.f_bytes.data, blob, sizeof blob);
    cs_codec_free_value(scalars_codec, cs_codec_protobuf_type(scalars_codec), &got);
    assert_null(got.base.descriptor); /* zeroed */

    /* An empty payload is the message with every field at its default. */
    const cs_type *t = cs_codec_protobuf_type(scalars_codec);
    assert_int_equal(scalars_codec->decode(scalars_codec, t, "", 0, &got), CS_OK);
    assert_false(got.has_f_int64);
    assert_null(got.f_string);
    cs_codec_free_value(scalars_codec, t, &got);
}

/* A payout with nested, repeated, packed, enum and map fields filled in. */
typedef struct payout_parts {
    Payments__Party payee, cc[2], agent, witness;
    Payments__Party *ccs[2];
    char *tags[3];
    int64_t splits[3];
    uint32_t codes[2];
    Payments__Currency accepted[2];
    Payments__Payout__LimitsEntry limit[2];
    Payments__Payout__LimitsEntry *limits[2];
    Payments__Payout__WitnessesEntry wentry;
    Payments__Payout__WitnessesEntry *wentries[1];
    Payments__Payout p;
} payout_parts;

static void fill_payout(payout_parts *x) {
    Payments__Party party = PAYMENTS__PARTY__INIT;
    Payments__Payout p = PAYMENTS__PAYOUT__INIT;
    Payments__Payout__LimitsEntry le = PAYMENTS__PAYOUT__LIMITS_ENTRY__INIT;
    Payments__Payout__WitnessesEntry we = PAYMENTS__PAYOUT__WITNESSES_ENTRY__INIT;
    x->payee = x->cc[0] = x->cc[1] = x->agent = x->witness = party;
    x->payee.name = "Ada";
    x->payee.iban = "DE89370400440532013000";
    x->cc[0].name = "Bob";
    x->cc[1].name = "Cy";
    x->agent.name = "Agent";
    x->witness.name = "Wit";
    x->ccs[0] = &x->cc[0];
    x->ccs[1] = &x->cc[1];
    x->tags[0] = "a";
    x->tags[1] = "";
    x->tags[2] = "ccc";
    x->splits[0] = -1;
    x->splits[1] = 0;
    x->splits[2] = INT64_MAX;
    x->codes[0] = 7;
    x->codes[1] = UINT32_MAX;
    x->accepted[0] = PAYMENTS__CURRENCY__GBP;
    x->accepted[1] = PAYMENTS__CURRENCY__USD;
    x->limit[0] = x->limit[1] = le;
    x->limit[0].key = "daily";
    x->limit[0].has_value = 1;
    x->limit[0].value = 5000;
    x->limit[1].key = "monthly";
    x->limit[1].has_value = 1;
    x->limit[1].value = -3;
    x->limits[0] = &x->limit[0];
    x->limits[1] = &x->limit[1];
    x->wentry = we;
    x->wentry.has_key = 1;
    x->wentry.key = -42;
    x->wentry.value = &x->witness;
    x->wentries[0] = &x->wentry;
    p.id = 118;
    p.amount_cents = -250;
    p.has_currency = 1;
    p.currency = PAYMENTS__CURRENCY__USD;
    p.memo = "rent";
    p.payee = &x->payee;
    p.n_cc = 2;
    p.cc = x->ccs;
    p.n_tags = 3;
    p.tags = x->tags;
    p.n_splits = 3;
    p.splits = x->splits;
    p.n_codes = 2;
    p.codes = x->codes;
    p.n_accepted = 2;
    p.accepted = x->accepted;
    p.n_limits = 2;
    p.limits = x->limits;
    p.n_witnesses = 1;
    p.witnesses = x->wentries;
    x->p = p;
}

static void test_nested_repeated_enums_and_maps_round_trip(void **state) {
    (void)state;
    payout_parts x;
    fill_payout(&x);
    Payments__Payout got;
    round_trip(payout_codec, &x.p.base, &got);
    assert_int_equal(got.id, 118);
    assert_int_equal(got.amount_cents, -250);
    assert_true(got.has_currency);
    assert_int_equal(got.currency, PAYMENTS__CURRENCY__USD);
    assert_string_equal(got.memo, "rent");
    assert_string_equal(got.payee->name, "Ada");
    assert_string_equal(got.payee->iban, "DE89370400440532013000");
    assert_int_equal(got.n_cc, 2);
    assert_string_equal(got.cc[1]->name, "Cy");
    assert_null(got.cc[1]->iban);
    assert_int_equal(got.n_tags, 3);
    assert_string_equal(got.tags[0], "a");
    assert_string_equal(got.tags[1], "");
    assert_string_equal(got.tags[2], "ccc");
    assert_int_equal(got.n_splits, 3);
    assert_true(got.splits[0] == -1 && got.splits[2] == INT64_MAX);
    assert_int_equal(got.n_codes, 2);
    assert_true(got.codes[1] == UINT32_MAX);
    assert_int_equal(got.n_accepted, 2);
    assert_int_equal(got.accepted[0], PAYMENTS__CURRENCY__GBP);
    /* maps arrive as their entries, in the order written */
    assert_int_equal(got.n_limits, 2);
    assert_string_equal(got.limits[0]->key, "daily");
    assert_int_equal(got.limits[0]->value, 5000);
    assert_string_equal(got.limits[1]->key, "monthly");
    assert_int_equal(got.limits[1]->value, -3);
    assert_int_equal(got.n_witnesses, 1);
    assert_int_equal(got.witnesses[0]->key, -42);
    assert_string_equal(got.witnesses[0]->value->name, "Wit");
    assert_int_equal(got.route_case, PAYMENTS__PAYOUT__ROUTE__NOT_SET);
    assert_null(got.scalars);
    cs_codec_free_value(payout_codec, cs_codec_protobuf_type(payout_codec), &got);

    /* An absent enum takes the .proto's default. */
    x.p.has_currency = 0;
    x.p.currency = PAYMENTS__CURRENCY__GBP;
    round_trip(payout_codec, &x.p.base, &got);
    assert_false(got.has_currency);
    assert_int_equal(got.currency, PAYMENTS__CURRENCY__EUR);
    cs_codec_free_value(payout_codec, cs_codec_protobuf_type(payout_codec), &got);
}

static void test_each_oneof_branch_round_trips(void **state) {
    (void)state;
    payout_parts x;
    fill_payout(&x);
    const cs_type *t = cs_codec_protobuf_type(payout_codec);
    Payments__Payout got;

    x.p.route_case = PAYMENTS__PAYOUT__ROUTE_IBAN;
    x.p.iban = "GB33BUKB20201555555555";
    round_trip(payout_codec, &x.p.base, &got);
    assert_int_equal(got.route_case, PAYMENTS__PAYOUT__ROUTE_IBAN);
    assert_string_equal(got.iban, "GB33BUKB20201555555555");
    cs_codec_free_value(payout_codec, t, &got);

    x.p.route_case = PAYMENTS__PAYOUT__ROUTE_CARD_TOKEN;
    x.p.card_token = UINT64_MAX - 1;
    round_trip(payout_codec, &x.p.base, &got);
    assert_int_equal(got.route_case, PAYMENTS__PAYOUT__ROUTE_CARD_TOKEN);
    assert_true(got.card_token == UINT64_MAX - 1);
    cs_codec_free_value(payout_codec, t, &got);

    x.p.route_case = PAYMENTS__PAYOUT__ROUTE_AGENT;
    x.p.agent = &x.agent;
    round_trip(payout_codec, &x.p.base, &got);
    assert_int_equal(got.route_case, PAYMENTS__PAYOUT__ROUTE_AGENT);
    assert_string_equal(got.agent->name, "Agent");
    cs_codec_free_value(payout_codec, t, &got);

    /* Two branches on the wire: the last one wins, as Protobuf says. */
    size_t a_len, b_len;
    x.p.route_case = PAYMENTS__PAYOUT__ROUTE_IBAN;
    x.p.iban = "first";
    uint8_t *a = pack(&x.p.base, &a_len);
    Payments__Payout only_card = PAYMENTS__PAYOUT__INIT;
    only_card.route_case = PAYMENTS__PAYOUT__ROUTE_CARD_TOKEN;
    only_card.card_token = 9;
    only_card.payee = &x.payee;
    uint8_t *b = pack(&only_card.base, &b_len);
    uint8_t *both = malloc(a_len + b_len);
    memcpy(both, a, a_len);
    memcpy(both + a_len, b, b_len);
    assert_int_equal(payout_codec->decode(payout_codec, t, both, a_len + b_len, &got), CS_OK);
    assert_int_equal(got.route_case, PAYMENTS__PAYOUT__ROUTE_CARD_TOKEN);
    assert_int_equal(got.card_token, 9);
    cs_codec_free_value(payout_codec, t, &got);
    free(a);
    free(b);
    free(both);
}

static void test_required_fields_are_named(void **state) {
    (void)state;
    /* id (1) = 5 only: amount_cents and payee are missing. */
    static const uint8_t only_id[] = {0x08, 0x05};
    decode_fails(payout_codec, only_id, sizeof only_id, "field \"amount_cents\" (2): missing (required)");
    assert_non_null(strstr(cs_errmsg(), "message payments.Payout"));
    /* id, amount_cents, and payee {} without its required name. */
    static const uint8_t nameless_payee[] = {0x08, 0x05, 0x10, 0x01, 0x2a, 0x00};
    decode_fails(payout_codec, nameless_payee, sizeof nameless_payee, "field \"payee.name\" (1): missing (required)");
    /* The empty payload lacks id. */
    decode_fails(payout_codec, "", 0, "field \"id\" (1): missing (required)");

    /* Encode refuses a required string or message that is NULL, by path. */
    payout_parts x;
    fill_payout(&x);
    const cs_type *t = cs_codec_protobuf_type(payout_codec);
    char *bytes = (char *)"untouched";
    size_t len = 1;
    x.p.payee = NULL;
    assert_int_equal(payout_codec->encode(payout_codec, t, &x.p, &bytes, &len), CS_ERR_ENCODE);
    assert_non_null(strstr(cs_errmsg(), "field \"payee\": missing (required)"));
    assert_null(bytes);
    assert_int_equal(len, 0);
    x.p.payee = &x.payee;
    x.cc[1].name = NULL;
    assert_int_equal(payout_codec->encode(payout_codec, t, &x.p, &bytes, &len), CS_ERR_ENCODE);
    assert_non_null(strstr(cs_errmsg(), "field \"cc[1].name\": missing (required)"));
    x.cc[1].name = "Cy";
    x.wentry.value = &x.witness;
    x.witness.name = NULL;
    assert_int_equal(payout_codec->encode(payout_codec, t, &x.p, &bytes, &len), CS_ERR_ENCODE);
    assert_non_null(strstr(cs_errmsg(), "field \"witnesses[0].value.name\": missing (required)"));
}

static void test_malformed_input_has_a_reason(void **state) {
    (void)state;
    /* memo (4) claims 40 bytes, 2 follow. */
    static const uint8_t long_memo[] = {0x08, 0x05, 0x10, 0x01, 0x22, 0x28, 'h', 'i'};
    decode_fails(payout_codec, long_memo, sizeof long_memo,
                 "field \"memo\" (4): length 40 runs past the end at byte 5 of 8");
    /* id (1), a varint, sent length-delimited. */
    static const uint8_t wrong_wire[] = {0x0a, 0x01, 'x'};
    decode_fails(payout_codec, wrong_wire, sizeof wrong_wire,
                 "field \"id\" (1): sent as length-delimited, its type wants varint at byte 0");
    /* A varint that never ends. */
    static const uint8_t endless[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    decode_fails(payout_codec, endless, sizeof endless, "field \"id\" (1): varint cut short or over 10 bytes");
    /* Wire type 7 does not exist. */
    static const uint8_t bad_type[] = {0x0f};
    decode_fails(payout_codec, bad_type, sizeof bad_type, "invalid wire type");
    /* Inside a repeated nested message: cc[1]'s name runs past its message. */
    static const uint8_t bad_cc[] = {0x08, 0x05, 0x10, 0x01, 0x2a, 0x03, 0x0a, 0x01, 'A', 0x32,
                                     0x03, 0x0a, 0x01, 'B',  0x32, 0x03, 0x0a, 0x09, 'C'};
    decode_fails(payout_codec, bad_cc, sizeof bad_cc, "field \"cc[1].name\" (1): length 9 runs past the end");
    /* A packed fixed32 array of 3 bytes (codes (9) is not [packed]; Protobuf reads packed form anyway). */
    static const uint8_t bad_packed[] = {0x08, 0x05, 0x10, 0x01, 0x2a, 0x03, 0x0a, 0x01, 'A', 0x4a, 0x03, 1, 2, 3};
    decode_fails(payout_codec, bad_packed, sizeof bad_packed, "field \"codes\" (9): packed 32-bit values cut short");
    /* Field 0 with its tag in two bytes (0x80 0x00): protobuf-c keeps it as an
     * unknown field, and encoding it again would write bytes nothing reads
     * (found by fuzz_protobuf_decode). Protobuf has no field 0. */
    static const uint8_t field_zero[] = {0x08, 0x05, 0x10, 0x01, 0x2a, 0x03, 0x0a, 0x01, 'A', 0x80, 0x00, 0x02};
    decode_fails(payout_codec, field_zero, sizeof field_zero, "field number 0 is not allowed at byte 9 of 12");
    static const uint8_t nested_zero[] = {0x08, 0x05, 0x10, 0x01, 0x2a, 0x06, 0x0a, 0x01, 'A', 0x80, 0x00, 0x02};
    decode_fails(payout_codec, nested_zero, sizeof nested_zero, "field number 0 is not allowed at byte 9 of 12");
    /* A tombstone. */
    decode_fails(payout_codec, NULL, 0, "payload is null (tombstone)");
}

static void test_every_truncation_fails_cleanly(void **state) {
    (void)state;
    payout_parts x;
    fill_payout(&x);
    x.p.route_case = PAYMENTS__PAYOUT__ROUTE_AGENT;
    x.p.agent = &x.agent;
    size_t len;
    uint8_t *full = pack(&x.p.base, &len);
    const cs_type *t = cs_codec_protobuf_type(payout_codec);
    int ok = 0;
    for (size_t n = 0; n < len; n++) {
        uint8_t *cut = malloc(n ? n : 1); /* its own buffer: ASan sees a read past the cut */
        memcpy(cut, full, n);
        Payments__Payout got;
        cs_err err = payout_codec->decode(payout_codec, t, cut, n, &got);
        if (err == CS_OK) {
            ok++; /* a prefix that ends between fields after the required ones is a valid message */
            cs_codec_free_value(payout_codec, t, &got);
        } else {
            assert_int_equal(err, CS_ERR_DECODE);
            assert_non_null(strstr(cs_errmsg(), "message payments.Payout: "));
            assert_null(strstr(cs_errmsg(), "could not unpack")); /* the walk found the reason */
        }
        free(cut);
    }
    assert_true(ok < (int)len / 2);
    free(full);
}

static void test_random_input_never_crashes(void **state) {
    (void)state;
    const char *env = getenv("CS_TEST_SEED");
    unsigned seed = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    printf("# random input: CS_TEST_SEED=%u\n", seed);
    srand(seed);
    payout_parts x;
    fill_payout(&x);
    size_t base_len;
    uint8_t *base = pack(&x.p.base, &base_len);
    const cs_type *t = cs_codec_protobuf_type(payout_codec);
    uint8_t buf[RANDOM_MAX_LEN + 256];
    for (int round = 0; round < RANDOM_ROUNDS; round++) {
        size_t n;
        if (round % 2) { /* pure noise */
            n = (size_t)rand() % RANDOM_MAX_LEN;
            for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)rand();
        } else { /* a valid payout with a few bytes flipped: reaches deep fields */
            n = base_len < sizeof buf ? base_len : sizeof buf;
            memcpy(buf, base, n);
            for (int k = 0; k < 3; k++) buf[(size_t)rand() % n] = (uint8_t)rand();
        }
        Payments__Payout got;
        cs_err err = payout_codec->decode(payout_codec, t, buf, n, &got);
        assert_true(err == CS_OK || err == CS_ERR_DECODE);
        if (err == CS_OK) cs_codec_free_value(payout_codec, t, &got);
    }
    free(base);
}

/* A Tree payload nested `depth` messages deep (the top level counts as 1)
 * through field `tag` (left or kids), written outside in: O(depth). */
static uint8_t *nested_tree(size_t depth, uint8_t tag, size_t *len) {
    size_t *inner = malloc(depth * sizeof *inner); /* inner[i]: the length of level i's contents */
    assert_non_null(inner);
    inner[depth - 1] = 0; /* the innermost message is empty */
    for (size_t i = depth - 1; i-- > 0;) {
        size_t l = inner[i + 1], v = 1;
        while (l >= 0x80) l >>= 7, v++;
        inner[i] = 1 + v + inner[i + 1];
    }
    *len = inner[0];
    uint8_t *buf = malloc(*len + 1), *p = buf;
    assert_non_null(buf);
    for (size_t i = 1; i < depth; i++) {
        *p++ = tag;
        for (size_t l = inner[i];; l >>= 7) {
            *p++ = (uint8_t)((l & 0x7f) | (l >= 0x80 ? 0x80 : 0));
            if (l < 0x80) break;
        }
    }
    assert_int_equal((size_t)(p - buf), *len);
    free(inner);
    return buf;
}

static void test_nesting_is_bounded(void **state) {
    (void)state;
    static const uint8_t left = 0x12, kids = 0x1a; /* fields 2 and 3, length-delimited */
    cs_codec *c;
    assert_int_equal(cs_codec_protobuf_new(&payments__tree__descriptor, NULL, &c), CS_OK);
    const cs_type *t = cs_codec_protobuf_type(c);
    Payments__Tree got;
    size_t len;
    /* CS_PROTOBUF_MAX_DEPTH levels decode, through a field or a repeated one. */
    uint8_t *ok = nested_tree(CS_PROTOBUF_MAX_DEPTH, left, &len);
    assert_int_equal(c->decode(c, t, ok, len, &got), CS_OK);
    size_t levels = 1;
    for (const Payments__Tree *n = &got; n->left != NULL; n = n->left) levels++;
    assert_int_equal(levels, CS_PROTOBUF_MAX_DEPTH);
    /* and encode again */
    char *bytes;
    size_t bytes_len;
    assert_int_equal(c->encode(c, t, &got, &bytes, &bytes_len), CS_OK);
    assert_int_equal(bytes_len, len);
    assert_memory_equal(bytes, ok, len);
    free(bytes);
    cs_codec_free_value(c, t, &got);
    free(ok);
    ok = nested_tree(CS_PROTOBUF_MAX_DEPTH, kids, &len);
    assert_int_equal(c->decode(c, t, ok, len, &got), CS_OK);
    cs_codec_free_value(c, t, &got);
    free(ok);
    /* One more is refused, before protobuf-c reads it. */
    uint8_t *deep = nested_tree(CS_PROTOBUF_MAX_DEPTH + 1, left, &len);
    decode_fails(c, deep, len, "message payments.Tree: nested deeper than 100 messages (field \"left\" at byte");
    free(deep);
    deep = nested_tree(CS_PROTOBUF_MAX_DEPTH + 1, kids, &len);
    decode_fails(c, deep, len, "nested deeper than 100 messages (field \"kids\"");
    free(deep);
    /* 100,000 levels (394 KB, under Kafka's default 1 MB message): protobuf-c
     * alone overflows the stack on this one. */
    deep = nested_tree(100000, left, &len);
    decode_fails(c, deep, len, "nested deeper than 100 messages");
    free(deep);

    /* Encode refuses a tree built deeper than the limit. */
    Payments__Tree nodes[CS_PROTOBUF_MAX_DEPTH + 1];
    for (size_t i = 0; i <= CS_PROTOBUF_MAX_DEPTH; i++) {
        Payments__Tree init = PAYMENTS__TREE__INIT;
        nodes[i] = init;
        if (i > 0) nodes[i - 1].left = &nodes[i];
    }
    bytes = (char *)"untouched";
    assert_int_equal(c->encode(c, t, &nodes[0], &bytes, &bytes_len), CS_ERR_ENCODE);
    assert_non_null(strstr(cs_errmsg(), "nested deeper than 100 messages"));
    assert_null(bytes);
    nodes[CS_PROTOBUF_MAX_DEPTH - 1].left = NULL; /* 100 levels: fine */
    assert_int_equal(c->encode(c, t, &nodes[0], &bytes, &bytes_len), CS_OK);
    free(bytes);
    cs_codec_protobuf_destroy(c);
}

static void test_codec_object_and_arguments(void **state) {
    (void)state;
    const cs_type *t = cs_codec_protobuf_type(payout_codec);
    assert_non_null(t);
    assert_string_equal(t->name, "payments.Payout");
    assert_int_equal(t->size, sizeof(Payments__Payout));
    assert_int_equal(cs_type_check(t), CS_OK); /* cs_sub_decode takes it */
    assert_string_equal(payout_codec->name, "protobuf");
    assert_string_equal(payout_codec->content_type, "application/x-protobuf");
    assert_non_null(strstr(cs_codec_protobuf_proto(payout_codec), "message Payout {"));
    assert_null(cs_codec_protobuf_proto(scalars_codec));
    /* The schema is the .proto text (AsyncAPI shows it): payments.proto is proto2. */
    char *text = NULL;
    assert_non_null(payout_codec->schema);
    assert_int_equal(payout_codec->schema(payout_codec, t, &text), CS_OK);
    assert_string_equal(text, cs_codec_protobuf_proto(payout_codec));
    free(text);
    assert_string_equal(payout_codec->schema_format, CS_SCHEMA_FORMAT_PROTOBUF2);
    assert_int_equal(payout_codec->schema(payout_codec, cs_codec_protobuf_type(scalars_codec), &text), CS_ERR_ARG);
    assert_null(text);
    assert_null(scalars_codec->schema); /* no .proto text, no schema */
    assert_null(scalars_codec->schema_format);
    /* The format follows the text's first statement; comments before it do not count. */
    static const struct {
        const char *text, *format;
    } formats[] = {
        {"// payouts\n/* v3 */ syntax = 'proto3'; message Payout {}", CS_SCHEMA_FORMAT_PROTOBUF3},
        {"syntax=\"proto3\";", CS_SCHEMA_FORMAT_PROTOBUF3},
        {"edition = \"2023\";", CS_SCHEMA_FORMAT_PROTOBUF3},
        {"syntax = \"proto2\";", CS_SCHEMA_FORMAT_PROTOBUF2},
        {"message Payout {} // syntax = \"proto3\"", CS_SCHEMA_FORMAT_PROTOBUF2}, /* no syntax statement: proto2 */
    };
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        cs_codec *f;
        assert_int_equal(cs_codec_protobuf_new(&payments__payout__descriptor, formats[i].text, &f), CS_OK);
        if (strcmp(f->schema_format, formats[i].format))
            fail_msg("%s: schema_format %s, not %s", formats[i].text, f->schema_format, formats[i].format);
        cs_codec_protobuf_destroy(f);
    }
    assert_ptr_equal(cs_codec_protobuf_descriptor(payout_codec), &payments__payout__descriptor);
    assert_null(cs_codec_protobuf_type(&cs_codec_json));
    assert_null(cs_codec_protobuf_proto(NULL));

    cs_codec *c = (cs_codec *)1;
    assert_int_equal(cs_codec_protobuf_new(NULL, NULL, &c), CS_ERR_ARG);
    assert_null(c);
    assert_int_equal(cs_codec_protobuf_new(&payments__payout__descriptor, NULL, NULL), CS_ERR_ARG);
    /* An enum descriptor is not a message descriptor. */
    assert_int_equal(cs_codec_protobuf_new((const void *)&payments__currency__descriptor, NULL, &c), CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "wrong magic"));

    /* Decode wants the codec's type; encode a message of the codec's type. */
    Payments__Payout got;
    assert_int_equal(payout_codec->decode(payout_codec, cs_codec_protobuf_type(scalars_codec), "", 0, &got),
                     CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "is not message payments.Payout"));
    Payments__Scalars s = PAYMENTS__SCALARS__INIT;
    char *bytes;
    size_t len;
    assert_int_equal(payout_codec->encode(payout_codec, t, &s, &bytes, &len), CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "the value is a payments.Scalars, the codec encodes payments.Payout"));
    Payments__Payout zero;
    memset(&zero, 0, sizeof zero);
    assert_int_equal(payout_codec->encode(payout_codec, t, &zero, &bytes, &len), CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "not initialised"));

    /* Freeing a zeroed value, or NULL, or through no codec, does nothing. */
    cs_codec_free_value(payout_codec, t, &zero);
    cs_codec_free_value(payout_codec, t, NULL);
    cs_codec_free_value(NULL, t, &zero);
    cs_codec_protobuf_destroy(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_scalar_round_trips),
        cmocka_unit_test(test_nested_repeated_enums_and_maps_round_trip),
        cmocka_unit_test(test_each_oneof_branch_round_trips),
        cmocka_unit_test(test_required_fields_are_named),
        cmocka_unit_test(test_malformed_input_has_a_reason),
        cmocka_unit_test(test_every_truncation_fails_cleanly),
        cmocka_unit_test(test_random_input_never_crashes),
        cmocka_unit_test(test_nesting_is_bounded),
        cmocka_unit_test(test_codec_object_and_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
