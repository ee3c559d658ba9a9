/* avro_decode.c — an Avro binary datum into a struct, resolving the writer
 * schema against the table (and the reader schema's defaults) as it reads:
 * writer fields are matched to table fields by name, the ones the table lacks
 * are skipped, the table's fields the writer lacks take their default
 * (avro_default.c), numbers are promoted, enum symbols and union branches are
 * matched by name.
 *
 * Why not avro-c's resolving reader: it refuses a reader field missing from
 * the writer instead of applying the default, version 1.11 knows no logical
 * types, and its generic values allocate a length read from the payload
 * before checking the bytes are there. Reading the binary is the easy part
 * (avro_read.c); this file is the mapping.
 *
 * Owns: until the call returns, what it hangs into the caller's struct; on
 * failure that is freed and the struct zeroed. Threads: pure function, any
 * thread. Must never: let a value the table does not describe reach the
 * struct (range, UTF-8, NUL in a string, a fixed of another size).
 * Locks: none. */
#include "codec/avro_read.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "codec/codec_internal.h"

#define SEEN_WORDS ((CS_TYPE_MAX_FIELDS + 63) / 64)
#define DECIMAL_MAX_BYTES 8 /* an int64_t's two's complement */

static cs_err read_value(decoder *d, const av_node *w, const cs_field *f, cs_kind kind, const cs_type *nested,
                         const av_node *r, unsigned char *slot, unsigned char *base);

static const cs_field *find_field(const cs_type *t, const char *name) {
    for (size_t i = 0; i < t->n_fields; i++)
        if (strcmp(t->fields[i].name, name) == 0) return &t->fields[i];
    return NULL;
}

static const av_field *find_reader_field(const av_node *r, const char *name) {
    if (r == NULL || r->type != AV_RECORD) return NULL;
    for (size_t i = 0; i < r->n_fields; i++)
        if (strcmp(r->fields[i].name, name) == 0) return &r->fields[i];
    return NULL;
}

/* The reader schema's record for a nested type: the union branch of that
 * name, or the non-null branch. */
static const av_node *reader_record(const av_node *r, const cs_type *t) {
    if (r == NULL) return NULL;
    if (r->type == AV_RECORD) return r;
    if (r->type != AV_UNION) return NULL;
    for (size_t i = 0; i < r->n_branches; i++)
        if (r->branches[i]->type == AV_RECORD && strcmp(cs__avro_short_name(r->branches[i]->name), t->name) == 0)
            return r->branches[i];
    return cs__avro_unwrap_nullable(r);
}

static const av_node *reader_items(const av_node *r) {
    const av_node *u = cs__avro_unwrap_nullable(r);
    return u && (u->type == AV_ARRAY || u->type == AV_MAP) ? u->items : NULL;
}

/* Whether a writer value of schema w can be read into kind (promotions
 * included); for records, whether the names match. */
static bool fits(const av_node *w, const cs_field *f, cs_kind kind) {
    switch (kind) {
    case CS_KIND_BOOL: return w->type == AV_BOOLEAN;
    case CS_KIND_I32: return w->type == AV_INT;
    case CS_KIND_I64:
        if (f->logical == CS_LOGICAL_DECIMAL) return (w->type == AV_BYTES || w->type == AV_FIXED);
        return w->type == AV_INT || w->type == AV_LONG;
    case CS_KIND_U32:
    case CS_KIND_U64: return w->type == AV_INT || w->type == AV_LONG;
    case CS_KIND_F32: return w->type == AV_INT || w->type == AV_LONG || w->type == AV_FLOAT;
    case CS_KIND_F64: return w->type >= AV_INT && w->type <= AV_DOUBLE;
    case CS_KIND_STRING:
    case CS_KIND_CHARS:
    case CS_KIND_BYTES: return w->type == AV_STRING || w->type == AV_BYTES;
    case CS_KIND_FIXED: return w->type == AV_FIXED && w->size == f->size;
    case CS_KIND_ENUM: return w->type == AV_ENUM;
    case CS_KIND_OBJECT: return w->type == AV_RECORD; /* union branches: matched by name first */
    case CS_KIND_ARRAY: return w->type == AV_ARRAY;
    case CS_KIND_MAP: return w->type == AV_MAP;
    case CS_KIND_UNION: return true; /* a branch is looked for when reading */
    }
    return false;
}

