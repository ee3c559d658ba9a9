/* avro_read.h — the decoder's state and its reading of Avro binary
 * (avro_read.c): varints, lengths checked against what is left, skipping a
 * value by its writer schema, and error messages naming the field. Shared by
 * avro_decode.c (values into the struct) and avro_default.c (defaults).
 *
 * Owns: declares decoder, one decode call's cursor and field path, kept on
 * that call's stack (cs_avro_decode). Locks: none. Threads: any thread, one
 * decoder per call. */
#ifndef CS_AVRO_READ_H
#define CS_AVRO_READ_H

#include "codec/avro_internal.h"

typedef struct path_step {
    const char *name; /* a field, or NULL for an item */
    size_t index;     /* an item's index */
} path_step;

typedef struct decoder {
    const unsigned char *p, *end;
    path_step path[CS__AVRO_MAX_DEPTH * 2];
    size_t n_path;
    unsigned depth; /* values open, to refuse deep payloads without deep recursion */
} decoder;

/* The path steps: a field name, or an item. Fail (no room) past the limit. */
cs_err cs__avro_push_name(decoder *d, const char *name);
cs_err cs__avro_push_index(decoder *d, size_t index);
void cs__avro_pop(decoder *d);

/* CS_ERR_DECODE "field "path": why". */
cs_err cs__avro_fail(decoder *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* CS_ERR_DECODE "writer schema cannot be resolved: field "path": why". */
cs_err cs__avro_unresolvable(decoder *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* CS_ERR_NOMEM naming the field. */
cs_err cs__avro_no_memory(decoder *d);

cs_err cs__avro_read_long(decoder *d, int64_t *out);
cs_err cs__avro_read_int(decoder *d, int32_t *out);
/* A length (bytes, string, fixed): never more than what is left. */
cs_err cs__avro_read_len(decoder *d, size_t *out);
cs_err cs__avro_read_raw(decoder *d, size_t n, const unsigned char **out);
/* An array or map block count, negative counts' byte sizes read and ignored;
 * refuses a count that cannot fit in what is left. */
cs_err cs__avro_read_block(decoder *d, const av_node *items, size_t *count);
/* Skips one value written with schema w. */
cs_err cs__avro_skip(decoder *d, const av_node *w);

/* Applies the reader schema's default `def` (rtype is the reader field's
 * schema) to a member of kind `kind` (avro_default.c). */
cs_err cs__avro_apply_default(decoder *d, const cs_field *f, cs_kind kind, const cs_type *nested, const av_node *rtype,
                              yajl_val def, unsigned char *slot, unsigned char *base);

/* Appends a zeroed item to the array or map member f of base; NULL (message
 * set) past its max_items or out of memory. */
void *cs__avro_append(decoder *d, const cs_field *f, unsigned char *base, size_t *capacity);

#endif
