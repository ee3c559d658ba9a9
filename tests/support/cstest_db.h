/* cstest_db.h — the Database mode tests' view of both stores, so that one
 * test body runs on SQLite and on PostgreSQL (tests/support/cstest_db.c):
 * which store this run uses, the test's own checker connection (statements
 * and one-integer queries, as an independent reader would make them), the
 * handler's effect row written through the subscription's connection, and
 * the scripts/postgres server stopped, killed and started.
 *
 * The store: CSTEST_DATABASE_URL, a PostgreSQL URL (tests/with-postgres
 * exports it from scripts/postgres), or, unset or empty, a SQLite file per
 * test under /tmp. On PostgreSQL every test shares one database: its rows
 * are told apart by their topic (a fresh one per test) and its effects table
 * by a name of its own (cstdb_effects_name). */
#ifndef CSTEST_DB_H
#define CSTEST_DB_H

#include <stdbool.h>
#include <stddef.h>

#include "cstream.h"
#include "cstream/database.h"

/* Whether this run's store is PostgreSQL (CSTEST_DATABASE_URL set). */
bool cstdb_is_postgres(void);

/* The URL of the store for the test `name` (letters, digits, '_'): the
 * PostgreSQL URL, or "sqlite:/tmp/cstream-dbtest-<pid>-<name>.sqlite" with
 * the file and its -wal and -shm removed first. */
void cstdb_url(const char *name, char *url, size_t cap);

/* The name of the test's effects table, "effects_<name>_<pid>": unique on a
 * shared PostgreSQL database, so that tests and runs never see each other's. */
void cstdb_effects_name(const char *name, char *table, size_t cap);

/* Removes what cstdb_url made for a SQLite store (the file); nothing on PostgreSQL. */
void cstdb_remove(const char *url);

/* The test's checker connection to the store of `url`. Fails the test if it
 * cannot connect. On PostgreSQL a connection the server dropped (a restart) is
 * made again at the next statement. Main thread. */
typedef struct cstdb cstdb;
cstdb *cstdb_open(const char *url);
void cstdb_close(cstdb *c);

/* Runs one or more statements (printf format); fails the test on an error. */
void cstdb_exec(cstdb *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The first column of the first row as an integer (printf format); -999 if
 * there is no row or the value is NULL. Fails the test on an error. */
long long cstdb_query(cstdb *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The same for polls that must survive a database that is down: false (and
 * no failure) on an error. */
bool cstdb_try_query(cstdb *c, long long *value, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Creates (dropping it first) the effects table `table`:
 * (topic, partition, record_offset, attempt). `offset` is reserved in
 * PostgreSQL, hence record_offset. */
void cstdb_create_effects(cstdb *c, const char *table);

/* From a handler: inserts the delivery's effect row (topic, partition,
 * offset, attempt) into `table` through the subscription's connection,
 * cs_delivery_sqlite() or cs_delivery_postgres() after cs_db_kind(db). False
 * if the connection was not given or the insert failed (the handler then
 * returns CS_RETRY). */
bool cstdb_write_effect(cs_delivery *d, const cs_db *db, const char *table);

/* Runs `scripts/postgres <verb>` (restart, kill, start) with this process's
 * environment, so CSTREAM_PG_DIR names the same server; fails the test if it
 * exits with an error. */
void cstdb_server(const char *verb);

/* Removes a SQLite file and the two files its WAL mode keeps beside it. */
void cstdb_unlink_sqlite(const char *path);

#endif
