/* pipeline.h — from fetched record to settlement, without knowing Kafka.
 *
 *   fetch thread --cs__pipeline_dispatch_run--> lane queue --> worker (handler)
 *        ^                                                    |
 *        +---- wake (resume a paused partition, commit) <-- settlement
 *
 * A pipeline has n lanes, one worker thread each. A partition's records go to
 * one lane, in fetch order (by partition: the lane with the fewest partitions
 * when it was assigned, partition.c); a retry goes back to the head of its lane.
 * Settlement rules depend on the commit mode (Auto: counters only; Tracked:
 * the partition's tracker). Per-lane state has the lane's lock; per-partition
 * state has the partition's lock (see partition_internal.h); counters are atomics.
 *
 * Owns: declares cs_pipeline_config (cs__pipeline_new copies it) and the
 * pipeline's calls; pipeline.c makes and frees a cs_pipeline. Locks: none
 * here; the functions take the pipeline's own (parts_lock, cs_part.lock,
 * lane.lock, delay_lock...: pipeline_internal.h, lock_order.h). Threads: each
 * function says which (fetch thread, workers, any settling thread). */
#ifndef CS_CORE_PIPELINE_H
#define CS_CORE_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/attempts_meta.h"
#include "core/broker.h"
#include "cstream/delivery.h"
#include "core/delivery_internal.h"
#include "base/metrics.h"
#include "core/output.h"
#include "core/partition.h"

typedef struct cs_pipeline_config {
    const char *name;      /* for log lines: the subscription's topics */
    cs_handler_fn handler; /* one of handler, batch_handler */
    cs_batch_fn batch_handler;
    size_t max_batch;
    const cs_codec *codec; /* with type: decode before the handler runs */
    const cs_type *type;
    const cs_codec *key_codec; /* with key_type: decode the key before the handler runs too */
    const cs_type *key_type;
    void *user;
    bool tracked;
    bool lanes_by_key;
    int workers;
    size_t max_open;
    int handler_time_limit_ms;
    /* Called from worker or settling threads when the fetch thread has
     * something to do (resume a partition, commit). Must not block. */
    void (*wake)(void *arg);
    void *wake_arg;
    /* Publishes a delivery's reply (NULL: the subscription has none). With
     * `gate`, the reply's delivery report settles d through
     * cs__delivery_reply_done and d must not be touched after a 0 return.
     * Returns 0 if the reply was queued. Called with no lock held. */
    int (*send_reply)(void *arg, cs_delivery *d, bool gate, const void *key, size_t key_len, const void *value,
                      size_t value_len);
    void *reply_arg;
    /* Tracked: handler runs per record (0: no cap). */
    int max_attempts;
    /* Publishes d to the dead-letter topic (NULL: none); its report settles d
     * through cs__delivery_dead_letter_done. 0 if queued. No lock held. */
    int (*send_dead_letter)(void *arg, cs_delivery *d, const char *reason);
    void *dead_letter_arg;
    /* Transactional (tracked is set too): a settled record's outputs go to
     * its partition's window (window.c) instead of being sent; the reply is
     * an output to reply_topic, and make_dead_letter builds the dead-letter
     * output of a record given up (NULL: no dead-letter topic). */
    bool transactional;
    const char *reply_topic;
    cs_output *(*make_dead_letter)(void *arg, cs_delivery *d, const char *reason);
    void *make_dead_letter_arg;
    /* Transactional: whether cs_delivery_publish may write to `topic` (a
     * declared topic, checked at start-up); fills cs_errmsg when not. */
    bool (*output_topic_ok)(void *arg, const char *topic);
    void *output_topic_arg;
    /* Transactional: wake the fetch thread when this many records settled
     * since the window opened (0: never). */
    size_t window_records;
    /* Transactional, for measurement only: stop the world at each window
     * close (no handler runs while the transaction commits). */
    bool window_barrier;
    /* Tracked, not Transactional: commits carry the acked set above the
     * position (attempts_meta.h, cs2) and records an earlier owner settled
     * are skipped (cs__part_set_acked). False: cs1, everything above the
     * committed position is read again (the subscription turned it off). */
    bool acked_set;
    /* Database (tracked is set too): the store a handler's run writes into
     * (run_store.h); the worker ends a run's writes before settling it.
     * NULL: none. */
    const cs_run_store *store;
    /* Tracked: commits a suspect record's attempt before it runs (sync). */
    int (*precommit)(void *arg, cs_part *part);
    void *precommit_arg;
} cs_pipeline_config;

cs_pipeline *cs__pipeline_new(const cs_pipeline_config *cfg);
/* Joins the workers (after cs__pipeline_drain or _wait) and frees the lanes; partitions
 * with outstanding pending deliveries live on until those are settled. */
