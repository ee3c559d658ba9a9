/* fetch_control.c — the application's seeks and pauses of a running
 * subscription (cs_sub_seek, cs_sub_seek_time, cs_sub_pause*,
 * cs_sub_resume*): the request queue any thread hands them to, and their
 * application on the fetch thread, which owns the consumer.
 *
 * A seek is the Transactional rewind's mechanism with another target: a new
 * epoch for the partition (cs__part_seek: what was handed out before settles
 * as stale), its backlog dropped and librdkafka's fetch moved
 * (cs__fetch_reposition). A pause only stops serving the partition: its
 * records stay in the buffer up to its share, the rest is dropped and read
 * again after the resume (take_cb); librdkafka's pause is never used (in
 * 2.0.2 it drops the pre-fetched records and a resume waits up to 1 s).
 *
 * Threads: cs__control_request on any thread (it waits for the fetch thread);
 * everything else on the fetch thread, or the stopping thread once the fetch
 * thread has ended (cs__control_close). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/broker.h"
#include "../core/clock.h"
#include "../core/error.h"
#include "consumer_internal.h"

/* How long the fetch thread waits for a timestamp lookup or a watermark
 * (it is not serving meanwhile, so short; the broker answers at once). */
#define LOOKUP_TIMEOUT_MS 5000

/* ---- the queue ------------------------------------------------------------ */

/* The consumer whose fetch thread this is, NULL on other threads. */
static _Thread_local const cs_consumer *fetch_thread_of;

void cs__control_on_fetch_thread(const cs_consumer *c) { fetch_thread_of = c; }

void cs__control_init(cs_consumer *c) {
    pthread_mutex_init(&c->ctl_lock, NULL);
    c->ctl_tail = &c->ctl_head;
}

static void finish(cs_ctl_req *r, cs_err result) {
    pthread_mutex_lock(&r->mx);
    r->result = result;
    r->done = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mx); /* r is the caller's from here on */
}

/* The whole queue, emptied. */
static cs_ctl_req *take_all(cs_consumer *c) {
    pthread_mutex_lock(&c->ctl_lock);
    cs_ctl_req *all = c->ctl_head;
    c->ctl_head = NULL;
    c->ctl_tail = &c->ctl_head;
    atomic_store(&c->ctl_pending, false);
    pthread_mutex_unlock(&c->ctl_lock);
    return all;
}

void cs__control_close(cs_consumer *c) {
    pthread_mutex_lock(&c->ctl_lock);
    c->ctl_closed = true;
    pthread_mutex_unlock(&c->ctl_lock);
    for (cs_ctl_req *r = take_all(c), *next; r; r = next) {
        next = r->next;
        snprintf(r->message, sizeof r->message, "%s: stopped before the request was applied", c->who);
        finish(r, CS_ERR_STATE);
    }
}

void cs__control_destroy(cs_consumer *c) {
    for (size_t i = 0; i < c->n_paused; i++) free(c->paused[i].topic);
    free(c->paused);
    pthread_mutex_destroy(&c->ctl_lock);
}

bool cs__control_post(cs_consumer *c, cs_ctl_req *r) {
    pthread_mutex_init(&r->mx, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->done = false;
    r->next = NULL;
    pthread_mutex_lock(&c->ctl_lock);
    bool closed = c->ctl_closed;
    if (!closed) {
        *c->ctl_tail = r;
        c->ctl_tail = &r->next;
        atomic_store(&c->ctl_pending, true);
    }
    pthread_mutex_unlock(&c->ctl_lock);
    if (closed) {
        snprintf(r->message, sizeof r->message, "%s: not running", c->who);
        r->result = CS_ERR_STATE; /* never shared: no lock (the caller may hold stats_lock) */
        r->done = true;
    } else {
        cs__fetch_yield(c);
    }
    return !closed;
}

cs_err cs__control_wait(cs_ctl_req *r) {
    pthread_mutex_lock(&r->mx);
    while (!r->done) pthread_cond_wait(&r->cv, &r->mx); /* served within a turn of the loop, or failed at its end */
    pthread_mutex_unlock(&r->mx);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mx);
    return r->result;
}

/* ---- which partitions ---------------------------------------------------------- */

/* The assigned partitions a request names, into `out` (at most c->n_parts);
 * 0 with r->message set if none. */
