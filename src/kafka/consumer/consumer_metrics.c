/* consumer_metrics.c — one subscription's consumer as numbers: its stats
 * (cs_sub_stats_get) and its /metrics series, read from the counters the
 * fetch path, the pipeline and the commits keep, and from librdkafka's
 * statistics (the partitions' ends here; brokers and the fetch queue in
 * client_stats.c); the fetch path counts its per-topic events through
 * cs__consumer_count_topic. Reading never changes the consumer and never
 * waits on the network.
 *
 * Owns: no state of its own: it reads the counters others keep, bumps the
 * per-topic counters it is handed, and hands librdkafka's statistics to
 * their owners (the partitions' ends to partition.c, the client stats to
 * client_stats.c). Locks: none of its own. Threads: reading, the caller's
 * thread (the scraping thread or a stats reader, with the
 * subscription's stats lock held; cs__consumer_paused, /readyz's thread under
 * ops_state.lock instead); cs__consumer_count_topic, the fetch thread; the
 * statistics callback, the thread that polls the consumer (the fetch thread,
 * or the closing thread after it exited). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yajl/yajl_tree.h>

#include "core/broker.h"
#include "base/error.h"
#include "kafka/consumer/consumer_internal.h"

/* ---- counters and stats ----------------------------------------------------- */

/* A per-topic counter of the fetch path (rare events: a lookup by name). */
void cs__consumer_count_topic(cs_consumer *c, _Atomic uint64_t *counters, const char *topic) {
    int i = cs__subscribed_topic_in(c, topic);
    if (i >= 0) atomic_fetch_add_explicit(&counters[i], 1, memory_order_relaxed);
}

static uint64_t sum_topics(const cs_consumer *c, _Atomic uint64_t *counters) {
    uint64_t n = 0;
    for (size_t i = 0; i < c->sub->n_topics; i++) n += atomic_load_explicit(&counters[i], memory_order_relaxed);
    return n;
}

void cs__consumer_stats(cs_consumer *c, cs_sub_stats *out) {
    cs__sub_stats_of_pipeline(c->pipe, out);
    out->fetch_buffer_peak = c->take.store ? cs__store_peak(c->take.store) : c->take.final_peak;
    out->stuck_pauses = sum_topics(c, c->topic_stuck);
    out->wakeups = atomic_load_explicit(&c->wake.wakeups, memory_order_relaxed);
    out->gaps = sum_topics(c, c->topic_gaps);
    out->repeats = sum_topics(c, c->topic_repeats);
    out->seeks = atomic_load_explicit(&c->control.seeks, memory_order_relaxed);
    out->paused_partitions = atomic_load_explicit(&c->control.paused_now, memory_order_relaxed);
    out->rejoins = atomic_load_explicit(&c->rejoin.count, memory_order_relaxed);
}
uint64_t cs__consumer_paused(cs_consumer *c) {
    return atomic_load_explicit(&c->control.paused_now, memory_order_relaxed);
}

/* ---- the partitions' ends, from librdkafka's statistics -----------------------
 * The lag metric needs the end a read_committed consumer can read to: the last
 * stable offset (LSO), below the records of a transaction still open upstream,
 * which this consumer cannot read yet and may never (an abort). librdkafka
 * 2.0.2 keeps it from every fetch response (the fetcher's end offset: the LSO
 * under read_committed, the high watermark otherwise) but offers it only in
 * the statistics (`ls_offset` per partition); rd_kafka_get_watermark_offsets
 * gives the high watermark, and rd_kafka_query_watermark_offsets (a
 * ListOffsets round trip under the handle's isolation.level: the LSO on a
 * read_committed handle) costs a round trip a scrape must not wait for. On
 * librdkafka 2.3 and newer, rd_kafka_ListOffsets (the admin API, with
 * RD_KAFKA_ISOLATION_LEVEL_READ_COMMITTED) asks the broker the same way. */

