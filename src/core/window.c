/* window.c — Transactional windows: which outputs a transaction may carry,
 * when a retried record has held a window too long, and how a partition's
 * window is aborted and read again.
 *
 * The rule that makes a transaction exactly-once: it commits a partition's
 * position P (the lowest open record) and carries only the outputs of
 * records below P. An output of a record at or above P waits on the
 * partition's window for a later transaction: if the process died after
 * committing it with P, that record would be read again and produce it twice.
 *
 * Owns: nothing: the window is the partition's (partition.c's
 * cs__part_window_*_locked, cs__part_add_prior). Locks: the partition lock
 * while a window is taken and its stall read; nothing is called out while
 * it is held. Threads: workers append to a window when they settle
 * (settle.c, under the partition lock); the fetch thread takes from it and
 * rewinds. */
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "core/partition_internal.h"
#include "core/pipeline.h"

bool cs__window_take(cs_part *part, bool clean, cs_commit_state *out, cs_output_list *taken, size_t *n_outputs) {
    if (cs__part_log_unknown(part)) return false; /* see cs__part_mark_log_unknown */
    pthread_mutex_lock(&part->lock);
    bool news = false;
    if (part->tracker) {
        cs__part_state_locked(part, clean, out);
        size_t before = *n_outputs;
        cs__part_window_take_locked(part, out->pos, taken, n_outputs);
        news = *n_outputs > before ||
               (out->pos >= 0 && (out->pos != part->last_committed || strcmp(out->meta, part->last_meta) != 0));
    }
    pthread_mutex_unlock(&part->lock);
    return news;
}

bool cs__window_stalled(cs_part *part, int64_t now_ms, int stall_ms) {
    pthread_mutex_lock(&part->lock);
    bool stalled = part->assigned && part->stall_offset >= 0 && now_ms - part->stall_since_ms >= stall_ms;
    if (stalled && part->tracker && cs_tracker_lowest_open(part->tracker) != part->stall_offset)
        stalled = false; /* something below it is open too: the window is not held by the retry alone */
    if (stalled) cs__part_window_unstall_locked(part);
    pthread_mutex_unlock(&part->lock);
    return stalled;
}

int64_t cs__window_rewind(cs_pipeline *p, cs_part *part) {
    int64_t offsets[CS_PRIOR_MAX];
    uint32_t attempts[CS_PRIOR_MAX];
    char meta[CS_META_MAX];
    pthread_mutex_lock(&part->lock);
    if (!part->assigned) { /* being revoked: released by the revoke, read again by the next owner */
        pthread_mutex_unlock(&part->lock);
        return -2;
    }
    int64_t committed = part->last_committed;
    int64_t seek = committed >= 0 ? committed : part->first_fetched;
    snprintf(meta, sizeof meta, "%s", part->last_meta);
    /* Attempt counts of the open records survive the rewind: a record that
     * keeps failing still reaches max_attempts. */
    size_t n = part->tracker ? cs_tracker_open_attempts(part->tracker, offsets, attempts, CS_PRIOR_MAX) : 0;
    pthread_mutex_unlock(&part->lock);
    /* A new epoch at `seek`: every delivery of the window becomes stale (its
     * outputs go with it). Those still running or pending stay on the
     * in-flight list, so that a revoke or the stop waits for them and releases
     * their records before the consumer closes. */
    cs__pipeline_renew_epoch(p, part);
    cs__part_set_prior(part, committed, meta, offsets, attempts, n, false);
    return seek;
}

void cs__window_output_failed(cs_part *part, int64_t offset, uint32_t attempt) {
    /* Into the earlier-owner counts: the record is read again with this many
     * runs behind it, so max_attempts ends a record whose output can never
     * be produced, as for a failed reply under Tracked. */
    cs__part_add_prior(part, offset, attempt);
}
