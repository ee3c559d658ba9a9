/* consumer_internal.h — one subscription's consumer, shared by the files of
 * the consumer: consumer.c (lifecycle, the fetch thread's loop, readiness),
 * fetch_control.c and fetch_requests.c (the application's seeks and pauses),
 * consumer_conf.c (its librdkafka configuration), consumer_metrics.c (stats,
 * /metrics), the fetch path (fetch_parts.c: the assigned partitions;
 * fetch_take.c: taking records into the store; fetch_handout.c: handing them
 * out; fetch_wake.c: waking librdkafka's fetchers; fetch_stuck.c: a stuck
 * partition), consumer_errors.c (topic loss, client errors, fatal errors),
 * rebalance.c (assign, revoke) and committer.c (Tracked commits,
 * Transactional windows).
 *
 * Owns: declares cs_consumer and fetch_part; consumer.c makes and frees a
 * cs_consumer, and each sub-struct's comment says which file writes it
 * ("Owned by:"). Locks: the consumer's commit_lock (level 3), requests.lock
 * (3) and wake_lock (7), each taken in its owner file (src/lock_order.h).
 * Threads: the fetch thread (fetch_main in consumer.c) is the only one that
 * polls, takes records, assigns and commits while the subscription runs; the
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
#include <string.h>

#include "base/list.h"
#include "base/log.h"
#include "core/pipeline.h"
#include "core/store.h"
#include "kafka/consumer/fetch_backlog.h"
#include "kafka/kafka_internal.h"
#include "kafka/producer/transaction.h"

/* One assigned partition as the fetch path sees it (fetch thread, or the
 * closing thread after the fetch thread exited). Its records wait in its
 * backlog (taken from librdkafka, copied into the store, not yet handed out)
 * until the partition is under max_open. */
typedef struct fetch_part {
    cs_part *part;
    /* part's topic (borrowed: the pipeline keeps part for the consumer's
     * life) and number, copied for take_cb's per-record lookup (is_part) */
    const char *topic;
    int32_t partition;
    rd_kafka_topic_t *rkt; /* rd_kafka_offset_store (Auto), rd_kafka_seek */
    int64_t next;          /* offset after the last record taken this assignment, -1 unknown */
    /* The leader epoch of the newest record taken (librdkafka >= 2.1.0), -1
     * unknown: sent with the partition's stored and committed positions so
     * that a restart validates them against the log (KIP-320). The newest,
     * not the epoch of the record before the position: never lower than
     * that one, so a truncation below the position is still detected and
     * none above it is reported. Fetch thread. */
    int32_t leader_epoch;
    cs_chunk *open;        /* the store chunk its records are appended to */
    fetch_backlog backlog; /* taken, not handed out yet (fetch_backlog.c) */
    bool paused;           /* cstream paused it in librdkafka (a stuck partition, the last resort) */
    int64_t progress_ms;   /* when it last handed out or settled a record (or was assigned or resumed) */
    uint64_t settled_seen; /* the partition's settlements at the last stuck check */
    /* Paused by the application (cs_sub_pause*, fetch_control.c): not served;
     * set from the consumer's pause list when the list changes
     * (control.pauses_dirty) or a partition is opened (fetch.opened). shed: its backlog reached its share of the
     * buffer while paused, and its records taken since were dropped (it is
     * not paused in librdkafka); the resume moves librdkafka back to
     * `next` with a seek whose result is checked, and until that seek is
     * confirmed the partition stays shed (nothing taken: a record after the
     * dropped ones would pass the continuity guard as a gap). refetch_at_ms:
     * when a failed re-fetch is tried again. */
    bool app_paused, shed;
    int64_t refetch_at_ms;
    /* An application's seek moved librdkafka but the partition was being
     * revoked meanwhile (cs__part_seek refused): its records are dropped at
     * the take, not handed out into the old epoch; the next owner reads from
     * the committed position. Cleared at the next assignment. */
    bool withheld;
    /* librdkafka's fetch position moved back within the log (a seek on the
     * raw handle, a truncation with its offset reset, KIP-320 truncation
     * handling): back_to is the first offset it delivered from there, -1
     * none. Its records are dropped at the take until the fetch thread moved
     * the partition to the lowest record not yet settled, or lower
     * (moves_back in fetch_control.c); back_retry_ms: when a refused move is tried
     * again. */
    int64_t back_to, back_retry_ms;
} fetch_part;

/* An application's request to the fetch thread (fetch_control.c): a seek or a
 * pause, made by any thread, applied by the fetch thread between two turns of
 * its loop. It lives on the caller's stack: the caller waits on `cv` under
 * `mx` (a leaf lock, src/lock_order.h) until `done`, and the fetch thread
 * touches it no more once it set `done`. */
