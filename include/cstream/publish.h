/** @file
 * cstream/publish.h — publishing records through a broker's producer.
 *
 * cs_publish returns only after the cluster's delivery report: CS_OK means
 * Kafka accepted the record. While librdkafka's local queue is full it waits
 * for space, at most the queue timeout (cs_kafka_queue_timeout_ms), then fails
 * with CS_ERR_TIMEOUT. Callable from any thread, handlers included, while the
 * app runs.
 *
 * Trace context: a handler that publishes on behalf of its delivery sets
 * `.parent = d` in the record, and the record carries the delivery's W3C
 * traceparent header. This is explicit rather than taken from "the delivery
 * this thread is handling": pending deliveries are settled from other
 * threads, a batch handler holds many deliveries, and a publish that is not
 * part of the delivery's work should not claim its trace. Replies
 * (cs_delivery_reply) carry it without being asked. */
#ifndef CSTREAM_PUBLISH_H
#define CSTREAM_PUBLISH_H

#include "cstream/export.h"

#include <stddef.h>
#include <stdint.h>

#include "cstream/delivery.h"
#include "cstream/kafka.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    const cs_delivery *parent;
} cs_record;

/** Where the cluster put a published record. */
typedef struct cs_published {
    int32_t partition; /**< the partition it went to */
    int64_t offset;    /**< its offset there */
} cs_published;

/** Blocking publish; `out` may be NULL. The record's bytes are copied.
 *
 * Any thread, handlers included, while the app runs (not from the start-up
 * hook: the producer starts after it).
 * @param k the broker whose producer publishes.
 * @param rec the record.
 * @param out receives where the record went; may be NULL.
 * @retval CS_OK the cluster accepted the record.
 * @retval CS_ERR_ARG k or rec is NULL, the topic is empty, or a header has no name.
 * @retval CS_ERR_STATE the app is not running (before start, or after the stop
 *         took the producer out of service).
 * @retval CS_ERR_TIMEOUT the local queue stayed full for the queue timeout.
 * @retval CS_ERR_KAFKA librdkafka refused or failed the record (also when a
 *         stop purged it); cs_errmsg() has its reason.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_publish(cs_kafka *k, const cs_record *rec, cs_published *out);

/** Completion of an asynchronous publish, called on the producer's delivery
 * report thread (or, during the stop's flush, on the stopping thread): `where` is NULL and err != CS_OK (cs_errmsg() has the reason)
 * if the record was not delivered. Keep it short; never block in it.
 * @param where where the record went, valid during the call only; or NULL.
 * @param err CS_OK, or CS_ERR_KAFKA when it was not delivered.
 * @param opaque the pointer given to cs_publish_async. */
typedef void (*cs_publish_fn)(const cs_published *where, cs_err err, void *opaque);
/** Asynchronous publish: returns once the record is queued (waiting for queue
 * space at most the queue timeout); `done` gets the delivery report.
 *
 * Any thread, handlers included, while the app runs. `done` runs exactly once
 * if this returns CS_OK, never otherwise.
 * @param k the broker whose producer publishes.
 * @param rec the record (copied).
 * @param done the completion, see cs_publish_fn (not NULL).
 * @param opaque passed to done; cstream never reads or frees it.
 * @retval CS_OK queued.
 * @retval CS_ERR_ARG k, rec or done is NULL, the topic is empty, or a header
 *         has no name.
 * @retval CS_ERR_STATE the app is not running.
 * @retval CS_ERR_TIMEOUT the local queue stayed full for the queue timeout.
 * @retval CS_ERR_KAFKA librdkafka refused the record; cs_errmsg() has its reason.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_publish_async(cs_kafka *k, const cs_record *rec, cs_publish_fn done, void *opaque);

/** An output of delivery d on a Transactional subscription: the record is
 * copied now and joins d's window when d is acked or dropped (a retry
 * discards it with the attempt); it becomes visible to read_committed
 * consumers exactly once, in the transaction that commits past d. Call it
 * from the handler (or before settling a pending delivery). The topic must
 * be declared with cs_kafka_topic (it is checked at start-up, so a typo
 * cannot abort every window). The output follows from d: it carries d's
 * traceparent unless the record sets its own header (or another .parent).
 * CS_ERR_STATE on other commit modes: use cs_publish or cs_publish_async
 * there.
 *
 * Called by whoever holds d (see <cstream/delivery.h>).
 * @param d the delivery the output belongs to.
 * @param rec the record (copied).
 * @retval CS_OK staged in d's current attempt.
 * @retval CS_ERR_ARG d or rec is NULL, the topic is empty or not declared, or
 *         a header has no name.
 * @retval CS_ERR_STATE d's subscription is not Transactional (or it closed).
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_delivery_publish(cs_delivery *d, const cs_record *rec);

#ifdef __cplusplus
}
#endif
#endif
