/* fetch_control.c — the application's seeks and pauses of a running
 * subscription (cs_sub_seek, cs_sub_seek_time, cs_sub_pause*,
 * cs_sub_resume*): the public calls, which hand a request to the fetch
 * thread through fetch_requests.c and wait, and their application on the
 * fetch thread, which owns the consumer.
 *
 * A seek is the Transactional rewind's mechanism with another target: a new
 * epoch for the partition (cs__part_seek: what was handed out before settles
 * as stale), its backlog dropped and librdkafka's fetch moved
 * (cs__fetch_reposition). Every target is checked before the first moves.
 * A pause stops serving the partition: its records stay in the buffer up to
 * its share; past it the partition sheds (take_cb drops what it takes, and
 * librdkafka may go on fetching what is dropped), and its resume seeks
 * librdkafka back to the first record dropped, checked before anything of it
 * is taken again. It is never paused in librdkafka: 2.0.2's pause drops its
 * pre-fetched records and its resume waits up to 1 s.
 *
 * Owns: c->control. Locks: none of its own (the requests' through
 * fetch_requests.c). Threads: the public calls on any thread but a fetch
 * thread (they wait for the fetch thread); everything else on the fetch
 * thread. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/broker.h"
#include "base/clock.h"
#include "base/error.h"
#include "kafka/consumer/consumer_internal.h"

/* How long the fetch thread waits for one timestamp lookup (two at most per
 * seek: by time, then the end; it is not serving meanwhile, so short). */
#define LOOKUP_TIMEOUT_MS 5000

void cs__control_destroy(cs_consumer *c) {
    for (size_t i = 0; i < c->control.n_paused; i++) free(c->control.paused[i].topic);
    free(c->control.paused);
    cs__control_queue_destroy(c);
}

/* ---- which partitions ---------------------------------------------------------- */

/* The assigned partitions a request names, into `out` (at most c->fetch.n_parts);
 * 0 with r->message set if none. */
