/* fetch_requests.c — the queue of the application's seeks and pauses
 * (cs_ctl_req): posted by any thread, taken and answered by the fetch thread
 * (fetch_control.c applies them), refused while a rebalance callback runs or
 * once the fetch thread has ended. It also knows which thread is a fetch
 * thread, so that a request from one (an assign or revoke hook) is refused
 * rather than waited for: a fetch thread waiting for another one can close a
 * cycle (A's hook seeks B while B's hook seeks A).
 *
 * Why a rebalance refuses: a revoke drains the partitions' deliveries (up to
 * drain_timeout) before the fetch thread serves requests again; a handler
 * waiting for its request would hold the drain for the whole timeout, and its
 * record would be read again by the partition's next owner.
 *
 * Threads: cs__control_post and cs__control_wait on any thread; the rest on
 * the fetch thread, or the stopping thread once the fetch thread has ended
 * (cs__control_close, the close's revoke). Owns: c->requests. Locks:
 * requests.lock (level 3, src/lock_order.h), then a request's leaf lock mx,
 * never both held. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/broker.h"
#include "base/error.h"
#include "database/db.h"
#include "kafka/consumer/consumer_internal.h"

/* The consumer whose fetch thread this is, NULL on other threads. */
static _Thread_local const cs_consumer *fetch_thread_of;

void cs__control_on_fetch_thread(const cs_consumer *c) { fetch_thread_of = c; }

bool cs__control_on_a_fetch_thread(void) { return fetch_thread_of != NULL; }

void cs__control_init(cs_consumer *c) {
    pthread_mutex_init(&c->requests.lock, NULL);
    CS_STAILQ_INIT(&c->requests.queue);
}

void cs__control_finish(cs_ctl_req *r, cs_err result) {
    pthread_mutex_lock(&r->mx);
    r->result = result;
    r->done = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mx); /* r is the caller's from here on */
}

cs_ctl_req *cs__control_take_all(cs_consumer *c) {
    pthread_mutex_lock(&c->requests.lock);
    cs_ctl_req *all = CS_STAILQ_FIRST(&c->requests.queue);
    CS_STAILQ_INIT(&c->requests.queue);
    atomic_store(&c->requests.pending, false);
    pthread_mutex_unlock(&c->requests.lock);
    return all;
}

/* Every request waiting fails with `why` (after the consumer's name). */
static void refuse_waiting(cs_consumer *c, const char *why) {
    for (cs_ctl_req *r = cs__control_take_all(c), *next; r; r = next) {
        next = r->next;
        snprintf(r->message, sizeof r->message, "%s: %s", c->who, why);
        cs__control_finish(r, CS_ERR_STATE);
    }
}

void cs__control_close(cs_consumer *c) {
    pthread_mutex_lock(&c->requests.lock);
    c->requests.closed = true;
    pthread_mutex_unlock(&c->requests.lock);
    refuse_waiting(c, "stopped before the request was applied");
}

void cs__control_rebalance_begin(cs_consumer *c) {
    pthread_mutex_lock(&c->requests.lock);
    c->requests.rebalancing = true;
    pthread_mutex_unlock(&c->requests.lock);
    /* Posted before the callback started: a handler among their callers
     * would hold the revoke's drain. */
    refuse_waiting(c, "a rebalance is in progress (the request was not applied; try again after it)");
}

void cs__control_rebalance_end(cs_consumer *c) {
    pthread_mutex_lock(&c->requests.lock);
    c->requests.rebalancing = false;
    pthread_mutex_unlock(&c->requests.lock);
}

void cs__control_queue_destroy(cs_consumer *c) { pthread_mutex_destroy(&c->requests.lock); }

bool cs__control_post(cs_consumer *c, cs_ctl_req *r) {
    pthread_mutex_init(&r->mx, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->done = false;
    pthread_mutex_lock(&c->requests.lock);
    /* A handler holding its database (Database mode) would wait for the
     * fetch thread while the fetch thread waits for the database. */
    const char *refused = c->requests.closed        ? "not running"
                          : c->requests.rebalancing ? "a rebalance is in progress (try again after it)"
                          : cs__db_held_by_this_thread()
                              ? "the calling handler holds its database: call it before its first write, or after it "
                                "settled"
                              : NULL;
    if (!refused) {
        CS_STAILQ_INSERT_TAIL(&c->requests.queue, r, next);
        atomic_store(&c->requests.pending, true);
    }
    pthread_mutex_unlock(&c->requests.lock);
    if (refused) {
        snprintf(r->message, sizeof r->message, "%s: %s", c->who, refused);
        r->result = CS_ERR_STATE; /* never shared: no lock (the caller may hold stats_lock) */
        r->done = true;
    } else {
        cs__fetch_yield(c);
    }
    return !refused;
}

cs_err cs__control_wait(cs_ctl_req *r) {
    pthread_mutex_lock(&r->mx);
    while (!r->done) pthread_cond_wait(&r->cv, &r->mx); /* served within a turn of the loop, or failed at its end */
    pthread_mutex_unlock(&r->mx);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mx);
    return r->result;
}
