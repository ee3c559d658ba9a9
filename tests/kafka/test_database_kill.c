/* test_database_kill.c — the crash proof of Database mode (exactly-once into a
 * database): child services (support/db_worker.c) insert one effect row per
 * record through the window's transaction, into a table with no unique
 * constraint, and this process SIGKILLs, SIGSTOPs, scales them and restarts
 * the database under them. Its own connection then counts the rows, as an
 * independent reader: lost = records without a row, duplicated = rows beyond
 * one per record. Every scenario asserts 0 and 0.
 *
 * The store: SQLite on the embedded cluster, PostgreSQL on the real broker
 * (CS_DB_STORE=sqlite|postgresql picks another). PostgreSQL is the
 * throwaway server of scripts/postgres in CS_DB_PG_DIR (default
 * .cache/postgres-proof: not the default server, which the restart scenario
 * must not touch).
 *
 * - kills: one child at a time SIGKILLed at a random moment, a new one takes
 *   over; some kill must land with runs whose rows were not committed (they
 *   rolled back), or the kills tested nothing.
 * - zombie: two children; one is stopped (SIGSTOP: on PostgreSQL with its
 *   window open, on SQLite with its runs held and no write lock), its
 *   partitions move to the other, which claims them and handles them (more
 *   records are written for it); it is woken (SIGCONT) and goes on: on
 *   PostgreSQL its window is fenced by the epochs or rolled back as lost,
 *   never committed; on both, no record has two rows.
 * - database restart (PostgreSQL): scripts/postgres restart, CS_KILLS times,
 *   under two children.
 * - scale out and in: a second child joins, then the first leaves, CS_KILLS times.
 *
 * CS_KILLS sets the kills, restarts and scale cycles (3 when unset; `make
 * proof` runs 20). At the end a table of every scenario's figures. */
#include <fcntl.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cstest.h"

#ifndef DB_WORKER
#error "DB_WORKER must name the db_worker executable"
#endif

enum { PARTS = 4, MAX_KILLS = 64, MAX_CHILDREN = 4, WAIT_MS = 240000, MAX_FIGURES = 8 };
#define TABLE "dbkill_effects"

/* ---- the store, read by this process's own connection ------------------------ */

typedef struct store {
    bool pg;
    char url[600];
    char path[512]; /* SQLite */
    sqlite3 *lite;
    PGconn *conn;
} store;

static bool use_postgres(void) {
    const char *s = getenv("CS_DB_STORE");
    if (s && *s) return !strcmp(s, "postgresql");
    return !cs_test_cluster_is_embedded(cst_cluster);
}

static const char *pg_dir(void) {
    const char *d = getenv("CS_DB_PG_DIR");
    return d && *d ? d : CSTREAM_SOURCE_DIR "/.cache/postgres-proof";
}

/* scripts/postgres ACTION on this test's server; its output's first line into out. */
static int pg_script(const char *action, char *out, size_t cap) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "CSTREAM_PG_DIR='%s' '%s/scripts/postgres' %s", pg_dir(), CSTREAM_SOURCE_DIR, action);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[700] = "";
    if (!fgets(line, sizeof line, p)) line[0] = '\0';
    while (fgetc(p) != EOF) {}
    int rc = pclose(p);
    line[strcspn(line, "\n")] = '\0';
    if (out) snprintf(out, cap, "%s", line);
    return rc;
}

static bool pg_ok(store *st) {
    if (st->conn && PQstatus(st->conn) == CONNECTION_OK) return true;
    if (st->conn) PQfinish(st->conn);
    st->conn = PQconnectdb(st->url);
    return PQstatus(st->conn) == CONNECTION_OK;
}

/* Runs sql; for PostgreSQL a broken connection (a restart) is made again,
 * for up to 60 s. False if it still fails. */
