/* test_database.c — Database mode on SQLite and on PostgreSQL: each
 * record's writes commit once, with the position, in the service's
 * database. Retries undo only their run's writes; positions are read from
 * the database, not from Kafka; an owner whose epoch was bumped is fenced and
 * its window rolls back; a database that refuses the commit rolls the window
 * back and the position stays until it accepts; a positions table of another
 * shape is refused at open; a handler that writes and goes pending gets its
 * writes undone. On PostgreSQL only: a server restarted, and one killed and
 * started again, while records flow roll the open window back, and every
 * record's writes still commit once.
 *
 * The store is CSTEST_DATABASE_URL (a PostgreSQL URL: the entry
 * database.postgres runs this binary under tests/with-postgres), else a
 * SQLite file per test (tests/support/cstest_db.h). The effects are counted
 * by the test's own connection, as an independent reader would. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cstest.h"
#include "cstest_db.h"
#include "cstream/database.h"

/* What one test's handler does. */
typedef struct fixture {
    const cs_db *db;  /* the store, for its kind (set by start) */
    char effects[80]; /* the effects table */
    _Atomic int runs;
    int retry_every;         /* offsets divisible by it write, then retry on their first run */
    int64_t block_offset;    /* this offset waits for `release` before writing (-1: none) */
    _Atomic bool hold_armed; /* the next run that writes waits for `release` after its write */
    _Atomic bool hold_taken; /* one run took the hold */
    _Atomic bool release;
    _Atomic bool blocked;        /* the blocked (or holding) handler is waiting */
    int64_t pending_offset;      /* this offset writes, then goes pending (-1: none) */
    _Atomic(cs_delivery *) held; /* the pending delivery */
} fixture;

static void fixture_init(fixture *f, const char *effects) {
    memset(f, 0, sizeof *f);
    snprintf(f->effects, sizeof f->effects, "%s", effects);
    f->block_offset = -1;
    f->pending_offset = -1;
}

static void wait_release(fixture *f) {
    atomic_store(&f->blocked, true);
    while (!atomic_load(&f->release)) usleep(1000);
}

static cs_outcome handle(cs_delivery *d, void *user) {
    fixture *f = user;
    atomic_fetch_add(&f->runs, 1);
    int64_t off = cs_delivery_offset(d);
    if (off == f->block_offset) wait_release(f);
    /* One effect row per run that writes: (topic, partition, offset, attempt). */
    if (!cstdb_write_effect(d, f->db, f->effects)) return CS_RETRY;
    /* Holding the connection after a write keeps the window's transaction
     * open (the fetch thread cannot commit it) for as long as the test needs. */
    bool no = false;
    if (atomic_load(&f->hold_armed) && atomic_compare_exchange_strong(&f->hold_taken, &no, true)) wait_release(f);
    if (f->retry_every && off % f->retry_every == 0 && cs_delivery_attempt(d) == 1) return CS_RETRY;
    if (off == f->pending_offset && cs_delivery_attempt(d) == 1) {
        atomic_store(&f->held, d);
        return CS_PENDING;
    }
    return CS_ACK;
}

/* The test's store and its own connection, with a fresh effects table. */
typedef struct store {
    char url[600];
    char effects[80];
    cstdb *check;
} store;

static void store_open(store *s, const char *name) {
    cstdb_url(name, s->url, sizeof s->url);
    cstdb_effects_name(name, s->effects, sizeof s->effects);
    s->check = cstdb_open(s->url);
    cstdb_create_effects(s->check, s->effects);
}

static void store_close(store *s) {
    cstdb_exec(s->check, "DROP TABLE %s", s->effects);
    cstdb_close(s->check);
    cstdb_remove(s->url);
}

static long long effects_count(store *s) { return cstdb_query(s->check, "SELECT COUNT(*) FROM %s", s->effects); }

static long long effects_distinct(store *s) {
    return cstdb_query(s->check, "SELECT COUNT(*) FROM (SELECT DISTINCT partition, record_offset FROM %s) AS d",
                       s->effects);
}

/* The partition's position row, -999 if it has none (or the database is down). */
static long long row_next(cstdb *check, const char *topic, int partition) {
    long long v = -999;
    if (!cstdb_try_query(check, &v, "SELECT next_offset FROM cstream_positions WHERE topic = '%s' AND partition = %d",
                         topic, partition))
        return -999;
    return v;
}

/* Some effect is committed (a poll that survives a database that is down). */
static bool effects_committed(void *arg) {
    store *s = arg;
    long long n = 0;
    return cstdb_try_query(s->check, &n, "SELECT COUNT(*) FROM %s", s->effects) && n > 0;
}

