/* kafka.c — the Kafka broker object: its configuration, its part of the app
 * lifecycle (start: embedded cluster, checks, consumers; stop: stop fetching
 * and drain everywhere, then commit and close) and the operations surface
 * that cs_app_main reads. Its subscriptions are in subscription.c; what
 * services publish through it, in publish.c.
 * Threads: configuration, on one thread before start; the lifecycle
 * functions, on the app's lifecycle thread; the operations surface, on
 * cs_app_main's thread or the HTTP thread (/metrics, /readyz; cli.c).
 *
 * Owns: the cs_kafka object, its settings and subscriptions list, and the
 * producer it starts and retires. Locks: producer_lock (a rwlock outside
 * the numbered levels, src/lock_order.h; its write side, to retire the
 * producer); a subscription's stats_lock (level 2) to publish its consumer
 * at start, to read it for /metrics and to swap in its final counters. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/broker.h"
#include "core/delivery_internal.h"
#include "base/error.h"
#include "base/log.h"
#include "cstream.h"
#include "cstream/rdkafka.h"
#include "kafka/defaults.h"
#include "kafka/kafka_internal.h"

static const cs_broker_ops kafka_broker_ops;

cs_kafka *cs_kafka_new(const char *bootstrap_servers) {
    const char *from_env = getenv("CSTREAM_BROKERS");
    const char *servers = bootstrap_servers && *bootstrap_servers ? bootstrap_servers
                          : from_env && *from_env                 ? from_env
                                                                  : NULL; /* NULL: the embedded cluster */
    cs_kafka *k = calloc(1, sizeof *k);
    if (k && servers) k->bootstrap = strdup(servers);
    if (!k || (servers && !k->bootstrap)) {
        free(k);
        cs__fail(CS_ERR_NOMEM, "cs_kafka_new(%s): out of memory", servers ? servers : "embedded cluster");
        return NULL;
    }
    k->embedded = !servers;
    k->queue_timeout_ms = CS__DEFAULT_QUEUE_TIMEOUT_MS;
    k->flush_timeout_ms = CS__DEFAULT_FLUSH_TIMEOUT_MS;
    pthread_rwlock_init(&k->producer_lock, NULL);
    cs__client_stats_init(&k->producer_stats);
    return k;
}

void cs_kafka_destroy(cs_kafka *k) {
    if (!k) return;
    for (size_t i = 0; i < k->n_subs; i++) cs__sub_free(k->subs[i]);
    free(k->subs);
    for (size_t i = 0; i < k->n_topics; i++) free(k->topics[i].name);
    free(k->topics);
    cs__kvlist_free(&k->config);
    cs__kvlist_free(&k->classic_defaults);
    cs__kvlist_free(&k->producer_config);
    cs__ext_free(&k->ext);
    cs__embedded_destroy(k->cluster);
    pthread_rwlock_destroy(&k->producer_lock);
    cs__client_stats_destroy(&k->producer_stats);
    free(k->default_group);
    free(k->instance_id);
    free(k->bootstrap);
    free(k);
}

cs_err cs_kafka_default_group(cs_kafka *k, const char *group) {
    cs_err err = cs__conf_configurable(k, "cs_kafka_default_group");
    if (err) return err;
    if (!group || !*group) return cs__fail(CS_ERR_ARG, "cs_kafka_default_group: group name is empty");
    return cs__conf_replace_string(&k->default_group, group, "cs_kafka_default_group");
}

cs_err cs_kafka_instance_id(cs_kafka *k, const char *id) {
    cs_err err = cs__conf_configurable(k, "cs_kafka_instance_id");
    if (err) return err;
    if (!id || !*id) return cs__fail(CS_ERR_ARG, "cs_kafka_instance_id: the instance id is empty");
    return cs__conf_replace_string(&k->instance_id, id, "cs_kafka_instance_id");
}

cs_err cs_kafka_config(cs_kafka *k, const char *key, const char *value) {
    cs_err err = cs__conf_configurable(k, "cs_kafka_config");
    if (!err) err = cs__conf_check("cs_kafka_config", key, value);
    return err ? err : cs__kvlist_set(&k->config, key, value);
}

