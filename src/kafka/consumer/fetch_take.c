/* fetch_take.c — taking records from librdkafka into the store, on the fetch
 * thread (docs/fetch-path-design.md, part 3). The fetch path, file by file:
 *
 *   broker threads -> recq (every assigned partition's queue forwarded to it:
 *   one librdkafka pre-fetch bound for the whole consumer; fetch_parts.c)
 *     -> take_cb (rd_kafka_consume_callback_queue): copy into the store, under
 *        one byte budget for the whole consumer; continuity guard (this file)
 *     -> the partition's backlog -> cs__fetch_hand_out while the partition is
 *        under max_open (Auto: its offset is stored at hand-out;
 *        fetch_handout.c)
 *     -> pipeline lanes -> settle -> the record's chunk goes back to the store.
 *
 *   librdkafka's fetchers woken once its bound was seen: fetch_wake.c; a
 *   stuck partition paused: fetch_stuck.c; the fetch thread's loop:
 *   consumer.c; record errors: consumer_errors.c.
 *
 * Why this take: in librdkafka 2.0.2 the batch API (rd_kafka_consume_batch*)
 * can lose records when a seek, pause, resume or rebalance runs in parallel,
 * and librdkafka pauses partitions itself at every rebalance (fixed in 2.1.0).
 * rd_kafka_consume_callback_queue checks each record's version and advances
 * its offsets one record at a time, right before the callback: a record is
 * delivered, or dropped as outdated, never purged after delivery. The
 * callback copies what it keeps (the op is destroyed after it), which also
 * keeps no fetch response pinned by a record a handler holds.
 *
 * The consumer queue carries only events (rebalances, commit results,
 * errors), served by rd_kafka_consumer_poll between takes: no rebalance
 * callback runs inside a take.
 *
 * Owns: c->take. Locks: wake_lock, through cs__fetch_yield, from on_records
 * (a librdkafka thread, under the record queue's lock) and the store's wake.
 * Threads: the fetch thread; on_records on librdkafka's threads. */
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

/* ---- the record queue and the store ---------------------------------------- */

/* The store fell under its resume mark: taking may start again. */
static void store_wake(void *arg) { cs__fetch_yield(arg); }

/* librdkafka's event callback of recq: records arrived in the empty queue.
 * Runs on a librdkafka thread with that queue's lock held: it only wakes the
 * fetch thread's poll of the consumer queue (lock order: record queue,
 * wake_lock, consumer queue). */
static void on_records(rd_kafka_t *rk, void *opaque) {
    (void)rk;
    cs__fetch_yield(opaque);
}

bool cs__fetch_init(cs_consumer *c, size_t budget) {
    /* Taking stops at the budget and starts again as soon as a chunk went
     * back. A lower resume mark (the budget minus librdkafka's bound, so that
     * the next take drains recq to empty) would stall every partition for
     * good when the records in flight of stuck partitions, which count in the
     * budget and cannot be dropped, stay above it; recq still empties, and
     * the wake-up seek follows, once the buffer has room for it. */
    c->take.store = cs__store_new(budget, budget, store_wake, c);
    c->take.recq = c->take.store ? cs__fetch_recq_new(c, c->rk) : NULL;
    return c->take.recq != NULL;
}

rd_kafka_queue_t *cs__fetch_recq_new(cs_consumer *c, rd_kafka_t *rk) {
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    if (q) rd_kafka_queue_cb_event_enable(q, on_records, c);
    return q;
}

/* take_cb's lookup: records come in runs of one partition, and a record's
 * topic handle is the one rd_kafka_topic_new gave us (librdkafka keeps one
 * per topic), so a pointer compare usually answers before a strcmp. */
static bool is_part(const fetch_part *fp, const rd_kafka_message_t *m) {
    return fp->partition == m->partition && (fp->rkt == m->rkt || !strcmp(fp->topic, rd_kafka_topic_name(m->rkt)));
}

/* The run's partition, else the registry's index (O(1); a scan of c->fetch.parts
 * here cost O(P) at every change of partition in recq). NULL: not open. */
static fetch_part *part_for(cs_consumer *c, const rd_kafka_message_t *m) {
    if (c->take.last_part < c->fetch.n_parts && is_part(&c->fetch.parts[c->take.last_part], m))
        return &c->fetch.parts[c->take.last_part];
    cs_part *part = cs__pipeline_find_part(c->pipe, rd_kafka_topic_name(m->rkt), m->partition);
    fetch_part *fp = part ? cs__fetch_part_of(c, part) : NULL;
    if (fp) c->take.last_part = (size_t)(fp - c->fetch.parts);
    return fp;
}
/* ---- taking: librdkafka -> the store ------------------------------------------ */

#define MAX_INLINE_HEADERS 16

