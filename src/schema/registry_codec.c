/*
 * registry_codec.c — the format-neutral half of a registry-backed codec: reads
 * and writes the Confluent framing (magic byte, schema id), finds the writer
 * schema of a record by its id and keeps it prepared, registers the schema
 * encode writes with under the subject its strategy names, and turns the
 * registry's failures into what they mean for a record:
 *
 *   unreachable, 5xx, 429, 401/403  CS_ERR_UNAVAILABLE: try the record later
 *                                   (the pipeline retries it, never dead-letters)
 *   unknown id (404), bad answer    CS_ERR_DECODE: the record cannot be read
 *   no magic byte, too short        CS_ERR_DECODE
 *   incompatible schema (409)       CS_ERR_ENCODE naming the subject
 *
 * Owns: the codec, its registration per encoded type and its prepared writer
 * schemas by id. Threads: any worker at once. Locks: `lock` (a leaf,
 * src/lock_order.h) guards the two tables and is never held across a registry
 * request or a call into the format: a miss is looked up and prepared
 * unlocked, then inserted (the first insert wins; ids are immutable in a
 * registry). A prepared schema stays until the codec is destroyed, so a decode
 * uses it unlocked.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "schema/registry_codec.h"
#include "schema/registry_internal.h"
#include "schema/wire.h"

/* Writer schemas one codec keeps prepared: a subject has a handful of
 * versions; past this bound a schema is prepared per record (slow, correct). */
#define CS_REGCODEC_MAX_WRITERS 256
/* Types one codec encodes (one in practice: the subscription's or the reply's). */
#define CS_REGCODEC_MAX_ENCODERS 16
/* Longest subject name (a topic is at most 249 bytes, a record name as long). */
#define CS_REGCODEC_SUBJECT_MAX 1024
/* Bytes of an underlying message kept when another is written around it. */
#define CS_REGCODEC_WHY_MAX 1024

typedef struct writer {
    int32_t id;
    void *prepared;
} writer;

typedef struct encoder {
    const cs_type *type;
    int32_t id;
    char subject[CS_REGCODEC_SUBJECT_MAX];
} encoder;

typedef struct regcodec {
    cs_registry *reg;
    const cs__reg_format *fmt;
    void *state;
    cs_subject_strategy strategy;
    char *topic; /* NULL: encode cannot name a TopicName subject */
    bool key;
    pthread_mutex_t lock; /* leaf: writers and encoders below */
    writer writers[CS_REGCODEC_MAX_WRITERS];
    size_t n_writers;
    encoder encoders[CS_REGCODEC_MAX_ENCODERS];
    size_t n_encoders;
} regcodec;

/* ---- decode ----------------------------------------------------------------- */

static void *writer_cached(regcodec *rc, int32_t id) {
    void *found = NULL;
    pthread_mutex_lock(&rc->lock);
    for (size_t i = 0; i < rc->n_writers && !found; i++)
        if (rc->writers[i].id == id) found = rc->writers[i].prepared;
    pthread_mutex_unlock(&rc->lock);
    return found;
}

/* What a failed lookup means for the record (see the top of the file). */
static cs_err lookup_failure(cs__reg_status st, int32_t id) {
    char why[CS_REGCODEC_WHY_MAX];
    snprintf(why, sizeof why, "%s", cs_errmsg());
    if (cs__reg_status_retryable(st))
        return cs__fail(CS_ERR_UNAVAILABLE, "writer schema id %d: the registry cannot be asked now (%s): %s", id,
                        cs__reg_status_name(st), why);
    if (st == CS__REG_LOCAL) return cs__fail(CS_ERR_NOMEM, "writer schema id %d: %s", id, why);
    return cs__fail(CS_ERR_DECODE, "writer schema id %d: %s", id, why);
}

/* The prepared writer schema of `id`: cached, or looked up and prepared now.
 * *temp is set when it could not be cached: the caller releases it. */
