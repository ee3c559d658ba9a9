/* partition.c — one partition's state: its life (created on first assign,
 * freed on the last reference, the subscription's or a delivery's), the
 * accessors the rest of cstream reads it through (partition.h), its epochs
 * (assign, revoke, release) and its lane in each assignment (lanes by
 * partition), the records a dispatch admits, a run that starts, what
 * Tracked commits for it, and its pause at max_open.
 *
 * Owns: every field of cs_part but the settlement counters settle.c bumps
 * (atomics).
 * Locks: part->lock (level 5, src/lock_order.h), taken by every function
 * here but the reference counting, the fixed fields, the atomics, the lane
 * placement (the fetch thread's alone) and the *_locked transitions, whose
 * callers (settle.c, window.c) hold it; nothing is called out while it is
 * held. Threads: the fetch thread assigns, revokes, releases,
 * admits and asks what to commit (or the closing thread after it); workers
 * start runs; any thread settles (settle.c). */
#include "core/partition_internal.h"

#include "base/clock.h"
#include "core/delivery_internal.h"
#include "core/output.h"
#include "core/pipeline_internal.h"
#include "core/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cs_part *cs__part_new(cs_pipeline *pipe, const char *topic, int32_t partition, const cs_source_ops *ops, bool tracked,
                      cs_delivery_pool *spares) {
    cs_part *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->topic = strdup(topic);
    p->tracker = tracked ? cs_tracker_new() : NULL;
    if (!p->topic || (tracked && !p->tracker)) {
        free(p->topic);
        cs_tracker_destroy(p->tracker);
        free(p);
        return NULL;
    }
    p->partition = partition;
    p->ops = ops;
    p->source_slot = -1;
    p->pipe = pipe;
    p->last_committed = -1;
    p->passed_to = -1;
    p->end_reported = p->high_reported = -1;
    p->first_fetched = -1;
    p->stall_offset = -1;
    atomic_init(&p->refs, 1);
    p->spares = spares;
    cs__delivery_pool_ref(spares);
    pthread_mutex_init(&p->lock, NULL);
    cs__cond_init_monotonic(&p->drained); /* timed: the drain deadline */
    return p;
}

void cs__part_ref(cs_part *p) { atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed); }

void cs__part_ref_n(cs_part *p, size_t n) { atomic_fetch_add_explicit(&p->refs, (int)n, memory_order_relaxed); }

void cs__part_unref(cs_part *p) {
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
    cs__delivery_pool_unref(p->spares);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->drained);
    cs_tracker_destroy(p->tracker);
    cs__acked_set_clear(&p->restored_set);
    cs__output_list_free(&p->window);
    free(p->topic);
    free(p);
}

/* ---- what it is, its log, its bytes and settlements: no lock ------------ */

const char *cs__part_topic(const cs_part *p) { return p->topic; }
int32_t cs__part_number(const cs_part *p) { return p->partition; }
cs_delivery_pool *cs__part_spares(const cs_part *p) { return p->spares; }

long cs__part_source_slot(const cs_part *p) { return p->source_slot; }
void cs__part_set_source_slot(cs_part *p, long slot) { p->source_slot = slot; }

bool cs__part_log_unknown(const cs_part *p) { return atomic_load(&p->log_unknown); }
void cs__part_mark_log_unknown(cs_part *p) { atomic_store(&p->log_unknown, true); }
void cs__part_clear_log_unknown(cs_part *p) { atomic_store(&p->log_unknown, false); }

void cs__part_charge(cs_part *p, cs_stored *r) { cs__stored_charge(r, &p->out_bytes); }
size_t cs__part_out_bytes(const cs_part *p) { return atomic_load_explicit(&p->out_bytes, memory_order_relaxed); }

uint64_t cs__part_finished(const cs_part *p) {
    return atomic_load_explicit(&p->n_acked, memory_order_relaxed) +
           atomic_load_explicit(&p->n_dropped, memory_order_relaxed) +
           atomic_load_explicit(&p->n_retry_unsupported, memory_order_relaxed) +
           atomic_load_explicit(&p->n_dead_lettered, memory_order_relaxed);
}

