/** @file
 * cstream/record.h — a record as cstream publishes it: its topic, partition,
 * key, value and headers (cs_record), and where the cluster put it
 * (cs_published). No functions: the types that the publishing calls
 * (<cstream/publish.h>, cs_delivery_publish in <cstream/delivery.h>) and the
 * broker-neutral core share, so that code needing only the record does not
 * include a broker's header. <cstream/publish.h> includes it. */
#ifndef CSTREAM_RECORD_H
#define CSTREAM_RECORD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cs_delivery; /* <cstream/delivery.h> */

/** One header of a record to publish. */
typedef struct cs_header {
    const char *name;  /**< the header's name (not NULL) */
    const void *value; /**< NULL: a header with a null value */
    size_t len;        /**< bytes of value */
} cs_header;

/** A record to publish. Everything it points to is read during the call
 * only: the publishing calls copy the bytes. */
typedef struct cs_record {
    const char *topic;        /**< the topic (not NULL or empty) */
    int32_t partition;        /**< -1: the partitioner picks (by key) */
    const void *key;          /**< NULL: null key */
    size_t key_len;           /**< bytes of key */
    const void *value;        /**< NULL: null value (tombstone) */
    size_t value_len;         /**< bytes of value */
    const cs_header *headers; /**< n_headers headers, in order (NULL when none) */
    size_t n_headers;         /**< entries in headers */
    /** The delivery this record follows from (NULL: none). Its traceparent
     * (cs_delivery_traceparent), if it has one, is added as a `traceparent`
     * header, unless `headers` already has one (yours wins). The delivery must
     * still be held by the caller during the call (a handler's own, or a
     * pending one not settled yet); nothing of it is kept afterwards. */
    const struct cs_delivery *parent;
} cs_record;

/** Where the cluster put a published record. */
typedef struct cs_published {
    int32_t partition; /**< the partition it went to */
    int64_t offset;    /**< its offset there */
} cs_published;

#ifdef __cplusplus
}
#endif
#endif
