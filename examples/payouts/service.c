/* service.c — wires the payouts service's handlers to their topics. */
#include "service.h"

#include <stdio.h>
#include <string.h>

typedef struct hook_args {
    clients *clients;
    uint64_t counters_fail_every;
    uint64_t bank_fail_every;
} hook_args;

static hook_args hooks; /* one service per process */

static cs_err open_clients(cs_app *app, void *user) {
    (void)app;
    hook_args *h = user;
    clients_open(h->clients, h->counters_fail_every, h->bank_fail_every);
    return CS_OK;
}

static void close_clients(cs_app *app, void *user) {
    (void)app;
    hook_args *h = user;
    clients_close(h->clients);
}

static void name(char *out, size_t size, const char *prefix, const char *base) {
    snprintf(out, size, "%s%s", prefix ? prefix : "", base);
}

cs_err payouts_service_new(const payouts_options *opt, payouts_service *out) {
    memset(out, 0, sizeof *out);
    payouts_names *n = &out->names;
    name(n->payouts, sizeof n->payouts, opt->prefix, TOPIC_PAYOUTS);
    name(n->payouts_done, sizeof n->payouts_done, opt->prefix, TOPIC_PAYOUTS_DONE);
    name(n->payouts_dlq, sizeof n->payouts_dlq, opt->prefix, TOPIC_PAYOUTS_DLQ);
    name(n->page_views, sizeof n->page_views, opt->prefix, TOPIC_PAGE_VIEWS);
    name(n->statements, sizeof n->statements, opt->prefix, TOPIC_STATEMENTS);
    name(n->group, sizeof n->group, opt->prefix, "payouts");
    name(n->analytics, sizeof n->analytics, opt->prefix, "analytics");
    name(n->reconciliation, sizeof n->reconciliation, opt->prefix, "reconciliation");
    name(n->ledger, sizeof n->ledger, opt->prefix, "ledger");
    hooks.clients = opt->clients;
    hooks.counters_fail_every = opt->counters_fail_every;
    hooks.bank_fail_every = opt->bank_fail_every;
    cs_app *app = cs_app_new("payouts", "0.1.0");
    cs_kafka *k = cs_kafka_new(opt->brokers);
    if (!app || !k) return CS_ERR_NOMEM;
    cs_err err = cs_app_add_kafka(app, k);
    if (!err) err = cs_app_on_startup(app, open_clients, &hooks);
    if (!err) err = cs_app_on_shutdown(app, close_clients, &hooks);
    if (!err) err = cs_kafka_default_group(k, n->group);
    if (!err) err = cs_kafka_topic(k, n->page_views, 4);
    if (!err) err = cs_kafka_topic(k, n->payouts, 4);
    if (!err) err = cs_kafka_topic(k, n->payouts_done, 4);
    if (!err) err = cs_kafka_topic(k, n->payouts_dlq, 1);
    if (!err) err = cs_kafka_topic(k, n->statements, 4);
    if (!err) err = cs_kafka_producer_config(k, "enable.idempotence", "true");
    if (!err) err = cs_kafka_flush_timeout_ms(k, 10000);
    if (!err && opt->tune) opt->tune(k);

    cs_sub *views = err ? NULL : cs_kafka_subscribe(k, n->page_views, count_view, opt->clients);
    if (!err && !views) err = CS_ERR_ARG;
    if (!err) err = cs_sub_group(views, n->analytics);
    if (!err) err = cs_sub_decode(views, &cs_codec_json, &page_view_type);
    cs_sub *payouts = err ? NULL : cs_kafka_subscribe(k, n->payouts, pay_out, opt->clients);
    if (!err && !payouts) err = CS_ERR_ARG;
    if (!err) err = cs_sub_commit_mode(payouts, CS_COMMIT_TRACKED); /* group: the default */
    if (!err) err = cs_sub_workers(payouts, 4);
    if (!err) err = cs_sub_lanes(payouts, CS_LANES_BY_KEY); /* per-payout order, payouts in parallel */
    if (!err) err = cs_sub_max_attempts(payouts, 5);
    if (!err) err = cs_sub_dead_letter(payouts, n->payouts_dlq);
    if (!err) err = cs_sub_reply(payouts, n->payouts_done, 5000); /* reply queue timeout 5 s */
    if (!err) err = cs_sub_decode(payouts, &cs_codec_json, &payout_type);

    cs_sub *lines = err ? NULL : cs_kafka_subscribe_batch(k, n->statements, reconcile, 500, opt->clients);
    if (!err && !lines) err = CS_ERR_ARG;
    if (!err) err = cs_sub_group(lines, n->reconciliation);
    if (!err) err = cs_sub_commit_mode(lines, CS_COMMIT_TRACKED);
    if (!err) err = cs_sub_decode(lines, &cs_codec_json, &statement_line_type);
    /* The ledger: each payout recorded once in the database, whatever crashes. */
    cs_db *db = NULL;
    cs_sub *ledger = NULL;
    if (!err && opt->ledger_url) err = cs_db_open(opt->ledger_url, &db);
    if (!err && db) err = cs_db_exec(db, LEDGER_SCHEMA);
    if (!err && db) {
        ledger = cs_kafka_subscribe(k, n->payouts, record_payout, db);
        err = ledger ? CS_OK : CS_ERR_ARG;
    }
    if (!err && ledger) err = cs_sub_group(ledger, n->ledger);
    if (!err && ledger) err = cs_sub_commit_database(ledger, db);
    if (!err && ledger) err = cs_sub_workers(ledger, 4);
    if (!err && ledger) err = cs_sub_lanes(ledger, CS_LANES_BY_KEY);
    if (!err && ledger) err = cs_sub_decode(ledger, &cs_codec_json, &payout_type);
    if (err) {
        cs_app_destroy(app);
        cs_db_free(db);
        return err;
    }
    out->app = app;
    out->kafka = k;
    out->count_view = views;
    out->pay_out = payouts;
    out->reconcile = lines;
    out->record_payout = ledger;
    out->ledger_db = db;
    return CS_OK;
}
