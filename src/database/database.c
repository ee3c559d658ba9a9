/* database.c — cstream/database.h: a service's database (cs_db), its
 * connection handed to a handler's run, the run hooks the pipeline calls
 * around it (core/run_store.h), and the window's lock, transaction and
 * claims for the consumer (db.h).
 *
 * A run takes the connection at its handler's first cs_delivery_sqlite or
 * cs_delivery_postgres: db->lock, the transaction opened if it is not, and
 * the savepoint cs_run. The worker ends the savepoint (released, or rolled
 * back to) once the outcomes are known, settles the run's records and lets
 * the lock go (worker.c). The thread's own pointer says which db its run
 * holds, so a second call in the same run returns the same connection.
 *
 * Owns: cs_db (its fields are written here and in the two stores). Locks:
 * cs_db.lock (level 1: a run holds it across its handler, the one lock that
 * is; the settlements it makes take the partition lock under it), and
 * cs_db.await_mx (a leaf). Threads: workers, the fetch thread, settling
 * threads (await_done), the configuring thread (open, free). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"
#include "core/delivery_internal.h"
#include "database/database_internal.h"

/* The db this thread's run holds (NULL: none). */
static _Thread_local cs_db *held_by_run;

/* ---- open and free ------------------------------------------------------------ */

static bool has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* A conninfo for messages: the URL up to its password hidden. */
static char *shown_url(const char *url) {
    char *s = strdup(url);
    if (!s) return NULL;
    char *at = strchr(s, '@');
    char *scheme = strstr(s, "://");
    char *colon = scheme && at ? strchr(scheme + 3, ':') : NULL;
    if (colon && colon < at) memmove(colon, at, strlen(at) + 1); /* user:secret@host -> user@host */
    char *pw = strstr(s, "password=");
    if (pw) {
        char *end = strchr(pw, ' ');
        if (end) memmove(pw + 9, end, strlen(end) + 1);
        else pw[9] = '\0';
    }
    return s;
}

cs_err cs_db_open(const char *url, cs_db **out) {
    if (!url || !out) return cs__fail(CS_ERR_ARG, "cs_db_open: url and out must not be NULL");
    *out = NULL;
    const cs_db_ops *ops = NULL;
    const char *target = url;
    if (has_prefix(url, "sqlite:")) {
        ops = &cs__sqlite_ops;
        target = url + strlen("sqlite:");
        if (has_prefix(target, "//")) target += 2; /* sqlite:///abs/path and sqlite://rel/path */
    } else if (has_prefix(url, "postgresql://") || has_prefix(url, "postgres://") || strchr(url, '=')) {
        ops = &cs__postgres_ops;
    }
    if (!ops || !*target)
        return cs__fail(CS_ERR_ARG,
                        "cs_db_open: \"%s\" is no database URL: use sqlite:PATH or a PostgreSQL URL "
                        "(postgresql://user@host:port/dbname)",
                        url);
    cs_db *db = calloc(1, sizeof *db);
    if (!db) return cs__fail(CS_ERR_NOMEM, "cs_db_open: out of memory");
    db->impl = ops;
    db->target = strdup(target);
    db->shown = ops == &cs__sqlite_ops ? strdup(target) : shown_url(url);
    if (!db->target || !db->shown) {
        free(db->target);
        free(db->shown);
        free(db);
        return cs__fail(CS_ERR_NOMEM, "cs_db_open: out of memory");
    }
    pthread_mutex_init(&db->lock, NULL);
    pthread_mutex_init(&db->await_mx, NULL);
    cs__cond_init_monotonic(&db->await_cv);
    if (ops->connect(db) != 0) {
        /* A positions table with other columns is the service's to fix;
         * anything else is the database not answering. */
        cs_err code = strstr(db->err, "cstream_positions") ? CS_ERR_STATE : CS_ERR_UNAVAILABLE;
        cs_err e = cs__fail(code, "%s database %s: %s", ops->kind, db->shown, db->err);
        cs_db_free(db);
        return e;
    }
    CS_LOG_INFO("database opened kind=%s database=%s", ops->kind, db->shown);
    *out = db;
    return CS_OK;
}

void cs_db_free(cs_db *db) {
    if (!db) return;
    if (db->conn && db->in_txn) db->impl->rollback(db);
    if (db->conn) db->impl->close(db);
    for (size_t i = 0; i < db->n_claims; i++) {
        free(db->claims[i].topic);
        free(db->claims[i].written_settled);
    }
    free(db->claims);
    pthread_cond_destroy(&db->await_cv);
    pthread_mutex_destroy(&db->await_mx);
    pthread_mutex_destroy(&db->lock);
    free(db->target);
    free(db->shown);
    free(db->owner);
    free(db);
}

const char *cs_db_kind(const cs_db *db) { return db ? db->impl->kind : NULL; }

cs_err cs_db_exec(cs_db *db, const char *sql) {
    if (!db || !sql) return cs__fail(CS_ERR_ARG, "cs_db_exec: db and sql must not be NULL");
    pthread_mutex_lock(&db->lock);
    cs_err err = CS_OK;
    if (db->in_txn)
        err = cs__fail(CS_ERR_STATE, "cs_db_exec(%s): a window's transaction is open; run it before the app starts",
                       db->shown);
    else if (db->impl->exec(db, sql) != 0) err = cs__fail(CS_ERR_UNAVAILABLE, "cs_db_exec(%s): %s", db->shown, db->err);
    pthread_mutex_unlock(&db->lock);
    return err;
}

bool cs__db_bind(cs_db *db, const char *sub_name) {
    if (db->owner) return strcmp(db->owner, sub_name) == 0;
    db->owner = strdup(sub_name);
    return db->owner != NULL;
}

/* ---- the window's transaction (fetch thread) ----------------------------------- */

static void poison_locked(cs_db *db, const char *why) {
    if (!db->poisoned) snprintf(db->poison_why, sizeof db->poison_why, "%s", why);
    db->poisoned = true;
}

int cs__db_begin(cs_db *db) {
    if (db->in_txn) return 0;
    if (db->impl->begin(db) != 0) return -1;
    db->in_txn = true;
    return 0;
}

bool cs__db_in_txn(const cs_db *db) { return db->in_txn; }

/* The window's rows are known committed or not: nothing is left to verify. */
static void forget_written(cs_db *db) {
    for (size_t i = 0; i < db->n_claims; i++) {
        db->claims[i].written = false;
        free(db->claims[i].written_settled);
        db->claims[i].written_settled = NULL;
    }
    db->commit_unknown = false;
}

int cs__db_commit(cs_db *db) {
    if (!db->in_txn) return 0;
    db->in_txn = false;
    db->release_pending = false; /* COMMIT releases it */
    int rc = db->impl->commit(db);
    if (rc == -2) {
        db->commit_unknown = true; /* cs__db_verify tells, once the database answers */
        return -2;
    }
    if (rc != 0) db->impl->rollback(db); /* a commit that failed may leave the transaction open (SQLITE_BUSY) */
    forget_written(db);
    return rc;
}

int cs__db_verify(cs_db *db, const char *group,
                  void (*committed)(void *arg, const char *topic, int32_t partition, int64_t next, const char *settled),
                  void *arg) {
    if (!db->commit_unknown) return 1;
    int verdict = -1; /* no row told yet */
    for (size_t i = 0; i < db->n_claims && verdict < 0; i++) {
        cs_db_claim *c = &db->claims[i];
        if (!c->written) continue;
        int64_t epoch, next;
        char settled[4096];
        if (db->impl->read(db, group, c->topic, c->partition, &epoch, &next, settled, sizeof settled) != 0)
            return -1; /* the database does not answer yet */
        /* A row another owner claimed since tells nothing: its window may
         * have written over ours. Ours, it holds what we wrote or not. */
        if (epoch != c->owner_epoch) continue;
        verdict = next == c->written_next && !strcmp(settled, c->written_settled ? c->written_settled : "");
    }
    if (verdict < 0) verdict = 0; /* every row was claimed by others: ours are fenced whatever happened */
    for (size_t i = 0; verdict == 1 && i < db->n_claims; i++) {
        cs_db_claim *c = &db->claims[i];
        if (c->written) committed(arg, c->topic, c->partition, c->written_next, c->written_settled);
    }
    forget_written(db);
    return verdict;
}

