/* pipeline_internal.h — the pipeline's private state, shared by the files of
 * the pipeline: pipeline.c (creation, partition registry, stop), lanes.c
 * (dispatch and the lane queues), worker.c (the worker threads), settle.c
 * (settlement, replies, dead letters), delay.c (retry_after's delay heap and
 * its timer thread), partition.c (a partition's epochs and commit state),
 * pipeline_stats.c (counters and readings) and delivery.c (a delivery
 * discarded: below settle.c and delay.c, which both discard). Nothing
 * outside src/core/ includes it: the rest of cstream sees pipeline.h.
 *
 * Owns: the lanes (a queue and a worker thread each, and the partitions
 * assigned to each), the partition registry with its index by name
 * (part_index.h) and the counters. Threads: the fetch thread dispatches and manages
 * partitions; each worker runs its lane's handlers; any thread may settle a
 * pending delivery. Locks: lane->lock guards the lane queue; part->lock guards
 * the partition (partition_internal.h); their order, with every other lock's, is in
 * lock_order.h: parts_lock, then partition, then lane or delay. No lock is
 * held while a handler runs. */
#ifndef CS_CORE_PIPELINE_INTERNAL_H
#define CS_CORE_PIPELINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/heap.h"
#include "base/log.h"
#include "core/part_index.h"
#include "core/pipeline.h"

typedef struct lane {
    pthread_mutex_t lock; /* lock order: level 6, after the partition's (a retry to the head); a leaf */
    pthread_cond_t ready;
    cs_delivery_queue queue;
    size_t queued;
    /* The worker waits on `ready`: a push signals only then (a signal per
     * record cost ~45 instructions with nobody waiting). */
    bool waiting;
    bool stop; /* exit once the queue is empty */
    bool started;
    pthread_t thread;
    cs_pipeline *pipe;
    /* Partitions assigned now whose records come to this lane (lanes by
     * partition; partition.c balances them at assign). Fetch thread only, or
     * the closing thread after it exited. */
    size_t parts_assigned;
    cs_delivery **batch; /* batch mode: the worker's batch and its outcomes */
    cs_outcome *outcomes;

    /* the running handler, for the time-limit check (only used with a limit) */
    pthread_mutex_t run_lock; /* a leaf (lock_order.h) */
    const char *run_topic;
    int32_t run_partition;
    int64_t run_offset;
    char run_trace_id[CS_TRACE_ID_LEN + 1];
    int64_t run_started_ms; /* 0: idle */
    bool run_reported;

    _Atomic uint64_t delivered, acked, dropped, retried, retry_unsupported, stale, slow, decode_failures;
    _Atomic uint64_t dead_lettered, exhausted;
    cs_histogram handler_seconds; /* this lane's handler runs (one per batch call) */
} lane;

struct cs_pipeline {
    cs_pipeline_config cfg;
    char *name;
    lane *lanes;
    int n_lanes;

    /* written by the fetch thread only; readers lock. Lock order: level 4,
     * before partition locks (lock_order.h) */
    pthread_mutex_t parts_lock;
    cs_part **parts; /* every partition seen, in the order first seen: for walks */
    size_t n_parts, cap_parts;
    cs_part_index by_name;    /* the same partitions by (topic, partition): for lookups */
    cs_delivery_pool *spares; /* shared with its partitions */

    size_t next_keyless_lane; /* fetch thread only: keyless records spread over lanes */

    /* Deliveries waiting for their retry_after delay, keyed by their due time
     * (heap.h), soonest first. `delay_lock` guards them; lock order: level 6, after the
     * partition's (a delayed retry enters the heap under it); a leaf: the
     * timer releases it before it takes a lane lock (lock_order.h). */
    pthread_mutex_t delay_lock;
    pthread_cond_t delay_cv;
    cs_heap delayed;
    bool delay_stop;
    pthread_t delay_thread;
    bool delay_started;

