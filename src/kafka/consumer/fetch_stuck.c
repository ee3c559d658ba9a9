/* fetch_stuck.c — a stuck partition: one that stopped settling, at max_open,
 * is paused in librdkafka once its backlog passes its share of the fetch
 * buffer, and resumed once it settles; a partition with a quarter of the
 * buffer in flight gets no more (cs__fetch_out_capped).
 *
 * Owns: fetch_part.settled_seen. Locks: none. Threads: the fetch thread only. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/broker.h"
#include "base/error.h"
#include "kafka/consumer/consumer_internal.h"

/* ---- a stuck partition ---------------------------------------------------------
 * A partition at max_open that stops settling (a stuck handler, a long
 * retry_after) keeps receiving records in the shared recq, and they must be
 * taken to reach the other partitions' records behind them. Its backlog is
 * capped at a fair share of the budget: past it, and with the store at least
 * half full, the partition is paused in librdkafka (the last resort; its
 * records left in recq become outdated and are dropped), and resumed, with a
 * seek to `next`, once its backlog is down to half the share. A single
 * partition is never paused: there is no one to make room for.
 *
 * A paused partition keeps its share of backlog (cs__fetch_trim); the rest
 * is read again after the resume (seek to `next`, now its first dropped
 * record). One take can fill the store with one partition's records before
 * the check sees it, and a backlog that fills the store would keep every
 * partition from being taken. The records dropped were never handed out:
 * nothing was stored (Auto) or tracked (Tracked) for them. */

/* How long a partition at max_open settles and hands out nothing, with its
 * backlog over its share, before it counts as stuck. Progress is counted from
 * settlements too: at max_open the pipeline hands out again only once half of
 * max_open settled, and a slow but moving partition must not look stuck
 * meanwhile; partitions evenly at max_open in a full buffer are normal flow. */
#define STUCK_MS 500

/* Records that left the partition for good (a retry is no progress: the
 * record comes back; Auto's unsupported retry moves on). */
/* A partition whose records handed out and not settled hold a quarter of
 * the buffer gets no more: with Tracked's max_open of 10,000, a stuck
 * partition of 4 KiB records would otherwise hold the whole buffer in flight
 * (those records cannot be dropped), and every other partition would stall.
 * It counts as at max_open (cs__fetch_stuck_check). A single partition has no one to
 * make room for. */
bool cs__fetch_out_capped(cs_consumer *c, const fetch_part *fp) {
    return c->fetch.n_parts > 1 && cs__part_out_bytes(fp->part) >= cs__store_budget(c->take.store) / 4;
}

/* At max_open, or at its quarter of the buffer in flight: it gets no more
 * records. Last in a condition: cs__part_paused takes the partition lock. */
static bool at_limit(cs_consumer *c, const fetch_part *fp) {
    return cs__fetch_out_capped(c, fp) || cs__part_paused(fp->part);
}

size_t cs__fetch_share(cs_consumer *c) {
    size_t budget = cs__store_budget(c->take.store);
    size_t share = c->fetch.n_parts ? budget / (2 * c->fetch.n_parts) : budget / 2;
    if (share < 2 * cs__store_chunk_size(c->take.store)) share = 2 * cs__store_chunk_size(c->take.store);
    return share;
}

void cs__fetch_stuck_check(cs_consumer *c, int64_t now) {
    if (c->fetch.n_parts < 2) return;
    size_t budget = cs__store_budget(c->take.store);
    size_t share = cs__fetch_share(c);
    bool half_full = cs__store_used(c->take.store) >= budget / 2;
    for (size_t i = 0; i < c->fetch.n_parts; i++) {
        fetch_part *fp = &c->fetch.parts[i];
        /* Paused by the application: not stuck, only not served. Its backlog
         * is bounded by shedding (take_cb); a shed partition waits for its
         * checked re-fetch (fetch_control.c), also when that has to be tried
         * again after the application's resume. */
        if (cs__fetch_app_paused(c, fp) || fp->shed) {
            cs__fetch_progressed(fp, now);
            continue;
        }
        uint64_t settled = cs__part_finished(fp->part);
        if (settled != fp->settled_seen) {
            fp->settled_seen = settled;
            cs__fetch_progressed(fp, now);
        }
        if (!fp->paused && half_full && cs__backlog_bytes(&fp->backlog) > share && now - fp->progress_ms >= STUCK_MS &&
            at_limit(c, fp)) {
            cs__fetch_set_paused(c, fp, true);
            size_t held = cs__backlog_bytes(&fp->backlog);
            cs__fetch_trim(fp, share);
            cs__consumer_count_topic(c, c->topic_stuck, fp->topic);
            CS_LOG_INFO("partition paused: its records wait past its share of the fetch buffer subscription=%s "
                        "topic=%s partition=%d backlog_bytes=%zu share_bytes=%zu",
                        c->sub->name, fp->topic, (int)fp->partition, held, share);
        } else if (fp->paused && now >= fp->refetch_at_ms && cs__backlog_bytes(&fp->backlog) <= share / 2 &&
                   !at_limit(c, fp)) {
            /* Only once it is under max_open again (it settled): resumed
             * while still stuck, it would refill the buffer at once. The
             * records trimmed or dropped while paused are read again from
             * `next`, with a seek whose result is checked (it also wakes the
             * broker thread, which a resume alone does not): one that did
             * not happen would let librdkafka go on after them, and the
             * continuity guard would take that as a gap. Failed: paused
             * again, and tried at the next check. */
            cs__fetch_resume_paused(c, fp);
            char why[256];
            if (fp->next >= 0 && cs__fetch_refetch(c, fp, why, sizeof why)) {
                cs__fetch_set_paused(c, fp, true);
                cs__fetch_refetch_later(fp, now + CS_REFETCH_RETRY_MS);
                CS_LOG_WARN("partition not resumed: its re-fetch failed, retrying subscription=%s topic=%s "
                            "partition=%d offset=%lld error=\"%s\"",
                            c->sub->name, fp->topic, (int)fp->partition, (long long)fp->next, why);
                continue;
            }
            cs__fetch_progressed(fp, now);
            CS_LOG_INFO("partition resumed subscription=%s topic=%s partition=%d", c->sub->name, fp->topic,
                        (int)fp->partition);
        }
    }
}