static cs_err writer_for(regcodec *rc, int32_t id, void **prepared, void **temp) {
    *temp = NULL;
    if ((*prepared = writer_cached(rc, id))) return CS_OK;
    const cs__schema *s = NULL;
    cs__reg_status st = cs__registry_schema(rc->reg, id, &s);
    if (st != CS__REG_OK) return lookup_failure(st, id);
    cs_err err = CS_OK;
    void *mine = NULL;
    if (s->type != rc->fmt->schema_type) {
        static const char *const names[] = {"AVRO", "PROTOBUF", "JSON"};
        err = cs__fail(CS_ERR_DECODE, "writer schema id %d is a %s schema, not %s", id, names[s->type],
                       names[rc->fmt->schema_type]);
    } else if ((err = rc->fmt->prepare(rc->state, s->text, &mine))) {
        char why[CS_REGCODEC_WHY_MAX];
        snprintf(why, sizeof why, "%s", cs_errmsg());
        err = cs__fail(err == CS_ERR_NOMEM ? err : CS_ERR_DECODE, "writer schema id %d does not parse as %s: %s", id,
                       rc->fmt->name, why);
    }
    cs__schema_release(s);
    if (err) return err;
    void *winner = NULL;
    bool cached = false;
    pthread_mutex_lock(&rc->lock);
    for (size_t i = 0; i < rc->n_writers && !winner; i++)
        if (rc->writers[i].id == id) winner = rc->writers[i].prepared;
    if (!winner && rc->n_writers < CS_REGCODEC_MAX_WRITERS) {
        rc->writers[rc->n_writers++] = (writer){id, mine};
        cached = true;
    }
    pthread_mutex_unlock(&rc->lock);
    if (cached) *prepared = mine;
    else if (winner) { /* another worker prepared it first */ rc->fmt->release(mine);
        *prepared = winner;
    } else *prepared = *temp = mine;
    return CS_OK;
}

static cs_err rc_decode(const cs_codec *c, const cs_type *type, const void *data, size_t len, void *out) {
    regcodec *rc = c->impl;
    if (!type || !out)
        return cs__fail(CS_ERR_ARG, "%s registry codec: decode needs a type and an out pointer", c->name);
    memset(out, 0, type->size);
    if (!data || len == 0) return cs__fail(CS_ERR_DECODE, "payload is null (tombstone)");
    int32_t id;
    if (cs__wire_read_header(data, len, &id)) {
        char why[CS_REGCODEC_WHY_MAX];
        snprintf(why, sizeof why, "%s", cs_errmsg());
        return cs__fail(CS_ERR_DECODE, "not in the schema registry's wire format: %s", why);
    }
    void *prepared, *temp;
    cs_err err = writer_for(rc, id, &prepared, &temp);
    if (err) return err;
    err = rc->fmt->decode(rc->state, prepared, type, (const unsigned char *)data + CS_WIRE_HEADER_LEN,
                          len - CS_WIRE_HEADER_LEN, out);
    if (temp) rc->fmt->release(temp);
    if (err) {
        char why[CS_REGCODEC_WHY_MAX];
        snprintf(why, sizeof why, "%s", cs_errmsg());
        err = cs__fail(err, "written with schema id %d: %s", id, why);
    }
    return err;
}

/* ---- encode ----------------------------------------------------------------- */

static const char *strategy_name(cs_subject_strategy s) {
    return s == CS_SUBJECT_RECORD_NAME         ? "RecordName"
           : s == CS_SUBJECT_TOPIC_RECORD_NAME ? "TopicRecordName"
                                               : "TopicName";
}

static bool encoder_cached(regcodec *rc, const cs_type *type, int32_t *id) {
    bool found = false;
    pthread_mutex_lock(&rc->lock);
    for (size_t i = 0; i < rc->n_encoders && !found; i++)
        if (rc->encoders[i].type == type) {
            *id = rc->encoders[i].id;
            found = true;
        }
    pthread_mutex_unlock(&rc->lock);
    return found;
}

cs_err cs__registry_codec_register_err(cs__reg_status rs, const char *subject) {
    char why[CS_REGCODEC_WHY_MAX];
    snprintf(why, sizeof why, "%s", cs_errmsg());
    if (cs__reg_status_retryable(rs))
        return cs__fail(CS_ERR_UNAVAILABLE, "subject %s: the registry cannot be asked now (%s): %s", subject,
                        cs__reg_status_name(rs), why);
    if (rs == CS__REG_INCOMPATIBLE)
        return cs__fail(CS_ERR_ENCODE, "subject %s: the registry refused the schema as incompatible: %s", subject, why);
    /* CS__REG_LOCAL too: the client refused to send it (a schema that is
     * not UTF-8, a subject too long for a URL); the message says which. */
    return cs__fail(CS_ERR_ENCODE, "subject %s: the schema could not be registered: %s", subject, why);
}