typedef enum { CS_CTL_SEEK, CS_CTL_SEEK_TIME, CS_CTL_PAUSE, CS_CTL_RESUME } cs_ctl_kind;
typedef struct cs_ctl_req {
    cs_ctl_kind kind;
    const char *topic;  /* NULL: the whole subscription (pause, resume) */
    int32_t partition;  /* -1: every partition of `topic` assigned here */
    int64_t value;      /* the offset, or the timestamp in ms */
    cs_err result;      /* set by the fetch thread */
    char message[1024]; /* its reason when not CS_OK */
    bool done;
    pthread_mutex_t mx;
    pthread_cond_t cv;
    struct cs_ctl_req *next;
} cs_ctl_req;

/* A partition the application paused: kept across rebalances, so that it is
 * still paused when it comes back to this instance (fetch thread only). */
typedef struct cs_paused_part {
    char *topic;
    int32_t partition;
} cs_paused_part;

/* A subscription's consumer. Its fields are written by consumer.c (its
 * life, the fetch thread's loop) but for the sub-structs, each written by
 * the one file its "Owned by:" names; another file asks that one through
 * its functions (scripts/field-writers shows who writes what). */
struct cs_consumer {
    cs_sub *sub;
    cs_app *app;
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue; /* the consumer queue (events only), to wake a blocked poll */
    /* Taking records from librdkafka into the store. Owned by: fetch_take.c
     * (the fetch thread; `stored` and `sheds` are read by any thread). */
    struct cs_consumer_take {
        /* Every assigned partition's records, forwarded from its partition
         * queue: one librdkafka pre-fetch bound for the whole consumer.
         * Taken with rd_kafka_consume_callback_queue only (fetch_take.c
         * says why). Replaced under wake_lock by a rejoin. */
        rd_kafka_queue_t *recq;
        cs_store *store;    /* records taken and not settled, under the consumer-wide budget */
        size_t final_peak;  /* the store's peak, once the store is released */
        bool store_full;    /* taking stopped at the budget, until used <= the resume mark */
        bool bound_seen;    /* librdkafka's queue may have reached its bound: wake the broker threads */
        bool fatal;         /* take_cb saw a fatal error */
        bool in_take;       /* inside rd_kafka_consume_callback_queue */
        size_t value_bytes; /* value bytes the current take copied (librdkafka's byte bound counts values) */
        /* take_cb's guess: records come in runs of one partition. Checked
         * before use (in range, the record's partition), so one left
         * behind by a partition removed costs one search. */
        size_t last_part;
        uint64_t taken_total; /* records (and errors) taken so far */
        /* Records kept in the store so far, published to `stored` after
         * each take, before any of them is handed out (cs_test_sub_taken). */
        uint64_t stored_total;
        _Atomic uint64_t stored;
        _Atomic uint64_t sheds; /* times a paused partition started dropping records (cs_test_sub_sheds) */
    } take;
    /* How many records had been queued in recq or taken when a subscribed
     * topic was reported gone: those are records of the old log, which must
     * not decide whether the log restarted (a count that is too high, from
     * outdated ops librdkafka skips, only delays that). pending: the report
     * came inside a take, count again after it. Owned by: fetch_parts.c
     * (cs__fetch_mark_old_log, cs__fetch_recount_old_log). */
    struct cs_consumer_old_log {
        uint64_t until;
        bool pending;
    } old_log;
    /* The assigned partitions' fetch state. Owned by: fetch_parts.c (the
     * fetch thread; resume_wanted from any thread, by the pipeline's wake
     * hook cs__fetch_wake). */
    struct cs_consumer_fetch {
        fetch_part *parts; /* each partition knows its index (cs__part_source_slot) */
        size_t n_parts, cap;
        uint64_t opened; /* partitions opened so far: fetch_control.c applies its pauses to new ones */
        /* Partitions whose fetch position librdkafka moved back
         * (fetch_part.back_to) wait for moves_back (fetch_control.c;
         * cs__fetch_back_*). */
        bool back_pending;
        _Atomic bool resume_wanted; /* the pipeline's wake hook asked (cs__fetch_resume_drained) */
    } fetch;
    /* Owned by: fetch_handout.c. Where the next serving round starts (fairness). */
    struct cs_consumer_handout {
        size_t next_part;
    } handout;
    /* librdkafka's pre-fetch bound: queued.max.messages.kbytes (in bytes)
     * and queued.min.messages. Owned by: consumer_conf.c. */
    struct cs_consumer_rdk_bound {
        size_t bytes, records;
    } rdk_bound;
    /* Owned by: fetch_wake.c. Wake-up seeks (read by /metrics and stats);
     * re-fetch seeks still to fail on purpose (cs_test_sub_fail_refetches:
     * each one fails as a seek librdkafka refused, before it is asked). */
    struct cs_consumer_wake {
        _Atomic uint64_t wakeups;
        _Atomic unsigned refetch_faults;
    } wake;
    /* Per subscribed topic (s->topics[i]): the continuity guard's gaps and
     * repeats and the last-resort pauses of its partitions (read by
     * /metrics and stats; counted with cs__consumer_count_topic). */
    _Atomic uint64_t *topic_gaps, *topic_repeats, *topic_stuck;

