/* cstest_db.c — the Database mode tests' view of SQLite and PostgreSQL
 * (cstest_db.h): the store this run uses, the checker connection, the
 * handler's effect row, and the scripts/postgres server's restarts.
 *
 * The checker is the test's own connection, never the subscription's: what
 * it counts is what the database committed, as any other reader sees it. */
#define _POSIX_C_SOURCE 200809L
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cstest.h"
#include "cstest_db.h"

/* How long the checker's SQLite connection waits for a window's write lock:
 * a window commits within a commit interval, but a slow sanitizer build
 * holds it longer. */
#define SQLITE_BUSY_MS 30000

struct cstdb {
    bool postgres;
    sqlite3 *lite;
    PGconn *pg;
};

static const char *postgres_url(void) {
    const char *url = getenv("CSTEST_DATABASE_URL");
    return url && *url ? url : NULL;
}

bool cstdb_is_postgres(void) { return postgres_url() != NULL; }

static void sqlite_path(const char *name, char *path, size_t cap) {
    snprintf(path, cap, "/tmp/cstream-dbtest-%d-%s.sqlite", (int)getpid(), name);
}

void cstdb_unlink_sqlite(const char *path) {
    char side[600];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}

void cstdb_url(const char *name, char *url, size_t cap) {
    if (postgres_url()) {
        snprintf(url, cap, "%s", postgres_url());
        return;
    }
    char path[512];
    sqlite_path(name, path, sizeof path);
    cstdb_unlink_sqlite(path);
    snprintf(url, cap, "sqlite:%s", path);
}

void cstdb_effects_name(const char *name, char *table, size_t cap) {
    snprintf(table, cap, "effects_%s_%d", name, (int)getpid());
}

void cstdb_remove(const char *url) {
    if (strncmp(url, "sqlite:", 7) == 0) cstdb_unlink_sqlite(url + 7);
}

cstdb *cstdb_open(const char *url) {
    cstdb *c = calloc(1, sizeof *c);
    assert_non_null(c);
    if (strncmp(url, "sqlite:", 7) == 0) {
        if (sqlite3_open(url + 7, &c->lite) != SQLITE_OK) fail_msg("sqlite %s: %s", url, sqlite3_errmsg(c->lite));
        sqlite3_busy_timeout(c->lite, SQLITE_BUSY_MS);
        /* WAL, as the subscription's connection sets it: the checker's
         * reads then never wait for a window. */
        cstdb_exec(c, "PRAGMA journal_mode=WAL");
        return c;
    }
    c->postgres = true;
    c->pg = PQconnectdb(url);
    if (PQstatus(c->pg) != CONNECTION_OK) fail_msg("postgresql %s: %s", url, PQerrorMessage(c->pg));
    /* DROP ... IF EXISTS and CREATE ... IF NOT EXISTS tell of what was not
     * there as NOTICEs; they are not the test's output. */
    cstdb_exec(c, "SET client_min_messages = warning");
    return c;
}

void cstdb_close(cstdb *c) {
    if (!c) return;
    if (c->lite) sqlite3_close(c->lite);
    if (c->pg) PQfinish(c->pg);
    free(c);
}

/* One PostgreSQL statement (or several): its result, or NULL with the
 * reason in err. A connection the server dropped (scripts/postgres restart
 * or kill) is made again and the statement tried once more on it. */
static PGresult *pg_run(cstdb *c, const char *sql, char *err, size_t cap) {
    for (int attempt = 0; attempt < 2; attempt++) {
        if (PQstatus(c->pg) != CONNECTION_OK) {
            PQreset(c->pg);
            if (PQstatus(c->pg) != CONNECTION_OK) break;
            PQclear(PQexec(c->pg, "SET client_min_messages = warning"));
        }
        PGresult *r = PQexec(c->pg, sql);
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
        PQclear(r);
        if (PQstatus(c->pg) == CONNECTION_OK) break; /* the statement's own error: not tried again */
    }
    snprintf(err, cap, "%s", PQerrorMessage(c->pg));
    return NULL;
}

