/* fetch.c — taking records from librdkafka and handing them to the pipeline
 * (docs/fetch-path-design.md, part 3).
 *
 *   broker threads -> recq (every assigned partition's queue forwarded to it:
 *   one librdkafka pre-fetch bound for the whole consumer)
 *     -> take_cb (rd_kafka_consume_callback_queue): copy into the store, under
 *        one byte budget for the whole consumer; continuity guard
 *     -> the partition's backlog -> hand_out while the partition is under
 *        max_open (Auto: its offset is stored here, at hand-out)
 *     -> pipeline lanes -> settle -> the record's chunk goes back to the store.
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
 * callback runs inside a take. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/broker.h"
#include "../core/error.h"
#include "consumer_internal.h"

/* ---- helpers -------------------------------------------------------------- */

cs_part *cs__consumer_part(cs_consumer *c, const char *topic, int32_t partition) {
    return cs__pipeline_part(c->pipe, topic, partition, &cs__stored_ops);
}

/* Cuts the fetch thread's wait in the poll short, while it runs. */
void cs__fetch_yield(cs_consumer *c) {
    pthread_mutex_lock(&c->wake_lock);
    if (!atomic_load(&c->stop)) rd_kafka_queue_yield(c->queue);
    pthread_mutex_unlock(&c->wake_lock);
}

void cs__fetch_wake(void *arg) {
    cs_consumer *c = arg;
    atomic_store(&c->resume_wanted, true);
    cs__fetch_yield(c);
}

/* A per-topic counter of the fetch path (rare events: a lookup by name). */
static void count_topic(cs_consumer *c, _Atomic uint64_t *counters, const char *topic) {
    int i = cs__subscribed_topic_in(c, topic, true);
    if (i >= 0) atomic_fetch_add_explicit(&counters[i], 1, memory_order_relaxed);
}

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

bool cs__fetch_init(cs_consumer *c, size_t budget, size_t rdk_bound_bytes, size_t rdk_bound_records) {
    /* Taking stops at the budget and starts again as soon as a chunk went
     * back. A lower resume mark (the budget minus librdkafka's bound, so that
     * the next take drains recq to empty) would stall every partition for
     * good when the records in flight of stuck partitions, which count in the
     * budget and cannot be dropped, stay above it; recq still empties, and
     * the wake-up seek follows, once the buffer has room for it. */
    (void)rdk_bound_bytes;
    size_t mark = budget;
    c->rdk_bound_records = rdk_bound_records;
    c->store = cs__store_new(budget, mark, store_wake, c);
    c->recq = c->store ? rd_kafka_queue_new(c->rk) : NULL;
    if (!c->recq) return false;
    rd_kafka_queue_cb_event_enable(c->recq, on_records, c);
    return true;
}

fetch_part *cs__fetch_part_of(cs_consumer *c, const cs_part *part) {
    for (size_t i = 0; i < c->n_parts; i++)
        if (c->parts[i].part == part) return &c->parts[i];
    return NULL;
}

/* take_cb's lookup: records come in runs of one partition, and a record's
 * topic handle is the one rd_kafka_topic_new gave us (librdkafka keeps one
 * per topic), so a pointer compare usually answers before a strcmp. */
static bool is_part(const fetch_part *fp, const rd_kafka_message_t *m) {
    return fp->part->partition == m->partition &&
           (fp->rkt == m->rkt || !strcmp(fp->part->topic, rd_kafka_topic_name(m->rkt)));
}

static fetch_part *part_for(cs_consumer *c, const rd_kafka_message_t *m) {
    if (c->last_part < c->n_parts && is_part(&c->parts[c->last_part], m)) return &c->parts[c->last_part];
    for (size_t i = 0; i < c->n_parts; i++) {
        if (is_part(&c->parts[i], m)) {
            c->last_part = i;
            return &c->parts[i];
        }
    }
    return NULL;
}

static void drop_backlog(fetch_part *fp);
static void resume_paused(cs_consumer *c, fetch_part *fp);

