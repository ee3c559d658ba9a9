/* service.h — the payouts service, assembled from its handlers.
 *
 *   pay_out     payouts     group "payouts"    Tracked, 4 workers: a failed bank call comes back;
 *                                              replies {"payout_id":N} to payouts.done;
 *                                              lanes by key, 5 attempts, then payouts.dlq
 *   count_view  page-views  group "analytics"  Auto: a failed store loses the view
 *   reconcile   statements  group "reconciliation"  Tracked, batches of up to 500 lines
 *   record_payout  payouts  group "ledger"     Database (exactly-once into the ledger database:
 *                                              SQLite by default, PostgreSQL with a URL), 4 workers
 *
 * The service is one function that builds the app, so that main.c runs it and
 * the tests run the same thing against their own cluster and clients. */
#ifndef PAYOUTS_SERVICE_H
#define PAYOUTS_SERVICE_H

#include <cstream.h>
#include <cstream/database.h>

#include "clients.h"
#include "payloads.h"

#define TOPIC_PAGE_VIEWS "page-views"
#define TOPIC_PAYOUTS "payouts"
#define TOPIC_PAYOUTS_DONE "payouts.done"
#define TOPIC_PAYOUTS_DLQ "payouts.dlq"
/* The bank refuses payouts above this amount every time: they end in the dead-letter topic. */
#define BANK_LIMIT_CENTS 10000000

#define TOPIC_STATEMENTS "statements"

/* Topic and group names; a prefix keeps test runs on a shared cluster apart. */
typedef struct payouts_names {
    char payouts[96], payouts_done[96], payouts_dlq[96], page_views[96], statements[96];
    char group[96], analytics[96], reconciliation[96], ledger[96];
} payouts_names;

typedef struct payouts_service {
    payouts_names names;
    cs_app *app;
    cs_kafka *kafka;
    cs_sub *count_view;
    cs_sub *pay_out;
    cs_sub *reconcile;
    cs_sub *record_payout; /* NULL without a ledger */
    cs_db *ledger_db;      /* the service's to free, after the app (cs_db_free) */
} payouts_service;

typedef struct payouts_options {
    const char *brokers;          /* NULL: CSTREAM_BROKERS, else the embedded cluster */
    clients *clients;             /* built by the start-up hook */
    uint64_t counters_fail_every; /* the start-up hook's failure pattern for the store */
    uint64_t bank_fail_every;     /* ... and for the bank */
    void (*tune)(cs_kafka *k);    /* tests: extra broker properties (may be NULL) */
    const char *prefix;           /* tests: prefixes every topic and group name (may be NULL) */
    const char *ledger_url;       /* the ledger database (cs_db_open); NULL: no ledger subscription */
} payouts_options;

/* The ledger's tables (record_payout.c) and how many balance buckets it keeps. */
#define LEDGER_BUCKETS 10
extern const char LEDGER_SCHEMA[];

/* Builds the app (not started). */
cs_err payouts_service_new(const payouts_options *opt, payouts_service *out);

/* The handlers, exposed for tests. */
cs_outcome count_view(cs_delivery *d, void *user);
cs_outcome pay_out(cs_delivery *d, void *user);
cs_outcome reconcile(cs_delivery *const *lines, size_t n, cs_outcome *outcomes, void *user);
cs_outcome record_payout(cs_delivery *d, void *user);

#endif
