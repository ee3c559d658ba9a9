/* pipeline_stats.c — what the pipeline reports: the counters of its lanes and
 * partitions (cs_broker_sub_counters, /metrics), handler durations, what it holds and
 * the next offset of a partition.
 *
 * Owns: the pipeline's counters of commits, pauses, transactions, outputs
 * and aborts (the source counts through cs__pipeline_count_*). Threads: any (readers); the counters are atomics bumped by the fetch
 * thread, workers and settling threads. Locks: parts_lock, then each
 * partition's lock, never held across a callback that blocks. */
#define _POSIX_C_SOURCE 200809L
#include "core/pipeline_internal.h"

#include <string.h>

/* ---- observation ---------------------------------------------------------- */

int64_t cs__pipeline_next_offset(cs_pipeline *p, const char *topic, int32_t partition) {
    /* Under parts_lock: the fetch thread may be adding to the index. */
    pthread_mutex_lock(&p->parts_lock);
    cs_part *part = cs__part_index_find(&p->by_name, topic, partition);
    int64_t next = part ? cs__part_next_offset(part) : -1;
    pthread_mutex_unlock(&p->parts_lock);
    return next;
}

size_t cs__pipeline_busy(cs_pipeline *p) {
    size_t busy = 0;
    pthread_mutex_lock(&p->parts_lock);
    for (size_t i = 0; i < p->n_parts; i++) busy += cs__part_held(p->parts[i]);
    pthread_mutex_unlock(&p->parts_lock);
    return busy;
}

void cs__pipeline_stats(cs_pipeline *p, cs_broker_sub_counters *out) {
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
    out->db_fenced = atomic_load(&p->db_fenced);
    out->outputs = atomic_load(&p->outputs);
    out->skipped_settled = atomic_load(&p->skipped_settled);
    out->metadata_truncated = atomic_load(&p->metadata_truncated);
}

void cs__pipeline_each_part(cs_pipeline *p, void (*fn)(void *arg, const cs_part_metrics *m), void *arg) {
    pthread_mutex_lock(&p->parts_lock);
    for (size_t i = 0; i < p->n_parts; i++) {
        cs_part_metrics m;
        cs__part_metrics(p->parts[i], &m);
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

void cs__pipeline_count_fenced(cs_pipeline *p) { atomic_fetch_add_explicit(&p->db_fenced, 1, memory_order_relaxed); }

size_t cs__pipeline_settled(cs_pipeline *p) { return atomic_load_explicit(&p->settled, memory_order_relaxed); }

size_t cs__pipeline_take_settled(cs_pipeline *p) { return atomic_exchange(&p->settled, 0); }
