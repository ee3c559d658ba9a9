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
 * (cs_delivery_reply) carry it without being asked.
 *
 * The record and its result are <cstream/record.h>'s types (included here);
 * cs_delivery_publish, an output of a delivery under Transactional, is a call
 * on the delivery and is in <cstream/delivery.h> (included here too). */
#ifndef CSTREAM_PUBLISH_H
#define CSTREAM_PUBLISH_H

#include "cstream/export.h"

#include <stddef.h>
#include <stdint.h>

#include "cstream/delivery.h"
#include "cstream/kafka.h"
#include "cstream/record.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif
