/* avro_encode.c — a struct into one Avro binary datum of a given schema:
 * the schema's fields in its order, each from the table field of that name,
 * union branches picked by what the value holds.
 *
 * Owns: for one call, the output buffer (handed to the caller on success).
 * Threads: pure function, any thread. Must never: write a value its schema
 * cannot hold (an int out of range, an enum index past the symbols, a decimal
 * beyond its precision, text that is not UTF-8).
 * Locks: none. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "codec/avro_internal.h"
#include "codec/codec_internal.h"

#define PATH_SHOWN 256
#define VARINT_MAX_BYTES 10

typedef struct encoder {
    cs__avro_buf out;
    const char *path[CS__AVRO_MAX_DEPTH];
    size_t n_path;
} encoder;

static cs_err fail(encoder *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static cs_err fail(encoder *e, const char *fmt, ...) {
    char path[PATH_SHOWN] = "", why[512];
    size_t len = 0;
    for (size_t i = 0; i < e->n_path && len + 1 < sizeof path; i++) {
        int n = snprintf(path + len, sizeof path - len, "%s%s", len ? "." : "", e->path[i]);
        if (n < 0) break;
        len += (size_t)n < sizeof path - len ? (size_t)n : sizeof path - len - 1;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return cs__fail(CS_ERR_ENCODE, "field \"%s\": %s", path, why);
}

static void put_long(encoder *e, int64_t v) {
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); /* zig-zag */
    unsigned char b[VARINT_MAX_BYTES];
    size_t n = 0;
    do {
        b[n] = (unsigned char)(u & 0x7F);
        u >>= 7;
        if (u) b[n] |= 0x80;
        n++;
    } while (u);
    cs__avro_buf_put(&e->out, b, n);
}

static void put_bytes(encoder *e, const void *p, size_t n) {
    put_long(e, (int64_t)n);
    cs__avro_buf_put(&e->out, p, n);
}

static cs_err encode_value(encoder *e, const av_node *w, const cs_field *f, cs_kind kind, const unsigned char *slot,
                           const unsigned char *base);

static const cs_field *find_field(const cs_type *t, const char *name) {
    for (size_t i = 0; i < t->n_fields; i++)
        if (strcmp(t->fields[i].name, name) == 0) return &t->fields[i];
    return NULL;
}

static int null_branch(const av_node *w) {
    for (size_t i = 0; w->type == AV_UNION && i < w->n_branches; i++)
        if (w->branches[i]->type == AV_NULL) return (int)i;
    return -1;
}

static cs_err encode_record(encoder *e, const av_node *w, const cs_type *t, const unsigned char *base) {
    if (w->type != AV_RECORD)
        return fail(e, "the schema has %s where the table has a struct", cs__avro_type_name(w->type));
    if (e->n_path + 1 >= CS__AVRO_MAX_DEPTH) return fail(e, "nested deeper than 64 levels");
    for (size_t i = 0; i < w->n_fields; i++) {
        const av_field *wf = &w->fields[i];
        const cs_field *f = find_field(t, wf->name);
        e->path[e->n_path++] = wf->name;
        cs_err err = CS_OK;
        if (f != NULL) {
            err = encode_value(e, wf->type, f, f->kind, base + f->offset, base);
        } else if (null_branch(wf->type) >= 0) {
            put_long(e, null_branch(wf->type));
        } else if ((wf->type->type == AV_ARRAY || wf->type->type == AV_MAP) && wf->def != NULL &&
                   ((YAJL_IS_ARRAY(wf->def) && YAJL_GET_ARRAY(wf->def)->len == 0) ||
                    (YAJL_IS_OBJECT(wf->def) && YAJL_GET_OBJECT(wf->def)->len == 0))) {
            put_long(e, 0); /* its default, empty */
        } else {
            err = fail(e, "in the schema but not in the table \"%s\" (neither nullable nor with an empty default)",
                       t->name);
        }
        if (err) return err;
        e->n_path--;
    }
    return CS_OK;
}

