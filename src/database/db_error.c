/* db_error.c — a database's last error: what the stores (sqlite_store.c,
 * postgres_store.c) and database.c fill, and what the consumer's log lines
 * read. Its own file so that the stores, which database.c selects, do not
 * call back into it.
 *
 * Owns: cs_db.err. Locks: none (the caller holds cs_db.lock). Threads:
 * whoever holds cs_db.lock. */
#include <stdio.h>

#include "database/database_internal.h"

int cs__db_fail(cs_db *db, const char *what, const char *detail) {
    snprintf(db->err, sizeof db->err, "%s: %s", what, detail ? detail : "unknown error");
    return -1;
}

const char *cs__db_error(const cs_db *db) { return db->err; }
