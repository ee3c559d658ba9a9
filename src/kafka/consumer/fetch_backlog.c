/* fetch_backlog.c — a partition's backlog (fetch_backlog.h): the one place
 * its queue and its bytes change. Fetch thread only.
 *
 * Owns: a backlog's queue links and byte count (the records are the store's).
 * Locks: none. Threads: the fetch thread only. */
#include "kafka/consumer/fetch_backlog.h"

void cs__backlog_push(fetch_backlog *b, cs_stored *r) {
    CS_STAILQ_INSERT_TAIL(&b->records, r, next);
    b->bytes += cs__stored_size(r);
}

cs_stored *cs__backlog_pop(fetch_backlog *b) {
    cs_stored *r = CS_STAILQ_FIRST(&b->records);
    if (!r) return NULL;
    CS_STAILQ_REMOVE_HEAD(&b->records, next);
    r->next = NULL;
    b->bytes -= cs__stored_size(r);
    return r;
}

static void release_all(cs_stored *first) {
    for (cs_stored *r = first, *next; r; r = next) {
        next = r->next;
        cs__stored_release(r);
    }
}

void cs__backlog_drop(fetch_backlog *b) {
    release_all(CS_STAILQ_FIRST(&b->records));
    CS_STAILQ_INIT(&b->records);
    b->bytes = 0;
}

int64_t cs__backlog_trim(fetch_backlog *b, size_t share) {
    cs_stored *keep_last = NULL, *r;
    size_t bytes = 0;
    CS_STAILQ_FOREACH(r, &b->records, next) {
        if (bytes + cs__stored_size(r) > share) break;
        bytes += cs__stored_size(r);
        keep_last = r;
    }
    if (!r) return -1; /* every record fits */
    fetch_backlog dropped = {0};
    CS_STAILQ_CUT_AFTER(&b->records, keep_last, &dropped.records, next);
    b->bytes = bytes;
    int64_t first = CS_STAILQ_FIRST(&dropped.records)->offset;
    release_all(CS_STAILQ_FIRST(&dropped.records));
    return first;
}

void cs__backlog_mark_old_log(fetch_backlog *b) {
    cs_stored *r;
    CS_STAILQ_FOREACH(r, &b->records, next) r->old_log = true;
}
