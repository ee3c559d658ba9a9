/* store.h — the consumer's record store: copies of fetched records in chunks,
 * under one byte budget for the whole consumer (docs/fetch-path-design.md,
 * 3.3). Kafka-agnostic: the fetch thread appends records; a record is
 * released exactly once, from any thread (its delivery settled, or it was
 * dropped before it was handed out), and a chunk goes back when its last
 * record is released. `used` counts whole chunks, the bytes really held.
 *
 * Owner: the consumer holds one reference, every chunk holding records one
 * more, so that deliveries settled after the consumer closed still find it;
 * the last reference frees it. Lock: free_lock is a leaf (lock order: level
 * 6, src/lock_order.h), held only to push or pop a spare chunk; the
 * wake hook runs after it is released.
 *
 * Owns: declares cs_store and cs_stored; store.c owns the chunks and the
 * spares. Locks: free_lock (level 6, a leaf) and wake_mx (level 6; only
 * the consumer's wake_lock is taken under it), both taken in store.c; the
 * counts are atomics. Threads: the fetch thread appends, closes and
 * charges; any thread releases a record or reads the counts. */
#ifndef CS_CORE_STORE_H
#define CS_CORE_STORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/source.h"

typedef struct cs_store cs_store;
typedef struct cs_chunk cs_chunk;

/* One record in a chunk; key, value and headers follow it. */
typedef struct cs_stored {
    cs_chunk *chunk;
    struct cs_stored *next; /* the partition's backlog (fetch thread) */
    int64_t offset, timestamp;
    uint32_t key_len, value_len, n_headers, headers_len;
    bool has_key, has_value;
    bool old_log; /* taken before its topic was reported gone (fetch_take.c) */
    /* Set when the record is handed out: a counter of bytes handed out and
     * not yet released (its partition's), which the release takes it off. */
    _Atomic size_t *charged;
} cs_stored;

/* A header of a record being stored (name a C string; value NULL: a null value). */
typedef struct cs_stored_header {
    const char *name;
    const void *value;
    size_t len;
} cs_stored_header;

/* budget: bytes; resume_mark: taking stops at used >= budget and resumes at
 * used <= resume_mark; wake(arg) is called (any thread, with the
 * store's wake_mx held, so that cs__store_release can clear it: the hook
 * takes only the consumer's wake_lock) when a release brings `used` down
 * across the resume mark. */
cs_store *cs__store_new(size_t budget, size_t resume_mark, void (*wake)(void *), void *wake_arg);
/* Drops the owner's reference (chunks still holding records keep it alive). */
void cs__store_release(cs_store *s);

size_t cs__store_used(const cs_store *s);
size_t cs__store_budget(const cs_store *s);
size_t cs__store_resume_mark(const cs_store *s);
size_t cs__store_peak(const cs_store *s);
size_t cs__store_chunk_size(const cs_store *s);
size_t cs__store_records(const cs_store *s);

/* Fetch thread: copies a record at the end of *open (the partition's open
 * chunk; a new one is started, and the old one's hold dropped, when it has no
 * room). NULL when out of memory. */
cs_stored *cs__store_append(cs_store *s, cs_chunk **open, int64_t offset, int64_t timestamp, const void *key,
                            size_t key_len, const void *value, size_t value_len, const cs_stored_header *h,
                            size_t n_headers);
/* Fetch thread: the partition is done with its open chunk (revoke, close). */
void cs__store_close_chunk(cs_chunk **open);
/* Fetch thread, at hand-out: adds the record's size to *counter until it is
 * released (the counter must outlive the record). */
void cs__stored_charge(cs_stored *r, _Atomic size_t *counter);
/* Any thread, exactly once per record. */
void cs__stored_release(cs_stored *r);
/* Inline: each runs several times per record, from fetch_*.c and the core. */
static inline const void *cs__stored_key(const cs_stored *r) { return r->has_key ? (const void *)(r + 1) : NULL; }
static inline const void *cs__stored_value(const cs_stored *r) {
    return r->has_value ? (const void *)((const unsigned char *)(r + 1) + r->key_len) : NULL;
}
/* Bytes a record of these lengths takes in its chunk: the header and the
 * bytes, rounded up to 8 so that the next record's header is aligned. */
static inline size_t cs__stored_size_of(size_t key_len, size_t value_len, size_t headers_len) {
    return (sizeof(cs_stored) + key_len + value_len + headers_len + 7u) & ~(size_t)7u;
}
/* Bytes the record takes in its chunk. */
static inline size_t cs__stored_size(const cs_stored *r) {
    return cs__stored_size_of(r->key_len, r->value_len, r->headers_len);
}

/* The records' cs_source_ops (msg: a cs_stored). */
extern const cs_source_ops cs__stored_ops;

#endif
