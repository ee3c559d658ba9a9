/* committer.c — Tracked's commits (timer, revoke, close, suspect records),
 * librdkafka's own commits under Auto, and Transactional windows (Database
 * windows are database_window.c's). A commit
 * takes each partition's state in one call (cs_commit_state, pipeline.h),
 * builds its request from those states alone, and comes back to a partition
 * only with the result.
 *
 * Owns: c->commit. Locks: commit_lock (level 3, src/lock_order.h), held
 * while commit states are taken and enqueued, never while a result is
 * awaited. Threads: the fetch thread, or the closing thread after it exited;
 * the precommit of a suspect record on any worker. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/attempts_meta.h"
#include "core/broker.h"
#include "base/error.h"
#include "kafka/consumer/consumer_internal.h"

/* A suspect record's commit waits this long for its result before it counts
 * as failed. */
#define RESULT_TIMEOUT_MS 10000
/* A window that aborts again and again waits at most this long before the
 * next try: long enough not to spin on a broken broker, short enough to
 * notice it recovered. */
#define ABORT_BACKOFF_MAX_MS 5000

/* ---- commits (Tracked) ---------------------------------------------------- */

/* The partition a commit names, never made here: a commit has nothing to say
 * of a partition no record came from. Fetch thread (or the closing thread
 * after it exited): the registry's writer. */
static cs_part *part_of(cs_consumer *c, const rd_kafka_topic_partition_t *e) {
    return cs__pipeline_find_part(c->pipe, e->topic, e->partition);
}

static void commit_result(cs_consumer *c, rd_kafka_resp_err_t err, const rd_kafka_topic_partition_list_t *offsets) {
    for (int i = 0; offsets && i < offsets->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &offsets->elems[i];
        rd_kafka_resp_err_t perr = err ? err : e->err;
        cs_part *part = part_of(c, e);
        char meta[CS_META_MAX];
        snprintf(meta, sizeof meta, "%.*s", e->metadata ? (int)e->metadata_size : 0,
                 e->metadata ? (const char *)e->metadata : "");
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
    atomic_fetch_add_explicit(&((cs_consumer *)opaque)->commit.ticks, 1, memory_order_relaxed);
}

/* librdkafka's own commits (Auto). */
void cs__commit_on_offset_commit(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *offsets,
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
        cs_part *part = e->err || e->offset < 0 ? NULL : part_of(c, e);
        if (part) cs__part_commit_done(part, e->offset, NULL, true);
    }
    if (err) CS_LOG_WARN("auto commit failed subscription=%s error=\"%s\"", c->sub->name, rd_kafka_err2str(err));
}

static void close_window(cs_consumer *c, bool final);

/* A synchronous commit in two steps, so that commit_lock is never held while
 * the coordinator answers: cs__commit_enqueue (under commit_lock: the order the
 * states were taken is the order they reach the wire) puts the commit on a
 * queue of its own, and cs__commit_await (after the lock is released) waits for
 * its result as long as the commit takes, as rd_kafka_commit does. Returns
 * the queue; *err is set if librdkafka refused the commit (the queue is then
 * destroyed and NULL returned). */
rd_kafka_queue_t *cs__commit_enqueue(cs_consumer *c, rd_kafka_topic_partition_list_t *l, rd_kafka_resp_err_t *err) {
    rd_kafka_queue_t *q = rd_kafka_queue_new(c->rk);
    *err = rd_kafka_commit_queue(c->rk, l, q, NULL, NULL); /* no callback: the result comes as an event */
    if (!*err) return q;
    rd_kafka_queue_destroy(q);
    return NULL;
}

/* Waits for the result on q and destroys q; with `record`, hands it to
 * commit_result like on_commit_result. Returns the request's error, else the
 * first partition's. */
