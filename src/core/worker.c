/* worker.c — a lane's worker thread: admits each delivery it pops, decodes
 * it, runs the handler (one record, or a batch), and hands the outcome to
 * settlement (settle.c); the stop-the-world gate (measurement only) and the
 * handler time-limit check.
 *
 * Owns: a lane's run watch (run_lock's fields) and the gate.
 * Threads: one worker per lane; the fetch thread runs the time-limit check
 * (cs__pipeline_check_slow) and closes the gate. No lock is held while a
 * handler runs: admission (partition.c, cs__part_start_run) takes the
 * partition lock before it, the time-limit watch takes run_lock (a leaf)
 * around it. Locks: run_lock and gate_lock (leaves, src/lock_order.h); a lane's
 * and a partition's lock only inside lanes.c's and partition.c's calls. */
#define _POSIX_C_SOURCE 200809L
#include "core/partition_internal.h"
#include "core/pipeline_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "base/log.h"

static void pass_gate(cs_pipeline *p);
static void leave_gate(cs_pipeline *p);

/* ---- workers -------------------------------------------------------------- */

static void watch_start(lane *l, const cs_delivery *d) {
    pthread_mutex_lock(&l->run_lock);
    l->run_topic = d->topic;
    l->run_partition = d->partition;
    l->run_offset = d->offset;
    memcpy(l->run_trace_id, d->trace_id, sizeof l->run_trace_id);
    l->run_started_ms = cs__now_ms();
    l->run_reported = false;
    pthread_mutex_unlock(&l->run_lock);
}

static void watch_stop(lane *l) {
    pthread_mutex_lock(&l->run_lock);
    l->run_started_ms = 0;
    pthread_mutex_unlock(&l->run_lock);
}

static bool typed(const cs_pipeline *p) { return p->cfg.type || p->cfg.key_type; }

/* Whether admission counts d's attempt: for an untyped subscription nothing
 * stands between admission and the handler, unless d first backs off after
 * a free run (outage_wait), which counts it after the wait instead, so that
 * a commit during the wait carries no run that has not happened. */
static bool counts_at_admission(const cs_pipeline *p, const cs_delivery *d) { return !typed(p) && !d->outage_wait; }

/* Takes d into the in-flight list if it may run; else discards it. With
 * `count` (an untyped subscription: nothing stands between admission and
 * the handler), the attempt is counted under the same lock, unless the
 * record will not run because its attempts are exhausted. */
static bool admit(cs_pipeline *p, cs_delivery *d, bool count) {
    cs_part *part = d->part;
    bool precommit = false;
    bool exhausted = p->cfg.max_attempts > 0 && cs__counted_attempts(d) >= p->cfg.max_attempts;
    bool run = cs__part_start_run(p, part, d, count && !exhausted, &precommit);
    if (!run) cs__discard(d);
    if (precommit) p->cfg.precommit(p->cfg.precommit_arg, part);
    return run;
}

/* The same count for a typed subscription, once its record decoded. */
static void count_start(cs_pipeline *p, cs_delivery *d) {
    if (!p->cfg.tracked) return; /* no tracker, no count: no lock either */
    cs_part *part = d->part;
    if (cs__part_count_start(p, part, d)) p->cfg.precommit(p->cfg.precommit_arg, part);
}

/* A codec that answers CS_ERR_UNAVAILABLE (a schema registry it needs is
 * down) is asked again after a back-off that doubles from the first to the
 * most; the record is never the one at fault, so it is never given up. The
 * same back-off comes before a run after a free one (outage_wait). */
#define DECODE_WAIT_FIRST_MS 100
#define DECODE_WAIT_MAX_MS 5000
/* The in-place wait looks at the app's stop and the partition this often. */
#define DECODE_WAIT_SLICE_MS 50

