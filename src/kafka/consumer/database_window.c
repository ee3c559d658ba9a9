/* database_window.c — Database mode's side of the consumer: the claim of
 * each assigned partition in the service's database (its epoch bumped, its
 * position read: where fetching starts, and the acked set above it), and the
 * window commit: every changed partition's position written, fenced by its
 * epoch, in the transaction that holds the handlers' writes, then COMMIT.
 *
 * A window that cannot commit (the database down or refusing, a record whose
 * writes it holds not settled as handled, a fence) rolls back, and every
 * partition whose records wrote into it is read again from its committed
 * position and acked set, so each record's writes commit once. A fenced
 * partition is another owner's: it is not handled any more. After a commit
 * the same positions go to Kafka, for lag tools only.
 *
 * Owns: nothing (the positions are the database's; the backoff is
 * c->commit's, written here under Database as committer.c does under
 * Transactional). Locks: cs_db.lock for a whole window or claim (level 1);
 * commit_lock under it for the Kafka commit. Threads: the fetch thread, or
 * the closing thread after it exited. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "core/attempts_meta.h"
#include "database/db.h"
#include "kafka/consumer/consumer_internal.h"

/* How long a window waits for the replies that settle records whose writes
 * it holds (their producer's delivery timeout is the real bound). */
#define REPLY_WAIT_MS 30000
/* A window that fails again and again waits at most this long before the
 * next try (as Transactional's aborts, committer.c). */
#define ROLLBACK_BACKOFF_MAX_MS 5000
/* A claim the database refuses is tried this many times before the app stops. */
#define CLAIM_TRIES 5

static const char *group_of(const cs_consumer *c) { return c->sub->group ? c->sub->group : c->sub->k->default_group; }

static void roll_back_assigned(cs_consumer *c, const char *why);
static int verify_last_commit(cs_consumer *c);

/* ---- claims (rebalance.c, at assign) ------------------------------------------- */

static int claim_all(cs_consumer *c, rd_kafka_topic_partition_list_t *l) {
    cs_db *db = c->sub->db;
    if (cs__db_begin(db) != 0) return -1;
    for (int i = 0; i < l->cnt; i++) {
        rd_kafka_topic_partition_t *e = &l->elems[i];
        char settled[CS_META_MAX];
        int64_t next = -1;
        if (cs__db_claim(db, group_of(c), e->topic, e->partition, &next, settled, sizeof settled) != 0) {
            cs__db_rollback(db, 0);
            return -1;
        }
        /* No row yet and a start at the end: the end is written now, so that
         * a crash before the first window does not move the start on past
         * records handled and not committed. */
        if (next < 0 && c->sub->start == CS_START_LATEST) {
            int64_t low = 0, high = 0;
            rd_kafka_resp_err_t err =
                rd_kafka_query_watermark_offsets(c->rk, e->topic, e->partition, &low, &high, 5000);
            if (err || cs__db_write(db, group_of(c), e->topic, e->partition, high, "") != 1) {
                if (err) cs__db_fail(db, "the end offset of a partition with no row", rd_kafka_err2str(err));
                cs__db_rollback(db, 0);
                return -1;
            }
            next = high;
            settled[0] = '\0';
        }
        e->offset = next;
        free(e->metadata);
        e->metadata = strdup(settled); /* freed with the list; out of memory: no acked set, read again */
        e->metadata_size = e->metadata ? strlen(settled) : 0;
    }
    if (cs__db_commit(db) != 0) return -1;
    return 0;
}

rd_kafka_resp_err_t cs__commit_db_claim(cs_consumer *c, rd_kafka_topic_partition_list_t *l) {
    cs_db *db = c->sub->db;
    /* The open window holds writes of partitions kept (a cooperative
     * assign): it commits first, so that the claim is a transaction of its own. */
    cs__commit_db_window(c, true);
    for (int attempt = 1;; attempt++) {
        cs__db_lock_window(db, REPLY_WAIT_MS);
        if (cs__db_in_txn(db)) /* the window did not commit: the claim must not carry its writes */
            roll_back_assigned(c, "a window still open at an assignment");
        int rc = verify_last_commit(c) < 0 ? -1 : claim_all(c, l);
        char why[640];
        snprintf(why, sizeof why, "%s", cs__db_error(db));
        cs__db_unlock(db);
        if (rc == 0) return RD_KAFKA_RESP_ERR_NO_ERROR;
        if (attempt == CLAIM_TRIES) {
            /* Fetching without a position would read from somewhere unknown. */
            cs__app_fatal(c->app, "%s: the database did not give the assigned partitions' positions (%d tries): %s",
                          c->who, CLAIM_TRIES, why);
            return RD_KAFKA_RESP_ERR__FAIL;
        }
        CS_LOG_WARN("database claim failed, tried again subscription=%s attempt=%d error=\"%s\"", c->sub->name, attempt,
                    why);
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 200000000L * attempt};
        nanosleep(&ts, NULL);
    }
}

