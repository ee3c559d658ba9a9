/* acked_set.c — the acked set of a partition (acked_set.h): collected from
 * the tracker at a commit, restored and walked in fetch order after an
 * assignment.
 *
 * Owns: the set's runs (cs_acked_set). Locks: none; callers hold the
 * partition's lock. Threads: the partition lock's holder. */
#include "core/acked_set.h"

#include <stdlib.h>
#include <string.h>

void cs__acked_set_clear(cs_acked_set *s) {
    free(s->runs);
    memset(s, 0, sizeof *s);
}

bool cs__acked_set_load(cs_acked_set *s, int64_t base, const uint32_t *runs, size_t n) {
    cs__acked_set_clear(s);
    if (n == 0) return true;
    s->runs = malloc(n * sizeof *runs);
    if (!s->runs) return false;
    memcpy(s->runs, runs, n * sizeof *runs);
    s->n = n;
    s->base = s->cur_start = s->end = base;
    for (size_t i = 0; i < n; i++) s->end += runs[i];
    return true;
}

bool cs__acked_set_take(cs_acked_set *s, int64_t offset) {
    while (s->cur < s->n && offset - s->cur_start >= (int64_t)s->runs[s->cur]) {
        s->cur_start += s->runs[s->cur];
        s->cur++;
    }
    return s->cur < s->n && offset >= s->cur_start && s->cur % 2 == 1;
}

bool cs__acked_set_reaches(const cs_acked_set *s, int64_t offset) { return s->n > 0 && offset < s->end; }

/* Builds runs that alternate open (even index) and settled (odd), offset
 * after offset from `next`. Once full, it stops: what it holds stays a true
 * description of the offsets before `next`. */
typedef struct builder {
    uint32_t *v;
    size_t n, max;
    int64_t next;
    bool full;
} builder;

static void put(builder *b, bool settled, uint64_t len) {
    if (b->full || len == 0) return;
    if (b->n == 0 && settled) { /* the first run is an open one, here empty */
        if (b->max < 2) {
            b->full = true;
            return;
        }
        b->v[b->n++] = 0;
    }
    if (b->n > 0 && (b->n - 1) % 2 == (settled ? 1u : 0u)) {
        if (len > UINT32_MAX - b->v[b->n - 1]) {
            b->full = true;
            return;
        }
        b->v[b->n - 1] += (uint32_t)len;
    } else {
        if (b->n == b->max || len > UINT32_MAX) {
            b->full = true;
            return;
        }
        b->v[b->n++] = (uint32_t)len;
    }
    b->next += (int64_t)len;
}

static void put_entry(void *arg, int64_t offset, bool settled) {
    builder *b = arg;
    if (offset < b->next) return;
    put(b, false, (uint64_t)(offset - b->next)); /* offsets never fetched in between: open */
    put(b, settled, 1);
}

size_t cs__acked_collect(const cs_tracker *t, const cs_acked_set *s, int64_t fetched, int64_t pos, uint32_t *runs,
                         size_t max) {
    builder b = {.v = runs, .max = max, .next = pos};
    if (pos < 0) return 0;
    cs_tracker_each(t, put_entry, &b);
    if (s && s->n) {
        int64_t from = fetched + 1 > b.next ? fetched + 1 : b.next;
        int64_t at = s->base;
        for (size_t i = 0; i < s->n && !b.full; i++) {
            int64_t end = at + (int64_t)s->runs[i];
            if (end > from) {
                int64_t start = at > from ? at : from;
                put(&b, false, (uint64_t)(start - b.next)); /* nothing said between: open */
                put(&b, i % 2 == 1, (uint64_t)(end - start));
            }
            at = end;
        }
    }
    return b.n & ~(size_t)1; /* a last open run says nothing */
}
