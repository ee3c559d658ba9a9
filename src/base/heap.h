/* heap.h — a binary min-heap of (key, value) pairs, smallest key first: the
 * delay heap's data structure (delay.c keys deliveries by the monotonic time
 * they are due), kept apart from what it holds, like libuv's heap-inl.h
 * beside its timers.
 *
 * The heap stores the key beside the value, so it never reads the value (a
 * pointer it does not own) and a comparison costs no call. Pairs with equal
 * keys come out in an unspecified order.
 *
 * Owner: whoever embeds the cs_heap; a zeroed cs_heap is empty and valid.
 * Threads: none of its own; the owner's lock guards it (delay.c: delay_lock).
 * Never calls out. Unit test: tests/unit/test_heap.c.
 *
 * Owns: declares cs_heap; its owner frees the array with cs__heap_free (the
 * values stay the owner's). Locks: none of its own. */
#ifndef CS_CORE_HEAP_H
#define CS_CORE_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cs_heap_item {
    int64_t key;
    void *value; /* borrowed: the heap never reads or frees it */
} cs_heap_item;

typedef struct cs_heap {
    cs_heap_item *items; /* items[0] has the smallest key; i's children are 2i+1 and 2i+2 */
    size_t n, cap;
} cs_heap;

/* Adds value under key, in O(log n). Returns false when the storage cannot
 * grow (out of memory); the heap is then unchanged. */
bool cs__heap_push(cs_heap *h, int64_t key, void *value);

/* Removes the pair with the smallest key, in O(log n), and returns its value;
 * *key (if not NULL) gets its key. The heap must not be empty. */
void *cs__heap_pop(cs_heap *h, int64_t *key);

/* Frees the heap's storage (not the values) and leaves it empty. */
void cs__heap_free(cs_heap *h);

/* Pairs held. */
static inline size_t cs__heap_count(const cs_heap *h) { return h->n; }

/* The pair with the smallest key, without removing it; NULL when empty.
 * Valid until the next push or pop. */
static inline const cs_heap_item *cs__heap_min(const cs_heap *h) { return h->n ? &h->items[0] : NULL; }

#endif