rd_kafka_resp_err_t cs__commit_await(cs_consumer *c, rd_kafka_queue_t *q, bool record) {
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

/* Tracked: one commit of every partition in `only` (NULL: all assigned)
 * whose state changed, or every one of them with `sync` (a revoke, the
 * close: clean states, the result awaited). */
static void commit_tracked(cs_consumer *c, const rd_kafka_topic_partition_list_t *only, bool sync) {
    cs__commit_pass_markers(c);
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
        cs_part *part = part_of(c, &only->elems[i]);
        cs_commit_state s;
        if (part && cs__part_commit_state(part, sync, &s)) cs__commit_add_state(c, l, &s);
    }
    if (all) rd_kafka_topic_partition_list_destroy(all);
    rd_kafka_queue_t *result_q = NULL;
    if (l->cnt > 0 && sync) {
        /* Its result is awaited once commit_lock is released (cs__commit_await). */
        rd_kafka_resp_err_t err;
        result_q = cs__commit_enqueue(c, l, &err);
        if (err) commit_result(c, err, l);
    } else if (l->cnt > 0) {
        /* The result comes to on_tick_result through the fetch loop's poll. */
        rd_kafka_resp_err_t err = rd_kafka_commit_queue(c->rk, l, c->queue, on_tick_result, c);
        if (err) {
            commit_result(c, err, l);
            atomic_fetch_add_explicit(&c->commit.ticks, 1, memory_order_relaxed);
        }
    } else if (!sync) {
        atomic_fetch_add_explicit(&c->commit.ticks, 1, memory_order_relaxed); /* nothing to send: complete */
    }
    pthread_mutex_unlock(&c->commit_lock);
    if (result_q) cs__commit_await(c, result_q, true);
    rd_kafka_topic_partition_list_destroy(l);
}

void cs__commit_positions(cs_consumer *c, const rd_kafka_topic_partition_list_t *only, bool sync) {
    if (c->sub->db) {
        cs__commit_db_window(c, sync); /* the whole window: it holds the writes of every partition */
        if (!sync) atomic_fetch_add_explicit(&c->commit.ticks, 1, memory_order_relaxed);
        return;
    }
    if (c->transactional) {
        close_window(c, sync); /* the whole window: a transaction never spans a rebalance */
        if (!sync) atomic_fetch_add_explicit(&c->commit.ticks, 1, memory_order_relaxed);
        return;
    }
    if (c->tracked && !rd_kafka_fatal_error(c->rk, NULL, 0)) commit_tracked(c, only, sync);
}

/* ---- windows (Transactional) ---------------------------------------------- */

/* Aborts one partition's window: its records are read again from the last
 * committed position. A seek that fails would skip records, so it stops the app. */
static void rewind_partition(cs_consumer *c, cs_part *part) {
    int64_t seek = cs__window_rewind(c->pipe, part);
    if (seek < 0) return;
    char why[256];
    if (cs__fetch_reposition(c, part, seek, why, sizeof why))
        cs__app_fatal(c->app, "%s: window of %s/%d aborted but the seek back to offset %lld failed: %s", c->who,
                      cs__part_topic(part), (int)cs__part_number(part), (long long)seek, why);
    else
        CS_LOG_INFO("window aborted, partition read again from its committed position subscription=%s topic=%s "
                    "partition=%d offset=%lld",
                    c->sub->name, cs__part_topic(part), (int)cs__part_number(part), (long long)seek);
}

