/* fetch.c — taking records from librdkafka and handing them to the pipeline.
 *
 * Every assigned partition has its own librdkafka queue
 * (rd_kafka_queue_get_partition, not forwarded to the consumer queue). The
 * fetch thread takes records from a partition's queue one at a time
 * (rd_kafka_consume_queue), and only while the partition is under max_open;
 * a full partition is simply not served, and librdkafka stops fetching it
 * once its queue holds queued.min.messages / queued.max.messages.kbytes.
 * cstream never calls rd_kafka_pause_partitions: in librdkafka 2.0.2 a pause
 * drops the partition's pre-fetched records and a resume waits up to a second
 * for the broker thread (docs/benchmarks.md, "1-partition topics"). The
 * consumer queue carries only events (rebalances, commit results, errors),
 * served by rd_kafka_consumer_poll. Not the batch API: librdkafka 2.0.x's
 * batch consume can lose records when a seek or rebalance runs in parallel
 * (fixed in 2.1.0). See docs/architecture.md and docs/fetch-path-design.md. */
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

/* ---- records as the core sees them ---------------------------------------- */

static void msg_release(void *msg) { rd_kafka_message_destroy(msg); }

static size_t msg_header_count(void *msg) {
    rd_kafka_headers_t *hdrs = NULL;
    if (rd_kafka_message_headers(msg, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR) return 0;
    return rd_kafka_header_cnt(hdrs);
}

static int msg_header_at(void *msg, size_t idx, const char **name, const void **value, size_t *len) {
    rd_kafka_headers_t *hdrs = NULL;
    if (rd_kafka_message_headers(msg, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR) return -1;
    return rd_kafka_header_get_all(hdrs, idx, name, value, len) == RD_KAFKA_RESP_ERR_NO_ERROR ? 0 : -1;
}

static const cs_source_ops kafka_records = {msg_release, msg_header_count, msg_header_at};

/* ---- helpers -------------------------------------------------------------- */

cs_part *cs__consumer_part(cs_consumer *c, const char *topic, int32_t partition) {
    return cs__pipeline_part(c->pipe, topic, partition, &kafka_records);
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

/* librdkafka's event callback of a partition queue: records arrived in an
 * empty queue. Runs on a librdkafka thread with that queue's lock held: it
 * only wakes the fetch thread's poll of the consumer queue (lock order:
 * partition queue, wake_lock, consumer queue). */
static void on_partition_records(rd_kafka_t *rk, void *opaque) {
    (void)rk;
    cs__fetch_yield(opaque);
}

part_queue *cs__fetch_queue_of(cs_consumer *c, const cs_part *part) {
    for (size_t i = 0; i < c->n_parts; i++)
        if (c->parts[i].part == part) return &c->parts[i];
    return NULL;
}

/* At assign, before librdkafka starts fetching the partition: its records go
 * to its own queue from now on (the forward to NULL sticks in librdkafka, also
 * across later assignments). */
bool cs__fetch_open_queue(cs_consumer *c, cs_part *part) {
    if (cs__fetch_queue_of(c, part)) return true;
    if (c->n_parts == c->cap_parts) {
        size_t cap = c->cap_parts ? c->cap_parts * 2 : 8;
        part_queue *grown = realloc(c->parts, cap * sizeof *grown);
        if (!grown) return false;
        c->parts = grown;
        c->cap_parts = cap;
    }
    rd_kafka_queue_t *q = rd_kafka_queue_get_partition(c->rk, part->topic, part->partition);
    if (!q) return false;
    rd_kafka_queue_forward(q, NULL);
    rd_kafka_queue_cb_event_enable(q, on_partition_records, c);
    c->parts[c->n_parts++] = (part_queue){.part = part, .q = q};
    return true;
}

/* After the unassign returned: librdkafka has served the removal by then
 * (rd_kafka_cgrp_handle_assign_op -> rd_kafka_assignment_serve: version
 * barrier bumped, stored offset taken for the final commit), so everything
 * the queue holds is outdated. No more wake-ups, and the queue is emptied:
 * taking an outdated record makes librdkafka drop it, without storing an
 * offset, which frees its memory now rather than at the next assignment. */
void cs__fetch_close_queue(cs_consumer *c, part_queue *pq, bool unassigned) {
    rd_kafka_queue_cb_event_enable(pq->q, NULL, NULL); /* waits out a callback in progress */
    /* Without the unassign nothing in it is outdated: taking a record would
     * store its offset under Auto. Leave the records to librdkafka then. */
    for (rd_kafka_message_t *m; unassigned && (m = rd_kafka_consume_queue(pq->q, 0));) rd_kafka_message_destroy(m);
    rd_kafka_queue_destroy(pq->q);
    *pq = c->parts[--c->n_parts];
}

/* Before the handle is destroyed: librdkafka must get every queue back. */
void cs__fetch_close_all_queues(cs_consumer *c) {
    while (c->n_parts) {
        part_queue *pq = &c->parts[c->n_parts - 1];
        rd_kafka_queue_cb_event_enable(pq->q, NULL, NULL);
        rd_kafka_queue_destroy(pq->q);
        c->n_parts--;
    }
}

static void resume_drained(cs_consumer *c) {
    atomic_store(&c->resume_wanted, false);
    for (size_t i = 0; i < c->n_parts; i++) cs__part_should_resume(c->pipe, c->parts[i].part);
}


/* A consumer's fatal error arrives as an error record from the poll (librdkafka
 * 2.0.2 does not send it to error_cb for high-level consumers). */
static bool report_if_fatal(cs_consumer *c) {
    char why[512];
    rd_kafka_resp_err_t orig = rd_kafka_fatal_error(c->rk, why, sizeof why);
    if (!orig) return false;
    cs__app_fatal(c->app, "%s: librdkafka fatal error %s: %s", c->who, rd_kafka_err2name(orig), why);
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

/* ---- the fetch loop --------------------------------------------------------- */

/* The record at topic/partition@offset was not handed out: stop the app, and
 * hand out nothing more, so that no later record can be settled and commit a
 * position past it (it is read again after the restart). */
static void out_of_memory(cs_consumer *c, const char *topic, int32_t partition, int64_t offset, const char *what) {
    c->out_of_memory = true;
    cs__app_fatal(c->app, "%s: out of memory %s at %s/%d@%lld; nothing after it is handed out or committed", c->who,
                  what, topic, (int)partition, (long long)offset);
}

/* A record taken from librdkafka and not handed out. Under Auto, taking it
 * stored its offset + 1; store its own offset back, so that no commit passes
 * it (librdkafka 2.0.2 commits only positions above the committed one, so the
 * committed position stays at or below it). */
static void not_handed_out(cs_consumer *c, rd_kafka_message_t *m) {
    if (!c->tracked) rd_kafka_offset_store(m->rkt, m->partition, m->offset - 1);
    rd_kafka_message_destroy(m);
}

/* Returns true if the record's partition is now paused (it reached max_open).
 * old_log: the record was queued before its topic was reported gone. */
static bool dispatch(cs_consumer *c, rd_kafka_message_t *m, bool old_log) {
    const char *topic = rd_kafka_topic_name(m->rkt);
    if (c->out_of_memory) {
        not_handed_out(c, m);
        return false;
    }
    if (!old_log) cs__topic_available(c, topic);
    cs_part *part = cs__consumer_part(c, topic, m->partition);
    /* A record below the position proves a restarted log whenever it was
     * queued; one above proves the same log only if it came after the report. */
    if (part && atomic_load_explicit(&part->log_unknown, memory_order_relaxed) &&
        (!old_log || m->offset < cs__pipeline_next_offset(c->pipe, topic, part->partition)))
        cs__settle_log_restart(c, part, topic, m->offset);
    cs_delivery *d = part ? cs__delivery_alloc(part) : NULL;
    if (!d) {
        out_of_memory(c, topic, m->partition, m->offset, "for the delivery");
        not_handed_out(c, m);
        return false;
    }
    rd_kafka_timestamp_type_t tstype;
    d->topic = part->topic;
    d->partition = m->partition;
    d->offset = m->offset;
    d->timestamp = rd_kafka_message_timestamp(m, &tstype);
    if (tstype == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE) d->timestamp = -1;
    d->key = m->key;
    d->key_len = m->key_len;
    d->value = m->payload;
    d->value_len = m->len;
    d->msg = m;
    int64_t offset = m->offset;
    if (!cs__pipeline_dispatch(c->pipe, part, d)) {
        if (part->out_of_memory) out_of_memory(c, topic, part->partition, offset, "to track the offset");
        return false;
    }
    cs__pipeline_count_pause(c->pipe);
    return true;
}

typedef enum took { TOOK_NOTHING, TOOK_ONE, TOOK_AND_PAUSED } took;

/* Takes a record (or an error) from a partition's queue, or an event from the
 * consumer queue (pq NULL), waiting at most timeout_ms. Sets *fatal if the
 * consumer hit a fatal error. */
static took take_one(cs_consumer *c, part_queue *pq, int timeout_ms, bool *fatal) {
    rd_kafka_message_t *m = pq ? rd_kafka_consume_queue(pq->q, timeout_ms) : rd_kafka_consumer_poll(c->rk, timeout_ms);
    if (!m) return TOOK_NOTHING;
    bool old_log = pq && pq->before_report > 0;
    if (old_log) pq->before_report--;
    if (m->err) {
        on_record_error(c, m);
        rd_kafka_message_destroy(m);
        *fatal = rd_kafka_fatal_error(c->rk, NULL, 0) != RD_KAFKA_RESP_ERR_NO_ERROR;
        return TOOK_ONE;
    }
    return dispatch(c, m, old_log) ? TOOK_AND_PAUSED : TOOK_ONE;
}

/* Records a partition gives per serving round, so that one busy partition
 * does not hold up the others, the commit tick or a rebalance for long. */
#define ROUND_RECORDS 256

/* One round over the assigned partitions that are not paused, starting with
 * a different one each time. Returns how many records (and errors) it took. */
static size_t serve_partitions(cs_consumer *c, bool *fatal) {
    size_t taken = 0, n = c->n_parts;
    for (size_t k = 0; k < n && !*fatal; k++) {
        part_queue *pq = &c->parts[(c->next_part + k) % n];
        if (cs__part_paused(pq->part)) continue;
        for (int i = 0; i < ROUND_RECORDS && !*fatal; i++) {
            took t = take_one(c, pq, 0, fatal);
            if (t == TOOK_NOTHING) break;
            taken++;
            if (t == TOOK_AND_PAUSED) break;
        }
    }
    c->next_part = n ? (c->next_part + 1) % n : 0;
    return taken;
}

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
        /* After an out-of-memory stop nothing more is taken: under Auto,
         * taking a record stores its offset. */
        size_t taken = c->out_of_memory ? 0 : serve_partitions(c, &fatal);
        /* Events (rebalances, commit results, errors). The poll waits only when
         * no partition had records to take; records arriving in a partition's
         * empty queue, and settlements that bring a full partition down to
         * half of max_open, cut the wait short (rd_kafka_queue_yield). */
        int64_t wait = taken ? 0 : c->next_commit_ms - now;
        if (!fatal) take_one(c, NULL, (int)(wait < 0 ? 0 : wait > 100 ? 100 : wait), &fatal);
    }
    return NULL; /* after a fatal error the app is stopping; nothing more to fetch */
}