    cs_client_stats rdk_stats; /* librdkafka's statistics: brokers' round trips, the fetch queue (client_stats.c) */
    cs_pipeline *pipe;
    pthread_t thread;
    bool thread_started;
    _Atomic bool stop;
    bool closing;            /* the close path: revoke releases pending payloads */
    bool closed_after_fatal; /* closed without the group: destroy without a consumer close */
    /* The rejoin of a static member refused with UNRELEASED_INSTANCE_ID
     * under the consumer protocol (consumer.c, "rejoin"), or of a group that
     * did not come back: the configuration to create its consumer again
     * (NULL when no such refusal can come). The request and its count are in
     * `rejoin` below. Fetch thread. */
    rd_kafka_conf_t *rejoin_conf;
    /* Owned by: consumer_errors.c (cs__rejoin_ask, cs__rejoin_take,
     * cs__consumer_rejoin_later): whether the fetch thread is to create the
     * consumer again, whether for a group that did not come back (stalled:
     * no backoff), when the first refusal came, and the rejoins so far. */
    struct cs_consumer_rejoin {
        bool wanted, stalled;
        int64_t first_ms;
        _Atomic uint64_t count;
    } rejoin;
    /* How long refusals are retried: set at the first retry from the
     * broker's group.consumer.session.timeout.ms (consumer.c,
     * rejoin_bound); 0 before, when the first refusal counts as within it. */
    int64_t rejoin_bound_ms;
    int64_t stall_rejoin_ms; /* how long it may stay lost (consumer.c, stall_rejoin_ms) */
    /* The member in its group. Owned by: rebalance.c (the fetch thread; the
     * HTTP thread reads `joined` through cs__consumer_ready). */
    struct cs_consumer_group {
        /* In its group: the last rebalance ended with an assignment, empty
         * or not, or (consumer protocol) a member epoch says so. Under the
         * consumer protocol a member with nothing assigned gets no lost
         * callback either, so it stays joined through a lost session
         * (librdkafka rejoins it). */
        _Atomic bool joined;
        bool cooperative; /* the group's rebalance protocol, as last known */
        /* When the group session was lost, 0 while joined: a session that
         * does not come back makes the fetch thread create the consumer
         * again (consumer.c, "a group that does not come back"). */
        int64_t lost_since_ms;
        /* cs__rebalance_check_empty_join: when the epoch is asked next, the
         * epoch the member had when its session was lost (0: none), since
         * when a join is awaited (the last subscribe), whether it was ever
         * in its group, and the "not joined" WARN, once. */
        int64_t next_join_check_ms;
        int32_t lost_epoch;
        int64_t joining_since_ms;
        bool ever_joined;
        bool join_warned;
    } group;
    bool tracked;       /* Tracked or Transactional: the pipeline tracks settlements */
    bool transactional; /* positions commit in transactions (txn), never with plain commits */
    cs_txn *txn;
    int interval_ms; /* commit interval, or window length */
    /* Owned by: committer.c (the fetch thread; ticks read by any). */
    struct cs_consumer_commit {
        int abort_backoff_ms; /* Transactional: grows with aborts in a row, so a failure that persists does not spin */
        /* Transactional: sources whose outputs failed in the transaction
         * being committed; counted as attempts after the rewind */
        struct failed_output {
            cs_part *part;
            int64_t offset;
            uint32_t attempt;
        } failed[64];
        size_t n_failed;
        /* Commit ticks completed (cs_test_sub_commit_ticks): the timer
         * looked at every position, and what it sent, if anything, was
         * answered. Counted even when nothing changed, so a test can wait
         * for ticks that had the chance to commit what must not be
         * committed. */
        _Atomic uint64_t ticks;
    } commit;
    int64_t next_commit_ms;
    cs_ratelimit error_warning;
    cs_ratelimit commit_warning;
    cs_ratelimit truncation_warning; /* the acked set did not fit in the commit metadata */
    /* What librdkafka reported about the topics and brokers. Owned by:
     * consumer_errors.c (cs__errors_init, _free and the error paths). */
    struct cs_consumer_errors {
        /* Subscribed topics librdkafka reported unavailable (deleted, or
         * not visible to this client), one flag per s->topics[i]: set by
         * the error paths on the fetch thread, cleared when a partition of
         * the topic is assigned again, read by /metrics. */
        _Atomic bool *topic_unavailable;
        _Atomic int n_unavailable; /* how many are set: dispatch looks only when > 0 */
        /* cs_sub_allow_missing_topics only (else NULL): one flag per
         * s->topics[i], set once a partition of it was assigned, so that a
         * topic still to come is told apart from one deleted (fetch thread). */
        _Atomic bool *topic_seen;
        /* Sticky: some subscribed topic vanished while this consumer ran (or
         * could have: a pattern). Then librdkafka 2.0.2 may never finish
         * destroying the handle (consumer.c, destroy_handle). */
        _Atomic bool topic_vanished;
        /* librdkafka reported all brokers down; cleared by a probe that
         * answers (cs__consumer_ready, any thread). */
        _Atomic bool brokers_down;
        /* A record could not be handed out or tracked for lack of memory:
         * the app is stopping, and no later record is handed out either,
         * so none can be settled past the one that was not (fetch thread;
         * cs__fetch_out_of_memory). */
        bool out_of_memory;
    } errors;
    /* Orders the commits' enqueues (tick, revoke, close, assignment marks,
     * suspect-record commits). Lock order: level 3 (src/lock_order.h),
     * before the registry and partition locks. Held only while commit states
     * are taken and enqueued, never while a result is awaited. */
    pthread_mutex_t commit_lock;
    /* Orders wake-ups with the end of the fetch thread: once `stop` is set no
     * rd_kafka_queue_yield reaches the consumer queue. rd_kafka_consumer_close
     * forwards that queue to its own and returns at the first yield it sees,
     * before the group is left (the destroy then waits forever). Lock order:
     * level 7, the last (src/lock_order.h): taken under a partition lock
     * (settle wakes the fetch thread), under the store's wake_mx and under a
     * librdkafka queue lock (on_records, fetch_take.c); it only yields. */
    pthread_mutex_t wake_lock;
    /* Requests of the application (seeks, pauses), posted by any thread.
     * Owned by: fetch_requests.c. `lock` guards the queue, `closed` and
     * `rebalancing` (lock order: level 3, src/lock_order.h, taken under
     * stats_lock by the caller); `pending` tells the loop to look. */
    struct cs_consumer_requests {
        pthread_mutex_t lock;
        CS_STAILQ(cs_ctl_req) queue; /* linked through cs_ctl_req.next */
        bool closed;                 /* the fetch thread ended: requests fail */
        _Atomic bool pending;        /* a request waits */
        bool rebalancing;            /* a rebalance callback runs: requests are refused */
    } requests;
    /* The application's pauses and seeks, applied. Owned by:
     * fetch_control.c (the fetch thread; the counters read by any). */
    struct cs_consumer_control {
        bool paused_all;        /* cs_sub_pause */
        bool pauses_dirty;      /* the pause list changed: recompute app_paused */
        uint64_t pauses_opened; /* fetch.opened when app_paused was last recomputed */
        cs_paused_part *paused; /* cs_sub_pause_partition's partitions */
        size_t n_paused, cap_paused;
        _Atomic uint64_t seeks;      /* partitions moved by a seek (stats, /metrics) */
        _Atomic uint64_t paused_now; /* assigned partitions paused by the application (gauge) */
        _Atomic uint64_t moves_back; /* moves after librdkafka's position moved back (cs_test_sub_moves_back) */
    } control;
    bool window_barrier; /* CSTREAM_TXN_BARRIER: handlers wait at a gate the fetch thread closes */
    char who[256];
};

