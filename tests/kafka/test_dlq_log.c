/* test_dlq_log.c — a record sent to the dead-letter topic leaves a WARN line
 * with its subscription, topic, partition, offset, attempts, the dead-letter
 * topic and the reason: when its attempts run out and when it does not
 * decode. Under Tracked the line says "sent" and is logged once the cluster
 * accepted the dead letter (a refused one logs nothing until it is
 * accepted); under Transactional it says "staged in the window's
 * transaction". The line is rate-limited: a burst of dead letters logs at
 * most one line per interval, and the lines plus the similar_since_last they
 * report account for every dead letter. stderr is captured around each run;
 * nothing is asserted while it is captured (a failure message would land in
 * the capture). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cstest.h"

#define LINE "record sent to the dead-letter topic"
#define STAGED "record staged for the dead-letter topic in the window's transaction"
/* src/kafka/producer/dead_letter.c's interval between two such lines. */
#define LOG_INTERVAL_MS 2000

typedef struct wrapped {
    cs_sub *sub;
    uint64_t want;
} wrapped;

static bool dead_lettered(void *arg) {
    wrapped *w = arg;
    cs_sub_stats st;
    cs_sub_stats_get(w->sub, &st);
    return st.dead_lettered >= w->want;
}

static cs_outcome always_retry(cs_delivery *d, void *user) {
    (void)user;
    cs_delivery_set_reason(d, "bank down (attempt %d)", cs_delivery_attempt(d));
    return CS_RETRY;
}

typedef struct item {
    int64_t id;
} item;
static const cs_field item_fields[] = {CS_FIELD_I64(item, id, CS_REQUIRED)};
static CS_TYPE(item_type, item, item_fields);

static cs_outcome ack(cs_delivery *d, void *user) {
    (void)d, (void)user;
    return CS_ACK;
}

typedef enum how { RETRIES_RUN_OUT, TRANSACTIONAL_RETRIES_RUN_OUT, DOES_NOT_DECODE, REFUSED_THEN_ACCEPTED } how;

typedef struct refused {
    cs_sub *sub;
    uint64_t rounds;
} refused;

/* The dead letter was refused `rounds` times: each refusal settles the
 * source as a retry (after the handler's own, none here: max_attempts 1). */
static bool refused_rounds(void *arg) {
    refused *r = arg;
    cs_sub_stats st;
    cs_sub_stats_get(r->sub, &st);
    return st.retried >= r->rounds;
}

/* A burst's tail: the run's handler holds offsets >= burst_tail at this gate
 * (a_burst_is_rate_limited opens it); running_sub is the run's subscription. */
static cst_gate burst_gate;
static int64_t burst_tail = -1;
static _Atomic(cs_sub *) running_sub;

static cs_outcome retry_or_wait(cs_delivery *d, void *user) {
    if (burst_tail >= 0 && cs_delivery_offset(d) >= burst_tail && !cst_gate_wait(&burst_gate, 60000))
        fprintf(stderr, "retry_or_wait: the gate never opened\n");
    return always_retry(d, user);
}

/* Runs a subscription of `topic` that dead-letters each record of it (`n`
 * of them) to `dlq`, until the dead-letter topic took them all. Returns the
 * captured stderr (the caller frees); *ok says whether they were all taken
 * within the deadline, *elapsed_ms how long the capture lasted.
 * REFUSED_THEN_ACCEPTED: the dead-letter topic refuses (embedded cluster)
 * until the dead letter was refused 4 times, over more than two intervals. */
static char *run_capturing(how h, const char *topic, const char *group, const char *dlq, int max_attempts, uint64_t n,
                           bool *ok, long *elapsed_ms) {
    struct timespec t0, t1;
    cst_capture cap;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cst_capture_start(&cap);
    cs_app *app = cs_app_new("dlq-log", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, h == DOES_NOT_DECODE ? ack : retry_or_wait, NULL);
    atomic_store(&running_sub, s);
    cs_err err = cs_sub_group(s, group);
    /* A refused dead letter fails in 0.5 s instead of the default 30. */
    if (!err && h == REFUSED_THEN_ACCEPTED) err = cs_kafka_producer_config(k, "message.timeout.ms", "500");
    if (!err)
        err = cs_sub_commit_mode(s, h == TRANSACTIONAL_RETRIES_RUN_OUT ? CS_COMMIT_TRANSACTIONAL : CS_COMMIT_TRACKED);
    if (!err && h == TRANSACTIONAL_RETRIES_RUN_OUT) err = cs_kafka_instance_id(k, group);
    if (!err && h == DOES_NOT_DECODE) err = cs_sub_decode(s, &cs_codec_json, &item_type);
    if (!err) err = cs_sub_max_attempts(s, max_attempts);
    if (!err) err = cs_sub_dead_letter(s, dlq);
    if (!err) err = cs_app_add_kafka(app, k);
    else cs_kafka_destroy(k);
    if (!err) err = cs_app_start(app);
    bool started = !err;
    /* After the start, which checks that the topic exists; the record after
     * the error, so that its dead letter cannot be accepted before it. */
    if (!err && h == REFUSED_THEN_ACCEPTED)
        err = cs_test_topic_set_error(cst_cluster, dlq, 3 /* UNKNOWN_TOPIC_OR_PARTITION */);
    if (!err && h == REFUSED_THEN_ACCEPTED) err = cs_test_produce(cst_cluster, topic, 0, NULL, 0, "poison", 6, NULL);
    refused r = {s, 4};
    bool refusals = h != REFUSED_THEN_ACCEPTED || (!err && cst_wait(refused_rounds, &r, 30000));
    if (h == REFUSED_THEN_ACCEPTED) cs_test_topic_set_error(cst_cluster, dlq, 0);
    wrapped w = {s, n};
    *ok = !err && refusals && cst_wait(dead_lettered, &w, 30000);
    if (started) cs_app_stop(app);
    atomic_store(&running_sub, NULL);
    cs_app_destroy(app);
    char *text = cst_capture_stop(&cap);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *elapsed_ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    if (err) fail_msg("subscription to %s did not start: %s\n--- captured:\n%s", topic, cs_errmsg(), text);
    if (!refusals) fail_msg("%s: the dead letter was not refused 4 times within 30 s\n--- captured:\n%s", topic, text);
    if (!*ok)
        fail_msg("%s: %llu dead letters not taken within 30 s\n--- captured:\n%s", topic, (unsigned long long)n, text);
    return text;
}