/* An integer member of a yajl object, or -1. */
static int64_t json_int(yajl_val obj, const char *name) {
    const char *path[] = {name, NULL};
    yajl_val v = yajl_tree_get(obj, path, yajl_t_number);
    return v && YAJL_IS_INTEGER(v) ? (int64_t)YAJL_GET_INTEGER(v) : -1;
}

int cs__consumer_on_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque) {
    (void)rk;
    (void)len;
    cs_consumer *c = opaque;
    yajl_val root = yajl_tree_parse(json, NULL, 0);
    const char *topics_path[] = {"topics", NULL};
    yajl_val topics = root ? yajl_tree_get(root, topics_path, yajl_t_object) : NULL;
    for (size_t t = 0; topics && t < YAJL_GET_OBJECT(topics)->len; t++) {
        const char *topic = YAJL_GET_OBJECT(topics)->keys[t];
        const char *parts_path[] = {"partitions", NULL};
        yajl_val parts = yajl_tree_get(YAJL_GET_OBJECT(topics)->values[t], parts_path, yajl_t_object);
        for (size_t i = 0; parts && i < YAJL_GET_OBJECT(parts)->len; i++) {
            yajl_val p = YAJL_GET_OBJECT(parts)->values[i];
            int64_t partition = json_int(p, "partition"), ls = json_int(p, "ls_offset"), hi = json_int(p, "hi_offset");
            if (partition < 0 || ls < 0 || hi < 0) continue; /* librdkafka's unassigned partition, or not fetched yet */
            cs_part *part = cs__consumer_part(c, topic, (int32_t)partition);
            if (part) cs__part_set_end(part, ls, hi);
        }
    }
    cs__client_stats_update(&c->rdk_stats, root, false); /* the brokers' round trips, the fetch queue */
    yajl_tree_free(root);
    return 0; /* librdkafka frees json */
}

/* ---- /metrics -------------------------------------------------------------- */

/* 1 while librdkafka reports the subscribed topic unavailable (deleted, or
 * not visible to this client), else 0: one series per subscribed topic, so an
 * alert can fire on `== 1`. */
static void topic_metrics(cs_consumer *c, cs_metrics *m, const char *sub, const char *group) {
    for (size_t i = 0; i < c->sub->n_topics; i++) {
        const char *l[] = {"subscription", sub, "group", group ? group : "", "topic", c->sub->topics[i], NULL};
        cs__metric_int(m, "cstream_topic_unavailable", "gauge",
                       "1 while the subscribed topic is reported unavailable (deleted, or not visible to this "
                       "client); its partitions are not consumed until it comes back.",
                       l, atomic_load(&c->errors.topic_unavailable[i]) ? 1 : 0);
    }
}

