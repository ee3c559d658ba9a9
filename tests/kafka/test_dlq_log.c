/* test_dlq_log.c — a record sent to the dead-letter topic leaves a WARN line
 * with its subscription, topic, partition, offset, attempts, the dead-letter
 * topic and the reason: when its attempts run out (Tracked and
 * Transactional) and when it does not decode. The line is rate-limited: a
 * burst of dead letters logs at most one line per interval. stderr is
 * captured around each run; nothing is asserted while it is captured (a
 * failure message would land in the capture). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cstest.h"

#define LINE "record sent to the dead-letter topic"
/* src/kafka/dead_letter.c's interval between two such lines. */
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

typedef enum how { RETRIES_RUN_OUT, TRANSACTIONAL_RETRIES_RUN_OUT, DOES_NOT_DECODE } how;

/* Runs a subscription of `topic` that dead-letters each record of it (`n`
 * of them) to `dlq`, until the dead-letter topic took them all. Returns the
 * captured stderr (the caller frees); *ok says whether they were all taken
 * within the deadline, *elapsed_ms how long the capture lasted. */
static char *run_capturing(how h, const char *topic, const char *group, const char *dlq, int max_attempts,
                           uint64_t n, bool *ok, long *elapsed_ms) {
    struct timespec t0, t1;
    cst_capture cap;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cst_capture_start(&cap);
    cs_app *app = cs_app_new("dlq-log", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, h == DOES_NOT_DECODE ? ack : always_retry, NULL);
    cs_err err = cs_sub_group(s, group);
    if (!err) err = cs_sub_commit(s, h == TRANSACTIONAL_RETRIES_RUN_OUT ? CS_COMMIT_TRANSACTIONAL : CS_COMMIT_TRACKED);
    if (!err && h == TRANSACTIONAL_RETRIES_RUN_OUT) err = cs_kafka_instance_id(k, group);
    if (!err && h == DOES_NOT_DECODE) err = cs_sub_decode(s, &cs_codec_json, &item_type);
    if (!err) err = cs_sub_max_attempts(s, max_attempts);
    if (!err) err = cs_sub_dead_letter(s, dlq);
    if (!err) err = cs_app_add_kafka(app, k);
    else cs_kafka_destroy(k);
    if (!err) err = cs_app_start(app);
    wrapped w = {s, n};
    *ok = !err && cst_wait(dead_lettered, &w, 30000);
    if (!err) cs_app_stop(app);
    cs_app_destroy(app);
    char *text = cst_capture_stop(&cap);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *elapsed_ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    if (err) fail_msg("subscription to %s did not start: %s\n--- captured:\n%s", topic, cs_errmsg(), text);
    if (!*ok) fail_msg("%s: %llu dead letters not taken within 30 s\n--- captured:\n%s", topic,
                       (unsigned long long)n, text);
    return text;
}

/* The first line of text holding LINE, copied into out; false if none. */
static bool find_line(const char *text, char *out, size_t size) {
    const char *at = strstr(text, LINE);
    if (!at) return false;
    const char *start = at;
    while (start > text && start[-1] != '\n') start--;
    const char *end = strchr(at, '\n');
    size_t len = end ? (size_t)(end - start) : strlen(start);
    snprintf(out, size, "%.*s", (int)len, start);
    return true;
}

static int count_lines(const char *text) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, LINE)); p += strlen(LINE)) n++;
    return n;
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
    for (int i = 0; i < n; i++)
        CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, value, strlen(value), NULL));
}

static void prepare(const char *prefix, char *topic, char *group, char *dlq, size_t size) {
    cst_fresh(prefix, 1, topic, group, size);
    snprintf(dlq, size, "%s.dlq", topic);
    CST_OK(cs_test_topic_create(cst_cluster, dlq, 1));
}

/* `reason`: the reason in quotes, or its start (without the closing quote). */
static void check_line(const char *text, const char *topic, const char *dlq, const char *attempts,
                       const char *reason, bool whole_reason) {
    char line[2048];
    if (!find_line(text, line, sizeof line)) fail_msg("no \"%s\" line; captured:\n%s", LINE, text);
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
    check_line(text, topic, dlq, "3", "\"bank down (attempt 3)\"", true);
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
    check_line(text, topic, dlq, "2", "\"bank down (attempt 2)\"", true);
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
    check_line(text, topic, dlq, "0", "\"does not decode as item: ", false);
    free(text);
}

/* A burst of dead letters: at most one line per interval, whatever the
 * speed (1 + elapsed / interval bounds it); the lines skipped are counted in
 * the next one's similar_since_last. */
static void a_burst_is_rate_limited(void **state) {
    (void)state;
    enum { N = 40 };
    char topic[128], group[160], dlq[160];
    prepare("dlqlogburst", topic, group, dlq, sizeof topic);
    publish_values(topic, N, "poison");
    bool ok;
    long ms;
    char *text = run_capturing(RETRIES_RUN_OUT, topic, group, dlq, 1, N, &ok, &ms);
    int lines = count_lines(text);
    long bound = 1 + ms / LOG_INTERVAL_MS;
    if (lines < 1 || lines > bound)
        fail_msg("%d dead-letter lines for %d records in %ld ms (at most %ld)\n--- captured:\n%s", lines, N, ms, bound,
                 text);
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exhausted_record_is_logged),
        cmocka_unit_test(transactional_exhausted_record_is_logged),
        cmocka_unit_test(undecodable_record_is_logged),
        cmocka_unit_test(a_burst_is_rate_limited),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