static bool store_exec(store *st, const char *sql) {
    if (!st->pg) {
        char *msg = NULL;
        if (sqlite3_exec(st->lite, sql, NULL, NULL, &msg) == SQLITE_OK) return true;
        fprintf(stderr, "%s: %s\n", sql, msg ? msg : "?");
        sqlite3_free(msg);
        return false;
    }
    for (int64_t until = cst_now_ms() + 60000; cst_now_ms() < until; usleep(100 * 1000)) {
        if (!pg_ok(st)) continue;
        PGresult *r = PQexec(st->conn, sql);
        ExecStatusType s = PQresultStatus(r);
        PQclear(r);
        if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) return true;
        if (PQstatus(st->conn) == CONNECTION_OK) {
            fprintf(stderr, "%s: %s", sql, PQerrorMessage(st->conn));
            return false;
        }
    }
    return false;
}

/* Calls fn for each row of a query of integer columns (at most 4). */
static bool store_rows(store *st, const char *sql, void (*fn)(const long long *cols, void *arg), void *arg) {
    long long cols[4] = {0};
    if (!st->pg) {
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(st->lite, sql, -1, &s, NULL) != SQLITE_OK)
            fail_msg("%s: %s", sql, sqlite3_errmsg(st->lite));
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            for (int c = 0; c < sqlite3_column_count(s) && c < 4; c++) cols[c] = sqlite3_column_int64(s, c);
            fn(cols, arg);
        }
        sqlite3_finalize(s);
        return rc == SQLITE_DONE;
    }
    for (int64_t until = cst_now_ms() + 60000; cst_now_ms() < until; usleep(100 * 1000)) {
        if (!pg_ok(st)) continue;
        PGresult *r = PQexec(st->conn, sql);
        if (PQresultStatus(r) == PGRES_TUPLES_OK) {
            for (int i = 0; i < PQntuples(r); i++) {
                for (int c = 0; c < PQnfields(r) && c < 4; c++) cols[c] = strtoll(PQgetvalue(r, i, c), NULL, 10);
                fn(cols, arg);
            }
            PQclear(r);
            return true;
        }
        PQclear(r);
        if (PQstatus(st->conn) == CONNECTION_OK) fail_msg("%s: %s", sql, PQerrorMessage(st->conn));
    }
    return false;
}

static void take_first(const long long *cols, void *arg) { *(long long *)arg = cols[0]; }

