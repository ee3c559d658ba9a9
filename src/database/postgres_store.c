/* postgres_store.c — the store interface (database_internal.h) on
 * PostgreSQL through libpq. Each window is one transaction at READ
 * COMMITTED: a position write re-reads the row's latest committed epoch, so
 * a newer owner's claim fences it, and a claim waits for an older owner's
 * window that holds the row (then reads what it committed). A connection
 * that broke is made again at the next transaction.
 *
 * Owns: the PGconn (db->conn). Locks: none of its own (the caller holds
 * cs_db.lock). Threads: whoever holds cs_db.lock. */
#define _POSIX_C_SOURCE 200809L
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "database/database_internal.h"

static const char CLAIM[] =
    "INSERT INTO cstream_positions AS p (group_id, topic, partition, next_offset, settled, epoch)"
    " VALUES ($1, $2, $3::int, -1, '', 1)"
    " ON CONFLICT (group_id, topic, partition) DO UPDATE SET epoch = p.epoch + 1"
    " RETURNING next_offset, settled, epoch";
static const char READ[] = "SELECT next_offset, settled, epoch FROM cstream_positions"
                           " WHERE group_id = $1 AND topic = $2 AND partition = $3::int";
static const char WRITE[] = "UPDATE cstream_positions SET next_offset = $4::bigint, settled = $5"
                            " WHERE group_id = $1 AND topic = $2 AND partition = $3::int AND epoch = $6::bigint";

static PGconn *conn_of(cs_db *db) { return db->conn; }

/* libpq's messages end with a newline. */
static int fail(cs_db *db, const char *what, const char *msg) {
    char buf[400];
    snprintf(buf, sizeof buf, "%s", msg ? msg : "unknown error");
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = '\0';
    return cs__db_fail(db, what, buf);
}

static int exec_sql(cs_db *db, const char *sql) {
    PGresult *r = PQexec(conn_of(db), sql);
    ExecStatusType st = PQresultStatus(r);
    int rc = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? 0 : fail(db, sql, PQerrorMessage(conn_of(db)));
    PQclear(r);
    return rc;
}

static void close_conn(cs_db *db) {
    if (db->conn) PQfinish(conn_of(db));
    db->conn = NULL;
}

static int connect_db(cs_db *db) {
    close_conn(db);
    db->conn = PQconnectdb(db->target);
    if (!db->conn) return cs__db_fail(db, "connect", "out of memory");
    if (PQstatus(conn_of(db)) != CONNECTION_OK) {
        fail(db, "connect", PQerrorMessage(conn_of(db)));
        close_conn(db);
        return -1;
    }
    /* The creation's notice when the table exists goes nowhere. */
    exec_sql(db, "SET client_min_messages = warning");
    if (cs__db_positions_table(db)) {
        close_conn(db);
        return -1;
    }
    return 0;
}

static int begin_txn(cs_db *db) {
    /* A connection that broke (a server restart) is made again here, where
     * no transaction is open: nothing of a window is lost by it. One the
     * server ended while it was idle still reads CONNECTION_OK until it is
     * used: its BEGIN is what finds out, and it is made again for one more
     * BEGIN (else the run that asked would retry for nothing). */
    for (int tries = 0;; tries++) {
        if (!db->conn || PQstatus(conn_of(db)) != CONNECTION_OK) {
            if (db->conn) PQreset(conn_of(db));
            if (!db->conn || PQstatus(conn_of(db)) != CONNECTION_OK) {
                if (db->conn) return fail(db, "reconnect", PQerrorMessage(conn_of(db)));
                if (connect_db(db) != 0) return -1;
            }
        }
        int rc = exec_sql(db, "BEGIN ISOLATION LEVEL READ COMMITTED");
        if (rc == 0 || tries > 0 || PQstatus(conn_of(db)) == CONNECTION_OK) return rc;
    }
}