static int count_lines(const char *text, const char *what) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* The sum of similar_since_last over the lines holding `what`. */
static long long sum_similar(const char *text, const char *what) {
    long long sum = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) {
        const char *end = strchr(p, '\n');
        const char *field = strstr(p, " similar_since_last=");
        if (field && (!end || field < end)) sum += atoll(field + strlen(" similar_since_last="));
    }
    return sum;
}

/* line holds ` key=value` followed by a blank or the end (or by anything,
 * when value is only the start of the field's value). */
static void assert_field_at(const char *line, const char *key, const char *value, bool whole) {
    char want[512];
    snprintf(want, sizeof want, " %s=%s", key, value);
    const char *at = strstr(line, want);
    if (!at || (whole && at[strlen(want)] != ' ' && at[strlen(want)] != '\0'))
        fail_msg("the dead-letter line lacks%s%s:\n%s", want, whole ? "" : "...", line);
}
static void assert_field(const char *line, const char *key, const char *value) {
    assert_field_at(line, key, value, true);
}

static void publish_values(const char *topic, int n, const char *value) {
    for (int i = 0; i < n; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, value, strlen(value), NULL));
}

static void prepare(const char *prefix, char *topic, char *group, char *dlq, size_t size) {
    cst_fresh(prefix, 1, topic, group, size);
    snprintf(dlq, size, "%s.dlq", topic);
    CST_OK(cs_test_topic_create(cst_cluster, dlq, 1));
}

/* `reason`: the reason in quotes, or its start (without the closing quote).
 * `what`: LINE, or STAGED under Transactional. */
static void check_line(const char *text, const char *what, const char *topic, const char *dlq, const char *attempts,
                       const char *reason, bool whole_reason) {
    char line[2048];
    if (!cst_log_line(text, what, line, sizeof line)) fail_msg("no \"%s\" line; captured:\n%s", what, text);
    if (!strstr(line, "WARN")) fail_msg("the dead-letter line is not a WARN:\n%s", line);
    assert_field(line, "subscription", topic);
    assert_field(line, "topic", topic);
    assert_field(line, "partition", "0");
    assert_field(line, "offset", "0");
    assert_field(line, "attempts", attempts);
    assert_field(line, "dead_letter_topic", dlq);
    assert_field_at(line, "reason", reason, whole_reason);
}

static void exhausted_record_is_logged(void **state) {
    (void)state;
    char topic[128], group[160], dlq[160];
    prepare("dlqlog", topic, group, dlq, sizeof topic);
    publish_values(topic, 1, "poison");
    bool ok;
    long ms;
    char *text = run_capturing(RETRIES_RUN_OUT, topic, group, dlq, 3, 1, &ok, &ms);
    check_line(text, LINE, topic, dlq, "3", "\"bank down (attempt 3)\"", true);
    free(text);
}

static void transactional_exhausted_record_is_logged(void **state) {
    (void)state;
    char topic[128], group[160], dlq[160];
    prepare("dlqlogtx", topic, group, dlq, sizeof topic);
    publish_values(topic, 1, "poison");
    bool ok;
    long ms;
    char *text = run_capturing(TRANSACTIONAL_RETRIES_RUN_OUT, topic, group, dlq, 2, 1, &ok, &ms);
    check_line(text, STAGED, topic, dlq, "2", "\"bank down (attempt 2)\"", true);
    /* Staged, not yet sent: the line must not claim more. */
    if (count_lines(text, LINE)) fail_msg("a Transactional dead letter logged \"%s\":\n%s", LINE, text);
    free(text);
}

