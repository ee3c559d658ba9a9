/* ops_service.c — a small service whose main is cs_app_main, for
 * tests/ops/test_ops.c: a typed Tracked subscription on <prefix>orders (JSON
 * `order`, with a nested `line` array) that replies to <prefix>orders.done and
 * dead-letters to <prefix>orders.dlq (a negative amount is retried until it
 * goes there, an amount of 0 is dropped), an untyped Auto subscription on
 * <prefix>audit, and a declared topic it publishes to, <prefix>invoices.
 * OPS_PREFIX (environment) prefixes topics and groups so runs stay apart;
 * OPS_CODE_BROKERS plays the bootstrap servers written in the code
 * (cs_kafka_new's argument), for the precedence tests. OPS_HOLD_FILE: an
 * audit record "hold" keeps its handler busy until that file exists, so that a
 * test can look at the service while its stop drains. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cstream.h"

typedef struct line {
    char *sku;
    uint32_t quantity;
} line;

typedef struct order {
    uint64_t id;
    int64_t amount_cents;
    bool urgent;
    char currency[4];
    line *lines;
    size_t n_lines;
    double weight;
} order;

static const cs_field line_fields[] = {
    CS_FIELD_STRING(line, sku, CS_REQUIRED),
    CS_FIELD_U32(line, quantity, CS_REQUIRED),
};
static CS_TYPE(line_type, line, line_fields);

static const cs_field order_fields[] = {
    CS_FIELD_U64(order, id, CS_REQUIRED),
    CS_FIELD_I64(order, amount_cents, CS_REQUIRED),
    CS_FIELD_BOOL(order, urgent, CS_OPTIONAL),
    CS_FIELD_CHARS(order, currency, CS_OPTIONAL),
    CS_FIELD_ARRAY_MAX(order, lines, n_lines, &line_type, 100, CS_OPTIONAL),
    CS_FIELD_F64(order, weight, CS_OPTIONAL),
};
static CS_TYPE(order_type, order, order_fields);

static cs_outcome handle_order(cs_delivery *d, void *user) {
    (void)user;
    const order *o = cs_delivery_decoded(d);
    if (o && o->amount_cents < 0) return CS_RETRY; /* ends in the dead-letter topic */
    if (o && o->amount_cents == 0) return CS_DROP; /* nothing to pay: settled, no reply */
    char reply[64];
    int n = snprintf(reply, sizeof reply, "{\"order_id\":%llu}", (unsigned long long)(o ? o->id : 0));
    cs_delivery_reply(d, NULL, 0, reply, (size_t)n);
    return CS_ACK;
}

static cs_outcome handle_audit(cs_delivery *d, void *user) {
    size_t len;
    const char *v = cs_delivery_value(d, &len);
    /* "pause": the subscription pauses itself, from its handler (/readyz and
     * /metrics then show it). */
    if (v && len == 5 && !memcmp(v, "pause", 5) && cs_sub_pause(*(cs_sub **)user) != CS_OK)
        fprintf(stderr, "ops_service: pause: %s\n", cs_errmsg());
    const char *hold = getenv("OPS_HOLD_FILE");
    if (hold && v && len == 4 && !memcmp(v, "hold", 4)) {
        struct timespec tick = {0, 10 * 1000000L};
        while (access(hold, F_OK) != 0) nanosleep(&tick, NULL);
    }
    return CS_ACK;
}

int main(int argc, char **argv) {
    const char *p = getenv("OPS_PREFIX") ? getenv("OPS_PREFIX") : "";
    char orders[128], done[128], dlq[128], audit[128], invoices[128], group[128], audit_group[128];
    snprintf(orders, sizeof orders, "%sorders", p);
    snprintf(done, sizeof done, "%sorders.done", p);
    snprintf(dlq, sizeof dlq, "%sorders.dlq", p);
    snprintf(audit, sizeof audit, "%saudit", p);
    snprintf(invoices, sizeof invoices, "%sinvoices", p);
    snprintf(group, sizeof group, "%sorders-svc", p);
    snprintf(audit_group, sizeof audit_group, "%saudit-svc", p);

    cs_app *app = cs_app_new("orders-svc", "1.2.3");
    cs_kafka *k = cs_kafka_new(getenv("OPS_CODE_BROKERS"));
    if (!app || !k) return 1;
    cs_err err = cs_app_add_kafka(app, k);
    if (!err) err = cs_kafka_default_group(k, group);
    /* OPS_PROFILE=low-latency: cs_kafka_profile (tests/ops/test_ops_config.c) */
    if (!err && getenv("OPS_PROFILE") && !strcmp(getenv("OPS_PROFILE"), "low-latency"))
        err = cs_kafka_profile(k, CS_PROFILE_LOW_LATENCY);
    if (!err) err = cs_kafka_config(k, "fetch.wait.max.ms", "10");
    /* OPS_GROUP_PROTOCOL=consumer: both groups join with the consumer
     * protocol (KIP-848), whose session is the broker's. */
    bool consumer_protocol = getenv("OPS_GROUP_PROTOCOL") && !strcmp(getenv("OPS_GROUP_PROTOCOL"), "consumer");
    if (!err && consumer_protocol) err = cs_kafka_group_protocol(k, CS_GROUP_PROTOCOL_CONSUMER);
    if (!err && !consumer_protocol) err = cs_kafka_config(k, "session.timeout.ms", "6000");
    if (!err) err = cs_kafka_topic(k, orders, 2);
    if (!err) err = cs_kafka_topic(k, done, 2);
    if (!err) err = cs_kafka_topic(k, dlq, 1);
    if (!err) err = cs_kafka_topic(k, audit, 1);
    if (!err) err = cs_kafka_topic(k, invoices, 3);
    cs_sub *s = err ? NULL : cs_kafka_subscribe(k, orders, handle_order, NULL);
    if (!s) err = err ? err : CS_ERR_ARG;
    if (!err) err = cs_sub_commit_mode(s, CS_COMMIT_TRACKED);
    if (!err) err = cs_sub_decode(s, &cs_codec_json, &order_type);
    if (!err) err = cs_sub_reply(s, done, 5000);
    if (!err) err = cs_sub_dead_letter(s, dlq);
    if (!err) err = cs_sub_max_attempts(s, 2);
    static cs_sub *a; /* the audit handler's own subscription */
    a = err ? NULL : cs_kafka_subscribe(k, audit, handle_audit, &a);
    if (!a) err = err ? err : CS_ERR_ARG;
    if (!err) err = cs_sub_group(a, audit_group);
    if (err) {
        fprintf(stderr, "ops_service: %s\n", cs_errmsg());
        cs_app_destroy(app);
        return 1;
    }
    return cs_app_main(app, argc, argv);
}
