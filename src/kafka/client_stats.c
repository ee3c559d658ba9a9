/* client_stats.c — a librdkafka client's statistics as the few numbers an
 * operator watches: per broker, the requests' round-trip time and the time
 * the broker throttled the client (quotas); the producer's local queue; the
 * consumer's pre-fetch queue. Both the consumers (consumer_metrics.c) and the
 * producer (producer.c) hand their statistics here.
 *
 * Threads: updates come from the thread that serves the handle's callbacks,
 * once per statistics.interval.ms; /metrics reads from the HTTP thread. The
 * numbers are parsed outside the lock and swapped in under it, so the lock is
 * held for a pointer swap or a copy, never for a parse, and /metrics never
 * asks the network. The lock is a leaf.
 *
 * Owns: the cs_client_stats it is given (its per-broker table). Locks: its
 * `lock` (a leaf), around every update and read. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/kafka_internal.h"

struct cs_broker_stat {
    char name[256]; /* nodename, host:port */
    int32_t id;
    /* over the last statistics interval; 0 when nothing completed in it */
    int64_t rtt_avg_us, rtt_p50_us, rtt_p99_us;
    int64_t throttle_avg_ms, throttle_max_ms;
};

void cs__client_stats_init(cs_client_stats *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
}

void cs__client_stats_clear(cs_client_stats *s) {
    pthread_mutex_lock(&s->lock);
    cs_broker_stat *old = s->brokers;
    s->brokers = NULL;
    s->n_brokers = 0;
    s->seen = false;
    pthread_mutex_unlock(&s->lock);
    free(old);
}

void cs__client_stats_destroy(cs_client_stats *s) {
    cs__client_stats_clear(s);
    pthread_mutex_destroy(&s->lock);
}

static yajl_val member(yajl_val obj, const char *name, yajl_type type) {
    const char *path[] = {name, NULL};
    return obj ? yajl_tree_get(obj, path, type) : NULL;
}

/* An integer member, or `none`. librdkafka writes every counter as an
 * integer; anything else is a report this code does not understand. */
static int64_t int_member(yajl_val obj, const char *name, int64_t none) {
    yajl_val v = member(obj, name, yajl_t_number);
    return v && YAJL_IS_INTEGER(v) ? (int64_t)YAJL_GET_INTEGER(v) : none;
}

/* A broker the client talks to by its node id. Left out: the bootstrap
 * entries (node id -1, the same host again under another name), the
 * internal broker, and the logical coordinator brokers, which are aliases of
 * a real one and would count its connection twice. */
static bool real_broker(yajl_val b) {
    yajl_val source = member(b, "source", yajl_t_string);
    const char *src = source ? YAJL_GET_STRING(source) : NULL;
    if (src && !strcmp(src, "logical")) return false;
    return int_member(b, "nodeid", -1) >= 0;
}

static size_t parse_brokers(yajl_val root, cs_broker_stat **out) {
    *out = NULL;
    yajl_val brokers = member(root, "brokers", yajl_t_object);
    size_t n = brokers ? YAJL_GET_OBJECT(brokers)->len : 0;
    if (!n) return 0;
    cs_broker_stat *v = calloc(n, sizeof *v);
    if (!v) return 0; /* out of memory: this interval reports no broker */
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        yajl_val b = YAJL_GET_OBJECT(brokers)->values[i];
        if (!real_broker(b)) continue;
        cs_broker_stat *d = &v[used++];
        yajl_val nodename = member(b, "nodename", yajl_t_string);
        const char *name = nodename ? YAJL_GET_STRING(nodename) : NULL;
        snprintf(d->name, sizeof d->name, "%s", name ? name : YAJL_GET_OBJECT(brokers)->keys[i]);
        d->id = (int32_t)int_member(b, "nodeid", -1);
        yajl_val rtt = member(b, "rtt", yajl_t_object), throttle = member(b, "throttle", yajl_t_object);
        d->rtt_avg_us = int_member(rtt, "avg", 0);
        d->rtt_p50_us = int_member(rtt, "p50", 0);
        d->rtt_p99_us = int_member(rtt, "p99", 0);
        d->throttle_avg_ms = int_member(throttle, "avg", 0);
        d->throttle_max_ms = int_member(throttle, "max", 0);
    }
    *out = v;
    return used;
}

/* The consumer's pre-fetch queue. cstream forwards every assigned
 * partition's fetch queue to one queue (fetch_parts.c), and librdkafka
 * reports a forwarded queue's length as that of the queue it forwards to: each
 * assigned partition's fetchq_cnt is the one shared queue, so the largest is
 * the queue (a sum would count it once per partition). */