/* Runs sql; for a query, its first value into *value (-999: no row, or NULL). */
static bool run(cstdb *c, const char *sql, long long *value, char *err, size_t cap) {
    if (value) *value = -999;
    if (c->postgres) {
        PGresult *r = pg_run(c, sql, err, cap);
        if (!r) return false;
        if (value && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
            *value = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
        return true;
    }
    if (!value) {
        char *msg = NULL;
        if (sqlite3_exec(c->lite, sql, NULL, NULL, &msg) == SQLITE_OK) return true;
        snprintf(err, cap, "%s", msg ? msg : sqlite3_errmsg(c->lite));
        sqlite3_free(msg);
        return false;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(c->lite, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, cap, "%s", sqlite3_errmsg(c->lite));
        return false;
    }
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) *value = sqlite3_column_int64(st, 0);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) snprintf(err, cap, "%s", sqlite3_errmsg(c->lite));
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE;
}

void cstdb_exec(cstdb *c, const char *fmt, ...) {
    char sql[4096], err[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    if (!run(c, sql, NULL, err, sizeof err)) fail_msg("%s: %s", sql, err);
}

long long cstdb_query(cstdb *c, const char *fmt, ...) {
    char sql[4096], err[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    long long v;
    if (!run(c, sql, &v, err, sizeof err)) fail_msg("%s: %s", sql, err);
    return v;
}

bool cstdb_try_query(cstdb *c, long long *value, const char *fmt, ...) {
    char sql[4096], err[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    return run(c, sql, value, err, sizeof err);
}

void cstdb_create_effects(cstdb *c, const char *table) {
    cstdb_exec(c,
               "DROP TABLE IF EXISTS %s; CREATE TABLE %s (topic TEXT NOT NULL, partition INTEGER NOT NULL, "
               "record_offset BIGINT NOT NULL, attempt INTEGER NOT NULL)",
               table, table);
}

static bool write_sqlite(cs_delivery *d, const char *table) {
    sqlite3 *db = cs_delivery_sqlite(d);
    if (!db) return false;
    char sql[256];
    snprintf(sql, sizeof sql, "INSERT INTO %s (topic, partition, record_offset, attempt) VALUES (?1, ?2, ?3, ?4)",
             table);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return false;
    sqlite3_bind_text(st, 1, cs_delivery_topic(d), -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, cs_delivery_partition(d));
    sqlite3_bind_int64(st, 3, cs_delivery_offset(d));
    sqlite3_bind_int(st, 4, cs_delivery_attempt(d));
    bool ok = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_finalize(st);
    return ok;
}

static bool write_postgres(cs_delivery *d, const char *table) {
    PGconn *db = cs_delivery_postgres(d);
    if (!db) return false;
    char sql[256], part[16], off[24], att[16];
    snprintf(sql, sizeof sql,
             "INSERT INTO %s (topic, partition, record_offset, attempt) VALUES ($1, $2::int, $3::bigint, $4::int)",
             table);
    snprintf(part, sizeof part, "%d", (int)cs_delivery_partition(d));
    snprintf(off, sizeof off, "%lld", (long long)cs_delivery_offset(d));
    snprintf(att, sizeof att, "%d", (int)cs_delivery_attempt(d));
    const char *params[4] = {cs_delivery_topic(d), part, off, att};
    PGresult *r = PQexecParams(db, sql, 4, NULL, params, NULL, NULL, 0);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok;
}

bool cstdb_write_effect(cs_delivery *d, const cs_db *db, const char *table) {
    return strcmp(cs_db_kind(db), "postgresql") == 0 ? write_postgres(d, table) : write_sqlite(d, table);
}

void cstdb_server(const char *verb) {
    char *argv[] = {CSTREAM_SOURCE_DIR "/scripts/postgres", (char *)verb, NULL};
    /* Not cst_spawn: its child blocks SIGTERM and SIGINT, and the server
     * that `start` launches would inherit the mask that pg_ctl stop signals
     * through. */
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    assert_true(pid > 0);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) fail_msg("scripts/postgres %s: waitpid failed", verb);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("scripts/postgres %s failed (status %d)", verb, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}
