/* app_metrics.c — the app's metrics in the Prometheus text format
 * (cs_app_metrics): cstream_up, one counter family per member of a
 * subscription's counters (broker.h's cs_broker_sub_counters; one series per
 * subscription labelled subscription and group), then what
 * each broker adds (records by topic and outcome, handler durations, in-flight
 * records, committed offsets and lag, publishes; see docs/guide.md). Reads
 * only atomics, the configuration and short-lived locks (the broker's ops
 * take a lock that keeps a subscription's state from being freed meanwhile;
 * no stop holds it across a close). The collector and the text format:
 * base/metrics.c.
 *
 * Owns: the text it returns (the caller frees it). Locks: none of its own.
 * Threads: any thread, while the app exists. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cstream/main.h"

#include "base/error.h"
#include "base/metrics.h"
#include "core/broker.h"

typedef struct counter {
    const char *name, *help;
    size_t offset;
} counter;

#define C(m, h)                                                                                                        \
    { "cstream_subscription_" #m "_total", h, offsetof(cs_broker_sub_counters, m) }
static const counter counters[] = {
    C(delivered, "Records handed to a handler, once per attempt (each batch element counts)."),
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
    C(transactions, "Transactions committed (Transactional, Database)."),
    C(outputs, "Outputs committed in transactions (Transactional)."),
    C(aborts, "Windows aborted or rolled back and read again (Transactional, Database)."),
    C(db_fenced, "Partitions no longer handled because another instance claimed them in the database (Database)."),
    C(skipped_settled, "Records not handed to a handler because the committed acked set says an earlier owner "
                       "settled them (Tracked)."),
    C(metadata_truncated, "Commits whose acked set did not fit in the offset metadata: the records past its reach "
                          "are read again after a crash (Tracked)."),
};
#undef C

/* Counters a codec keeps (cs_codec.counters, e.g. its registry client's
 * lookups and cache hits), one series per subscription that uses it. */
#define CODEC_COUNTERS_MAX 16
static void codec_counters(cs_metrics *m, const cs_broker_ops *ops, void *impl) {
    if (!ops->n_subs || !ops->describe_sub) return;
    for (size_t i = 0; i < ops->n_subs(impl); i++) {
        cs_broker_sub_desc s;
        ops->describe_sub(impl, i, &s);
        if (!s.codec || !s.codec->counters) continue;
        cs_codec_counter c[CODEC_COUNTERS_MAX];
        size_t n = s.codec->counters(s.codec, c, CODEC_COUNTERS_MAX);
        const char *labels[] = {"subscription", s.name, "codec", s.codec->name, NULL};
        for (size_t j = 0; j < n && j < CODEC_COUNTERS_MAX; j++)
            cs__metric_int(m, c[j].name, "counter", c[j].help, labels, (int64_t)c[j].value);
    }
}

cs_err cs_app_metrics(cs_app *app, char **out) {
    if (!app || !out) return cs__fail(CS_ERR_ARG, "cs_app_metrics: app and out are required");
    cs_metrics *m = cs__metrics_new();
    if (!m) return cs__fail(CS_ERR_NOMEM, "cs_app_metrics: out of memory");
    const char *up_labels[] = {"app", cs_app_name(app), "version", cs_app_version(app), NULL};
    cs__metric_int(m, "cstream_up", "gauge", "1 while the app runs.", up_labels, cs__app_started(app) ? 1 : 0);
    for (size_t c = 0; c < sizeof counters / sizeof counters[0]; c++) {
        for (size_t k = 0; k < cs__app_n_brokers(app); k++) {
            void *impl;
            const cs_broker_ops *ops = cs__app_broker(app, k, &impl);
            if (!ops->n_subs || !ops->describe_sub || !ops->sub_counters) continue;
            for (size_t i = 0; i < ops->n_subs(impl); i++) {
                cs_broker_sub_desc s;
                ops->describe_sub(impl, i, &s);
                cs_broker_sub_counters st;
                ops->sub_counters(impl, i, &st);
                uint64_t v;
                memcpy(&v, (const char *)&st + counters[c].offset, sizeof v);
                const char *labels[] = {"subscription", s.name, "group", s.group ? s.group : "", NULL};
                cs__metric_int(m, counters[c].name, "counter", counters[c].help, labels, (int64_t)v);
            }
        }
    }
    for (size_t k = 0; k < cs__app_n_brokers(app); k++) {
        void *impl;
        const cs_broker_ops *ops = cs__app_broker(app, k, &impl);
        codec_counters(m, ops, impl);
        if (ops->metrics) ops->metrics(impl, m);
    }
    char *text = cs__metrics_render_free(m);
    if (!text) return cs__fail(CS_ERR_NOMEM, "cs_app_metrics: out of memory");
    *out = text;
    return CS_OK;
}