/* ---- the registry's and the readings' view: under the partition lock ----- */

void cs__part_detach(cs_part *p) {
    pthread_mutex_lock(&p->lock);
    p->pipe = NULL;
    pthread_mutex_unlock(&p->lock);
}

int64_t cs__part_next_offset(cs_part *p) {
    int64_t next = -1;
    pthread_mutex_lock(&p->lock);
    if (p->assigned && p->max_fetched >= 0) next = p->max_fetched + 1;
    pthread_mutex_unlock(&p->lock);
    return next;
}

size_t cs__part_held(cs_part *p) {
    pthread_mutex_lock(&p->lock);
    size_t held = p->held;
    pthread_mutex_unlock(&p->lock);
    return held;
}

void cs__part_set_end(cs_part *p, int64_t end, int64_t end_high) {
    pthread_mutex_lock(&p->lock);
    if (p->assigned) {
        p->end_reported = end;
        p->high_reported = end_high;
    }
    pthread_mutex_unlock(&p->lock);
}

void cs__part_metrics(cs_part *p, cs_part_metrics *m) {
    *m = (cs_part_metrics){.topic = p->topic, .partition = p->partition};
    pthread_mutex_lock(&p->lock);
    m->assigned = p->assigned;
    m->committed = p->last_committed;
    m->end = p->end_reported;
    m->end_high = p->high_reported;
    pthread_mutex_unlock(&p->lock);
    m->acked = atomic_load_explicit(&p->n_acked, memory_order_relaxed);
    m->dropped = atomic_load_explicit(&p->n_dropped, memory_order_relaxed);
    m->retried = atomic_load_explicit(&p->n_retried, memory_order_relaxed);
    m->retry_unsupported = atomic_load_explicit(&p->n_retry_unsupported, memory_order_relaxed);
    m->stale = atomic_load_explicit(&p->n_stale, memory_order_relaxed);
    m->dead_lettered = atomic_load_explicit(&p->n_dead_lettered, memory_order_relaxed);
}

/* ---- epochs: assign, revoke, release -------------------------------------- */

/* The lane with the fewest partitions assigned now, the first of them on a tie. */
static int least_loaded_lane(const cs_pipeline *p) {
    int best = 0;
    for (int i = 1; i < p->n_lanes; i++)
        if (p->lanes[i].parts_assigned < p->lanes[best].parts_assigned) best = i;
    return best;
}

/* The partitions held now are spread over the lanes: a lane chosen by the
 * order partitions were first seen piled the ones held after a few
 * cooperative rebalances onto some workers while others idled (#30).
 *
 * A partition changes lane only here, at a new assignment, because that is
 * when no record of it can run beside another in a different lane. Its
 * revoke bumped the epoch (cs__pipeline_release_partition), so its records
 * still queued in the old lane, or waiting for a delayed retry, are stale:
 * the worker discards them without running them (worker.c, admit); and the
 * revoke waited for the ones handed to a handler. Only when some of those
 * were still running or pending at the release (the drain deadline passed,
 * or the assignment was lost) could a handler of the partition still run in
 * its old lane: then the partition keeps that lane, so that its new records
 * queue behind that handler instead of running beside it (judged at the
 * last release only: a handler still running through two whole assignments
 * is not seen). Within an
 * assignment the lane never changes (cs__pipeline_renew_epoch keeps it): a
 * seek or a rewind leaves older deliveries queued and running in it. The
 * cost is that a revoke can leave the lanes uneven until the next
 * assignment: moving a partition that is assigned would have to wait until
 * nothing of it is queued, running or pending. */
static void place_in_lane(cs_pipeline *p, cs_part *part) {
    if (part->lane_counted) return; /* assigned again without a release: its records stay where they are */
    if (!part->lane_kept) part->lane = least_loaded_lane(p);
    p->lanes[part->lane].parts_assigned++;
    part->lane_counted = true;
}

/* At release: the partition no longer counts in its lane; `handlers_may_run`
 * (some of its deliveries were still running or pending) keeps the lane for
 * its next assignment. */
