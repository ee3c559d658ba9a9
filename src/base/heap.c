/* heap.c — the binary min-heap of heap.h: push sifts the new pair up from
 * the end, pop moves the last pair down from the root.
 *
 * Owns: the heap's array of pairs (not the values). Locks: none. Threads:
 * none of its own; the owner serialises the calls (delay.c: delay_lock). */
#include "base/heap.h"

#include <stdlib.h>

/* The first allocation's pairs: the delay heap holds the retries waiting at
 * once, usually a few; doubling from here reaches any size in log steps. */
#define HEAP_FIRST_CAP 16

bool cs__heap_push(cs_heap *h, int64_t key, void *value) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : HEAP_FIRST_CAP;
        cs_heap_item *grown = realloc(h->items, cap * sizeof *grown);
        if (!grown) return false;
        h->items = grown;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && key < h->items[(i - 1) / 2].key) {
        h->items[i] = h->items[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->items[i] = (cs_heap_item){key, value};
    return true;
}

void *cs__heap_pop(cs_heap *h, int64_t *key) {
    cs_heap_item top = h->items[0], last = h->items[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h->items[c + 1].key < h->items[c].key) c++; /* the smaller child */
        if (!(h->items[c].key < last.key)) break;
        h->items[i] = h->items[c];
        i = c;
    }
    if (n) h->items[i] = last;
    if (key) *key = top.key;
    return top.value;
}

void cs__heap_free(cs_heap *h) {
    free(h->items);
    *h = (cs_heap){0};
}
