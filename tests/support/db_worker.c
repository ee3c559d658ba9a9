/* db_worker.c — the Database-mode service the database crash tests
 * (tests/kafka/test_database_kill.c) SIGKILL, SIGSTOP and scale: for each
 * record it inserts one effect row (topic, partition, off, pid) through the
 * window's transaction (cs_delivery_sqlite / cs_delivery_postgres), on the
 * cluster named by CSTREAM_BROKERS. The effects table has no unique
 * constraint, so a record whose writes committed twice shows as two rows.
 * usage: db_worker TOPIC GROUP DB_URL WORKERS
 *   DB_URL: sqlite:PATH or a PostgreSQL URL (cs_db_open). The effects table
 *   (DBW_TABLE, default "effects") must exist: the test creates it.
 *
 * Optional, from the environment:
 *   DBW_TABLE             the effects table's name
 *   DBW_RUNS_FILE         "partition offset" appended (one write, O_APPEND)
 *                         before each run's insert: every run that may have
 *                         written, committed or not (the test counts the
 *                         runs a kill rolled back from it)
 *   DBW_ASSIGN_FILE       "+P" / "-P" lines as partitions are assigned and revoked
 *   DBW_STATS_FILE        written at exit: "transactions N aborts N db_fenced N"
 *   DBW_HOLD_FILE         while this file exists, no run starts writing; once
 *                         every run that had started finished, DBW_HOLD_FILE
 *                         ".held" is created (the zombie test stops the
 *                         process then, with no write in flight)
 *   DBW_LOG_FILE          stderr (cstream's log lines) goes there
 *   DBW_WORK_US           each run's work before its insert, in microseconds
 *                         (default: 0 to 999, by offset)
 *   DBW_SESSION_TIMEOUT_MS session.timeout.ms (default 6000, the real
 *                         broker's floor); heartbeats every third of it
 *   DBW_COMMIT_INTERVAL_MS cs_sub_commit_interval_ms (default: cstream's)
 *   PGAPPNAME             libpq's application name (the test finds this
 *                         instance's server session by it) */
#include <fcntl.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstream.h>
#include <cstream/database.h>

#include "stop_signals.h"

static char insert_sql[200];
static bool on_postgres;
static int runs_fd = -1, assign_fd = -1;
static const char *hold_file;
static long work_us = -1; /* DBW_WORK_US; -1: by offset */

/* The hold: runs take `gate` shared from their check of `held` to the end
 * of their insert; the watcher takes it exclusive to set `held`, so once it
 * has, no run is between its check and its insert. */
static pthread_rwlock_t gate = PTHREAD_RWLOCK_INITIALIZER;
static _Atomic bool held;

static void *watch_hold(void *arg) {
    (void)arg;
    char ack[600];
    snprintf(ack, sizeof ack, "%s.held", hold_file);
    for (;;) {
        bool want = access(hold_file, F_OK) == 0;
        if (want != atomic_load(&held)) {
            pthread_rwlock_wrlock(&gate);
            atomic_store(&held, want);
            pthread_rwlock_unlock(&gate);
            if (want) close(open(ack, O_WRONLY | O_CREAT, 0644));
            else unlink(ack);
        }
        usleep(5000);
    }
    return NULL;
}

static void append(int fd, const char *line) {
    size_t n = strlen(line);
    if (fd >= 0 && write(fd, line, n) != (ssize_t)n) perror("db_worker: append");
}

static bool insert_sqlite(cs_delivery *d) {
    sqlite3 *db = cs_delivery_sqlite(d);
    if (!db) return false;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, insert_sql, -1, &st, NULL) != SQLITE_OK) return false;
    sqlite3_bind_text(st, 1, cs_delivery_topic(d), -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, cs_delivery_partition(d));
    sqlite3_bind_int64(st, 3, cs_delivery_offset(d));
    sqlite3_bind_int(st, 4, (int)getpid());
    bool ok = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_finalize(st);
    return ok;
}

static bool insert_postgres(cs_delivery *d) {
    PGconn *pg = cs_delivery_postgres(d);
    if (!pg) return false;
    char part[16], off[24], pid[16];
    snprintf(part, sizeof part, "%d", (int)cs_delivery_partition(d));
    snprintf(off, sizeof off, "%lld", (long long)cs_delivery_offset(d));
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    const char *params[4] = {cs_delivery_topic(d), part, off, pid};
    PGresult *r = PQexecParams(pg, insert_sql, 4, NULL, params, NULL, NULL, 0);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok;
}