void cs__db_rollback(cs_db *db, int backoff_ms) {
    db->next_begin_ms = cs__now_ms() + backoff_ms;
    db->release_pending = false;
    if (db->in_txn) db->impl->rollback(db);
    forget_written(db);
    db->in_txn = false;
    db->poisoned = false;
    db->poison_why[0] = '\0';
    pthread_mutex_lock(&db->await_mx);
    db->await_poisoned = false;
    db->awaiting = 0;
    db->await_gen++;
    pthread_mutex_unlock(&db->await_mx);
}

bool cs__db_poisoned(cs_db *db, char *why, size_t cap) {
    pthread_mutex_lock(&db->await_mx);
    if (db->await_poisoned) poison_locked(db, "a record whose writes it holds was retried or went stale");
    pthread_mutex_unlock(&db->await_mx);
    if (db->poisoned) snprintf(why, cap, "%s", db->poison_why);
    return db->poisoned;
}

bool cs__db_lock_window(cs_db *db, int wait_ms) {
    pthread_mutex_lock(&db->lock);
    /* No run can start meanwhile (it needs db->lock), so the count only
     * falls: each reply's report brings it down. */
    struct timespec until;
    cs__deadline_after(&until, wait_ms); /* await_cv is monotonic: a clock step does not end the wait */
    pthread_mutex_lock(&db->await_mx);
    while (db->awaiting > 0 && pthread_cond_timedwait(&db->await_cv, &db->await_mx, &until) == 0) {}
    bool done = db->awaiting == 0;
    pthread_mutex_unlock(&db->await_mx);
    if (!done) poison_locked(db, "replies of records whose writes it holds were not delivered in time");
    return done;
}

void cs__db_lock(cs_db *db) { pthread_mutex_lock(&db->lock); }

void cs__db_unlock(cs_db *db) { pthread_mutex_unlock(&db->lock); }

void cs__db_poison(cs_db *db, const char *why) {
    if (db->in_txn) poison_locked(db, why);
}

/* ---- claims ------------------------------------------------------------------- */

static cs_db_claim *find_claim(cs_db *db, const char *topic, int32_t partition) {
    for (size_t i = 0; i < db->n_claims; i++)
        if (db->claims[i].partition == partition && !strcmp(db->claims[i].topic, topic)) return &db->claims[i];
    return NULL;
}

int cs__db_claim(cs_db *db, const char *group, const char *topic, int32_t partition, int64_t *next, char *settled,
                 size_t cap) {
    int64_t epoch = 0;
    if (db->impl->claim(db, group, topic, partition, &epoch, next, settled, cap) != 0) return -1;
    cs_db_claim *c = find_claim(db, topic, partition);
    if (!c) {
        if (db->n_claims == db->cap_claims) {
            size_t cap2 = db->cap_claims ? db->cap_claims * 2 : 16;
            cs_db_claim *grown = realloc(db->claims, cap2 * sizeof *grown);
            if (!grown) return cs__db_fail(db, "claim", "out of memory");
            db->claims = grown;
            db->cap_claims = cap2;
        }
        char *t = strdup(topic);
        if (!t) return cs__db_fail(db, "claim", "out of memory");
        c = &db->claims[db->n_claims++];
        *c = (cs_db_claim){.topic = t, .partition = partition};
    }
    c->owner_epoch = epoch;
    c->fenced = false;
    return 0;
}