static void undecodable_record_is_logged(void **state) {
    (void)state;
    char topic[128], group[160], dlq[160];
    prepare("dlqlogdec", topic, group, dlq, sizeof topic);
    publish_values(topic, 1, "{\"id\": \"not a number\"}");
    bool ok;
    long ms;
    char *text = run_capturing(DOES_NOT_DECODE, topic, group, dlq, 0, 1, &ok, &ms);
    /* It never reached the handler: attempt 0. */
    check_line(text, LINE, topic, dlq, "0", "\"does not decode as item: ", false);
    free(text);
}

/* A dead letter the cluster refuses is retried, every 1.5 s here, over more
 * than two intervals: the line comes once, when the cluster accepted it, and
 * has nothing to count in similar_since_last (logged when queued, each
 * refused round would log or count). */
static void a_refused_dead_letter_logs_once_accepted(void **state) {
    (void)state;
    if (!cs_test_cluster_is_embedded(cst_cluster))
        cst_skip("embedded cluster only: it injects a topic error, which only the embedded cluster does in-process");
    char topic[128], group[160], dlq[160];
    prepare("dlqlogrefused", topic, group, dlq, sizeof topic); /* the run publishes the record */
    bool ok;
    long ms;
    char *text = run_capturing(REFUSED_THEN_ACCEPTED, topic, group, dlq, 1, 1, &ok, &ms);
    int lines = count_lines(text, LINE);
    if (lines != 1 || sum_similar(text, LINE) != 0)
        fail_msg("%d \"%s\" lines (similar_since_last summing to %lld) for one dead letter refused 4 times, "
                 "then accepted; want 1 and 0\n--- captured:\n%s",
                 lines, LINE, sum_similar(text, LINE), text);
    check_line(text, LINE, topic, dlq, "1", "\"bank down (attempt 1)\"", true);
    free(text);
}

/* The running subscription dead-lettered at least `want`. */
static bool run_dead_lettered(void *arg) {
    cs_sub *s = atomic_load(&running_sub);
    if (!s) return false;
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    return st.dead_lettered >= *(uint64_t *)arg;
}

typedef struct tail_arg {
    uint64_t burst; /* dead letters before the tail */
    bool failed;
} tail_arg;

/* Opens the burst's gate a full interval (and a margin) after the burst's
 * dead letters were all accepted, so that the tail's line is not limited
 * and reports what the burst skipped. Opens it in any case, so that a
 * failed wait cannot hold the run. */
static void *open_after_the_burst(void *arg) {
    tail_arg *t = arg;
    t->failed = !cst_wait(run_dead_lettered, &t->burst, 30000);
    int64_t until = cst_now_ms() + LOG_INTERVAL_MS + 200; /* the wait is the condition: an interval must pass */
    while (!t->failed && cst_now_ms() < until) {
        struct timespec tick = {0, 10 * 1000000};
        nanosleep(&tick, NULL);
    }
    cst_gate_open(&burst_gate);
    return NULL;
}

/* A burst of dead letters, then one more an interval after them: at most one
 * line per interval, whatever the speed (1 + elapsed / interval bounds it),
 * at least two (the burst's first and the last one's), and each line counts
 * the ones skipped since the one before in similar_since_last, so that the
 * lines plus their similar_since_last are all N dead letters (the last line,
 * not limited, reports what the burst skipped). */
static void a_burst_is_rate_limited(void **state) {
    (void)state;
    enum { N = 40 };
    char topic[128], group[160], dlq[160];
    prepare("dlqlogburst", topic, group, dlq, sizeof topic);
    publish_values(topic, N, "poison");
    cst_gate_init(&burst_gate);
    burst_tail = N - 1;
    tail_arg t = {N - 1, false};
    pthread_t opener;
    if (pthread_create(&opener, NULL, open_after_the_burst, &t)) fail_msg("pthread_create failed");
    bool ok;
    long ms;
    char *text = run_capturing(RETRIES_RUN_OUT, topic, group, dlq, 1, N, &ok, &ms);
    pthread_join(opener, NULL);
    burst_tail = -1;
    cst_gate_destroy(&burst_gate);
    if (t.failed) fail_msg("the burst's %d dead letters were not accepted within 30 s\n--- captured:\n%s", N - 1, text);
    int lines = count_lines(text, LINE);
    long long similar = sum_similar(text, LINE);
    long bound = 1 + ms / LOG_INTERVAL_MS;
    if (lines < 2 || lines > bound)
        fail_msg("%d dead-letter lines for %d records in %ld ms (at least 2, at most %ld)\n--- captured:\n%s", lines, N,
                 ms, bound, text);
    if (lines + similar != N)
        fail_msg("%d lines + %lld similar_since_last != %d dead letters\n--- captured:\n%s", lines, similar, N, text);
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exhausted_record_is_logged),   cmocka_unit_test(transactional_exhausted_record_is_logged),
        cmocka_unit_test(undecodable_record_is_logged), cmocka_unit_test(a_refused_dead_letter_logs_once_accepted),
        cmocka_unit_test(a_burst_is_rate_limited),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