/* Forwards the partition's queue to recq. librdkafka 2.0.2 clears the
 * forward when it stops fetching the partition (rd_kafka_toppar_fetch_stop)
 * and, because the forward was the application's, does not set it again at
 * the next fetch start: every assignment forwards it again. */
static bool forward_to_recq(cs_consumer *c, const cs_part *part) {
    rd_kafka_queue_t *q = rd_kafka_queue_get_partition(c->rk, part->topic, part->partition);
    if (!q) return false;
    rd_kafka_queue_forward(q, c->recq);
    rd_kafka_queue_destroy(q);
    return true;
}

/* At assign, before librdkafka starts fetching the partition: its records go
 * to recq from now on. */
bool cs__fetch_open_part(cs_consumer *c, cs_part *part) {
    fetch_part *fp = cs__fetch_part_of(c, part);
    if (fp) { /* still known from before (its revoke did not forget it): a new epoch starts empty */
        resume_paused(c, fp);
        drop_backlog(fp);
        fp->next = -1;
        fp->progress_ms = cs__now_ms();
        return forward_to_recq(c, part);
    }
    if (c->n_parts == c->cap_parts) {
        size_t cap = c->cap_parts ? c->cap_parts * 2 : 8;
        fetch_part *grown = realloc(c->parts, cap * sizeof *grown);
        if (!grown) return false;
        c->parts = grown;
        c->cap_parts = cap;
    }
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(c->rk, part->topic, NULL);
    if (!rkt || !forward_to_recq(c, part)) {
        if (rkt) rd_kafka_topic_destroy(rkt);
        return false;
    }
    c->parts[c->n_parts++] = (fetch_part){.part = part, .rkt = rkt, .next = -1, .progress_ms = cs__now_ms()};
    return true;
}

static void drop_backlog(fetch_part *fp) {
    for (cs_stored *r = fp->head, *next; r; r = next) {
        next = r->next;
        cs__stored_release(r);
    }
    fp->head = fp->tail = NULL;
    fp->backlog = fp->backlog_bytes = 0;
}

/* A partition cstream paused (stuck) is resumed before it goes: an APP pause
 * survives reassignment in librdkafka 2.0.2. */
static void set_paused(cs_consumer *c, fetch_part *fp, bool paused) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, fp->part->topic, fp->part->partition);
    if (paused) rd_kafka_pause_partitions(c->rk, l);
    else rd_kafka_resume_partitions(c->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    fp->paused = paused;
}

static void resume_paused(cs_consumer *c, fetch_part *fp) {
    if (fp->paused) set_paused(c, fp, false);
}

static void remove_part(cs_consumer *c, fetch_part *fp) {
    drop_backlog(fp);
    cs__store_close_chunk(&fp->open);
    if (fp->rkt) rd_kafka_topic_destroy(fp->rkt);
    *fp = c->parts[--c->n_parts];
    c->last_part = 0;
}

void cs__fetch_forget_part(cs_consumer *c, cs_part *part) {
    fetch_part *fp = cs__fetch_part_of(c, part);
    if (!fp) return;
    resume_paused(c, fp);
    remove_part(c, fp);
}

/* Before the handle is destroyed: librdkafka must get its queue and topic
 * handles back. Records still held by pending deliveries keep the store. */
void cs__fetch_close_all(cs_consumer *c) {
    while (c->n_parts) remove_part(c, &c->parts[c->n_parts - 1]);
    free(c->parts);
    c->parts = NULL;
    c->cap_parts = 0;
    if (c->recq) {
        rd_kafka_queue_cb_event_enable(c->recq, NULL, NULL); /* waits out a callback in progress */
        rd_kafka_queue_destroy(c->recq);
        c->recq = NULL;
    }
    if (c->store) c->final_peak = cs__store_peak(c->store);
    cs__store_release(c->store);
    c->store = NULL;
}

void cs__fetch_rewound(cs_consumer *c, cs_part *part, int64_t offset) {
    fetch_part *fp = cs__fetch_part_of(c, part);
    if (!fp) return;
    drop_backlog(fp);
    fp->next = offset;
}

