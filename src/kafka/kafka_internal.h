/* kafka_internal.h — the Kafka broker's own structures. Only files under
 * src/kafka include librdkafka. Configuration fields are written before start
 * (by the configuring thread) and read-only afterwards.
 *
 * Owns: declares cs_kafka and cs_sub (kafka.c and subscription.c make and free
 * them) and the types the broker's files share. Locks: none here; it declares
 * cs_sub.stats_lock (level 2), cs_kafka.producer_lock (a rwlock) and
 * cs_client_stats.lock (a leaf); the publish counters are atomics. Threads:
 * configuration on the configuring thread before start; each declaration
 * says its own thread. */
#ifndef CS_KAFKA_INTERNAL_H
#define CS_KAFKA_INTERNAL_H

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "cstream/database.h"
#include "cstream/kafka.h"
#include "cstream/publish.h"
#include "core/broker.h"
#include "base/log.h"
#include "base/metrics.h"

/* An ordered list of librdkafka properties (later settings of a key win). */
typedef struct cs_kvlist {
    char **keys, **values;
    size_t n;
} cs_kvlist;
cs_err cs__kvlist_set(cs_kvlist *l, const char *key, const char *value);
void cs__kvlist_free(cs_kvlist *l);

/* Checks one property with librdkafka. `who` names the caller in the message
 * (e.g. "cs_sub_config(payouts)"); `owned_by_mode` refuses the commit-mode keys. */
cs_err cs__conf_check(const char *who, const char *key, const char *value);
/* librdkafka 2.12.0: the KIP-848 consumer group protocol is GA (it came as a
 * preview in 2.4.0, which cstream does not offer). */
#define CS_RDKAFKA_HAS_CONSUMER_PROTOCOL (RD_KAFKA_VERSION >= 0x020c0000)
/* CS_ERR_UNSUPPORTED, naming the librdkafka needed and the one found, when
 * `value` of group.protocol asks for the consumer protocol this build cannot
 * speak; CS_OK otherwise. */
cs_err cs__group_protocol_supported(const char *who, const char *value);
/* The broker's properties applied only under the classic protocol
 * (cs_kafka.classic_defaults), e.g. the test cluster's session timing. */
cs_err cs__kafka_classic_default(cs_kafka *k, const char *key, const char *value);
/* CS_ERR_ARG for a p that is no cs_group_protocol, else
 * cs__group_protocol_supported (the setters' shared check). */
cs_err cs__group_protocol_choice(const char *who, cs_group_protocol p);
/* Applies a list to conf; fails with the key and librdkafka's reason. */
cs_err cs__conf_apply(rd_kafka_conf_t *conf, const char *who, const cs_kvlist *l);
cs_err cs__conf_set(rd_kafka_conf_t *conf, const char *who, const char *key, const char *value);
/* cs__conf_set with `shown` in place of the value in its message (a value
 * read from a secret file is named by its path, never quoted). */
cs_err cs__conf_set_shown(rd_kafka_conf_t *conf, const char *who, const char *key, const char *value,
                          const char *shown);
/* cs__conf_check, the same: owned keys refused, librdkafka asked, `shown` in messages. */
cs_err cs__conf_check_shown(const char *who, const char *key, const char *value, const char *shown);
/* Whether a key's value is a secret (never logged, shown masked). */
bool cs__conf_secret_key(const char *key);

/* What a client's configuration was built from, for `config show`
 * (config_show.c): each key's value as shown (secrets masked) and the layer
 * that set it last. Building a client passes NULL. */
typedef struct cs_conf_trace {
    cs_kvlist values, sources;
} cs_conf_trace;
/* cs__conf_set_shown, then, with t, records key -> shown (masked if a secret
 * key) and its source. */
cs_err cs__conf_put(rd_kafka_conf_t *conf, cs_conf_trace *t, const char *who, const char *source, const char *key,
                    const char *value, const char *shown);
