/* test_database_outputs.c — Database mode with what leaves the handler
 * besides its writes, on SQLite: a reply gates its record, so a window holds
 * no writes of a record whose reply is not out (nothing commits while the
 * replies are refused; afterwards every record's writes commit once and
 * every record has a reply, at least once); and a batch's writes are one
 * savepoint, so an element retried takes the others' writes with it and each
 * record's writes still commit once; a record given up goes to the
 * dead-letter topic with none of its writes, and its position commits; a
 * handler that holds the database is refused a call that waits for the
 * fetch thread (instead of a deadlock); a start at the end is written into
 * the row at the claim, so that a crash before the first window cannot move
 * it on past records handled and not committed. */
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cstest.h"
#include "cstest_db.h"
#include "cstream/database.h"

enum { PARTS = 2, PER_PART = 10, N = PARTS * PER_PART };

typedef struct fixture {
    _Atomic int runs;
    int64_t retry_offset;   /* batch: the element retried, the last of the first batch of two or more */
    int64_t companions[64]; /* batch: the other elements of that batch */
    int n_companions;
} fixture;

static bool insert_effect(cs_delivery *d) {
    sqlite3 *db = cs_delivery_sqlite(d);
    if (!db) return false;
    char sql[256];
    snprintf(sql, sizeof sql, "INSERT INTO effects (partition, offset, attempt) VALUES (%d, %lld, %d)",
             (int)cs_delivery_partition(d), (long long)cs_delivery_offset(d), cs_delivery_attempt(d));
    return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK;
}

static cs_outcome reply_handler(cs_delivery *d, void *user) {
    fixture *f = user;
    atomic_fetch_add(&f->runs, 1);
    if (!insert_effect(d)) return CS_RETRY;
    char v[64];
    int n = snprintf(v, sizeof v, "%d@%lld", (int)cs_delivery_partition(d), (long long)cs_delivery_offset(d));
    if (cs_delivery_reply(d, NULL, 0, v, (size_t)n) != CS_OK) return CS_RETRY;
    return CS_ACK;
}

/* Offset 3 writes, then fails every time. */
static cs_outcome failing_handler(cs_delivery *d, void *user) {
    fixture *f = user;
    atomic_fetch_add(&f->runs, 1);
    if (!insert_effect(d)) return CS_RETRY;
    if (cs_delivery_offset(d) == 3) {
        cs_delivery_set_reason(d, "refused by the test");
        return CS_RETRY;
    }
    return CS_ACK;
}

/* Writes, then asks to pause its subscription while holding the database. */
static cs_sub *_Atomic pausing_sub;
static _Atomic int pause_refused, pause_other;
static cs_outcome pausing_handler(cs_delivery *d, void *user) {
    fixture *f = user;
    atomic_fetch_add(&f->runs, 1);
    if (!insert_effect(d)) return CS_RETRY;
    cs_err err = cs_sub_pause(atomic_load(&pausing_sub));
    if (err == CS_ERR_STATE && strstr(cs_errmsg(), "holds its database")) atomic_fetch_add(&pause_refused, 1);
    else atomic_fetch_add(&pause_other, 1);
    return CS_ACK;
}

/* The batch subscription: its first batch waits until every record was
 * taken, so that a later batch holds several (a loaded machine may hand the
 * first one out alone). */
static cs_sub *_Atomic batch_sub;

static cs_outcome batch_handler(cs_delivery *const *batch, size_t n, cs_outcome *outcomes, void *user) {
    fixture *f = user;
    cs_sub *s = atomic_load(&batch_sub);
    for (int64_t until = cst_now_ms() + 10000;
         f->runs == 0 && s && cs_test_sub_taken(s) < PER_PART && cst_now_ms() < until;)
        usleep(1000);
    for (size_t i = 0; i < n; i++) {
        atomic_fetch_add(&f->runs, 1);
        outcomes[i] = insert_effect(batch[i]) ? CS_ACK : CS_RETRY;
    }
    if (f->retry_offset < 0 && n >= 2) { /* once: its companions' writes must go with it */
        f->retry_offset = cs_delivery_offset(batch[n - 1]);
        outcomes[n - 1] = CS_RETRY;
        for (size_t i = 0; i + 1 < n && i < 64; i++) f->companions[f->n_companions++] = cs_delivery_offset(batch[i]);
    }
    return CS_EACH;
}

