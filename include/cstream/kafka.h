/** @file
 * cstream/kafka.h — the Kafka broker: clients, subscriptions, commit modes.
 *
 * A cs_kafka describes how to reach a cluster and what to consume. Brokers come
 * from cs_kafka_new(), else from CSTREAM_BROKERS in the environment, else the
 * app starts the embedded cluster (librdkafka's in-process mock; data lives in
 * this process only) and says so at start-up.
 *
 * Every property is checked with librdkafka when it is set: an unknown or
 * invalid one fails at once with the key and librdkafka's reason.
 *
 * Configuration calls (every cs_kafka_* and cs_sub_* setter here) are made on
 * the configuring thread before cs_app_start, like the app's. Each copies
 * what it is given, and each fails with CS_ERR_ARG for a NULL broker or
 * subscription and with CS_ERR_STATE once the app the broker belongs to has
 * started; cs_errmsg() names the call, the subscription and the value. */
#ifndef CSTREAM_KAFKA_H
#define CSTREAM_KAFKA_H

#include "cstream/export.h"

#include <stddef.h>
#include <stdint.h>

#include "cstream/app.h"
#include "cstream/codec.h"
#include "cstream/delivery.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A subscription (opaque): a handler on one or more topics. Created by
 * cs_kafka_subscribe*, owned and freed by its broker. */
typedef struct cs_sub cs_sub;

/** How settlements become committed positions (cs_sub_commit_mode; default Auto). */
typedef enum cs_commit_mode {
    /** librdkafka's own commits: the position is stored when the record is
     * handed out and committed on a timer. ack/drop do nothing; retry is
     * reported unsupported and the record does not come back. */
    CS_COMMIT_AUTO = 0,
    /** Precise at-least-once: the committed position is the lowest record still
     * open; retry brings the record back before anything fetched after it. */
    CS_COMMIT_TRACKED,
    /** Exactly-once consume-transform-produce: settles like Tracked, and the
     * outputs of the handlers (replies, cs_delivery_publish, dead letters)
     * and the consumed positions commit together in one Kafka transaction per
     * window, so a read_committed consumer of the outputs sees each of them
     * exactly once, across crashes. Needs an instance id
     * (cs_kafka_instance_id). See docs/transactions.md. */
    CS_COMMIT_TRANSACTIONAL,
    /** Exactly-once into a database: settles like Tracked, and the
     * handlers' writes and the consumed positions commit together in one
     * database transaction per window, the positions fenced by an owner
     * epoch. Set with cs_sub_commit_database (cstream/database.h). See
     * docs/database.md. */
    CS_COMMIT_DATABASE,
} cs_commit_mode;

/** Where a group without a committed offset starts (cs_sub_start_at). */
typedef enum cs_start {
    CS_START_EARLIEST = 0, /**< at the oldest record still in the partition (the default) */
    CS_START_LATEST        /**< after the newest: only records written from now on */
} cs_start;

/** bootstrap_servers may be NULL: then CSTREAM_BROKERS, else the embedded cluster.
 *
 * At cs_app_start the broker also reads the operator's configuration, above
 * the code's cs_kafka_config / cs_kafka_producer_config / cs_sub_config: the
 * properties file named by CSTREAM_CONFIG (or cs_app_main's --config), then
 * the CSTREAM_KAFKA_* variables (then cs_app_main's -X flags); each is
 * checked like those calls, and a bad one fails the start with
 * CS_ERR_CONFIG naming the file and line, variable or flag (docs/guide.md,
 * "Configuration from a file, the environment and the command line").
 *
 * The caller owns the broker until cs_app_add_kafka hands it to an app (then
 * the app frees it); one never added is freed with cs_kafka_destroy.
 * Configuring thread.
 * @param bootstrap_servers "host:port,..." (copied); NULL or "" to fall back
 *        as above.
 * @return the new broker, or NULL when out of memory (CS_ERR_NOMEM in
 *         cs_errmsg()). */
CS_API cs_kafka *cs_kafka_new(const char *bootstrap_servers);
/** Only for a broker never added to an app (the app owns and frees the others).
 *
 * Frees its subscriptions too. Configuring thread.
 * @param k the broker; NULL does nothing. */
CS_API void cs_kafka_destroy(cs_kafka *k);

/** The app takes ownership of k (do not destroy it yourself).
 *
 * On success the app frees k in cs_app_destroy; on failure k stays the
 * caller's (cs_kafka_destroy). Configuring thread, before cs_app_start.
 * @param app the app.
 * @param k the broker, from cs_kafka_new or cs_test_kafka_new.
 * @retval CS_OK the app owns k.
 * @retval CS_ERR_ARG app or k is NULL.
 * @retval CS_ERR_STATE k already belongs to an app, or the app has started.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_app_add_kafka(cs_app *app, cs_kafka *k);

/** The consumer group of every subscription that sets none (cs_sub_group).
 *
 * Start-up fails with CS_ERR_GROUP for a subscription without either.
 * @param k the broker.
 * @param group the group id (copied).
 * @retval CS_OK set.
 * @retval CS_ERR_ARG k is NULL or group is NULL or empty.
 * @retval CS_ERR_STATE the app has started.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_kafka_default_group(cs_kafka *k, const char *group);
/** A librdkafka property for every client (consumers and producer).
 *
 * Checked with librdkafka at once; properties cstream owns (group.id,
 * bootstrap.servers, enable.auto.commit, enable.auto.offset.store,
 * group.instance.id, auto.offset.reset, enable.partition.eof) are refused
 * with the call that sets them instead. The value of a key that looks secret
 * (password, secret, jaas, token, ...) never goes into a message. The
 * operator's file, CSTREAM_KAFKA_* variables and -X flags override it at
 * start (see cs_kafka_new).
 * @param k the broker.
 * @param key the property name.
 * @param value its value (both copied).
 * @retval CS_OK set.
 * @retval CS_ERR_ARG k is NULL, key is empty or value is NULL.
 * @retval CS_ERR_CONFIG librdkafka rejects the key or value, or cstream owns it.
 * @retval CS_ERR_UNSUPPORTED the property needs a newer librdkafka.
 * @retval CS_ERR_STATE the app has started.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_kafka_config(cs_kafka *k, const char *key, const char *value);
/** The consumer group protocol a group's members speak (librdkafka's
 * group.protocol). */