static void leave_lane(cs_pipeline *p, cs_part *part, bool handlers_may_run) {
    if (!part->lane_counted) return; /* released already: the close releases what a revoke did */
    p->lanes[part->lane].parts_assigned--;
    part->lane_counted = false;
    part->lane_kept = handlers_may_run;
}

void cs__pipeline_assign(cs_pipeline *p, cs_part *part) {
    place_in_lane(p, part);
    cs__pipeline_renew_epoch(p, part);
}

void cs__pipeline_renew_epoch(cs_pipeline *p, cs_part *part) {
    (void)p;
    atomic_store(&part->log_unknown, false); /* a new assignment starts from the group's position */
    pthread_mutex_lock(&part->lock);
    part->epoch++;
    part->assigned = true;
    part->held = 0;
    part->paused = false;
    part->dirty = false;
    part->last_committed = -1;
    part->last_meta[0] = '\0';
    part->n_prior = part->prior_next = 0;
    /* A seek or a rewind starts a new epoch too: what an earlier owner
     * settled is not skipped after one (a seek back means: read again). */
    cs__acked_set_clear(&part->restored_set);
    part->max_fetched = -1;
    part->passed_to = -1;
    part->end_reported = part->high_reported = -1;
    part->suspect_left = 0;
    part->out_of_memory = false;
    part->first_fetched = -1;
    part->stall_offset = -1;
    part->stall_since_ms = 0;
    cs__output_list_free(&part->window);
    if (part->tracker) cs_tracker_reset(part->tracker);
    pthread_mutex_unlock(&part->lock);
}

void cs__pipeline_stop_partition(cs_pipeline *p, cs_part *part) {
    (void)p;
    pthread_mutex_lock(&part->lock);
    part->assigned = false;
    pthread_mutex_unlock(&part->lock);
}

size_t cs__pipeline_wait_settled(cs_pipeline *p, cs_part *part, int64_t deadline_ms) {
    (void)p;
    pthread_mutex_lock(&part->lock);
    /* Tracked waits for settlements (queued records stay open and are read
     * again); Auto also lets the queued records run, because their positions
     * were stored when they were fetched and nobody would read them again. */
    while (part->tracker ? part->n_inflight > 0 : part->held > 0) {
        int64_t left = deadline_ms - cs__now_ms();
        if (left <= 0) break;
        struct timespec ts;
        cs__deadline_after(&ts, left);
        part->drain_waiters++;
        pthread_cond_timedwait(&part->drained, &part->lock, &ts);
        part->drain_waiters--;
    }
    size_t left = part->tracker ? part->n_inflight : part->held;
    pthread_mutex_unlock(&part->lock);
    return left;
}

void cs__pipeline_release_partition(cs_pipeline *p, cs_part *part) {
    pthread_mutex_lock(&part->lock);
    /* Running or pending past the drain deadline, or the assignment was lost:
     * its handler may still run in the partition's lane. */
    bool handlers_may_run = part->n_inflight > 0;
    part->epoch++; /* every delivery of the old epoch is stale from now on */
    part->assigned = false;
    part->held = 0;
    part->paused = false;
    /* Pending deliveries stay valid for their holders; they are detached from
     * the list so that a later settlement (stale) does not touch it. */
    cs_delivery *d, *after;
    CS_LIST_FOREACH_SAFE(d, &part->inflight, in_flight, after) {
        d->in_flight.next = d->in_flight.prev = NULL;
        d->listed = false;
    }
    CS_LIST_INIT(&part->inflight);
    part->n_inflight = 0;
    cs__output_list_free(&part->window); /* never committed: the next owner reads their sources again */
    cs__signal_drained(part);
    pthread_mutex_unlock(&part->lock);
    leave_lane(p, part, handlers_may_run);
}

/* ---- a seek: a new epoch at another offset -------------------------------- */

bool cs__part_can_seek(cs_part *part) {
    pthread_mutex_lock(&part->lock);
    bool yes = part->assigned;
    pthread_mutex_unlock(&part->lock);
    return yes;
}

bool cs__part_reread_from(cs_part *part, int64_t *to) {
    pthread_mutex_lock(&part->lock);
    bool assigned = part->assigned;
    if (assigned && part->tracker) {
        *to = cs_tracker_reread_from(part->tracker, *to);
        /* A window's settled records lose their outputs with the epoch:
         * read again from the committed position (or, with none, from the
         * first record fetched). */
        int64_t window = part->last_committed >= 0 ? part->last_committed : part->first_fetched;
        if (part->pipe && part->pipe->cfg.transactional && window >= 0 && window < *to) *to = window;
    }
    pthread_mutex_unlock(&part->lock);
    return assigned;
}

bool cs__part_seek(cs_pipeline *p, cs_part *part, int64_t offset, int64_t *from) {
    int64_t offsets[CS_PRIOR_MAX];
    uint32_t attempts[CS_PRIOR_MAX];
    char meta[CS_META_MAX];
    pthread_mutex_lock(&part->lock);
    if (!part->assigned) { /* being revoked: the next owner reads from the committed position */
        pthread_mutex_unlock(&part->lock);
        return false;
    }
    *from = part->max_fetched >= 0 ? part->max_fetched + 1 : part->last_committed;
    int64_t committed = part->last_committed;
    snprintf(meta, sizeof meta, "%s", part->last_meta);
    /* The attempt counts of the records still open, and of the earlier
     * owner's records not fetched yet, follow the seek for the records at or
     * after it: a record read again keeps its count, so max_attempts still
     * ends one that keeps failing; counts below the new offset would only
     * describe records the seek skipped. */
    int64_t all_off[CS_PRIOR_MAX];
    uint32_t all_att[CS_PRIOR_MAX];
    size_t n_all = part->tracker ? cs_tracker_open_attempts(part->tracker, all_off, all_att, CS_PRIOR_MAX) : 0;
    for (size_t i = part->prior_next; i < part->n_prior && n_all < CS_PRIOR_MAX; i++) {
        if (part->prior_off[i] <= part->max_fetched) continue;
        all_off[n_all] = part->prior_off[i];
        all_att[n_all++] = part->prior_att[i];
    }
    size_t n = 0;
    for (size_t i = 0; i < n_all; i++) {
        if (all_off[i] < offset) continue;
        offsets[n] = all_off[i];
        attempts[n++] = all_att[i];
    }
    pthread_mutex_unlock(&part->lock);
    /* As a window's rewind (window.c): every delivery of the old epoch is
     * stale from here on, and the committed position stays what the group
     * holds until records of the new epoch are tracked. */
    cs__pipeline_renew_epoch(p, part);
    cs__part_set_prior(part, committed, meta, offsets, attempts, n, false);
    return true;
}

/* ---- Tracked: what to commit -------------------------------------------------- */

/* Called with part->lock held: the position and metadata to commit now. */
void cs__part_state_locked(cs_part *part, bool clean, cs_commit_state *out) {
    int64_t offsets[CS_PRIOR_MAX];
    uint32_t attempts[CS_PRIOR_MAX];
    int64_t *pos = &out->pos;
    char *meta = out->meta;
    size_t cap = sizeof out->meta;
    out->part = part;
    out->topic = part->topic;
    out->partition = part->partition;
    out->truncated = false;
    out->reach = out->wanted = 0;
    *pos = cs_tracker_position(part->tracker);
    if (*pos < 0) *pos = part->last_committed; /* nothing fetched yet this epoch */
    /* Nothing open: the position moves past the offsets without a record
     * that follow the last record dispatched (cs__part_pass_to). */
    if (part->passed_to > *pos && cs_tracker_open_count(part->tracker) == 0) *pos = part->passed_to;
    size_t n = cs_tracker_open_attempts(part->tracker, offsets, attempts, CS_PRIOR_MAX);
    /* Counts from the committed metadata of records not fetched yet. */
    for (size_t i = part->prior_next; i < part->n_prior && n < CS_PRIOR_MAX; i++) {
        if (part->prior_off[i] <= part->max_fetched) continue;
        offsets[n] = part->prior_off[i];
        attempts[n++] = part->prior_att[i];
    }
    clean = clean && part->n_inflight == 0;
    if (!part->pipe || !part->pipe->cfg.acked_set || *pos < 0) {
        cs__meta_encode(meta, cap, clean, offsets, attempts, n);
        return;
    }
    /* The acked set: what was settled above the position, so that a next
     * owner skips it instead of handling it again. O(span) under the lock,
     * once per commit tick. */
    uint32_t runs[CS_ACKED_MAX_RUNS];
    size_t n_runs =
        cs__acked_collect(part->tracker, &part->restored_set, part->max_fetched, *pos, runs, CS_ACKED_MAX_RUNS);
    uint64_t wanted = 0, reach;
    for (size_t i = 0; i < n_runs; i++) wanted += runs[i];
    cs__meta_encode_set(meta, cap, clean, *pos, offsets, attempts, n, runs, n_runs, &reach);
    if (reach < wanted) {
        /* Counted here, logged by the committer from the state: no logging
         * under the partition lock. */
        atomic_fetch_add_explicit(&part->pipe->metadata_truncated, 1, memory_order_relaxed);
        out->truncated = true;
        out->reach = reach;
        out->wanted = wanted;
    }
}