static int decode_wait_ms(int waits) {
    int64_t ms = DECODE_WAIT_FIRST_MS;
    for (int i = 1; i < waits && ms < DECODE_WAIT_MAX_MS; i++) ms *= 2;
    return ms < DECODE_WAIT_MAX_MS ? (int)ms : DECODE_WAIT_MAX_MS;
}

/* What failed to decode: the value or the key, and the type it was decoded as. */
typedef struct decode_part {
    const char *what; /* "value" or "key" */
    const cs_type *type;
} decode_part;

/* Decodes what the subscription asks for, the value then the key, each once
 * (kept across attempts); on failure *failed says which and cs_errmsg() why. */
static cs_err decode_record(cs_pipeline *p, cs_delivery *d, decode_part *failed) {
    cs_err err = CS_OK;
    if (p->cfg.type && (err = cs__delivery_decode(d, p->cfg.codec, p->cfg.type))) {
        *failed = (decode_part){"value", p->cfg.type};
        return err;
    }
    if (p->cfg.key_type && (err = cs__delivery_decode_key(d, p->cfg.key_codec, p->cfg.key_type)))
        *failed = (decode_part){"key", p->cfg.key_type};
    return err;
}

static void warn_decode_wait(cs_pipeline *p, const cs_delivery *d, const decode_part *part, int wait_ms) {
    uint64_t skipped = 0;
    if (cs__ratelimit_allow(&p->decode_warning, 2000, &skipped))
        CS_LOG_WARN("record cannot be decoded now, tried again later topic=%s partition=%d offset=%lld part=%s "
                    "type=%s commit=%s wait_ms=%d tries=%d reason=\"%s\" similar_since_last=%llu" CS_TRACE_FMT,
                    d->topic, (int)d->partition, (long long)d->offset, part->what, part->type->name,
                    p->cfg.tracked ? "tracked" : "auto", wait_ms, d->decode_waits, cs_errmsg(),
                    (unsigned long long)skipped, CS_TRACE_ARGS(d));
}

/* Whether the record may still wait in place: its partition is still ours
 * (not revoked, not rewound) and the app is not stopping. */
static bool may_wait(cs_pipeline *p, cs_delivery *d) {
    return !atomic_load(&p->stopping) && cs__part_runnable(p, d->part, d);
}

/* The codec said "try later". The worker waits here, with a back-off, and
 * decodes again until it works, its partition is no longer ours (revoked,
 * rewound by a seek), or the app stops: the record keeps its place at the
 * head of its lane, so nothing behind it in the lane overtakes it, and
 * (Tracked, Transactional) the position waits in front of it. A delayed
 * retry would let the lane's next records run first; the handler has not
 * run, so this takes no attempt (count_start comes after). A worker inside
 * the stop-the-world gate (`gated`) leaves it while it waits, or the window
 * it holds open could not close.
 * When it may wait no longer: Tracked settles it as a retry, which a
 * partition that is no longer ours or an app that stops never commits, so
 * the next owner reads it again; Auto, where nothing brings a record back,
 * drops it with a line, like any record unhandled at stop. Returns what
 * became of d: decoded, settled (no longer the caller's), or a decode
 * failure of another kind (the caller handles it as any). */
typedef enum decode_wait { WAIT_DECODED, WAIT_SETTLED, WAIT_FAILED } decode_wait;

/* Sleeps wait_ms in slices, outside the stop-the-world gate if the worker
 * is inside it (`gated`); true if d may still run (may_wait). */
