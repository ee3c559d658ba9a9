/* database_internal.h — a service's database (cs_db): the connection, the
 * transaction a window's runs write into, the positions table and the owner
 * fence, behind one small store interface with two implementations
 * (sqlite_store.c, postgres_store.c).
 *
 * Owns: cs_db. Locks: cs_db.lock (lock order: level 1), held by a run from
 * its first write until its settlements, and by the fetch thread for a
 * window commit or a claim; cs_db.await_mx (a leaf), the count of records
 * whose writes wait for their reply. Threads: workers (runs), the fetch
 * thread (commits, claims), any settling thread (await_done). */
#ifndef CS_DATABASE_INTERNAL_H
#define CS_DATABASE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/run_store.h"
#include "cstream/database.h"
#include "database/db.h"

/* The store interface: each call returns 0 on success, -1 with db->err set.
 * Called with db->lock held. */
typedef struct cs_db_ops {
    const char *kind;
    /* Connects (again); checks or creates the positions table. */
    int (*connect)(cs_db *db);
    int (*exec)(cs_db *db, const char *sql);
    /* Opens the window's transaction. */
    int (*begin)(cs_db *db);
    /* In an open transaction: bumps the partition's epoch (a row with
     * next_offset -1 and epoch 1 if it has none) and reads its row. */
    int (*claim)(cs_db *db, const char *group, const char *topic, int32_t partition, int64_t *epoch, int64_t *next,
                 char *settled, size_t cap);
    /* In an open transaction: the row, where its epoch is still `epoch`.
     * 1 written, 0 fenced (another owner bumped it), -1 error. */
    int (*write)(cs_db *db, const char *group, const char *topic, int32_t partition, int64_t epoch, int64_t next,
                 const char *settled);
    /* 0 committed, -1 not committed, -2 not known (the connection broke
     * before the answer came). */
    int (*commit)(cs_db *db);
    /* Whether the connection has a transaction open (the database may have
     * rolled one back by itself). */
    bool (*txn_open)(cs_db *db);
    /* Outside a transaction: a partition's row as it is (no row: *next -1,
     * *epoch 0). Used to learn whether a commit whose answer was lost
     * happened. */
    int (*read)(cs_db *db, const char *group, const char *topic, int32_t partition, int64_t *epoch, int64_t *next,
                char *settled, size_t cap);
    void (*rollback)(cs_db *db);
    void (*close)(cs_db *db);
    void *(*handle)(cs_db *db); /* sqlite3 *, PGconn * */
} cs_db_ops;

/* Creates the positions table if missing and checks its columns
 * (positions_table.c); -1 with db->err naming the column. */
int cs__db_positions_table(cs_db *db);

extern const cs_db_ops cs__sqlite_ops;
extern const cs_db_ops cs__postgres_ops;

/* One partition this instance claimed: the epoch its commits are fenced with. */
typedef struct cs_db_claim {
    char *topic;
    int32_t partition;
    int64_t owner_epoch;
    bool fenced;
    /* What the open window wrote for it (written), kept until that window's
     * COMMIT is known to have happened or not. */
    bool written;
    int64_t written_next;
    char *written_settled;
} cs_db_claim;

struct cs_db {
    const cs_db_ops *impl;
    char *target;  /* what to connect to: a path, or libpq's conninfo */
    char *shown;   /* for messages: the path, or host/port/db without a password */
    void *conn;    /* sqlite3 *, PGconn * */
    char err[512]; /* the last error */

    pthread_mutex_t lock;
    bool in_txn;           /* the window's transaction is open */
    bool poisoned;         /* it must roll back (see poison) */
    bool release_pending;  /* the last kept run's savepoint, released with the next run's (run_end) */
    int64_t next_begin_ms; /* after a rollback: no run begins a transaction before this */
    char poison_why[512];
    pthread_mutex_t await_mx;
    pthread_cond_t await_cv;
    size_t awaiting;     /* records whose writes are in the transaction, settled later */
    bool await_poisoned; /* one of them did not settle as handled */
    uint64_t await_gen;  /* bumped by every rollback: older settlements count for nothing */
    bool commit_unknown; /* a COMMIT whose answer was lost: verified before anything else */

    char *owner; /* the subscription's name (cs_sub_commit_database) */
    cs_run_store run_store;

    cs_db_claim *claims;
    size_t n_claims, cap_claims;
};

#endif
