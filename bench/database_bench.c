/* bench/database_bench.c — records/s into PostgreSQL, three ways side by side
 * in one run (docs/database.md, "Throughput"), contenders interleaved round
 * by round on one topic pre-filled with N records, medians and ratios:
 *
 *   database  CS_COMMIT_DATABASE with its defaults: the handler inserts one
 *             row through cs_delivery_postgres into the window's transaction;
 *             cstream commits the window with the positions.
 *   upsert    CS_COMMIT_TRACKED: the handler does an idempotent upsert
 *             (INSERT ... ON CONFLICT DO NOTHING keyed by partition/offset)
 *             on its worker thread's own autocommit connection.
 *   per-record CS_COMMIT_TRACKED, the naive exactly-once: each record is its
 *             own transaction on the worker's connection: BEGIN; INSERT the
 *             effect; upsert the partition's offsets row; COMMIT.
 *   database-batch   CS_COMMIT_DATABASE with a batch handler (up to
 *             BATCH records): one INSERT of the whole batch (unnest of two
 *             arrays) into the window's transaction.
 *   upsert-batch     CS_COMMIT_TRACKED with the same batch handler: one
 *             idempotent multi-row upsert per batch, autocommit.
 *
 * The same workers (lanes by partition) for all. A round's time runs from
 * the first record handled to the last one committed (for `database`, the
 * window whose positions reach every partition's end), so the group join is
 * not in it. Each round uses a fresh group and emptied tables.
 *
 * usage: database_bench --pg URL [--records N] [--partitions P] [--rounds R]
 *                       [--workers W] [--only NAME]
 * The cluster: CSTREAM_BROKERS, else the embedded one in this process. */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cstream.h>
#include <cstream/database.h>
#include <cstream/testing.h>

#include "bench_common.h"

enum { MAX_CONNS = 256, MAX_ROUNDS = 64, N_CONTENDERS = 5, BATCH = 500 };

static const char *g_pg;
static uint64_t g_n;
static _Atomic uint64_t g_done;
static _Atomic double g_t0, g_t1;
static _Atomic uint64_t g_failed;

/* ---- the worker threads' own connections (upsert, per-record) --------------- */

static pthread_mutex_t conns_mx = PTHREAD_MUTEX_INITIALIZER;
static PGconn *conns[MAX_CONNS];
static int n_conns;
static _Atomic int conn_generation; /* bumped per round: a thread's connection is per round */
static _Thread_local PGconn *tl_conn;
static _Thread_local int tl_generation = -1;

static PGconn *thread_conn(void) {
    int gen = atomic_load(&conn_generation);
    if (tl_conn && tl_generation == gen) return tl_conn;
    PGconn *c = PQconnectdb(g_pg);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "database_bench: connect: %s", PQerrorMessage(c));
        exit(1);
    }
    pthread_mutex_lock(&conns_mx);
    if (n_conns == MAX_CONNS) {
        fprintf(stderr, "database_bench: more than %d connections\n", MAX_CONNS);
        exit(1);
    }
    conns[n_conns++] = c;
    pthread_mutex_unlock(&conns_mx);
    tl_conn = c;
    tl_generation = gen;
    return c;
}

static void close_conns(void) {
    pthread_mutex_lock(&conns_mx);
    for (int i = 0; i < n_conns; i++) PQfinish(conns[i]);
    n_conns = 0;
    pthread_mutex_unlock(&conns_mx);
    atomic_fetch_add(&conn_generation, 1);
}

static bool run_params(PGconn *c, const char *sql, int n, const char *const *params) {
    PGresult *r = n ? PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0) : PQexec(c, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) fprintf(stderr, "database_bench: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok;
}

/* ---- the handlers ---------------------------------------------------------------- */

static void mark_first(void) {
    double zero = 0, now = bench_now();
    atomic_compare_exchange_strong(&g_t0, &zero, now);
}

/* n more records committed; the round's end is stamped by the call that completes it. */
static void mark_committed(uint64_t n) {
    if (atomic_fetch_add(&g_done, n) + n == g_n) atomic_store(&g_t1, bench_now());
}

typedef struct key_text {
    char part[16], off[24];
} key_text;

static key_text key_of(cs_delivery *d) {
    key_text k;
    snprintf(k.part, sizeof k.part, "%d", (int)cs_delivery_partition(d));
    snprintf(k.off, sizeof k.off, "%lld", (long long)cs_delivery_offset(d));
    return k;
}