/* The fetch buffer (docs/fetch-path-design.md 3.8). */
static void fetch_metrics(cs_consumer *c, cs_metrics *m, const char *sub, const char *group) {
    const char *labels[] = {"subscription", sub, "group", group ? group : "", NULL};
    cs_store *st = c->take.store;
    cs__metric_int(m, "cstream_fetch_buffer_bytes", "gauge",
                   "Bytes the fetch buffer holds: records fetched and not yet settled (whole chunks).", labels,
                   st ? (int64_t)cs__store_used(st) : 0);
    cs__metric_int(m, "cstream_fetch_buffer_records", "gauge", "Records the fetch buffer holds.", labels,
                   st ? (int64_t)cs__store_records(st) : 0);
    cs__metric_int(m, "cstream_fetch_buffer_limit_bytes", "gauge",
                   "The fetch buffer's bound (cs_sub_fetch_buffer_bytes).", labels,
                   (int64_t)c->sub->fetch_buffer_bytes);
    cs__metric_int(m, "cstream_lane_waiting_records", "gauge",
                   "Records handed out and waiting in the lanes for a worker (at most 4,096 per worker; the "
                   "rest wait in the fetch buffer).",
                   labels, (int64_t)cs__pipeline_lanes_waiting(c->pipe));
    cs__metric_int(m, "cstream_fetch_wakeups_total", "counter",
                   "Wake-ups of librdkafka's fetchers after its pre-fetch queue reached its bound.", labels,
                   (int64_t)atomic_load_explicit(&c->wake.wakeups, memory_order_relaxed));
    if (!c->sub->partitions) {
        const char *l[] = {"subscription",
                           sub,
                           "group",
                           group ? group : "",
                           "protocol",
                           cs__protocol_label(c->sub->consumer_protocol),
                           NULL};
        cs__metric_int(m, "cstream_consumer_group_protocol", "gauge",
                       "1, labelled with the group protocol the consumer joins with: classic, or consumer (KIP-848, "
                       "group.protocol=consumer).",
                       l, 1);
    }
    cs__metric_int(m, "cstream_consumer_rejoins_total", "counter",
                   "Times the consumer was created again to rejoin its group: after a join refused with "
                   "UNRELEASED_INSTANCE_ID (consumer group protocol, static member), or after a lost group session "
                   "that did not come back within twice the session timeout (20 to 60 s).",
                   labels, (int64_t)atomic_load_explicit(&c->rejoin.count, memory_order_relaxed));
    cs__metric_int(m, "cstream_seeks_total", "counter",
                   "Partitions moved to another offset by the application (cs_sub_seek, cs_sub_seek_time).", labels,
                   (int64_t)atomic_load_explicit(&c->control.seeks, memory_order_relaxed));
    cs__metric_int(m, "cstream_paused_partitions", "gauge",
                   "Assigned partitions the application paused (cs_sub_pause, cs_sub_pause_partition): not served "
                   "until resumed.",
                   labels, (int64_t)atomic_load_explicit(&c->control.paused_now, memory_order_relaxed));
    for (size_t i = 0; i < c->sub->n_topics; i++) {
        const char *l[] = {"subscription", sub, "group", group ? group : "", "topic", c->sub->topics[i], NULL};
        cs__metric_int(m, "cstream_partition_stuck_pauses_total", "counter",
                       "Partitions of the topic paused because their records stopped settling and held more than "
                       "their share of the fetch buffer.",
                       l, (int64_t)atomic_load_explicit(&c->topic_stuck[i], memory_order_relaxed));
        cs__metric_int(m, "cstream_fetch_offset_gaps_total", "counter",
                       "Fetched offsets that skipped ahead of the next expected one (compaction, transaction "
                       "markers, aborted records).",
                       l, (int64_t)atomic_load_explicit(&c->topic_gaps[i], memory_order_relaxed));
        cs__metric_int(m, "cstream_fetch_offset_repeats_total", "counter", "Fetched offsets already taken, dropped.", l,
                       (int64_t)atomic_load_explicit(&c->topic_repeats[i], memory_order_relaxed));
    }
}

typedef struct part_list {
    cs_part_metrics *v;
    size_t n, cap;
} part_list;

static void collect_part(void *arg, const cs_part_metrics *m) {
    part_list *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        cs_part_metrics *grown = realloc(l->v, cap * sizeof *grown);
        if (!grown) return; /* out of memory: this scrape leaves the partition out */
        l->v = grown;
        l->cap = cap;
    }
    l->v[l->n++] = *m;
}

/* Whether some partition of `topic` is assigned to this member. */
static bool topic_assigned(const part_list *l, const char *topic) {
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].assigned && !strcmp(l->v[i].topic, topic)) return true;
    return false;
}

/* Called with the subscription's stats lock held, so the consumer (its
 * handle and pipeline) cannot be freed meanwhile; it may be closing (the
 * stop holds no lock across the close). Never waits on the network:
 * the high watermark is librdkafka's cached value from its last fetch
 * response (rd_kafka_get_watermark_offsets, not the querying variant), the
 * last stable offset the statistics' (cs__consumer_on_stats), and
 * the committed position is what the last commit this member made reported
 * (cs__part_commit_done), so a scrape costs no round trip to the broker. */
