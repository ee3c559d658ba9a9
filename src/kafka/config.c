/* config.c — property lists and their validation against librdkafka.
 * Every property is set on a scratch librdkafka conf when the user sets it, so
 * an unknown key or a bad value fails at configuration time, naming the key
 * (and the source: a setter, or a file line, variable or flag of the
 * operator's layers, config_sources.c) and giving librdkafka's reason; the
 * traces `config show` prints; and the checks the cs_kafka_* and cs_sub_*
 * setters share. Pure functions but cs__conf_configurable, which reads
 * whether the app has started. Must never put a secret key's value, or a
 * value read from a file, into a message.
 *
 * Owns: the property lists it builds (their caller frees them). Locks: none.
 * Threads: any thread. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/broker.h"
#include "base/error.h"
#include "base/log.h"
#include "kafka/kafka_internal.h"

cs_err cs__kvlist_set(cs_kvlist *l, const char *key, const char *value) {
    for (size_t i = 0; i < l->n; i++) {
        if (!strcmp(l->keys[i], key)) {
            char *v = strdup(value);
            if (!v) return cs__fail(CS_ERR_NOMEM, "out of memory setting %s", key);
            free(l->values[i]);
            l->values[i] = v;
            return CS_OK;
        }
    }
    char **keys = realloc(l->keys, (l->n + 1) * sizeof *keys);
    if (keys) l->keys = keys;
    char **values = realloc(l->values, (l->n + 1) * sizeof *values);
    if (values) l->values = values;
    if (!keys || !values) return cs__fail(CS_ERR_NOMEM, "out of memory setting %s", key);
    l->keys[l->n] = strdup(key);
    l->values[l->n] = strdup(value);
    if (!l->keys[l->n] || !l->values[l->n]) {
        free(l->keys[l->n]);
        free(l->values[l->n]);
        return cs__fail(CS_ERR_NOMEM, "out of memory setting %s", key);
    }
    l->n++;
    return CS_OK;
}

void cs__kvlist_free(cs_kvlist *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->keys[i]);
        free(l->values[i]);
    }
    free(l->keys);
    free(l->values);
    memset(l, 0, sizeof *l);
}

/* Properties that later librdkafka versions know and 2.0.2 does not. */
static const struct newer_property {
    const char *key, *since, *instead;
} newer_properties[] = {
    {"fetch.queue.backoff.ms", "2.2.0",
     "with librdkafka 2.0.2 bound the pre-fetch queue with queued.min.messages and "
     "queued.max.messages.kbytes instead"},
    /* A preview from 2.4.0, GA in 2.12.0: cstream offers it from the GA on
     * (cs__group_protocol_supported). */
    {"group.protocol", "2.12.0",
     "librdkafka before 2.12.0 speaks only the classic group protocol: leave group.protocol unset"},
    {"group.remote.assignor", "2.12.0",
     "the broker's assignor is chosen only under group.protocol=consumer, which needs librdkafka >= 2.12.0"},
};

cs_err cs__group_protocol_supported(const char *who, const char *value) {
    if (CS_RDKAFKA_HAS_CONSUMER_PROTOCOL || !value || strcmp(value, "consumer")) return CS_OK;
    char built[32], running[32];
    cs__rdkafka_versions(built, running, sizeof built);
    return cs__fail(CS_ERR_UNSUPPORTED,
                    "%s: group.protocol=consumer (KIP-848) needs librdkafka >= 2.12.0, cstream was built with "
                    "librdkafka %s headers and runs librdkafka %s; the classic protocol is the only one here",
                    who, built, running);
}

/* group.protocol's value for p, NULL for an unknown p. */
static const char *protocol_name(cs_group_protocol p) {
    return p == CS_GROUP_PROTOCOL_CLASSIC ? "classic" : p == CS_GROUP_PROTOCOL_CONSUMER ? "consumer" : NULL;
}