void cs__pipeline_destroy(cs_pipeline *p);

/* Fetch thread: the registry's partition (topic, partition), registered now
 * if it was not yet (NULL: out of memory). O(1): an index (part_index.h). */
cs_part *cs__pipeline_part(cs_pipeline *p, const char *topic, int32_t partition, const cs_source_ops *ops);
/* Fetch thread: the registry's partition (topic, partition), NULL if it was
 * never registered. O(1), no lock. */
cs_part *cs__pipeline_find_part(cs_pipeline *p, const char *topic, int32_t partition);

/* Fetch thread: a delivery for a record of part, a spare of the pipeline's
 * when it has one (no malloc), NULL when out of memory. Zeroed but for its
 * topic and partition, which are part's (the topic borrowed from it). */
cs_delivery *cs__delivery_alloc(cs_part *part);
/* Fetch thread: hands a record to its lane. The delivery must have its record
 * fields (offset, timestamp, key, value) and msg set (see cs__delivery_alloc). Returns true if the partition
 * has now reached max_open: it is paused, the fetch thread takes no more of
 * its records until it has drained to half. */
bool cs__pipeline_dispatch(cs_pipeline *p, cs_part *part, cs_delivery *d);
/* Fetch thread: hands a run of part's records to their lanes, in fetch order,
 * with one partition lock and one lane lock per run (cs__pipeline_dispatch
 * per record took two locks each). *consumed: how many of ds were taken
 * (handed out, or freed as a repeat of an offset already open); fewer than n
 * only when the tracker ran out of memory (part->out_of_memory set), and the
 * rest are freed, not handed out. Returns true if the partition reached
 * max_open with this run (it is paused, as for cs__pipeline_dispatch). A run
 * no longer than cs__pipeline_room never passes max_open. */
bool cs__pipeline_dispatch_run(cs_pipeline *p, cs_part *part, cs_delivery **ds, size_t n, size_t *consumed);
/* Fetch thread: how many more records part may take before it reaches
 * max_open (0 while it is paused). */
size_t cs__pipeline_room(cs_pipeline *p, cs_part *part);
/* Fetch thread: how many more deliveries the lanes take before they hold as
 * many waiting to run as they should (a few milliseconds of work). 0: full
 * now; the config's wake hook is called once they drained to half. */
size_t cs__pipeline_lanes_room(cs_pipeline *p);

/* Fetch thread, at assign: a new epoch for the partition, and (lanes by
 * partition) its lane for this assignment: the lane with the fewest
 * partitions assigned now (partition.c, place_in_lane, says why only here). */
void cs__pipeline_assign(cs_pipeline *p, cs_part *part);
/* Fetch thread, while the partition is assigned: a new epoch in the same
 * assignment (a seek, a window's rewind, a restarted log). Its lane stays:
 * deliveries of the older epoch may still be queued or running there. */
void cs__pipeline_renew_epoch(cs_pipeline *p, cs_part *part);
/* Fetch thread: an application's seek of an assigned partition to `offset`
 * (Tracked, Transactional and Auto). A new epoch: every delivery handed out
 * before it settles as stale; the attempt counts of open records at or after
 * `offset` are kept for when they are read again, and the committed position
 * stays the group's until records from `offset` are tracked. *from: the
 * offset the partition would have handed out next (-1 unknown). False, and
 * nothing changed, if the partition is being revoked. */
bool cs__part_seek(cs_pipeline *p, cs_part *part, int64_t offset, int64_t *from);
/* Fetch thread: whether cs__part_seek would take a seek now (the partition is
 * assigned, not being revoked or stopped). A worker can end that before the
 * seek (a retry while the app stops), never start it again. */
bool cs__part_can_seek(cs_part *part);
/* Fetch thread, when the source's position moved back to *to without a
 * seek of the application's: lowers *to to where reading must start again
 * so that nothing handed out is skipped. Tracked: the first record handed
 * out and not settled (cs_tracker_reread_from). Transactional: also the
 * committed position (the window's settled records lose their outputs with
 * the epoch). False: being revoked, *to unchanged. */
bool cs__part_reread_from(cs_part *part, int64_t *to);
/* Fetch thread, at revoke: stop handing out the partition's records. */
void cs__pipeline_stop_partition(cs_pipeline *p, cs_part *part);
/* Fetch thread: waits until the partition has nothing in flight or the
 * deadline (monotonic ms) passes. Returns the number still in flight. */
