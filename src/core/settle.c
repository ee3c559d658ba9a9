/* settle.c — settlement: what an outcome does to a record's partition (the
 * tracker, the held count, a retry back to its lane or the delay heap, a
 * Transactional window), the reply that gates an ack, and the dead letter of
 * a record given up (the public cs_delivery_settle, in delivery.c, leads here).
 *
 * Threads: workers after a handler, any thread for a pending delivery, the
 * producer's delivery reports (cs__delivery_reply_done,
 * cs__delivery_dead_letter_done). Owns: the lanes' settlement counters;
 * the partition's state it changes through partition.c's *_locked
 * transitions. Locks: the partition lock around a settlement (so that a
 * retry goes back to its lane, or the delay heap, under it: the lane or
 * delay lock is taken under it, lock_order.h). A reply or dead letter is
 * published with no lock held. */
#define _POSIX_C_SOURCE 200809L
#include "core/partition_internal.h"
#include "core/pipeline_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/log.h"

static void warn_retry_unsupported(cs_pipeline *p, const cs_delivery *d) {
    uint64_t skipped = 0;
    if (cs__ratelimit_allow(&p->retry_warning, 5000, &skipped))
        CS_LOG_WARN("retry is unsupported under commit mode auto: record not redelivered topic=%s "
                    "partition=%d offset=%lld similar_since_last=%llu" CS_TRACE_FMT,
                    d->topic, (int)d->partition, (long long)d->offset, (unsigned long long)skipped, CS_TRACE_ARGS(d));
}

/* Called with part->lock held (Transactional): d's outputs join its
 * partition's window, where they wait for a transaction that commits past d.
 * Transactional and Database: a full window wakes the fetch thread. */
static void window_add(cs_pipeline *p, cs_part *part, cs_delivery *d) {
    if (p->cfg.transactional) cs__part_window_add_locked(part, d);
    size_t n = atomic_fetch_add_explicit(&p->settled, 1, memory_order_relaxed) + 1;
    if (p->cfg.window_records && n == p->cfg.window_records && p->cfg.wake) p->cfg.wake(p->cfg.wake_arg);
}