/* cs__conf_apply, recording into t (may be NULL) with `source`. */
cs_err cs__conf_apply_traced(rd_kafka_conf_t *conf, const char *who, const cs_kvlist *l, const char *source,
                             cs_conf_trace *t);
void cs__conf_trace_free(cs_conf_trace *t);

/* ---- the operator's layers (config_sources.c) ---------------------------------
 * A properties file (--config, else CSTREAM_CONFIG), CSTREAM_KAFKA_*
 * variables and -X flags: above the code's properties, in that order. */
typedef enum cs_conf_rank { CS_CONF_FILE = 1, CS_CONF_ENV, CS_CONF_FLAG } cs_conf_rank;
typedef enum cs_conf_role { CS_CONF_ALL, CS_CONF_CONSUMER, CS_CONF_PRODUCER, CS_CONF_SUB } cs_conf_role;
typedef struct cs_conf_entry {
    cs_conf_rank rank;
    cs_conf_role role;
    char *source; /* "config file F:12", "environment CSTREAM_KAFKA_X", "-X k": messages name it */
    char *key;    /* the librdkafka property; CS_CONF_SUB: NULL until bound */
    char *value;
    char *secret_path; /* the value was read from this file (@path, _FILE), else NULL */
    /* CS_CONF_SUB: what follows "subscription." (file, flag) or
     * "CSTREAM_KAFKA_SUBSCRIPTION_" (env_form), and the subscription it
     * names once bound (cs__ext_bind). */
    char *target;
    bool env_form;
    const cs_sub *sub;
} cs_conf_entry;
typedef struct cs_conf_ext {
    char *file;   /* --config; NULL: CSTREAM_CONFIG */
    char **flags; /* -X "key=value", in order */
    size_t n_flags;
    bool loaded, bound;
    cs_conf_entry *e; /* by rank, each source in its order (variables by name) */
    size_t n;
} cs_conf_ext;
/* cs_app_main's --config and -X (the broker's set_external op); a later load reads them. */
cs_err cs__ext_set_cli(cs_conf_ext *x, const char *file, char *const *flags, size_t n_flags);
void cs__ext_free(cs_conf_ext *x);
/* librdkafka's log lines into cstream's log. */
void cs__rdkafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf);

/* The librdkafka in use (library.c). RD_KAFKA_VERSION of the headers cstream
 * was built with; both versions as text ("2.14.2"), cap bytes each; a
 * run-time library older than the headers refused (CS_ERR_UNSUPPORTED, both
 * versions named). Any thread. */
int cs__rdkafka_built_version(void);
/* Leader epochs on messages and partition lists (rd_kafka_message_leader_epoch,
 * rd_kafka_topic_partition_set_leader_epoch), from librdkafka 2.1.0 (KIP-320).
 * A compile-time test suffices: cs_app_start refuses a run-time library
 * older than the headers. */
#define CS_RDKAFKA_HAS_EPOCHS (RD_KAFKA_VERSION >= 0x020100ff)
void cs__rdkafka_versions(char *built, char *running, size_t cap);
cs_err cs__rdkafka_check_version(const char *who, int built, int running);

typedef struct cs_embedded cs_embedded;
cs_err cs__embedded_new(int brokers, cs_embedded **out);
const char *cs__embedded_bootstraps(const cs_embedded *e);
cs_err cs__embedded_topic(cs_embedded *e, const char *topic, int partitions);
void cs__embedded_destroy(cs_embedded *e);
/* The mock cluster itself, for the test API's fault injection (testing.c). */
typedef struct rd_kafka_mock_cluster_s rd_kafka_mock_cluster_t;
rd_kafka_mock_cluster_t *cs__embedded_mock(cs_embedded *e);
/* Disconnects the (single) broker and refuses connections, or lets them in again. */
cs_err cs__embedded_set_down(cs_embedded *e, bool down);
cs_err cs__embedded_topic_error(cs_embedded *e, const char *topic, int kafka_error);

/* Publish metrics by kind of record, written by the producer (enqueue
 * refusals, delivery reports) without a lock, read by /metrics. */
