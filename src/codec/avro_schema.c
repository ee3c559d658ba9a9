/* avro_schema.c — an Avro schema from its JSON text: the Apache Avro C library
 * checks it, then this file builds cstream's model of it (avro_internal.h),
 * which keeps what avro-c drops and resolution needs: field defaults and
 * logical types.
 *
 * Owns: a cs_avro_schema: the text, its yajl tree (defaults and names point
 * into it), and the nodes. Immutable once made.
 *
 * Threads: making and destroying, the caller's thread; using, any thread.
 * Must never: accept a schema avro-c refuses, or recurse deeper than
 * CS__AVRO_MAX_DEPTH. Locks: none. */
#include "codec/avro_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <avro.h>

#include "base/error.h"

#define NAMES_MAX 1024 /* named types one schema may define */
#define FULL_NAME_MAX 512

typedef struct parser {
    cs_avro_schema *s;
    av_node *named[NAMES_MAX];
    size_t n_named;
    cs_err err;
} parser;

const char *cs__avro_short_name(const char *full) {
    const char *dot = strrchr(full, '.');
    return dot ? dot + 1 : full;
}

const char *cs__avro_type_name(av_type t) {
    static const char *const names[] = {"null",   "boolean", "int",  "long",  "float", "double", "bytes",
                                        "string", "record",  "enum", "array", "map",   "fixed",  "union"};
    return (size_t)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

const av_node *cs__avro_unwrap_nullable(const av_node *n) {
    if (n == NULL) return NULL;
    if (n->type != AV_UNION) return n;
    const av_node *found = NULL;
    for (size_t i = 0; i < n->n_branches; i++) {
        if (n->branches[i]->type == AV_NULL) continue;
        if (found != NULL) return NULL; /* more than one non-null branch */
        found = n->branches[i];
    }
    return found;
}

static av_node *node_new(parser *p, av_type type) {
    av_node *n = calloc(1, sizeof *n);
    if (n == NULL) {
        p->err = cs__fail(CS_ERR_NOMEM, "out of memory parsing an Avro schema");
        return NULL;
    }
    n->type = type;
    n->next_alloc = p->s->nodes;
    p->s->nodes = n;
    return n;
}

static av_node *fail(parser *p, const char *what, const char *why) {
    p->err = cs__fail(CS_ERR_ARG, "Avro schema: %s: %s", what, why);
    return NULL;
}

static bool primitive(const char *name, av_type *out) {
    static const struct {
        const char *name;
        av_type type;
    } prims[] = {{"null", AV_NULL},   {"boolean", AV_BOOLEAN}, {"int", AV_INT},     {"long", AV_LONG},
                 {"float", AV_FLOAT}, {"double", AV_DOUBLE},   {"bytes", AV_BYTES}, {"string", AV_STRING}};
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
        if (strcmp(name, prims[i].name) == 0) {
            *out = prims[i].type;
            return true;
        }
    return false;
}

static const char *full_name(char *buf, const char *name, const char *ns) {
    if (strchr(name, '.') != NULL || ns == NULL || ns[0] == '\0') return name;
    snprintf(buf, FULL_NAME_MAX, "%s.%s", ns, name);
    return buf;
}

static av_node *lookup(parser *p, const char *name, const char *ns) {
    char buf[FULL_NAME_MAX];
    const char *full = full_name(buf, name, ns);
    for (size_t i = 0; i < p->n_named; i++)
        if (strcmp(p->named[i]->name, full) == 0 || strcmp(p->named[i]->name, name) == 0) return p->named[i];
    return NULL;
}

/* Gives a record, enum or fixed its full name and registers it. */
static bool name_node(parser *p, av_node *n, yajl_val obj, const char **ns) {
    const char *path[] = {"name", NULL}, *ns_path[] = {"namespace", NULL};
    yajl_val name = yajl_tree_get(obj, path, yajl_t_string);
    yajl_val space = yajl_tree_get(obj, ns_path, yajl_t_string);
    const char *short_name = name ? YAJL_GET_STRING(name) : NULL;
    if (short_name == NULL) return fail(p, "a named type", "has no name"), false;
    if (space != NULL) *ns = YAJL_GET_STRING(space);
    char buf[FULL_NAME_MAX];
    const char *full = full_name(buf, short_name, *ns);
    n->name = strdup(full);
    const char *dot = n->name ? strrchr(n->name, '.') : NULL;
    /* What this type holds is in its namespace (a dotted name sets it). */
    n->space = dot ? strndup(n->name, (size_t)(dot - n->name)) : NULL;
    if (n->name == NULL || (dot != NULL && n->space == NULL))
        return p->err = cs__fail(CS_ERR_NOMEM, "out of memory parsing an Avro schema"), false;
    *ns = n->space;
    if (p->n_named == NAMES_MAX) return fail(p, full, "too many named types"), false;
    p->named[p->n_named++] = n;
    return true;
}

static void set_logical(av_node *n, yajl_val obj) {
    const char *lp[] = {"logicalType", NULL}, *pp[] = {"precision", NULL}, *sp[] = {"scale", NULL};
    yajl_val lt = yajl_tree_get(obj, lp, yajl_t_string);
    if (lt == NULL) return;
    const char *l = YAJL_GET_STRING(lt);
    /* A logical type that does not fit its type is ignored, as the spec says. */
    if (strcmp(l, "decimal") == 0 && (n->type == AV_BYTES || n->type == AV_FIXED)) {
        yajl_val prec = yajl_tree_get(obj, pp, yajl_t_number), scale = yajl_tree_get(obj, sp, yajl_t_number);
        if (prec == NULL || !YAJL_IS_INTEGER(prec) || YAJL_GET_INTEGER(prec) < 1) return;
        long long s = scale != NULL && YAJL_IS_INTEGER(scale) ? YAJL_GET_INTEGER(scale) : 0;
        if (s < 0 || s > YAJL_GET_INTEGER(prec) || YAJL_GET_INTEGER(prec) > INT32_MAX) return;
        n->logical = CS_LOGICAL_DECIMAL;
        n->precision = (int)YAJL_GET_INTEGER(prec);
        n->scale = (int)s;
    } else if (strcmp(l, "date") == 0 && n->type == AV_INT) {
        n->logical = CS_LOGICAL_DATE;
    } else if (strcmp(l, "timestamp-millis") == 0 && n->type == AV_LONG) {
        n->logical = CS_LOGICAL_TIMESTAMP_MILLIS;
    } else if (strcmp(l, "timestamp-micros") == 0 && n->type == AV_LONG) {
        n->logical = CS_LOGICAL_TIMESTAMP_MICROS;
    } else if (strcmp(l, "uuid") == 0 && n->type == AV_STRING) {
        n->logical = CS_LOGICAL_UUID;
    }
}

static av_node *parse(parser *p, yajl_val v, const char *ns, unsigned depth);

static av_node *parse_record(parser *p, av_node *n, yajl_val obj, const char *ns, unsigned depth) {
    const char *fp[] = {"fields", NULL}, *np[] = {"name", NULL}, *tp[] = {"type", NULL}, *dp[] = {"default", NULL};
    yajl_val fields = yajl_tree_get(obj, fp, yajl_t_array);
    if (fields == NULL) return fail(p, n->name, "a record needs fields");
    size_t count = YAJL_GET_ARRAY(fields)->len;
    n->fields = calloc(count ? count : 1, sizeof *n->fields);
    if (n->fields == NULL) return p->err = cs__fail(CS_ERR_NOMEM, "out of memory parsing an Avro schema"), NULL;
    for (size_t i = 0; i < count; i++) {
        yajl_val fv = YAJL_GET_ARRAY(fields)->values[i];
        yajl_val name = yajl_tree_get(fv, np, yajl_t_string), type = yajl_tree_get(fv, tp, yajl_t_any);
        if (name == NULL || type == NULL) return fail(p, n->name, "a field needs a name and a type");
        av_field *f = &n->fields[n->n_fields++];
        f->name = YAJL_GET_STRING(name);
        f->def = yajl_tree_get(fv, dp, yajl_t_any);
        f->type = parse(p, type, ns, depth + 1);
        if (f->type == NULL) return NULL;
    }
    return n;
}

static av_node *parse_object(parser *p, yajl_val obj, const char *ns, unsigned depth) {
    const char *tp[] = {"type", NULL}, *sp[] = {"symbols", NULL}, *ip[] = {"items", NULL}, *vp[] = {"values", NULL},
               *zp[] = {"size", NULL};
    yajl_val type = yajl_tree_get(obj, tp, yajl_t_any);
    if (type == NULL) return fail(p, "an object", "has no \"type\"");
    if (!YAJL_IS_STRING(type)) return parse(p, type, ns, depth + 1);
    const char *t = YAJL_GET_STRING(type);
    av_type prim;
    av_node *n;
    if (primitive(t, &prim)) {
        if ((n = node_new(p, prim)) != NULL) set_logical(n, obj);
        return n;
    }
    if (strcmp(t, "record") == 0 || strcmp(t, "error") == 0) {
        if ((n = node_new(p, AV_RECORD)) == NULL || !name_node(p, n, obj, &ns)) return NULL;
        return parse_record(p, n, obj, ns, depth);
    }
    if (strcmp(t, "enum") == 0) {
        yajl_val syms = yajl_tree_get(obj, sp, yajl_t_array);
        if ((n = node_new(p, AV_ENUM)) == NULL || !name_node(p, n, obj, &ns)) return NULL;
        if (syms == NULL) return fail(p, n->name, "an enum needs symbols");
        n->symbols = calloc(YAJL_GET_ARRAY(syms)->len + 1, sizeof *n->symbols);
        if (n->symbols == NULL) return p->err = cs__fail(CS_ERR_NOMEM, "out of memory parsing an Avro schema"), NULL;
        for (size_t i = 0; i < YAJL_GET_ARRAY(syms)->len; i++) {
            yajl_val sym = YAJL_GET_ARRAY(syms)->values[i];
            if (!YAJL_IS_STRING(sym)) return fail(p, n->name, "an enum symbol is not a string");
            n->symbols[n->n_symbols++] = YAJL_GET_STRING(sym);
        }
        return n;
    }
    if (strcmp(t, "fixed") == 0) {
        yajl_val size = yajl_tree_get(obj, zp, yajl_t_number);
        if ((n = node_new(p, AV_FIXED)) == NULL || !name_node(p, n, obj, &ns)) return NULL;
        if (size == NULL || !YAJL_IS_INTEGER(size) || YAJL_GET_INTEGER(size) < 0)
            return fail(p, n->name, "a fixed needs a size");
        n->size = (size_t)YAJL_GET_INTEGER(size);
        set_logical(n, obj);
        return n;
    }
    if (strcmp(t, "array") == 0 || strcmp(t, "map") == 0) {
        bool array = t[0] == 'a';
        yajl_val inner = yajl_tree_get(obj, array ? ip : vp, yajl_t_any);
        if (inner == NULL) return fail(p, t, array ? "an array needs items" : "a map needs values");
        if ((n = node_new(p, array ? AV_ARRAY : AV_MAP)) == NULL) return NULL;
        n->items = parse(p, inner, ns, depth + 1);
        return n->items ? n : NULL;
    }
    av_node *named = lookup(p, t, ns);
    return named ? named : fail(p, t, "unknown type");
}

static av_node *parse(parser *p, yajl_val v, const char *ns, unsigned depth) {
    if (depth >= CS__AVRO_MAX_DEPTH) return fail(p, "the schema", "nested deeper than 64 levels");
    if (YAJL_IS_STRING(v)) {
        av_type prim;
        if (primitive(YAJL_GET_STRING(v), &prim)) return node_new(p, prim);
        av_node *named = lookup(p, YAJL_GET_STRING(v), ns);
        return named ? named : fail(p, YAJL_GET_STRING(v), "unknown type");
    }
    if (YAJL_IS_ARRAY(v)) {
        av_node *n = node_new(p, AV_UNION);
        if (n == NULL) return NULL;
        size_t count = YAJL_GET_ARRAY(v)->len;
        n->branches = calloc(count ? count : 1, sizeof *n->branches);
        if (n->branches == NULL) return p->err = cs__fail(CS_ERR_NOMEM, "out of memory parsing an Avro schema"), NULL;
        for (size_t i = 0; i < count; i++) {
            n->branches[i] = parse(p, YAJL_GET_ARRAY(v)->values[i], ns, depth + 1);
            if (n->branches[i] == NULL) return NULL;
            n->n_branches++;
        }
        return n;
    }
    if (YAJL_IS_OBJECT(v)) return parse_object(p, v, ns, depth);
    return fail(p, "the schema", "expected a type name, an object or a union");
}

void cs_avro_schema_destroy(cs_avro_schema *s) {
    if (s == NULL) return;
    for (av_node *n = s->nodes, *next; n != NULL; n = next) {
        next = n->next_alloc;
        if (n->type == AV_RECORD || n->type == AV_ENUM || n->type == AV_FIXED) free((char *)n->name);
        free(n->space);
        free(n->fields);
        free(n->symbols);
        free(n->branches);
        free(n);
    }
    yajl_tree_free(s->tree);
    free(s->json);
    free(s);
}

const char *cs_avro_schema_json(const cs_avro_schema *s) { return s ? s->json : NULL; }

cs_err cs_avro_schema_new(const char *json, cs_avro_schema **out) {
    if (out != NULL) *out = NULL;
    if (json == NULL || out == NULL) return cs__fail(CS_ERR_ARG, "cs_avro_schema_new: json and out must not be NULL");

    /* avro-c is the judge of what a valid schema is. */
    avro_schema_t checked;
    if (avro_schema_from_json_length(json, strlen(json), &checked) != 0)
        return cs__fail(CS_ERR_ARG, "Avro schema is not valid: %s", avro_strerror());
    avro_schema_decref(checked);

    cs_avro_schema *s = calloc(1, sizeof *s);
    parser *p = calloc(1, sizeof *p);
    if (s == NULL || p == NULL || (s->json = strdup(json)) == NULL) {
        free(p);
        cs_avro_schema_destroy(s);
        return cs__fail(CS_ERR_NOMEM, "out of memory parsing an Avro schema");
    }
    char why[256] = "";
    s->tree = yajl_tree_parse(json, why, sizeof why);
    if (s->tree == NULL) {
        free(p);
        cs_avro_schema_destroy(s);
        return cs__fail(CS_ERR_ARG, "Avro schema is not valid JSON: %s", why[0] ? why : "out of memory");
    }
    p->s = s;
    s->root = parse(p, s->tree, NULL, 0);
    cs_err err = s->root ? CS_OK : p->err;
    free(p);
    if (err) {
        cs_avro_schema_destroy(s);
        return err;
    }
    *out = s;
    return CS_OK;
}
