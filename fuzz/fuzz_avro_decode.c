/* fuzz_avro_decode.c — the Avro decoder (src/codec/avro_*.c) on payloads from
 * the network, resolving against a writer schema.
 *
 * Input byte 0 picks the writer schema: the table's own (every kind, unions,
 * maps, logical types) or an older/other writer that exercises resolution
 * (skipped fields, promotions, defaults). The rest is the payload. Properties:
 *   - no memory error or undefined behaviour (ASan/UBSan), no leak;
 *   - a failed decode leaves the struct zeroed;
 *   - a decoded value encodes with the table's schema and decodes again. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cstream/avro.h"

typedef struct line {
    char *sku;
    int64_t amount;
} line;
static const cs_field line_fields[] = {
    CS_FIELD_STRING(line, sku, CS_REQUIRED),
    CS_FIELD_I64(line, amount, CS_OPTIONAL),
};
static CS_TYPE(line_type, line, line_fields);

typedef struct entry {
    char *key;
    double value;
} entry;
static const cs_field entry_fields[] = {
    CS_FIELD_STRING(entry, key, CS_REQUIRED),
    CS_FIELD_F64(entry, value, CS_REQUIRED),
};
static CS_TYPE(entry_type, entry, entry_fields);

typedef struct branches {
    line line;
    char *text;
} branches;
static const cs_field branch_fields[] = {
    CS_FIELD_OBJECT(branches, line, &line_type, CS_OPTIONAL),
    CS_FIELD_STRING(branches, text, CS_OPTIONAL),
};
static CS_TYPE(branches_type, branches, branch_fields);

static const char *const symbols[] = {"A", "B", "C"};

typedef struct everything {
    bool flag;
    int32_t i32;
    uint64_t u64;
    float f32;
    char code[8];
    cs_bytes blob;
    unsigned char hash[4];
    int32_t status;
    line *lines;
    size_t n_lines;
    entry *entries;
    size_t n_entries;
    branches pick;
    int32_t which;
    char *memo;
    int64_t price;
    int64_t at;
} everything;
static const cs_field everything_fields[] = {
    CS_FIELD_BOOL(everything, flag, CS_OPTIONAL),
    CS_FIELD_I32(everything, i32, CS_OPTIONAL),
    CS_FIELD_U64(everything, u64, CS_OPTIONAL),
    CS_FIELD_F32(everything, f32, CS_OPTIONAL),
    CS_FIELD_CHARS(everything, code, CS_OPTIONAL),
    CS_FIELD_BYTES(everything, blob, CS_OPTIONAL),
    CS_FIELD_FIXED(everything, hash, CS_OPTIONAL),
    CS_FIELD_ENUM(everything, status, symbols, CS_OPTIONAL),
    CS_FIELD_ARRAY(everything, lines, n_lines, &line_type, CS_OPTIONAL),
    CS_FIELD_MAP(everything, entries, n_entries, &entry_type, CS_OPTIONAL),
    CS_FIELD_UNION(everything, pick, which, &branches_type, CS_OPTIONAL),
    CS_FIELD_STRING(everything, memo, CS_OPTIONAL),
    CS_FIELD_DECIMAL(everything, price, 18, 2, CS_OPTIONAL),
    CS_FIELD_TIMESTAMP_MILLIS(everything, at, CS_OPTIONAL),
};
static CS_TYPE(everything_type, everything, everything_fields);

/* An older writer: fewer fields, narrower numbers, an extra nested field. */
static const char OTHER[] =
    "{\"type\":\"record\",\"name\":\"everything\",\"fields\":["
    "{\"name\":\"i32\",\"type\":\"int\"},{\"name\":\"u64\",\"type\":\"int\"},"
    "{\"name\":\"f32\",\"type\":\"long\"},"
    "{\"name\":\"extra\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"map\",\"values\":[\"null\",\"bytes\"]}}},"
    "{\"name\":\"code\",\"type\":\"bytes\"},"
    "{\"name\":\"status\",\"type\":{\"type\":\"enum\",\"name\":\"s\",\"symbols\":[\"C\",\"X\",\"A\"]}},"
    "{\"name\":\"pick\",\"type\":[\"string\",{\"type\":\"record\",\"name\":\"line\",\"fields\":"
    "[{\"name\":\"sku\",\"type\":\"string\"}]}]}]}";

static cs_avro_schema *own, *other;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (own == NULL) {
        char *json = NULL;
        if (cs_avro_schema_of(&everything_type, &json) || cs_avro_schema_new(json, &own) ||
            cs_avro_schema_new(OTHER, &other))
            abort();
        free(json);
    }
    if (size == 0) return 0;
    const cs_avro_schema *writer = data[0] & 1 ? other : own;
    everything v;
    cs_err err = cs_avro_decode(&everything_type, writer, NULL, data + 1, size - 1, &v);
    if (err) {
        static const everything zero;
        if (memcmp(&v, &zero, sizeof v) != 0) abort();
        return 0;
    }
    char *bytes;
    size_t len;
    if (cs_avro_encode(&everything_type, own, &v, &bytes, &len) == CS_OK) {
        everything again;
        if (cs_avro_decode(&everything_type, own, NULL, bytes, len, &again) != CS_OK) abort();
        cs_value_free(&everything_type, &again);
        free(bytes);
    }
    cs_value_free(&everything_type, &v);
    return 0;
}
