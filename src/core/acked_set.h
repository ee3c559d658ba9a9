/* acked_set.h — the acked set of one partition: which offsets above its
 * committed position were already settled, as runs (attempts_meta.h, cs2).
 *
 * Two uses. At a commit, cs__acked_collect describes the tracker's entries
 * from the position up, followed by what a restored set still says about
 * offsets not fetched yet, so that a crash before those are fetched does not
 * forget them. After an assignment, the set restored from the group's
 * metadata answers, offset by offset in fetch order, whether a record was
 * settled by an earlier owner and is to be skipped (cs__acked_set_take).
 *
 * No lock: the partition's lock guards the set it keeps. Pure but for the
 * copy of the runs that cs__acked_set_load allocates.
 *
 * Owns: declares cs_acked_set; a partition embeds one (restored_set) and
 * frees its runs with cs__acked_set_clear. Locks: none of its own (the
 * partition's lock). Threads: the holder of the partition's lock. */
#ifndef CS_CORE_ACKED_SET_H
#define CS_CORE_ACKED_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tracker.h"

typedef struct cs_acked_set {
    int64_t base;   /* the offset runs[0] starts at: the position it was committed with */
    uint32_t *runs; /* open, settled, open, ... (n even); NULL when empty */
    size_t n;
    size_t cur;        /* cursor of cs__acked_set_take: the run that holds cur_start */
    int64_t cur_start; /* the first offset of runs[cur] */
    int64_t end;       /* base + the sum of the runs: offsets from here on are not described */
} cs_acked_set;

/* Empties the set (frees its runs). */
void cs__acked_set_clear(cs_acked_set *s);
/* Replaces the set with a copy of runs[0..n) from base. False when out of
 * memory (the set is then empty: nothing is skipped). */
bool cs__acked_set_load(cs_acked_set *s, int64_t base, const uint32_t *runs, size_t n);
/* Whether `offset` is settled in the set. Offsets must not decrease between
 * calls (fetch order); the cursor moves with them. */
bool cs__acked_set_take(cs_acked_set *s, int64_t offset);
/* Whether the set still describes offsets at or after `offset`. */
bool cs__acked_set_reaches(const cs_acked_set *s, int64_t offset);

/* The runs to commit with position `pos`: the tracker's entries from its
 * lowest open one (offsets it never saw in between count as open), then the
 * restored set for offsets after `fetched` (the highest offset fetched, -1
 * none; s may be NULL). At most max runs (the rest is left out: those records
 * would be read again); ends with a settled run. Returns the count (even). */
size_t cs__acked_collect(const cs_tracker *t, const cs_acked_set *s, int64_t fetched, int64_t pos, uint32_t *runs,
                         size_t max);

#endif
