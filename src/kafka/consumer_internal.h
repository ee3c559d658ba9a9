/* consumer_internal.h — one subscription's consumer, shared by the files of
 * the consumer: consumer.c (lifecycle, readiness, /metrics), fetch.c (taking
 * records and handing them out), rebalance.c (assign, revoke, topic loss,
 * client errors) and committer.c (Tracked commits, Transactional windows).
 *
 * Threads: the fetch thread (cs__fetch_main) is the only one that polls,
 * takes records, assigns and commits while the subscription runs; the
 * rebalance callback runs on it, inside rd_kafka_consumer_poll. After the
 * fetch thread has exited, the stopping thread drains, commits and closes
 * (close runs the revoke again, which is idempotent). Workers only touch the
 * pipeline, and wake the fetch thread through cs__fetch_wake (never blocks). */
#ifndef CS_KAFKA_CONSUMER_INTERNAL_H
#define CS_KAFKA_CONSUMER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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

/* ---- fetch.c ---------------------------------------------------------------- */
/* The partition's core state (registered on first use). Fetch thread, or the
 * closing thread after the fetch thread exited. */
cs_part *cs__consumer_part(cs_consumer *c, const char *topic, int32_t partition);
/* Cuts the fetch thread's wait in the poll short, while it runs. Any thread. */
void cs__fetch_yield(cs_consumer *c);
/* The pipeline's wake hook (arg: the consumer). Any thread, never blocks. */
void cs__fetch_wake(void *arg);
part_queue *cs__fetch_queue_of(cs_consumer *c, const cs_part *part);
bool cs__fetch_open_queue(cs_consumer *c, cs_part *part);
void cs__fetch_close_queue(cs_consumer *c, part_queue *pq, bool unassigned);
void cs__fetch_close_all_queues(cs_consumer *c);
void *cs__fetch_main(void *arg);

/* ---- rebalance.c ------------------------------------------------------------ */
void cs__rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *l, void *opaque);
void cs__consumer_on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque);
bool cs__topic_error(rd_kafka_resp_err_t err);
int cs__subscribed_topic_in(const cs_consumer *c, const char *text, bool exact);
void cs__topic_unavailable(cs_consumer *c, int i, rd_kafka_resp_err_t err, const char *reason);
void cs__topic_available(cs_consumer *c, const char *topic);
void cs__settle_log_restart(cs_consumer *c, cs_part *part, const char *topic, int64_t offset);

/* ---- committer.c ------------------------------------------------------------ */
/* Commits the partitions in `only` (all known ones if NULL) whose position or
 * attempt counts changed, the counts in the offset metadata (only an explicit
 * commit keeps metadata in librdkafka 2.0.2). Async on the timer; sync, and
 * marked clean, on revoke and close. Transactional: closes the window. */
void cs__commit_positions(cs_consumer *c, const rd_kafka_topic_partition_list_t *only, bool sync);
rd_kafka_queue_t *cs__commit_enqueue(cs_consumer *c, rd_kafka_topic_partition_list_t *l, rd_kafka_resp_err_t *err);
rd_kafka_resp_err_t cs__commit_await(cs_consumer *c, rd_kafka_queue_t *q, bool record);
int cs__commit_precommit(void *arg, cs_part *part);
void cs__commit_output_failed(void *arg, cs_part *part, int64_t offset, uint32_t attempt);
void cs__commit_on_offset_commit(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *offsets,
                                 void *opaque);

#endif
