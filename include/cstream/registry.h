/** @file
 * cstream/registry.h — a connection to a Confluent-compatible Schema Registry.
 *
 * A cs_registry holds where the registry is (its base URL), how to reach it
 * (basic auth, a CA file for TLS) and a bounded cache of the schemas it has
 * fetched, by schema id. The Avro and Protobuf codecs look schemas up through
 * it: a schema id already in the cache costs a lock and a hash lookup, never
 * an HTTP request. docs/schema-registry.md describes its behaviour (what is
 * retried, what is a permanent failure) and the registry the tests run.
 *
 * Lifecycle: create it with cs_registry_new(), configure it before any codec
 * uses it, destroy it with cs_registry_destroy() after the last user has
 * stopped. */
#ifndef CSTREAM_REGISTRY_H
#define CSTREAM_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>

#include "cstream/codec.h"
#include "cstream/error.h"
#include "cstream/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A Schema Registry connection and its schema cache. Opaque. */
typedef struct cs_registry cs_registry;

/** Creates a registry connection. No request is made here: an unreachable
 * registry shows at the first lookup, as a transient failure.
 *
 * Any thread.
 * @param url the base URL of the registry's Confluent API, http:// or
 *        https://, e.g. "http://127.0.0.1:8081" or, for Apicurio,
 *        "http://host:8080/apis/ccompat/v7"; copied (a trailing '/' is
 *        dropped).
 * @return a new registry, destroyed with cs_registry_destroy(); NULL on
 *         error (a NULL or empty URL, one that is not http(s), no memory),
 *         with the reason in cs_errmsg().
 * @sa cs_registry_destroy */
CS_API cs_registry *cs_registry_new(const char *url);

/** Sends HTTP basic auth (user and password) with every request.
 *
 * Call before the registry is in use: it is not synchronised with lookups
 * running on other threads.
 * @param r the registry.
 * @param user the user name (copied); NULL turns basic auth off again.
 * @param password the password (copied; NULL means empty).
 * @return CS_OK; CS_ERR_ARG for a NULL @p r; CS_ERR_NOMEM. On error nothing
 *         changed. A refused user or password shows at the first request
 *         (cs_errmsg() then names the registry and its HTTP status 401). */
CS_API cs_err cs_registry_basic_auth(cs_registry *r, const char *user, const char *password);

/** Verifies an https:// registry's certificate against the CA certificates
 * in @p path (PEM) instead of the system's trust store.
 *
 * Call before the registry is in use, like cs_registry_basic_auth().
 * @param r the registry.
 * @param path the PEM file (copied; read at each new connection); NULL goes
 *        back to the system's trust store.
 * @return CS_OK; CS_ERR_ARG for a NULL @p r; CS_ERR_CONFIG if @p path cannot
 *         be read (cs_errmsg() names it); CS_ERR_NOMEM. On error nothing
 *         changed. */
CS_API cs_err cs_registry_ca_file(cs_registry *r, const char *path);

/** Frees the registry and its cache. NULL is a no-op.
 *
 * Call once, after every thread that used it (codecs, lookups) is done:
 * schemas borrowed from it must have been released.
 * @param r the registry, or NULL. */
CS_API void cs_registry_destroy(cs_registry *r);

/* ---- registry-backed codecs ---------------------------------------------- */

/** How a registry-backed codec names the subject it registers its schema
 * under when it encodes (Confluent's subject name strategies). */
typedef enum cs_subject_strategy {
    CS_SUBJECT_TOPIC_NAME = 0,    /**< "<topic>-value" or "<topic>-key" (Confluent's default) */
    CS_SUBJECT_RECORD_NAME,       /**< the record's fully qualified name */
    CS_SUBJECT_TOPIC_RECORD_NAME, /**< "<topic>-<fully qualified record name>" */
} cs_subject_strategy;

/** Where a registry-backed codec's encoded values go: the subject of the
 * schema it registers. A codec encodes for one topic and one side (key or
 * value); decoding reads any topic (the schema id is in each record). */
typedef struct cs_registry_subject_opts {
    cs_subject_strategy strategy; /**< CS_SUBJECT_TOPIC_NAME when zeroed */
    const char *topic; /**< the topic encode publishes to (TopicName, TopicRecordName); copied; NULL: decode only */
    bool key;          /**< a key schema: subject "<topic>-key" under TopicName */
} cs_registry_subject_opts;

/** The schema id a registry-backed codec writes @p type with, registering
 * its schema under the codec's subject now if it has not yet (once per type;
 * the registry answers the existing id for a schema it already has). Encode
 * does the same on its first call; calling this at start-up surfaces a
 * refused or unreachable registry before the first record.
 *
 * Any thread.
 * @param codec a codec made by a registry-backed constructor
 *        (cs_codec_avro_registry_new()).
 * @param type the struct type encode will be given.
 * @param id receives the schema id.
 * @retval CS_OK *id holds the id.
 * @retval CS_ERR_UNAVAILABLE the registry is unreachable, answers 5xx or
 *         refuses the credentials: try again later.
 * @retval CS_ERR_ENCODE the registry refused the schema (409: incompatible
 *         with the subject's earlier versions, 422: invalid); cs_errmsg()
 *         names the subject and gives the registry's words.
 * @retval CS_ERR_ARG not a registry-backed codec, a NULL argument, or the
 *         strategy needs a topic the codec was not given.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_codec_registry_schema_id(const cs_codec *codec, const cs_type *type, int32_t *id);

/** Releases a codec made by a registry-backed constructor, and the writer
 * schemas it prepared. NULL or another kind of codec: nothing.
 *
 * Call once nothing uses it (a codec given to cs_sub_decode must outlive the
 * app); before the registry it uses is destroyed.
 * @param codec the codec, or NULL. */
CS_API void cs_codec_registry_destroy(cs_codec *codec);

/** What a registry client has done since cs_registry_new(). */
typedef struct cs_registry_stats {
    uint64_t lookups;     /**< schema-by-id lookups (a codec asks once per schema id it has not prepared) */
    uint64_t cache_hits;  /**< of those, answered from the client's cache */
    uint64_t requests;    /**< HTTP requests sent (misses and registrations) */
    uint64_t errors;      /**< lookups and registrations that failed, any reason */
    uint64_t unavailable; /**< of those, the registry unreachable, 5xx, 429 or refusing the credentials */
    uint64_t registered;  /**< schemas registered (or found registered) */
} cs_registry_stats;

/** Reads the client's counters.
 *
 * Any thread (atomic counters; the figures are each exact, not a snapshot
 * taken all at once).
 * @param r the registry.
 * @param out receives the counters.
 * @retval CS_OK *out holds them.
 * @retval CS_ERR_ARG r or out is NULL. */
CS_API cs_err cs_registry_stats_get(cs_registry *r, cs_registry_stats *out);

/** The registry's base URL as given to cs_registry_new() (without a trailing
 * '/'), for logs.
 * @param r the registry (not NULL).
 * @return the URL, valid as long as the registry. */
CS_API const char *cs_registry_url(const cs_registry *r);

/** Asks the registry whether it answers (GET /subjects, with the configured
 * credentials), for a start-up check or a readiness probe. Blocks for at
 * most the client's request timeout.
 *
 * Any thread.
 * @param r the registry.
 * @retval CS_OK the registry answered.
 * @retval CS_ERR_UNAVAILABLE it is unreachable, answers 5xx or refuses the
 *         credentials; cs_errmsg() names its URL and why.
 * @retval CS_ERR_ARG r is NULL. */
CS_API cs_err cs_registry_ping(cs_registry *r);

#ifdef __cplusplus
}
#endif
#endif