static bool wait_in_place(cs_pipeline *p, cs_delivery *d, int wait_ms, bool gated) {
    int64_t until = cs__now_ms() + wait_ms;
    if (gated) leave_gate(p);
    while (cs__now_ms() < until && may_wait(p, d)) {
        struct timespec ts = {0, DECODE_WAIT_SLICE_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (gated) pass_gate(p);
    return may_wait(p, d);
}

static decode_wait decode_later(lane *l, cs_delivery *d, decode_part *part, bool gated) {
    cs_pipeline *p = l->pipe;
    for (;;) {
        int wait_ms = decode_wait_ms(++d->decode_waits);
        warn_decode_wait(p, d, part, wait_ms);
        if (!wait_in_place(p, d, wait_ms, gated)) {
            if (p->cfg.tracked) {
                CS_LOG_INFO("record not decoded before its partition left, was rewound or the app stopped, left "
                            "uncommitted topic=%s partition=%d offset=%lld tries=%d" CS_TRACE_FMT,
                            d->topic, (int)d->partition, (long long)d->offset, d->decode_waits, CS_TRACE_ARGS(d));
                cs__settle(d, CS_RETRY);
                return WAIT_SETTLED;
            }
            CS_LOG_WARN("record dropped, it could not be decoded before its partition left, was rewound or the "
                        "app stopped topic=%s partition=%d offset=%lld commit=auto tries=%d" CS_TRACE_FMT,
                        d->topic, (int)d->partition, (long long)d->offset, d->decode_waits, CS_TRACE_ARGS(d));
            cs__settle(d, CS_DROP);
            return WAIT_SETTLED;
        }
        cs_err err = decode_record(p, d, part);
        if (err == CS_ERR_UNAVAILABLE) continue;
        return err == CS_OK ? WAIT_DECODED : WAIT_FAILED; /* cs_errmsg() still says why */
    }
}

/* Typed subscriptions, given the first decode's result `err`: a record that
 * does not decode never reaches the handler; it is counted, logged and
 * dropped (dead-lettered under Tracked). Returns false then. A codec that
 * cannot decode it now (CS_ERR_UNAVAILABLE) is asked again: decode_later. */
static bool decoded_or_dropped(lane *l, cs_delivery *d, cs_err err, decode_part part, bool gated) {
    cs_pipeline *p = l->pipe;
    if (err == CS_ERR_UNAVAILABLE) {
        decode_wait w = decode_later(l, d, &part, gated);
        if (w == WAIT_DECODED) err = CS_OK;
        else if (w == WAIT_SETTLED) return false;
    }
    if (err == CS_OK) return true;
    if (!d->decode_failed) atomic_fetch_add_explicit(&l->decode_failures, 1, memory_order_relaxed);
    d->decode_failed = true; /* counted once, though a failed dead-letter publish brings it back */
    if (p->cfg.tracked && (p->cfg.send_dead_letter || p->cfg.make_dead_letter)) {
        char why[600];
        /* A value's reason keeps the form it had before keys were decoded
         * (dead-letter readers match on it); a key's says so. */
        snprintf(why, sizeof why, "%sdoes not decode as %s: %s", strcmp(part.what, "key") ? "" : "key ",
                 part.type->name, cs_errmsg());
        outlet o = cs__outlet_of(d);
        cs__give_up(d, &o, why);
        return false;
    }
    uint64_t skipped = 0;
    if (cs__ratelimit_allow(&p->decode_warning, 2000, &skipped))
        CS_LOG_WARN("record does not decode, dropped topic=%s partition=%d offset=%lld part=%s type=%s "
                    "reason=\"%s\" similar_since_last=%llu" CS_TRACE_FMT,
                    d->topic, (int)d->partition, (long long)d->offset, part.what, part.type->name, cs_errmsg(),
                    (unsigned long long)skipped, CS_TRACE_ARGS(d));
    cs__settle(d, CS_DROP);
    return false;
}

/* A record whose last run asked for a retry after an encode found its
 * schema registry unavailable (a free run, settle.c) waits here, at the head
 * of its lane, before it runs again: the back-off spares the registry, and
 * nothing behind it in its lane overtakes it, as in a decode wait (a
 * delayed retry would let them). True if it may run now; false if it was
 * settled instead (its partition left or was rewound, or the app stops: it
 * stays uncommitted and is read again). */
static bool outage_wait(lane *l, cs_delivery *d, bool gated) {
    cs_pipeline *p = l->pipe;
    if (!d->outage_wait) return true;
    d->outage_wait = false;
    int wait_ms = decode_wait_ms(d->outage_runs);
    uint64_t skipped = 0;
    if (cs__ratelimit_allow(&p->outage_warning, 2000, &skipped))
        CS_LOG_WARN("record retried after its schema registry was unavailable: the run is not counted against "
                    "max_attempts, it runs again after a back-off topic=%s partition=%d offset=%lld wait_ms=%d "
                    "free_runs=%d similar_since_last=%llu" CS_TRACE_FMT,
                    d->topic, (int)d->partition, (long long)d->offset, wait_ms, d->free_runs,
                    (unsigned long long)skipped, CS_TRACE_ARGS(d));
    if (wait_in_place(p, d, wait_ms, gated)) return true;
    cs__settle(d, CS_RETRY);
    return false;
}

/* The value and key decoded (true), or the record dropped or settled (false). */
static bool decode_or_drop(lane *l, cs_delivery *d, bool gated) {
    if (!typed(l->pipe)) return true;
    decode_part part = {"value", l->pipe->cfg.type};
    cs_err err = decode_record(l->pipe, d, &part);
    return decoded_or_dropped(l, d, err, part, gated);
}

static void start_attempt(lane *l, cs_delivery *d) {
    d->attempt++;
    d->encode_unavailable = false;
    free(d->reason); /* a reason belongs to the attempt that set it */
    d->reason = NULL;
    free(d->reply_buf); /* a reply belongs to the attempt that set it */
    d->reply_buf = NULL;
    cs__output_list_free(&d->outputs); /* so do outputs (Transactional) */
    atomic_fetch_add_explicit(&l->delivered, 1, memory_order_relaxed);
}

/* A record that already had its last attempt (its dead-letter publish failed,
 * or its count came from an earlier owner) goes straight to giving up. */
static bool exhausted_at_admission(cs_pipeline *p, cs_delivery *d) {
    if (!p->cfg.tracked || p->cfg.max_attempts <= 0 || cs__counted_attempts(d) < p->cfg.max_attempts) return false;
    outlet o = cs__outlet_of(d);
    cs__give_up(d, &o, d->reason ? d->reason : "attempts exhausted");
    return true;
}

static void unset_to_retry(cs_pipeline *p, cs_delivery *d, cs_outcome outcome, bool batch);
static bool outcome_valid(cs_outcome o);

/* The run this worker thread is in, while its handler runs: the deliveries
 * the handler was given (Database mode asks, cs__run_take_store). */
static _Thread_local struct {
    cs_delivery *const *ds;
    size_t n;
} this_run;

bool cs__run_take_store(cs_delivery *d) {
    bool mine = false;
    for (size_t i = 0; i < this_run.n && !mine; i++) mine = this_run.ds[i] == d;
    /* Until the worker sees the run's outcomes, every record of it counts as
     * one whose writes may be undone: a record the handler returns pending
     * and another thread acks at once must not count as handled, its writes
     * being rolled back (settle_run clears it for the worker's own acks). */
    for (size_t i = 0; mine && i < this_run.n; i++) this_run.ds[i]->store_refused = true;
    return mine;
}

/* Database: whether the run's writes may stay. Only if every record of it
 * settles as handled; else they are undone, and a record acked or dropped
 * beside a retry (a batch) is retried too, its writes being gone. A pending
 * record is the handler's now and is not touched: cs__run_take_store marked
 * it, so its later ack counts as a retry (settle.c). */
static bool keep_writes(cs_pipeline *p, cs_delivery **ds, cs_outcome *outcomes, size_t n) {
    bool keep = true;
    for (size_t i = 0; i < n; i++) keep = keep && (outcomes[i] == CS_ACK || outcomes[i] == CS_DROP);
    if (keep) return true;
    size_t pending = 0;
    for (size_t i = 0; i < n; i++) {
        if (outcomes[i] == CS_PENDING) {
            pending++;
        } else if (outcomes[i] != CS_RETRY) {
            if (!ds[i]->reason) cs_delivery_set_reason(ds[i], "its batch's database writes were rolled back");
            outcomes[i] = CS_RETRY;
        }
    }
    if (pending)
        CS_LOG_ERR("handler that wrote to the database returned pending: its run's writes are rolled back and the "
                   "pending records' settlements count as retries subscription=%s pending=%zu",
                   p->name, pending);
    return false;
}

/* Settles a run's records: acks, drops (and their replies) in fetch order;
 * then retries backwards, so that they reach the lane's head in fetch order.
 * A run that took the database (Database mode) ends its writes first and
 * holds the database until its records are settled (run_store.h). */
static void settle_run(cs_pipeline *p, cs_delivery **ds, cs_outcome *outcomes, size_t n) {
    const cs_run_store *rs = p->cfg.store;
    bool held = rs && rs->held(rs->arg);
    bool kept = held && keep_writes(p, ds, outcomes, n);
    if (held && !rs->end_run(rs->arg, kept) && kept) {
        /* The store could not keep them (its transaction is gone, and the
         * window rolls back): nothing of the run was handled. */
        for (size_t i = 0; i < n; i++) {
            if (!ds[i]->reason) cs_delivery_set_reason(ds[i], "the database transaction was lost");
            outcomes[i] = CS_RETRY;
        }
        kept = false;
    }
    for (size_t i = 0; i < n; i++) {
        cs_outcome o = outcomes[i];
        if (o == CS_PENDING || o == CS_RETRY) continue;
        ds[i]->store_refused = false; /* the worker's own outcome: its writes went as the run's did */
        /* The reply settles it later: the window waits for that. */
        if (kept && o == CS_ACK && ds[i]->reply_buf) {
            ds[i]->store_await = rs;
            ds[i]->store_gen = rs->await_add(rs->arg);
        }
        cs_delivery *d = ds[i];
        bool awaited = d->store_await != NULL;
        cs_err err = cs__settle_or_reply(d, o); /* d may be gone */
        if (kept && !awaited && err == CS_ERR_STALE)
            rs->poison(rs->arg, "a record whose writes it holds was revoked before it settled");
    }
    for (size_t i = n; i-- > 0;)
        if (outcomes[i] == CS_RETRY) cs__settle_or_reply(ds[i], CS_RETRY);
    if (held) rs->unlock(rs->arg);
}

static void run_one(lane *l, cs_delivery *d) {
    cs_pipeline *p = l->pipe;
    bool counted = counts_at_admission(p, d);
    if (!outage_wait(l, d, p->cfg.window_barrier) || exhausted_at_admission(p, d) ||
        !decode_or_drop(l, d, p->cfg.window_barrier))
        return;
    if (!counted) count_start(p, d);
    bool watch = p->cfg.handler_time_limit_ms > 0;
    start_attempt(l, d);
    if (watch) watch_start(l, d);
    uint64_t t0 = cs__mono_ns(); /* monotonic: a clock step never makes a run negative */
    this_run.ds = &d;
    this_run.n = 1;
    cs_outcome outcome = p->cfg.handler(d, p->cfg.user);
    this_run.n = 0;
    cs__histogram_observe(&l->handler_seconds, cs__mono_ns() - t0);
    if (watch) watch_stop(l);
    if (!outcome_valid(outcome)) {
        unset_to_retry(p, d, outcome, false);
        outcome = CS_RETRY;
    }
    settle_run(p, &d, &outcome, 1); /* a pending d is the handler's now */
}

static const char *commit_mode_name(const cs_pipeline *p) {
    return p->cfg.transactional ? "transactional" : p->cfg.store ? "database" : p->cfg.tracked ? "tracked" : "auto";
}

/* An element the batch handler left CS_UNSET, or an outcome that is none of
 * ack, drop, retry and pending (CS_EACH or CS_UNSET from a record handler, a
 * value out of the enum): nobody settled it, so it must not count as handled.
 * It becomes a retry (the mode decides what a retry does), with a
 * rate-limited line, because a handler that gets one wrong usually gets one
 * wrong per record or batch. Normalised here, before settling, so that it
 * goes through max_attempts like any retry and, in a batch, comes back in
 * fetch order with the other retries. The reason, unless the handler gave
 * one, is what a dead letter at the attempt cap will carry. */
static void unset_to_retry(cs_pipeline *p, cs_delivery *d, cs_outcome outcome, bool batch) {
    uint64_t skipped = 0;
    bool unset = batch && outcome == CS_UNSET;
    if (cs__ratelimit_allow(&p->unset_warning, 5000, &skipped)) {
        if (unset)
            CS_LOG_ERR("batch handler left an element unset (handler bug), treated as retry subscription=%s "
                       "commit=%s topic=%s partition=%d offset=%lld attempt=%d similar_since_last=%llu" CS_TRACE_FMT,
                       p->name, commit_mode_name(p), d->topic, (int)d->partition, (long long)d->offset, d->attempt,
                       (unsigned long long)skipped, CS_TRACE_ARGS(d));
        else
            CS_LOG_ERR("%s handler returned an invalid outcome (handler bug), treated as retry subscription=%s "
                       "commit=%s topic=%s partition=%d offset=%lld attempt=%d outcome=%d "
                       "similar_since_last=%llu" CS_TRACE_FMT,
                       batch ? "batch" : "record", p->name, commit_mode_name(p), d->topic, (int)d->partition,
                       (long long)d->offset, d->attempt, (int)outcome, (unsigned long long)skipped, CS_TRACE_ARGS(d));
    }
    if (!d->reason) cs_delivery_set_reason(d, unset ? "batch handler left the outcome unset" : "invalid outcome");
}

/* What a handler may leave as the outcome of one record. */
static bool outcome_valid(cs_outcome o) { return o == CS_ACK || o == CS_DROP || o == CS_RETRY || o == CS_PENDING; }

/* The handler on the first `kept` elements of l->batch, admitted and decoded. */
static void run_kept(lane *l, size_t kept) {
    cs_pipeline *p = l->pipe;
    if (kept == 0) return;
    for (size_t i = 0; i < kept; i++) {
        if (typed(p)) count_start(p, l->batch[i]); /* untyped: admit counted it */
        start_attempt(l, l->batch[i]);
        l->outcomes[i] = CS_UNSET; /* settled only by what the handler names */
    }
    bool watch = p->cfg.handler_time_limit_ms > 0;
    if (watch) watch_start(l, l->batch[0]);
    uint64_t t0 = cs__mono_ns();
    this_run.ds = l->batch;
    this_run.n = kept;
    cs_outcome all = p->cfg.batch_handler(l->batch, kept, l->outcomes, p->cfg.user);
    this_run.n = 0;
    cs__histogram_observe(&l->handler_seconds, cs__mono_ns() - t0);
    if (watch) watch_stop(l);
    for (size_t i = 0; i < kept; i++) {
        if (all != CS_EACH) l->outcomes[i] = all;
        if (outcome_valid(l->outcomes[i])) continue;
        unset_to_retry(p, l->batch[i], l->outcomes[i], true);
        l->outcomes[i] = CS_RETRY;
    }
    settle_run(p, l->batch, l->outcomes, kept);
}

/* A batch runs as one handler call, but for an element whose codec cannot
 * decode it now: the elements before it run first (they are in flight, and
 * a revoke of their partitions should not wait out the registry's outage),
 * then it waits in place, then it and the rest form the next call. The kept
 * elements move to the front of l->batch; kept <= i, so none is overwritten
 * before it is read. */
static void run_batch(lane *l, size_t n) {
    cs_pipeline *p = l->pipe;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        cs_delivery *d = l->batch[i];
        bool counted = counts_at_admission(p, d);
        if (!admit(p, d, counted)) continue;
        /* A record that backs off is a retried one, which comes in a batch of
         * its own (lanes.c): it holds no other element while it waits. */
        if (!outage_wait(l, d, false) || exhausted_at_admission(p, d)) continue;
        if (!counted && !typed(p)) count_start(p, d); /* typed: run_kept counts it, once decoded */
        if (typed(p)) {
            decode_part part = {"value", p->cfg.type};
            cs_err err = decode_record(p, d, &part);
            if (err == CS_ERR_UNAVAILABLE && kept > 0) {
                run_kept(l, kept);
                kept = 0;
            }
            if (!decoded_or_dropped(l, d, err, part, false)) continue;
        }
        l->batch[kept++] = d;
    }
    run_kept(l, kept);
}

void *cs__worker_main(void *arg) {
    lane *l = arg;
    cs_pipeline *p = l->pipe;
    if (p->cfg.batch_handler) {
        size_t n;
        while ((n = cs__lane_pop_batch(l, l->batch, p->cfg.max_batch)) > 0) run_batch(l, n);
        return NULL;
    }
    cs_delivery *d;
    while ((d = cs__lane_pop(l))) {
        if (p->cfg.window_barrier) pass_gate(p);
        if (admit(p, d, counts_at_admission(p, d))) run_one(l, d);
        if (p->cfg.window_barrier) leave_gate(p);
    }
    return NULL;
}

/* ---- the stop-the-world gate (window_barrier, for measurement) ----------- */

static void pass_gate(cs_pipeline *p) {
    pthread_mutex_lock(&p->gate_lock);
    while (p->gate_closed && !atomic_load(&p->stopping)) pthread_cond_wait(&p->gate_cv, &p->gate_lock);
    p->in_handler++;
    pthread_mutex_unlock(&p->gate_lock);
}

static void leave_gate(cs_pipeline *p) {
    pthread_mutex_lock(&p->gate_lock);
    if (--p->in_handler == 0) pthread_cond_broadcast(&p->gate_cv);
    pthread_mutex_unlock(&p->gate_lock);
}

void cs__pipeline_close_gate(cs_pipeline *p) {
    if (!p->cfg.window_barrier) return;
    pthread_mutex_lock(&p->gate_lock);
    p->gate_closed = true;
    while (p->in_handler > 0) pthread_cond_wait(&p->gate_cv, &p->gate_lock);
    pthread_mutex_unlock(&p->gate_lock);
}

void cs__pipeline_open_gate(cs_pipeline *p) {
    if (!p->cfg.window_barrier) return;
    pthread_mutex_lock(&p->gate_lock);
    p->gate_closed = false;
    pthread_cond_broadcast(&p->gate_cv);
    pthread_mutex_unlock(&p->gate_lock);
}

void cs__pipeline_check_slow(cs_pipeline *p) {
    int limit = p->cfg.handler_time_limit_ms;
    if (limit <= 0) return;
    int64_t now = cs__now_ms();
    for (int i = 0; i < p->n_lanes; i++) {
        lane *l = &p->lanes[i];
        pthread_mutex_lock(&l->run_lock);
        if (l->run_started_ms && !l->run_reported && now - l->run_started_ms > limit) {
            l->run_reported = true;
            atomic_fetch_add_explicit(&l->slow, 1, memory_order_relaxed);
            CS_LOG_WARN("handler past its time limit subscription=%s topic=%s partition=%d offset=%lld "
                        "running_ms=%lld limit_ms=%d%s%s",
                        p->name, l->run_topic, (int)l->run_partition, (long long)l->run_offset,
                        (long long)(now - l->run_started_ms), limit, l->run_trace_id[0] ? " trace_id=" : "",
                        l->run_trace_id);
        }
        pthread_mutex_unlock(&l->run_lock);
    }
}
