/** @file
 * cstream/testing.h — the test API for service authors.
 *
 * A test cluster is the embedded Kafka (in this process), or the cluster named
 * by CSTREAM_BROKERS when set (a real broker, or a parent test process's
 * embedded cluster). Topics are created on either (mock API or Admin API).
 * An app under test is an ordinary cs_app whose broker points at the test
 * cluster (cs_test_kafka_new), so it can be stopped, restarted in the same
 * group, or crashed (destroyed without closing).
 *
 * Not included by <cstream.h>. A cs_test_cluster may be used from several
 * threads at once (its producer is serialised). Every call that returns a
 * cs_err leaves the reason in cs_errmsg(); the fault-injection calls return
 * CS_ERR_UNSUPPORTED on a cluster that is not embedded, and CS_ERR_KAFKA
 * when librdkafka's mock refuses the request (an unknown broker id, ...). */
#ifndef CSTREAM_TESTING_H
#define CSTREAM_TESTING_H

#include "cstream/export.h"

#include <stddef.h>
#include <stdint.h>

#include "cstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A cluster to test against (opaque): created by cs_test_cluster_new or
 * cs_test_cluster_new_embedded, freed by cs_test_cluster_destroy. */
typedef struct cs_test_cluster cs_test_cluster;

/** The test cluster: the one CSTREAM_BROKERS names, else a new embedded
 * cluster with one broker.
 * @param out receives the cluster; the caller frees it with
 *        cs_test_cluster_destroy.
 * @retval CS_OK *out is set.
 * @retval CS_ERR_KAFKA the embedded cluster or the test producer could not start.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_test_cluster_new(cs_test_cluster **out);
/** Frees the cluster: flushes its test producer (up to 5 s) and stops the
 * embedded cluster if it runs one.
 * @param c the cluster; NULL does nothing. */
CS_API void cs_test_cluster_destroy(cs_test_cluster *c);
/** The cluster's bootstrap servers.
 * @param c the cluster.
 * @return a string owned by the cluster, valid until cs_test_cluster_destroy. */
CS_API const char *cs_test_cluster_brokers(const cs_test_cluster *c);
/** Whether this is the embedded cluster.
 * @param c the cluster.
 * @return 1 for the embedded cluster, 0 for the one CSTREAM_BROKERS names. */
CS_API int cs_test_cluster_is_embedded(const cs_test_cluster *c);

/** A broker on the test cluster with test-friendly timings (session.timeout.ms
 * 6000, fetch.wait.max.ms 10, short auto-commit interval).
 *
 * Owned like cs_kafka_new's result: add it to an app (cs_app_add_kafka) or
 * free it with cs_kafka_destroy. Configuring thread.
 * @param c the cluster.
 * @return the broker, or NULL (cs_errmsg() says why). */
CS_API cs_kafka *cs_test_kafka_new(const cs_test_cluster *c);

/** Writes "<prefix>-<pid>-<counter>-<random>" into buf: fresh topics and groups per test.
 *
 * Any thread (the counter is atomic).
 * @param buf the caller's buffer.
 * @param size its size; the name is cut to fit (snprintf).
 * @param prefix the name's start. */
CS_API void cs_test_unique_name(char *buf, size_t size, const char *prefix);

/** Embedded cluster only: takes its broker down (connections dropped and
 * refused) or brings it back. CS_ERR_UNSUPPORTED on an external cluster.
 * @param c the cluster.
 * @param down non-zero: down; 0: up again.
 * @retval CS_OK done.
 * @retval CS_ERR_UNSUPPORTED not the embedded cluster.
 * @retval CS_ERR_KAFKA the mock refused. */
CS_API cs_err cs_test_cluster_set_down(cs_test_cluster *c, int down);