/* The schema id encode writes `type` with: registered (or found: the registry
 * answers the existing id for a schema it has) once per type, then cached.
 * A failure is not cached: the next encode asks again. */
static cs_err schema_id_for(regcodec *rc, const cs_type *type, int32_t *id) {
    if (encoder_cached(rc, type, id)) return CS_OK;
    const char *text = NULL, *record = NULL;
    cs_err err = rc->fmt->writer_schema(rc->state, type, &text, &record);
    if (err) return err;
    char subject[CS_REGCODEC_SUBJECT_MAX];
    cs__subject_strategy st = rc->strategy == CS_SUBJECT_RECORD_NAME         ? CS__SUBJECT_RECORD_NAME
                              : rc->strategy == CS_SUBJECT_TOPIC_RECORD_NAME ? CS__SUBJECT_TOPIC_RECORD_NAME
                                                                             : CS__SUBJECT_TOPIC_NAME;
    if (cs__registry_subject(st, rc->topic, record, rc->key, subject, sizeof subject)) {
        char why[CS_REGCODEC_WHY_MAX];
        snprintf(why, sizeof why, "%s", cs_errmsg());
        return cs__fail(CS_ERR_ARG, "%s registry codec (%s strategy, %s): %s", rc->fmt->name,
                        strategy_name(rc->strategy), rc->key ? "key" : "value", why);
    }
    cs__schema_reference refs[CS_REGCODEC_MAX_REFS];
    size_t n_refs = 0;
    if (rc->fmt->references && (err = rc->fmt->references(rc->state, rc->reg, refs, CS_REGCODEC_MAX_REFS, &n_refs)))
        return err;
    cs__reg_status rs =
        cs__registry_register_refs(rc->reg, subject, rc->fmt->schema_type, text, refs, n_refs, id, NULL);
    if (rs != CS__REG_OK) return cs__registry_codec_register_err(rs, subject);
    pthread_mutex_lock(&rc->lock);
    bool known = false;
    for (size_t i = 0; i < rc->n_encoders; i++) known = known || rc->encoders[i].type == type;
    if (!known && rc->n_encoders < CS_REGCODEC_MAX_ENCODERS) {
        encoder *e = &rc->encoders[rc->n_encoders++];
        e->type = type;
        e->id = *id;
        snprintf(e->subject, sizeof e->subject, "%s", subject);
    }
    pthread_mutex_unlock(&rc->lock);
    return CS_OK;
}

static cs_err rc_encode(const cs_codec *c, const cs_type *type, const void *value, char **out, size_t *len) {
    regcodec *rc = c->impl;
    if (!out) return cs__fail(CS_ERR_ARG, "%s registry codec: encode needs an out pointer", c->name);
    *out = NULL;
    if (len) *len = 0;
    if (!type || !value) return cs__fail(CS_ERR_ARG, "%s registry codec: encode needs a type and a value", c->name);
    int32_t id;
    cs_err err = schema_id_for(rc, type, &id);
    if (err) return err;
    char *payload = NULL;
    size_t n = 0;
    if ((err = rc->fmt->encode(rc->state, type, value, &payload, &n))) return err;
    char *framed = malloc(CS_WIRE_HEADER_LEN + n);
    if (!framed) {
        free(payload);
        return cs__fail(CS_ERR_NOMEM, "out of memory framing a %s payload", rc->fmt->name);
    }
    cs__wire_write_header((uint8_t *)framed, id);
    if (n) memcpy(framed + CS_WIRE_HEADER_LEN, payload, n);
    free(payload);
    *out = framed;
    if (len) *len = CS_WIRE_HEADER_LEN + n;
    return CS_OK;
}

static void rc_free_value(const cs_codec *c, const cs_type *type, void *value) {
    regcodec *rc = c->impl;
    rc->fmt->free_value(rc->state, type, value);
}