typedef enum cs_publish_kind {
    CS_PUB_PUBLISH,
    CS_PUB_ASYNC,
    CS_PUB_REPLY,
    CS_PUB_DEAD_LETTER,
    CS_PUB_KINDS
} cs_publish_kind;
typedef struct cs_publish_stats {
    _Atomic uint64_t errors[CS_PUB_KINDS];
    cs_histogram latency[CS_PUB_KINDS]; /* enqueue to delivery report, successful or not */
} cs_publish_stats;

typedef struct cs_consumer cs_consumer;
typedef struct cs_producer cs_producer;

/* oauth.c: hooks the broker's token provider, if it has one, into a
 * client's configuration; `refresh` is the client's own trampoline, which
 * finds k from its opaque and calls cs__oauth_refresh. The refresh runs on
 * librdkafka's background thread once cs__oauth_started enabled it on the new
 * handle (a client that is not polled yet, like the start's metadata check,
 * still gets its token). */
void cs__oauth_conf(const cs_kafka *k, rd_kafka_conf_t *conf,
                    void (*refresh)(rd_kafka_t *rk, const char *config, void *opaque));
/* Right after rd_kafka_new of a client configured by cs__oauth_conf;
 * CS_ERR_KAFKA naming `who` if librdkafka cannot serve the refresh. */
cs_err cs__oauth_started(const cs_kafka *k, rd_kafka_t *rk, const char *who);
void cs__oauth_refresh(cs_kafka *k, rd_kafka_t *rk, const char *config, const char *who);

/* client_stats.c: the numbers of a client's librdkafka statistics that
 * /metrics shows (per broker round-trip and throttle time, the producer's
 * queue or the consumer's fetch queue). Written from the handle's callback
 * thread once per statistics interval, read by /metrics; `lock` is a leaf,
 * held only to swap or copy the numbers. */
/* How often librdkafka reports a client's statistics: the lag metric's last
 * stable offsets (consumer_metrics.c) and the numbers above. */
#define CS_STATS_INTERVAL_MS "1000"
/* fetch.queue.backoff.ms from librdkafka 2.2.0 on (consumer_conf.c says why). */
#define CS_FETCH_QUEUE_BACKOFF_MS "5"
typedef struct cs_broker_stat cs_broker_stat;
typedef struct cs_client_stats {
    pthread_mutex_t lock;
    bool seen; /* a report came since init or the last clear */
    cs_broker_stat *brokers;
    size_t n_brokers;
    int64_t queue_records, queue_bytes; /* producer: msg_cnt, msg_size; consumer: its fetch queue */
} cs_client_stats;
void cs__client_stats_init(cs_client_stats *s);
/* Forgets the numbers (a client that stopped has no queue). */
void cs__client_stats_clear(cs_client_stats *s);
void cs__client_stats_destroy(cs_client_stats *s);
/* Takes the numbers of one statistics report (root may be NULL: ignored). */
void cs__client_stats_update(cs_client_stats *s, yajl_val root, bool producer);
/* Parses a producer's report into s; librdkafka's stats callback returns it. */
int cs__client_stats_from_json(cs_client_stats *s, const char *json);
/* The series: a consumer's if `sub` (its subscription and group), else the
 * producer's. Nothing until a report came. */
void cs__client_stats_metrics(cs_client_stats *s, cs_metrics *m, const char *sub, const char *group);

/* producer.c: one per broker, started before the consumers. */
cs_err cs__producer_start(cs_kafka *k, cs_app *app, cs_producer **out);
/* A blocking publish in two steps: start (enqueue, under the producer read
 * lock) and finish (wait for the report, without it), so that a stop never
 * waits on a publisher; the stop's purge reports its record and ends the wait. */