static void parse_fetch_queue(yajl_val root, int64_t *records, int64_t *bytes) {
    *records = 0;
    *bytes = 0;
    yajl_val topics = member(root, "topics", yajl_t_object);
    for (size_t t = 0; topics && t < YAJL_GET_OBJECT(topics)->len; t++) {
        yajl_val parts = member(YAJL_GET_OBJECT(topics)->values[t], "partitions", yajl_t_object);
        for (size_t i = 0; parts && i < YAJL_GET_OBJECT(parts)->len; i++) {
            yajl_val p = YAJL_GET_OBJECT(parts)->values[i];
            if (int_member(p, "partition", -1) < 0) continue; /* librdkafka's unassigned partition */
            int64_t cnt = int_member(p, "fetchq_cnt", 0), size = int_member(p, "fetchq_size", 0);
            if (cnt > *records) *records = cnt;
            if (size > *bytes) *bytes = size;
        }
    }
}

void cs__client_stats_update(cs_client_stats *s, yajl_val root, bool producer) {
    if (!root) return;
    cs_broker_stat *brokers = NULL;
    size_t n = parse_brokers(root, &brokers);
    int64_t records = 0, bytes = 0;
    if (producer) {
        records = int_member(root, "msg_cnt", 0);
        bytes = int_member(root, "msg_size", 0);
    } else {
        parse_fetch_queue(root, &records, &bytes);
    }
    pthread_mutex_lock(&s->lock);
    cs_broker_stat *old = s->brokers;
    s->brokers = brokers;
    s->n_brokers = n;
    s->queue_records = records;
    s->queue_bytes = bytes;
    s->seen = true;
    pthread_mutex_unlock(&s->lock);
    free(old);
}

int cs__client_stats_from_json(cs_client_stats *s, const char *json) {
    yajl_val root = yajl_tree_parse(json, NULL, 0);
    cs__client_stats_update(s, root, true);
    yajl_tree_free(root);
    return 0; /* librdkafka frees json */
}

static void broker_metrics(cs_metrics *m, const cs_broker_stat *b, const char *client, const char *sub) {
    char id[16];
    snprintf(id, sizeof id, "%d", (int)b->id);
    static const char *const rtt_stats[] = {"avg", "p50", "p99"};
    const int64_t rtt[] = {b->rtt_avg_us, b->rtt_p50_us, b->rtt_p99_us};
    for (size_t i = 0; i < 3; i++) {
        const char *l[] = {"client",    client, "subscription", sub,          "broker", b->name,
                           "broker_id", id,     "stat",         rtt_stats[i], NULL};
        cs__metric_double(m, "cstream_kafka_broker_rtt_seconds", "gauge",
                          "Round-trip time of the client's requests to the broker over librdkafka's last "
                          "statistics interval (statistics.interval.ms, 1 s by default), by stat (avg, p50, p99); "
                          "0 when no request completed in the interval.",
                          l, (double)rtt[i] / 1e6);
    }
    static const char *const throttle_stats[] = {"avg", "max"};
    const int64_t throttle[] = {b->throttle_avg_ms, b->throttle_max_ms};
    for (size_t i = 0; i < 2; i++) {
        const char *l[] = {"client", client, "subscription",    sub, "broker", b->name, "broker_id",
                           id,       "stat", throttle_stats[i], NULL};
        cs__metric_double(m, "cstream_kafka_broker_throttle_seconds", "gauge",
                          "Time the broker held back the client's responses for exceeding a quota, over librdkafka's "
                          "last statistics interval, by stat (avg, max); 0 when not throttled.",
                          l, (double)throttle[i] / 1e3);
    }
}

void cs__client_stats_metrics(cs_client_stats *s, cs_metrics *m, const char *sub, const char *group) {
    /* A copy under the lock, series outside it: the collector allocates. */
    pthread_mutex_lock(&s->lock);
    bool seen = s->seen;
    size_t n = s->n_brokers;
    cs_broker_stat *brokers = n ? malloc(n * sizeof *brokers) : NULL;
    if (brokers) memcpy(brokers, s->brokers, n * sizeof *brokers);
    else n = 0;
    int64_t records = s->queue_records, bytes = s->queue_bytes;
    pthread_mutex_unlock(&s->lock);
    if (!seen) return; /* no report yet (or statistics.interval.ms=0): no numbers to give */
    const char *client = sub ? "consumer" : "producer";
    for (size_t i = 0; i < n; i++) broker_metrics(m, &brokers[i], client, sub ? sub : "");
    free(brokers);
    if (sub) {
        const char *l[] = {"subscription", sub, "group", group ? group : "", NULL};
        cs__metric_int(m, "cstream_kafka_fetch_queue_records", "gauge",
                       "Records librdkafka pre-fetched for the subscription and cstream has not taken yet (its "
                       "fetch queue, at the last statistics interval).",
                       l, records);
        cs__metric_int(m, "cstream_kafka_fetch_queue_bytes", "gauge",
                       "Bytes of the records in librdkafka's fetch queue of the subscription (at the last "
                       "statistics interval).",
                       l, bytes);
    } else {
        cs__metric_int(m, "cstream_kafka_producer_queue_records", "gauge",
                       "Records in the producer's local queue: published and not yet delivered or failed (at "
                       "librdkafka's last statistics interval).",
                       NULL, records);
        cs__metric_int(m, "cstream_kafka_producer_queue_bytes", "gauge",
                       "Bytes of the records in the producer's local queue (at librdkafka's last statistics "
                       "interval).",
                       NULL, bytes);
    }
}
