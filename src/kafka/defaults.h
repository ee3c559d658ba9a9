/* defaults.h — what cstream uses when a service sets nothing, and the ranges
 * the setters accept: the one source of the numbers in docs/guide.md's
 * settings tables. kafka.c, subscription.c and consumer.c use these names
 * (never a literal), and tests/unit/test_defaults.c compares every row of
 * those tables with them and with the values a fresh cs_kafka and cs_sub
 * really hold, so a default changed in one place only fails the build's
 * tests. Constants only.
 *
 * Owns: nothing (macros only). Locks: none. Threads: any. */
#ifndef CS_KAFKA_DEFAULTS_H
#define CS_KAFKA_DEFAULTS_H

/* ---- the broker (cs_kafka_*) ---------------------------------------------- */
/* How long a publish waits for room in the producer's queue. */
#define CS__DEFAULT_QUEUE_TIMEOUT_MS 5000
#define CS__QUEUE_TIMEOUT_MIN_MS 0 /* no wait: fail at once when the queue is full; no maximum */
/* How long the graceful stop flushes the producer before it gives up and
 * reports unflushed_records. */
#define CS__DEFAULT_FLUSH_TIMEOUT_MS 30000
#define CS__FLUSH_TIMEOUT_MIN_MS 0 /* no maximum */

/* ---- a subscription (cs_sub_*) -------------------------------------------- */
#define CS__DEFAULT_START CS_START_EARLIEST
#define CS__DEFAULT_COMMIT CS_COMMIT_AUTO
#define CS__DEFAULT_LANES CS_LANES_BY_PARTITION

/* cs_sub_reply's queue timeout (no default: it is an argument). */
#define CS__REPLY_QUEUE_TIMEOUT_MIN_MS 0 /* no maximum */

#define CS__DEFAULT_WORKERS 1
#define CS__WORKERS_MIN 1
#define CS__WORKERS_MAX 1024

/* Auto keeps its queue small (it is Auto's loss window after a crash); under
 * Tracked and Transactional the cap only bounds memory. */
#define CS__DEFAULT_MAX_OPEN_AUTO 500
#define CS__DEFAULT_MAX_OPEN_TRACKED 10000
#define CS__MAX_OPEN_MIN 1
#define CS__MAX_OPEN_MAX 10000000

/* Tracked's commit timer; Transactional's window length (shorter: a window's
 * outputs are invisible to read_committed readers until it commits). */
#define CS__DEFAULT_COMMIT_INTERVAL_TRACKED_MS 200
#define CS__DEFAULT_COMMIT_INTERVAL_TRANSACTIONAL_MS 100
#define CS__COMMIT_INTERVAL_MIN_MS 1
#define CS__COMMIT_INTERVAL_MAX_MS 3600000

#define CS__DEFAULT_WINDOW_RECORDS 10000
#define CS__WINDOW_RECORDS_MIN 1
#define CS__WINDOW_RECORDS_MAX 100000000

/* Transactional: how long a retried record may hold its window open. */
#define CS__DEFAULT_STALL_TIMEOUT_MS 5000
#define CS__STALL_TIMEOUT_MIN_MS 1
#define CS__STALL_TIMEOUT_MAX_MS 3600000

#define CS__DEFAULT_DRAIN_TIMEOUT_MS 10000
#define CS__DRAIN_TIMEOUT_MIN_MS 0
#define CS__DRAIN_TIMEOUT_MAX_MS 3600000

#define CS__DEFAULT_HANDLER_TIME_LIMIT_MS 0 /* off */
#define CS__HANDLER_TIME_LIMIT_MIN_MS 0
#define CS__HANDLER_TIME_LIMIT_MAX_MS 86400000

/* Bytes of records fetched and not yet settled, for the whole consumer
 * (docs/fetch-path-design.md 3.3); librdkafka's own pre-fetch bound,
 * queued.max.messages.kbytes, defaults to a quarter of it. The setter takes
 * MIN..MAX; values below CS__FETCH_BUFFER_FLOOR (four of the store's
 * smallest chunks) are raised to it, with a warning. */
#define CS__DEFAULT_FETCH_BUFFER_BYTES 33554432L /* 32 MiB: docs/benchmarks.md, peak RSS under raw librdkafka's */
#define CS__FETCH_BUFFER_MIN 1L
#define CS__FETCH_BUFFER_MAX 1099511627776L /* 1 TiB */
#define CS__FETCH_BUFFER_FLOOR 65536L

#define CS__DEFAULT_MAX_ATTEMPTS 0 /* no cap */
#define CS__MAX_ATTEMPTS_MIN 0
#define CS__MAX_ATTEMPTS_MAX 1000000

#endif