void cs__consumer_metrics(cs_consumer *c, cs_metrics *m, const char *sub, const char *group) {
    const char *labels[] = {"subscription", sub, "group", group ? group : "", NULL};
    cs__metric_int(m, "cstream_inflight_records", "gauge",
                   "Records cstream holds for the subscription: queued, running, or pending settlement.", labels,
                   (int64_t)cs__pipeline_busy(c->pipe));
    cs_histogram_snap h = {0};
    cs__pipeline_handler_durations(c->pipe, &h);
    cs__metric_histogram(m, "cstream_handler_duration_seconds",
                         "Handler run time (one observation per call; a batch handler call is one).", labels, &h);

    fetch_metrics(c, m, sub, group);
    topic_metrics(c, m, sub, group);
    cs__client_stats_metrics(&c->rdk_stats, m, sub, group);
    part_list parts = {0};
    cs__pipeline_each_part(c->pipe, collect_part, &parts);
    /* Records and dead letters by topic: the partitions of a topic add up
     * (the collector sums series with equal labels). */
    static const char *const outcomes[] = {"ack", "drop", "retry", "retry_unsupported", "stale"};
    for (size_t i = 0; i < parts.n; i++) {
        const cs_part_metrics *p = &parts.v[i];
        /* A pattern's topics come and go: only the topics assigned now have
         * series, or every topic it ever matched would keep its series (a
         * fixed subscription's topics are bounded by its declaration). */
        if (c->sub->pattern && !topic_assigned(&parts, p->topic)) continue;
        const uint64_t by_outcome[] = {p->acked, p->dropped, p->retried, p->retry_unsupported, p->stale};
        for (size_t o = 0; o < sizeof outcomes / sizeof outcomes[0]; o++) {
            const char *l[] = {"subscription", sub,         "group", group ? group : "", "topic", p->topic,
                               "outcome",      outcomes[o], NULL};
            cs__metric_int(m, "cstream_records_total", "counter",
                           "Settlements of records by topic and outcome (a retry counts each time; a record given "
                           "up at max_attempts ends as a drop).",
                           l, (int64_t)by_outcome[o]);
        }
        const char *l[] = {"subscription", sub, "group", group ? group : "", "topic", p->topic, NULL};
        cs__metric_int(m, "cstream_dead_letters_total", "counter",
                       "Records of the topic the dead-letter topic accepted.", l, (int64_t)p->dead_lettered);
    }
    for (size_t i = 0; i < parts.n; i++) {
        const cs_part_metrics *p = &parts.v[i];
        if (!p->assigned) continue; /* a revoked partition's numbers belong to its new owner */
        char partition[16];
        snprintf(partition, sizeof partition, "%d", (int)p->partition);
        const char *l[] = {"subscription", sub,       "group", group ? group : "", "topic", p->topic,
                           "partition",    partition, NULL};
        if (p->committed < 0) continue; /* nothing committed by this member yet */
        cs__metric_int(m, "cstream_committed_offset", "gauge",
                       "Position this member last committed for the partition (the next offset to read).", l,
                       p->committed);
        int64_t low = -1, high = -1;
        if (rd_kafka_get_watermark_offsets(c->rk, p->topic, p->partition, &low, &high) != RD_KAFKA_RESP_ERR_NO_ERROR ||
            high < 0)
            continue;
        /* The statistics' end is at most an interval old. A transaction
         * ends with a marker, which moves the high watermark: while the high
         * watermark is the one reported with it, so is the last stable
         * offset. Once records came since, the high watermark bounds the lag
         * until the next report. */
        int64_t end = p->end >= 0 && p->end_high == high ? p->end : high;
        cs__metric_int(m, "cstream_lag_records", "gauge",
                       "Records the member can read and has not committed: the partition's end as the consumer "
                       "reads it (the last stable offset under read_committed, from librdkafka's statistics; the "
                       "high watermark of the last fetch while newer) minus the committed position.",
                       l, end > p->committed ? end - p->committed : 0);
    }
    free(parts.v);
}