static size_t targets(cs_consumer *c, cs_ctl_req *r, fetch_part **out) {
    size_t n = 0;
    for (size_t i = 0; i < c->fetch.n_parts; i++) {
        fetch_part *fp = &c->fetch.parts[i];
        if (strcmp(cs__part_topic(fp->part), r->topic)) continue;
        if (r->partition >= 0 && cs__part_number(fp->part) != r->partition) continue;
        out[n++] = fp;
    }
    if (n > 0) return n;
    if (cs__subscribed_topic_in(c, r->topic) < 0)
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

/* The offsets of the first records at or after r->value (ms) in the n
 * partitions, into `to`: one lookup for them all, and one more for the end of
 * the logs that have no such record (a ListOffsets for "latest"), so that a
 * slow cluster holds the fetch thread for two lookups at most, however many
 * partitions. CS_ERR_KAFKA with r->message naming the partition if the
 * cluster did not answer. */
static cs_err offsets_for_time(cs_consumer *c, cs_ctl_req *r, fetch_part **found, size_t n, int64_t *to) {
    cs_err result = CS_OK;
    for (int pass = 0; pass < 2 && result == CS_OK; pass++) {
        /* pass 0: by time; pass 1: the end, for those with no record at or after it */
        rd_kafka_topic_partition_list_t *ask = rd_kafka_topic_partition_list_new((int)n);
        for (size_t i = 0; i < n; i++)
            if (pass == 0 || to[i] < 0)
                rd_kafka_topic_partition_list_add(ask, found[i]->topic, found[i]->partition)->offset =
                    pass == 0 ? r->value : RD_KAFKA_OFFSET_END;
        rd_kafka_resp_err_t all = ask->cnt ? rd_kafka_offsets_for_times(c->rk, ask, LOOKUP_TIMEOUT_MS) : 0;
        for (size_t i = 0; i < n && result == CS_OK; i++) {
            if (pass == 1 && to[i] >= 0) continue;
            const rd_kafka_topic_partition_t *e =
                rd_kafka_topic_partition_list_find(ask, found[i]->topic, found[i]->partition);
            rd_kafka_resp_err_t err = all ? all : e ? e->err : RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION;
            if (!err && pass == 1 && e->offset < 0)
                err = RD_KAFKA_RESP_ERR__NO_OFFSET; /* no end offset: not answered */
            if (err) {
                snprintf(r->message, sizeof r->message,
                         "%s: %s/%d: offset for timestamp %lld not found (nothing moved): %s", c->who, found[i]->topic,
                         (int)found[i]->partition, (long long)r->value, rd_kafka_err2str(err));
                result = CS_ERR_KAFKA;
            } else {
                to[i] = e->offset; /* pass 0: -1 when no record is at or after the time */
            }
        }
        rd_kafka_topic_partition_list_destroy(ask);
    }
    return result;
}

/* One partition to `offset`: librdkafka's fetch first, then the new epoch,
 * with no take in between (both on this thread), so that a seek librdkafka
 * refuses changes nothing: the records handed out before stay current. The
 * caller checked that the partition can take a seek (cs__part_can_seek); a
 * worker can still end that in between (a retry while the app stops), and
 * then the records read from `offset` must not join the old epoch. */
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
        cs__fetch_withhold(fp); /* read by its next owner from the committed position */
        snprintf(r->message, sizeof r->message, "%s: partition %s/%d is being revoked", c->who, cs__part_topic(part),
                 (int)cs__part_number(part));
        CS_LOG_WARN("seek: partition revoked while it moved, its records are not handed out any more "
                    "subscription=%s topic=%s partition=%d offset=%lld",
                    c->sub->name, cs__part_topic(part), (int)cs__part_number(part), (long long)offset);
        return CS_ERR_STATE;
    }
    /* A shed partition stays shed: its resume seeks to `next`, now `offset`,
     * where nothing was taken yet. */
    atomic_fetch_add_explicit(&c->control.seeks, 1, memory_order_relaxed);
    CS_LOG_INFO("seek subscription=%s topic=%s partition=%d from=%lld to=%lld%s", c->sub->name, cs__part_topic(part),
                (int)cs__part_number(part), (long long)from, (long long)offset,
                r->kind == CS_CTL_SEEK_TIME ? " by=timestamp" : "");
    return CS_OK;
}

/* Every target is checked (assigned here, offsets found) before the first
 * one moves; only librdkafka refusing one seek after others moved leaves a
 * partial seek, and the message then lists the partitions that moved. */
static cs_err apply_seek(cs_consumer *c, cs_ctl_req *r) {
    fetch_part *found[c->fetch.n_parts ? c->fetch.n_parts : 1];
    size_t n = targets(c, r, found);
    if (n == 0) return CS_ERR_STATE;
    int64_t to[n];
    for (size_t i = 0; i < n; i++) to[i] = r->value;
    if (r->kind == CS_CTL_SEEK_TIME) {
        cs_err err = offsets_for_time(c, r, found, n, to);
        if (err) return err;
    }
    for (size_t i = 0; i < n; i++) {
        if (cs__part_can_seek(found[i]->part)) continue;
        snprintf(r->message, sizeof r->message, "%s: partition %s/%d is being revoked (nothing moved)", c->who,
                 found[i]->topic, (int)found[i]->partition);
        return CS_ERR_STATE;
    }
    /* Transactional: what was settled before the seek commits first, with
     * its outputs, rather than being discarded with the old epoch's window.
     * Database: the same with its writes, and no run writes until the
     * partitions moved (a write of the old epoch would commit without its
     * position). */
    bool db_held = false;
    if (c->transactional) cs__commit_positions(c, NULL, false);
    else if (c->sub->db) db_held = cs__commit_db_hold(c);
    cs_err err = CS_OK;
    for (size_t i = 0; i < n && !err; i++) {
        err = seek_one(c, r, found[i], to[i]);
        if (err && i > 0) { /* say which moved: the caller cannot tell otherwise */
            size_t len = strlen(r->message);
            len += (size_t)snprintf(r->message + len, sizeof r->message - len, "; moved before it:");
            for (size_t j = 0; j < i && len < sizeof r->message; j++)
                len += (size_t)snprintf(r->message + len, sizeof r->message - len, " %s/%d", found[j]->topic,
                                        (int)found[j]->partition);
        }
    }
    if (db_held) cs__commit_db_unhold(c);
    return err;
}

