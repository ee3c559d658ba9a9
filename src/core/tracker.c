/*
 * tracker.c - per-partition commit tracker.
 *
 * Owns: a ring of delivery entries {offset, settled} for one partition, the
 * sequence-number window [base_seq, next_seq) of the entries still kept, the
 * count of open (unsettled) entries and the last delivered offset.
 *
 * Threads: one at a time - the caller holds the partition's lock around every
 * call. Locks: none of its own; there is no lock, no atomic and no I/O here.
 *
 * Must never: block, abort or exit (out of memory is reported as -1), reuse a
 * sequence number within the life of the tracker (so a stale seq from before a
 * reset is rejected instead of settling someone else's record), or let the
 * position go backwards between resets.
 *
 * Invariant kept after every public call: the ring is either empty or its
 * oldest entry (seq == base_seq) is open. So the lowest open offset is always
 * at the tail of the ring. Entries above it may already be settled; they are
 * dropped once everything below them is settled.
 */
#include "core/tracker.h"

#include <assert.h>
#include <stdlib.h>

#define CS_TRACKER_INITIAL_CAPACITY 64u /* power of two */

typedef struct cs_tracker_entry {
    int64_t offset;
    uint32_t attempts; /* handler runs so far (the caller's count) */
    bool settled;
} cs_tracker_entry;

struct cs_tracker {
    cs_tracker_entry *ring; /* capacity entries, indexed by seq & (capacity - 1) */
    size_t capacity;        /* power of two */
    uint64_t base_seq;      /* seq of the oldest entry still kept */
    uint64_t next_seq;      /* seq the next delivery gets */
    size_t open;            /* delivered and not yet settled */
    size_t counted;         /* open entries with attempts > 0: what cs_tracker_open_attempts reports */
    int64_t last_delivered; /* -1 when nothing was delivered since the reset */
    bool out_of_memory;     /* the ring could not grow: refuse every delivery until the reset */
};

static size_t ring_size(const cs_tracker *t) { return (size_t)(t->next_seq - t->base_seq); }

static cs_tracker_entry *entry_for_seq(const cs_tracker *t, uint64_t seq) {
    return &t->ring[seq & (uint64_t)(t->capacity - 1)];
}

static bool seq_is_in_ring(const cs_tracker *t, uint64_t seq) { return seq >= t->base_seq && seq < t->next_seq; }

/* Doubles the ring, moving every kept entry to its slot under the new mask.
 * Returns -1 (ring untouched) on out of memory or size overflow. */
static int grow_the_ring(cs_tracker *t) {
    if (t->capacity > SIZE_MAX / 2 / sizeof(cs_tracker_entry)) return -1;
    size_t new_capacity = t->capacity * 2;
    cs_tracker_entry *new_ring = malloc(new_capacity * sizeof *new_ring);
    if (new_ring == NULL) return -1;
    for (uint64_t seq = t->base_seq; seq != t->next_seq; seq++)
        new_ring[seq & (uint64_t)(new_capacity - 1)] = *entry_for_seq(t, seq);
    free(t->ring);
    t->ring = new_ring;
    t->capacity = new_capacity;
    return 0;
}

/* Drops settled entries from the tail so the oldest kept entry is open. */
static void drop_settled_entries_from_the_tail(cs_tracker *t) {
    while (t->base_seq != t->next_seq && entry_for_seq(t, t->base_seq)->settled) t->base_seq++;
    assert(ring_size(t) >= t->open);
}

cs_tracker *cs_tracker_new(void) {
    cs_tracker *t = malloc(sizeof *t);
    if (t == NULL) return NULL;
    t->capacity = CS_TRACKER_INITIAL_CAPACITY;
    t->ring = malloc(t->capacity * sizeof *t->ring);
    if (t->ring == NULL) {
        free(t);
        return NULL;
    }
    t->base_seq = 0;
    t->next_seq = 0;
    t->open = 0;
    t->counted = 0;
    t->last_delivered = -1;
    t->out_of_memory = false;
    return t;
}