int cs__db_write(cs_db *db, const char *group, const char *topic, int32_t partition, int64_t next,
                 const char *settled) {
    cs_db_claim *c = find_claim(db, topic, partition);
    if (!c || c->fenced) return 0;
    int rc = db->impl->write(db, group, topic, partition, c->owner_epoch, next, settled);
    if (rc == 1) {
        char *copy = strdup(settled);
        if (!copy) return cs__db_fail(db, "position write", "out of memory");
        free(c->written_settled);
        c->written_settled = copy;
        c->written_next = next;
        c->written = true;
    }
    return rc;
}

bool cs__db_fenced(cs_db *db, const char *topic, int32_t partition) {
    cs_db_claim *c = find_claim(db, topic, partition);
    return c && c->fenced;
}

void cs__db_mark_fenced(cs_db *db, const char *topic, int32_t partition) {
    cs_db_claim *c = find_claim(db, topic, partition);
    if (c) c->fenced = true;
}

void cs__db_forget(cs_db *db, const char *topic, int32_t partition) {
    cs_db_claim *c = find_claim(db, topic, partition);
    if (!c) return;
    free(c->topic);
    free(c->written_settled);
    *c = db->claims[--db->n_claims];
}

/* ---- a handler's run (workers) -------------------------------------------------- */

