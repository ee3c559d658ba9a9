/* partition_internal.h — the state of one assigned (topic, partition), private
 * to the core. partition.c writes it: its life, epochs, commit state, pause,
 * the records a dispatch admits (lanes.c calls cs__part_admit), a run that
 * starts (worker.c: cs__part_start_run), a held record let go (cs__discard),
 * a settlement and the Transactional window (the *_locked transitions).
 * Two other files take its lock, for a reason: settle.c around a settlement
 * (a retry goes back to its lane's head, or the delay heap, under the
 * partition lock, and partition.c cannot call lanes.c or delay.c, which call
 * back into it through delivery_life.c; settle.c also bumps the partition's
 * atomic counters) and window.c around a window's take. delivery.c reads
 * the pipeline's configuration under it. Everything else, the rest of the
 * core and all of src/kafka, goes through partition.h and pipeline.h
 * (tests/unit/check_part_private.sh fails if a file outside src/core
 * includes this header or names a field).
 *
 * Owns: declares cs_part; partition.c makes and frees it (counted
 * references). Locks: `lock` guards every field below it; level 5
 * (lock_order.h): after the consumer's commit_lock and the registry's
 * parts_lock, before a lane, the delay heap, the wake lock and the spares.
 * Never held across a handler call or a blocking call into librdkafka.
 * Threads: the fetch thread, workers, settling threads, the delay timer,
 * commit results and /metrics, each under `lock` (atomics without it). */
#ifndef CS_CORE_PARTITION_INTERNAL_H
#define CS_CORE_PARTITION_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/acked_set.h"
#include "core/attempts_meta.h"
#include "core/delivery_internal.h"
#include "core/partition.h"
#include "core/tracker.h"

struct cs_part {
    char *topic;
    int32_t partition;
    /* Lane of this partition's records (lanes by partition), chosen when it is
     * assigned (partition.c, place_in_lane). Written and read by the fetch thread only (or the
     * closing thread after it exited), like the two flags. */
    int lane;
    bool lane_counted; /* counted in its lane's parts_assigned: assigned and not released */
    bool lane_kept;    /* a handler of its last assignment may still run in `lane`: the next assignment keeps it */
    const cs_source_ops *ops;
    /* Where the source keeps the partition in a table of its own, -1 none
     * (cs__part_source_slot): the source's thread only. */
    long source_slot;
    _Atomic int refs;
    /* Settlements of this partition's records, for /metrics by topic and
     * outcome: atomics beside the lane counters, so that no lock is shared
     * across partitions; kept across assignments (counters only grow). */
    _Atomic uint64_t n_acked, n_dropped, n_retried, n_retry_unsupported, n_stale, n_dead_lettered;
    /* Bytes of its source's records handed out and not yet released (the
     * source charges them at hand-out: cs__stored_charge). A delivery holds
     * a reference to the partition for as long as its record. */
    _Atomic size_t out_bytes;

    /* The pipeline's spare deliveries (delivery_pool.h), referenced so that
     * a delivery settled after the pipeline is gone still finds them. */
    cs_delivery_pool *spares;

    /* The partition's topic was reported gone while it was assigned, so the
     * log behind it may have restarted (deleted and created again): positions
     * are not committed until a record shows which (the Kafka source, through
     * cs__part_mark_log_unknown and cs__part_clear_log_unknown). Written by
     * the fetch thread, cleared at assign; read also by workers (precommit). */
    _Atomic bool log_unknown;

    pthread_mutex_t lock;
    pthread_cond_t drained;        /* signalled when n_inflight drops to 0 */
    int drain_waiters;             /* threads in cs__pipeline_wait_settled: no broadcast per record without one */
    cs_pipeline *pipe;             /* NULL once the subscription is gone */
    uint64_t epoch;                /* bumped at every assign and every release */
    bool assigned;                 /* false: hand out nothing more (revoking or released) */
    cs_tracker *tracker;           /* Tracked only */
    size_t held;                   /* queued + running + open (pending) records of this epoch */
    size_t n_inflight;             /* handed to a handler and not settled (running or pending) */
    CS_LIST(cs_delivery) inflight; /* list of those, for releasing pending payloads at close */
    bool paused;                   /* at max_open: the fetch thread takes none of its records until half */
    bool dirty;                    /* a settlement moved the tracker since the last commit */
    int64_t last_committed;        /* position the group holds, from the last commit result this epoch, -1 none */
    char last_meta[CS_META_MAX];   /* its attempts metadata */
    /* attempt counts of open records from the committed metadata (assign),
     * ascending; prior_next walks them as the offsets are fetched */
    int64_t prior_off[CS_PRIOR_MAX];
    uint32_t prior_att[CS_PRIOR_MAX];
    size_t n_prior, prior_next;
    /* The acked set restored at assign (verified, cs__part_set_acked):
     * offsets an earlier owner settled, skipped as they are fetched; kept
     * in the commits until fetched. Empty when cfg.acked_set is false. */
    cs_acked_set restored_set;
    int64_t max_fetched; /* highest offset dispatched this epoch, -1 none */
    /* The source's position past offsets that hold no record (a log's
     * transaction markers, after the last record dispatched), reported while
     * nothing was open (cs__part_pass_to); -1 none. A position with nothing
     * open moves up to it. */
    int64_t passed_to;
    int64_t end_reported, high_reported; /* the source's last report of the log's end (cs_part_metrics), -1 none */
    size_t suspect_left;                 /* records that still commit their attempt before running */
    bool out_of_memory;                  /* the tracker could not record an offset: the app must stop */

