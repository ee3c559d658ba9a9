/* test_ops.c — the operations surface, end to end: tests/support/ops_service
 * (main = cs_app_main) runs as a child process.
 *   - --help, --version, a wrong flag or command (usage, exit 2);
 *   - docs: the AsyncAPI 3.0 document, JSON and YAML, validated by the AsyncAPI
 *     project's parser (node tests/asyncapi/validate.mjs; fails if node is missing);
 *   - run --http: /healthz, /readyz (ready once joined), /metrics counting a
 *     handled record, --log-format json (every stderr line a JSON object with
 *     ts, level, msg and the fields), SIGTERM exits 0;
 *   - precedence: --brokers beats CSTREAM_BROKERS beats the code's servers;
 *     --log-level beats CSTREAM_LOG_LEVEL;
 *   - publish: stdin as one record, or one per line, with partition and offset
 *     from the delivery report, checked against the topic's end offsets;
 *   - readiness: two members of groups on one-partition topics (one of them
 *     with nothing assigned) are both ready; /readyz is 503 (still served)
 *     while the stop drains a held handler, and while the embedded broker is down;
 *     run again under the consumer group protocol (ops.ready.consumer_protocol);
 *   - the payouts example (main = cs_app_main): docs validated, run, publish, metrics;
 *   - /metrics as a whole: `promtool check metrics` (Debian's prometheus
 *     package; fails if promtool is missing) finds no problem, and the series
 *     match what the test sent: records by topic and outcome, dead letters,
 *     handler runs, replies, committed offsets at the end offsets, lag 0. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <librdkafka/rdkafka.h>
#include <yajl/yajl_tree.h>

#include "cstest.h"
#include "cstest_child.h"

#ifndef OPS_SERVICE
#error "OPS_SERVICE must name the ops_service executable"
#endif
#ifndef ASYNCAPI_VALIDATE
#error "ASYNCAPI_VALIDATE must name tests/asyncapi/validate.mjs"
#endif
#ifndef PAYOUTS_SERVICE
#error "PAYOUTS_SERVICE must name the payouts example executable"
#endif
#ifndef NODE_EXE
#define NODE_EXE "node"
#endif
#ifndef PROMTOOL_EXE
#define PROMTOOL_EXE "/usr/bin/promtool"
#endif

static char tmpdir[256];

static void path_of(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", tmpdir, name); }

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text ? text : "", f);
    fclose(f);
}

/* Starts argv with the environment minus CSTREAM_* and OPS_*, plus `env`
 * (NULL-terminated "K=V"), stdin from the text, stdout/stderr to files (0644). */
static pid_t spawn(const char *const *argv, const char *const *env, const char *stdin_text, const char *out,
                   const char *err) {
    char in[300];
    path_of(in, sizeof in, "stdin");
    return cst_spawn_io(
        argv, &(cst_child_io){
                  .env = env, .in = in, .in_text = stdin_text ? stdin_text : "", .out = out, .err = err, .mode = 0644});
}

/* Runs to completion; *out and *err get the output (caller frees). */
static int run(const char *const *argv, const char *const *env, const char *stdin_text, char **out, char **err) {
    char in[300], o[300], e[300];
    path_of(in, sizeof in, "stdin");
    path_of(o, sizeof o, "out");
    path_of(e, sizeof e, "err");
    return cst_run_io(
        argv,
        &(cst_child_io){
            .env = env, .in = in, .in_text = stdin_text ? stdin_text : "", .out = o, .err = e, .mode = 0644},
        120000, out, err);
}

/* A plain HTTP/1.0 GET on 127.0.0.1:port: the status (0 if no answer); *body (may be NULL) the body. */
static int http_get(int port, const char *path, char **body) {
    if (body) *body = NULL;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return 0;
    }
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return 0;
    }
    size_t cap = 1 << 16, len = 0;
    char *resp = malloc(cap);
    ssize_t got;
    while ((got = read(fd, resp + len, cap - len - 1)) > 0) {
        len += (size_t)got;
        if (len + 1 == cap) resp = realloc(resp, cap *= 2);
    }
    resp[len] = '\0';
    close(fd);
    int status = 0;
    sscanf(resp, "HTTP/1.%*d %d", &status);
    char *b = strstr(resp, "\r\n\r\n");
    if (body) *body = strdup(b ? b + 4 : "");
    free(resp);
    return status;
}

/* ---- command line ---------------------------------------------------------- */

static void test_help_version_usage(void **state) {
    (void)state;
    char *out, *err;
    const char *help[] = {OPS_SERVICE, "--help", NULL};
    assert_int_equal(run(help, NULL, NULL, &out, &err), 0);
    assert_non_null(strstr(out, "usage: ops_service"));
    assert_non_null(strstr(out, "publish TOPIC"));
    free(out), free(err);

    const char *version[] = {OPS_SERVICE, "--version", NULL};
    assert_int_equal(run(version, NULL, NULL, &out, &err), 0);
    /* The librdkafka the service loaded (the lane's; docs/librdkafka.md). */
    char want[256];
    snprintf(want, sizeof want, "orders-svc 1.2.3 (cstream %s, librdkafka %s)\n", CSTREAM_VERSION,
             rd_kafka_version_str());
    assert_string_equal(out, want);
    free(out), free(err);

    const char *bad_flag[] = {OPS_SERVICE, "run", "--brokerz", "x", NULL};
    assert_int_equal(run(bad_flag, NULL, NULL, &out, &err), 2);
    assert_non_null(strstr(err, "unknown option \"--brokerz\""));
    assert_non_null(strstr(err, "usage:"));
    assert_string_equal(out, "");
    free(out), free(err);

    const char *bad_cmd[] = {OPS_SERVICE, "frobnicate", NULL};
    assert_int_equal(run(bad_cmd, NULL, NULL, &out, &err), 2);
    assert_non_null(strstr(err, "unknown command \"frobnicate\""));
    free(out), free(err);

    const char *no_value[] = {OPS_SERVICE, "--http", NULL};
    assert_int_equal(run(no_value, NULL, NULL, &out, &err), 2);
    assert_non_null(strstr(err, "--http needs a value"));
    free(out), free(err);

    const char *bad_level[] = {OPS_SERVICE, "--log-level", "loud", NULL};
    assert_int_equal(run(bad_level, NULL, NULL, &out, &err), 2);
    assert_non_null(strstr(err, "log level \"loud\""));
    free(out), free(err);

    const char *publish_no_topic[] = {OPS_SERVICE, "publish", NULL};
    assert_int_equal(run(publish_no_topic, NULL, NULL, &out, &err), 2);
    assert_non_null(strstr(err, "publish needs a TOPIC"));
    free(out), free(err);
}