typedef struct cs_publish_wait cs_publish_wait;
cs_err cs__publish_start(cs_producer *p, const cs_record *r, cs_publish_wait **out);
cs_err cs__publish_finish(cs_publish_wait *w, const char *topic, cs_published *out);
cs_err cs__producer_publish_async(cs_producer *p, const cs_record *r, cs_publish_fn fn, void *opaque);
/* Headers of a dead-letter record (src/kafka/producer/dead_letter.c): d's readable,
 * named headers in order, then the CS_DLQ_HEADERS provenance headers. h has
 * room for cap >= cs_delivery_header_count(d) + CS_DLQ_HEADERS entries; their
 * names and values point into d, group, reason and *nums, which must outlive h.
 * Returns the headers written (0 if cap < CS_DLQ_HEADERS). */
#define CS_DLQ_HEADERS 7
typedef struct cs_dlq_numbers {
    char partition[16], offset[24], timestamp[24], attempts[16];
} cs_dlq_numbers;
size_t cs__dead_letter_headers(const cs_delivery *d, const char *group, const char *reason, cs_header *h, size_t cap,
                               cs_dlq_numbers *nums);
/* The WARN line of a dead letter: `what` (CS_DLQ_SENT or CS_DLQ_STAGED), the
 * subscription, where the record came from, its attempts, the dead-letter
 * topic and the reason; at most one line per interval per `rl` (a line the
 * limiter drops is not even formatted). d must still be the caller's: under
 * Tracked the delivery report calls it before it settles d. */
#define CS_DLQ_SENT "record sent to the dead-letter topic"
#define CS_DLQ_STAGED "record staged for the dead-letter topic in the window's transaction"
void cs__dead_letter_log(cs_ratelimit *rl, const char *what, const char *sub, const char *dead_letter_topic,
                         const cs_delivery *d, const char *reason);
/* A record's headers as librdkafka's (NULL for none); the caller owns them
 * until rd_kafka_producev takes them. Names are C strings; a NULL value is a
 * header with a null value. */
rd_kafka_headers_t *cs__headers_new(const cs_header *h, size_t n);
/* Dead-letter record of `source`: its report settles the source. When the
 * cluster accepted it, the report logs CS_DLQ_SENT for `sub` (NULL: no line)
 * with `reason` (copied: it may be the caller's buffer). */
cs_err cs__producer_dead_letter(cs_producer *p, const cs_record *r, cs_delivery *source, int queue_timeout_ms,
                                cs_sub *sub, const char *reason);
/* gated_source NULL: fire and forget (Auto); else its report settles the source. */
cs_err cs__producer_reply(cs_producer *p, const cs_record *r, cs_delivery *gated_source, int queue_timeout_ms);
/* Waits up to timeout_ms for every record to be delivered; returns how many were not. */
size_t cs__producer_flush(cs_producer *p, int timeout_ms);
void cs__producer_close(cs_producer *p);

/* cs_sub_start_at_offset: one partition's start when its group has no committed offset. */
typedef struct cs_start_offset {
    char *topic;
    int32_t partition;
    int64_t offset;
} cs_start_offset;
/* The most partitions cs_sub_start_at_offset takes per subscription: the
 * list is searched linearly at every assignment. */
#define CS_START_OFFSETS_MAX 4096
/* cs_sub_start_at_time unset. */
#define CS_START_TIME_NONE ((int64_t)-1)