typedef enum cs_group_protocol {
    /** The classic protocol (JoinGroup/SyncGroup): the members compute the
     * assignment; eager or cooperative by partition.assignment.strategy. The
     * default, on every librdkafka. */
    CS_GROUP_PROTOCOL_CLASSIC = 0,
    /** The next-generation protocol (KIP-848, group.protocol=consumer): the
     * broker computes the assignment (group.remote.assignor) and hands
     * partitions over incrementally. Needs librdkafka >= 2.12.0 and a broker
     * that offers it (Kafka 4.0 and later by default). Under it the classic
     * group properties session.timeout.ms, heartbeat.interval.ms,
     * partition.assignment.strategy and group.protocol.type are refused at
     * start, naming the broker setting that replaces each. */
    CS_GROUP_PROTOCOL_CONSUMER = 1
} cs_group_protocol;

/** The group protocol of every subscription of this broker (default
 * CS_GROUP_PROTOCOL_CLASSIC).
 *
 * It sets librdkafka's group.protocol below the properties of
 * cs_kafka_config, cs_sub_group_protocol and cs_sub_config, and below the
 * operator's layers, so a deployment switches without recompiling
 * (`-X group.protocol=consumer`, CSTREAM_KAFKA_GROUP_PROTOCOL=consumer, a
 * `group.protocol=consumer` line in the properties file). Under the consumer
 * protocol cstream sets none of the classic-only properties itself (the
 * test helper cs_test_kafka_new's timings included). The broker's assignor
 * is chosen with the property group.remote.assignor (cs_kafka_config).
 * Configuring thread, before cs_app_start.
 * @param k the broker.
 * @param p the protocol.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG k is NULL or p is not a cs_group_protocol.
 * @retval CS_ERR_UNSUPPORTED p is CS_GROUP_PROTOCOL_CONSUMER and cstream was
 *         built with a librdkafka older than 2.12.0 (the message names both
 *         versions).
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_kafka_group_protocol(cs_kafka *k, cs_group_protocol p);
/** A librdkafka property for the producer only (enable.idempotence, acks,
 * linger.ms, compression.type, ...).
 *
 * Checked and refused like cs_kafka_config.
 * @param k the broker.
 * @param key the property name.
 * @param value its value (both copied).
 * @retval CS_OK set.
 * @retval CS_ERR_ARG k is NULL, key is empty or value is NULL.
 * @retval CS_ERR_CONFIG librdkafka rejects the key or value, or cstream owns it.
 * @retval CS_ERR_UNSUPPORTED the property needs a newer librdkafka.
 * @retval CS_ERR_STATE the app has started.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_kafka_producer_config(cs_kafka *k, const char *key, const char *value);

/** A named set of librdkafka properties chosen for one goal (cs_kafka_profile). */
typedef enum cs_profile {
    /** librdkafka's and cstream's defaults: batches formed for throughput
     * (the producer lingers 5 ms, an idle fetch waits up to 500 ms). */
    CS_PROFILE_DEFAULT = 0,
    /** Records handed on as soon as they exist: the producer waits 1 ms for
     * a batch (linger.ms=1; 0 would send a request per record, which a broker
     * serves more slowly than small batches at a few thousand records a
     * second), an idle fetch returns after at most 10 ms
     * (fetch.wait.max.ms=10, fetch.min.bytes=1) and no socket delays a small
     * request (socket.nagle.disable=true). Costs more requests, so more
     * broker and client CPU per record at high rates; the figures are in
     * docs/benchmarks.md, "Latency". Transactional replies are still
     * visible only when their window commits (cs_sub_commit_interval_ms). */
    CS_PROFILE_LOW_LATENCY = 1
} cs_profile;

/** Sets the properties of a profile for every client of this broker
 * (consumers, the producer and the transactional producers; each gets the
 * properties that apply to it).
 *
 * They sit just above cstream's own defaults: cs_kafka_config,
 * cs_kafka_producer_config, cs_sub_config and the operator's layers override
 * any one of them, and `config show` names "profile low-latency" as their
 * source. Calling it again replaces the profile. Configuring thread, before
 * cs_app_start.
 * @param k the broker.
 * @param p the profile.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG k is NULL or p is not a cs_profile.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_kafka_profile(cs_kafka *k, cs_profile p);

/** An OAUTHBEARER token, as a cs_oauth_token_fn hands it to cstream.
 *
 * The strings are borrowed: cstream copies them into librdkafka before the
 * callback's caller returns, so they must stay valid only until the callback
 * has returned (point them at storage the callback's `user` owns, not at the
 * callback's own locals). */
typedef struct cs_oauth_token {
    const char *value;     /**< the token the broker validates (e.g. a JWS compact serialization); not NULL */
    int64_t expires_ms;    /**< when it stops being valid, milliseconds since the Unix epoch; librdkafka asks
                                for a new one at 80 % of its remaining lifetime */
    const char *principal; /**< the principal it authenticates; not NULL */
    /** NULL, or SASL extensions (RFC 7628 3.1) as key, value pairs, followed
     * by a NULL key: {"traceId", "abc", NULL}. */
    const char *const *extensions;
} cs_oauth_token;

/** Supplies an OAUTHBEARER token when a client needs one: at its start, and
 * again before the last token expires (at 80 % of its lifetime).
 *
 * Runs on a librdkafka background thread, once per client: each consumer,
 * the producer and cs_app_start's metadata check authenticate on their own,
 * and their calls may overlap (make `fn` thread-safe). It may block while it
 * asks a token service, but that client cannot connect meanwhile: keep it to
 * a few seconds. Never call cstream's configuration setters from it.
 * @param k the broker whose client needs the token.
 * @param config the client's `sasl.oauthbearer.config` property (NULL when
 *        unset), for providers that take parameters from the configuration.
 * @param out where to put the token (zeroed before the call).
 * @param reason where to put why there is no token (NUL-terminated, at most
 *        reason_size bytes with the NUL), when returning an error.
 * @param reason_size the size of reason.
 * @param user the pointer given to cs_kafka_oauthbearer_token_cb.
 * @retval CS_OK `out` holds a token.
 * @retval other there is none: the client logs `reason`, fails its pending
 *         connections and calls again later (librdkafka retries every 10 s). */
typedef cs_err (*cs_oauth_token_fn)(cs_kafka *k, const char *config, cs_oauth_token *out, char *reason,
                                    size_t reason_size, void *user);