/** Embedded cluster only: makes the topic answer with a Kafka error code (0
 * clears it), e.g. 3 (UNKNOWN_TOPIC_OR_PARTITION): publishes to it fail.
 * @param c the cluster.
 * @param topic the topic.
 * @param kafka_error a Kafka protocol error code, 0 to clear.
 * @retval CS_OK done.
 * @retval CS_ERR_UNSUPPORTED not the embedded cluster. */
CS_API cs_err cs_test_topic_set_error(cs_test_cluster *c, const char *topic, int kafka_error);

/* ---- fault injection: embedded cluster only (CS_ERR_UNSUPPORTED elsewhere) ---- */

/** An embedded cluster of `brokers` brokers (ids 1..brokers) even when
 * CSTREAM_BROKERS is set: for tests that move leaders and coordinators. Topics
 * get their leaders spread over the brokers.
 * @param brokers how many, at least 1.
 * @param out receives the cluster; the caller frees it with
 *        cs_test_cluster_destroy.
 * @retval CS_OK *out is set.
 * @retval CS_ERR_ARG brokers < 1.
 * @retval CS_ERR_KAFKA the cluster or its test producer could not start.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_test_cluster_new_embedded(int brokers, cs_test_cluster **out);
/** The next n requests of Kafka API `api_key` (0 Produce, 1 Fetch, 8
 * OffsetCommit, 9 OffsetFetch, 10 FindCoordinator, 11 JoinGroup, 12 Heartbeat,
 * 14 SyncGroup), to any broker, fail with errors[0], errors[1], ... (Kafka
 * error codes; -195, librdkafka's _TRANSPORT, drops the connection instead).
 * @param c the cluster.
 * @param api_key the Kafka API key, 0 to 32767.
 * @param n how many errors.
 * @param errors n error codes (copied).
 * @retval CS_OK pushed.
 * @retval CS_ERR_UNSUPPORTED not the embedded cluster.
 * @retval CS_ERR_ARG api_key out of range, or errors NULL with n > 0.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_test_cluster_push_request_errors(cs_test_cluster *c, int api_key, size_t n, const int *errors);
/** Takes Kafka API `api_key` out of what the brokers offer (their ApiVersions
 * answer no longer lists it), as a broker too old for it would; for the rest
 * of the cluster's life. E.g. 68 (ConsumerGroupHeartbeat): brokers before
 * the consumer group protocol.
 * @param c the cluster.
 * @param api_key the Kafka API key, 0 to 32767.
 * @retval CS_OK withdrawn.
 * @retval CS_ERR_UNSUPPORTED not the embedded cluster.
 * @retval CS_ERR_ARG api_key out of range.
 * @retval CS_ERR_KAFKA the embedded cluster does not know that API. */
CS_API cs_err cs_test_cluster_withdraw_api(cs_test_cluster *c, int api_key);
/** Forgets the errors still pushed for api_key.
 * @param c the cluster.
 * @param api_key the Kafka API key.
 * @retval CS_OK cleared.
 * @retval CS_ERR_UNSUPPORTED not the embedded cluster. */
CS_API cs_err cs_test_cluster_clear_request_errors(cs_test_cluster *c, int api_key);
/** The same for the requests one broker receives: its next n requests of
 * `api_key` fail with errors[0], errors[1], ... An error 0 answers the request
 * normally, so a stack of zeros counts requests (a probe). Unlike the
 * cluster-wide errors these can be counted (below), which lets a test show
 * that the fault it injected took effect. Once a broker has had errors pushed
 * for api_key, the cluster-wide errors of cs_test_cluster_push_request_errors no
 * longer reach it for that key (librdkafka 2.0.2's mock looks at the broker's
 * stack first, even when it is empty); cs_test_cluster_clear_request_errors does not
 * clear a broker's stack.
 * @param c the cluster.
 * @param broker the broker id.
 * @param api_key the Kafka API key, 0 to 32767.
 * @param n how many errors.
 * @param errors n error codes (copied).
 * @retval CS_OK pushed.
 * @retval CS_ERR_UNSUPPORTED not the embedded cluster.
 * @retval CS_ERR_ARG api_key out of range, or errors NULL with n > 0.
 * @retval CS_ERR_KAFKA the mock refused (e.g. no such broker). */
