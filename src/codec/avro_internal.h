/* avro_internal.h — what the Avro files share: cstream's model of a parsed
 * Avro schema (the nodes the decoder and encoder walk), the binary cursor,
 * and the per-call path used in error messages. Nothing here is public.
 *
 * Why a model of our own next to avro-c: avro-c 1.11 validates a schema but
 * keeps neither field defaults nor logical types, and both are needed to
 * resolve a writer schema against a reader (see avro_schema.c).
 *
 * Owns: declares cs_avro_schema, av_node and cs__avro_buf. avro_schema.c makes
 * and frees a schema with its nodes (cs_avro_schema_new, _destroy); a
 * cs__avro_buf belongs to the one call that writes it. Locks: none. Threads: a
 * schema is immutable once made and read by any thread at once. */
#ifndef CS_AVRO_INTERNAL_H
#define CS_AVRO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_tree.h>

#include "cstream/avro.h"

/* Deepest nesting of schemas and of values in a payload. */
#define CS__AVRO_MAX_DEPTH 64

typedef enum av_type {
    AV_NULL,
    AV_BOOLEAN,
    AV_INT,
    AV_LONG,
    AV_FLOAT,
    AV_DOUBLE,
    AV_BYTES,
    AV_STRING,
    AV_RECORD,
    AV_ENUM,
    AV_ARRAY,
    AV_MAP,
    AV_FIXED,
    AV_UNION,
} av_type;

typedef struct av_node av_node;

typedef struct av_field {
    const char *name;
    av_node *type;
    yajl_val def; /* the default as JSON, NULL when the field has none */
} av_field;

struct av_node {
    av_type type;
    cs_logical logical;
    int precision, scale; /* decimal */
    const char *name;     /* record, enum, fixed: the full name */
    char *space;          /* record, enum, fixed: its namespace, NULL for none */
    size_t size;          /* fixed */
    const char **symbols; /* enum */
    size_t n_symbols;
    av_field *fields; /* record */
    size_t n_fields;
    av_node *items;     /* array items, map values */
    av_node **branches; /* union */
    size_t n_branches;
    av_node *next_alloc; /* every node of a schema, for freeing */
};

struct cs_avro_schema {
    char *json;    /* the text as given */
    yajl_val tree; /* its parse: names, symbols and defaults point into it */
    av_node *root;
    av_node *nodes; /* allocation list */
};

/* The short name of a full name ("a.b.Payout" -> "Payout"). */
const char *cs__avro_short_name(const char *full);
/* The type name for messages: "record Payout", "long", ... */
const char *cs__avro_type_name(av_type t);
/* The record node of a nullable union ["null", R] or R itself; else NULL. */
const av_node *cs__avro_unwrap_nullable(const av_node *n);

/* ---- a growing output buffer (avro_encode.c, avro_schema_of.c) ---- */

typedef struct cs__avro_buf {
    char *data;
    size_t len, cap;
    bool failed; /* out of memory */
} cs__avro_buf;

void cs__avro_buf_put(cs__avro_buf *b, const void *p, size_t n);
void cs__avro_buf_puts(cs__avro_buf *b, const char *s);
/* A JSON string literal of s, escaped. */
void cs__avro_buf_put_json_string(cs__avro_buf *b, const char *s);

#endif
