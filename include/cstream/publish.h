/* cstream/publish.h — publishing records through a broker's producer.
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

typedef struct cs_header {
    const char *name;
    const void *value; /* NULL: a header with a null value */
    size_t len;
} cs_header;

typedef struct cs_record {
    const char *topic;
    int32_t partition; /* -1: the partitioner picks (by key) */
    const void *key;   /* NULL: null key */
    size_t key_len;
    const void *value; /* NULL: null value (tombstone) */
    size_t value_len;
    const cs_header *headers;
    size_t n_headers;
    /* The delivery this record follows from (NULL: none). Its traceparent
     * (cs_delivery_traceparent), if it has one, is added as a `traceparent`
     * header, unless `headers` already has one (yours wins). The delivery must
     * still be held by the caller during the call (a handler's own, or a
     * pending one not settled yet); nothing of it is kept afterwards. */
    const cs_delivery *parent;
} cs_record;

/* Where the cluster put a published record. */
typedef struct cs_published {
    int32_t partition;
    int64_t offset;
} cs_published;

/* Blocking publish; `out` may be NULL. The record's bytes are copied. */
CS_API cs_err cs_publish(cs_kafka *k, const cs_record *rec, cs_published *out);

/* Completion of an asynchronous publish, called on the producer's delivery
 * report thread (or, during the stop's flush, on the stopping thread): `where` is NULL and err != CS_OK (cs_errmsg() has the reason)
 * if the record was not delivered. Keep it short; never block in it. */
typedef void (*cs_publish_fn)(const cs_published *where, cs_err err, void *opaque);
/* Asynchronous publish: returns once the record is queued (waiting for queue
 * space at most the queue timeout); `done` gets the delivery report. */
CS_API cs_err cs_publish_async(cs_kafka *k, const cs_record *rec, cs_publish_fn done, void *opaque);

/* An output of delivery d on a Transactional subscription: the record is
 * copied now and joins d's window when d is acked or dropped (a retry
 * discards it with the attempt); it becomes visible to read_committed
 * consumers exactly once, in the transaction that commits past d. Call it
 * from the handler (or before settling a pending delivery). The topic must
 * be declared with cs_kafka_topic (it is checked at start-up, so a typo
 * cannot abort every window). The output follows from d: it carries d's
 * traceparent unless the record sets its own header (or another .parent).
 * CS_ERR_STATE on other commit modes: use cs_publish or cs_publish_async
 * there. */
CS_API cs_err cs_delivery_publish(cs_delivery *d, const cs_record *rec);

/* How long the graceful stop waits for the producer to deliver what it holds
 * (default 30000 ms). */
CS_API cs_err cs_kafka_flush_timeout_ms(cs_kafka *k, int ms);
/* After the app stopped: records the producer still held when the flush
 * timeout ran out (they were not delivered). */
CS_API size_t cs_kafka_unflushed_records(const cs_kafka *k);

/* How long a publish waits for space in librdkafka's local queue (default 5000 ms). */
CS_API cs_err cs_kafka_queue_timeout_ms(cs_kafka *k, int ms);

#ifdef __cplusplus
}
#endif
#endif