void cs__commit_output_failed(void *arg, cs_part *part, int64_t offset, uint32_t attempt) {
    cs_consumer *c = arg;
    if (c->commit.n_failed < sizeof c->commit.failed / sizeof c->commit.failed[0])
        c->commit.failed[c->commit.n_failed++] = (struct failed_output){part, offset, attempt};
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
    cs__commit_pass_markers(c);
    rd_kafka_topic_partition_list_t *assigned = NULL;
    if (rd_kafka_assignment(c->rk, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    rd_kafka_topic_partition_list_t *offsets = rd_kafka_topic_partition_list_new(assigned->cnt > 0 ? assigned->cnt : 1);
    cs_output_list outputs = {0};
    size_t n_outputs = 0;
    cs__pipeline_close_gate(c->pipe); /* only with the measurement switch CSTREAM_TXN_BARRIER */
    for (int i = 0; i < assigned->cnt; i++) {
        cs_part *part = part_of(c, &assigned->elems[i]);
        cs_commit_state s;
        if (part && cs__window_take(part, final, &s, &outputs, &n_outputs)) cs__commit_add_state(c, offsets, &s);
    }
    c->commit.n_failed = 0;
    if (offsets->cnt > 0) {
        int64_t began = cs__now_ms();
        cs_txn_result r = cs__txn_commit(c->txn, CS_STAILQ_FIRST(&outputs), offsets, c->rk);
        CS_LOG_DEBUG("transaction %s subscription=%s partitions=%d outputs=%zu ms=%lld",
                     r == CS_TXN_COMMITTED ? "committed"
                     : r == CS_TXN_ABORTED ? "aborted"
                                           : "failed",
                     c->sub->name, offsets->cnt, n_outputs, (long long)(cs__now_ms() - began));
        for (int i = 0; i < offsets->cnt; i++) {
            rd_kafka_topic_partition_t *e = &offsets->elems[i];
            cs_part *part = part_of(c, e);
            if (!part) continue;
            if (r == CS_TXN_COMMITTED) cs__part_commit_done(part, e->offset, e->metadata, true);
            else if (r == CS_TXN_ABORTED) rewind_partition(c, part);
        }
        /* A source whose output failed comes back with that run counted. */
        for (size_t i = 0; r == CS_TXN_ABORTED && i < c->commit.n_failed; i++)
            cs__window_output_failed(c->commit.failed[i].part, c->commit.failed[i].offset, c->commit.failed[i].attempt);
        if (r == CS_TXN_COMMITTED) {
            cs__pipeline_count_transaction(c->pipe, n_outputs);
            c->commit.abort_backoff_ms = 0;
        }
        if (r == CS_TXN_ABORTED) {
            cs__pipeline_count_abort(c->pipe);
            c->commit.abort_backoff_ms = c->commit.abort_backoff_ms ? c->commit.abort_backoff_ms * 2 : c->interval_ms;
            if (c->commit.abort_backoff_ms > ABORT_BACKOFF_MAX_MS) c->commit.abort_backoff_ms = ABORT_BACKOFF_MAX_MS;
        }
        cs__pipeline_count_commit(c->pipe, r == CS_TXN_COMMITTED);
    }
    cs__pipeline_open_gate(c->pipe);
    cs__output_list_free(&outputs);
    rd_kafka_topic_partition_list_destroy(offsets);
    if (!final && !cs__txn_dead(c->txn)) {
        int64_t now = cs__now_ms();
        for (int i = 0; i < assigned->cnt; i++) {
            cs_part *part = part_of(c, &assigned->elems[i]);
            if (!part || !cs__window_stalled(part, now, c->sub->stall_timeout_ms)) continue;
            CS_LOG_WARN("window aborted: a retried record held it past the stall timeout subscription=%s topic=%s "
                        "partition=%d stall_timeout_ms=%d",
                        c->sub->name, cs__part_topic(part), (int)cs__part_number(part), c->sub->stall_timeout_ms);
            cs__pipeline_count_abort(c->pipe);
            rewind_partition(c, part);
        }
    }
    rd_kafka_topic_partition_list_destroy(assigned);
}

/* The pipeline's hook for suspect records: commits `pos` with `meta` before
 * the record runs. Serialised with the timer's commits (commit_lock), so that
 * a position never goes backwards on the wire. Any thread. */
int cs__commit_precommit(void *arg, cs_part *part) {
    cs_consumer *c = arg;
    cs_commit_state s;
    /* The state is taken under commit_lock, so that no older state can be
     * enqueued after this one (and this one after no newer one). */
    pthread_mutex_lock(&c->commit_lock);
    if (!cs__part_commit_state_now(part, &s)) {
        pthread_mutex_unlock(&c->commit_lock);
        return 0;
    }
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    cs__commit_add_entry(l, &s);
    rd_kafka_queue_t *q = rd_kafka_queue_new(c->rk);
    rd_kafka_resp_err_t err = rd_kafka_commit_queue(c->rk, l, q, NULL, NULL);
    pthread_mutex_unlock(&c->commit_lock);
    cs__commit_note_truncation(c, &s); /* rate-limited with atomics: any thread */
    if (!err) {
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, RESULT_TIMEOUT_MS);
        if (!ev) err = RD_KAFKA_RESP_ERR__TIMED_OUT;
        else {
            err = rd_kafka_event_error(ev);
            const rd_kafka_topic_partition_list_t *res = rd_kafka_event_topic_partition_list(ev);
            if (!err && res && res->cnt) err = res->elems[0].err;
            rd_kafka_event_destroy(ev);
        }
    }
    rd_kafka_queue_destroy(q);
    cs__part_commit_done(part, s.pos, s.meta, err == RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(l);
    if (err)
        CS_LOG_WARN("attempt not committed before its run subscription=%s topic=%s partition=%d error=\"%s\"",
                    c->sub->name, s.topic, (int)s.partition, rd_kafka_err2str(err));
    return err ? -1 : 0;
}
