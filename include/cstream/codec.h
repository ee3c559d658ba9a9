/** @file
 * cstream/codec.h — typed payloads: a field table per C struct, and the
 * codecs that turn payload bytes into such structs and back (JSON built in).
 *
 * A service describes its struct once, statically:
 *
 *     typedef struct payout { uint64_t id; int64_t amount_cents; bool urgent; char *memo; } payout;
 *     static const cs_field payout_fields[] = {
 *         CS_FIELD_U64(payout, id, CS_REQUIRED),
 *         CS_FIELD_I64(payout, amount_cents, CS_REQUIRED),
 *         CS_FIELD_BOOL(payout, urgent, CS_OPTIONAL),
 *         CS_FIELD_STRING(payout, memo, CS_OPTIONAL),
 *     };
 *     static CS_TYPE(payout_type, payout, payout_fields);
 *
 * then decodes a record's value with cs_json_decode(&payout_type, value, len, &p),
 * reads the struct, and releases what the decoder allocated with
 * cs_value_free(&payout_type, &p). Decoding never touches the delivery: the raw
 * bytes stay available through cs_delivery_value().
 *
 * The JSON key of a field is the member's name. The macros check at compile
 * time that the member has the C type the kind needs (uint64_t for U64,
 * char * for STRING, char[N] for CHARS, size_t for an array's count, ...).
 *
 * Decoding rules: unknown keys are skipped (with everything inside them); a
 * repeated key replaces the earlier value (last wins); null leaves an optional
 * field zeroed and is an error for a required one; a required key that is
 * missing is an error; integers are range-checked for the member's type and
 * must be written as integers (1, not 1.0 or 1e0); strings must be valid UTF-8
 * (strict: no overlong forms, surrogates or unpaired `\uD800`-style escapes)
 * without NUL characters (`\u0000`); nesting is limited to CS_JSON_MAX_DEPTH
 * levels and arrays to their max_items. The payload must be one JSON object.
 * "At byte N" in a syntax error counts the bytes read when it was found.
 *
 * Errors: every function returns a cs_err; on failure cs_errmsg() says why and
 * names the field by its path, e.g.
 *     field "items[2].amount_cents": expected an integer, got a string
 *     field "id": missing (required)
 *     payload is not valid JSON at byte 17: parse error: ...
 * A payload that does not decode is CS_ERR_DECODE (add the topic, partition
 * and offset when you log it), a value that does not encode CS_ERR_ENCODE,
 * an invalid field table or a NULL argument CS_ERR_ARG. Out of memory is
 * CS_ERR_NOMEM.
 *
 * Threads: every function here is a pure function of its arguments and may run
 * on any thread at the same time as the others. Numbers are read and written
 * in the "C" locale whatever the process's LC_NUMERIC. */
#ifndef CSTREAM_CODEC_H
#define CSTREAM_CODEC_H

#include "cstream/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cstream/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Deepest nesting of objects and arrays (the top-level object counts as 1). */
#define CS_JSON_MAX_DEPTH 64
/** Items an array field holds at most unless its table says otherwise. */
#define CS_ARRAY_MAX_ITEMS 10000
/** Fields one type may have. */
#define CS_TYPE_MAX_FIELDS 256

