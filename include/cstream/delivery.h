/** @file
 * cstream/delivery.h — one record handed to a handler, and how it is settled.
 *
 * A cs_delivery is borrowed: the handler may read it until it returns an
 * outcome. A handler that returns CS_PENDING keeps the delivery and settles it
 * later, from any thread, with cs_delivery_settle(); after that call the
 * delivery is gone. Pointers returned by the accessors live as long as the
 * delivery, a pending one included: its record is cstream's own copy (the
 * fetch buffer), not librdkafka's, so a delivery still pending when the app
 * stops or its partition is revoked keeps its key, value and headers until
 * it is settled (settling it then returns CS_ERR_STALE).
 *
 * Threads: whoever holds a delivery may call its functions (the handler, or
 * any thread once the handler returned CS_PENDING), one thread at a time: a
 * delivery has no lock of its own. */
#ifndef CSTREAM_DELIVERY_H
#define CSTREAM_DELIVERY_H

#include "cstream/export.h"

#include <stddef.h>
#include <stdint.h>

#include "cstream/codec.h"
#include "cstream/error.h"
#include "cstream/record.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One record handed to a handler (opaque, borrowed: see above). */
typedef struct cs_delivery cs_delivery;

/** What a handler says about a record.
 *
 * CS_UNSET comes last so that the values above keep their numbers (a binary
 * built against an older header still means the same outcomes). */
typedef enum cs_outcome {
    CS_ACK = 0, /**< handled */
    CS_DROP,    /**< not handled, on purpose: settles like ack */
    CS_RETRY,   /**< hand it to me again (Tracked); unsupported under Auto */
    CS_PENDING, /**< I keep the delivery and settle it later */
    CS_EACH,    /**< batch handlers only: `outcomes` holds one outcome per element */
    CS_UNSET,   /**< batch handlers only: what outcomes[i] holds until the handler sets it */
} cs_outcome;

/** Handler for one record. `user` is the pointer given at subscribe.
 *
 * Runs on one of the subscription's worker threads (cs_sub_workers); a
 * handler that blocks holds up its lane.
 * @param d the record, borrowed until the handler returns (or, for
 *        CS_PENDING, until cs_delivery_settle).
 * @param user the pointer given to cs_kafka_subscribe.
 * @return the record's outcome: CS_ACK, CS_DROP, CS_RETRY (or
 *         cs_delivery_retry_after), or CS_PENDING. */
typedef cs_outcome (*cs_handler_fn)(cs_delivery *d, void *user);

/** Handler for a batch: one delivery plus what was already queued behind it in
 * its lane (never waiting for more), at most the size given at subscribe, in
 * fetch order. Return one outcome for all elements (outcomes[] is then not
 * read), or CS_EACH after setting outcomes[i] for each element. CS_PENDING is
 * allowed per element. Under Tracked an element that asks for a retry comes
 * back in a batch of its own, and the committed position stops in front of it.
 *
 * outcomes[i] starts as CS_UNSET. An element still CS_UNSET when the handler
 * returns CS_EACH (or every element, if it returns CS_UNSET) was settled by
 * nobody: it is a handler bug, logged (at most one line per 5 s, naming the
 * topic, partition and offset) and treated as a retry. Under Tracked it comes
 * back alone and counts as an attempt (max_attempts applies); under
 * Transactional it holds its window as any retry does (the stall timeout
 * applies); under Auto it is reported like any Auto retry
 * (retry_unsupported) and does not come back.
 *
 * Any other outcome that is none of CS_ACK, CS_DROP, CS_RETRY and CS_PENDING
 * (CS_EACH in outcomes[i], CS_UNSET or CS_EACH from a record handler, a value
 * outside the enum) is the same handler bug and is treated the same way: an
 * ERROR line ("invalid outcome", sharing the 5 s limit) and a retry whose
 * reason, unless the handler set one, is "invalid outcome". Like any retry it
 * counts toward max_attempts (then the dead-letter topic), and in a batch it
 * comes back in fetch order with the element's other retries.
 *
 * Runs on a worker thread, like cs_handler_fn.
 * @param batch the deliveries, each borrowed like a record handler's.
 * @param n how many (1 to the subscription's max_batch).
 * @param outcomes n slots, each CS_UNSET on entry, read only when the handler
 *        returns CS_EACH; valid until the handler returns.
 * @param user the pointer given to cs_kafka_subscribe_batch.
 * @return one outcome for every element, or CS_EACH. */
