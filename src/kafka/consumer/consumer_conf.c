/* consumer_conf.c — one subscription's librdkafka consumer configuration:
 * the defaults cstream sets (the pre-fetch bound from the fetch buffer, the
 * metadata refresh, and the classic-protocol-only ones), the service's
 * properties over them, the operator's layers over those
 * (config_sources.c), the group protocol they select and the classic-only
 * properties it refuses, the keys cstream owns (group, static membership,
 * offsets) and the callbacks. It calls nothing back and must never touch a
 * running consumer.
 *
 * Owns: c->rdk_bound. Locks: none. Threads: the thread that starts the app
 * (cs__consumer_start, consumer.c, once; kafka.c's start) and `config show`
 * (config_show.c) before start; cs__consumer_protocol_name also for kafka.c's
 * describe_sub (the operations surface: cs_app_main's or the HTTP thread). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/broker.h"
#include "base/error.h"
#include "kafka/consumer/consumer_internal.h"
#include "kafka/defaults.h"

/* The largest queued.max.messages.kbytes librdkafka 2.0.2 accepts. */
#define RDK_QUEUED_KBYTES_MAX ((size_t)2097151)
/* The fewest records the pre-fetch bound allows by default: below it a small
 * fetch buffer would make librdkafka fetch a few records at a time. */
#define RDK_QUEUED_MESSAGES_FLOOR ((size_t)1000)

/* A numeric property as librdkafka holds it (0 if unreadable). */
static size_t conf_size(rd_kafka_conf_t *conf, const char *key) {
    char buf[64];
    size_t n = sizeof buf;
    if (rd_kafka_conf_get(conf, key, buf, &n) != RD_KAFKA_CONF_OK) return 0;
    return (size_t)strtoull(buf, NULL, 10);
}

/* ---- the subscription's defaults --------------------------------------------- */

size_t cs__consumer_max_open(const cs_sub *s) {
    if (s->max_open) return s->max_open;
    return s->mode == CS_COMMIT_AUTO ? CS__DEFAULT_MAX_OPEN_AUTO : CS__DEFAULT_MAX_OPEN_TRACKED;
}

int cs__consumer_commit_interval_ms(const cs_sub *s) {
    if (s->commit_interval_ms) return s->commit_interval_ms;
    /* A database window is a transaction too: the same length by default. */
    return s->mode == CS_COMMIT_TRANSACTIONAL || s->mode == CS_COMMIT_DATABASE
               ? CS__DEFAULT_COMMIT_INTERVAL_TRANSACTIONAL_MS
               : CS__DEFAULT_COMMIT_INTERVAL_TRACKED_MS;
}

/* ---- static membership (KIP-345) ----------------------------------------------
 * With an instance id, every consumer joins its group as a static member: the
 * broker keeps its partitions for it across a restart (a SIGKILL included)
 * until session.timeout.ms expires, and a member that rejoins with the same
 * group.instance.id before that gets them back without a rebalance. The id
 * must be stable across restarts and unique per consumer handle, and follows
 * Kafka's rule for it (JoinGroupRequest.validateGroupInstanceId: only
 * [A-Za-z0-9._-], at most 249 characters), which the Java clients enforce
 * (the 4.1.1 broker itself accepted others): so the operator's Java tools
 * can name it. */
enum { STATIC_ID_MAX = 249 };