size_t cs__pipeline_wait_settled(cs_pipeline *p, cs_part *part, int64_t deadline_ms);
/* Fetch thread, after the final commit of a revoked partition: bumps the
 * epoch so that late settlements are stale. Deliveries still open keep their
 * payload (the source's records must outlive its consumer: fetch_take.c copies
 * them into a store that does). */
void cs__pipeline_release_partition(cs_pipeline *p, cs_part *part);

/* What one partition commits, taken in one step under its lock: the
 * committer builds its request from this and does not come back to the
 * partition until the result. */
typedef struct cs_commit_state {
    cs_part *part;
    const char *topic; /* the partition's own copy: lives as long as a reference to it */
    int32_t partition;
    int64_t pos;            /* the position to commit */
    char meta[CS_META_MAX]; /* its attempts metadata (attempts_meta.h) */
    /* The acked set did not all fit in meta: how far it reached, and how
     * far it would have (records settled past the reach are read again after
     * a crash). Counted in the pipeline's metadata_truncated too. */
    bool truncated;
    uint64_t reach, wanted;
} cs_commit_state;

/* Tracked: what to commit if the position or the attempt counts changed since
 * the last commit (`clean` when written by a graceful revoke or stop). False
 * if there is nothing new, or while the partition's log is unknown
 * (cs__part_log_unknown). */
bool cs__part_commit_state(cs_part *part, bool clean, cs_commit_state *out);
/* The position and metadata the last successful commit stored (-1: none
 * since the assignment). Fetch thread. */
void cs__part_last_commit(cs_part *part, int64_t *pos, char *meta, size_t cap);
/* Tracked: the state to commit right now (a suspect record's attempt); false
 * if there is no position yet or the log is unknown. Callers hold the
 * consumer's commit lock. */
bool cs__part_commit_state_now(cs_part *part, cs_commit_state *out);
/* Tracked and Transactional, on the thread that hands the partition's records
 * out, between hand-outs: the source is at `next`, and every offset from the
 * one after the last record it handed out up to `next` holds no record (a
 * log's transaction markers, which the source never hands out). If nothing
 * of the partition is open, the position to commit moves up to `next`: a log
 * that ends with a marker is then committed to its end, not one short of it.
 * Ignored while something is open (the position is then that record), and
 * forgotten at the next epoch (assign, seek, rewind). */
void cs__part_pass_to(cs_part *part, int64_t next);
/* Tracked: records the outcome of a commit of `position` with `meta` (a
 * success: what the group holds now) and has the next tick check again. */
void cs__part_commit_done(cs_part *part, int64_t position, const char *meta, bool ok);
/* Fetch thread, at assign (Tracked): the attempt counts read from the
 * committed metadata, ascending; and what was committed. */
void cs__part_set_prior(cs_part *part, int64_t committed, const char *meta, const int64_t *offsets,
                        const uint32_t *attempts, size_t n, bool suspect);
/* Fetch thread: true while the partition is paused: it reached max_open, and
 * the fetch thread takes none of its records until it has drained to half
 * (cs__part_should_resume). An assign (or a rewind) unpauses it. */
bool cs__part_paused(cs_part *part);
/* Fetch thread: true if a paused partition has drained enough to resume (it
 * is unpaused then). */
bool cs__part_should_resume(cs_pipeline *p, cs_part *part);
/* Any thread: deliveries waiting in the lanes for a worker. */
size_t cs__pipeline_lanes_waiting(cs_pipeline *p);

/* Graceful stop: lets the lanes run what they hold until they are empty or the
 * deadline passes, then discards the rest. Returns the records still held
 * (pending deliveries and replies not yet confirmed). */
size_t cs__pipeline_drain(cs_pipeline *p, int64_t deadline_ms);
/* cs__pipeline_drain in two halves, so that a stop drains several pipelines
 * at once (one deadline for all, not one after another): _begin marks the
 * pipeline stopping and tells its workers to finish by deadline_ms, and
 * returns without waiting; _wait joins the workers and waits (up to that
 * deadline) for the pending deliveries, and returns what
 * cs__pipeline_drain returns. The lifecycle thread, _begin once before _wait. */
void cs__pipeline_drain_begin(cs_pipeline *p, int64_t deadline_ms);
size_t cs__pipeline_drain_wait(cs_pipeline *p);
/* Crash (tests): workers stop after their current handler; nothing settles. */
void cs__pipeline_crash(cs_pipeline *p);

/* Any thread: the offset after the last record dispatched for the partition
 * in its current assignment, -1 if none. O(1) (the registry's index), under
 * the registry lock; with the partition in hand, cs__part_next_offset. */