/* ---- docs: AsyncAPI, validated by the AsyncAPI parser -------------------------- */

static void validate(const char *file, const char *expect) {
    const char *argv[] = {NODE_EXE, ASYNCAPI_VALIDATE, file, expect, NULL};
    char o[300], e[300];
    path_of(o, sizeof o, "node.out");
    path_of(e, sizeof e, "node.err");
    if (access(NODE_EXE, X_OK)) fail_msg("node (%s) is missing: the AsyncAPI check cannot run", NODE_EXE);
    int status = cst_wait_exit(spawn(argv, NULL, NULL, o, e), 120000);
    char *out = cst_slurp(o), *err = cst_slurp(e);
    if (status != 0) fail_msg("AsyncAPI parser rejected %s (exit %d):\n%s%s", file, status, out, err);
    assert_non_null(strstr(out, "VALID"));
    free(out), free(err);
}

static void test_docs_asyncapi(void **state) {
    (void)state;
    char *out, *err;
    const char *env[] = {"OPS_PREFIX=shop.", NULL};
    const char *json[] = {OPS_SERVICE, "docs", "--brokers", "kafka-1:9092,kafka-2:9092", NULL};
    assert_int_equal(run(json, env, NULL, &out, &err), 0);
    assert_string_equal(err, "");
    yajl_val doc = yajl_tree_parse(out, NULL, 0);
    assert_non_null(doc);
    const char *version_path[] = {"asyncapi", NULL};
    assert_string_equal(YAJL_GET_STRING(yajl_tree_get(doc, version_path, yajl_t_string)), "3.0.0");
    const char *host_path[] = {"servers", "kafka", "host", NULL};
    assert_string_equal(YAJL_GET_STRING(yajl_tree_get(doc, host_path, yajl_t_string)), "kafka-1:9092");
    const char *client_path[] = {"operations", "receive.shop.orders", "bindings", "kafka", "clientId", "enum", NULL};
    assert_non_null(yajl_tree_get(doc, client_path, yajl_t_array));
    const char *partitions_path[] = {"channels", "shop.invoices", "bindings", "kafka", "partitions", NULL};
    assert_int_equal(YAJL_GET_INTEGER(yajl_tree_get(doc, partitions_path, yajl_t_number)), 3);
    const char *req_path[] = {"components", "schemas", "order", "required", NULL};
    yajl_val req = yajl_tree_get(doc, req_path, yajl_t_array);
    assert_non_null(req);
    assert_int_equal(req->u.array.len, 2); /* id, amount_cents */
    yajl_tree_free(doc);

    char file[300];
    path_of(file, sizeof file, "asyncapi.json");
    write_file(file, out);
    free(out), free(err);
    const char *expect =
        "{\"receive\":{\"shop.orders\":[\"id\",\"amount_cents\",\"urgent\",\"currency\",\"lines\",\"weight\"],"
        "\"shop.audit\":[]},\"send\":[\"shop.orders.done\",\"shop.orders.dlq\",\"shop.invoices\"],"
        "\"groups\":{\"shop.orders\":\"shop.orders-svc\",\"shop.audit\":\"shop.audit-svc\"}}";
    validate(file, expect);

    const char *yaml[] = {OPS_SERVICE, "docs", "--yaml", NULL};
    assert_int_equal(run(yaml, env, NULL, &out, &err), 0);
    assert_non_null(strstr(out, "\"asyncapi\": \"3.0.0\"\n"));
    path_of(file, sizeof file, "asyncapi.yaml");
    write_file(file, out);
    free(out), free(err);
    validate(file, expect);
}

/* ---- run --http: health, readiness, metrics, JSON logs --------------------------- */

typedef struct child {
    pid_t pid;
    char err_path[512], out_path[512];
    int port;
} child;

/* Starts `run --http 127.0.0.1:0 ...` (output in <name>.out and <name>.err)
 * and waits for the "http listening" log line. */
static void start_service_named(child *c, const char *name, const char *const *extra_argv, const char *const *env) {
    const char *argv[16] = {OPS_SERVICE, "run", "--http", "127.0.0.1:0"};
    size_t n = 4;
    for (size_t i = 0; extra_argv && extra_argv[i]; i++) argv[n++] = extra_argv[i];
    argv[n] = NULL;
    char file[64];
    snprintf(file, sizeof file, "%s.out", name);
    path_of(c->out_path, sizeof c->out_path, file);
    snprintf(file, sizeof file, "%s.err", name);
    path_of(c->err_path, sizeof c->err_path, file);
    c->pid = spawn(argv, env, NULL, c->out_path, c->err_path);
    c->port = 0;
    for (int64_t deadline = cst_now_ms() + 30000; !c->port && cst_now_ms() < deadline; usleep(20 * 1000)) {
        char *log = cst_slurp(c->err_path);
        const char *p = strstr(log, "\"port\":");
        if (p) c->port = atoi(p + 7);
        else if ((p = strstr(log, "http listening")) && (p = strstr(p, "port="))) c->port = atoi(p + 5);
        free(log);
    }
    if (!c->port) fail_msg("the service did not report its HTTP port");
}