cs_err cs__group_protocol_choice(const char *who, cs_group_protocol p) {
    const char *name = protocol_name(p);
    if (!name) return cs__fail(CS_ERR_ARG, "%s: unknown group protocol %d", who, (int)p);
    return cs__group_protocol_supported(who, name);
}

/* Properties cstream sets itself; setting them by hand would break a guarantee. */
static const struct owned_property {
    const char *key, *why;
} owned_properties[] = {
    {"enable.auto.commit", "the subscription's commit mode decides how positions are committed "
                           "(cs_sub_commit_mode: CS_COMMIT_AUTO lets librdkafka commit, CS_COMMIT_TRACKED commits "
                           "explicitly)"},
    {"enable.auto.offset.store", "the subscription's commit mode decides when positions are stored "
                                 "(cs_sub_commit_mode)"},
    {"group.id", "set the group with cs_sub_group() or cs_kafka_default_group()"},
    {"group.instance.id", "every consumer gets one derived from the instance id (cs_kafka_instance_id or "
                          "CSTREAM_INSTANCE_ID), unique per subscription and stable across restarts"},
    {"auto.offset.reset", "set the start position with cs_sub_start_at()"},
    {"enable.partition.eof", "cstream's fetch loop does not hand partition-EOF events to handlers"},
    {"bootstrap.servers", "pass the servers to cs_kafka_new() (or set CSTREAM_BROKERS)"},
};

/* Keys whose values are secrets (or may hold one, like a Java client's
 * sasl.jaas.config): their values never go into an error message or a log
 * line. Matched by substring so that a misspelt or future key is covered too. */
