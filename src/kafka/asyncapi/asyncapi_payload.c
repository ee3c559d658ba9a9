/* asyncapi_payload.c — the payload schemas of the AsyncAPI document, one per
 * codec and type, under components/schemas, from the codec's schema function
 * in its schema language (cs_codec.schema_format):
 *   - JSON Schema (the JSON codec): parsed back with yajl and written as an
 *     AsyncAPI schema, AsyncAPI's default format; its $defs and "#"
 *     references are hoisted into components/schemas, so references resolve
 *     inside the document;
 *   - any other language: an AsyncAPI 3.0 Multi Format Schema Object,
 *     {"schemaFormat": ..., "schema": ...}, with an Avro schema as a JSON
 *     object and any other schema (a .proto text) as a string, which is what
 *     AsyncAPI's Avro and Protobuf schema parsers read. A .proto text gets
 *     the codec's message marked as the payload (asyncapi_proto.c).
 * The thread building the document; the codecs' schema functions are thread-safe.
 *
 * Owns: for one call, the codec's schema text and its parse (freed before it
 * returns); the nodes it adds belong to the document. Locks: none.
 * Threads: the thread building the document. */
#define _POSIX_C_SOURCE 200809L
#include "kafka/asyncapi/asyncapi_payload.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "base/error.h"
#include "kafka/asyncapi/asyncapi_proto.h"

#define COMP_VARIANTS_MAX 100 /* differing schemas of one type and codec name: "x.avro", "x.avro-2", ... */
#define PARSE_WHY_MAX 256     /* bytes of yajl's parse error kept */
#define AVRO_FORMAT_PREFIX "application/vnd.apache.avro;"
#define AVRO_JSON_FORMAT_PREFIX "application/vnd.apache.avro+json;"
#define PROTOBUF_FORMAT_PREFIX "application/vnd.google.protobuf;"