void cs__fetch_mark_old_log(cs_consumer *c, const char *topic) {
    for (size_t i = 0; i < c->n_parts; i++) {
        fetch_part *fp = &c->parts[i];
        if (strcmp(fp->part->topic, topic)) continue;
        for (cs_stored *r = fp->head; r; r = r->next) r->old_log = true;
    }
    c->old_log_until = c->taken_total + (uint64_t)rd_kafka_queue_length(c->recq);
    /* Inside a take, the rest of its records are out of recq: stop the take
     * (they go back to recq's head) and count again after it. */
    if (c->in_take) {
        c->old_log_pending = true;
        rd_kafka_yield(c->rk);
    }
}

/* ---- waking librdkafka's broker threads --------------------------------------
 * In librdkafka 2.0.2 a broker thread whose partitions are all at the queue's
 * bound drops them from its fetch list and sleeps until its 1 s serve period
 * ends: the queue draining later notifies no one, and neither does a resume
 * (docs/fetch-path-design.md 1a). An asynchronous seek to a concrete offset
 * wakes the leader's broker thread ("seek done") within about a millisecond.
 * Seeking to `next`, the offset after the last record taken, loses and
 * repeats nothing: records of older versions still in recq are dropped by
 * librdkafka, and the refetch starts where the take stopped. */

static void seek_next(cs_consumer *c, fetch_part *fp) {
    rd_kafka_resp_err_t err = rd_kafka_seek(fp->rkt, fp->part->partition, fp->next, 0);
    if (err)
        CS_LOG_DEBUG("wake-up seek failed subscription=%s topic=%s partition=%d offset=%lld error=\"%s\"",
                     c->sub->name, fp->part->topic, (int)fp->part->partition, (long long)fp->next,
                     rd_kafka_err2str(err));
}

/* Seeks every partition cstream reads (not paused by it, with a known
 * position, its log not in doubt) to `next`. */
static void seek_readable(cs_consumer *c) {
    for (size_t i = 0; i < c->n_parts; i++) {
        fetch_part *fp = &c->parts[i];
        if (!fp->paused && fp->next >= 0 && !atomic_load_explicit(&fp->part->log_unknown, memory_order_relaxed))
            seek_next(c, fp);
    }
}

/* After the bound was seen and recq is empty again. */
static void wake_fetchers(cs_consumer *c) {
    seek_readable(c);
    atomic_fetch_add_explicit(&c->wakeups, 1, memory_order_relaxed);
}

/* After an incremental assign or unassign librdkafka resumes the partitions
 * kept across the rebalance (its LIB pause) without waking their broker
 * threads; the seek is enqueued after that resume on the partition's op
 * queue, which is served in order. */
void cs__fetch_wake_kept(cs_consumer *c) { seek_readable(c); }

/* ---- a stuck partition ---------------------------------------------------------
 * A partition at max_open that stops settling (a stuck handler, a long
 * retry_after) keeps receiving records in the shared recq, and they must be
 * taken to reach the other partitions' records behind them. Its backlog is
 * capped at a fair share of the budget: past it, and with the store at least
 * half full, the partition is paused in librdkafka (the last resort; its
 * records left in recq become outdated and are dropped), and resumed, with a
 * seek to `next`, once its backlog is down to half the share. A single
 * partition is never paused: there is no one to make room for. */
/* A paused partition keeps its share of backlog; the rest is dropped and read
 * again after the resume (seek to `next`, now its first dropped record). One
 * take can fill the store with one partition's records before the check sees
 * it, and a backlog that fills the store would keep every partition
 * from being taken. The records dropped were never handed out: nothing was
 * stored (Auto) or tracked (Tracked) for them. The partition's open chunk is
 * closed, so that chunks of dropped records go back. */
