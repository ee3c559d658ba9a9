/* json_encode.c — a struct to compact JSON through yajl_gen.
 *
 * Owns: for one call, the output buffer (handed to the caller on success,
 * freed on failure) and yajl_gen's memory (a stack arena). Keys come in table
 * order; yajl_gen escapes strings (quote, backslash, control characters).
 * Integers and doubles are formatted here and written with yajl_gen_number:
 * uint64 beyond INT64_MAX and exact short doubles need it.
 *
 * Threads: pure function, any thread. Must never: write anything the decoder
 * would refuse (invalid UTF-8, NaN, infinity, more items than max_items,
 * nesting deeper than CS_JSON_MAX_DEPTH), or leave a half-written buffer
 * behind on failure. Locks: none. */
#include "codec/codec_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "base/error.h"

#define PATH_SHOWN 256

typedef struct output {
    char *data;
    size_t len;
    size_t cap;
    bool out_of_memory;
} output;

/* One step of the path to the value being written: a field name or an item index. */
typedef struct step {
    const char *name; /* NULL: an array item */
    size_t index;
} step;

typedef struct encoder {
    yajl_gen gen;
    output out;
    unsigned depth;
    size_t n_steps;
    step steps[2 * CS_JSON_MAX_DEPTH + 2]; /* a field and an item per level at most */
} encoder;

/* yajl_gen's print callback: appends to the output buffer. */
static void write_out(void *ctx, const char *s, size_t n) {
    output *o = ctx;
    if (o->out_of_memory) return;
    if (n + 1 > o->cap - o->len) {
        size_t cap = o->cap ? o->cap : 256;
        while (n + 1 > cap - o->len) {
            if (cap > SIZE_MAX / 2) {
                o->out_of_memory = true;
                return;
            }
            cap *= 2;
        }
        char *grown = realloc(o->data, cap);
        if (grown == NULL) {
            o->out_of_memory = true;
            return;
        }
        o->data = grown;
        o->cap = cap;
    }
    memcpy(o->data + o->len, s, n);
    o->len += n;
}

/* ---- the field path, for messages (rendered only when something fails) ---- */

static void enter_field(encoder *e, const char *name) { e->steps[e->n_steps++] = (step){.name = name}; }

static void enter_item(encoder *e, size_t index) { e->steps[e->n_steps++] = (step){.index = index}; }

static void leave(encoder *e) { e->n_steps--; }

static void render_path(const encoder *e, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < e->n_steps && len < cap; i++) {
        const step *s = &e->steps[i];
        int n = s->name ? snprintf(buf + len, cap - len, "%s%s", len ? "." : "", s->name)
                        : snprintf(buf + len, cap - len, "[%zu]", s->index);
        len += n > 0 ? (size_t)n : 0;
    }
}

