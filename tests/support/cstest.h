/* cstest.h — helpers shared by the cluster tests: one test cluster per test
 * binary, a thread-safe record of what handlers saw, and condition waits. */
#ifndef CSTEST_H
#define CSTEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <cmocka.h>

#include "cstream.h"
#include "cstream/testing.h"
#include "cstest_skip.h" /* cst_skip: skips with a reason, which ctest sees */

extern cs_test_cluster *cst_cluster;
int cst_cluster_setup(void **state);
int cst_cluster_teardown(void **state);

/* Fails the test with cs_errmsg() when expr is not CS_OK. */
#define CST_OK(expr)                                                                                                   \
    do {                                                                                                               \
        cs_err cst_err_ = (expr);                                                                                      \
        if (cst_err_ != CS_OK) fail_msg("%s -> %s: %s", #expr, cs_err_name(cst_err_), cs_errmsg());                    \
    } while (0)

/* Counts how often each (partition, offset) was handled. Any thread. */
typedef struct cst_seen cst_seen;
cst_seen *cst_seen_new(int partitions, int64_t max_offset);
void cst_seen_free(cst_seen *s);
void cst_seen_add(cst_seen *s, int32_t partition, int64_t offset);
int cst_seen_count(cst_seen *s, int32_t partition, int64_t offset);
/* Records seen at least once / more than once. */
size_t cst_seen_distinct(cst_seen *s);
size_t cst_seen_total(cst_seen *s);

/* Milliseconds on the monotonic clock: for deadlines of hand-written polling loops. */
int64_t cst_now_ms(void);

/* The kills a crash test makes: CS_KILLS, 1 to max (3 when unset). 0, garbage
 * or a value out of range fails the test, since a crash test would then pass
 * without a single kill. */
int cst_kills_wanted(int max);

/* A cst_wait predicate: the subscription's consumer (one assigned partition)
 * has fetched, and so queued in cstream, everything up to `end`. */
typedef struct cst_fetched {
    cs_sub *sub;
    int64_t end;
} cst_fetched;
bool cst_fetched_to_end(void *arg);

/* Polls pred every 10 ms until true or timeout: true if it became true. */
bool cst_wait(bool (*pred)(void *arg), void *arg, int timeout_ms);

/* Waits until the subscription's committer has completed `ticks` more commit
 * ticks (cs_test_sub_commit_ticks) than when called: each of them had the
 * chance to commit a position that must not be committed, and what it sent
 * was answered. Fails the test if they do not come within timeout_ms. */
void cst_wait_commit_ticks(const cs_sub *s, int ticks, int timeout_ms);

/* Starts `path` with argv (NULL-terminated, argv[0] included) in a child
 * process. SIGTERM and SIGINT are blocked across fork and exec (the mask
 * survives both), so a stop signal sent right after spawning waits for the
 * service to take it instead of killing the child before its main runs. */
pid_t cst_spawn(const char *path, char *const argv[]);

/* cst_metric_value's lookup as a number: the series' value, or -1 if the
 * series is absent or the metrics cannot be read. */
double cst_metric(cs_app *app, const char *name, const char *labels);

/* Replies that cannot get out, and their release (`blocked` false), for a
 * reply topic `done` that the call creates when blocking. Embedded: every
 * Produce is refused with a retriable error, so replies wait in the producer
 * and their sources stay open. Real broker: the topic takes records of at
 * most 1 byte (max.message.bytes) until altered back, so every reply is
 * refused (MESSAGE_TOO_LARGE, not retriable) and its source comes back as a
 * retry. Fails the test on an admin error. */
void cst_reply_topic_blocked(const char *done, bool blocked);

/* Writes `count` records of `value_bytes` bytes each (no key) to one
 * partition of `topic`, in bulk, and waits for every delivery report. Fails
 * the test if any record is not written within 120 s. For tests that need
 * realistic record sizes in a given partition (cs_test_produce_many writes
 * short values spread by key). */
void cst_produce_sized(const char *topic, int32_t partition, long count, size_t value_bytes);

/* A fresh topic with n partitions and a fresh group name. */
void cst_fresh(const char *prefix, int partitions, char *topic, char *group, size_t size);

/* Reads every record of `topic` that a read_committed consumer sees, from
 * the beginning to the end of each of its `partitions` partitions, and calls
 * fn with its value. Returns the number read, or -1 (with a message on
 * stderr) if the end was not reached within timeout_ms. Call it once the
 * writers stopped: the end is where the last transaction left it. */
long cst_read_committed(const char *topic, int partitions, void (*fn)(const void *value, size_t len, void *arg),
                        void *arg, int timeout_ms);
/* The same with isolation.level read_uncommitted: aborted records included. */
long cst_read_uncommitted(const char *topic, int partitions, void (*fn)(const void *value, size_t len, void *arg),
                          void *arg, int timeout_ms);

/* cst_read_committed for whole records (key, headers, timestamp), as
 * librdkafka hands them to any consumer: a check that does not go through
 * cstream's own accessors. The message is valid during the call only. */
struct rd_kafka_message_s;
long cst_read_records(const char *topic, int partitions, void (*fn)(const struct rd_kafka_message_s *m, void *arg),
                      void *arg, int timeout_ms);
/* The value of the record's last header `name`, as text in buf (cut to
 * size), or NULL if it has no such header. */
const char *cst_header(const struct rd_kafka_message_s *m, const char *name, char *buf, size_t size);

/* Everything the process writes to fd 2 (cstream's log lines, librdkafka's
 * routed through them) goes to a temporary file between cst_capture_start
 * and cst_capture_stop, which restores fd 2 and returns what was written (the
 * caller frees). For tests of what the logs must never contain. */
typedef struct cst_capture {
    char path[64];
    int saved;
} cst_capture;
void cst_capture_start(cst_capture *c);
char *cst_capture_stop(cst_capture *c);
/* The whole file at path, NUL-terminated (the caller frees); "" if it cannot be opened. */
char *cst_slurp(const char *path);
/* Fails the test, quoting the line, if `secret` occurs in `text` (`what` names it). */
void cst_assert_no_secret(const char *what, const char *text, const char *secret);

/* ---- review-fixes: helpers that several tests had their own copy of ------- */

/* A latch: cst_gate_wait blocks until cst_gate_open (or the deadline, on the
 * monotonic clock, so a wall-clock step neither cuts a hold short nor
 * stretches it). Once open it stays open until cst_gate_close. Any thread. */
#include <pthread.h>
typedef struct cst_gate {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool open;
} cst_gate;
void cst_gate_init(cst_gate *g);
void cst_gate_destroy(cst_gate *g);
void cst_gate_open(cst_gate *g);
void cst_gate_close(cst_gate *g);
/* True if the gate was (or became) open within timeout_ms. */
bool cst_gate_wait(cst_gate *g, int timeout_ms);

/* The first line of text containing needle (without its newline), copied
 * into out (cut to size); NULL if there is none, else out. */
char *cst_log_line(const char *text, const char *needle, char *out, size_t size);

/* The value of the first series `name{labels...} value` in the app's
 * /metrics text whose labels start with `labels` (e.g.
 * "subscription=\"orders\",group=\"g\""; NULL or "" for the first series
 * of that name, with or without labels). True and *value set if found. */
bool cst_metric_value(cs_app *app, const char *name, const char *labels, double *value);
/* The same lookup in a metrics text already scraped (an HTTP body). */
bool cst_metric_in(const char *text, const char *name, const char *labels, double *value);

#endif
