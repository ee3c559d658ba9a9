/* commit_request.c — what a commit request is built from, shared by the
 * committer (Tracked, Transactional: committer.c) and the database window
 * (database_window.c): a partition's state as an entry (position, metadata,
 * the leader epoch it was read under), the warning for an acked set cut to
 * fit, and the positions that may pass transaction markers.
 *
 * Owns: nothing (the lists are the caller's; the truncation warning's rate
 * limit is c's). Locks: none of its own; cs__part_pass_to takes the
 * partition lock. Threads: the fetch thread, or the closing thread after it
 * exited; cs__commit_note_truncation and cs__commit_add_entry also a worker's
 * precommit. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/consumer/consumer_internal.h"

/* The acked set of a state about to be committed did not all fit in the
 * metadata (counted where it was encoded): one line now and then says how
 * far it reaches. */
void cs__commit_note_truncation(cs_consumer *c, const cs_commit_state *s) {
    uint64_t skipped = 0;
    if (s->truncated && cs__ratelimit_allow(&c->truncation_warning, 10000, &skipped))
        CS_LOG_WARN("acked set truncated to fit the commit metadata: records settled past its reach are read again "
                    "after a crash subscription=%s topic=%s partition=%d position=%lld reach=%llu wanted=%llu "
                    "similar_since_last=%llu",
                    c->sub->name, s->topic, (int)s->partition, (long long)s->pos, (unsigned long long)s->reach,
                    (unsigned long long)s->wanted, (unsigned long long)skipped);
}

/* Adds a partition's state to a commit request: its position and metadata. */
rd_kafka_topic_partition_t *cs__commit_add_entry(rd_kafka_topic_partition_list_t *l, const cs_commit_state *s) {
    rd_kafka_topic_partition_t *e = rd_kafka_topic_partition_list_add(l, s->topic, s->partition);
    e->offset = s->pos;
    e->metadata = strdup(s->meta); /* freed with the list */
    /* Out of memory: committed without attempt counts; the position still moves. */
    e->metadata_size = e->metadata ? strlen(s->meta) : 0;
    return e;
}

/* The same on the fetch thread, with the leader epoch the partition was
 * read under (cs__fetch_mark_epoch reads the fetch thread's own table). */
void cs__commit_add_state(cs_consumer *c, rd_kafka_topic_partition_list_t *l, const cs_commit_state *s) {
    cs__commit_note_truncation(c, s);
    cs__fetch_mark_epoch(c, s->part, cs__commit_add_entry(l, s));
}

/* ---- transaction markers ------------------------------------------------------
 * librdkafka never hands out a transaction's control record (its commit or
 * abort marker, after the transaction's records in each partition it wrote):
 * serving it only moves librdkafka's own position (rd_kafka_position, the
 * offset after the last record or marker served). A log written in
 * transactions ends with a marker, so a position taken from the last record
 * handled stops on that marker, one short of the log's end, for good: the
 * group's lag never reaches 0 (issue #30, tests/real/test_lag.c).
 *
 * Where the fetch thread kept everything librdkafka served of a partition
 * (not paused, shedding, withheld or moving back: take_cb drops records
 * there) and nothing of it waits in its backlog, the offsets from `next` (the
 * one after the last record taken) up to librdkafka's position were served
 * and not taken: markers (aborted records are skipped before they are
 * served). The partition may then commit up to that position once nothing of
 * it is open (cs__part_pass_to). A seek makes librdkafka forget its position
 * until it serves again, so a stale one is never read. Fetch thread (or the
 * closing thread after it exited): no take runs meanwhile. */
void cs__commit_pass_markers(cs_consumer *c) {
    /* After an out-of-memory or fatal stop inside a take, librdkafka's
     * position may already count a record take_cb could not store: it is
     * no marker, and must be read again. */
    if (!c->tracked || c->fetch.n_parts == 0 || c->errors.out_of_memory || c->take.fatal) return;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)c->fetch.n_parts);
    size_t *which = malloc(c->fetch.n_parts * sizeof *which);
    if (!which) { /* out of memory: the position stays on the marker until the next commit */
        rd_kafka_topic_partition_list_destroy(l);
        return;
    }
    for (size_t i = 0; i < c->fetch.n_parts; i++) {
        fetch_part *fp = &c->fetch.parts[i];
        /* (A partition whose log is unknown ignores cs__part_pass_to.) */
        if (fp->paused || fp->shed || fp->withheld || fp->back_to >= 0 || !cs__backlog_empty(&fp->backlog) ||
            cs__fetch_app_paused(c, fp))
            continue;
        which[l->cnt] = i;
        rd_kafka_topic_partition_list_add(l, fp->topic, fp->partition);
    }
    if (l->cnt > 0 && rd_kafka_position(c->rk, l) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int j = 0; j < l->cnt; j++) {
            const rd_kafka_topic_partition_t *e = &l->elems[j];
            const fetch_part *fp = &c->fetch.parts[which[j]];
            /* A negative offset: nothing served since the assignment or the last seek. */
            if (e->err || e->offset < 0 || (fp->next >= 0 && e->offset <= fp->next)) continue;
            cs__part_pass_to(fp->part, e->offset);
        }
    }
    free(which);
    rd_kafka_topic_partition_list_destroy(l);
}
