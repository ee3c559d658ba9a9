/* store.c — the consumer's record store (store.h).
 *
 * Owns: the chunks, the budget's counts and the spare chunks. Locks:
 * free_lock (level 6, a leaf) and wake_mx (level 6; the wake hook takes
 * only the consumer's wake_lock under it), src/lock_order.h. Threads: the
 * fetch thread appends; any thread releases a record. */
#define _POSIX_C_SOURCE 200809L
#include "core/store.h"

#include <stdlib.h>
#include <string.h>

/* Chunks of this size are recycled; a record larger than that gets its own. */
#define CHUNK_DEFAULT ((size_t)64 * 1024)
#define CHUNK_MIN ((size_t)16 * 1024)

struct cs_chunk {
    cs_chunk *next; /* free list */
    cs_store *store;
    _Atomic uint32_t live; /* records not yet released, +1 while it is a partition's open chunk */
    size_t used, cap;
    _Alignas(8) unsigned char data[];
};

struct cs_store {
    size_t budget, resume_mark, chunk_size, max_free;
    _Atomic size_t used, peak, records;
    _Atomic int refs;          /* the owner, and every chunk */
    pthread_mutex_t free_lock; /* a leaf: one push or pop */
    cs_chunk *free;
    size_t n_free;
    /* Taken only to call the wake hook or to clear it (cs__store_release),
     * so that no release calls into a consumer that is gone. The hook takes
     * the consumer's wake_lock under it. */
    pthread_mutex_t wake_mx;
    void (*wake)(void *);
    void *wake_arg;
};

cs_store *cs__store_new(size_t budget, size_t resume_mark, void (*wake)(void *), void *wake_arg) {
    cs_store *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->budget = budget;
    s->chunk_size = budget / 64 < CHUNK_DEFAULT ? budget / 64 : CHUNK_DEFAULT;
    if (s->chunk_size < CHUNK_MIN) s->chunk_size = CHUNK_MIN;
    size_t top = budget > s->chunk_size ? budget - s->chunk_size : 0;
    s->resume_mark = resume_mark < top ? resume_mark : top;
    /* Every chunk of the usual size is recycled: the store never holds more
     * than its budget anyway, and chunks freed to malloc only to be
     * allocated again mixed with the deliveries' allocations and
     * fragmented the heap (docs/benchmarks.md: peak RSS). */
    s->max_free = budget / s->chunk_size;
    atomic_init(&s->refs, 1);
    pthread_mutex_init(&s->free_lock, NULL);
    pthread_mutex_init(&s->wake_mx, NULL);
    s->wake = wake;
    s->wake_arg = wake_arg;
    return s;
}

