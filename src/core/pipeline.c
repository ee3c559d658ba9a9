/* pipeline.c — partitions, counters and the pipeline's creation and stop (the
 * generic core of a subscription).
 *
 * The pipeline's state, and what its files share, is in pipeline_internal.h,
 * which also says what it owns, which threads touch it and its locks. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline_internal.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

/* Deliveries a lane may have waiting before the source stops handing out:
 * a few milliseconds of work at full speed, enough to keep a worker busy
 * while the fetch thread takes the next records. More would only hold
 * deliveries (about 370 bytes each, and their spares) for records that wait
 * as well in the source's buffer: with many partitions under Tracked's
 * max_open that was most of the consumer's memory. */
#define LANE_QUEUE 4096

/* Spare deliveries the pipeline keeps (delivery_pool.h): about 3 MB. The
 * lanes hold at most LANE_QUEUE waiting records per worker, and the fetch
 * thread hands out up to 256 records of a partition at a time: this covers
 * what is in flight at once. Kept per partition (512 each) they held 33 MB
 * on 192 partitions, a quarter of the consumer's heap at its peak. */
#define SPARES_KEPT 8192

cs_pipeline *cs__pipeline_new(const cs_pipeline_config *cfg) {
    cs_pipeline *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->cfg = *cfg;
    p->name = strdup(cfg->name ? cfg->name : "?");
    p->n_lanes = cfg->workers > 0 ? cfg->workers : 1;
    p->queue_cap = (size_t)p->n_lanes * (cfg->max_batch * 2 > LANE_QUEUE ? cfg->max_batch * 2 : LANE_QUEUE);
    pthread_mutex_init(&p->gate_lock, NULL);
    pthread_cond_init(&p->gate_cv, NULL);
    p->lanes = calloc((size_t)p->n_lanes, sizeof *p->lanes);
    if (!p->name || !p->lanes) {
        free(p->name);
        free(p->lanes);
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->parts_lock, NULL);
    pthread_mutex_init(&p->delay_lock, NULL);
    cs__cond_init_monotonic(&p->delay_cv); /* timed: retry_after */
    for (int i = 0; i < p->n_lanes; i++) {
        lane *l = &p->lanes[i];
        l->pipe = p;
        pthread_mutex_init(&l->lock, NULL);
        pthread_cond_init(&l->ready, NULL);
        pthread_mutex_init(&l->run_lock, NULL);
        if (cfg->batch_handler) {
            l->batch = calloc(cfg->max_batch, sizeof *l->batch);
            l->outcomes = calloc(cfg->max_batch, sizeof *l->outcomes);
            if (!l->batch || !l->outcomes) {
                cs__pipeline_destroy(p);
                return NULL;
            }
        }
    }
    p->spares = cs__delivery_pool_new(CS_SPARES ? SPARES_KEPT : 0);
    if (!p->spares) {
        cs__pipeline_destroy(p);
        return NULL;
    }
    if (pthread_create(&p->delay_thread, NULL, cs__delay_main, p) != 0) {
        cs__pipeline_destroy(p);
        return NULL;
    }
    p->delay_started = true;
    for (int i = 0; i < p->n_lanes; i++) {
        lane *l = &p->lanes[i];
        if (pthread_create(&l->thread, NULL, cs__worker_main, l) != 0) {
            CS_LOG_ERR("worker thread could not start subscription=%s lane=%d", p->name, i);
            cs__pipeline_destroy(p);
            return NULL;
        }
        l->started = true;
    }
    return p;
}

/* ---- partitions ---------------------------------------------------------- */

cs_part *cs__pipeline_part(cs_pipeline *p, const char *topic, int32_t partition, const cs_source_ops *ops) {
    cs_part *hit = p->last_hit;
    if (hit && hit->partition == partition && !strcmp(hit->topic, topic)) return hit;
    for (size_t i = 0; i < p->n_parts; i++) {
        cs_part *c = p->parts[i];
        if (c->partition == partition && !strcmp(c->topic, topic)) return p->last_hit = c;
    }
    cs_part *part = cs__part_new(p, topic, partition, ops, p->cfg.tracked, p->spares);
    if (!part) return NULL;
    part->lane = (int)(p->n_parts % (size_t)p->n_lanes);
    pthread_mutex_lock(&p->parts_lock);
    if (p->n_parts == p->cap_parts) {
        size_t cap = p->cap_parts ? p->cap_parts * 2 : 16;
        cs_part **grown = realloc(p->parts, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&p->parts_lock);
            cs__part_unref(part);
            return NULL;
        }
        p->parts = grown;
        p->cap_parts = cap;
    }
    p->parts[p->n_parts++] = part;
    pthread_mutex_unlock(&p->parts_lock);
    return p->last_hit = part;
}