cs_err cs_kafka_group_protocol(cs_kafka *k, cs_group_protocol p) {
    cs_err err = cs__conf_configurable(k, "cs_kafka_group_protocol");
    if (!err) err = cs__group_protocol_choice("cs_kafka_group_protocol", p);
    if (err) return err;
    k->group_protocol_set = true;
    k->group_protocol = p;
    return CS_OK;
}

cs_err cs__kafka_classic_default(cs_kafka *k, const char *key, const char *value) {
    cs_err err = cs__conf_check("cstream default", key, value);
    return err ? err : cs__kvlist_set(&k->classic_defaults, key, value);
}

cs_err cs_kafka_producer_config(cs_kafka *k, const char *key, const char *value) {
    cs_err err = cs__conf_configurable(k, "cs_kafka_producer_config");
    if (!err) err = cs__conf_check("cs_kafka_producer_config", key, value);
    return err ? err : cs__kvlist_set(&k->producer_config, key, value);
}

cs_err cs_kafka_topic(cs_kafka *k, const char *topic, int partitions) {
    cs_err err = cs__conf_configurable(k, "cs_kafka_topic");
    if (err) return err;
    if (!topic || !*topic) return cs__fail(CS_ERR_ARG, "cs_kafka_topic: topic name is empty");
    if (partitions < 1)
        return cs__fail(CS_ERR_ARG, "cs_kafka_topic(%s): partitions must be >= 1, got %d", topic, partitions);
    topic_decl *grown = realloc(k->topics, (k->n_topics + 1) * sizeof *grown);
    if (!grown) return cs__fail(CS_ERR_NOMEM, "cs_kafka_topic(%s): out of memory", topic);
    k->topics = grown;
    k->topics[k->n_topics].name = strdup(topic);
    if (!k->topics[k->n_topics].name) return cs__fail(CS_ERR_NOMEM, "cs_kafka_topic(%s): out of memory", topic);
    k->topics[k->n_topics].partitions = partitions;
    k->n_topics++;
    return CS_OK;
}

const char *cs_kafka_bootstrap(const cs_kafka *k) { return k->bootstrap; }
int cs_kafka_is_embedded(const cs_kafka *k) { return k->embedded; }

cs_err cs_app_add_kafka(cs_app *app, cs_kafka *k) {
    if (!app || !k) return cs__fail(CS_ERR_ARG, "cs_app_add_kafka: app and broker must not be NULL");
    if (k->app) return cs__fail(CS_ERR_STATE, "cs_app_add_kafka: this broker already belongs to an app");
    cs_err err = cs__app_add_broker(app, &kafka_broker_ops, k);
    if (!err) k->app = app;
    return err;
}

/* ---- lifecycle ---------------------------------------------------------------- */

static cs_err check_groups(cs_kafka *k) {
    for (size_t i = 0; i < k->n_subs; i++) {
        cs_sub *s = k->subs[i];
        if (!s->group && !k->default_group)
            return cs__fail(CS_ERR_GROUP,
                            "subscription %s has no consumer group: set one with cs_sub_group() or a default "
                            "with cs_kafka_default_group()",
                            s->name);
    }
    return CS_OK;
}

/* The instance id: cs_kafka_instance_id(), else CSTREAM_INSTANCE_ID. Every
 * consumer joins as a static member with it (consumer.c), and Transactional
 * subscriptions need it for their transactional.id. */
static cs_err resolve_instance_id(cs_kafka *k) {
    const char *env = getenv("CSTREAM_INSTANCE_ID");
    if (!k->instance_id && env && *env && cs__conf_replace_string(&k->instance_id, env, "CSTREAM_INSTANCE_ID"))
        return CS_ERR_NOMEM;
    if (k->instance_id && (k->embedded || k->mock))
        CS_LOG_INFO("instance id %s: no static membership on the embedded cluster (librdkafka's mock has none), "
                    "its consumers join as dynamic members",
                    k->instance_id);
    return CS_OK;
}

/* Transactional subscriptions need a stable instance id (their
 * transactional.id ends with it); the embedded cluster does not enforce
 * transactions, which the service is told loudly. */