typedef cs_outcome (*cs_batch_fn)(cs_delivery *const *batch, size_t n, cs_outcome *outcomes, void *user);

/** The record's topic.
 * @param d the delivery.
 * @return the topic name, owned by cstream: valid as long as the delivery
 *         (until it is settled), also for a pending delivery after a stop. */
CS_API const char *cs_delivery_topic(const cs_delivery *d);
/** The record's partition.
 * @param d the delivery.
 * @return the partition number. */
CS_API int32_t cs_delivery_partition(const cs_delivery *d);
/** The record's offset in its partition.
 * @param d the delivery.
 * @return the offset. */
CS_API int64_t cs_delivery_offset(const cs_delivery *d);
/** Record timestamp in ms since the epoch, -1 if the record has none.
 * @param d the delivery.
 * @return the timestamp, or -1. */
CS_API int64_t cs_delivery_timestamp(const cs_delivery *d);
/** Key bytes; NULL (and *len 0) for a null key.
 * @param d the delivery.
 * @param len receives the key's length; may be NULL.
 * @return the key, borrowed from the delivery: valid as long as the delivery,
 *         except that a stop releases a pending delivery's payload (then NULL). */
CS_API const void *cs_delivery_key(const cs_delivery *d, size_t *len);
/** Value bytes; NULL (and *len 0) for a null value (tombstone).
 * @param d the delivery.
 * @param len receives the value's length; may be NULL.
 * @return the value, borrowed like cs_delivery_key's. */
CS_API const void *cs_delivery_value(const cs_delivery *d, size_t *len);
/** Headers in record order: how many the record has.
 * @param d the delivery.
 * @return the number of headers (0 once a stop released a pending delivery's
 *         payload). */
CS_API size_t cs_delivery_header_count(const cs_delivery *d);
/** Header `idx` in record order. cs_delivery_header returns CS_ERR_ARG past the end;
 * a header with a null value gives *value NULL and *len 0. The name and value
 * are borrowed like cs_delivery_key's result.
 * @param d the delivery.
 * @param idx 0 to cs_delivery_header_count() - 1.
 * @param name receives the header's name; may be NULL.
 * @param value receives its value; may be NULL.
 * @param len receives the value's length; may be NULL.
 * @retval CS_OK the header is in *name, *value and *len.
 * @retval CS_ERR_ARG idx is past the end; cs_errmsg() names the record. */
CS_API cs_err cs_delivery_header(const cs_delivery *d, size_t idx, const char **name, const void **value, size_t *len);
/** Last header named `name`; CS_ERR_ARG if there is none.
 * @param d the delivery.
 * @param name the header name to look for.
 * @param value receives its value (borrowed like cs_delivery_key's); may be NULL.
 * @param len receives the value's length; may be NULL.
 * @retval CS_OK found.
 * @retval CS_ERR_ARG no such header (or name is NULL); cs_errmsg() names it
 *         and the record. */
CS_API cs_err cs_delivery_header_get(const cs_delivery *d, const char *name, const void **value, size_t *len);
/** How many times the handler has run for this record, this one included (1 = first).
 *
 * Under Tracked the count continues what earlier owners committed with their
 * positions, so after a restart or a rebalance it can start above 1 (see
 * docs/retries.md); under Auto it is always 1. Runs that retried after an
 * encode found the schema registry unavailable are counted here but not
 * against cs_sub_max_attempts (see cs_delivery_reply_encoded); an owner
 * after a restart or rebalance continues from the counted runs.
 * @param d the delivery.
 * @return the attempt number. */
CS_API int cs_delivery_attempt(const cs_delivery *d);

