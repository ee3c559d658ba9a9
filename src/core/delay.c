/* delay.c — retry_after: the deliveries waiting for their delay, in a heap
 * keyed by their due time (heap.h), and the timer thread that moves each one
 * due to the head of its lane.
 *
 * Owns: the heap (cs_pipeline.delayed), the timer thread and delay_started.
 * Threads: settling threads push (under the partition lock); the timer pops;
 * the stopping thread empties it. Locks: delay_lock (lock order level 6, a
 * leaf): the timer releases it before it takes a lane lock. */
#define _POSIX_C_SOURCE 200809L
#include "core/pipeline_internal.h"

#include <pthread.h>

/* ---- retry_after: the delay heap (heap.h) and its timer thread ----------- */

/* Called with delay_lock held. */
bool cs__delay_push(cs_pipeline *p, cs_delivery *d) {
    if (!cs__heap_push(&p->delayed, d->retry_at_ms, d)) return false;
    pthread_cond_signal(&p->delay_cv);
    return true;
}

/* Moves due deliveries to the head of their lanes. */
void *cs__delay_main(void *arg) {
    cs_pipeline *p = arg;
    pthread_mutex_lock(&p->delay_lock);
    while (!p->delay_stop) {
        const cs_heap_item *soonest = cs__heap_min(&p->delayed);
        if (!soonest) {
            pthread_cond_wait(&p->delay_cv, &p->delay_lock);
            continue;
        }
        int64_t wait = soonest->key - cs__now_ms();
        if (wait > 0) {
            struct timespec ts;
            cs__deadline_after(&ts, wait); /* the due time is monotonic too (cs_delivery_retry_after) */
            pthread_cond_timedwait(&p->delay_cv, &p->delay_lock, &ts);
            continue;
        }
        cs_delivery *d = cs__heap_pop(&p->delayed, NULL);
        pthread_mutex_unlock(&p->delay_lock);
        d->retry_at_ms = 0;
        if (!cs__lane_push_head(&p->lanes[d->lane], d)) cs__discard(d); /* stopping: it stays open */
        pthread_mutex_lock(&p->delay_lock);
    }
    pthread_mutex_unlock(&p->delay_lock);
    return NULL;
}

bool cs__delay_start(cs_pipeline *p) {
    p->delay_started = pthread_create(&p->delay_thread, NULL, cs__delay_main, p) == 0;
    return p->delay_started;
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
    while (cs__heap_count(&p->delayed)) {
        cs_delivery *d = cs__heap_pop(&p->delayed, NULL);
        pthread_mutex_unlock(&p->delay_lock);
        cs__discard(d);
        pthread_mutex_lock(&p->delay_lock);
    }
    pthread_mutex_unlock(&p->delay_lock);
}
