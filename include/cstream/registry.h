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

#ifdef __cplusplus
}
#endif
#endif