cs_err cs__settle(cs_delivery *d, cs_outcome outcome) {
    cs_part *part = d->part;
    pthread_mutex_lock(&part->lock);
    cs_pipeline *p = part->pipe;
    /* A Transactional rewind keeps older epochs' deliveries on the list, so
     * that revoke and stop still wait for them and release their payloads. */
    if (d->listed) cs__part_inflight_remove_locked(part, d);
    bool current = d->epoch == part->epoch;
    if (d->store_await) { /* Database: the window waits for this record, whose writes it holds */
        d->store_await->await_done(d->store_await->arg, d->store_gen,
                                   current && p && !atomic_load(&p->crashed) && outcome != CS_RETRY);
        d->store_await = NULL;
    }
    if (!current || !p || atomic_load(&p->crashed)) {
        if (p) atomic_fetch_add_explicit(&p->lanes[d->lane].stale, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&part->n_stale, 1, memory_order_relaxed);
        pthread_mutex_unlock(&part->lock);
        CS_LOG_DEBUG("stale settlement ignored topic=%s partition=%d offset=%lld" CS_TRACE_FMT, d->topic,
                     (int)d->partition, (long long)d->offset, CS_TRACE_ARGS(d));
        cs__fail(CS_ERR_STALE,
                 "settlement of %s/%d@%lld ignored: the partition was revoked or the "
                 "subscription closed since it was delivered",
                 d->topic, (int)d->partition, (long long)d->offset);
        cs__delivery_free(d);
        return CS_ERR_STALE;
    }
    lane *l = &p->lanes[d->lane];
    bool keep = false, warn = false;
    switch (outcome) {
    case CS_ACK:
    case CS_DROP:
        atomic_fetch_add_explicit(outcome == CS_ACK ? &l->acked : &l->dropped, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(outcome == CS_ACK ? &part->n_acked : &part->n_dropped, 1, memory_order_relaxed);
        cs__part_settled_locked(part, d);
        if (p->cfg.transactional || p->cfg.store) window_add(p, part, d);
        cs__part_release_held_locked(part, false);
        break;
    default: /* run_one and run_batch normalise handlers' outcomes first: only a bug inside cstream lands here */
        CS_LOG_ERR("handler returned an invalid outcome, treated as retry topic=%s partition=%d offset=%lld "
                   "outcome=%d" CS_TRACE_FMT,
                   d->topic, (int)d->partition, (long long)d->offset, (int)outcome, CS_TRACE_ARGS(d));
        /* fall through */
    case CS_RETRY:
        if (!part->tracker) {
            atomic_fetch_add_explicit(&l->retry_unsupported, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&part->n_retry_unsupported, 1, memory_order_relaxed);
            warn = true;
            cs__part_release_held_locked(part, false);
        } else if (part->assigned && !atomic_load(&p->stopping)) {
            atomic_fetch_add_explicit(&l->retried, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&part->n_retried, 1, memory_order_relaxed);
            if (p->cfg.transactional) cs__part_window_hold_locked(part, d);
            d->alone = true; /* in batch mode it comes back on its own */
            keep = true;     /* it stays open and held */
            bool queued = false;
            if (d->retry_at_ms > cs__now_ms()) {
                pthread_mutex_lock(&p->delay_lock);
                queued = !p->delay_stop && cs__delay_push(p, d);
                pthread_mutex_unlock(&p->delay_lock);
            }
            if (!queued && !cs__lane_push_head(l, d)) {
                /* The lane stopped meanwhile: going away after all. */
                keep = false;
                cs__part_release_held_locked(part, true);
            }
        } else {
            /* Going away: the record stays open, so it is read again by the
             * next owner of the partition. Nothing behind it in the partition
             * may run before it, so the partition hands out nothing more. */
            atomic_fetch_add_explicit(&l->retried, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&part->n_retried, 1, memory_order_relaxed);
            cs__part_release_held_locked(part, true);
        }
        break;
    }
    if (part->held == 0) cs__signal_drained(part);
    if (warn) warn_retry_unsupported(p, d);
    /* Under the partition lock: the pipeline (and the consumer the wake
     * reaches) outlive it only while part->pipe is set. The wake never blocks. */
    if (part->paused && cs__part_load(part) <= cs__resume_mark(p) && p->cfg.wake && !atomic_load(&p->stopping))
        p->cfg.wake(p->cfg.wake_arg);
    pthread_mutex_unlock(&part->lock);
    if (!keep) cs__delivery_free(d);
    return CS_OK;
}

/* A dead-letter publish that failed is tried again after this long (the
 * record stays open meanwhile), so a topic that refuses it does not spin. */
#define DEAD_LETTER_BACKOFF_MS 1000

outlet cs__outlet_of(cs_delivery *d) {
    outlet o = {0};
    cs_part *part = d->part;
    pthread_mutex_lock(&part->lock);
    cs_pipeline *p = part->pipe;
    o.current = p && d->epoch == part->epoch && !atomic_load(&p->crashed);
    if (o.current) {
        o.tracked = p->cfg.tracked;
        o.max_attempts = p->cfg.max_attempts;
        o.send_reply = p->cfg.send_reply;
        o.reply_arg = p->cfg.reply_arg;
        o.send_dead_letter = p->cfg.send_dead_letter;
        o.dead_letter_arg = p->cfg.dead_letter_arg;
        o.transactional = p->cfg.transactional;
        o.reply_topic = p->cfg.reply_topic;
        o.make_dead_letter = p->cfg.make_dead_letter;
        o.make_dead_letter_arg = p->cfg.make_dead_letter_arg;
    }
    pthread_mutex_unlock(&part->lock);
    return o;
}

/* Adds to one of d's lane counters if its pipeline still runs. */
static void count(cs_delivery *d, size_t counter_offset) {
    cs_part *part = d->part;
    pthread_mutex_lock(&part->lock);
    if (part->pipe)
        atomic_fetch_add_explicit((_Atomic uint64_t *)((char *)&part->pipe->lanes[d->lane] + counter_offset), 1,
                                  memory_order_relaxed);
    if (part->pipe && counter_offset == offsetof(lane, dead_lettered))
        atomic_fetch_add_explicit(&part->n_dead_lettered, 1, memory_order_relaxed);
    pthread_mutex_unlock(&part->lock);
}

static bool attempts_exhausted(const outlet *o, const cs_delivery *d) {
    return o->current && o->tracked && o->max_attempts > 0 && cs__counted_attempts(d) >= o->max_attempts;
}

/* A retry of a run in which an encode of d answered CS_ERR_UNAVAILABLE (its
 * schema registry is down): the record is not at fault, so the run is free,
 * as a decode that waits for the registry takes no attempt. The tracker's
 * count (committed as metadata, read by a next owner) goes back with it.
 * Unless the handler chose its own delay (cs_delivery_retry_after), the
 * worker backs off in place before the next run (worker.c, outage_wait). */
static void free_outage_run(cs_delivery *d) {
    d->free_runs++;
    d->outage_runs++;
    d->outage_wait = d->retry_at_ms <= cs__now_ms();
    cs__part_recount_attempts(d->part, d);
}

/* The record has had its last attempt (or does not decode): to the dead-letter
 * topic, whose report settles it, else dropped with a warning. */
cs_err cs__give_up(cs_delivery *d, const outlet *o, const char *why) {
    if (!o->current) return cs__settle(d, CS_RETRY); /* revoked or closing meanwhile: stale, read again */
    if (o->make_dead_letter) {                       /* Transactional: the dead letter is an output of the window */
        cs_output *dl = o->make_dead_letter(o->make_dead_letter_arg, d, why);
        if (!dl) {
            d->retry_at_ms = cs__now_ms() + DEAD_LETTER_BACKOFF_MS;
            return cs__settle(d, CS_RETRY);
        }
        cs__output_list_free(&d->outputs); /* what the failed attempt produced does not leave */
        dl->source_attempt = (uint32_t)cs__counted_attempts(d);
        cs__delivery_add_output(d, dl);
        count(d, offsetof(lane, dead_lettered));
        return cs__settle(d, CS_DROP);
    }
    if (o->send_dead_letter) {
        if (o->send_dead_letter(o->dead_letter_arg, d, why) == 0) return CS_OK; /* the report settles it */
        d->retry_at_ms = cs__now_ms() + DEAD_LETTER_BACKOFF_MS; /* not even queued: open, tried again later */
        return cs__settle(d, CS_RETRY);
    }
    count(d, offsetof(lane, exhausted));
    CS_LOG_WARN("record dropped after its last attempt (no dead-letter topic) topic=%s partition=%d offset=%lld "
                "attempts=%d reason=\"%s\"" CS_TRACE_FMT,
                d->topic, (int)d->partition, (long long)d->offset, d->attempt, why ? why : "", CS_TRACE_ARGS(d));
    return cs__settle(d, CS_DROP);
}

void cs__delivery_dead_letter_done(cs_delivery *d, bool ok) {
    if (ok) count(d, offsetof(lane, dead_lettered));
    else d->retry_at_ms = cs__now_ms() + DEAD_LETTER_BACKOFF_MS; /* not accepted: open, tried again later */
    cs__settle(d, ok ? CS_DROP : CS_RETRY);
}

/* Transactional: the reply becomes one of d's outputs, which join the window
 * when d settles. False on out of memory. */
static bool stage_reply(cs_delivery *d, const outlet *o) {
    if (!o->reply_topic) return true;
    cs_record r = {.topic = o->reply_topic,
                   .partition = -1,
                   .key = d->reply_key_null ? NULL : d->reply_buf,
                   .key_len = d->reply_key_len,
                   .value = d->reply_value_null ? NULL : d->reply_buf + d->reply_key_len,
                   .value_len = d->reply_value_len,
                   .parent = d}; /* the reply carries d's traceparent */
    cs_output *out = cs__output_new(&r, cs__inherited_traceparent(&r), d->offset);
    if (!out) return false;
    out->source_attempt = (uint32_t)cs__counted_attempts(d);
    cs__delivery_add_output(d, out);
    return true;
}

/* An ack with a reply publishes the reply first. Under Tracked the reply
 * gates the source: its delivery report settles it (ack if delivered, retry if
 * not); a reply that cannot even be queued is a retry at once. A retry after
 * the last allowed attempt gives the record up instead. */
cs_err cs__settle_or_reply(cs_delivery *d, cs_outcome outcome) {
    if (d->store_refused) outcome = CS_RETRY; /* its run's writes were rolled back (worker.c, cs__run_take_store) */
    d->store_refused = false;
    bool reply = outcome == CS_ACK && d->reply_buf;
    if (!reply && outcome != CS_RETRY) return cs__settle(d, outcome);
    outlet o = cs__outlet_of(d);
    if (outcome == CS_RETRY) {
        if (d->encode_unavailable && o.tracked) free_outage_run(d);
        else d->outage_runs = 0;
        return attempts_exhausted(&o, d) ? cs__give_up(d, &o, d->reason) : cs__settle(d, outcome);
    }
    if (o.transactional) return cs__settle(d, stage_reply(d, &o) ? CS_ACK : CS_RETRY);
    char *buf = d->reply_buf; /* ours now: d may be settled and freed once a gated reply is queued */
    d->reply_buf = NULL;
    bool gate = o.current && o.tracked;
    if (!o.send_reply) {
        free(buf);
        return cs__settle(d, outcome);
    }
    const char *key = d->reply_key_null ? NULL : buf;
    const char *value = d->reply_value_null ? NULL : buf + d->reply_key_len;
    int rc = o.send_reply(o.reply_arg, d, gate, key, d->reply_key_len, value, d->reply_value_len);
    free(buf);
    if (!gate) return cs__settle(d, outcome);
    return rc == 0 ? CS_OK : cs__settle(d, CS_RETRY);
}

void cs__delivery_reply_done(cs_delivery *d, bool ok) { cs__settle(d, ok ? CS_ACK : CS_RETRY); }