static long long store_value(store *st, const char *fmt, ...) {
    char sql[1000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    long long v = -1;
    if (!store_rows(st, sql, take_first, &v)) fail_msg("%s: the database did not answer", sql);
    return v;
}

static bool pg_started; /* this process started the server: teardown stops it */

static void store_open(store *st, const char *name) {
    memset(st, 0, sizeof *st);
    st->pg = use_postgres();
    if (st->pg) {
        if (!pg_started && pg_script("status", NULL, 0) != 0) pg_started = true;
        if (pg_script("start", st->url, sizeof st->url) != 0 || strncmp(st->url, "postgresql://", 13))
            fail_msg("scripts/postgres start (CSTREAM_PG_DIR=%s) failed: %s", pg_dir(), st->url);
        if (!pg_ok(st)) fail_msg("connect %s: %s", st->url, PQerrorMessage(st->conn));
        assert_true(store_exec(st, "SET client_min_messages = warning"));
        assert_true(store_exec(st, "CREATE TABLE IF NOT EXISTS " TABLE " (topic TEXT NOT NULL, partition INTEGER "
                                   "NOT NULL, off BIGINT NOT NULL, pid INTEGER NOT NULL)"));
        assert_true(store_exec(st, "CREATE INDEX IF NOT EXISTS " TABLE "_at ON " TABLE " (topic, partition, off)"));
        return;
    }
    snprintf(st->path, sizeof st->path, "/tmp/cstream-dbkill-%d-%s.sqlite", (int)getpid(), name);
    for (const char *sfx = ""; sfx; sfx = !*sfx ? "-wal" : !strcmp(sfx, "-wal") ? "-shm" : NULL) {
        char p[600];
        snprintf(p, sizeof p, "%s%s", st->path, sfx);
        unlink(p);
    }
    snprintf(st->url, sizeof st->url, "sqlite:%s", st->path);
    assert_int_equal(sqlite3_open(st->path, &st->lite), SQLITE_OK);
    sqlite3_busy_timeout(st->lite, 30000);
    assert_true(store_exec(st, "PRAGMA journal_mode=WAL"));
    assert_true(store_exec(st, "CREATE TABLE IF NOT EXISTS " TABLE " (topic TEXT NOT NULL, partition INTEGER NOT "
                               "NULL, off INTEGER NOT NULL, pid INTEGER NOT NULL)"));
}

static void store_close(store *st) {
    if (st->conn) PQfinish(st->conn);
    if (st->lite) sqlite3_close(st->lite);
    if (st->path[0]) unlink(st->path);
    st->conn = NULL;
    st->lite = NULL;
}

/* ---- a scenario ---------------------------------------------------------------- */

typedef struct figures {
    char scenario[32], store[16];
    int events;
    size_t records;
    long long rows, lost, duplicated, rolled_back, fenced;
} figures;

static figures table[MAX_FIGURES];
static int n_table;

typedef struct child {
    pid_t pid;
    char assign[300], runs[300], stats[300], log[300], hold[300];
} child;

typedef struct scen {
    const char *name;
    int events;
    int64_t end[PARTS];
    size_t total;
    char topic[128], group[160], base[256];
    store st;
    child kids[MAX_CHILDREN];
    int n_kids;
    unsigned seed;
    const char *work_us, *workers;
} scen;

static void setup(scen *s, const char *name, int records, const char *workers, const char *work_us) {
    memset(s, 0, sizeof *s);
    s->name = name;
    s->events = cst_kills_wanted(MAX_KILLS);
    s->workers = workers;
    s->work_us = work_us;
    cst_fresh(name, PARTS, s->topic, s->group, sizeof s->topic);
    snprintf(s->base, sizeof s->base, "/tmp/%s", s->topic);
    store_open(&s->st, name);
    CST_OK(cs_test_produce_many(cst_cluster, s->topic, "effect-", records));
    for (int p = 0; p < PARTS; p++) {
        CST_OK(cs_test_end_offset(cst_cluster, s->topic, p, &s->end[p]));
        s->total += (size_t)s->end[p];
    }
    setenv("CSTREAM_BROKERS", cs_test_cluster_brokers(cst_cluster), 1);
    /* A SIGKILLed or stopped member's partitions wait for its session to
     * expire: 6 s, the floor of both clusters (group.min.session.timeout.ms). */
    setenv("DBW_SESSION_TIMEOUT_MS", "6000", 1);
    s->seed = (unsigned)time(NULL) ^ (unsigned)getpid();
}

/* Starts child i (its files named after it); extra: "NAME=VALUE" or NULL. */
static child *spawn(scen *s, const char *appname, bool hold) {
    assert_true(s->n_kids < MAX_CHILDREN);
    child *c = &s->kids[s->n_kids];
    memset(c, 0, sizeof *c);
    int i = s->n_kids++;
    snprintf(c->assign, sizeof c->assign, "%s.assign.%d", s->base, i);
    snprintf(c->runs, sizeof c->runs, "%s.runs.%d", s->base, i);
    snprintf(c->stats, sizeof c->stats, "%s.stats.%d", s->base, i);
    snprintf(c->log, sizeof c->log, "%s.log.%d", s->base, i);
    snprintf(c->hold, sizeof c->hold, "%s.hold.%d", s->base, i);
    const char *files[] = {c->assign, c->runs, c->stats, c->log, c->hold};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) unlink(files[f]);
    setenv("DBW_TABLE", TABLE, 1);
    setenv("DBW_ASSIGN_FILE", c->assign, 1);
    setenv("DBW_RUNS_FILE", c->runs, 1);
    setenv("DBW_STATS_FILE", c->stats, 1);
    setenv("DBW_LOG_FILE", c->log, 1);
    setenv("DBW_HOLD_FILE", hold ? c->hold : "", 1);
    setenv("DBW_WORK_US", s->work_us ? s->work_us : "", 1);
    setenv("PGAPPNAME", appname ? appname : "db_worker", 1);
    char *const argv[] = {DB_WORKER, s->topic, s->group, s->st.url, (char *)s->workers, NULL};
    c->pid = cst_spawn(DB_WORKER, argv);
    return c;
}

