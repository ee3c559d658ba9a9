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
 * Typed publishes (cs_publish_encoded and its twins) encode a struct with a
 * codec first, and publish nothing when it does not encode.
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

/* ---- typed publishes ------------------------------------------------------ */

/** Blocking typed publish: encodes `value` with `codec` as `type`, then
 * publishes it like cs_publish with the raw `key` (partition chosen by the
 * partitioner, no headers). A registry-backed codec
 * (cs_codec_avro_registry_new()) registers or looks up its schema under its
 * own subject on its first encode of `type` (then cached: no request per
 * record) and writes the Confluent wire format; the topic its subject names
 * is the one given to the codec, not `topic`. If the value does not encode,
 * nothing is published.
 *
 * Any thread, handlers included, while the app runs (as cs_publish).
 * @param k the broker whose producer publishes.
 * @param topic the topic (read during the call only).
 * @param key the key bytes (copied); NULL: a null key.
 * @param key_len bytes of key.
 * @param codec the value's codec, e.g. &cs_codec_json.
 * @param type the type of `value`.
 * @param value the struct to encode (read during the call only).
 * @param out receives where the record went; may be NULL.
 * @retval CS_OK the cluster accepted the record.
 * @retval CS_ERR_ENCODE the value does not encode, or the registry refused
 *         its schema (incompatible, invalid): nothing was published;
 *         cs_errmsg() names the topic and the field or the subject.
 * @retval CS_ERR_UNAVAILABLE the codec's schema registry cannot be reached
 *         now (unreachable, 5xx, refused credentials): nothing was
 *         published; try again later.
 * @retval CS_ERR_ARG a NULL argument, an empty topic, or an invalid table.
 * @retval CS_ERR_STATE, CS_ERR_TIMEOUT, CS_ERR_KAFKA, CS_ERR_NOMEM as
 *         cs_publish. */
CS_API cs_err cs_publish_encoded(cs_kafka *k, const char *topic, const void *key, size_t key_len, const cs_codec *codec,
                                 const cs_type *type, const void *value, cs_published *out);

/** Asynchronous typed publish: encodes like cs_publish_encoded, then queues
 * like cs_publish_async; `done` gets the delivery report. An encoding
 * failure is returned here and `done` never runs.
 *
 * Any thread, handlers included, while the app runs.
 * @param k the broker whose producer publishes.
 * @param topic the topic (read during the call only).
 * @param key the key bytes (copied); NULL: a null key.
 * @param key_len bytes of key.
 * @param codec the value's codec.
 * @param type the type of `value`.
 * @param value the struct to encode (read during the call only).
 * @param done the completion, see cs_publish_fn (not NULL).
 * @param opaque passed to done; cstream never reads or frees it.
 * @retval CS_OK queued: `done` will run exactly once.
 * @retval CS_ERR_ENCODE, CS_ERR_UNAVAILABLE, CS_ERR_ARG as
 *         cs_publish_encoded: nothing was queued.
 * @retval CS_ERR_STATE, CS_ERR_TIMEOUT, CS_ERR_KAFKA, CS_ERR_NOMEM as
 *         cs_publish_async. */
CS_API cs_err cs_publish_encoded_async(cs_kafka *k, const char *topic, const void *key, size_t key_len,
                                       const cs_codec *codec, const cs_type *type, const void *value,
                                       cs_publish_fn done, void *opaque);

/** Blocking typed publish with a typed key: encodes `key` with `key_codec`
 * as `key_type` and `value` with `codec` as `type`, then publishes like
 * cs_publish_encoded. A registry-backed key codec is one made with
 * cs_registry_subject_opts.key set: it registers its schema under the
 * "<topic>-key" subject (TopicName). If either does not encode, nothing is
 * published; cs_errmsg() says whether the key or the value failed.
 *
 * Any thread, handlers included, while the app runs.
 * @param k the broker whose producer publishes.
 * @param topic the topic (read during the call only).
 * @param key_codec the key's codec.
 * @param key_type the type of `key`.
 * @param key the key struct to encode (read during the call only).
 * @param codec the value's codec.
 * @param type the type of `value`.
 * @param value the struct to encode (read during the call only).
 * @param out receives where the record went; may be NULL.
 * @return as cs_publish_encoded. */
CS_API cs_err cs_publish_encoded_with_key(cs_kafka *k, const char *topic, const cs_codec *key_codec,
                                          const cs_type *key_type, const void *key, const cs_codec *codec,
                                          const cs_type *type, const void *value, cs_published *out);

#ifdef __cplusplus
}
#endif
#endif
