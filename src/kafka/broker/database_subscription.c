/* database_subscription.c — cs_sub_commit_database (cstream/database.h): a
 * subscription whose positions live in the service's database. The window
 * commits are the consumer's (src/kafka/consumer/database_window.c).
 *
 * Owns: the subscription's db pointer (borrowed from the service). Locks:
 * none. Threads: the configuring thread, before start. */
#include "base/error.h"
#include "database/db.h"
#include "kafka/kafka_internal.h"

cs_err cs_sub_commit_database(cs_sub *s, cs_db *db) {
    if (!s || !db) return cs__fail(CS_ERR_ARG, "cs_sub_commit_database: subscription and database must not be NULL");
    cs_err err = cs_sub_commit_mode(s, CS_COMMIT_DATABASE);
    if (err) return err;
    /* One transaction per window holds every run's writes: a second
     * subscription's commits would carry the first one's writes without its
     * positions. */
    if (!cs__db_bind(db, s->name))
        return cs__fail(CS_ERR_ARG,
                        "cs_sub_commit_database(%s): the database is another subscription's; open one "
                        "cs_db per subscription",
                        s->name);
    s->db = db;
    return CS_OK;
}