/* SIGKILLs every child still running, so that a failing test leaves none behind. */
static void kill_all(scen *s) {
    for (int i = 0; i < s->n_kids; i++)
        if (s->kids[i].pid > 0) {
            kill(s->kids[i].pid, SIGCONT);
            kill(s->kids[i].pid, SIGKILL);
            waitpid(s->kids[i].pid, NULL, 0);
            s->kids[i].pid = 0;
        }
}

#define FAIL(s, ...)                                                                                                   \
    do {                                                                                                               \
        kill_all(s);                                                                                                   \
        fail_msg(__VA_ARGS__);                                                                                         \
    } while (0)

/* Stops a child with SIGTERM; it must exit 0. */
static void stop_child(scen *s, child *c) {
    kill(c->pid, SIGTERM);
    int status;
    waitpid(c->pid, &status, 0);
    c->pid = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        FAIL(s, "%s: a worker stopped badly: %s %d (its log: %s)", s->name, WIFEXITED(status) ? "exit" : "signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), c->log);
}

static long long distinct_rows(scen *s) {
    return store_value(
        &s->st, "SELECT COUNT(*) FROM (SELECT DISTINCT partition, off FROM " TABLE " WHERE topic = '%s') t", s->topic);
}

/* Fails, after killing the children, if one of them exited. */
static void check_children(scen *s, const char *what) {
    for (int i = 0; i < s->n_kids; i++) {
        int status;
        if (s->kids[i].pid > 0 && waitpid(s->kids[i].pid, &status, WNOHANG) == s->kids[i].pid) {
            s->kids[i].pid = 0;
            FAIL(s, "%s, %s: a worker exited early (status %d; its log: %s)", s->name, what, status, s->kids[i].log);
        }
    }
}

/* Polls pred every 20 ms until true; fails after WAIT_MS or if a child exits. */
static void wait_for(scen *s, bool (*pred)(scen *s, void *arg), void *arg, const char *what) {
    for (int64_t deadline = cst_now_ms() + WAIT_MS; !pred(s, arg); usleep(20 * 1000)) {
        check_children(s, what);
        if (cst_now_ms() > deadline) FAIL(s, "%s: %s: not within %d s", s->name, what, WAIT_MS / 1000);
    }
}

static bool rows_reach(scen *s, void *arg) { return distinct_rows(s) >= *(long long *)arg; }

static void wait_rows(scen *s, long long target, const char *what) { wait_for(s, rows_reach, &target, what); }

/* Every partition's positions row at its end: the last window committed. */
static bool positions_at_end(scen *s, void *arg) {
    (void)arg;
    for (int p = 0; p < PARTS; p++)
        if (store_value(&s->st,
                        "SELECT COALESCE(MAX(next_offset), -1) FROM cstream_positions WHERE group_id = '%s' AND "
                        "topic = '%s' AND partition = %d",
                        s->group, s->topic, p) != s->end[p])
            return false;
    return true;
}

/* Waits until every record has its row and the positions are at the end. */
static void wait_all(scen *s) {
    wait_rows(s, (long long)s->total, "every record's row");
    wait_for(s, positions_at_end, NULL, "positions at the end");
}

/* The partitions a child holds now, from its assign file, as a bit set. */
static unsigned held_by(const child *c) {
    FILE *f = fopen(c->assign, "r");
    if (!f) return 0;
    unsigned held = 0;
    char sign;
    int p;
    while (fscanf(f, " %c%d", &sign, &p) == 2)
        if (p >= 0 && p < 32) held = sign == '+' ? held | 1u << p : held & ~(1u << p);
    fclose(f);
    return held;
}

/* (partition, offset) pairs of a runs file, or of the committed rows. */
static void seen_add(const long long *cols, void *arg) { cst_seen_add(arg, (int32_t)cols[0], cols[1]); }

static int64_t max_end(scen *s) {
    int64_t m = 1;
    for (int p = 0; p < PARTS; p++) m = s->end[p] > m ? s->end[p] : m;
    return m;
}

static cst_seen *committed_set(scen *s) {
    cst_seen *seen = cst_seen_new(PARTS, max_end(s));
    char sql[300];
    snprintf(sql, sizeof sql, "SELECT partition, off FROM " TABLE " WHERE topic = '%s'", s->topic);
    if (!store_rows(&s->st, sql, seen_add, seen)) FAIL(s, "%s: the database did not answer", sql);
    return seen;
}

static cst_seen *runs_set(scen *s, const child *c) {
    cst_seen *seen = cst_seen_new(PARTS, max_end(s));
    FILE *f = fopen(c->runs, "r");
    int p;
    long long o;
    while (f && fscanf(f, "%d %lld", &p, &o) == 2)
        if (p >= 0 && p < PARTS && o >= 0 && o < max_end(s)) cst_seen_add(seen, p, o);
    if (f) fclose(f);
    return seen;
}

/* Runs of child c whose rows are not committed: rolled back, or in a window still open. */
static long long uncommitted_runs(scen *s, const child *c) {
    cst_seen *runs = runs_set(s, c), *rows = committed_set(s);
    long long n = 0;
    for (int p = 0; p < PARTS; p++)
        for (int64_t o = 0; o < s->end[p]; o++) n += cst_seen_count(runs, p, o) > 0 && cst_seen_count(rows, p, o) == 0;
    cst_seen_free(runs);
    cst_seen_free(rows);
    return n;
}

static long long stat_of(const child *c, const char *name) {
    char *text = cst_slurp(c->stats);
    const char *at = strstr(text, name);
    long long v = at ? strtoll(at + strlen(name), NULL, 10) : -1;
    free(text);
    return v;
}

/* Counts the rows, prints and records the figures, and asserts 0 lost, 0 duplicated. */
static figures judge(scen *s, long long rolled_back, long long fenced) {
    long long rows = store_value(&s->st, "SELECT COUNT(*) FROM " TABLE " WHERE topic = '%s'", s->topic);
    long long distinct = distinct_rows(s);
    figures f = {.events = s->events, .records = s->total, .rows = rows, .rolled_back = rolled_back, .fenced = fenced};
    snprintf(f.scenario, sizeof f.scenario, "%s", s->name);
    snprintf(f.store, sizeof f.store, "%s", s->st.pg ? "postgresql" : "sqlite");
    f.lost = (long long)s->total - distinct;
    f.duplicated = rows - distinct;
    printf("FIGURES database scenario=%s store=%s cluster=%s events=%d records=%zu rows=%lld lost=%lld "
           "duplicated=%lld rolled_back=%lld fenced=%lld\n",
           f.scenario, f.store, cs_test_cluster_is_embedded(cst_cluster) ? "embedded" : "real", f.events, f.records,
           rows, f.lost, f.duplicated, rolled_back, fenced);
    fflush(stdout);
    if (n_table < MAX_FIGURES) table[n_table++] = f;
    for (int i = 0; i < s->n_kids; i++) {
        const char *files[] = {s->kids[i].assign, s->kids[i].runs, s->kids[i].stats, s->kids[i].log, s->kids[i].hold};
        for (size_t k = 0; k < sizeof files / sizeof *files; k++) unlink(files[k]);
    }
    store_close(&s->st);
    assert_int_equal(f.lost, 0);
    assert_int_equal(f.duplicated, 0);
    return f;
}

/* ---- the scenarios --------------------------------------------------------------- */

static int records_here(int embedded, int real) { return cs_test_cluster_is_embedded(cst_cluster) ? embedded : real; }

/* One child at a time, SIGKILLed once it committed a random share of what
 * is left; a new one takes over; the last one handles the rest. */
static void kills_lose_and_duplicate_nothing(void **state) {
    (void)state;
    scen s;
    /* Enough records that the last kills still find some left: each kill
     * lands some hundreds of records past its target (8 fast workers). */
    int kills = cst_kills_wanted(MAX_KILLS);
    setup(&s, "db-kills",
          records_here(kills * 700 > 5000 ? kills * 700 : 5000, kills * 700 > 10000 ? kills * 700 : 10000), "8", NULL);
    printf("\n%s: %zu records, %d partitions, 8 workers, %d kills (seed %u)\n", s.st.pg ? "postgresql" : "sqlite",
           s.total, PARTS, s.events, s.seed);
    printf("| kill | rows committed at the kill | runs the kill rolled back |\n|---|---|---|\n");
    long long rolled_back = 0;
    for (int k = 0; k < s.events; k++) {
        long long before = distinct_rows(&s);
        long long left = (long long)s.total - before;
        long long target = before + 50 + (left > 400 ? rand_r(&s.seed) % (left / (s.events + 1)) : 0);
        if (target > (long long)s.total) target = (long long)s.total;
        child *c = spawn(&s, NULL, false);
        char what[40];
        snprintf(what, sizeof what, "before kill %d", k + 1);
        wait_rows(&s, target, what);
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        c->pid = 0;
        /* Runs the dead child made whose rows are not committed: its open
         * window, which died with it. */
        long long lost_window = uncommitted_runs(&s, c);
        rolled_back += lost_window;
        printf("| %d | %lld | %lld |\n", k + 1, distinct_rows(&s), lost_window);
        s.n_kids = 0; /* the next child reuses the slot's files */
    }
    child *last = spawn(&s, NULL, false);
    wait_all(&s);
    stop_child(&s, last);
    judge(&s, rolled_back, 0);
    if (rolled_back == 0) fail_msg("no kill of %d landed with rows written but not committed", s.events);
}

/* Holds child c's writes, waits until none is in flight and every row it
 * wrote is committed (its transaction is closed), then SIGSTOPs it. */
static bool held_ack(scen *s, void *arg) {
    (void)s;
    char ack[320];
    snprintf(ack, sizeof ack, "%s.held", ((child *)arg)->hold);
    return access(ack, F_OK) == 0;
}

static bool runs_committed(scen *s, void *arg) { return uncommitted_runs(s, arg) == 0; }

/* Whether some connection holds the SQLite file's write lock: a write
 * transaction of our own cannot begin at once. */
static bool sqlite_write_locked(const char *path) {
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        sqlite3_close(db);
        return true;
    }
    sqlite3_busy_timeout(db, 0);
    bool locked = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK;
    if (!locked) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
    return locked;
}