/** The C type of a field, and so its JSON type. */
typedef enum cs_kind {
    CS_KIND_BOOL = 1, /**< bool */
    CS_KIND_I32,      /**< int32_t */
    CS_KIND_U32,      /**< uint32_t */
    CS_KIND_I64,      /**< int64_t */
    CS_KIND_U64,      /**< uint64_t */
    CS_KIND_F64,      /**< double (NaN and infinities cannot be encoded) */
    CS_KIND_STRING,   /**< char *: NUL-terminated UTF-8, malloc'ed by decode, NULL when absent */
    CS_KIND_CHARS,    /**< char name[N]: at most N-1 bytes of UTF-8 and a NUL, "" when absent */
    CS_KIND_OBJECT,   /**< a nested struct, held by value */
    CS_KIND_ARRAY,    /**< T *items + size_t n_items; elements are scalars, STRING, OBJECT or BYTES */
    /* The kinds below are Avro's (cstream/avro.h); the JSON codec refuses a
     * table that uses them with CS_ERR_ARG naming the field. */
    CS_KIND_F32,   /**< float */
    CS_KIND_BYTES, /**< cs_bytes: data malloc'ed by decode, {NULL, 0} when absent */
    CS_KIND_FIXED, /**< unsigned char name[N]: exactly N bytes (Avro fixed of size N) */
    CS_KIND_ENUM,  /**< int32_t: the index of the symbol in the field's symbols */
    CS_KIND_MAP,   /**< E *entries + size_t n_entries; E is a struct of "key" (STRING) and "value" */
    CS_KIND_UNION, /**< a struct of branches held by value + int32_t which: 0 none, i + 1 branch i */
} cs_kind;

/** What a field's value means beyond its C type: an Avro logical type. The
 * JSON codec writes and reads the plain C value. */
typedef enum cs_logical {
    CS_LOGICAL_NONE = 0,         /**< the C value itself */
    CS_LOGICAL_DATE,             /**< int32_t: days since 1970-01-01 */
    CS_LOGICAL_TIMESTAMP_MILLIS, /**< int64_t: milliseconds since 1970-01-01T00:00:00Z */
    CS_LOGICAL_TIMESTAMP_MICROS, /**< int64_t: microseconds since 1970-01-01T00:00:00Z */
    CS_LOGICAL_UUID,             /**< STRING or CHARS: a UUID's 36-character text */
    CS_LOGICAL_DECIMAL,          /**< int64_t: the unscaled value; value = unscaled * 10^-scale */
} cs_logical;

/** Bytes owned by a struct (CS_KIND_BYTES): decode mallocs data, cs_value_free frees it. */
typedef struct cs_bytes {
    unsigned char *data; /**< the bytes; NULL when len is 0 */
    size_t len;          /**< how many */
} cs_bytes;

/** Whether a field must be in the JSON. */
typedef enum cs_presence {
    CS_OPTIONAL = 0, /**< may be missing or null: the member is then zeroed */
    CS_REQUIRED = 1, /**< must be present and not null (encode: a STRING must not be NULL) */
} cs_presence;

/** A struct described by its fields (see struct cs_type). */
typedef struct cs_type cs_type;

/** One member of a struct. Write these with the CS_FIELD_* macros. */
typedef struct cs_field {
    const char *name;           /**< JSON key */
    cs_kind kind;               /**< the member's kind */
    cs_presence presence;       /**< optional or required */
    size_t offset;              /**< offsetof the member (ARRAY: of the pointer) */
    size_t size;                /**< sizeof the member (ARRAY: of one element) */
    const cs_type *type;        /**< OBJECT, ARRAY of OBJECT: the nested type */
    cs_kind elem;               /**< ARRAY: the element kind */
    size_t count_offset;        /**< ARRAY, MAP: offsetof the size_t count; UNION: of the int32_t which */
    size_t max_items;           /**< ARRAY, MAP: 0 means CS_ARRAY_MAX_ITEMS */
    const char *const *symbols; /**< ENUM: the symbols, in index order */
    size_t n_symbols;           /**< ENUM: how many */
    cs_logical logical;         /**< the logical type, CS_LOGICAL_NONE for most fields */
    int precision;              /**< DECIMAL: digits in all (1..18) */
    int scale;                  /**< DECIMAL: digits after the point (0..precision) */
} cs_field;

/** A struct described by its fields. Write it with CS_TYPE.
 *
 * The codecs keep no copy: a type (and every table it refers to) must stay
 * valid while anything uses it, so define them statically. */
