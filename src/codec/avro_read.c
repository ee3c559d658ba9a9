/* avro_read.c — reading Avro binary: zig-zag varints, lengths checked
 * against the bytes left before anything is allocated, skipping values the
 * reader does not want, and messages that name the field by its path.
 *
 * Owns: nothing beyond one decoder's cursor. Threads: any (one decoder per
 * call). Must never: read past the end, trust a length or count from the
 * payload, or recurse deeper than CS__AVRO_MAX_DEPTH.
 * Locks: none. */
#include "codec/avro_read.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "codec/codec_internal.h"

#define VARINT_MAX_BYTES 10 /* 64 bits, 7 per byte */
#define PATH_SHOWN 256
#define FLOAT_BYTES 4
#define DOUBLE_BYTES 8

cs_err cs__avro_push_name(decoder *d, const char *name) {
    if (d->n_path == sizeof d->path / sizeof d->path[0]) return cs__avro_fail(d, "nested too deep");
    d->path[d->n_path++] = (path_step){name, 0};
    return CS_OK;
}

cs_err cs__avro_push_index(decoder *d, size_t index) {
    if (d->n_path == sizeof d->path / sizeof d->path[0]) return cs__avro_fail(d, "nested too deep");
    d->path[d->n_path++] = (path_step){NULL, index};
    return CS_OK;
}

void cs__avro_pop(decoder *d) { d->n_path--; }

static void render(const decoder *d, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < d->n_path && len + 1 < cap; i++) {
        int n = d->path[i].name ? snprintf(buf + len, cap - len, "%s%s", len ? "." : "", d->path[i].name)
                                : snprintf(buf + len, cap - len, "[%zu]", d->path[i].index);
        if (n < 0) break;
        len += (size_t)n < cap - len ? (size_t)n : cap - len - 1;
    }
}

static cs_err vfail(decoder *d, const char *prefix, const char *fmt, va_list ap) {
    char path[PATH_SHOWN], why[512];
    render(d, path, sizeof path);
    vsnprintf(why, sizeof why, fmt, ap);
    if (path[0] == '\0') return cs__fail(CS_ERR_DECODE, "%spayload: %s", prefix, why);
    return cs__fail(CS_ERR_DECODE, "%sfield \"%s\": %s", prefix, path, why);
}

cs_err cs__avro_fail(decoder *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cs_err err = vfail(d, "", fmt, ap);
    va_end(ap);
    return err;
}

cs_err cs__avro_unresolvable(decoder *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cs_err err = vfail(d, "writer schema cannot be resolved: ", fmt, ap);
    va_end(ap);
    return err;
}

cs_err cs__avro_no_memory(decoder *d) {
    char path[PATH_SHOWN];
    render(d, path, sizeof path);
    return cs__fail(CS_ERR_NOMEM, "out of memory decoding field \"%s\"", path);
}

static cs_err truncated(decoder *d) { return cs__avro_fail(d, "payload ends early (truncated)"); }

cs_err cs__avro_read_long(decoder *d, int64_t *out) {
    uint64_t u = 0;
    for (unsigned i = 0;; i++) {
        if (d->p == d->end) return truncated(d);
        if (i == VARINT_MAX_BYTES) return cs__avro_fail(d, "varint longer than 10 bytes");
        unsigned char b = *d->p++;
        if (i == VARINT_MAX_BYTES - 1 && b > 1) return cs__avro_fail(d, "varint overflows 64 bits");
        u |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) break;
    }
    *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1); /* zig-zag */
    return CS_OK;
}

cs_err cs__avro_read_int(decoder *d, int32_t *out) {
    int64_t v;
    cs_err err = cs__avro_read_long(d, &v);
    if (err) return err;
    if (v < INT32_MIN || v > INT32_MAX) return cs__avro_fail(d, "int %lld is out of range", (long long)v);
    *out = (int32_t)v;
    return CS_OK;
}

cs_err cs__avro_read_len(decoder *d, size_t *out) {
    int64_t v;
    cs_err err = cs__avro_read_long(d, &v);
    if (err) return err;
    if (v < 0) return cs__avro_fail(d, "negative length %lld", (long long)v);
    if ((uint64_t)v > (uint64_t)(d->end - d->p))
        return cs__avro_fail(d, "length %lld is longer than the %zu bytes left (truncated)", (long long)v,
                             (size_t)(d->end - d->p));
    *out = (size_t)v;
    return CS_OK;
}

cs_err cs__avro_read_raw(decoder *d, size_t n, const unsigned char **out) {
    if (n > (size_t)(d->end - d->p)) return truncated(d);
    *out = d->p;
    d->p += n;
    return CS_OK;
}