static void trim_backlog(fetch_part *fp, size_t share) {
    cs_stored *keep_tail = NULL;
    size_t bytes = 0, n = 0;
    for (cs_stored *r = fp->head; r && bytes + cs__stored_size(r) <= share; r = r->next) {
        bytes += cs__stored_size(r);
        n++;
        keep_tail = r;
    }
    cs_stored *drop = keep_tail ? keep_tail->next : fp->head;
    if (!drop) return;
    fp->next = drop->offset;
    if (keep_tail) keep_tail->next = NULL;
    else fp->head = NULL;
    fp->tail = keep_tail;
    fp->backlog = n;
    fp->backlog_bytes = bytes;
    for (cs_stored *next; drop; drop = next) {
        next = drop->next;
        cs__stored_release(drop);
    }
    cs__store_close_chunk(&fp->open);
}

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
 * It counts as at max_open (stuck_check). A single partition has no one to
 * make room for. */
static bool out_capped(cs_consumer *c, const fetch_part *fp) {
    return c->n_parts > 1 &&
           atomic_load_explicit(&fp->part->out_bytes, memory_order_relaxed) >= cs__store_budget(c->store) / 4;
}

/* At max_open, or at its quarter of the buffer in flight: it gets no more
 * records. Last in a condition: cs__part_paused takes the partition lock. */
static bool at_limit(cs_consumer *c, const fetch_part *fp) { return out_capped(c, fp) || cs__part_paused(fp->part); }

static uint64_t settled_count(const cs_part *p) {
    return atomic_load_explicit(&p->n_acked, memory_order_relaxed) +
           atomic_load_explicit(&p->n_dropped, memory_order_relaxed) +
           atomic_load_explicit(&p->n_retry_unsupported, memory_order_relaxed) +
           atomic_load_explicit(&p->n_dead_lettered, memory_order_relaxed);
}

static void stuck_check(cs_consumer *c, int64_t now) {
    if (c->n_parts < 2) return;
    size_t budget = cs__store_budget(c->store);
    size_t share = budget / (2 * c->n_parts);
    if (share < 2 * cs__store_chunk_size(c->store)) share = 2 * cs__store_chunk_size(c->store);
    bool half_full = cs__store_used(c->store) >= budget / 2;
    for (size_t i = 0; i < c->n_parts; i++) {
        fetch_part *fp = &c->parts[i];
        uint64_t settled = settled_count(fp->part);
        if (settled != fp->settled_seen) {
            fp->settled_seen = settled;
            fp->progress_ms = now;
        }
        if (!fp->paused && half_full && fp->backlog_bytes > share && now - fp->progress_ms >= STUCK_MS &&
            at_limit(c, fp)) {
            set_paused(c, fp, true);
            size_t held = fp->backlog_bytes;
            trim_backlog(fp, share);
            count_topic(c, c->topic_stuck, fp->part->topic);
            CS_LOG_INFO("partition paused: its records wait past its share of the fetch buffer subscription=%s "
                        "topic=%s partition=%d backlog_bytes=%zu share_bytes=%zu",
                        c->sub->name, fp->part->topic, (int)fp->part->partition, held, share);
        } else if (fp->paused && fp->backlog_bytes <= share / 2 && !at_limit(c, fp)) {
            /* Only once it is under max_open again (it settled): resumed
             * while still stuck, it would refill the buffer at once. */
            resume_paused(c, fp);
            fp->progress_ms = now;
            if (fp->next >= 0) seek_next(c, fp); /* a resume alone waits for the broker thread's next pass */
            CS_LOG_INFO("partition resumed subscription=%s topic=%s partition=%d", c->sub->name, fp->part->topic,
                        (int)fp->part->partition);
        }
    }
}

static void resume_drained(cs_consumer *c) {
    atomic_store(&c->resume_wanted, false);
    for (size_t i = 0; i < c->n_parts; i++) cs__part_should_resume(c->pipe, c->parts[i].part);
}

/* ---- errors ---------------------------------------------------------------- */

/* A consumer's fatal error arrives as an error record (librdkafka 2.0.2 does
 * not send it to error_cb for high-level consumers). */
static bool report_if_fatal(cs_consumer *c) {
    char why[512];
    rd_kafka_resp_err_t orig = rd_kafka_fatal_error(c->rk, why, sizeof why);
    if (!orig) return false;
    cs__consumer_fatal_error(c, orig, why);
    return true;
}