typedef struct takeover {
    child *zombie, *other;
    unsigned zombie_parts;
} takeover;

/* The other child holds every partition and has committed rows in each of
 * the zombie's, from its claim on. */
static bool taken_over(scen *s, void *arg) {
    takeover *t = arg;
    if (held_by(t->other) != (1u << PARTS) - 1) return false;
    for (int p = 0; p < PARTS; p++)
        if ((t->zombie_parts & 1u << p) &&
            store_value(&s->st, "SELECT COUNT(*) FROM " TABLE " WHERE topic = '%s' AND partition = %d AND pid = %d",
                        s->topic, p, (int)t->other->pid) == 0)
            return false;
    return true;
}

static bool rows_by(scen *s, void *arg) {
    child *c = arg;
    return store_value(&s->st, "SELECT COUNT(*) FROM " TABLE " WHERE topic = '%s' AND pid = %d", s->topic,
                       (int)c->pid) > 0;
}

static bool both_hold(scen *s, void *arg) {
    takeover *t = arg;
    return held_by(t->zombie) && held_by(t->other) && rows_by(s, t->other);
}

static void count_line(const char *text, const char *needle, long long *n) {
    for (const char *at = text; (at = strstr(at, needle)); at += strlen(needle)) (*n)++;
}

/* Writes `n` more records and takes the topic's ends again: the scenarios
 * that wait for events (a join, a restart) feed their load as they go, so
 * that records are in flight at each event however long it takes. */
