/* subscription.c — a cs_sub: created by cs_kafka_subscribe*, configured with
 * the cs_sub_* setters before start (each refuses once the app runs), and
 * read while it runs: its stats and its librdkafka consumer.
 *
 * Threads: the configuring thread before start; cs_sub_stats_get and
 * cs_sub_rdkafka_consumer from any thread.
 *
 * Owns: the cs_sub object and its settings. Locks: the subscription's
 * stats_lock (lock order level 2), in those two readers; the lifecycle thread
 * takes it to swap in the final counters (kafka.c, retire_consumer). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "cstream/rdkafka.h"
#include "kafka/defaults.h"
#include "kafka/kafka_internal.h"

void cs__sub_free(cs_sub *s) {
    if (s->k) pthread_mutex_destroy(&s->stats_lock); /* initialised once the sub was filled in */
    for (size_t i = 0; i < s->n_topics; i++) free(s->topics[i]);
    free(s->topics);
    free(s->name);
    free(s->static_id);
    free(s->group);
    free(s->partitions);
    free(s->reply_topic);
    free(s->dead_letter);
    for (size_t i = 0; i < s->n_start_offsets; i++) free(s->start_offsets[i].topic);
    free(s->start_offsets);
    if (s->pattern) regfree(&s->topic_re);
    cs__kvlist_free(&s->config);
    free(s);
}

/* ---- subscriptions ---------------------------------------------------------- */

