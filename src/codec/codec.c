/* codec.c — the built-in JSON codec behind the cs_codec interface, and the
 * one call that frees any codec's decoded value (Avro and Protobuf codecs are
 * made in avro_codec.c and protobuf_codec.c).
 *
 * Owns: nothing; the JSON codec is a constant table of functions.
 * Locks: none. Threads: any thread. */
#include "codec/codec_internal.h"

static cs_err json_decode(const cs_codec *c, const cs_type *type, const void *data, size_t len, void *out) {
    (void)c;
    return cs_json_decode(type, data, len, out);
}

static cs_err json_encode(const cs_codec *c, const cs_type *type, const void *value, char **out, size_t *len) {
    (void)c;
    return cs_json_encode(type, value, out, len);
}

static cs_err json_schema(const cs_codec *c, const cs_type *type, char **out) {
    (void)c;
    return cs_json_schema(type, out);
}

void cs_codec_free_value(const cs_codec *codec, const cs_type *type, void *value) {
    if (codec == NULL || value == NULL) return;
    if (codec->free_value != NULL) codec->free_value(codec, type, value);
    else cs_value_free(type, value);
}

const cs_codec cs_codec_json = {
    .name = "json",
    .content_type = "application/json",
    .decode = json_decode,
    .encode = json_encode,
    .schema = json_schema,
    .impl = NULL,
    .free_value = NULL, /* field tables: cs_value_free */
    .schema_format = CS_SCHEMA_FORMAT_JSON,
};
