/* consumer.c — one subscription's librdkafka consumer and its fetch loop.
 *
 * Threads: the fetch thread (fetch_main) is the only one that polls, takes
 * records, assigns and commits while the subscription runs; the rebalance
 * callback runs on it, inside rd_kafka_consumer_poll. After the fetch thread
 * has exited, the stopping thread drains, commits and closes (close runs the
 * revoke again, which is idempotent). Workers only touch the pipeline, and
 * wake the fetch thread through wake_fetch (never blocks).
 *
 * Fetch path: every assigned partition has its own librdkafka queue
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
 * (fixed in 2.1.0). See docs/architecture.md. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/broker.h"
#include "../core/error.h"
#include "../core/log.h"
#include "../core/pipeline.h"
#include "kafka_internal.h"
#include "transaction.h"

/* One assigned partition and its own librdkafka queue (fetch thread, or the
 * closing thread after the fetch thread exited). */
typedef struct part_queue {
    cs_part *part;
    rd_kafka_queue_t *q;
    /* ops that were in q when its topic was reported gone: records of the
     * old log, which must not decide whether the log restarted (a count that
     * is too high, from outdated ops librdkafka skips, only delays that). */
    size_t before_report;
} part_queue;

struct cs_consumer {
    cs_sub *sub;
    cs_app *app;
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue; /* the consumer queue (events only), to wake a blocked poll */
    part_queue *parts;       /* assigned partitions and their queues */
    size_t n_parts, cap_parts;
    size_t next_part;        /* where the next serving round starts (fairness) */
    cs_pipeline *pipe;
    pthread_t thread;
    bool thread_started;
    _Atomic bool stop;
    _Atomic bool resume_wanted;
    bool closing; /* the close path: revoke releases pending payloads */
    bool closed_after_fatal; /* closed without the group: destroy without a consumer close */
    bool cooperative;        /* the group's rebalance protocol, as last known (rebalance_cooperative) */
    /* A record could not be handed out or tracked for lack of memory: the app
     * is stopping, and no later record is handed out either, so none can be
     * settled past the one that was not (fetch thread only). */
    bool out_of_memory;
    /* readiness (read by the HTTP thread through cs__consumer_ready) */
    _Atomic bool joined;       /* the last rebalance ended with an assignment, empty or not */
    _Atomic bool brokers_down; /* librdkafka reported all brokers down; cleared by a probe that answers */
    bool tracked;       /* Tracked or Transactional: the pipeline tracks settlements */
    bool transactional; /* positions commit in transactions (txn), never with plain commits */
    cs_txn *txn;
    int interval_ms;    /* commit interval, or window length */
    int abort_backoff_ms; /* Transactional: grows with aborts in a row, so a failure that persists does not spin */
    /* Transactional: sources whose outputs failed in the transaction being
     * committed (fetch thread only); counted as attempts after the rewind */
    struct failed_output {
        cs_part *part;
        int64_t offset;
        uint32_t attempt;
    } failed[64];
    size_t n_failed;
    int64_t next_commit_ms;
    /* Commit ticks completed (cs_test_sub_commit_ticks): the timer looked at
     * every position, and what it sent, if anything, was answered. Counted
     * even when nothing changed, so a test can wait for ticks that had the
     * chance to commit what must not be committed. */
    _Atomic uint64_t commit_ticks;
    cs_ratelimit error_warning;
    cs_ratelimit commit_warning;
    /* Subscribed topics librdkafka reported unavailable (deleted, or not
     * visible to this client), one flag per s->topics[i]: set by the error
     * paths on the fetch thread, cleared when a partition of the topic is
     * assigned again, read by /metrics. */
    _Atomic bool *topic_unavailable;
    _Atomic int n_unavailable; /* how many are set: dispatch looks only when > 0 */
    /* Sticky: some subscribed topic vanished while this consumer ran. Then
     * librdkafka 2.0.2 may never finish destroying the handle (see
     * destroy_handle). */
    _Atomic bool topic_vanished;
    /* Orders the commits' enqueues (tick, revoke, close, assignment marks,
     * suspect-record commits). Lock order: level 3 (src/core/lock_order.h),
     * before the registry and partition locks. Held only while commit states
     * are taken and enqueued, never while a result is awaited. */
    pthread_mutex_t commit_lock;
    /* Orders wake-ups with the end of the fetch thread: once `stop` is set no
     * rd_kafka_queue_yield reaches the consumer queue. rd_kafka_consumer_close
     * forwards that queue to its own and returns at the first yield it sees,
     * before the group is left (the destroy then waits forever). Lock order:
     * level 6, a leaf (src/core/lock_order.h): taken under a partition lock
     * (settle wakes the fetch thread) and under a librdkafka queue lock
     * (on_partition_records); it only yields. */
    pthread_mutex_t wake_lock;
    char who[256];
};

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

static cs_part *part_of(cs_consumer *c, const char *topic, int32_t partition) {
    return cs__pipeline_part(c->pipe, topic, partition, &kafka_records);
}

/* Cuts the fetch thread's wait in the poll short, while it runs. */
static void yield_fetch(cs_consumer *c) {
    pthread_mutex_lock(&c->wake_lock);
    if (!atomic_load(&c->stop)) rd_kafka_queue_yield(c->queue);
    pthread_mutex_unlock(&c->wake_lock);
}

static void wake_fetch(void *arg) {
    cs_consumer *c = arg;
    atomic_store(&c->resume_wanted, true);
    yield_fetch(c);
}

/* librdkafka's event callback of a partition queue: records arrived in an
 * empty queue. Runs on a librdkafka thread with that queue's lock held: it
 * only wakes the fetch thread's poll of the consumer queue (lock order:
 * partition queue, wake_lock, consumer queue). */
static void on_partition_records(rd_kafka_t *rk, void *opaque) {
    (void)rk;
    yield_fetch(opaque);
}

static part_queue *queue_of(cs_consumer *c, const cs_part *part) {
    for (size_t i = 0; i < c->n_parts; i++)
        if (c->parts[i].part == part) return &c->parts[i];
    return NULL;
}

/* At assign, before librdkafka starts fetching the partition: its records go
 * to its own queue from now on (the forward to NULL sticks in librdkafka, also
 * across later assignments). */