/* The connection for d's run: the lock, the transaction, the savepoint. */
static void *take_for_run(cs_delivery *d, const cs_db_ops *want, const char *fn) {
    if (!d) {
        cs__fail(CS_ERR_ARG, "%s: d must not be NULL", fn);
        return NULL;
    }
    const cs_run_store *rs = cs__delivery_run_store(d);
    cs_db *db = rs ? rs->arg : NULL;
    if (!db || db->impl != want) {
        cs__fail(CS_ERR_STATE, "%s(%s/%d@%lld): the subscription does not commit into a %s database", fn, d->topic,
                 (int)d->partition, (long long)d->offset, want->kind);
        return NULL;
    }
    /* Only the thread running d's handler, and only for the deliveries it
     * was given: the connection is let go when that run is settled. */
    if (!cs__run_take_store(d)) {
        cs__fail(CS_ERR_STATE, "%s(%s/%d@%lld): only the handler running the delivery may write for it", fn, d->topic,
                 (int)d->partition, (long long)d->offset);
        return NULL;
    }
    if (held_by_run == db) return db->impl->handle(db);
    pthread_mutex_lock(&db->lock);
    /* After a window rolled back, no new one begins until its backoff is
     * over: writes made meanwhile would likely roll back too, and a SQLite
     * file would stay locked against every other writer. */
    for (int64_t wait; !db->in_txn && (wait = db->next_begin_ms - cs__now_ms()) > 0;) {
        pthread_mutex_unlock(&db->lock);
        struct timespec ts = {.tv_sec = wait / 1000, .tv_nsec = (wait % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&db->lock);
    }
    /* Asked under db->lock, after any wait: a rollback's rewind or a fence
     * (both under it) may have made d stale meanwhile, and its writes would
     * then commit without its position. Under the lock nothing can change
     * that until the run settles. A window that must roll back, or whose
     * commit's outcome is not known yet, takes no more writes. */
    const char *refused = !cs__delivery_run_store(d) ? "the partition was rewound, fenced or revoked"
                          : db->poisoned             ? "the window rolls back"
                          : db->commit_unknown       ? "the last commit's outcome is not known yet"
                                                     : NULL;
    if (refused) {
        pthread_mutex_unlock(&db->lock);
        cs__fail(CS_ERR_STALE, "%s(%s/%d@%lld): %s; return CS_RETRY", fn, d->topic, (int)d->partition,
                 (long long)d->offset, refused);
        return NULL;
    }
    /* A transaction the database ended by itself (SQLite rolls back on a
     * full disk, or on INSERT OR ROLLBACK): a savepoint now would begin a new
     * one, and its release would commit the run's writes alone. */
    if (db->in_txn && !db->impl->txn_open(db)) poison_locked(db, "the database rolled the transaction back");
    /* The last kept run's savepoint is released here, in the same round trip
     * as this run's (run_end defers it): one trip per run saved. */
    const char *savepoint = db->release_pending ? "RELEASE SAVEPOINT cs_run; SAVEPOINT cs_run" : "SAVEPOINT cs_run";
    db->release_pending = false;
    if (db->poisoned || cs__db_begin(db) != 0 || db->impl->exec(db, savepoint) != 0) {
        cs__fail(CS_ERR_UNAVAILABLE, "%s(%s/%d@%lld): %s database %s: %s", fn, d->topic, (int)d->partition,
                 (long long)d->offset, db->impl->kind, db->shown, db->err);
        /* A transaction that cannot take a savepoint is unusable. */
        if (db->in_txn) poison_locked(db, db->err);
        pthread_mutex_unlock(&db->lock);
        return NULL;
    }
    held_by_run = db;
    return db->impl->handle(db);
}

struct sqlite3 *cs_delivery_sqlite(cs_delivery *d) {
    return take_for_run(d, &cs__sqlite_ops, "cs_delivery_sqlite");
}

struct pg_conn *cs_delivery_postgres(cs_delivery *d) {
    return take_for_run(d, &cs__postgres_ops, "cs_delivery_postgres");
}

static bool run_held(void *arg) { return held_by_run == arg; }

bool cs__db_held_by_this_thread(void) { return held_by_run != NULL; }

static bool run_end(void *arg, bool keep) {
    cs_db *db = arg;
    /* The transaction may be gone (the database rolled it back by itself):
     * a RELEASE would then commit whatever began since. */
    /* Kept: the savepoint stays until the next run takes its own (the two
     * go in one round trip) or the window commits (COMMIT releases it). */
    int rc = !db->impl->txn_open(db) ? cs__db_fail(db, "savepoint cs_run", "the transaction is no longer open")
             : keep                  ? 0
                                     : db->impl->exec(db, "ROLLBACK TO SAVEPOINT cs_run; RELEASE SAVEPOINT cs_run");
    db->release_pending = keep && rc == 0;
    if (rc != 0) {
        /* The run's writes cannot be told apart from the window's any more. */
        CS_LOG_ERR("database savepoint not %s, the window rolls back kind=%s database=%s error=\"%s\"",
                   keep ? "released" : "rolled back", db->impl->kind, db->shown, db->err);
        poison_locked(db, db->err);
    }
    return rc == 0;
}

static void run_unlock(void *arg) {
    cs_db *db = arg;
    held_by_run = NULL;
    pthread_mutex_unlock(&db->lock);
}

static uint64_t await_add(void *arg) {
    cs_db *db = arg;
    pthread_mutex_lock(&db->await_mx);
    db->awaiting++;
    uint64_t gen = db->await_gen;
    pthread_mutex_unlock(&db->await_mx);
    return gen;
}

static void await_done(void *arg, uint64_t gen, bool kept) {
    cs_db *db = arg;
    pthread_mutex_lock(&db->await_mx);
    /* A window that rolled back forgot its records (cs__db_rollback): one
     * settling now says nothing of the window open now. */
    if (gen == db->await_gen) {
        /* Only a flag: db->lock is above the partition lock this runs under.
         * cs__db_poisoned reads it under db->lock, after the count fell. */
        if (!kept) db->await_poisoned = true;
        if (--db->awaiting == 0) pthread_cond_broadcast(&db->await_cv);
    }
    pthread_mutex_unlock(&db->await_mx);
}

/* Called by the run that holds db (worker.c). */
static void run_poison(void *arg, const char *why) { poison_locked(arg, why); }

const cs_run_store *cs__db_run_store(cs_db *db) {
    db->run_store = (cs_run_store){.arg = db,
                                   .held = run_held,
                                   .end_run = run_end,
                                   .unlock = run_unlock,
                                   .await_add = await_add,
                                   .await_done = await_done,
                                   .poison = run_poison};
    return &db->run_store;
}
