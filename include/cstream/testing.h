/* cstream/testing.h — the test API for service authors.
 *
 * A test cluster is the embedded Kafka (in this process), or the cluster named
 * by CSTREAM_BROKERS when set (a real broker, or a parent test process's
 * embedded cluster). Topics are created on either (mock API or Admin API).
 * An app under test is an ordinary cs_app whose broker points at the test
 * cluster (cs_test_kafka_new), so it can be stopped, restarted in the same
 * group, or crashed (destroyed without closing). */
#ifndef CSTREAM_TESTING_H
#define CSTREAM_TESTING_H

#include "cstream/export.h"

#include <stddef.h>
#include <stdint.h>

#include "cstream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cs_test_cluster cs_test_cluster;

CS_API cs_err cs_test_cluster_new(cs_test_cluster **out);
CS_API void cs_test_cluster_destroy(cs_test_cluster *c);
CS_API const char *cs_test_cluster_brokers(const cs_test_cluster *c);
CS_API int cs_test_cluster_is_embedded(const cs_test_cluster *c);

/* A broker on the test cluster with test-friendly timings (session.timeout.ms
 * 6000, fetch.wait.max.ms 10, short auto-commit interval). */
CS_API cs_kafka *cs_test_kafka_new(const cs_test_cluster *c);

/* Writes "<prefix>-<pid>-<counter>-<random>" into buf: fresh topics and groups per test. */
CS_API void cs_test_unique_name(char *buf, size_t size, const char *prefix);

/* Embedded cluster only: takes its broker down (connections dropped and
 * refused) or brings it back. CS_ERR_UNSUPPORTED on an external cluster. */
CS_API cs_err cs_test_cluster_set_down(cs_test_cluster *c, int down);

/* Embedded cluster only: makes the topic answer with a Kafka error code (0
 * clears it), e.g. 3 (UNKNOWN_TOPIC_OR_PARTITION): publishes to it fail. */
CS_API cs_err cs_test_topic_set_error(cs_test_cluster *c, const char *topic, int kafka_error);

/* ---- fault injection: embedded cluster only (CS_ERR_UNSUPPORTED elsewhere) ---- */

/* An embedded cluster of `brokers` brokers (ids 1..brokers) even when
 * CSTREAM_BROKERS is set: for tests that move leaders and coordinators. Topics
 * get their leaders spread over the brokers. */
CS_API cs_err cs_test_cluster_new_embedded(int brokers, cs_test_cluster **out);
/* The next n requests of Kafka API `api_key` (0 Produce, 1 Fetch, 8
 * OffsetCommit, 9 OffsetFetch, 10 FindCoordinator, 11 JoinGroup, 12 Heartbeat,
 * 14 SyncGroup), to any broker, fail with errors[0], errors[1], ... (Kafka
 * error codes; -195, librdkafka's _TRANSPORT, drops the connection instead). */
CS_API cs_err cs_test_push_request_errors(cs_test_cluster *c, int api_key, size_t n, const int *errors);
/* Forgets the errors still pushed for api_key. */
CS_API cs_err cs_test_clear_request_errors(cs_test_cluster *c, int api_key);
/* The same for the requests one broker receives: its next n requests of
 * `api_key` fail with errors[0], errors[1], ... An error 0 answers the request
 * normally, so a stack of zeros counts requests (a probe). Unlike the
 * cluster-wide errors these can be counted (below), which lets a test show
 * that the fault it injected took effect. Once a broker has had errors pushed
 * for api_key, the cluster-wide errors of cs_test_push_request_errors no
 * longer reach it for that key (librdkafka 2.0.2's mock looks at the broker's
 * stack first, even when it is empty); cs_test_clear_request_errors does not
 * clear a broker's stack. */
CS_API cs_err cs_test_broker_push_request_errors(cs_test_cluster *c, int broker, int api_key, size_t n, const int *errors);
/* How many errors pushed onto the broker's stack for api_key no request has
 * met yet (0 once every one was answered, or if none was pushed). */