void cs__commit_db_start_at(cs_consumer *c, rd_kafka_topic_partition_list_t *l,
                            const rd_kafka_topic_partition_list_t *claimed) {
    for (int i = 0; i < l->cnt; i++) {
        rd_kafka_topic_partition_t *e = &l->elems[i];
        const rd_kafka_topic_partition_t *row = rd_kafka_topic_partition_list_find(claimed, e->topic, e->partition);
        /* No row yet: the subscription's start (cs_sub_start_at) decides. */
        e->offset = row && row->offset >= 0            ? row->offset
                    : c->sub->start == CS_START_LATEST ? RD_KAFKA_OFFSET_END
                                                       : RD_KAFKA_OFFSET_BEGINNING;
    }
}

void cs__commit_db_release(cs_consumer *c, const rd_kafka_topic_partition_list_t *l, bool lost) {
    cs_db *db = c->sub->db;
    cs__db_lock(db);
    /* The open window may hold writes of the lost partitions, whose records
     * the new owner handles again: it must not commit. The next window rolls
     * it back and reads the kept partitions again. */
    if (lost) cs__db_poison(db, "partitions lost with writes in the window");
    for (int i = 0; i < l->cnt; i++) cs__db_forget(db, l->elems[i].topic, l->elems[i].partition);
    cs__db_unlock(db);
}

/* ---- the window ------------------------------------------------------------------- */

/* A partition whose records wrote into a window that rolled back: read
 * again from its committed position, with the acked set committed with it. */
static void rewind_db(cs_consumer *c, cs_part *part) {
    int64_t pos;
    char meta[CS_META_MAX];
    cs__part_last_commit(part, &pos, meta, sizeof meta);
    int64_t seek = cs__window_rewind(c->pipe, part);
    if (seek < 0) return;
    uint32_t *runs = malloc(CS_ACKED_MAX_RUNS * sizeof *runs);
    int64_t offs[CS_PRIOR_MAX];
    uint32_t atts[CS_PRIOR_MAX];
    cs_meta_read rd = {
        .offsets = offs, .attempts = atts, .max = CS_PRIOR_MAX, .runs = runs, .max_runs = CS_ACKED_MAX_RUNS};
    if (runs && pos >= 0 && cs__meta_read(meta, strlen(meta), pos, &rd) == CS_META_OK && rd.n_runs > 0)
        cs__part_set_acked(part, pos, runs, rd.n_runs);
    else if (!runs && pos >= 0 && meta[0])
        CS_LOG_ERR("out of memory: acked set not restored after a rollback, records settled above the position "
                   "are handled again subscription=%s topic=%s partition=%d",
                   c->sub->name, cs__part_topic(part), (int)cs__part_number(part));
    free(runs);
    char why[256];
    if (cs__fetch_reposition(c, part, seek, why, sizeof why))
        cs__app_fatal(c->app, "%s: window of %s/%d rolled back but the seek back to offset %lld failed: %s", c->who,
                      cs__part_topic(part), (int)cs__part_number(part), (long long)seek, why);
}

/* Rolls the window back: every partition not fenced is read again. */
static void roll_back(cs_consumer *c, const rd_kafka_topic_partition_list_t *assigned, const char *why) {
    cs_db *db = c->sub->db;
    c->commit.abort_backoff_ms = c->commit.abort_backoff_ms ? c->commit.abort_backoff_ms * 2 : c->interval_ms;
    if (c->commit.abort_backoff_ms > ROLLBACK_BACKOFF_MAX_MS) c->commit.abort_backoff_ms = ROLLBACK_BACKOFF_MAX_MS;
    cs__db_rollback(db, c->commit.abort_backoff_ms);
    CS_LOG_WARN("database window rolled back, its partitions are read again from their committed positions "
                "subscription=%s reason=\"%s\"",
                c->sub->name, why);
    for (int i = 0; assigned && i < assigned->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &assigned->elems[i];
        cs_part *part = cs__pipeline_find_part(c->pipe, e->topic, e->partition);
        if (part && !cs__db_fenced(db, e->topic, e->partition)) rewind_db(c, part);
    }
    cs__pipeline_count_abort(c->pipe);
}

