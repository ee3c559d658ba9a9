/** @file
 * cstream/avro.h — Avro payloads: the binary encoding of Apache Avro decoded
 * into the structs of codec.h's field tables, and encoded from them.
 *
 *     cs_avro_schema *v1;
 *     cs_avro_schema_new("{\"type\":\"record\",\"name\":\"payout\",\"fields\":[...]}", &v1);
 *     payout p;
 *     cs_avro_decode(&payout_type, v1, NULL, value, len, &p);   // written with v1
 *     ...
 *     cs_value_free(&payout_type, &p);
 *
 * Mapping: record fields to table fields by name (nested records to OBJECT,
 * arrays to ARRAY, maps to MAP, enums to ENUM, fixed to FIXED, bytes to
 * BYTES, unions to UNION; an optional field is the union ["null", T]).
 * cs_avro_schema_of() writes the schema a table stands for.
 *
 * Schema evolution, the Avro way: the writer schema is the one the payload
 * was written with, the reader schema describes the table (given, with its
 * defaults, or derived from the table). A writer field the table lacks is
 * skipped; a reader field the writer lacks takes the reader schema's default
 * (an optional field without one stays zeroed; a required one without one
 * makes the writer schema unresolvable); numbers are promoted int -> long ->
 * float -> double, and string and bytes read as each other; enum symbols and
 * union branches (records by name) are matched by name. A payload whose
 * writer schema cannot be resolved is CS_ERR_DECODE, "writer schema cannot be
 * resolved: field "x": ...".
 *
 * Errors: as in codec.h. CS_ERR_DECODE names the field by its path
 * ("items[2].amount"), CS_ERR_ENCODE too; CS_ERR_ARG for a bad schema or
 * table; CS_ERR_NOMEM. Truncated or garbage input is CS_ERR_DECODE, never a
 * crash, and no length read from the payload is allocated before the bytes
 * are known to be there.
 *
 * Threads: a cs_avro_schema is immutable once made: any thread may use it at
 * the same time; destroy it once nothing does. The functions are pure
 * functions of their arguments. */
#ifndef CSTREAM_AVRO_H
#define CSTREAM_AVRO_H

#include "cstream/codec.h"
#include "cstream/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A parsed Avro schema (cs_avro_schema_new, cs_avro_schema_destroy). */
typedef struct cs_avro_schema cs_avro_schema;

/** Parses an Avro schema from its JSON text. The Apache Avro C library
 * checks it first (its message is passed on); named types may be referenced
 * by name once defined; logicalType (decimal, date, timestamp-millis,
 * timestamp-micros, uuid) and field defaults are kept.
 * @param json the schema's JSON text, NUL-terminated (copied).
 * @param out receives the schema, the caller's: release it with
 *        cs_avro_schema_destroy(); NULL on failure.
 * @retval CS_OK *out holds the schema.
 * @retval CS_ERR_ARG json or out is NULL, or json is not a valid Avro schema;
 *         cs_errmsg() says why.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_avro_schema_new(const char *json, cs_avro_schema **out);

/** Releases a schema. NULL: nothing.
 * @param schema the schema; nothing may use it any more. */
CS_API void cs_avro_schema_destroy(cs_avro_schema *schema);

/** The schema's JSON text as it was given.
 * @param schema the schema (not NULL).
 * @return the text, valid as long as the schema. */
CS_API const char *cs_avro_schema_json(const cs_avro_schema *schema);