/* ---- fetch_control.c -------------------------------------------------------- */
/* Below consumer.c, above rebalance.c in the layers listed next. */
/* At the consumer's free: the pause list, then the request queue. */
void cs__control_destroy(cs_consumer *c);
/* Fetch thread, each turn: applies the waiting requests, then the pauses to
 * the assigned partitions (a resumed partition that shed records seeks back
 * to them). */
void cs__control_apply(cs_consumer *c);

/* ---- fetch_requests.c ------------------------------------------------------- */
/* At start, before the fetch thread. */
void cs__control_init(cs_consumer *c);
/* Once the fetch thread has ended: every waiting request fails with
 * CS_ERR_STATE, and new ones are refused. */
void cs__control_close(cs_consumer *c);
/* At the consumer's free, after cs__control_close. */
void cs__control_queue_destroy(cs_consumer *c);
/* First thing on the fetch thread: requests from any fetch thread (an assign
 * or revoke hook) are refused instead of waited for. */
void cs__control_on_fetch_thread(const cs_consumer *c);
/* Any thread: whether it is some subscription's fetch thread. */
bool cs__control_on_a_fetch_thread(void);
/* Fetch thread, around a rebalance callback: requests waiting fail, and new
 * ones are refused, with CS_ERR_STATE "a rebalance is in progress". */
