/* pipeline.c — the pipeline's creation, its partition registry, its stop and
 * its counters (the generic core of a subscription).
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