static uint64_t fnv1a(const char *p) {
    uint64_t h = 1469598103934665603ull;
    for (; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

/* "<app>.<group>.<subscription>.<instance id>" (the transactional.id's
 * parts), other characters replaced by '_'; at most 241 characters (room for
 * the suffix): a longer one keeps its first 224 and adds a hash of the whole. */
static void static_base(const cs_sub *s, cs_app *app, const char *group, char *out, size_t size) {
    char full[2048];
    snprintf(full, sizeof full, "%s.%s.%s.%s", cs_app_name(app), group, s->name, s->k->instance_id);
    for (char *p = full; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '_' || *p == '-'))
            *p = '_';
    if (strlen(full) <= STATIC_ID_MAX - 8) { /* room for a ".<n>" suffix */
        snprintf(out, size, "%s", full);
        return;
    }
    snprintf(out, size, "%.224s.%016llx", full, (unsigned long long)fnv1a(full));
}

/* The consumer's group.instance.id, stored on s: the base, or the base and
 * ".2", ".3", ... when a subscription started before it in this broker got the
 * same one (two subscriptions of one group on the same topics). Subscriptions
 * start in declaration order, so the suffix is stable across restarts. */
static cs_err static_member_id(cs_sub *s, cs_app *app, const char *group) {
    free(s->static_id);
    s->static_id = NULL;
    /* librdkafka 2.0.2's mock reads group.instance.id and ignores it, but a
     * static member sends no LeaveGroup even there: a graceful stop would
     * leave its partitions unassigned until the session timeout, for nothing
     * in return. On the mock the consumers stay dynamic members. */
    if (!s->k->instance_id || s->k->embedded || s->k->mock) return CS_OK;
    char base[STATIC_ID_MAX + 1], id[STATIC_ID_MAX + 16];
    static_base(s, app, group, base, sizeof base);
    snprintf(id, sizeof id, "%s", base);
    for (int n = 2;; n++) {
        bool taken = false;
        for (size_t i = 0; i < s->k->n_subs && s->k->subs[i] != s; i++)
            taken = taken || (s->k->subs[i]->static_id && !strcmp(s->k->subs[i]->static_id, id));
        if (!taken) break;
        snprintf(id, sizeof id, "%s.%d", base, n);
    }
    s->static_id = strdup(id);
    return s->static_id ? CS_OK : cs__fail(CS_ERR_NOMEM, "subscription %s: out of memory", s->name);
}

/* ---- the layers: cstream's defaults, the code's, the operator's --------------- */

/* What s's consumer runs with before the keys cstream owns: cstream's
 * defaults, the broker's profile (cs_kafka_profile) and properties
 * (cs_kafka_config) over them, the
 * subscription's (cs_sub_config) over those, then the operator's layers
 * (file < environment < -X; each: every client's, consumer., then
 * subscription.<name>.: config_sources.c). The consumer's configuration and
 * the drain timeout's start check both read them from here, so the check
 * sees the value the consumer runs with. t (may be NULL) records each
 * key's source for `config show`. */
static cs_err layers(cs_sub *s, cs_app *app, const char *who, rd_kafka_conf_t *conf, cs_conf_trace *t, bool classic) {
    const char *def = "default";
    cs_err err = cs__conf_put(conf, t, who, def, "client.id", cs_app_name(app), NULL); /* config may override */
    /* Every partition's records go to one queue (fetch_parts.c), so librdkafka's
     * pre-fetch bound is one bound for the whole consumer: a small second
     * stage in front of cstream's store, a quarter of its budget by default;
     * config may override it (docs/guide.md: the fetch buffer). */
    size_t quarter_kb = s->fetch_buffer_bytes / 4 / 1024;
    if (quarter_kb < 1) quarter_kb = 1;
    if (quarter_kb > RDK_QUEUED_KBYTES_MAX) quarter_kb = RDK_QUEUED_KBYTES_MAX; /* a buffer over 8 GiB */
    char kbytes[32];
    snprintf(kbytes, sizeof kbytes, "%zu", quarter_kb);
    if (!err) err = cs__conf_put(conf, t, who, def, "queued.max.messages.kbytes", kbytes, NULL);
    /* Its bound in records too, one per KiB of that byte bound (records of
     * 1 KiB and up meet the byte bound first): on 2.0.2 the byte bound alone
     * let librdkafka hold 45-57 MiB against 8 MiB in bursts, the count bound
     * held it (docs/benchmarks.md, finding 2). Config may override it. */
    size_t min_messages = quarter_kb < RDK_QUEUED_MESSAGES_FLOOR ? RDK_QUEUED_MESSAGES_FLOOR : quarter_kb;
    char messages[32];
    snprintf(messages, sizeof messages, "%zu", min_messages);
    if (!err) err = cs__conf_put(conf, t, who, def, "queued.min.messages", messages, NULL);
#if RD_KAFKA_VERSION >= 0x020200ff
    /* From librdkafka 2.2.0 a partition whose queue is at that bound waits
     * fetch.queue.backoff.ms before it is fetched again (1000 ms by default,
     * as the sleep it replaced): 5 ms keeps the broker threads fetching while
     * cstream drains the queue, and replaces the wake-up seeks of
     * fetch_wake.c, which on 2.14.2 cost more than they gain (48 partitions,
     * Tracked, 1 worker: 55-99 k records/s with librdkafka's default and the
     * seeks, 235 k with 5 ms and none, raw librdkafka 167-171 k; 20 ms
     * measured no better, 1 ms doubled the peak RSS once). Config may
     * override it. */
    if (!err) err = cs__conf_put(conf, t, who, def, "fetch.queue.backoff.ms", CS_FETCH_QUEUE_BACKOFF_MS, NULL);
#endif
    /* Default; config may override. librdkafka's 5 minutes is how long a
     * subscription would take to notice partitions added to its topics (and
     * to be assigned them); 30 s costs one small Metadata request per consumer
     * every 30 s instead of every 300 s. See docs/real-kafka.md "Bad inputs". */
    if (!err) err = cs__conf_put(conf, t, who, def, "topic.metadata.refresh.interval.ms", CS_METADATA_REFRESH_MS, NULL);
    /* The statistics carry each partition's last stable offset, which the lag
     * metric needs and librdkafka 2.0.2 offers nowhere else without a round
     * trip (consumer_metrics.c); config may override the interval. */
    if (!err) err = cs__conf_put(conf, t, who, def, "statistics.interval.ms", CS_STATS_INTERVAL_MS, NULL);
    if (!err && classic) err = cs__conf_apply_traced(conf, who, &s->k->classic_defaults, def, t);
    if (!err) err = cs__profile_apply(s->k, conf, t, who, false);
    /* group.protocol exists from librdkafka 2.4.0 (a preview) and cstream
     * offers it from 2.12.0; below that the setters refused CONSUMER and
     * CLASSIC is what the library speaks anyway. */
    if (!err && CS_RDKAFKA_HAS_CONSUMER_PROTOCOL && s->k->group_protocol_set)
        err = cs__conf_put(conf, t, who, "code cs_kafka_group_protocol", "group.protocol",
                           s->k->group_protocol == CS_GROUP_PROTOCOL_CONSUMER ? "consumer" : "classic", NULL);
    if (!err) err = cs__conf_apply_traced(conf, who, &s->k->config, "code cs_kafka_config", t);
    if (!err && CS_RDKAFKA_HAS_CONSUMER_PROTOCOL && s->group_protocol_set)
        err = cs__conf_put(conf, t, who, "code cs_sub_group_protocol", "group.protocol",
                           s->group_protocol == CS_GROUP_PROTOCOL_CONSUMER ? "consumer" : "classic", NULL);
    if (!err) err = cs__conf_apply_traced(conf, who, &s->config, "code cs_sub_config", t);
    if (!err) err = cs__ext_apply(conf, s->k, CS_CONF_CONSUMER, s, t);
    return err;
}

/* Classic-protocol properties librdkafka (2.10 on) refuses under
 * group.protocol=consumer, and what takes their place: the broker owns the
 * session and the assignment under KIP-848. */
static const struct classic_only {
    const char *key, *instead;
} classic_only[] = {
    {"session.timeout.ms", "the broker's group.consumer.session.timeout.ms (default 45000, within "
                           "group.consumer.min.session.timeout.ms and group.consumer.max.session.timeout.ms)"},
    {"heartbeat.interval.ms", "the broker's group.consumer.heartbeat.interval.ms (default 5000)"},
    {"partition.assignment.strategy", "the broker computes the assignment: choose its assignor with "
                                      "group.remote.assignor (uniform or range, from the broker's "
                                      "group.consumer.assignors)"},
    {"group.protocol.type", "nothing: the consumer protocol has no protocol type"},
};

/* Whether the layers (classic defaults aside) select group.protocol=consumer. */
static bool wants_consumer_protocol(cs_sub *s, cs_app *app, const char *who, cs_err *err) {
    *err = CS_OK;
    if (!CS_RDKAFKA_HAS_CONSUMER_PROTOCOL) return false;
    rd_kafka_conf_t *scratch = rd_kafka_conf_new();
    *err = layers(s, app, who, scratch, NULL, false);
    char value[32] = "";
    size_t n = sizeof value;
    bool consumer = !*err && rd_kafka_conf_get(scratch, "group.protocol", value, &n) == RD_KAFKA_CONF_OK &&
                    !strcmp(value, "consumer");
    rd_kafka_conf_destroy(scratch);
    return consumer;
}

const char *cs__consumer_protocol_name(cs_sub *s, cs_app *app) {
    if (s->consumer) return cs__protocol_label(s->consumer_protocol);
    char saved[2048]; /* asked for by a document or a page: leaves the caller's cs_errmsg() as it was */
    snprintf(saved, sizeof saved, "%s", cs_errmsg());
    cs_err err;
    bool consumer = app && wants_consumer_protocol(s, app, s->name, &err);
    cs__fail(CS_OK, "%s", saved);
    return cs__protocol_label(consumer);
}

/* The consumer's layers under the protocol they select: in two passes, since
 * the classic defaults come first but the protocol is known only once every
 * layer is read. Under the consumer protocol a classic-only property set by
 * any layer is refused here, naming it, the layer that set it and what
 * replaces it (librdkafka's own refusal at rd_kafka_new names neither the
 * layer nor the replacement). Records the choice on s. */
static cs_err service_layers(cs_sub *s, cs_app *app, const char *who, rd_kafka_conf_t *conf, cs_conf_trace *t) {
    cs_err err;
    bool consumer = wants_consumer_protocol(s, app, who, &err);
    if (err) return err;
    s->consumer_protocol = consumer;
    cs_conf_trace own = {0};
    cs_conf_trace *trace = t ? t : &own;
    err = layers(s, app, who, conf, trace, !consumer);
    for (size_t i = 0; !err && consumer && i < sizeof classic_only / sizeof *classic_only; i++) {
        for (size_t j = 0; j < trace->sources.n; j++) {
            if (strcmp(trace->sources.keys[j], classic_only[i].key)) continue;
            err = cs__fail(CS_ERR_CONFIG,
                           "%s: property %s (set by %s) belongs to the classic group protocol and is refused "
                           "under group.protocol=consumer (KIP-848); what replaces it: %s",
                           who, classic_only[i].key, trace->sources.values[j], classic_only[i].instead);
            break;
        }
    }
    cs__conf_trace_free(&own);
    return err;
}

/* The longest drain_timeout_ms a subscription in a group may have: a revoke
 * drains inside librdkafka's rebalance callback (rebalance.c), on the fetch
 * thread, and nothing polls the consumer meanwhile. librdkafka counts
 * max.poll.interval.ms from the last poll: once it passes, the client leaves
 * the group on its own ("Application maximum poll interval exceeded"), and
 * the broker, which waits for a member's rejoin only that long (the same
 * value is the JoinGroup's rebalance timeout), goes on without it. Its
 * partitions then go to another member while its handlers still run them,
 * and the revoke's commit is refused. A drain as long as the interval already
 * meets it (the time since the last poll comes on top), so the drain must be
 * shorter. The stop's drain runs unpolled too, and is held to the same
 * bound. The value is known only at start: either layer may set it after
 * cs_sub_drain_timeout_ms, so cs_app_start refuses rather than a setter or a
 * clamp that would silently shorten what the service asked for. */
cs_err cs__consumer_check_drain_timeout(cs_sub *s, cs_app *app) {
    /* Manual assignment joins no group: librdkafka watches the poll interval
     * of subscribed consumers only, and there is no rebalance to miss. */
    if (s->partitions) return CS_OK;
    char who[256];
    snprintf(who, sizeof who, "subscription %s", s->name);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    cs_err err = service_layers(s, app, who, conf, NULL);
    size_t interval = err ? 0 : conf_size(conf, "max.poll.interval.ms");
    rd_kafka_conf_destroy(conf);
    if (err || interval == 0 || (size_t)s->drain_timeout_ms < interval) return err;
    return cs__fail(CS_ERR_CONFIG,
                    "subscription %s: drain_timeout_ms=%d (cs_sub_drain_timeout_ms) is not shorter than the "
                    "group's rebalance timeout max.poll.interval.ms=%zu: a revoke's drain runs in the rebalance "
                    "callback, where the consumer does not poll, and a member that does not poll within "
                    "max.poll.interval.ms leaves its group; lower the drain timeout or raise "
                    "max.poll.interval.ms (cs_sub_config or cs_kafka_config)",
                    s->name, s->drain_timeout_ms, interval);
}

cs_err cs__consumer_conf_layers(cs_sub *s, cs_app *app, const char *who, rd_kafka_conf_t *conf, cs_conf_trace *t) {
    const char *group = s->group ? s->group : s->k->default_group;
    bool auto_mode = s->mode == CS_COMMIT_AUTO;
    const char *own = "cstream";
    cs_err err = service_layers(s, app, who, conf, t);
    /* config show before start on the embedded cluster: no address yet. */
    if (!err && s->k->bootstrap) err = cs__conf_put(conf, t, who, own, "bootstrap.servers", s->k->bootstrap, NULL);
    else if (!err && t) err = cs__kvlist_set(&t->values, "bootstrap.servers", "(the embedded cluster, once it runs)");
    if (!err && t && !s->k->bootstrap) err = cs__kvlist_set(&t->sources, "bootstrap.servers", own);
    if (!err && group) err = cs__conf_put(conf, t, who, own, "group.id", group, NULL);
    /* Manual assignment never joins the group: no member, static or not. */
    if (!err && !s->partitions && group) err = static_member_id(s, app, group);
    if (!err && s->static_id) err = cs__conf_put(conf, t, who, own, "group.instance.id", s->static_id, NULL);
    if (!err) err = cs__conf_put(conf, t, who, own, "enable.auto.commit", auto_mode ? "true" : "false", NULL);
    /* Auto too: the fetch thread stores the offset of the last record it
     * hands out (fetch_handout.c), never of records waiting in the store. */
    if (!err) err = cs__conf_put(conf, t, who, own, "enable.auto.offset.store", "false", NULL);
    if (!err)
        err = cs__conf_put(conf, t, who, own, "auto.offset.reset", s->start == CS_START_LATEST ? "latest" : "earliest",
                           NULL);
    if (!err) err = cs__conf_put(conf, t, who, own, "enable.partition.eof", "false", NULL);
    /* Transactional: a new owner must not read a position an older owner's
     * transaction is still committing; librdkafka 2.0.2 asks the broker for
     * stable offsets (KIP-447) only for read_committed consumers. */
    if (!err && s->mode == CS_COMMIT_TRANSACTIONAL)
        err = cs__conf_put(conf, t, who, own, "isolation.level", "read_committed", NULL);
    return err;
}

/* A token for OAUTHBEARER (librdkafka's background thread, oauth.c). */
static void on_oauth_refresh(rd_kafka_t *rk, const char *config, void *opaque) {
    cs_consumer *c = opaque;
    cs__oauth_refresh(c->sub->k, rk, config, c->who);
}

cs_err cs__consumer_build_conf(cs_sub *s, cs_app *app, cs_consumer *c, rd_kafka_conf_t **out) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    cs_err err = cs__consumer_conf_layers(s, app, c->who, conf, NULL);
    if (err) {
        rd_kafka_conf_destroy(conf);
        return err;
    }
    c->rdk_bound.bytes = conf_size(conf, "queued.max.messages.kbytes") * 1024;
    c->rdk_bound.records = conf_size(conf, "queued.min.messages");
    rd_kafka_conf_set_opaque(conf, c);
    rd_kafka_conf_set_rebalance_cb(conf, cs__rebalance_cb);
    rd_kafka_conf_set_offset_commit_cb(conf, cs__commit_on_offset_commit);
    rd_kafka_conf_set_error_cb(conf, cs__consumer_on_error);
    rd_kafka_conf_set_stats_cb(conf, cs__consumer_on_stats);
    cs__oauth_conf(s->k, conf, on_oauth_refresh);
    rd_kafka_conf_set_log_cb(conf, cs__rdkafka_log);
    *out = conf;
    return CS_OK;
}