    /* Transactional (window.c): outputs of settled records waiting for a
     * transaction that commits past their source, in settlement order */
    cs_output_list window;
    size_t window_settled;  /* records settled since the window opened */
    int64_t first_fetched;  /* first offset dispatched this epoch, -1 none */
    int64_t stall_offset;   /* lowest retried record holding the window, -1 none */
    int64_t stall_since_ms; /* when it started to hold it */
};

/* ---- per-record helpers of lanes.c, worker.c, settle.c and partition.c -----
 * Inline: they run per record, and a call across files would cost each one. */

/* Called with part->lock held: wakes cs__pipeline_wait_settled, if it waits. */
static inline void cs__signal_drained(cs_part *part) {
    if (part->drain_waiters > 0) pthread_cond_broadcast(&part->drained);
}

/* ---- partition.c's transitions for the other core files -------------------- */
struct cs_pipeline;

/* Fetch thread: admits the run ds[0..n) (the partition's deliveries, in
 * offset order) into the current epoch: each is tracked, or refused (not
 * increasing: librdkafka delivered that offset again; ds[i] becomes NULL
 * and d goes to *refused), or skipped (the group's acked set says an
 * earlier owner settled it: NULL, to *skipped, counted in *n_skipped).
 * Stops at a record the tracker has no memory for (the partition's
 * out_of_memory set) and returns how many it looked at: the caller frees
 * the rest. *paused is set when the partition reached max_open now. */
size_t cs__part_admit(cs_part *part, cs_delivery **ds, size_t n, size_t max_open, cs_delivery_queue *refused,
                      cs_delivery_queue *skipped, size_t *n_skipped, bool *paused);
/* Fetch thread: n more references, one per delivery of a run, taken before
 * any of them can run and settle (each settled delivery drops its own). */
void cs__part_ref_n(cs_part *part, size_t n);
/* Fetch thread: how many more records the partition takes before max_open. */
size_t cs__part_room(cs_part *part, size_t max_open);
/* Worker: whether d may still run (its epoch, the partition ours, no crash,
 * the drain deadline not passed). */
bool cs__part_runnable(struct cs_pipeline *p, cs_part *part, const cs_delivery *d);
/* Worker, before d's handler: false if d may not run (the caller discards
 * it); else d is in flight, and with `count` its attempt is counted (Tracked)
 * and *precommit says whether to commit it before it runs (a suspect record
 * right after an owner died). */
bool cs__part_start_run(struct cs_pipeline *p, cs_part *part, cs_delivery *d, bool count, bool *precommit);
/* Worker, a typed record once decoded: counts its attempt; true: precommit. */
bool cs__part_count_start(struct cs_pipeline *p, cs_part *part, cs_delivery *d);
/* A free run (its schema registry was down): the tracker's attempt count
 * goes back to d's. */
void cs__part_recount_attempts(cs_part *part, const cs_delivery *d);
/* d, held and never to settle (its run refused): no longer held. */
void cs__part_unhold(cs_part *part, const cs_delivery *d);
/* A Transactional output of the record at offset failed in its transaction:
 * the record is read again with `attempt` runs behind it. */
void cs__part_add_prior(cs_part *part, int64_t offset, uint32_t attempt);

/* Called with part->lock held, by settle.c (cs__settle, under the lock for
 * the reason this header's head says) and window.c: d leaves the in-flight
 * list; d settled (the tracker's entry); a held record goes (unassign: and
 * the partition hands out nothing more); d's outputs join the window (and
 * d no longer holds it); a retried d holds the window (its outputs of the
 * failed run dropped; the stall clock starts, but for a free run); the
 * outputs of records below pos leave the window for *taken (counted in
 * *n_outputs), and the state is no longer dirty; the stall clock stops.
 * cs__part_release_held_locked is a settlement's: unlike cs__part_unhold it
 * checks no epoch and signals no drain (cs__settle does). */
void cs__part_inflight_remove_locked(cs_part *part, cs_delivery *d);
void cs__part_settled_locked(cs_part *part, const cs_delivery *d);
void cs__part_release_held_locked(cs_part *part, bool unassign);
void cs__part_window_add_locked(cs_part *part, cs_delivery *d);
void cs__part_window_hold_locked(cs_part *part, cs_delivery *d);
void cs__part_window_take_locked(cs_part *part, int64_t pos, cs_output_list *taken, size_t *n_outputs);
void cs__part_window_unstall_locked(cs_part *part);

/* What max_open bounds. Under Tracked: the tracker's span, from the lowest
 * open record to the newest, so that one stuck record cannot grow memory
 * without limit (the records behind it stay in the tracker until it settles).
 * Under Auto: the records cstream holds (queued, running, pending). */
static inline size_t cs__part_load(const cs_part *part) {
    size_t span = part->tracker ? cs_tracker_span(part->tracker) : 0;
    return span > part->held ? span : part->held;
}

#endif