void cs__control_rebalance_begin(cs_consumer *c);
void cs__control_rebalance_end(cs_consumer *c);
/* Any thread, with c kept alive (under the subscription's stats_lock):
 * hands r to the fetch thread; false if it has ended or a rebalance runs (r
 * is then done with CS_ERR_STATE). Either way cs__control_wait(r) follows,
 * with no lock held. */
bool cs__control_post(cs_consumer *c, cs_ctl_req *r);
/* Waits until r is done (the fetch thread applied it, or ended) and returns
 * its result; r->message has the reason. Touches only r: c may be gone. */
cs_err cs__control_wait(cs_ctl_req *r);
/* Fetch thread: every waiting request, the queue emptied; each is answered
 * with cs__control_finish (r belongs to its caller after that). */
cs_ctl_req *cs__control_take_all(cs_consumer *c);
void cs__control_finish(cs_ctl_req *r, cs_err result);
/* Fetch thread: the partition is paused by the application. */
static inline bool cs__fetch_app_paused(const cs_consumer *c, const fetch_part *fp) {
    return c->control.paused_all || fp->app_paused;
}

/* ---- consumer_conf.c -------------------------------------------------------- */
/* The librdkafka configuration of s's consumer c, with c as its opaque; sets
 * c's pre-fetch bounds (rdk_bound_*) and s->static_id on the way. On success
 * *out is the caller's, for rd_kafka_new; on failure the configuration is
 * destroyed and the error names the property (errors name c->who). */
cs_err cs__consumer_build_conf(cs_sub *s, cs_app *app, cs_consumer *c, rd_kafka_conf_t **out);

/* The files of the consumer call each other in layers, top to bottom (no
 * file calls one above it; scripts/depgraph checks it):
 *   consumer.c (lifecycle, the fetch thread's loop)
 *   fetch_control.c (the application's seeks and pauses)
 *   consumer_conf.c (registers the callbacks below)
 *   rebalance.c
 *   start_position.c
 *   committer.c
 *   fetch_take.c, fetch_handout.c
 *   fetch_stuck.c, fetch_wake.c
 *   consumer_metrics.c
 *   consumer_errors.c
 *   fetch_requests.c
 *   fetch_parts.c
 *   fetch_backlog.c */

/* The pipeline's counters as a cs_sub_stats, the broker's own fields 0. */
static inline void cs__sub_stats_of_pipeline(cs_pipeline *p, cs_sub_stats *out) {
    cs_broker_sub_counters counters;
    cs__pipeline_stats(p, &counters);
    memset(out, 0, sizeof *out);
    cs__sub_stats_set_counters(out, &counters);
}

/* ---- fetch_parts.c ---------------------------------------------------------- */
/* The partition's core state (registered on first use). Fetch thread, or the
 * closing thread after the fetch thread exited. */
cs_part *cs__consumer_part(cs_consumer *c, const char *topic, int32_t partition);
/* Cuts the fetch thread's wait in the poll short, while it runs. Any thread. */
void cs__fetch_yield(cs_consumer *c);
/* The pipeline's wake hook (arg: the consumer). Any thread, never blocks. */
void cs__fetch_wake(void *arg);
/* Fetch thread, after a wake: lets the pipeline resume the partitions that
 * drained to half of max_open. */
void cs__fetch_resume_drained(cs_consumer *c);
/* part's entry in c->fetch.parts, NULL if it is not open here. O(1): the entry's
 * index is kept in the partition (cs__part_source_slot). */
fetch_part *cs__fetch_part_of(cs_consumer *c, const cs_part *part);
/* Sets e's leader epoch to the partition's newest (fetch_part.leader_epoch)
 * when librdkafka has epochs (>= 2.1.0) and one is known. Fetch thread, or
 * the closing thread once the fetch thread exited. */
void cs__fetch_mark_epoch(cs_consumer *c, const cs_part *part, rd_kafka_topic_partition_t *e);
/* At assign, before librdkafka starts fetching the partition. */
bool cs__fetch_open_part(cs_consumer *c, cs_part *part);
/* Pauses (stuck) or resumes the partition in librdkafka; fp->paused follows. */
void cs__fetch_set_paused(cs_consumer *c, fetch_part *fp, bool paused);
/* Resumes the partition if cstream paused it (an APP pause survives
 * reassignment in librdkafka 2.0.2). */