/* Copies the record's headers into the store with it (NULL h: none). */
static cs_stored *store_record(cs_consumer *c, fetch_part *fp, const rd_kafka_message_t *m) {
    rd_kafka_timestamp_type_t tstype;
    int64_t ts = rd_kafka_message_timestamp(m, &tstype);
    if (tstype == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE) ts = -1;
    rd_kafka_headers_t *hdrs = NULL;
    size_t n = 0;
    if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) n = rd_kafka_header_cnt(hdrs);
    cs_stored_header inline_h[MAX_INLINE_HEADERS], *h = inline_h;
    if (n > MAX_INLINE_HEADERS && !(h = malloc(n * sizeof *h))) return NULL;
    for (size_t i = 0; i < n; i++)
        if (rd_kafka_header_get_all(hdrs, i, &h[i].name, &h[i].value, &h[i].len) != RD_KAFKA_RESP_ERR_NO_ERROR) n = i;
    cs_stored *r =
        cs__store_append(c->take.store, &fp->open, m->offset, ts, m->key, m->key_len, m->payload, m->len, h, n);
    if (h != inline_h) free(h);
    return r;
}

/* A partition the application paused keeps no more: its backlog reached its
 * share, or it has some and the buffer is half full (chunks are counted
 * whole, so with a small buffer the share alone could still fill it). */
static bool paused_full(cs_consumer *c, const fetch_part *fp) {
    return cs__backlog_bytes(&fp->backlog) >= cs__fetch_share(c) ||
           (!cs__backlog_empty(&fp->backlog) && cs__store_used(c->take.store) >= cs__store_budget(c->take.store) / 2);
}

/* rd_kafka_consume_callback_queue's callback, on the fetch thread: librdkafka
 * destroys m when it returns, so what is kept is copied. rd_kafka_yield stops
 * the take; the records not yet served go back to recq's head, in order. */
static void take_cb(rd_kafka_message_t *m, void *opaque) {
    cs_consumer *c = opaque;
    bool old_log = c->take.taken_total < c->old_log.until;
    c->take.taken_total++;
    if (c->errors.out_of_memory || c->take.fatal) {
        rd_kafka_yield(c->rk); /* a record not taken leaves no stored offset behind */
        return;
    }
    if (m->err) {
        cs__consumer_on_record_error(c, m);
        if (rd_kafka_fatal_error(c->rk, NULL, 0) != RD_KAFKA_RESP_ERR_NO_ERROR) {
            c->take.fatal = true;
            rd_kafka_yield(c->rk);
        }
        return;
    }
    fetch_part *fp = part_for(c, m);
    if (!fp) return; /* not assigned here any more (an unassign that failed): its new owner reads it */
    const char *topic = fp->topic;
    /* Paused by cstream: its records still in recq are outdated, and one
     * that slipped through librdkafka's version check is read again after
     * the resume, which seeks to `next`. */
    if (fp->paused || fp->withheld) return;
    /* Paused by the application, with its share of the buffer waiting:
     * dropped, and read again from `next` (the first one dropped) after the
     * resume (fetch_control.c), so that a paused partition never fills the
     * buffer the others need. librdkafka may go on fetching it meanwhile:
     * an app pause never pauses it there (fetch_control.c). */
    if (fp->shed || (cs__fetch_app_paused(c, fp) && paused_full(c, fp))) {
        if (!fp->shed) atomic_fetch_add_explicit(&c->take.sheds, 1, memory_order_relaxed);
        cs__fetch_set_shed(fp, true);
        return;
    }
    /* Moving back (below): nothing of the partition is taken until the fetch
     * thread moved it to its first record not settled. */
    if (fp->back_to >= 0) return;
    /* The continuity guard. A repeat comes from librdkafka 2.0.2's residual
     * race (a pause or seek reading the app offset one record behind): never
     * taken twice. A gap is legitimate with compaction and read_committed
     * (aborted records, markers): counted only. A log that may have restarted
     * (its topic reported gone) is settled at hand-out
     * (cs__errors_log_restart), not here. */
    if (fp->next >= 0 && !cs__part_log_unknown(fp->part)) {
        if (m->offset < fp->next - 1) {
            /* Further back than that race goes: librdkafka moved the fetch
             * position back within the same log, by its auto.offset.reset
             * after an out-of-range fetch (a truncated log), KIP-320
             * truncation handling, or a seek on the raw handle. Records
             * handed out below `next` may still be open: starting over here
             * would commit past them. Tracked and Transactional move the
             * partition to its first record not settled first
             * (moves_back in fetch_control.c); Auto, which tracks nothing, reads on
             * from here. */
            CS_LOG_WARN("partition's fetch position moved back within its log (a seek on the raw handle, an "
                        "offset reset or a truncation) subscription=%s topic=%s partition=%d offset=%lld next=%lld",
                        c->sub->name, topic, (int)m->partition, (long long)m->offset, (long long)fp->next);
            if (c->tracked) {
                cs__fetch_back_detected(c, fp, m->offset);
                return;
            }
        } else if (m->offset < fp->next) {
            cs__consumer_count_topic(c, c->topic_repeats, topic);
            CS_LOG_DEBUG("record taken again, dropped subscription=%s topic=%s partition=%d offset=%lld next=%lld",
                         c->sub->name, topic, (int)m->partition, (long long)m->offset, (long long)fp->next);
            return;
        }
        if (m->offset > fp->next) {
            cs__consumer_count_topic(c, c->topic_gaps, topic);
            CS_LOG_DEBUG("offset gap (compaction, transaction markers or aborted records) subscription=%s topic=%s "
                         "partition=%d offset=%lld expected=%lld",
                         c->sub->name, topic, (int)m->partition, (long long)m->offset, (long long)fp->next);
        }
    }
    cs_stored *r = store_record(c, fp, m);
    if (!r) {
        cs__fetch_out_of_memory(c, topic, m->partition, m->offset, "for the record");
        rd_kafka_yield(c->rk);
        return;
    }
#if CS_RDKAFKA_HAS_EPOCHS
    cs__fetch_taken(fp, m->offset, rd_kafka_message_leader_epoch(m));
#else
    cs__fetch_taken(fp, m->offset, -1);
#endif
    c->take.stored_total++;
    c->take.value_bytes += m->len;
    r->old_log = old_log;
    cs__backlog_push(&fp->backlog, r);
    if (cs__store_used(c->take.store) >= cs__store_budget(c->take.store)) {
        c->take.store_full = true;
        rd_kafka_yield(c->rk);
    }
}