static bool open_queue(cs_consumer *c, cs_part *part) {
    if (queue_of(c, part)) return true;
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
static void close_queue(cs_consumer *c, part_queue *pq, bool unassigned) {
    rd_kafka_queue_cb_event_enable(pq->q, NULL, NULL); /* waits out a callback in progress */
    /* Without the unassign nothing in it is outdated: taking a record would
     * store its offset under Auto. Leave the records to librdkafka then. */
    for (rd_kafka_message_t *m; unassigned && (m = rd_kafka_consume_queue(pq->q, 0));) rd_kafka_message_destroy(m);
    rd_kafka_queue_destroy(pq->q);
    *pq = c->parts[--c->n_parts];
}

/* Before the handle is destroyed: librdkafka must get every queue back. */
static void close_all_queues(cs_consumer *c) {
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

/* ---- commits (Tracked) ---------------------------------------------------- */

static void commit_result(cs_consumer *c, rd_kafka_resp_err_t err, const rd_kafka_topic_partition_list_t *offsets) {
    for (int i = 0; offsets && i < offsets->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &offsets->elems[i];
        rd_kafka_resp_err_t perr = err ? err : e->err;
        cs_part *part = part_of(c, e->topic, e->partition);
        char meta[CS_META_MAX];
        snprintf(meta, sizeof meta, "%.*s", e->metadata ? (int)e->metadata_size : 0, e->metadata ? (const char *)e->metadata : "");
        if (part) cs__part_commit_done(part, e->offset, meta, perr == RD_KAFKA_RESP_ERR_NO_ERROR);
        CS_LOG_DEBUG("commit result subscription=%s topic=%s partition=%d offset=%lld error=\"%s\"", c->sub->name,
                     e->topic, (int)e->partition, (long long)e->offset, rd_kafka_err2str(perr));
        uint64_t skipped = 0;
        /* After a fatal error (fenced) nothing is retried: the app stops. */
        bool fatal = rd_kafka_fatal_error(c->rk, NULL, 0) != RD_KAFKA_RESP_ERR_NO_ERROR;
        if (perr && cs__ratelimit_allow(&c->commit_warning, 2000, &skipped))
            CS_LOG_WARN("commit failed, %s subscription=%s topic=%s partition=%d "
                        "offset=%lld error=\"%s\" similar_since_last=%llu",
                        fatal ? "not retried (fatal error)" : "retried on the next tick", c->sub->name, e->topic,
                        (int)e->partition, (long long)e->offset, rd_kafka_err2str(perr), (unsigned long long)skipped);
    }
    if (offsets && offsets->cnt) cs__pipeline_count_commit(c->pipe, err == RD_KAFKA_RESP_ERR_NO_ERROR);
}

/* Results of cstream's explicit commits (Tracked). */
static void on_commit_result(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *offsets,
                             void *opaque) {
    (void)rk;
    if (err == RD_KAFKA_RESP_ERR__NO_OFFSET) return; /* nothing to commit */
    commit_result(opaque, err, offsets);
}

/* Results of the timer's commits: once answered, the tick is complete. */
static void on_tick_result(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *offsets,
                           void *opaque) {
    on_commit_result(rk, err, offsets, opaque);
    atomic_fetch_add_explicit(&((cs_consumer *)opaque)->commit_ticks, 1, memory_order_relaxed);
}

/* librdkafka's own commits (Auto). */
static void on_offset_commit(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *offsets,
                             void *opaque) {
    (void)rk;
    cs_consumer *c = opaque;
    if (err == RD_KAFKA_RESP_ERR__NO_OFFSET || c->tracked) return;
    if (offsets && offsets->cnt) cs__pipeline_count_commit(c->pipe, err == RD_KAFKA_RESP_ERR_NO_ERROR);
    /* The committed position of each partition, for /metrics: under Auto,
     * cstream learns it only from librdkafka's report of its own commits.
     * Served on the fetch thread (or the closing one after it exited), as
     * part_of requires. */
    for (int i = 0; !err && offsets && i < offsets->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &offsets->elems[i];
        cs_part *part = e->err || e->offset < 0 ? NULL : part_of(c, e->topic, e->partition);
        if (part) cs__part_commit_done(part, e->offset, NULL, true);
    }
    if (err) CS_LOG_WARN("auto commit failed subscription=%s error=\"%s\"", c->sub->name, rd_kafka_err2str(err));
}

/* Commits the partitions in `only` (all known ones if NULL) whose position or
 * attempt counts changed, the counts in the offset metadata (only an explicit
 * commit keeps metadata in librdkafka 2.0.2). Async on the timer; sync, and
 * marked clean, on revoke and close. */
static void close_window(cs_consumer *c, bool final);

/* A synchronous commit in two steps, so that commit_lock is never held while
 * the coordinator answers: commit_enqueue (under commit_lock: the order the
 * states were taken is the order they reach the wire) puts the commit on a
 * queue of its own, and commit_await (after the lock is released) waits for
 * its result as long as the commit takes, as rd_kafka_commit does. Returns
 * the queue; *err is set if librdkafka refused the commit (the queue is then
 * destroyed and NULL returned). */
static rd_kafka_queue_t *commit_enqueue(cs_consumer *c, rd_kafka_topic_partition_list_t *l, rd_kafka_resp_err_t *err) {
    rd_kafka_queue_t *q = rd_kafka_queue_new(c->rk);
    *err = rd_kafka_commit_queue(c->rk, l, q, NULL, NULL); /* no callback: the result comes as an event */
    if (!*err) return q;
    rd_kafka_queue_destroy(q);
    return NULL;
}

/* Waits for the result on q and destroys q; with `record`, hands it to
 * commit_result like on_commit_result. Returns the request's error, else the
 * first partition's. */
static rd_kafka_resp_err_t commit_await(cs_consumer *c, rd_kafka_queue_t *q, bool record) {
    rd_kafka_event_t *ev;
    while (!(ev = rd_kafka_queue_poll(q, 1000))) {} /* as long as it takes: every commit gets a result */
    rd_kafka_resp_err_t err = rd_kafka_event_error(ev);
    const rd_kafka_topic_partition_list_t *res = rd_kafka_event_topic_partition_list(ev);
    if (record && err != RD_KAFKA_RESP_ERR__NO_OFFSET) commit_result(c, err, res);
    if (!err && res && res->cnt) err = res->elems[0].err;
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    return err;
}

static void commit_positions(cs_consumer *c, const rd_kafka_topic_partition_list_t *only, bool sync) {
    if (c->transactional) {
        close_window(c, sync); /* the whole window: a transaction never spans a rebalance */
        if (!sync) atomic_fetch_add_explicit(&c->commit_ticks, 1, memory_order_relaxed);
        return;
    }
    if (!c->tracked || rd_kafka_fatal_error(c->rk, NULL, 0)) return;
    /* Taking the states and enqueueing them is one step under commit_lock
     * (lock order: commit_lock, then partition), so that commits reach the
     * wire in the order their states were taken. */
    pthread_mutex_lock(&c->commit_lock);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    rd_kafka_topic_partition_list_t *all = NULL;
    if (!only) {
        rd_kafka_assignment(c->rk, &all);
        only = all;
    }
    for (int i = 0; only && i < only->cnt; i++) {
        cs_part *part = part_of(c, only->elems[i].topic, only->elems[i].partition);
        int64_t pos;
        char meta[CS_META_MAX];
        if (!part || atomic_load(&part->log_unknown)) continue; /* see mark_topic_partitions */
        if (!cs__part_commit_state(part, sync, &pos, meta, sizeof meta)) continue;
        rd_kafka_topic_partition_t *e = rd_kafka_topic_partition_list_add(l, part->topic, part->partition);
        e->offset = pos;
        e->metadata = strdup(meta); /* freed with the list */
        e->metadata_size = e->metadata ? strlen(meta) : 0;
    }
    if (all) rd_kafka_topic_partition_list_destroy(all);
    rd_kafka_queue_t *result_q = NULL;
    if (l->cnt > 0 && sync) {
        /* Its result is awaited once commit_lock is released (commit_await). */
        rd_kafka_resp_err_t err;
        result_q = commit_enqueue(c, l, &err);
        if (err) commit_result(c, err, l);
    } else if (l->cnt > 0) {
        /* The result comes to on_tick_result through the fetch loop's poll. */
        rd_kafka_resp_err_t err = rd_kafka_commit_queue(c->rk, l, c->queue, on_tick_result, c);
        if (err) {
            commit_result(c, err, l);
            atomic_fetch_add_explicit(&c->commit_ticks, 1, memory_order_relaxed);
        }
    } else if (!sync) {
        atomic_fetch_add_explicit(&c->commit_ticks, 1, memory_order_relaxed); /* nothing to send: complete */
    }
    pthread_mutex_unlock(&c->commit_lock);
    if (result_q) commit_await(c, result_q, true);
    rd_kafka_topic_partition_list_destroy(l);
}

/* ---- windows (Transactional) ---------------------------------------------- */

/* Aborts one partition's window: its records are read again from the last
 * committed position. A seek that fails would skip records, so it stops the app. */
static void rewind_partition(cs_consumer *c, cs_part *part) {
    int64_t seek = cs__window_rewind(c->pipe, part);
    if (seek < 0) return;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, part->topic, part->partition)->offset = seek;
    rd_kafka_error_t *e = rd_kafka_seek_partitions(c->rk, l, 10000);
    rd_kafka_resp_err_t err = e ? rd_kafka_error_code(e) : l->elems[0].err;
    if (err)
        cs__app_fatal(c->app, "%s: window of %s/%d aborted but the seek back to offset %lld failed: %s", c->who,
                      part->topic, (int)part->partition, (long long)seek,
                      e ? rd_kafka_error_string(e) : rd_kafka_err2str(err));
    else
        CS_LOG_INFO("window aborted, partition read again from its committed position subscription=%s topic=%s "
                    "partition=%d offset=%lld",
                    c->sub->name, part->topic, (int)part->partition, (long long)seek);
    if (e) rd_kafka_error_destroy(e);
    rd_kafka_topic_partition_list_destroy(l);
}

static void output_failed(void *arg, cs_part *part, int64_t offset, uint32_t attempt) {
    cs_consumer *c = arg;
    if (c->n_failed < sizeof c->failed / sizeof c->failed[0])
        c->failed[c->n_failed++] = (struct failed_output){part, offset, attempt};
}

/* Closes the window: one transaction with, for every assigned partition, its
 * position and the outputs of the settled records below it (window.c says why
 * only those). Outputs of later records stay for a later window. If the
 * transaction aborts, its partitions are read again from their committed
 * positions. `final` (revoke, close): no stall check, the window ends here.
 * Fetch thread (or the closing thread after it exited). */
static void close_window(cs_consumer *c, bool final) {
    if (!c->txn || cs__txn_dead(c->txn) || rd_kafka_fatal_error(c->rk, NULL, 0)) return;
    cs__pipeline_take_settled(c->pipe);
    rd_kafka_topic_partition_list_t *assigned = NULL;
    if (rd_kafka_assignment(c->rk, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    rd_kafka_topic_partition_list_t *offsets = rd_kafka_topic_partition_list_new(assigned->cnt > 0 ? assigned->cnt : 1);
    cs_output *outputs = NULL, **tail = &outputs;
    size_t n_outputs = 0;
    cs__pipeline_close_gate(c->pipe); /* only with the measurement switch CSTREAM_TXN_BARRIER */
    for (int i = 0; i < assigned->cnt; i++) {
        cs_part *part = part_of(c, assigned->elems[i].topic, assigned->elems[i].partition);
        int64_t pos;
        char meta[CS_META_MAX];
        if (!part || atomic_load(&part->log_unknown)) continue; /* see mark_topic_partitions */
        if (!cs__window_take(part, final, &pos, meta, sizeof meta, &tail, &n_outputs)) continue;
        rd_kafka_topic_partition_t *e = rd_kafka_topic_partition_list_add(offsets, part->topic, part->partition);
        e->offset = pos;
        e->metadata = strdup(meta); /* freed with the list */
        e->metadata_size = e->metadata ? strlen(meta) : 0;
    }
    c->n_failed = 0;
    if (offsets->cnt > 0) {
        int64_t began = cs__now_ms();
        cs_txn_result r = cs__txn_commit(c->txn, outputs, offsets, c->rk);
        CS_LOG_DEBUG("transaction %s subscription=%s partitions=%d outputs=%zu ms=%lld",
                     r == CS_TXN_COMMITTED ? "committed" : r == CS_TXN_ABORTED ? "aborted" : "failed", c->sub->name,
                     offsets->cnt, n_outputs, (long long)(cs__now_ms() - began));
        for (int i = 0; i < offsets->cnt; i++) {
            rd_kafka_topic_partition_t *e = &offsets->elems[i];
            cs_part *part = part_of(c, e->topic, e->partition);
            if (!part) continue;
            if (r == CS_TXN_COMMITTED) cs__part_commit_done(part, e->offset, e->metadata, true);
            else if (r == CS_TXN_ABORTED) rewind_partition(c, part);
        }
        /* A source whose output failed comes back with that run counted. */
        for (size_t i = 0; r == CS_TXN_ABORTED && i < c->n_failed; i++)
            cs__window_output_failed(c->failed[i].part, c->failed[i].offset, c->failed[i].attempt);
        if (r == CS_TXN_COMMITTED) {
            cs__pipeline_count_transaction(c->pipe, n_outputs);
            c->abort_backoff_ms = 0;
        }
        if (r == CS_TXN_ABORTED) {
            cs__pipeline_count_abort(c->pipe);
            c->abort_backoff_ms = c->abort_backoff_ms ? c->abort_backoff_ms * 2 : c->interval_ms;
            if (c->abort_backoff_ms > 5000) c->abort_backoff_ms = 5000;
        }
        cs__pipeline_count_commit(c->pipe, r == CS_TXN_COMMITTED);
    }
    cs__pipeline_open_gate(c->pipe);
    cs__output_free_all(outputs);
    rd_kafka_topic_partition_list_destroy(offsets);
    if (!final && !cs__txn_dead(c->txn)) {
        int64_t now = cs__now_ms();
        for (int i = 0; i < assigned->cnt; i++) {
            cs_part *part = part_of(c, assigned->elems[i].topic, assigned->elems[i].partition);
            if (!part || !cs__window_stalled(part, now, c->sub->stall_timeout_ms)) continue;
            CS_LOG_WARN("window aborted: a retried record held it past the stall timeout subscription=%s topic=%s "
                        "partition=%d stall_timeout_ms=%d",
                        c->sub->name, part->topic, (int)part->partition, c->sub->stall_timeout_ms);
            cs__pipeline_count_abort(c->pipe);
            rewind_partition(c, part);
        }
    }
    rd_kafka_topic_partition_list_destroy(assigned);
}

/* ---- a subscribed topic that goes away ---------------------------------------
 * A topic deleted under a subscription is bad input from outside the service:
 * librdkafka reports it (a consume error "Subscribed topic not available: T",
 * or "T [p]: desired partition is no longer available" through error_cb), the
 * group rebalances the topic's partitions away, and the subscription keeps
 * consuming its other topics. cstream keeps running: the topic may come back
 * (recreated, or ACLs fixed), and then its partitions are assigned again and
 * read from the start (Kafka deleted the group's offsets with the topic). What
 * it adds is one ERROR line that names the topic, per loss, the
 * cstream_topic_unavailable gauge for alerting, and care that an old topic's
 * positions never land on a new one (mark_topic_partitions). */

static bool topic_error(rd_kafka_resp_err_t err) {
    return err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
           err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
}

/* The index of the subscribed topic that `text` is about (a topic name, or
 * librdkafka's reason, which starts with the topic name), or -1. */
static int subscribed_topic_in(const cs_consumer *c, const char *text, bool exact) {
    for (size_t i = 0; text && i < c->sub->n_topics; i++) {
        const char *t = c->sub->topics[i];
        size_t n = strlen(t);
        if (exact ? !strcmp(text, t) : (!strncmp(text, t, n) && (text[n] == ' ' || text[n] == ':' || !text[n])))
            return (int)i;
    }
    return -1;
}

/* The topic's partitions still assigned to this member: their log may have
 * restarted. librdkafka keeps them in the assignment until the group
 * rebalances, about a second later, and a topic created again before that is
 * read from its start (librdkafka resets the old position, now out of range).
 * Until a record shows whether the log restarted, their positions are not
 * committed: an old topic's position must not land on a new topic. Nothing
 * is discarded yet, since the report may be wrong (a broker briefly missing
 * the topic) and then queued records must still run. Fetch thread (error
 * callbacks run inside its poll). */
static void mark_topic_partitions(cs_consumer *c, const char *topic) {
    rd_kafka_topic_partition_list_t *assigned = NULL;
    if (rd_kafka_assignment(c->rk, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    for (int i = 0; i < assigned->cnt; i++) {
        if (strcmp(assigned->elems[i].topic, topic)) continue;
        cs_part *part = part_of(c, topic, assigned->elems[i].partition);
        if (!part) continue;
        atomic_store(&part->log_unknown, true);
        part_queue *pq = queue_of(c, part);
        if (pq) pq->before_report = (size_t)rd_kafka_queue_length(pq->q);
    }
    rd_kafka_topic_partition_list_destroy(assigned);
}

/* Dispatch, for a partition whose log may have restarted: a record below the
 * ones already fetched proves it did, so the partition starts over (a new
 * epoch: what is in flight of the old topic becomes stale, its positions mean
 * nothing here; an empty tracker, which would otherwise take the new topic's
 * first offsets for re-deliveries and drop them, as measured before this
 * existed: records 0-4 of a recreated topic lost). A record above them: the
 * same log, nothing to do. Either way commits resume. Under Auto there is no
 * tracker to reset, only the line to log. Fetch thread. */
static void settle_log_restart(cs_consumer *c, cs_part *part, const char *topic, int64_t offset) {
    atomic_store(&part->log_unknown, false);
    int64_t next = cs__pipeline_next_offset(c->pipe, topic, part->partition);
    if (next < 0 || offset >= next) return;
    CS_LOG_WARN("partition log restarted (topic deleted and created again): read from its new start "
                "subscription=%s topic=%s partition=%d offset=%lld old_next_offset=%lld",
                c->sub->name, topic, (int)part->partition, (long long)offset, (long long)next);
    if (!c->tracked) return; /* Auto tracks no offsets: nothing to forget */
    /* A new epoch, as a Transactional rewind makes: the old topic's
     * deliveries still running or pending stay on the in-flight list (their
     * settlements are stale; a revoke or the stop waits for them). Releasing
     * them here would free payloads their handlers are reading. */
    cs__pipeline_assign(c->pipe, part);
}

static void topic_unavailable(cs_consumer *c, int i, rd_kafka_resp_err_t err, const char *reason) {
    atomic_store(&c->topic_vanished, true);
    if (atomic_exchange(&c->topic_unavailable[i], true)) return; /* said so already */
    atomic_fetch_add(&c->n_unavailable, 1);
    mark_topic_partitions(c, c->sub->topics[i]);
    CS_LOG_ERR("subscribed topic not available (deleted, or not visible to this client): nothing is committed "
               "for it until it is back, the subscription keeps running and consumes it again then "
               "subscription=%s group=%s topic=%s error=%s reason=\"%s\"",
               c->sub->name, c->sub->group ? c->sub->group : c->sub->k->default_group, c->sub->topics[i],
               rd_kafka_err2name(err), reason);
}

/* Fetch thread: a partition of the topic was assigned again, or a record of
 * it arrived (a topic recreated before the group rebalanced stays assigned). */
static void topic_available(cs_consumer *c, const char *topic) {
    if (atomic_load_explicit(&c->n_unavailable, memory_order_relaxed) == 0) return;
    int i = subscribed_topic_in(c, topic, true);
    if (i < 0 || !atomic_exchange(&c->topic_unavailable[i], false)) return;
    atomic_fetch_sub(&c->n_unavailable, 1);
    CS_LOG_INFO("subscribed topic available again subscription=%s topic=%s", c->sub->name, topic);
}

/* ---- rebalance ------------------------------------------------------------ */

static void call_hook(cs_consumer *c, cs_partitions_fn fn, void *user, const rd_kafka_topic_partition_list_t *l) {
    if (!fn || !l || l->cnt == 0) return;
    int32_t *ids = calloc((size_t)l->cnt, sizeof *ids);
    if (!ids) return;
    for (size_t t = 0; t < c->sub->n_topics; t++) {
        size_t n = 0;
        for (int i = 0; i < l->cnt; i++)
            if (!strcmp(l->elems[i].topic, c->sub->topics[t])) ids[n++] = l->elems[i].partition;
        if (n) fn(c->sub, c->sub->topics[t], ids, n, user);
    }
    free(ids);
}

/* Tracked, at assign: the attempt counts the previous owner committed. If it
 * did not leave cleanly (or the group has no position yet), it may have died
 * running one of the first records: those records are "suspect", and each of
 * them has its attempt committed before it runs (see cs__part_set_prior). */
static void load_attempts(cs_consumer *c, const rd_kafka_topic_partition_list_t *l) {
    rd_kafka_topic_partition_list_t *committed = rd_kafka_topic_partition_list_copy(l);
    rd_kafka_topic_partition_list_t *running = rd_kafka_topic_partition_list_new(l->cnt);
    rd_kafka_resp_err_t err = rd_kafka_committed(c->rk, committed, 10000);
    for (int i = 0; i < committed->cnt; i++) {
        rd_kafka_topic_partition_t *e = &committed->elems[i];
        cs_part *part = part_of(c, e->topic, e->partition);
        if (!part) continue;
        int64_t offs[CS_PRIOR_MAX];
        uint32_t atts[CS_PRIOR_MAX];
        size_t n = 0;
        bool clean = false;
        if (!err && !e->err && e->offset >= 0)
            cs__meta_decode(e->metadata, e->metadata_size, &clean, offs, atts, CS_PRIOR_MAX, &n);
        else
            clean = false; /* no position (or not readable): the first records are suspect */
        char meta[CS_META_MAX];
        cs__meta_encode(meta, sizeof meta, clean, offs, atts, n);
        /* Transactional: only transactions commit positions, so there is no
         * running mark and no suspect records (a crash aborts the window). */
        if (c->transactional) clean = true;
        cs__part_set_prior(part, e->offset >= 0 ? e->offset : -1, meta, offs, atts, n, !clean);
        if (!c->transactional && clean && e->offset >= 0 && c->sub->max_attempts > 0) {
            /* This owner now runs the partition: say so at once (c=0), or a
             * crash before its first commit would look like a clean leave. */
            cs__meta_encode(meta, sizeof meta, false, offs, atts, n);
            rd_kafka_topic_partition_t *r = rd_kafka_topic_partition_list_add(running, e->topic, e->partition);
            r->offset = e->offset;
            r->metadata = strdup(meta);
            r->metadata_size = r->metadata ? strlen(meta) : 0;
        }
        /* Say which of the three it was: a first start is not a crash. */
        if (!clean && !err && !e->err && e->offset < 0)
            CS_LOG_INFO("no committed position yet (the group never committed this partition): attempts of the "
                        "first records are committed before they run subscription=%s topic=%s partition=%d",
                        c->sub->name, e->topic, (int)e->partition);
        else if (!clean && (err || e->err))
            CS_LOG_INFO("committed position not read: attempts of the first records are committed before they run "
                        "subscription=%s topic=%s partition=%d error=\"%s\"",
                        c->sub->name, e->topic, (int)e->partition, rd_kafka_err2str(err ? err : e->err));
        else if (!clean)
            CS_LOG_INFO("previous owner did not stop cleanly: attempts of the first records are committed before "
                        "they run subscription=%s topic=%s partition=%d committed=%lld",
                        c->sub->name, e->topic, (int)e->partition, (long long)e->offset);
    }
    if (err)
        CS_LOG_WARN("attempt counts not read, they restart from zero subscription=%s error=\"%s\"", c->sub->name,
                    rd_kafka_err2str(err));
    if (running->cnt > 0) {
        rd_kafka_resp_err_t cerr;
        pthread_mutex_lock(&c->commit_lock);
        rd_kafka_queue_t *q = commit_enqueue(c, running, &cerr);
        pthread_mutex_unlock(&c->commit_lock);
        if (q) cerr = commit_await(c, q, false);
        if (cerr)
            CS_LOG_WARN("could not mark the partitions as running, a crash before the first commit may not count "
                        "an attempt subscription=%s error=\"%s\"",
                        c->sub->name, rd_kafka_err2str(cerr));
    }
    rd_kafka_topic_partition_list_destroy(running);
    rd_kafka_topic_partition_list_destroy(committed);
}

/* The pipeline's hook for suspect records: commits `pos` with `meta` before
 * the record runs. Serialised with the timer's commits (commit_lock), so that
 * a position never goes backwards on the wire. Any thread. */
static int precommit(void *arg, cs_part *part) {
    cs_consumer *c = arg;
    int64_t pos;
    char meta[CS_META_MAX];
    /* The state is taken under commit_lock, so that no older state can be
     * enqueued after this one (and this one after no newer one). */
    pthread_mutex_lock(&c->commit_lock);
    if (atomic_load(&part->log_unknown) || !cs__part_commit_state_now(part, &pos, meta, sizeof meta)) {
        pthread_mutex_unlock(&c->commit_lock);
        return 0;
    }
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_t *e = rd_kafka_topic_partition_list_add(l, part->topic, part->partition);
    e->offset = pos;
    e->metadata = strdup(meta);
    e->metadata_size = e->metadata ? strlen(meta) : 0;
    rd_kafka_queue_t *q = rd_kafka_queue_new(c->rk);
    rd_kafka_resp_err_t err = rd_kafka_commit_queue(c->rk, l, q, NULL, NULL);
    pthread_mutex_unlock(&c->commit_lock);
    if (!err) {
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 10000);
        if (!ev) err = RD_KAFKA_RESP_ERR__TIMED_OUT;
        else {
            err = rd_kafka_event_error(ev);
            const rd_kafka_topic_partition_list_t *res = rd_kafka_event_topic_partition_list(ev);
            if (!err && res && res->cnt) err = res->elems[0].err;
            rd_kafka_event_destroy(ev);
        }
    }
    rd_kafka_queue_destroy(q);
    cs__part_commit_done(part, pos, meta, err == RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(l);
    if (err)
        CS_LOG_WARN("attempt not committed before its run subscription=%s topic=%s partition=%d error=\"%s\"",
                    c->sub->name, part->topic, (int)part->partition, rd_kafka_err2str(err));
    return err ? -1 : 0;
}

static void assign_partitions(cs_consumer *c, rd_kafka_topic_partition_list_t *l, bool cooperative) {
    for (int i = 0; i < l->cnt; i++) {
        cs_part *part = part_of(c, l->elems[i].topic, l->elems[i].partition);
        if (part) cs__pipeline_assign(c->pipe, part);
        if (!part || !open_queue(c, part))
            cs__app_fatal(c->app, "%s: out of memory at the assignment of %s/%d", c->who, l->elems[i].topic,
                          (int)l->elems[i].partition);
        topic_available(c, l->elems[i].topic);
        CS_LOG_INFO("partition assigned subscription=%s group=%s topic=%s partition=%d", c->sub->name,
                    c->sub->group ? c->sub->group : c->sub->k->default_group, l->elems[i].topic,
                    (int)l->elems[i].partition);
    }
    if (c->tracked) load_attempts(c, l);
    if (cooperative) {
        rd_kafka_error_t *e = rd_kafka_incremental_assign(c->rk, l);
        if (e) {
            cs__app_fatal(c->app, "%s: incremental assign failed: %s", c->who, rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
        }
    } else {
        rd_kafka_resp_err_t err = rd_kafka_assign(c->rk, l);
        if (err) cs__app_fatal(c->app, "%s: assign failed: %s", c->who, rd_kafka_err2str(err));
    }
    call_hook(c, c->sub->on_assign, c->sub->on_assign_user, l);
}

/* Stop handing out, wait (bounded) for in-flight settlements, commit what is
 * settled, then release. Idempotent: close runs it again on released parts. */
static void revoke_partitions(cs_consumer *c, rd_kafka_topic_partition_list_t *l, bool lost) {
    call_hook(c, c->sub->on_revoke, c->sub->on_revoke_user, l);
    for (int i = 0; i < l->cnt; i++) {
        cs_part *part = part_of(c, l->elems[i].topic, l->elems[i].partition);
        if (part && c->tracked) cs__pipeline_stop_partition(c->pipe, part);
    }
    if (!lost) {
        int64_t deadline = cs__now_ms() + c->sub->drain_timeout_ms;
        for (int i = 0; i < l->cnt; i++) {
            cs_part *part = part_of(c, l->elems[i].topic, l->elems[i].partition);
            size_t left = part ? cs__pipeline_wait_settled(c->pipe, part, deadline) : 0;
            if (left)
                CS_LOG_WARN("revoke: deliveries still open at the drain deadline stay uncommitted "
                            "subscription=%s topic=%s partition=%d open=%zu",
                            c->sub->name, part->topic, (int)part->partition, left);
        }
        if (!c->closing) commit_positions(c, l, true); /* at close, the close committed already */
    } else {
        CS_LOG_WARN("assignment lost: nothing is committed for the lost partitions subscription=%s",
                    c->sub->name);
    }
    for (int i = 0; i < l->cnt; i++) {
        cs_part *part = part_of(c, l->elems[i].topic, l->elems[i].partition);
        if (!part) continue;
        /* Payloads of deliveries still pending are released now: the
         * consumer may close before their holders settle them. */
        cs__pipeline_release_partition(c->pipe, part, true);
        CS_LOG_INFO("partition released subscription=%s topic=%s partition=%d", c->sub->name, part->topic,
                    (int)part->partition);
    }
}

/* Whether the group rebalances cooperatively. librdkafka 2.0.2 answers NULL
 * once the group handle stops serving requests, as in the revoke that
 * rd_kafka_consumer_close runs (seen with a static member closing while its
 * group rebalanced: strcmp(NULL) crashed the stop); then the protocol of the
 * last rebalance holds. Fetch thread, or the closing thread after it. */
static bool rebalance_cooperative(cs_consumer *c, rd_kafka_t *rk) {
    const char *protocol = rd_kafka_rebalance_protocol(rk);
    if (protocol) c->cooperative = !strcmp(protocol, "COOPERATIVE");
    return c->cooperative;
}

static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *l,
                         void *opaque) {
    cs_consumer *c = opaque;
    bool cooperative = rebalance_cooperative(c, rk);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        assign_partitions(c, l, cooperative);
        /* Joined, also with nothing assigned (more members than partitions):
         * librdkafka calls this with an empty list then. */
        atomic_store(&c->joined, true);
        CS_LOG_DEBUG("group joined subscription=%s partitions=%d", c->sub->name, l->cnt);
        return;
    }
    bool lost = rd_kafka_assignment_lost(rk);
    /* An eager revoke starts a rebalance (the member has nothing until the
     * next assign); a lost assignment means the member left the group. A
     * cooperative revoke keeps the rest of the assignment: still joined. */
    if (!cooperative || lost) atomic_store(&c->joined, false);
    revoke_partitions(c, l, lost);
    bool unassigned = true;
    if (cooperative) {
        rd_kafka_error_t *e = rd_kafka_incremental_unassign(rk, l);
        if (e) {
            CS_LOG_WARN("unassign failed subscription=%s error=\"%s\"", c->sub->name, rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
            unassigned = false;
        }
    } else {
        rd_kafka_resp_err_t e = rd_kafka_assign(rk, NULL);
        if (e) {
            CS_LOG_WARN("unassign failed subscription=%s error=\"%s\"", c->sub->name, rd_kafka_err2str(e));
            unassigned = false;
        }
    }
    for (int i = 0; i < l->cnt; i++) {
        cs_part *part = part_of(c, l->elems[i].topic, l->elems[i].partition);
        part_queue *pq = part ? queue_of(c, part) : NULL;
        if (pq) close_queue(c, pq, unassigned);
    }
}

/* ---- errors ---------------------------------------------------------------- */

/* Stops the app for the consumer's fatal error `orig`. Fenced (static
 * membership): another consumer joined the group with this one's
 * group.instance.id — a second process with the same instance id — and the
 * broker gave it this member's place and partitions; this one can neither
 * commit nor rejoin (librdkafka 2.0.2 makes it a fatal error), and the close
 * commits nothing (close_after_fatal). */
static void fatal_error(cs_consumer *c, rd_kafka_resp_err_t orig, const char *why) {
    if (orig == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID && c->sub->static_id) {
        cs__app_fatal(c->app,
                      "%s: fenced (FENCED_INSTANCE_ID): another consumer joined group %s with the same "
                      "group.instance.id %s, so another process runs with instance id %s; this consumer stops and "
                      "commits nothing (give every running instance its own instance id); librdkafka: %s",
                      c->who, c->sub->group ? c->sub->group : c->sub->k->default_group, c->sub->static_id,
                      c->sub->k->instance_id, why);
        return;
    }
    cs__app_fatal(c->app, "%s: librdkafka fatal error %s: %s", c->who, rd_kafka_err2name(orig), why);
}

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    cs_consumer *c = opaque;
    int gone = topic_error(err) ? subscribed_topic_in(c, reason, false) : -1;
    if (gone >= 0) {
        topic_unavailable(c, gone, err, reason);
        return;
    }
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char why[512];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, why, sizeof why);
        fatal_error(c, orig, why);
        return;
    }
    if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) atomic_store(&c->brokers_down, true);
    uint64_t skipped = 0;
    /* Refused credentials or TLS after a good start (a rotated password, a
     * subscription's own sasl.* settings): librdkafka keeps retrying and
     * nothing is fetched meanwhile, so it is an error, not weather. */
    bool refused = err == RD_KAFKA_RESP_ERR__AUTHENTICATION || err == RD_KAFKA_RESP_ERR__SSL;
    if (cs__ratelimit_allow(&c->error_warning, 5000, &skipped))
        cs__log(refused ? CS_LOG_ERROR : CS_LOG_WARN,
                "kafka client error subscription=%s error=%s reason=\"%s\" similar_since_last=%llu", c->sub->name,
                rd_kafka_err2name(err), reason, (unsigned long long)skipped);
}

/* A consumer's fatal error arrives as an error record from the poll (librdkafka
 * 2.0.2 does not send it to error_cb for high-level consumers). */
static bool report_if_fatal(cs_consumer *c) {
    char why[512];
    rd_kafka_resp_err_t orig = rd_kafka_fatal_error(c->rk, why, sizeof why);
    if (!orig) return false;
    fatal_error(c, orig, why);
    return true;
}

static void on_record_error(cs_consumer *c, const rd_kafka_message_t *m) {
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) return;
    if (m->err == RD_KAFKA_RESP_ERR__FATAL && report_if_fatal(c)) return;
    const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "-";
    int gone = topic_error(m->err) ? subscribed_topic_in(c, topic, true) : -1;
    if (gone >= 0) {
        topic_unavailable(c, gone, m->err, rd_kafka_message_errstr(m));
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
    if (!old_log) topic_available(c, topic);
    cs_part *part = part_of(c, topic, m->partition);
    /* A record below the position proves a restarted log whenever it was
     * queued; one above proves the same log only if it came after the report. */
    if (part && atomic_load_explicit(&part->log_unknown, memory_order_relaxed) &&
        (!old_log || m->offset < cs__pipeline_next_offset(c->pipe, topic, part->partition)))
        settle_log_restart(c, part, topic, m->offset);
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

static void *fetch_main(void *arg) {
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
            commit_positions(c, NULL, false);
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

/* ---- lifecycle -------------------------------------------------------------- */

/* ---- static membership (KIP-345) ----------------------------------------------
 * With an instance id, every consumer joins its group as a static member: the
 * broker keeps its partitions for it across a restart (a SIGKILL included)
 * until session.timeout.ms expires, and a member that rejoins with the same
 * group.instance.id before that gets them back without a rebalance. The id
 * must be stable across restarts and unique per consumer handle, and follows
 * Kafka's rule for it (JoinGroupRequest.validateGroupInstanceId: only
 * [A-Za-z0-9._-], at most 249 characters), which the Java clients enforce
 * (the 4.1.1 broker itself accepted others): so the operator's Java tools
 * can name it. */
enum { STATIC_ID_MAX = 249 };

static uint64_t fnv1a(const char *p) {
    uint64_t h = 1469598103934665603ull;
    for (; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

/* "<app>.<group>.<subscription>.<instance id>" (the transactional.id's
 * parts), other characters replaced by '_'; at most 241 characters (room for
 * the suffix): a longer one keeps its first 224 and adds a hash of the whole. */
static void static_base(const cs_sub *s, cs_app *app, const char *group, char *out, size_t size) {
    char full[2048];
    snprintf(full, sizeof full, "%s.%s.%s.%s", cs_app_name(app), group, s->name, s->k->instance_id);
    for (char *p = full; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '_' || *p == '-'))
            *p = '_';
    if (strlen(full) <= STATIC_ID_MAX - 8) { /* room for a ".<n>" suffix */
        snprintf(out, size, "%s", full);
        return;
    }
    snprintf(out, size, "%.224s.%016llx", full, (unsigned long long)fnv1a(full));
}

/* The consumer's group.instance.id, stored on s: the base, or the base and
 * ".2", ".3", ... when a subscription started before it in this broker got the
 * same one (two subscriptions of one group on the same topics). Subscriptions
 * start in declaration order, so the suffix is stable across restarts. */
static cs_err static_member_id(cs_sub *s, cs_app *app, const char *group) {
    free(s->static_id);
    s->static_id = NULL;
    /* librdkafka 2.0.2's mock reads group.instance.id and ignores it, but a
     * static member sends no LeaveGroup even there: a graceful stop would
     * leave its partitions unassigned until the session timeout, for nothing
     * in return. On the mock the consumers stay dynamic members. */
    if (!s->k->instance_id || s->k->embedded || s->k->mock) return CS_OK;
    char base[STATIC_ID_MAX + 1], id[STATIC_ID_MAX + 16];
    static_base(s, app, group, base, sizeof base);
    snprintf(id, sizeof id, "%s", base);
    for (int n = 2;; n++) {
        bool taken = false;
        for (size_t i = 0; i < s->k->n_subs && s->k->subs[i] != s; i++)
            taken = taken || (s->k->subs[i]->static_id && !strcmp(s->k->subs[i]->static_id, id));
        if (!taken) break;
        snprintf(id, sizeof id, "%s.%d", base, n);
    }
    s->static_id = strdup(id);
    return s->static_id ? CS_OK : cs__fail(CS_ERR_NOMEM, "subscription %s: out of memory", s->name);
}

/* Default pre-fetch bound per partition, in KiB (queued.max.messages.kbytes). */
#define CS_PREFETCH_KBYTES "16384"

static cs_err build_conf(cs_sub *s, cs_app *app, cs_consumer *c, rd_kafka_conf_t **out) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *group = s->group ? s->group : s->k->default_group;
    bool auto_mode = s->mode == CS_COMMIT_AUTO;
    cs_err err = cs__conf_set(conf, c->who, "client.id", cs_app_name(app)); /* default; config may override */
    /* Each partition has its own queue (take_one), so librdkafka's pre-fetch
     * bound applies per partition: its 64 MiB default would let a consumer
     * of many partitions catching up on a backlog hold 64 MiB for each. A
     * default of 16 MiB keeps memory close to what one shared queue held;
     * config may raise it (docs/guide.md: the pre-fetch). */
    if (!err) err = cs__conf_set(conf, c->who, "queued.max.messages.kbytes", CS_PREFETCH_KBYTES);
    /* Default; config may override. librdkafka's 5 minutes is how long a
     * subscription would take to notice partitions added to its topics (and
     * to be assigned them); 30 s costs one small Metadata request per consumer
     * every 30 s instead of every 300 s. See docs/real-kafka.md "Bad inputs". */
    if (!err) err = cs__conf_set(conf, c->who, "topic.metadata.refresh.interval.ms", CS_METADATA_REFRESH_MS);
    if (!err) err = cs__conf_apply(conf, c->who, &s->k->config);
    if (!err) err = cs__conf_apply(conf, c->who, &s->config);
    if (!err) err = cs__conf_set(conf, c->who, "bootstrap.servers", s->k->bootstrap);
    if (!err) err = cs__conf_set(conf, c->who, "group.id", group);
    if (!err) err = static_member_id(s, app, group);
    if (!err && s->static_id) err = cs__conf_set(conf, c->who, "group.instance.id", s->static_id);
    if (!err) err = cs__conf_set(conf, c->who, "enable.auto.commit", auto_mode ? "true" : "false");
    if (!err) err = cs__conf_set(conf, c->who, "enable.auto.offset.store", auto_mode ? "true" : "false");
    if (!err) err = cs__conf_set(conf, c->who, "auto.offset.reset", s->start == CS_START_LATEST ? "latest" : "earliest");
    if (!err) err = cs__conf_set(conf, c->who, "enable.partition.eof", "false");
    /* Transactional: a new owner must not read a position an older owner's
     * transaction is still committing; librdkafka 2.0.2 asks the broker for
     * stable offsets (KIP-447) only for read_committed consumers. */
    if (!err && s->mode == CS_COMMIT_TRANSACTIONAL) err = cs__conf_set(conf, c->who, "isolation.level", "read_committed");
    if (err) {
        rd_kafka_conf_destroy(conf);
        return err;
    }
    rd_kafka_conf_set_opaque(conf, c);
    rd_kafka_conf_set_rebalance_cb(conf, on_rebalance);
    rd_kafka_conf_set_offset_commit_cb(conf, on_offset_commit);
    rd_kafka_conf_set_error_cb(conf, on_error);
    rd_kafka_conf_set_log_cb(conf, cs__rdkafka_log);
    *out = conf;
    return CS_OK;
}

/* ---- destroying the handle ----------------------------------------------------
 * librdkafka 2.0.2 never finishes rd_kafka_destroy() of a consumer after a
 * partition it consumed was removed from the cluster (its topic deleted): a
 * circular reference keeps the partition, and the broker thread waits for it
 * forever (fixed in librdkafka 2.1.0, #4187, "A reference count issue was
 * blocking the consumer from closing"). The close itself completes, so the
 * positions are committed by then; only the destroy hangs. After a topic
 * vanished, the destroy therefore runs on a helper thread, and the stop waits
 * for it at most DESTROY_WAIT_MS: past that, the handle is left behind (its
 * threads idle at about 1% of a core until the process exits) and said so,
 * rather than hanging the service's stop forever. */
enum { DESTROY_WAIT_MS = 3000 };

typedef struct destroyer {
    rd_kafka_t *rk;
    int flags;
    pthread_mutex_t lock; /* a leaf (src/core/lock_order.h) */
    pthread_cond_t done_cv;
    bool done;
    int refs; /* the helper and the waiter: the last one frees */
} destroyer;

static void destroyer_release(destroyer *d) {
    pthread_mutex_lock(&d->lock);
    bool last = --d->refs == 0;
    pthread_mutex_unlock(&d->lock);
    if (!last) return;
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->done_cv);
    free(d);
}

static void *destroy_main(void *arg) {
    destroyer *d = arg;
    rd_kafka_destroy_flags(d->rk, d->flags);
    pthread_mutex_lock(&d->lock);
    d->done = true;
    pthread_cond_signal(&d->done_cv);
    pthread_mutex_unlock(&d->lock);
    destroyer_release(d);
    return NULL;
}

/* Destroys c->rk; false if it was left behind (then c, its opaque, must stay
 * allocated: the abandoned handle may still call back with it). */
static bool destroy_handle(cs_consumer *c, int flags) {
    if (!atomic_load(&c->topic_vanished)) {
        rd_kafka_destroy_flags(c->rk, flags);
        return true;
    }
    destroyer *d = calloc(1, sizeof *d);
    pthread_t helper;
    if (d) {
        *d = (destroyer){.rk = c->rk, .flags = flags, .refs = 2};
        pthread_mutex_init(&d->lock, NULL);
        cs__cond_init_monotonic(&d->done_cv); /* timed: DESTROY_WAIT_MS */
    }
    if (!d || pthread_create(&helper, NULL, destroy_main, d) != 0) {
        if (d) {
            d->refs = 1;
            destroyer_release(d);
        }
        CS_LOG_ERR("consumer handle left behind: no thread to destroy it subscription=%s", c->sub->name);
        return false;
    }
    pthread_detach(helper);
    struct timespec until;
    cs__deadline_after(&until, DESTROY_WAIT_MS);
    pthread_mutex_lock(&d->lock);
    while (!d->done && pthread_cond_timedwait(&d->done_cv, &d->lock, &until) == 0) {}
    bool done = d->done;
    pthread_mutex_unlock(&d->lock);
    destroyer_release(d);
    if (!done)
        CS_LOG_ERR("consumer handle left behind: librdkafka %s does not finish destroying a consumer after one of "
                   "its topics was deleted (fixed in librdkafka 2.1.0); its positions were committed at close, its "
                   "threads stay until the process exits subscription=%s waited_ms=%d",
                   rd_kafka_version_str(), c->sub->name, DESTROY_WAIT_MS);
    return done;
}

static void consumer_free_flags(cs_consumer *c, int flags) {
    cs__txn_destroy(c->txn); /* the consumer has closed (or crashed): nothing commits any more */
    close_all_queues(c); /* the partition queues go before the handle */
    free(c->parts);
    c->parts = NULL;
    if (c->queue) rd_kafka_queue_destroy(c->queue);
    c->queue = NULL;
    /* c is the abandoned handle's opaque: keep it, and the pipeline its
     * callbacks reach, for any callback the handle still makes. */
    if (c->rk && !destroy_handle(c, flags)) return;
    cs__pipeline_destroy(c->pipe);
    pthread_mutex_destroy(&c->commit_lock);
    pthread_mutex_destroy(&c->wake_lock);
    free(c->topic_unavailable);
    free(c);
}

static void consumer_free(cs_consumer *c) { consumer_free_flags(c, 0); }

cs_err cs__consumer_start(cs_sub *s, cs_app *app, cs_consumer **out) {
    cs_consumer *c = calloc(1, sizeof *c);
    if (!c) return cs__fail(CS_ERR_NOMEM, "subscription %s: out of memory", s->name);
    c->sub = s;
    c->app = app;
    c->topic_unavailable = calloc(s->n_topics, sizeof *c->topic_unavailable);
    if (!c->topic_unavailable) {
        free(c);
        return cs__fail(CS_ERR_NOMEM, "subscription %s: out of memory", s->name);
    }
    c->tracked = s->mode != CS_COMMIT_AUTO;
    c->transactional = s->mode == CS_COMMIT_TRANSACTIONAL;
    c->interval_ms = cs__sub_commit_interval_ms(s);
    pthread_mutex_init(&c->commit_lock, NULL);
    pthread_mutex_init(&c->wake_lock, NULL);
    snprintf(c->who, sizeof c->who, "subscription %s", s->name);

    rd_kafka_conf_t *conf = NULL;
    cs_err err = build_conf(s, app, c, &conf);
    if (err) {
        free(c->topic_unavailable);
        free(c);
        return err;
    }
    char reason[512];
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, reason, sizeof reason);
    if (!c->rk) {
        rd_kafka_conf_destroy(conf);
        free(c->topic_unavailable);
        free(c);
        return cs__fail(CS_ERR_KAFKA, "subscription %s: consumer could not be created: %s", s->name, reason);
    }
    rd_kafka_poll_set_consumer(c->rk);
    c->queue = rd_kafka_queue_get_consumer(c->rk);
    if (c->transactional) {
        const char *group = s->group ? s->group : s->k->default_group;
        char id[1024];
        snprintf(id, sizeof id, "%s.%s.%s.%s", cs_app_name(app), group, s->name, s->k->instance_id);
        err = cs__txn_start(s, app, id, output_failed, c, &c->txn);
        if (err) {
            consumer_free(c);
            return err;
        }
    }

    cs_pipeline_config pc = {
        .name = s->name,
        .handler = s->handler,
        .batch_handler = s->batch_handler,
        .max_batch = s->max_batch,
        .codec = s->codec,
        .type = s->type,
        .user = s->user,
        .tracked = c->tracked,
        .lanes_by_key = s->lanes == CS_LANES_BY_KEY,
        .workers = s->workers,
        /* Auto keeps its queue small (it is Auto's loss window); under Tracked
         * the cap only bounds memory: a full partition is not served until it
         * drains to half, its records wait in librdkafka's queue. */
        .max_open = cs__sub_max_open(s),
        .handler_time_limit_ms = s->handler_time_limit_ms,
        .wake = wake_fetch,
        .wake_arg = c,
        .send_reply = s->reply_topic && !c->transactional ? cs__kafka_send_reply : NULL,
        .reply_arg = s,
        .max_attempts = s->max_attempts,
        .send_dead_letter = s->dead_letter && !c->transactional ? cs__kafka_send_dead_letter : NULL,
        .dead_letter_arg = s,
        .transactional = c->transactional,
        .reply_topic = s->reply_topic,
        .make_dead_letter = s->dead_letter && c->transactional ? cs__kafka_dead_letter_output : NULL,
        .make_dead_letter_arg = s,
        .output_topic_ok = cs__kafka_output_topic_ok,
        .output_topic_arg = s,
        .window_records = c->transactional ? s->window_records : 0,
        /* Measurement switch (bench/): stop-the-world window commits, to
         * compare with the default where handlers keep running meanwhile. */
        .window_barrier = c->transactional && getenv("CSTREAM_TXN_BARRIER") && !strcmp(getenv("CSTREAM_TXN_BARRIER"), "1"),
        .precommit = c->transactional ? NULL : precommit, /* plain commits would pass uncommitted outputs */
        .precommit_arg = c,
    };
    c->pipe = cs__pipeline_new(&pc);
    if (!c->pipe) {
        consumer_free(c);
        return cs__fail(CS_ERR_NOMEM, "subscription %s: could not start its workers", s->name);
    }
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new((int)s->n_topics);
    for (size_t i = 0; i < s->n_topics; i++)
        rd_kafka_topic_partition_list_add(topics, s->topics[i], RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t rerr = rd_kafka_subscribe(c->rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (rerr) {
        consumer_free(c);
        return cs__fail(CS_ERR_KAFKA, "subscription %s: subscribe failed: %s", s->name, rd_kafka_err2str(rerr));
    }
    if (pthread_create(&c->thread, NULL, fetch_main, c) != 0) {
        consumer_free(c);
        return cs__fail(CS_ERR_NOMEM, "subscription %s: could not start its fetch thread", s->name);
    }
    c->thread_started = true;
    CS_LOG_INFO("subscribed subscription=%s group=%s commit=%s workers=%d group.instance.id=%s", s->name,
                s->group ? s->group : s->k->default_group,
                c->transactional ? "transactional" : c->tracked ? "tracked" : "auto", s->workers,
                s->static_id ? s->static_id : "-");
    *out = c;
    return CS_OK;
}

static void join_fetch_thread(cs_consumer *c) {
    pthread_mutex_lock(&c->wake_lock);
    atomic_store(&c->stop, true);
    if (c->queue) rd_kafka_queue_yield(c->queue);
    pthread_mutex_unlock(&c->wake_lock);
    if (c->thread_started) pthread_join(c->thread, NULL);
    c->thread_started = false;
}

void cs__consumer_stop_fetching(cs_consumer *c) {
    join_fetch_thread(c);
    /* After a fatal error (fenced, above all) nothing this consumer handles
     * can be committed any more: the next owner reads those records again.
     * Running the queued ones would only duplicate its work (a fenced
     * instance ran up to the drain timeout's worth), so only the handlers
     * already running finish. */
    if (rd_kafka_fatal_error(c->rk, NULL, 0))
        for (size_t i = 0; i < c->n_parts; i++) cs__pipeline_stop_partition(c->pipe, c->parts[i].part);
    size_t left = cs__pipeline_drain(c->pipe, cs__now_ms() + c->sub->drain_timeout_ms);
    if (left)
        CS_LOG_WARN("shutdown: deliveries still pending at the drain deadline stay uncommitted subscription=%s "
                    "pending=%zu",
                    c->sub->name, left);
}

/* Releases every assigned partition, pending payloads included: librdkafka
 * needs every record back before the consumer closes or is destroyed. */
static void release_assigned(cs_consumer *c) {
    rd_kafka_topic_partition_list_t *assigned = NULL;
    if (rd_kafka_assignment(c->rk, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    for (int i = 0; i < assigned->cnt; i++) {
        cs_part *part = part_of(c, assigned->elems[i].topic, assigned->elems[i].partition);
        if (part) cs__pipeline_release_partition(c->pipe, part, true);
    }
    rd_kafka_topic_partition_list_destroy(assigned);
}

/* After a fatal error librdkafka can neither commit nor close the consumer
 * (close fails and a plain destroy then never returns): release everything
 * without committing; cs__consumer_destroy then destroys without closing. */
static void close_after_fatal(cs_consumer *c) {
    c->closed_after_fatal = true;
    release_assigned(c);
    CS_LOG_WARN("consumer closed after a fatal error: nothing committed subscription=%s", c->sub->name);
}

/* A static member, before its close: serves the events that arrived while
 * nothing polled (the fetch thread stopped before the drain), a revoke above
 * all, while librdkafka's group handle still answers. Left for
 * rd_kafka_consumer_close, such a revoke could meet a group handle that
 * terminates meanwhile (a static member sends no LeaveGroup, so it
 * terminates at once): librdkafka 2.0.2 then drops the unassign request the
 * callback makes and rd_kafka_assign waits forever (seen once in 8 runs of
 * real.only.exactly_once's rebalance test; librdkafka #4884, #4041). */
static void serve_pending_events(cs_consumer *c) {
    for (int i = 0; i < 64; i++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 0);
        if (!m) return;
        if (m->err) on_record_error(c, m);
        rd_kafka_message_destroy(m); /* records never come here: partition queues are not forwarded */
    }
}

void cs__consumer_close(cs_consumer *c) {
    if (rd_kafka_fatal_error(c->rk, NULL, 0)) {
        close_after_fatal(c);
        return;
    }
    if (c->sub->static_id) serve_pending_events(c); /* before `closing`: such a revoke commits as usual */
    c->closing = true;
    commit_positions(c, NULL, true);
    release_assigned(c);
    rd_kafka_resp_err_t err = rd_kafka_consumer_close(c->rk);
    if (err) CS_LOG_WARN("consumer close subscription=%s error=\"%s\"", c->sub->name, rd_kafka_err2str(err));
}

void cs__consumer_destroy(cs_consumer *c) {
    consumer_free_flags(c, c->closed_after_fatal ? RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE : 0);
}

void cs__consumer_crash(cs_consumer *c) {
    join_fetch_thread(c);
    cs__pipeline_crash(c->pipe);
    release_assigned(c);
    consumer_free_flags(c, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

/* Idle: an assignment, nothing queued or in flight, and every assigned
 * partition consumed up to its high watermark. Any thread (tests). */
/* "Consumed" is what cstream dispatched (not librdkafka's position, which
 * moves when poll returns a record the fetch thread has not handed out yet);
 * the busy count is read last, so that a record dispatched after its offset
 * was read is still seen as busy. */
int cs__consumer_idle(cs_consumer *c) {
    rd_kafka_topic_partition_list_t *assigned = NULL;
    if (rd_kafka_assignment(c->rk, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR) return 0;
    int idle = assigned->cnt > 0;
    for (int i = 0; idle && i < assigned->cnt; i++)
        assigned->elems[i].offset = cs__pipeline_next_offset(c->pipe, assigned->elems[i].topic, assigned->elems[i].partition);
    for (int i = 0; idle && i < assigned->cnt; i++) {
        rd_kafka_topic_partition_t *e = &assigned->elems[i];
        int64_t lo = 0, hi = 0;
        if (rd_kafka_query_watermark_offsets(c->rk, e->topic, e->partition, &lo, &hi, 2000)) {
            idle = 0;
            break;
        }
        if (hi == lo) continue; /* empty partition */
        if (e->offset < 0) {    /* nothing consumed in this session: use the committed position */
            rd_kafka_topic_partition_list_t *one = rd_kafka_topic_partition_list_new(1);
            rd_kafka_topic_partition_list_add(one, e->topic, e->partition);
            if (rd_kafka_committed(c->rk, one, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR) e->offset = one->elems[0].offset;
            rd_kafka_topic_partition_list_destroy(one);
        }
        if (e->offset < hi) idle = 0;
    }
    rd_kafka_topic_partition_list_destroy(assigned);
    return idle && cs__pipeline_busy(c->pipe) == 0;
}

/* Ready: joined its group (the rebalance is done, even with an empty
 * assignment), no fatal error, and a broker answers. After librdkafka said all
 * brokers are down, each call probes with a metadata request (at most
 * probe_ms) until one answers. Any thread (the HTTP thread). */
int cs__consumer_ready(cs_consumer *c, int probe_ms) {
    if (!atomic_load(&c->joined) || rd_kafka_fatal_error(c->rk, NULL, 0)) return 0;
    if (!atomic_load(&c->brokers_down)) return 1;
    const struct rd_kafka_metadata *md = NULL;
    if (rd_kafka_metadata(c->rk, 0, NULL, &md, probe_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) return 0;
    rd_kafka_metadata_destroy(md);
    atomic_store(&c->brokers_down, false);
    return 1;
}

void cs__consumer_stats(cs_consumer *c, cs_sub_stats *out) { cs__pipeline_stats(c->pipe, out); }

uint64_t cs__consumer_commit_ticks(cs_consumer *c) {
    return atomic_load_explicit(&c->commit_ticks, memory_order_relaxed);
}

rd_kafka_t *cs__consumer_handle(cs_consumer *c) { return c->rk; }

/* ---- /metrics -------------------------------------------------------------- */

/* 1 while librdkafka reports the subscribed topic unavailable (deleted, or
 * not visible to this client), else 0: one series per subscribed topic, so an
 * alert can fire on `== 1`. */
static void topic_metrics(cs_consumer *c, cs_metrics *m, const char *sub, const char *group) {
    for (size_t i = 0; i < c->sub->n_topics; i++) {
        const char *l[] = {"subscription", sub, "group", group ? group : "", "topic", c->sub->topics[i], NULL};
        cs__metric_int(m, "cstream_topic_unavailable", "gauge",
                       "1 while the subscribed topic is reported unavailable (deleted, or not visible to this "
                       "client); its partitions are not consumed until it comes back.",
                       l, atomic_load(&c->topic_unavailable[i]) ? 1 : 0);
    }
}

typedef struct part_list {
    cs_part_metrics *v;
    size_t n, cap;
} part_list;

static void collect_part(void *arg, const cs_part_metrics *m) {
    part_list *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        cs_part_metrics *grown = realloc(l->v, cap * sizeof *grown);
        if (!grown) return; /* out of memory: this scrape leaves the partition out */
        l->v = grown;
        l->cap = cap;
    }
    l->v[l->n++] = *m;
}

/* Called with the subscription's stats lock held, so the consumer (its
 * handle and pipeline) cannot be freed meanwhile; it may be closing (the
 * stop holds no lock across the close). Never waits on the network:
 * the high watermark is librdkafka's cached value from its last fetch
 * response (rd_kafka_get_watermark_offsets, not the querying variant), and
 * the committed position is what the last commit this member made reported
 * (cs__part_commit_done), so a scrape costs no round trip to the broker. */
void cs__consumer_metrics(cs_consumer *c, cs_metrics *m, const char *sub, const char *group) {
    const char *labels[] = {"subscription", sub, "group", group ? group : "", NULL};
    cs__metric_int(m, "cstream_inflight_records", "gauge",
                   "Records cstream holds for the subscription: queued, running, or pending settlement.", labels,
                   (int64_t)cs__pipeline_busy(c->pipe));
    cs_histogram_snap h = {0};
    cs__pipeline_handler_durations(c->pipe, &h);
    cs__metric_histogram(m, "cstream_handler_duration_seconds",
                         "Handler run time (one observation per call; a batch handler call is one).", labels, &h);

    topic_metrics(c, m, sub, group);
    part_list parts = {0};
    cs__pipeline_each_part(c->pipe, collect_part, &parts);
    /* Records and dead letters by topic: the partitions of a topic add up
     * (the collector sums series with equal labels). */
    static const char *const outcomes[] = {"ack", "drop", "retry", "retry_unsupported", "stale"};
    for (size_t i = 0; i < parts.n; i++) {
        const cs_part_metrics *p = &parts.v[i];
        const uint64_t by_outcome[] = {p->acked, p->dropped, p->retried, p->retry_unsupported, p->stale};
        for (size_t o = 0; o < sizeof outcomes / sizeof outcomes[0]; o++) {
            const char *l[] = {"subscription", sub, "group", group ? group : "", "topic", p->topic,
                               "outcome", outcomes[o], NULL};
            cs__metric_int(m, "cstream_records_total", "counter",
                           "Settlements of records by topic and outcome (a retry counts each time; a record given "
                           "up at max_attempts ends as a drop).",
                           l, (int64_t)by_outcome[o]);
        }
        const char *l[] = {"subscription", sub, "group", group ? group : "", "topic", p->topic, NULL};
        cs__metric_int(m, "cstream_dead_letters_total", "counter",
                       "Records of the topic the dead-letter topic accepted.", l, (int64_t)p->dead_lettered);
    }
    for (size_t i = 0; i < parts.n; i++) {
        const cs_part_metrics *p = &parts.v[i];
        if (!p->assigned) continue; /* a revoked partition's numbers belong to its new owner */
        char partition[16];
        snprintf(partition, sizeof partition, "%d", (int)p->partition);
        const char *l[] = {"subscription", sub, "group", group ? group : "", "topic", p->topic,
                           "partition", partition, NULL};
        if (p->committed < 0) continue; /* nothing committed by this member yet */
        cs__metric_int(m, "cstream_committed_offset", "gauge",
                       "Position this member last committed for the partition (the next offset to read).", l,
                       p->committed);
        int64_t low = -1, high = -1;
        if (rd_kafka_get_watermark_offsets(c->rk, p->topic, p->partition, &low, &high) == RD_KAFKA_RESP_ERR_NO_ERROR &&
            high >= 0)
            cs__metric_int(m, "cstream_lag_records", "gauge",
                           "High watermark (from the last fetch) minus the committed position.", l,
                           high > p->committed ? high - p->committed : 0);
    }
    free(parts.v);
}