void cs__fetch_resume_paused(cs_consumer *c, fetch_part *fp);
/* At revoke: drops the partition's backlog (none of it was handed out) and
 * resumes it in librdkafka if cstream had paused it. */
void cs__fetch_forget_part(cs_consumer *c, cs_part *part);
/* Transactional rewind: drops the partition's backlog; its next record is `offset`. */
void cs__fetch_rewound(cs_consumer *c, cs_part *part, int64_t offset);
/* A topic was reported gone: what is queued or waiting of it is old log. */
void cs__fetch_mark_old_log(cs_consumer *c, const char *topic);
/* After a take: if a topic was reported gone inside it, what is old log is
 * counted again (cs__fetch_mark_old_log could not count the take's rest). */
void cs__fetch_recount_old_log(cs_consumer *c);
/* A partition's fetch state is written here only (fetch_part's comments say
 * what each field means); the fetch thread's other files ask for changes:
 * it handed out or settled a record (progress_ms), a failed re-fetch is
 * tried again at at_ms, its records are withheld (revoked while moved),
 * it sheds or stops shedding, the record at `offset` was taken (leader
 * epoch -1: unknown). */
void cs__fetch_progressed(fetch_part *fp, int64_t now);
void cs__fetch_refetch_later(fetch_part *fp, int64_t at_ms);
void cs__fetch_withhold(fetch_part *fp);
void cs__fetch_set_shed(fetch_part *fp, bool shed);
void cs__fetch_taken(fetch_part *fp, int64_t offset, int32_t leader_epoch);
/* A paused partition keeps its share of backlog: the rest is dropped and
 * read again from its first dropped record (`next` moves there), and the
 * open chunk is closed, so that chunks of dropped records go back. */
void cs__fetch_trim(fetch_part *fp, size_t share);
/* A partition's fetch position moved back (fetch_part.back_to; its records
 * are dropped at the take until moves_back, fetch_control.c, moved it):
 * detected at `offset` (take_cb); whether any partition waits (the flag is
 * cleared: keep_pending sets it again for one still waiting); a refused
 * move retried at at_ms; the move done, or not needed any more. */
void cs__fetch_back_detected(cs_consumer *c, fetch_part *fp, int64_t offset);
bool cs__fetch_back_take_pending(cs_consumer *c);
void cs__fetch_back_keep_pending(cs_consumer *c);
void cs__fetch_back_retry_at(fetch_part *fp, int64_t at_ms);
void cs__fetch_back_settled(fetch_part *fp);
/* Before the handle is destroyed: every backlog, partition queue and topic
 * handle (the record queue goes next: cs__fetch_take_close). */
void cs__fetch_close_all(cs_consumer *c);

/* ---- consumer_errors.c ------------------------------------------------------ */
/* Stops the app for the consumer's fatal error `orig` (FENCED_INSTANCE_ID named as such). */
void cs__consumer_fatal_error(cs_consumer *c, rd_kafka_resp_err_t orig, const char *why);
/* A static member's join refused with UNRELEASED_INSTANCE_ID: true if the
 * fetch thread is to create the consumer again and retry (the consumer
 * protocol, never assigned yet, within the bound), counted and logged once;
 * false: the refusal is fatal. Fetch thread. */
bool cs__consumer_rejoin_later(cs_consumer *c);
/* Fetch thread: the consumer is to be created again (stalled: for a group
 * that did not come back, without a backoff), counted in rejoin.count. */
void cs__rejoin_ask(cs_consumer *c, bool stalled);
/* Fetch thread, as the rejoin starts: clears the request; whether it was
 * for a stalled group. */
bool cs__rejoin_take(cs_consumer *c);
/* At the consumer's start (the topic flags of s); CS_ERR_NOMEM, named. */
cs_err cs__errors_init(cs_consumer *c, const cs_sub *s);
void cs__errors_free(cs_consumer *c);
/* Any thread: a broker answered after all were reported down. */
void cs__errors_broker_answered(cs_consumer *c);
/* librdkafka's error_cb (opaque: the consumer). */
void cs__consumer_on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque);
/* librdkafka's statistics callback (fetch thread, through the consumer
 * queue): each assigned partition's end (cs__part_set_end). */
int cs__consumer_on_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque);
/* An error record, from recq (take_cb) or the consumer queue (the poll).
 * Fetch thread, or the closing thread after the fetch thread exited. */
void cs__consumer_on_record_error(cs_consumer *c, const rd_kafka_message_t *m);
/* The record at topic/partition@offset was not handed out for lack of
 * memory: stops the app, and nothing more is handed out. Fetch thread. */
void cs__fetch_out_of_memory(cs_consumer *c, const char *topic, int32_t partition, int64_t offset, const char *what);
bool cs__topic_error(rd_kafka_resp_err_t err);
/* Kafka's longest topic name. */
#define CS_TOPIC_NAME_MAX 249
/* The topic name an error_cb reason starts with, into buf: the fallback for
 * error_cb only, which has no topic field in librdkafka 2.0.2
 * (consumer_errors.c). */
bool cs__topic_of_reason(const char *reason, char *buf, size_t size);
/* The index of the subscribed topic named `topic` (a name, never a reason), or -1. */
int cs__subscribed_topic_in(const cs_consumer *c, const char *topic);
/* source: where librdkafka reported it ("error_record": the record's topic
 * field; "error_cb": read from the reason), logged with it. */
void cs__topic_unavailable(cs_consumer *c, int i, rd_kafka_resp_err_t err, const char *source, const char *reason);
void cs__topic_available(cs_consumer *c, const char *topic);
void cs__errors_log_restart(cs_consumer *c, cs_part *part, const char *topic, int64_t offset);

/* ---- consumer_metrics.c ----------------------------------------------------- */
/* Adds one to the subscribed topic's counter in `counters` (one per
 * s->topics[i]); a topic not subscribed counts nowhere. Fetch thread. */
void cs__consumer_count_topic(cs_consumer *c, _Atomic uint64_t *counters, const char *topic);

/* ---- fetch_wake.c ----------------------------------------------------------- */
/* After librdkafka's bound was seen and recq is empty again. */
void cs__fetch_wake_fetchers(cs_consumer *c);
/* Moves the partition to `offset`: seeks it there and waits for the seek's
 * result, then drops its backlog; an error is described in `why` (nothing
 * changed then). */
rd_kafka_resp_err_t cs__fetch_reposition(cs_consumer *c, cs_part *part, int64_t offset, char *why, size_t cap);
/* A shed partition's re-fetch: seeks it to `next` and waits for the seek's
 * result; the backlog (the records before `next`) is kept. An error is
 * described in `why` (librdkafka's fetch position then is where it was). */
rd_kafka_resp_err_t cs__fetch_refetch(cs_consumer *c, fetch_part *fp, char *why, size_t cap);
/* A failed re-fetch is tried again after this long (a refused seek answers
 * at once; one that timed out held the fetch thread for 10 s already). */
#define CS_REFETCH_RETRY_MS 200
/* After an incremental (un)assign: librdkafka resumed the kept partitions
 * without waking their broker threads; seek them to where they are. */
void cs__fetch_wake_kept(cs_consumer *c);

/* ---- fetch_stuck.c ---------------------------------------------------------- */
/* The partition's records in flight hold a quarter of the buffer (and it is
 * not the only partition): it gets no more. */
bool cs__fetch_out_capped(cs_consumer *c, const fetch_part *fp);
/* Pauses the partitions that stopped settling past their share of the
 * buffer, resumes the ones that settled. Fetch thread, each loop. */
void cs__fetch_stuck_check(cs_consumer *c, int64_t now);
/* A partition's fair share of the buffer's bytes for its backlog. */
size_t cs__fetch_share(cs_consumer *c);

/* ---- fetch_take.c ----------------------------------------------------------- */
/* At start: the record queue and the store. False when out of memory. */
bool cs__fetch_init(cs_consumer *c, size_t budget);
/* A new record queue for the consumer handle rk (c->rk's replacement at a
 * rejoin), its callback set as cs__fetch_init sets it; NULL if out of memory. */
rd_kafka_queue_t *cs__fetch_recq_new(cs_consumer *c, rd_kafka_t *rk);
/* Takes what recq holds into the store, unless the store is full; returns
 * the records (and errors) taken. Fetch thread. */
size_t cs__fetch_take_records(cs_consumer *c);
/* Rejoin, under wake_lock: recq becomes the record queue; the old one is
 * returned, the caller's to destroy. */
rd_kafka_queue_t *cs__fetch_recq_replace(cs_consumer *c, rd_kafka_queue_t *recq);
/* Before the handle is destroyed, after cs__fetch_close_all: the record
 * queue; the store's reference (pending deliveries may keep it). */
void cs__fetch_take_close(cs_consumer *c);

/* ---- fetch_handout.c -------------------------------------------------------- */
/* One serving round; true if some partition could take more right away. */
bool cs__fetch_hand_out(cs_consumer *c, int64_t now);

/* ---- rebalance.c ------------------------------------------------------------ */
void cs__rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *l, void *opaque);
/* Manual assignment (cs_sub_partitions): assigns the fixed partitions as a
 * rebalance would (partition state, attempt counts, fetch queues), once, at
 * the start of the fetch thread; the consumer counts as joined after it. */