static cs_outcome handle(cs_delivery *d, void *user) {
    (void)user;
    /* A little work, outside the connection (a run holds it from its first
     * write on), keeps several records in flight at any moment. */
    usleep((useconds_t)(work_us >= 0 ? work_us : cs_delivery_offset(d) * 7919 % 1000));
    for (;;) {
        pthread_rwlock_rdlock(&gate);
        if (!atomic_load(&held)) break;
        pthread_rwlock_unlock(&gate);
        usleep(2000);
    }
    char line[64];
    snprintf(line, sizeof line, "%d %lld\n", (int)cs_delivery_partition(d), (long long)cs_delivery_offset(d));
    append(runs_fd, line);
    bool ok = on_postgres ? insert_postgres(d) : insert_sqlite(d);
    pthread_rwlock_unlock(&gate);
    /* A refused write (the database restarting) undoes the run's savepoint
     * and the record comes back. */
    return ok ? CS_ACK : CS_RETRY;
}

static void note_partitions(char sign, const int32_t *partitions, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char line[32];
        snprintf(line, sizeof line, "%c%d\n", sign, (int)partitions[i]);
        append(assign_fd, line);
    }
}

static void on_assign(cs_sub *s, const char *topic, const int32_t *partitions, size_t n, void *user) {
    (void)s, (void)topic, (void)user;
    note_partitions('+', partitions, n);
}

static void on_revoke(cs_sub *s, const char *topic, const int32_t *partitions, size_t n, void *user) {
    (void)s, (void)topic, (void)user;
    note_partitions('-', partitions, n);
}

static int open_append(const char *env) {
    const char *path = getenv(env);
    if (!path || !*path) return -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) perror(path);
    return fd;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s TOPIC GROUP DB_URL WORKERS\n", argv[0]);
        return 2;
    }
    cst_hold_stop_signals();
    const char *log_file = getenv("DBW_LOG_FILE");
    if (log_file && *log_file && !freopen(log_file, "a", stderr)) return 2;
    const char *work = getenv("DBW_WORK_US");
    if (work && *work) work_us = atol(work);
    const char *table = getenv("DBW_TABLE");
    snprintf(insert_sql, sizeof insert_sql, "INSERT INTO %s (topic, partition, off, pid) VALUES (%s)",
             table && *table ? table : "effects", strncmp(argv[3], "sqlite:", 7) ? "$1, $2, $3, $4" : "?1, ?2, ?3, ?4");
    runs_fd = open_append("DBW_RUNS_FILE");
    assign_fd = open_append("DBW_ASSIGN_FILE");
    hold_file = getenv("DBW_HOLD_FILE");
    if (hold_file && *hold_file) {
        pthread_t t;
        if (pthread_create(&t, NULL, watch_hold, NULL) != 0) return 2;
        pthread_detach(t);
    }
    const char *session = getenv("DBW_SESSION_TIMEOUT_MS");
    cs_log_set_level(CS_LOG_WARN);
    cs_db *db = NULL;
    if (cs_db_open(argv[3], &db) != CS_OK) {
        fprintf(stderr, "db_worker: %s\n", cs_errmsg());
        return 1;
    }
    on_postgres = !strcmp(cs_db_kind(db), "postgresql");
    cs_app *app = cs_app_new("db-worker", "1.0");
    cs_kafka *k = cs_kafka_new(NULL);
    cs_sub *s = cs_kafka_subscribe(k, argv[1], handle, NULL);
    int session_ms = session && *session ? atoi(session) : 6000;
    char session_text[16], beat_text[16];
    snprintf(session_text, sizeof session_text, "%d", session_ms);
    snprintf(beat_text, sizeof beat_text, "%d", session_ms / 3 < 3000 ? session_ms / 3 : 3000);
    cs_err err = cs_kafka_config(k, "session.timeout.ms", session_text);
    if (!err) err = cs_kafka_config(k, "heartbeat.interval.ms", beat_text);
    if (!err) err = cs_kafka_config(k, "fetch.wait.max.ms", "10");
    if (!err) err = cs_sub_group(s, argv[2]);
    if (!err) err = cs_sub_commit_database(s, db);
    if (!err) err = cs_sub_workers(s, atoi(argv[4]));
    const char *interval = getenv("DBW_COMMIT_INTERVAL_MS");
    if (!err && interval && *interval) err = cs_sub_commit_interval_ms(s, atoi(interval));
    if (!err && assign_fd >= 0) err = cs_sub_on_assign(s, on_assign, NULL);
    if (!err && assign_fd >= 0) err = cs_sub_on_revoke(s, on_revoke, NULL);
    if (!err) err = cs_app_add_kafka(app, k);
    if (!err) err = cs_app_run(app);
    if (err) fprintf(stderr, "db_worker: %s\n", cs_errmsg());
    const char *stats_file = getenv("DBW_STATS_FILE");
    if (stats_file && *stats_file) {
        cs_sub_stats st;
        cs_sub_stats_get(s, &st);
        FILE *f = fopen(stats_file, "w");
        if (f) {
            fprintf(f, "transactions %llu aborts %llu db_fenced %llu\n", (unsigned long long)st.transactions,
                    (unsigned long long)st.aborts, (unsigned long long)st.db_fenced);
            fclose(f);
        }
    }
    cs_app_destroy(app);
    cs_db_free(db);
    return err ? 1 : 0;
}