/* The same for the partitions assigned now. */
static void roll_back_assigned(cs_consumer *c, const char *why) {
    rd_kafka_topic_partition_list_t *assigned = NULL;
    if (rd_kafka_assignment(c->rk, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR) assigned = NULL;
    roll_back(c, assigned, why);
    if (assigned) rd_kafka_topic_partition_list_destroy(assigned);
}

/* Another owner claimed the partition since this one did: its records are
 * not handled here any more, and nothing of it is committed. */
static void fence(cs_consumer *c, cs_part *part) {
    cs__db_mark_fenced(c->sub->db, cs__part_topic(part), cs__part_number(part));
    cs__pipeline_stop_partition(c->pipe, part);
    cs__pipeline_count_fenced(c->pipe);
    CS_LOG_ERR("database fence: another instance claimed the partition, this one stops handling it and its "
               "window rolls back subscription=%s group=%s topic=%s partition=%d",
               c->sub->name, group_of(c), cs__part_topic(part), (int)cs__part_number(part));
}

/* A row the lost-answer COMMIT wrote, which the database says it holds. */
static void verified_row(void *arg, const char *topic, int32_t partition, int64_t next, const char *settled) {
    cs_consumer *c = arg;
    cs_part *part = cs__pipeline_find_part(c->pipe, topic, partition);
    if (part) cs__part_commit_done(part, next, settled, true);
}

/* After a COMMIT whose answer was lost (the connection broke): whether it
 * happened, from the rows it wrote, before anything else is written. 1
 * settled either way (not happened: rolled back, read again), -1 the
 * database does not answer yet. */
static int verify_last_commit(cs_consumer *c) {
    int v = cs__db_verify(c->sub->db, group_of(c), verified_row, c);
    if (v == 1) return 1;
    if (v == 0) {
        roll_back_assigned(c, "the last commit did not happen (its answer was lost with the connection)");
        return 1;
    }
    return -1;
}

/* Results of the Kafka commits that follow a database commit: for lag tools
 * only, so a failure is a line and nothing else. */
static void on_lag_commit(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *offsets,
                          void *opaque) {
    (void)rk;
    (void)offsets;
    cs_consumer *c = opaque;
    if (err && err != RD_KAFKA_RESP_ERR__NO_OFFSET)
        CS_LOG_DEBUG("kafka commit after the database's failed (lag tools see an older position) subscription=%s "
                     "error=\"%s\"",
                     c->sub->name, rd_kafka_err2str(err));
}

/* The changed partitions' rows, then COMMIT; false (rolled back) on any failure. */
static bool write_and_commit(cs_consumer *c, rd_kafka_topic_partition_list_t *l,
                             const rd_kafka_topic_partition_list_t *assigned) {
    cs_db *db = c->sub->db;
    if (cs__db_begin(db) != 0) {
        roll_back(c, assigned, cs__db_error(db));
        return false;
    }
    bool fenced = false;
    for (int i = 0; i < l->cnt; i++) {
        rd_kafka_topic_partition_t *e = &l->elems[i];
        int rc = cs__db_write(db, group_of(c), e->topic, e->partition, e->offset, e->metadata ? e->metadata : "");
        if (rc < 0) {
            roll_back(c, assigned, cs__db_error(db));
            return false;
        }
        if (rc == 0) {
            cs_part *part = cs__pipeline_find_part(c->pipe, e->topic, e->partition);
            if (part) fence(c, part);
            fenced = true;
        }
    }
    if (fenced) {
        roll_back(c, assigned, "fenced: another instance claimed a partition of the window");
        return false;
    }
    int rc = cs__db_commit(db);
    if (rc == -2) {
        /* Rolling back from memory could apply the window twice if it did
         * commit: the next window reads the rows first (verify_last_commit). */
        CS_LOG_WARN("database commit's answer lost with the connection: whether it happened is read from the rows "
                    "before the next window subscription=%s error=\"%s\"",
                    c->sub->name, cs__db_error(db));
        return false;
    }
    if (rc != 0) {
        roll_back(c, assigned, cs__db_error(db));
        return false;
    }
    return true;
}

/* The window with db->lock held: verified, rolled back or committed. */
static void window_locked(cs_consumer *c, const rd_kafka_topic_partition_list_t *assigned, bool final) {
    cs_db *db = c->sub->db;
    char why[512];
    if (verify_last_commit(c) < 0) return; /* the database is still away: the next tick asks again */
    if (cs__db_poisoned(db, why, sizeof why)) {
        roll_back(c, assigned, why);
        return;
    }
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(assigned->cnt ? assigned->cnt : 1);
    /* Whether every partition's position can be written, before any state
     * is taken: taking one marks it as sent, and a window that then stays
     * open would leave it out of the next one, its writes in it. */
    bool truncated = false, log_unknown = false;
    for (int i = 0; i < assigned->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &assigned->elems[i];
        cs_part *part = cs__pipeline_find_part(c->pipe, e->topic, e->partition);
        /* Its position cannot be written until a record shows which log it
         * is (cs__part_log_unknown), and its writes may be in the window. */
        if (part && !cs__db_fenced(db, e->topic, e->partition)) log_unknown = log_unknown || cs__part_log_unknown(part);
    }
    for (int i = 0; !log_unknown && i < assigned->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &assigned->elems[i];
        cs_part *part = cs__pipeline_find_part(c->pipe, e->topic, e->partition);
        cs_commit_state s;
        if (!part || cs__db_fenced(db, e->topic, e->partition) || !cs__part_commit_state(part, final, &s)) continue;
        truncated = truncated || s.truncated;
        cs__commit_add_state(c, l, &s);
    }
    if (log_unknown && final) {
        roll_back(c, assigned, "a partition's log may have restarted: its position cannot be written");
    } else if (log_unknown) {
        /* The window stays open: a restarted log makes its records stale,
         * and a stale record whose writes it holds rolls it back. */
    } else if (truncated) {
        /* Records settled past the set's reach would be handled again after
         * a crash, their writes committed: exactly-once forbids it. */
        roll_back(c, assigned, "the acked set does not fit in the positions row: lower cs_sub_max_open");
    } else if ((l->cnt > 0 || cs__db_in_txn(db)) && write_and_commit(c, l, assigned)) {
        for (int i = 0; i < l->cnt; i++) {
            rd_kafka_topic_partition_t *e = &l->elems[i];
            cs_part *part = cs__pipeline_find_part(c->pipe, e->topic, e->partition);
            if (part) cs__part_commit_done(part, e->offset, e->metadata, true);
        }
        if (l->cnt > 0) {
            cs__pipeline_count_transaction(c->pipe, 0);
            pthread_mutex_lock(&c->commit_lock);
            rd_kafka_commit_queue(c->rk, l, c->queue, on_lag_commit, c);
            pthread_mutex_unlock(&c->commit_lock);
        }
        c->commit.abort_backoff_ms = 0;
    }
    rd_kafka_topic_partition_list_destroy(l);
}

/* Takes the window's lock with the assignment; false (nothing taken) if
 * the assignment is not known: no position could be written, and committing
 * the writes without them would apply them again after a crash. */
static bool lock_window(cs_consumer *c, rd_kafka_topic_partition_list_t **assigned) {
    cs__pipeline_take_settled(c->pipe);
    cs__commit_pass_markers(c);
    if (rd_kafka_assignment(c->rk, assigned) != RD_KAFKA_RESP_ERR_NO_ERROR) return false;
    cs__db_lock_window(c->sub->db, REPLY_WAIT_MS);
    return true;
}

void cs__commit_db_window(cs_consumer *c, bool final) {
    rd_kafka_topic_partition_list_t *assigned = NULL;
    if (!lock_window(c, &assigned)) return;
    window_locked(c, assigned, final);
    cs__db_unlock(c->sub->db);
    rd_kafka_topic_partition_list_destroy(assigned);
}

bool cs__commit_db_hold(cs_consumer *c) {
    rd_kafka_topic_partition_list_t *assigned = NULL;
    if (!lock_window(c, &assigned)) return false;
    window_locked(c, assigned, false);
    rd_kafka_topic_partition_list_destroy(assigned);
    return true;
}

void cs__commit_db_unhold(cs_consumer *c) { cs__db_unlock(c->sub->db); }

void cs__commit_db_roll_back(cs_consumer *c, const char *why) {
    cs__db_lock(c->sub->db);
    roll_back_assigned(c, why);
    cs__db_unlock(c->sub->db);
}

void cs__commit_db_close(cs_consumer *c) {
    cs_db *db = c->sub->db;
    cs__db_lock(db);
    /* Writes a handler made after the close's last commit (past the drain
     * deadline) have no position to go with: they must not outlive the
     * consumer in a transaction a later one would commit. */
    if (cs__db_in_txn(db)) cs__db_rollback(db, 0);
    cs__db_unlock(db);
}