static cs_err check_transactional(cs_kafka *k) {
    bool any = false;
    for (size_t i = 0; i < k->n_subs; i++) any = any || k->subs[i]->mode == CS_COMMIT_TRANSACTIONAL;
    if (!any) return CS_OK;
    for (size_t i = 0; i < k->n_subs && !k->instance_id; i++)
        if (k->subs[i]->mode == CS_COMMIT_TRANSACTIONAL)
            return cs__fail(CS_ERR_ARG,
                            "subscription %s is Transactional and needs a stable instance id: call "
                            "cs_kafka_instance_id() or set CSTREAM_INSTANCE_ID (two instances must not share one)",
                            k->subs[i]->name);
    if (k->embedded)
        CS_LOG_WARN("EXACTLY-ONCE IS NOT ENFORCED ON THE EMBEDDED CLUSTER: librdkafka's mock accepts every "
                    "transactional call but keeps no transaction semantics (aborted outputs stay visible, "
                    "zombies are not fenced); run Transactional subscriptions against a real Kafka cluster");
    return CS_OK;
}

static cs_err start_embedded(cs_kafka *k) {
    cs_err err = cs__embedded_new(1, &k->cluster);
    if (err) return err;
    for (size_t i = 0; i < k->n_topics; i++) {
        err = cs__embedded_topic(k->cluster, k->topics[i].name, k->topics[i].partitions);
        if (err) return err;
    }
    free(k->bootstrap);
    k->bootstrap = strdup(cs__embedded_bootstraps(k->cluster));
    if (!k->bootstrap) return cs__fail(CS_ERR_NOMEM, "embedded Kafka: out of memory");
    CS_LOG_WARN("embedded Kafka: data lives in this process only bootstrap=%s (set CSTREAM_BROKERS or pass "
                "bootstrap servers to cs_kafka_new for a real cluster)",
                k->bootstrap);
    return CS_OK;
}

/* A token for the start's metadata check (its opaque is the watch). */
static void on_check_oauth(rd_kafka_t *rk, const char *config, void *opaque) {
    cs_conn_watch *w = opaque;
    cs__oauth_refresh(w->oauth_k, rk, config, "topic check");
}

/* Every subscribed and declared topic must exist: a real broker would
 * otherwise let the consumer wait silently for a topic that never comes.
 * Not checked: a pattern subscription's pattern (no topic needs to match at
 * start) and the topics of a subscription that allows them to be missing
 * (cs_sub_allow_missing_topics); their reply and dead-letter topics are.
 * This is also the app's first request to the cluster, so a refused SASL
 * login or TLS handshake fails the start here, at once (cs__topics_start_check). */
static cs_err check_topics(cs_kafka *k, cs_app *app) {
    size_t n = k->n_topics;
    for (size_t i = 0; i < k->n_subs; i++)
        n += k->subs[i]->n_topics + (k->subs[i]->reply_topic ? 1 : 0) + (k->subs[i]->dead_letter ? 1 : 0);
    char **names = calloc(n ? n : 1, sizeof *names);
    if (!names) return cs__fail(CS_ERR_NOMEM, "topic check: out of memory");
    size_t j = 0;
    for (size_t i = 0; i < k->n_topics; i++) names[j++] = k->topics[i].name;
    for (size_t i = 0; i < k->n_subs; i++) {
        bool skip = k->subs[i]->pattern || k->subs[i]->allow_missing;
        for (size_t t = 0; !skip && t < k->subs[i]->n_topics; t++) names[j++] = k->subs[i]->topics[t];
        if (k->subs[i]->reply_topic) names[j++] = k->subs[i]->reply_topic;
        if (k->subs[i]->dead_letter) names[j++] = k->subs[i]->dead_letter;
    }

    char reason[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    cs_err err = cs__conf_apply(conf, "cs_kafka_config", &k->config);
    if (!err) err = cs__ext_apply(conf, k, CS_CONF_ALL, NULL, NULL);
    if (!err) err = cs__conf_set(conf, "topic check", "bootstrap.servers", k->bootstrap);
    if (!err) err = cs__conf_set(conf, "topic check", "client.id", cs_app_name(app));
    rd_kafka_conf_set_log_cb(conf, cs__rdkafka_log);
    cs_conn_watch watch;
    cs__conn_watch_install(conf, &watch);
    watch.oauth_k = k;
    cs__oauth_conf(k, conf, on_check_oauth);
    rd_kafka_t *rk = err ? NULL : rd_kafka_new(RD_KAFKA_PRODUCER, conf, reason, sizeof reason);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        if (!err) err = cs__fail(CS_ERR_KAFKA, "topic check: client could not be created: %s", reason);
    } else {
        err = cs__oauth_started(k, rk, "topic check");
        if (!err) err = cs__topics_start_check(rk, k->bootstrap, &watch, names, j, 10000);
        rd_kafka_destroy(rk);
    }
    free(names);
    return err;
}