static void start_service(child *c, const char *const *extra_argv, const char *const *env) {
    start_service_named(c, "service", extra_argv, env);
}

static void wait_ready(const child *c, int timeout_ms) {
    int64_t deadline = cst_now_ms() + timeout_ms;
    int status = 0;
    while ((status = http_get(c->port, "/readyz", NULL)) != 200 && cst_now_ms() < deadline) usleep(50 * 1000);
    if (status != 200) {
        char *log = cst_slurp(c->err_path);
        fail_msg("/readyz stayed %d; service log:\n%s", status, log);
    }
}

/* The readiness tests run under either group protocol (tests/CMakeLists.txt,
 * ops.ready.consumer_protocol and ops.metrics.consumer_protocol: the
 * service gets OPS_GROUP_PROTOCOL=consumer): /metrics says every group of the service joined under the one
 * asked for, so a pass is a pass under that protocol. */
static const char *group_protocol(void) {
    return getenv("OPS_GROUP_PROTOCOL") ? getenv("OPS_GROUP_PROTOCOL") : "classic";
}

/* The service's variable for it: children get no OPS_ variable of ours
 * unless passed (cstest_child.c). */
static const char *group_protocol_env(void) {
    static char env[64];
    snprintf(env, sizeof env, "OPS_GROUP_PROTOCOL=%s", group_protocol());
    return env;
}

static void expect_group_protocol(const child *c) {
    const char *want = group_protocol();
    const char *other = strcmp(want, "consumer") ? "consumer" : "classic";
    char want_series[64], other_series[64], *body = NULL;
    snprintf(want_series, sizeof want_series, "protocol=\"%s\"} 1", want);
    snprintf(other_series, sizeof other_series, "protocol=\"%s\"}", other);
    assert_int_equal(http_get(c->port, "/metrics", &body), 200);
    if (!body || !strstr(body, "cstream_consumer_group_protocol{") || !strstr(body, want_series) ||
        strstr(body, other_series))
        fail_msg("want every group under the %s protocol; /metrics:\n%s", want, body ? body : "(none)");
    free(body);
}

static int stop_service(child *c) {
    kill(c->pid, SIGTERM);
    return cst_wait_exit(c->pid, 60000);
}

/* The value of the series `name{subscription="sub"...}` in a metrics body, or -1. */
static long long metric(const char *body, const char *name, const char *sub) {
    char labels[512];
    snprintf(labels, sizeof labels, "subscription=\"%s\"", sub);
    double v;
    return cst_metric_in(body, name, labels, &v) ? (long long)v : -1;
}

static void test_run_http_metrics_json_logs(void **state) {
    (void)state;
    char prefix[64], orders[128], env_prefix[128], env_brokers[512];
    cs_test_unique_name(prefix, sizeof prefix, "ops");
    strcat(prefix, ".");
    snprintf(orders, sizeof orders, "%sorders", prefix);
    const char *topics[] = {"orders", "orders.done", "orders.dlq", "audit", "invoices"};
    int parts[] = {2, 2, 1, 1, 3};
    for (int i = 0; i < 5; i++) {
        char t[128];
        snprintf(t, sizeof t, "%s%s", prefix, topics[i]);
        CST_OK(cs_test_topic_create(cst_cluster, t, parts[i]));
    }
    snprintf(env_prefix, sizeof env_prefix, "OPS_PREFIX=%s", prefix);
    snprintf(env_brokers, sizeof env_brokers, "CSTREAM_BROKERS=%s", cs_test_cluster_brokers(cst_cluster));
    /* env beats code: the code's servers are unreachable, CSTREAM_BROKERS is the cluster. */
    const char *env[] = {env_prefix,           env_brokers, "OPS_CODE_BROKERS=127.0.0.1:1", "CSTREAM_LOG_LEVEL=error",
                         group_protocol_env(), NULL};
    const char *extra[] = {"--log-format", "json", "--log-level", "info", NULL};
    child c;
    start_service(&c, extra, env);

    char *body = NULL;
    assert_int_equal(http_get(c.port, "/healthz", &body), 200);
    assert_string_equal(body, "ok\n");
    free(body);
    assert_int_equal(http_get(c.port, "/nope", NULL), 404);
    wait_ready(&c, 60000);
    expect_group_protocol(&c);

    const char *order =
        "{\"id\":7,\"amount_cents\":1250,\"currency\":\"EUR\",\"lines\":[{\"sku\":\"a\",\"quantity\":2}]}";
    CST_OK(cs_test_produce(cst_cluster, orders, 0, "7", 1, order, strlen(order), NULL));
    long long delivered = -1, acked = -1;
    for (int64_t deadline = cst_now_ms() + 30000; cst_now_ms() < deadline; usleep(50 * 1000)) {
        assert_int_equal(http_get(c.port, "/metrics", &body), 200);
        delivered = metric(body, "cstream_subscription_delivered_total", orders);
        acked = metric(body, "cstream_subscription_acked_total", orders);
        if (acked == 1) break;
        free(body);
        body = NULL;
    }
    assert_int_equal(delivered, 1);
    assert_int_equal(acked, 1);
    assert_non_null(body);
    char group_label[256];
    snprintf(group_label, sizeof group_label, "{subscription=\"%s\",group=\"%sorders-svc\"}", orders, prefix);
    assert_non_null(strstr(body, group_label));
    assert_non_null(strstr(body, "# TYPE cstream_subscription_decode_failures_total counter"));
    assert_non_null(strstr(body, "cstream_subscription_commit_failures_total{"));
    assert_non_null(strstr(body, "cstream_subscription_pauses_total{"));
    /* The versions in use: cstream's, and librdkafka's as loaded and as built. */
    char build_info[256];
    snprintf(build_info, sizeof build_info, "cstream_build_info{cstream=\"%s\",librdkafka=\"%s\",librdkafka_headers=\"",
             CSTREAM_VERSION, rd_kafka_version_str());
    assert_non_null(strstr(body, build_info));
    free(body);

    assert_int_equal(stop_service(&c), 0);

    /* --log-format json: every line one object with ts, level, msg; fields as members.
     * --log-level info beat CSTREAM_LOG_LEVEL=error: info lines are there. */
    char *log = cst_slurp(c.err_path);
    int lines = 0, info = 0, assigned = 0;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        char why[256];
        yajl_val v = yajl_tree_parse(line, why, sizeof why);
        if (!v || !YAJL_IS_OBJECT(v)) fail_msg("log line is not a JSON object (%s): %s", why, line);
        const char *ts[] = {"ts", NULL}, *level[] = {"level", NULL}, *msg[] = {"msg", NULL};
        const char *partition[] = {"partition", NULL}, *topic[] = {"topic", NULL};
        assert_non_null(yajl_tree_get(v, ts, yajl_t_string));
        assert_non_null(yajl_tree_get(v, msg, yajl_t_string));
        const char *lv = YAJL_GET_STRING(yajl_tree_get(v, level, yajl_t_string));
        assert_non_null(lv);
        if (!strcmp(lv, "info")) info++;
        const char *m = YAJL_GET_STRING(yajl_tree_get(v, msg, yajl_t_string));
        if (m && !strcmp(m, "partition assigned")) {
            assert_non_null(yajl_tree_get(v, partition, yajl_t_number));
            assert_non_null(yajl_tree_get(v, topic, yajl_t_string));
            assigned++;
        }
        yajl_tree_free(v);
    }
    free(log);
    assert_true(lines > 3);
    assert_true(info > 0);
    assert_true(assigned >= 1);
}

