/* protobuf_registry.c — Protobuf as the format of a registry-backed codec
 * (src/schema/registry_codec.c does the framing's magic byte and id, the
 * subject and the registry): the message indexes after the id, the check that
 * the writer's message is the codec's, the .proto text registered with its
 * imports as schema references; the payload itself is the Protobuf codec's
 * (src/codec/protobuf_codec.c, the generated descriptor).
 *
 * Owns: the inner Protobuf codec, the message's index path (computed once
 * from the .proto text), the imported files' texts and the versions they were
 * registered as. Threads: any worker at once; `lock` (a leaf) guards the
 * imports' versions only, never held across a registry request.
 * Locks: pb_reg.lock (a leaf, src/lock_order.h). */
#include <protobuf-c/protobuf-c.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cstream/protobuf.h"
#include "schema/proto_index.h"
#include "schema/registry_codec.h"
#include "schema/wire.h"

/* The message indexes of a path CS_WIRE_MAX_MSG_INDEXES deep, plus the count. */
#define PB_REG_INDEX_BYTES ((CS_WIRE_MAX_MSG_INDEXES + 1) * CS_WIRE_VARINT_MAX)
#define PB_REG_WHY_MAX 512
/* An index path written in a message: "[1, 0, 2]", cut short past this. */
#define PB_REG_PATH_TEXT_MAX 64

typedef struct import {
    char *name;      /* as the importing file's `import` statement spells it; also its subject */
    char *text;      /* the file's .proto text */
    int32_t version; /* 0 until registered (under `lock`) */
} import;

typedef struct pb_reg {
    cs_codec *inner; /* the Protobuf codec: the payload, the type, the .proto text */
    const ProtobufCMessageDescriptor *desc;
    uint8_t indexes[PB_REG_INDEX_BYTES]; /* the message's indexes as written after the id */
    size_t n_indexes_bytes;
    pthread_mutex_t lock; /* leaf: imports[].version */
import imports[CS_REGCODEC_MAX_REFS];
    size_t n_imports;
} pb_reg;

/* A writer schema, prepared once per schema id: its messages' full names by
 * index path. */
typedef struct writer_msg {
    char *name;
    int32_t *path;
    size_t n;
} writer_msg;

typedef struct writer_msgs {
    writer_msg *m;
    size_t n, cap;
    cs_err err; /* CS_ERR_NOMEM while collecting */
} writer_msgs;

static void writer_release(void *prepared) {
    writer_msgs *w = prepared;
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        free(w->m[i].name);
        free(w->m[i].path);
    }
    free(w->m);
    free(w);
}

static bool collect(void *arg, const cs__proto_decl *d) {
    writer_msgs *w = arg;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 8;
        writer_msg *m = realloc(w->m, cap * sizeof *m);
        if (!m) goto nomem;
        w->m = m;
        w->cap = cap;
    }
    writer_msg *e = &w->m[w->n];
    e->name = strdup(d->full_name);
    e->path = malloc(d->n * sizeof *d->idx);
    if (!e->name || !e->path) {
        free(e->name);
        free(e->path);
        goto nomem;
    }
    memcpy(e->path, d->idx, d->n * sizeof *d->idx);
    e->n = d->n;
    w->n++;
    return false;
nomem:
    w->err = CS_ERR_NOMEM;
    return true;
}

static cs_err pb_prepare(void *state, const char *text, void **prepared) {
    (void)state;
    *prepared = NULL;
    writer_msgs *w = calloc(1, sizeof *w);
    if (!w) return cs__fail(CS_ERR_NOMEM, "out of memory preparing a Protobuf writer schema");
    cs_err err = cs__proto_messages(text, collect, w);
    if (!err && w->err) err = cs__fail(CS_ERR_NOMEM, "out of memory preparing a Protobuf writer schema");
    if (!err && w->n == 0) err = cs__fail(CS_ERR_DECODE, "the .proto text declares no message");
    if (err) {
        writer_release(w);
        return err;
    }
    *prepared = w;
    return CS_OK;
}