static int claim(cs_db *db, const char *group, const char *topic, int32_t partition, int64_t *epoch, int64_t *next,
                 char *settled, size_t cap) {
    char part[16];
    snprintf(part, sizeof part, "%d", (int)partition);
    const char *params[3] = {group, topic, part};
    PGresult *r = PQexecParams(conn_of(db), CLAIM, 3, NULL, params, NULL, NULL, 0);
    int rc = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        *next = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        snprintf(settled, cap, "%s", PQgetvalue(r, 0, 1));
        *epoch = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
        rc = 0;
    } else {
        fail(db, "claim", PQerrorMessage(conn_of(db)));
    }
    PQclear(r);
    return rc;
}

static int write_row(cs_db *db, const char *group, const char *topic, int32_t partition, int64_t epoch, int64_t next,
                     const char *settled) {
    char part[16], nx[24], ep[24];
    snprintf(part, sizeof part, "%d", (int)partition);
    snprintf(nx, sizeof nx, "%lld", (long long)next);
    snprintf(ep, sizeof ep, "%lld", (long long)epoch);
    const char *params[6] = {group, topic, part, nx, settled, ep};
    PGresult *r = PQexecParams(conn_of(db), WRITE, 6, NULL, params, NULL, NULL, 0);
    int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? (atoi(PQcmdTuples(r)) > 0 ? 1 : 0)
                                                   : fail(db, "position write", PQerrorMessage(conn_of(db)));
    PQclear(r);
    return rc;
}

static int commit_txn(cs_db *db) {
    PGresult *r = PQexec(conn_of(db), "COMMIT");
    /* A transaction that failed earlier answers COMMIT with ROLLBACK. */
    int rc =
        PQresultStatus(r) == PGRES_COMMAND_OK && strcmp(PQcmdStatus(r), "COMMIT") == 0
            ? 0
            : fail(db, "commit",
                   PQresultStatus(r) == PGRES_COMMAND_OK ? "the transaction had failed" : PQerrorMessage(conn_of(db)));
    /* The connection broke: the server may have committed before the answer
     * was lost. */
    if (rc != 0 && PQstatus(conn_of(db)) != CONNECTION_OK) rc = -2;
    PQclear(r);
    return rc;
}

static bool txn_open(cs_db *db) {
    if (!db->conn || PQstatus(conn_of(db)) != CONNECTION_OK) return false;
    PGTransactionStatusType st = PQtransactionStatus(conn_of(db));
    return st == PQTRANS_INTRANS || st == PQTRANS_INERROR; /* INERROR: a savepoint still rolls back */
}

static int read_row(cs_db *db, const char *group, const char *topic, int32_t partition, int64_t *epoch, int64_t *next,
                    char *settled, size_t cap) {
    if (!db->conn || PQstatus(conn_of(db)) != CONNECTION_OK) {
        if (db->conn) PQreset(conn_of(db));
        if (!db->conn || PQstatus(conn_of(db)) != CONNECTION_OK) {
            if (db->conn) return fail(db, "reconnect", PQerrorMessage(conn_of(db)));
            if (connect_db(db) != 0) return -1;
        }
    }
    char part[16];
    snprintf(part, sizeof part, "%d", (int)partition);
    const char *params[3] = {group, topic, part};
    PGresult *r = PQexecParams(conn_of(db), READ, 3, NULL, params, NULL, NULL, 0);
    int rc = -1;
    *epoch = 0;
    *next = -1;
    settled[0] = '\0';
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
        if (PQntuples(r) == 1) {
            *next = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
            snprintf(settled, cap, "%s", PQgetvalue(r, 0, 1));
            *epoch = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
        }
        rc = 0;
    } else {
        fail(db, "read", PQerrorMessage(conn_of(db)));
    }
    PQclear(r);
    return rc;
}

static void rollback_txn(cs_db *db) {
    if (db->conn && PQstatus(conn_of(db)) == CONNECTION_OK && PQtransactionStatus(conn_of(db)) != PQTRANS_IDLE) {
        PGresult *r = PQexec(conn_of(db), "ROLLBACK");
        PQclear(r);
    }
}

static void *handle(cs_db *db) { return db->conn; }

const cs_db_ops cs__postgres_ops = {
    .kind = "postgresql",
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
