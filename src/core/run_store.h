/* run_store.h — a store a handler's run writes into (Database mode): what
 * the pipeline asks of it around a run, so that the core knows no database.
 *
 * A run that took the store (cs_delivery_sqlite, cs_delivery_postgres) holds
 * it from then until its outcomes are settled: the worker ends the run's
 * writes (kept if every outcome is an ack or a drop, else undone), settles
 * the run's records while still holding it, then lets it go. So a window
 * commit, which takes the store too, never sees a record's writes without
 * its settlement, nor a settlement without its writes.
 *
 * Owns: nothing (an interface; src/database/database.c implements it).
 * Locks: none here. Threads: workers (held, end_run, unlock, await_add),
 * any settling thread (await_done, poison). */
#ifndef CS_CORE_RUN_STORE_H
#define CS_CORE_RUN_STORE_H

#include <stdbool.h>
#include <stdint.h>

struct cs_delivery;

typedef struct cs_run_store {
    void *arg;
    /* Whether the calling thread's run took the store. */
    bool (*held)(void *arg);
    /* Ends the run's writes: kept, or undone. False if the store could not
     * do as asked (its transaction is gone): the writes are not kept then. */
    bool (*end_run)(void *arg, bool keep);
    /* Lets the store go (after the run's settlements). */
    void (*unlock)(void *arg);
    /* A record whose writes were kept settles later (its reply gates it):
     * the window waits for it (await_done). Returns the window's generation,
     * which await_done hands back: a settlement that comes after its window
     * rolled back counts for nothing. */
    uint64_t (*await_add)(void *arg);
    /* Its settlement: `kept` false (a retry, a stale record) makes the
     * window's transaction roll back, its writes being in it. */
    void (*await_done)(void *arg, uint64_t gen, bool kept);
    /* Writes were kept for a record that did not settle as handled (it was
     * stale by then): the open transaction must not commit. */
    void (*poison)(void *arg, const char *why);
} cs_run_store;

/* Whether d is one of the deliveries the calling worker's handler is running
 * now (the store is taken only for those, by that thread); if so, marks every
 * record of the run as one whose writes may yet be undone (worker.c). */
bool cs__run_take_store(struct cs_delivery *d);

#endif