static cs_outcome handle_database(cs_delivery *d, void *user) {
    (void)user;
    mark_first();
    PGconn *c = cs_delivery_postgres(d);
    if (!c) return CS_RETRY;
    key_text k = key_of(d);
    const char *params[2] = {k.part, k.off};
    if (!run_params(c, "INSERT INTO bench_effects_database (partition, off) VALUES ($1, $2)", 2, params)) {
        atomic_fetch_add(&g_failed, 1);
        return CS_RETRY;
    }
    atomic_fetch_add(&g_done, 1); /* handled; committed when the positions say so (main) */
    return CS_ACK;
}

static cs_outcome handle_upsert(cs_delivery *d, void *user) {
    (void)user;
    mark_first();
    key_text k = key_of(d);
    const char *params[2] = {k.part, k.off};
    if (!run_params(thread_conn(),
                    "INSERT INTO bench_effects_upsert (partition, off) VALUES ($1, $2)"
                    " ON CONFLICT (partition, off) DO NOTHING",
                    2, params)) {
        atomic_fetch_add(&g_failed, 1);
        return CS_RETRY;
    }
    mark_committed(1);
    return CS_ACK;
}

static cs_outcome handle_per_record(cs_delivery *d, void *user) {
    (void)user;
    mark_first();
    PGconn *c = thread_conn();
    key_text k = key_of(d);
    const char *params[2] = {k.part, k.off};
    bool ok = run_params(c, "BEGIN", 0, NULL) &&
              run_params(c, "INSERT INTO bench_effects_per_record (partition, off) VALUES ($1, $2)", 2, params) &&
              run_params(c,
                         "INSERT INTO bench_offsets (partition, next_offset) VALUES ($1, $2::bigint + 1)"
                         " ON CONFLICT (partition) DO UPDATE SET next_offset = excluded.next_offset",
                         2, params) &&
              run_params(c, "COMMIT", 0, NULL);
    if (!ok) {
        run_params(c, "ROLLBACK", 0, NULL);
        atomic_fetch_add(&g_failed, 1);
        return CS_RETRY;
    }
    mark_committed(1);
    return CS_ACK;
}

/* The batch's partitions and offsets as two array literals ("{0,0,1}"),
 * bound to unnest($1::int[], $2::bigint[]): one statement for the batch. */
typedef struct batch_text {
    char part[BATCH * 12 + 3], off[BATCH * 21 + 3];
} batch_text;

static void batch_text_of(cs_delivery *const *batch, size_t n, batch_text *t) {
    size_t pl = 0, ol = 0;
    t->part[pl++] = '{';
    t->off[ol++] = '{';
    for (size_t i = 0; i < n; i++) {
        pl += (size_t)snprintf(t->part + pl, sizeof t->part - pl, "%s%d", i ? "," : "",
                               (int)cs_delivery_partition(batch[i]));
        ol += (size_t)snprintf(t->off + ol, sizeof t->off - ol, "%s%lld", i ? "," : "",
                               (long long)cs_delivery_offset(batch[i]));
    }
    snprintf(t->part + pl, sizeof t->part - pl, "}");
    snprintf(t->off + ol, sizeof t->off - ol, "}");
}

static cs_outcome handle_database_batch(cs_delivery *const *batch, size_t n, cs_outcome *outcomes, void *user) {
    (void)outcomes;
    (void)user;
    mark_first();
    PGconn *c = cs_delivery_postgres(batch[0]);
    if (!c) return CS_RETRY;
    static _Thread_local batch_text t;
    batch_text_of(batch, n, &t);
    const char *params[2] = {t.part, t.off};
    if (!run_params(c,
                    "INSERT INTO bench_effects_database_batch (partition, off)"
                    " SELECT * FROM unnest($1::int[], $2::bigint[])",
                    2, params)) {
        atomic_fetch_add(&g_failed, 1);
        return CS_RETRY;
    }
    return CS_ACK;
}

static cs_outcome handle_upsert_batch(cs_delivery *const *batch, size_t n, cs_outcome *outcomes, void *user) {
    (void)outcomes;
    (void)user;
    mark_first();
    static _Thread_local batch_text t;
    batch_text_of(batch, n, &t);
    const char *params[2] = {t.part, t.off};
    if (!run_params(thread_conn(),
                    "INSERT INTO bench_effects_upsert_batch (partition, off)"
                    " SELECT * FROM unnest($1::int[], $2::bigint[]) ON CONFLICT (partition, off) DO NOTHING",
                    2, params)) {
        atomic_fetch_add(&g_failed, 1);
        return CS_RETRY;
    }
    mark_committed(n);
    return CS_ACK;
}

/* ---- one round --------------------------------------------------------------------- */

static const char *const names[N_CONTENDERS] = {"database", "upsert", "per-record", "database-batch", "upsert-batch"};
enum { DATABASE, UPSERT, PER_RECORD, DATABASE_BATCH, UPSERT_BATCH };
static const char *const tables[N_CONTENDERS] = {"bench_effects_database", "bench_effects_upsert",
                                                 "bench_effects_per_record", "bench_effects_database_batch",
                                                 "bench_effects_upsert_batch"};