bool cs__part_set_acked(cs_part *part, int64_t base, const uint32_t *runs, size_t n) {
    pthread_mutex_lock(&part->lock);
    /* Only for the epoch's first records: once some were fetched, the set
     * would be walked out of order. */
    bool ok = part->max_fetched < 0 && part->pipe && part->pipe->cfg.acked_set && part->tracker;
    if (ok) ok = cs__acked_set_load(&part->restored_set, base, runs, n);
    pthread_mutex_unlock(&part->lock);
    return ok;
}

bool cs__part_commit_state_now(cs_part *part, cs_commit_state *out) {
    if (cs__part_log_unknown(part)) return false; /* see cs__part_mark_log_unknown */
    pthread_mutex_lock(&part->lock);
    bool send = part->tracker != NULL;
    if (send) {
        cs__part_state_locked(part, false, out);
        send = out->pos >= 0;
    }
    pthread_mutex_unlock(&part->lock);
    return send;
}

bool cs__part_commit_state(cs_part *part, bool clean, cs_commit_state *out) {
    bool send = false;
    if (cs__part_log_unknown(part)) return false; /* see cs__part_mark_log_unknown */
    pthread_mutex_lock(&part->lock);
    /* A clean commit is sent even without news: it tells the next owner that
     * the record at the position was not being run when this one left. */
    if (part->tracker && (part->dirty || clean)) {
        cs__part_state_locked(part, clean, out);
        send = out->pos >= 0 && (out->pos != part->last_committed || strcmp(out->meta, part->last_meta) != 0);
        part->dirty = false;
    }
    pthread_mutex_unlock(&part->lock);
    return send;
}

void cs__part_pass_to(cs_part *part, int64_t next) {
    if (cs__part_log_unknown(part)) return; /* nothing is committed meanwhile */
    pthread_mutex_lock(&part->lock);
    if (part->assigned && part->tracker && cs_tracker_open_count(part->tracker) == 0 && next > part->passed_to) {
        int64_t pos = cs_tracker_position(part->tracker);
        if (pos < 0) pos = part->last_committed;
        if (next > pos) {
            part->passed_to = next;
            part->dirty = true; /* the next commit sends it (Tracked sends only news) */
        }
    }
    pthread_mutex_unlock(&part->lock);
}

void cs__part_last_commit(cs_part *part, int64_t *pos, char *meta, size_t cap) {
    pthread_mutex_lock(&part->lock);
    *pos = part->last_committed;
    snprintf(meta, cap, "%s", part->last_meta);
    pthread_mutex_unlock(&part->lock);
}

