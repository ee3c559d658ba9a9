/* json_schema.c — the JSON Schema (draft 2020-12) of a field table.
 *
 * Describes what cs_json_encode writes: nested types inline, integers with
 * the bounds of their C type, arrays with maxItems. A type met again inside
 * itself (a tree: an array of its own type) becomes {"$ref": "#"} for the root
 * type and {"$ref": "#/$defs/<name>"} otherwise, with that type written once
 * under "$defs". Only keywords that mean the same in draft-07 are used, so the
 * text also serves AsyncAPI's default schema format (apart from $schema and
 * $defs).
 *
 * Threads: pure function, any thread. Owns: the generator and, until it is
 * handed over, the text. Locks: none. */
#include "codec/codec_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "base/error.h"

#define MAX_DEFS 64

typedef struct schema_writer {
    yajl_gen gen;
    const cs_type *root;
    const cs_type *stack[CS_JSON_MAX_DEPTH]; /* types being written, outermost first */
    size_t depth;
    const cs_type *defs[MAX_DEFS]; /* types referenced through $defs */
    size_t n_defs;
    cs_err err;
} schema_writer;

static void put_string(schema_writer *w, const char *s) {
    yajl_gen_string(w->gen, (const unsigned char *)s, strlen(s));
}

static void put_number(schema_writer *w, const char *digits) { yajl_gen_number(w->gen, digits, strlen(digits)); }

static void put_key_string(schema_writer *w, const char *key, const char *value) {
    put_string(w, key);
    put_string(w, value);
}

static bool on_stack(const schema_writer *w, const cs_type *t) {
    for (size_t i = 0; i < w->depth; i++)
        if (w->stack[i] == t) return true;
    return false;
}

/* Adds t to $defs (once); fails if another type there has the same name. */
static void add_def(schema_writer *w, const cs_type *t) {
    for (size_t i = 0; i < w->n_defs; i++) {
        if (w->defs[i] == t) return;
        if (strcmp(w->defs[i]->name, t->name) == 0 && !w->err)
            w->err = cs__fail(CS_ERR_ARG, "cs_json_schema: two recursive types are named \"%s\"", t->name);
    }
    if (w->n_defs == MAX_DEFS) {
        if (!w->err) w->err = cs__fail(CS_ERR_ARG, "cs_json_schema: more than %d recursive types", MAX_DEFS);
        return;
    }
    w->defs[w->n_defs++] = t;
}

/* "#/$defs/<name>" with the name escaped for a JSON pointer in a URI fragment. */
static void put_def_ref(schema_writer *w, const char *name) {
    char ref[512] = "#/$defs/";
    size_t len = strlen(ref);
    for (const unsigned char *c = (const unsigned char *)name; *c && len + 4 < sizeof ref; c++) {
        if (*c == '~') len += (size_t)snprintf(ref + len, sizeof ref - len, "~0");
        else if (*c == '/') len += (size_t)snprintf(ref + len, sizeof ref - len, "~1");
        else if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
                 *c == '-' || *c == '.')
            ref[len++] = (char)*c;
        else len += (size_t)snprintf(ref + len, sizeof ref - len, "%%%02X", *c);
    }
    ref[len] = '\0';
    put_key_string(w, "$ref", ref);
}

static void write_members(schema_writer *w, const cs_type *t);

/* A nested type: inline, or a reference if it is being written already. */
static void write_object(schema_writer *w, const cs_type *t) {
    yajl_gen_map_open(w->gen);
    if (t == w->root) {
        put_key_string(w, "$ref", "#");
    } else if (on_stack(w, t)) {
        add_def(w, t);
        put_def_ref(w, t->name);
    } else {
        write_members(w, t);
    }
    yajl_gen_map_close(w->gen);
}

static void write_integer(schema_writer *w, const char *min, const char *max) {
    put_key_string(w, "type", "integer");
    put_string(w, "minimum");
    put_number(w, min);
    put_string(w, "maximum");
    put_number(w, max);
}

