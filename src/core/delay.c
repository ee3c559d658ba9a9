/* delay.c — retry_after: the heap of deliveries waiting for their delay,
 * soonest first, and the timer thread that moves each one due to the head of
 * its lane.
 *
 * Threads: settling threads push (under the partition lock); the timer pops;
 * the stopping thread empties it. Lock: delay_lock (lock order level 6, a
 * leaf): the timer releases it before it takes a lane lock. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline_internal.h"

#include <pthread.h>
#include <stdlib.h>

/* ---- retry_after: the delayed heap and its timer thread ------------------- */

static bool due_before(const cs_delivery *a, const cs_delivery *b) { return a->retry_at_ms < b->retry_at_ms; }

/* Called with delay_lock held. */
bool cs__delay_push(cs_pipeline *p, cs_delivery *d) {
    if (p->n_delayed == p->cap_delayed) {
        size_t cap = p->cap_delayed ? p->cap_delayed * 2 : 16;
        cs_delivery **grown = realloc(p->delayed, cap * sizeof *grown);
        if (!grown) return false;
        p->delayed = grown;
        p->cap_delayed = cap;
    }
    size_t i = p->n_delayed++;
    while (i > 0 && due_before(d, p->delayed[(i - 1) / 2])) {
        p->delayed[i] = p->delayed[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    p->delayed[i] = d;
    pthread_cond_signal(&p->delay_cv);
    return true;
}

/* Called with delay_lock held and n_delayed > 0. */
static cs_delivery *delay_pop(cs_pipeline *p) {
    cs_delivery *top = p->delayed[0], *last = p->delayed[--p->n_delayed];
    size_t i = 0, n = p->n_delayed;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && due_before(p->delayed[c + 1], p->delayed[c])) c++;
        if (!due_before(p->delayed[c], last)) break;
        p->delayed[i] = p->delayed[c];
        i = c;
    }
    if (n) p->delayed[i] = last;
    return top;
}

/* Moves due deliveries to the head of their lanes. */
void *cs__delay_main(void *arg) {
    cs_pipeline *p = arg;
    pthread_mutex_lock(&p->delay_lock);
    while (!p->delay_stop) {
        if (p->n_delayed == 0) {
            pthread_cond_wait(&p->delay_cv, &p->delay_lock);
            continue;
        }
        int64_t wait = p->delayed[0]->retry_at_ms - cs__now_ms();
        if (wait > 0) {
            struct timespec ts;
            cs__deadline_after(&ts, wait); /* the due time is monotonic too (cs_delivery_retry_after) */
            pthread_cond_timedwait(&p->delay_cv, &p->delay_lock, &ts);
            continue;
        }
        cs_delivery *d = delay_pop(p);
        pthread_mutex_unlock(&p->delay_lock);
        d->retry_at_ms = 0;
        if (!cs__lane_push_head(&p->lanes[d->lane], d)) cs__discard(d); /* stopping: it stays open */
        pthread_mutex_lock(&p->delay_lock);
    }
    pthread_mutex_unlock(&p->delay_lock);
    return NULL;
}

/* ---- stopping ------------------------------------------------------------- */

void cs__stop_delays(cs_pipeline *p) {
    pthread_mutex_lock(&p->delay_lock);
    p->delay_stop = true;
    pthread_cond_broadcast(&p->delay_cv);
    pthread_mutex_unlock(&p->delay_lock);
    if (p->delay_started) pthread_join(p->delay_thread, NULL);
    p->delay_started = false;
    /* Still waiting: they stay open (uncommitted) and are read again later. */
    pthread_mutex_lock(&p->delay_lock);
    while (p->n_delayed) {
        cs_delivery *d = delay_pop(p);
        pthread_mutex_unlock(&p->delay_lock);
        cs__discard(d);
        pthread_mutex_lock(&p->delay_lock);
    }
    pthread_mutex_unlock(&p->delay_lock);
}
