/* lanes.c — the lanes' queues and what goes into them: the fetch thread's
 * dispatch (a partition's run of records to their lanes, in fetch order,
 * once partition.c admitted them into the epoch), a retry to the head of
 * its lane, and a worker's pop. Which lane a partition's records go to is
 * chosen at its assignment (partition.c). Owns: each lane's queue.
 *
 * Threads: the fetch thread dispatches (tail); a worker pops its own lane; a
 * settling thread (under a partition lock) and the delay timer push a retry
 * to the head. Locks: lane->lock (lock order level 6, a leaf), taken once per
 * run of records; the count of waiting deliveries is an atomic, and the
 * source's wake hook is called with no lane lock held. */
#define _POSIX_C_SOURCE 200809L
#include "core/partition_internal.h"
#include "core/pipeline_internal.h"

#include <string.h>

#include "base/log.h"

/* ---- lane queue ---------------------------------------------------------- */

static void queued_add(cs_pipeline *p, size_t n) { atomic_fetch_add_explicit(&p->queued, n, memory_order_relaxed); }

/* After a pop, with no lane lock held: the source waited and there is room. */
static void queued_sub(cs_pipeline *p, size_t n) {
    size_t before = atomic_fetch_sub_explicit(&p->queued, n, memory_order_relaxed);
    if (before - n <= p->queue_cap / 2 && atomic_load_explicit(&p->queue_waited, memory_order_relaxed) &&
        atomic_exchange(&p->queue_waited, false) && p->cfg.wake)
        p->cfg.wake(p->cfg.wake_arg);
}

size_t cs__pipeline_lanes_waiting(cs_pipeline *p) { return atomic_load_explicit(&p->queued, memory_order_relaxed); }

/* A retry goes to the head: it runs before anything fetched after it. False
 * (nothing done) once the lane is stopping: its worker may be gone. */
bool cs__lane_push_head(lane *l, cs_delivery *d) {
    pthread_mutex_lock(&l->lock);
    if (l->stop) {
        pthread_mutex_unlock(&l->lock);
        return false;
    }
    CS_STAILQ_INSERT_HEAD(&l->queue, d, next);
    l->queued++;
    queued_add(l->pipe, 1);
    if (l->waiting) pthread_cond_signal(&l->ready);
    pthread_mutex_unlock(&l->lock);
    return true;
}

/* Called with l->lock held: waits until the lane has a delivery or stops. */
static void wait_ready(lane *l) {
    while (CS_STAILQ_EMPTY(&l->queue) && !l->stop) {
        l->waiting = true;
        pthread_cond_wait(&l->ready, &l->lock);
        l->waiting = false;
    }
}

/* Blocks for the next batch: the head plus what is queued behind it, at most
 * max, never waiting for more. A retried record (alone) makes a batch of its
 * own. Returns 0 when the lane is told to stop and is empty. */
size_t cs__lane_pop_batch(lane *l, cs_delivery **out, size_t max) {
    pthread_mutex_lock(&l->lock);
    wait_ready(l);
    size_t n = 0;
    cs_delivery *d;
    while ((d = CS_STAILQ_FIRST(&l->queue)) && n < max && (n == 0 || !d->alone)) {
        CS_STAILQ_REMOVE_HEAD(&l->queue, next);
        l->queued--;
        out[n++] = d;
        if (d->alone) {
            d->alone = false;
            break;
        }
    }
    pthread_mutex_unlock(&l->lock);
    if (n) queued_sub(l->pipe, n);
    return n;
}

/* Blocks for the next delivery; NULL when the lane is told to stop and is empty. */
cs_delivery *cs__lane_pop(lane *l) {
    pthread_mutex_lock(&l->lock);
    wait_ready(l);
    cs_delivery *d = CS_STAILQ_FIRST(&l->queue);
    if (d) {
        CS_STAILQ_REMOVE_HEAD(&l->queue, next);
        l->queued--;
    }
    pthread_mutex_unlock(&l->lock);
    if (d) queued_sub(l->pipe, 1);
    return d;
}
/* ---- dispatch --------------------------------------------------------------- */