static void produce_more(scen *s, int n) {
    CST_OK(cs_test_produce_many(cst_cluster, s->topic, "more-", n));
    s->total = 0;
    for (int p = 0; p < PARTS; p++) {
        CST_OK(cs_test_end_offset(cst_cluster, s->topic, p, &s->end[p]));
        s->total += (size_t)s->end[p];
    }
}

/* A is stopped with its writes held and its transaction closed; B takes its
 * partitions over (claims them: their epochs move past A's) and handles
 * them; A is woken with a run of each of its old partitions going on to
 * write: its window is fenced (or rolled back as lost), its rows never
 * commit, and no record has two rows. */
static void a_zombie_is_fenced(void **state) {
    (void)state;
    scen s;
    setup(&s, "db-zombie", records_here(4000, 8000), "2", "4000");
    s.events = 1;
    child *a = spawn(&s, "dbkill-zombie", !s.st.pg);
    long long some = 100;
    wait_rows(&s, some, "the first child's rows");
    child *b = spawn(&s, "dbkill-other", false);
    takeover t = {a, b, 0};
    wait_for(&s, both_hold, &t, "both children hold partitions");
    t.zombie_parts = held_by(a);
    long long epochs_before =
        store_value(&s.st, "SELECT SUM(epoch) FROM cstream_positions WHERE group_id = '%s'", s.group);
    if (s.st.pg) {
        /* Stopped with its window open (its inserts in it), but not in the
         * middle of the window's commit: its session then holds row locks on
         * cstream_positions that the other's claim would wait for until it
         * is woken. Woken at once and stopped again if it does. */
        for (int tries = 0;; tries++) {
            kill(a->pid, SIGSTOP);
            usleep(50 * 1000); /* a statement already sent lands */
            if (store_value(&s.st,
                            "SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid JOIN pg_class c "
                            "ON c.oid = l.relation WHERE a.application_name = 'dbkill-zombie' AND c.relname = "
                            "'cstream_positions'") == 0)
                break;
            kill(a->pid, SIGCONT);
            if (tries == 100) FAIL(&s, "the zombie was in its window's commit at each of 100 stops");
            usleep(30 * 1000);
        }
    } else {
        /* SQLite: a window holds the file's write lock from its first insert
         * to its commit, and a process stopped with it would keep the
         * other's claim out. So its writes are held first (no run between
         * its check and its insert), its window commits and closes, then it
         * is stopped; once woken its held runs write into a new window. */
        close(open(a->hold, O_WRONLY | O_CREAT, 0644));
        wait_for(&s, held_ack, a, "the zombie's writes held");
        wait_for(&s, runs_committed, a, "the zombie's rows committed");
        /* A run that took the connection before the hold, or a window
         * commit, may still hold the write lock: stopped then, it would keep
         * the other's claim out for as long as it sleeps. Checked from here
         * (a write transaction that cannot begin at once), and the zombie
         * woken and stopped again until it holds none. */
        for (int tries = 0;; tries++) {
            kill(a->pid, SIGSTOP);
            usleep(50 * 1000); /* a statement already running lands */
            if (!sqlite_write_locked(s.st.path)) break;
            kill(a->pid, SIGCONT);
            if (tries == 100) FAIL(&s, "the zombie held the file's write lock at each of 100 stops");
            usleep(30 * 1000);
        }
        unlink(a->hold); /* seen once woken */
    }
    /* Records in every partition for the other child to commit, whatever
     * the zombie got through before it stopped. */
    produce_more(&s, 400);
    wait_for(&s, taken_over, &t, "the other child took the zombie's partitions over");
    long long epochs_taken =
        store_value(&s.st, "SELECT SUM(epoch) FROM cstream_positions WHERE group_id = '%s'", s.group);
    kill(a->pid, SIGCONT);
    wait_all(&s);
    stop_child(&s, a);
    stop_child(&s, b);
    char *log = cst_slurp(a->log);
    long long fence_lines = 0, rollback_lines = 0;
    count_line(log, "database fence", &fence_lines);
    count_line(log, "database window rolled back", &rollback_lines);
    char line[600];
    if (cst_log_line(log, "database fence", line, sizeof line)) printf("zombie's log: %s\n", line);
    if (cst_log_line(log, "database window rolled back", line, sizeof line)) printf("zombie's log: %s\n", line);
    free(log);
    long long fenced = stat_of(a, "db_fenced "), aborts = stat_of(a, "aborts ");
    printf("zombie: partitions %#x, epochs %lld -> %lld at the takeover; the zombie's fences %lld (log lines %lld), "
           "rollbacks %lld (log lines %lld)\n",
           t.zombie_parts, epochs_before, epochs_taken, fenced, fence_lines, aborts, rollback_lines);
    judge(&s, aborts, fenced);
    assert_true(epochs_taken > epochs_before);
    /* PostgreSQL: it was stopped with its window open, its writes in it:
     * that window was fenced, or rolled back as the assignment was lost
     * (whichever it learnt first), and did not commit (duplicated is 0).
     * SQLite: it was stopped with no window open (the file's lock), so
     * what it learns once woken is timing: its runs may find their records
     * stale and write nothing; duplicated 0 is the property. It may also
     * rejoin and handle records of its own afterwards. */
    if (s.st.pg) assert_true(fenced + aborts >= 1);
}