void cs_tracker_destroy(cs_tracker *t) {
    if (t == NULL) return;
    free(t->ring);
    free(t);
}

void cs_tracker_reset(cs_tracker *t) {
    /* Keep counting: seqs issued before the reset fall below base_seq and are
     * rejected from now on. */
    t->base_seq = t->next_seq;
    t->open = 0;
    t->counted = 0;
    t->last_delivered = -1;
    t->out_of_memory = false;
}

int cs_tracker_delivered(cs_tracker *t, int64_t offset, uint64_t *seq) {
    /* INT64_MAX is refused so that last delivered + 1 cannot overflow. */
    if (offset < 0 || offset == INT64_MAX || offset <= t->last_delivered) return -1;
    /* Once an offset could not be recorded, later ones must not be either:
     * settling them would move the position past the unrecorded one. */
    if (t->out_of_memory) return -2;
    if (ring_size(t) == t->capacity && grow_the_ring(t) != 0) {
        t->out_of_memory = true;
        return -2;
    }
    uint64_t new_seq = t->next_seq;
    cs_tracker_entry *e = entry_for_seq(t, new_seq);
    e->offset = offset;
    e->attempts = 0;
    e->settled = false;
    t->next_seq = new_seq + 1;
    t->open++;
    t->last_delivered = offset;
    *seq = new_seq;
    return 0;
}

int cs_tracker_settle(cs_tracker *t, uint64_t seq) {
    if (!seq_is_in_ring(t, seq)) return -1;
    cs_tracker_entry *e = entry_for_seq(t, seq);
    if (e->settled) return -1;
    assert(t->open > 0);
    e->settled = true;
    t->open--;
    if (e->attempts > 0) t->counted--;
    drop_settled_entries_from_the_tail(t);
    return 0;
}

int64_t cs_tracker_lowest_open(const cs_tracker *t) {
    if (t->base_seq == t->next_seq) return -1;
    const cs_tracker_entry *oldest = entry_for_seq(t, t->base_seq);
    assert(!oldest->settled);
    return oldest->offset;
}

int64_t cs_tracker_position(const cs_tracker *t) {
    if (t->last_delivered < 0) return -1;
    int64_t lowest = cs_tracker_lowest_open(t);
    return lowest >= 0 ? lowest : t->last_delivered + 1;
}

int64_t cs_tracker_reread_from(const cs_tracker *t, int64_t to) {
    int64_t pos = cs_tracker_position(t);
    return pos >= 0 && pos < to ? pos : to;
}

size_t cs_tracker_open_count(const cs_tracker *t) { return t->open; }

size_t cs_tracker_span(const cs_tracker *t) { return (size_t)(t->next_seq - t->base_seq); }

int cs_tracker_set_attempts(cs_tracker *t, uint64_t seq, uint32_t attempts) {
    if (!seq_is_in_ring(t, seq)) return -1;
    cs_tracker_entry *e = entry_for_seq(t, seq);
    if (!e->settled && attempts > 0 && e->attempts == 0) t->counted++;
    else if (!e->settled && attempts == 0 && e->attempts > 0) t->counted--;
    e->attempts = attempts;
    return 0;
}

size_t cs_tracker_open_attempts(const cs_tracker *t, int64_t *offsets, uint32_t *attempts, size_t max) {
    size_t n = 0;
    /* Stops at the last counted entry: most open entries are queued, not yet
     * run, and this runs at every commit tick under the partition lock. */
    for (uint64_t seq = t->base_seq; seq != t->next_seq && n < max && n < t->counted; seq++) {
        const cs_tracker_entry *e = entry_for_seq(t, seq);
        if (e->settled || e->attempts == 0) continue;
        offsets[n] = e->offset;
        attempts[n] = e->attempts;
        n++;
    }
    return n;
}

void cs_tracker_each(const cs_tracker *t, void (*fn)(void *arg, int64_t offset, bool settled), void *arg) {
    for (uint64_t seq = t->base_seq; seq != t->next_seq; seq++) {
        const cs_tracker_entry *e = entry_for_seq(t, seq);
        fn(arg, e->offset, e->settled);
    }
}