void cs__part_commit_done(cs_part *part, int64_t position, const char *meta, bool ok) {
    pthread_mutex_lock(&part->lock);
    /* The coordinator keeps the commit it applied last, and results come back
     * in the order it applied them. That need not be the order cstream sent
     * them: librdkafka retries a commit that met a coordinator error or a
     * dropped connection, so an older state can land after a newer one and
     * move the committed position back (tests/kafka/test_faults.c,
     * offset_commit_coordinator_errors). So a success says what the group holds
     * now, whatever was sent since, and a failure says nothing was stored; in
     * both cases the next tick compares the current state with what the group
     * holds and sends it only if they differ. */
    if (ok) {
        part->last_committed = position;
        snprintf(part->last_meta, sizeof part->last_meta, "%s", meta ? meta : "");
    }
    part->dirty = true;
    pthread_mutex_unlock(&part->lock);
}

void cs__part_set_prior(cs_part *part, int64_t committed, const char *meta, const int64_t *offsets,
                        const uint32_t *attempts, size_t n, bool suspect) {
    pthread_mutex_lock(&part->lock);
    /* The previous owner held at most max_open records past its position. */
    /* Only a cap needs the count to be exact across crashes. The window is at
     * most CS_SUSPECT_MAX records: each of them commits the position too, so a
     * record that kills the process further out is reached as it moves up. */
    size_t window = part->pipe ? part->pipe->cfg.max_open : 0;
    if (window > CS_SUSPECT_MAX) window = CS_SUSPECT_MAX;
    part->suspect_left = suspect && part->pipe && part->pipe->cfg.max_attempts > 0 ? window : 0;
    if (n > CS_PRIOR_MAX) n = CS_PRIOR_MAX;
    memcpy(part->prior_off, offsets, n * sizeof *offsets);
    memcpy(part->prior_att, attempts, n * sizeof *attempts);
    part->n_prior = n;
    part->prior_next = 0;
    part->last_committed = committed;
    snprintf(part->last_meta, sizeof part->last_meta, "%s", meta ? meta : "");
    pthread_mutex_unlock(&part->lock);
}

/* ---- deliveries in flight ---------------------------------------------------- */

static void inflight_add(cs_part *part, cs_delivery *d) {
    CS_LIST_INSERT_HEAD(&part->inflight, d, in_flight);
    part->n_inflight++;
    d->listed = true;
}

void cs__part_inflight_remove_locked(cs_part *part, cs_delivery *d) {
    CS_LIST_REMOVE(&part->inflight, d, in_flight);
    d->listed = false;
    if (--part->n_inflight == 0) cs__signal_drained(part);
}

/* ---- records handed out: admitted into the epoch ------------------------- */

/* Called with part->lock held: the attempts an earlier owner counted for this
 * offset (0 if none). Offsets arrive in increasing order. */
static int prior_attempts(cs_part *part, int64_t offset) {
    while (part->prior_next < part->n_prior && part->prior_off[part->prior_next] < offset) part->prior_next++;
    if (part->prior_next < part->n_prior && part->prior_off[part->prior_next] == offset)
        return (int)part->prior_att[part->prior_next];
    return 0;
}

/* With part->lock held: the epoch's fetch reached `offset` (the window's
 * first offset, and how far the committed metadata's counts were walked). */
static void note_fetched_locked(cs_part *part, int64_t offset) {
    if (part->first_fetched < 0) part->first_fetched = offset;
    part->max_fetched = offset;
}

