/*
 * test_json.c - unit tests for the typed-payload codec (src/codec/): field
 * tables, JSON decode and encode, JSON Schema, the cs_codec interface.
 *
 * Covers every field kind in round trips, every decode error with the exact
 * message (which names the field path), hostile input (tombstones, invalid
 * UTF-8, 100000-deep nesting, random mutations), and a randomised round trip
 * that replays with CS_TEST_SEED=<seed> (the seed is printed at the start).
 * Prints, without asserting, the decode cost of a ~500-byte record.
 *
 * The locale test needs a comma-decimal locale to bite; without one installed:
 *   localedef -i de_DE -f UTF-8 /tmp/loc/de_DE.UTF-8 && LOCPATH=/tmp/loc ./test_json
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yajl/yajl_parse.h>
#include <yajl/yajl_tree.h>

#include "cstream/codec.h"

static uint64_t test_seed;

/* ------------------------------------------------------------------------ */
/* the types under test                                                     */
/* ------------------------------------------------------------------------ */

typedef struct money {
    int64_t amount_cents;
    char currency[4];
} money;

static const cs_field money_fields[] = {
    CS_FIELD_I64(money, amount_cents, CS_REQUIRED),
    CS_FIELD_CHARS(money, currency, CS_OPTIONAL),
};
static CS_TYPE(money_type, money, money_fields);

typedef struct item {
    uint64_t sku;
    int32_t qty;
    money price;
    char *note;
} item;

static const cs_field item_fields[] = {
    CS_FIELD_U64(item, sku, CS_REQUIRED),
    CS_FIELD_I32(item, qty, CS_OPTIONAL),
    CS_FIELD_OBJECT(item, price, &money_type, CS_OPTIONAL),
    CS_FIELD_STRING(item, note, CS_OPTIONAL),
};
static CS_TYPE(item_type, item, item_fields);

typedef struct order {
    uint64_t id;
    int64_t total;
    int32_t small;
    uint32_t count;
    bool gift;
    double weight;
    char *customer;
    char code[8];
    money shipping;
    item *items;
    size_t n_items;
    int64_t *codes;
    size_t n_codes;
    char **tags;
    size_t n_tags;
    double *ratios;
    size_t n_ratios;
    bool *flags;
    size_t n_flags;
    uint32_t *ports;
    size_t n_ports;
} order;

static const cs_field order_fields[] = {
    CS_FIELD_U64(order, id, CS_REQUIRED),
    CS_FIELD_I64(order, total, CS_OPTIONAL),
    CS_FIELD_I32(order, small, CS_OPTIONAL),
    CS_FIELD_U32(order, count, CS_OPTIONAL),
    CS_FIELD_BOOL(order, gift, CS_OPTIONAL),
    CS_FIELD_F64(order, weight, CS_OPTIONAL),
    CS_FIELD_STRING(order, customer, CS_REQUIRED),
    CS_FIELD_CHARS(order, code, CS_OPTIONAL),
    CS_FIELD_OBJECT(order, shipping, &money_type, CS_OPTIONAL),
    CS_FIELD_ARRAY(order, items, n_items, &item_type, CS_REQUIRED),
    CS_FIELD_ARRAY(order, codes, n_codes, CS_KIND_I64, CS_OPTIONAL),
    CS_FIELD_ARRAY(order, tags, n_tags, CS_KIND_STRING, CS_OPTIONAL),
    CS_FIELD_ARRAY(order, ratios, n_ratios, CS_KIND_F64, CS_OPTIONAL),
    CS_FIELD_ARRAY_MAX(order, flags, n_flags, CS_KIND_BOOL, 3, CS_OPTIONAL),
    CS_FIELD_ARRAY(order, ports, n_ports, CS_KIND_U32, CS_OPTIONAL),
};
static CS_TYPE(order_type, order, order_fields);

/* A tree: a type that contains itself through an array. */
typedef struct node {
    char *name;
    struct node *children;
    size_t n_children;
} node;

static const cs_type node_type;
static const cs_field node_fields[] = {
    CS_FIELD_STRING(node, name, CS_REQUIRED),
    CS_FIELD_ARRAY(node, children, n_children, &node_type, CS_OPTIONAL),
};
static CS_TYPE(node_type, node, node_fields);

typedef struct forest {
    node *trees;
    size_t n_trees;
} forest;

static const cs_field forest_fields[] = {
    CS_FIELD_ARRAY(forest, trees, n_trees, &node_type, CS_OPTIONAL),
};
static CS_TYPE(forest_type, forest, forest_fields);

/* The record of LIBRDKAFKA-NOTES.md's measurement: two integers and a 440-char string. */
typedef struct payout {
    uint64_t id;
    int64_t amount_cents;
    char *memo;
} payout;

static const cs_field payout_fields[] = {
    CS_FIELD_U64(payout, id, CS_REQUIRED),
    CS_FIELD_I64(payout, amount_cents, CS_REQUIRED),
    CS_FIELD_STRING(payout, memo, CS_OPTIONAL),
};
static CS_TYPE(payout_type, payout, payout_fields);

/* The same record read for its integers only: the memo is an unknown key. */
typedef struct payout_ids {
    uint64_t id;
    int64_t amount_cents;
} payout_ids;

static const cs_field payout_ids_fields[] = {
    CS_FIELD_U64(payout_ids, id, CS_REQUIRED),
    CS_FIELD_I64(payout_ids, amount_cents, CS_REQUIRED),
};
static CS_TYPE(payout_ids_type, payout_ids, payout_ids_fields);

/* ------------------------------------------------------------------------ */
/* helpers                                                                  */
/* ------------------------------------------------------------------------ */

static void assert_zeroed(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0) fail_msg("byte %zu of the value is %u after a failed decode", i, b[i]);
}

static cs_err decode_text(const cs_type *type, const char *json, void *out) {
    return cs_json_decode(type, json, strlen(json), out);
}

/* Decodes json, encodes the result and checks it reads `canonical`. */
static void assert_canonical(const cs_type *type, void *value, const char *json, const char *canonical) {
    cs_err err = decode_text(type, json, value);
    if (err) fail_msg("decode %s: %s", json, cs_errmsg());
    char *out = NULL;
    size_t len = 0;
    err = cs_json_encode(type, value, &out, &len);
    if (err) fail_msg("encode: %s", cs_errmsg());
    assert_string_equal(out, canonical);
    assert_int_equal(len, strlen(canonical));
    free(out);
    cs_value_free(type, value);
}

/* Expects decoding to fail with exactly `message`, leaving *value zeroed. */
static void assert_decode_error(const cs_type *type, const void *json, size_t len, const char *message) {
    unsigned char value[512];
    assert_true(type->size <= sizeof value);
    memset(value, 0xAB, sizeof value);
    cs_err err = cs_json_decode(type, json, len, value);
    if (err == CS_OK) {
        cs_value_free(type, value);
        fail_msg("decoded without error: %.*s", (int)len, (const char *)json);
    }
    assert_int_equal(err, CS_ERR_DECODE);
    if (strcmp(cs_errmsg(), message) != 0)
        fail_msg("payload %.*s\n  message  %s\n  expected %s", (int)len, (const char *)json, cs_errmsg(), message);
    assert_zeroed(value, type->size);
}

static void assert_order_error(const char *json, const char *message) {
    assert_decode_error(&order_type, json, strlen(json), message);
}

static char *encode_or_fail(const cs_type *type, const void *value) {
    char *out = NULL;
    size_t len = 0;
    if (cs_json_encode(type, value, &out, &len) != CS_OK) fail_msg("encode: %s", cs_errmsg());
    assert_int_equal(len, strlen(out));
    return out;
}

static void assert_encode_error(const cs_type *type, const void *value, const char *message) {
    char *out = (char *)"untouched";
    size_t len = 99;
    assert_int_equal(cs_json_encode(type, value, &out, &len), CS_ERR_ENCODE);
    assert_string_equal(cs_errmsg(), message);
    assert_null(out);
    assert_int_equal(len, 0);
}

/* The minimal valid order around `extra` members (written before the required ones). */
static char *order_with(const char *extra) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "{%s%s\"id\":1,\"customer\":\"c\",\"items\":[]}", extra, *extra ? "," : "");
    return buf;
}

/* ------------------------------------------------------------------------ */
/* round trips                                                              */
/* ------------------------------------------------------------------------ */