static cs_sub *new_sub(cs_kafka *k, const char *const *topics, size_t n_topics, cs_handler_fn handler,
                       cs_batch_fn batch_handler, size_t max_batch, void *user, bool pattern) {
    if (cs__conf_configurable(k, "cs_kafka_subscribe")) return NULL;
    if (!topics || n_topics == 0) {
        cs__fail(CS_ERR_ARG, "cs_kafka_subscribe: at least one topic is needed");
        return NULL;
    }
    if (!handler && !batch_handler) {
        cs__fail(CS_ERR_ARG, "cs_kafka_subscribe(%s): handler is NULL", topics[0] ? topics[0] : "?");
        return NULL;
    }
    if (batch_handler && (max_batch < 1 || max_batch > 1000000)) {
        cs__fail(CS_ERR_ARG, "cs_kafka_subscribe_batch(%s): batch size %zu is out of range [1, 1000000]",
                 topics[0] ? topics[0] : "?", max_batch);
        return NULL;
    }
    size_t name_len = 1;
    for (size_t i = 0; i < n_topics; i++) {
        if (!topics[i] || !*topics[i]) {
            cs__fail(CS_ERR_ARG, "cs_kafka_subscribe: topic %zu is empty", i);
            return NULL;
        }
        /* librdkafka takes a name starting with '^' as a regular expression:
         * a plain subscription would silently become a pattern one. */
        if (!pattern && topics[i][0] == '^') {
            cs__fail(CS_ERR_ARG,
                     "cs_kafka_subscribe(%s): a topic name starting with '^' is a pattern: use "
                     "cs_kafka_subscribe_pattern",
                     topics[i]);
            return NULL;
        }
        name_len += strlen(topics[i]) + 1;
    }
    cs_sub *s = calloc(1, sizeof *s);
    cs_sub **grown = s ? realloc(k->subs, (k->n_subs + 1) * sizeof *grown) : NULL;
    if (grown) k->subs = grown;
    if (s) {
        s->topics = calloc(n_topics, sizeof *s->topics);
        s->name = calloc(1, name_len);
    }
    if (!grown || !s->topics || !s->name) {
        if (s) cs__sub_free(s);
        cs__fail(CS_ERR_NOMEM, "cs_kafka_subscribe: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n_topics; i++) {
        s->topics[i] = strdup(topics[i]);
        s->n_topics++;
        if (!s->topics[i]) {
            cs__sub_free(s);
            cs__fail(CS_ERR_NOMEM, "cs_kafka_subscribe(%s): out of memory", topics[i]);
            return NULL;
        }
        if (i) strcat(s->name, ",");
        strcat(s->name, topics[i]);
    }
    if (pattern) {
        int rc = regcomp(&s->topic_re, topics[0], REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char why[128];
            regerror(rc, &s->topic_re, why, sizeof why);
            cs__sub_free(s);
            cs__fail(CS_ERR_ARG, "cs_kafka_subscribe_pattern(%s): not a regular expression: %s", topics[0], why);
            return NULL;
        }
        s->pattern = true;
    }
    pthread_mutex_init(&s->stats_lock, NULL);
    s->k = k;
    s->start_time_ms = CS_START_TIME_NONE;
    s->handler = handler;
    s->batch_handler = batch_handler;
    s->max_batch = max_batch;
    s->user = user;
    s->start = CS__DEFAULT_START;
    s->mode = CS__DEFAULT_COMMIT;
    s->lanes = CS__DEFAULT_LANES;
    s->workers = CS__DEFAULT_WORKERS;
    s->max_open = 0; /* the commit mode's default, see cs__consumer_max_open */
    s->fetch_buffer_bytes = (size_t)CS__DEFAULT_FETCH_BUFFER_BYTES;
    s->commit_interval_ms = 0; /* the commit mode's default, see cs__consumer_commit_interval_ms */
    s->window_records = CS__DEFAULT_WINDOW_RECORDS;
    s->stall_timeout_ms = CS__DEFAULT_STALL_TIMEOUT_MS;
    s->drain_timeout_ms = CS__DEFAULT_DRAIN_TIMEOUT_MS;
    s->handler_time_limit_ms = CS__DEFAULT_HANDLER_TIME_LIMIT_MS;
    s->max_attempts = CS__DEFAULT_MAX_ATTEMPTS;
    s->acked_set = true;
    k->subs[k->n_subs++] = s;
    return s;
}

cs_sub *cs_kafka_subscribe_topics(cs_kafka *k, const char *const *topics, size_t n_topics, cs_handler_fn handler,
                                  void *user) {
    return new_sub(k, topics, n_topics, handler, NULL, 0, user, false);
}

cs_sub *cs_kafka_subscribe(cs_kafka *k, const char *topic, cs_handler_fn handler, void *user) {
    return new_sub(k, &topic, 1, handler, NULL, 0, user, false);
}

cs_sub *cs_kafka_subscribe_batch(cs_kafka *k, const char *topic, cs_batch_fn handler, size_t max_batch, void *user) {
    if (!handler) {
        cs__fail(CS_ERR_ARG, "cs_kafka_subscribe_batch(%s): handler is NULL", topic ? topic : "?");
        return NULL;
    }
    return new_sub(k, &topic, 1, NULL, handler, max_batch, user, false);
}

cs_sub *cs_kafka_subscribe_pattern(cs_kafka *k, const char *pattern, cs_handler_fn handler, void *user) {
    if (pattern && *pattern && pattern[0] != '^') {
        cs__fail(CS_ERR_ARG, "cs_kafka_subscribe_pattern(%s): a pattern starts with '^' (librdkafka's rule)", pattern);
        return NULL;
    }
    return new_sub(k, &pattern, 1, handler, NULL, 0, user, true);
}

static cs_err sub_configurable(const cs_sub *s, const char *what) {
    if (!s) return cs__fail(CS_ERR_ARG, "%s: subscription is NULL", what);
    return cs__conf_configurable(s->k, what);
}

cs_err cs_sub_group(cs_sub *s, const char *group) {
    cs_err err = sub_configurable(s, "cs_sub_group");
    if (err) return err;
    if (!group || !*group) return cs__fail(CS_ERR_ARG, "cs_sub_group(%s): group name is empty", s->name);
    return cs__conf_replace_string(&s->group, group, "cs_sub_group");
}

cs_err cs_sub_partitions(cs_sub *s, const int32_t *partitions, size_t n) {
    cs_err err = sub_configurable(s, "cs_sub_partitions");
    if (err) return err;
    if (s->pattern)
        return cs__fail(CS_ERR_ARG,
                        "cs_sub_partitions(%s): a pattern subscription has no fixed topics to take partitions of",
                        s->name);
    if (!partitions || n == 0)
        return cs__fail(CS_ERR_ARG, "cs_sub_partitions(%s): at least one partition is needed", s->name);
    for (size_t i = 0; i < n; i++) {
        if (partitions[i] < 0)
            return cs__fail(CS_ERR_ARG, "cs_sub_partitions(%s): partition %d is negative", s->name, (int)partitions[i]);
        for (size_t j = 0; j < i; j++)
            if (partitions[j] == partitions[i])
                return cs__fail(CS_ERR_ARG, "cs_sub_partitions(%s): partition %d is given twice", s->name,
                                (int)partitions[i]);
    }
    int32_t *copy = malloc(n * sizeof *copy);
    if (!copy) return cs__fail(CS_ERR_NOMEM, "cs_sub_partitions(%s): out of memory", s->name);
    memcpy(copy, partitions, n * sizeof *copy);
    free(s->partitions);
    s->partitions = copy;
    s->n_partitions = n;
    return CS_OK;
}

cs_err cs_sub_config(cs_sub *s, const char *key, const char *value) {
    cs_err err = sub_configurable(s, "cs_sub_config");
    if (err) return err;
    char who[300];
    snprintf(who, sizeof who, "cs_sub_config(%s)", s->name);
    err = cs__conf_check(who, key, value);
    return err ? err : cs__kvlist_set(&s->config, key, value);
}

cs_err cs_sub_group_protocol(cs_sub *s, cs_group_protocol p) {
    cs_err err = sub_configurable(s, "cs_sub_group_protocol");
    if (err) return err;
    char who[300];
    snprintf(who, sizeof who, "cs_sub_group_protocol(%s)", s->name);
    err = cs__group_protocol_choice(who, p);
    if (err) return err;
    s->group_protocol_set = true;
    s->group_protocol = p;
    return CS_OK;
}

cs_err cs_sub_start_at(cs_sub *s, cs_start where) {
    cs_err err = sub_configurable(s, "cs_sub_start_at");
    if (err) return err;
    if (where != CS_START_EARLIEST && where != CS_START_LATEST)
        return cs__fail(CS_ERR_ARG, "cs_sub_start_at(%s): unknown start position %d", s->name, (int)where);
    s->start = where;
    return CS_OK;
}

cs_err cs_sub_start_at_offset(cs_sub *s, const char *topic, int32_t partition, int64_t offset) {
    cs_err err = sub_configurable(s, "cs_sub_start_at_offset");
    if (err) return err;
    if (!topic || !cs__sub_has_topic(s, topic))
        return cs__fail(CS_ERR_ARG, "cs_sub_start_at_offset(%s): topic %s is not one of the subscription's", s->name,
                        topic ? topic : "(null)");
    if (partition < 0 || offset < 0)
        return cs__fail(CS_ERR_ARG, "cs_sub_start_at_offset(%s): topic=%s partition=%d offset=%lld: negative", s->name,
                        topic, (int)partition, (long long)offset);
    for (size_t i = 0; i < s->n_start_offsets; i++) {
        cs_start_offset *o = &s->start_offsets[i];
        if (o->partition == partition && !strcmp(o->topic, topic)) {
            o->offset = offset;
            return CS_OK;
        }
    }
    if (s->n_start_offsets >= CS_START_OFFSETS_MAX)
        return cs__fail(CS_ERR_ARG, "cs_sub_start_at_offset(%s): more than %d partitions", s->name,
                        CS_START_OFFSETS_MAX);
    cs_start_offset *grown = realloc(s->start_offsets, (s->n_start_offsets + 1) * sizeof *grown);
    char *name = grown ? strdup(topic) : NULL;
    if (grown) s->start_offsets = grown;
    if (!name) return cs__fail(CS_ERR_NOMEM, "cs_sub_start_at_offset(%s): out of memory", s->name);
    s->start_offsets[s->n_start_offsets++] = (cs_start_offset){.topic = name, .partition = partition, .offset = offset};
    return CS_OK;
}

cs_err cs_sub_start_at_time(cs_sub *s, int64_t ms_since_epoch) {
    cs_err err = sub_configurable(s, "cs_sub_start_at_time");
    if (err) return err;
    if (ms_since_epoch < 0)
        return cs__fail(CS_ERR_ARG, "cs_sub_start_at_time(%s): time %lld is negative", s->name,
                        (long long)ms_since_epoch);
    s->start_time_ms = ms_since_epoch;
    return CS_OK;
}

cs_err cs_sub_allow_missing_topics(cs_sub *s, int allow) {
    cs_err err = sub_configurable(s, "cs_sub_allow_missing_topics");
    if (err) return err;
    s->allow_missing = allow != 0;
    return CS_OK;
}

cs_err cs_sub_commit_mode(cs_sub *s, cs_commit_mode mode) {
    cs_err err = sub_configurable(s, "cs_sub_commit_mode");
    if (err) return err;
    if (mode != CS_COMMIT_AUTO && mode != CS_COMMIT_TRACKED && mode != CS_COMMIT_TRANSACTIONAL &&
        mode != CS_COMMIT_DATABASE)
        return cs__fail(CS_ERR_ARG, "cs_sub_commit_mode(%s): unknown commit mode %d", s->name, (int)mode);
    s->mode = mode;
    if (mode != CS_COMMIT_DATABASE) s->db = NULL; /* cs_sub_commit_database gives it */
    return CS_OK;
}

static cs_err set_int(cs_sub *s, const char *what, int *slot, long value, long min, long max) {
    cs_err err = sub_configurable(s, what);
    if (err) return err;
    if (value < min || value > max)
        return cs__fail(CS_ERR_ARG, "%s(%s): %ld is out of range [%ld, %ld]", what, s->name, value, min, max);
    *slot = (int)value;
    return CS_OK;
}

cs_err cs_sub_workers(cs_sub *s, int n) {
    return set_int(s, "cs_sub_workers", s ? &s->workers : NULL, n, CS__WORKERS_MIN, CS__WORKERS_MAX);
}

cs_err cs_sub_commit_interval_ms(cs_sub *s, int ms) {
    return set_int(s, "cs_sub_commit_interval_ms", s ? &s->commit_interval_ms : NULL, ms, CS__COMMIT_INTERVAL_MIN_MS,
                   CS__COMMIT_INTERVAL_MAX_MS);
}

cs_err cs_sub_stall_timeout_ms(cs_sub *s, int ms) {
    return set_int(s, "cs_sub_stall_timeout_ms", s ? &s->stall_timeout_ms : NULL, ms, CS__STALL_TIMEOUT_MIN_MS,
                   CS__STALL_TIMEOUT_MAX_MS);
}

cs_err cs_sub_window_records(cs_sub *s, size_t n) {
    cs_err err = sub_configurable(s, "cs_sub_window_records");
    if (err) return err;
    if (n < CS__WINDOW_RECORDS_MIN || n > CS__WINDOW_RECORDS_MAX)
        return cs__fail(CS_ERR_ARG, "cs_sub_window_records(%s): %zu is out of range [%d, %d]", s->name, n,
                        CS__WINDOW_RECORDS_MIN, CS__WINDOW_RECORDS_MAX);
    s->window_records = n;
    return CS_OK;
}

cs_err cs_sub_drain_timeout_ms(cs_sub *s, int ms) {
    return set_int(s, "cs_sub_drain_timeout_ms", s ? &s->drain_timeout_ms : NULL, ms, CS__DRAIN_TIMEOUT_MIN_MS,
                   CS__DRAIN_TIMEOUT_MAX_MS);
}

cs_err cs_sub_handler_time_limit_ms(cs_sub *s, int ms) {
    return set_int(s, "cs_sub_handler_time_limit_ms", s ? &s->handler_time_limit_ms : NULL, ms,
                   CS__HANDLER_TIME_LIMIT_MIN_MS, CS__HANDLER_TIME_LIMIT_MAX_MS);
}

cs_err cs_sub_decode(cs_sub *s, const cs_codec *codec, const cs_type *type) {
    cs_err err = sub_configurable(s, "cs_sub_decode");
    if (err) return err;
    if (!codec || !type) return cs__fail(CS_ERR_ARG, "cs_sub_decode(%s): codec and type are required", s->name);
    err = cs_type_check(type);
    if (err) return err;
    s->codec = codec;
    s->type = type;
    return CS_OK;
}

cs_err cs_sub_decode_key(cs_sub *s, const cs_codec *codec, const cs_type *type) {
    cs_err err = sub_configurable(s, "cs_sub_decode_key");
    if (err) return err;
    if (!codec || !type) return cs__fail(CS_ERR_ARG, "cs_sub_decode_key(%s): codec and type are required", s->name);
    err = cs_type_check(type);
    if (err) return err;
    s->key_codec = codec;
    s->key_type = type;
    return CS_OK;
}

cs_err cs_sub_lanes(cs_sub *s, cs_lane_key key) {
    cs_err err = sub_configurable(s, "cs_sub_lanes");
    if (err) return err;
    if (key != CS_LANES_BY_PARTITION && key != CS_LANES_BY_KEY)
        return cs__fail(CS_ERR_ARG, "cs_sub_lanes(%s): unknown lane key %d", s->name, (int)key);
    s->lanes = key;
    return CS_OK;
}

cs_err cs_sub_max_open(cs_sub *s, size_t n) {
    cs_err err = sub_configurable(s, "cs_sub_max_open");
    if (err) return err;
    if (n < CS__MAX_OPEN_MIN || n > CS__MAX_OPEN_MAX)
        return cs__fail(CS_ERR_ARG, "cs_sub_max_open(%s): %zu is out of range [%d, %d]", s->name, n, CS__MAX_OPEN_MIN,
                        CS__MAX_OPEN_MAX);
    s->max_open = n;
    return CS_OK;
}

cs_err cs_sub_fetch_buffer_bytes(cs_sub *s, size_t bytes) {
    cs_err err = sub_configurable(s, "cs_sub_fetch_buffer_bytes");
    if (err) return err;
    if (bytes < (size_t)CS__FETCH_BUFFER_MIN || bytes > (size_t)CS__FETCH_BUFFER_MAX)
        return cs__fail(CS_ERR_ARG, "cs_sub_fetch_buffer_bytes(%s): %zu is out of range [%ld, %ld]", s->name, bytes,
                        CS__FETCH_BUFFER_MIN, CS__FETCH_BUFFER_MAX);
    if (bytes < (size_t)CS__FETCH_BUFFER_FLOOR) {
        CS_LOG_WARN("fetch buffer raised to its minimum (four chunks of the store) subscription=%s asked=%zu "
                    "bytes=%ld",
                    s->name, bytes, CS__FETCH_BUFFER_FLOOR);
        bytes = (size_t)CS__FETCH_BUFFER_FLOOR;
    }
    s->fetch_buffer_bytes = bytes;
    return CS_OK;
}

cs_err cs_sub_reply(cs_sub *s, const char *topic, int queue_timeout_ms) {
    cs_err err = sub_configurable(s, "cs_sub_reply");
    if (err) return err;
    if (!topic || !*topic) return cs__fail(CS_ERR_ARG, "cs_sub_reply(%s): reply topic is empty", s->name);
    if (queue_timeout_ms < CS__REPLY_QUEUE_TIMEOUT_MIN_MS)
        return cs__fail(CS_ERR_ARG, "cs_sub_reply(%s): queue timeout %d is below %d", s->name, queue_timeout_ms,
                        CS__REPLY_QUEUE_TIMEOUT_MIN_MS);
    if (s->pattern && cs__sub_has_topic(s, topic))
        return cs__fail(CS_ERR_ARG,
                        "cs_sub_reply(%s): reply topic %s matches the subscription's pattern: its replies would be "
                        "consumed again, in a loop",
                        s->name, topic);
    s->reply_queue_timeout_ms = queue_timeout_ms;
    return cs__conf_replace_string(&s->reply_topic, topic, "cs_sub_reply");
}

cs_err cs_sub_max_attempts(cs_sub *s, int n) {
    return set_int(s, "cs_sub_max_attempts", s ? &s->max_attempts : NULL, n, CS__MAX_ATTEMPTS_MIN,
                   CS__MAX_ATTEMPTS_MAX);
}

cs_err cs_sub_acked_set(cs_sub *s, int on) {
    cs_err err = sub_configurable(s, "cs_sub_acked_set");
    if (err) return err;
    s->acked_set = on != 0;
    return CS_OK;
}

cs_err cs_sub_dead_letter(cs_sub *s, const char *topic) {
    cs_err err = sub_configurable(s, "cs_sub_dead_letter");
    if (err) return err;
    if (!topic || !*topic) return cs__fail(CS_ERR_ARG, "cs_sub_dead_letter(%s): topic is empty", s->name);
    if (s->pattern && cs__sub_has_topic(s, topic))
        return cs__fail(CS_ERR_ARG,
                        "cs_sub_dead_letter(%s): dead-letter topic %s matches the subscription's pattern: its dead "
                        "letters would be consumed again, in a loop",
                        s->name, topic);
    return cs__conf_replace_string(&s->dead_letter, topic, "cs_sub_dead_letter");
}

cs_err cs_sub_on_assign(cs_sub *s, cs_partitions_fn fn, void *user) {
    cs_err err = sub_configurable(s, "cs_sub_on_assign");
    if (err) return err;
    s->on_assign = fn;
    s->on_assign_user = user;
    return CS_OK;
}

cs_err cs_sub_on_revoke(cs_sub *s, cs_partitions_fn fn, void *user) {
    cs_err err = sub_configurable(s, "cs_sub_on_revoke");
    if (err) return err;
    s->on_revoke = fn;
    s->on_revoke_user = user;
    return CS_OK;
}

void cs_sub_stats_get(const cs_sub *s, cs_sub_stats *out) {
    cs_sub *m = (cs_sub *)s; /* the lock is not part of the value */
    pthread_mutex_lock(&m->stats_lock);
    if (s->consumer) cs__consumer_stats(s->consumer, out);
    else *out = s->final_stats;
    pthread_mutex_unlock(&m->stats_lock);
}

rd_kafka_t *cs_sub_rdkafka_consumer(cs_sub *s) {
    if (!s) return NULL;
    pthread_mutex_lock(&s->stats_lock); /* the pointer, not the handle's lifetime: that is the caller's (app running) */
    rd_kafka_t *rk = s->consumer ? cs__consumer_handle(s->consumer) : NULL;
    pthread_mutex_unlock(&s->stats_lock);
    return rk;
}
