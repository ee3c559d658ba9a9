/* delivery_pool.h — freed deliveries kept for the next records of a
 * pipeline, so that the hot path does not malloc a delivery per record.
 *
 * One pool per pipeline, shared by its partitions: the records in flight at
 * once are bounded by the lanes, not by the partition count, and per-partition
 * spares held 33 MB on 192 partitions (docs/benchmarks.md). A delivery goes
 * back from any thread (`shared`, a lock-free push); the one thread that
 * takes deliveries (the fetch thread) takes the whole shared list at once
 * when its own runs out (one exchange per refill, not one per record).
 *
 * Owner: the pipeline holds one reference and every partition one more, so
 * that a delivery settled after its pipeline is gone still finds the pool;
 * the last reference frees the pool and its spares. No lock: a put was one
 * mutex pair per record on the workers' path (docs/benchmarks.md).
 *
 * Owns: declares cs_delivery_pool, reference-counted (cs__delivery_pool_ref,
 * _unref). Locks: none; the shared stack and the counts are atomics.
 * Threads: put on any thread; take on one thread at a time (the fetch thread). */
#ifndef CS_CORE_DELIVERY_POOL_H
#define CS_CORE_DELIVERY_POOL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cs_delivery cs_delivery;
typedef struct cs_delivery_pool cs_delivery_pool;

/* keep: how many freed deliveries the pool holds at most, shared and taken (0: none,
 * every delivery is freed for real; threads putting at the same moment may
 * pass it by one each). NULL when out of memory. */
cs_delivery_pool *cs__delivery_pool_new(size_t keep);
void cs__delivery_pool_ref(cs_delivery_pool *pool);
void cs__delivery_pool_unref(cs_delivery_pool *pool);

/* The taking thread (one at a time): a spare, zeroed, or NULL if there is
 * none (the caller callocs). */
cs_delivery *cs__delivery_pool_take(cs_delivery_pool *pool);
/* Any thread: keeps d (released: it holds nothing of its own), or returns
 * false when the pool is full (the caller frees d). */
bool cs__delivery_pool_put(cs_delivery_pool *pool, cs_delivery *d);
/* Spares kept now, shared and taken (tests). */
size_t cs__delivery_pool_count(cs_delivery_pool *pool);

#endif