struct cs_sub {
    cs_kafka *k;
    char *name; /* topics joined by ',' for log lines */
    /* Its consumer's group.instance.id while it runs with an instance id
     * (consumer.c, static_member_id), else NULL. */
    char *static_id;
    /* cs_sub_group_protocol, when called; and the protocol the consumer was
     * configured with, resolved from every layer (consumer_conf.c). */
    bool group_protocol_set;
    cs_group_protocol group_protocol;
    bool consumer_protocol;
    char **topics;
    size_t n_topics;
    cs_handler_fn handler; /* one of handler, batch_handler */
    cs_batch_fn batch_handler;
    size_t max_batch;
    const cs_codec *codec;
    const cs_type *type;
    const cs_codec *key_codec; /* cs_sub_decode_key, or NULL */
    const cs_type *key_type;
    void *user;
    char *group;
    /* cs_sub_partitions: the partitions of every topic it reads without a
     * group rebalance (manual assignment), else NULL (a subscribe). */
    int32_t *partitions;
    size_t n_partitions;
    cs_kvlist config;
    cs_start start;
    /* Start positions for partitions without a committed offset (start_position.c). */
    cs_start_offset *start_offsets;
    size_t n_start_offsets;
    int64_t start_time_ms; /* CS_START_TIME_NONE, or ms since the epoch */
    /* cs_kafka_subscribe_pattern: topics[0] is the pattern (n_topics 1) and
     * topic_re its compilation, for the dead-letter and reply checks and the
     * per-topic counters (consumer_errors.c). */
    bool pattern;
    regex_t topic_re;
    bool allow_missing; /* cs_sub_allow_missing_topics: not checked at start */
    cs_commit_mode mode;
    cs_db *db; /* Database mode: the service's database (borrowed; cs_sub_commit_database) */
    cs_lane_key lanes;
    int workers;
    size_t max_open;
    size_t fetch_buffer_bytes; /* the consumer-wide store budget */
    int commit_interval_ms;    /* 0: the commit mode's default */
    size_t window_records;     /* Transactional */
    int stall_timeout_ms;      /* Transactional */
    int drain_timeout_ms;
    int handler_time_limit_ms;
    cs_partitions_fn on_assign, on_revoke;
    void *on_assign_user, *on_revoke_user;
    char *reply_topic;            /* cs_sub_reply, or NULL */
    char *dead_letter;            /* cs_sub_dead_letter, or NULL */
    cs_ratelimit dead_letter_log; /* the "sent to the dead-letter topic" lines, any thread */
    int max_attempts;
    bool acked_set; /* cs_sub_acked_set */
    int reply_queue_timeout_ms;
    cs_consumer *consumer;    /* while running */
    cs_sub_stats final_stats; /* counters kept when the consumer closes */
    /* Lock order: level 2 (src/lock_order.h), after cli.c's ops lock,
     * before the consumer's commit_lock and the pipeline's locks. Guards
     * `consumer` and `final_stats` for readers on other threads (the
     * lifecycle thread is their only writer): cs_sub_stats_get,
     * cs_sub_rdkafka_consumer and /metrics read under it, which keeps the
     * consumer from being freed meanwhile. Held only for those reads and for
     * the swap to the final counters (retire_consumer), never across a close,
     * a crash's joins or a hook: the close blocks on the group and runs the
     * on_revoke hook, which may read the stats on the same thread. */
    pthread_mutex_t stats_lock;
};

typedef struct topic_decl {
    char *name;
    int partitions;
} topic_decl;

struct cs_kafka {
    char *bootstrap; /* configured, or the embedded cluster's once it runs */
    bool embedded;
    char *default_group;
    char *instance_id; /* cs_kafka_instance_id, else CSTREAM_INSTANCE_ID at start */
    /* The cluster is librdkafka's mock (the embedded one, or a test cluster
     * given to cs_test_kafka_new): no static membership there (consumer.c). */
    bool mock;
    cs_kvlist config;
    /* cs_kafka_group_protocol, when called. */
    bool group_protocol_set;
    cs_group_protocol group_protocol;
    /* cs_kafka_profile: its properties sit just above cstream's defaults (profile.c). */
    cs_profile profile;
    /* Properties cstream sets below everything else only when a consumer
     * runs the classic protocol (cs_test_kafka_new's session timing): the
     * consumer protocol refuses them (consumer_conf.c). */
    cs_kvlist classic_defaults;
    topic_decl *topics;
    size_t n_topics;
    cs_sub **subs;
    size_t n_subs;
    cs_app *app;  /* set when added to an app */
    bool started; /* start() succeeded and stop() has not run */
    cs_embedded *cluster;
    cs_kvlist producer_config;
    cs_conf_ext ext; /* the operator's layers (config_sources.c) */
    int queue_timeout_ms;
    int flush_timeout_ms;
    _Atomic size_t unflushed_records; /* written by stop, read by /metrics */
    cs_publish_stats pub_stats;       /* outlives the producer: /metrics reads it */
    cs_client_stats producer_stats;   /* the producer's librdkafka statistics; outlives it too */
    cs_oauth_token_fn oauth_fn;       /* cs_kafka_oauthbearer_token_cb (oauth.c); NULL: none */
    void *oauth_user;
    /* The producer while running. Publishers hold the read lock while they use
     * it; stop takes the write lock to retire it. Lock order: a leaf but for
     * the producer's own lock, taken under the read side to wait for queue
     * space (at most the queue timeout; src/lock_order.h). */
    pthread_rwlock_t producer_lock;
    cs_producer *producer;
};