static void on_record_error(cs_consumer *c, const rd_kafka_message_t *m) {
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) return;
    if (m->err == RD_KAFKA_RESP_ERR__FATAL && report_if_fatal(c)) return;
    const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "-";
    int gone = cs__topic_error(m->err) ? cs__subscribed_topic_in(c, topic, true) : -1;
    if (gone >= 0) {
        cs__topic_unavailable(c, gone, m->err, rd_kafka_message_errstr(m));
        return;
    }
    uint64_t skipped = 0;
    if (cs__ratelimit_allow(&c->error_warning, 5000, &skipped))
        CS_LOG_WARN("consume error subscription=%s topic=%s partition=%d offset=%lld error=%s reason=\"%s\"",
                    c->sub->name, topic, (int)m->partition, (long long)m->offset, rd_kafka_err2name(m->err),
                    rd_kafka_message_errstr(m));
}

void cs__fetch_on_error_event(cs_consumer *c, const rd_kafka_message_t *m) { on_record_error(c, m); }

/* The record at topic/partition@offset was not handed out: stop the app, and
 * hand out nothing more, so that no later record can be settled and commit a
 * position past it (it is read again after the restart). */
static void out_of_memory(cs_consumer *c, const char *topic, int32_t partition, int64_t offset, const char *what) {
    c->out_of_memory = true;
    cs__app_fatal(c->app, "%s: out of memory %s at %s/%d@%lld; nothing after it is handed out or committed", c->who,
                  what, topic, (int)partition, (long long)offset);
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
        if (rd_kafka_header_get_all(hdrs, i, &h[i].name, &h[i].value, &h[i].len) != RD_KAFKA_RESP_ERR_NO_ERROR)
            n = i;
    cs_stored *r = cs__store_append(c->store, &fp->open, m->offset, ts, m->key, m->key_len, m->payload, m->len, h, n);
    if (h != inline_h) free(h);
    return r;
}

/* rd_kafka_consume_callback_queue's callback, on the fetch thread: librdkafka
 * destroys m when it returns, so what is kept is copied. rd_kafka_yield stops
 * the take; the records not yet served go back to recq's head, in order. */