static void test_round_trip_every_kind(void **state) {
    (void)state;
    item items[2] = {
        {.sku = UINT64_MAX, .qty = INT32_MIN, .price = {.amount_cents = INT64_MIN, .currency = "EUR"}, .note = "first"},
        {.sku = 0, .qty = INT32_MAX, .price = {.amount_cents = INT64_MAX, .currency = ""}, .note = NULL},
    };
    int64_t codes[] = {0, -1, INT64_MAX};
    char *tags[] = {"a", "", "ünïcödé 😀"};
    double ratios[] = {0.1, -0.0, 1e308, 5e-324, 123456789.125, -2.5e-10};
    bool flags[] = {true, false};
    uint32_t ports[] = {0, 65535, UINT32_MAX};
    order o = {
        .id = 18446744073709551615u,
        .total = -9223372036854775807 - 1,
        .small = -2147483647 - 1,
        .count = 4294967295u,
        .gift = true,
        .weight = 0.30000000000000004,
        .customer = "Zoë \"Z\" O'Brien",
        .code = "ABC-123",
        .shipping = {.amount_cents = 499, .currency = "USD"},
        .items = items,
        .n_items = 2,
        .codes = codes,
        .n_codes = 3,
        .tags = tags,
        .n_tags = 3,
        .ratios = ratios,
        .n_ratios = 6,
        .flags = flags,
        .n_flags = 2,
        .ports = ports,
        .n_ports = 3,
    };
    const char *expected =
        "{\"id\":18446744073709551615,\"total\":-9223372036854775808,\"small\":-2147483648,"
        "\"count\":4294967295,\"gift\":true,\"weight\":0.30000000000000004,"
        "\"customer\":\"Zoë \\\"Z\\\" O'Brien\",\"code\":\"ABC-123\","
        "\"shipping\":{\"amount_cents\":499,\"currency\":\"USD\"},"
        "\"items\":[{\"sku\":18446744073709551615,\"qty\":-2147483648,"
        "\"price\":{\"amount_cents\":-9223372036854775808,\"currency\":\"EUR\"},\"note\":\"first\"},"
        "{\"sku\":0,\"qty\":2147483647,\"price\":{\"amount_cents\":9223372036854775807,\"currency\":\"\"}}],"
        "\"codes\":[0,-1,9223372036854775807],\"tags\":[\"a\",\"\",\"ünïcödé 😀\"],"
        "\"ratios\":[0.1,-0,1e+308,4.94065645841247e-324,123456789.125,-2.5e-10],"
        "\"flags\":[true,false],\"ports\":[0,65535,4294967295]}";

    char *json = encode_or_fail(&order_type, &o);
    assert_string_equal(json, expected);

    order d;
    assert_int_equal(decode_text(&order_type, json, &d), CS_OK);
    assert_true(d.id == o.id);
    assert_true(d.total == o.total);
    assert_true(d.small == o.small);
    assert_true(d.count == o.count);
    assert_true(d.gift);
    assert_true(d.weight == o.weight);
    assert_string_equal(d.customer, o.customer);
    assert_string_equal(d.code, "ABC-123");
    assert_true(d.shipping.amount_cents == 499);
    assert_string_equal(d.shipping.currency, "USD");
    assert_int_equal(d.n_items, 2);
    assert_true(d.items[0].sku == UINT64_MAX);
    assert_true(d.items[0].qty == INT32_MIN);
    assert_true(d.items[0].price.amount_cents == INT64_MIN);
    assert_string_equal(d.items[0].price.currency, "EUR");
    assert_string_equal(d.items[0].note, "first");
    assert_true(d.items[1].sku == 0);
    assert_true(d.items[1].qty == INT32_MAX);
    assert_true(d.items[1].price.amount_cents == INT64_MAX);
    assert_null(d.items[1].note);
    assert_int_equal(d.n_codes, 3);
    assert_memory_equal(d.codes, codes, sizeof codes);
    assert_int_equal(d.n_tags, 3);
    for (size_t i = 0; i < 3; i++) assert_string_equal(d.tags[i], tags[i]);
    assert_int_equal(d.n_ratios, 6);
    assert_memory_equal(d.ratios, ratios, sizeof ratios); /* bit for bit, -0 included */
    assert_int_equal(d.n_flags, 2);
    assert_true(d.flags[0] && !d.flags[1]);
    assert_int_equal(d.n_ports, 3);
    assert_memory_equal(d.ports, ports, sizeof ports);

    char *again = encode_or_fail(&order_type, &d);
    assert_string_equal(again, expected);
    free(again);
    free(json);

    cs_value_free(&order_type, &d);
    assert_null(d.customer);
    assert_null(d.items);
    assert_int_equal(d.n_items, 0);
    assert_null(d.tags);
    assert_int_equal(d.n_tags, 0);
    cs_value_free(&order_type, &d); /* twice is harmless */
}

static void test_decode_then_encode_is_canonical(void **state) {
    (void)state;
    order o;
    /* whitespace, keys out of order, escapes, unknown keys, nulls for optional fields */
    assert_canonical(&order_type, &o,
                     " {\n\t\"items\" : [ { \"note\" : \"n\\u00e9\\/\" , \"sku\" : 7 , \"qty\" : null } ] ,"
                     " \"extra\" : { \"id\" : \"not this one\" , \"x\" : [ 1 , [ 2 ] , { } ] } ,"
                     " \"customer\" : \"\\u0041\\t\" , \"id\" : 42 , \"weight\" : 1E2 , \"total\" : -0 ,"
                     " \"code\" : null , \"tags\" : [ ] , \"gift\" : false } ",
                     "{\"id\":42,\"total\":0,\"small\":0,\"count\":0,\"gift\":false,\"weight\":100,"
                     "\"customer\":\"A\\t\",\"code\":\"\",\"shipping\":{\"amount_cents\":0,\"currency\":\"\"},"
                     "\"items\":[{\"sku\":7,\"qty\":0,\"price\":{\"amount_cents\":0,\"currency\":\"\"},"
                     "\"note\":\"né/\"}],\"codes\":[],\"tags\":[],\"ratios\":[],\"flags\":[],\"ports\":[]}");

    payout p;
    assert_canonical(&payout_type, &p, "{\"amount_cents\":5,\"memo\":null,\"id\":1}", "{\"id\":1,\"amount_cents\":5}");
    assert_canonical(&payout_type, &p, "{\"amount_cents\":5,\"id\":1,\"memo\":\"\"}",
                     "{\"id\":1,\"amount_cents\":5,\"memo\":\"\"}");
}

static void test_unknown_keys_are_skipped(void **state) {
    (void)state;
    order o;
    const char *json = "{\"zzz\":{\"id\":\"x\",\"items\":5,\"deep\":[[{\"a\":[]}],{\"customer\":null}]},"
                       "\"id\":3,\"customer\":\"c\","
                       "\"items\":[{\"sku\":1,\"extra\":{\"sku\":\"bad\",\"q\":[true,null]},\"qty\":2}],"
                       "\"yyy\":[1,{\"customer\":null},[[]]],\"x\":null,\"y\":true,\"z\":1.5e300,\"w\":\"s\",\"v\":-1}";
    assert_int_equal(decode_text(&order_type, json, &o), CS_OK);
    assert_true(o.id == 3);
    assert_string_equal(o.customer, "c");
    assert_int_equal(o.n_items, 1);
    assert_true(o.items[0].sku == 1);
    assert_int_equal(o.items[0].qty, 2);
    cs_value_free(&order_type, &o);

    /* an unknown key whose value is huge but shallow */
    payout_ids p;
    char big[20000];
    int n = snprintf(big, sizeof big, "{\"id\":1,\"amount_cents\":2,\"blob\":[");
    for (int i = 0; i < 3000; i++) n += snprintf(big + n, sizeof big - (size_t)n, "%s%d", i ? "," : "", i);
    snprintf(big + n, sizeof big - (size_t)n, "]}");
    assert_int_equal(decode_text(&payout_ids_type, big, &p), CS_OK);
    assert_true(p.id == 1 && p.amount_cents == 2);
}

static void test_repeated_keys_last_wins(void **state) {
    (void)state;
    order o;
    const char *json = "{\"id\":1,\"customer\":\"first\",\"tags\":[\"a\",\"b\"],\"items\":[{\"sku\":1,\"note\":\"x\"}],"
                       "\"shipping\":{\"amount_cents\":5,\"currency\":\"EUR\"},\"code\":\"A\",\"gift\":true,"
                       "\"id\":2,\"customer\":\"second\",\"tags\":[\"c\"],\"items\":[],"
                       "\"shipping\":{\"amount_cents\":6},\"code\":\"B\",\"gift\":null}";
    assert_int_equal(decode_text(&order_type, json, &o), CS_OK);
    assert_true(o.id == 2);
    assert_string_equal(o.customer, "second");
    assert_int_equal(o.n_tags, 1);
    assert_string_equal(o.tags[0], "c");
    assert_int_equal(o.n_items, 0);
    assert_null(o.items);
    assert_true(o.shipping.amount_cents == 6);
    assert_string_equal(o.shipping.currency, ""); /* the whole object was replaced */
    assert_string_equal(o.code, "B");
    assert_false(o.gift); /* null after true: zeroed */
    cs_value_free(&order_type, &o);
}

static void test_null_leaves_optional_fields_zeroed(void **state) {
    (void)state;
    order o;
    const char *json = "{\"id\":1,\"customer\":\"c\",\"items\":[],\"total\":null,\"small\":null,\"count\":null,"
                       "\"gift\":null,\"weight\":null,\"code\":null,\"shipping\":null,\"codes\":null,\"tags\":null,"
                       "\"ratios\":null,\"flags\":null,\"ports\":null}";
    assert_int_equal(decode_text(&order_type, json, &o), CS_OK);
    assert_true(o.total == 0 && o.small == 0 && o.count == 0 && !o.gift && o.weight == 0);
    assert_string_equal(o.code, "");
    assert_true(o.shipping.amount_cents == 0);
    assert_null(o.codes);
    assert_null(o.tags);
    assert_int_equal(o.n_tags, 0);
    cs_value_free(&order_type, &o);
}