static size_t lane_for_key(const void *key, size_t len, int n_lanes) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ ((const unsigned char *)key)[i]) * 1099511628211ULL;
    return (size_t)(h % (uint64_t)n_lanes);
}

/* Appends the run (n deliveries) to the lane's queue and empties it: one
 * lock for a run of records. */
static void lane_push_run(lane *l, cs_delivery_queue *run, size_t n) {
    pthread_mutex_lock(&l->lock);
    CS_STAILQ_CONCAT(&l->queue, run, next);
    l->queued += n;
    queued_add(l->pipe, n);
    if (l->waiting) pthread_cond_signal(&l->ready);
    pthread_mutex_unlock(&l->lock);
}

/* Pushes ds[0..n) (accepted ones, NULL for refused) to their lanes in order,
 * each run of consecutive deliveries bound for one lane in one lock. */
static void push_runs(cs_pipeline *p, cs_delivery **ds, size_t n) {
    cs_delivery_queue run = {0};
    int run_lane = -1;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        cs_delivery *d = ds[i];
        if (!d) continue;
        if (len > 0 && d->lane != run_lane) {
            lane_push_run(&p->lanes[run_lane], &run, len);
            len = 0;
        }
        run_lane = d->lane;
        CS_STAILQ_INSERT_TAIL(&run, d, next);
        len++;
    }
    if (len > 0) lane_push_run(&p->lanes[run_lane], &run, len);
}

size_t cs__pipeline_room(cs_pipeline *p, cs_part *part) { return cs__part_room(part, p->cfg.max_open); }

size_t cs__pipeline_lanes_room(cs_pipeline *p) {
    size_t queued = atomic_load_explicit(&p->queued, memory_order_relaxed);
    if (queued < p->queue_cap) return p->queue_cap - queued;
    atomic_store(&p->queue_waited, true);
    /* A worker may have taken the count down before the flag was set: look
     * again (a wake-up that then comes for nothing costs one loop). */
    queued = atomic_load_explicit(&p->queued, memory_order_relaxed);
    return queued < p->queue_cap ? p->queue_cap - queued : 0;
}

bool cs__pipeline_dispatch_run(cs_pipeline *p, cs_part *part, cs_delivery **ds, size_t n, size_t *consumed) {
    bool pause = false;
    for (size_t i = 0; i < n; i++) {
        cs_delivery *d = ds[i];
        d->part = part;
        cs__delivery_read_trace(d);
        if (!p->cfg.lanes_by_key) d->lane = part->lane;
        else if (d->key) d->lane = (int)lane_for_key(d->key, d->key_len, p->n_lanes);
        else d->lane = (int)(p->next_keyless_lane++ % (size_t)p->n_lanes);
    }
    /* One reference per delivery, taken before any can run and settle. */
    cs__part_ref_n(part, n);
    cs_delivery_queue refused = {0}, skipped = {0};
    size_t n_skipped = 0;
    size_t done = cs__part_admit(part, ds, n, p->cfg.max_open, &refused, &skipped, &n_skipped, &pause);
    *consumed = done;
    for (size_t i = done; i < n; i++) cs__delivery_free(ds[i]); /* never handed out */
    if (n_skipped) atomic_fetch_add_explicit(&p->skipped_settled, n_skipped, memory_order_relaxed);
    cs_delivery *d, *after;
    CS_STAILQ_FOREACH_SAFE(d, &skipped, next, after) {
        CS_LOG_DEBUG("record skipped, settled before topic=%s partition=%d offset=%lld", part->topic,
                     (int)part->partition, (long long)d->offset);
        cs__delivery_free(d);
    }
    CS_STAILQ_FOREACH_SAFE(d, &refused, next, after) {
        CS_LOG_WARN("record out of fetch order ignored topic=%s partition=%d offset=%lld" CS_TRACE_FMT, part->topic,
                    (int)part->partition, (long long)d->offset, CS_TRACE_ARGS(d));
        cs__delivery_free(d);
    }
    push_runs(p, ds, done);
    return pause;
}

bool cs__pipeline_dispatch(cs_pipeline *p, cs_part *part, cs_delivery *d) {
    size_t consumed;
    return cs__pipeline_dispatch_run(p, part, &d, 1, &consumed);
}