/** Sets the token provider of SASL/OAUTHBEARER for every client of the broker
 * (the subscriptions' consumers, the producer, transactional producers): for
 * cloud IAM tokens and custom token services. Without it, only librdkafka's
 * own providers work (its unsecured test tokens and, from librdkafka 2.x,
 * OIDC client credentials, both configured through properties).
 *
 * The clients still need `security.protocol=SASL_PLAINTEXT` or `SASL_SSL`
 * and `sasl.mechanisms=OAUTHBEARER` (cs_kafka_config, or the operator's
 * configuration); a client with another mechanism never calls `fn`. A token
 * that `fn` returns and librdkafka refuses (an empty value, an expiry in the
 * past, a malformed extension) counts as a failure and is logged with its
 * reason; the token's value is never logged.
 *
 * Configuring thread, before cs_app_start.
 * @param k the broker.
 * @param fn the provider, see cs_oauth_token_fn; NULL removes it.
 * @param user passed to fn; cstream never reads or frees it.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG k is NULL.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_kafka_oauthbearer_token_cb(cs_kafka *k, cs_oauth_token_fn fn, void *user);

/** How long the graceful stop waits for the producer to deliver what it holds
 * (default 30000 ms).
 *
 * Configuring thread, before cs_app_start.
 * @param k the broker.
 * @param ms the timeout, >= 0 ms.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG k is NULL or ms < 0.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_kafka_flush_timeout_ms(cs_kafka *k, int ms);
/** After the app stopped: records the producer still held when the flush
 * timeout ran out (they were not delivered).
 *
 * Any thread.
 * @param k the broker (not NULL).
 * @return the count, 0 before the first stop. */
CS_API size_t cs_kafka_unflushed_records(const cs_kafka *k);

/** How long a publish waits for space in librdkafka's local queue (default 5000 ms).
 *
 * Configuring thread, before cs_app_start.
 * @param k the broker.
 * @param ms the timeout, >= 0 ms (0: fail at once when the queue is full).
 * @retval CS_OK set.
 * @retval CS_ERR_ARG k is NULL or ms < 0.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_kafka_queue_timeout_ms(cs_kafka *k, int ms);
/** The stable identity of this service instance (e.g. a StatefulSet pod name),
 * else CSTREAM_INSTANCE_ID from the environment. Transactional subscriptions
 * need one: their transactional.id is "<app>.<group>.<topics>.<instance id>",
 * so instances with different ids never fence each other, and a restarted
 * instance (same id) fences the zombie it replaces.
 *
 * With one, every consumer is also a static member of its group (KIP-345):
 * group.instance.id is the same "<app>.<group>.<topics>.<instance id>"
 * (characters outside Kafka's [A-Za-z0-9._-] become '_'; ".2", ".3" for
 * later subscriptions with the same group and topics), stable across
 * restarts and logged at start. A restart, even after a SIGKILL, takes its partitions back at once
 * instead of after session.timeout.ms (45 s by default). A second process
 * with the same id makes the broker fence the first: that app stops with an
 * ERROR line saying "fenced (FENCED_INSTANCE_ID)" and commits nothing. The
 * cost: a static member sends no LeaveGroup, so an instance shut down for
 * good keeps its partitions unassigned until its session times out, unless
 * an operator removes it from the group (Kafka's AdminClient,
 * removeMembersFromConsumerGroup); elastic pools run without an instance id.
 * Under the consumer group protocol (cs_kafka_group_protocol) a second
 * process is refused at join instead (UNRELEASED_INSTANCE_ID), and a
 * restart after a crash, refused the same way until the broker's
 * group.consumer.session.timeout.ms expires the dead member, retries by
 * itself for up to 90 s (docs/guide.md, "The consumer group protocol").
 * Not on the embedded cluster, which has no static membership. See
 * docs/guide.md, "Instance id and static membership".
 * @param k the broker.
 * @param id the instance id (copied).
 * @retval CS_OK set.
 * @retval CS_ERR_ARG k is NULL or id is NULL or empty.
 * @retval CS_ERR_STATE the app has started.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_kafka_instance_id(cs_kafka *k, const char *id);
/** Declares a topic the service uses. On the embedded cluster it is created with
 * `partitions` partitions at start-up; on a real cluster it must exist.
 *
 * Start-up fails with CS_ERR_TOPIC when it does not.
 * @param k the broker.
 * @param topic the topic name (copied).
 * @param partitions its partition count on the embedded cluster (>= 1).
 * @retval CS_OK declared.
 * @retval CS_ERR_ARG k is NULL, topic is empty or partitions < 1.
 * @retval CS_ERR_STATE the app has started.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_kafka_topic(cs_kafka *k, const char *topic, int partitions);
/** The bootstrap servers in use: after start this is the embedded cluster's
 * loopback address when it runs. NULL before start if none was configured.
 *
 * Configuring or lifecycle thread, or any thread while the app runs.
 * @param k the broker.
 * @return a string owned by the broker. The start of the embedded cluster
 *         (and cs_app_main's --brokers) replaces it, so a pointer taken
 *         before cs_app_start is not valid after it; one taken after start
 *         is valid until the broker is freed. */
CS_API const char *cs_kafka_bootstrap(const cs_kafka *k);
/** True when this broker runs (or will run) the embedded cluster.
 *
 * Configuring or lifecycle thread, or any thread while the app runs.
 * @param k the broker.
 * @return 1 for the embedded cluster, 0 for configured servers. */
CS_API int cs_kafka_is_embedded(const cs_kafka *k);

/** The committed offset of `group` for a partition, read from the cluster
 * (works before start only with configured servers; -1 when none).
 *
 * Opens a short-lived client with the broker's properties and waits for the
 * cluster's answer (up to 5 s). From the configuring thread before start, or
 * any thread while the app runs.
 * @param k the broker.
 * @param group the consumer group.
 * @param topic the topic.
 * @param partition the partition.
 * @param offset receives the committed offset, -1 if the group has none.
 * @retval CS_OK *offset is set.
 * @retval CS_ERR_ARG an argument is NULL.
 * @retval CS_ERR_STATE the embedded cluster is not running yet.
 * @retval CS_ERR_KAFKA the client could not be created or the cluster did not
 *         answer; cs_errmsg() has librdkafka's reason. */
CS_API cs_err cs_kafka_committed(cs_kafka *k, const char *group, const char *topic, int32_t partition, int64_t *offset);

/** Subscribes `handler` to one topic (or several). The broker owns the returned
 * subscription. NULL (with cs_errmsg) on bad arguments.
 *
 * The subscription lives until its broker is freed (with the app, or
 * cs_kafka_destroy). Configuring thread, before cs_app_start.
 * @param k the broker.
 * @param topic the topic (copied).
 * @param handler runs for every record, see cs_handler_fn.
 * @param user passed to the handler; cstream never reads or frees it.
 * @return the subscription to configure with cs_sub_*, or NULL: CS_ERR_ARG
 *         (NULL broker or handler, empty topic), CS_ERR_STATE (the app has
 *         started) or CS_ERR_NOMEM, in cs_errmsg(). */
CS_API cs_sub *cs_kafka_subscribe(cs_kafka *k, const char *topic, cs_handler_fn handler, void *user);
/** Subscribes a batch handler: batches of up to max_batch records (>= 1).
 *
 * Owned and configured like cs_kafka_subscribe's result.
 * @param k the broker.
 * @param topic the topic (copied).
 * @param handler runs for every batch, see cs_batch_fn.
 * @param max_batch the largest batch, 1 to 1000000.
 * @param user passed to the handler; cstream never reads or frees it.
 * @return the subscription, or NULL: CS_ERR_ARG (NULL broker or handler,
 *         empty topic, max_batch out of range), CS_ERR_STATE or CS_ERR_NOMEM,
 *         in cs_errmsg(). */
CS_API cs_sub *cs_kafka_subscribe_batch(cs_kafka *k, const char *topic, cs_batch_fn handler, size_t max_batch,
                                        void *user);
/** Subscribes `handler` to several topics with one consumer (one group).
 *
 * Owned and configured like cs_kafka_subscribe's result; the subscription's
 * name (in logs and metrics) is the topics joined with ",".
 * @param k the broker.
 * @param topics n_topics topic names (copied).
 * @param n_topics how many, at least 1.
 * @param handler runs for every record, see cs_handler_fn.
 * @param user passed to the handler; cstream never reads or frees it.
 * @return the subscription, or NULL: CS_ERR_ARG (NULL broker or handler, no
 *         topics, an empty one), CS_ERR_STATE or CS_ERR_NOMEM, in cs_errmsg(). */
CS_API cs_sub *cs_kafka_subscribe_topics(cs_kafka *k, const char *const *topics, size_t n_topics, cs_handler_fn handler,
                                         void *user);
/** Subscribes `handler` to every topic whose name matches `pattern`, now and
 * later (librdkafka's regex subscription).
 *
 * The pattern must start with '^' and is a POSIX extended regular expression
 * (librdkafka matches it with its own engine, which reads the common subset
 * the same way: `^payments\\..*`). Topics created later that match are
 * consumed within the consumer's metadata refresh
 * (topic.metadata.refresh.interval.ms, 30 s by default); a matching topic that
 * is deleted stops matching and its partitions are revoked (no ERROR line and
 * no cstream_topic_unavailable series: for a pattern, topics coming and going
 * is normal). No topic needs to match at start. Per-topic /metrics series
 * (records, dead letters) are emitted only for topics with a partition
 * assigned to this member, so topics that come and go leave no series behind;
 * the fetch path's per-topic counters are labelled with the pattern. A reply
 * or dead-letter topic that matches the pattern is refused (its records
 * would be consumed again, in a loop). Plain topic names starting with '^'
 * are refused by cs_kafka_subscribe and cs_kafka_subscribe_topics: this is
 * the call for patterns. Owned and configured like cs_kafka_subscribe's
 * result; the subscription's name is the pattern.
 * @param k the broker.
 * @param pattern the regular expression, starting with '^' (copied).
 * @param handler runs for every record, see cs_handler_fn.
 * @param user passed to the handler; cstream never reads or frees it.
 * @return the subscription, or NULL: CS_ERR_ARG (NULL broker or handler, a
 *         pattern that does not start with '^' or does not compile; the
 *         message names it), CS_ERR_STATE or CS_ERR_NOMEM, in cs_errmsg(). */
CS_API cs_sub *cs_kafka_subscribe_pattern(cs_kafka *k, const char *pattern, cs_handler_fn handler, void *user);