static cs_err rc_schema(const cs_codec *c, const cs_type *type, char **out) {
    regcodec *rc = c->impl;
    return rc->fmt->schema(rc->state, type, out);
}

/* ---- operations: /readyz, /metrics ---------------------------------------------- */

static int rc_ready(const cs_codec *c, char *why, size_t cap) {
    const regcodec *rc = c->impl;
    return cs__registry_check(rc->reg, why, cap);
}

static size_t rc_counters(const cs_codec *c, cs_codec_counter *out, size_t cap) {
    const regcodec *rc = c->impl;
    cs__registry_stats st;
    cs__registry_stats_get(rc->reg, &st);
    const cs_codec_counter all[] = {
        {"cstream_codec_registry_lookups_total", "Schema-by-id lookups of the codec's registry client.", st.lookups},
        {"cstream_codec_registry_cache_hits_total", "Of those, answered from the client's cache.", st.cache_hits},
        {"cstream_codec_registry_requests_total", "HTTP requests sent to the registry.", st.requests},
        {"cstream_codec_registry_errors_total", "Registry lookups and registrations that failed.", st.errors},
        {"cstream_codec_registry_unavailable_total",
         "Of those, the registry unreachable, 5xx, 429 or refusing credentials.", st.retryable_errors},
        {"cstream_codec_registry_registered_total", "Schemas registered (or found registered).", st.registered},
    };
    size_t n = sizeof all / sizeof all[0] < cap ? sizeof all / sizeof all[0] : cap;
    memcpy(out, all, n * sizeof *out);
    return n;
}

/* ---- life ------------------------------------------------------------------- */

static bool is_registry_codec(const cs_codec *c) { return c && c->decode == rc_decode; }

void cs_codec_registry_destroy(cs_codec *codec) {
    if (!is_registry_codec(codec)) return;
    regcodec *rc = codec->impl;
    for (size_t i = 0; i < rc->n_writers; i++) rc->fmt->release(rc->writers[i].prepared);
    rc->fmt->destroy(rc->state);
    pthread_mutex_destroy(&rc->lock);
    free(rc->topic);
    free(rc);
    free(codec);
}

cs_err cs__registry_codec_new(cs_registry *reg, const cs_registry_subject_opts *opts, const cs__reg_format *fmt,
                              void *state, cs_codec **out) {
    cs_codec *c = calloc(1, sizeof *c);
    regcodec *rc = calloc(1, sizeof *rc);
    const char *topic = opts ? opts->topic : NULL;
    char *topic_copy = topic ? strdup(topic) : NULL;
    if (!c || !rc || (topic && !topic_copy)) {
        free(c);
        free(rc);
        free(topic_copy);
        fmt->destroy(state);
        return cs__fail(CS_ERR_NOMEM, "out of memory making a %s registry codec", fmt->name);
    }
    rc->reg = reg;
    rc->fmt = fmt;
    rc->state = state;
    rc->strategy = opts ? opts->strategy : CS_SUBJECT_TOPIC_NAME;
    rc->topic = topic_copy;
    rc->key = opts && opts->key;
    pthread_mutex_init(&rc->lock, NULL);
    c->name = fmt->name;
    c->content_type = fmt->content_type;
    c->decode = rc_decode;
    c->encode = rc_encode;
    c->schema = rc_schema;
    c->schema_format = fmt->schema_format;
    c->ready = rc_ready;
    c->counters = rc_counters;
    c->free_value = fmt->free_value ? rc_free_value : NULL; /* NULL: cs_value_free */
    c->impl = rc;
    *out = c;
    return CS_OK;
}

void *cs__registry_codec_state(const cs_codec *codec, const cs__reg_format **fmt) {
    if (!is_registry_codec(codec)) return NULL;
    const regcodec *rc = codec->impl;
    *fmt = rc->fmt;
    return rc->state;
}

cs_err cs_codec_registry_schema_id(const cs_codec *codec, const cs_type *type, int32_t *id) {
    if (!is_registry_codec(codec) || !type || !id)
        return cs__fail(CS_ERR_ARG, "cs_codec_registry_schema_id: needs a registry codec, a type and an id pointer");
    return schema_id_for(codec->impl, type, id);
}
