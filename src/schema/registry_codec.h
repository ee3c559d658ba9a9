/* registry_codec.h — a registry-backed codec, format-neutral: the Confluent
 * framing, the subject name strategy, the registry lookups and what each of
 * their failures means for a record. The format (Avro here, Protobuf later)
 * plugs in through cs__reg_format: parse a writer schema, decode a payload
 * with it, encode a value, name the schema it encodes with.
 *
 * The layer, not the format, owns the framing's magic byte and schema id; a
 * format whose wire form adds more after the id (Protobuf's message indexes)
 * reads and writes that itself, in decode and encode. */
#ifndef CS_SCHEMA_REGISTRY_CODEC_H
#define CS_SCHEMA_REGISTRY_CODEC_H

#include <stddef.h>

#include "cstream/codec.h"
#include "cstream/registry.h"
#include "schema_cache.h"

/* What a format provides. Every function may run on any thread at once. */
typedef struct cs__reg_format {
    const char *name;          /* the codec's name, e.g. "avro" */
    const char *content_type;  /* e.g. "application/vnd.confluent.avro" */
    const char *schema_format; /* what `schema` returns, a CS_SCHEMA_FORMAT_* name (AsyncAPI's schemaFormat) */
    cs__schema_type schema_type;
    /* Parses a writer schema's text (as the registry holds it) into the
     * format's prepared form, once per schema id. CS_ERR_DECODE (with the
     * reason) when the text is no schema of this format. */
    cs_err (*prepare)(void *state, const char *text, void **prepared);
    void (*release)(void *prepared);
    /* Decodes the payload after the framing's header, written with the
     * prepared writer schema, into *out (like cs_json_decode). */
    cs_err (*decode)(void *state, const void *prepared, const cs_type *type, const void *data, size_t len, void *out);
    /* The schema encode writes `type` with: its text (to register) and the
     * fully qualified record name (for the RecordName strategies); both live
     * as long as the codec. */
    cs_err (*writer_schema)(void *state, const cs_type *type, const char **text, const char **record_name);
    /* Encodes *value as the payload that follows the header (malloc'ed). */
    cs_err (*encode)(void *state, const cs_type *type, const void *value, char **out, size_t *len);
    /* The schema of the type in the format's language, for docs (malloc'ed). */
    cs_err (*schema)(void *state, const cs_type *type, char **out);
    void (*destroy)(void *state);
} cs__reg_format;

/* A codec over `reg` with `fmt`; it takes `state` (destroyed with the codec,
 * also on failure). `opts` (copied; NULL: TopicName without a topic, which
 * decodes but cannot encode). Released with cs_codec_registry_destroy. */
cs_err cs__registry_codec_new(cs_registry *reg, const cs_registry_subject_opts *opts, const cs__reg_format *fmt,
                              void *state, cs_codec **out);

#endif