static size_t targets(cs_consumer *c, cs_ctl_req *r, fetch_part **out) {
    size_t n = 0;
    for (size_t i = 0; i < c->n_parts; i++) {
        fetch_part *fp = &c->parts[i];
        if (strcmp(cs__part_topic(fp->part), r->topic)) continue;
        if (r->partition >= 0 && cs__part_number(fp->part) != r->partition) continue;
        out[n++] = fp;
    }
    if (n > 0) return n;
    if (cs__subscribed_topic_in(c, r->topic, true) < 0)
        snprintf(r->message, sizeof r->message, "%s: topic %s is not one of its topics", c->who, r->topic);
    else if (r->partition >= 0)
        snprintf(r->message, sizeof r->message, "%s: partition %s/%d is not assigned to this instance", c->who,
                 r->topic, (int)r->partition);
    else
        snprintf(r->message, sizeof r->message, "%s: no partition of topic %s is assigned to this instance", c->who,
                 r->topic);
    return 0;
}

/* ---- seeks ------------------------------------------------------------------------ */

/* The offset of the first record at or after `ms` in the partition, or its
 * end when there is none; -1 with `why` set if the cluster did not answer. */
static int64_t offset_for_time(cs_consumer *c, const cs_part *part, int64_t ms, char *why, size_t cap) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, cs__part_topic(part), cs__part_number(part))->offset = ms;
    rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(c->rk, l, LOOKUP_TIMEOUT_MS);
    if (!err) err = l->elems[0].err;
    int64_t offset = err ? -1 : l->elems[0].offset;
    rd_kafka_topic_partition_list_destroy(l);
    if (!err && offset < 0) { /* no record at or after ms: the end of the log */
        int64_t lo = 0, hi = -1;
        err = rd_kafka_query_watermark_offsets(c->rk, cs__part_topic(part), cs__part_number(part), &lo, &hi,
                                               LOOKUP_TIMEOUT_MS);
        offset = err ? -1 : hi;
    }
    if (err) snprintf(why, cap, "offset for timestamp %lld not found: %s", (long long)ms, rd_kafka_err2str(err));
    return offset;
}

/* One partition to `offset`: librdkafka's fetch first, then the new epoch,
 * with no take in between (both on this thread), so that a seek librdkafka
 * refuses changes nothing: the records handed out before stay current. */
static cs_err seek_one(cs_consumer *c, cs_ctl_req *r, fetch_part *fp, int64_t offset) {
    cs_part *part = fp->part;
    char why[256];
    rd_kafka_resp_err_t err = cs__fetch_reposition(c, part, offset, why, sizeof why);
    if (err) {
        snprintf(r->message, sizeof r->message, "%s: seek of %s/%d to offset %lld refused: %s%s", c->who,
                 cs__part_topic(part), (int)cs__part_number(part), (long long)offset, why,
                 err == RD_KAFKA_RESP_ERR__STATE ? " (a rebalance is moving the partition)" : "");
        return err == RD_KAFKA_RESP_ERR__STATE ? CS_ERR_STATE : CS_ERR_KAFKA;
    }
    int64_t from = -1;
    if (!cs__part_seek(c->pipe, part, offset, &from)) {
        snprintf(r->message, sizeof r->message, "%s: partition %s/%d is being revoked", c->who, cs__part_topic(part),
                 (int)cs__part_number(part));
        return CS_ERR_STATE;
    }
    fp->shed = false; /* nothing dropped after the new position */
    atomic_fetch_add_explicit(&c->seeks, 1, memory_order_relaxed);
    CS_LOG_INFO("seek subscription=%s topic=%s partition=%d from=%lld to=%lld%s", c->sub->name, cs__part_topic(part),
                (int)cs__part_number(part), (long long)from, (long long)offset,
                r->kind == CS_CTL_SEEK_TIME ? " by=timestamp" : "");
    return CS_OK;
}

static cs_err apply_seek(cs_consumer *c, cs_ctl_req *r) {
    fetch_part *found[c->n_parts ? c->n_parts : 1];
    size_t n = targets(c, r, found);
    if (n == 0) return CS_ERR_STATE;
    /* The offsets first (a timestamp lookup can fail), then the seeks. */
    int64_t to[n];
    for (size_t i = 0; i < n; i++) {
        to[i] = r->value;
        if (r->kind != CS_CTL_SEEK_TIME) continue;
        char why[256];
        to[i] = offset_for_time(c, found[i]->part, r->value, why, sizeof why);
        if (to[i] < 0) {
            snprintf(r->message, sizeof r->message, "%s: %s/%d: %s", c->who, cs__part_topic(found[i]->part),
                     (int)cs__part_number(found[i]->part), why);
            return CS_ERR_KAFKA;
        }
    }
    /* Transactional: what was settled before the seek commits first, with
     * its outputs, rather than being discarded with the old epoch's window. */
    if (c->transactional) cs__commit_positions(c, NULL, false);
    for (size_t i = 0; i < n; i++) {
        cs_err err = seek_one(c, r, found[i], to[i]);
        if (err) return err;
    }
    return CS_OK;
}

