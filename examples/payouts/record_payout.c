/* record_payout.c — records each payout in the ledger database, exactly once
 * (Database mode): the payout's row and its account bucket's balance are
 * written through the window's transaction, and cstream commits them with
 * the consumed position. No unique key guards the ledger: a payout recorded
 * twice would show as two rows, and the demo counts them.
 *
 * SQLite by default (a file), PostgreSQL with a URL (PAYOUTS_DATABASE). The
 * statements are the same on both but for their parameters, which are
 * written in here as numbers (the payout's fields are integers). */
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "service.h"

const char LEDGER_SCHEMA[] = "CREATE TABLE IF NOT EXISTS ledger (payout_id BIGINT NOT NULL, amount_cents BIGINT NOT "
                             "NULL, kafka_partition INTEGER NOT NULL, kafka_offset BIGINT NOT NULL);"
                             "CREATE TABLE IF NOT EXISTS balances (bucket INTEGER PRIMARY KEY, cents BIGINT NOT NULL)";

/* One statement in the run's transaction; false if the database refused it. */
static bool run_sql(cs_delivery *d, const cs_db *db, const char *sql) {
    if (!strcmp(cs_db_kind(db), "sqlite")) {
        sqlite3 *c = cs_delivery_sqlite(d);
        return c && sqlite3_exec(c, sql, NULL, NULL, NULL) == SQLITE_OK;
    }
    PGconn *c = cs_delivery_postgres(d);
    if (!c) return false;
    PGresult *r = PQexec(c, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok;
}

cs_outcome record_payout(cs_delivery *d, void *user) {
    const cs_db *db = user;
    const payout *p = cs_delivery_decoded(d);
    if (p->amount_cents == 0) return CS_DROP;
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO ledger (payout_id, amount_cents, kafka_partition, kafka_offset) VALUES (%llu, %llu, %d, "
             "%lld)",
             (unsigned long long)p->id, (unsigned long long)p->amount_cents, (int)cs_delivery_partition(d),
             (long long)cs_delivery_offset(d));
    if (!run_sql(d, db, sql)) {
        cs_delivery_set_reason(d, "ledger insert refused");
        return CS_RETRY; /* the run's writes are undone; the payout comes back */
    }
    snprintf(sql, sizeof sql,
             "INSERT INTO balances (bucket, cents) VALUES (%llu, %llu) ON CONFLICT (bucket) DO UPDATE SET cents = "
             "balances.cents + excluded.cents",
             (unsigned long long)(p->id % LEDGER_BUCKETS), (unsigned long long)p->amount_cents);
    if (!run_sql(d, db, sql)) {
        cs_delivery_set_reason(d, "balance update refused");
        return CS_RETRY;
    }
    return CS_ACK;
}