CS_API cs_err cs_test_broker_request_errors_left(cs_test_cluster *c, int broker, int api_key, size_t *left);
/* Takes one broker down (connections dropped and refused; its partitions keep
 * their leader) or brings it back. */
CS_API cs_err cs_test_broker_set_down(cs_test_cluster *c, int broker, int down);
/* Delays every response of a broker by rtt_ms (0: none). */
CS_API cs_err cs_test_broker_set_rtt(cs_test_cluster *c, int broker, int rtt_ms);
/* Moves a partition's leader to another broker. */
CS_API cs_err cs_test_partition_set_leader(cs_test_cluster *c, const char *topic, int32_t partition, int broker);
/* Moves a consumer group's coordinator to another broker. */
CS_API cs_err cs_test_group_coordinator_set(cs_test_cluster *c, const char *group, int broker);

CS_API cs_err cs_test_topic_create(cs_test_cluster *c, const char *topic, int partitions);

/* Real clusters only (Admin API; CS_ERR_UNSUPPORTED on the embedded cluster,
 * whose librdkafka 2.0.2 mock has neither request). Each waits until the
 * cluster's metadata shows the change. */
/* Raises the topic's partition count to `partitions` (CreatePartitions). */
CS_API cs_err cs_test_topic_add_partitions(cs_test_cluster *c, const char *topic, int partitions);
/* Deletes the topic (DeleteTopics). The group offsets of its partitions go with it. */
CS_API cs_err cs_test_topic_delete(cs_test_cluster *c, const char *topic);

/* Publishes one record and waits for its delivery report. partition -1: any.
 * key/value may be NULL. *offset_out (if not NULL) gets the record's offset. */
CS_API cs_err cs_test_produce(cs_test_cluster *c, const char *topic, int32_t partition, const void *key, size_t key_len,
                              const void *value, size_t value_len, int64_t *offset_out);
/* Publishes `count` records "<prefix><i>" (i from 0), spread over partitions by key i. */
CS_API cs_err cs_test_produce_many(cs_test_cluster *c, const char *topic, const char *prefix, int count);

/* The partition's end offset (high watermark). */
CS_API cs_err cs_test_end_offset(cs_test_cluster *c, const char *topic, int32_t partition, int64_t *end);

/* The group's committed offset for a partition: -1 if none (OFFSET_INVALID). */
CS_API cs_err cs_test_committed(cs_test_cluster *c, const char *group, const char *topic, int32_t partition,
                                int64_t *offset);
/* Waits until the committed offset is >= at_least. CS_ERR_TIMEOUT otherwise. */
CS_API cs_err cs_test_wait_committed(cs_test_cluster *c, const char *group, const char *topic, int32_t partition,
                                     int64_t at_least, int timeout_ms);

/* Waits until every subscription of the app has an assignment, nothing is
 * queued or in flight, and every assigned partition is consumed to its end.
 * "Consumed" means a record at the last offset was handed out: a partition
 * written in transactions ends with a commit marker, which is never handed
 * out, so on such topics wait for what the handlers saw instead. */
CS_API cs_err cs_test_app_wait_idle(cs_app *app, int timeout_ms);
/* The subscription's commit ticks so far (0 while it does not run). A tick
 * is the committer looking at every assigned partition's settled position,
 * every commit interval, and is counted once what it sent, if anything, was
 * answered, also when nothing had changed. Tracked and Transactional only.
 * For tests of what must not be committed: wait for a few ticks, then look at
 * the committed position. */
CS_API uint64_t cs_test_sub_commit_ticks(const cs_sub *s);

/* Simulated crash: stops every consumer without committing or closing (the
 * group only notices at session timeout), skips the shutdown hook, frees the app. */
CS_API void cs_test_app_crash(cs_app *app);

#ifdef __cplusplus
}
#endif
#endif
