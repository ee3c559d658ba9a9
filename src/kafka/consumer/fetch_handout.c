/* fetch_handout.c — handing records out: the store -> the pipeline's lanes,
 * one round over the partitions at a time, each under max_open, the lanes'
 * room and its quarter of the buffer; under Auto the offset of the last
 * record handed out is stored here.
 *
 * Owns: c->handout. Locks: none of its own (the partitions' through
 * src/core). Threads: the fetch thread only. */
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

/* ---- handing out: the store -> the lanes --------------------------------------- */

/* A delivery for r, ready for its lane; NULL when out of memory (r released,
 * the app stopping). */
static cs_delivery *prepare(cs_consumer *c, fetch_part *fp, cs_stored *r) {
    cs_part *part = fp->part;
    cs_delivery *d = cs__delivery_alloc(part);
    if (!d) {
        cs__fetch_out_of_memory(c, fp->topic, fp->partition, r->offset, "for the delivery");
        cs__stored_release(r);
        return NULL;
    }
    d->offset = r->offset;
    d->timestamp = r->timestamp;
    d->key = cs__stored_key(r);
    d->key_len = r->key_len;
    d->value = cs__stored_value(r);
    d->value_len = r->value_len;
    d->msg = r;
    cs__part_charge(part, r);
    return d;
}

/* Records a partition gives per serving round, so that one busy partition
 * does not hold up the others, the commit tick or a rebalance for long; they
 * go to the pipeline as one run (cs__pipeline_dispatch_run). */
#define ROUND_RECORDS 256

/* The run being built for one partition in a round. */
typedef struct run {
    cs_delivery *ds[ROUND_RECORDS];
    int64_t offsets[ROUND_RECORDS]; /* ds[i]->offset: d may settle and be freed once handed out */
    size_t n;
    int64_t last; /* the last offset handed out (or refused as a repeat), -1: none */
    bool paused;  /* the partition reached max_open */
} run;

/* Hands the run to the pipeline. */
static void flush_run(cs_consumer *c, fetch_part *fp, run *rn) {
    if (rn->n == 0) return;
    size_t consumed;
    cs_part *part = fp->part;
    if (cs__pipeline_dispatch_run(c->pipe, part, rn->ds, rn->n, &consumed)) {
        rn->paused = true;
        cs__pipeline_count_pause(c->pipe);
    }
    if (consumed > 0) rn->last = rn->offsets[consumed - 1];
    if (consumed < rn->n)
        cs__fetch_out_of_memory(c, cs__part_topic(part), cs__part_number(part), rn->offsets[consumed],
                                "to track the offset");
    rn->n = 0;
}

/* One partition's share of a round: at most ROUND_RECORDS, no more than
 * max_open, the lanes' room and its quarter of the buffer allow. Returns false
 * if the lanes are full. */
static bool serve_part(cs_consumer *c, fetch_part *fp, run *rn) {
    cs_part *part = fp->part;
    const char *topic = cs__part_topic(part);
    rn->n = 0;
    rn->last = -1;
    rn->paused = false;
    size_t room = cs__pipeline_room(c->pipe, part);
    if (room == 0) {
        rn->paused = true; /* at max_open: it waits for a resume */
        return true;
    }
    /* Records wait here, in the budgeted store, rather than as deliveries in
     * the lanes; a worker wakes this thread. */
    size_t lanes = cs__pipeline_lanes_room(c->pipe);
    if (lanes == 0) return false;
    size_t max = ROUND_RECORDS;
    if (room < max) max = room;
    if (lanes < max) max = lanes;
    for (size_t i = 0; i < max && !cs__backlog_empty(&fp->backlog) && !c->errors.out_of_memory; i++) {
        if (cs__fetch_out_capped(c, fp)) {
            rn->paused = true; /* like max_open: no more this round */
            break;
        }
        cs_stored *r = cs__backlog_pop(&fp->backlog);
        if (!r->old_log) cs__topic_available(c, topic);
        /* A record below the position proves a restarted log whenever it was
         * queued; one above proves the same log only if it came after the
         * report. The records prepared before it go out first, in the old
         * epoch, so that the position counts them (a record of the new log
         * compared with a position short of the run would join the old epoch,
         * be refused as not increasing, and be lost). */
        if (cs__part_log_unknown(part)) {
            flush_run(c, fp, rn);
            if (c->errors.out_of_memory) { /* nothing more is handed out */
                cs__stored_release(r);
                break;
            }
            if (!r->old_log || r->offset < cs__part_next_offset(part))
                cs__errors_log_restart(c, part, topic, r->offset);
        }
        cs_delivery *d = prepare(c, fp, r);
        if (!d) break;
        rn->offsets[rn->n] = r->offset;
        rn->ds[rn->n++] = d;
    }
    flush_run(c, fp, rn);
    return true;
}

/* Auto: the position after `last`, the last record handed out, is stored
 * for librdkafka's auto commit. From librdkafka 2.1.0 with the partition's
 * leader epoch (rd_kafka_offsets_store), since an epoch-less stored position
 * compares lower than a committed one that has an epoch on 2.1.x-2.2.x and
 * librdkafka then skips the commit; rd_kafka_offset_store, which has no
 * epoch, is deprecated from 2.1.0 on. */
static void store_auto_position(cs_consumer *c, fetch_part *fp, int64_t last) {
    rd_kafka_resp_err_t err;
#if CS_RDKAFKA_HAS_EPOCHS
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_t *e = rd_kafka_topic_partition_list_add(l, fp->topic, fp->partition);
    e->offset = last + 1;
    if (fp->leader_epoch >= 0) rd_kafka_topic_partition_set_leader_epoch(e, fp->leader_epoch);
    err = rd_kafka_offsets_store(c->rk, l);
    if (!err) err = l->elems[0].err;
    rd_kafka_topic_partition_list_destroy(l);
#else
    err = rd_kafka_offset_store(fp->rkt, fp->partition, last); /* stores last + 1 */
#endif
    if (err)
        CS_LOG_DEBUG("offset not stored subscription=%s topic=%s partition=%d offset=%lld error=\"%s\"", c->sub->name,
                     fp->topic, (int)fp->partition, (long long)last, rd_kafka_err2str(err));
}

/* One round over the partitions with a backlog that are under max_open,
 * starting with a different one each time. Under Auto, the offset of the
 * last record handed out is stored (librdkafka's auto commit and its final
 * commit at unassign commit it): records still in the backlog are never
 * committed, and Auto's loss window stays the records handed out. Returns
 * true if some partition could take more right away. */
bool cs__fetch_hand_out(cs_consumer *c, int64_t now) {
    bool more = false;
    size_t n = c->fetch.n_parts;
    bool lanes_full = false;
    run rn; /* on the fetch thread's stack, reused partition after partition */
    for (size_t k = 0; k < n && !c->errors.out_of_memory && !lanes_full; k++) {
        fetch_part *fp = &c->fetch.parts[(c->handout.next_part + k) % n];
        if (cs__backlog_empty(&fp->backlog) || cs__fetch_app_paused(c, fp))
            continue; /* paused by the application: not served */
        lanes_full = !serve_part(c, fp, &rn);
        if (rn.last >= 0) cs__fetch_progressed(fp, now);
        if (!c->tracked && rn.last >= 0) store_auto_position(c, fp, rn.last);
        if (!cs__backlog_empty(&fp->backlog) && !rn.paused) more = true;
    }
    c->handout.next_part = n ? (c->handout.next_part + 1) % n : 0;
    return more && !lanes_full; /* full lanes: a worker wakes the poll */
}