static cs_err read_record(decoder *d, const av_node *w, const cs_type *t, const av_node *r, unsigned char *base) {
    uint64_t seen[SEEN_WORDS] = {0};
    cs_err err;
    if (w->type != AV_RECORD)
        return cs__avro_unresolvable(d, "the writer has %s, the reader record %s", cs__avro_type_name(w->type),
                                     t->name);
    for (size_t i = 0; i < w->n_fields; i++) {
        const av_field *wf = &w->fields[i];
        const cs_field *f = find_field(t, wf->name);
        if (f == NULL) { /* the writer's field the reader does not know */
            if ((err = cs__avro_skip(d, wf->type))) return err;
            continue;
        }
        size_t index = (size_t)(f - t->fields);
        seen[index / 64] |= (uint64_t)1 << (index % 64);
        const av_field *rf = find_reader_field(r, f->name);
        if ((err = cs__avro_push_name(d, f->name))) return err;
        err = read_value(d, wf->type, f, f->kind, f->type, rf ? rf->type : NULL, base + f->offset, base);
        if (err) return err;
        cs__avro_pop(d);
    }
    for (size_t i = 0; i < t->n_fields; i++) {
        if (seen[i / 64] & ((uint64_t)1 << (i % 64))) continue;
        const cs_field *f = &t->fields[i];
        const av_field *rf = find_reader_field(r, f->name);
        if ((err = cs__avro_push_name(d, f->name))) return err;
        if (rf != NULL && rf->def != NULL)
            err = cs__avro_apply_default(d, f, f->kind, f->type, rf->type, rf->def, base + f->offset, base);
        else if (f->presence == CS_REQUIRED)
            err = cs__avro_unresolvable(d, "missing in the writer schema, and the reader schema has no default");
        if (err) return err;
        cs__avro_pop(d);
    }
    return CS_OK;
}

static cs_err read_string(decoder *d, const cs_field *f, cs_kind kind, unsigned char *slot) {
    size_t len;
    const unsigned char *s;
    cs_err err = cs__avro_read_len(d, &len);
    if (err || (err = cs__avro_read_raw(d, len, &s))) return err;
    if (kind == CS_KIND_BYTES) {
        cs_bytes b = {NULL, len};
        if (len > 0 && (b.data = malloc(len)) == NULL) return cs__avro_no_memory(d);
        if (len > 0) memcpy(b.data, s, len);
        memcpy(slot, &b, sizeof b);
        return CS_OK;
    }
    if (memchr(s, '\0', len) != NULL) return cs__avro_fail(d, "string contains a NUL character");
    if (!cs__codec_utf8_valid(s, len)) return cs__avro_fail(d, "string is not valid UTF-8");
    if (kind == CS_KIND_CHARS) {
        if (len >= f->size) return cs__avro_fail(d, "string of %zu bytes is longer than %zu", len, f->size - 1);
        memcpy(slot, s, len);
        slot[len] = '\0';
        return CS_OK;
    }
    char *copy = malloc(len + 1);
    if (copy == NULL) return cs__avro_no_memory(d);
    memcpy(copy, s, len);
    copy[len] = '\0';
    memcpy(slot, &copy, sizeof copy);
    return CS_OK;
}

static cs_err read_decimal(decoder *d, const av_node *w, const cs_field *f, unsigned char *slot) {
    if (w->logical != CS_LOGICAL_DECIMAL || w->scale != f->scale)
        return cs__avro_unresolvable(d, "the reader has a decimal of scale %d, the writer %s", f->scale,
                                     w->logical == CS_LOGICAL_DECIMAL ? "another scale" : "plain bytes");
    size_t len = w->size;
    const unsigned char *b;
    cs_err err = w->type == AV_BYTES ? cs__avro_read_len(d, &len) : CS_OK;
    if (err || (err = cs__avro_read_raw(d, len, &b))) return err;
    /* Big-endian two's complement: drop sign-extension bytes, keep 8. */
    while (len > DECIMAL_MAX_BYTES && (b[0] == 0x00 || b[0] == 0xFF) && (b[1] & 0x80) == (b[0] & 0x80)) b++, len--;
    if (len > DECIMAL_MAX_BYTES) return cs__avro_fail(d, "decimal does not fit in 64 bits");
    uint64_t u = len > 0 && (b[0] & 0x80) ? UINT64_MAX : 0;
    for (size_t i = 0; i < len; i++) u = (u << 8) | b[i];
    int64_t v = (int64_t)u;
    memcpy(slot, &v, sizeof v);
    return CS_OK;
}