size_t cs__part_admit(cs_part *part, cs_delivery **ds, size_t n, size_t max_open, cs_delivery_queue *refused,
                      cs_delivery_queue *skipped, size_t *n_skipped, bool *paused) {
    size_t done = 0;
    pthread_mutex_lock(&part->lock);
    for (; done < n; done++) {
        cs_delivery *d = ds[done];
        d->epoch = part->epoch;
        int tracked = part->tracker ? cs_tracker_delivered(part->tracker, d->offset, &d->seq) : 0;
        if (tracked == -2) {
            /* This record and those after it are not handed out, and the
             * committed position stays below them; the source sees `consumed`
             * fall short and stops the app. */
            part->out_of_memory = true;
            break;
        }
        if (tracked != 0) {
            /* Not increasing: librdkafka re-delivered an offset of this epoch
             * (it does after a seek). The open entry already covers it. */
            CS_STAILQ_INSERT_TAIL(refused, d, next);
            ds[done] = NULL;
            continue;
        }
        if (part->restored_set.n && cs__acked_set_take(&part->restored_set, d->offset)) {
            /* The group's verified acked set says an earlier owner settled
             * this record: it is delivered and settled at once, so the
             * position moves past it once the records before it settle,
             * and no handler sees it again. */
            cs_tracker_settle(part->tracker, d->seq);
            note_fetched_locked(part, d->offset);
            part->dirty = true;
            CS_STAILQ_INSERT_TAIL(skipped, d, next);
            ds[done] = NULL;
            (*n_skipped)++;
            continue;
        }
        if (part->restored_set.n && !cs__acked_set_reaches(&part->restored_set, d->offset + 1))
            cs__acked_set_clear(&part->restored_set); /* walked to its end */
        if (part->tracker) {
            d->attempt = prior_attempts(part, d->offset);
            /* Keep an earlier owner's count in the metadata until the record runs. */
            if (d->attempt > 0) cs_tracker_set_attempts(part->tracker, d->seq, (uint32_t)d->attempt);
        }
        note_fetched_locked(part, d->offset);
        part->held++;
    }
    if (!part->paused && cs__part_load(part) >= max_open) *paused = part->paused = true;
    pthread_mutex_unlock(&part->lock);
    return done;
}

/* ---- a run about to start (worker.c) ------------------------------------- */

static bool runnable_locked(cs_pipeline *p, const cs_part *part, const cs_delivery *d) {
    if (atomic_load(&p->crashed) || d->epoch != part->epoch || !part->assigned) return false;
    int64_t deadline = atomic_load(&p->drain_deadline_ms);
    return deadline == 0 || cs__now_ms() < deadline;
}

/* Tracked: the attempt about to start counts from now, just before the
 * handler runs (after any decode, which may wait for a registry and is not
 * an attempt): it goes into the next commit's metadata, so that it survives
 * a crash of this process. Right after an owner died, the record may be the
 * one that killed it: its attempt is committed before it runs (returns true:
 * the caller calls precommit once the lock is released). */
static bool count_start_locked(cs_pipeline *p, cs_part *part, cs_delivery *d) {
    if (!part->tracker || !runnable_locked(p, part, d)) return false;
    cs_tracker_set_attempts(part->tracker, d->seq, (uint32_t)cs__counted_attempts(d) + 1);
    part->dirty = true;
    if (part->suspect_left == 0 || !p->cfg.precommit) return false;
    part->suspect_left--;
    return true;
}

bool cs__part_runnable(cs_pipeline *p, cs_part *part, const cs_delivery *d) {
    pthread_mutex_lock(&part->lock);
    bool ok = runnable_locked(p, part, d);
    pthread_mutex_unlock(&part->lock);
    return ok;
}

bool cs__part_start_run(cs_pipeline *p, cs_part *part, cs_delivery *d, bool count, bool *precommit) {
    pthread_mutex_lock(&part->lock);
    bool run = runnable_locked(p, part, d);
    if (run) inflight_add(part, d);
    if (run && count) *precommit = count_start_locked(p, part, d);
    pthread_mutex_unlock(&part->lock);
    return run;
}

bool cs__part_count_start(cs_pipeline *p, cs_part *part, cs_delivery *d) {
    pthread_mutex_lock(&part->lock);
    bool precommit = count_start_locked(p, part, d);
    pthread_mutex_unlock(&part->lock);
    return precommit;
}

void cs__part_recount_attempts(cs_part *part, const cs_delivery *d) {
    pthread_mutex_lock(&part->lock);
    if (part->tracker && d->epoch == part->epoch) {
        cs_tracker_set_attempts(part->tracker, d->seq, (uint32_t)cs__counted_attempts(d));
        part->dirty = true;
    }
    pthread_mutex_unlock(&part->lock);
}

void cs__part_unhold(cs_part *part, const cs_delivery *d) {
    pthread_mutex_lock(&part->lock);
    if (d->epoch == part->epoch && part->held > 0 && --part->held == 0) cs__signal_drained(part);
    pthread_mutex_unlock(&part->lock);
}

