/* source.h — the small interface through which a broker (Kafka) plugs records
 * into the generic core. The core never sees librdkafka: it holds an opaque
 * `msg` per delivery and asks the source for headers and to release it.
 *
 * Owns: declares cs_source_ops; the source provides a constant table
 * (store.c: cs__stored_ops) and each partition borrows a pointer to it.
 * Locks: none. Threads: release on any thread; the header calls on whichever
 * thread reads the delivery (the fetch thread at fetch, then the handler's). */
#ifndef CS_CORE_SOURCE_H
#define CS_CORE_SOURCE_H

#include <stddef.h>

typedef struct cs_source_ops {
    /* Frees the broker's record. Called exactly once per record, from any thread. */
    void (*release)(void *msg);
    size_t (*header_count)(void *msg);
    /* 0 on success, -1 past the end. */
    int (*header_at)(void *msg, size_t idx, const char **name, const void **value, size_t *len);
} cs_source_ops;

#endif
