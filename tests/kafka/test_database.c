/* test_database.c — Database mode on SQLite: each record's writes commit
 * once, with the position, in the service's database. Retries undo only
 * their run's writes; positions are read from the database, not from Kafka;
 * an owner whose epoch was bumped is fenced and its window rolls back; a
 * database that refuses the commit rolls the window back and the position
 * stays until it accepts; a positions table of another shape is refused at
 * open; a handler that writes and goes pending gets its writes undone.
 *
 * The effects are counted by the test's own connection to the file, as an
 * independent reader would. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cstest.h"
#include "cstream/database.h"

/* What one test's handler does. */
typedef struct fixture {
    _Atomic int runs;
    int retry_every;      /* offsets divisible by it write, then retry on their first run */
    int64_t block_offset; /* this offset waits for `release` before writing (-1: none) */
    _Atomic bool release;
    _Atomic bool blocked;        /* the blocked handler is waiting */
    int64_t pending_offset;      /* this offset writes, then goes pending (-1: none) */
    _Atomic(cs_delivery *) held; /* the pending delivery */
} fixture;

static void fixture_init(fixture *f) {
    memset(f, 0, sizeof *f);
    f->block_offset = -1;
    f->pending_offset = -1;
}

/* One effect row per run that writes: (topic, partition, offset, attempt). */
static bool write_effect(cs_delivery *d) {
    sqlite3 *db = cs_delivery_sqlite(d);
    if (!db) return false;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "INSERT INTO effects (topic, partition, offset, attempt) VALUES (?1, ?2, ?3, ?4)", -1,
                           &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, cs_delivery_topic(d), -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, cs_delivery_partition(d));
    sqlite3_bind_int64(st, 3, cs_delivery_offset(d));
    sqlite3_bind_int(st, 4, cs_delivery_attempt(d));
    bool ok = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_finalize(st);
    return ok;
}

static cs_outcome handle(cs_delivery *d, void *user) {
    fixture *f = user;
    atomic_fetch_add(&f->runs, 1);
    int64_t off = cs_delivery_offset(d);
    if (off == f->block_offset) {
        atomic_store(&f->blocked, true);
        while (!atomic_load(&f->release)) usleep(1000);
    }
    if (!write_effect(d)) return CS_RETRY;
    if (f->retry_every && off % f->retry_every == 0 && cs_delivery_attempt(d) == 1) return CS_RETRY;
    if (off == f->pending_offset && cs_delivery_attempt(d) == 1) {
        atomic_store(&f->held, d);
        return CS_PENDING;
    }
    return CS_ACK;
}

static void temp_path(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "/tmp/cstream-dbtest-%d-%s.sqlite", (int)getpid(), name);
    unlink(buf);
    char side[600];
    snprintf(side, sizeof side, "%s-wal", buf);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", buf);
    unlink(side);
}

