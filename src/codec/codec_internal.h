/* codec_internal.h — what the codec's files share: kind facts, the table
 * check cache, strict UTF-8, locale-proof numbers, and a yajl allocator that
 * works from a caller's stack buffer. Nothing here is public.
 *
 * Owns: declares cs__codec_arena, which lives for one yajl handle on the
 * caller's stack (arena.c); the table check cache is type.c's, per thread.
 * Locks: none. Threads: any thread. */
#ifndef CS_CODEC_INTERNAL_H
#define CS_CODEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_common.h>

#include "cstream/codec.h"

/* ---- kinds (type.c) ---- */

/* sizeof the C member a scalar or STRING kind is stored in; 0 for the others. */
size_t cs__codec_kind_size(cs_kind kind);
/* What a value of this kind looks like, for messages: "an integer", "a string", ... */
const char *cs__codec_kind_expectation(cs_kind kind);
/* The C type, for messages: "uint64", "int32", ... */
const char *cs__codec_kind_c_name(cs_kind kind);
/* Max items of an array field (max_items, or the default). */
size_t cs__codec_array_max(const cs_field *f);
/* Frees what one member owns and zeroes the member (a repeated key starts over). */
void cs__codec_member_clear(const cs_field *f, unsigned char *base);
/* cs_type_check, remembered per thread for the last few types checked. */
cs_err cs__codec_type_check_cached(const cs_type *type);
/* The same, and every kind has a JSON form (no Avro-only kinds): CS_ERR_ARG
 * naming the field otherwise. */
cs_err cs__codec_json_check_cached(const cs_type *type);

/* ---- strings (utf8.c) ---- */

/* True if s[0..len) is well-formed UTF-8 (no overlong forms, no surrogates,
 * nothing above U+10FFFF). */
bool cs__codec_utf8_valid(const unsigned char *s, size_t len);

/* ---- numbers (number.c) ---- */

typedef enum cs__codec_int_status {
    CS__CODEC_INT_OK,
    CS__CODEC_INT_NOT_INTEGER,
    CS__CODEC_INT_RANGE,
} cs__codec_int_status;

/* Reads a JSON number literal (already validated by yajl) into an integer
 * member of the given kind. */
cs__codec_int_status cs__codec_parse_int(const char *s, size_t len, cs_kind kind, void *dest);
/* Longest number literal read as a double. */
#define CS__CODEC_DOUBLE_TEXT_MAX 512
/* Reads a JSON number literal into a double. False if it overflows to
 * infinity or is longer than CS__CODEC_DOUBLE_TEXT_MAX. */
bool cs__codec_parse_double(const char *s, size_t len, double *out);
/* Writes the integer member as decimal into buf (at least 24 bytes); returns the length. */
size_t cs__codec_format_int(const void *src, cs_kind kind, char *buf);
/* Writes v (finite) with the fewest of 15, 16 or 17 significant digits that
 * read back as exactly v into buf (at least 32 bytes); returns the length. */
size_t cs__codec_format_double(double v, char *buf);

/* ---- yajl memory from a stack buffer (arena.c) ---- */

/* A bump allocator over `mem` for one yajl handle's lifetime; falls back to
 * malloc when the buffer is full. */
typedef struct cs__codec_arena {
    unsigned char *mem;
    size_t cap;
    size_t used;
    size_t last; /* offset of the most recent block, for in-place realloc */
} cs__codec_arena;

#define CS__CODEC_ARENA_BYTES 4096

void cs__codec_arena_init(cs__codec_arena *a, void *mem, size_t cap, yajl_alloc_funcs *funcs);

#endif