/* Whether a value of kind can be written as schema w (before range checks). */
static bool takes(const av_node *w, const cs_field *f, cs_kind kind) {
    switch (w->type) {
    case AV_BOOLEAN: return kind == CS_KIND_BOOL;
    case AV_INT:
    case AV_LONG: return kind >= CS_KIND_I32 && kind <= CS_KIND_U64 && f->logical != CS_LOGICAL_DECIMAL;
    case AV_FLOAT:
    case AV_DOUBLE: return kind == CS_KIND_F32 || kind == CS_KIND_F64;
    case AV_STRING: return kind == CS_KIND_STRING || kind == CS_KIND_CHARS;
    case AV_BYTES: return kind == CS_KIND_BYTES || (kind == CS_KIND_I64 && f->logical == CS_LOGICAL_DECIMAL);
    case AV_FIXED:
        return (kind == CS_KIND_FIXED && f->size == w->size) ||
               (kind == CS_KIND_I64 && f->logical == CS_LOGICAL_DECIMAL);
    case AV_ENUM: return kind == CS_KIND_ENUM;
    case AV_RECORD: return kind == CS_KIND_OBJECT;
    case AV_ARRAY: return kind == CS_KIND_ARRAY;
    case AV_MAP: return kind == CS_KIND_MAP;
    default: return false;
    }
}

static bool absent(const cs_field *f, cs_kind kind, const unsigned char *slot, const unsigned char *base) {
    if (kind == CS_KIND_STRING) return *(char *const *)slot == NULL;
    if (kind == CS_KIND_UNION) return *(const int32_t *)(base + f->count_offset) == 0;
    if (kind == CS_KIND_BYTES) return f->presence == CS_OPTIONAL && ((const cs_bytes *)slot)->len == 0;
    return false;
}

static cs_err encode_union(encoder *e, const av_node *w, const cs_field *f, cs_kind kind, const unsigned char *slot,
                           const unsigned char *base) {
    if (base != NULL && absent(f, kind, slot, base)) {
        int i = null_branch(w);
        if (i < 0) return fail(e, "is %s, and the schema's union has no null", kind == CS_KIND_UNION ? "none" : "NULL");
        put_long(e, i);
        return CS_OK;
    }
    const cs_field *b = f;
    const unsigned char *holder = base; /* the struct holding the member (arrays find their count there) */
    if (kind == CS_KIND_UNION) {
        int32_t which = *(const int32_t *)(base + f->count_offset);
        if (which < 1 || (size_t)which > f->type->n_fields) return fail(e, "union selector %d is out of range", which);
        b = &f->type->fields[which - 1];
        holder = slot;
        slot += b->offset;
        kind = b->kind;
    }
    size_t pick = w->n_branches;
    for (size_t i = 0; i < w->n_branches && kind == CS_KIND_OBJECT && pick == w->n_branches; i++)
        if (w->branches[i]->type == AV_RECORD && strcmp(cs__avro_short_name(w->branches[i]->name), b->type->name) == 0)
            pick = i;
    for (size_t i = 0; i < w->n_branches && pick == w->n_branches; i++)
        if (takes(w->branches[i], b, kind)) pick = i;
    if (pick == w->n_branches)
        return fail(e, "no branch of the schema's union takes %s", cs__codec_kind_expectation(kind));
    put_long(e, (int64_t)pick);
    return encode_value(e, w->branches[pick], b, kind, slot, holder);
}

