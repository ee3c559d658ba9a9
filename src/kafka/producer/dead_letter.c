/* dead_letter.c — the headers of a dead-letter record: the source record's own
 * headers in order, then the provenance headers documented in cstream/kafka.h.
 * The source's headers come from the cluster, so nothing about them is
 * assumed: a header that cannot be read, or has no name, is left out rather
 * than handed to librdkafka as a NULL name. And the WARN line that says a
 * record went to the dead-letter topic (Tracked: from its delivery report,
 * once the cluster accepted it) or was staged in a window's transaction
 * (Transactional). No allocation (the caller sizes the arrays).
 *
 * Owns: nothing (the caller's arrays). Locks: none. Threads: any thread. */
#include <stdio.h>
#include <string.h>

#include "core/delivery_internal.h"
#include "base/log.h"
#include "kafka/kafka_internal.h"

size_t cs__dead_letter_headers(const cs_delivery *d, const char *group, const char *reason, cs_header *h, size_t cap,
                               cs_dlq_numbers *nums) {
    size_t n_orig = cs_delivery_header_count(d);
    if (cap < CS_DLQ_HEADERS) return 0;
    size_t n = 0;
    for (size_t i = 0; i < n_orig && n < cap - CS_DLQ_HEADERS; i++) {
        cs_header x = {0};
        if (cs_delivery_header(d, i, &x.name, &x.value, &x.len) == CS_OK && x.name) h[n++] = x;
    }
    snprintf(nums->partition, sizeof nums->partition, "%d", (int)cs_delivery_partition(d));
    snprintf(nums->offset, sizeof nums->offset, "%lld", (long long)cs_delivery_offset(d));
    snprintf(nums->timestamp, sizeof nums->timestamp, "%lld", (long long)cs_delivery_timestamp(d));
    snprintf(nums->attempts, sizeof nums->attempts, "%d", cs_delivery_attempt(d));
    const char *topic = cs_delivery_topic(d) ? cs_delivery_topic(d) : "";
    group = group ? group : "";
    reason = reason ? reason : "";
    h[n++] = (cs_header){"cstream.dlq.topic", topic, strlen(topic)};
    h[n++] = (cs_header){"cstream.dlq.partition", nums->partition, strlen(nums->partition)};
    h[n++] = (cs_header){"cstream.dlq.offset", nums->offset, strlen(nums->offset)};
    h[n++] = (cs_header){"cstream.dlq.timestamp", nums->timestamp, strlen(nums->timestamp)};
    h[n++] = (cs_header){"cstream.dlq.group", group, strlen(group)};
    h[n++] = (cs_header){"cstream.dlq.attempts", nums->attempts, strlen(nums->attempts)};
    h[n++] = (cs_header){"cstream.dlq.reason", reason, strlen(reason)};
    return n;
}

/* Rate-limited like the other per-record warnings: a topic whose records all
 * fail would otherwise log one line per record. docs/retries.md and
 * tests/kafka/test_dlq_log.c (its bound on the lines of a burst) say 2 s. */
#define DEAD_LETTER_LOG_INTERVAL_MS 2000

void cs__dead_letter_log(cs_ratelimit *rl, const char *what, const char *sub, const char *dead_letter_topic,
                         const cs_delivery *d, const char *reason) {
    uint64_t skipped = 0;
    /* Asked first, so that a line the limiter drops costs no formatting. */
    if (!cs__log_enabled(CS_LOG_WARN) || !cs__ratelimit_allow(rl, DEAD_LETTER_LOG_INTERVAL_MS, &skipped)) return;
    CS_LOG_WARN("%s subscription=%s topic=%s partition=%d offset=%lld attempts=%d dead_letter_topic=%s "
                "reason=\"%s\" similar_since_last=%llu" CS_TRACE_FMT,
                what, sub, cs_delivery_topic(d) ? cs_delivery_topic(d) : "", (int)cs_delivery_partition(d),
                (long long)cs_delivery_offset(d), cs_delivery_attempt(d), dead_letter_topic, reason ? reason : "",
                (unsigned long long)skipped, CS_TRACE_ARGS(d));
}