static cs_err fail(encoder *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static cs_err fail(encoder *e, const char *fmt, ...) {
    char why[512], path[PATH_SHOWN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (e->n_steps == 0) return cs__fail(CS_ERR_ENCODE, "value: %s", why);
    render_path(e, path, sizeof path);
    return cs__fail(CS_ERR_ENCODE, "field \"%s\": %s", path, why);
}

static cs_err generated(encoder *e, yajl_gen_status status) {
    if (status == yajl_gen_status_ok) return CS_OK;
    return fail(e, "JSON generator failed (yajl_gen status %d)", (int)status);
}

/* ---- values ---- */

static cs_err encode_object(encoder *e, const cs_type *type, const unsigned char *base);

static cs_err encode_string(encoder *e, const char *s, size_t len) {
    if (!cs__codec_utf8_valid((const unsigned char *)s, len)) return fail(e, "string is not valid UTF-8");
    return generated(e, yajl_gen_string(e->gen, (const unsigned char *)s, len));
}

static cs_err encode_array(encoder *e, const cs_field *f, const unsigned char *base);

/* One value of `kind` stored at p; f is its field (for an item: the array field). */
static cs_err encode_value(encoder *e, cs_kind kind, const cs_field *f, const unsigned char *p) {
    char number[32];
    size_t n;
    switch (kind) {
    case CS_KIND_BOOL: return generated(e, yajl_gen_bool(e->gen, *(const bool *)p));
    case CS_KIND_I32:
    case CS_KIND_U32:
    case CS_KIND_I64:
    case CS_KIND_U64:
        n = cs__codec_format_int(p, kind, number);
        return generated(e, yajl_gen_number(e->gen, number, n));
    case CS_KIND_F64: {
        double v = *(const double *)p;
        if (!isfinite(v)) return fail(e, "%s cannot be written in JSON", isnan(v) ? "NaN" : "infinity");
        n = cs__codec_format_double(v, number);
        return generated(e, yajl_gen_number(e->gen, number, n));
    }
    case CS_KIND_STRING: {
        const char *s;
        memcpy(&s, p, sizeof s);
        if (s == NULL) return fail(e, "NULL string in an array");
        return encode_string(e, s, strlen(s));
    }
    case CS_KIND_CHARS: {
        size_t len = strnlen((const char *)p, f->size);
        if (len == f->size) return fail(e, "char array is not NUL-terminated");
        return encode_string(e, (const char *)p, len);
    }
    case CS_KIND_OBJECT: return encode_object(e, f->type, p);
    case CS_KIND_ARRAY: break; /* written by encode_object, which knows where the count is */
    default: break;            /* Avro-only kinds: refused by cs__codec_json_check_cached */
    }
    return fail(e, "cannot write kind %d here", (int)kind);
}

static cs_err enter(encoder *e) {
    if (e->depth >= CS_JSON_MAX_DEPTH) return fail(e, "nesting deeper than %d levels", CS_JSON_MAX_DEPTH);
    e->depth++;
    return CS_OK;
}

/* The array field f of the struct at base. */
static cs_err encode_array(encoder *e, const cs_field *f, const unsigned char *base) {
    const unsigned char *items;
    size_t count = *(const size_t *)(base + f->count_offset);
    memcpy(&items, base + f->offset, sizeof items);
    if (count > 0 && items == NULL) return fail(e, "%zu items but a NULL pointer", count);
    if (count > cs__codec_array_max(f))
        return fail(e, "%zu items, more than the maximum %zu", count, cs__codec_array_max(f));
    cs_err err = enter(e);
    if (err) return err;
    err = generated(e, yajl_gen_array_open(e->gen));
    for (size_t i = 0; i < count && !err; i++) {
        enter_item(e, i);
        err = encode_value(e, f->elem, f, items + i * f->size);
        leave(e);
    }
    if (!err) err = generated(e, yajl_gen_array_close(e->gen));
    e->depth--;
    return err;
}

static cs_err encode_object(encoder *e, const cs_type *type, const unsigned char *base) {
    cs_err err = enter(e);
    if (err) return err;
    err = generated(e, yajl_gen_map_open(e->gen));
    for (size_t i = 0; i < type->n_fields && !err; i++) {
        const cs_field *f = &type->fields[i];
        enter_field(e, f->name);
        if (f->kind == CS_KIND_STRING) {
            const char *s;
            memcpy(&s, base + f->offset, sizeof s);
            if (s == NULL) {
                if (f->presence == CS_REQUIRED) err = fail(e, "missing (required)");
                leave(e);
                continue; /* an optional string that is absent */
            }
        }
        err = generated(e, yajl_gen_string(e->gen, (const unsigned char *)f->name, strlen(f->name)));
        if (!err && f->kind == CS_KIND_ARRAY) err = encode_array(e, f, base);
        else if (!err) err = encode_value(e, f->kind, f, base + f->offset);
        leave(e);
    }
    if (!err) err = generated(e, yajl_gen_map_close(e->gen));
    e->depth--;
    return err;
}

/* ---- the call ---- */

cs_err cs_json_encode(const cs_type *type, const void *value, char **json_out, size_t *len_out) {
    if (json_out) *json_out = NULL;
    if (len_out) *len_out = 0;
    if (type == NULL || value == NULL || json_out == NULL)
        return cs__fail(CS_ERR_ARG, "cs_json_encode: type, value and json_out must not be NULL");
    cs_err err = cs__codec_json_check_cached(type);
    if (err) return err;

    encoder e;
    e.out = (output){0};
    e.depth = 0;
    e.n_steps = 0;
    _Alignas(max_align_t) unsigned char arena_memory[CS__CODEC_ARENA_BYTES];
    cs__codec_arena arena;
    yajl_alloc_funcs funcs;
    cs__codec_arena_init(&arena, arena_memory, sizeof arena_memory, &funcs);
    e.gen = yajl_gen_alloc(&funcs);
    if (e.gen == NULL) return cs__fail(CS_ERR_NOMEM, "out of memory starting the JSON generator");
    yajl_gen_config(e.gen, yajl_gen_print_callback, write_out, &e.out);

    err = encode_object(&e, type, value);
    yajl_gen_free(e.gen);
    if (!err && e.out.out_of_memory) err = cs__fail(CS_ERR_NOMEM, "out of memory encoding a %s", type->name);
    if (err) {
        free(e.out.data);
        return err;
    }
    e.out.data[e.out.len] = '\0'; /* write_out always leaves room for it */
    *json_out = e.out.data;
    if (len_out) *len_out = e.out.len;
    return CS_OK;
}
