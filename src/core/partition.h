/* partition.h — what the rest of cstream may know about one assigned (topic,
 * partition): an opaque handle and the operations named for what they do.
 * The state itself (struct cs_part) is private to the core files that own it
 * (partition_internal.h); nothing under src/kafka reads or writes a field
 * (tests/unit/check_part_private.sh checks it).
 *
 * Owner: created by the fetch thread when the partition is first assigned, kept
 * for the life of the subscription (re-used, with a new epoch, when it comes
 * back), freed when the last reference is dropped: the subscription holds one
 * and every delivery holds one, so a pending delivery settled after the
 * subscription closed still finds a valid (closed) partition.
 *
 * Threads and locks: each function says which thread calls it; those that
 * read or change the locked state take the partition's lock (lock order level
 * 5, lock_order.h) and call out to nothing while they hold it.
 *
 * Owns: declares the opaque cs_part; partition.c and the core files that
 * include partition_internal.h own its state. Locks: cs_part.lock (level 5),
 * taken inside the functions; the log flag and the byte and settlement counts
 * are atomics. Threads: each function says which. */
#ifndef CS_CORE_PARTITION_H
#define CS_CORE_PARTITION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/delivery_pool.h"
#include "core/source.h"

/* Attempt counts kept per partition from the committed metadata. */
#define CS_PRIOR_MAX 64
/* Records that commit their attempt before running after an unclean owner change. */
#define CS_SUSPECT_MAX 500
/* Whether pipelines keep freed deliveries as spares (delivery_pool.h). Not
 * under AddressSanitizer, so that a delivery used after its free is still
 * caught there instead of hidden by the reuse. -DCS_SPARES=0 turns them off
 * elsewhere too (docs/benchmarks.md measures with and without). */
#if defined(__SANITIZE_ADDRESS__)
#define CS_SPARES 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CS_SPARES 0
#endif
#endif
#ifndef CS_SPARES
#define CS_SPARES 1
#endif

typedef struct cs_delivery cs_delivery;
typedef struct cs_pipeline cs_pipeline;

typedef struct cs_stored cs_stored;
typedef struct cs_part cs_part;

/* Fetch thread (the pipeline's registry, pipeline.c): a partition, with a
 * tracker when `tracked`; it takes a reference to `spares` and copies
 * `topic`. Its lane is chosen when it is assigned (cs__pipeline_assign). One
 * reference, the caller's. NULL when out of memory (nothing allocated then). */
cs_part *cs__part_new(cs_pipeline *pipe, const char *topic, int32_t partition, const cs_source_ops *ops, bool tracked,
                      cs_delivery_pool *spares);
/* Any thread: one more reference, or one fewer (the last frees the partition,
 * its tracker and its window, and drops its reference to the spares). */
void cs__part_ref(cs_part *p);
void cs__part_unref(cs_part *p);

/* ---- what it is: fixed at creation, no lock ----------------------------- */

/* Any thread: the topic; borrowed, valid as long as a reference is held. */
const char *cs__part_topic(const cs_part *p);
/* Any thread: the partition number. */
int32_t cs__part_number(const cs_part *p);
/* Any thread: the pipeline's spare deliveries (delivery_pool.h), borrowed. */
cs_delivery_pool *cs__part_spares(const cs_part *p);

/* ---- the source's own table (its thread only, no lock) ------------------- */

/* Where the source keeps this partition in a table of its own, -1 (the
 * initial value) none: a source that finds its entry from the partition
 * (fetch_parts.c) reads it here instead of searching its table. The source
 * sets it when the entry is added, moved or removed. */
long cs__part_source_slot(const cs_part *p);
void cs__part_set_source_slot(cs_part *p, long slot);

/* ---- the log behind it (an atomic, no lock) ------------------------------ */

/* Any thread: true while the partition's log may have restarted (its topic
 * was reported gone while assigned, or its records went back further than
 * a repeat): its positions are not committed until a record shows which. */
bool cs__part_log_unknown(const cs_part *p);
/* Fetch thread: the log may have restarted (see cs__part_log_unknown). */
void cs__part_mark_log_unknown(cs_part *p);
/* Fetch thread: a record showed which log it is (an assign clears it too). */
void cs__part_clear_log_unknown(cs_part *p);

/* ---- its records' bytes and settlements (atomics, no lock) --------------- */

/* Fetch thread: r is handed out for this partition; its bytes count in
 * cs__part_out_bytes until the source releases it (store.h). */
void cs__part_charge(cs_part *p, cs_stored *r);
/* Any thread: bytes of the partition's records handed out and not released. */
size_t cs__part_out_bytes(const cs_part *p);
/* Any thread: records that left the partition for good (acked, dropped,
 * retry unsupported, dead-lettered), counted since it was first assigned;
 * only grows. */
uint64_t cs__part_finished(const cs_part *p);

/* ---- for the pipeline's registry and readings (pipeline.c, pipeline_stats.c),
 * and the source's own readings of a partition it holds */

/* The subscription is gone: settlements after this find no pipeline. */
void cs__part_detach(cs_part *p);
/* Any thread: the offset after the last record dispatched in the current
 * assignment, -1 if none (or not assigned). */
int64_t cs__part_next_offset(cs_part *p);
/* Any thread: records the partition holds (queued, running, pending) in its
 * current assignment. */
size_t cs__part_held(cs_part *p);

#endif