/* The test's own connection: the effects table, created before the app. */
static sqlite3 *reader(const char *path) {
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 30000);
    assert_int_equal(sqlite3_exec(db,
                                  "PRAGMA journal_mode=WAL; CREATE TABLE IF NOT EXISTS effects (topic TEXT, "
                                  "partition INTEGER, offset INTEGER, attempt INTEGER)",
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

static long long row_next(sqlite3 *db, int partition) {
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT next_offset FROM cstream_positions WHERE partition = %d", partition);
    return query(db, sql);
}

typedef struct app_run {
    cs_app *app;
    cs_sub *sub;
    cs_db *db;
} app_run;

static app_run start(const char *path, const char *topic, const char *group, fixture *f, int workers) {
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", path);
    app_run r = {0};
    CST_OK(cs_db_open(url, &r.db));
    r.app = cs_app_new("database-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    r.sub = cs_kafka_subscribe(k, topic, handle, f);
    assert_non_null(r.sub);
    CST_OK(cs_sub_group(r.sub, group));
    CST_OK(cs_sub_commit_database(r.sub, r.db));
    CST_OK(cs_sub_workers(r.sub, workers));
    CST_OK(cs_sub_lanes(r.sub, CS_LANES_BY_KEY));
    CST_OK(cs_sub_commit_interval_ms(r.sub, 50));
    CST_OK(cs_sub_drain_timeout_ms(r.sub, 1000));
    CST_OK(cs_app_add_kafka(r.app, k));
    CST_OK(cs_app_start(r.app));
    return r;
}

static void stop(app_run *r) {
    CST_OK(cs_app_stop(r->app));
    cs_app_destroy(r->app);
    cs_db_free(r->db);
}

typedef struct rows_at {
    sqlite3 *db;
    int partitions;
    long long want; /* -1: each partition's end */
    const char *topic;
} rows_at;

/* Every partition's row says `want`, or its end offset. */
static bool rows_reached(void *arg) {
    rows_at *a = arg;
    for (int p = 0; p < a->partitions; p++) {
        int64_t end = a->want;
        if (a->want < 0 && cs_test_end_offset(cst_cluster, a->topic, p, &end) != CS_OK) return false;
        if (row_next(a->db, p) != end) return false;
    }
    return true;
}

/* 400 records over 4 partitions and 4 workers with lanes by key; every
 * seventh record writes, then retries once. Each record's effect is
 * committed exactly once, the rows say where each partition ends, and Kafka
 * got the same positions for lag tools. */
static void every_record_writes_once_across_retries(void **state) {
    (void)state;
    char topic[128], group[160], path[512];
    cst_fresh("db-once", 4, topic, group, sizeof topic);
    temp_path(path, sizeof path, "once");
    sqlite3 *check = reader(path);
    CST_OK(cs_test_produce_many(cst_cluster, topic, "v", 400));
    fixture f;
    fixture_init(&f);
    f.retry_every = 7;
    app_run r = start(path, topic, group, &f, 4);
    rows_at want = {check, 4, -1, topic};
    if (!cst_wait(rows_reached, &want, 60000)) fail_msg("positions rows did not reach every partition's end");
    assert_int_equal(query(check, "SELECT COUNT(*) FROM effects"), 400);
    assert_int_equal(query(check, "SELECT COUNT(*) FROM (SELECT DISTINCT partition, offset FROM effects)"), 400);
    /* The retried runs' writes were undone: only second runs of them remain. */
    assert_int_equal(query(check, "SELECT COUNT(*) FROM effects WHERE offset % 7 = 0 AND attempt = 1"), 0);
    assert_true(atomic_load(&f.runs) > 400);
    for (int p = 0; p < 4; p++) {
        int64_t end = 0;
        CST_OK(cs_test_end_offset(cst_cluster, topic, p, &end));
        CST_OK(cs_test_wait_committed(cst_cluster, group, topic, p, end, 10000));
    }
    stop(&r);
    sqlite3_close(check);
    unlink(path);
}

/* Positions come from the database: with the row of partition 0 set back to
 * 50 (and its effects from 50 on deleted, as a restore from a backup
 * would), a new instance handles 50..99 of it again although Kafka's
 * committed offset says 100. */
static void positions_are_read_from_the_database(void **state) {
    (void)state;
    char topic[128], group[160], path[512];
    cst_fresh("db-positions", 1, topic, group, sizeof topic);
    temp_path(path, sizeof path, "positions");
    sqlite3 *check = reader(path);
    for (int i = 0; i < 100; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    fixture f;
    fixture_init(&f);
    app_run r = start(path, topic, group, &f, 2);
    rows_at want = {check, 1, 100, topic};
    if (!cst_wait(rows_reached, &want, 60000)) fail_msg("the row did not reach 100");
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 100, 10000));
    stop(&r);
    assert_int_equal(sqlite3_exec(check,
                                  "UPDATE cstream_positions SET next_offset = 50, settled = ''; "
                                  "DELETE FROM effects WHERE offset >= 50",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    fixture_init(&f);
    r = start(path, topic, group, &f, 2);
    if (!cst_wait(rows_reached, &want, 60000)) fail_msg("the row did not reach 100 again");
    assert_int_equal(atomic_load(&f.runs), 50);
    assert_int_equal(query(check, "SELECT COUNT(*) FROM effects"), 100);
    assert_int_equal(query(check, "SELECT COUNT(*) FROM (SELECT DISTINCT offset FROM effects)"), 100);
    stop(&r);
    sqlite3_close(check);
    unlink(path);
}

typedef struct flag_wait {
    _Atomic bool *flag;
} flag_wait;

static bool flag_set(void *arg) { return atomic_load(((flag_wait *)arg)->flag); }

typedef struct stat_wait {
    cs_sub *sub;
    int which; /* 0: db_fenced, 1: aborts */
    uint64_t want;
} stat_wait;

static bool stat_reached(void *arg) {
    stat_wait *w = arg;
    cs_sub_stats st;
    cs_sub_stats_get(w->sub, &st);
    return (w->which == 0 ? st.db_fenced : st.aborts) >= w->want;
}

/* Another owner claims the partition (its epoch bumped) while record 5 runs:
 * the window holding 5's write is fenced and rolls back, the partition is not
 * handled any more, and the row keeps the other owner's epoch and 0..4. */
static void a_stale_owner_is_fenced(void **state) {
    (void)state;
    char topic[128], group[160], path[512];
    cst_fresh("db-fence", 1, topic, group, sizeof topic);
    temp_path(path, sizeof path, "fence");
    sqlite3 *check = reader(path);
    for (int i = 0; i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    fixture f;
    fixture_init(&f);
    f.block_offset = 5;
    app_run r = start(path, topic, group, &f, 1);
    flag_wait blocked = {&f.blocked};
    if (!cst_wait(flag_set, &blocked, 30000)) fail_msg("record 5 never ran");
    rows_at want = {check, 1, 5, topic};
    if (!cst_wait(rows_reached, &want, 30000)) fail_msg("records 0..4 were not committed");
    long long epoch = query(check, "SELECT epoch FROM cstream_positions");
    assert_int_equal(sqlite3_exec(check, "UPDATE cstream_positions SET epoch = epoch + 1", NULL, NULL, NULL),
                     SQLITE_OK);
    atomic_store(&f.release, true);
    stat_wait fenced = {r.sub, 0, 1};
    if (!cst_wait(stat_reached, &fenced, 30000)) fail_msg("the stale owner was not fenced");
    int runs = atomic_load(&f.runs);
    for (int i = 0; i < 5; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    cst_wait_commit_ticks(r.sub, 5, 30000);
    assert_int_equal(atomic_load(&f.runs), runs); /* nothing of it handled any more */
    assert_int_equal(query(check, "SELECT COUNT(*) FROM effects"), 5);
    assert_int_equal(query(check, "SELECT MAX(offset) FROM effects"), 4);
    assert_int_equal(row_next(check, 0), 5);
    assert_int_equal(query(check, "SELECT epoch FROM cstream_positions"), epoch + 1);
    stop(&r);
    sqlite3_close(check);
    unlink(path);
}

/* The database refuses every position write (a trigger, as a full disk
 * would): each window rolls back and is tried again, nothing is committed
 * and the row does not move. Once it accepts, every record's effect commits
 * once. */
static void a_refused_commit_rolls_back_and_keeps_the_position(void **state) {
    (void)state;
    char topic[128], group[160], path[512];
    cst_fresh("db-refused", 2, topic, group, sizeof topic);
    temp_path(path, sizeof path, "refused");
    sqlite3 *check = reader(path);
    assert_int_equal(
        sqlite3_exec(check,
                     "CREATE TABLE refuse (on_ INTEGER); INSERT INTO refuse VALUES (1); "
                     "CREATE TABLE IF NOT EXISTS cstream_positions (group_id TEXT NOT NULL, topic TEXT "
                     "NOT NULL, partition INTEGER NOT NULL, next_offset BIGINT NOT NULL, settled TEXT NOT "
                     "NULL, epoch BIGINT NOT NULL, PRIMARY KEY (group_id, topic, partition)); "
                     "CREATE TRIGGER refuse_writes BEFORE UPDATE OF next_offset ON cstream_positions "
                     "WHEN (SELECT on_ FROM refuse) = 1 BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END",
                     NULL, NULL, NULL),
        SQLITE_OK);
    CST_OK(cs_test_produce_many(cst_cluster, topic, "v", 100));
    fixture f;
    fixture_init(&f);
    app_run r = start(path, topic, group, &f, 2);
    stat_wait aborts = {r.sub, 1, 3};
    if (!cst_wait(stat_reached, &aborts, 60000)) fail_msg("the refused windows did not roll back");
    assert_int_equal(query(check, "SELECT COUNT(*) FROM effects"), 0);
    assert_int_equal(query(check, "SELECT MAX(next_offset) FROM cstream_positions"), -1);
    assert_int_equal(sqlite3_exec(check, "UPDATE refuse SET on_ = 0", NULL, NULL, NULL), SQLITE_OK);
    rows_at want = {check, 2, -1, topic};
    if (!cst_wait(rows_reached, &want, 60000)) fail_msg("the rows did not reach the ends once accepted");
    assert_int_equal(query(check, "SELECT COUNT(*) FROM effects"), 100);
    assert_int_equal(query(check, "SELECT COUNT(*) FROM (SELECT DISTINCT partition, offset FROM effects)"), 100);
    stop(&r);
    sqlite3_close(check);
    unlink(path);
}

/* A handler that writes and goes pending gets its writes undone: its later
 * ack counts as a retry, and the record's effect commits once, from its
 * second run. */
static void writes_of_a_pending_run_are_undone(void **state) {
    (void)state;
    char topic[128], group[160], path[512];
    cst_fresh("db-pending", 1, topic, group, sizeof topic);
    temp_path(path, sizeof path, "pending");
    sqlite3 *check = reader(path);
    for (int i = 0; i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    fixture f;
    fixture_init(&f);
    f.pending_offset = 3;
    app_run r = start(path, topic, group, &f, 1);
    cs_delivery *d = NULL;
    for (int64_t until = cst_now_ms() + 30000; !(d = atomic_load(&f.held)) && cst_now_ms() < until;) usleep(1000);
    assert_non_null(d);
    CST_OK(cs_delivery_settle(d, CS_ACK));
    rows_at want = {check, 1, 10, topic};
    if (!cst_wait(rows_reached, &want, 30000)) fail_msg("the row did not reach 10");
    assert_int_equal(query(check, "SELECT COUNT(*) FROM effects"), 10);
    assert_int_equal(query(check, "SELECT attempt FROM effects WHERE offset = 3"), 2);
    stop(&r);
    sqlite3_close(check);
    unlink(path);
}

/* A positions table of another shape stops the open, naming the table and
 * the missing column; a URL of no known kind names itself. */
static void a_positions_table_of_another_shape_is_refused(void **state) {
    (void)state;
    char path[512], url[600];
    temp_path(path, sizeof path, "shape");
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE cstream_positions (group_id TEXT, topic TEXT, partition INTEGER)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    snprintf(url, sizeof url, "sqlite:%s", path);
    cs_db *out = NULL;
    assert_int_equal(cs_db_open(url, &out), CS_ERR_STATE);
    assert_null(out);
    assert_non_null(strstr(cs_errmsg(), "cstream_positions"));
    assert_non_null(strstr(cs_errmsg(), "next_offset"));
    assert_int_equal(cs_db_open("mysql://x", &out), CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "mysql://x"));
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_record_writes_once_across_retries),
        cmocka_unit_test(positions_are_read_from_the_database),
        cmocka_unit_test(a_stale_owner_is_fenced),
        cmocka_unit_test(a_refused_commit_rolls_back_and_keeps_the_position),
        cmocka_unit_test(writes_of_a_pending_run_are_undone),
        cmocka_unit_test(a_positions_table_of_another_shape_is_refused),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
