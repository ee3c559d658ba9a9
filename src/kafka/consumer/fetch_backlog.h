/* fetch_backlog.h — a partition's backlog: the records the fetch thread took
 * from librdkafka and has not handed out yet, in offset order, with their
 * bytes (a partition's share of the fetch buffer is counted in them). The
 * only code that changes a backlog is fetch_backlog.c.
 *
 * Owns: the queue's links and its bytes. The records belong to the store
 * (core/store.h): one taken off with cs__backlog_pop is the caller's to hand
 * out or release; the ones dropped here are released here.
 * Locks: none. Threads: the fetch thread only. */
#ifndef CS_KAFKA_CONSUMER_FETCH_BACKLOG_H
#define CS_KAFKA_CONSUMER_FETCH_BACKLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/list.h"
#include "core/store.h"

typedef struct fetch_backlog {
    CS_STAILQ(cs_stored) records; /* linked through cs_stored.next */
    size_t bytes;
} fetch_backlog;

/* Appends r, the record after the last one. */
void cs__backlog_push(fetch_backlog *b, cs_stored *r);
/* Takes the first record off (the caller's now); NULL when empty. */
cs_stored *cs__backlog_pop(fetch_backlog *b);
/* Releases every record: the backlog is empty after it. */
void cs__backlog_drop(fetch_backlog *b);
/* Keeps the first records that fit in `share` bytes and releases the rest;
 * returns the offset of the first released, -1 if all fit. */
int64_t cs__backlog_trim(fetch_backlog *b, size_t share);
/* Marks every record as fetched from the log before a restart (old_log). */
void cs__backlog_mark_old_log(fetch_backlog *b);

static inline bool cs__backlog_empty(const fetch_backlog *b) { return CS_STAILQ_EMPTY(&b->records); }
static inline size_t cs__backlog_bytes(const fetch_backlog *b) { return b->bytes; }
/* The offset of the first record, -1 when empty. */
static inline int64_t cs__backlog_first_offset(const fetch_backlog *b) {
    return CS_STAILQ_EMPTY(&b->records) ? -1 : CS_STAILQ_FIRST(&b->records)->offset;
}

#endif