/** Consumer group of this subscription (else the broker's default group).
 * @param s the subscription.
 * @param group the group id (copied).
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or group is NULL or empty.
 * @retval CS_ERR_STATE the app has started.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_sub_group(cs_sub *s, const char *group);
/** Manual assignment: the subscription reads exactly these partitions of
 * each of its topics, without joining its group's rebalances (librdkafka's
 * rd_kafka_assign instead of a subscribe). Positions are still committed to
 * the subscription's group (a group stays required), in every commit mode:
 * Auto's periodic commit, Tracked's settled positions with their attempt
 * counts, Transactional's positions inside each transaction. Under
 * Transactional no group generation fences an older instance any more: the
 * transactional id alone does. Two instances must be given disjoint
 * partitions; nothing checks it. At start, a partition the topic does not
 * have fails the start with CS_ERR_TOPIC naming the topic and the partition.
 * @param s the subscription.
 * @param partitions n partition numbers (copied), each >= 0, no repeats.
 * @param n how many, at least 1.
 * @retval CS_OK set (a second call replaces the first).
 * @retval CS_ERR_ARG s or partitions is NULL, n is 0, a number is negative or repeated, or s is a pattern
 *         subscription (cs_kafka_subscribe_pattern).
 * @retval CS_ERR_STATE the app has started.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_sub_partitions(cs_sub *s, const int32_t *partitions, size_t n);
/** A librdkafka consumer property for this subscription only. Properties the
 * commit mode owns (enable.auto.commit, enable.auto.offset.store) are refused.
 *
 * Checked and refused like cs_kafka_config (the same keys are cstream's).
 * @param s the subscription.
 * @param key the property name.
 * @param value its value (both copied).
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL, key is empty or value is NULL.
 * @retval CS_ERR_CONFIG librdkafka rejects the key or value, or cstream owns it.
 * @retval CS_ERR_UNSUPPORTED the property needs a newer librdkafka.
 * @retval CS_ERR_STATE the app has started.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_sub_config(cs_sub *s, const char *key, const char *value);
/** The group protocol of this subscription's consumer, over the broker's
 * (cs_kafka_group_protocol): e.g. one subscription moves to the consumer
 * protocol while the others stay classic.
 *
 * Below cs_sub_config's group.protocol and the operator's layers, like
 * cs_kafka_group_protocol. Configuring thread, before cs_app_start.
 * @param s the subscription.
 * @param p the protocol.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or p is not a cs_group_protocol.
 * @retval CS_ERR_UNSUPPORTED p is CS_GROUP_PROTOCOL_CONSUMER and cstream was
 *         built with a librdkafka older than 2.12.0.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_group_protocol(cs_sub *s, cs_group_protocol p);
/** Where the subscription's group starts on a partition it has no committed
 * offset for (default CS_START_EARLIEST).
 * @param s the subscription.
 * @param where CS_START_EARLIEST or CS_START_LATEST.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or where is neither.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_start_at(cs_sub *s, cs_start where);
/** Where the subscription starts on one partition it has no committed offset
 * for: at `offset` (the next record read is the one at `offset`).
 *
 * Like every start position, this applies only when the group has no
 * committed offset for the partition: a committed offset always wins, as in
 * any Kafka consumer (to move a group that has one, reset its offsets). It is
 * applied when the partition is assigned. An offset past the end or below
 * the log start is out of range, and then CS_START_EARLIEST or
 * CS_START_LATEST (cs_sub_start_at) decides. A partition given an offset
 * wins over cs_sub_start_at_time; a later call for the same partition
 * replaces the earlier one. At most 4096 partitions. Configuring thread.
 * @param s the subscription.
 * @param topic one of its topics (copied; for a pattern subscription, a
 *        topic the pattern matches).
 * @param partition the partition, >= 0.
 * @param offset the offset, >= 0.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s or topic is NULL, topic is not one of the
 *         subscription's (or does not match its pattern), partition or offset
 *         is negative, or the 4096 partitions are taken.
 * @retval CS_ERR_STATE the app has started.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_sub_start_at_offset(cs_sub *s, const char *topic, int32_t partition, int64_t offset);
/** Where the subscription starts on the partitions it has no committed offset
 * for: at the first record whose timestamp is at or after `ms_since_epoch`
 * (Kafka's ListOffsets by time, rd_kafka_offsets_for_times).
 *
 * A committed offset always wins (see cs_sub_start_at_offset). A partition
 * with no record at or after the time starts at its end (only records
 * written from then on). The lookup happens at assignment; if it fails
 * (10 s), CS_START_EARLIEST or CS_START_LATEST decides and a WARN line names
 * the partition. The record timestamps are the topic's: CreateTime (set by
 * the producer) unless the topic uses LogAppendTime. librdkafka 2.0.2's
 * embedded (mock) cluster answers every time lookup with "no record": there
 * every partition starts at its end. Configuring thread.
 * @param s the subscription.
 * @param ms_since_epoch the time, milliseconds since 1970-01-01 UTC, >= 0.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or the time is negative.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_start_at_time(cs_sub *s, int64_t ms_since_epoch);
/** Whether the subscription may start while its topics do not exist yet
 * (default 0: cs_app_start fails with CS_ERR_TOPIC naming the missing topic).
 *
 * With 1, the start does not check the subscription's topics: the
 * subscription joins its group with nothing to consume, logs one INFO line
 * per missing topic, shows cstream_topic_unavailable{topic=...} 1, and
 * consumes each topic once it appears, within the consumer's metadata
 * refresh (topic.metadata.refresh.interval.ms, 30 s by default). The default
 * fails fast because a missing topic is far more often a typo or a wrong
 * cluster than a topic still to come, and a service that silently consumes
 * nothing is worse than one that does not start. Reply and dead-letter
 * topics are still checked. Configuring thread.
 * @param s the subscription.
 * @param allow 1 to allow, 0 to require the topics at start.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_allow_missing_topics(cs_sub *s, int allow);
/** The subscription's commit mode (default CS_COMMIT_AUTO), see cs_commit_mode.
 * @param s the subscription.
 * @param mode the mode.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or mode is not a cs_commit_mode.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_commit_mode(cs_sub *s, cs_commit_mode mode);
/** Handler threads (default 1). Records of one partition go to one lane, in order.
 * @param s the subscription.
 * @param n worker threads, 1 to 1024 (one lane each).
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or n is out of range.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_workers(cs_sub *s, int n);
/** Retries and dead letters (Tracked). The handler runs at most `n` times for
 * one record (the first delivery is attempt 1; 0, the default, means no cap).
 * When the last attempt asks for a retry, the record goes to the dead-letter
 * topic if the subscription has one (and is settled once the cluster accepted
 * it; if that publish fails the record stays open and is tried again a second
 * later), else it is dropped with a warning and counted (exhausted).
 * @param s the subscription.
 * @param n the cap, 0 (none) to 1000000.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or n is out of range.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_max_attempts(cs_sub *s, int n);
/** Dead-letter topic (must exist at start-up). A dead-letter record keeps the
 * original key, value and headers and adds provenance headers:
 *
 *     cstream.dlq.topic, cstream.dlq.partition, cstream.dlq.offset,
 *     cstream.dlq.timestamp (ms, -1 if none), cstream.dlq.group,
 *     cstream.dlq.attempts, cstream.dlq.reason
 *
 * Under Tracked, records that do not decode (cs_sub_decode) go there too.
 * @param s the subscription.
 * @param topic the dead-letter topic (copied).
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or topic is empty.
 * @retval CS_ERR_STATE the app has started.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_sub_dead_letter(cs_sub *s, const char *topic);

/** Typed payloads: every record is decoded with `codec` into a value of `type`
 * before the handler runs; the handler reads it with cs_delivery_decoded()
 * (the raw bytes stay available). A record that does not decode is never
 * handed to the handler: it is counted (decode_failures), logged with its
 * topic, partition, offset and the failing field, and dropped.
 * A codec that answers CS_ERR_UNAVAILABLE (its schema registry is down) has
 * the record tried again later, never dropped: under Tracked it comes back
 * after a back-off (100 ms doubling to 5 s, taking no attempt), under Auto
 * the worker waits in place until it decodes or the app stops.
 *
 * The codec and the type are not copied: they must outlive the app (static
 * tables, as in <cstream/codec.h>). The type is checked now (cs_type_check).
 * @param s the subscription.
 * @param codec the codec, e.g. &cs_codec_json.
 * @param type the struct every value decodes into.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s, codec or type is NULL, or the field table is invalid
 *         (cs_errmsg() names the field).
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_decode(cs_sub *s, const cs_codec *codec, const cs_type *type);

/** Typed keys: every record's key is decoded with `codec` into a value of
 * `type` before the handler runs, as cs_sub_decode does for the value (with
 * or without it); the handler reads it with cs_delivery_decoded_key(). A
 * registry-backed key codec reads the key's schema id like a value's (the
 * writer registered it under "<topic>-key"). A key that does not decode,
 * a null key included, is a decode failure like a value's: counted
 * (decode_failures), logged with part=key, and dropped, or dead-lettered
 * under Tracked with a dead-letter topic ("key does not decode as ...").
 * CS_ERR_UNAVAILABLE has the record tried again later, as for values.
 *
 * The codec and the type are not copied: they must outlive the app. The
 * type is checked now (cs_type_check). The key codec's readiness counts
 * for /readyz and the start-up check like the value codec's.
 * @param s the subscription.
 * @param codec the key's codec, e.g. one made by cs_codec_avro_registry_new().
 * @param type the struct every key decodes into.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s, codec or type is NULL, or the field table is invalid
 *         (cs_errmsg() names the field).
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_decode_key(cs_sub *s, const cs_codec *codec, const cs_type *type);

/** Which lane (worker) a record goes to; a lane runs its records in order.
 * Either way a retry goes to the head of its lane, so later records of its
 * lane (its partition, or its key) never overtake it. */