/* Takes the producer out of service (publishers see "not running") and closes it. */
static void retire_producer(cs_kafka *k) {
    pthread_rwlock_wrlock(&k->producer_lock);
    cs_producer *p = k->producer;
    k->producer = NULL;
    pthread_rwlock_unlock(&k->producer_lock);
    if (p) cs__producer_close(p);
}

/* Takes the subscription's consumer out of its readers' reach: its final
 * counters replace it in one step under stats_lock, so a reader sees either
 * the consumer or its final counters, and never a counter go down. The lock is
 * held only for these reads; the caller frees c afterwards, without it. */
static void retire_consumer(cs_sub *s, cs_consumer *c) {
    pthread_mutex_lock(&s->stats_lock);
    cs__consumer_stats(c, &s->final_stats);
    s->consumer = NULL;
    pthread_mutex_unlock(&s->stats_lock);
}

/* The graceful stop: stop fetching and drain handlers everywhere, flush the
 * producer (so that acks gated on replies settle), then commit and close the
 * consumers, then close the producer. No lock is held across a close: it
 * blocks on the group (and, after a deleted topic, its destroy up to
 * DESTROY_WAIT_MS), and its revoke callback runs the service's on_revoke hook
 * on this thread, which may read the stats; readers meanwhile see the live
 * counters of the closing consumer. */
static void stop_everything(cs_kafka *k) {
    /* Each step for every subscription before the next step of any: the
     * fetch threads all stop polling at once, then the drains run side by
     * side from one moment, so N subscriptions wait for the longest
     * drain_timeout_ms once, not N deadlines one after another (issue #30).
     * The commits still come after every drain, at the close. */
    for (size_t i = 0; i < k->n_subs; i++)
        if (k->subs[i]->consumer) cs__consumer_tell_stop(k->subs[i]->consumer);
    for (size_t i = 0; i < k->n_subs; i++)
        if (k->subs[i]->consumer) cs__consumer_stop_fetching(k->subs[i]->consumer);
    int64_t drains_from = cs__now_ms();
    for (size_t i = 0; i < k->n_subs; i++)
        if (k->subs[i]->consumer) cs__consumer_drain_begin(k->subs[i]->consumer, drains_from);
    for (size_t i = 0; i < k->n_subs; i++)
        if (k->subs[i]->consumer) cs__consumer_drain_wait(k->subs[i]->consumer);
    if (k->producer) {
        size_t left = cs__producer_flush(k->producer, k->flush_timeout_ms);
        atomic_store(&k->unflushed_records, left);
        if (left)
            CS_LOG_WARN("producer flush timed out: records not delivered unflushed_records=%zu flush_timeout_ms=%d",
                        left, k->flush_timeout_ms);
    }
    for (size_t i = 0; i < k->n_subs; i++) {
        cs_sub *s = k->subs[i];
        cs_consumer *c = s->consumer; /* this thread is the only writer: no lock to read it */
        if (!c) continue;
        cs__consumer_close(c);
        retire_consumer(s, c); /* after the close: its commits are counted */
        cs__consumer_destroy(c);
    }
    retire_producer(k);
}

static cs_err kafka_stop(void *impl) {
    cs_kafka *k = impl;
    if (!k->started) return CS_OK;
    stop_everything(k);
    k->started = false;
    return CS_OK;
}

