/* codec.c — the built-in codecs behind the cs_codec interface (JSON today;
 * Avro or Protobuf with a schema registry would sit beside it, their client
 * in `impl`).
 *
 * Owns nothing: the JSON codec is a constant table of functions.
 * Threads: any thread. */
#include "codec_internal.h"

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

const cs_codec cs_codec_json = {
    .name = "json",
    .content_type = "application/json",
    .decode = json_decode,
    .encode = json_encode,
    .schema = json_schema,
    .impl = NULL,
};
