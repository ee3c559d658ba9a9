/*
 * schema_cache.c — a bounded map from schema id to schema, least recently used
 * out first.
 *
 * Owns: the hash table (chained, a fixed number of buckets sized for the
 * capacity, so it never rehashes), the recency list and the cache's reference
 * on every schema in it.
 *
 * Threads: any thread (the workers that decode records, the thread that
 * registers a schema). Locks: the cache's `lock` (a leaf, src/lock_order.h),
 * taken by every call but init and destroy, held for a hash lookup and a few
 * pointer moves, never across I/O.
 *
 * Must never: free a schema a caller still holds (reference counts), grow
 * past its capacity, or block on anything but its own lock.
 */
#include "schema/schema_cache.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

/* Buckets per capacity slot: chains stay short (load factor <= 1/2) without
 * rehashing, at 16 bytes of pointers per cached schema. */
#define CS_SCHEMA_BUCKETS_PER_SLOT 2u

cs__schema *cs__schema_new(int32_t id, cs__schema_type type, const char *text, size_t len) {
    cs__schema *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->text = malloc(len + 1);
    if (!s->text) {
        free(s);
        return NULL;
    }
    if (len) memcpy(s->text, text, len);
    s->text[len] = '\0';
    s->len = len;
    s->id = id;
    s->type = type;
    atomic_init(&s->refs, 1);
    return s;
}

const cs__schema *cs__schema_ref(const cs__schema *s) {
    /* The count is the only mutable part of a schema shared between threads. */
    atomic_fetch_add_explicit(&((cs__schema *)s)->refs, 1, memory_order_relaxed);
    return s;
}

void cs__schema_release(const cs__schema *cs) {
    cs__schema *s = (cs__schema *)cs;
    if (!s) return;
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1) return;
    free(s->text);
    free(s);
}

cs_err cs__schema_cache_init(cs__schema_cache *c, size_t capacity) {
    size_t n = 1;
    memset(c, 0, sizeof *c);
    if (capacity == 0) return cs__fail(CS_ERR_ARG, "schema cache: capacity must be at least 1");
    while (n < capacity * CS_SCHEMA_BUCKETS_PER_SLOT) n <<= 1;
    c->buckets = calloc(n, sizeof *c->buckets);
    if (!c->buckets) return cs__fail(CS_ERR_NOMEM, "schema cache: no memory for %zu buckets", n);
    c->mask = n - 1;
    c->capacity = capacity;
    pthread_mutex_init(&c->lock, NULL);
    return CS_OK;
}

void cs__schema_cache_destroy(cs__schema_cache *c) {
    cs__schema *s, *next;
    if (!c->buckets) return;
    for (s = c->newest; s; s = next) {
        next = s->older;
        cs__schema_release(s);
    }
    free(c->buckets);
    pthread_mutex_destroy(&c->lock);
    memset(c, 0, sizeof *c);
}

/* Registry ids are small sequential integers: a multiplicative hash spreads
 * neighbours over the table. */
static size_t bucket_of(const cs__schema_cache *c, int32_t id) {
    return (size_t)(((uint32_t)id * 2654435761u) >> 7) & c->mask;
}

static cs__schema *find_locked(cs__schema_cache *c, int32_t id) {
    cs__schema *s;
    for (s = c->buckets[bucket_of(c, id)]; s && s->id != id; s = s->hnext) {}
    return s;
}

static void unlink_recency(cs__schema_cache *c, cs__schema *s) {
    if (s->newer) s->newer->older = s->older;
    else c->newest = s->older;
    if (s->older) s->older->newer = s->newer;
    else c->oldest = s->newer;
    s->newer = s->older = NULL;
}

static void push_newest(cs__schema_cache *c, cs__schema *s) {
    s->older = c->newest;
    s->newer = NULL;
    if (c->newest) c->newest->newer = s;
    c->newest = s;
    if (!c->oldest) c->oldest = s;
}

static void unlink_hash(cs__schema_cache *c, cs__schema *s) {
    cs__schema **p = &c->buckets[bucket_of(c, s->id)];
    while (*p != s) p = &(*p)->hnext;
    *p = s->hnext;
    s->hnext = NULL;
}

const cs__schema *cs__schema_cache_get(cs__schema_cache *c, int32_t id) {
    cs__schema *s;
    pthread_mutex_lock(&c->lock);
    s = find_locked(c, id);
    if (s) {
        if (c->newest != s) {
            unlink_recency(c, s);
            push_newest(c, s);
        }
        cs__schema_ref(s);
    }
    pthread_mutex_unlock(&c->lock);
    return s;
}

const cs__schema *cs__schema_cache_put(cs__schema_cache *c, cs__schema *s) {
    cs__schema *have, *victim = NULL;
    size_t b;
    pthread_mutex_lock(&c->lock);
    have = find_locked(c, s->id);
    if (have) {
        /* Two workers missed the same id at once: the second answer is a use. */
        if (c->newest != have) {
            unlink_recency(c, have);
            push_newest(c, have);
        }
        cs__schema_ref(have);
        pthread_mutex_unlock(&c->lock);
        cs__schema_release(s);
        return have;
    }
    if (c->count == c->capacity) {
        victim = c->oldest;
        unlink_recency(c, victim);
        unlink_hash(c, victim);
        c->count--;
        c->evictions++;
    }
    b = bucket_of(c, s->id);
    s->hnext = c->buckets[b];
    c->buckets[b] = s;
    push_newest(c, s);
    c->count++;
    cs__schema_ref(s); /* the caller's; the one it passed in is now the cache's */
    pthread_mutex_unlock(&c->lock);
    cs__schema_release(victim); /* outside the lock: it may free */
    return s;
}

size_t cs__schema_cache_count(cs__schema_cache *c) {
    size_t n;
    pthread_mutex_lock(&c->lock);
    n = c->count;
    pthread_mutex_unlock(&c->lock);
    return n;
}

uint64_t cs__schema_cache_evictions(cs__schema_cache *c) {
    uint64_t n;
    pthread_mutex_lock(&c->lock);
    n = c->evictions;
    pthread_mutex_unlock(&c->lock);
    return n;
}
