/* avro_codec.c — Avro behind the cs_codec interface, bound to a writer
 * schema and optionally a reader schema given as JSON. The wire framing of a
 * schema registry (magic byte and schema id) belongs to the registry client,
 * which will hand this codec the writer schema it looked up.
 *
 * Owns: the codec and its two parsed schemas; both are immutable after
 * cs_codec_avro_new, so the functions run on any worker thread at once.
 * Locks: none. Threads: cs_codec_avro_new and cs_codec_avro_destroy on the
 * caller's thread; decode, encode and schema on any thread at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "codec/avro_internal.h"

#define CS_AVRO_WHY_MAX 512 /* bytes of a schema's error message kept */

typedef struct avro_impl {
    cs_avro_schema *writer;
    cs_avro_schema *reader; /* NULL: the table's own */
} avro_impl;

static cs_err avro_decode(const cs_codec *c, const cs_type *type, const void *data, size_t len, void *out) {
    const avro_impl *impl = c->impl;
    return cs_avro_decode(type, impl->writer, impl->reader, data, len, out);
}

static cs_err avro_encode(const cs_codec *c, const cs_type *type, const void *value, char **out, size_t *len) {
    const avro_impl *impl = c->impl;
    return cs_avro_encode(type, impl->reader ? impl->reader : impl->writer, value, out, len);
}

static cs_err avro_schema(const cs_codec *c, const cs_type *type, char **out) {
    const avro_impl *impl = c->impl;
    (void)type;
    if (out == NULL) return cs__fail(CS_ERR_ARG, "avro codec schema: out must not be NULL");
    *out = strdup(cs_avro_schema_json(impl->reader ? impl->reader : impl->writer));
    return *out ? CS_OK : cs__fail(CS_ERR_NOMEM, "out of memory copying the Avro schema");
}

void cs_codec_avro_destroy(cs_codec *codec) {
    if (codec == NULL) return;
    avro_impl *impl = codec->impl;
    if (impl != NULL) {
        cs_avro_schema_destroy(impl->writer);
        cs_avro_schema_destroy(impl->reader);
        free(impl);
    }
    free(codec);
}

cs_err cs_codec_avro_new(const char *writer_json, const char *reader_json, cs_codec **out) {
    if (out == NULL) return cs__fail(CS_ERR_ARG, "cs_codec_avro_new: out must not be NULL");
    *out = NULL;
    if (writer_json == NULL) return cs__fail(CS_ERR_ARG, "cs_codec_avro_new: the writer schema must not be NULL");
    cs_codec *c = calloc(1, sizeof *c);
    avro_impl *impl = calloc(1, sizeof *impl);
    if (c == NULL || impl == NULL) {
        free(c);
        free(impl);
        return cs__fail(CS_ERR_NOMEM, "out of memory making an Avro codec");
    }
    c->name = "avro";
    c->content_type = "application/avro";
    c->decode = avro_decode;
    c->encode = avro_encode;
    c->schema = avro_schema;
    c->schema_format = CS_SCHEMA_FORMAT_AVRO;
    c->impl = impl;
    char why[CS_AVRO_WHY_MAX];
    const char *which = "writer";
    cs_err err = cs_avro_schema_new(writer_json, &impl->writer);
    if (!err && reader_json != NULL) {
        which = "reader";
        err = cs_avro_schema_new(reader_json, &impl->reader);
    }
    if (err) { /* copied: cs__fail writes the buffer cs_errmsg() returns */
        snprintf(why, sizeof why, "%s", cs_errmsg());
        err = cs__fail(err, "%s %s", which, why);
    }
    if (!err && impl->writer->root->type != AV_RECORD)
        err = cs__fail(CS_ERR_ARG, "writer Avro schema is a %s, not a record",
                       cs__avro_type_name(impl->writer->root->type));
    if (!err && impl->reader && impl->reader->root->type != AV_RECORD)
        err = cs__fail(CS_ERR_ARG, "reader Avro schema is a %s, not a record",
                       cs__avro_type_name(impl->reader->root->type));
    if (err) {
        cs_codec_avro_destroy(c);
        return err;
    }
    *out = c;
    return CS_OK;
}