static void path_text(const int32_t *idx, size_t n, char *out, size_t cap) {
    size_t at = (size_t)snprintf(out, cap, "[");
    for (size_t i = 0; i < n && at < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s%d", i ? ", " : "", idx[i]);
    if (at < cap) snprintf(out + at, cap - at, "]");
}

static const char *writer_name_at(const writer_msgs *w, const int32_t *idx, size_t n) {
    for (size_t i = 0; i < w->n; i++)
        if (w->m[i].n == n && !memcmp(w->m[i].path, idx, n * sizeof *idx)) return w->m[i].name;
    return NULL;
}

static cs_err pb_decode(void *state, const void *prepared, const cs_type *type, const void *data, size_t len,
                        void *out) {
    const pb_reg *p = state;
    int32_t idx[CS_WIRE_MAX_MSG_INDEXES];
    size_t n, used;
    cs_err err = cs__wire_read_msg_indexes(data, len, idx, CS_WIRE_MAX_MSG_INDEXES, &n, &used);
    if (err) return err;
    char path[PB_REG_PATH_TEXT_MAX];
    const char *name = writer_name_at(prepared, idx, n);
    if (!name) {
        path_text(idx, n, path, sizeof path);
        return cs__fail(CS_ERR_DECODE, "message indexes %s name no message of the writer schema (codec's message %s)",
                        path, p->desc->name);
    }
    /* protobuf-c decodes with the compiled descriptor: the record must be
     * the codec's message (by full name), in any compatible version of it. */
    if (strcmp(name, p->desc->name)) {
        path_text(idx, n, path, sizeof path);
        return cs__fail(CS_ERR_DECODE, "the writer's message (indexes %s) is %s, this codec decodes %s", path, name,
                        p->desc->name);
    }
    return p->inner->decode(p->inner, type, (const uint8_t *)data + used, len - used, out);
}

static void pb_free_value(void *state, const cs_type *type, void *value) {
    const pb_reg *p = state;
    cs_codec_free_value(p->inner, type, value);
}

static cs_err pb_writer_schema(void *state, const cs_type *type, const char **text, const char **record_name) {
    const pb_reg *p = state;
    (void)type;
    *text = cs_codec_protobuf_proto(p->inner);
    *record_name = p->desc->name;
    return CS_OK;
}

/* ---- references: the imported files, registered first ---------------------------- */

typedef struct refs_of {
    pb_reg *p;
    size_t before; /* only imports added before this one (the order they were added in) */
    cs__schema_reference *refs;
    size_t cap, n;
    cs_err err;
} refs_of;

static bool add_ref(void *arg, const char *name, size_t len) {
    refs_of *r = arg;
    for (size_t i = 0; i < r->before; i++) {
        import *im = &r->p->imports[i];
        if (strlen(im->name) != len || strncmp(im->name, name, len)) continue;
        if (r->n == r->cap) {
            r->err = cs__fail(CS_ERR_ARG, "protobuf registry codec: more than %zu references", r->cap);
            return true;
        }
        pthread_mutex_lock(&r->p->lock);
        r->refs[r->n++] = (cs__schema_reference){im->name, im->name, im->version};
        pthread_mutex_unlock(&r->p->lock);
        return false;
    }
    return false; /* not given: sent without a reference (a file the registry knows itself) */
}

/* The references of `text` among the first `before` imports (registered). */
static cs_err refs_among(pb_reg *p, const char *text, size_t before, cs__schema_reference *refs, size_t cap,
                         size_t *n) {
    refs_of r = {.p = p, .before = before, .refs = refs, .cap = cap};
    cs__schema_proto_imports(text, add_ref, &r);
    *n = r.n;
    return r.err;
}

static cs_err pb_references(void *state, cs_registry *reg, cs__schema_reference *refs, size_t cap, size_t *n) {
    pb_reg *p = state;
    *n = 0;
    /* Each import under its own subject (its name, Confluent's default
     * reference subject), in the order they were added (a file's own
     * imports before it), once: the versions are kept. */
    for (size_t i = 0; i < p->n_imports; i++) {
        pthread_mutex_lock(&p->lock);
        bool done = p->imports[i].version > 0;
        pthread_mutex_unlock(&p->lock);
        if (done) continue;
        cs__schema_reference mine[CS_REGCODEC_MAX_REFS];
        size_t n_mine = 0;
        int32_t id, version = 0;
        cs_err err = refs_among(p, p->imports[i].text, i, mine, CS_REGCODEC_MAX_REFS, &n_mine);
        if (err) return err;
        cs__reg_status rs = cs__registry_register_refs(reg, p->imports[i].name, CS__SCHEMA_PROTOBUF, p->imports[i].text,
                                                       mine, n_mine, &id, &version);
        if (rs != CS__REG_OK) return cs__registry_codec_register_err(rs, p->imports[i].name);
        pthread_mutex_lock(&p->lock);
        p->imports[i].version = version;
        pthread_mutex_unlock(&p->lock);
    }
    return refs_among(p, cs_codec_protobuf_proto(p->inner), p->n_imports, refs, cap, n);
}

/* ---- encode, schema, life ---------------------------------------------------------- */

static cs_err pb_encode(void *state, const cs_type *type, const void *value, char **out, size_t *len) {
    const pb_reg *p = state;
    char *payload = NULL;
    size_t n = 0;
    cs_err err = p->inner->encode(p->inner, type, value, &payload, &n);
    if (err) return err;
    char *buf = malloc(p->n_indexes_bytes + n + 1);
    if (!buf) {
        free(payload);
        return cs__fail(CS_ERR_NOMEM, "message %s: out of memory writing its message indexes", p->desc->name);
    }
    memcpy(buf, p->indexes, p->n_indexes_bytes);
    memcpy(buf + p->n_indexes_bytes, payload, n);
    buf[p->n_indexes_bytes + n] = '\0';
    free(payload);
    *out = buf;
    *len = p->n_indexes_bytes + n;
    return CS_OK;
}

static cs_err pb_schema(void *state, const cs_type *type, char **out) {
    const pb_reg *p = state;
    return p->inner->schema(p->inner, type, out);
}

static void pb_destroy(void *state) {
    pb_reg *p = state;
    if (!p) return;
    for (size_t i = 0; i < p->n_imports; i++) {
        free(p->imports[i].name);
        free(p->imports[i].text);
    }
    cs_codec_protobuf_destroy(p->inner);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* Two formats, one per schemaFormat the AsyncAPI document shows (the .proto
 * text's syntax decides, as for the plain Protobuf codec). */
#define PB_REG_FORMAT(fmt_name)                                                                                        \
    {                                                                                                                  \
        .name = "protobuf", .content_type = "application/vnd.confluent.protobuf", .schema_format = fmt_name,           \
        .schema_type = CS__SCHEMA_PROTOBUF, .prepare = pb_prepare, .release = writer_release, .decode = pb_decode,     \
        .writer_schema = pb_writer_schema, .references = pb_references, .encode = pb_encode, .schema = pb_schema,      \
        .free_value = pb_free_value, .destroy = pb_destroy,                                                            \
    }
static const cs__reg_format pb_format2 = PB_REG_FORMAT(CS_SCHEMA_FORMAT_PROTOBUF2);
static const cs__reg_format pb_format3 = PB_REG_FORMAT(CS_SCHEMA_FORMAT_PROTOBUF3);

static pb_reg *state_of(const cs_codec *codec) {
    const cs__reg_format *fmt = NULL;
    void *state = cs__registry_codec_state(codec, &fmt);
    return state && (fmt == &pb_format2 || fmt == &pb_format3) ? state : NULL;
}

cs_err cs_codec_protobuf_registry_new(cs_registry *reg, const struct ProtobufCMessageDescriptor *desc,
                                      const char *proto_text, const cs_registry_subject_opts *opts, cs_codec **out) {
    if (!out) return cs__fail(CS_ERR_ARG, "cs_codec_protobuf_registry_new: out must not be NULL");
    *out = NULL;
    if (!reg || !proto_text)
        return cs__fail(CS_ERR_ARG, "cs_codec_protobuf_registry_new: the registry and the .proto text are required");
    if (opts && (opts->strategy < CS_SUBJECT_TOPIC_NAME || opts->strategy > CS_SUBJECT_TOPIC_RECORD_NAME))
        return cs__fail(CS_ERR_ARG, "cs_codec_protobuf_registry_new: unknown subject strategy %d", (int)opts->strategy);
    pb_reg *p = calloc(1, sizeof *p);
    if (!p) return cs__fail(CS_ERR_NOMEM, "out of memory making a Protobuf registry codec");
    pthread_mutex_init(&p->lock, NULL);
    cs_err err = cs_codec_protobuf_new(desc, proto_text, &p->inner);
    if (!err) {
        p->desc = desc;
        int32_t idx[CS_WIRE_MAX_MSG_INDEXES];
        size_t n = 0;
        err = cs__schema_proto_index_of(proto_text, desc->name, idx, CS_WIRE_MAX_MSG_INDEXES, &n);
        if (err) {
            char why[PB_REG_WHY_MAX];
            snprintf(why, sizeof why, "%s", cs_errmsg());
            err = cs__fail(CS_ERR_ARG, "cs_codec_protobuf_registry_new: message %s: %s", desc->name, why);
        } else {
            err = cs__wire_write_msg_indexes(idx, n, p->indexes, sizeof p->indexes, &p->n_indexes_bytes);
        }
    }
    if (err) {
        pb_destroy(p);
        return err;
    }
    const char *syntax = p->inner->schema_format;
    const cs__reg_format *fmt = syntax && !strcmp(syntax, CS_SCHEMA_FORMAT_PROTOBUF3) ? &pb_format3 : &pb_format2;
    return cs__registry_codec_new(reg, opts, fmt, p, out);
}

cs_err cs_codec_protobuf_registry_import(cs_codec *codec, const char *name, const char *proto_text) {
    pb_reg *p = state_of(codec);
    if (!p || !name || !*name || !proto_text)
        return cs__fail(CS_ERR_ARG,
                        "cs_codec_protobuf_registry_import: needs a Protobuf registry codec, a file name and its text");
    if (p->n_imports == CS_REGCODEC_MAX_REFS)
        return cs__fail(CS_ERR_ARG, "cs_codec_protobuf_registry_import: %s: more than %d imported files", name,
                        CS_REGCODEC_MAX_REFS);
    for (size_t i = 0; i < p->n_imports; i++)
        if (!strcmp(p->imports[i].name, name))
            return cs__fail(CS_ERR_ARG, "cs_codec_protobuf_registry_import: %s is given twice", name);
import im = {strdup(name), strdup(proto_text), 0 };
    if (!im.name || !im.text) {
        free(im.name);
        free(im.text);
        return cs__fail(CS_ERR_NOMEM, "out of memory keeping the imported file %s", name);
    }
    p->imports[p->n_imports++] = im;
    return CS_OK;
}

const cs_type *cs_codec_protobuf_registry_type(const cs_codec *codec) {
    const pb_reg *p = state_of(codec);
    return p ? cs_codec_protobuf_type(p->inner) : NULL;
}