    _Atomic bool stopping;
    _Atomic bool crashed;
    _Atomic int64_t drain_deadline_ms; /* 0: none */
    _Atomic uint64_t commits, commit_failures, pauses;
    /* records skipped as settled by an earlier owner (its acked set), and
     * commits whose acked set did not fit in the metadata */
    _Atomic uint64_t skipped_settled, metadata_truncated;
    _Atomic uint64_t transactions, aborts, outputs;
    _Atomic uint64_t db_fenced; /* Database: partitions another instance claimed */
    _Atomic size_t settled;     /* Transactional: records settled since the window opened */
    /* Deliveries waiting in the lanes (not yet running), all lanes: the
     * source hands out no more past queue_cap (its records wait in its own
     * budgeted buffer, not as deliveries), and a worker taking the count
     * down to half of it wakes the source if it waited (cs__pipeline_lanes_room). */
    _Atomic size_t queued;
    size_t queue_cap;
    _Atomic bool queue_waited;
    /* window_barrier only: handlers wait at the gate while a window commits */
    pthread_mutex_t gate_lock; /* a leaf (lock_order.h) */
    pthread_cond_t gate_cv;
    bool gate_closed;
    int in_handler;
    cs_ratelimit retry_warning;
    cs_ratelimit decode_warning;
    cs_ratelimit outage_warning; /* a retry after an encode found the registry unavailable */
    cs_ratelimit exhausted_warning;
    cs_ratelimit unset_warning;
};

/* What a settlement may need from the pipeline, read under the partition
 * lock: once the lock is released the pipeline may be closing, so only these
 * copies are used (the callbacks and their args outlive the pipeline). */
typedef struct outlet {
    bool current; /* d belongs to the partition's current epoch of a live pipeline */
    bool tracked;
    int max_attempts;
    int (*send_reply)(void *, cs_delivery *, bool, const void *, size_t, const void *, size_t);
    void *reply_arg;
    int (*send_dead_letter)(void *, cs_delivery *, const char *);
    void *dead_letter_arg;
    bool transactional;
    const char *reply_topic;
    cs_output *(*make_dead_letter)(void *, cs_delivery *, const char *);
    void *make_dead_letter_arg;
} outlet;

/* A paused partition resumes once its load (cs__part_load) is down to this. */
static inline size_t cs__resume_mark(const cs_pipeline *p) { return p->cfg.max_open / 2; }

/* ---- lanes.c ------------------------------------------------------------- */
/* A retry goes to the head of its lane (settle.c, delay.c). False (nothing
 * done) once the lane is stopping: its worker may be gone. */
bool cs__lane_push_head(lane *l, cs_delivery *d);
/* A worker's next delivery, or its next batch (worker.c); blocks; NULL or 0
 * once the lane is told to stop and is empty. */
cs_delivery *cs__lane_pop(lane *l);
size_t cs__lane_pop_batch(lane *l, cs_delivery **out, size_t max);

/* ---- worker.c ------------------------------------------------------------ */
/* A lane's worker thread (started by cs__pipeline_new; arg: the lane). */
void *cs__worker_main(void *arg);

/* ---- settle.c ------------------------------------------------------------ */
/* Settles d with outcome under its partition's lock, and frees it unless a
 * retry keeps it (worker.c's decode failures, and the reports of replies and
 * dead letters). */
cs_err cs__settle(cs_delivery *d, cs_outcome outcome);
/* Settles d after its reply, if it has one, or gives it up at its last
 * attempt (worker.c, after a handler returned). */
cs_err cs__settle_or_reply(cs_delivery *d, cs_outcome outcome);
/* The outlet of d, read under its partition's lock (worker.c gives up records). */
outlet cs__outlet_of(cs_delivery *d);
/* Gives up a record at its last attempt or one that does not decode (worker.c). */
cs_err cs__give_up(cs_delivery *d, const outlet *o, const char *why);

/* ---- delivery.c ---------------------------------------------------------- */
/* A delivery that will not run (worker.c's admission, delay.c when stopping):
 * it leaves its partition's held count and is freed. */
void cs__discard(cs_delivery *d);

/* ---- delay.c ------------------------------------------------------------- */
/* The delay timer thread (arg: the pipeline), started by cs__delay_start
 * from cs__pipeline_new; false if the thread could not start. */
void *cs__delay_main(void *arg);
bool cs__delay_start(cs_pipeline *p);
/* A retry with a due time enters the heap (settle.c); false when out of
 * memory. Called with delay_lock held. */
bool cs__delay_push(cs_pipeline *p, cs_delivery *d);
/* Stops and joins the timer thread; what still waits is discarded, open (pipeline.c). */
void cs__stop_delays(cs_pipeline *p);

#endif