/* --brokers beats CSTREAM_BROKERS (which points nowhere here). */
static void test_flag_beats_env(void **state) {
    (void)state;
    char prefix[64], env_prefix[128];
    cs_test_unique_name(prefix, sizeof prefix, "opsflag");
    strcat(prefix, ".");
    const char *topics[] = {"orders", "orders.done", "orders.dlq", "audit", "invoices"};
    for (int i = 0; i < 5; i++) {
        char t[128];
        snprintf(t, sizeof t, "%s%s", prefix, topics[i]);
        CST_OK(cs_test_topic_create(cst_cluster, t, 1));
    }
    snprintf(env_prefix, sizeof env_prefix, "OPS_PREFIX=%s", prefix);
    const char *env[] = {env_prefix, "CSTREAM_BROKERS=127.0.0.1:1", NULL};
    const char *extra[] = {"--brokers", cs_test_cluster_brokers(cst_cluster), NULL};
    child c;
    start_service(&c, extra, env);
    wait_ready(&c, 60000);
    char *log = cst_slurp(c.err_path);
    assert_null(strstr(log, "\"level\"")); /* text format by default */
    assert_non_null(strstr(log, "INFO"));
    free(log);
    assert_int_equal(stop_service(&c), 0);
}

/* ---- readiness ---------------------------------------------------------------------- */

/* Creates the ops_service topics under a fresh prefix; orders_partitions for
 * <prefix>orders, one partition for the others. */
static void fresh_ops_topics(char *prefix, size_t size, const char *tag, int orders_partitions) {
    cs_test_unique_name(prefix, size - 1, tag);
    strcat(prefix, ".");
    const char *topics[] = {"orders", "orders.done", "orders.dlq", "audit", "invoices"};
    for (int i = 0; i < 5; i++) {
        char t[128];
        snprintf(t, sizeof t, "%s%s", prefix, topics[i]);
        CST_OK(cs_test_topic_create(cst_cluster, t, i == 0 ? orders_partitions : 1));
    }
}

/* The partitions count of the last "group joined" debug line of the orders
 * subscription in a service log, or -1. */
static int last_join_partitions(const char *log, const char *prefix) {
    char what[200];
    snprintf(what, sizeof what, "group joined subscription=%sorders partitions=", prefix);
    int n = -1;
    for (const char *p = log; (p = strstr(p, what)); p++) n = atoi(p + strlen(what));
    return n;
}

/* Two members of the same groups on one-partition topics: one of them has
 * no partition at all, and both report ready (the group is joined, the
 * rebalance done). */
static void test_partitionless_member_ready(void **state) {
    (void)state;
    char prefix[64], env_prefix[128], env_brokers[512];
    fresh_ops_topics(prefix, sizeof prefix, "opsready", 1);
    snprintf(env_prefix, sizeof env_prefix, "OPS_PREFIX=%s", prefix);
    snprintf(env_brokers, sizeof env_brokers, "CSTREAM_BROKERS=%s", cs_test_cluster_brokers(cst_cluster));
    const char *env[] = {env_prefix, env_brokers, "CSTREAM_LOG_LEVEL=debug", group_protocol_env(), NULL};
    child a, b;
    start_service_named(&a, "member-a", NULL, env);
    wait_ready(&a, 60000);
    expect_group_protocol(&a);
    start_service_named(&b, "member-b", NULL, env);
    wait_ready(&b, 60000);
    expect_group_protocol(&b);
    /* The second join rebalanced both: wait until both are ready at once. */
    wait_ready(&a, 60000);
    wait_ready(&b, 60000);
    /* One of them owns nothing: the last join of each says how many partitions it got. */
    char *log_a = cst_slurp(a.err_path), *log_b = cst_slurp(b.err_path);
    int got_a = last_join_partitions(log_a, prefix), got_b = last_join_partitions(log_b, prefix);
    if (got_a < 0 || got_b < 0 || got_a + got_b != 1)
        fail_msg("want one member with the partition and one without, got %d and %d", got_a, got_b);
    free(log_a), free(log_b);
    assert_int_equal(stop_service(&b), 0);
    assert_int_equal(stop_service(&a), 0);
}