int64_t cs__pipeline_next_offset(cs_pipeline *p, const char *topic, int32_t partition);
/* Queued + running + pending across all partitions (for "idle"). */
size_t cs__pipeline_busy(cs_pipeline *p);
/* Any thread: the counters of the pipeline's lanes and partitions. */
void cs__pipeline_stats(cs_pipeline *p, cs_broker_sub_counters *out);

/* /metrics: one partition as the pipeline sees it (topic borrowed from the
 * partition, valid while the pipeline lives). */
typedef struct cs_part_metrics {
    const char *topic;
    int32_t partition;
    bool assigned;
    int64_t committed; /* the position last committed this assignment, -1 none */
    /* The log's end as the source last reported it this assignment
     * (cs__part_set_end): `end` is where its reader can read to (Kafka: the
     * last stable offset under read_committed), `end_high` what the log held
     * then (the high watermark); -1 unknown. */
    int64_t end, end_high;
    uint64_t acked, dropped, retried, retry_unsupported, stale, dead_lettered;
} cs_part_metrics;
/* The source's report of the partition's end (see cs_part_metrics.end): any
 * thread; forgotten at the next assignment. */
void cs__part_set_end(cs_part *part, int64_t end, int64_t end_high);
/* Any thread: *m for one partition (takes its lock; topic borrowed from it). */
void cs__part_metrics(cs_part *part, cs_part_metrics *m);
/* Any thread: calls fn for every partition the pipeline has seen (under the
 * registry lock, no partition lock held: fn must not block). */
void cs__pipeline_each_part(cs_pipeline *p, void (*fn)(void *arg, const cs_part_metrics *m), void *arg);
/* Any thread: the handler durations of every lane, added to *acc. */
void cs__pipeline_handler_durations(cs_pipeline *p, cs_histogram_snap *acc);
void cs__pipeline_count_commit(cs_pipeline *p, bool ok);
void cs__pipeline_count_pause(cs_pipeline *p);
void cs__pipeline_count_transaction(cs_pipeline *p, size_t outputs);
void cs__pipeline_count_abort(cs_pipeline *p);
/* Database: a partition another instance claimed stopped being handled. */
void cs__pipeline_count_fenced(cs_pipeline *p);

/* ---- Transactional windows (window.c) ---------------------------------------- */

/* Called with part->lock held: the state to commit (with the acked set when
 * cfg.acked_set). */
void cs__part_state_locked(cs_part *part, bool clean, cs_commit_state *out);
/* Fetch thread, at assign after cs__part_set_prior: the verified acked set
 * the group's metadata carries for the committed position `base` (runs as in
 * attempts_meta.h). Its settled offsets are skipped as they are fetched:
 * registered in the tracker as delivered and settled, handed to no handler.
 * False (nothing skipped) when the subscription does not use acked sets, the
 * partition already fetched records, or out of memory. */
bool cs__part_set_acked(cs_part *part, int64_t base, const uint32_t *runs, size_t n);
/* Fetch thread, closing a window: the partition's state to commit and the
 * outputs a transaction committing its position may carry (those of settled
 * records below it, detached in settlement order; appended to *taken). False
 * if there is nothing new to commit, or while the log is unknown. */
bool cs__window_take(cs_part *part, bool clean, cs_commit_state *out, cs_output_list *taken, size_t *n_outputs);
/* Fetch thread: true (once) if a retried record has held the partition's
 * position for stall_ms or longer. */
bool cs__window_stalled(cs_part *part, int64_t now_ms, int stall_ms);
/* Fetch thread: aborts the partition's window: every record of the current
 * epoch becomes stale, buffered outputs are discarded, attempt counts of
 * open records are kept, and the partition starts over at its last committed
 * position, which is returned (-1: nothing to seek, nothing was fetched;
 * -2: the partition is being revoked, nothing done). */
int64_t cs__window_rewind(cs_pipeline *p, cs_part *part);
/* window_barrier: waits until no handler runs and lets none start (close),
 * or lets them run again (open). Fetch thread. */
void cs__pipeline_close_gate(cs_pipeline *p);
void cs__pipeline_open_gate(cs_pipeline *p);
/* Fetch thread, after cs__window_rewind: an output of the record at
 * `offset` could not be produced in the aborted transaction; that record is
 * read again as if it had run `attempt` times (a failed output counts as an
 * attempt, so max_attempts can give it up). */
void cs__window_output_failed(cs_part *part, int64_t offset, uint32_t attempt);
/* Records settled since the window opened; take also resets the count. */
size_t cs__pipeline_settled(cs_pipeline *p);
size_t cs__pipeline_take_settled(cs_pipeline *p);
/* Fetch thread, on its timer: reports handlers past the time limit. */
void cs__pipeline_check_slow(cs_pipeline *p);

#endif