/* ---- a fetch position librdkafka moved back ---------------------------------------
 * take_cb saw a record further back than the position taken (fp->back_to):
 * a seek on the raw handle, an offset reset after a truncated log, KIP-320
 * truncation handling. Starting the partition over at back_to would commit
 * past every record handed out below it and not yet settled: they would
 * settle as stale and never be read again. So the partition moves, as an
 * application's seek does (a new epoch, attempt counts kept), to the lowest
 * of back_to, the first record not settled (cs__part_reread_from) and the
 * first still waiting in its backlog: what was settled above it comes again
 * (duplicates), nothing is skipped. A log reported gone and created again
 * takes the other path (cs__errors_log_restart). A move librdkafka refuses
 * is tried again; the partition takes nothing meanwhile. */
static void move_back(cs_consumer *c, fetch_part *fp, int64_t now) {
    cs_part *part = fp->part;
    int64_t to = fp->back_to;
    if (c->sub->db) {
        /* Database: records settled above the first open one have their
         * writes in the window, and reading them again would write them
         * twice. The window rolls back instead, and every partition is read
         * again from its row (this one included, with its acked set). */
        cs__fetch_back_settled(fp);
        cs__commit_db_roll_back(c, "a partition's fetch position moved back");
        return;
    }
    if (!cs__part_reread_from(part, &to)) { /* being revoked: its next owner reads from the committed position */
        cs__fetch_withhold(fp);
        cs__fetch_back_settled(fp);
        return;
    }
    int64_t first_open = to;
    int64_t first_waiting = cs__backlog_first_offset(&fp->backlog);
    if (first_waiting >= 0 && first_waiting < to) to = first_waiting;
    char why[256];
    rd_kafka_resp_err_t err = cs__fetch_reposition(c, part, to, why, sizeof why);
    if (err) {
        cs__fetch_back_retry_at(fp, now + CS_REFETCH_RETRY_MS);
        CS_LOG_WARN("partition's fetch position moved back, and the move to its first record not settled was "
                    "refused, retrying subscription=%s topic=%s partition=%d offset=%lld error=\"%s\"",
                    c->sub->name, fp->topic, (int)fp->partition, (long long)to, why);
        return;
    }
    int64_t next = -1;
    cs__fetch_back_settled(fp);
    if (!cs__part_seek(c->pipe, part, to, &next)) {
        cs__fetch_withhold(fp); /* revoked meanwhile, as in seek_one */
        return;
    }
    atomic_fetch_add_explicit(&c->control.moves_back, 1, memory_order_relaxed);
    CS_LOG_WARN("partition read again from its first record not settled, so that none handed out is skipped "
                "subscription=%s topic=%s partition=%d offset=%lld first_not_settled=%lld old_next=%lld",
                c->sub->name, fp->topic, (int)fp->partition, (long long)to, (long long)first_open, (long long)next);
}

/* Fetch thread: the partitions whose fetch position moved back are moved to
 * where nothing is skipped. */
static void moves_back(cs_consumer *c) {
    if (!cs__fetch_back_take_pending(c)) return;
    int64_t now = cs__now_ms();
    for (size_t i = 0; i < c->fetch.n_parts; i++) {
        fetch_part *fp = &c->fetch.parts[i];
        if (fp->back_to < 0) continue;
        if (now >= fp->back_retry_ms) move_back(c, fp, now);
        if (fp->back_to >= 0) cs__fetch_back_keep_pending(c);
    }
}

/* ---- pauses ---------------------------------------------------------------------- */

static bool listed(const cs_consumer *c, const char *topic, int32_t partition, size_t *at) {
    for (size_t i = 0; i < c->control.n_paused; i++) {
        if (c->control.paused[i].partition == partition && !strcmp(c->control.paused[i].topic, topic)) {
            if (at) *at = i;
            return true;
        }
    }
    return false;
}

