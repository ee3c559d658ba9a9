/* pipeline.c — a subscription's pipeline: its creation, its registry of
 * partitions, and its stop (drain, crash, destroy).
 *
 * The pipeline is cstream's generic core, from fetched record to settlement
 * (pipeline.h). Its state and the files that share it are described in
 * pipeline_internal.h. Owns: the pipeline's life, its lanes' creation and
 * its registry of partitions. Locks: parts_lock (level 4, src/lock_order.h)
 * around the registry. Threads: the creating thread starts the delay timer
 * and the workers; the fetch thread registers partitions; the lifecycle
 * thread drains or crashes and destroys. The stop joins threads with no lock
 * held. */
#define _POSIX_C_SOURCE 200809L
#include "core/pipeline_internal.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"

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
    if (!cs__delay_start(p)) {
        cs__pipeline_destroy(p);
        return NULL;
    }
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

cs_part *cs__pipeline_find_part(cs_pipeline *p, const char *topic, int32_t partition) {
    /* No lock: the fetch thread is the registry's only writer. */
    return cs__part_index_find(&p->by_name, topic, partition);
}

cs_part *cs__pipeline_part(cs_pipeline *p, const char *topic, int32_t partition, const cs_source_ops *ops) {
    cs_part *hit = cs__pipeline_find_part(p, topic, partition);
    if (hit) return hit;
    cs_part *part = cs__part_new(p, topic, partition, ops, p->cfg.tracked, p->spares);
    if (!part) return NULL;
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
    /* The index borrows the partition's own copy of its topic, which lives
     * as long as the registry's reference. */
    if (!cs__part_index_add(&p->by_name, cs__part_topic(part), partition, part)) {
        pthread_mutex_unlock(&p->parts_lock);
        cs__part_unref(part);
        return NULL;
    }
    p->parts[p->n_parts++] = part;
    pthread_mutex_unlock(&p->parts_lock);
    return part;
}

/* ---- stopping ------------------------------------------------------------- */

/* Tells the delay timer and the workers to stop, and joins the timer (it runs
 * no user code: its join is short); the workers finish on their own. */
static void tell_stop(cs_pipeline *p) {
    cs__stop_delays(p);
    for (int i = 0; i < p->n_lanes; i++) {
        lane *l = &p->lanes[i];
        pthread_mutex_lock(&l->lock);
        l->stop = true;
        pthread_cond_broadcast(&l->ready);
        pthread_mutex_unlock(&l->lock);
    }
}

/* Joins the workers: each one runs what its lane holds (until the drain
 * deadline, if any) and its running handler to the end, however long. */
static void join_workers(cs_pipeline *p) {
    for (int i = 0; i < p->n_lanes; i++) {
        lane *l = &p->lanes[i];
        if (l->started) pthread_join(l->thread, NULL);
        l->started = false;
    }
}

static void stop_and_join(cs_pipeline *p) {
    tell_stop(p);
    join_workers(p);
}

void cs__pipeline_drain_begin(cs_pipeline *p, int64_t deadline_ms) {
    atomic_store(&p->stopping, true);
    atomic_store(&p->drain_deadline_ms, deadline_ms);
    tell_stop(p);
}

size_t cs__pipeline_drain_wait(cs_pipeline *p) {
    int64_t deadline_ms = atomic_load(&p->drain_deadline_ms);
    join_workers(p);
    /* The lanes are empty; pending deliveries (and replies awaiting their
     * report) get the rest of the time. The registry only grows on the fetch
     * thread, which has stopped. */
    size_t left = 0;
    for (size_t i = 0; i < p->n_parts; i++) left += cs__pipeline_wait_settled(p, p->parts[i], deadline_ms);
    return left;
}

size_t cs__pipeline_drain(cs_pipeline *p, int64_t deadline_ms) {
    cs__pipeline_drain_begin(p, deadline_ms);
    return cs__pipeline_drain_wait(p);
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
        cs__part_detach(p->parts[i]);
        cs__part_unref(p->parts[i]);
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
    cs__heap_free(&p->delayed);
    cs__part_index_free(&p->by_name);
    free(p->parts);
    free(p->lanes);
    free(p->name);
    free(p);
}