/* config_sources.c: reads and checks the file, the variables and the flags
 * once (CS_ERR_CONFIG naming the source; nothing kept on failure); entries
 * for a subscription wait for cs__ext_bind. The configuring or lifecycle
 * thread, before start. */
cs_err cs__ext_load(cs_kafka *k);
/* Matches the subscription entries to k's subscriptions and checks them:
 * CS_ERR_CONFIG naming the source for one that names no subscription. */
cs_err cs__ext_bind(cs_kafka *k);
/* Applies the loaded layers, file < environment < flags, within each the
 * keys for every client, then those for `role` (CS_CONF_CONSUMER,
 * CS_CONF_PRODUCER; CS_CONF_ALL: none), then s's (a consumer's, if s), to
 * conf, recording into t (may be NULL). */
cs_err cs__ext_apply(rd_kafka_conf_t *conf, const cs_kafka *k, cs_conf_role role, const cs_sub *s, cs_conf_trace *t);

/* consumer_conf.c: the values a subscription runs with when the service set
 * none: its commit mode's default (src/kafka/defaults.h), else what it set. */
size_t cs__consumer_max_open(const cs_sub *s);
int cs__consumer_commit_interval_ms(const cs_sub *s); /* Tracked's commit timer, Transactional's window */

/* profile.c: puts the broker's profile properties that apply to a consumer
 * (producer false) or a producer into conf, recording them in t (may be NULL)
 * with the source "profile <name>"; nothing for CS_PROFILE_DEFAULT. */
cs_err cs__profile_apply(const cs_kafka *k, rd_kafka_conf_t *conf, cs_conf_trace *t, const char *who, bool producer);

/* config.c, for kafka.c's and subscription.c's setters: fails, naming `what`, for
 * a NULL broker (CS_ERR_ARG) or once the app has started (CS_ERR_STATE). */
cs_err cs__conf_configurable(const cs_kafka *k, const char *what);

/* The broker's asyncapi op (asyncapi.c): the app's AsyncAPI document, every
 * Kafka broker of the app included; app and result are not NULL (cs_app_asyncapi
 * checked them). */
cs_err cs__aa_document(cs_app *app, int yaml, char **result);
/* config.c, for kafka.c and subscription.c: replaces *slot with a copy of value
 * (*slot unchanged when out of memory). */
cs_err cs__conf_replace_string(char **slot, const char *value, const char *what);
/* Whether `topic` is one of s's topics, or matches its pattern. Inline:
 * the consumer's files and subscription.c both ask, and subscription.c
 * calls into the consumer (no call cycle, scripts/depgraph). Any thread
 * (the compiled pattern is read-only once configured). */
static inline bool cs__sub_has_topic(const cs_sub *s, const char *topic) {
    if (s->pattern) return regexec(&s->topic_re, topic, 0, NULL, 0) == 0;
    for (size_t i = 0; i < s->n_topics; i++)
        if (!strcmp(s->topics[i], topic)) return true;
    return false;
}
/* subscription.c: frees a subscription (cs_kafka_destroy; a failed subscribe). */
void cs__sub_free(cs_sub *s);

/* committed.c */
/* A consumer of `group` that never joins it, with k's properties for every
 * client and for consumers (code, then the loaded operator's layers; k NULL:
 * none). NULL with cs_errmsg set on failure. */
