/* fuzz_json_decode.c — the JSON field-table decoder (src/codec/json_decode.c)
 * on payloads from the network.
 *
 * Input byte 0 picks the field table: every kind optional (most payloads get
 * deep into the struct), the same kinds required (missing/null paths), or a
 * tree that contains itself (nesting up to CS_JSON_MAX_DEPTH). The rest is the
 * payload. Properties checked:
 *   - no memory error or undefined behaviour (ASan/UBSan), no leak (LeakSanitizer:
 *     what decode allocates is freed by cs_value_free, and by decode itself on failure);
 *   - a failed decode leaves the struct zeroed and sets a message;
 *   - a decoded value encodes, that JSON decodes again, and encodes to the same
 *     bytes (decode and encode agree on every kind). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cstream/codec.h"

typedef struct money {
    int64_t cents;
    char currency[4];
} money;
static const cs_field money_fields[] = {
    CS_FIELD_I64(money, cents, CS_OPTIONAL),
    CS_FIELD_CHARS(money, currency, CS_OPTIONAL),
};
static CS_TYPE(money_type, money, money_fields);

typedef struct everything {
    bool flag;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    double f64;
    char *text;
    char code[8];
    money price;
    money *prices;
    size_t n_prices;
    int64_t *ints;
    size_t n_ints;
    char **tags;
    size_t n_tags;
    double *ratios;
    size_t n_ratios;
    bool *bits;
    size_t n_bits;
    uint32_t *ports;
    size_t n_ports;
} everything;

#define EVERYTHING_FIELDS(req)                                                                                         \
    {                                                                                                                  \
        CS_FIELD_BOOL(everything, flag, req), CS_FIELD_I32(everything, i32, req), CS_FIELD_U32(everything, u32, req),  \
            CS_FIELD_I64(everything, i64, req), CS_FIELD_U64(everything, u64, req),                                    \
            CS_FIELD_F64(everything, f64, req), CS_FIELD_STRING(everything, text, req),                                \
            CS_FIELD_CHARS(everything, code, req), CS_FIELD_OBJECT(everything, price, &money_type, req),               \
            CS_FIELD_ARRAY(everything, prices, n_prices, &money_type, req),                                            \
            CS_FIELD_ARRAY(everything, ints, n_ints, CS_KIND_I64, req),                                                \
            CS_FIELD_ARRAY(everything, tags, n_tags, CS_KIND_STRING, req),                                             \
            CS_FIELD_ARRAY(everything, ratios, n_ratios, CS_KIND_F64, req),                                            \
            CS_FIELD_ARRAY_MAX(everything, bits, n_bits, CS_KIND_BOOL, 4, req),                                        \
            CS_FIELD_ARRAY(everything, ports, n_ports, CS_KIND_U32, req),                                              \
    }
static const cs_field optional_fields[] = EVERYTHING_FIELDS(CS_OPTIONAL);
static CS_TYPE(optional_type, everything, optional_fields);
static const cs_field required_fields[] = EVERYTHING_FIELDS(CS_REQUIRED);
static CS_TYPE(required_type, everything, required_fields);

typedef struct node {
    char *name;
    struct node *kids;
    size_t n_kids;
} node;
static const cs_type node_type;
static const cs_field node_fields[] = {
    CS_FIELD_STRING(node, name, CS_OPTIONAL),
    CS_FIELD_ARRAY(node, kids, n_kids, &node_type, CS_OPTIONAL),
};
static CS_TYPE(node_type, node, node_fields);

static const cs_type *const types[] = {&optional_type, &required_type, &node_type};

static void check(bool ok) {
    if (!ok) abort(); /* a broken property is a finding */
}

static bool all_zero(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const cs_type *type = types[data[0] % (sizeof types / sizeof *types)];
    size_t len = size - 1;
    /* an exact-size heap copy, not NUL-terminated: ASan sees any read past the payload */
    unsigned char *json = malloc(len ? len : 1);
    if (len) memcpy(json, data + 1, len);

    _Alignas(max_align_t) unsigned char value[sizeof(everything)], again[sizeof(everything)];
    memset(value, 0xA5, sizeof value); /* decode must zero it, whatever was there */
    cs_err err = cs_json_decode(type, len ? json : NULL, len, value);
    free(json);
    if (err) {
        check(all_zero(value, type->size));
        check(cs_errmsg()[0] != '\0');
        return 0;
    }
    char *first = NULL, *second = NULL;
    size_t first_len = 0, second_len = 0;
    check(cs_json_encode(type, value, &first, &first_len) == CS_OK);
    check(strlen(first) == first_len);
    check(cs_json_decode(type, first, first_len, again) == CS_OK);
    check(cs_json_encode(type, again, &second, &second_len) == CS_OK);
    check(first_len == second_len && !memcmp(first, second, first_len));
    free(first);
    free(second);
    cs_value_free(type, value);
    cs_value_free(type, again);
    return 0;
}