/* The schema of one value of `kind`; f is its field (for items: the array field). */
static void write_kind(schema_writer *w, cs_kind kind, const cs_field *f) {
    if (kind == CS_KIND_OBJECT) {
        write_object(w, f->type);
        return;
    }
    yajl_gen_map_open(w->gen);
    switch (kind) {
    case CS_KIND_BOOL: put_key_string(w, "type", "boolean"); break;
    case CS_KIND_I32: write_integer(w, "-2147483648", "2147483647"); break;
    case CS_KIND_U32: write_integer(w, "0", "4294967295"); break;
    case CS_KIND_I64: write_integer(w, "-9223372036854775808", "9223372036854775807"); break;
    case CS_KIND_U64: write_integer(w, "0", "18446744073709551615"); break;
    case CS_KIND_F64: put_key_string(w, "type", "number"); break;
    case CS_KIND_STRING:
    case CS_KIND_CHARS: put_key_string(w, "type", "string"); break;
    case CS_KIND_ARRAY: {
        char max[24];
        snprintf(max, sizeof max, "%zu", cs__codec_array_max(f));
        put_key_string(w, "type", "array");
        put_string(w, "items");
        write_kind(w, f->elem, f);
        put_string(w, "maxItems");
        put_number(w, max);
        break;
    }
    case CS_KIND_OBJECT: break;
    default: break; /* Avro-only kinds: refused by cs__codec_json_check_cached */
    }
    yajl_gen_map_close(w->gen);
}

/* title, type, properties and required of t, inside an open map. */
static void write_members(schema_writer *w, const cs_type *t) {
    if (w->depth == CS_JSON_MAX_DEPTH) {
        if (!w->err)
            w->err = cs__fail(CS_ERR_ARG, "cs_json_schema: types nested deeper than %d levels", CS_JSON_MAX_DEPTH);
        return;
    }
    w->stack[w->depth++] = t;
    put_key_string(w, "title", t->name);
    put_key_string(w, "type", "object");
    put_string(w, "properties");
    yajl_gen_map_open(w->gen);
    for (size_t i = 0; i < t->n_fields; i++) {
        put_string(w, t->fields[i].name);
        write_kind(w, t->fields[i].kind, &t->fields[i]);
    }
    yajl_gen_map_close(w->gen);

    bool any_required = false;
    for (size_t i = 0; i < t->n_fields; i++) {
        if (t->fields[i].presence != CS_REQUIRED) continue;
        if (!any_required) {
            put_string(w, "required");
            yajl_gen_array_open(w->gen);
            any_required = true;
        }
        put_string(w, t->fields[i].name);
    }
    if (any_required) yajl_gen_array_close(w->gen);
    w->depth--;
}

cs_err cs_json_schema(const cs_type *type, char **schema_out) {
    if (schema_out) *schema_out = NULL;
    if (type == NULL || schema_out == NULL)
        return cs__fail(CS_ERR_ARG, "cs_json_schema: type and schema_out must not be NULL");
    cs_err err = cs__codec_json_check_cached(type);
    if (err) return err;

    schema_writer w = {.root = type};
    w.gen = yajl_gen_alloc(NULL);
    if (w.gen == NULL) return cs__fail(CS_ERR_NOMEM, "out of memory writing the schema of %s", type->name);

    yajl_gen_map_open(w.gen);
    put_key_string(&w, "$schema", "https://json-schema.org/draft/2020-12/schema");
    write_members(&w, type);
    if (w.n_defs > 0) {
        put_string(&w, "$defs");
        yajl_gen_map_open(w.gen);
        for (size_t i = 0; i < w.n_defs && !w.err; i++) { /* writing a def may add more */
            put_string(&w, w.defs[i]->name);
            yajl_gen_map_open(w.gen);
            write_members(&w, w.defs[i]);
            yajl_gen_map_close(w.gen);
        }
        yajl_gen_map_close(w.gen);
    }
    yajl_gen_status status = yajl_gen_map_close(w.gen);
    if (!w.err && status != yajl_gen_status_ok)
        w.err = cs__fail(CS_ERR_ARG, "cs_json_schema: JSON generator failed (yajl_gen status %d)", (int)status);

    const unsigned char *text;
    size_t len;
    if (!w.err && yajl_gen_get_buf(w.gen, &text, &len) == yajl_gen_status_ok) {
        *schema_out = malloc(len + 1);
        if (*schema_out == NULL) {
            w.err = cs__fail(CS_ERR_NOMEM, "out of memory writing the schema of %s", type->name);
        } else {
            memcpy(*schema_out, text, len);
            (*schema_out)[len] = '\0';
        }
    }
    yajl_gen_free(w.gen);
    return w.err;
}
