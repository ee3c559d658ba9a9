/* avro_default.c — a reader field the writer schema lacks takes the reader
 * schema's default, written in the schema as JSON (the Avro spec's JSON
 * encoding of a value: a union's default is of its first branch, bytes and
 * fixed are strings of code points 0-255, an enum's is its symbol).
 *
 * Owns: nothing; it writes into the caller's struct like the decoder, and a
 * failure is unwound by cs_avro_decode. Threads: any. Must never: write a
 * default that does not fit the member (range, length, symbol).
 * Locks: none. */
#include "codec/avro_read.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "codec/codec_internal.h"

static cs_err no_fit(decoder *d, const char *what) {
    return cs__avro_unresolvable(d, "the reader schema's default is not %s", what);
}

/* A JSON string of code points 0-255 (UTF-8 from yajl) into bytes; returns
 * the count, or SIZE_MAX for a code point above 255. */
static size_t latin1(const char *s, unsigned char *out) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        if (*p < 0x80) {
            out[n++] = *p++;
        } else if ((p[0] & 0xE0) == 0xC0 && p[0] <= 0xC3 && (p[1] & 0xC0) == 0x80) {
            out[n++] = (unsigned char)(((p[0] & 0x03) << 6) | (p[1] & 0x3F));
            p += 2;
        } else {
            return SIZE_MAX;
        }
    }
    return n;
}

static cs_err default_record(decoder *d, const cs_type *t, const av_node *r, yajl_val def, unsigned char *base) {
    if (!YAJL_IS_OBJECT(def)) return no_fit(d, "an object");
    for (size_t i = 0; i < t->n_fields; i++) {
        const cs_field *f = &t->fields[i];
        const char *path[] = {f->name, NULL};
        yajl_val v = yajl_tree_get(def, path, yajl_t_any);
        const av_field *rf = NULL;
        for (size_t k = 0; r != NULL && r->type == AV_RECORD && k < r->n_fields; k++)
            if (strcmp(r->fields[k].name, f->name) == 0) rf = &r->fields[k];
        if (v == NULL && rf != NULL) v = rf->def;
        cs_err err = cs__avro_push_name(d, f->name);
        if (err) return err;
        if (v != NULL)
            err = cs__avro_apply_default(d, f, f->kind, f->type, rf ? rf->type : NULL, v, base + f->offset, base);
        else if (f->presence == CS_REQUIRED)
            err = cs__avro_unresolvable(d, "missing in the writer schema, and the reader schema has no default");
        if (err) return err;
        cs__avro_pop(d);
    }
    return CS_OK;
}

static cs_err default_items(decoder *d, const cs_field *f, const av_node *r, yajl_val def, unsigned char *base) {
    if (f->kind == CS_KIND_MAP) {
        if (!YAJL_IS_OBJECT(def) || YAJL_GET_OBJECT(def)->len != 0) return no_fit(d, "an empty map ({})");
        return CS_OK;
    }
    if (!YAJL_IS_ARRAY(def)) return no_fit(d, "an array");
    size_t capacity = 0;
    const av_node *items = r && r->type == AV_ARRAY ? r->items : NULL;
    for (size_t i = 0; i < YAJL_GET_ARRAY(def)->len; i++) {
        unsigned char *item = cs__avro_append(d, f, base, &capacity);
        if (item == NULL) return CS_ERR_DECODE;
        cs_err err = cs__avro_push_index(d, i);
        if (!err)
            err = cs__avro_apply_default(d, f, f->elem, f->type, items, YAJL_GET_ARRAY(def)->values[i], item, NULL);
        if (err) return err;
        cs__avro_pop(d);
    }
    return CS_OK;
}

static cs_err default_integer(decoder *d, cs_kind kind, yajl_val def, unsigned char *slot) {
    if (!YAJL_IS_INTEGER(def)) return no_fit(d, "an integer");
    long long v = YAJL_GET_INTEGER(def);
    switch (kind) {
    case CS_KIND_I32:
        if (v < INT32_MIN || v > INT32_MAX) return no_fit(d, "within int32");
        *(int32_t *)slot = (int32_t)v;
        return CS_OK;
    case CS_KIND_U32:
        if (v < 0 || v > UINT32_MAX) return no_fit(d, "within uint32");
        *(uint32_t *)slot = (uint32_t)v;
        return CS_OK;
    case CS_KIND_I64: *(int64_t *)slot = v; return CS_OK;
    default:
        if (v < 0) return no_fit(d, "within uint64");
        *(uint64_t *)slot = (uint64_t)v;
        return CS_OK;
    }
}