static bool starts_with(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* The name behind "#/$defs/<escaped>" (URI fragment and JSON pointer escapes undone). */
static void unescape_def(char *outbuf, size_t size, const char *esc) {
    size_t j = 0;
    for (size_t i = 0; esc[i] && j + 1 < size; i++) {
        char c = esc[i];
        if (c == '%' && esc[i + 1] && esc[i + 2]) {
            char hex[3] = {esc[i + 1], esc[i + 2], 0};
            c = (char)strtol(hex, NULL, 16);
            i += 2;
        }
        if (c == '~' && (esc[i + 1] == '0' || esc[i + 1] == '1')) {
            c = esc[i + 1] == '0' ? '~' : '/';
            i++;
        }
        outbuf[j++] = c;
    }
    outbuf[j] = '\0';
}

/* Copies parsed JSON into the tree. With root_ref (a JSON Schema), rewrites
 * references: "#" to root_ref, "#/$defs/X" to X's component; and leaves out
 * $schema and $defs (the caller hoists $defs). Without, copies as it is. */
static aa_node *from_yajl(aa_doc *d, yajl_val v, const char *root_ref) {
    if (YAJL_IS_OBJECT(v)) {
        aa_node *n = cs__aa_new(d, AA_OBJ, NULL);
        for (size_t i = 0; n && i < v->u.object.len; i++) {
            const char *k = v->u.object.keys[i];
            yajl_val m = v->u.object.values[i];
            if (root_ref && (!strcmp(k, "$schema") || !strcmp(k, "$defs"))) continue;
            if (root_ref && !strcmp(k, "$ref") && YAJL_IS_STRING(m)) {
                const char *ref = YAJL_GET_STRING(m);
                if (!strcmp(ref, "#")) {
                    cs__aa_str(d, n, k, root_ref);
                    continue;
                }
                if (!strncmp(ref, "#/$defs/", 8)) {
                    char name[256], comp[256];
                    unescape_def(name, sizeof name, ref + 8);
                    cs__aa_component_name(comp, sizeof comp, name);
                    cs__aa_strf(d, n, k, "#/components/schemas/%s", comp);
                    continue;
                }
            }
            cs__aa_add(d, n, k, from_yajl(d, m, root_ref));
        }
        return n;
    }
    if (YAJL_IS_ARRAY(v)) {
        aa_node *n = cs__aa_new(d, AA_ARR, NULL);
        for (size_t i = 0; n && i < v->u.array.len; i++)
            cs__aa_add(d, n, NULL, from_yajl(d, v->u.array.values[i], root_ref));
        return n;
    }
    if (YAJL_IS_STRING(v)) return cs__aa_new(d, AA_STR, YAJL_GET_STRING(v));
    if (YAJL_IS_NUMBER(v)) return cs__aa_new(d, AA_NUM, YAJL_GET_NUMBER(v));
    if (YAJL_IS_TRUE(v)) return cs__aa_new(d, AA_TRUE, NULL);
    if (YAJL_IS_FALSE(v)) return cs__aa_new(d, AA_FALSE, NULL);
    return cs__aa_new(d, AA_NULL, NULL);
}

static yajl_val parse_json(const char *text, const char *format, const cs_type *type) {
    char why[PARSE_WHY_MAX];
    yajl_val root = yajl_tree_parse(text, why, sizeof why);
    if (!root) cs__fail(CS_ERR_ARG, "AsyncAPI: the %s schema of %s is not JSON: %s", format, type->name, why);
    return root;
}

/* A JSON Schema: the type's component and its $defs' components, AsyncAPI schemas. */
static cs_err add_json_schema(aa_doc *d, aa_node *schemas, const char *text, const cs_type *type, const char *comp) {
    yajl_val root = parse_json(text, "JSON", type);
    if (!root) return CS_ERR_ARG;
    char root_ref[300];
    snprintf(root_ref, sizeof root_ref, "#/components/schemas/%s", comp);
    cs__aa_add(d, schemas, comp, from_yajl(d, root, root_ref));
    const char *defs_path[] = {"$defs", NULL};
    yajl_val defs = yajl_tree_get(root, defs_path, yajl_t_object);
    for (size_t i = 0; defs && i < defs->u.object.len; i++) {
        char def_comp[256];
        cs__aa_component_name(def_comp, sizeof def_comp, defs->u.object.keys[i]);
        if (!cs__aa_member(schemas, def_comp))
            cs__aa_add(d, schemas, def_comp, from_yajl(d, defs->u.object.values[i], root_ref));
    }
    yajl_tree_free(root);
    return CS_OK;
}

/* A schema in another language, as a detached Multi Format Schema Object. */
static aa_node *multi_format(aa_doc *d, const char *text, const char *format, const cs_type *type) {
    aa_node *n = cs__aa_new(d, AA_OBJ, NULL);
    cs__aa_str(d, n, "schemaFormat", format);
    if (starts_with(format, AVRO_FORMAT_PREFIX) || starts_with(format, AVRO_JSON_FORMAT_PREFIX)) {
        yajl_val root = parse_json(text, "Avro", type);
        if (!root) {
            cs__aa_free(n);
            return NULL;
        }
        cs__aa_add(d, n, "schema", from_yajl(d, root, NULL));
        yajl_tree_free(root);
    } else if (starts_with(format, PROTOBUF_FORMAT_PREFIX)) {
        char *marked = cs__aa_proto_mark_root(text, type->name);
        if (!marked) d->oom = true;
        cs__aa_str(d, n, "schema", marked);
        free(marked);
    } else {
        cs__aa_str(d, n, "schema", text);
    }
    return n;
}

/* Adds the multi-format schema under "<type>.<codec>", or under "-2", "-3"...
 * when another codec of the same name shows the type differently. */
static cs_err add_multi_format(aa_doc *d, aa_node *schemas, const cs_codec *codec, const char *text,
                               const cs_type *type, char *comp, size_t size) {
    aa_node *n = multi_format(d, text, codec->schema_format, type);
    if (!n) return d->oom ? cs__fail(CS_ERR_NOMEM, "AsyncAPI: out of memory") : CS_ERR_ARG;
    char base[256];
    snprintf(base, sizeof base, "%s.%s", type->name, codec->name ? codec->name : "codec");
    for (int variant = 1; variant <= COMP_VARIANTS_MAX; variant++) {
        char key[300];
        if (variant == 1) snprintf(key, sizeof key, "%s", base);
        else snprintf(key, sizeof key, "%s-%d", base, variant);
        cs__aa_component_name(comp, size, key);
        const aa_node *have = cs__aa_member(schemas, comp);
        if (have && cs__aa_equal(have, n)) { /* the same schema in another subscription */
            cs__aa_free(n);
            return CS_OK;
        }
        if (!have) {
            cs__aa_add(d, schemas, comp, n);
            return CS_OK;
        }
    }
    cs__aa_free(n);
    return cs__fail(CS_ERR_ARG, "AsyncAPI: more than %d different %s schemas of %s", COMP_VARIANTS_MAX, codec->name,
                    type->name);
}

static bool is_json_schema(const char *format) { return !format || !strcmp(format, CS_SCHEMA_FORMAT_JSON); }

cs_err cs__aa_payload_schema(aa_doc *d, aa_node *schemas, const cs_codec *codec, const cs_type *type, char *comp,
                             size_t size) {
    bool json = is_json_schema(codec->schema_format);
    cs__aa_component_name(comp, size, type->name);
    if (json && cs__aa_member(schemas, comp))
        return CS_OK; /* same type in another subscription (or a same-named one) */
    if (!codec->schema) {
        if (!json) { /* the key the message gets: not the JSON one */
            char key[300];
            snprintf(key, sizeof key, "%s.%s", type->name, codec->name ? codec->name : "codec");
            cs__aa_component_name(comp, size, key);
        }
        return CS_OK;
    }
    char *text = NULL;
    cs_err err = codec->schema(codec, type, &text);
    if (err) return err;
    if (!text) return cs__fail(CS_ERR_ARG, "AsyncAPI: the %s codec gave no schema for %s", codec->name, type->name);
    err = json ? add_json_schema(d, schemas, text, type, comp)
               : add_multi_format(d, schemas, codec, text, type, comp, size);
    free(text);
    return err;
}
