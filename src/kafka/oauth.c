/* oauth.c — the OAUTHBEARER token provider hook (cs_kafka_oauthbearer_token_cb):
 * asks the service's provider for a token when librdkafka needs one and hands
 * it over (rd_kafka_oauthbearer_set_token), or reports the failure
 * (rd_kafka_oauthbearer_set_token_failure), which makes librdkafka fail the
 * pending authentications and ask again later.
 *
 * Threads: the setter runs on the configuring thread before start; the refresh
 * runs on librdkafka's background thread (one per handle: the clients' calls
 * may run at the same time, never two for one client).
 * No state of its own: nothing to lock. A token's value is never logged.
 *
 * Owns: nothing (the provider is the service's). Locks: none. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "kafka/kafka_internal.h"

cs_err cs_kafka_oauthbearer_token_cb(cs_kafka *k, cs_oauth_token_fn fn, void *user) {
    if (!k) return cs__fail(CS_ERR_ARG, "cs_kafka_oauthbearer_token_cb: k is NULL");
    cs_err err = cs__conf_configurable(k, "cs_kafka_oauthbearer_token_cb");
    if (err) return err;
    k->oauth_fn = fn;
    k->oauth_user = fn ? user : NULL;
    return CS_OK;
}

void cs__oauth_conf(const cs_kafka *k, rd_kafka_conf_t *conf,
                    void (*refresh)(rd_kafka_t *rk, const char *config, void *opaque)) {
    /* Only with a provider: setting the callback turns off librdkafka's own
     * (the unsecured test tokens, OIDC) for this client. */
    if (!k->oauth_fn) return;
    rd_kafka_conf_set_oauthbearer_token_refresh_cb(conf, refresh);
    /* The refresh is an event on the SASL queue, which librdkafka's
     * background thread serves once enabled (cs__oauth_started), instead of
     * the main queue, which only a poll serves: cs_app_start's checks and a
     * consumer whose fetch thread has not polled yet need a token before
     * anything polls them. */
    rd_kafka_conf_enable_sasl_queue(conf, 1);
}

cs_err cs__oauth_started(const cs_kafka *k, rd_kafka_t *rk, const char *who) {
    if (!k->oauth_fn) return CS_OK;
    rd_kafka_error_t *e = rd_kafka_sasl_background_callbacks_enable(rk);
    if (!e) return CS_OK;
    cs_err err = cs__fail(CS_ERR_KAFKA, "%s: the OAUTHBEARER token provider cannot be served: %s", who,
                          rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
    return err;
}

/* The number of strings in a NULL-key-terminated key, value list. */
static size_t extension_strings(const char *const *ext) {
    size_t n = 0;
    while (ext && ext[n]) n += 2;
    return n;
}

void cs__oauth_refresh(cs_kafka *k, rd_kafka_t *rk, const char *config, const char *who) {
    cs_oauth_token token = {0};
    char reason[512] = "";
    cs_err err = k->oauth_fn(k, config, &token, reason, sizeof reason, k->oauth_user);
    reason[sizeof reason - 1] = '\0'; /* whatever the provider wrote */
    if (err) {
        CS_LOG_ERR("oauthbearer token provider failed client=\"%s\" error=%s reason=\"%s\"", who, cs_err_name(err),
                   reason[0] ? reason : "(none given)");
        rd_kafka_oauthbearer_set_token_failure(rk, reason[0] ? reason : "the token provider returned no token");
        return;
    }
    if (!token.value || !token.principal) {
        CS_LOG_ERR("oauthbearer token provider returned no %s client=\"%s\"", token.value ? "principal" : "value", who);
        rd_kafka_oauthbearer_set_token_failure(rk, "the token provider returned an incomplete token");
        return;
    }
    size_t n_ext = extension_strings(token.extensions);
    char why[512];
    /* librdkafka copies everything, so the provider's strings may go now;
     * it checks the lifetime, the principal and the extensions' syntax. */
    rd_kafka_resp_err_t rerr = rd_kafka_oauthbearer_set_token(rk, token.value, token.expires_ms, token.principal,
                                                              (const char **)token.extensions, n_ext, why, sizeof why);
    if (rerr) {
        CS_LOG_ERR("oauthbearer token refused by librdkafka client=\"%s\" error=%s reason=\"%s\"", who,
                   rd_kafka_err2name(rerr), why);
        rd_kafka_oauthbearer_set_token_failure(rk, why);
        return;
    }
    CS_LOG_DEBUG("oauthbearer token set client=\"%s\" principal=\"%s\" expires_ms=%lld", who, token.principal,
                 (long long)token.expires_ms);
}