typedef struct app_run {
    cs_app *app;
    cs_sub *sub;
    cs_db *db;
} app_run;

static app_run start(const char *url, const char *topic, const char *group, fixture *f, int workers) {
    app_run r = {0};
    CST_OK(cs_db_open(url, &r.db));
    f->db = r.db;
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
    cstdb *db;
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
        if (row_next(a->db, a->topic, p) != end) return false;
    }
    return true;
}

/* 400 records over 4 partitions and 4 workers with lanes by key; every
 * seventh record writes, then retries once. Each record's effect is
 * committed exactly once, the rows say where each partition ends, and Kafka
 * got the same positions for lag tools. */
static void every_record_writes_once_across_retries(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("db-once", 4, topic, group, sizeof topic);
    store s;
    store_open(&s, "once");
    CST_OK(cs_test_produce_many(cst_cluster, topic, "v", 400));
    fixture f;
    fixture_init(&f, s.effects);
    f.retry_every = 7;
    app_run r = start(s.url, topic, group, &f, 4);
    rows_at want = {s.check, 4, -1, topic};
    if (!cst_wait(rows_reached, &want, 60000)) fail_msg("positions rows did not reach every partition's end");
    assert_int_equal(effects_count(&s), 400);
    assert_int_equal(effects_distinct(&s), 400);
    /* The retried runs' writes were undone: only second runs of them remain. */
    assert_int_equal(
        cstdb_query(s.check, "SELECT COUNT(*) FROM %s WHERE record_offset %% 7 = 0 AND attempt = 1", s.effects), 0);
    assert_true(atomic_load(&f.runs) > 400);
    for (int p = 0; p < 4; p++) {
        int64_t end = 0;
        CST_OK(cs_test_end_offset(cst_cluster, topic, p, &end));
        CST_OK(cs_test_wait_committed(cst_cluster, group, topic, p, end, 10000));
    }
    stop(&r);
    store_close(&s);
}

/* Positions come from the database: with the row of partition 0 set back to
 * 50 (and its effects from 50 on deleted, as a restore from a backup
 * would), a new instance handles 50..99 of it again although Kafka's
 * committed offset says 100. */
