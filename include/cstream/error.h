/** @file
 * cstream/error.h — status codes and the readable reason behind them.
 *
 * Every call that can fail returns a cs_err (CS_OK == 0). The reason is kept
 * per thread: cs_errmsg() returns the message of the last failure on the
 * calling thread; it names the thing that failed (config key, topic,
 * partition/offset, field) and, where librdkafka said why, its reason. */
#ifndef CSTREAM_ERROR_H
#define CSTREAM_ERROR_H

#include "cstream/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The status of a call: CS_OK (0) or why it failed; cs_errmsg() has the
 * details. */
typedef enum cs_err {
    CS_OK = 0,          /**< success */
    CS_ERR_ARG,         /**< a NULL or out-of-range argument */
    CS_ERR_CONFIG,      /**< unknown, invalid or framework-owned property */
    CS_ERR_STATE,       /**< call not allowed now (e.g. configuring a running app) */
    CS_ERR_TOPIC,       /**< topic missing or unusable */
    CS_ERR_GROUP,       /**< no consumer group for a subscription */
    CS_ERR_KAFKA,       /**< librdkafka reported an error */
    CS_ERR_FATAL,       /**< librdkafka fatal error: the app stopped */
    CS_ERR_TIMEOUT,     /**< a bounded wait ran out */
    CS_ERR_UNSUPPORTED, /**< not supported in this mode or librdkafka version */
    CS_ERR_STALE,       /**< settlement of a delivery whose partition was revoked or closed */
    CS_ERR_NOMEM,       /**< out of memory */
    CS_ERR_HOOK,        /**< a start-up hook failed */
    CS_ERR_AUTH,        /**< the cluster refused the credentials (SASL) or the TLS handshake failed */
    CS_ERR_DECODE,      /**< a payload does not decode as its type (not JSON, a field missing or of the wrong kind) */
    CS_ERR_ENCODE,      /**< a value cannot be encoded as its type (e.g. a string that is not UTF-8) */
    CS_ERR_UNAVAILABLE, /**< a service the call needs (e.g. the Schema Registry) cannot be reached now: try later */
} cs_err;

/** Short constant name of a code, e.g. "CS_ERR_CONFIG". Never NULL.
 *
 * Any thread.
 * @param err any value; one outside the enum gives "CS_ERR_UNKNOWN".
 * @return a static string (never freed, valid for the life of the process). */
CS_API const char *cs_err_name(cs_err err);

/** The reason for the last failure on this thread. Never NULL; valid until the
 * next failing cstream call on this thread.
 *
 * Any thread: each thread has its own message (a per-thread buffer of 2 KiB;
 * "no error" until something fails on it). A successful call does not clear
 * it, so read it right after the call that failed; copy it to keep it.
 * @return the message, owned by cstream (do not free it). */
CS_API const char *cs_errmsg(void);

#ifdef __cplusplus
}
#endif
#endif