static void test_char_arrays(void **state) {
    (void)state;
    order o;
    assert_int_equal(decode_text(&order_type, order_with("\"code\":\"1234567\""), &o), CS_OK);
    assert_string_equal(o.code, "1234567"); /* 7 bytes and the NUL fill char[8] */
    cs_value_free(&order_type, &o);
    assert_int_equal(decode_text(&order_type, order_with("\"code\":\"\xc3\xa9\xc3\xa9\xc3\xa9\""), &o), CS_OK);
    assert_string_equal(o.code, "ééé");
    cs_value_free(&order_type, &o);
    assert_order_error(order_with("\"code\":\"12345678\""), "field \"code\": string of 8 bytes is longer than 7");
}

static void test_tree_round_trip(void **state) {
    (void)state;
    node n;
    const char *json = "{\"name\":\"root\",\"children\":[{\"name\":\"a\",\"children\":[{\"name\":\"a1\"}]},"
                       "{\"name\":\"b\",\"children\":[]}]}";
    assert_int_equal(decode_text(&node_type, json, &n), CS_OK);
    assert_string_equal(n.children[0].children[0].name, "a1");
    char *out = encode_or_fail(&node_type, &n);
    assert_string_equal(out, "{\"name\":\"root\",\"children\":[{\"name\":\"a\",\"children\":[{\"name\":\"a1\","
                             "\"children\":[]}]},{\"name\":\"b\",\"children\":[]}]}");
    free(out);
    cs_value_free(&node_type, &n);

    /* 31 nested children: 1 + 2 * 31 = 63 levels, fine; 32: 65 levels, refused */
    for (int levels = 31; levels <= 32; levels++) {
        char deep[4096];
        size_t len = 0;
        for (int i = 0; i < levels; i++)
            len += (size_t)snprintf(deep + len, sizeof deep - len, "{\"name\":\"n\",\"children\":[");
        len += (size_t)snprintf(deep + len, sizeof deep - len, "{\"name\":\"leaf\"}");
        for (int i = 0; i < levels; i++) len += (size_t)snprintf(deep + len, sizeof deep - len, "]}");
        cs_err err = cs_json_decode(&node_type, deep, len, &n);
        if (levels == 31) {
            assert_int_equal(err, CS_OK);
            out = encode_or_fail(&node_type, &n);
            cs_value_free(&node_type, &n);
            assert_int_equal(cs_json_decode(&node_type, out, strlen(out), &n), CS_OK);
            cs_value_free(&node_type, &n);
            free(out);
        } else {
            assert_int_equal(err, CS_ERR_DECODE);
            assert_non_null(strstr(cs_errmsg(), "payload nesting deeper than 64 levels at byte "));
            assert_zeroed(&n, sizeof n);
        }
    }

    /* Encoding refuses what decoding would refuse: a value 65 levels deep. */
    node chain[33];
    memset(chain, 0, sizeof chain);
    for (int i = 0; i < 33; i++) {
        chain[i].name = "n";
        if (i < 32) {
            chain[i].children = &chain[i + 1];
            chain[i].n_children = 1;
        }
    }
    char *never = NULL;
    assert_int_equal(cs_json_encode(&node_type, &chain[0], &never, NULL), CS_ERR_ENCODE);
    assert_non_null(strstr(cs_errmsg(), ": nesting deeper than 64 levels"));
    assert_null(never);
}

/* ------------------------------------------------------------------------ */
/* decode errors                                                            */
/* ------------------------------------------------------------------------ */