static cs_err kafka_start(void *impl, cs_app *app) {
    cs_kafka *k = impl;
    cs_err err = cs__rdkafka_check_version("cs_app_start", cs__rdkafka_built_version(), rd_kafka_version());
    if (err) return err;
    char built[32], running[32];
    cs__rdkafka_versions(built, running, sizeof built);
    CS_LOG_INFO("librdkafka version=%s built_with=%s", running, built);
    /* The operator's layers first, all of them checked: a bad line, variable
     * or flag fails the start before anything connects or is consumed. */
    err = cs__ext_bind(k);
    if (!err) err = check_groups(k);
    for (size_t i = 0; !err && i < k->n_subs; i++) err = cs__consumer_check_drain_timeout(k->subs[i], app);
    if (!err) err = resolve_instance_id(k);
    if (!err) err = check_transactional(k);
    if (!err && k->embedded && !k->cluster) err = start_embedded(k);
    if (!err) err = check_topics(k, app);
    if (!err) err = cs__producer_start(k, app, &k->producer);
    for (size_t i = 0; !err && i < k->n_subs; i++) {
        cs_consumer *c = NULL;
        err = cs__consumer_start(k->subs[i], app, &c);
        pthread_mutex_lock(&k->subs[i]->stats_lock);
        k->subs[i]->consumer = c;
        pthread_mutex_unlock(&k->subs[i]->stats_lock);
    }
    if (err) {
        char reason[2048];
        snprintf(reason, sizeof reason, "%s", cs_errmsg());
        stop_everything(k);
        return cs__fail(err, "%s", reason);
    }
    k->started = true;
    return CS_OK;
}

static void kafka_crash(void *impl) {
    cs_kafka *k = impl;
    for (size_t i = 0; i < k->n_subs; i++) {
        cs_sub *s = k->subs[i];
        cs_consumer *c = s->consumer;
        if (!c) continue;
        retire_consumer(s, c); /* before: the crash frees it */
        cs__consumer_crash(c); /* joins threads that run user code: without stats_lock */
    }
    retire_producer(k);
    k->started = false;
}

static int kafka_idle(void *impl) {
    cs_kafka *k = impl;
    for (size_t i = 0; i < k->n_subs; i++)
        if (!k->subs[i]->consumer || !cs__consumer_idle(k->subs[i]->consumer)) return 0;
    return 1;
}

static void kafka_destroy(void *impl) { cs_kafka_destroy(impl); }

/* ---- operations surface (cs_app_main, /metrics, /readyz, AsyncAPI) ------------
 * Read-only views of the configuration, plus the bootstrap override that
 * cs_app_main applies before start. `ready` runs on the HTTP thread while the
 * app runs (cli.c never calls it during start or stop). */
static cs_err kafka_set_bootstrap(void *impl, const char *servers) {
    cs_kafka *k = impl;
    cs_err err = cs__conf_configurable(k, "--brokers");
    if (err) return err;
    if (k->cluster) return cs__fail(CS_ERR_STATE, "--brokers: the embedded cluster already runs");
    char *copy = servers && *servers ? strdup(servers) : NULL;
    if (servers && *servers && !copy) return cs__fail(CS_ERR_NOMEM, "--brokers: out of memory");
    free(k->bootstrap);
    k->bootstrap = copy;
    k->embedded = copy == NULL;
    return CS_OK;
}

static cs_err kafka_set_external(void *impl, const char *file, char *const *props, size_t n_props) {
    cs_kafka *k = impl;
    cs_err err = cs__conf_configurable(k, "--config/-X");
    return err ? err : cs__ext_set_cli(&k->ext, file, props, n_props);
}

static const char *kafka_bootstrap_op(void *impl) { return ((cs_kafka *)impl)->bootstrap; }
static size_t kafka_n_topics(void *impl) { return ((cs_kafka *)impl)->n_topics; }
static const char *kafka_topic_op(void *impl, size_t i, int *partitions) {
    cs_kafka *k = impl;
    if (partitions) *partitions = k->topics[i].partitions;
    return k->topics[i].name;
}

static size_t kafka_n_subs(void *impl) { return ((cs_kafka *)impl)->n_subs; }

static void kafka_describe_sub(void *impl, size_t i, cs_broker_sub_desc *out) {
    cs_kafka *k = impl;
    cs_sub *s = k->subs[i];
    *out = (cs_broker_sub_desc){.name = s->name,
                                .topics = s->topics,
                                .n_topics = s->n_topics,
                                .group = s->group ? s->group : k->default_group,
                                .reply_topic = s->reply_topic,
                                .dead_letter = s->dead_letter,
                                .codec = s->codec,
                                .type = s->type,
                                .key_codec = s->key_codec,
                                .tracked = s->mode != CS_COMMIT_AUTO,
                                .transactional = s->mode == CS_COMMIT_TRANSACTIONAL,
                                .database = s->mode == CS_COMMIT_DATABASE,
                                .batch = s->batch_handler != NULL,
                                .workers = s->workers,
                                .max_attempts = s->max_attempts,
                                .pattern = s->pattern,
                                .group_protocol = s->partitions ? NULL : cs__consumer_protocol_name(s, k->app)};
}