/* PostgreSQL restarted (fast shutdown: every session cut) CS_KILLS times
 * under two children, each time once they committed rows of the records
 * written for it and with more left: windows roll back and are read again. */
static void proof_database_restart_loses_and_duplicates_nothing(void **state) {
    (void)state;
    scen s;
    setup(&s, "db-restart", 1000, "2", "2000");
    if (!s.st.pg) fail_msg("the restart scenario needs PostgreSQL (CS_DB_STORE=postgresql)");
    child *a = spawn(&s, NULL, false), *b = spawn(&s, NULL, false);
    for (int k = 0; k < s.events; k++) {
        long long before = distinct_rows(&s);
        produce_more(&s, 2000);
        wait_rows(&s, before + 500, "rows before a restart");
        char out[700];
        if (pg_script("restart", out, sizeof out) != 0) FAIL(&s, "scripts/postgres restart failed: %s", out);
    }
    wait_all(&s);
    stop_child(&s, a);
    stop_child(&s, b);
    long long aborts = stat_of(a, "aborts ") + stat_of(b, "aborts ");
    judge(&s, aborts, 0);
    if (aborts == 0) fail_msg("no window rolled back across %d restarts: they tested nothing", s.events);
}

/* Scale out (a second child joins) and in (the older one stops), CS_KILLS
 * times, with records written for each cycle. */
