/* positions_table.c — the table both stores keep positions in: created if
 * missing, and checked to have every column cstream reads or writes, so that
 * a table of another shape fails at start, naming the column, and not at the
 * first commit (docs/database.md has the table).
 *
 * Owns: nothing (the SQL). Locks: none (the store calls it while it
 * connects, under cs_db.lock or before anyone else has the db). Threads:
 * whoever connects the store. */
#include <stdio.h>
#include <string.h>

#include "database/database_internal.h"

static const char CREATE_TABLE[] = "CREATE TABLE IF NOT EXISTS cstream_positions ("
                                   " group_id TEXT NOT NULL,"
                                   " topic TEXT NOT NULL,"
                                   " partition INTEGER NOT NULL,"
                                   " next_offset BIGINT NOT NULL,"
                                   " settled TEXT NOT NULL,"
                                   " epoch BIGINT NOT NULL,"
                                   " PRIMARY KEY (group_id, topic, partition))";
static const char CHECK_TABLE[] =
    "SELECT group_id, topic, partition, next_offset, settled, epoch FROM cstream_positions LIMIT 0";

int cs__db_positions_table(cs_db *db) {
    if (db->impl->exec(db, CREATE_TABLE) != 0) return -1;
    if (db->impl->exec(db, CHECK_TABLE) == 0) return 0;
    /* The store's message names the column; the statement before it does not help. */
    char why[sizeof db->err];
    snprintf(why, sizeof why, "%s", db->err);
    size_t n = strlen(CHECK_TABLE);
    const char *msg = strncmp(why, CHECK_TABLE, n) == 0 && why[n] == ':' ? why + n + 2 : why;
    return cs__db_fail(db, "the positions table cstream_positions does not match cstream's (docs/database.md)", msg);
}
