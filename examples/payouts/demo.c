/* demo.c — the payouts walkthrough (make run): runs the service on the embedded cluster (or
 * CSTREAM_BROKERS), seeds payouts, page views and statement lines, lets the
 * handlers work with a bank and a counters store that fail now and then, and
 * prints what was paid, dropped, retried, lost (Auto) and committed; and
 * counts, with its own query, the payouts the ledger subscription recorded
 * in its database (exactly once each: a temporary SQLite file, or
 * PAYOUTS_DATABASE, a PostgreSQL URL). */
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "service.h"

enum { PAYOUTS = 500, VIEWS = 2000, LINES = 1000 };

static void fast_timings(cs_kafka *k) {
    /* The embedded cluster answers an empty fetch only after fetch.wait.max.ms. */
    cs_kafka_config(k, "fetch.wait.max.ms", "10");
    cs_kafka_config(k, "auto.commit.interval.ms", "200");
    cs_kafka_producer_config(k, "linger.ms", "1");
}

static _Atomic int publish_failures;
static void on_published(const cs_published *where, cs_err err, void *opaque) {
    (void)where, (void)opaque;
    if (err) publish_failures++;
}

/* Encodes value as JSON and publishes it (asynchronously: the demo seeds a lot). */
static void seed(cs_kafka *k, const char *topic, const cs_type *type, const void *value, uint64_t key) {
    char *json = NULL, keybuf[24];
    size_t len = 0;
    if (cs_json_encode(type, value, &json, &len) != CS_OK) {
        fprintf(stderr, "payouts: %s\n", cs_errmsg());
        return;
    }
    int kl = snprintf(keybuf, sizeof keybuf, "%llu", (unsigned long long)key);
    cs_record r = {
        .topic = topic, .partition = -1, .key = keybuf, .key_len = (size_t)kl, .value = json, .value_len = len};
    if (cs_publish_async(k, &r, on_published, NULL) != CS_OK) fprintf(stderr, "payouts: %s\n", cs_errmsg());
    free(json);
}

static void print_committed(cs_kafka *k, const char *group, const char *topic) {
    printf("  committed (group %s):", group);
    for (int p = 0; p < 4; p++) {
        int64_t off = -1;
        if (cs_kafka_committed(k, group, topic, p, &off) == CS_OK) printf(" %s/%d=%lld", topic, p, (long long)off);
    }
    printf("\n");
}

static bool all_settled(payouts_service *svc) {
    cs_sub_stats pay, view, rec, led;
    cs_sub_stats_get(svc->pay_out, &pay);
    cs_sub_stats_get(svc->count_view, &view);
    cs_sub_stats_get(svc->reconcile, &rec);
    cs_sub_stats_get(svc->record_payout, &led);
    return pay.acked + pay.dropped >= PAYOUTS + 2 && view.delivered >= VIEWS && rec.acked + rec.dropped >= LINES &&
           led.acked + led.dropped >= PAYOUTS + 2;
}

/* What the ledger holds, by the demo's own query: rows, distinct payouts,
 * and the balances' total against the rows' total. */
typedef struct ledger_counts {
    long long rows, distinct, row_cents, balance_cents;
} ledger_counts;

static const char LEDGER_QUERY[] = "SELECT (SELECT COUNT(*) FROM ledger), (SELECT COUNT(DISTINCT payout_id) FROM "
                                   "ledger), (SELECT COALESCE(SUM(amount_cents), 0) FROM ledger), (SELECT "
                                   "COALESCE(SUM(cents), 0) FROM balances)";

static bool read_ledger(const char *url, ledger_counts *out) {
    if (!strncmp(url, "sqlite:", 7)) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        bool ok = sqlite3_open_v2(url + 7, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
                  sqlite3_prepare_v2(db, LEDGER_QUERY, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW;
        if (ok)
            *out = (ledger_counts){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                                   sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3)};
        sqlite3_finalize(st);
        sqlite3_close(db);
        return ok;
    }
    PGconn *c = PQconnectdb(url);
    PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, LEDGER_QUERY) : NULL;
    bool ok = r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    if (ok)
        *out = (ledger_counts){atoll(PQgetvalue(r, 0, 0)), atoll(PQgetvalue(r, 0, 1)), atoll(PQgetvalue(r, 0, 2)),
                               atoll(PQgetvalue(r, 0, 3))};
    PQclear(r);
    PQfinish(c);
    return ok;
}

/* One line of progress while the service works (every half second). */
static void show_progress(const payouts_service *svc, int waited_ms) {
    cs_sub_stats pay, view, rec;
    cs_sub_stats_get(svc->pay_out, &pay);
    cs_sub_stats_get(svc->count_view, &view);
    cs_sub_stats_get(svc->reconcile, &rec);
    printf("progress %4.1f s: payouts settled %llu (retried %llu, dead-lettered %llu), page views %llu, "
           "statement lines %llu\n",
           waited_ms / 1000.0, (unsigned long long)(pay.acked + pay.dropped), (unsigned long long)pay.retried,
           (unsigned long long)pay.dead_lettered, (unsigned long long)(view.acked + view.dropped),
           (unsigned long long)(rec.acked + rec.dropped));
    fflush(stdout);
}