static void proof_scaling_out_and_in_loses_and_duplicates_nothing(void **state) {
    (void)state;
    scen s;
    setup(&s, "db-scale", 1000, "2", "2000");
    child *running = spawn(&s, NULL, false);
    wait_for(&s, rows_by, running, "the first child's rows");
    for (int k = 0; k < s.events; k++) {
        if (s.n_kids == MAX_CHILDREN) { /* reuse the slots of the stopped ones */
            s.kids[0] = *running;
            running = &s.kids[0];
            s.n_kids = 1;
        }
        produce_more(&s, 4000);
        child *joined = spawn(&s, NULL, false);
        takeover t = {running, joined, 0};
        wait_for(&s, both_hold, &t, "scale out: both hold partitions and the new one wrote");
        stop_child(&s, running);
        long long more = distinct_rows(&s) + 200;
        if (more > (long long)s.total) more = (long long)s.total;
        wait_rows(&s, more, "scale in: the survivor handles");
        running = joined;
    }
    wait_all(&s);
    stop_child(&s, running);
    judge(&s, 0, 0);
}

static int teardown(void **state) {
    if (n_table > 0) {
        printf("\n| scenario | store | cluster | kills/restarts/cycles | records | rows | lost | duplicated | "
               "rolled back | fenced |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < n_table; i++)
            printf("| %s | %s | %s | %d | %zu | %lld | %lld | %lld | %lld | %lld |\n", table[i].scenario,
                   table[i].store, cs_test_cluster_is_embedded(cst_cluster) ? "embedded" : "real", table[i].events,
                   table[i].records, table[i].rows, table[i].lost, table[i].duplicated, table[i].rolled_back,
                   table[i].fenced);
    }
    if (pg_started) pg_script("stop", NULL, 0);
    return cst_cluster_teardown(state);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kills_lose_and_duplicate_nothing),
        cmocka_unit_test(a_zombie_is_fenced),
        cmocka_unit_test(proof_database_restart_loses_and_duplicates_nothing),
        cmocka_unit_test(proof_scaling_out_and_in_loses_and_duplicates_nothing),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, teardown);
}