/** The record's W3C trace context: its `traceparent` header (the last one if
 * there are several) when that is a valid version-traceid-parentid-flags value
 * (55 characters, lowercase hex, version not ff, trace id and parent id not
 * all zero), else NULL: an invalid value counts as absent. Borrowed; unlike
 * the payload it stays readable for a pending delivery after a stop. The same
 * header goes, unchanged, onto the delivery's reply and onto records published
 * with cs_record.parent set to this delivery; log lines about the delivery
 * carry its trace id (trace_id=).
 * @param d the delivery (NULL gives NULL).
 * @return the 55-character NUL-terminated header value, owned by the delivery
 *         and valid until it is settled; or NULL. */
CS_API const char *cs_delivery_traceparent(const cs_delivery *d);

/** Sets the reply published when this delivery is acked (the subscription needs
 * cs_sub_reply). Key and value are copied; either may be NULL. The reply
 * carries the delivery's traceparent header, if it has one.
 *
 * A later call replaces the reply; the reply belongs to the current attempt
 * (a retried record starts its next attempt without one). Without
 * cs_sub_reply nothing is published.
 * @param d the delivery.
 * @param key the reply's key (NULL: a null key).
 * @param key_len its length.
 * @param value the reply's value (NULL: a null value).
 * @param value_len its length.
 * @retval CS_OK the reply is set.
 * @retval CS_ERR_ARG d is NULL.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_delivery_reply(cs_delivery *d, const void *key, size_t key_len, const void *value, size_t value_len);

/** Why the handler drops or retries this record (printf-style); it goes into
 * the dead-letter record's cstream.dlq.reason header and the logs. It belongs
 * to the current attempt.
 *
 * The text is copied (at most 511 bytes) and replaces an earlier reason.
 * @param d the delivery.
 * @param fmt printf format of the reason.
 * @param ... its arguments.
 * @retval CS_OK the reason is set.
 * @retval CS_ERR_ARG d or fmt is NULL.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_delivery_set_reason(cs_delivery *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** The reason set on this attempt, or NULL.
 * @param d the delivery.
 * @return the reason, owned by the delivery: valid until the next
 *         cs_delivery_set_reason on it, the end of the attempt, or the
 *         settlement, whichever comes first; copy it to keep it. */
CS_API const char *cs_delivery_reason(const cs_delivery *d);

/** A retry that comes back after `delay_ms` (Tracked): return it from the
 * handler (or pass it to cs_delivery_settle). The lane keeps running other
 * records meanwhile, so later records of the same lane may run before the
 * delayed one comes back (per-key order does not hold across a retry_after);
 * its offset stays open, so the committed position waits for it. A stop
 * during the delay leaves it uncommitted: it is read again after a restart.
 * @param d the delivery.
 * @param delay_ms how long to wait; 0 or less means at once.
 * @return CS_RETRY, carrying the delay on d. */
CS_API cs_outcome cs_delivery_retry_after(cs_delivery *d, int delay_ms);

/** The decoded value of a subscription with cs_sub_decode (NULL otherwise);
 * it lives as long as the delivery.
 * @param d the delivery.
 * @return a pointer to the struct of the subscription's type (for the
 *         Protobuf codec, the generated message), owned by the delivery
 *         (cstream frees it and what it holds with cs_codec_free_value; do
 *         not free it yourself). */
CS_API const void *cs_delivery_decoded(const cs_delivery *d);
/** The decoded key of a subscription with cs_sub_decode_key (NULL otherwise,
 * and for a NULL d); it lives as long as the delivery.
 * @param d the delivery.
 * @return a pointer to the struct of the subscription's key type, owned by
 *         the delivery (cstream frees it with cs_codec_free_value; do not
 *         free it yourself). */