int main(void) {
    clients cl;
    char ledger_url[128];
    const char *env = getenv("PAYOUTS_DATABASE");
    if (env && *env) snprintf(ledger_url, sizeof ledger_url, "%s", env);
    else snprintf(ledger_url, sizeof ledger_url, "sqlite:/tmp/payouts-ledger-%d.db", (int)getpid());
    payouts_options opt = {.clients = &cl,
                           .counters_fail_every = 50,
                           .bank_fail_every = 20,
                           .tune = fast_timings,
                           .ledger_url = ledger_url};
    payouts_service svc;
    if (payouts_service_new(&opt, &svc) != CS_OK || cs_app_start(svc.app) != CS_OK) {
        fprintf(stderr, "payouts: %s\n", cs_errmsg());
        return 1;
    }
    printf("payouts: seeding %d payouts (every 50th of 0 cents, plus one that does not decode and one the bank always "
           "refuses), "
           "%d page views and "
           "%d statement lines on %s\n",
           PAYOUTS, VIEWS, LINES, cs_kafka_bootstrap(svc.kafka));
    static const char *pages[] = {"/home", "/pricing", "/docs", "/signup"};
    for (uint64_t i = 1; i <= PAYOUTS; i++) {
        payout p = {.id = i, .amount_cents = i % 50 == 0 ? 0 : 100 * i};
        seed(svc.kafka, TOPIC_PAYOUTS, &payout_type, &p, i);
    }
    cs_record bad = {.topic = TOPIC_PAYOUTS, .partition = 0, .value = "{\"id\":\"seven\"}", .value_len = 14};
    cs_publish(svc.kafka, &bad, NULL);
    payout huge = {.id = PAYOUTS + 1, .amount_cents = 2 * BANK_LIMIT_CENTS};
    seed(svc.kafka, TOPIC_PAYOUTS, &payout_type, &huge, huge.id);
    for (uint64_t i = 0; i < VIEWS; i++) {
        page_view v = {.page = (char *)pages[i % 4]};
        seed(svc.kafka, TOPIC_PAGE_VIEWS, &page_view_type, &v, i % 97);
    }
    for (uint64_t i = 1; i <= LINES; i++) {
        statement_line l = {.payout_id = i, .amount_cents = i % 100 == 0 ? 0 : 100 * i};
        seed(svc.kafka, TOPIC_STATEMENTS, &statement_line_type, &l, i);
    }
    for (int waited = 0; waited < 120000 && !all_settled(&svc); waited += 50) {
        if (waited % 500 == 0) show_progress(&svc, waited);
        usleep(50 * 1000);
    }
    cs_app_stop(svc.app);

    cs_sub_stats pay, view, rec;
    cs_sub_stats_get(svc.pay_out, &pay);
    cs_sub_stats_get(svc.count_view, &view);
    cs_sub_stats_get(svc.reconcile, &rec);
    printf("\npay_out     payouts     Tracked, 4 workers, replies to %s\n", TOPIC_PAYOUTS_DONE);
    printf("  paid %llu, dropped (0 cents) %llu, did not decode %llu, retried %llu\n", (unsigned long long)pay.acked,
           (unsigned long long)(pay.dropped - pay.dead_lettered), (unsigned long long)pay.decode_failures,
           (unsigned long long)pay.retried);
    printf("  dead-lettered to %s: %llu (the one the bank refused 5 times, and the one that does not decode)\n",
           TOPIC_PAYOUTS_DLQ, (unsigned long long)pay.dead_lettered);
    print_committed(svc.kafka, "payouts", TOPIC_PAYOUTS);
    printf("count_view  page-views  Auto\n");
    printf("  counted %llu, lost to store failures %llu (retry is unsupported under Auto)\n",
           (unsigned long long)view.acked, (unsigned long long)view.retry_unsupported);
    print_committed(svc.kafka, "analytics", TOPIC_PAGE_VIEWS);
    printf("reconcile   statements  Tracked, batches of up to 500\n");
    printf("  matched %llu, dropped (empty) %llu\n", (unsigned long long)rec.acked, (unsigned long long)rec.dropped);
    print_committed(svc.kafka, "reconciliation", TOPIC_STATEMENTS);
    cs_sub_stats led;
    cs_sub_stats_get(svc.record_payout, &led);
    ledger_counts lc = {-1, -1, -1, -1};
    bool ledger_read = read_ledger(ledger_url, &lc);
    /* Every payout that decodes and is not 0 cents: the huge one included. */
    long long want_rows = PAYOUTS - PAYOUTS / 50 + 1;
    printf("record_payout  payouts  Database (%s %s), 4 workers\n", cs_db_kind(svc.ledger_db), ledger_url);
    printf("  ledger rows %lld for %lld payouts (%lld expected), balances %lld cents = rows %lld cents; windows "
           "committed %llu, rolled back %llu\n",
           lc.rows, lc.distinct, want_rows, lc.balance_cents, lc.row_cents, (unsigned long long)led.transactions,
           (unsigned long long)led.aborts);
    printf("producer: unflushed records at stop %zu, publish failures %d\n", cs_kafka_unflushed_records(svc.kafka),
           (int)publish_failures);

    int ok = pay.acked + pay.dropped == PAYOUTS + 2 && pay.decode_failures == 1 && pay.dead_lettered == 2 &&
             view.delivered == VIEWS && view.acked + view.retry_unsupported == VIEWS &&
             rec.acked + rec.dropped == LINES && !publish_failures && ledger_read && lc.rows == want_rows &&
             lc.distinct == want_rows && lc.balance_cents == lc.row_cents;
    cs_app_destroy(svc.app);
    cs_db_free(svc.ledger_db);
    if (!env || !*env) { /* the demo's own file */
        char path[160];
        for (const char *suffix = ""; suffix; suffix = !*suffix ? "-wal" : !strcmp(suffix, "-wal") ? "-shm" : NULL) {
            snprintf(path, sizeof path, "%s%s", ledger_url + 7, suffix);
            unlink(path);
        }
    }
    return ok ? 0 : 1;
}