bool cs__conf_secret_key(const char *key) {
    static const char *const words[] = {"password",           "secret", "jaas",      "ssl.key", "ssl_key",
                                        "oauthbearer.config", "token",  "credential"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (strstr(key, words[i])) return true;
    return false;
}

cs_err cs__conf_set_shown(rd_kafka_conf_t *conf, const char *who, const char *key, const char *value,
                          const char *shown) {
    char reason[512];
    /* Refused before librdkafka is asked: a 2.4-2.11 build knows the key and
     * would take the protocol's preview. */
    if (!strcmp(key, "group.protocol")) {
        cs_err err = cs__group_protocol_supported(who, value);
        if (err) return err;
    }
    if (rd_kafka_conf_set(conf, key, value, reason, sizeof reason) == RD_KAFKA_CONF_OK) return CS_OK;
    size_t n = strlen(reason);
    while (n > 0 && (reason[n - 1] == '\n' || reason[n - 1] == ' '))
        reason[--n] = '\0'; /* some reasons end in a newline */
    for (size_t i = 0; i < sizeof newer_properties / sizeof *newer_properties; i++) {
        const struct newer_property *n = &newer_properties[i];
        if (!strcmp(key, n->key))
            return cs__fail(CS_ERR_UNSUPPORTED,
                            "%s: property %s needs librdkafka >= %s, this process runs librdkafka %s (%s); %s", who,
                            key, n->since, rd_kafka_version_str(), reason, n->instead);
    }
    /* librdkafka's reason may quote the value ("Invalid value \"...\""): a
     * secret, or a value read from a file, is not repeated. */
    bool secret = cs__conf_secret_key(key);
    if ((secret || shown != value) && *value && strstr(reason, value)) snprintf(reason, sizeof reason, "invalid value");
    if (secret)
        return cs__fail(CS_ERR_CONFIG, "%s: property %s=[redacted] rejected by librdkafka: %s", who, key, reason);
    return cs__fail(CS_ERR_CONFIG, "%s: property %s=%s rejected by librdkafka: %s", who, key, shown, reason);
}

cs_err cs__conf_set(rd_kafka_conf_t *conf, const char *who, const char *key, const char *value) {
    return cs__conf_set_shown(conf, who, key, value, value);
}

cs_err cs__conf_check_shown(const char *who, const char *key, const char *value, const char *shown) {
    if (!key || !*key) return cs__fail(CS_ERR_ARG, "%s: property name is empty", who);
    if (!value) return cs__fail(CS_ERR_ARG, "%s: property %s has a NULL value", who, key);
    for (size_t i = 0; i < sizeof owned_properties / sizeof *owned_properties; i++) {
        if (!strcmp(key, owned_properties[i].key))
            return cs__fail(CS_ERR_CONFIG, "%s: property %s is owned by cstream: %s", who, key,
                            owned_properties[i].why);
    }
    rd_kafka_conf_t *scratch = rd_kafka_conf_new();
    cs_err err = cs__conf_set_shown(scratch, who, key, value, shown ? shown : value);
    rd_kafka_conf_destroy(scratch);
    return err;
}

cs_err cs__conf_check(const char *who, const char *key, const char *value) {
    return cs__conf_check_shown(who, key, value, value);
}

cs_err cs__conf_put(rd_kafka_conf_t *conf, cs_conf_trace *t, const char *who, const char *source, const char *key,
                    const char *value, const char *shown) {
    if (!shown) shown = value;
    cs_err err = cs__conf_set_shown(conf, who, key, value, shown);
    if (err || !t) return err;
    err = cs__kvlist_set(&t->values, key, cs__conf_secret_key(key) ? "[redacted]" : shown);
    if (!err) err = cs__kvlist_set(&t->sources, key, source);
    return err;
}

cs_err cs__conf_apply_traced(rd_kafka_conf_t *conf, const char *who, const cs_kvlist *l, const char *source,
                             cs_conf_trace *t) {
    for (size_t i = 0; i < l->n; i++) {
        cs_err err = cs__conf_put(conf, t, who, source, l->keys[i], l->values[i], NULL);
        if (err) return err;
    }
    return CS_OK;
}

void cs__conf_trace_free(cs_conf_trace *t) {
    cs__kvlist_free(&t->values);
    cs__kvlist_free(&t->sources);
}

cs_err cs__conf_apply(rd_kafka_conf_t *conf, const char *who, const cs_kvlist *l) {
    for (size_t i = 0; i < l->n; i++) {
        cs_err err = cs__conf_set(conf, who, l->keys[i], l->values[i]);
        if (err) return err;
    }
    return CS_OK;
}

void cs__rdkafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
    /* Properties given for "all clients" reach consumers and producers alike;
     * librdkafka's notice that a client ignores the other role's keys is expected. */
    if (!strcmp(fac, "CONFWARN") && strstr(buf, "will be ignored by this")) level = 7;
    /* UNRELEASED_INSTANCE_ID at a static member's join (consumer protocol):
     * cstream retries on a new handle (consumer.c, rejoin) and says so once,
     * and once more if it gives up; librdkafka's FATAL line for every refused
     * try would read as the service failing. */
    if (!strcmp(fac, "FATAL") && strstr(buf, "instance ID is still used by another member")) level = 7;
    cs_log_level l = level <= 3 ? CS_LOG_ERROR : level == 4 ? CS_LOG_WARN : level <= 6 ? CS_LOG_INFO : CS_LOG_DEBUG;
    if (!cs__log_enabled(l)) return;
    cs__log(l, "librdkafka client=%s facility=%s message=\"%s\"", rk ? rd_kafka_name(rk) : "-", fac, buf);
}

/* ---- the setters' shared checks (kafka.c, subscription.c) ------------------ */

cs_err cs__conf_configurable(const cs_kafka *k, const char *what) {
    if (!k) return cs__fail(CS_ERR_ARG, "%s: broker is NULL", what);
    if (k->app && cs__app_started(k->app))
        return cs__fail(CS_ERR_STATE, "%s: the app has started; configure before cs_app_start", what);
    return CS_OK;
}

cs_err cs__conf_replace_string(char **slot, const char *value, const char *what) {
    char *copy = strdup(value);
    if (!copy) return cs__fail(CS_ERR_NOMEM, "%s: out of memory", what);
    free(*slot);
    *slot = copy;
    return CS_OK;
}