static void kafka_sub_counters(void *impl, size_t i, cs_broker_sub_counters *out) {
    cs_sub_stats st;
    cs_sub_stats_get(((cs_kafka *)impl)->subs[i], &st);
    cs__sub_stats_counters(&st, out);
}

/* /readyz. It reads k->subs[i]->consumer without the stats lock and probes
 * the consumer: safe only because cli.c calls it under ops_state.lock and
 * only while `running`, which the stop clears under that lock (so it waits
 * for a probe in progress) before it closes and destroys the consumers. A
 * caller outside cli.c's ops server would need the same exclusion. */
static int kafka_ready(void *impl) {
    cs_kafka *k = impl;
    if (!k->started) return 0;
    /* A member with no partition (more members than partitions) is ready too:
     * it has joined, and takes over when a partition comes its way. */
    for (size_t i = 0; i < k->n_subs; i++)
        if (!k->subs[i]->consumer || !cs__consumer_ready(k->subs[i]->consumer, 1000)) return 0;
    return 1;
}

/* /readyz's count of paused partitions, under the same exclusion as kafka_ready. */
static uint64_t kafka_paused(void *impl) {
    cs_kafka *k = impl;
    uint64_t n = 0;
    for (size_t i = 0; k->started && i < k->n_subs; i++)
        if (k->subs[i]->consumer) n += cs__consumer_paused(k->subs[i]->consumer);
    return n;
}

static cs_err copy_kvlist(cs_kvlist *to, const cs_kvlist *from) {
    cs_err err = CS_OK;
    for (size_t i = 0; !err && i < from->n; i++) err = cs__kvlist_set(to, from->keys[i], from->values[i]);
    return err;
}

static cs_kafka *new_publisher(void *impl, const char *servers) {
    cs_kafka *k = impl;
    cs_kafka *p = cs_kafka_new(servers ? servers : k->bootstrap);
    if (!p) return NULL;
    cs_err err = copy_kvlist(&p->config, &k->config);
    if (!err) err = copy_kvlist(&p->producer_config, &k->producer_config);
    /* It loads the operator's layers itself, from the same file and flags. */
    if (!err) err = cs__ext_set_cli(&p->ext, k->ext.file, k->ext.flags, k->ext.n_flags);
    /* The embedded cluster needs the declared topics created; a real one would
     * only check that they exist, which a one-record publish does not need. */
    for (size_t i = 0; !err && p->embedded && i < k->n_topics; i++)
        err = cs_kafka_topic(p, k->topics[i].name, k->topics[i].partitions);
    p->queue_timeout_ms = k->queue_timeout_ms;
    p->flush_timeout_ms = k->flush_timeout_ms;
    if (err) {
        cs_kafka_destroy(p);
        return NULL;
    }
    return p;
}

static void *kafka_add_publisher(void *impl, cs_app *tool, const char *servers) {
    cs_kafka *p = new_publisher(impl, servers);
    if (p && cs_app_add_kafka(tool, p) != CS_OK) {
        cs_kafka_destroy(p); /* the app owns it once added */
        p = NULL;
    }
    return p;
}

static cs_err kafka_publish_op(void *publisher, const cs_record *rec, cs_published *out) {
    return cs_publish(publisher, rec, out);
}

/* --version: the librdkafka in use, and its headers' when they differ. */
static void kafka_library(void *impl, char *buf, size_t cap) {
    (void)impl;
    char built[32], running[32];
    cs__rdkafka_versions(built, running, sizeof built);
    if (strcmp(built, running)) snprintf(buf, cap, "librdkafka %s, built with %s", running, built);
    else snprintf(buf, cap, "librdkafka %s", running);
}

/* /metrics: the subscriptions' records, durations, positions and lag (each
 * under its stats lock, which keeps its consumer from being freed meanwhile;
 * a stop never holds it across a close, so a scrape never waits for one),
 * then the publishes and the producer's librdkafka statistics. */