rd_kafka_t *cs__committed_reader(const char *brokers, const char *group, cs_kafka *k);
cs_err cs__read_committed(rd_kafka_t *rk, const char *group, const char *topic, int32_t partition, int64_t *offset);

/* publish.c: the pipeline's reply hook for a subscription (arg: the cs_sub). */
int cs__publish_reply(void *arg, cs_delivery *d, bool gate, const void *key, size_t key_len, const void *value,
                      size_t value_len);

/* The pipeline's dead-letter hook for a subscription (arg: the cs_sub). */
int cs__publish_dead_letter(void *arg, cs_delivery *d, const char *reason);

/* Transactional: the dead-letter output of d, and whether a handler may
 * publish to `topic` (pipeline hooks; arg: the cs_sub). */
#include "core/output.h"
cs_output *cs__publish_dead_letter_output(void *arg, cs_delivery *d, const char *reason);
bool cs__publish_output_topic_ok(void *arg, const char *topic);

/* Checks that every topic exists on the cluster rk talks to. */
cs_err cs__topics_exist(rd_kafka_t *rk, const char *who, char *const *topics, size_t n);

/* Manual assignment: every topic exists and has every partition (CS_ERR_TOPIC
 * naming the topic and the partition otherwise). */
cs_err cs__partitions_exist(rd_kafka_t *rk, const char *who, char *const *topics, size_t n_topics,
                            const int32_t *partitions, size_t n);

/* reset.c: cs_broker_ops.reset_offsets (impl: the cs_kafka). */
cs_err cs__kafka_reset_offsets(void *impl, const cs_broker_reset *req, cs_broker_reset_row **rows, size_t *n_rows);

/* What the start-up check's client heard through error_cb. */
typedef struct cs_conn_watch {
    int refused;           /* RD_KAFKA_RESP_ERR__AUTHENTICATION or __SSL, first one heard; 0 if none */
    char refused_why[512]; /* librdkafka's reason for it (names the broker; holds no password) */
    char last_why[512];    /* the last other client error, for a timeout's message */
    cs_kafka *oauth_k;     /* whose OAUTHBEARER token provider the client uses (oauth.c), if any */
} cs_conn_watch;
/* Sets w as conf's opaque and the error_cb that fills it. */
void cs__conn_watch_install(rd_kafka_conf_t *conf, cs_conn_watch *w);
/* cs__topics_exist for cs_app_start, on a client made with
 * cs__conn_watch_install: fails with CS_ERR_AUTH as soon as the cluster
 * refuses the SASL login or the TLS handshake fails (the message names `who`,
 * the protocol, mechanism and user, or the CA file), else with CS_ERR_KAFKA
 * when no metadata came within timeout_ms. */
cs_err cs__topics_start_check(rd_kafka_t *rk, const char *who, cs_conn_watch *w, char *const *topics, size_t n,
                              int timeout_ms);

/* consumer.c: the consumers' topic.metadata.refresh.interval.ms unless
 * configured: how soon a subscription notices partitions added to its topics
 * or a topic deleted under it (librdkafka's own default is 300000). */
#define CS_METADATA_REFRESH_MS "30000"
/* consumer_conf.c, at start before anything connects: refuses (CS_ERR_CONFIG,
 * naming drain_timeout_ms and max.poll.interval.ms with both values) a
 * subscription in a group whose drain timeout is not shorter than its
 * consumer's effective max.poll.interval.ms. */
cs_err cs__consumer_check_drain_timeout(cs_sub *s, cs_app *app);
/* consumer_conf.c: every property of s's consumer but its callbacks, into
 * conf, each key's source into t (may be NULL; config_show.c). `who` names
 * the client in messages. */
cs_err cs__consumer_conf_layers(cs_sub *s, cs_app *app, const char *who, rd_kafka_conf_t *conf, cs_conf_trace *t);
/* "consumer" or "classic": the group protocol s joins with (while running) or
 * would join with (what its layers select; classic when they cannot be read). */