static void take_cb(rd_kafka_message_t *m, void *opaque) {
    cs_consumer *c = opaque;
    bool old_log = c->taken_total < c->old_log_until;
    c->taken_total++;
    if (c->out_of_memory || c->take_fatal) {
        rd_kafka_yield(c->rk); /* a record not taken leaves no stored offset behind */
        return;
    }
    if (m->err) {
        on_record_error(c, m);
        if (rd_kafka_fatal_error(c->rk, NULL, 0) != RD_KAFKA_RESP_ERR_NO_ERROR) {
            c->take_fatal = true;
            rd_kafka_yield(c->rk);
        }
        return;
    }
    fetch_part *fp = part_for(c, m);
    if (!fp) return; /* not assigned here any more (an unassign that failed): its new owner reads it */
    const char *topic = fp->part->topic;
    /* Paused by cstream: its records still in recq are outdated, and one
     * that slipped through librdkafka's version check is read again after
     * the resume, which seeks to `next`. */
    if (fp->paused) return;
    /* The continuity guard. A repeat comes from librdkafka 2.0.2's residual
     * race (a pause or seek reading the app offset one record behind): never
     * taken twice. A gap is legitimate with compaction and read_committed
     * (aborted records, markers): counted only. A log that may have restarted
     * is settled at hand-out (cs__settle_log_restart), not here. */
    if (fp->next >= 0 && !atomic_load_explicit(&fp->part->log_unknown, memory_order_relaxed)) {
        if (m->offset < fp->next - 1) {
            /* Further back than that race goes: librdkafka moved the fetch
             * position back, by its auto.offset.reset after an out-of-range
             * fetch (a log truncated, or deleted and created again before the
             * topic was reported gone) or by a seek on the handle. Records
             * below `next` may be new ones at old offsets: dropping them as
             * repeats would lose them. The log counts as restarted: read
             * again from here (Tracked: a new epoch; duplicates, never loss). */
            atomic_store(&fp->part->log_unknown, true);
            /* What waits in the backlog was taken before the jump: it is
             * handed out as before, and the first record after the jump
             * starts the new epoch (dispatch, cs__settle_log_restart). */
            for (cs_stored *r = fp->head; r; r = r->next) r->old_log = true;
            CS_LOG_WARN("partition read again from an earlier offset (the log was truncated or reset) "
                        "subscription=%s topic=%s partition=%d offset=%lld next=%lld",
                        c->sub->name, topic, (int)m->partition, (long long)m->offset, (long long)fp->next);
        } else if (m->offset < fp->next) {
            count_topic(c, c->topic_repeats, topic);
            CS_LOG_DEBUG("record taken again, dropped subscription=%s topic=%s partition=%d offset=%lld next=%lld",
                         c->sub->name, topic, (int)m->partition, (long long)m->offset, (long long)fp->next);
            return;
        }
        if (m->offset > fp->next) {
            count_topic(c, c->topic_gaps, topic);
            CS_LOG_DEBUG("offset gap (compaction, transaction markers or aborted records) subscription=%s topic=%s "
                         "partition=%d offset=%lld expected=%lld",
                         c->sub->name, topic, (int)m->partition, (long long)m->offset, (long long)fp->next);
        }
    }
    cs_stored *r = store_record(c, fp, m);
    if (!r) {
        out_of_memory(c, topic, m->partition, m->offset, "for the record");
        rd_kafka_yield(c->rk);
        return;
    }
    fp->next = m->offset + 1;
    c->take_value_bytes += m->len;
    r->old_log = old_log;
    if (fp->tail) fp->tail->next = r;
    else fp->head = r;
    fp->tail = r;
    fp->backlog++;
    fp->backlog_bytes += cs__stored_size(r);
    if (cs__store_used(c->store) >= cs__store_budget(c->store)) {
        c->store_full = true;
        rd_kafka_yield(c->rk);
    }
}

/* The store is full: every partition lets go of its open chunk, so that a
 * chunk whose records all settled goes back at once. Otherwise the partly
 * filled open chunks of many partitions (each counted whole) could hold the
 * store above its resume mark with nothing left to settle, and taking would
 * never start again. */
static void close_open_chunks(cs_consumer *c) {
    for (size_t i = 0; i < c->n_parts; i++) cs__store_close_chunk(&c->parts[i].open);
}

/* Takes what recq holds into the store, unless the store is full. */
static size_t take_records(cs_consumer *c) {
    if (c->store_full && cs__store_used(c->store) <= cs__store_resume_mark(c->store)) c->store_full = false;
    if (c->store_full) return 0;
    /* librdkafka's bound is in records and value bytes (rd_kafka_q_size
     * counts value lengths only). The bytes cannot be read, so the bound
     * counts as seen when the queue held 90 % of it in records, when one take
     * drained 90 % of it in value bytes (one fetch response can fill it at
     * once), or when cstream left the queue non-empty because the store was
     * full. */
    if (c->rdk_bound_records && (size_t)rd_kafka_queue_length(c->recq) >= c->rdk_bound_records / 10 * 9)
        c->bound_seen = true;
    c->in_take = true;
    c->take_value_bytes = 0;
    int n = rd_kafka_consume_callback_queue(c->recq, 0, take_cb, c);
    c->in_take = false;
    if (c->store_full) close_open_chunks(c);
    if (c->rdk_bound_bytes && c->take_value_bytes >= c->rdk_bound_bytes / 10 * 9) c->bound_seen = true;
    if (c->store_full && rd_kafka_queue_length(c->recq) > 0) c->bound_seen = true;
    if (c->bound_seen && !c->store_full && rd_kafka_queue_length(c->recq) == 0) {
        wake_fetchers(c);
        c->bound_seen = false;
    }
    if (c->old_log_pending) {
        c->old_log_pending = false;
        c->old_log_until = c->taken_total + (uint64_t)rd_kafka_queue_length(c->recq);
    }
    return n > 0 ? (size_t)n : 0;
}