static cs_err list_add(cs_consumer *c, cs_ctl_req *r, const cs_part *part) {
    if (listed(c, cs__part_topic(part), cs__part_number(part), NULL)) return CS_OK;
    if (c->control.n_paused == c->control.cap_paused) {
        size_t cap = c->control.cap_paused ? c->control.cap_paused * 2 : 8;
        cs_paused_part *grown = realloc(c->control.paused, cap * sizeof *grown);
        if (!grown) goto nomem;
        c->control.paused = grown;
        c->control.cap_paused = cap;
    }
    char *topic = strdup(cs__part_topic(part));
    if (!topic) goto nomem;
    c->control.paused[c->control.n_paused++] = (cs_paused_part){topic, cs__part_number(part)};
    return CS_OK;
nomem:
    snprintf(r->message, sizeof r->message, "%s: out of memory to pause %s/%d", c->who, cs__part_topic(part),
             (int)cs__part_number(part));
    return CS_ERR_NOMEM;
}

static void list_remove(cs_consumer *c, const char *topic, int32_t partition) {
    size_t at;
    if (!listed(c, topic, partition, &at)) return;
    free(c->control.paused[at].topic);
    c->control.paused[at] = c->control.paused[--c->control.n_paused];
}

/* Every pause listed for `topic` forgotten; how many were. */
static size_t list_remove_topic(cs_consumer *c, const char *topic) {
    size_t removed = 0;
    for (size_t i = 0; i < c->control.n_paused;) {
        if (strcmp(c->control.paused[i].topic, topic)) {
            i++;
            continue;
        }
        free(c->control.paused[i].topic);
        c->control.paused[i] = c->control.paused[--c->control.n_paused];
        removed++;
    }
    return removed;
}

static cs_err apply_pause(cs_consumer *c, cs_ctl_req *r, bool pause) {
    c->control.pauses_dirty = true;
    if (!r->topic) { /* the whole subscription; a resume also ends every partition's pause */
        c->control.paused_all = pause;
        if (!pause)
            while (c->control.n_paused) list_remove(c, c->control.paused[0].topic, c->control.paused[0].partition);
        CS_LOG_INFO("%s subscription=%s", pause ? "paused" : "resumed", c->sub->name);
        return CS_OK;
    }
    /* A resume forgets the pauses listed here, also of partitions not
     * assigned now (they may come back): a partition, or every one of the
     * topic. */
    if (!pause && r->partition >= 0 && listed(c, r->topic, r->partition, NULL)) {
        list_remove(c, r->topic, r->partition);
        CS_LOG_INFO("resumed subscription=%s topic=%s partition=%d", c->sub->name, r->topic, (int)r->partition);
        return CS_OK;
    }
    if (!pause && r->partition < 0) {
        size_t removed = list_remove_topic(c, r->topic);
        if (removed > 0) {
            CS_LOG_INFO("resumed subscription=%s topic=%s partitions=%zu", c->sub->name, r->topic, removed);
            return CS_OK;
        }
    }
    fetch_part *found[c->fetch.n_parts ? c->fetch.n_parts : 1];
    size_t n = targets(c, r, found);
    if (n == 0) return CS_ERR_STATE;
    if (!pause) return CS_OK; /* assigned, not paused: nothing to end */
    for (size_t i = 0; i < n; i++) {
        const cs_part *part = found[i]->part;
        cs_err err = list_add(c, r, part);
        if (err) return err;
        CS_LOG_INFO("paused subscription=%s topic=%s partition=%d", c->sub->name, cs__part_topic(part),
                    (int)cs__part_number(part));
    }
    return CS_OK;
}

/* A partition resumed after it shed records: librdkafka reads again from the
 * first one dropped (`next`), confirmed before anything of it is taken. If
 * the seek fails, it stays shed (take_cb drops its records meanwhile), and
 * the seek is tried again. */