static void kafka_metrics(void *impl, cs_metrics *m) {
    cs_kafka *k = impl;
    char built[32], running[32];
    cs__rdkafka_versions(built, running, sizeof built);
    const char *versions[] = {"cstream", CSTREAM_VERSION, "librdkafka", running, "librdkafka_headers", built, NULL};
    cs__metric_int(m, "cstream_build_info", "gauge",
                   "Always 1: the versions of cstream and of librdkafka (loaded at run time, and its headers at "
                   "build time).",
                   versions, 1);
    for (size_t i = 0; i < k->n_subs; i++) {
        cs_sub *s = k->subs[i];
        pthread_mutex_lock(&s->stats_lock);
        if (s->consumer) cs__consumer_metrics(s->consumer, m, s->name, s->group ? s->group : k->default_group);
        pthread_mutex_unlock(&s->stats_lock);
    }
    static const char *const kinds[CS_PUB_KINDS] = {"publish", "publish_async", "reply", "dead_letter"};
    for (int i = 0; i < CS_PUB_KINDS; i++) {
        const char *l[] = {"kind", kinds[i], NULL};
        cs__metric_int(m, "cstream_publish_errors_total", "counter",
                       "Records the producer refused (queue full past the queue timeout, invalid) or could not "
                       "deliver, by kind (publish, publish_async, reply, dead_letter).",
                       l, (int64_t)atomic_load_explicit(&k->pub_stats.errors[i], memory_order_relaxed));
    }
    for (int i = 0; i < CS_PUB_KINDS; i++) {
        const char *l[] = {"kind", kinds[i], NULL};
        cs_histogram_snap h = {0};
        cs__histogram_read(&k->pub_stats.latency[i], &h);
        cs__metric_histogram(m, "cstream_publish_duration_seconds",
                             "Time from the first enqueue attempt to the delivery report, by kind.", l, &h);
    }
    cs__metric_int(m, "cstream_unflushed_records", "gauge",
                   "Records the producer had not delivered when the last stop's flush timed out (0 until a stop).",
                   NULL, (int64_t)atomic_load(&k->unflushed_records));
    cs__client_stats_metrics(&k->producer_stats, m, NULL, NULL);
}

/* ---- end operations surface ------------------------------------------------------ */

static const cs_broker_ops kafka_broker_ops = {
    .kind = "kafka",
    .start = kafka_start,
    .stop = kafka_stop,
    .crash = kafka_crash,
    .destroy = kafka_destroy,
    .idle = kafka_idle,
    /* operations surface */
    .set_bootstrap = kafka_set_bootstrap,
    .set_external = kafka_set_external,
    .show_config = cs__kafka_show_config,
    .bootstrap = kafka_bootstrap_op,
    .n_topics = kafka_n_topics,
    .topic = kafka_topic_op,
    .n_subs = kafka_n_subs,
    .describe_sub = kafka_describe_sub,
    .sub_counters = kafka_sub_counters,
    .ready = kafka_ready,
    .paused = kafka_paused,
    .add_publisher = kafka_add_publisher,
    .publish = kafka_publish_op,
    .metrics = kafka_metrics,
    .library = kafka_library,
    .reset_offsets = cs__kafka_reset_offsets,
    .asyncapi = cs__aa_document,
};

cs_err cs_kafka_queue_timeout_ms(cs_kafka *k, int ms) {
    cs_err err = cs__conf_configurable(k, "cs_kafka_queue_timeout_ms");
    if (err) return err;
    if (ms < CS__QUEUE_TIMEOUT_MIN_MS)
        return cs__fail(CS_ERR_ARG, "cs_kafka_queue_timeout_ms: %d is below %d", ms, CS__QUEUE_TIMEOUT_MIN_MS);
    k->queue_timeout_ms = ms;
    return CS_OK;
}

cs_err cs_kafka_flush_timeout_ms(cs_kafka *k, int ms) {
    cs_err err = cs__conf_configurable(k, "cs_kafka_flush_timeout_ms");
    if (err) return err;
    if (ms < CS__FLUSH_TIMEOUT_MIN_MS)
        return cs__fail(CS_ERR_ARG, "cs_kafka_flush_timeout_ms: %d is below %d", ms, CS__FLUSH_TIMEOUT_MIN_MS);
    k->flush_timeout_ms = ms;
    return CS_OK;
}

size_t cs_kafka_unflushed_records(const cs_kafka *k) { return atomic_load(&((cs_kafka *)k)->unflushed_records); }