void cs__part_add_prior(cs_part *part, int64_t offset, uint32_t attempt) {
    pthread_mutex_lock(&part->lock);
    /* Ascending and unique, as cs__part_set_prior keeps them. */
    size_t i = part->prior_next;
    while (i < part->n_prior && part->prior_off[i] < offset) i++;
    if (i < part->n_prior && part->prior_off[i] == offset) {
        if (part->prior_att[i] < attempt) part->prior_att[i] = attempt;
    } else if (part->n_prior < CS_PRIOR_MAX) {
        memmove(part->prior_off + i + 1, part->prior_off + i, (part->n_prior - i) * sizeof *part->prior_off);
        memmove(part->prior_att + i + 1, part->prior_att + i, (part->n_prior - i) * sizeof *part->prior_att);
        part->prior_off[i] = offset;
        part->prior_att[i] = attempt;
        part->n_prior++;
    }
    pthread_mutex_unlock(&part->lock);
}

/* ---- settlement and the Transactional window (under the caller's lock) ---- */

void cs__part_settled_locked(cs_part *part, const cs_delivery *d) {
    if (!part->tracker) return;
    cs_tracker_settle(part->tracker, d->seq);
    part->dirty = true;
}

void cs__part_release_held_locked(cs_part *part, bool unassign) {
    part->held--;
    if (unassign) part->assigned = false;
}

void cs__part_window_add_locked(cs_part *part, cs_delivery *d) {
    CS_STAILQ_CONCAT(&part->window, &d->outputs, next);
    if (d->offset == part->stall_offset) part->stall_offset = -1; /* the record holding the window settled */
}

void cs__part_window_hold_locked(cs_part *part, cs_delivery *d) {
    cs__output_list_free(&d->outputs); /* outputs of a failed attempt never leave */
    if (d->outage_runs > 0) {
        /* A free run (its schema registry is down): not the record failing,
         * so no stall clock, as for a decode that waits; an abort and rewind
         * every stall timeout would only re-run the records above it. */
        if (part->stall_offset == d->offset) part->stall_offset = -1;
        return;
    }
    if (part->stall_offset < 0 || d->offset < part->stall_offset) {
        part->stall_offset = d->offset;
        part->stall_since_ms = cs__now_ms();
    }
}

void cs__part_window_take_locked(cs_part *part, int64_t pos, cs_output_list *taken, size_t *n_outputs) {
    /* Settlement order is not offset order: walk the whole window and keep,
     * in order, what is not yet below the position. */
    cs_output_list keep = {0};
    cs_output *o, *after;
    CS_STAILQ_FOREACH_SAFE(o, &part->window, next, after) {
        if (pos >= 0 && o->source_offset < pos) {
            o->source_part = part;
            CS_STAILQ_INSERT_TAIL(taken, o, next);
            (*n_outputs)++;
        } else {
            CS_STAILQ_INSERT_TAIL(&keep, o, next);
        }
    }
    part->window = keep;
    part->dirty = false;
}

void cs__part_window_unstall_locked(cs_part *part) { part->stall_offset = -1; }

/* ---- the pause at max_open ------------------------------------------------- */

size_t cs__part_room(cs_part *part, size_t max_open) {
    pthread_mutex_lock(&part->lock);
    size_t load = cs__part_load(part);
    size_t room = part->paused || load >= max_open ? 0 : max_open - load;
    pthread_mutex_unlock(&part->lock);
    return room;
}

bool cs__part_paused(cs_part *part) {
    pthread_mutex_lock(&part->lock);
    bool paused = part->paused;
    pthread_mutex_unlock(&part->lock);
    return paused;
}

bool cs__part_should_resume(cs_pipeline *p, cs_part *part) {
    pthread_mutex_lock(&part->lock);
    bool yes = part->paused && part->assigned && cs__part_load(part) <= cs__resume_mark(p);
    if (yes) part->paused = false;
    pthread_mutex_unlock(&part->lock);
    return yes;
}