static sqlite3 *checker(char *path, size_t cap, const char *name) {
    snprintf(path, cap, "/tmp/cstream-dbout-%d-%s.sqlite", (int)getpid(), name);
    unlink(path);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 30000);
    assert_int_equal(sqlite3_exec(db,
                                  "PRAGMA journal_mode=WAL; CREATE TABLE effects (partition INTEGER, offset INTEGER, "
                                  "attempt INTEGER)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    return db;
}

static long long query(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    long long v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -999;
    sqlite3_finalize(st);
    return v;
}

typedef struct rows_at {
    sqlite3 *db;
    long long want; /* the sum of every partition's next offset */
} rows_at;

static bool rows_reached(void *arg) {
    rows_at *a = arg;
    return query(a->db, "SELECT SUM(next_offset) FROM cstream_positions") == a->want;
}

typedef struct aborted_wait {
    cs_sub *sub;
    uint64_t want;
} aborted_wait;

static bool window_aborted(void *arg) {
    aborted_wait *w = arg;
    cs_sub_stats st;
    cs_sub_stats_get(w->sub, &st);
    return st.aborts >= w->want;
}

static int reply_counts[PARTS][PER_PART];
static void count_reply(const void *value, size_t len, void *arg) {
    (void)arg;
    char v[64];
    snprintf(v, sizeof v, "%.*s", (int)len, (const char *)value);
    int p = -1;
    long long o = -1;
    if (sscanf(v, "%d@%lld", &p, &o) == 2 && p >= 0 && p < PARTS && o >= 0 && o < PER_PART) reply_counts[p][o]++;
}

/* A Database-mode subscription on topic (SQLite at path), with record
 * handler h or batch handler b, not started: the caller adds its settings.
 * *db_out is freed by the caller after the app. */
static cs_app *start_db(const char *topic, const char *group, const char *path, cs_handler_fn h, cs_batch_fn b,
                        fixture *f, cs_start where, cs_sub **sub_out, cs_db **db_out) {
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", path);
    CST_OK(cs_db_open(url, db_out));
    cs_app *app = cs_app_new("database-outputs-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = b ? cs_kafka_subscribe_batch(k, topic, b, PER_PART, f) : cs_kafka_subscribe(k, topic, h, f);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_database(s, *db_out));
    CST_OK(cs_sub_start_at(s, where));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_app_add_kafka(app, k));
    *sub_out = s;
    return app;
}

/* No reply gets out (cst_reply_topic_blocked: embedded, they wait in the
 * producer; real broker, each is refused and its record retried): records
 * ran and wrote, but the window holding their writes rolls back instead of
 * committing. Once replies get out, each record's writes commit once and
 * each record has its reply. */
static void replies_gate_the_window(void **state) {
    (void)state;
    char topic[128], group[160], replies[160], path[512];
    cst_fresh("db-replies", PARTS, topic, group, sizeof topic);
    snprintf(replies, sizeof replies, "%s.replies", topic);
    if (cs_test_cluster_is_embedded(cst_cluster)) /* a failed run before may have left its refusals */
        CST_OK(cs_test_cluster_clear_request_errors(cst_cluster, 0));
    for (int p = 0; p < PARTS; p++)
        for (int i = 0; i < PER_PART; i++) CST_OK(cs_test_produce(cst_cluster, topic, p, NULL, 0, "v", 1, NULL));
    sqlite3 *check = checker(path, sizeof path, "replies");
    cst_reply_topic_blocked(replies, true);

    fixture f = {.retry_offset = -1};
    cs_sub *s;
    cs_db *db;
    cs_app *app = start_db(topic, group, path, reply_handler, NULL, &f, CS_START_EARLIEST, &s, &db);
    CST_OK(cs_sub_reply(s, replies, 0));
    CST_OK(cs_sub_workers(s, 2));
    CST_OK(cs_app_start(app));

    /* A window holding writes whose replies do not get out rolls back:
     * embedded, after waiting 30 s for them (database_window.c,
     * REPLY_WAIT_MS); real broker, at the first refused reply. */
    aborted_wait aw = {s, 1};
    if (!cst_wait(window_aborted, &aw, 90000)) fail_msg("no window rolled back while replies were blocked");
    assert_true(atomic_load(&f.runs) > 0);
    assert_int_equal(query(check, "SELECT COUNT(*) FROM effects"), 0);
    assert_true(query(check, "SELECT COALESCE(MAX(next_offset), -1) FROM cstream_positions") < 0);

    cst_reply_topic_blocked(replies, false);
    rows_at want = {check, N};
    if (!cst_wait(rows_reached, &want, 60000)) fail_msg("the rows did not reach the ends once replies got out");
    assert_int_equal(query(check, "SELECT COUNT(*) FROM effects"), N);
    assert_int_equal(query(check, "SELECT COUNT(*) FROM (SELECT DISTINCT partition, offset FROM effects)"), N);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cs_db_free(db);
    memset(reply_counts, 0, sizeof reply_counts);
    cst_read_uncommitted(replies, 1, count_reply, NULL, 30000);
    for (int p = 0; p < PARTS; p++)
        for (int o = 0; o < PER_PART; o++)
            if (reply_counts[p][o] < 1) fail_msg("record %d@%d has no reply", p, o);
    sqlite3_close(check);
    cstdb_unlink_sqlite(path);
}

/* The last element of the first batch of two or more retries: the batch's
 * writes roll back together,
 * every element comes back, and each record's writes commit once. */
static void a_batch_rolls_back_as_one(void **state) {
    (void)state;
    char topic[128], group[160], path[512];
    cst_fresh("db-batch", 1, topic, group, sizeof topic);
    for (int i = 0; i < PER_PART; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    sqlite3 *check = checker(path, sizeof path, "batch");
    fixture f = {.retry_offset = -1};
    cs_sub *s;
    cs_db *db;
    cs_app *app = start_db(topic, group, path, NULL, batch_handler, &f, CS_START_EARLIEST, &s, &db);
    atomic_store(&batch_sub, s);
    CST_OK(cs_app_start(app));
    rows_at want = {check, PER_PART};
    if (!cst_wait(rows_reached, &want, 60000)) fail_msg("the row did not reach the end");
    assert_int_equal(query(check, "SELECT COUNT(*) FROM effects"), PER_PART);
    assert_int_equal(query(check, "SELECT COUNT(*) FROM (SELECT DISTINCT offset FROM effects)"), PER_PART);
    /* The retried element and whatever ran beside it committed from a later run. */
    assert_true(f.retry_offset >= 0);
    char sql0[128];
    snprintf(sql0, sizeof sql0, "SELECT attempt FROM effects WHERE offset = %lld", (long long)f.retry_offset);
    assert_int_equal(query(check, sql0), 2);
    for (int i = 0; i < f.n_companions; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT attempt FROM effects WHERE offset = %lld", (long long)f.companions[i]);
        if (query(check, sql) < 2) fail_msg("offset %lld kept the writes of its first run", (long long)f.companions[i]);
    }
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cs_db_free(db);
    sqlite3_close(check);
    cstdb_unlink_sqlite(path);
}

static long dead_letters;
static void count_dead_letter(const void *value, size_t len, void *arg) {
    (void)value, (void)len, (void)arg;
    dead_letters++;
}

/* Offset 3 fails 3 times: it goes to the dead-letter topic, none of its
 * runs' writes commit, and the row passes it. */
static void a_record_given_up_commits_its_position_without_its_writes(void **state) {
    (void)state;
    char topic[128], group[160], dlq[160], path[512];
    cst_fresh("db-dlq", 1, topic, group, sizeof topic);
    snprintf(dlq, sizeof dlq, "%s.dlq", topic);
    CST_OK(cs_test_topic_create(cst_cluster, dlq, 1));
    for (int i = 0; i < PER_PART; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    sqlite3 *check = checker(path, sizeof path, "dlq");
    fixture f = {.retry_offset = -1};
    cs_sub *s;
    cs_db *db;
    cs_app *app = start_db(topic, group, path, failing_handler, NULL, &f, CS_START_EARLIEST, &s, &db);
    CST_OK(cs_sub_max_attempts(s, 3));
    CST_OK(cs_sub_dead_letter(s, dlq));
    CST_OK(cs_app_start(app));
    rows_at want = {check, PER_PART};
    if (!cst_wait(rows_reached, &want, 60000)) fail_msg("the row did not pass the record given up");
    assert_int_equal(query(check, "SELECT COUNT(*) FROM effects WHERE offset = 3"), 0);
    assert_int_equal(query(check, "SELECT COUNT(*) FROM effects"), PER_PART - 1);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.dead_lettered, 1);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cs_db_free(db);
    dead_letters = 0;
    cst_read_uncommitted(dlq, 1, count_dead_letter, NULL, 30000);
    assert_int_equal(dead_letters, 1);
    sqlite3_close(check);
    cstdb_unlink_sqlite(path);
}

/* The handler holds the database and calls cs_sub_pause, which waits for the
 * fetch thread, whose next window waits for the database: refused with
 * CS_ERR_STATE, and every record still commits. */
static void a_handler_holding_the_database_cannot_wait_for_the_fetch_thread(void **state) {
    (void)state;
    char topic[128], group[160], path[512];
    cst_fresh("db-pause", 1, topic, group, sizeof topic);
    for (int i = 0; i < PER_PART; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    sqlite3 *check = checker(path, sizeof path, "pause");
    fixture f = {.retry_offset = -1};
    cs_sub *s;
    cs_db *db;
    cs_app *app = start_db(topic, group, path, pausing_handler, NULL, &f, CS_START_EARLIEST, &s, &db);
    atomic_store(&pausing_sub, s);
    atomic_store(&pause_refused, 0);
    atomic_store(&pause_other, 0);
    CST_OK(cs_app_start(app));
    rows_at want = {check, PER_PART};
    if (!cst_wait(rows_reached, &want, 60000)) fail_msg("the row did not reach the end");
    assert_int_equal(atomic_load(&pause_refused), PER_PART);
    assert_int_equal(atomic_load(&pause_other), 0);
    assert_int_equal(query(check, "SELECT COUNT(*) FROM effects"), PER_PART);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cs_db_free(db);
    sqlite3_close(check);
    cstdb_unlink_sqlite(path);
}

typedef struct row_exists {
    sqlite3 *db;
} row_exists;
static bool row_claimed(void *arg) {
    return query(((row_exists *)arg)->db, "SELECT COUNT(*) FROM cstream_positions") == 1;
}

/* Starting at the end with no row: the claim writes the end into the row
 * before any record is handled. */
static void a_start_at_the_end_is_written_at_the_claim(void **state) {
    (void)state;
    char topic[128], group[160], path[512];
    cst_fresh("db-latest", 1, topic, group, sizeof topic);
    for (int i = 0; i < PER_PART; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    sqlite3 *check = checker(path, sizeof path, "latest");
    fixture f = {.retry_offset = -1};
    cs_sub *s;
    cs_db *db;
    cs_app *app = start_db(topic, group, path, failing_handler, NULL, &f, CS_START_LATEST, &s, &db);
    CST_OK(cs_app_start(app));
    row_exists w = {check};
    if (!cst_wait(row_claimed, &w, 60000)) fail_msg("the partition was not claimed");
    assert_int_equal(query(check, "SELECT next_offset FROM cstream_positions"), PER_PART);
    assert_int_equal(atomic_load(&f.runs), 0);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cs_db_free(db);
    sqlite3_close(check);
    cstdb_unlink_sqlite(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(replies_gate_the_window),
        cmocka_unit_test(a_batch_rolls_back_as_one),
        cmocka_unit_test(a_record_given_up_commits_its_position_without_its_writes),
        cmocka_unit_test(a_handler_holding_the_database_cannot_wait_for_the_fetch_thread),
        cmocka_unit_test(a_start_at_the_end_is_written_at_the_claim),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