void cs__rebalance_assign_fixed(cs_consumer *c);
/* Under the consumer protocol: counts a member whose assignment is empty
 * from the start as joined once its member epoch says it is in (no
 * rebalance callback comes for it). Fetch thread, each pass. */
void cs__rebalance_check_empty_join(cs_consumer *c, int64_t now);
/* Fetch thread, at each subscribe: a join is awaited from now on. */
void cs__rebalance_joining(cs_consumer *c);
/* Fetch thread: the lost session's clock starts again at `now` (the consumer
 * was created again for it). */
void cs__rebalance_restart_lost_clock(cs_consumer *c, int64_t now);

/* ---- start_position.c ------------------------------------------------------- */
/* At assign, before librdkafka assigns l: sets the offset of each partition
 * the group has no committed offset for, from cs_sub_start_at_offset or
 * cs_sub_start_at_time (nothing without them). Fetch thread; blocks on the
 * cluster for the lookups (bounded), with no lock held. */
void cs__start_positions_apply(cs_consumer *c, rd_kafka_topic_partition_list_t *l);

/* ---- committer.c ------------------------------------------------------------ */
/* Commits the partitions in `only` (all known ones if NULL) whose position or
 * attempt counts changed, the counts in the offset metadata (only an explicit
 * commit keeps metadata in librdkafka 2.0.2). Async on the timer; sync, and
 * marked clean, on revoke and close. Transactional and Database: closes the window. */
void cs__commit_positions(cs_consumer *c, const rd_kafka_topic_partition_list_t *only, bool sync);
/* ---- commit_request.c --------------------------------------------------------- */
/* A partition's state as an entry of a commit request: its position and
 * metadata (any thread). */
rd_kafka_topic_partition_t *cs__commit_add_entry(rd_kafka_topic_partition_list_t *l, const cs_commit_state *s);
/* The same with the leader epoch it was read under, and the truncation
 * warning (fetch thread). */
void cs__commit_add_state(cs_consumer *c, rd_kafka_topic_partition_list_t *l, const cs_commit_state *s);
/* One line now and then when a state's acked set was cut to fit (any thread). */
void cs__commit_note_truncation(cs_consumer *c, const cs_commit_state *s);
/* Lets positions pass transaction markers librdkafka served and cstream
 * never takes (see commit_request.c). Fetch thread. */
void cs__commit_pass_markers(cs_consumer *c);
rd_kafka_queue_t *cs__commit_enqueue(cs_consumer *c, rd_kafka_topic_partition_list_t *l, rd_kafka_resp_err_t *err);
rd_kafka_resp_err_t cs__commit_await(cs_consumer *c, rd_kafka_queue_t *q, bool record);
int cs__commit_precommit(void *arg, cs_part *part);
void cs__commit_output_failed(void *arg, cs_part *part, int64_t offset, uint32_t attempt);
void cs__commit_on_offset_commit(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *offsets,
                                 void *opaque);

/* ---- database_window.c (Database mode) ---------------------------------------- */
/* Closes the window: the changed positions written under their fences and
 * committed with the handlers' writes, or everything rolled back and read
 * again. `final` (revoke, close): clean states. Fetch thread. */
void cs__commit_db_window(cs_consumer *c, bool final);
/* At assign: commits the open window, then claims every partition of l in
 * the database, filling each entry's offset (-1: no row yet) and metadata
 * (the acked set). Retried a few times; the app stops if it never works. */
rd_kafka_resp_err_t cs__commit_db_claim(cs_consumer *c, rd_kafka_topic_partition_list_t *l);
/* Sets l's offsets for the assign from the claimed rows (no row: the start). */
void cs__commit_db_start_at(cs_consumer *c, rd_kafka_topic_partition_list_t *l,
                            const rd_kafka_topic_partition_list_t *claimed);
/* Commits the window and keeps the database locked, so that no run writes
 * until cs__commit_db_unhold: an application's seek moves partitions in
 * between (fetch_control.c). False (nothing held) without the assignment. */
bool cs__commit_db_hold(cs_consumer *c);
void cs__commit_db_unhold(cs_consumer *c);
/* Rolls the window back and reads every assigned partition again from its
 * row (a fetch position librdkafka moved back: fetch_control.c). */
void cs__commit_db_roll_back(cs_consumer *c, const char *why);
/* At the consumer's close, after its last commit: a window still open is
 * rolled back. */
void cs__commit_db_close(cs_consumer *c);
/* At revoke: forgets l's claims; `lost`: the open window must not commit. */
void cs__commit_db_release(cs_consumer *c, const rd_kafka_topic_partition_list_t *l, bool lost);

#endif