static void refetch(cs_consumer *c, fetch_part *fp, int64_t now) {
    if (now < fp->refetch_at_ms) return;
    char why[256];
    rd_kafka_resp_err_t err = cs__fetch_refetch(c, fp, why, sizeof why);
    if (err) {
        cs__fetch_refetch_later(fp, now + CS_REFETCH_RETRY_MS);
        CS_LOG_WARN("resumed partition's dropped records not fetched again yet, retrying subscription=%s topic=%s "
                    "partition=%d offset=%lld error=\"%s\"",
                    c->sub->name, fp->topic, (int)fp->partition, (long long)fp->next, why);
        return;
    }
    cs__fetch_set_shed(fp, false);
    CS_LOG_INFO("paused partition's dropped records fetched again subscription=%s topic=%s partition=%d offset=%lld",
                c->sub->name, fp->topic, (int)fp->partition, (long long)fp->next);
}

/* The pauses onto the assigned partitions: app_paused follows the list when
 * it or the assignment changed (no lookup per turn otherwise). A resumed one
 * that shed records is moved back to the first record it dropped. An app
 * pause never pauses the partition in librdkafka (in 2.0.2 that drops its
 * pre-fetched records and a resume waits up to 1 s): while it is paused,
 * librdkafka may still fetch past its share of the buffer, records that
 * take_cb drops and the resume reads again, at most once per pause. */
static void refresh_pauses(cs_consumer *c) {
    bool dirty = c->control.pauses_dirty || c->control.pauses_opened != c->fetch.opened;
    c->control.pauses_dirty = false;
    c->control.pauses_opened = c->fetch.opened;
    uint64_t paused = 0;
    int64_t now = -1;
    for (size_t i = 0; i < c->fetch.n_parts; i++) {
        fetch_part *fp = &c->fetch.parts[i];
        if (dirty) fp->app_paused = c->control.n_paused > 0 && listed(c, fp->topic, fp->partition, NULL);
        if (cs__fetch_app_paused(c, fp)) {
            paused++;
        } else if (fp->shed) {
            if (now < 0) now = cs__now_ms();
            refetch(c, fp, now);
        }
    }
    atomic_store_explicit(&c->control.paused_now, paused, memory_order_relaxed);
}

void cs__control_apply(cs_consumer *c) {
    moves_back(c);
    cs_ctl_req *all = atomic_load(&c->requests.pending) ? cs__control_take_all(c) : NULL;
    for (cs_ctl_req *r = all; r; r = r->next) {
        r->message[0] = '\0';
        r->result = r->kind == CS_CTL_SEEK || r->kind == CS_CTL_SEEK_TIME ? apply_seek(c, r)
                                                                          : apply_pause(c, r, r->kind == CS_CTL_PAUSE);
    }
    refresh_pauses(c);
    /* Done once the pauses apply and the gauge shows them. */
    for (cs_ctl_req *r = all, *next; r; r = next) {
        next = r->next;
        cs__control_finish(r, r->result);
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
    /* From a fetch thread (an assign or revoke hook runs on one) the wait
     * would never end on its own subscription, and could close a cycle with
     * another's (A's hook seeks B while B's hook seeks A). */
    if (cs__control_on_a_fetch_thread())
        return cs__fail(CS_ERR_STATE, "%s(%s): not from an assign or revoke hook (they run on a fetch thread)", call,
                        s->name);
    cs_ctl_req r = {.kind = kind, .topic = topic, .partition = partition, .value = value};
    pthread_mutex_lock(&s->stats_lock);
    cs_consumer *c = s->consumer;
    /* CSTREAM_TXN_BARRIER: a window's close waits for every handler to
     * leave, and a handler waiting here would keep the fetch thread from
     * ever serving it. */
    bool barrier = c && c->window_barrier;
    if (c && !barrier) cs__control_post(c, &r);
    pthread_mutex_unlock(&s->stats_lock);
    if (!c) return cs__fail(CS_ERR_STATE, "%s(%s): the subscription is not running", call, s->name);
    if (barrier)
        return cs__fail(CS_ERR_STATE, "%s(%s): not while CSTREAM_TXN_BARRIER=1 holds handlers at the window gate", call,
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