CS_API const void *cs_delivery_decoded_key(const cs_delivery *d);
/** Sets the reply to `value` encoded with `codec` as `type`.
 *
 * Like cs_delivery_reply with a null key and the encoded bytes as value.
 *
 * A registry-backed codec whose registry does not answer (unreachable, 5xx,
 * 429, or credentials refused) returns CS_ERR_UNAVAILABLE. If the run then
 * ends in a retry (CS_RETRY, or cs_delivery_retry_after), under Tracked and
 * Transactional it takes nothing from cs_sub_max_attempts, whatever the
 * handler's reason, so an outage never dead-letters the record (and, under
 * Transactional, never aborts its window); after a plain CS_RETRY the record
 * waits in place, at the head of its lane, with a back-off (100 ms doubling
 * to 5 s) before it runs again. The same holds for
 * cs_delivery_publish_encoded.
 * @param d the delivery.
 * @param codec the codec, e.g. &cs_codec_json.
 * @param type the type of `value`.
 * @param value the struct to encode (read only during the call).
 * @retval CS_OK the reply is set.
 * @retval CS_ERR_ENCODE the value does not encode (cs_errmsg() names the
 *         field).
 * @retval CS_ERR_UNAVAILABLE the codec's schema registry cannot be reached
 *         (see above).
 * @retval CS_ERR_ARG an argument is NULL.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_delivery_reply_encoded(cs_delivery *d, const cs_codec *codec, const cs_type *type, const void *value);

/** Settles a delivery the handler returned CS_PENDING for (any thread).
 * CS_ERR_STALE if its partition was revoked or the subscription closed in the
 * meantime: the settlement is ignored and the record will be read again by
 * whoever owns the partition. The delivery is released either way.
 *
 * Any thread, once per pending delivery; d must not be used after it
 * returns CS_OK or CS_ERR_STALE.
 * @param d a delivery its handler returned CS_PENDING for.
 * @param outcome CS_ACK, CS_DROP or CS_RETRY (cs_delivery_retry_after's result too).
 * @retval CS_OK settled (a retry comes back; a reply is published if set).
 * @retval CS_ERR_STALE ignored, see above; d is released.
 * @retval CS_ERR_ARG d is NULL or outcome is none of the three; nothing
 *         happened and d is still the caller's. */
CS_API cs_err cs_delivery_settle(cs_delivery *d, cs_outcome outcome);

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
 * Called by whoever holds d (see above).
 * @param d the delivery the output belongs to.
 * @param rec the record (copied).
 * @retval CS_OK staged in d's current attempt.
 * @retval CS_ERR_ARG d or rec is NULL, the topic is empty or not declared, or
 *         a header has no name.
 * @retval CS_ERR_STATE d's subscription is not Transactional (or it closed).
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_delivery_publish(cs_delivery *d, const cs_record *rec);

/** cs_delivery_publish of a typed value: encodes `value` with `codec` as
 * `type` and stages it as an output of d (Transactional), with the raw
 * `key`. Typed publishes on the other commit modes are cs_publish_encoded
 * (<cstream/publish.h>). If the value does not encode nothing is staged.
 *
 * Called by whoever holds d, like cs_delivery_publish.
 * @param d the delivery the output belongs to.
 * @param topic the topic, declared with cs_kafka_topic (read during the call).
 * @param key the key bytes (copied); NULL: a null key.
 * @param key_len bytes of key.
 * @param codec the codec (a registry-backed one registers its schema on its
 *        first encode of `type`).
 * @param type the type of `value`.
 * @param value the struct to encode (read during the call only).
 * @retval CS_OK staged in d's current attempt.
 * @retval CS_ERR_ENCODE the value does not encode or the registry refused
 *         its schema; cs_errmsg() names the topic and the field or subject.
 * @retval CS_ERR_UNAVAILABLE the codec's schema registry cannot be reached;
 *         a retry of this run takes no attempt (as for
 *         cs_delivery_reply_encoded).
 * @retval CS_ERR_ARG, CS_ERR_STATE, CS_ERR_NOMEM as cs_delivery_publish. */
CS_API cs_err cs_delivery_publish_encoded(cs_delivery *d, const char *topic, const void *key, size_t key_len,
                                          const cs_codec *codec, const cs_type *type, const void *value);

#ifdef __cplusplus
}
#endif
#endif
