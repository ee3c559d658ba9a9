/* fetch_parts.c — the fetch path's partitions: one fetch_part per assigned
 * partition (its index in c->fetch.parts kept in the partition, for O(1) lookups),
 * opened at assign (its queue forwarded to recq), its pause in librdkafka,
 * forgotten at revoke, all closed before the handle is destroyed; every
 * change of a partition's fetch state the other files ask for; the old log's
 * count; and waking the fetch thread's poll. Of the consumer's files it
 * calls fetch_backlog.c only.
 *
 * Owns: c->fetch, c->old_log, and every fetch_part field but settled_seen
 * (fetch_stuck.c's note), app_paused (fetch_control.c's pause list) and the
 * backlog's queue (fetch_backlog.c's). Locks: wake_lock
 * (cs__fetch_yield; level 7, src/lock_order.h). Threads: the fetch thread, or
 * the closing thread after the fetch thread exited; cs__fetch_yield and
 * cs__fetch_wake from any thread (they never block). */
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
    atomic_store(&c->fetch.resume_wanted, true);
    cs__fetch_yield(c);
}

/* Settlements brought partitions at max_open down to half of it (the
 * pipeline's wake hook, cs__fetch_wake, set resume_wanted): they may be
 * served again. */
void cs__fetch_resume_drained(cs_consumer *c) {
    atomic_store(&c->fetch.resume_wanted, false);
    for (size_t i = 0; i < c->fetch.n_parts; i++) cs__part_should_resume(c->pipe, c->fetch.parts[i].part);
}

fetch_part *cs__fetch_part_of(cs_consumer *c, const cs_part *part) {
    /* The partition carries its index in c->fetch.parts: no search (a scan here ran
     * once per partition on every commit tick and revoke, O(P^2)). */
    long slot = cs__part_source_slot(part);
    if (slot < 0 || (size_t)slot >= c->fetch.n_parts || c->fetch.parts[slot].part != part) return NULL;
    return &c->fetch.parts[slot];
}

/* Forwards the partition's queue to recq. librdkafka 2.0.2 clears the
 * forward when it stops fetching the partition (rd_kafka_toppar_fetch_stop)
 * and, because the forward was the application's, does not set it again at
 * the next fetch start: every assignment forwards it again. */
static bool forward_to_recq(cs_consumer *c, const cs_part *part) {
    rd_kafka_queue_t *q = rd_kafka_queue_get_partition(c->rk, cs__part_topic(part), cs__part_number(part));
    if (!q) return false;
    rd_kafka_queue_forward(q, c->take.recq);
    rd_kafka_queue_destroy(q);
    return true;
}

/* At assign, before librdkafka starts fetching the partition: its records go
 * to recq from now on. */
bool cs__fetch_open_part(cs_consumer *c, cs_part *part) {
    fetch_part *fp = cs__fetch_part_of(c, part);
    if (fp) { /* still known from before (its revoke did not forget it): a new epoch starts empty */
        cs__fetch_resume_paused(c, fp);
        cs__backlog_drop(&fp->backlog);
        fp->next = -1;
        fp->shed = false; /* a new fetch position: nothing was dropped of it */
        fp->withheld = false;
        fp->back_to = -1; /* a new assignment reads from the group's position */
        fp->leader_epoch = -1;
        fp->refetch_at_ms = 0;
        fp->progress_ms = cs__now_ms();
        c->fetch.opened++; /* whether it is paused by the application: fetch_control.c */
        return forward_to_recq(c, part);
    }
    if (c->fetch.n_parts == c->fetch.cap) {
        size_t cap = c->fetch.cap ? c->fetch.cap * 2 : 8;
        fetch_part *grown = realloc(c->fetch.parts, cap * sizeof *grown);
        if (!grown) return false;
        c->fetch.parts = grown;
        c->fetch.cap = cap;
    }
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(c->rk, cs__part_topic(part), NULL);
    if (!rkt || !forward_to_recq(c, part)) {
        if (rkt) rd_kafka_topic_destroy(rkt);
        return false;
    }
    cs__part_set_source_slot(part, (long)c->fetch.n_parts);
    c->fetch.parts[c->fetch.n_parts++] = (fetch_part){.part = part,
                                                      .topic = cs__part_topic(part),
                                                      .partition = cs__part_number(part),
                                                      .rkt = rkt,
                                                      .next = -1,
                                                      .back_to = -1,
                                                      .leader_epoch = -1,
                                                      .progress_ms = cs__now_ms()};
    c->fetch.opened++;
    return true;
}

void cs__fetch_mark_epoch(cs_consumer *c, const cs_part *part, rd_kafka_topic_partition_t *e) {
#if CS_RDKAFKA_HAS_EPOCHS
    fetch_part *fp = cs__fetch_part_of(c, part);
    if (fp && fp->leader_epoch >= 0) rd_kafka_topic_partition_set_leader_epoch(e, fp->leader_epoch);
#else
    (void)c, (void)part, (void)e;
#endif
}