void cs__pipeline_assign(cs_pipeline *p, cs_part *part) {
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
    part->max_fetched = -1;
    part->suspect_left = 0;
    part->out_of_memory = false;
    part->first_fetched = -1;
    part->stall_offset = -1;
    part->stall_since_ms = 0;
    cs__output_free_all(part->window);
    part->window = NULL;
    part->window_tail = &part->window;
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
    (void)p;
    pthread_mutex_lock(&part->lock);
    part->epoch++; /* every delivery of the old epoch is stale from now on */
    part->assigned = false;
    part->held = 0;
    part->paused = false;
    /* Pending deliveries stay valid for their holders; they are detached from
     * the list so that a later settlement (stale) does not touch it. */
    for (cs_delivery *d = part->inflight, *next; d; d = next) {
        next = d->next;
        d->next = d->prev = NULL;
        d->listed = false;
    }
    part->inflight = NULL;
    part->n_inflight = 0;
    cs__output_free_all(part->window); /* never committed: the next owner reads their sources again */
    part->window = NULL;
    part->window_tail = &part->window;
    cs__signal_drained(part);
    pthread_mutex_unlock(&part->lock);
}

/* Called with part->lock held: the position and metadata to commit now. */
void cs__part_state_locked(cs_part *part, bool clean, int64_t *pos, char *meta, size_t cap) {
    int64_t offsets[CS_PRIOR_MAX];
    uint32_t attempts[CS_PRIOR_MAX];
    *pos = cs_tracker_position(part->tracker);
    if (*pos < 0) *pos = part->last_committed; /* nothing fetched yet this epoch */
    size_t n = cs_tracker_open_attempts(part->tracker, offsets, attempts, CS_PRIOR_MAX);
    /* Counts from the committed metadata of records not fetched yet. */
    for (size_t i = part->prior_next; i < part->n_prior && n < CS_PRIOR_MAX; i++) {
        if (part->prior_off[i] <= part->max_fetched) continue;
        offsets[n] = part->prior_off[i];
        attempts[n++] = part->prior_att[i];
    }
    cs__meta_encode(meta, cap, clean && part->n_inflight == 0, offsets, attempts, n);
}

bool cs__part_commit_state_now(cs_part *part, int64_t *pos, char *meta, size_t cap) {
    pthread_mutex_lock(&part->lock);
    bool send = part->tracker != NULL;
    if (send) {
        cs__part_state_locked(part, false, pos, meta, cap);
        send = *pos >= 0;
    }
    pthread_mutex_unlock(&part->lock);
    return send;
}

bool cs__part_commit_state(cs_part *part, bool clean, int64_t *pos, char *meta, size_t cap) {
    bool send = false;
    pthread_mutex_lock(&part->lock);
    /* A clean commit is sent even without news: it tells the next owner that
     * the record at the position was not being run when this one left. */
    if (part->tracker && (part->dirty || clean)) {
        cs__part_state_locked(part, clean, pos, meta, cap);
        send = *pos >= 0 && (*pos != part->last_committed || strcmp(meta, part->last_meta) != 0);
        part->dirty = false;
    }
    pthread_mutex_unlock(&part->lock);
    return send;
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

/* ---- stopping ------------------------------------------------------------- */

static void stop_and_join(cs_pipeline *p) {
    cs__stop_delays(p);
    for (int i = 0; i < p->n_lanes; i++) {
        lane *l = &p->lanes[i];
        pthread_mutex_lock(&l->lock);
        l->stop = true;
        pthread_cond_broadcast(&l->ready);
        pthread_mutex_unlock(&l->lock);
    }
    for (int i = 0; i < p->n_lanes; i++) {
        lane *l = &p->lanes[i];
        if (l->started) pthread_join(l->thread, NULL);
        l->started = false;
    }
}

size_t cs__pipeline_drain(cs_pipeline *p, int64_t deadline_ms) {
    atomic_store(&p->stopping, true);
    atomic_store(&p->drain_deadline_ms, deadline_ms);
    stop_and_join(p);
    /* The lanes are empty; pending deliveries (and replies awaiting their
     * report) get the rest of the time. The registry only grows on the fetch
     * thread, which has stopped. */
    size_t left = 0;
    for (size_t i = 0; i < p->n_parts; i++) left += cs__pipeline_wait_settled(p, p->parts[i], deadline_ms);
    return left;
}

void cs__pipeline_crash(cs_pipeline *p) {
    atomic_store(&p->crashed, true);
    atomic_store(&p->stopping, true);
    stop_and_join(p);
}

void cs__pipeline_destroy(cs_pipeline *p) {
    if (!p) return;
    atomic_store(&p->stopping, true);
    atomic_store(&p->drain_deadline_ms, 1); /* discard anything still queued */
    stop_and_join(p);
    for (size_t i = 0; i < p->n_parts; i++) {
        cs_part *part = p->parts[i];
        pthread_mutex_lock(&part->lock);
        part->pipe = NULL;
        pthread_mutex_unlock(&part->lock);
        cs__part_unref(part);
    }
    for (int i = 0; i < p->n_lanes; i++) {
        pthread_mutex_destroy(&p->lanes[i].lock);
        pthread_cond_destroy(&p->lanes[i].ready);
        pthread_mutex_destroy(&p->lanes[i].run_lock);
        free(p->lanes[i].batch);
        free(p->lanes[i].outcomes);
    }
    pthread_mutex_destroy(&p->parts_lock);
    pthread_mutex_destroy(&p->delay_lock);
    pthread_cond_destroy(&p->delay_cv);
    pthread_mutex_destroy(&p->gate_lock);
    pthread_cond_destroy(&p->gate_cv);
    cs__delivery_pool_unref(p->spares);
    free(p->delayed);
    free(p->parts);
    free(p->lanes);
    free(p->name);
    free(p);
}

/* ---- observation ---------------------------------------------------------- */

int64_t cs__pipeline_next_offset(cs_pipeline *p, const char *topic, int32_t partition) {
    int64_t next = -1;
    pthread_mutex_lock(&p->parts_lock);
    for (size_t i = 0; i < p->n_parts; i++) {
        cs_part *part = p->parts[i];
        if (part->partition != partition || strcmp(part->topic, topic)) continue;
        pthread_mutex_lock(&part->lock);
        if (part->assigned && part->max_fetched >= 0) next = part->max_fetched + 1;
        pthread_mutex_unlock(&part->lock);
    }
    pthread_mutex_unlock(&p->parts_lock);
    return next;
}

size_t cs__pipeline_busy(cs_pipeline *p) {
    size_t busy = 0;
    pthread_mutex_lock(&p->parts_lock);
    for (size_t i = 0; i < p->n_parts; i++) {
        cs_part *part = p->parts[i];
        pthread_mutex_lock(&part->lock);
        busy += part->held;
        pthread_mutex_unlock(&part->lock);
    }
    pthread_mutex_unlock(&p->parts_lock);
    return busy;
}

void cs__pipeline_stats(cs_pipeline *p, cs_sub_stats *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < p->n_lanes; i++) {
        lane *l = &p->lanes[i];
        out->delivered += atomic_load(&l->delivered);
        out->acked += atomic_load(&l->acked);
        out->dropped += atomic_load(&l->dropped);
        out->retried += atomic_load(&l->retried);
        out->retry_unsupported += atomic_load(&l->retry_unsupported);
        out->stale += atomic_load(&l->stale);
        out->slow_handlers += atomic_load(&l->slow);
        out->decode_failures += atomic_load(&l->decode_failures);
        out->dead_lettered += atomic_load(&l->dead_lettered);
        out->exhausted += atomic_load(&l->exhausted);
    }
    out->commits = atomic_load(&p->commits);
    out->commit_failures = atomic_load(&p->commit_failures);
    out->pauses = atomic_load(&p->pauses);
    out->transactions = atomic_load(&p->transactions);
    out->aborts = atomic_load(&p->aborts);
    out->outputs = atomic_load(&p->outputs);
}

