/* lock_order.h — every mutex in cstream, and the order they nest in. No code:
 * the one list that the comment beside each lock refers to ("lock order:
 * level N") and that docs/architecture.md ("Locks and their order") copies.
 * Owns: nothing (a list). Locks: none; it names them all. Threads: none.
 *
 * A thread holding a lock of level N takes only locks of a higher level.
 * Locks on the same level never nest in each other. A lock without a level
 * is a leaf that nests in nothing of cstream's and takes nothing.
 *
 *   1  ops_state.lock          src/ops/cli.c          cs_app_main's "the app runs" flag against the
 *                                                      HTTP routes (/metrics, /readyz) that read the
 *                                                      subscriptions
 *   1  cs_db.lock              src/database/database_internal.h  a service's database: the window's
 *                                                      transaction; held by a handler's run from its
 *                                                      first write until its records are settled,
 *                                                      and by the fetch thread for a window commit
 *   2  cs_sub.stats_lock       src/kafka/kafka_internal.h  the subscription's consumer pointer and its
 *                                                      final counters, for readers (cs_sub_stats_get,
 *                                                      /metrics, cs_sub_rdkafka_consumer)
 *   3  cs_consumer.commit_lock src/kafka/consumer/committer.c   the order in which commits are enqueued
 *   3  cs_consumer.requests.lock src/kafka/consumer/fetch_requests.c the application's seek and pause requests
 *                                                      waiting for the fetch thread (taken under
 *                                                      stats_lock by the caller)
 *   4  cs_pipeline.parts_lock  src/core/pipeline.c     the partition registry
 *   5  cs_part.lock            src/core/partition_internal.h  one partition's state
 *   6  lane.lock               src/core/lanes.c        a lane's queue (a retry to its head)
 *   6  cs_pipeline.delay_lock  src/core/delay.c        the delay heap (a delayed retry)
 *   6  cs_store.free_lock      src/core/store.c        the store's recycled chunks (a record released
 *                                                      under its partition lock)
 *   6  cs_store.wake_mx        src/core/store.c        the store's wake hook against the consumer's
 *                                                      end (a record released under its partition
 *                                                      lock); only wake_lock is taken under it
 *   7  cs_consumer.wake_lock   src/kafka/consumer/fetch_parts.c wake-ups against the fetch thread's end; also
 *                                                      taken under a librdkafka queue lock
 *                                                      (on_records, fetch_take.c)
 *   -  cs_app.lock             src/core/app.c          stop request, fatal reason
 *   -  lane.run_lock           src/core/worker.c       the running handler, for the time-limit check
 *   -  cs_pipeline.gate_lock   src/core/worker.c       the measurement-only stop-the-world gate
 *   -  cs_kafka.producer_lock  src/kafka/kafka_internal.h  (a rwlock) the producer pointer; its read
 *                                                      side is held while a record is queued, and
 *                                                      takes cs_producer.lock to wait for space
 *   -  cs_producer.lock        src/kafka/producer/producer.c    the "space" condition
 *   -  outgoing.lock           src/kafka/producer/producer.c    one blocking publish's completion
 *   -  cs_ctl_req.mx           src/kafka/consumer/fetch_control.c  one seek or pause request's completion
 *   -  destroyer.lock          src/kafka/consumer/consumer.c    a consumer destroy that may hang
 *   -  cs_test_cluster.lock    src/kafka/testing/testing.c     the test API's producer (tests only)
 *   -  cs_client_stats.lock    src/kafka/client_stats.c  a client's last statistics, parsed (swapped
 *                                                      in whole, read by /metrics)
 *   -  cs_db.await_mx          src/database/database_internal.h  the count of records whose writes
 *                                                      wait for their reply (taken under a partition
 *                                                      lock by the settling thread)
 *   -  cs__schema_cache.lock   src/schema/schema_cache.h  a registry client's schema cache (never held
 *                                                      across the HTTP request of a miss)
 *   -  regcodec.lock           src/schema/registry_codec.c  a registry-backed codec's prepared writer
 *                                                      schemas and registered ids (never held across a
 *                                                      registry request or a call into the format)
 *   -  avro_reg.lock           src/schema/avro_registry.c  the Avro schemas derived from field tables
 *   -  pb_reg.lock             src/schema/protobuf_registry.c  the versions of a Protobuf codec's imported
 *                                                      files (never held across a registry request)
 *
 * What no mutex is ever held across but cs_db.lock (Database mode: a run's
 * writes are the window's transaction, so the run holds it): a handler, a hook or any other user
 * callback; a thread join; a librdkafka call that blocks (rd_kafka_consumer_close,
 * rd_kafka_commit or a commit whose result is awaited, rd_kafka_flush,
 * rd_kafka_destroy, a poll with a timeout), with three exceptions, each
 * bounded: the producer read lock across the wait for queue space (at
 * most the queue timeout), ops_state.lock across /readyz's metadata probe of a
 * consumer that heard "all brokers down" (at most 1 s per subscription, so a
 * stop waits for the probe in progress) and across /readyz's probe of a
 * schema registry last seen down (cs_codec.ready: an HTTP request of at most
 * 1 s per subscription with a registry-backed codec), and cs_test_cluster.lock across the
 * test API's synchronous produce (tests only). The other librdkafka calls
 * made under a lock wait on no broker: rd_kafka_queue_yield (wake_lock),
 * rd_kafka_commit_queue onto a queue (commit_lock), rd_kafka_producev without
 * RD_KAFKA_MSG_F_BLOCK (producer read lock), rd_kafka_get_watermark_offsets
 * (stats_lock, /metrics) return at once. rd_kafka_assignment (commit_lock)
 * does not: in librdkafka 2.0.2 it is a request/reply to librdkafka's main
 * thread (an op on the group's queue, awaited without a timeout), so it lasts
 * as long as that thread takes to reach the op. That thread serves timers and
 * ops and talks to no broker synchronously; of cstream's locks it takes only
 * wake_lock (on_records), which no commit_lock holder holds across
 * the call, so the wait ends, but it is not bounded by anything of ours. */
#ifndef CS_LOCK_ORDER_H
#define CS_LOCK_ORDER_H
#endif