static void positions_are_read_from_the_database(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("db-positions", 1, topic, group, sizeof topic);
    store s;
    store_open(&s, "positions");
    for (int i = 0; i < 100; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    fixture f;
    fixture_init(&f, s.effects);
    app_run r = start(s.url, topic, group, &f, 2);
    rows_at want = {s.check, 1, 100, topic};
    if (!cst_wait(rows_reached, &want, 60000)) fail_msg("the row did not reach 100");
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 100, 10000));
    stop(&r);
    cstdb_exec(s.check,
               "UPDATE cstream_positions SET next_offset = 50, settled = '' WHERE topic = '%s'; "
               "DELETE FROM %s WHERE record_offset >= 50",
               topic, s.effects);
    fixture_init(&f, s.effects);
    r = start(s.url, topic, group, &f, 2);
    if (!cst_wait(rows_reached, &want, 60000)) fail_msg("the row did not reach 100 again");
    assert_int_equal(atomic_load(&f.runs), 50);
    assert_int_equal(effects_count(&s), 100);
    assert_int_equal(effects_distinct(&s), 100);
    stop(&r);
    store_close(&s);
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
    char topic[128], group[160];
    cst_fresh("db-fence", 1, topic, group, sizeof topic);
    store s;
    store_open(&s, "fence");
    for (int i = 0; i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    fixture f;
    fixture_init(&f, s.effects);
    f.block_offset = 5;
    app_run r = start(s.url, topic, group, &f, 1);
    flag_wait blocked = {&f.blocked};
    if (!cst_wait(flag_set, &blocked, 30000)) fail_msg("record 5 never ran");
    rows_at want = {s.check, 1, 5, topic};
    if (!cst_wait(rows_reached, &want, 30000)) fail_msg("records 0..4 were not committed");
    long long epoch = cstdb_query(s.check, "SELECT epoch FROM cstream_positions WHERE topic = '%s'", topic);
    /* On PostgreSQL this waits for a window the app has open on the row: the
     * bump lands between two windows, as another owner's claim would. */
    cstdb_exec(s.check, "UPDATE cstream_positions SET epoch = epoch + 1 WHERE topic = '%s'", topic);
    atomic_store(&f.release, true);
    stat_wait fenced = {r.sub, 0, 1};
    if (!cst_wait(stat_reached, &fenced, 30000)) fail_msg("the stale owner was not fenced");
    int runs = atomic_load(&f.runs);
    for (int i = 0; i < 5; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    cst_wait_commit_ticks(r.sub, 5, 30000);
    assert_int_equal(atomic_load(&f.runs), runs); /* nothing of it handled any more */
    assert_int_equal(effects_count(&s), 5);
    assert_int_equal(cstdb_query(s.check, "SELECT MAX(record_offset) FROM %s", s.effects), 4);
    assert_int_equal(row_next(s.check, topic, 0), 5);
    assert_int_equal(cstdb_query(s.check, "SELECT epoch FROM cstream_positions WHERE topic = '%s'", topic), epoch + 1);
    stop(&r);
    store_close(&s);
}

/* The positions table as cstream creates it: the refusal's trigger needs it
 * before the app opens the database. */
#define POSITIONS_TABLE                                                                                                \
    "CREATE TABLE IF NOT EXISTS cstream_positions (group_id TEXT NOT NULL, topic TEXT NOT NULL, partition INTEGER "    \
    "NOT NULL, next_offset BIGINT NOT NULL, settled TEXT NOT NULL, epoch BIGINT NOT NULL, PRIMARY KEY (group_id, "     \
    "topic, partition))"

/* A trigger that refuses every position write of `topic` while the switch
 * table's row says on_ = 1, as a full disk would. On PostgreSQL the positions
 * table is shared: the trigger's name is the test process's, and it fires for
 * the test's topic only. */
static void refuse_position_writes(store *s, const char *topic, const char *sw, const char *trigger) {
    cstdb_exec(s->check, "DROP TABLE IF EXISTS %s; CREATE TABLE %s (on_ INTEGER); INSERT INTO %s VALUES (1); %s", sw,
               sw, sw, POSITIONS_TABLE);
    if (cstdb_is_postgres()) {
        cstdb_exec(s->check,
                   "CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                   "IF (SELECT on_ FROM %s) = 1 THEN RAISE EXCEPTION 'disk full (test)'; END IF; RETURN NEW; END $$; "
                   "DROP TRIGGER IF EXISTS %s ON cstream_positions; "
                   "CREATE TRIGGER %s BEFORE UPDATE OF next_offset ON cstream_positions FOR EACH ROW "
                   "WHEN (NEW.topic = '%s') EXECUTE FUNCTION %s()",
                   trigger, sw, trigger, trigger, topic, trigger);
    } else {
        cstdb_exec(s->check,
                   "CREATE TRIGGER %s BEFORE UPDATE OF next_offset ON cstream_positions "
                   "WHEN NEW.topic = '%s' AND (SELECT on_ FROM %s) = 1 "
                   "BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END",
                   trigger, topic, sw);
    }
}

/* The database refuses every position write (a trigger, as a full disk
 * would): each window rolls back and is tried again, nothing is committed
 * and the row does not move. Once it accepts, every record's effect commits
 * once. */
static void a_refused_commit_rolls_back_and_keeps_the_position(void **state) {
    (void)state;
    char topic[128], group[160], sw[64], trigger[64];
    cst_fresh("db-refused", 2, topic, group, sizeof topic);
    store s;
    store_open(&s, "refused");
    snprintf(sw, sizeof sw, "refuse_%d", (int)getpid());
    snprintf(trigger, sizeof trigger, "refuse_writes_%d", (int)getpid());
    refuse_position_writes(&s, topic, sw, trigger);
    CST_OK(cs_test_produce_many(cst_cluster, topic, "v", 100));
    fixture f;
    fixture_init(&f, s.effects);
    app_run r = start(s.url, topic, group, &f, 2);
    stat_wait aborts = {r.sub, 1, 3};
    if (!cst_wait(stat_reached, &aborts, 60000)) fail_msg("the refused windows did not roll back");
    assert_int_equal(effects_count(&s), 0);
    assert_int_equal(cstdb_query(s.check, "SELECT MAX(next_offset) FROM cstream_positions WHERE topic = '%s'", topic),
                     -1);
    cstdb_exec(s.check, "UPDATE %s SET on_ = 0", sw);
    rows_at want = {s.check, 2, -1, topic};
    if (!cst_wait(rows_reached, &want, 60000)) fail_msg("the rows did not reach the ends once accepted");
    assert_int_equal(effects_count(&s), 100);
    assert_int_equal(effects_distinct(&s), 100);
    stop(&r);
    cstdb_exec(s.check, "DROP TRIGGER %s%s; DROP TABLE %s", trigger, cstdb_is_postgres() ? " ON cstream_positions" : "",
               sw);
    if (cstdb_is_postgres()) cstdb_exec(s.check, "DROP FUNCTION %s()", trigger);
    store_close(&s);
}

/* A handler that writes and goes pending gets its writes undone: its later
 * ack counts as a retry, and the record's effect commits once, from its
 * second run. */
static void writes_of_a_pending_run_are_undone(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("db-pending", 1, topic, group, sizeof topic);
    store s;
    store_open(&s, "pending");
    for (int i = 0; i < 10; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    fixture f;
    fixture_init(&f, s.effects);
    f.pending_offset = 3;
    app_run r = start(s.url, topic, group, &f, 1);
    cs_delivery *d = NULL;
    for (int64_t until = cst_now_ms() + 30000; !(d = atomic_load(&f.held)) && cst_now_ms() < until;) usleep(1000);
    assert_non_null(d);
    CST_OK(cs_delivery_settle(d, CS_ACK));
    rows_at want = {s.check, 1, 10, topic};
    if (!cst_wait(rows_reached, &want, 30000)) fail_msg("the row did not reach 10");
    assert_int_equal(effects_count(&s), 10);
    assert_int_equal(cstdb_query(s.check, "SELECT attempt FROM %s WHERE record_offset = 3", s.effects), 2);
    stop(&r);
    store_close(&s);
}

/* A positions table of another shape stops the open, naming the table and
 * the missing column; a URL of no known kind names itself. On PostgreSQL the
 * table of another shape lives in a schema of its own, first on the
 * connection's search_path, so that the shared one stays as it is. */
static void a_positions_table_of_another_shape_is_refused(void **state) {
    (void)state;
    char url[800], schema[64];
    store s;
    store_open(&s, "shape");
    snprintf(url, sizeof url, "%s", s.url);
    if (cstdb_is_postgres()) {
        snprintf(schema, sizeof schema, "shape_%d", (int)getpid());
        cstdb_exec(s.check, "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s", schema, schema);
        cstdb_exec(s.check, "CREATE TABLE %s.cstream_positions (group_id TEXT, topic TEXT, partition INTEGER)", schema);
        /* libpq's options parameter: -c search_path=<schema> for the session. */
        snprintf(url, sizeof url, "%s%coptions=-csearch_path%%3D%s", s.url, strchr(s.url, '?') ? '&' : '?', schema);
    } else {
        cstdb_exec(s.check, "CREATE TABLE cstream_positions (group_id TEXT, topic TEXT, partition INTEGER)");
    }
    cs_db *out = NULL;
    assert_int_equal(cs_db_open(url, &out), CS_ERR_STATE);
    assert_null(out);
    assert_non_null(strstr(cs_errmsg(), "cstream_positions"));
    assert_non_null(strstr(cs_errmsg(), "next_offset"));
    assert_int_equal(cs_db_open("mysql://x", &out), CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "mysql://x"));
    if (cstdb_is_postgres()) cstdb_exec(s.check, "DROP SCHEMA %s CASCADE", schema);
    store_close(&s);
}

/* ---- PostgreSQL only: the server goes away under load ------------------------ */

enum { OUTAGE_PARTS = 4, OUTAGE_RECORDS = 2000, OUTAGE_IDLE_RECORDS = 100 };

/* The outage test's fixture, for its teardown: a test that failed while a
 * run held the connection lets it go, so that the next test can run. */
static fixture *outage_fixture;

/* Records flow through 4 partitions and 4 workers. Once some are committed,
 * the next run that writes holds the connection after its write, so that the
 * window's transaction is open when the server goes (the script verbs of
 * `before_release`), then lets go. That window cannot commit: it rolls back
 * and its partitions are read again, the connection is made again (after the
 * verbs of `after_abort`), and every record's effect ends up committed exactly
 * once, with every partition's row at its end. Then the same outage again
 * while nothing is open. */
static void server_outage_under_load(const char *name, const char *const *before_release,
                                     const char *const *after_abort) {
    char topic[128], group[160];
    cst_fresh(name, OUTAGE_PARTS, topic, group, sizeof topic);
    store s;
    store_open(&s, "outage");
    CST_OK(cs_test_produce_many(cst_cluster, topic, "v", OUTAGE_RECORDS / 2));
    static fixture f;
    fixture_init(&f, s.effects);
    outage_fixture = &f;
    app_run r = start(s.url, topic, group, &f, 4);
    /* Committed records first: the outage hits a flow, not a start. */
    if (!cst_wait(effects_committed, &s, 60000)) fail_msg("no record was committed");
    atomic_store(&f.hold_armed, true);
    /* The second half makes sure that a run comes after the arming. */
    CST_OK(cs_test_produce_many(cst_cluster, topic, "w", OUTAGE_RECORDS / 2));
    flag_wait held = {&f.blocked};
    if (!cst_wait(flag_set, &held, 60000)) fail_msg("no run took the hold");
    for (const char *const *verb = before_release; *verb; verb++) cstdb_server(*verb);
    atomic_store(&f.release, true);
    stat_wait aborts = {r.sub, 1, 1};
    if (!cst_wait(stat_reached, &aborts, 60000)) fail_msg("the window open across the outage did not roll back");
    for (const char *const *verb = after_abort; *verb; verb++) cstdb_server(*verb);
    rows_at want = {s.check, OUTAGE_PARTS, -1, topic};
    if (!cst_wait(rows_reached, &want, 120000)) fail_msg("positions rows did not reach every partition's end");
    assert_int_equal(effects_count(&s), OUTAGE_RECORDS);
    assert_int_equal(effects_distinct(&s), OUTAGE_RECORDS);

    /* The same outage while the app is idle (nothing open): its connection
     * looks healthy until used, and the next run's BEGIN finds it ended. It
     * is made again there: no run retries for it (every new record's effect
     * is its first attempt's) and no window rolls back. */
    long long retried = cstdb_query(s.check, "SELECT COUNT(*) FROM %s WHERE attempt > 1", s.effects);
    cs_sub_stats before;
    cs_sub_stats_get(r.sub, &before);
    for (const char *const *verb = before_release; *verb; verb++) cstdb_server(*verb);
    for (const char *const *verb = after_abort; *verb; verb++) cstdb_server(*verb);
    CST_OK(cs_test_produce_many(cst_cluster, topic, "x", OUTAGE_IDLE_RECORDS));
    if (!cst_wait(rows_reached, &want, 120000)) fail_msg("positions rows did not reach the ends after the idle outage");
    assert_int_equal(effects_count(&s), OUTAGE_RECORDS + OUTAGE_IDLE_RECORDS);
    assert_int_equal(effects_distinct(&s), OUTAGE_RECORDS + OUTAGE_IDLE_RECORDS);
    assert_int_equal(cstdb_query(s.check, "SELECT COUNT(*) FROM %s WHERE attempt > 1", s.effects), retried);
    cs_sub_stats after;
    cs_sub_stats_get(r.sub, &after);
    assert_int_equal(after.aborts, before.aborts);
    stop(&r);
    outage_fixture = NULL;
    store_close(&s);
}

/* scripts/postgres restart (a fast shutdown: every session ends at once, then
 * the server starts again) while the window is open. */
static void a_server_restart_under_load_commits_each_record_once(void **state) {
    (void)state;
    if (!cstdb_is_postgres()) cst_skip("a PostgreSQL server restart: CSTEST_DATABASE_URL is not set (SQLite)");
    const char *restart[] = {"restart", NULL}, *none[] = {NULL};
    server_outage_under_load("db-restart", restart, none);
}

/* scripts/postgres kill (SIGKILL, as a crash) while the window is open; the
 * held run is let go and its window rolls back while the server is still
 * down (new runs cannot connect and retry), then it starts again (crash
 * recovery). */
static void a_server_kill_under_load_commits_each_record_once(void **state) {
    (void)state;
    if (!cstdb_is_postgres()) cst_skip("a PostgreSQL server kill: CSTEST_DATABASE_URL is not set (SQLite)");
    const char *kill[] = {"kill", NULL}, *start_again[] = {"start", NULL};
    server_outage_under_load("db-kill", kill, start_again);
}

/* After an outage test, failed or not: no run held, and the server up. */
static int outage_over(void **state) {
    (void)state;
    if (outage_fixture) atomic_store(&outage_fixture->release, true);
    if (cstdb_is_postgres()) cstdb_server("start");
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_record_writes_once_across_retries),
        cmocka_unit_test(positions_are_read_from_the_database),
        cmocka_unit_test(a_stale_owner_is_fenced),
        cmocka_unit_test(a_refused_commit_rolls_back_and_keeps_the_position),
        cmocka_unit_test(writes_of_a_pending_run_are_undone),
        cmocka_unit_test(a_positions_table_of_another_shape_is_refused),
        cmocka_unit_test_teardown(a_server_restart_under_load_commits_each_record_once, outage_over),
        cmocka_unit_test_teardown(a_server_kill_under_load_commits_each_record_once, outage_over),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