static void test_errors_name_the_field(void **state) {
    (void)state;
    static const struct {
        const char *json;
        const char *message;
    } cases[] = {
        {"{\"customer\":\"c\",\"items\":[]}", "field \"id\": missing (required)"},
        {"{\"id\":1,\"items\":[]}", "field \"customer\": missing (required)"},
        {"{\"id\":1,\"customer\":\"c\"}", "field \"items\": missing (required)"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":[{\"sku\":1},{\"sku\":2},{\"qty\":3}]}",
         "field \"items[2].sku\": missing (required)"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":[{\"sku\":1},{\"sku\":2},"
         "{\"sku\":3,\"price\":{\"amount_cents\":\"12\"}}]}",
         "field \"items[2].price.amount_cents\": expected an integer, got a string"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":[{\"sku\":1,\"price\":{\"currency\":\"EUR\"}}]}",
         "field \"items[0].price.amount_cents\": missing (required)"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":[],\"shipping\":{}}",
         "field \"shipping.amount_cents\": missing (required)"},
        {"{\"id\":\"1\",\"customer\":\"c\",\"items\":[]}", "field \"id\": expected an integer, got a string"},
        {"{\"id\":null,\"customer\":\"c\",\"items\":[]}", "field \"id\": expected an integer, got null"},
        {"{\"id\":1,\"customer\":null,\"items\":[]}", "field \"customer\": expected a string, got null"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":null}", "field \"items\": expected an array, got null"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":[{\"sku\":null}]}",
         "field \"items[0].sku\": expected an integer, got null"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":{}}", "field \"items\": expected an array, got an object"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":[1]}", "field \"items[0]\": expected an object, got a number"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":[{\"sku\":1},null]}",
         "field \"items[1]\": expected an object, got null"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":[[]]}", "field \"items[0]\": expected an object, got an array"},
        {"{\"id\":{},\"customer\":\"c\",\"items\":[]}", "field \"id\": expected an integer, got an object"},
        {"{\"id\":[1],\"customer\":\"c\",\"items\":[]}", "field \"id\": expected an integer, got an array"},
        {"{\"id\":true,\"customer\":\"c\",\"items\":[]}", "field \"id\": expected an integer, got a boolean"},
        {"{\"id\":1,\"customer\":{},\"items\":[]}", "field \"customer\": expected a string, got an object"},
        {"{\"id\":1,\"customer\":7,\"items\":[]}", "field \"customer\": expected a string, got a number"},
        {"{\"gift\":1,\"id\":1,\"customer\":\"c\",\"items\":[]}", "field \"gift\": expected a boolean, got a number"},
        {"{\"gift\":\"true\",\"id\":1,\"customer\":\"c\",\"items\":[]}",
         "field \"gift\": expected a boolean, got a string"},
        {"{\"weight\":\"1\",\"id\":1,\"customer\":\"c\",\"items\":[]}",
         "field \"weight\": expected a number, got a string"},
        {"{\"weight\":false,\"id\":1,\"customer\":\"c\",\"items\":[]}",
         "field \"weight\": expected a number, got a boolean"},
        {"{\"shipping\":[],\"id\":1,\"customer\":\"c\",\"items\":[]}",
         "field \"shipping\": expected an object, got an array"},
        {"{\"shipping\":5,\"id\":1,\"customer\":\"c\",\"items\":[]}",
         "field \"shipping\": expected an object, got a number"},
        {"{\"code\":[],\"id\":1,\"customer\":\"c\",\"items\":[]}", "field \"code\": expected a string, got an array"},
        {"{\"codes\":[1,\"x\"],\"id\":1,\"customer\":\"c\",\"items\":[]}",
         "field \"codes[1]\": expected an integer, got a string"},
        {"{\"codes\":[1,null],\"id\":1,\"customer\":\"c\",\"items\":[]}",
         "field \"codes[1]\": expected an integer, got null"},
        {"{\"codes\":[[1]],\"id\":1,\"customer\":\"c\",\"items\":[]}",
         "field \"codes[0]\": expected an integer, got an array"},
        {"{\"tags\":[\"a\",1],\"id\":1,\"customer\":\"c\",\"items\":[]}",
         "field \"tags[1]\": expected a string, got a number"},
        {"{\"tags\":[\"a\",{}],\"id\":1,\"customer\":\"c\",\"items\":[]}",
         "field \"tags[1]\": expected a string, got an object"},
        {"{\"ratios\":[1,true],\"id\":1,\"customer\":\"c\",\"items\":[]}",
         "field \"ratios[1]\": expected a number, got a boolean"},
        {"{\"flags\":[true,false,true,false],\"id\":1,\"customer\":\"c\",\"items\":[]}",
         "field \"flags\": more than 3 items"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":[{\"sku\":1,\"price\":{\"amount_cents\":1,\"currency\":\"EURO\"}}]}",
         "field \"items[0].price.currency\": string of 4 bytes is longer than 3"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":[{\"sku\":1,\"note\":\"a\\u0000b\"}]}",
         "field \"items[0].note\": string contains a NUL character (\\u0000)"},
        {"{\"tags\":[\"\\u0000\"],\"id\":1,\"customer\":\"c\",\"items\":[]}",
         "field \"tags[0]\": string contains a NUL character (\\u0000)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) assert_order_error(cases[i].json, cases[i].message);
}

static void test_integer_ranges(void **state) {
    (void)state;
    static const struct {
        const char *member;
        const char *message; /* NULL: accepted */
    } cases[] = {
        {"\"id\":18446744073709551615", NULL},
        {"\"id\":-0", NULL},
        {"\"id\":18446744073709551616",
         "field \"id\": 18446744073709551616 is out of range for uint64 (0..18446744073709551615)"},
        {"\"id\":-1", "field \"id\": -1 is out of range for uint64 (0..18446744073709551615)"},
        {"\"id\":99999999999999999999999",
         "field \"id\": 99999999999999999999999 is out of range for uint64 (0..18446744073709551615)"},
        {"\"total\":9223372036854775807", NULL},
        {"\"total\":-9223372036854775808", NULL},
        {"\"total\":9223372036854775808", "field \"total\": 9223372036854775808 is out of range for int64 "
                                          "(-9223372036854775808..9223372036854775807)"},
        {"\"total\":-9223372036854775809", "field \"total\": -9223372036854775809 is out of range for int64 "
                                           "(-9223372036854775808..9223372036854775807)"},
        {"\"small\":2147483647", NULL},
        {"\"small\":-2147483648", NULL},
        {"\"small\":2147483648", "field \"small\": 2147483648 is out of range for int32 (-2147483648..2147483647)"},
        {"\"small\":-2147483649", "field \"small\": -2147483649 is out of range for int32 (-2147483648..2147483647)"},
        {"\"count\":4294967295", NULL},
        {"\"count\":4294967296", "field \"count\": 4294967296 is out of range for uint32 (0..4294967295)"},
        {"\"count\":-1", "field \"count\": -1 is out of range for uint32 (0..4294967295)"},
        {"\"ports\":[1,-2]", "field \"ports[1]\": -2 is out of range for uint32 (0..4294967295)"},
        {"\"total\":1.5", "field \"total\": expected an integer, got 1.5"},
        {"\"total\":1.0", "field \"total\": expected an integer, got 1.0"},
        {"\"total\":1e3", "field \"total\": expected an integer, got 1e3"},
        {"\"total\":-1E-3", "field \"total\": expected an integer, got -1E-3"},
        {"\"total\":12345678901234567890123456789012345678901234567890.5",
         "field \"total\": expected an integer, got 1234567890123456789012345678901234567890..."},
        {"\"weight\":1e308", NULL},
        {"\"weight\":1e-400", NULL}, /* underflows to 0: accepted */
        {"\"weight\":1e400", "field \"weight\": 1e400 is out of range for a double"},
        {"\"weight\":-1e400", "field \"weight\": -1e400 is out of range for a double"},
        {"\"ratios\":[0,1e999]", "field \"ratios[1]\": 1e999 is out of range for a double"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[256];
        snprintf(json, sizeof json, "{\"customer\":\"c\",\"items\":[],%s%s}", cases[i].member,
                 strncmp(cases[i].member, "\"id\"", 4) == 0 ? "" : ",\"id\":1");
        if (cases[i].message) {
            assert_order_error(json, cases[i].message);
        } else {
            order o;
            if (decode_text(&order_type, json, &o) != CS_OK) fail_msg("%s: %s", json, cs_errmsg());
            cs_value_free(&order_type, &o);
        }
    }

    order o;
    assert_int_equal(decode_text(&order_type, order_with("\"weight\":1e-400"), &o), CS_OK);
    assert_true(o.weight == 0);
    cs_value_free(&order_type, &o);

    char long_number[700] = "\"weight\":0.";
    memset(long_number + strlen(long_number), '1', 600);
    long_number[611] = '\0';
    assert_order_error(order_with(long_number), "field \"weight\": number of 602 characters is too long");
}

static void test_tombstone(void **state) {
    (void)state;
    order o;
    memset(&o, 0xAB, sizeof o);
    assert_int_equal(cs_json_decode(&order_type, NULL, 0, &o), CS_ERR_DECODE);
    assert_string_equal(cs_errmsg(), "payload is null (tombstone)");
    assert_zeroed(&o, sizeof o);
    assert_decode_error(&order_type, "{}", 0, "payload is null (tombstone)");
    assert_decode_error(&order_type, NULL, 5, "payload is null (tombstone)");
}

static void test_invalid_json(void **state) {
    (void)state;
    static const struct {
        const char *json;
        const char *message;
    } cases[] = {
        {"[]", "payload is not a JSON object (got an array)"},
        {"[{\"id\":1}]", "payload is not a JSON object (got an array)"},
        {"1", "payload is not a JSON object (got a number)"},
        {"\"x\"", "payload is not a JSON object (got a string)"},
        {"null", "payload is not a JSON object (got null)"},
        {"true", "payload is not a JSON object (got a boolean)"},
        {" ", "payload is not valid JSON at byte 1: parse error: premature EOF"},
        {"{\"id\":1,", "payload is not valid JSON at byte 8: parse error: premature EOF"},
        {"{\"id\":1", "payload is not valid JSON at byte 7: parse error: premature EOF"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":[]}}",
         "payload is not valid JSON at byte 35: parse error: trailing garbage"},
        {"{\"id\":1,\"customer\":\"c\",\"items\":[]} {}",
         "payload is not valid JSON at byte 36: parse error: trailing garbage"},
        {"{\"id\":1,,}", "payload is not valid JSON at byte 9: parse error: invalid object key (must be a string)"},
        {"{'id':1}", "payload is not valid JSON at byte 2: lexical error: invalid char in json text."},
        {"{\"weight\":NaN}", "payload is not valid JSON at byte 11: lexical error: invalid char in json text."},
        {"{\"id\":01}",
         "payload is not valid JSON at byte 7: parse error: after key and value, inside map, I expect ',' or '}'"},
        {"{\"id\":-}",
         "payload is not valid JSON at byte 7: lexical error: malformed number, a digit is required after the "
         "minus sign."},
        {"{\"id\":1 /* c */}", "payload is not valid JSON at byte 8: lexical error: probable comment found in "
                               "input text, comments are not enabled."},
        {"{\"customer\":\"a\tb\"}",
         "payload is not valid JSON at byte 14: lexical error: invalid character inside string."},
        {"{\"customer\":\"\\x\"}",
         "payload is not valid JSON at byte 14: lexical error: inside a string, '\\' occurs before a character "
         "which it may not."},
        {"{\"customer\":\"\\u12G4\"}",
         "payload is not valid JSON at byte 17: lexical error: invalid (non-hex) character occurs after '\\u' inside "
         "string."},
        {"{\"customer\":\"abc", "payload is not valid JSON at byte 16: parse error: premature EOF"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) assert_order_error(cases[i].json, cases[i].message);

    /* a NUL byte in the payload itself */
    assert_decode_error(&order_type, "{\"id\":1\0}", 9,
                        "payload is not valid JSON at byte 8: lexical error: invalid char in json text.");
}

static void test_invalid_utf8(void **state) {
    (void)state;
    static const struct {
        const char *json;
        const char *message;
    } cases[] = {
        {"{\"customer\":\"\xff\"}", "field \"customer\": string is not valid UTF-8"},
        {"{\"customer\":\"ok \xc3\"}", "field \"customer\": string is not valid UTF-8"},          /* cut short */
        {"{\"customer\":\"\xc0\xaf\"}", "field \"customer\": string is not valid UTF-8"},         /* overlong '/' */
        {"{\"customer\":\"\xe0\x80\xaf\"}", "field \"customer\": string is not valid UTF-8"},     /* overlong */
        {"{\"customer\":\"\xed\xa0\x80\"}", "field \"customer\": string is not valid UTF-8"},     /* surrogate */
        {"{\"customer\":\"\xf4\x90\x80\x80\"}", "field \"customer\": string is not valid UTF-8"}, /* > U+10FFFF */
        {"{\"customer\":\"\xf8\x88\x80\x80\x80\"}", "field \"customer\": string is not valid UTF-8"},
        {"{\"customer\":\"\x80\"}", "field \"customer\": string is not valid UTF-8"},
        {"{\"code\":\"\xc0\x80\"}", "field \"code\": string is not valid UTF-8"},
        {"{\"tags\":[\"ok\",\"\xff\"]}", "field \"tags[1]\": string is not valid UTF-8"},
        {"{\"tags\":[\"ok\",\"\xed\xbf\xbf\"]}", "field \"tags[1]\": string is not valid UTF-8"},
        {"{\"items\":[{\"sku\":1,\"note\":\"\xe2\x82\"}]}", "field \"items[0].note\": string is not valid UTF-8"},
        {"{\"zzz\":\"\xff\"}", "field \"zzz\": string is not valid UTF-8"},
        {"{\"zzz\":{\"a\":[\"\xff\"]}}", "field \"zzz\": string is not valid UTF-8"},
        {"{\"\xff\":1}", "payload: a key is not valid UTF-8"},
        {"{\"shipping\":{\"\xff\":1}}", "field \"shipping\": a key is not valid UTF-8"},
        {"{\"customer\":\"\\udc00\"}", "field \"customer\": string has an unpaired surrogate escape"},
        {"{\"customer\":\"\\ud800\"}", "field \"customer\": string has an unpaired surrogate escape"},
        {"{\"customer\":\"a\\ud800b\"}", "field \"customer\": string has an unpaired surrogate escape"},
        {"{\"customer\":\"\\ud800\\u0041\"}", "field \"customer\": string has an unpaired surrogate escape"},
        {"{\"customer\":\"\\ud800\\n\"}", "field \"customer\": string has an unpaired surrogate escape"},
        {"{\"customer\":\"\\\"\\\\\\ud800\"}", "field \"customer\": string has an unpaired surrogate escape"},
        {"{\"tags\":[\"\\udbff\\udbff\"]}", "field \"tags[0]\": string has an unpaired surrogate escape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) assert_order_error(cases[i].json, cases[i].message);

    /* what is valid stays valid */
    order o;
    assert_int_equal(decode_text(&order_type,
                                 "{\"id\":1,\"customer\":\"q\\\"\\\\?\\ud83d\\ude00 \xf0\x9f\x98\x80 ?\\n\","
                                 "\"tags\":[\"\xed\x9f\xbf\",\"\xf4\x8f\xbf\xbf\",\"\\uFFFF\"],\"items\":[]}",
                                 &o),
                     CS_OK);
    assert_string_equal(o.customer, "q\"\\?😀 😀 ?\n");
    assert_string_equal(o.tags[0], "\xed\x9f\xbf");     /* U+D7FF, just below the surrogates */
    assert_string_equal(o.tags[1], "\xf4\x8f\xbf\xbf"); /* U+10FFFF */
    assert_string_equal(o.tags[2], "\xef\xbf\xbf");
    cs_value_free(&order_type, &o);
}

static char *nested(const char *prefix, const char *open, const char *close, size_t levels, const char *suffix) {
    size_t len = strlen(prefix) + levels * (strlen(open) + strlen(close)) + strlen(suffix);
    char *s = malloc(len + 1);
    assert_non_null(s);
    char *p = s;
    p += sprintf(p, "%s", prefix);
    for (size_t i = 0; i < levels; i++) p += sprintf(p, "%s", open);
    for (size_t i = 0; i < levels; i++) p += sprintf(p, "%s", close);
    sprintf(p, "%s", suffix);
    return s;
}

static void test_deep_nesting(void **state) {
    (void)state;
    char *s;
    /* 100000 levels inside an unknown key */
    s = nested("{\"x\":", "[", "]", 100000, "}");
    assert_order_error(s, "payload nesting deeper than 64 levels at byte 69");
    free(s);
    /* 100000 objects inside a known field */
    s = nested("{\"shipping\":", "{\"a\":", "}", 100000, "}");
    assert_order_error(s, "payload nesting deeper than 64 levels at byte 328");
    free(s);
    /* at the top */
    s = nested("", "[", "]", 100000, "");
    assert_order_error(s, "payload is not a JSON object (got an array)");
    free(s);
    s = nested("", "{\"a\":", "}", 100000, "");
    assert_order_error(s, "payload nesting deeper than 64 levels at byte 321");
    free(s);
    /* 100000 unclosed brackets */
    s = nested("{\"x\":", "[", "", 100000, "");
    assert_order_error(s, "payload nesting deeper than 64 levels at byte 69");
    free(s);

    /* exactly 64 levels are fine, 65 are not */
    order o;
    s = nested("{\"id\":1,\"customer\":\"c\",\"items\":[],\"x\":", "[", "]", 63, "}");
    assert_int_equal(decode_text(&order_type, s, &o), CS_OK);
    cs_value_free(&order_type, &o);
    free(s);
    s = nested("{\"id\":1,\"customer\":\"c\",\"items\":[],\"x\":", "[", "]", 64, "}");
    assert_order_error(s, "payload nesting deeper than 64 levels at byte 102");
    free(s);
}

/* Random bytes flipped, inserted, deleted and cut from valid payloads: every
 * result either decodes or fails with CS_ERR_DECODE and a zeroed value. */
static uint64_t rng_state;

static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t n) { return n ? rng_next() % n : 0; }

/* ------------------------------------------------------------------------ */
/* encoding                                                                 */
/* ------------------------------------------------------------------------ */

static void test_encode_escapes_strings(void **state) {
    (void)state;
    payout p = {
        .id = 1, .amount_cents = 2, .memo = "quote\" backslash\\ slash/ \b\f\n\r\t \x01\x1f\x7f é 😀 \xe2\x80\xa8 <>&'"};
    char *json = encode_or_fail(&payout_type, &p);
    assert_string_equal(json, "{\"id\":1,\"amount_cents\":2,\"memo\":\"quote\\\" backslash\\\\ slash/ "
                              "\\b\\f\\n\\r\\t \\u0001\\u001F\x7f é 😀 \xe2\x80\xa8 <>&'\"}");
    payout back;
    assert_int_equal(decode_text(&payout_type, json, &back), CS_OK);
    assert_string_equal(back.memo, p.memo);
    cs_value_free(&payout_type, &back);
    free(json);

    /* a long string full of escapes: yajl's buffer outgrows the stack arena */
    char *memo = malloc(30001);
    for (int i = 0; i < 30000; i++) memo[i] = "\"\\\n\x01"[i % 4];
    memo[30000] = '\0';
    p.memo = memo;
    json = encode_or_fail(&payout_type, &p);
    assert_int_equal(decode_text(&payout_type, json, &back), CS_OK);
    assert_string_equal(back.memo, memo);
    cs_value_free(&payout_type, &back);
    free(json);
    free(memo);
}

static void test_encode_errors(void **state) {
    (void)state;
    payout p = {.id = 1, .memo = "\xff"};
    assert_encode_error(&payout_type, &p, "field \"memo\": string is not valid UTF-8");
    p.memo = "\xed\xa0\x80";
    assert_encode_error(&payout_type, &p, "field \"memo\": string is not valid UTF-8");

    order o = {.id = 1, .customer = NULL};
    assert_encode_error(&order_type, &o, "field \"customer\": missing (required)");
    o.customer = "c";
    o.weight = NAN;
    assert_encode_error(&order_type, &o, "field \"weight\": NaN cannot be written in JSON");
    o.weight = -INFINITY;
    assert_encode_error(&order_type, &o, "field \"weight\": infinity cannot be written in JSON");
    o.weight = 0;
    double ratios[] = {1, INFINITY};
    o.ratios = ratios;
    o.n_ratios = 2;
    assert_encode_error(&order_type, &o, "field \"ratios[1]\": infinity cannot be written in JSON");
    o.ratios = NULL;
    o.n_ratios = 0;
    o.n_codes = 2;
    assert_encode_error(&order_type, &o, "field \"codes\": 2 items but a NULL pointer");
    o.n_codes = 0;
    bool flags[4] = {0};
    o.flags = flags;
    o.n_flags = 4;
    assert_encode_error(&order_type, &o, "field \"flags\": 4 items, more than the maximum 3");
    o.n_flags = 0;
    char *tags[] = {"a", NULL};
    o.tags = tags;
    o.n_tags = 2;
    assert_encode_error(&order_type, &o, "field \"tags[1]\": NULL string in an array");
    o.n_tags = 0;
    memcpy(o.code, "12345678", 8); /* no NUL */
    assert_encode_error(&order_type, &o, "field \"code\": char array is not NUL-terminated");
    o.code[0] = '\0';
    item items[] = {{.sku = 1}, {.sku = 2, .price.currency = "\xc3"}};
    o.items = items;
    o.n_items = 2;
    assert_encode_error(&order_type, &o, "field \"items[1].price.currency\": string is not valid UTF-8");
}

/* A comma-decimal LC_NUMERIC must not leak into the numbers the codec writes
 * and reads. Under a dot-decimal locale the test would prove nothing, so it
 * fails when no comma-decimal locale can be set. ctest provides de_DE.UTF-8:
 * the unit.json_locale fixture compiles it into the build tree and unit.json
 * runs with LOCPATH pointing there (tests/CMakeLists.txt). */
static void test_locale_does_not_leak_into_numbers(void **state) {
    (void)state;
    const char *locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"};
    const char *set = NULL;
    for (size_t i = 0; i < sizeof locales / sizeof locales[0] && set == NULL; i++) {
        set = setlocale(LC_NUMERIC, locales[i]);
        if (set && strcmp(localeconv()->decimal_point, ",") != 0) set = NULL; /* not comma-decimal after all */
    }
    if (!set) {
        setlocale(LC_NUMERIC, "C");
        fail_msg("no comma-decimal locale could be set (tried de_DE.UTF-8, fr_FR.UTF-8; LOCPATH=%s), so the test "
                 "would prove nothing: run it through ctest, which builds de_DE.UTF-8 into the build tree (needs "
                 "localedef and the Debian package locales), or install one with localedef -i de_DE -f UTF-8 "
                 "de_DE.UTF-8",
                 getenv("LOCPATH") ? getenv("LOCPATH") : "unset");
    }
    printf("[ info     ] LC_NUMERIC=%s (decimal point '%s')\n", set, localeconv()->decimal_point);
    char probe[8];
    snprintf(probe, sizeof probe, "%.1f", 0.5);
    assert_string_equal(probe, "0,5"); /* the premise: printf in this thread writes a comma */
    order o = {.id = 1, .customer = "c", .weight = 0.5};
    char *json = encode_or_fail(&order_type, &o);
    assert_non_null(strstr(json, "\"weight\":0.5,"));
    order back;
    assert_int_equal(decode_text(&order_type, json, &back), CS_OK);
    assert_true(back.weight == 0.5);
    cs_value_free(&order_type, &back);
    free(json);
    setlocale(LC_NUMERIC, "C");
}

/* ------------------------------------------------------------------------ */
/* schema                                                                   */
/* ------------------------------------------------------------------------ */

/* The value at a path of keys (NULL-terminated), or NULL. */
static yajl_val at(yajl_val v, ...) {
    const char *path[8];
    size_t n = 0;
    va_list ap;
    va_start(ap, v);
    for (const char *key; n < 7 && (key = va_arg(ap, const char *)) != NULL;) path[n++] = key;
    va_end(ap);
    path[n] = NULL;
    return yajl_tree_get(v, path, yajl_t_any);
}

static const char *string_of(yajl_val v) {
    assert_non_null(v);
    assert_true(YAJL_IS_STRING(v));
    return YAJL_GET_STRING(v);
}

static long long integer_of(yajl_val v) {
    assert_non_null(v);
    assert_true(YAJL_IS_INTEGER(v));
    return YAJL_GET_INTEGER(v);
}

static bool array_has_string(yajl_val array, const char *s) {
    if (!YAJL_IS_ARRAY(array)) return false;
    for (size_t i = 0; i < YAJL_GET_ARRAY(array)->len; i++) {
        yajl_val v = YAJL_GET_ARRAY(array)->values[i];
        if (YAJL_IS_STRING(v) && strcmp(v->u.string, s) == 0) return true;
    }
    return false;
}

static void test_schema_of_a_nested_type(void **state) {
    (void)state;
    char *schema = NULL;
    assert_int_equal(cs_json_schema(&order_type, &schema), CS_OK);
    char err[256];
    yajl_val root = yajl_tree_parse(schema, err, sizeof err);
    if (root == NULL) fail_msg("schema is not JSON (%s): %s", err, schema);

    assert_string_equal(string_of(at(root, "$schema", NULL)), "https://json-schema.org/draft/2020-12/schema");
    assert_string_equal(string_of(at(root, "title", NULL)), "order");
    assert_string_equal(string_of(at(root, "type", NULL)), "object");

    yajl_val required = at(root, "required", NULL);
    assert_true(array_has_string(required, "id"));
    assert_true(array_has_string(required, "customer"));
    assert_true(array_has_string(required, "items"));
    assert_false(array_has_string(required, "total"));
    assert_int_equal(YAJL_GET_ARRAY(required)->len, 3);

    assert_string_equal(string_of(at(root, "properties", "id", "type", NULL)), "integer");
    assert_int_equal(integer_of(at(root, "properties", "id", "minimum", NULL)), 0);
    yajl_val maximum = at(root, "properties", "id", "maximum", NULL); /* beyond long long: kept as text */
    assert_true(YAJL_IS_NUMBER(maximum));
    assert_string_equal(YAJL_GET_NUMBER(maximum), "18446744073709551615");
    assert_true(integer_of(at(root, "properties", "small", "minimum", NULL)) == INT32_MIN);
    assert_true(integer_of(at(root, "properties", "count", "maximum", NULL)) == UINT32_MAX);
    /* yajl_tree reads INT64_MIN as out of range: compare the text */
    assert_string_equal(YAJL_GET_NUMBER(at(root, "properties", "total", "minimum", NULL)), "-9223372036854775808");
    assert_string_equal(string_of(at(root, "properties", "weight", "type", NULL)), "number");
    assert_string_equal(string_of(at(root, "properties", "gift", "type", NULL)), "boolean");
    assert_string_equal(string_of(at(root, "properties", "customer", "type", NULL)), "string");
    assert_string_equal(string_of(at(root, "properties", "code", "type", NULL)), "string");
    assert_string_equal(string_of(at(root, "properties", "shipping", "type", NULL)), "object");
    assert_string_equal(string_of(at(root, "properties", "shipping", "title", NULL)), "money");
    assert_string_equal(string_of(at(root, "properties", "tags", "type", NULL)), "array");
    assert_string_equal(string_of(at(root, "properties", "tags", "items", "type", NULL)), "string");
    assert_int_equal(integer_of(at(root, "properties", "flags", "maxItems", NULL)), 3);
    assert_int_equal(integer_of(at(root, "properties", "tags", "maxItems", NULL)), CS_ARRAY_MAX_ITEMS);

    yajl_val item_schema = at(root, "properties", "items", "items", NULL);
    assert_string_equal(string_of(at(item_schema, "title", NULL)), "item");
    assert_string_equal(string_of(at(item_schema, "type", NULL)), "object");
    assert_true(array_has_string(at(item_schema, "required", NULL), "sku"));
    assert_string_equal(string_of(at(item_schema, "properties", "price", "properties", "amount_cents", "type", NULL)),
                        "integer");
    assert_true(array_has_string(at(item_schema, "properties", "price", "required", NULL), "amount_cents"));
    assert_null(at(root, "$defs", NULL));

    yajl_tree_free(root);
    free(schema);
}

static void test_schema_of_recursive_types(void **state) {
    (void)state;
    char *schema = NULL;
    assert_int_equal(cs_json_schema(&node_type, &schema), CS_OK);
    assert_string_equal(schema, "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"title\":\"node\","
                                "\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                                "\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"},\"maxItems\":10000}},"
                                "\"required\":[\"name\"]}");
    free(schema);

    assert_int_equal(cs_json_schema(&forest_type, &schema), CS_OK);
    assert_string_equal(schema,
                        "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"title\":\"forest\","
                        "\"type\":\"object\",\"properties\":{\"trees\":{\"type\":\"array\",\"items\":"
                        "{\"title\":\"node\",\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                        "\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"},\"maxItems\":10000}},"
                        "\"required\":[\"name\"]},\"maxItems\":10000}},"
                        "\"$defs\":{\"node\":{\"title\":\"node\",\"type\":\"object\",\"properties\":{\"name\":"
                        "{\"type\":\"string\"},\"children\":{\"type\":\"array\",\"items\":{\"$ref\":"
                        "\"#/$defs/node\"},\"maxItems\":10000}},\"required\":[\"name\"]}}}");
    free(schema);
}

/* ------------------------------------------------------------------------ */
/* tables and arguments                                                     */
/* ------------------------------------------------------------------------ */

typedef struct holder {
    int64_t a;
    int64_t b;
    int32_t *small;
    size_t n_small;
    money m;
} holder;

static void assert_table_error(const cs_field *fields, size_t n, const char *message) {
    const cs_type t = {"holder", sizeof(holder), fields, n};
    assert_int_equal(cs_type_check(&t), CS_ERR_ARG);
    assert_string_equal(cs_errmsg(), message);
    holder h;
    memset(&h, 0xAB, sizeof h);
    assert_int_equal(cs_json_decode(&t, "{}", 2, &h), CS_ERR_ARG);
    assert_string_equal(cs_errmsg(), message);
    char *json = NULL;
    memset(&h, 0, sizeof h);
    assert_int_equal(cs_json_encode(&t, &h, &json, NULL), CS_ERR_ARG);
    assert_string_equal(cs_errmsg(), message);
    assert_int_equal(cs_json_schema(&t, &json), CS_ERR_ARG);
    assert_string_equal(cs_errmsg(), message);
}

static void test_invalid_tables(void **state) {
    (void)state;
    const cs_field twice[] = {
        CS_FIELD_I64(holder, a, CS_OPTIONAL),
        {.name = "a", .kind = CS_KIND_I64, .offset = offsetof(holder, b), .size = sizeof(int64_t)},
    };
    assert_table_error(twice, 2, "invalid field table: type \"holder\" field \"a\": named twice");

    const cs_field no_type[] = {
        {.name = "m", .kind = CS_KIND_OBJECT, .offset = offsetof(holder, m), .size = sizeof(money)},
    };
    assert_table_error(no_type, 1, "invalid field table: type \"holder\" field \"m\": no nested type");

    const cs_field wrong_type[] = {CS_FIELD_OBJECT(holder, m, &item_type, CS_OPTIONAL)};
    assert_table_error(wrong_type, 1,
                       "invalid field table: type \"holder\" field \"m\": member size does not match the nested "
                       "type's size");

    const cs_field wrong_elem[] = {CS_FIELD_ARRAY(holder, small, n_small, CS_KIND_I64, CS_OPTIONAL)};
    assert_table_error(wrong_elem, 1,
                       "invalid field table: type \"holder\" field \"small\": element size does not match the "
                       "element kind");

    const cs_field wrong_items[] = {CS_FIELD_ARRAY(holder, small, n_small, &money_type, CS_OPTIONAL)};
    assert_table_error(wrong_items, 1,
                       "invalid field table: type \"holder\" field \"small\": element size does not match the "
                       "element type's size");

    const cs_field nested_arrays[] = {
        {.name = "small",
         .kind = CS_KIND_ARRAY,
         .offset = offsetof(holder, small),
         .size = sizeof(int32_t),
         .elem = CS_KIND_ARRAY,
         .count_offset = offsetof(holder, n_small)},
    };
    assert_table_error(nested_arrays, 1,
                       "invalid field table: type \"holder\" field \"small\": array elements must be scalars, "
                       "strings or objects");

    const cs_field outside[] = {
        {.name = "a", .kind = CS_KIND_I64, .offset = sizeof(holder) - 4, .size = sizeof(int64_t)},
    };
    assert_table_error(outside, 1, "invalid field table: type \"holder\" field \"a\": member lies outside the struct");

    const cs_field bad_kind[] = {{.name = "a", .kind = (cs_kind)99, .offset = 0, .size = 8}};
    assert_table_error(bad_kind, 1, "invalid field table: type \"holder\" field \"a\": unknown kind");

    const cs_field bad_presence[] = {
        {.name = "a", .kind = CS_KIND_I64, .presence = (cs_presence)7, .offset = 0, .size = 8},
    };
    assert_table_error(bad_presence, 1,
                       "invalid field table: type \"holder\" field \"a\": presence is neither CS_OPTIONAL nor "
                       "CS_REQUIRED");

    const cs_field no_name[] = {{.name = NULL, .kind = CS_KIND_I64, .offset = 0, .size = 8}};
    assert_table_error(no_name, 1, "invalid field table: type \"holder\" field \"(null)\": no name");

    /* a bad table deep inside a good one is found too */
    const cs_field bad_inner_fields[] = {{.name = "x", .kind = CS_KIND_BOOL, .offset = 100, .size = 1}};
    const cs_type bad_inner = {"inner", 8, bad_inner_fields, 1};
    const cs_field outer[] = {
        {.name = "a", .kind = CS_KIND_OBJECT, .offset = 0, .size = 8, .type = &bad_inner},
    };
    assert_table_error(outer, 1, "invalid field table: type \"inner\" field \"x\": member lies outside the struct");

    assert_int_equal(cs_type_check(&order_type), CS_OK);
    assert_int_equal(cs_type_check(&node_type), CS_OK);
    assert_int_equal(cs_type_check(NULL), CS_ERR_ARG);
}

static void test_null_arguments(void **state) {
    (void)state;
    order o;
    char *json;
    assert_int_equal(cs_json_decode(NULL, "{}", 2, &o), CS_ERR_ARG);
    assert_string_equal(cs_errmsg(), "cs_json_decode: type and out must not be NULL");
    assert_int_equal(cs_json_decode(&order_type, "{}", 2, NULL), CS_ERR_ARG);
    assert_int_equal(cs_json_encode(NULL, &o, &json, NULL), CS_ERR_ARG);
    assert_int_equal(cs_json_encode(&order_type, NULL, &json, NULL), CS_ERR_ARG);
    assert_null(json);
    assert_int_equal(cs_json_encode(&order_type, &o, NULL, NULL), CS_ERR_ARG);
    assert_int_equal(cs_json_schema(NULL, &json), CS_ERR_ARG);
    assert_int_equal(cs_json_schema(&order_type, NULL), CS_ERR_ARG);
    cs_value_free(NULL, &o);
    cs_value_free(&order_type, NULL);
}

static void test_codec_interface(void **state) {
    (void)state;
    const cs_codec *c = &cs_codec_json;
    assert_string_equal(c->name, "json");
    assert_string_equal(c->content_type, "application/json");
    assert_string_equal(c->schema_format, CS_SCHEMA_FORMAT_JSON);
    payout p = {.id = 7, .amount_cents = -3, .memo = "m"};
    char *json = NULL;
    size_t len = 0;
    assert_int_equal(c->encode(c, &payout_type, &p, &json, &len), CS_OK);
    assert_string_equal(json, "{\"id\":7,\"amount_cents\":-3,\"memo\":\"m\"}");
    payout back;
    assert_int_equal(c->decode(c, &payout_type, json, len, &back), CS_OK);
    assert_true(back.id == 7 && back.amount_cents == -3);
    assert_string_equal(back.memo, "m");
    cs_value_free(&payout_type, &back);
    free(json);
    assert_int_equal(c->decode(c, &payout_type, NULL, 0, &back), CS_ERR_DECODE);
    assert_string_equal(cs_errmsg(), "payload is null (tombstone)");
    char *schema = NULL;
    assert_int_equal(c->schema(c, &payout_type, &schema), CS_OK);
    assert_non_null(strstr(schema, "\"title\":\"payout\""));
    free(schema);
}

/* ------------------------------------------------------------------------ */
/* randomised round trips                                                   */
/* ------------------------------------------------------------------------ */

/* A random well-formed UTF-8 string of up to max_bytes bytes (no NUL). */
static char *random_utf8(size_t max_bytes) {
    char *s = malloc(max_bytes + 1);
    assert_non_null(s);
    size_t len = 0, target = rng_below(max_bytes + 1);
    while (len < target) {
        uint32_t cp;
        switch (rng_below(5)) {
        case 0: cp = 1 + (uint32_t)rng_below(0x1F); break;            /* control characters */
        case 1: cp = (uint32_t) "\"\\/ aZ9?"[rng_below(8)]; break;    /* characters that need care */
        case 2: cp = 0x80 + (uint32_t)rng_below(0x800 - 0x80); break; /* two bytes */
        case 3:
            do cp = 0x800 + (uint32_t)rng_below(0x10000 - 0x800); /* three bytes, no surrogates */
            while (cp >= 0xD800 && cp <= 0xDFFF);
            break;
        default: cp = 0x10000 + (uint32_t)rng_below(0x110000 - 0x10000); break; /* four bytes */
        }
        unsigned char b[4];
        size_t n;
        if (cp < 0x80) {
            b[0] = (unsigned char)cp;
            n = 1;
        } else if (cp < 0x800) {
            b[0] = (unsigned char)(0xC0 | cp >> 6);
            b[1] = (unsigned char)(0x80 | (cp & 0x3F));
            n = 2;
        } else if (cp < 0x10000) {
            b[0] = (unsigned char)(0xE0 | cp >> 12);
            b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            b[2] = (unsigned char)(0x80 | (cp & 0x3F));
            n = 3;
        } else {
            b[0] = (unsigned char)(0xF0 | cp >> 18);
            b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
            b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            b[3] = (unsigned char)(0x80 | (cp & 0x3F));
            n = 4;
        }
        if (len + n > max_bytes) break;
        memcpy(s + len, b, n);
        len += n;
    }
    s[len] = '\0';
    return s;
}

static double random_double(void) {
    double d;
    do {
        uint64_t bits = rng_next();
        if (rng_below(4) == 0) bits &= 0xFFF0000000000000ull; /* short mantissas too */
        memcpy(&d, &bits, sizeof d);
    } while (!isfinite(d));
    return d;
}

static void random_chars(char *dst, size_t cap) {
    char *s = random_utf8(cap - 1);
    strcpy(dst, s);
    free(s);
}

static void random_money(money *m) {
    m->amount_cents = (int64_t)rng_next();
    random_chars(m->currency, sizeof m->currency);
}

/* Builds a random order in memory owned like a decoded one (cs_value_free frees it). */
static void random_order(order *o) {
    memset(o, 0, sizeof *o);
    o->id = rng_next();
    o->total = (int64_t)rng_next();
    o->small = (int32_t)rng_next();
    o->count = (uint32_t)rng_next();
    o->gift = rng_below(2);
    o->weight = random_double();
    o->customer = random_utf8(40);
    random_chars(o->code, sizeof o->code);
    random_money(&o->shipping);
    o->n_items = rng_below(5);
    o->items = o->n_items ? calloc(o->n_items, sizeof *o->items) : NULL;
    for (size_t i = 0; i < o->n_items; i++) {
        o->items[i].sku = rng_next() >> rng_below(64);
        o->items[i].qty = (int32_t)rng_next();
        random_money(&o->items[i].price);
        o->items[i].note = rng_below(2) ? random_utf8(20) : NULL;
    }
    o->n_codes = rng_below(5);
    o->codes = o->n_codes ? calloc(o->n_codes, sizeof *o->codes) : NULL;
    for (size_t i = 0; i < o->n_codes; i++) o->codes[i] = (int64_t)rng_next() >> rng_below(64);
    o->n_tags = rng_below(4);
    o->tags = o->n_tags ? calloc(o->n_tags, sizeof *o->tags) : NULL;
    for (size_t i = 0; i < o->n_tags; i++) o->tags[i] = random_utf8(12);
    o->n_ratios = rng_below(4);
    o->ratios = o->n_ratios ? calloc(o->n_ratios, sizeof *o->ratios) : NULL;
    for (size_t i = 0; i < o->n_ratios; i++) o->ratios[i] = random_double();
    o->n_flags = rng_below(4);
    o->flags = o->n_flags ? calloc(o->n_flags, sizeof *o->flags) : NULL;
    for (size_t i = 0; i < o->n_flags; i++) o->flags[i] = rng_below(2);
    o->n_ports = rng_below(3);
    o->ports = o->n_ports ? calloc(o->n_ports, sizeof *o->ports) : NULL;
    for (size_t i = 0; i < o->n_ports; i++) o->ports[i] = (uint32_t)rng_next();
}

static bool same_string(const char *a, const char *b) {
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

static bool same_money(const money *a, const money *b) {
    return a->amount_cents == b->amount_cents && strcmp(a->currency, b->currency) == 0;
}

static bool same_order(const order *a, const order *b) {
    if (a->id != b->id || a->total != b->total || a->small != b->small || a->count != b->count || a->gift != b->gift ||
        memcmp(&a->weight, &b->weight, sizeof a->weight) != 0 || !same_string(a->customer, b->customer) ||
        strcmp(a->code, b->code) != 0 || !same_money(&a->shipping, &b->shipping) || a->n_items != b->n_items ||
        a->n_codes != b->n_codes || a->n_tags != b->n_tags || a->n_ratios != b->n_ratios || a->n_flags != b->n_flags ||
        a->n_ports != b->n_ports)
        return false;
    for (size_t i = 0; i < a->n_items; i++)
        if (a->items[i].sku != b->items[i].sku || a->items[i].qty != b->items[i].qty ||
            !same_money(&a->items[i].price, &b->items[i].price) || !same_string(a->items[i].note, b->items[i].note))
            return false;
    for (size_t i = 0; i < a->n_tags; i++)
        if (!same_string(a->tags[i], b->tags[i])) return false;
    return (a->n_codes == 0 || memcmp(a->codes, b->codes, a->n_codes * sizeof *a->codes) == 0) &&
           (a->n_ratios == 0 || memcmp(a->ratios, b->ratios, a->n_ratios * sizeof *a->ratios) == 0) &&
           (a->n_flags == 0 || memcmp(a->flags, b->flags, a->n_flags * sizeof *a->flags) == 0) &&
           (a->n_ports == 0 || memcmp(a->ports, b->ports, a->n_ports * sizeof *a->ports) == 0);
}

static void test_random_round_trips(void **state) {
    (void)state;
    rng_state = test_seed;
    for (int round = 0; round < 3000; round++) {
        order o, back;
        random_order(&o);
        char *json = encode_or_fail(&order_type, &o);
        if (decode_text(&order_type, json, &back) != CS_OK)
            fail_msg("seed %" PRIu64 " round %d: %s\n%s", test_seed, round, cs_errmsg(), json);
        if (!same_order(&o, &back))
            fail_msg("seed %" PRIu64 " round %d: decoded value differs\n%s", test_seed, round, json);
        char *again = encode_or_fail(&order_type, &back);
        if (strcmp(json, again) != 0)
            fail_msg("seed %" PRIu64 " round %d: encodings differ\n%s\n%s", test_seed, round, json, again);
        free(again);
        free(json);
        cs_value_free(&order_type, &back);
        cs_value_free(&order_type, &o);
    }
}

static void test_random_mutations_never_crash(void **state) {
    (void)state;
    static const char alphabet[] = "{}[],:\"\\0123456789-+.eEtrufalsn \t\n\x80\xff\xc3\xed";
    rng_state = test_seed ^ 0x5555;
    size_t decoded = 0, refused = 0;
    for (int round = 0; round < 3000; round++) {
        order o;
        random_order(&o);
        char *json = encode_or_fail(&order_type, &o);
        cs_value_free(&order_type, &o);
        size_t len = strlen(json);
        for (int m = 0, edits = 1 + (int)rng_below(4); m < edits && len > 0; m++) {
            size_t at = rng_below(len);
            switch (rng_below(4)) {
            case 0: json[at] = (char)rng_below(256); break;
            case 1: json[at] = alphabet[rng_below(sizeof alphabet - 1)]; break;
            case 2:
                memmove(json + at, json + at + 1, len - at);
                len--;
                break;
            default: len = at; break;
            }
        }
        order out;
        cs_err err = cs_json_decode(&order_type, json, len, &out);
        if (err == CS_OK) {
            decoded++;
            cs_value_free(&order_type, &out);
        } else {
            refused++;
            assert_int_equal(err, CS_ERR_DECODE);
            assert_zeroed(&out, sizeof out);
        }
        free(json);
    }
    printf("[ info     ] mutated payloads: %zu decoded, %zu refused\n", decoded, refused);
}

/* Every function is documented as callable from any thread at once: decode
 * and encode the same types from four threads (run under TSan in make test-tsan). */
static void *codec_worker(void *arg) {
    unsigned id = *(const unsigned *)arg;
    for (unsigned i = 0; i < 2000; i++) {
        char json[256];
        snprintf(json, sizeof json,
                 "{\"id\":%u,\"customer\":\"t%u\",\"weight\":%u.5,\"items\":[{\"sku\":%u}],\"zzz\":[1]}", i, id, i, id);
        order o;
        if (decode_text(&order_type, json, &o) != CS_OK || o.id != i || o.weight != i + 0.5 || o.items[0].sku != id)
            return "decode";
        char *out = NULL;
        if (cs_json_encode(&order_type, &o, &out, NULL) != CS_OK) return "encode";
        cs_value_free(&order_type, &o);
        free(out);
        if (decode_text(&order_type, "{\"id\":-1}", &o) != CS_ERR_DECODE ||
            strcmp(cs_errmsg(), "field \"id\": -1 is out of range for uint64 (0..18446744073709551615)") != 0)
            return "error message";
    }
    return NULL;
}

static void test_threads_share_nothing(void **state) {
    (void)state;
    pthread_t threads[4];
    unsigned ids[4];
    for (unsigned i = 0; i < 4; i++) {
        ids[i] = i;
        assert_int_equal(pthread_create(&threads[i], NULL, codec_worker, &ids[i]), 0);
    }
    for (unsigned i = 0; i < 4; i++) {
        void *failed;
        assert_int_equal(pthread_join(threads[i], &failed), 0);
        if (failed) fail_msg("thread %u: %s failed", i, (const char *)failed);
    }
}

/* ------------------------------------------------------------------------ */
/* cost                                                                     */
/* ------------------------------------------------------------------------ */

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* yajl alone, callbacks that do nothing: the floor any yajl-based decoder stands on. */
static int ignore_value(void *ctx) {
    (void)ctx;
    return 1;
}

static int ignore_text(void *ctx, const unsigned char *s, size_t len) {
    (void)ctx;
    (void)s;
    (void)len;
    return 1;
}

static int ignore_number(void *ctx, const char *s, size_t len) {
    (void)ctx;
    (void)s;
    (void)len;
    return 1;
}

static const yajl_callbacks ignore_all = {
    .yajl_number = ignore_number,
    .yajl_string = ignore_text,
    .yajl_map_key = ignore_text,
    .yajl_start_map = ignore_value,
    .yajl_end_map = ignore_value,
};

/* Sets `result` to the best of three runs of `rounds` executions of `body`, in ns per execution. */
#define BEST_NS(result, rounds, ...)                                                                                   \
    do {                                                                                                               \
        (result) = 1e18;                                                                                               \
        for (int trial_ = 0; trial_ < 3; trial_++) {                                                                   \
            double t0_ = now_ns();                                                                                     \
            for (int i_ = 0; i_ < (rounds); i_++) {                                                                    \
                __VA_ARGS__;                                                                                           \
            }                                                                                                          \
            double ns_ = (now_ns() - t0_) / (rounds);                                                                  \
            if (ns_ < (result)) (result) = ns_;                                                                        \
        }                                                                                                              \
    } while (0)

static void print_decode_cost(const char *json, size_t len, int rounds) {
    payout p;
    payout_ids ids;
    double raw, full, integers;
    BEST_NS(raw, rounds, {
        yajl_handle h = yajl_alloc(&ignore_all, NULL, NULL);
        yajl_parse(h, (const unsigned char *)json, len);
        yajl_complete_parse(h);
        yajl_free(h);
    });
    BEST_NS(full, rounds, {
        if (cs_json_decode(&payout_type, json, len, &p) != CS_OK) fail_msg("%s", cs_errmsg());
        cs_value_free(&payout_type, &p);
    });
    BEST_NS(integers, rounds, {
        if (cs_json_decode(&payout_ids_type, json, len, &ids) != CS_OK) fail_msg("%s", cs_errmsg());
    });
    printf("[ info     ] %zu-byte record: cs_json_decode %.0f ns (two integers, memo skipped), %.0f ns "
           "(memo copied out, malloc + free); bare yajl parse %.0f ns\n",
           len, integers, full, raw);
}

static void test_decode_cost(void **state) {
    (void)state;
    char json[600];
    char memo[441];
    for (int i = 0; i < 440; i++) memo[i] = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789"[i % 64];
    memo[440] = '\0';
    int len = snprintf(json, sizeof json, "{\"id\":1234567890123,\"amount_cents\":-987654321,\"memo\":\"%s\"}", memo);
    print_decode_cost(json, (size_t)len, 100000);
    const char *small = "{\"id\":1234567,\"amount_cents\":-98765,\"memo\":\"ab\"}";
    print_decode_cost(small, strlen(small), 200000);

    payout out = {.id = 1234567890123u, .amount_cents = -987654321, .memo = memo};
    double encode;
    BEST_NS(encode, 100000, {
        char *text;
        if (cs_json_encode(&payout_type, &out, &text, NULL) != CS_OK) fail_msg("%s", cs_errmsg());
        free(text);
    });
    printf("[ info     ] %d-byte record: cs_json_encode %.0f ns\n", len, encode);
}

int main(void) {
    const char *env = getenv("CS_TEST_SEED");
    test_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("[ info     ] CS_TEST_SEED=%" PRIu64 "\n", test_seed);

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_kind),
        cmocka_unit_test(test_decode_then_encode_is_canonical),
        cmocka_unit_test(test_unknown_keys_are_skipped),
        cmocka_unit_test(test_repeated_keys_last_wins),
        cmocka_unit_test(test_null_leaves_optional_fields_zeroed),
        cmocka_unit_test(test_char_arrays),
        cmocka_unit_test(test_tree_round_trip),
        cmocka_unit_test(test_errors_name_the_field),
        cmocka_unit_test(test_integer_ranges),
        cmocka_unit_test(test_tombstone),
        cmocka_unit_test(test_invalid_json),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_encode_escapes_strings),
        cmocka_unit_test(test_encode_errors),
        cmocka_unit_test(test_locale_does_not_leak_into_numbers),
        cmocka_unit_test(test_schema_of_a_nested_type),
        cmocka_unit_test(test_schema_of_recursive_types),
        cmocka_unit_test(test_invalid_tables),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_codec_interface),
        cmocka_unit_test(test_random_round_trips),
        cmocka_unit_test(test_random_mutations_never_crash),
        cmocka_unit_test(test_threads_share_nothing),
        cmocka_unit_test(test_decode_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
