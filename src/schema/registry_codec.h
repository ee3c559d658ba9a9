/* registry_codec.h — a registry-backed codec, format-neutral: the Confluent
 * framing, the subject name strategy, the registry lookups and what each of
 * their failures means for a record. The format (Avro here, Protobuf later)
 * plugs in through cs__reg_format: parse a writer schema, decode a payload
 * with it, encode a value, name the schema it encodes with.
 *
 * The layer, not the format, owns the framing's magic byte and schema id; a
 * format whose wire form adds more after the id (Protobuf's message indexes)
 * reads and writes that itself, in decode and encode; one whose schemas
 * import others (Protobuf) registers those itself, in `references`.
 *
 * Owns: declares cs__reg_format; a registry-backed codec (registry_codec.c)
 * takes the format's state and destroys it with the codec. Locks: none here;
 * registry_codec.c takes regcodec.lock (a leaf), never across a registry
 * request or a call into the format. Threads: any thread at once. */
#ifndef CS_SCHEMA_REGISTRY_CODEC_H
#define CS_SCHEMA_REGISTRY_CODEC_H

#include <stddef.h>

#include "cstream/codec.h"
#include "cstream/registry.h"
#include "schema/registry_internal.h"
#include "schema/schema_cache.h"

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
    /* Optional (NULL: no references). The references of the schema
     * writer_schema names, each registered under its own subject first (the
     * format asks the registry itself, with no lock held; failures as
     * cs__registry_codec_register_err makes them). At most cap into refs;
     * the strings live as long as the codec. */
    cs_err (*references)(void *state, cs_registry *reg, cs__schema_reference *refs, size_t cap, size_t *n);
    /* Encodes *value as the payload that follows the header (malloc'ed). */
    cs_err (*encode)(void *state, const cs_type *type, const void *value, char **out, size_t *len);
    /* The schema of the type in the format's language, for docs (malloc'ed). */
    cs_err (*schema)(void *state, const cs_type *type, char **out);
    /* Optional (NULL: cs_value_free, for field tables). Releases what decode
     * left in *value (cs_codec.free_value). */
    void (*free_value)(void *state, const cs_type *type, void *value);
    void (*destroy)(void *state);
} cs__reg_format;

/* Most references one schema registers with. */
#define CS_REGCODEC_MAX_REFS 16

/* A codec over `reg` with `fmt`; it takes `state` (destroyed with the codec,
 * also on failure). `opts` (copied; NULL: TopicName without a topic, which
 * decodes but cannot encode). Released with cs_codec_registry_destroy. */
cs_err cs__registry_codec_new(cs_registry *reg, const cs_registry_subject_opts *opts, const cs__reg_format *fmt,
                              void *state, cs_codec **out);

/* The format and state of a registry-backed codec (*fmt set); NULL when
 * `codec` is not one. */
void *cs__registry_codec_state(const cs_codec *codec, const cs__reg_format **fmt);

/* What a failed registration of `subject` means (cs_errmsg() holds the
 * client's reason): CS_ERR_UNAVAILABLE (retry later), CS_ERR_ENCODE (the
 * registry refused the schema, incompatible or invalid), CS_ERR_NOMEM. */
cs_err cs__registry_codec_register_err(cs__reg_status rs, const char *subject);

#endif
