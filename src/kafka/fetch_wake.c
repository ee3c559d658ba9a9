/* fetch_wake.c — waking librdkafka's broker threads, with a seek to where
 * the take stopped: once librdkafka's pre-fetch bound was seen and recq is
 * empty again, after an incremental (un)assign, and when a stuck partition is
 * resumed (fetch_stuck.c). Fetch thread only. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/broker.h"
#include "../core/error.h"
#include "consumer_internal.h"

/* ---- waking librdkafka's broker threads --------------------------------------
 * In librdkafka 2.0.2 a broker thread whose partitions are all at the queue's
 * bound drops them from its fetch list and sleeps until its 1 s serve period
 * ends: the queue draining later notifies no one, and neither does a resume
 * (docs/fetch-path-design.md 1a). An asynchronous seek to a concrete offset
 * wakes the leader's broker thread ("seek done") within about a millisecond.
 * Seeking to `next`, the offset after the last record taken, loses and
 * repeats nothing: records of older versions still in recq are dropped by
 * librdkafka, and the refetch starts where the take stopped. */

void cs__fetch_seek_next(cs_consumer *c, fetch_part *fp) {
    rd_kafka_resp_err_t err = rd_kafka_seek(fp->rkt, fp->partition, fp->next, 0);
    if (err)
        CS_LOG_DEBUG("wake-up seek failed subscription=%s topic=%s partition=%d offset=%lld error=\"%s\"", c->sub->name,
                     fp->topic, (int)fp->partition, (long long)fp->next, rd_kafka_err2str(err));
}

/* Seeks every partition cstream reads (not paused by it, with a known
 * position, its log not in doubt) to `next`. */
static void seek_readable(cs_consumer *c) {
    for (size_t i = 0; i < c->n_parts; i++) {
        fetch_part *fp = &c->parts[i];
        if (!fp->paused && fp->next >= 0 && !cs__part_log_unknown(fp->part)) cs__fetch_seek_next(c, fp);
    }
}

/* After the bound was seen and recq is empty again. */
void cs__fetch_wake_fetchers(cs_consumer *c) {
    seek_readable(c);
    atomic_fetch_add_explicit(&c->wakeups, 1, memory_order_relaxed);
}

/* After an incremental assign or unassign librdkafka resumes the partitions
 * kept across the rebalance (its LIB pause) without waking their broker
 * threads; the seek is enqueued after that resume on the partition's op
 * queue, which is served in order. */
void cs__fetch_wake_kept(cs_consumer *c) { seek_readable(c); }