/* A partition cstream paused (stuck) is resumed before it goes: an APP pause
 * survives reassignment in librdkafka 2.0.2. */
void cs__fetch_set_paused(cs_consumer *c, fetch_part *fp, bool paused) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, fp->topic, fp->partition);
    if (paused) rd_kafka_pause_partitions(c->rk, l);
    else rd_kafka_resume_partitions(c->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    fp->paused = paused;
}

void cs__fetch_resume_paused(cs_consumer *c, fetch_part *fp) {
    if (fp->paused) cs__fetch_set_paused(c, fp, false);
}

static void remove_part(cs_consumer *c, fetch_part *fp) {
    cs__backlog_drop(&fp->backlog);
    cs__store_close_chunk(&fp->open);
    if (fp->rkt) rd_kafka_topic_destroy(fp->rkt);
    cs__part_set_source_slot(fp->part, -1);
    /* The last entry fills the hole, and its partition learns its new index. */
    *fp = c->fetch.parts[--c->fetch.n_parts];
    if (fp != &c->fetch.parts[c->fetch.n_parts]) cs__part_set_source_slot(fp->part, (long)(fp - c->fetch.parts));
}

void cs__fetch_forget_part(cs_consumer *c, cs_part *part) {
    fetch_part *fp = cs__fetch_part_of(c, part);
    if (!fp) return;
    cs__fetch_resume_paused(c, fp);
    remove_part(c, fp);
}

/* Before the handle is destroyed: librdkafka must get its queue and topic
 * handles back. */
void cs__fetch_close_all(cs_consumer *c) {
    while (c->fetch.n_parts) remove_part(c, &c->fetch.parts[c->fetch.n_parts - 1]);
    free(c->fetch.parts);
    c->fetch.parts = NULL;
    c->fetch.cap = 0;
}

void cs__fetch_rewound(cs_consumer *c, cs_part *part, int64_t offset) {
    fetch_part *fp = cs__fetch_part_of(c, part);
    if (!fp) return;
    cs__backlog_drop(&fp->backlog);
    fp->next = offset;
}

/* ---- a partition's fetch state: the changes other files ask for --------- */

void cs__fetch_progressed(fetch_part *fp, int64_t now) { fp->progress_ms = now; }

void cs__fetch_refetch_later(fetch_part *fp, int64_t at_ms) { fp->refetch_at_ms = at_ms; }

void cs__fetch_withhold(fetch_part *fp) { fp->withheld = true; }

void cs__fetch_set_shed(fetch_part *fp, bool shed) { fp->shed = shed; }

void cs__fetch_taken(fetch_part *fp, int64_t offset, int32_t leader_epoch) {
    fp->next = offset + 1;
    fp->leader_epoch = leader_epoch;
}

void cs__fetch_trim(fetch_part *fp, size_t share) {
    int64_t first_dropped = cs__backlog_trim(&fp->backlog, share);
    if (first_dropped < 0) return;
    fp->next = first_dropped;
    cs__store_close_chunk(&fp->open);
}

/* ---- a fetch position that moved back (moves_back, fetch_control.c) ------ */

void cs__fetch_back_detected(cs_consumer *c, fetch_part *fp, int64_t offset) {
    fp->back_to = offset;
    fp->back_retry_ms = 0;
    c->fetch.back_pending = true;
}

bool cs__fetch_back_take_pending(cs_consumer *c) {
    bool pending = c->fetch.back_pending;
    c->fetch.back_pending = false;
    return pending;
}

void cs__fetch_back_keep_pending(cs_consumer *c) { c->fetch.back_pending = true; }

void cs__fetch_back_retry_at(fetch_part *fp, int64_t at_ms) { fp->back_retry_ms = at_ms; }

void cs__fetch_back_settled(fetch_part *fp) { fp->back_to = -1; }

/* ---- the old log ----------------------------------------------------------- */

void cs__fetch_mark_old_log(cs_consumer *c, const char *topic) {
    for (size_t i = 0; i < c->fetch.n_parts; i++) {
        fetch_part *fp = &c->fetch.parts[i];
        if (strcmp(fp->topic, topic)) continue;
        cs__backlog_mark_old_log(&fp->backlog);
    }
    c->old_log.until = c->take.taken_total + (uint64_t)rd_kafka_queue_length(c->take.recq);
    /* Inside a take, the rest of its records are out of recq: stop the take
     * (they go back to recq's head) and count again after it. */
    if (c->take.in_take) {
        c->old_log.pending = true;
        rd_kafka_yield(c->rk);
    }
}

void cs__fetch_recount_old_log(cs_consumer *c) {
    if (!c->old_log.pending) return;
    c->old_log.pending = false;
    c->old_log.until = c->take.taken_total + (uint64_t)rd_kafka_queue_length(c->take.recq);
}
