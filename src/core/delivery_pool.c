/* delivery_pool.c — freed deliveries kept for reuse (delivery_pool.h).
 *
 * Owns: the spare deliveries and the pool's references. Locks: none (the
 * shared stack is lock-free). Threads: delivery_pool.h says who puts and
 * who takes. */
#include "core/delivery_pool.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/delivery_internal.h"

struct cs_delivery_pool {
    _Atomic size_t refs;
    size_t keep;
    /* Freed by any thread: pushed with a compare-and-swap, taken whole with
     * an exchange (linked through cs_delivery.next). A push and a take never
     * read a node another thread may be changing, so there is no ABA: only a
     * pop of one node would read head->next of a node someone else took. */
    _Atomic(cs_delivery *) shared;
    cs_delivery *taken; /* the taking thread's, swapped out of `shared` */
    /* Spares held, shared and taken: counted up before a push (so a take
     * never counts one down before its put counted it up) and down at each
     * take. */
    _Atomic size_t held;
};

cs_delivery_pool *cs__delivery_pool_new(size_t keep) {
    cs_delivery_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    atomic_init(&pool->refs, 1);
    atomic_init(&pool->shared, NULL);
    pool->keep = keep;
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
    free_list(atomic_load(&pool->shared));
    free_list(pool->taken);
    free(pool);
}

cs_delivery *cs__delivery_pool_take(cs_delivery_pool *pool) {
    if (!pool->taken) {
        pool->taken = atomic_exchange_explicit(&pool->shared, NULL, memory_order_acquire);
        if (!pool->taken) return NULL;
    }
    cs_delivery *d = pool->taken;
    pool->taken = d->next;
    atomic_fetch_sub_explicit(&pool->held, 1, memory_order_relaxed);
    memset(d, 0, CS_DELIVERY_ZEROED); /* as calloc'd, up to what is written before it is read */
    return d;
}

bool cs__delivery_pool_put(cs_delivery_pool *pool, cs_delivery *d) {
    /* Past `keep` by at most one per thread putting at the same moment. */
    if (atomic_load_explicit(&pool->held, memory_order_relaxed) >= pool->keep) return false;
    atomic_fetch_add_explicit(&pool->held, 1, memory_order_relaxed);
    cs_delivery *head = atomic_load_explicit(&pool->shared, memory_order_relaxed);
    do d->next = head;
    while (!atomic_compare_exchange_weak_explicit(&pool->shared, &head, d, memory_order_release, memory_order_relaxed));
    return true;
}

size_t cs__delivery_pool_count(cs_delivery_pool *pool) {
    return atomic_load_explicit(&pool->held, memory_order_relaxed);
}