/* ---- pauses ---------------------------------------------------------------------- */

static bool listed(const cs_consumer *c, const char *topic, int32_t partition, size_t *at) {
    for (size_t i = 0; i < c->n_paused; i++) {
        if (c->paused[i].partition == partition && !strcmp(c->paused[i].topic, topic)) {
            if (at) *at = i;
            return true;
        }
    }
    return false;
}

static cs_err list_add(cs_consumer *c, cs_ctl_req *r, const cs_part *part) {
    if (listed(c, cs__part_topic(part), cs__part_number(part), NULL)) return CS_OK;
    if (c->n_paused == c->cap_paused) {
        size_t cap = c->cap_paused ? c->cap_paused * 2 : 8;
        cs_paused_part *grown = realloc(c->paused, cap * sizeof *grown);
        if (!grown) goto nomem;
        c->paused = grown;
        c->cap_paused = cap;
    }
    char *topic = strdup(cs__part_topic(part));
    if (!topic) goto nomem;
    c->paused[c->n_paused++] = (cs_paused_part){topic, cs__part_number(part)};
    return CS_OK;
nomem:
    snprintf(r->message, sizeof r->message, "%s: out of memory to pause %s/%d", c->who, cs__part_topic(part),
             (int)cs__part_number(part));
    return CS_ERR_NOMEM;
}

static void list_remove(cs_consumer *c, const char *topic, int32_t partition) {
    size_t at;
    if (!listed(c, topic, partition, &at)) return;
    free(c->paused[at].topic);
    c->paused[at] = c->paused[--c->n_paused];
}

static cs_err apply_pause(cs_consumer *c, cs_ctl_req *r, bool pause) {
    if (!r->topic) { /* the whole subscription; a resume also ends every partition's pause */
        c->paused_all = pause;
        if (!pause)
            while (c->n_paused) list_remove(c, c->paused[0].topic, c->paused[0].partition);
        CS_LOG_INFO("%s subscription=%s", pause ? "paused" : "resumed", c->sub->name);
        return CS_OK;
    }
    /* A resume of a partition paused here that is not assigned now (it may
     * come back) only forgets its pause. */
    if (!pause && r->partition >= 0 && listed(c, r->topic, r->partition, NULL)) {
        list_remove(c, r->topic, r->partition);
        CS_LOG_INFO("resumed subscription=%s topic=%s partition=%d", c->sub->name, r->topic, (int)r->partition);
        return CS_OK;
    }
    fetch_part *found[c->n_parts ? c->n_parts : 1];
    size_t n = targets(c, r, found);
    if (n == 0) return CS_ERR_STATE;
    for (size_t i = 0; i < n; i++) {
        const cs_part *part = found[i]->part;
        if (pause) {
            cs_err err = list_add(c, r, part);
            if (err) return err;
        } else {
            list_remove(c, cs__part_topic(part), cs__part_number(part));
        }
        CS_LOG_INFO("%s subscription=%s topic=%s partition=%d", pause ? "paused" : "resumed", c->sub->name,
                    cs__part_topic(part), (int)cs__part_number(part));
    }
    return CS_OK;
}

/* The pauses onto the assigned partitions. A partition resumed after it shed
 * records is moved back to the first one it dropped. */
static void refresh_pauses(cs_consumer *c) {
    uint64_t paused = 0;
    for (size_t i = 0; i < c->n_parts; i++) {
        fetch_part *fp = &c->parts[i];
        fp->app_paused = c->n_paused > 0 && listed(c, cs__part_topic(fp->part), cs__part_number(fp->part), NULL);
        if (cs__fetch_app_paused(c, fp)) {
            paused++;
        } else if (fp->shed) {
            fp->shed = false;
            if (fp->next >= 0) cs__fetch_seek_next(c, fp);
            CS_LOG_INFO("paused partition's dropped records fetched again subscription=%s topic=%s partition=%d "
                        "offset=%lld",
                        c->sub->name, cs__part_topic(fp->part), (int)cs__part_number(fp->part), (long long)fp->next);
        }
    }
    atomic_store_explicit(&c->paused_now, paused, memory_order_relaxed);
}

