/* schema_cache.h — the schemas a registry has answered, by id, bounded.
 *
 * A cs__schema is immutable once made and reference-counted: a lookup hands
 * out a reference that stays valid after the cache evicts the entry, so a
 * worker decoding with it is never left with a freed schema.
 *
 * Owns: declares cs__schema (its last reference frees it) and
 * cs__schema_cache, which the registry embeds; cs__schema_cache_destroy drops
 * the cache's references. Locks: cs__schema_cache.lock (a leaf) around the
 * hash and the recency list; refs is atomic. Threads: any thread. */
#ifndef CS_SCHEMA_CACHE_H
#define CS_SCHEMA_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cstream/error.h"

/* The schema languages of the Confluent API ("schemaType"; absent = AVRO). */
typedef enum cs__schema_type {
    CS__SCHEMA_AVRO = 0,
    CS__SCHEMA_PROTOBUF,
    CS__SCHEMA_JSON,
} cs__schema_type;

typedef struct cs__schema {
    int32_t id;
    cs__schema_type type;
    size_t len;
    char *text; /* the schema as the registry holds it, NUL-terminated */
    /* Owners: the cache (while the entry is in it) and each lookup's caller. */
    _Atomic unsigned refs;
    /* Cache links, touched only under the cache's lock. */
    struct cs__schema *hnext;         /* hash chain */
    struct cs__schema *newer, *older; /* recency list */
} cs__schema;

typedef struct cs__schema_cache {
    /* Guards everything below; a leaf (src/lock_order.h): nothing is called
     * under it but the hash and the list, never an HTTP request. */
    pthread_mutex_t lock;
    cs__schema **buckets;
    size_t mask; /* bucket count - 1 (a power of two) */
    cs__schema *newest, *oldest;
    size_t count, capacity;
    uint64_t evictions;
} cs__schema_cache;

/* A new schema with one reference (the caller's); NULL when out of memory.
 * `text` of `len` bytes is copied. */
cs__schema *cs__schema_new(int32_t id, cs__schema_type type, const char *text, size_t len);
/* Takes another reference; returns `s`. */
const cs__schema *cs__schema_ref(const cs__schema *s);
/* Drops a reference; the last one frees it. NULL is a no-op. Any thread. */
void cs__schema_release(const cs__schema *s);

/* A cache of at most `capacity` schemas (> 0). CS_ERR_ARG, CS_ERR_NOMEM. */
cs_err cs__schema_cache_init(cs__schema_cache *c, size_t capacity);
/* Releases the cache's references; schemas still held by callers live on. */
void cs__schema_cache_destroy(cs__schema_cache *c);

/* The schema of `id` with a reference for the caller (release it), or NULL.
 * A hit makes it the most recently used. Any thread. */
const cs__schema *cs__schema_cache_get(cs__schema_cache *c, int32_t id);

/* Adds `s` (the caller's reference passes to the cache) and returns the
 * cached schema of its id with a new reference for the caller: `s` itself, or
 * the one already there (then `s` is released: the first answer wins, ids
 * are immutable in a registry). When full, the least recently used schema is
 * evicted first. Any thread. */
const cs__schema *cs__schema_cache_put(cs__schema_cache *c, cs__schema *s);

/* Number of schemas cached and evicted so far (under the lock). */
size_t cs__schema_cache_count(cs__schema_cache *c);
uint64_t cs__schema_cache_evictions(cs__schema_cache *c);

#endif