cs_err cs__avro_read_block(decoder *d, const av_node *items, size_t *count) {
    (void)items;
    int64_t n;
    cs_err err = cs__avro_read_long(d, &n);
    if (err) return err;
    if (n < 0) {
        int64_t bytes;
        if (n == INT64_MIN) return cs__avro_fail(d, "block count out of range");
        n = -n;
        if ((err = cs__avro_read_long(d, &bytes))) return err; /* the block's size: we read item by item */
    }
    /* Each item takes at least a byte, but for null or empty records; those
     * are held to the array limit. */
    if ((uint64_t)n > (uint64_t)(d->end - d->p) && (uint64_t)n > CS_ARRAY_MAX_ITEMS)
        return cs__avro_fail(d, "block of %lld items cannot fit in the %zu bytes left", (long long)n,
                             (size_t)(d->end - d->p));
    *count = (size_t)n;
    return CS_OK;
}

static cs_err skip_blocks(decoder *d, const av_node *w) {
    /* Items of no size (null, an empty record) cost no bytes: past the array
     * limit, more items than bytes read is a payload that only burns time. */
    const unsigned char *start = d->p;
    size_t total = 0;
    for (;;) {
        size_t count;
        cs_err err = cs__avro_read_block(d, w->items, &count);
        if (err || count == 0) return err;
        total += count;
        if (total > CS_ARRAY_MAX_ITEMS && total > (size_t)(d->end - start))
            return cs__avro_fail(d, "%zu items in %zu bytes: more items than the payload can hold", total,
                                 (size_t)(d->end - start));
        for (size_t i = 0; i < count; i++) {
            size_t len;
            const unsigned char *key;
            if (w->type == AV_MAP && ((err = cs__avro_read_len(d, &len)) || (err = cs__avro_read_raw(d, len, &key))))
                return err;
            if ((err = cs__avro_skip(d, w->items))) return err;
        }
    }
}

cs_err cs__avro_skip(decoder *d, const av_node *w) {
    const unsigned char *raw;
    size_t len;
    int64_t v;
    cs_err err = CS_OK;
    if (++d->depth > CS__AVRO_MAX_DEPTH) return cs__avro_fail(d, "payload nested deeper than 64 levels");
    switch (w->type) {
    case AV_NULL: break;
    case AV_BOOLEAN: err = cs__avro_read_raw(d, 1, &raw); break;
    case AV_INT:
    case AV_LONG:
    case AV_ENUM: err = cs__avro_read_long(d, &v); break;
    case AV_FLOAT: err = cs__avro_read_raw(d, FLOAT_BYTES, &raw); break;
    case AV_DOUBLE: err = cs__avro_read_raw(d, DOUBLE_BYTES, &raw); break;
    case AV_BYTES:
    case AV_STRING:
        if (!(err = cs__avro_read_len(d, &len))) err = cs__avro_read_raw(d, len, &raw);
        break;
    case AV_FIXED: err = cs__avro_read_raw(d, w->size, &raw); break;
    case AV_RECORD:
        for (size_t i = 0; i < w->n_fields && !err; i++) err = cs__avro_skip(d, w->fields[i].type);
        break;
    case AV_ARRAY:
    case AV_MAP: err = skip_blocks(d, w); break;
    case AV_UNION:
        if ((err = cs__avro_read_long(d, &v))) break;
        if (v < 0 || (uint64_t)v >= w->n_branches) {
            err = cs__avro_fail(d, "union branch %lld does not exist (%zu branches)", (long long)v, w->n_branches);
            break;
        }
        err = cs__avro_skip(d, w->branches[v]);
        break;
    }
    d->depth--;
    return err;
}

void *cs__avro_append(decoder *d, const cs_field *f, unsigned char *base, size_t *capacity) {
    size_t *count = (size_t *)(base + f->count_offset);
    size_t max = cs__codec_array_max(f);
    if (*count >= max) {
        cs__avro_fail(d, "more than %zu items", max);
        return NULL;
    }
    unsigned char *items;
    memcpy(&items, base + f->offset, sizeof items);
    if (*count == *capacity) {
        size_t grown_cap = *capacity ? *capacity * 2 : 4;
        if (grown_cap > max) grown_cap = max;
        unsigned char *grown = realloc(items, grown_cap * f->size);
        if (grown == NULL) {
            cs__avro_no_memory(d);
            return NULL;
        }
        items = grown;
        memcpy(base + f->offset, &items, sizeof items);
        *capacity = grown_cap;
    }
    unsigned char *item = items + *count * f->size;
    memset(item, 0, f->size);
    (*count)++;
    return item;
}