struct cs_type {
    const char *name;       /**< the schema's title */
    size_t size;            /**< sizeof the struct */
    const cs_field *fields; /**< the field table, in the order encode writes the keys */
    size_t n_fields;        /**< entries in fields (at most CS_TYPE_MAX_FIELDS) */
};

/* ---- field table macros ------------------------------------------------ */

#define CS__MEMBER(S, m) (((S *)0)->m)
/* offsetof(S, m), or a compile error if m is not of type T. */
#define CS__OFFSET_AS(S, m, T) _Generic(CS__MEMBER(S, m), T : offsetof(S, m))

#define CS__FIELD(S, m, k, T, req)                                                                                     \
    { .name = #m, .kind = (k), .presence = (req), .offset = CS__OFFSET_AS(S, m, T), .size = sizeof(CS__MEMBER(S, m)) }

/* Every CS_FIELD_* macro takes the struct type S, the member m (its name is
 * the JSON key) and CS_OPTIONAL or CS_REQUIRED, and expands to a cs_field
 * initializer; a member of the wrong C type is a compile error. */
/** A bool member.
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_BOOL(S, m, req) CS__FIELD(S, m, CS_KIND_BOOL, bool, req)
/** An int32_t member.
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_I32(S, m, req) CS__FIELD(S, m, CS_KIND_I32, int32_t, req)
/** A uint32_t member.
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_U32(S, m, req) CS__FIELD(S, m, CS_KIND_U32, uint32_t, req)
/** An int64_t member.
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_I64(S, m, req) CS__FIELD(S, m, CS_KIND_I64, int64_t, req)
/** A uint64_t member.
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_U64(S, m, req) CS__FIELD(S, m, CS_KIND_U64, uint64_t, req)
/** A double member.
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_F64(S, m, req) CS__FIELD(S, m, CS_KIND_F64, double, req)
/** char *m: decode mallocs it, cs_value_free frees it.
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_STRING(S, m, req) CS__FIELD(S, m, CS_KIND_STRING, char *, req)
/** char m[N]: a longer string is an error, not truncated.
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_CHARS(S, m, req)                                                                                      \
    {                                                                                                                  \
        .name = #m, .kind = CS_KIND_CHARS, .presence = (req),                                                          \
        .offset = _Generic(&CS__MEMBER(S, m), char(*)[sizeof(CS__MEMBER(S, m))]                                        \
                           : offsetof(S, m)),                                                                          \
        .size = sizeof(CS__MEMBER(S, m))                                                                               \
    }
/** A nested struct held by value; `type` is a const cs_type * describing it.
 * @param S the struct type. @param m the member. @param type_ the member's
 * cs_type. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_OBJECT(S, m, type_, req)                                                                              \
    {                                                                                                                  \
        .name = #m, .kind = CS_KIND_OBJECT, .presence = (req), .offset = offsetof(S, m),                               \
        .size = sizeof(CS__MEMBER(S, m)), .type = (type_)                                                              \
    }
/** An array: the pointer member `ptr` (named in JSON) and the size_t member
 * `count`. `elem` is a scalar kind (CS_KIND_I64, CS_KIND_STRING, ...) or a
 * const cs_type * for an array of structs. Decode mallocs the items (none for
 * []), cs_value_free frees them. At most CS_ARRAY_MAX_ITEMS items.
 * @param S the struct type. @param ptr the pointer member. @param count the
 * size_t count member. @param elem the element kind or type. @param req
 * CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_ARRAY(S, ptr, count, elem, req) CS_FIELD_ARRAY_MAX(S, ptr, count, elem, 0, req)
/** The same with at most `max` items (0: CS_ARRAY_MAX_ITEMS).
 * @param S the struct type. @param ptr the pointer member. @param count the
 * size_t count member. @param elem_ the element kind or type. @param max the
 * most items. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_ARRAY_MAX(S, ptr, count, elem_, max, req)                                                             \
    {                                                                                                                  \
        .name = #ptr, .kind = CS_KIND_ARRAY, .presence = (req), .offset = offsetof(S, ptr),       \
        .size = sizeof(*CS__MEMBER(S, ptr)),                                                      \
        .type = _Generic((elem_), const cs_type *: (elem_), cs_type *: (elem_), default: NULL),   \
        .elem = _Generic((elem_), const cs_type *: CS_KIND_OBJECT, cs_type *: CS_KIND_OBJECT,     \
                         default: (elem_)),                                                       \
        .count_offset = CS__OFFSET_AS(S, count, size_t), .max_items = (max)                    \
    }

/** A float member (Avro float).
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_F32(S, m, req) CS__FIELD(S, m, CS_KIND_F32, float, req)
/** A cs_bytes member (Avro bytes): decode mallocs data, cs_value_free frees it.
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_BYTES(S, m, req) CS__FIELD(S, m, CS_KIND_BYTES, cs_bytes, req)
/** unsigned char m[N] (Avro fixed of size N, named "<struct>_<member>").
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_FIXED(S, m, req)                                                                                      \
    {                                                                                                                  \
        .name = #m, .kind = CS_KIND_FIXED, .presence = (req),                                                          \
        .offset = _Generic(&CS__MEMBER(S, m), unsigned char(*)[sizeof(CS__MEMBER(S, m))]                               \
                           : offsetof(S, m)),                                                                          \
        .size = sizeof(CS__MEMBER(S, m))                                                                               \
    }
/** An int32_t member holding the index of one of `syms`, an array (not a
 * pointer) of symbol strings (Avro enum named "<struct>_<member>").
 * @param S the struct type. @param m the member. @param syms the symbols.
 * @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_ENUM(S, m, syms, req)                                                                                 \
    {                                                                                                                  \
        .name = #m, .kind = CS_KIND_ENUM, .presence = (req), .offset = CS__OFFSET_AS(S, m, int32_t),                   \
        .size = sizeof(int32_t), .symbols = (syms), .n_symbols = sizeof(syms) / sizeof((syms)[0])                      \
    }
/** A map with string keys (Avro map): the pointer member `ptr` to entries of
 * `entry_type` (a struct whose fields are exactly "key", a STRING, and
 * "value", any kind) and the size_t member `count`. Decode mallocs the
 * entries, cs_value_free frees them. At most CS_ARRAY_MAX_ITEMS entries.
 * @param S the struct type. @param ptr the pointer member. @param count the
 * size_t count member. @param entry_type the const cs_type * of an entry.
 * @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_MAP(S, ptr, count, entry_type, req)                                                                   \
    {                                                                                                                  \
        .name = #ptr, .kind = CS_KIND_MAP, .presence = (req), .offset = offsetof(S, ptr),                              \
        .size = sizeof(*CS__MEMBER(S, ptr)), .type = (entry_type), .elem = CS_KIND_OBJECT,                             \
        .count_offset = CS__OFFSET_AS(S, count, size_t)                                                                \
    }
/** A union (Avro union): the member `m`, a struct of `type_` with one field
 * per branch (each a scalar, STRING, BYTES or OBJECT; their presence is
 * ignored), and the int32_t member `which`: 0 for none (Avro null, only for an
 * optional field), i + 1 when branch i holds the value. Branches that are
 * records match a writer's by the record's name.
 * @param S the struct type. @param m the branches' struct. @param which the
 * int32_t selector. @param type_ the branches' cs_type. @param req
 * CS_OPTIONAL (the union has a null branch) or CS_REQUIRED. */
#define CS_FIELD_UNION(S, m, which, type_, req)                                                                        \
    {                                                                                                                  \
        .name = #m, .kind = CS_KIND_UNION, .presence = (req), .offset = offsetof(S, m),                                \
        .size = sizeof(CS__MEMBER(S, m)), .type = (type_), .count_offset = CS__OFFSET_AS(S, which, int32_t)            \
    }
/** An int32_t member counting days since 1970-01-01 (Avro date).
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_DATE(S, m, req)                                                                                       \
    {                                                                                                                  \
        .name = #m, .kind = CS_KIND_I32, .presence = (req), .offset = CS__OFFSET_AS(S, m, int32_t),                    \
        .size = sizeof(int32_t), .logical = CS_LOGICAL_DATE                                                            \
    }
/** An int64_t member counting milliseconds since the epoch (Avro timestamp-millis).
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_TIMESTAMP_MILLIS(S, m, req)                                                                           \
    {                                                                                                                  \
        .name = #m, .kind = CS_KIND_I64, .presence = (req), .offset = CS__OFFSET_AS(S, m, int64_t),                    \
        .size = sizeof(int64_t), .logical = CS_LOGICAL_TIMESTAMP_MILLIS                                                \
    }
/** An int64_t member counting microseconds since the epoch (Avro timestamp-micros).
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_TIMESTAMP_MICROS(S, m, req)                                                                           \
    {                                                                                                                  \
        .name = #m, .kind = CS_KIND_I64, .presence = (req), .offset = CS__OFFSET_AS(S, m, int64_t),                    \
        .size = sizeof(int64_t), .logical = CS_LOGICAL_TIMESTAMP_MICROS                                                \
    }
/** char m[N] (N >= 37) holding a UUID's text (Avro uuid).
 * @param S the struct type. @param m the member. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_UUID(S, m, req)                                                                                       \
    {                                                                                                                  \
        .name = #m, .kind = CS_KIND_CHARS, .presence = (req),                                                          \
        .offset = _Generic(&CS__MEMBER(S, m), char(*)[sizeof(CS__MEMBER(S, m))]                                        \
                           : offsetof(S, m)),                                                                          \
        .size = sizeof(CS__MEMBER(S, m)), .logical = CS_LOGICAL_UUID                                                   \
    }
/** An int64_t member holding a decimal's unscaled value (Avro decimal on
 * bytes): 12.34 with scale 2 is 1234.
 * @param S the struct type. @param m the member. @param prec digits in all
 * (1..18). @param scale_ digits after the point. @param req CS_OPTIONAL or CS_REQUIRED. */
#define CS_FIELD_DECIMAL(S, m, prec, scale_, req)                                                                      \
    {                                                                                                                  \
        .name = #m, .kind = CS_KIND_I64, .presence = (req), .offset = CS__OFFSET_AS(S, m, int64_t),                    \
        .size = sizeof(int64_t), .logical = CS_LOGICAL_DECIMAL, .precision = (prec), .scale = (scale_)                 \
    }

/** Defines `const cs_type var` for struct S (title "S") from the array `fields`.
 * Prefix with `static` for a file-local type. A type whose fields refer to it
 * (an array of itself) needs a declaration first: `static const cs_type var;`.
 * @param var the variable's name. @param S the struct type. @param fields an
 * array (not a pointer) of cs_field. */
#define CS_TYPE(var, S, fields) const cs_type var = {#S, sizeof(S), (fields), sizeof(fields) / sizeof((fields)[0])}

/* ---- values -------------------------------------------------------------- */

/** Checks a table (and every type it refers to): names, kinds, offsets and sizes
 * that fit the struct, array element sizes. CS_ERR_ARG names the bad field.
 * Decode, encode and schema check each table once per thread anyway; call this
 * at start-up to fail early.
 * @param type the type to check.
 * @retval CS_OK the table fits its struct.
 * @retval CS_ERR_ARG type is NULL or a field is wrong; cs_errmsg() names it. */
CS_API cs_err cs_type_check(const cs_type *type);

/** Frees what the value owns (strings, arrays and what they hold), not the value
 * itself, and zeroes those members. NULL value: nothing. Safe on a zeroed value
 * and on what cs_json_decode left after a failure.
 * @param type the value's type (NULL: nothing).
 * @param value the struct, owned by the caller. */
CS_API void cs_value_free(const cs_type *type, void *value);

/* ---- JSON ---------------------------------------------------------------- */

/** Decodes one JSON object into *out (type->size bytes). *out is zeroed first;
 * on failure everything allocated is freed and *out is zeroed again.
 * A NULL or empty payload (a tombstone) is CS_ERR_DECODE "payload is null (tombstone)".
 * Allocates only what the struct owns (strings, arrays).
 *
 * What it allocates is the caller's: release it with cs_value_free.
 * @param type the struct's type.
 * @param json the payload (read only during the call).
 * @param len its length in bytes.
 * @param out the caller's struct of type->size bytes.
 * @retval CS_OK *out holds the value.
 * @retval CS_ERR_DECODE the payload does not decode; cs_errmsg() names the
 *         field or the byte.
 * @retval CS_ERR_ARG type or out is NULL, or the table is invalid.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_json_decode(const cs_type *type, const void *json, size_t len, void *out);

/** Encodes *value as compact JSON: keys in table order, optional STRING members
 * that are NULL left out, doubles with the fewest of 15, 16 or 17 significant
 * digits that read back exactly ("0.1", not "0.10000000000000001").
 * *json_out is NUL-terminated (not counted in *len_out; len_out may be NULL)
 * and the caller frees it with free().
 * @param type the struct's type.
 * @param value the struct to encode (read only).
 * @param json_out receives the JSON text; NULL on failure.
 * @param len_out receives its length; may be NULL.
 * @retval CS_OK *json_out holds the text.
 * @retval CS_ERR_ENCODE the value cannot be encoded (e.g. a NaN, a required
 *         STRING that is NULL); cs_errmsg() names the field.
 * @retval CS_ERR_ARG an argument is NULL, or the table is invalid.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_json_encode(const cs_type *type, const void *value, char **json_out, size_t *len_out);

/** The JSON Schema (draft 2020-12) of what cs_json_encode writes: an object
 * titled with the type's name, its properties with their types (integer with
 * minimum and maximum of the C type, number, boolean, string, nested objects
 * inline, arrays with items and maxItems) and the required list. A type that
 * contains itself is referenced through $defs. The caller frees *schema_out.
 * @param type the struct's type.
 * @param schema_out receives the schema as JSON text (the caller free()s it); NULL on failure.
 * @retval CS_OK *schema_out holds the schema.
 * @retval CS_ERR_ARG an argument is NULL or the table is invalid.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_json_schema(const cs_type *type, char **schema_out);

/* ---- codecs -------------------------------------------------------------- */

struct cs_codec_counter;
/* The schema languages a codec's schema function can speak, named as AsyncAPI
 * 3.0's Multi Format Schema Object names them (its `schemaFormat`), so the
 * AsyncAPI document can carry the schema as it is and the AsyncAPI tools know
 * how to read it. */
/** JSON Schema (what cs_json_schema writes, which uses only keywords that
 * mean the same in draft-07): the schema function returns its JSON text. */
#define CS_SCHEMA_FORMAT_JSON "application/schema+json;version=draft-07"
/** An Apache Avro schema: the schema function returns its JSON text. */
#define CS_SCHEMA_FORMAT_AVRO "application/vnd.apache.avro;version=1.9.0"
/** A Protobuf 2 schema: the schema function returns the .proto text. */
#define CS_SCHEMA_FORMAT_PROTOBUF2 "application/vnd.google.protobuf;version=2"
/** A Protobuf 3 schema: the schema function returns the .proto text. */
#define CS_SCHEMA_FORMAT_PROTOBUF3 "application/vnd.google.protobuf;version=3"

/** A payload format. JSON is built in; Avro or Protobuf with a schema registry
 * fit the same shape, their registry client in `impl`.
 *
 * cstream calls the functions from any worker thread at the same time, so
 * they must be thread-safe; they follow the contracts of cs_json_decode,
 * cs_json_encode and cs_json_schema (out-strings are the caller's, freed with
 * free()). A codec given to cs_sub_decode must outlive the app. A codec made
 * before free_value existed leaves it NULL (designated initialisers, calloc)
 * and keeps working. */
typedef struct cs_codec {
    const char *name;         /**< "json" */
    const char *content_type; /**< "application/json" */
    /** Decodes `data` into *out, like cs_json_decode. */
    cs_err (*decode)(const struct cs_codec *c, const cs_type *type, const void *data, size_t len, void *out);
    /** Encodes *value into *out (malloc'ed) and *len, like cs_json_encode. */
    cs_err (*encode)(const struct cs_codec *c, const cs_type *type, const void *value, char **out, size_t *len);
    /** The schema of the type as text in this codec's schema language,
     * schema_format (JSON: JSON Schema; Avro: the schema's JSON; Protobuf:
     * the .proto text). NULL: the codec has no schema to show (AsyncAPI
     * leaves the payload's schema out). */
    cs_err (*schema)(const struct cs_codec *c, const cs_type *type, char **out);
    void *impl; /**< codec-specific state, e.g. a schema registry client */
    /** Releases what decode left in *value, not the value itself, and zeroes
     * it. NULL: cs_value_free(type, value), right for field tables; a codec
     * that decodes into a struct of its own (Protobuf's generated message)
     * sets it. Called through cs_codec_free_value. */
    void (*free_value)(const struct cs_codec *c, const cs_type *type, void *value);
    /** Optional (NULL: always ready). Whether what the codec depends on (a
     * schema registry) answers now; 0 with the reason in `why` (cap bytes,
     * NUL-terminated) when not. /readyz and the start-up check ask it on
     * their own thread; it may make one bounded probe (at most 1 s). */
    int (*ready)(const struct cs_codec *c, char *why, size_t cap);
    /** Optional (NULL: none). Writes up to `cap` of the codec's counters into
     * `out` and returns how many; /metrics writes each as a counter family
     * of that name, labelled with the subscription and the codec. Atomics
     * only, never a request. */
    size_t (*counters)(const struct cs_codec *c, struct cs_codec_counter *out, size_t cap);
    /** The language of what `schema` returns, one of the CS_SCHEMA_FORMAT_*
     * names (any AsyncAPI schemaFormat will do). NULL: JSON Schema, as
     * CS_SCHEMA_FORMAT_JSON (a codec made before schema_format existed). The
     * AsyncAPI document (cs_app_asyncapi) writes a JSON Schema as an AsyncAPI
     * schema, an Avro schema as a JSON object and any other as a string, each
     * under its schemaFormat. A static string: it is never freed. */
    const char *schema_format;
} cs_codec;

/** One counter of a codec (cs_codec.counters), e.g. a registry client's lookups. */
typedef struct cs_codec_counter {
    const char *name; /**< the metric family, e.g. "cstream_codec_registry_lookups_total"; static */
    const char *help; /**< one sentence for # HELP; static */
    uint64_t value;   /**< monotonic */
} cs_codec_counter;

/** Releases what codec->decode left in *value (not the value itself) and
 * zeroes it: the codec's free_value, or cs_value_free for a field-table codec.
 * The delivery calls it for cs_delivery_decoded(); call it yourself after
 * decoding with codec->decode directly. Safe on a zeroed value and on what a
 * failed decode left. Threads: any thread, as the codec's decode.
 * @param codec the codec that decoded the value (NULL: nothing).
 * @param type the type given to decode.
 * @param value the caller's struct (NULL: nothing). */
CS_API void cs_codec_free_value(const cs_codec *codec, const cs_type *type, void *value);

/** The built-in JSON codec: cs_json_decode, cs_json_encode and cs_json_schema
 * behind the cs_codec interface (impl is NULL, schema_format
 * CS_SCHEMA_FORMAT_JSON). */
CS_API extern const cs_codec cs_codec_json;

#ifdef __cplusplus
}
#endif
#endif