CS_API cs_err cs_test_broker_push_request_errors(cs_test_cluster *c, int broker, int api_key, size_t n,
                                                 const int *errors);
/** How many errors pushed onto the broker's stack for api_key no request has
 * met yet (0 once every one was answered, or if none was pushed).
 * @param c the cluster.
 * @param broker the broker id.
 * @param api_key the Kafka API key, 0 to 32767.
 * @param left receives the count.
 * @retval CS_OK *left is set.
 * @retval CS_ERR_UNSUPPORTED not the embedded cluster.
 * @retval CS_ERR_ARG api_key out of range or left is NULL.
 * @retval CS_ERR_KAFKA the mock refused (e.g. no such broker). */
CS_API cs_err cs_test_broker_request_errors_left(cs_test_cluster *c, int broker, int api_key, size_t *left);
/** Takes one broker down (connections dropped and refused; its partitions keep
 * their leader) or brings it back.
 * @param c the cluster.
 * @param broker the broker id.
 * @param down non-zero: down; 0: up again.
 * @retval CS_OK done.
 * @retval CS_ERR_UNSUPPORTED not the embedded cluster.
 * @retval CS_ERR_KAFKA the mock refused (e.g. no such broker). */
CS_API cs_err cs_test_broker_set_down(cs_test_cluster *c, int broker, int down);
/** Delays every response of a broker by rtt_ms (0: none).
 * @param c the cluster.
 * @param broker the broker id.
 * @param rtt_ms the delay in ms.
 * @retval CS_OK done.
 * @retval CS_ERR_UNSUPPORTED not the embedded cluster.
 * @retval CS_ERR_KAFKA the mock refused (e.g. no such broker). */
CS_API cs_err cs_test_broker_set_rtt(cs_test_cluster *c, int broker, int rtt_ms);
/** Moves a partition's leader to another broker.
 * @param c the cluster.
 * @param topic the topic.
 * @param partition the partition.
 * @param broker the new leader's id.
 * @retval CS_OK done.
 * @retval CS_ERR_UNSUPPORTED not the embedded cluster.
 * @retval CS_ERR_KAFKA the mock refused (e.g. no such topic or broker). */
CS_API cs_err cs_test_partition_set_leader(cs_test_cluster *c, const char *topic, int32_t partition, int broker);
/** Moves a consumer group's coordinator to another broker.
 * @param c the cluster.
 * @param group the group id.
 * @param broker the new coordinator's id.
 * @retval CS_OK done.
 * @retval CS_ERR_UNSUPPORTED not the embedded cluster.
 * @retval CS_ERR_KAFKA the mock refused (e.g. no such broker). */
CS_API cs_err cs_test_group_set_coordinator(cs_test_cluster *c, const char *group, int broker);

/** Creates a topic on either cluster (mock API or Admin API, replication
 * factor 1); on a real cluster a topic that exists already counts as created,
 * and the call waits (up to 10 s) until the metadata shows it.
 * @param c the cluster.
 * @param topic the topic.
 * @param partitions its partition count.
 * @retval CS_OK the topic exists.
 * @retval CS_ERR_TOPIC the cluster refused it; cs_errmsg() has its reason.
 * @retval CS_ERR_TIMEOUT no answer, or not visible in the metadata in time. */
CS_API cs_err cs_test_topic_create(cs_test_cluster *c, const char *topic, int partitions);

/* Real clusters only (Admin API; CS_ERR_UNSUPPORTED on the embedded cluster,
 * whose librdkafka 2.0.2 mock has neither request). Each waits until the
 * cluster's metadata shows the change. */