static cs_err read_number(decoder *d, const av_node *w, const cs_field *f, cs_kind kind, unsigned char *slot) {
    int64_t l = 0;
    double x = 0;
    cs_err err = CS_OK;
    if (w->logical >= CS_LOGICAL_TIMESTAMP_MILLIS && w->logical <= CS_LOGICAL_TIMESTAMP_MICROS &&
        f->logical >= CS_LOGICAL_TIMESTAMP_MILLIS && f->logical <= CS_LOGICAL_TIMESTAMP_MICROS &&
        w->logical != f->logical)
        return cs__avro_unresolvable(d, "the writer's timestamp unit differs from the reader's");
    if (w->type == AV_INT || w->type == AV_LONG) {
        if ((err = cs__avro_read_long(d, &l))) return err;
        if (w->type == AV_INT && (l < INT32_MIN || l > INT32_MAX))
            return cs__avro_fail(d, "int %lld is out of range", (long long)l);
        x = (double)l;
    } else if (w->type == AV_FLOAT) {
        const unsigned char *b;
        float v;
        if ((err = cs__avro_read_raw(d, sizeof v, &b))) return err;
        uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        memcpy(&v, &u, sizeof v);
        x = v;
    } else {
        const unsigned char *b;
        uint64_t u = 0;
        if ((err = cs__avro_read_raw(d, sizeof x, &b))) return err;
        for (int i = 7; i >= 0; i--) u = (u << 8) | b[i];
        memcpy(&x, &u, sizeof x);
    }
    switch (kind) {
    case CS_KIND_I32: {
        int32_t v = (int32_t)l;
        memcpy(slot, &v, sizeof v);
        return CS_OK;
    }
    case CS_KIND_U32: {
        if (l < 0 || l > UINT32_MAX) return cs__avro_fail(d, "%lld is out of range for uint32", (long long)l);
        uint32_t v = (uint32_t)l;
        memcpy(slot, &v, sizeof v);
        return CS_OK;
    }
    case CS_KIND_I64: memcpy(slot, &l, sizeof l); return CS_OK;
    case CS_KIND_U64: {
        if (l < 0) return cs__avro_fail(d, "%lld is out of range for uint64", (long long)l);
        uint64_t v = (uint64_t)l;
        memcpy(slot, &v, sizeof v);
        return CS_OK;
    }
    case CS_KIND_F32: {
        float v = (float)x;
        memcpy(slot, &v, sizeof v);
        return CS_OK;
    }
    default: memcpy(slot, &x, sizeof x); return CS_OK;
    }
}

static cs_err read_enum(decoder *d, const av_node *w, const cs_field *f, unsigned char *slot) {
    int64_t i;
    cs_err err = cs__avro_read_long(d, &i);
    if (err) return err;
    if (i < 0 || (uint64_t)i >= w->n_symbols)
        return cs__avro_fail(d, "enum index %lld is not one of the writer's %zu symbols", (long long)i, w->n_symbols);
    for (size_t k = 0; k < f->n_symbols; k++)
        if (strcmp(f->symbols[k], w->symbols[i]) == 0) {
            int32_t v = (int32_t)k;
            memcpy(slot, &v, sizeof v);
            return CS_OK;
        }
    return cs__avro_fail(d, "symbol \"%s\" is not one of the reader's", w->symbols[i]);
}

static cs_err read_blocks(decoder *d, const av_node *w, const cs_field *f, const av_node *r, unsigned char *base) {
    size_t capacity = 0, index = 0;
    const cs_type *entry = f->kind == CS_KIND_MAP ? f->type : NULL;
    for (;;) {
        size_t count;
        cs_err err = cs__avro_read_block(d, w->items, &count);
        if (err || count == 0) return err;
        for (size_t i = 0; i < count; i++, index++) {
            unsigned char *item = cs__avro_append(d, f, base, &capacity);
            if (item == NULL) return CS_ERR_DECODE; /* message set */
            if ((err = cs__avro_push_index(d, index))) return err;
            if (entry != NULL) {
                const cs_field *value = &entry->fields[1];
                err = read_string(d, &entry->fields[0], CS_KIND_STRING, item + entry->fields[0].offset);
                if (!err) err = read_value(d, w->items, value, value->kind, value->type, r, item + value->offset, item);
            } else {
                err = read_value(d, w->items, f, f->elem, f->type, r, item, NULL);
            }
            if (err) return err;
            cs__avro_pop(d);
        }
    }
}

static cs_err read_union(decoder *d, const av_node *w, const cs_field *f, const av_node *r, unsigned char *slot,
                         unsigned char *base) {
    const cs_type *branches = f->type;
    /* A writer record goes to the branch whose type has its name; other
     * values (and records no branch names) to the first branch they fit. */
    size_t n = branches->n_fields, pick = n;
    for (size_t i = 0; i < n && w->type == AV_RECORD && pick == n; i++) {
        const cs_field *b = &branches->fields[i];
        if (b->kind == CS_KIND_OBJECT && strcmp(cs__avro_short_name(w->name), b->type->name) == 0) pick = i;
    }
    for (size_t i = 0; i < n && pick == n; i++)
        if (fits(w, &branches->fields[i], branches->fields[i].kind)) pick = i;
    if (pick < n) {
        const cs_field *b = &branches->fields[pick];
        int32_t which = (int32_t)pick + 1;
        memcpy(base + f->count_offset, &which, sizeof which);
        return read_value(d, w, b, b->kind, b->type, r, slot + b->offset, slot);
    }
    return cs__avro_unresolvable(d, "no branch of the union takes the writer's %s%s%s", cs__avro_type_name(w->type),
                                 w->name ? " " : "", w->name ? w->name : "");
}

