/* test_client_stats.c — librdkafka's statistics in /metrics (client_stats.c):
 *   - a running consumer and producer report each broker's round-trip and
 *     throttle time (seconds, sane: below 10 s, at least one round trip
 *     measured, no throttling without quotas), the subscription's fetch queue
 *     and the producer's queue;
 *   - embedded cluster only (it can be taken down): records published while
 *     the broker is down wait in the producer's queue, and the queue series
 *     count them (records and bytes), then empty once they are delivered.
 * Every wait is a condition with a deadline (cst_wait); statistics come once
 * a second (statistics.interval.ms, cstream's default). */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstest.h"

enum { WAIT_MS = 30000, QUEUED = 5, VALUE_BYTES = 100 };

typedef struct fixture {
    cs_app *app;
    cs_kafka *k;
    cs_sub *sub;
    char topic[128], group[160];
    _Atomic int handled, delivered;
} fixture;

static cs_outcome handler(cs_delivery *d, void *user) {
    (void)d;
    atomic_fetch_add(&((fixture *)user)->handled, 1);
    return CS_ACK;
}

static void on_published(const cs_published *where, cs_err err, void *opaque) {
    (void)where;
    if (!err) atomic_fetch_add(&((fixture *)opaque)->delivered, 1);
}

/* Calls fn on the value of every series of `name` whose labels start with
 * `labels` and hold `with` (NULL: any); returns how many there were. */
static int each_series(const char *text, const char *name, const char *labels, const char *with,
                       void (*fn)(double v, void *arg), void *arg) {
    char head[512];
    snprintf(head, sizeof head, "%s{%s", name, labels);
    int n = 0;
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (strncmp(line, head, strlen(head))) continue;
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char copy[1024];
        if (len >= sizeof copy) continue;
        memcpy(copy, line, len);
        copy[len] = '\0';
        if (with && !strstr(copy, with)) continue;
        const char *space = strrchr(copy, ' ');
        if (!space) continue;
        n++;
        if (fn) fn(strtod(space + 1, NULL), arg);
    }
    return n;
}

typedef struct range {
    double min, max;
} range;
static void widen(double v, void *arg) {
    range *r = arg;
    if (v < r->min) r->min = v;
    if (v > r->max) r->max = v;
}

/* The values of the matching series: how many, the smallest and the largest. */
static int values(const char *text, const char *name, const char *labels, const char *with, range *r) {
    *r = (range){1e30, -1e30};
    return each_series(text, name, labels, with, widen, r);
}

static void consumer_labels(const fixture *f, char *buf, size_t cap) {
    snprintf(buf, cap, "client=\"consumer\",subscription=\"%s\"", f->topic);
}

static void publish_some(fixture *f, int n);

/* Both clients reported: some round trip measured for each, the queues
 * present. The round trips are those of the last interval, and an idle
 * producer sends nothing: each check publishes one more record. */
static bool reported(void *arg) {
    fixture *f = arg;
    publish_some(f, 1);
    char *text = NULL, consumer[256];
    if (cs_app_metrics(f->app, &text) != CS_OK) return false;
    consumer_labels(f, consumer, sizeof consumer);
    range c, p;
    bool yes = values(text, "cstream_kafka_broker_rtt_seconds", consumer, "stat=\"avg\"", &c) > 0 && c.max > 0 &&
               values(text, "cstream_kafka_broker_rtt_seconds", "client=\"producer\"", "stat=\"avg\"", &p) > 0 &&
               p.max > 0 && strstr(text, "\ncstream_kafka_producer_queue_records ") &&
               strstr(text, "\ncstream_kafka_fetch_queue_records{");
    free(text);
    return yes;
}

static void start(fixture *f) {
    cst_fresh("cstats", 1, f->topic, f->group, sizeof f->topic);
    f->app = cs_app_new("cstats", "1.0");
    assert_non_null(f->app);
    f->k = cs_test_kafka_new(cst_cluster);
    assert_non_null(f->k);
    f->sub = cs_kafka_subscribe(f->k, f->topic, handler, f);
    assert_non_null(f->sub);
    CST_OK(cs_sub_group(f->sub, f->group));
    CST_OK(cs_sub_commit_mode(f->sub, CS_COMMIT_TRACKED));
    CST_OK(cs_app_add_kafka(f->app, f->k));
    CST_OK(cs_app_start(f->app));
}

static void publish_some(fixture *f, int n) {
    char value[VALUE_BYTES];
    memset(value, 'v', sizeof value);
    for (int i = 0; i < n; i++) {
        cs_record r = {.topic = f->topic, .partition = 0, .value = value, .value_len = sizeof value};
        CST_OK(cs_publish_async(f->k, &r, on_published, f));
    }
}

