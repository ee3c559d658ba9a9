/* start_position.c — where a subscription starts on a partition its group has
 * no committed offset for: the offsets of cs_sub_start_at_offset and the time
 * of cs_sub_start_at_time, set on the assignment list before librdkafka
 * assigns it (an explicit offset in the list overrides the committed one, so
 * this file only sets it where the group has none: a committed offset always
 * wins). Without either setting nothing happens here and librdkafka's
 * auto.offset.reset (cs_sub_start_at) decides.
 *
 * Threads: the fetch thread, inside the rebalance callback (rebalance.c),
 * before the assign. It blocks on the group coordinator (OffsetFetch) and on
 * the partition leaders (ListOffsets), bounded by START_LOOKUP_TIMEOUT_MS
 * each, with no cstream lock held.
 *
 * Owns: nothing. Locks: none. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kafka/consumer/consumer_internal.h"

/* How long each lookup (committed offsets, offsets by time) may take: the
 * rebalance callback waits for it, as for the attempt counts (rebalance.c). */
enum { START_LOOKUP_TIMEOUT_MS = 10000 };

static const cs_start_offset *offset_for(const cs_sub *s, const char *topic, int32_t partition) {
    for (size_t i = 0; i < s->n_start_offsets; i++)
        if (s->start_offsets[i].partition == partition && !strcmp(s->start_offsets[i].topic, topic))
            return &s->start_offsets[i];
    return NULL;
}

/* The partitions of `fresh` (no committed offset) without an explicit offset:
 * their offsets by time, written into l. A partition the lookup fails for
 * keeps librdkafka's reset (cs_sub_start_at). */
static void apply_time(cs_consumer *c, rd_kafka_topic_partition_list_t *l, rd_kafka_topic_partition_list_t *fresh) {
    if (fresh->cnt == 0) return;
    for (int i = 0; i < fresh->cnt; i++) fresh->elems[i].offset = c->sub->start_time_ms; /* the query: a time */
    rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(c->rk, fresh, START_LOOKUP_TIMEOUT_MS);
    for (int i = 0; i < fresh->cnt; i++) {
        rd_kafka_topic_partition_t *f = &fresh->elems[i];
        rd_kafka_topic_partition_t *e = rd_kafka_topic_partition_list_find(l, f->topic, f->partition);
        if (!e) continue;
        if (err || f->err) {
            CS_LOG_WARN("start by time: offset lookup failed, the start position (earliest/latest) decides "
                        "subscription=%s topic=%s partition=%d time_ms=%lld error=\"%s\"",
                        c->sub->name, f->topic, (int)f->partition, (long long)c->sub->start_time_ms,
                        rd_kafka_err2str(err ? err : f->err));
            continue;
        }
        /* -1: no record at or after the time: start at the end. */
        e->offset = f->offset >= 0 ? f->offset : RD_KAFKA_OFFSET_END;
        CS_LOG_INFO("start by time: no committed offset, starting at the first record at or after the time "
                    "subscription=%s topic=%s partition=%d time_ms=%lld offset=%s%lld",
                    c->sub->name, f->topic, (int)f->partition, (long long)c->sub->start_time_ms,
                    f->offset >= 0 ? "" : "end:", (long long)f->offset);
    }
}

void cs__start_positions_apply(cs_consumer *c, rd_kafka_topic_partition_list_t *l) {
    const cs_sub *s = c->sub;
    if ((s->n_start_offsets == 0 && s->start_time_ms == CS_START_TIME_NONE) || l->cnt == 0) return;
    rd_kafka_topic_partition_list_t *committed = rd_kafka_topic_partition_list_copy(l);
    rd_kafka_resp_err_t err = rd_kafka_committed(c->rk, committed, START_LOOKUP_TIMEOUT_MS);
    if (err) {
        /* Not knowing whether the group has a position, setting one could move
         * a committed group: leave the partitions to their committed offset
         * (or the reset). */
        CS_LOG_WARN("start positions not applied: committed offsets not read subscription=%s error=\"%s\"", s->name,
                    rd_kafka_err2str(err));
        rd_kafka_topic_partition_list_destroy(committed);
        return;
    }
    rd_kafka_topic_partition_list_t *by_time = rd_kafka_topic_partition_list_new(l->cnt);
    for (int i = 0; i < committed->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &committed->elems[i];
        if (e->err || e->offset >= 0) continue; /* committed (or unreadable): the group's position holds */
        const cs_start_offset *o = offset_for(s, e->topic, e->partition);
        rd_kafka_topic_partition_t *target = rd_kafka_topic_partition_list_find(l, e->topic, e->partition);
        if (!target) continue;
        if (o) {
            target->offset = o->offset;
            CS_LOG_INFO("start at offset: no committed offset, starting at the configured one subscription=%s "
                        "topic=%s partition=%d offset=%lld",
                        s->name, e->topic, (int)e->partition, (long long)o->offset);
        } else if (s->start_time_ms != CS_START_TIME_NONE) {
            rd_kafka_topic_partition_list_add(by_time, e->topic, e->partition);
        }
    }
    apply_time(c, l, by_time);
    rd_kafka_topic_partition_list_destroy(by_time);
    rd_kafka_topic_partition_list_destroy(committed);
}
