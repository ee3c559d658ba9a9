/* registry_internal.h — the Schema Registry client as the codecs use it.
 *
 * Every call may run on any thread at once (the workers decoding records);
 * configuration (cs_registry_basic_auth, _ca_file, cs__registry_timeout_ms)
 * happens before that. A schema-id lookup that hits the cache takes the
 * cache's lock for a hash lookup and makes no request; a miss makes one HTTP
 * request with no cstream lock held.
 *
 * Owns: nothing here; registry.c owns the cs_registry, and the strings of a
 * cs__schema_reference are the caller's. Locks: none here; a lookup takes the
 * cache's lock (schema_cache.h, a leaf). Threads: any thread at once.
 *
 * Failures come as a cs__reg_status, with cs_errmsg() naming the registry,
 * the subject or id and the registry's own words. What a caller does with
 * each (docs/schema-registry.md): */
#ifndef CS_SCHEMA_REGISTRY_INTERNAL_H
#define CS_SCHEMA_REGISTRY_INTERNAL_H

#include <stdint.h>

#include "cstream/registry.h"
#include "schema/schema_cache.h"

typedef enum cs__reg_status {
    CS__REG_OK = 0,
    /* Unreachable, timed out, 5xx or 429: the registry may answer later. A
     * record that needs it is retried with back-off, never dead-lettered. */
    CS__REG_UNAVAILABLE,
    /* 404: the schema id, subject or version is unknown to the registry
     * (error_code 40403 / 40401 / 40402). Permanent: a record with that id
     * is undecodable (dead-letter topic). */
    CS__REG_NOT_FOUND,
    /* 409: the registry refused the schema as incompatible with the
     * subject's earlier versions. */
    CS__REG_INCOMPATIBLE,
    /* 401 / 403: the registry refused the credentials; or its TLS
     * certificate is not trusted. The service's configuration, not the
     * record, is wrong: retried like UNAVAILABLE. */
    CS__REG_AUTH,
    /* 422 (an invalid schema), another 4xx, or an answer that is not what
     * the API promises: permanent. */
    CS__REG_REJECTED,
    /* Bad arguments or out of memory here. */
    CS__REG_LOCAL,
} cs__reg_status;

/* Short constant name, e.g. "CS__REG_NOT_FOUND"; never NULL. */
const char *cs__reg_status_name(cs__reg_status st);

/* True when the failure is not the record's: retry it later, never
 * dead-letter it (UNAVAILABLE, AUTH). */
int cs__reg_status_retryable(cs__reg_status st);

/* What the client has done since cs_registry_new: a copy of its counters
 * (which are atomics, bumped on any thread), taken by cs__registry_stats_get. */
typedef struct cs__registry_stats {
    uint64_t lookups;          /* cs__registry_schema calls */
    uint64_t cache_hits;       /* of those, answered from the cache */
    uint64_t requests;         /* HTTP requests sent (lookups that missed, registrations) */
    uint64_t errors;           /* calls that failed, any status */
    uint64_t retryable_errors; /* of those, UNAVAILABLE or AUTH */
    uint64_t registered;       /* successful registrations */
} cs__registry_stats;

void cs__registry_stats_get(cs_registry *r, cs__registry_stats *out);

/* Whether the registry answers: 1 at once when the last request got an
 * answer; else one probe (GET /subjects) bounded by 1 s. 0 with the reason
 * (naming the URL) in why (cap bytes). Any thread; no lock held. */
int cs__registry_check(cs_registry *r, char *why, size_t cap);

/* Number of schemas in the cache now. */
size_t cs__registry_cached(cs_registry *r);

/* Bounds of one request: connecting, and the whole exchange (ms, > 0).
 * Defaults: CS_REGISTRY_CONNECT_TIMEOUT_MS, CS_REGISTRY_TIMEOUT_MS. */
cs_err cs__registry_timeouts(cs_registry *r, long connect_ms, long total_ms);

/* How many schemas the cache keeps (default CS_REGISTRY_CACHE_CAPACITY);
 * before first use only. */
cs_err cs__registry_cache_capacity(cs_registry *r, size_t capacity);

/* Registers `schema` (NUL-terminated, UTF-8) of `type` under `subject`
 * (POST /subjects/{subject}/versions) and sets *id to its id: a new one, or
 * the existing one if the subject already has this schema. The schema goes
 * into the id cache, so a later lookup of *id makes no request. */
cs__reg_status cs__registry_register(cs_registry *r, const char *subject, cs__schema_type type, const char *schema,
                                     int32_t *id);

/* A schema reference: the import `name` a schema uses (a Protobuf import's
 * file name) is version `version` of `subject`. The strings are the caller's. */
typedef struct cs__schema_reference {
    const char *name;
    const char *subject;
    int32_t version;
} cs__schema_reference;

/* cs__registry_register with the schema's references (n_refs of them; sent
 * as "references"), and, when `version` is not NULL, the version the subject
 * holds the schema as (one more request: POST /subjects/{subject}). */
cs__reg_status cs__registry_register_refs(cs_registry *r, const char *subject, cs__schema_type type, const char *schema,
                                          const cs__schema_reference *refs, size_t n_refs, int32_t *id,
                                          int32_t *version);

/* The schema with `id` (GET /schemas/ids/{id}), from the cache when it is
 * there. On CS__REG_OK, *out holds a reference: cs__schema_release() it when
 * done (it outlives its eviction from the cache). */
cs__reg_status cs__registry_schema(cs_registry *r, int32_t id, const cs__schema **out);

/* Subject name strategies (Confluent's, with the same names). */
typedef enum cs__subject_strategy {
    CS__SUBJECT_TOPIC_NAME,        /* "<topic>-key" / "<topic>-value" */
    CS__SUBJECT_RECORD_NAME,       /* "<fully qualified record name>" */
    CS__SUBJECT_TOPIC_RECORD_NAME, /* "<topic>-<fully qualified record name>" */
} cs__subject_strategy;

/* Writes the subject of a key (is_key) or value schema into buf (cap bytes,
 * NUL-terminated). `topic` is needed by TOPIC_NAME and TOPIC_RECORD_NAME,
 * `record` (the record's or message's fully qualified name) by RECORD_NAME
 * and TOPIC_RECORD_NAME. CS_ERR_ARG naming what is missing; CS_ERR_ARG if it
 * does not fit. */
cs_err cs__registry_subject(cs__subject_strategy strategy, const char *topic, const char *record, int is_key, char *buf,
                            size_t cap);

#endif