static cs_err read_value(decoder *d, const av_node *w, const cs_field *f, cs_kind kind, const cs_type *nested,
                         const av_node *r, unsigned char *slot, unsigned char *base) {
    cs_err err;
    if (w->type == AV_UNION) {
        int64_t i;
        if ((err = cs__avro_read_long(d, &i))) return err;
        if (i < 0 || (uint64_t)i >= w->n_branches)
            return cs__avro_fail(d, "union branch %lld does not exist (%zu branches)", (long long)i, w->n_branches);
        w = w->branches[i];
    }
    if (w->type == AV_NULL) {
        if (base != NULL && f->presence == CS_OPTIONAL) return CS_OK; /* stays zeroed */
        return cs__avro_fail(d, "null for a required field");
    }
    if (kind == CS_KIND_UNION) return read_union(d, w, f, r, slot, base);
    if (!fits(w, f, kind))
        return cs__avro_unresolvable(d, "the writer's %s%s%s cannot be read as %s", cs__avro_type_name(w->type),
                                     w->name ? " " : "", w->name ? w->name : "", cs__codec_kind_expectation(kind));
    if (++d->depth > CS__AVRO_MAX_DEPTH) return cs__avro_fail(d, "payload nested deeper than 64 levels");
    switch (kind) {
    case CS_KIND_BOOL: {
        const unsigned char *b;
        if ((err = cs__avro_read_raw(d, 1, &b))) break;
        if (*b > 1) {
            err = cs__avro_fail(d, "boolean byte is %u, not 0 or 1", *b);
            break;
        }
        *(bool *)slot = *b == 1;
        break;
    }
    case CS_KIND_I64:
        err = f->logical == CS_LOGICAL_DECIMAL ? read_decimal(d, w, f, slot) : read_number(d, w, f, kind, slot);
        break;
    case CS_KIND_I32:
    case CS_KIND_U32:
    case CS_KIND_U64:
    case CS_KIND_F32:
    case CS_KIND_F64: err = read_number(d, w, f, kind, slot); break;
    case CS_KIND_STRING:
    case CS_KIND_CHARS:
    case CS_KIND_BYTES: err = read_string(d, f, kind, slot); break;
    case CS_KIND_FIXED: {
        const unsigned char *b;
        if (!(err = cs__avro_read_raw(d, f->size, &b))) memcpy(slot, b, f->size);
        break;
    }
    case CS_KIND_ENUM: err = read_enum(d, w, f, slot); break;
    case CS_KIND_OBJECT: err = read_record(d, w, nested, reader_record(r, nested), slot); break;
    case CS_KIND_ARRAY:
    case CS_KIND_MAP: err = read_blocks(d, w, f, reader_items(r), base); break;
    case CS_KIND_UNION: err = CS_OK; break; /* handled above */
    }
    d->depth--;
    return err;
}

cs_err cs_avro_decode(const cs_type *type, const cs_avro_schema *writer, const cs_avro_schema *reader, const void *data,
                      size_t len, void *out) {
    if (type == NULL || writer == NULL || out == NULL)
        return cs__fail(CS_ERR_ARG, "cs_avro_decode: type, writer and out must not be NULL");
    cs_err err = cs__codec_type_check_cached(type);
    if (err) return err;
    memset(out, 0, type->size);
    if (data == NULL) return cs__fail(CS_ERR_DECODE, "payload is null (tombstone)");
    if (reader != NULL && reader->root->type != AV_RECORD)
        return cs__fail(CS_ERR_ARG, "cs_avro_decode: the reader schema is a %s, not a record",
                        cs__avro_type_name(reader->root->type));
    decoder d = {.p = data, .end = (const unsigned char *)data + len};
    err = read_record(&d, writer->root, type, reader ? reader->root : NULL, out);
    if (!err && d.p != d.end)
        err = cs__fail(CS_ERR_DECODE, "payload has %zu bytes after the record", (size_t)(d.end - d.p));
    if (err) {
        cs_value_free(type, out);
        memset(out, 0, type->size);
    }
    return err;
}