typedef enum cs_lane_key {
    /** One partition's records go to one lane (the default). */
    CS_LANES_BY_PARTITION = 0,
    /** records with the same key go to one lane (per-key order), so different
     * keys of one partition run concurrently; keyless records are spread over
     * the lanes. */
    CS_LANES_BY_KEY
} cs_lane_key;
/** How the subscription's records are spread over its lanes (see cs_lane_key).
 * @param s the subscription.
 * @param key CS_LANES_BY_PARTITION or CS_LANES_BY_KEY.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or key is neither.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_lanes(cs_sub *s, cs_lane_key key);
/** Records cstream holds per partition between fetch and settlement (queued,
 * running, pending) — under Tracked, the span of the commit tracker, from the
 * lowest open record to the newest. When a partition reaches it, cstream hands
 * out no more of its records until it drains to half (they wait in the fetch
 * buffer, see cs_sub_fetch_buffer_bytes). Default: 500 under Auto (the records handed to
 * cstream are Auto's loss window, so keep it small), 10000 under Tracked (it
 * only bounds memory).
 * @param s the subscription.
 * @param n the bound, 1 to 10000000.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or n is out of range.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_max_open(cs_sub *s, size_t n);
/** The subscription's fetch buffer: one bound, for the whole consumer, on the
 * bytes of records fetched and not yet settled (taken from librdkafka and
 * waiting, queued, running or pending). Records are copied out of librdkafka
 * into it; when it is full cstream takes no more until it drains, so
 * librdkafka's own pre-fetch queue fills and stops fetching. That queue is
 * one bound for the whole consumer too: queued.max.messages.kbytes defaults
 * to a quarter of this, and queued.min.messages to one record per KiB of
 * that, at least 1000 (set them in cs_sub_config to change them). A partition
 * whose records stop settling (a stuck handler, a long retry_after) may hold
 * at most a fair share of the buffer; past it, it is paused in librdkafka until
 * it drains, so the other partitions keep flowing. Default 32 MiB; values
 * below 64 KiB are raised to 64 KiB (with a warning); 0 and values above
 * 1 TiB are refused.
 * @param s the subscription.
 * @param bytes the bound in bytes.
 * @retval CS_OK set (perhaps raised to 64 KiB).
 * @retval CS_ERR_ARG s is NULL, or bytes is 0 or above 1 TiB.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_fetch_buffer_bytes(cs_sub *s, size_t bytes);
/** Defined while this header declares cs_sub_fetch_buffer_bytes and the
 * fetch-buffer fields of cs_sub_stats (code built across versions checks it). */
#define CS_FETCH_BUFFER_API 1
/** Under Tracked: how often changed positions are committed (default 200 ms).
 * Under Transactional: how long a window stays open (default 100 ms).
 *
 * The handler time limit is checked on the same timer.
 * @param s the subscription.
 * @param ms the interval, 1 to 3600000 ms.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or ms is out of range.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_commit_interval_ms(cs_sub *s, int ms);
/** Under Tracked: whether commits carry the acked set (default on).
 *
 * The committed position cannot pass the first record still open, so without
 * the set a crash hands every record above it to the handlers again, even
 * those already acked. With it, each commit's metadata also says which
 * offsets above the position were settled (acked, dropped, dead-lettered);
 * after a crash or a rebalance the next owner skips those records (counted in
 * cs_sub_stats.skipped_settled) and handles only the ones that were open. The
 * set shares the offset metadata with the attempt counts, within 3,900 bytes
 * (below the broker's default offset.metadata.max.bytes, 4096); when it does
 * not fit, the part nearest the position is kept and the rest is read again
 * (cs_sub_stats.metadata_truncated). Metadata that does not verify (another
 * client's, an unknown version, a wrong checksum, written for another
 * position, reaching past the high watermark) is ignored with a warning:
 * nothing is skipped then. Transactional subscriptions never skip (a record
 * above the position has no committed outputs); Auto has no set.
 * @param s the subscription.
 * @param on nonzero (the default): commits carry the set and restarts skip
 *        what it says was settled; 0: commits carry attempt counts only and
 *        everything above the committed position is read again after a crash.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_acked_set(cs_sub *s, int on);
/** Transactional and Database: a window also closes once this many records were settled in
 * it (default 10000).
 * @param s the subscription.
 * @param n records, 1 to 100000000.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or n is out of range.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_window_records(cs_sub *s, size_t n);
/** Transactional: how long a retried record may hold its partition's window
 * (the position cannot pass it) before the window aborts: its buffered
 * outputs are discarded, the partition rewinds to the last committed position
 * and its records are read again (default 5000 ms, well under the
 * producer's transaction.timeout.ms, 60 s).
 * @param s the subscription.
 * @param ms the timeout, 1 to 3600000 ms.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or ms is out of range.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_stall_timeout_ms(cs_sub *s, int ms);
/** How long a revoke, and the graceful stop, wait for in-flight deliveries
 * (running, pending, or waiting for their reply's report) to settle before the
 * partitions are released (default 10000 ms). Under Auto the records queued in
 * cstream also get this time to run, since their positions were already stored.
 *
 * The graceful stop drains all subscriptions of a broker together, each
 * deadline counted from the same moment: it waits for the longest drain
 * timeout once, not for each subscription's in turn. A handler still running
 * at the deadline is waited for (it cannot be stopped); records still pending
 * stay uncommitted and are read again.
 *
 * A revoke drains inside librdkafka's rebalance callback, where the consumer
 * does not poll; past max.poll.interval.ms without a poll (300000 ms unless
 * set with cs_sub_config or cs_kafka_config) the member leaves its group and
 * its partitions go to another member. So cs_app_start fails with
 * CS_ERR_CONFIG, naming drain_timeout_ms and max.poll.interval.ms and both
 * values, when a subscription in a group has a drain timeout not shorter than
 * its consumer's max.poll.interval.ms. The check is at start because either
 * property may be set after this call. Manual assignment (cs_sub_partitions)
 * joins no group and is not checked.
 * @param s the subscription.
 * @param ms the timeout, 0 to 3600000 ms; below the consumer's
 *        max.poll.interval.ms for a subscription in a group (checked at start).
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or ms is out of range.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_drain_timeout_ms(cs_sub *s, int ms);
/** A handler running longer than this is logged with its record and counted
 * (it cannot be stopped). 0 (default) disables the check.
 *
 * Checked on the commit timer, so only as precise as cs_sub_commit_interval_ms.
 * @param s the subscription.
 * @param ms the limit, 0 to 86400000 ms.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL or ms is out of range.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_handler_time_limit_ms(cs_sub *s, int ms);

/** Publishes each handler's reply (cs_delivery_reply) to `topic`, which must
 * exist at start-up. A reply is asynchronous; under Tracked it gates its source
 * record: the source counts as acked only when the reply's delivery report is
 * OK, and a failed reply makes the source come back as a retry. Under Auto
 * nothing can be gated (the position was stored at hand-over). queue_timeout_ms
 * bounds the wait for space in the producer's local queue (then: retry).
 * @param s the subscription.
 * @param topic the reply topic (copied).
 * @param queue_timeout_ms the wait for queue space, >= 0 ms.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL, topic is empty or queue_timeout_ms < 0.
 * @retval CS_ERR_STATE the app has started.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_sub_reply(cs_sub *s, const char *topic, int queue_timeout_ms);

/** Service hooks: called on the subscription's fetch thread during a rebalance,
 * and on the thread that stops the app for the final revoke at close.
 *
 * Called once per topic of the subscription that the change touches. Never
 * call cs_app_stop or cs_app_destroy from it (use cs_app_request_stop).
 * @param s the subscription.
 * @param topic the topic, valid during the call.
 * @param partitions its partitions assigned or revoked, valid during the call.
 * @param n how many.
 * @param user the pointer given to cs_sub_on_assign or cs_sub_on_revoke. */