static bool handled_all(void *arg) { return atomic_load(&((fixture *)arg)->handled) >= QUEUED; }

static void test_series_sane(void **state) {
    (void)state;
    fixture f = {0};
    start(&f);
    publish_some(&f, QUEUED); /* traffic for both clients */
    if (!cst_wait(handled_all, &f, WAIT_MS)) fail_msg("the %d records were not handled", QUEUED);
    if (!cst_wait(reported, &f, WAIT_MS)) {
        char *text = NULL;
        (void)cs_app_metrics(f.app, &text);
        fprintf(stderr, "/metrics:\n%s", text ? text : "(none)"); /* for a look after the failure */
        free(text);
        fail_msg("no round trip in the statistics of both clients within %d s", WAIT_MS / 1000);
    }

    char *text = NULL, consumer[256];
    CST_OK(cs_app_metrics(f.app, &text));
    consumer_labels(&f, consumer, sizeof consumer);
    range r;
    /* Round trips: every stat of every broker a real duration, below 10 s. */
    assert_true(values(text, "cstream_kafka_broker_rtt_seconds", consumer, NULL, &r) >= 3); /* avg, p50, p99 */
    assert_true(r.min >= 0 && r.max > 0 && r.max < 10);
    assert_true(values(text, "cstream_kafka_broker_rtt_seconds", "client=\"producer\"", NULL, &r) >= 3);
    assert_true(r.min >= 0 && r.max > 0 && r.max < 10);
    /* Each series names its broker (host:port) and node id. */
    assert_true(each_series(text, "cstream_kafka_broker_rtt_seconds", consumer, "broker_id=\"", NULL, NULL) >= 3);
    /* No quotas: nothing throttled. */
    assert_true(values(text, "cstream_kafka_broker_throttle_seconds", consumer, NULL, &r) >= 2); /* avg, max */
    assert_true(r.min == 0 && r.max == 0);
    /* The queues: present, never negative. */
    char sub_labels[512];
    snprintf(sub_labels, sizeof sub_labels, "subscription=\"%s\",group=\"%s\"", f.topic, f.group);
    assert_true(cst_metric(f.app, "cstream_kafka_fetch_queue_records", sub_labels) >= 0);
    assert_true(cst_metric(f.app, "cstream_kafka_fetch_queue_bytes", sub_labels) >= 0);
    assert_true(cst_metric(f.app, "cstream_kafka_producer_queue_records", NULL) >= 0);
    assert_true(cst_metric(f.app, "cstream_kafka_producer_queue_bytes", NULL) >= 0);
    free(text);
    CST_OK(cs_app_stop(f.app));
    /* A stopped producer has no queue to report. */
    assert_true(cst_metric(f.app, "cstream_kafka_producer_queue_records", NULL) < 0);
    cs_app_destroy(f.app);
}

static bool queue_holds_all(void *arg) {
    fixture *f = arg;
    return cst_metric(f->app, "cstream_kafka_producer_queue_records", NULL) == QUEUED &&
           cst_metric(f->app, "cstream_kafka_producer_queue_bytes", NULL) >= QUEUED * VALUE_BYTES;
}
static bool queue_empty(void *arg) {
    fixture *f = arg;
    return atomic_load(&f->delivered) == QUEUED &&
           cst_metric(f->app, "cstream_kafka_producer_queue_records", NULL) == 0;
}

static void test_producer_queue_counts_waiting_records(void **state) {
    (void)state;
    if (!cs_test_cluster_is_embedded(cst_cluster)) cst_skip("the broker is taken down: embedded cluster only");
    fixture f = {0};
    start(&f);
    CST_OK(cs_test_cluster_set_down(cst_cluster, 1));
    publish_some(&f, QUEUED);
    bool held = cst_wait(queue_holds_all, &f, WAIT_MS);
    double seen = cst_metric(f.app, "cstream_kafka_producer_queue_records", NULL);
    CST_OK(cs_test_cluster_set_down(cst_cluster, 0));
    if (!held) fail_msg("the producer's queue series never counted the %d waiting records (last: %g)", QUEUED, seen);
    if (!cst_wait(queue_empty, &f, WAIT_MS))
        fail_msg("the queue did not empty after the broker came back (delivered %d of %d)", atomic_load(&f.delivered),
                 QUEUED);
    CST_OK(cs_app_stop(f.app));
    cs_app_destroy(f.app);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_series_sane),
        cmocka_unit_test(test_producer_queue_counts_waiting_records),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
