/** @file
 * cstream/database.h — exactly-once into a database: the commit mode whose
 * positions live in the service's own database (CS_COMMIT_DATABASE).
 *
 * A handler writes its effects (a payout row, a balance update) through the
 * connection cs_delivery_sqlite() or cs_delivery_postgres() gives it. Those
 * writes join the subscription's open database transaction, and cstream
 * writes the consumed positions into the same transaction when it commits a
 * window (every cs_sub_commit_interval_ms, or once cs_sub_window_records
 * records settled). Both commit, or neither does: after a crash every record
 * whose effects were not committed is read again, and none whose effects were
 * committed is. Kafka's committed offsets are written too, after the database
 * commit, for lag tools only: positions are read from the database alone.
 *
 * The positions table, created if missing:
 *
 *     CREATE TABLE cstream_positions (
 *         group_id    TEXT    NOT NULL,
 *         topic       TEXT    NOT NULL,
 *         partition   INTEGER NOT NULL,
 *         next_offset BIGINT  NOT NULL,  -- the lowest record not settled (-1: none yet)
 *         settled     TEXT    NOT NULL,  -- records settled above it and attempt counts (cs2)
 *         epoch       BIGINT  NOT NULL,  -- the owner's fence, bumped at every assignment
 *         PRIMARY KEY (group_id, topic, partition));
 *
 * On assignment an instance bumps the partition's epoch and reads its row;
 * each window commit writes the row only where the epoch is still its own.
 * An instance that lost a partition without knowing it (paused, cut off from
 * the group) finds its epoch gone: its whole window rolls back, that
 * partition stops being handled (an ERROR line and the counter
 * `db_fenced` of cs_sub_stats), and the others are read again from their
 * committed positions.
 *
 * Rules for handlers (docs/database.md says why):
 * - The connection is the handler's from its first cs_delivery_* call until
 *   the run's outcome is settled; other workers wait for it meanwhile. Each
 *   run writes inside a savepoint: a retry (or a failed write the handler
 *   answers with CS_RETRY) undoes that run's writes only.
 * - A handler that used the connection settles before it returns: its
 *   writes are rolled back if it returns CS_PENDING, and the delivery's later
 *   ack counts as a retry.
 * - A batch handler's writes are one savepoint: if any element is retried,
 *   all are, each on its own.
 * - Do not BEGIN, COMMIT or ROLLBACK yourself; savepoints of your own nest.
 * - Replies, cs_delivery_publish and dead letters are at-least-once: a reply
 *   still gates its record, and the window commits only once every reply
 *   of a record whose writes it holds was delivered (else it rolls back).
 *
 * Threads: cs_db_open and cs_db_free on the configuring thread; the
 * connection getters from the handler of the delivery. */
#ifndef CSTREAM_DATABASE_H
#define CSTREAM_DATABASE_H

#include "cstream/export.h"

#include "cstream/delivery.h"
#include "cstream/error.h"
#include "cstream/kafka.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A service's database: one connection, the positions table, the fence.
 * Opaque; one subscription uses it. */
typedef struct cs_db cs_db;

/** Opens a database and checks (or creates) its positions table.
 * @param url "sqlite:PATH" (a file, created if missing; "sqlite::memory:"
 *        for a private one) or a PostgreSQL URL or keyword string
 *        ("postgresql://user@host:port/db", "postgres://...",
 *        "host=... dbname=...").
 * @param[out] out the database, freed with cs_db_free after the app that
 *        uses it was freed.
 * @retval CS_OK opened.
 * @retval CS_ERR_ARG url or out is NULL, or url names no known kind.
 * @retval CS_ERR_UNAVAILABLE the database refused the connection.
 * @retval CS_ERR_STATE the positions table exists with other columns (the
 *         message names the table and the column). */
CS_API cs_err cs_db_open(const char *url, cs_db **out);

/** Closes the connection (an open transaction is rolled back).
 * @param db the database, or NULL (ignored). */
CS_API void cs_db_free(cs_db *db);

/** Runs statements outside any window (autocommit): the service's own
 * schema at start, say. Call it before the app starts or from its start-up
 * hook.
 * @param db the database.
 * @param sql one or more statements.
 * @retval CS_OK done.
 * @retval CS_ERR_ARG db or sql is NULL.
 * @retval CS_ERR_STATE a window's transaction is open (the app runs).
 * @retval CS_ERR_UNAVAILABLE the database refused it (the message says why). */
CS_API cs_err cs_db_exec(cs_db *db, const char *sql);

/** The kind of store.
 * @param db the database.
 * @return "sqlite" or "postgresql" (NULL if db is NULL). */
CS_API const char *cs_db_kind(const cs_db *db);

/** Sets the subscription's commit mode to CS_COMMIT_DATABASE with `db` as
 * its store. `db` must outlive the app; one subscription per database.
 * @param s the subscription.
 * @param db its database.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s or db is NULL, or db is another subscription's.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_commit_database(cs_sub *s, cs_db *db);

/** The SQLite connection for d's writes, inside the window's transaction
 * and the run's savepoint (see the rules above).
 * @param d the delivery being handled.
 * @return the connection (sqlite3 *), the run's until its outcome is
 *         settled; NULL if d's subscription is not in Database mode on
 *         SQLite, if d is not current any more, or if the transaction could
 *         not begin (cs_errmsg() says why; return CS_RETRY). */
CS_API struct sqlite3 *cs_delivery_sqlite(cs_delivery *d);

/** The PostgreSQL connection for d's writes, as cs_delivery_sqlite.
 * @param d the delivery being handled.
 * @return the connection (PGconn *), or NULL as cs_delivery_sqlite. */
CS_API struct pg_conn *cs_delivery_postgres(cs_delivery *d);

#ifdef __cplusplus
}
#endif

#endif