typedef void (*cs_partitions_fn)(cs_sub *s, const char *topic, const int32_t *partitions, size_t n, void *user);
/** Sets the hook that runs when partitions are assigned (NULL removes it).
 * @param s the subscription.
 * @param fn the hook, see cs_partitions_fn.
 * @param user passed to fn; cstream never reads or frees it.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_on_assign(cs_sub *s, cs_partitions_fn fn, void *user);
/** Sets the hook that runs when partitions are revoked, including the final
 * revoke at close (NULL removes it).
 * @param s the subscription.
 * @param fn the hook, see cs_partitions_fn.
 * @param user passed to fn; cstream never reads or frees it.
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL.
 * @retval CS_ERR_STATE the app has started. */
CS_API cs_err cs_sub_on_revoke(cs_sub *s, cs_partitions_fn fn, void *user);

/** Moves a running subscription's partition to `offset`: the next record
 * handed to the handler is the one at `offset` (or the first after it).
 *
 * The seek runs on the subscription's fetch thread; the call waits for it
 * (normally one turn of the fetch loop, at most 100 ms). With partition -1
 * every target is checked (assigned here, not being revoked) before the
 * first one moves. Records of
 * the partition handed out before the seek (queued, running, pending or
 * waiting for a retry) settle as stale: they are not committed and do not
 * come back. Under Tracked and Transactional the committed position stays
 * where it was until the first record from `offset` is handed out, then
 * follows the records from there as they settle (a seek back moves it back);
 * open records at or after `offset` keep their attempt counts. Transactional:
 * the open window is committed first. Auto: the stored position is the last
 * record handed out before the seek until the first record from `offset` is
 * handed out, and librdkafka's auto commit commits what is stored. A seek
 * past the end of the log is reset by the consumer's auto.offset.reset. Every
 * seek is logged (topic, partition, from, to) and counted
 * (cs_sub_stats.seeks, cstream_seeks_total). The position is this
 * instance's: a partition revoked later is read by its next owner from the
 * committed position. May be called from any thread, a handler included.
 * It is refused at once (CS_ERR_STATE), because the wait could not end or
 * would hold up the group: from an assign or revoke hook of any subscription
 * (they run on a fetch thread); while a rebalance callback of this
 * subscription runs ("a rebalance is in progress": its revoke waits for the
 * handlers; requests already waiting then get the same answer; call again
 * after it); and while CSTREAM_TXN_BARRIER=1 is set for it.
 * @param s the subscription (running).
 * @param topic one of its topics.
 * @param partition the partition, or -1 for every partition of `topic`
 *        assigned to this instance.
 * @param offset the offset, 0 or more.
 * @retval CS_OK every named partition is now read from `offset`.
 * @retval CS_ERR_ARG s or topic is NULL or empty, partition below -1, offset negative.
 * @retval CS_ERR_STATE the subscription is not running, a partition is
 *         not assigned to this instance or is being revoked (the message
 *         names topic and partition; nothing moved, nothing is remembered for
 *         later), a rebalance is in progress, or the call came from a hook or
 *         under CSTREAM_TXN_BARRIER=1 (see above); or librdkafka refused one
 *         partition's seek because a rebalance started moving it.
 * @retval CS_ERR_KAFKA librdkafka refused the seek (the app is stopping).
 *         Only when librdkafka refuses a partition after others of a -1 seek
 *         moved is the seek partial: the message then ends with "moved before
 *         it:" and the partitions that moved. */
CS_API cs_err cs_sub_seek(cs_sub *s, const char *topic, int32_t partition, int64_t offset);
/** Like cs_sub_seek, to the first record whose timestamp is at or after
 * `timestamp_ms` (librdkafka's rd_kafka_offsets_for_times, on the fetch
 * thread: one lookup for all the partitions named and one for the end of
 * those with no such record, at most 5 s each), or to the end of the log when
 * there is none. Every offset is found before any partition moves. librdkafka 2.0.2's embedded cluster answers every timestamp lookup
 * with "none": there it always seeks to the end; use a real cluster.
 * @param s the subscription (running).
 * @param topic one of its topics.
 * @param partition the partition, or -1 for every partition of `topic` assigned here.
 * @param timestamp_ms milliseconds since the epoch (the records' CreateTime or LogAppendTime).
 * @retval CS_OK every named partition moved.
 * @retval CS_ERR_ARG s or topic is NULL or empty, partition below -1, timestamp negative.
 * @retval CS_ERR_STATE as for cs_sub_seek.
 * @retval CS_ERR_KAFKA the lookup failed (nothing moved; the message names
 *         the partition), or the seek failed (as for cs_sub_seek). */