/* The store is full: every partition lets go of its open chunk, so that a
 * chunk whose records all settled goes back at once. Otherwise the partly
 * filled open chunks of many partitions (each counted whole) could hold the
 * store above its resume mark with nothing left to settle, and taking would
 * never start again. */
static void close_open_chunks(cs_consumer *c) {
    for (size_t i = 0; i < c->fetch.n_parts; i++) cs__store_close_chunk(&c->fetch.parts[i].open);
}

/* Takes what recq holds into the store, unless the store is full. */
size_t cs__fetch_take_records(cs_consumer *c) {
    if (c->take.store_full && cs__store_used(c->take.store) <= cs__store_resume_mark(c->take.store))
        c->take.store_full = false;
    if (c->take.store_full) return 0;
    /* librdkafka's bound is in records and value bytes (rd_kafka_q_size
     * counts value lengths only). The bytes cannot be read, so the bound
     * counts as seen when the queue held 90 % of it in records, when one take
     * drained 90 % of it in value bytes (one fetch response can fill it at
     * once), or when cstream left the queue non-empty because the store was
     * full. */
    if (c->rdk_bound.records && (size_t)rd_kafka_queue_length(c->take.recq) >= c->rdk_bound.records / 10 * 9)
        c->take.bound_seen = true;
    c->take.in_take = true;
    c->take.value_bytes = 0;
    int n = rd_kafka_consume_callback_queue(c->take.recq, 0, take_cb, c);
    c->take.in_take = false;
    atomic_store_explicit(&c->take.stored, c->take.stored_total,
                          memory_order_relaxed); /* hand-out follows on this thread */
    if (c->take.store_full) close_open_chunks(c);
    if (c->rdk_bound.bytes && c->take.value_bytes >= c->rdk_bound.bytes / 10 * 9) c->take.bound_seen = true;
    if (c->take.store_full && rd_kafka_queue_length(c->take.recq) > 0) c->take.bound_seen = true;
    if (c->take.bound_seen && !c->take.store_full && rd_kafka_queue_length(c->take.recq) == 0) {
        cs__fetch_wake_fetchers(c);
        c->take.bound_seen = false;
    }
    cs__fetch_recount_old_log(c);
    return n > 0 ? (size_t)n : 0;
}

rd_kafka_queue_t *cs__fetch_recq_replace(cs_consumer *c, rd_kafka_queue_t *recq) {
    rd_kafka_queue_t *old = c->take.recq;
    c->take.recq = recq;
    return old;
}

void cs__fetch_take_close(cs_consumer *c) {
    if (c->take.recq) {
        rd_kafka_queue_cb_event_enable(c->take.recq, NULL, NULL); /* waits out a callback in progress */
        rd_kafka_queue_destroy(c->take.recq);
        c->take.recq = NULL;
    }
    /* Records still held by pending deliveries keep the store. */
    if (c->take.store) c->take.final_peak = cs__store_peak(c->take.store);
    cs__store_release(c->take.store);
    c->take.store = NULL;
}