static cs_err encode_decimal(encoder *e, const av_node *w, int64_t v) {
    if (w->logical != CS_LOGICAL_DECIMAL)
        return fail(e, "the schema's %s is not a decimal", cs__avro_type_name(w->type));
    uint64_t magnitude = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, limit = 1;
    for (int i = 0; i < w->precision && limit <= UINT64_MAX / 10; i++) limit *= 10;
    if (w->precision <= 19 && magnitude >= limit)
        return fail(e, "%lld does not fit a decimal of precision %d", (long long)v, w->precision);
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)v >> (56 - 8 * i));
    size_t skip = 0; /* the shortest two's complement */
    while (skip < 7 && (b[skip] == 0x00 || b[skip] == 0xFF) && (b[skip + 1] & 0x80) == (b[skip] & 0x80)) skip++;
    if (w->type == AV_BYTES) {
        put_bytes(e, b + skip, 8 - skip);
        return CS_OK;
    }
    if (w->size < 8 - skip) return fail(e, "%lld does not fit a fixed of %zu bytes", (long long)v, w->size);
    for (size_t i = 8 - skip; i < w->size; i++) cs__avro_buf_put(&e->out, v < 0 ? "\xFF" : "\x00", 1);
    cs__avro_buf_put(&e->out, b + skip, 8 - skip);
    return CS_OK;
}

static cs_err encode_text(encoder *e, const av_node *w, const cs_field *f, cs_kind kind, const unsigned char *slot) {
    const char *s;
    size_t len;
    if (kind == CS_KIND_BYTES) {
        const cs_bytes *b = (const cs_bytes *)slot;
        if (b->len > 0 && b->data == NULL) return fail(e, "bytes of length %zu have no data", b->len);
        put_bytes(e, b->data, b->len);
        return CS_OK;
    }
    if (kind == CS_KIND_STRING) {
        memcpy(&s, slot, sizeof s);
        if (s == NULL) return fail(e, "is NULL (required)");
        len = strlen(s);
    } else {
        s = (const char *)slot;
        len = strnlen(s, f->size);
        if (len == f->size) return fail(e, "char array is not NUL-terminated");
    }
    if (w->type == AV_STRING && !cs__codec_utf8_valid((const unsigned char *)s, len))
        return fail(e, "string is not valid UTF-8");
    put_bytes(e, s, len);
    return CS_OK;
}

static cs_err encode_items(encoder *e, const av_node *w, const cs_field *f, const unsigned char *base) {
    const unsigned char *items;
    size_t count = *(const size_t *)(base + f->count_offset);
    memcpy(&items, base + f->offset, sizeof items);
    if (count > 0 && items == NULL) return fail(e, "%zu items but no pointer", count);
    if (count > 0) put_long(e, (int64_t)count);
    for (size_t i = 0; i < count; i++) {
        const unsigned char *item = items + i * f->size;
        cs_err err;
        if (f->kind == CS_KIND_MAP) {
            const cs_field *key = &f->type->fields[0], *value = &f->type->fields[1];
            if ((err = encode_text(e, &(av_node){.type = AV_STRING}, key, CS_KIND_STRING, item + key->offset)))
                return err;
            err = encode_value(e, w->items, value, value->kind, item + value->offset, item);
        } else {
            err = encode_value(e, w->items, f, f->elem, item, NULL);
        }
        if (err) return err;
    }
    put_long(e, 0);
    return CS_OK;
}