/** Raises the topic's partition count to `partitions` (CreatePartitions).
 *
 * Real clusters only (Admin API; CS_ERR_UNSUPPORTED on the embedded cluster,
 * whose librdkafka 2.0.2 mock has no CreatePartitions). Waits until the
 * cluster's metadata shows the change (up to 15 s).
 * @param c the cluster.
 * @param topic the topic.
 * @param partitions the new partition count.
 * @retval CS_OK done.
 * @retval CS_ERR_UNSUPPORTED the embedded cluster.
 * @retval CS_ERR_ARG librdkafka refused the request's arguments.
 * @retval CS_ERR_TOPIC the cluster refused it.
 * @retval CS_ERR_TIMEOUT no answer, or the change not visible in time. */
CS_API cs_err cs_test_topic_add_partitions(cs_test_cluster *c, const char *topic, int partitions);
/** Deletes the topic (DeleteTopics). The group offsets of its partitions go with it.
 *
 * Real clusters only, like cs_test_topic_add_partitions; waits until the
 * metadata no longer shows the topic (up to 15 s).
 * @param c the cluster.
 * @param topic the topic.
 * @retval CS_OK done.
 * @retval CS_ERR_UNSUPPORTED the embedded cluster.
 * @retval CS_ERR_TOPIC the cluster refused it.
 * @retval CS_ERR_TIMEOUT no answer, or the topic still visible in time. */
CS_API cs_err cs_test_topic_delete(cs_test_cluster *c, const char *topic);

/** Publishes one record and waits for its delivery report. partition -1: any.
 * key/value may be NULL. *offset_out (if not NULL) gets the record's offset.
 * @param c the cluster.
 * @param topic the topic.
 * @param partition the partition, or -1.
 * @param key the key (copied), or NULL.
 * @param key_len its length.
 * @param value the value (copied), or NULL.
 * @param value_len its length.
 * @param offset_out receives the offset; may be NULL.
 * @retval CS_OK the cluster accepted it.
 * @retval CS_ERR_KAFKA it failed; cs_errmsg() has librdkafka's reason. */
CS_API cs_err cs_test_produce(cs_test_cluster *c, const char *topic, int32_t partition, const void *key, size_t key_len,
                              const void *value, size_t value_len, int64_t *offset_out);
/** Publishes `count` records "<prefix><i>" (i from 0), spread over partitions by key i.
 *
 * The key of record i is i in decimal. Waits (up to 30 s) until all are
 * delivered.
 * @param c the cluster.
 * @param topic the topic.
 * @param prefix the values' start.
 * @param count how many.
 * @retval CS_OK all delivered.
 * @retval CS_ERR_KAFKA some failed or the flush timed out; cs_errmsg() says how many. */
CS_API cs_err cs_test_produce_many(cs_test_cluster *c, const char *topic, const char *prefix, int count);

/** The partition's end offset (high watermark).
 * @param c the cluster.
 * @param topic the topic.
 * @param partition the partition.
 * @param end receives the end offset.
 * @retval CS_OK *end is set.
 * @retval CS_ERR_KAFKA the query failed (10 s timeout). */
CS_API cs_err cs_test_end_offset(cs_test_cluster *c, const char *topic, int32_t partition, int64_t *end);

/** The group's committed offset for a partition: -1 if none (OFFSET_INVALID).
 * @param c the cluster.
 * @param group the group id.
 * @param topic the topic.
 * @param partition the partition.
 * @param offset receives the committed offset, or -1.
 * @retval CS_OK *offset is set.
 * @retval CS_ERR_KAFKA the query failed. */
CS_API cs_err cs_test_committed(cs_test_cluster *c, const char *group, const char *topic, int32_t partition,
                                int64_t *offset);
/** Waits until the committed offset is >= at_least. CS_ERR_TIMEOUT otherwise.
 * @param c the cluster.
 * @param group the group id.
 * @param topic the topic.
 * @param partition the partition.
 * @param at_least the offset to wait for.
 * @param timeout_ms how long to wait.
 * @retval CS_OK committed far enough.
 * @retval CS_ERR_TIMEOUT not within timeout_ms; cs_errmsg() has the last offset.
 * @retval CS_ERR_KAFKA a query failed. */
