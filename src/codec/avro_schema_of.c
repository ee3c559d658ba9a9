/* avro_schema_of.c — the Avro schema a field table stands for (what
 * cs_avro_encode writes when a codec has no schema of its own, and what a
 * registry would be given), and the growing buffer the Avro files write into.
 *
 * Owns: for one call, the text being written and the list of names already
 * defined (a named type is defined once, then referenced by name).
 * Locks: none. Threads: pure function, any thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "codec/avro_internal.h"
#include "codec/codec_internal.h"

#define BUF_MIN 256
#define NAMES_MAX 256 /* named types one table may define */
#define NAME_LEN_MAX 256

void cs__avro_buf_put(cs__avro_buf *b, const void *p, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : BUF_MIN;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (grown == NULL) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    if (n > 0) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0'; /* text stays a C string */
}

void cs__avro_buf_puts(cs__avro_buf *b, const char *s) { cs__avro_buf_put(b, s, strlen(s)); }

void cs__avro_buf_put_json_string(cs__avro_buf *b, const char *s) {
    cs__avro_buf_put(b, "\"", 1);
    for (; *s; s++) {
        char esc[8];
        if (*s == '"' || *s == '\\') {
            esc[0] = '\\';
            esc[1] = *s;
            cs__avro_buf_put(b, esc, 2);
        } else if ((unsigned char)*s < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", (unsigned)(unsigned char)*s);
            cs__avro_buf_puts(b, esc);
        } else {
            cs__avro_buf_put(b, s, 1);
        }
    }
    cs__avro_buf_put(b, "\"", 1);
}

typedef struct writer {
    cs__avro_buf out;
    char names[NAMES_MAX][NAME_LEN_MAX];
    size_t n_names;
    bool too_many;
} writer;

/* True the first time: the caller defines the type; after, it references it. */
static bool first_time(writer *w, const char *name) {
    for (size_t i = 0; i < w->n_names; i++)
        if (strcmp(w->names[i], name) == 0) return false;
    if (w->n_names == NAMES_MAX) {
        w->too_many = true;
        return false;
    }
    snprintf(w->names[w->n_names++], NAME_LEN_MAX, "%s", name);
    return true;
}

static void write_record(writer *w, const cs_type *t);

static void write_logical(writer *w, const char *base, const char *logical) {
    cs__avro_buf_puts(&w->out, "{\"type\":\"");
    cs__avro_buf_puts(&w->out, base);
    cs__avro_buf_puts(&w->out, "\",\"logicalType\":\"");
    cs__avro_buf_puts(&w->out, logical);
    cs__avro_buf_puts(&w->out, "\"}");
}