/** Writes the Avro schema a table stands for: a record named after the type,
 * one field per table field in table order; an optional field is
 * ["null", T] with default null; U32 and U64 are long; CHARS is string;
 * FIXED and ENUM are named "<type>_<field>"; a nested type is defined once
 * and referenced by name after. The caller frees *json_out with free().
 * @param type the struct's type.
 * @param json_out receives the schema's JSON text; NULL on failure.
 * @retval CS_OK *json_out holds the text.
 * @retval CS_ERR_ARG an argument is NULL or the table is invalid.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_avro_schema_of(const cs_type *type, char **json_out);

/** Decodes one Avro binary datum written with `writer` into *out (type->size
 * bytes), resolving it against `reader` (NULL: the table's own schema, whose
 * only defaults are null for optional fields). *out is zeroed first; on
 * failure everything allocated is freed and *out is zeroed again. Bytes left
 * over after the datum are an error. Allocates only what the struct owns:
 * release it with cs_value_free.
 * @param type the struct's type.
 * @param writer the schema the payload was written with (a record).
 * @param reader the schema describing the table, for defaults; may be NULL.
 * @param data the payload (read only during the call).
 * @param len its length in bytes.
 * @param out the caller's struct of type->size bytes.
 * @retval CS_OK *out holds the value.
 * @retval CS_ERR_DECODE the payload does not decode, or the writer schema
 *         cannot be resolved; cs_errmsg() names the field.
 * @retval CS_ERR_ARG an argument is NULL, or the table is invalid.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_avro_decode(const cs_type *type, const cs_avro_schema *writer, const cs_avro_schema *reader,
                             const void *data, size_t len, void *out);

/** Encodes *value as one Avro binary datum of `schema`: its fields in the
 * schema's order, each taken from the table field of the same name (a schema
 * field the table lacks is written as null when it is a nullable union, or as
 * its default when that is an empty array or map; otherwise CS_ERR_ENCODE).
 * The caller frees *out with free().
 * @param type the struct's type.
 * @param schema the schema to write (a record).
 * @param value the struct to encode (read only).
 * @param out receives the bytes; NULL on failure.
 * @param len_out receives their length; may be NULL.
 * @retval CS_OK *out holds the bytes.
 * @retval CS_ERR_ENCODE the value does not fit the schema (a required STRING
 *         that is NULL, an enum index out of range, a decimal beyond its
 *         precision, a union branch the schema lacks); cs_errmsg() names the field.
 * @retval CS_ERR_ARG an argument is NULL, or the table is invalid.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_avro_encode(const cs_type *type, const cs_avro_schema *schema, const void *value, char **out,
                             size_t *len_out);

/** Makes a cs_codec for Avro bound to schemas given as JSON: decode reads
 * payloads written with `writer_json` into the table, resolving against
 * `reader_json` (NULL: the table's own schema); encode writes with
 * `reader_json`, or `writer_json` when it is NULL; schema returns the text
 * encode writes with, its schema_format CS_SCHEMA_FORMAT_AVRO (the AsyncAPI
 * document, cs_app_asyncapi, shows it as a JSON object). The payload is the bare Avro datum (no registry
 * framing). The codec's functions are thread-safe.
 * @param writer_json the writer schema's JSON text (copied).
 * @param reader_json the reader schema's JSON text, or NULL (copied).
 * @param out receives the codec, the caller's: release it with
 *        cs_codec_avro_destroy() once nothing uses it (a codec given to
 *        cs_sub_decode must outlive the app).
 * @retval CS_OK *out holds the codec.
 * @retval CS_ERR_ARG a schema is not valid; cs_errmsg() says which and why.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_codec_avro_new(const char *writer_json, const char *reader_json, cs_codec **out);

/** Releases a codec made by cs_codec_avro_new. NULL: nothing.
 * @param codec the codec; nothing may use it any more. */
CS_API void cs_codec_avro_destroy(cs_codec *codec);

/** Makes a registry-backed Avro codec: payloads in the Confluent wire format
 * (magic byte 0, the 4-byte schema id, the Avro datum), with the writer
 * schemas held by the Schema Registry @p reg.
 *
 * Decode reads the schema id, fetches that writer schema from the registry
 * once (then parsed once and kept by the codec: no request and no parse per
 * record), and resolves it against the reader schema (@p reader_json, with
 * its defaults; NULL: the table's own schema, cs_avro_schema_of()). Encode
 * writes with the reader schema (or the table's own), registering it under
 * the subject @p opts names on its first call (then cached; see
 * cs_codec_registry_schema_id()). A codec encodes for one topic and one side;
 * make a second one, with opts->key set, for keys.
 *
 * Errors of decode, besides those of cs_avro_decode():
 * - CS_ERR_DECODE: no magic byte or fewer than 5 bytes ("not in the schema
 *   registry's wire format"), a schema id the registry does not know (404),
 *   a writer schema that is not an Avro record, one that cannot be resolved.
 *   A typed subscription dead-letters it under Tracked.
 * - CS_ERR_UNAVAILABLE: the registry is unreachable, answers 5xx/429 or
 *   refuses the credentials (401/403). The record is not at fault: a typed
 *   subscription tries it again later (docs/guide.md, "Schemas and the
 *   Schema Registry").
 * Errors of encode: CS_ERR_ENCODE naming the subject when the registry
 * refuses the schema (incompatible, invalid), CS_ERR_UNAVAILABLE as above,
 * CS_ERR_ARG when the strategy needs a topic the codec was not given.
 *
 * The codec's functions are thread-safe.
 * @param reg the registry; not owned, it must outlive the codec.
 * @param reader_json the reader schema's JSON text (copied), a record; NULL:
 *        the table's own schema.
 * @param opts the subject encode registers under (copied); NULL: a
 *        decode-only codec (encode fails with CS_ERR_ARG).
 * @param out receives the codec, the caller's: release it with
 *        cs_codec_registry_destroy() once nothing uses it.
 * @retval CS_OK *out holds the codec.
 * @retval CS_ERR_ARG reg or out is NULL, the reader schema is not a valid
 *         Avro record, or the strategy is unknown; cs_errmsg() says why.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_codec_avro_registry_new(cs_registry *reg, const char *reader_json,
                                         const cs_registry_subject_opts *opts, cs_codec **out);

#ifdef __cplusplus
}
#endif
#endif
