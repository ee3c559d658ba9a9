/* delivery_pool.c — freed deliveries kept for reuse (delivery_pool.h). */
#include "delivery_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "delivery_internal.h"

struct cs_delivery_pool {
    _Atomic size_t refs;
    size_t keep;
    pthread_mutex_t lock;
    cs_delivery *shared; /* freed by any thread; linked through cs_delivery.next */
    size_t n_shared;
    cs_delivery *taken; /* the taking thread's, swapped out of `shared` */
    _Atomic size_t n_taken;
};

cs_delivery_pool *cs__delivery_pool_new(size_t keep) {
    cs_delivery_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    atomic_init(&pool->refs, 1);
    pool->keep = keep;
    pthread_mutex_init(&pool->lock, NULL);
    return pool;
}

void cs__delivery_pool_ref(cs_delivery_pool *pool) { atomic_fetch_add_explicit(&pool->refs, 1, memory_order_relaxed); }

static void free_list(cs_delivery *d) {
    for (cs_delivery *next; d; d = next) {
        next = d->next;
        free(d);
    }
}

void cs__delivery_pool_unref(cs_delivery_pool *pool) {
    if (!pool || atomic_fetch_sub_explicit(&pool->refs, 1, memory_order_acq_rel) != 1) return;
    free_list(pool->shared);
    free_list(pool->taken);
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

cs_delivery *cs__delivery_pool_take(cs_delivery_pool *pool) {
    if (!pool->taken) {
        pthread_mutex_lock(&pool->lock);
        pool->taken = pool->shared;
        atomic_store_explicit(&pool->n_taken, pool->n_shared, memory_order_relaxed);
        pool->shared = NULL;
        pool->n_shared = 0;
        pthread_mutex_unlock(&pool->lock);
        if (!pool->taken) return NULL;
    }
    cs_delivery *d = pool->taken;
    pool->taken = d->next;
    atomic_fetch_sub_explicit(&pool->n_taken, 1, memory_order_relaxed);
    memset(d, 0, sizeof *d); /* as calloc'd: every field starts zero */
    return d;
}

bool cs__delivery_pool_put(cs_delivery_pool *pool, cs_delivery *d) {
    pthread_mutex_lock(&pool->lock);
    bool kept = pool->n_shared < pool->keep;
    if (kept) {
        d->next = pool->shared;
        pool->shared = d;
        pool->n_shared++;
    }
    pthread_mutex_unlock(&pool->lock);
    return kept;
}

size_t cs__delivery_pool_count(cs_delivery_pool *pool) {
    pthread_mutex_lock(&pool->lock);
    size_t n = pool->n_shared;
    pthread_mutex_unlock(&pool->lock);
    return n + atomic_load_explicit(&pool->n_taken, memory_order_relaxed);
}