/* ---- handing out: the store -> the lanes --------------------------------------- */

/* A delivery for r, ready for its lane; NULL when out of memory (r released,
 * the app stopping). */
static cs_delivery *prepare(cs_consumer *c, fetch_part *fp, cs_stored *r) {
    cs_part *part = fp->part;
    cs_delivery *d = cs__delivery_alloc(part);
    if (!d) {
        out_of_memory(c, part->topic, part->partition, r->offset, "for the delivery");
        cs__stored_release(r);
        return NULL;
    }
    d->topic = part->topic;
    d->partition = part->partition;
    d->offset = r->offset;
    d->timestamp = r->timestamp;
    d->key = cs__stored_key(r);
    d->key_len = r->key_len;
    d->value = cs__stored_value(r);
    d->value_len = r->value_len;
    d->msg = r;
    cs__stored_charge(r, &part->out_bytes);
    return d;
}

/* Records a partition gives per serving round, so that one busy partition
 * does not hold up the others, the commit tick or a rebalance for long; they
 * go to the pipeline as one run (cs__pipeline_dispatch_run). */
#define ROUND_RECORDS 256

/* The run being built for one partition in a round. */
typedef struct run {
    cs_delivery *ds[ROUND_RECORDS];
    int64_t offsets[ROUND_RECORDS]; /* ds[i]->offset: d may settle and be freed once handed out */
    size_t n;
    int64_t last;  /* the last offset handed out (or refused as a repeat), -1: none */
    bool paused;   /* the partition reached max_open */
} run;

/* Hands the run to the pipeline. */
static void flush_run(cs_consumer *c, fetch_part *fp, run *rn) {
    if (rn->n == 0) return;
    size_t consumed;
    cs_part *part = fp->part;
    if (cs__pipeline_dispatch_run(c->pipe, part, rn->ds, rn->n, &consumed)) {
        rn->paused = true;
        cs__pipeline_count_pause(c->pipe);
    }
    if (consumed > 0) rn->last = rn->offsets[consumed - 1];
    if (consumed < rn->n)
        out_of_memory(c, part->topic, part->partition, rn->offsets[consumed], "to track the offset");
    rn->n = 0;
}

/* One partition's share of a round: at most ROUND_RECORDS, no more than
 * max_open, the lanes' room and its quarter of the buffer allow. Returns false
 * if the lanes are full. */
static bool serve_part(cs_consumer *c, fetch_part *fp, run *rn) {
    cs_part *part = fp->part;
    const char *topic = part->topic;
    rn->n = 0;
    rn->last = -1;
    rn->paused = false;
    size_t room = cs__pipeline_room(c->pipe, part);
    if (room == 0) {
        rn->paused = true; /* at max_open: it waits for a resume */
        return true;
    }
    /* Records wait here, in the budgeted store, rather than as deliveries in
     * the lanes; a worker wakes this thread. */
    size_t lanes = cs__pipeline_lanes_room(c->pipe);
    if (lanes == 0) return false;
    size_t max = ROUND_RECORDS;
    if (room < max) max = room;
    if (lanes < max) max = lanes;
    for (size_t i = 0; i < max && fp->head && !c->out_of_memory; i++) {
        if (out_capped(c, fp)) {
            rn->paused = true; /* like max_open: no more this round */
            break;
        }
        cs_stored *r = fp->head;
        fp->head = r->next;
        if (!fp->head) fp->tail = NULL;
        fp->backlog--;
        fp->backlog_bytes -= cs__stored_size(r);
        if (!r->old_log) cs__topic_available(c, topic);
        /* A record below the position proves a restarted log whenever it was
         * queued; one above proves the same log only if it came after the
         * report. The records prepared before it go out first, in the old
         * epoch, so that the position counts them (a record of the new log
         * compared with a position short of the run would join the old epoch,
         * be refused as not increasing, and be lost). */
        if (atomic_load_explicit(&part->log_unknown, memory_order_relaxed)) {
            flush_run(c, fp, rn);
            if (c->out_of_memory) { /* nothing more is handed out */
                cs__stored_release(r);
                break;
            }
            if (!r->old_log || r->offset < cs__pipeline_next_offset(c->pipe, topic, part->partition))
                cs__settle_log_restart(c, part, topic, r->offset);
        }
        cs_delivery *d = prepare(c, fp, r);
        if (!d) break;
        rn->offsets[rn->n] = r->offset;
        rn->ds[rn->n++] = d;
    }
    flush_run(c, fp, rn);
    return true;
}

