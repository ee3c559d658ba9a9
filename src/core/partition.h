/* partition.h — what the core knows about one assigned (topic, partition).
 *
 * Owner: created by the fetch thread when the partition is first assigned, kept
 * for the life of the subscription (re-used, with a new epoch, when it comes
 * back), freed when the last reference is dropped: the subscription holds one
 * and every delivery holds one, so a pending delivery settled after the
 * subscription closed still finds a valid (closed) partition.
 *
 * Lock: `lock` guards every field below it. Lock order: level 5
 * (lock_order.h): after the consumer's commit_lock and the registry's
 * parts_lock, before a lane, the delay heap, the wake lock and the spares.
 * Never held across a handler call or a blocking call into librdkafka. */
#ifndef CS_CORE_PARTITION_H
#define CS_CORE_PARTITION_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "attempts_meta.h"
#include "delivery_pool.h"
#include "source.h"
#include "tracker.h"

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

typedef struct cs_part {
    char *topic;
    int32_t partition;
    int lane; /* lane of this partition's records */
    const cs_source_ops *ops;
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
     * are not committed until a record shows which (rebalance.c). Written by
     * the fetch thread, cleared at assign; read also by workers (precommit). */
    _Atomic bool log_unknown;

    pthread_mutex_t lock;
    pthread_cond_t drained;      /* signalled when n_inflight drops to 0 */
    int drain_waiters;           /* threads in cs__pipeline_wait_settled: no broadcast per record without one */
    cs_pipeline *pipe;           /* NULL once the subscription is gone */
    uint64_t epoch;              /* bumped at every assign and every release */
    bool assigned;               /* false: hand out nothing more (revoking or released) */
    cs_tracker *tracker;         /* Tracked only */
    size_t held;                 /* queued + running + open (pending) records of this epoch */
    size_t n_inflight;           /* handed to a handler and not settled (running or pending) */
    cs_delivery *inflight;       /* list of those, for releasing pending payloads at close */
    bool paused;                 /* at max_open: the fetch thread takes none of its records until half */
    bool dirty;                  /* a settlement moved the tracker since the last commit */
    int64_t last_committed;      /* position the group holds, from the last commit result this epoch, -1 none */
    char last_meta[CS_META_MAX]; /* its attempts metadata */
    /* attempt counts of open records from the committed metadata (assign),
     * ascending; prior_next walks them as the offsets are fetched */
    int64_t prior_off[CS_PRIOR_MAX];
    uint32_t prior_att[CS_PRIOR_MAX];
    size_t n_prior, prior_next;
    int64_t max_fetched; /* highest offset dispatched this epoch, -1 none */
    size_t suspect_left; /* records that still commit their attempt before running */
    bool out_of_memory;  /* the tracker could not record an offset: the app must stop */

    /* Transactional (window.c): outputs of settled records waiting for a
     * transaction that commits past their source, in settlement order */
    struct cs_output *window, **window_tail;
    size_t window_settled;  /* records settled since the window opened */
    int64_t first_fetched;  /* first offset dispatched this epoch, -1 none */
    int64_t stall_offset;   /* lowest retried record holding the window, -1 none */
    int64_t stall_since_ms; /* when it started to hold it */
} cs_part;

cs_part *cs__part_new(cs_pipeline *pipe, const char *topic, int32_t partition, const cs_source_ops *ops, bool tracked,
                      cs_delivery_pool *spares);
void cs__part_ref(cs_part *p);
void cs__part_unref(cs_part *p);

#endif
