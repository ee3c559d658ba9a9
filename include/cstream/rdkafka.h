/** @file
 * cstream/rdkafka.h — the escape hatch: the librdkafka handle under a running
 * subscription, for what cstream does not wrap. Borrowed: valid while the app
 * runs; never close, destroy, poll, assign or commit through it (cstream owns
 * those), or the guarantees are gone. */
#ifndef CSTREAM_RDKAFKA_H
#define CSTREAM_RDKAFKA_H

#include "cstream/export.h"

/* librdkafka 2.3.0 and later declare a function returning `const int`
 * (rd_kafka_TopicPartitionInfo_partition), which -Wextra reports and
 * -Werror makes fatal when the header comes in with -I rather than
 * -isystem: a service's own warning flags must not break on it. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-qualifiers"
#endif
#include <librdkafka/rdkafka.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#include "cstream/kafka.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The subscription's librdkafka consumer, for what cstream does not wrap
 * (positions, watermarks, metadata); NULL unless the app runs. The handle is
 * valid only while the app runs: once a stop begins (cs_app_stop, a stop
 * signal, a fatal error) it must not be used, nor any pointer taken from it,
 * since the stop closes and destroys it without waiting for callers (the
 * subscription's stats lock guards the pointer read here, not its use).
 * Call it from a thread that the stop waits for or that stops using it
 * first; do not keep it.
 *
 * Which raw calls keep the guarantees:
 * - Reading calls keep them: rd_kafka_position, rd_kafka_committed,
 *   rd_kafka_query_watermark_offsets, rd_kafka_get_watermark_offsets,
 *   rd_kafka_assignment, metadata and group queries.
 * - A seek (rd_kafka_seek, rd_kafka_seek_partitions) keeps them, but is
 *   not the seek the application asked for: under Tracked and Transactional,
 *   a seek back below records already taken moves the partition to the
 *   lowest of the target and its first record not settled (Transactional:
 *   its committed position), so that no record handed out is skipped;
 *   records settled above that point are handled again (duplicates, never
 *   loss). A seek forward skips records as the application asked. Use
 *   cs_sub_seek for a seek with its own epoch and checked result.
 * - Pausing and resuming through it (rd_kafka_pause_partitions) races with
 *   cstream's own pauses: use cs_sub_pause and cs_sub_resume.
 * - Committing (rd_kafka_commit*, rd_kafka_offsets_store), assigning,
 *   subscribing, polling, closing or destroying through it bypasses them:
 *   a commit can pass records still in flight, a poll takes events
 *   cstream's fetch thread needs. Never do it.
 * @param s the subscription (NULL gives NULL).
 * @return the consumer handle, borrowed (owned by cstream; never destroy it),
 *         or NULL. */
CS_API rd_kafka_t *cs_sub_rdkafka_consumer(cs_sub *s);

#ifdef __cplusplus
}
#endif
#endif