static void setup_tables(PGconn *c) {
    const char *ddl[] = {
        "SET client_min_messages = warning",
        "CREATE TABLE IF NOT EXISTS bench_effects_database (partition INTEGER NOT NULL, off BIGINT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS bench_effects_upsert (partition INTEGER NOT NULL, off BIGINT NOT NULL,"
        " PRIMARY KEY (partition, off))",
        "CREATE TABLE IF NOT EXISTS bench_effects_per_record (partition INTEGER NOT NULL, off BIGINT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS bench_offsets (partition INTEGER PRIMARY KEY, next_offset BIGINT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS bench_effects_database_batch (partition INTEGER NOT NULL, off BIGINT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS bench_effects_upsert_batch (partition INTEGER NOT NULL, off BIGINT NOT NULL,"
        " PRIMARY KEY (partition, off))",
    };
    for (size_t i = 0; i < sizeof ddl / sizeof *ddl; i++)
        if (!run_params(c, ddl[i], 0, NULL)) exit(1);
}

static long long count_rows(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    long long v =
        PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    return v;
}

typedef struct round_result {
    double rps;
    long long rows;
    unsigned long long windows, aborts;
} round_result;

static round_result run_round(int which, cs_test_cluster *cluster, const char *topic, int workers, PGconn *check) {
    round_result res = {0};
    bool database = which == DATABASE || which == DATABASE_BATCH;
    char sql[300];
    snprintf(sql, sizeof sql, "TRUNCATE %s%s", tables[which], which == PER_RECORD ? "; TRUNCATE bench_offsets" : "");
    if (!run_params(check, sql, 0, NULL)) exit(1);
    atomic_store(&g_done, 0);
    atomic_store(&g_t0, 0);
    atomic_store(&g_t1, 0);
    char group[128];
    cs_test_unique_name(group, sizeof group, "dbbench");
    cs_db *db = NULL;
    if (database && cs_db_open(g_pg, &db) != CS_OK) {
        fprintf(stderr, "database_bench: %s\n", cs_errmsg());
        exit(1);
    }
    cs_app *app = cs_app_new("database-bench", "1.0");
    cs_kafka *k = cluster ? cs_test_kafka_new(cluster) : cs_kafka_new(NULL);
    cs_sub *s = which == DATABASE         ? cs_kafka_subscribe(k, topic, handle_database, NULL)
                : which == UPSERT         ? cs_kafka_subscribe(k, topic, handle_upsert, NULL)
                : which == PER_RECORD     ? cs_kafka_subscribe(k, topic, handle_per_record, NULL)
                : which == DATABASE_BATCH ? cs_kafka_subscribe_batch(k, topic, handle_database_batch, BATCH, NULL)
                                          : cs_kafka_subscribe_batch(k, topic, handle_upsert_batch, BATCH, NULL);
    cs_err err = cs_sub_group(s, group);
    if (!err) err = database ? cs_sub_commit_database(s, db) : cs_sub_commit_mode(s, CS_COMMIT_TRACKED);
    if (!err) err = cs_sub_workers(s, workers);
    if (!err) err = cs_sub_lanes(s, CS_LANES_BY_PARTITION);
    if (!err) err = cs_app_add_kafka(app, k);
    if (!err) err = cs_app_start(app);
    if (err) {
        fprintf(stderr, "database_bench: %s\n", cs_errmsg());
        exit(1);
    }
    double deadline = bench_now() + 600;
    if (database) {
        /* Committed: the positions rows say every partition's end (6 rows, polled every 2 ms). */
        snprintf(sql, sizeof sql,
                 "SELECT COALESCE(SUM(GREATEST(next_offset, 0)), 0) FROM cstream_positions WHERE group_id = '%s'",
                 group);
        while (bench_now() < deadline && (uint64_t)count_rows(check, sql) < g_n) usleep(2000);
        atomic_store(&g_t1, bench_now());
    } else {
        while (bench_now() < deadline && atomic_load(&g_done) < g_n) usleep(2000);
    }
    if (atomic_load(&g_t1) == 0) {
        fprintf(stderr, "database_bench: %s did not finish within 600 s\n", names[which]);
        exit(1);
    }
    res.rps = (double)g_n / (atomic_load(&g_t1) - atomic_load(&g_t0));
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    res.windows = st.transactions;
    res.aborts = st.aborts;
    cs_app_stop(app);
    cs_app_destroy(app);
    cs_db_free(db);
    close_conns();
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s", tables[which]);
    res.rows = count_rows(check, sql);
    return res;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    double sorted[MAX_ROUNDS];
    memcpy(sorted, v, (size_t)n * sizeof *v);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

int main(int argc, char **argv) {
    int records = 200000, partitions = 6, rounds = 5, workers = 6;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) break;
        if (!strcmp(a, "--pg")) g_pg = v;
        else if (!strcmp(a, "--records")) records = atoi(v);
        else if (!strcmp(a, "--partitions")) partitions = atoi(v);
        else if (!strcmp(a, "--rounds")) rounds = atoi(v);
        else if (!strcmp(a, "--workers")) workers = atoi(v);
        else if (!strcmp(a, "--only")) only = v;
        else break;
        i++;
    }
    if (!g_pg || records <= 0 || rounds <= 0 || rounds > MAX_ROUNDS) {
        fprintf(stderr,
                "usage: %s --pg URL [--records N] [--partitions P] [--rounds R (1..%d)] [--workers W] "
                "[--only database|upsert|per-record|database-batch|upsert-batch]\n",
                argv[0], MAX_ROUNDS);
        return 2;
    }
    cs_log_set_level(CS_LOG_WARN);
    g_n = (uint64_t)records;
    PGconn *check = PQconnectdb(g_pg);
    if (PQstatus(check) != CONNECTION_OK) {
        fprintf(stderr, "database_bench: %s", PQerrorMessage(check));
        return 1;
    }
    setup_tables(check);
    cs_test_cluster *cluster = NULL;
    if (cs_test_cluster_new(&cluster) != CS_OK) {
        fprintf(stderr, "database_bench: %s\n", cs_errmsg());
        return 1;
    }
    char topic[128];
    cs_test_unique_name(topic, sizeof topic, "dbbench");
    if (cs_test_topic_create(cluster, topic, partitions) != CS_OK ||
        cs_test_produce_many(cluster, topic, "record-", records) != CS_OK) {
        fprintf(stderr, "database_bench: %s\n", cs_errmsg());
        return 1;
    }
    printf("database_bench: %d records, %d partitions, %d workers (lanes by partition), %d rounds, %s cluster, "
           "PostgreSQL %d\n",
           records, partitions, workers, rounds, cs_test_cluster_is_embedded(cluster) ? "embedded" : "real",
           PQserverVersion(check) / 10000);
    double rps[N_CONTENDERS][MAX_ROUNDS] = {{0}};
    int ran[N_CONTENDERS] = {0};
    for (int r = 0; r < rounds; r++) {
        for (int c = 0; c < N_CONTENDERS; c++) {
            /* Interleaved, and the order turns each round: no contender always runs first. */
            int which = (c + r) % N_CONTENDERS;
            if (only && strcmp(only, names[which])) continue;
            round_result res = run_round(which, cluster, topic, workers, check);
            rps[which][ran[which]++] = res.rps;
            printf("round %d %-10s %9.0f records/s  rows %lld  windows %llu  rollbacks %llu  failed writes %llu\n",
                   r + 1, names[which], res.rps, res.rows, res.windows, res.aborts,
                   (unsigned long long)atomic_exchange(&g_failed, 0));
            fflush(stdout);
            if (res.rows != records) {
                fprintf(stderr, "database_bench: %s wrote %lld rows for %d records\n", names[which], res.rows, records);
                return 1;
            }
        }
    }
    double med[N_CONTENDERS] = {0};
    printf("\n| contender | records/s (median of %d) | rounds |\n|---|---|---|\n", rounds);
    for (int c = 0; c < N_CONTENDERS; c++) {
        if (!ran[c]) continue;
        med[c] = median(rps[c], ran[c]);
        printf("| %s | %.0f |", names[c], med[c]);
        for (int i = 0; i < ran[c]; i++) printf(" %.0f", rps[c][i]);
        printf(" |\n");
    }
    /* The two targets, for per-record handlers and for batch handlers. */
    const struct {
        int a, b;
        double target;
    } ratios[] = {{DATABASE, PER_RECORD, 5},
                  {DATABASE, UPSERT, 0.8},
                  {DATABASE_BATCH, PER_RECORD, 5},
                  {DATABASE_BATCH, UPSERT_BATCH, 0.8}};
    printf("\n");
    for (size_t i = 0; i < sizeof ratios / sizeof *ratios; i++) {
        double a = med[ratios[i].a], b = med[ratios[i].b];
        if (a <= 0 || b <= 0) continue;
        printf("%s / %s: %.2fx (target >= %gx: %s)\n", names[ratios[i].a], names[ratios[i].b], a / b, ratios[i].target,
               a / b >= ratios[i].target ? "met" : "missed");
    }
    cs_test_cluster_destroy(cluster);
    PQfinish(check);
    return 0;
}