static cs_err default_text(decoder *d, const cs_field *f, cs_kind kind, yajl_val def, unsigned char *slot) {
    if (!YAJL_IS_STRING(def)) return no_fit(d, "a string");
    const char *s = YAJL_GET_STRING(def);
    size_t len = strlen(s);
    switch (kind) {
    case CS_KIND_STRING: {
        char *copy = strdup(s);
        if (copy == NULL) return cs__avro_no_memory(d);
        memcpy(slot, &copy, sizeof copy);
        return CS_OK;
    }
    case CS_KIND_CHARS:
        if (len >= f->size) return no_fit(d, "short enough for the char array");
        memcpy(slot, s, len + 1);
        return CS_OK;
    case CS_KIND_ENUM:
        for (size_t i = 0; i < f->n_symbols; i++)
            if (strcmp(f->symbols[i], s) == 0) {
                *(int32_t *)slot = (int32_t)i;
                return CS_OK;
            }
        return no_fit(d, "one of the enum's symbols");
    case CS_KIND_BYTES: {
        cs_bytes b = {malloc(len + 1), 0};
        if (b.data == NULL) return cs__avro_no_memory(d);
        b.len = latin1(s, b.data);
        if (b.len == SIZE_MAX) {
            free(b.data);
            return no_fit(d, "a string of code points 0-255");
        }
        memcpy(slot, &b, sizeof b);
        return CS_OK;
    }
    default: { /* FIXED */
        unsigned char *buf = malloc(len + 1);
        if (buf == NULL) return cs__avro_no_memory(d);
        size_t n = latin1(s, buf);
        if (n == f->size) memcpy(slot, buf, n);
        free(buf);
        return n == f->size ? CS_OK : no_fit(d, "a string of as many code points 0-255 as the fixed's size");
    }
    }
}

cs_err cs__avro_apply_default(decoder *d, const cs_field *f, cs_kind kind, const cs_type *nested, const av_node *rtype,
                              yajl_val def, unsigned char *slot, unsigned char *base) {
    const av_node *first = rtype && rtype->type == AV_UNION && rtype->n_branches > 0 ? rtype->branches[0] : rtype;
    if (YAJL_IS_NULL(def)) {
        if (base != NULL && f->presence == CS_OPTIONAL) return CS_OK; /* stays zeroed */
        return no_fit(d, "a value (null for a required field)");
    }
    switch (kind) {
    case CS_KIND_BOOL:
        if (!YAJL_IS_TRUE(def) && !YAJL_IS_FALSE(def)) return no_fit(d, "a boolean");
        *(bool *)slot = YAJL_IS_TRUE(def);
        return CS_OK;
    case CS_KIND_I64:
        if (f->logical == CS_LOGICAL_DECIMAL) return no_fit(d, "supported for a decimal (give it in the writer)");
        /* fall through */
    case CS_KIND_I32:
    case CS_KIND_U32:
    case CS_KIND_U64: return default_integer(d, kind, def, slot);
    case CS_KIND_F32:
    case CS_KIND_F64:
        if (!YAJL_IS_NUMBER(def)) return no_fit(d, "a number");
        if (kind == CS_KIND_F32) *(float *)slot = (float)YAJL_GET_DOUBLE(def);
        else *(double *)slot = YAJL_GET_DOUBLE(def);
        return CS_OK;
    case CS_KIND_STRING:
    case CS_KIND_CHARS:
    case CS_KIND_ENUM:
    case CS_KIND_BYTES:
    case CS_KIND_FIXED: return default_text(d, f, kind, def, slot);
    case CS_KIND_OBJECT: return default_record(d, nested, first, def, slot);
    case CS_KIND_ARRAY:
    case CS_KIND_MAP: return default_items(d, f, cs__avro_unwrap_nullable(rtype), def, base);
    case CS_KIND_UNION: {
        /* the first branch of the reader's union that the table has */
        const cs_field *b = &nested->fields[0];
        int32_t which = 1;
        memcpy(base + f->count_offset, &which, sizeof which);
        return cs__avro_apply_default(d, b, b->kind, b->type, first, def, slot + b->offset, slot);
    }
    }
    return no_fit(d, "of a known kind");
}