/* The schema of one value of kind (an element's, a branch's or a field's). */
static void write_kind(writer *w, const cs_type *t, const cs_field *f, cs_kind kind, const cs_type *nested) {
    char name[NAME_LEN_MAX], text[64];
    switch (kind) {
    case CS_KIND_BOOL: cs__avro_buf_puts(&w->out, "\"boolean\""); return;
    case CS_KIND_I32:
        if (f->logical == CS_LOGICAL_DATE) write_logical(w, "int", "date");
        else cs__avro_buf_puts(&w->out, "\"int\"");
        return;
    case CS_KIND_I64:
        if (f->logical == CS_LOGICAL_TIMESTAMP_MILLIS) write_logical(w, "long", "timestamp-millis");
        else if (f->logical == CS_LOGICAL_TIMESTAMP_MICROS) write_logical(w, "long", "timestamp-micros");
        else if (f->logical == CS_LOGICAL_DECIMAL) {
            snprintf(text, sizeof text, ",\"precision\":%d,\"scale\":%d}", f->precision, f->scale);
            cs__avro_buf_puts(&w->out, "{\"type\":\"bytes\",\"logicalType\":\"decimal\"");
            cs__avro_buf_puts(&w->out, text);
        } else cs__avro_buf_puts(&w->out, "\"long\"");
        return;
    case CS_KIND_U32:
    case CS_KIND_U64: cs__avro_buf_puts(&w->out, "\"long\""); return;
    case CS_KIND_F32: cs__avro_buf_puts(&w->out, "\"float\""); return;
    case CS_KIND_F64: cs__avro_buf_puts(&w->out, "\"double\""); return;
    case CS_KIND_STRING:
    case CS_KIND_CHARS:
        if (f->logical == CS_LOGICAL_UUID) write_logical(w, "string", "uuid");
        else cs__avro_buf_puts(&w->out, "\"string\"");
        return;
    case CS_KIND_BYTES: cs__avro_buf_puts(&w->out, "\"bytes\""); return;
    case CS_KIND_FIXED:
    case CS_KIND_ENUM:
        snprintf(name, sizeof name, "%s_%s", t->name, f->name);
        if (!first_time(w, name)) {
            cs__avro_buf_put_json_string(&w->out, name);
            return;
        }
        cs__avro_buf_puts(&w->out,
                          kind == CS_KIND_FIXED ? "{\"type\":\"fixed\",\"name\":" : "{\"type\":\"enum\",\"name\":");
        cs__avro_buf_put_json_string(&w->out, name);
        if (kind == CS_KIND_FIXED) {
            snprintf(text, sizeof text, ",\"size\":%zu}", f->size);
            cs__avro_buf_puts(&w->out, text);
            return;
        }
        cs__avro_buf_puts(&w->out, ",\"symbols\":[");
        for (size_t i = 0; i < f->n_symbols; i++) {
            if (i > 0) cs__avro_buf_puts(&w->out, ",");
            cs__avro_buf_put_json_string(&w->out, f->symbols[i]);
        }
        cs__avro_buf_puts(&w->out, "]}");
        return;
    case CS_KIND_OBJECT: write_record(w, nested); return;
    case CS_KIND_ARRAY:
        cs__avro_buf_puts(&w->out, "{\"type\":\"array\",\"items\":");
        write_kind(w, t, f, f->elem, f->type);
        cs__avro_buf_puts(&w->out, "}");
        return;
    case CS_KIND_MAP:
        cs__avro_buf_puts(&w->out, "{\"type\":\"map\",\"values\":");
        write_kind(w, f->type, &f->type->fields[1], f->type->fields[1].kind, f->type->fields[1].type);
        cs__avro_buf_puts(&w->out, "}");
        return;
    case CS_KIND_UNION:
        cs__avro_buf_puts(&w->out, f->presence == CS_OPTIONAL ? "[\"null\"" : "[");
        for (size_t i = 0; i < nested->n_fields; i++) {
            const cs_field *b = &nested->fields[i];
            if (i > 0 || f->presence == CS_OPTIONAL) cs__avro_buf_puts(&w->out, ",");
            write_kind(w, nested, b, b->kind, b->type);
        }
        cs__avro_buf_puts(&w->out, "]");
        return;
    }
}

static void write_record(writer *w, const cs_type *t) {
    if (!first_time(w, t->name)) {
        cs__avro_buf_put_json_string(&w->out, t->name);
        return;
    }
    cs__avro_buf_puts(&w->out, "{\"type\":\"record\",\"name\":");
    cs__avro_buf_put_json_string(&w->out, t->name);
    cs__avro_buf_puts(&w->out, ",\"fields\":[");
    for (size_t i = 0; i < t->n_fields; i++) {
        const cs_field *f = &t->fields[i];
        /* Optional: ["null", T] with default null (a union: its own null branch). */
        bool nullable = f->presence == CS_OPTIONAL && f->kind != CS_KIND_UNION;
        cs__avro_buf_puts(&w->out, i ? ",{\"name\":" : "{\"name\":");
        cs__avro_buf_put_json_string(&w->out, f->name);
        cs__avro_buf_puts(&w->out, nullable ? ",\"type\":[\"null\"," : ",\"type\":");
        write_kind(w, t, f, f->kind, f->type);
        bool has_null = nullable || (f->kind == CS_KIND_UNION && f->presence == CS_OPTIONAL);
        cs__avro_buf_puts(&w->out, nullable ? "]" : "");
        cs__avro_buf_puts(&w->out, has_null ? ",\"default\":null}" : "}");
    }
    cs__avro_buf_puts(&w->out, "]}");
}

cs_err cs_avro_schema_of(const cs_type *type, char **json_out) {
    if (json_out != NULL) *json_out = NULL;
    if (type == NULL || json_out == NULL)
        return cs__fail(CS_ERR_ARG, "cs_avro_schema_of: type and json_out must not be NULL");
    cs_err err = cs__codec_type_check_cached(type);
    if (err) return err;
    writer *w = calloc(1, sizeof *w);
    if (w == NULL) return cs__fail(CS_ERR_NOMEM, "out of memory writing the Avro schema of %s", type->name);
    write_record(w, type);
    if (w->out.failed) err = cs__fail(CS_ERR_NOMEM, "out of memory writing the Avro schema of %s", type->name);
    else if (w->too_many)
        err = cs__fail(CS_ERR_ARG, "type \"%s\" defines more than %d named types", type->name, NAMES_MAX);
    if (err) free(w->out.data);
    else *json_out = w->out.data;
    free(w);
    return err;
}