/* One round over the partitions with a backlog that are under max_open,
 * starting with a different one each time. Under Auto, the offset of the
 * last record handed out is stored (librdkafka's auto commit and its final
 * commit at unassign commit it): records still in the backlog are never
 * committed, and Auto's loss window stays the records handed out. Returns
 * true if some partition could take more right away. */
static bool hand_out(cs_consumer *c, int64_t now) {
    bool more = false;
    size_t n = c->n_parts;
    bool lanes_full = false;
    run rn; /* on the fetch thread's stack, reused partition after partition */
    for (size_t k = 0; k < n && !c->out_of_memory && !lanes_full; k++) {
        fetch_part *fp = &c->parts[(c->next_part + k) % n];
        if (!fp->head) continue;
        lanes_full = !serve_part(c, fp, &rn);
        if (rn.last >= 0) fp->progress_ms = now;
        if (!c->tracked && rn.last >= 0) {
            rd_kafka_resp_err_t err = rd_kafka_offset_store(fp->rkt, fp->part->partition, rn.last);
            if (err)
                CS_LOG_DEBUG("offset not stored subscription=%s topic=%s partition=%d offset=%lld error=\"%s\"",
                             c->sub->name, fp->part->topic, (int)fp->part->partition, (long long)rn.last,
                             rd_kafka_err2str(err));
        }
        if (fp->head && !rn.paused) more = true;
    }
    c->next_part = n ? (c->next_part + 1) % n : 0;
    return more && !lanes_full; /* full lanes: a worker wakes the poll */
}

/* ---- the loop ------------------------------------------------------------------- */

void *cs__fetch_main(void *arg) {
    cs_consumer *c = arg;
    int interval = c->interval_ms;
    c->next_commit_ms = cs__now_ms() + interval;
    bool fatal = false;
    while (!atomic_load(&c->stop) && !fatal) {
        int64_t now = cs__now_ms();
        if (atomic_load(&c->resume_wanted)) resume_drained(c);
        bool window_full = c->transactional && cs__pipeline_settled(c->pipe) >= c->sub->window_records &&
                           now >= c->next_commit_ms - interval; /* not during an abort backoff */
        if (now >= c->next_commit_ms || window_full) {
            cs__commit_positions(c, NULL, false);
            cs__pipeline_check_slow(c->pipe);
            c->next_commit_ms = now + interval + c->abort_backoff_ms;
        }
        /* After an out-of-memory stop nothing more is handed out or taken. */
        bool more = c->out_of_memory ? false : hand_out(c, now);
        size_t taken = c->out_of_memory ? 0 : take_records(c);
        if (!c->out_of_memory) stuck_check(c, now);
        fatal = c->take_fatal;
        /* Events (rebalances, commit results, errors). The poll waits only when
         * there was nothing to take or hand out; records arriving in the empty
         * recq, a store fallen under its resume mark and settlements that bring
         * a full partition down to half of max_open cut the wait short
         * (rd_kafka_queue_yield). */
        int64_t wait = taken || more ? 0 : c->next_commit_ms - now;
        if (fatal) break;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, (int)(wait < 0 ? 0 : wait > 100 ? 100 : wait));
        if (m) {
            /* The consumer queue carries no records: errors only. */
            if (m->err) on_record_error(c, m);
            rd_kafka_message_destroy(m);
            fatal = rd_kafka_fatal_error(c->rk, NULL, 0) != RD_KAFKA_RESP_ERR_NO_ERROR;
        }
    }
    return NULL; /* after a fatal error the app is stopping; nothing more to fetch */
}