const char *cs__consumer_protocol_name(cs_sub *s, cs_app *app);
/* How logs, /metrics and the AsyncAPI document name a group protocol. */
static inline const char *cs__protocol_label(bool consumer) { return consumer ? "consumer" : "classic"; }
/* producer.c: every property of k's producer but its callbacks, the same way. */
cs_err cs__producer_conf_layers(const cs_kafka *k, cs_app *app, rd_kafka_conf_t *conf, cs_conf_trace *t);
/* config_show.c: the broker's show_config op (core/broker.h). */
cs_err cs__kafka_show_config(void *impl, cs_app *app, FILE *out);
/* consumer.c: one per subscription, started after the topic checks. */
cs_err cs__consumer_start(cs_sub *s, cs_app *app, cs_consumer **out);
/* The graceful stop, in steps that kafka.c runs for every subscription
 * before the next step of any (the stop's thread, no lock held):
 * _tell_stop asks the fetch thread to stop, without waiting; _stop_fetching
 * joins it (it finishes a revoke under way first); _drain_begin starts the
 * drain with the deadline from_ms + the subscription's drain_timeout_ms and
 * returns at once; _drain_wait waits for it (handlers run to their end, the
 * pending deliveries until that deadline) and logs what stays open. All
 * drains run together and count from the same moment: the stop takes the
 * longest drain_timeout_ms, not their sum. */
void cs__consumer_tell_stop(cs_consumer *c);
void cs__consumer_stop_fetching(cs_consumer *c);
void cs__consumer_drain_begin(cs_consumer *c, int64_t from_ms);
void cs__consumer_drain_wait(cs_consumer *c);
/* Commits what is settled, detaches pending deliveries (they keep their
 * records, copies in the store) and closes the consumer (blocks
 * on the group; the revoke callback runs the on_revoke hook on this thread).
 * Call it with no lock held. c stays readable (cs__consumer_stats,
 * cs__consumer_metrics) until cs__consumer_destroy, which frees it. */
void cs__consumer_close(cs_consumer *c);
void cs__consumer_destroy(cs_consumer *c);
/* Tests: destroy without committing or closing. */
void cs__consumer_crash(cs_consumer *c);
int cs__consumer_idle(cs_consumer *c);
/* Joined its group (empty assignment included), no fatal error, a broker answers. */
int cs__consumer_ready(cs_consumer *c, int probe_ms);
void cs__consumer_stats(cs_consumer *c, cs_sub_stats *out);
/* cs_sub_stats begins with the core's counters (core/broker.h,
 * cs_broker_sub_counters): these copy them across, member by member. */
static inline void cs__sub_stats_set_counters(cs_sub_stats *out, const cs_broker_sub_counters *c) {
#define CS__COPY(m) out->m = c->m;
    CS__BROKER_SUB_COUNTERS(CS__COPY)
#undef CS__COPY
}
static inline void cs__sub_stats_counters(const cs_sub_stats *st, cs_broker_sub_counters *out) {
#define CS__COPY(m) out->m = st->m;
    CS__BROKER_SUB_COUNTERS(CS__COPY)
#undef CS__COPY
}
/* Commit ticks completed so far (see cs_test_sub_commit_ticks). */
uint64_t cs__consumer_commit_ticks(cs_consumer *c);
/* Test hooks (cs_test_sub_sheds, cs_test_sub_moves_back,
 * cs_test_sub_fail_refetches). Any thread. */
uint64_t cs__consumer_sheds(cs_consumer *c);
uint64_t cs__consumer_moves_back(cs_consumer *c);
uint64_t cs__consumer_taken(cs_consumer *c);
void cs__consumer_fail_refetches(cs_consumer *c, unsigned n);
/* Assigned partitions the application paused now. Any thread. */
uint64_t cs__consumer_paused(cs_consumer *c);
/* /metrics (the scraping thread, with the subscription's stats lock held). */
void cs__consumer_metrics(cs_consumer *c, cs_metrics *m, const char *sub, const char *group);
rd_kafka_t *cs__consumer_handle(cs_consumer *c);

#endif
