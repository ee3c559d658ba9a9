/*
 * tracker.h - per-partition commit tracker (internal).
 *
 * Owns: the record of which offsets of ONE partition have been handed out to
 * workers and which of those are settled, and from that the position that is
 * safe to commit (the offset of the lowest delivered-but-unsettled record, or
 * last delivered offset + 1 when nothing is open).
 *
 * Locks: none of its own. Threads: one at a time; the caller serialises every
 * call (one tracker per partition, guarded by that partition's lock).
 *
 * Cost: O(1) amortized per delivery and per settlement. Deliveries are kept in
 * a growable ring; a settlement finds its entry through the sequence number
 * returned at delivery time. The position never goes backwards between resets.
 */
#ifndef CSTREAM_CORE_TRACKER_H
#define CSTREAM_CORE_TRACKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cs_tracker cs_tracker;

/* NULL on out of memory. */
cs_tracker *cs_tracker_new(void);

/* Frees the tracker; NULL is accepted. */
void cs_tracker_destroy(cs_tracker *t);

/* Forgets everything (new assignment epoch); keeps memory. Sequence numbers
 * issued before the reset are unknown afterwards. */
void cs_tracker_reset(cs_tracker *t);

/* Records offset as handed out. Offsets must strictly increase across calls
 * since the last reset, and lie in [0, INT64_MAX) (returns -1 and changes
 * nothing otherwise). Out of memory returns -2, and so does every later call
 * until the reset, so the position never passes the offset it could not
 * record. On success returns 0 and stores in *seq a sequence number that
 * identifies this delivery for cs_tracker_settle. */
int cs_tracker_delivered(cs_tracker *t, int64_t offset, uint64_t *seq);

/* Marks a delivery settled. Returns 0; -1 if seq is unknown (never issued
 * since the last reset, or already settled, or already dropped from the
 * ring) - then nothing changes. */
int cs_tracker_settle(cs_tracker *t, uint64_t seq);

/* Offset of the lowest open delivery, else last delivered + 1; -1 if nothing
 * was delivered since the reset. */
int64_t cs_tracker_position(const cs_tracker *t);

/* Where a source that moved back to `to` (within the same log) must read
 * from so that no delivery still open is skipped: the lower of `to` and the
 * position; `to` if nothing was delivered since the reset. */
int64_t cs_tracker_reread_from(const cs_tracker *t, int64_t to);

/* Number of deliveries not yet settled. */
size_t cs_tracker_open_count(const cs_tracker *t);

/* Entries kept: from the lowest open delivery to the newest one, settled or
 * not. This is the tracker's memory (16 bytes each); a caller bounds it by
 * pausing the partition's fetch. */
size_t cs_tracker_span(const cs_tracker *t);

/* Attempt counts of open deliveries (kept for the commit metadata). */
int cs_tracker_set_attempts(cs_tracker *t, uint64_t seq, uint32_t attempts);
/* Fills up to max open deliveries with attempts > 0, lowest offset first;
 * returns how many. O(span up to the last such delivery). */
size_t cs_tracker_open_attempts(const cs_tracker *t, int64_t *offsets, uint32_t *attempts, size_t max);

/* Calls fn(arg, offset, settled) for every entry kept, from the lowest open
 * delivery to the newest, in offset order (what the acked set in the commit
 * metadata describes). O(span). */
void cs_tracker_each(const cs_tracker *t, void (*fn)(void *arg, int64_t offset, bool settled), void *arg);

/* The offset of the lowest open delivery, or -1 if none is open. */
int64_t cs_tracker_lowest_open(const cs_tracker *t);

#endif /* CSTREAM_CORE_TRACKER_H */