CS_API cs_err cs_sub_seek_time(cs_sub *s, const char *topic, int32_t partition, int64_t timestamp_ms);
/** Pauses the whole subscription on this instance: none of its partitions,
 * including those assigned later, is served until cs_sub_resume.
 *
 * The fetch thread keeps polling (the group keeps its member and its
 * max.poll.interval.ms): a paused partition's records wait in the fetch
 * buffer up to its share of it; past it the rest is dropped (never with
 * librdkafka's pause, whose 2.0.2 resume waits up to 1 s), and at the resume librdkafka is moved back to
 * the first record dropped, with a seek whose result is checked (retried
 * every 200 ms until it succeeds; nothing of the partition is taken
 * meanwhile): no record is lost or handled twice across the pause. Records
 * already handed to the lanes before the pause still run. A paused partition
 * is not "stuck" (cs_sub_stats.stuck_pauses does not count it), and the
 * subscription stays ready on /readyz (paused on purpose is healthy);
 * cs_sub_stats.paused_partitions and the cstream_paused_partitions gauge show
 * it. The pause is this instance's, not the group's. Waits for the fetch
 * thread like cs_sub_seek, and is refused in the same cases (a hook, a
 * rebalance in progress, CSTREAM_TXN_BARRIER=1).
 * @param s the subscription (running).
 * @retval CS_OK paused.
 * @retval CS_ERR_ARG s is NULL.
 * @retval CS_ERR_STATE the subscription is not running, or refused as
 *         cs_sub_seek is. */
CS_API cs_err cs_sub_pause(cs_sub *s);
/** Ends cs_sub_pause and every cs_sub_pause_partition of the subscription:
 * records are served again, those dropped from the buffer while paused are
 * fetched again first. Refused as cs_sub_pause is.
 * @param s the subscription (running).
 * @retval CS_OK resumed (also when nothing was paused).
 * @retval CS_ERR_ARG s is NULL.
 * @retval CS_ERR_STATE the subscription is not running, or refused as
 *         cs_sub_seek is. */
CS_API cs_err cs_sub_resume(cs_sub *s);
/** Pauses one partition (or every assigned partition of a topic) on this
 * instance, as cs_sub_pause does for all. The pause survives rebalances: a
 * paused partition revoked and later assigned back to this instance is still
 * paused; one assigned to another instance is not paused there.
 * @param s the subscription (running).
 * @param topic one of its topics.
 * @param partition the partition, or -1 for every partition of `topic` assigned here.
 * @retval CS_OK paused.
 * @retval CS_ERR_ARG s or topic is NULL or empty, or partition below -1.
 * @retval CS_ERR_STATE not running, the partition is not assigned to this
 *         instance (the message names topic and partition), or refused as
 *         cs_sub_seek is. */
CS_API cs_err cs_sub_pause_partition(cs_sub *s, const char *topic, int32_t partition);
/** Ends cs_sub_pause_partition's pause of a partition, or with -1 of every
 * partition of the topic paused here, whether assigned now or not. A paused
 * partition not assigned here now is only forgotten (it is not paused when it
 * comes back). It does not end cs_sub_pause of the whole subscription.
 * Refused as cs_sub_pause is.
 * @param s the subscription (running).
 * @param topic one of its topics.
 * @param partition the partition, or -1 for every partition of `topic`.
 * @retval CS_OK resumed (also when it was not paused but is assigned here).
 * @retval CS_ERR_ARG s or topic is NULL or empty, or partition below -1.
 * @retval CS_ERR_STATE not running, no such partition assigned or paused
 *         here, or refused as cs_sub_seek is. */
CS_API cs_err cs_sub_resume_partition(cs_sub *s, const char *topic, int32_t partition);

/** Counters of one subscription (monotonic since start). */
typedef struct cs_sub_stats {
    uint64_t delivered;          /**< records handed to a handler, once per attempt: each element of a
                                     batch counts, and a record that comes back counts again (handler
                                     calls are the count of cstream_handler_duration_seconds) */
    uint64_t acked;              /**< records acked */
    uint64_t dropped;            /**< records dropped, including those given up (dead-lettered,
                                     exhausted, undecodable) */
    uint64_t retried;            /**< retries under Tracked (during a revoke or stop the record is read
                                     again by the next owner instead) */
    uint64_t retry_unsupported;  /**< retries refused under Auto: those records are lost */
    uint64_t stale;              /**< settlements ignored because the partition was revoked */
    uint64_t slow_handlers;      /**< handler runs past the time limit */
    uint64_t commits;            /**< successful explicit commits (Tracked) */
    uint64_t commit_failures;    /**< failed explicit commits (retried on the next tick) */
    uint64_t pauses;             /**< partitions paused at max_open */
    uint64_t decode_failures;    /**< records that did not decode (cs_sub_decode) */
    uint64_t dead_lettered;      /**< records the dead-letter topic accepted */
    uint64_t exhausted;          /**< records dropped at max_attempts without a dead-letter topic */
    uint64_t transactions;       /**< transactions committed (Transactional; Database: windows committed) */
    uint64_t aborts;             /**< windows aborted (Transactional) or rolled back (Database): their records
                                     were read again */
    uint64_t outputs;            /**< outputs committed in transactions (Transactional) */
    uint64_t fetch_buffer_peak;  /**< the most bytes the fetch buffer held (cs_sub_fetch_buffer_bytes) */
    uint64_t stuck_pauses;       /**< partitions paused because their records stopped settling */
    uint64_t wakeups;            /**< wake-ups of librdkafka's fetchers after its queue reached its bound */
    uint64_t gaps;               /**< fetched offsets that skipped ahead (compaction, transaction markers) */
    uint64_t repeats;            /**< fetched offsets already taken, dropped */
    uint64_t seeks;              /**< partitions moved by cs_sub_seek or cs_sub_seek_time */
    uint64_t paused_partitions;  /**< assigned partitions paused by the application now (a gauge) */
    uint64_t skipped_settled;    /**< records handed to no handler because the committed acked set said an
                                     earlier owner settled them (Tracked, cs_sub_acked_set) */
    uint64_t metadata_truncated; /**< commits whose acked set did not fit in the offset metadata (the
                                      records past its reach are read again after a crash) */
    uint64_t rejoins;            /**< times the consumer was created again to rejoin its group: after a join
                                     refused with UNRELEASED_INSTANCE_ID (consumer group protocol, static
                                     member), or a lost group session not back within 60 s */
    uint64_t db_fenced;          /**< partitions this instance stopped handling because another one claimed
                                     them in the database (Database mode) */
} cs_sub_stats;
/** The subscription's counters now.
 *
 * Any thread, at any time until the app is destroyed. Before start they are
 * zero; after the app stopped they are the values taken when the
 * subscription closed.
 * @param s the subscription (not NULL).
 * @param out receives the counters. */
CS_API void cs_sub_stats_get(const cs_sub *s, cs_sub_stats *out);

#ifdef __cplusplus
}
#endif
#endif