void cs__pipeline_each_part(cs_pipeline *p, void (*fn)(void *arg, const cs_part_metrics *m), void *arg) {
    pthread_mutex_lock(&p->parts_lock);
    for (size_t i = 0; i < p->n_parts; i++) {
        cs_part *part = p->parts[i];
        cs_part_metrics m = {.topic = part->topic, .partition = part->partition};
        pthread_mutex_lock(&part->lock);
        m.assigned = part->assigned;
        m.committed = part->last_committed;
        pthread_mutex_unlock(&part->lock);
        m.acked = atomic_load_explicit(&part->n_acked, memory_order_relaxed);
        m.dropped = atomic_load_explicit(&part->n_dropped, memory_order_relaxed);
        m.retried = atomic_load_explicit(&part->n_retried, memory_order_relaxed);
        m.retry_unsupported = atomic_load_explicit(&part->n_retry_unsupported, memory_order_relaxed);
        m.stale = atomic_load_explicit(&part->n_stale, memory_order_relaxed);
        m.dead_lettered = atomic_load_explicit(&part->n_dead_lettered, memory_order_relaxed);
        fn(arg, &m);
    }
    pthread_mutex_unlock(&p->parts_lock);
}

void cs__pipeline_handler_durations(cs_pipeline *p, cs_histogram_snap *acc) {
    for (int i = 0; i < p->n_lanes; i++) cs__histogram_read(&p->lanes[i].handler_seconds, acc);
}

void cs__pipeline_count_commit(cs_pipeline *p, bool ok) {
    atomic_fetch_add_explicit(ok ? &p->commits : &p->commit_failures, 1, memory_order_relaxed);
}

void cs__pipeline_count_pause(cs_pipeline *p) { atomic_fetch_add_explicit(&p->pauses, 1, memory_order_relaxed); }

void cs__pipeline_count_transaction(cs_pipeline *p, size_t outputs) {
    atomic_fetch_add_explicit(&p->transactions, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->outputs, outputs, memory_order_relaxed);
}

void cs__pipeline_count_abort(cs_pipeline *p) { atomic_fetch_add_explicit(&p->aborts, 1, memory_order_relaxed); }

size_t cs__pipeline_settled(cs_pipeline *p) { return atomic_load_explicit(&p->settled, memory_order_relaxed); }

size_t cs__pipeline_take_settled(cs_pipeline *p) { return atomic_exchange(&p->settled, 0); }