/* /readyz answers 503 as soon as the stop starts, while handlers still drain
 * (the HTTP server serves until the app has stopped). */
static void test_readyz_not_ready_during_shutdown(void **state) {
    (void)state;
    char prefix[64], env_prefix[128], env_brokers[512], env_hold[400], hold[300], audit[160];
    fresh_ops_topics(prefix, sizeof prefix, "opsstop", 1);
    snprintf(audit, sizeof audit, "%saudit", prefix);
    path_of(hold, sizeof hold, "release-hold");
    unlink(hold);
    snprintf(env_prefix, sizeof env_prefix, "OPS_PREFIX=%s", prefix);
    snprintf(env_brokers, sizeof env_brokers, "CSTREAM_BROKERS=%s", cs_test_cluster_brokers(cst_cluster));
    snprintf(env_hold, sizeof env_hold, "OPS_HOLD_FILE=%s", hold);
    const char *env[] = {env_prefix, env_brokers, env_hold, group_protocol_env(), NULL};
    child c;
    start_service(&c, NULL, env);
    wait_ready(&c, 60000);
    expect_group_protocol(&c);
    CST_OK(cs_test_produce(cst_cluster, audit, 0, NULL, 0, "hold", 4, NULL));
    long long delivered = -1;
    for (int64_t deadline = cst_now_ms() + 30000; delivered != 1 && cst_now_ms() < deadline; usleep(50 * 1000)) {
        char *body = NULL;
        if (http_get(c.port, "/metrics", &body) == 200)
            delivered = metric(body, "cstream_subscription_delivered_total", audit);
        free(body);
    }
    assert_int_equal(delivered, 1); /* the handler now holds until the file exists */
    assert_int_equal(http_get(c.port, "/readyz", NULL), 200);
    kill(c.pid, SIGTERM);
    int status = 200;
    for (int64_t deadline = cst_now_ms() + 30000; status == 200 && cst_now_ms() < deadline; usleep(20 * 1000))
        status = http_get(c.port, "/readyz", NULL);
    int exited = waitpid(c.pid, NULL, WNOHANG);
    write_file(hold, "go");
    assert_int_equal(status, 503); /* an answer, not a refused connection: the stop is under way */
    assert_int_equal(exited, 0);   /* still draining when it said so */
    assert_int_equal(http_get(c.port, "/healthz", NULL), 200);
    assert_int_equal(cst_wait_exit(c.pid, 60000), 0);
}

/* A subscription paused on purpose (here by its own handler) stays ready;
 * /readyz says how many partitions are paused and /metrics has the gauge. */
static void test_readyz_ready_while_paused(void **state) {
    (void)state;
    char prefix[64], env_prefix[128], env_brokers[512], audit[160];
    fresh_ops_topics(prefix, sizeof prefix, "opspause", 1);
    snprintf(audit, sizeof audit, "%saudit", prefix);
    snprintf(env_prefix, sizeof env_prefix, "OPS_PREFIX=%s", prefix);
    snprintf(env_brokers, sizeof env_brokers, "CSTREAM_BROKERS=%s", cs_test_cluster_brokers(cst_cluster));
    const char *env[] = {env_prefix, env_brokers, group_protocol_env(), NULL};
    child c;
    start_service(&c, NULL, env);
    wait_ready(&c, 60000);
    expect_group_protocol(&c);
    CST_OK(cs_test_produce(cst_cluster, audit, 0, NULL, 0, "pause", 5, NULL));
    long long paused = -1;
    for (int64_t deadline = cst_now_ms() + 30000; paused != 1 && cst_now_ms() < deadline; usleep(50 * 1000)) {
        char *body = NULL;
        if (http_get(c.port, "/metrics", &body) == 200) paused = metric(body, "cstream_paused_partitions", audit);
        free(body);
    }
    assert_int_equal(paused, 1);
    char *body = NULL;
    assert_int_equal(http_get(c.port, "/readyz", &body), 200);
    if (!body || !strstr(body, "ready, paused partitions: 1")) fail_msg("/readyz said: %s", body ? body : "(none)");
    free(body);
    assert_int_equal(stop_service(&c), 0);
}

/* Embedded cluster only: with its broker down the service is not ready; once
 * the broker is back, it is ready again. */
static void test_readyz_follows_the_connection(void **state) {
    (void)state;
    if (!cs_test_cluster_is_embedded(cst_cluster))
        cst_skip("embedded cluster only: it takes the broker down, which only the embedded cluster can do in-process");
    char prefix[64], env_prefix[128], env_brokers[512];
    fresh_ops_topics(prefix, sizeof prefix, "opsdown", 1);
    snprintf(env_prefix, sizeof env_prefix, "OPS_PREFIX=%s", prefix);
    snprintf(env_brokers, sizeof env_brokers, "CSTREAM_BROKERS=%s", cs_test_cluster_brokers(cst_cluster));
    const char *env[] = {env_prefix, env_brokers, group_protocol_env(), NULL};
    child c;
    start_service(&c, NULL, env);
    wait_ready(&c, 60000);
    expect_group_protocol(&c);
    CST_OK(cs_test_cluster_set_down(cst_cluster, 1));
    int status = 200;
    for (int64_t deadline = cst_now_ms() + 30000; status == 200 && cst_now_ms() < deadline; usleep(50 * 1000))
        status = http_get(c.port, "/readyz", NULL);
    CST_OK(cs_test_cluster_set_down(cst_cluster, 0));
    assert_int_equal(status, 503);
    wait_ready(&c, 60000);
    assert_int_equal(stop_service(&c), 0);
}

