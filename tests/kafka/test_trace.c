/* test_trace.c — W3C trace context: a record's traceparent header is what
 * cs_delivery_traceparent returns (only when valid: an invalid one is absent),
 * its reply carries it, a publish with .parent = the delivery carries it (an
 * explicit traceparent header of the record wins), a publish without a parent
 * does not; and log lines about the delivery carry its trace id. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cstest.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define TRACE_ID "4bf92f3577b34da6a3ce929d0e0e4736"
#define OTHER_TP "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

/* One input: its value names the case, its traceparent headers in order. */
typedef struct input {
    const char *value;
    const char *headers[2]; /* traceparent values, NULL: fewer */
    const char *expect;     /* what cs_delivery_traceparent returns and what is carried; NULL: none */
} input;

static const input inputs[] = {
    {"valid", {TP, NULL}, TP},
    {"none", {NULL, NULL}, NULL},
    {"upper", {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", NULL}, NULL},
    {"zero", {"00-00000000000000000000000000000000-00f067aa0ba902b7-01", NULL}, NULL},
    {"ff", {"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", NULL}, NULL},
    {"long", {TP "-extra", NULL}, NULL},
    {"last-invalid", {TP, "garbage"}, NULL}, /* the last header counts, like cs_delivery_header_get */
    {"last-valid", {"garbage", OTHER_TP}, OTHER_TP},
};
#define N_INPUTS (sizeof inputs / sizeof *inputs)

static const input *input_named(const char *v, size_t len) {
    for (size_t i = 0; i < N_INPUTS; i++)
        if (strlen(inputs[i].value) == len && !memcmp(inputs[i].value, v, len)) return &inputs[i];
    return NULL;
}

/* ---- the service under test ------------------------------------------------------ */

typedef struct service {
    cs_kafka *k;
    const char *pub_topic;
    bool transactional; /* publishes are outputs (cs_delivery_publish): their parent is always d */
    pthread_mutex_t lock;
    char seen[N_INPUTS][64]; /* cs_delivery_traceparent per input ("-" for NULL) */
    int publish_failures;
} service;

static cs_err publish(service *s, cs_delivery *d, const cs_record *r) {
    return s->transactional ? cs_delivery_publish(d, r) : cs_publish(s->k, r, NULL);
}

static cs_outcome handle(cs_delivery *d, void *user) {
    service *s = user;
    size_t len;
    const char *v = cs_delivery_value(d, &len);
    const input *in = v ? input_named(v, len) : NULL;
    if (!in) return CS_DROP;
    const char *tp = cs_delivery_traceparent(d);
    pthread_mutex_lock(&s->lock);
    snprintf(s->seen[in - inputs], sizeof s->seen[0], "%s", tp ? tp : "-");
    pthread_mutex_unlock(&s->lock);

    char buf[64];
    int n = snprintf(buf, sizeof buf, "r:%s", in->value);
    if (cs_delivery_reply(d, NULL, 0, buf, (size_t)n) != CS_OK) return CS_RETRY;
    /* A publish made on behalf of the delivery. */
    n = snprintf(buf, sizeof buf, "p:%s", in->value);
    cs_record r = {.topic = s->pub_topic, .partition = -1, .value = buf, .value_len = (size_t)n, .parent = d};
    cs_err err = publish(s, d, &r);
    if (!err && !strcmp(in->value, "valid")) {
        /* An explicit traceparent header wins over the parent's. */
        cs_header h[] = {{"traceparent", OTHER_TP, strlen(OTHER_TP)}};
        cs_record x = {.topic = s->pub_topic,
                       .partition = -1,
                       .value = "x:valid",
                       .value_len = 7,
                       .headers = h,
                       .n_headers = 1,
                       .parent = d};
        err = publish(s, d, &x);
        /* No parent: nothing is carried (an output of d under Transactional
         * follows from d anyway). */
        cs_record plain = {.topic = s->pub_topic, .partition = -1, .value = "n:valid", .value_len = 7};
        if (!err) err = publish(s, d, &plain);
    }
    if (err) {
        pthread_mutex_lock(&s->lock);
        s->publish_failures++;
        pthread_mutex_unlock(&s->lock);
        return CS_RETRY;
    }
    return CS_ACK;
}

/* ---- reading the outputs back ----------------------------------------------------- */

#define MAX_OUT 32
typedef struct outputs {
    pthread_mutex_t lock;
    int n;
    char value[MAX_OUT][32];
    int traceparents[MAX_OUT]; /* how many traceparent headers */
    char traceparent[MAX_OUT][64];
} outputs;

static cs_outcome collect(cs_delivery *d, void *user) {
    outputs *o = user;
    size_t len;
    const char *v = cs_delivery_value(d, &len);
    pthread_mutex_lock(&o->lock);
    if (o->n < MAX_OUT) {
        int i = o->n++;
        snprintf(o->value[i], sizeof o->value[i], "%.*s", (int)len, v ? v : "");
        for (size_t h = 0; h < cs_delivery_header_count(d); h++) {
            const char *name;
            const void *hv;
            size_t hl;
            if (cs_delivery_header(d, h, &name, &hv, &hl) == CS_OK && !strcmp(name, "traceparent")) {
                o->traceparents[i]++;
                snprintf(o->traceparent[i], sizeof o->traceparent[i], "%.*s", (int)hl, hv ? (const char *)hv : "");
            }
        }
    }
    pthread_mutex_unlock(&o->lock);
    return CS_ACK;
}

typedef struct count_wait {
    outputs *o;
    int n;
} count_wait;

static bool collected(void *arg) {
    count_wait *w = arg;
    pthread_mutex_lock(&w->o->lock);
    bool done = w->o->n >= w->n;
    pthread_mutex_unlock(&w->o->lock);
    return done;
}

/* Reads `expected` records of topic back. Waits for the count, not for the
 * app to be idle: a topic written in transactions ends with a commit marker,
 * an offset no record is ever handed out for. */
static void read_back(const char *topic, const char *group, outputs *o, int expected) {
    char reader[200];
    snprintf(reader, sizeof reader, "%s-reader", group);
    cs_app *app = cs_app_new("trace-reader", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, collect, o);
    CST_OK(cs_sub_group(s, reader));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    count_wait w = {o, expected};
    assert_true(cst_wait(collected, &w, 30000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

/* The output whose value is `value`: asserts it is there once and carries `expect` (NULL: no header). */
static void check_output(const outputs *o, const char *value, const char *expect) {
    int found = -1;
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->value[i], value)) {
            if (found >= 0) fail_msg("output %s is there twice", value);
            found = i;
        }
    if (found < 0) fail_msg("output %s is missing", value);
    if (!expect) {
        if (o->traceparents[found]) fail_msg("output %s carries traceparent %s", value, o->traceparent[found]);
        return;
    }
    if (o->traceparents[found] != 1)
        fail_msg("output %s has %d traceparent headers, want 1", value, o->traceparents[found]);
    assert_string_equal(o->traceparent[found], expect);
}

static void publish_inputs(cs_kafka *k, const char *topic) {
    for (size_t i = 0; i < N_INPUTS; i++) {
        cs_header h[2];
        size_t n = 0;
        for (; n < 2 && inputs[i].headers[n]; n++)
            h[n] = (cs_header){"traceparent", inputs[i].headers[n], strlen(inputs[i].headers[n])};
        cs_record r = {.topic = topic,
                       .partition = 0,
                       .value = inputs[i].value,
                       .value_len = strlen(inputs[i].value),
                       .headers = h,
                       .n_headers = n};
        CST_OK(cs_publish(k, &r, NULL));
    }
}

typedef struct outputs_wait {
    cs_sub *s;
    uint64_t n;
} outputs_wait;

static bool outputs_committed(void *arg) {
    outputs_wait *w = arg;
    cs_sub_stats st;
    cs_sub_stats_get(w->s, &st);
    return st.outputs >= w->n;
}

static void carried(bool transactional) {
    char topic[128], group[160], reply[160], pub[160];
    cst_fresh("trace", 1, topic, group, sizeof topic);
    snprintf(reply, sizeof reply, "%s.reply", topic);
    snprintf(pub, sizeof pub, "%s.pub", topic);
    CST_OK(cs_test_topic_create(cst_cluster, reply, 1));
    CST_OK(cs_test_topic_create(cst_cluster, pub, 1));

    service svc = {.pub_topic = pub, .transactional = transactional};
    pthread_mutex_init(&svc.lock, NULL);
    cs_app *app = cs_app_new("trace-test", "1.0");
    svc.k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(svc.k, topic, handle, &svc);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, transactional ? CS_COMMIT_TRANSACTIONAL : CS_COMMIT_TRACKED));
    if (transactional) {
        CST_OK(cs_kafka_instance_id(svc.k, group));
        CST_OK(cs_kafka_topic(svc.k, pub, 1));
    }
    CST_OK(cs_sub_reply(s, reply, 5000));
    CST_OK(cs_app_add_kafka(app, svc.k));
    CST_OK(cs_app_start(app));
    publish_inputs(svc.k, topic);
    CST_OK(cs_test_app_wait_idle(app, 60000));
    if (transactional) { /* every output committed (the mock keeps no transactional offsets to wait for) */
        outputs_wait w = {s, 2 * N_INPUTS + 2};
        assert_true(cst_wait(outputs_committed, &w, 30000));
    } else {
        CST_OK(
            cs_test_wait_committed(cst_cluster, group, topic, 0, (int64_t)N_INPUTS, 30000)); /* every reply delivered */
    }
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    assert_int_equal(svc.publish_failures, 0);

    for (size_t i = 0; i < N_INPUTS; i++) {
        const char *want = inputs[i].expect ? inputs[i].expect : "-";
        if (strcmp(svc.seen[i], want))
            fail_msg("input %s: cs_delivery_traceparent gave %s, want %s", inputs[i].value, svc.seen[i], want);
    }

    outputs replies = {.n = 0}, pubs = {.n = 0};
    pthread_mutex_init(&replies.lock, NULL);
    pthread_mutex_init(&pubs.lock, NULL);
    read_back(reply, group, &replies, (int)N_INPUTS);
    read_back(pub, group, &pubs, (int)N_INPUTS + 2);
    assert_int_equal(replies.n, (int)N_INPUTS);
    assert_int_equal(pubs.n, (int)N_INPUTS + 2);
    for (size_t i = 0; i < N_INPUTS; i++) {
        char r[64], p[64];
        snprintf(r, sizeof r, "r:%s", inputs[i].value);
        snprintf(p, sizeof p, "p:%s", inputs[i].value);
        check_output(&replies, r, inputs[i].expect);
        check_output(&pubs, p, inputs[i].expect);
    }
    check_output(&pubs, "x:valid", OTHER_TP);
    check_output(&pubs, "n:valid", transactional ? input_named("valid", 5)->expect : NULL);
    pthread_mutex_destroy(&replies.lock);
    pthread_mutex_destroy(&pubs.lock);
    pthread_mutex_destroy(&svc.lock);
}

static void carried_to_replies_and_publishes(void **state) {
    (void)state;
    carried(false);
}

/* Transactional: replies and cs_delivery_publish outputs carry it too. */
static void carried_to_transactional_outputs(void **state) {
    (void)state;
    carried(true);
}

/* ---- log lines ----------------------------------------------------------------------- */

static cs_outcome always_retry(cs_delivery *d, void *user) {
    (void)d, (void)user;
    return CS_RETRY;
}

/* The log line (from `log`) that says `what` about topic/0@offset, copied into out; false if none. */
static bool line_about(const char *log, const char *what, const char *topic, int offset, char *out, size_t size) {
    char coords[300];
    snprintf(coords, sizeof coords, "topic=%s partition=0 offset=%d ", topic, offset);
    for (const char *line = log; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[4096];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        if (strstr(buf, what) && strstr(buf, coords)) {
            snprintf(out, size, "%s", buf);
            return true;
        }
        line += len + (end ? 1 : 0);
    }
    return false;
}

/* A record given up after its last attempt is logged with its coordinates,
 * and with trace_id= when it has a valid traceparent. All stderr output of
 * the process goes to a file while the app runs. */
static void log_lines_carry_the_trace_id(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("tracelog", 1, topic, group, sizeof topic);
    char path[] = "/tmp/cstream-trace-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);

    cs_app *app = cs_app_new("trace-log-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, always_retry, NULL);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_max_attempts(s, 1)); /* no dead-letter topic: dropped with a warning */
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    cs_header h[] = {{"traceparent", TP, strlen(TP)}};
    cs_record traced = {.topic = topic, .partition = 0, .value = "a", .value_len = 1, .headers = h, .n_headers = 1};
    cs_record plain = {.topic = topic, .partition = 0, .value = "b", .value_len = 1};
    CST_OK(cs_publish(k, &traced, NULL));
    CST_OK(cs_publish(k, &plain, NULL));
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 2, 60000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);

    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char *log = cst_slurp(path);
    unlink(path);
    char line[4096];
    const char *what = "record dropped after its last attempt";
    if (!line_about(log, what, topic, 0, line, sizeof line)) fail_msg("no \"%s\" line for offset 0 in:\n%s", what, log);
    if (!strstr(line, " trace_id=" TRACE_ID)) fail_msg("no trace_id in: %s", line);
    if (!line_about(log, what, topic, 1, line, sizeof line)) fail_msg("no \"%s\" line for offset 1 in:\n%s", what, log);
    if (strstr(line, "trace_id=")) fail_msg("a record without traceparent has a trace_id: %s", line);
    free(log);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(carried_to_replies_and_publishes),
        cmocka_unit_test(carried_to_transactional_outputs),
        cmocka_unit_test(log_lines_carry_the_trace_id),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
