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

typedef struct cs_run_store {
    void *arg;
    /* Whether the calling thread's run took the store. */
    bool (*held)(void *arg);
    /* Ends the run's writes: kept, or undone. */
    void (*end_run)(void *arg, bool keep);
    /* Lets the store go (after the run's settlements). */
    void (*unlock)(void *arg);
    /* A record whose writes were kept settles later (its reply gates it):
     * the window waits for it (await_done). */
    void (*await_add)(void *arg);
    /* Its settlement: `kept` false (a retry, a stale record) makes the
     * window's transaction roll back, its writes being in it. */
    void (*await_done)(void *arg, bool kept);
    /* Writes were kept for a record that did not settle as handled (it was
     * stale by then): the open transaction must not commit. */
    void (*poison)(void *arg, const char *why);
} cs_run_store;

#endif