/* ---- the payouts example: its main is cs_app_main -------------------------------------- */

/* `payouts docs` is a valid AsyncAPI document. */
static void test_payouts_example_docs(void **state) {
    (void)state;
    char *out, *err;
    const char *docs[] = {PAYOUTS_SERVICE, "docs", NULL};
    assert_int_equal(run(docs, NULL, NULL, &out, &err), 0);
    char file[300];
    path_of(file, sizeof file, "payouts-asyncapi.json");
    write_file(file, out);
    free(out), free(err);
    validate(file,
             "{\"receive\":{\"payouts\":[\"id\",\"amount_cents\"],\"page-views\":[\"page\"],"
             "\"statements\":[\"payout_id\",\"amount_cents\"]},"
             "\"send\":[\"payouts.done\",\"payouts.dlq\"],"
             "\"groups\":{\"payouts\":\"payouts\",\"page-views\":\"analytics\",\"statements\":\"reconciliation\"}}");
}

/* On the embedded cluster, `payouts run --http` gets ready, handles a payout
 * published with `payouts publish` (with a traceparent header) and counts it
 * in /metrics; SIGTERM stops it with status 0. */
static void test_payouts_example_run(void **state) {
    (void)state;
    if (!cs_test_cluster_is_embedded(cst_cluster))
        cst_skip("embedded cluster only: the payouts example has fixed topic names (payouts, payouts.done, ...) and "
                 "the test needs them new and empty, which only the test's own in-process cluster guarantees");
    char *out, *err;
    const char *topics[] = {"payouts", "payouts.done", "payouts.dlq", "page-views", "statements"};
    for (int i = 0; i < 5; i++) CST_OK(cs_test_topic_create(cst_cluster, topics[i], i == 2 ? 1 : 4));
    char env_brokers[512];
    snprintf(env_brokers, sizeof env_brokers, "CSTREAM_BROKERS=%s", cs_test_cluster_brokers(cst_cluster));
    const char *env[] = {env_brokers, NULL};
    const char *argv[] = {PAYOUTS_SERVICE, "run", "--http", "127.0.0.1:0", NULL};
    child c;
    path_of(c.out_path, sizeof c.out_path, "payouts.out");
    path_of(c.err_path, sizeof c.err_path, "payouts.err");
    c.pid = spawn(argv, env, NULL, c.out_path, c.err_path);
    c.port = 0;
    for (int64_t deadline = cst_now_ms() + 30000; !c.port && cst_now_ms() < deadline; usleep(20 * 1000)) {
        char *log = cst_slurp(c.err_path);
        const char *p = strstr(log, "http listening");
        if (p && (p = strstr(p, "port="))) c.port = atoi(p + 5);
        free(log);
    }
    if (!c.port) fail_msg("payouts did not report its HTTP port");
    wait_ready(&c, 60000);

    const char *publish[] = {PAYOUTS_SERVICE,
                             "publish",
                             "payouts",
                             "--key",
                             "7",
                             "--partition",
                             "0",
                             "--header",
                             "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                             NULL};
    assert_int_equal(run(publish, env, "{\"id\":7,\"amount_cents\":700}", &out, &err), 0);
    assert_string_equal(out, "partition=0 offset=0\n");
    free(out), free(err);
    long long acked = -1;
    for (int64_t deadline = cst_now_ms() + 30000; acked != 1 && cst_now_ms() < deadline; usleep(50 * 1000)) {
        char *body = NULL;
        if (http_get(c.port, "/metrics", &body) == 200)
            acked = metric(body, "cstream_subscription_acked_total", "payouts");
        free(body);
    }
    assert_int_equal(acked, 1);
    assert_int_equal(stop_service(&c), 0);
}

/* ---- publish ------------------------------------------------------------------------ */

static void test_publish(void **state) {
    (void)state;
    char prefix[64], invoices[128], env_prefix[128], env_brokers[512];
    cs_test_unique_name(prefix, sizeof prefix, "opspub");
    strcat(prefix, ".");
    snprintf(invoices, sizeof invoices, "%sinvoices", prefix);
    CST_OK(cs_test_topic_create(cst_cluster, invoices, 3));
    snprintf(env_prefix, sizeof env_prefix, "OPS_PREFIX=%s", prefix);
    snprintf(env_brokers, sizeof env_brokers, "CSTREAM_BROKERS=%s", cs_test_cluster_brokers(cst_cluster));
    const char *env[] = {env_prefix, env_brokers, "CSTREAM_LOG_LEVEL=error", NULL};

    char *out, *err;
    const char *one[] = {OPS_SERVICE, "publish",    invoices,   "--partition",   "2", "--key", "inv-1",
                         "--header",  "source=cli", "--header", "trace=abc=def", NULL};
    assert_int_equal(run(one, env, "{\"id\":1}\n{\"id\":2}\n", &out, &err), 0);
    assert_string_equal(out, "partition=2 offset=0\n");
    assert_null(strstr(err, "INFO")); /* CSTREAM_LOG_LEVEL=error applies without a flag */
    free(out), free(err);
    int64_t end = -1;
    CST_OK(cs_test_end_offset(cst_cluster, invoices, 2, &end));
    assert_int_equal(end, 1); /* both lines went as one record */

    const char *lines[] = {OPS_SERVICE, "publish", invoices, "--lines", "--partition=1", "--log-level", "info", NULL};
    assert_int_equal(run(lines, env, "a\nb\r\nc", &out, &err), 0);
    assert_string_equal(out, "partition=1 offset=0\npartition=1 offset=1\npartition=1 offset=2\n");
    assert_non_null(strstr(err, "INFO")); /* the flag beat CSTREAM_LOG_LEVEL=error */
    free(out), free(err);
    CST_OK(cs_test_end_offset(cst_cluster, invoices, 1, &end));
    assert_int_equal(end, 3);

    /* A topic that does not exist on a real cluster fails with a reason, exit 1. */
    if (!cs_test_cluster_is_embedded(cst_cluster)) {
        const char *missing[] = {OPS_SERVICE, "publish", "no-such-topic-ops", NULL};
        assert_int_equal(run(missing, env, "x", &out, &err), 1);
        free(out), free(err);
    }
    const char *bad_header[] = {OPS_SERVICE, "publish", invoices, "--header", "novalue", NULL};
    assert_int_equal(run(bad_header, env, "x", &out, &err), 2);
    assert_non_null(strstr(err, "expected NAME=VALUE"));
    free(out), free(err);
}

/* ---- /metrics: promtool and the numbers ------------------------------------------ */

/* The value of the series exactly `key` (name and labels) in a metrics body, or -1. */
static long long series(const char *body, const char *key) {
    size_t n = strlen(key);
    for (const char *p = body; (p = strstr(p, key)); p += n)
        if ((p == body || p[-1] == '\n') && p[n] == ' ') return atoll(p + n + 1);
    return -1;
}

static long long sub_series(const char *body, const char *name, const char *sub, const char *group,
                            const char *more_labels) {
    char key[1024];
    snprintf(key, sizeof key, "%s{subscription=\"%s\",group=\"%s\"%s}", name, sub, group, more_labels);
    return series(body, key);
}

static long long records(const char *body, const char *sub, const char *group, const char *outcome) {
    char more[256];
    snprintf(more, sizeof more, ",topic=\"%s\",outcome=\"%s\"", sub, outcome);
    return sub_series(body, "cstream_records_total", sub, group, more);
}

static long long per_partition(const char *body, const char *name, const char *sub, const char *group, int partition) {
    char more[256];
    snprintf(more, sizeof more, ",topic=\"%s\",partition=\"%d\"", sub, partition);
    return sub_series(body, name, sub, group, more);
}

/* Orders: 5 paid (acked, each with a reply), 3 of amount 0 (dropped), 2
 * negative (retried, then dead-lettered at max_attempts 2: a retry, then a
 * drop); audit (Auto): 4 acked. Once all is settled and committed, the
 * numbers must be exactly those, and promtool must accept the whole page. */
static void test_metrics_promtool(void **state) {
    (void)state;
    if (access(PROMTOOL_EXE, X_OK))
        fail_msg("promtool (%s) is missing: /metrics cannot be checked; install Debian's prometheus package "
                 "(make deps does)",
                 PROMTOOL_EXE);
    char prefix[64], env_prefix[128], env_brokers[512], orders[128], audit[128], group[160], audit_group[160];
    fresh_ops_topics(prefix, sizeof prefix, "opsprom", 2);
    snprintf(orders, sizeof orders, "%sorders", prefix);
    snprintf(audit, sizeof audit, "%saudit", prefix);
    snprintf(group, sizeof group, "%sorders-svc", prefix);
    snprintf(audit_group, sizeof audit_group, "%saudit-svc", prefix);
    snprintf(env_prefix, sizeof env_prefix, "OPS_PREFIX=%s", prefix);
    snprintf(env_brokers, sizeof env_brokers, "CSTREAM_BROKERS=%s", cs_test_cluster_brokers(cst_cluster));
    const char *env[] = {env_prefix, env_brokers, group_protocol_env(),
                         NULL}; /* info: the "http listening" line gives the port */
    child c;
    start_service_named(&c, "prom", NULL, env);
    wait_ready(&c, 60000);
    expect_group_protocol(&c);

    for (int i = 0; i < 10; i++) {
        char key[16], value[128];
        int amount = i < 5 ? 100 + i : i < 8 ? 0 : -1;
        snprintf(key, sizeof key, "%d", i);
        snprintf(value, sizeof value, "{\"id\":%d,\"amount_cents\":%d}", i, amount);
        CST_OK(cs_test_produce(cst_cluster, orders, i % 2, key, strlen(key), value, strlen(value), NULL));
    }
    for (int i = 0; i < 4; i++) CST_OK(cs_test_produce(cst_cluster, audit, 0, NULL, 0, "a", 1, NULL));
    int64_t end0 = -1, end1 = -1, end_audit = -1;
    CST_OK(cs_test_end_offset(cst_cluster, orders, 0, &end0));
    CST_OK(cs_test_end_offset(cst_cluster, orders, 1, &end1));
    CST_OK(cs_test_end_offset(cst_cluster, audit, 0, &end_audit));

    /* Until everything settled and every position is committed (Auto commits on its own interval). */
    char *body = NULL;
    for (int64_t deadline = cst_now_ms() + 60000; cst_now_ms() < deadline; usleep(100 * 1000)) {
        free(body);
        body = NULL;
        if (http_get(c.port, "/metrics", &body) != 200) continue;
        if (records(body, orders, group, "ack") == 5 && records(body, orders, group, "drop") == 5 &&
            records(body, audit, audit_group, "ack") == 4 &&
            sub_series(body, "cstream_inflight_records", orders, group, "") == 0 &&
            sub_series(body, "cstream_inflight_records", audit, audit_group, "") == 0 &&
            per_partition(body, "cstream_committed_offset", orders, group, 0) == end0 &&
            per_partition(body, "cstream_committed_offset", orders, group, 1) == end1 &&
            per_partition(body, "cstream_committed_offset", audit, audit_group, 0) == end_audit)
            break;
    }
    assert_non_null(body);
    char file[300];
    path_of(file, sizeof file, "metrics.txt");
    write_file(file, body); /* for a look after a failure */

    /* By topic and outcome. */
    assert_int_equal(records(body, orders, group, "ack"), 5);
    assert_int_equal(records(body, orders, group, "drop"), 5); /* 3 amounts of 0, 2 given up */
    assert_int_equal(records(body, orders, group, "retry"), 2);
    assert_int_equal(records(body, orders, group, "retry_unsupported"), 0);
    assert_int_equal(records(body, audit, audit_group, "ack"), 4);
    assert_int_equal(records(body, audit, audit_group, "drop"), 0);
    char more[256];
    snprintf(more, sizeof more, ",topic=\"%s\"", orders);
    assert_int_equal(sub_series(body, "cstream_dead_letters_total", orders, group, more), 2);
    assert_int_equal(sub_series(body, "cstream_subscription_dead_lettered_total", orders, group, ""), 2);
    /* Handler runs: 5 + 3 + 2 x 2 on orders, 4 on audit; the histogram agrees with delivered. */
    assert_int_equal(sub_series(body, "cstream_handler_duration_seconds_count", orders, group, ""), 12);
    assert_int_equal(sub_series(body, "cstream_subscription_delivered_total", orders, group, ""), 12);
    assert_int_equal(sub_series(body, "cstream_handler_duration_seconds_bucket", orders, group, ",le=\"+Inf\""), 12);
    assert_int_equal(sub_series(body, "cstream_handler_duration_seconds_count", audit, audit_group, ""), 4);
    /* In flight, positions and lag once idle. */
    assert_int_equal(sub_series(body, "cstream_inflight_records", orders, group, ""), 0);
    assert_int_equal(per_partition(body, "cstream_committed_offset", orders, group, 0), end0);
    assert_int_equal(per_partition(body, "cstream_committed_offset", orders, group, 1), end1);
    assert_int_equal(per_partition(body, "cstream_committed_offset", audit, audit_group, 0), end_audit);
    assert_int_equal(per_partition(body, "cstream_lag_records", orders, group, 0), 0);
    assert_int_equal(per_partition(body, "cstream_lag_records", orders, group, 1), 0);
    assert_int_equal(per_partition(body, "cstream_lag_records", audit, audit_group, 0), 0);
    /* Publishes: a reply per paid order, a dead letter per negative one, no error. */
    assert_int_equal(series(body, "cstream_publish_duration_seconds_count{kind=\"reply\"}"), 5);
    assert_int_equal(series(body, "cstream_publish_duration_seconds_count{kind=\"dead_letter\"}"), 2);
    assert_int_equal(series(body, "cstream_publish_duration_seconds_count{kind=\"publish\"}"), 0);
    assert_int_equal(series(body, "cstream_publish_errors_total{kind=\"reply\"}"), 0);
    assert_int_equal(series(body, "cstream_publish_errors_total{kind=\"dead_letter\"}"), 0);
    assert_int_equal(series(body, "cstream_unflushed_records"), 0);

    /* promtool reads the page from stdin: exit 0 and not a word of complaint. */
    char *out, *err;
    const char *check[] = {PROMTOOL_EXE, "check", "metrics", NULL};
    int status = run(check, NULL, body, &out, &err);
    if (status != 0 || *out || *err) fail_msg("promtool check metrics (exit %d) on %s:\n%s%s", status, file, out, err);
    free(out), free(err);
    free(body);
    assert_int_equal(stop_service(&c), 0);
}

/* Label values with a quote, a backslash and a newline come out escaped as
 * the text format wants them, and promtool accepts the page. */
static void test_metrics_label_escaping(void **state) {
    (void)state;
    if (access(PROMTOOL_EXE, X_OK))
        fail_msg("promtool (%s) is missing: /metrics cannot be checked; install Debian's prometheus package "
                 "(make deps does)",
                 PROMTOOL_EXE);
    cs_app *app = cs_app_new("say \"hi\"", "c:\\v1\nbeta");
    assert_non_null(app);
    char *body = NULL;
    CST_OK(cs_app_metrics(app, &body));
    cs_app_destroy(app);
    assert_non_null(strstr(body, "cstream_up{app=\"say \\\"hi\\\"\",version=\"c:\\\\v1\\nbeta\"} 0\n"));
    char *out, *err;
    const char *check[] = {PROMTOOL_EXE, "check", "metrics", NULL};
    int status = run(check, NULL, body, &out, &err);
    if (status != 0 || *out || *err)
        fail_msg("promtool check metrics (exit %d):\n%s%s\non:\n%s", status, out, err, body);
    free(out), free(err), free(body);
}

static int setup(void **state) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cstream-ops-XXXXXX");
    if (!mkdtemp(tmpdir)) return -1;
    return cst_cluster_setup(state);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_version_usage),
        cmocka_unit_test(test_docs_asyncapi),
        cmocka_unit_test(test_run_http_metrics_json_logs),
        cmocka_unit_test(test_flag_beats_env),
        cmocka_unit_test(test_partitionless_member_ready),
        cmocka_unit_test(test_readyz_not_ready_during_shutdown),
        cmocka_unit_test(test_readyz_ready_while_paused),
        cmocka_unit_test(test_readyz_follows_the_connection),
        cmocka_unit_test(test_payouts_example_docs),
        cmocka_unit_test(test_payouts_example_run),
        cmocka_unit_test(test_publish),
        cmocka_unit_test(test_metrics_promtool),
        cmocka_unit_test(test_metrics_label_escaping),
    };
    return cmocka_run_group_tests(tests, setup, cst_cluster_teardown);
}
