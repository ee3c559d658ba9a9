/* sqlite_store.c — the store interface (database_internal.h) on SQLite: the
 * embedded default, a file that several processes may share (each window is
 * one BEGIN IMMEDIATE ... COMMIT; a writer waits up to BUSY_TIMEOUT_MS for
 * another's).
 *
 * Owns: the sqlite3 connection and its prepared statements (db->conn).
 * Locks: none of its own (the caller holds cs_db.lock). Threads: whoever
 * holds cs_db.lock. */
#define _POSIX_C_SOURCE 200809L
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "database/database_internal.h"

/* How long a window waits for another writer of the same file. */
#define BUSY_TIMEOUT_MS 10000

typedef struct sqlite_conn {
    sqlite3 *db;
    sqlite3_stmt *claim, *write, *read;
} sqlite_conn;

static const char CLAIM[] = "INSERT INTO cstream_positions (group_id, topic, partition, next_offset, settled, epoch)"
                            " VALUES (?1, ?2, ?3, -1, '', 1)"
                            " ON CONFLICT (group_id, topic, partition) DO UPDATE SET epoch = epoch + 1"
                            " RETURNING next_offset, settled, epoch";
static const char READ[] = "SELECT next_offset, settled, epoch FROM cstream_positions"
                           " WHERE group_id = ?1 AND topic = ?2 AND partition = ?3";
static const char WRITE[] = "UPDATE cstream_positions SET next_offset = ?4, settled = ?5"
                            " WHERE group_id = ?1 AND topic = ?2 AND partition = ?3 AND epoch = ?6";

static sqlite_conn *conn_of(cs_db *db) { return db->conn; }

static int fail(cs_db *db, const char *what) {
    sqlite_conn *c = conn_of(db);
    return cs__db_fail(db, what, c && c->db ? sqlite3_errmsg(c->db) : "no connection");
}

static int exec_sql(cs_db *db, const char *sql) {
    char *msg = NULL;
    if (sqlite3_exec(conn_of(db)->db, sql, NULL, NULL, &msg) == SQLITE_OK) return 0;
    cs__db_fail(db, sql, msg ? msg : sqlite3_errmsg(conn_of(db)->db));
    sqlite3_free(msg);
    return -1;
}

static void close_conn(cs_db *db) {
    sqlite_conn *c = conn_of(db);
    if (!c) return;
    sqlite3_finalize(c->claim);
    sqlite3_finalize(c->write);
    sqlite3_finalize(c->read);
    sqlite3_close_v2(c->db);
    free(c);
    db->conn = NULL;
}

static int connect_db(cs_db *db) {
    sqlite_conn *c = calloc(1, sizeof *c);
    if (!c) return cs__db_fail(db, "open", "out of memory");
    db->conn = c;
    /* NOMUTEX: cs_db.lock serialises every use of the connection. */
    int rc =
        sqlite3_open_v2(db->target, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        fail(db, "open");
        close_conn(db);
        return -1;
    }
    sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
    /* WAL: readers (a lag query, the tests' counts) never block a window;
     * synchronous=FULL: a committed window survives a power cut too. */
    if (exec_sql(db, "PRAGMA journal_mode=WAL") || exec_sql(db, "PRAGMA synchronous=FULL") ||
        cs__db_positions_table(db)) {
        close_conn(db);
        return -1;
    }
    if (sqlite3_prepare_v2(c->db, CLAIM, -1, &c->claim, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(c->db, WRITE, -1, &c->write, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(c->db, READ, -1, &c->read, NULL) != SQLITE_OK) {
        fail(db, "prepare");
        close_conn(db);
        return -1;
    }
    return 0;
}

static int begin_txn(cs_db *db) { return exec_sql(db, "BEGIN IMMEDIATE"); }

static void bind_key(sqlite3_stmt *st, const char *group, const char *topic, int32_t partition) {
    sqlite3_bind_text(st, 1, group, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, topic, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, partition);
}

static int claim(cs_db *db, const char *group, const char *topic, int32_t partition, int64_t *epoch, int64_t *next,
                 char *settled, size_t cap) {
    sqlite3_stmt *st = conn_of(db)->claim;
    sqlite3_reset(st);
    bind_key(st, group, topic, partition);
    if (sqlite3_step(st) != SQLITE_ROW) {
        fail(db, "claim");
        sqlite3_reset(st);
        return -1;
    }
    *next = sqlite3_column_int64(st, 0);
    const unsigned char *text = sqlite3_column_text(st, 1);
    snprintf(settled, cap, "%s", text ? (const char *)text : "");
    *epoch = sqlite3_column_int64(st, 2);
    /* RETURNING hands its rows out before the statement completes. */
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : fail(db, "claim");
}

static int write_row(cs_db *db, const char *group, const char *topic, int32_t partition, int64_t epoch, int64_t next,
                     const char *settled) {
    sqlite3_stmt *st = conn_of(db)->write;
    sqlite3_reset(st);
    bind_key(st, group, topic, partition);
    sqlite3_bind_int64(st, 4, next);
    sqlite3_bind_text(st, 5, settled, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, epoch);
    int rc = sqlite3_step(st);
    int changed = sqlite3_changes(conn_of(db)->db);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) return fail(db, "position write");
    return changed > 0 ? 1 : 0;
}

/* A failed COMMIT of a local file did not happen (SQLite answers for it
 * before it returns). */
static int commit_txn(cs_db *db) { return exec_sql(db, "COMMIT"); }

static bool txn_open(cs_db *db) { return sqlite3_get_autocommit(conn_of(db)->db) == 0; }

static int read_row(cs_db *db, const char *group, const char *topic, int32_t partition, int64_t *epoch, int64_t *next,
                    char *settled, size_t cap) {
    sqlite3_stmt *st = conn_of(db)->read;
    sqlite3_reset(st);
    bind_key(st, group, topic, partition);
    int rc = sqlite3_step(st);
    *epoch = 0;
    *next = -1;
    settled[0] = '\0';
    if (rc == SQLITE_ROW) {
        *next = sqlite3_column_int64(st, 0);
        const unsigned char *text = sqlite3_column_text(st, 1);
        snprintf(settled, cap, "%s", text ? (const char *)text : "");
        *epoch = sqlite3_column_int64(st, 2);
    }
    sqlite3_reset(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : fail(db, "read");
}

static void rollback_txn(cs_db *db) {
    /* Fails only if SQLite rolled back by itself (an I/O error): then nothing is open. */
    if (sqlite3_get_autocommit(conn_of(db)->db) == 0) exec_sql(db, "ROLLBACK");
}

static void *handle(cs_db *db) { return conn_of(db)->db; }

const cs_db_ops cs__sqlite_ops = {
    .kind = "sqlite",
    .connect = connect_db,
    .exec = exec_sql,
    .begin = begin_txn,
    .claim = claim,
    .write = write_row,
    .commit = commit_txn,
    .txn_open = txn_open,
    .read = read_row,
    .rollback = rollback_txn,
    .close = close_conn,
    .handle = handle,
};
