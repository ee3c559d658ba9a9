/* metrics.c — the app's counters in the Prometheus text format
 * (cs_app_metrics): one counter family per cs_sub_stats member, one series per
 * subscription labelled subscription and group. Reads only the stats (atomic
 * counters) and the configuration; the caller makes sure the app does not stop
 * meanwhile (cli.c holds its ops lock). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "error.h"

typedef struct counter {
    const char *name, *help;
    size_t offset;
} counter;

#define C(m, h) {"cstream_subscription_" #m "_total", h, offsetof(cs_sub_stats, m)}
static const counter counters[] = {
    C(delivered, "Handler runs."),
    C(acked, "Records acked."),
    C(dropped, "Records dropped (settled without being handled)."),
    C(retried, "Retries under Tracked commits."),
    C(retry_unsupported, "Retries refused under Auto commits (those records are lost)."),
    C(stale, "Settlements ignored because the partition was revoked."),
    C(slow_handlers, "Handler runs past the time limit."),
    C(decode_failures, "Records that did not decode."),
    C(dead_lettered, "Records the dead-letter topic accepted."),
    C(exhausted, "Records dropped at max_attempts without a dead-letter topic."),
    C(commits, "Successful explicit commits (Tracked)."),
    C(commit_failures, "Failed explicit commits (retried on the next tick)."),
    C(pauses, "Partitions paused at max_open."),
    C(transactions, "Transactions committed (Transactional)."),
    C(outputs, "Outputs committed in transactions (Transactional)."),
    C(aborts, "Windows aborted and read again (Transactional)."),
};
#undef C

typedef struct buf {
    char *p;
    size_t n, cap;
    int oom;
} buf;

static void add(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(buf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->p && b->n + (size_t)n < b->cap) {
            b->n += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + (size_t)n + 1) cap *= 2;
        char *grown = realloc(b->p, cap);
        if (!grown) {
            b->oom = 1;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
}

/* A label value: backslash, quote and newline escaped. */
static void label(buf *b, const char *v) {
    for (; v && *v; v++) {
        if (*v == '\\') add(b, "\\\\");
        else if (*v == '"') add(b, "\\\"");
        else if (*v == '\n') add(b, "\\n");
        else add(b, "%c", *v);
    }
}

cs_err cs_app_metrics(cs_app *app, char **out) {
    if (!app || !out) return cs__fail(CS_ERR_ARG, "cs_app_metrics: app and out are required");
    buf b = {0};
    add(&b, "# HELP cstream_up 1 while the app runs.\n# TYPE cstream_up gauge\n");
    add(&b, "cstream_up{app=\"");
    label(&b, cs_app_name(app));
    add(&b, "\",version=\"");
    label(&b, cs_app_version(app));
    add(&b, "\"} %d\n", cs__app_started(app) ? 1 : 0);
    for (size_t c = 0; c < sizeof counters / sizeof counters[0]; c++) {
        add(&b, "# HELP %s %s\n# TYPE %s counter\n", counters[c].name, counters[c].help, counters[c].name);
        for (size_t k = 0; k < cs__app_n_brokers(app); k++) {
            void *impl;
            const cs_broker_ops *ops = cs__app_broker(app, k, &impl);
            if (!ops->n_subs || !ops->describe_sub) continue;
            for (size_t i = 0; i < ops->n_subs(impl); i++) {
                cs_broker_sub_desc s;
                ops->describe_sub(impl, i, &s);
                cs_sub_stats st;
                cs_sub_stats_get(s.sub, &st);
                uint64_t v;
                memcpy(&v, (const char *)&st + counters[c].offset, sizeof v);
                add(&b, "%s{subscription=\"", counters[c].name);
                label(&b, s.name);
                add(&b, "\",group=\"");
                label(&b, s.group);
                add(&b, "\"} %llu\n", (unsigned long long)v);
            }
        }
    }
    if (b.oom || !b.p) {
        free(b.p);
        return cs__fail(CS_ERR_NOMEM, "cs_app_metrics: out of memory");
    }
    *out = b.p;
    return CS_OK;
}