static cs_err encode_value(encoder *e, const av_node *w, const cs_field *f, cs_kind kind, const unsigned char *slot,
                           const unsigned char *base) {
    if (w->type == AV_UNION) return encode_union(e, w, f, kind, slot, base);
    if (kind == CS_KIND_UNION) {
        int32_t which = *(const int32_t *)(base + f->count_offset);
        if (which < 1 || (size_t)which > f->type->n_fields) return fail(e, "union selector %d is out of range", which);
        const cs_field *b = &f->type->fields[which - 1];
        return encode_value(e, w, b, b->kind, slot + b->offset, slot);
    }
    if (!takes(w, f, kind))
        return fail(e, "the schema's %s cannot hold %s", cs__avro_type_name(w->type), cs__codec_kind_expectation(kind));
    int64_t l = 0;
    switch (kind) {
    case CS_KIND_I32: l = *(const int32_t *)slot; break;
    case CS_KIND_U32: l = *(const uint32_t *)slot; break;
    case CS_KIND_I64: l = *(const int64_t *)slot; break;
    case CS_KIND_U64:
        if (*(const uint64_t *)slot > INT64_MAX)
            return fail(e, "%llu does not fit a long", (unsigned long long)*(const uint64_t *)slot);
        l = (int64_t) * (const uint64_t *)slot;
        break;
    default: break;
    }
    switch (w->type) {
    case AV_BOOLEAN: cs__avro_buf_put(&e->out, *(const bool *)slot ? "\x01" : "\x00", 1); return CS_OK;
    case AV_INT:
        if (l < INT32_MIN || l > INT32_MAX) return fail(e, "%lld does not fit an int", (long long)l);
        /* fall through */
    case AV_LONG: put_long(e, l); return CS_OK;
    case AV_FLOAT:
    case AV_DOUBLE: {
        double x = kind == CS_KIND_F32 ? *(const float *)slot : *(const double *)slot;
        unsigned char b[8];
        if (w->type == AV_FLOAT) {
            float v = (float)x;
            uint32_t u;
            memcpy(&u, &v, sizeof u);
            for (int i = 0; i < 4; i++) b[i] = (unsigned char)(u >> (8 * i));
            cs__avro_buf_put(&e->out, b, 4);
        } else {
            uint64_t u;
            memcpy(&u, &x, sizeof u);
            for (int i = 0; i < 8; i++) b[i] = (unsigned char)(u >> (8 * i));
            cs__avro_buf_put(&e->out, b, 8);
        }
        return CS_OK;
    }
    case AV_STRING: return encode_text(e, w, f, kind, slot);
    case AV_BYTES:
        if (kind == CS_KIND_I64) return encode_decimal(e, w, l);
        return encode_text(e, w, f, kind, slot);
    case AV_FIXED:
        if (kind == CS_KIND_I64) return encode_decimal(e, w, l);
        cs__avro_buf_put(&e->out, slot, w->size);
        return CS_OK;
    case AV_ENUM: {
        int32_t i = *(const int32_t *)slot;
        if (i < 0 || (size_t)i >= f->n_symbols)
            return fail(e, "enum index %d is not one of %zu symbols", i, f->n_symbols);
        for (size_t k = 0; k < w->n_symbols; k++)
            if (strcmp(w->symbols[k], f->symbols[i]) == 0) {
                put_long(e, (int64_t)k);
                return CS_OK;
            }
        return fail(e, "symbol \"%s\" is not in the schema's enum %s", f->symbols[i], w->name);
    }
    case AV_RECORD: return encode_record(e, w, f->type, slot);
    case AV_ARRAY:
    case AV_MAP: return encode_items(e, w, f, base);
    default: return fail(e, "cannot write %s", cs__avro_type_name(w->type));
    }
}

cs_err cs_avro_encode(const cs_type *type, const cs_avro_schema *schema, const void *value, char **out,
                      size_t *len_out) {
    if (out != NULL) *out = NULL;
    if (len_out != NULL) *len_out = 0;
    if (type == NULL || schema == NULL || value == NULL || out == NULL)
        return cs__fail(CS_ERR_ARG, "cs_avro_encode: type, schema, value and out must not be NULL");
    cs_err err = cs__codec_type_check_cached(type);
    if (err) return err;
    encoder e = {0};
    err = encode_record(&e, schema->root, type, value);
    if (!err && e.out.failed) err = cs__fail(CS_ERR_NOMEM, "out of memory encoding a %s", type->name);
    if (!err && e.out.data == NULL) cs__avro_buf_put(&e.out, "", 0); /* an empty record: a valid, empty datum */
    if (!err && e.out.failed) err = cs__fail(CS_ERR_NOMEM, "out of memory encoding a %s", type->name);
    if (err) {
        free(e.out.data);
        return err;
    }
    *out = e.out.data;
    if (len_out != NULL) *len_out = e.out.len;
    return CS_OK;
}
