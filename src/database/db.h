/* db.h — what the consumer asks of a service's database (Database mode):
 * the run hooks, the window's lock, transaction and fence. The store itself
 * is database_internal.h's.
 *
 * Owns: nothing (declarations). Locks: cs_db.lock as each call says.
 * Threads: the fetch thread, or the closing thread after it exited. */
#ifndef CS_DATABASE_DB_H
#define CS_DATABASE_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/run_store.h"
#include "cstream/database.h"

/* The pipeline's hooks for runs (run_store.h). */
const cs_run_store *cs__db_run_store(cs_db *db);
/* Binds db to a subscription: false if another one has it. */
bool cs__db_bind(cs_db *db, const char *sub_name);
/* The fetch thread's turn: takes db->lock (a running handler finishes its run
 * first), then waits up to wait_ms for the records whose replies gate their
 * writes. False if some still wait (the transaction is poisoned then). */
bool cs__db_lock_window(cs_db *db, int wait_ms);
/* Whether the calling thread's handler run holds a database (any). */
bool cs__db_held_by_this_thread(void);
/* Takes db->lock without waiting for replies (a revoke's bookkeeping). */
void cs__db_lock(cs_db *db);
void cs__db_unlock(cs_db *db);
/* With db->lock held: the open transaction must roll back. */
void cs__db_poison(cs_db *db, const char *why);
/* With db->lock held: opens the transaction if it is not. */
int cs__db_begin(cs_db *db);
/* With db->lock held: after a COMMIT whose answer was lost (cs__db_commit
 * returned -2), reads the rows it wrote: 1 it happened (`committed` is
 * called for each row it wrote), 0 it did not, -1 the database does not
 * answer yet (ask again later). 1 at once if nothing is unknown. */
int cs__db_verify(cs_db *db, const char *group,
                  void (*committed)(void *arg, const char *topic, int32_t partition, int64_t next, const char *settled),
                  void *arg);
/* With db->lock held: whether the transaction is open (runs wrote, or may have). */
bool cs__db_in_txn(const cs_db *db);
/* With db->lock held: commits (0; -1 it did not happen; -2 its answer was
 * lost: cs__db_verify), or rolls back (both close the transaction). */
int cs__db_commit(cs_db *db);
/* Rolling back also holds new runs off for backoff_ms: they would write into
 * a transaction that likely fails again. */
void cs__db_rollback(cs_db *db, int backoff_ms);
/* With db->lock held: whether the open transaction must roll back, and why. */
bool cs__db_poisoned(cs_db *db, char *why, size_t cap);
/* With db->lock held and the transaction open: claims a partition (see
 * cs_db_ops.claim) and remembers its epoch. */
int cs__db_claim(cs_db *db, const char *group, const char *topic, int32_t partition, int64_t *next, char *settled,
                 size_t cap);
/* With db->lock held and the transaction open: writes a partition's row
 * under its claim. 1, 0 fenced (or never claimed), -1 error. */
int cs__db_write(cs_db *db, const char *group, const char *topic, int32_t partition, int64_t next, const char *settled);
/* Whether a partition's claim was fenced; forgetting a claim (its revoke). */
bool cs__db_fenced(cs_db *db, const char *topic, int32_t partition);
void cs__db_mark_fenced(cs_db *db, const char *topic, int32_t partition);
void cs__db_forget(cs_db *db, const char *topic, int32_t partition);
const char *cs__db_error(const cs_db *db);
/* Fills db->err with `what` and the database's (or the caller's) message;
 * returns -1 (db_error.c). */
int cs__db_fail(cs_db *db, const char *what, const char *detail);

#endif
