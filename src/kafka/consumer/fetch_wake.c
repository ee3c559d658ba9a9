/* fetch_wake.c — waking librdkafka's broker threads, with a seek to where
 * the take stopped: once librdkafka's pre-fetch bound was seen and recq is
 * empty again, after an incremental (un)assign, and when a stuck partition is
 * resumed (fetch_stuck.c); and moving a partition to another offset, for a
 * Transactional rewind (committer.c) and an application's seek
 * (fetch_control.c), and a shed partition's checked re-fetch after its resume.
 *
 * Owns: c->wake. Locks: none. Threads: the fetch thread, or the closing thread
 * after it exited (the close's revoke: cs__fetch_wake_kept; a Transactional
 * window aborted at the close: cs__fetch_reposition); cs__consumer_fail_refetches
 * (a test hook): any thread. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/broker.h"
#include "base/error.h"
#include "kafka/consumer/consumer_internal.h"

/* A seek (a rewind after an aborted window, or the application's) waits this
 * long for its result before it counts as failed. */
#define SEEK_RESULT_TIMEOUT_MS 10000
/* rd_kafka_version() of the last release whose seek waits in the wrong unit
 * is 2.0.2; fixed in 2.1.0 (librdkafka #4230; there was no 2.0.3). */
#define RDKAFKA_SEEK_UNIT_FIXED 0x02010000

/* ---- waking librdkafka's broker threads --------------------------------------
 * In librdkafka 2.0.2 a broker thread whose partitions are all at the queue's
 * bound drops them from its fetch list and sleeps until its 1 s serve period
 * ends: the queue draining later notifies no one, and neither does a resume
 * (docs/fetch-path-design.md 1a). An asynchronous seek to a concrete offset
 * wakes the leader's broker thread ("seek done") within about a millisecond.
 * Seeking to `next`, the offset after the last record taken, loses and
 * repeats nothing: records of older versions still in recq are dropped by
 * librdkafka, and the refetch starts where the take stopped. */

static void seek_next(cs_consumer *c, fetch_part *fp) {
    rd_kafka_resp_err_t err = rd_kafka_seek(fp->rkt, fp->partition, fp->next, 0);
    if (err)
        CS_LOG_DEBUG("wake-up seek failed subscription=%s topic=%s partition=%d offset=%lld error=\"%s\"", c->sub->name,
                     fp->topic, (int)fp->partition, (long long)fp->next, rd_kafka_err2str(err));
}

/* Seeks every partition cstream reads (not paused by it, not shedding, with a known
 * position, its log not in doubt, not moving back: moves_back in fetch_control.c
 * seeks it) to `next`. */
static void seek_readable(cs_consumer *c) {
    for (size_t i = 0; i < c->fetch.n_parts; i++) {
        fetch_part *fp = &c->fetch.parts[i];
        if (!fp->paused && !fp->shed && fp->back_to < 0 && fp->next >= 0 && !cs__part_log_unknown(fp->part))
            seek_next(c, fp);
    }
}

/* After the bound was seen and recq is empty again. */
void cs__fetch_wake_fetchers(cs_consumer *c) {
#if RD_KAFKA_VERSION < 0x020200ff
    seek_readable(c);
#else
    /* From 2.2.0 a full partition is fetched again after
     * fetch.queue.backoff.ms (5 ms, consumer_conf.c) without a seek; the
     * count still says how often the bound was reached. */
#endif
    atomic_fetch_add_explicit(&c->wake.wakeups, 1, memory_order_relaxed);
}

/* After an incremental assign or unassign librdkafka resumes the partitions
 * kept across the rebalance (its LIB pause) without waking their broker
 * threads; the seek is enqueued after that resume on the partition's op
 * queue, which is served in order. */
void cs__fetch_wake_kept(cs_consumer *c) { seek_readable(c); }

/* ---- moving a partition to another offset --------------------------------------
 * Once librdkafka has done the seek, the partition's backlog, read from the
 * old position, is dropped, and the continuity guard expects the seek's first
 * record next. Records of the old position still in recq are outdated, and
 * librdkafka drops them when taken. A seek librdkafka refuses (a partition
 * whose fetch a rebalance is stopping: "Erroneous state") changes nothing. */
/* Seeks topic/partition to `offset` and waits for the seek's result. */
static rd_kafka_resp_err_t seek_and_wait(cs_consumer *c, const char *topic, int32_t partition, int64_t offset,
                                         char *why, size_t cap) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, partition)->offset = offset;
    /* librdkafka before 2.1.0 waits for the seek's result 1000 times shorter
     * than asked (it hands milliseconds to a wait in microseconds; fixed by
     * #4230): ask for 10 s there too, or a seek answered after 10 ms would
     * count as failed although it happened. */
    int timeout_ms = SEEK_RESULT_TIMEOUT_MS;
    if (rd_kafka_version() < RDKAFKA_SEEK_UNIT_FIXED) timeout_ms *= 1000; /* ms read as µs */
    rd_kafka_error_t *e = rd_kafka_seek_partitions(c->rk, l, timeout_ms);
    rd_kafka_resp_err_t err = e ? rd_kafka_error_code(e) : l->elems[0].err;
    if (err) snprintf(why, cap, "%s", e ? rd_kafka_error_string(e) : rd_kafka_err2str(err));
    if (e) rd_kafka_error_destroy(e);
    rd_kafka_topic_partition_list_destroy(l);
    return err;
}

rd_kafka_resp_err_t cs__fetch_reposition(cs_consumer *c, cs_part *part, int64_t offset, char *why, size_t cap) {
    rd_kafka_resp_err_t err = seek_and_wait(c, cs__part_topic(part), cs__part_number(part), offset, why, cap);
    if (!err) cs__fetch_rewound(c, part, offset); /* same thread: no take runs in between */
    return err;
}

/* A test's hook (cs_test_sub_fail_refetches): the next n re-fetch seeks fail. */
void cs__consumer_fail_refetches(cs_consumer *c, unsigned n) { atomic_store(&c->wake.refetch_faults, n); }

/* ---- a shed partition's re-fetch ----------------------------------------------
 * A partition the application paused drops the records taken past its share
 * (take_cb), while librdkafka's position moves past them. After the resume,
 * librdkafka must read again from `next`, the first one dropped: a seek
 * whose result is checked, because a seek that did not happen would show the
 * next record taken as a gap after `next`, and the dropped records would be
 * skipped. The backlog, records before `next`, stays. */
rd_kafka_resp_err_t cs__fetch_refetch(cs_consumer *c, fetch_part *fp, char *why, size_t cap) {
    unsigned faults = atomic_load(&c->wake.refetch_faults);
    while (faults > 0 && !atomic_compare_exchange_weak(&c->wake.refetch_faults, &faults, faults - 1)) {}
    if (faults > 0) {
        snprintf(why, cap, "re-fetch seek failed on purpose (cs_test_sub_fail_refetches)");
        return RD_KAFKA_RESP_ERR__STATE;
    }
    return seek_and_wait(c, fp->topic, fp->partition, fp->next, why, cap);
}