static void store_unref(cs_store *s) {
    if (atomic_fetch_sub(&s->refs, 1) != 1) return;
    for (cs_chunk *c = s->free, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    pthread_mutex_destroy(&s->free_lock);
    pthread_mutex_destroy(&s->wake_mx);
    free(s);
}

void cs__store_release(cs_store *s) {
    if (!s) return;
    pthread_mutex_lock(&s->wake_mx);
    s->wake = NULL;
    pthread_mutex_unlock(&s->wake_mx);
    store_unref(s);
}

size_t cs__store_used(const cs_store *s) { return atomic_load_explicit(&s->used, memory_order_relaxed); }
size_t cs__store_budget(const cs_store *s) { return s->budget; }
size_t cs__store_resume_mark(const cs_store *s) { return s->resume_mark; }
size_t cs__store_chunk_size(const cs_store *s) { return s->chunk_size; }
size_t cs__store_peak(const cs_store *s) { return atomic_load_explicit(&s->peak, memory_order_relaxed); }
size_t cs__store_records(const cs_store *s) { return atomic_load_explicit(&s->records, memory_order_relaxed); }

static cs_chunk *chunk_get(cs_store *s, size_t need) {
    cs_chunk *c = NULL;
    size_t cap = need > s->chunk_size ? need : s->chunk_size;
    if (cap == s->chunk_size) {
        pthread_mutex_lock(&s->free_lock);
        if ((c = s->free)) {
            s->free = c->next;
            s->n_free--;
        }
        pthread_mutex_unlock(&s->free_lock);
    }
    if (!c && !(c = malloc(sizeof *c + cap))) return NULL;
    c->next = NULL;
    c->store = s;
    c->used = 0;
    c->cap = cap;
    atomic_init(&c->live, 1); /* the partition's hold while it is open */
    atomic_fetch_add(&s->refs, 1);
    /* Only the fetch thread adds: the peak needs no compare-and-swap loop. */
    size_t used = atomic_fetch_add(&s->used, cap) + cap;
    if (used > atomic_load_explicit(&s->peak, memory_order_relaxed))
        atomic_store_explicit(&s->peak, used, memory_order_relaxed);
    return c;
}

static void chunk_unref(cs_chunk *c) {
    if (atomic_fetch_sub(&c->live, 1) != 1) return;
    cs_store *s = c->store;
    size_t cap = c->cap;
    size_t before = atomic_fetch_sub(&s->used, cap);
    bool keep = false;
    if (cap == s->chunk_size) {
        pthread_mutex_lock(&s->free_lock);
        if (s->n_free < s->max_free) {
            c->next = s->free;
            s->free = c;
            s->n_free++;
            keep = true;
        }
        pthread_mutex_unlock(&s->free_lock);
    }
    if (!keep) free(c);
    if (before > s->resume_mark && before - cap <= s->resume_mark) {
        pthread_mutex_lock(&s->wake_mx);
        if (s->wake) s->wake(s->wake_arg);
        pthread_mutex_unlock(&s->wake_mx);
    }
    store_unref(s);
}

void cs__store_close_chunk(cs_chunk **open) {
    if (!*open) return;
    chunk_unref(*open);
    *open = NULL;
}

cs_stored *cs__store_append(cs_store *s, cs_chunk **open, int64_t offset, int64_t timestamp, const void *key,
                            size_t key_len, const void *value, size_t value_len, const cs_stored_header *h,
                            size_t n_headers) {
    size_t headers_len = 0;
    for (size_t i = 0; i < n_headers; i++) headers_len += 8 + strlen(h[i].name) + 1 + (h[i].value ? h[i].len : 0);
    size_t size = cs__stored_size_of(key_len, value_len, headers_len);
    cs_chunk *c = *open;
    if (!c || c->cap - c->used < size) {
        cs_chunk *fresh = chunk_get(s, size);
        if (!fresh) return NULL;
        cs__store_close_chunk(open);
        *open = c = fresh;
    }
    cs_stored *r = (cs_stored *)(void *)(c->data + c->used);
    c->used += size;
    atomic_fetch_add_explicit(&c->live, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->records, 1, memory_order_relaxed);
    *r = (cs_stored){.chunk = c,
                     .offset = offset,
                     .timestamp = timestamp,
                     .key_len = (uint32_t)key_len,
                     .value_len = (uint32_t)value_len,
                     .n_headers = (uint32_t)n_headers,
                     .headers_len = (uint32_t)headers_len,
                     .has_key = key != NULL,
                     .has_value = value != NULL};
    unsigned char *p = (unsigned char *)(r + 1);
    if (key_len) memcpy(p, key, key_len);
    p += key_len;
    if (value_len) memcpy(p, value, value_len);
    p += value_len;
    for (size_t i = 0; i < n_headers; i++) {
        uint32_t nl = (uint32_t)strlen(h[i].name) + 1, vl = h[i].value ? (uint32_t)h[i].len : UINT32_MAX;
        memcpy(p, &nl, 4);
        memcpy(p + 4, &vl, 4);
        memcpy(p + 8, h[i].name, nl);
        p += 8 + nl;
        if (h[i].value && h[i].len) memcpy(p, h[i].value, h[i].len);
        if (h[i].value) p += h[i].len;
    }
    return r;
}

void cs__stored_charge(cs_stored *r, _Atomic size_t *counter) {
    r->charged = counter;
    atomic_fetch_add_explicit(counter, cs__stored_size(r), memory_order_relaxed);
}

void cs__stored_release(cs_stored *r) {
    if (r->charged) atomic_fetch_sub_explicit(r->charged, cs__stored_size(r), memory_order_relaxed);
    cs_chunk *c = r->chunk;
    atomic_fetch_sub_explicit(&c->store->records, 1, memory_order_relaxed);
    chunk_unref(c);
}

static void stored_release(void *msg) { cs__stored_release(msg); }
static size_t stored_header_count(void *msg) { return ((cs_stored *)msg)->n_headers; }

static int stored_header_at(void *msg, size_t idx, const char **name, const void **value, size_t *len) {
    const cs_stored *r = msg;
    if (idx >= r->n_headers) return -1;
    const unsigned char *p = (const unsigned char *)(r + 1) + r->key_len + r->value_len;
    for (size_t i = 0;; i++) {
        uint32_t nl, vl;
        memcpy(&nl, p, 4);
        memcpy(&vl, p + 4, 4);
        if (i == idx) {
            *name = (const char *)(p + 8);
            *value = vl == UINT32_MAX ? NULL : p + 8 + nl;
            *len = vl == UINT32_MAX ? 0 : vl;
            return 0;
        }
        p += 8 + nl + (vl == UINT32_MAX ? 0 : vl);
    }
}

const cs_source_ops cs__stored_ops = {stored_release, stored_header_count, stored_header_at};