CS_API cs_err cs_test_wait_committed(cs_test_cluster *c, const char *group, const char *topic, int32_t partition,
                                     int64_t at_least, int timeout_ms);

/** Waits until every subscription of the app has an assignment, nothing is
 * queued or in flight, and every assigned partition is consumed to its end.
 * "Consumed" means a record at the last offset was handed out: a partition
 * written in transactions ends with a commit marker, which is never handed
 * out, so on such topics wait for what the handlers saw instead.
 *
 * From the thread that started the app, while it runs.
 * @param app the running app.
 * @param timeout_ms how long to wait.
 * @retval CS_OK idle.
 * @retval CS_ERR_TIMEOUT not idle within timeout_ms. */
CS_API cs_err cs_test_app_wait_idle(cs_app *app, int timeout_ms);
/** The subscription's commit ticks so far (0 while it does not run). A tick
 * is the committer looking at every assigned partition's settled position,
 * every commit interval, and is counted once what it sent, if anything, was
 * answered, also when nothing had changed. Tracked and Transactional only.
 * For tests of what must not be committed: wait for a few ticks, then look at
 * the committed position.
 *
 * Any thread.
 * @param s the subscription.
 * @return the number of ticks. */
CS_API uint64_t cs_test_sub_commit_ticks(const cs_sub *s);
/** How many times a partition the application paused (cs_sub_pause,
 * cs_sub_pause_partition) started dropping the records it took past its
 * share of the fetch buffer ("shedding"; they are read again after the
 * resume), since the subscription started (0 while it does not run). For
 * tests that need a paused partition to have shed before they resume it.
 *
 * Any thread.
 * @param s the subscription.
 * @return the count. */
CS_API uint64_t cs_test_sub_sheds(const cs_sub *s);
/** How many times a Tracked or Transactional partition whose fetch position
 * librdkafka moved back by itself (a seek on the raw handle, an offset reset
 * after a truncated log) was moved to its first record not settled, since the
 * subscription started (0 while it does not run). For tests that need the
 * move to have happened.
 *
 * Any thread.
 * @param s the subscription.
 * @return the count. */
CS_API uint64_t cs_test_sub_moves_back(const cs_sub *s);
/** How many records the subscription's fetch thread has taken from
 * librdkafka into its fetch buffer since it started (0 while it does not
 * run); records it dropped as repeats or while shedding do not count. The
 * count is updated after each take, before any record of that take is handed
 * to a handler: a handler that sees the count equal to the records handed out
 * so far runs the last record cstream holds, and the next one still has to
 * come from librdkafka. For tests of the fetch path's pace.
 *
 * Any thread.
 * @param s the subscription.
 * @return the count. */
CS_API uint64_t cs_test_sub_taken(const cs_sub *s);
/** Makes the subscription's next `n` re-fetch seeks fail as if librdkafka
 * refused them: the seek that moves a resumed partition back to the first
 * record it dropped (after an application's pause that shed, or a stuck
 * partition's pause). A failed re-fetch is tried again after 200 ms; nothing
 * of the partition is taken meanwhile. For tests of that retry.
 *
 * Any thread.
 * @param s the subscription (running).
 * @param n how many seeks fail (replaces what was left).
 * @retval CS_OK set.
 * @retval CS_ERR_ARG s is NULL.
 * @retval CS_ERR_STATE the subscription is not running. */
CS_API cs_err cs_test_sub_fail_refetches(cs_sub *s, unsigned n);

/** Simulated crash: stops every consumer without committing or closing (the
 * group only notices at session timeout), skips the shutdown hook, frees the app.
 *
 * The app and everything it owns are gone afterwards. From the lifecycle
 * thread, like cs_app_destroy.
 * @param app the app. */
CS_API void cs_test_app_crash(cs_app *app);

#ifdef __cplusplus
}
#endif
#endif
