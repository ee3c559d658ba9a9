/* avro_registry.c — Avro as the format of a registry-backed codec
 * (src/schema/registry_codec.c does the framing, the subject and the
 * registry): parses a writer schema once per schema id, decodes a datum
 * resolving it against the reader schema, and names the schema encode
 * writes with (the reader schema given, or the one the field table stands
 * for, cs_avro_schema_of).
 *
 * Owns: the reader schema and the schemas derived from tables. Threads: any
 * worker at once; `lock` (a leaf) guards the derived list, never held across
 * anything but the list itself and the parse of a table's schema.
 * Locks: avro_reg.lock (a leaf, src/lock_order.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "schema/registry_codec.h"
#include "codec/avro_internal.h"

/* Types one codec derives a schema for (one in practice). */
#define CS_AVRO_REG_MAX_TYPES 16
#define CS_AVRO_REG_WHY_MAX 512

typedef struct derived {
    const cs_type *type;
    cs_avro_schema *schema;
} derived;

typedef struct avro_reg {
    cs_avro_schema *reader; /* NULL: each table's own schema */
    pthread_mutex_t lock;   /* leaf: the derived list */
    derived types[CS_AVRO_REG_MAX_TYPES];
    size_t n_types;
} avro_reg;

static cs_err record_schema(const char *json, const char *which, cs_avro_schema **out) {
    cs_err err = cs_avro_schema_new(json, out);
    if (err) {
        char why[CS_AVRO_REG_WHY_MAX];
        snprintf(why, sizeof why, "%s", cs_errmsg());
        return cs__fail(err, "%s %s", which, why);
    }
    if ((*out)->root->type != AV_RECORD) {
        err =
            cs__fail(CS_ERR_ARG, "%s Avro schema is a %s, not a record", which, cs__avro_type_name((*out)->root->type));
        cs_avro_schema_destroy(*out);
        *out = NULL;
    }
    return err;
}

/* The schema `type` is encoded with: the reader schema, or the table's own
 * (made once per type). */
static cs_err schema_for(avro_reg *a, const cs_type *type, const cs_avro_schema **out) {
    if (a->reader) {
        *out = a->reader;
        return CS_OK;
    }
    cs_err err = CS_OK;
    *out = NULL;
    pthread_mutex_lock(&a->lock);
    for (size_t i = 0; i < a->n_types && !*out; i++)
        if (a->types[i].type == type) *out = a->types[i].schema;
    if (!*out) {
        char *json = NULL;
        cs_avro_schema *s = NULL;
        if (a->n_types == CS_AVRO_REG_MAX_TYPES)
            err = cs__fail(CS_ERR_ARG, "avro registry codec: more than %d types encoded with one codec (type %s)",
                           CS_AVRO_REG_MAX_TYPES, type->name);
        else if (!(err = cs_avro_schema_of(type, &json)) && !(err = record_schema(json, "table", &s))) {
            a->types[a->n_types++] = (derived){type, s};
            *out = s;
        }
        free(json);
    }
    pthread_mutex_unlock(&a->lock);
    return err;
}

static cs_err avro_prepare(void *state, const char *text, void **prepared) {
    (void)state;
    cs_avro_schema *s = NULL;
    cs_err err = record_schema(text, "writer", &s);
    *prepared = s;
    return err == CS_ERR_ARG ? CS_ERR_DECODE : err;
}

static void avro_release(void *prepared) { cs_avro_schema_destroy(prepared); }

static cs_err avro_decode_with(void *state, const void *prepared, const cs_type *type, const void *data, size_t len,
                               void *out) {
    const avro_reg *a = state;
    return cs_avro_decode(type, prepared, a->reader, data, len, out);
}

static cs_err avro_writer_schema(void *state, const cs_type *type, const char **text, const char **record_name) {
    const cs_avro_schema *s;
    cs_err err = schema_for(state, type, &s);
    if (err) return err;
    *text = cs_avro_schema_json(s);
    *record_name = s->root->name;
    return CS_OK;
}

static cs_err avro_encode_with(void *state, const cs_type *type, const void *value, char **out, size_t *len) {
    const cs_avro_schema *s;
    cs_err err = schema_for(state, type, &s);
    return err ? err : cs_avro_encode(type, s, value, out, len);
}

static cs_err avro_schema_text(void *state, const cs_type *type, char **out) {
    const cs_avro_schema *s;
    if (!out) return cs__fail(CS_ERR_ARG, "avro registry codec schema: out must not be NULL");
    *out = NULL;
    cs_err err = schema_for(state, type, &s);
    if (err) return err;
    *out = strdup(cs_avro_schema_json(s));
    return *out ? CS_OK : cs__fail(CS_ERR_NOMEM, "out of memory copying the Avro schema");
}

static void avro_reg_destroy(void *state) {
    avro_reg *a = state;
    if (!a) return;
    cs_avro_schema_destroy(a->reader);
    for (size_t i = 0; i < a->n_types; i++) cs_avro_schema_destroy(a->types[i].schema);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

static const cs__reg_format avro_format = {
    .name = "avro",
    .content_type = "application/vnd.confluent.avro",
    .schema_format = CS_SCHEMA_FORMAT_AVRO,
    .schema_type = CS__SCHEMA_AVRO,
    .prepare = avro_prepare,
    .release = avro_release,
    .decode = avro_decode_with,
    .writer_schema = avro_writer_schema,
    .encode = avro_encode_with,
    .schema = avro_schema_text,
    .destroy = avro_reg_destroy,
};

cs_err cs_codec_avro_registry_new(cs_registry *reg, const char *reader_json, const cs_registry_subject_opts *opts,
                                  cs_codec **out) {
    if (!out) return cs__fail(CS_ERR_ARG, "cs_codec_avro_registry_new: out must not be NULL");
    *out = NULL;
    if (!reg) return cs__fail(CS_ERR_ARG, "cs_codec_avro_registry_new: the registry must not be NULL");
    if (opts && (opts->strategy < CS_SUBJECT_TOPIC_NAME || opts->strategy > CS_SUBJECT_TOPIC_RECORD_NAME))
        return cs__fail(CS_ERR_ARG, "cs_codec_avro_registry_new: unknown subject strategy %d", (int)opts->strategy);
    avro_reg *a = calloc(1, sizeof *a);
    if (!a) return cs__fail(CS_ERR_NOMEM, "out of memory making an Avro registry codec");
    pthread_mutex_init(&a->lock, NULL);
    cs_err err = reader_json ? record_schema(reader_json, "reader", &a->reader) : CS_OK;
    if (err) {
        avro_reg_destroy(a);
        return err;
    }
    return cs__registry_codec_new(reg, opts, &avro_format, a, out);
}