void cs__control_apply(cs_consumer *c) {
    cs_ctl_req *all = atomic_load(&c->ctl_pending) ? take_all(c) : NULL;
    for (cs_ctl_req *r = all; r; r = r->next) {
        r->message[0] = '\0';
        r->result = r->kind == CS_CTL_SEEK || r->kind == CS_CTL_SEEK_TIME ? apply_seek(c, r)
                                                                          : apply_pause(c, r, r->kind == CS_CTL_PAUSE);
    }
    refresh_pauses(c);
    /* Done once the pauses apply and the gauge shows them. */
    for (cs_ctl_req *r = all, *next; r; r = next) {
        next = r->next;
        finish(r, r->result);
    }
}

/* ---- the public calls (any thread) --------------------------------------------- */

/* Hands one request to s's running consumer and waits for its result. The
 * stats lock keeps the consumer alive while the request is posted; the wait
 * touches only the request, so it holds no lock. */
static cs_err control(cs_sub *s, const char *call, cs_ctl_kind kind, const char *topic, int32_t partition,
                      int64_t value) {
    if (!s) return cs__fail(CS_ERR_ARG, "%s: subscription is NULL", call);
    if (kind != CS_CTL_PAUSE && kind != CS_CTL_RESUME && !topic)
        return cs__fail(CS_ERR_ARG, "%s(%s): topic is NULL", call, s->name);
    if (topic && !*topic) return cs__fail(CS_ERR_ARG, "%s(%s): topic is empty", call, s->name);
    if (partition < -1)
        return cs__fail(CS_ERR_ARG, "%s(%s): partition %d of %s is out of range (-1: all assigned)", call, s->name,
                        (int)partition, topic ? topic : "?");
    if (kind == CS_CTL_SEEK && value < 0)
        return cs__fail(CS_ERR_ARG, "%s(%s): offset %lld for %s/%d is negative", call, s->name, (long long)value, topic,
                        (int)partition);
    if (kind == CS_CTL_SEEK_TIME && value < 0)
        return cs__fail(CS_ERR_ARG, "%s(%s): timestamp %lld for %s/%d is negative", call, s->name, (long long)value,
                        topic, (int)partition);
    cs_ctl_req r = {.kind = kind, .topic = topic, .partition = partition, .value = value};
    pthread_mutex_lock(&s->stats_lock);
    cs_consumer *c = s->consumer;
    /* From the fetch thread itself (an assign or revoke hook runs on it) the
     * wait would never end. */
    bool own = c && fetch_thread_of == c;
    if (c && !own) cs__control_post(c, &r);
    pthread_mutex_unlock(&s->stats_lock);
    if (!c) return cs__fail(CS_ERR_STATE, "%s(%s): the subscription is not running", call, s->name);
    if (own)
        return cs__fail(CS_ERR_STATE, "%s(%s): not from an assign or revoke hook (they run on the fetch thread)", call,
                        s->name);
    cs_err err = cs__control_wait(&r);
    if (err) return cs__fail(err, "%s: %s", call, r.message);
    return CS_OK;
}

cs_err cs_sub_seek(cs_sub *s, const char *topic, int32_t partition, int64_t offset) {
    return control(s, "cs_sub_seek", CS_CTL_SEEK, topic, partition, offset);
}

cs_err cs_sub_seek_time(cs_sub *s, const char *topic, int32_t partition, int64_t timestamp_ms) {
    return control(s, "cs_sub_seek_time", CS_CTL_SEEK_TIME, topic, partition, timestamp_ms);
}

cs_err cs_sub_pause(cs_sub *s) { return control(s, "cs_sub_pause", CS_CTL_PAUSE, NULL, -1, 0); }

cs_err cs_sub_resume(cs_sub *s) { return control(s, "cs_sub_resume", CS_CTL_RESUME, NULL, -1, 0); }

cs_err cs_sub_pause_partition(cs_sub *s, const char *topic, int32_t partition) {
    if (!topic) return cs__fail(CS_ERR_ARG, "cs_sub_pause_partition: topic is NULL");
    return control(s, "cs_sub_pause_partition", CS_CTL_PAUSE, topic, partition, 0);
}

cs_err cs_sub_resume_partition(cs_sub *s, const char *topic, int32_t partition) {
    if (!topic) return cs__fail(CS_ERR_ARG, "cs_sub_resume_partition: topic is NULL");
    return control(s, "cs_sub_resume_partition", CS_CTL_RESUME, topic, partition, 0);
}
