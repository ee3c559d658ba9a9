/* test_ops_config.c — the operator's configuration through cs_app_main, with
 * tests/support/ops_service (main = cs_app_main) as a child process:
 *   - precedence of the four sources for the producer and a consumer, read
 *     from `config show` (value and source per key): code < --config file
 *     < CSTREAM_KAFKA_* < -X; --config beats CSTREAM_CONFIG;
 *   - `config show` masks secrets (a literal one and one read from a file),
 *     names the file of a value read from one, and `-X` with a literal
 *     secret warns that ps shows it;
 *   - a cstream-owned key given with -X: `run` exits 1 naming the flag, and
 *     consumes nothing (the group commits nothing);
 *   - on the real broker: a SASL_SSL run configured only from a properties
 *     file and a secret file (`scripts/kafka sasl`'s listener; SCRAM-SHA-512
 *     on librdkafka >= 2.6.1, else PLAIN over TLS, as tests/real/test_sasl.c):
 *     a record published with `publish --config` is handled, its position
 *     committed (checked over PLAINTEXT), and no output holds the password.
 *     On the embedded cluster it skips, saying why. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <librdkafka/rdkafka.h>

#include "cstest.h"
#include "cstest_child.h"

#ifndef OPS_SERVICE
#error "OPS_SERVICE must name the ops_service executable"
#endif

static char dir[64];

static void path_of(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", dir, name); }

static void write_file(const char *path, const char *text, mode_t mode) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

/* argv with the environment minus CSTREAM_* and OPS_*, plus env ("K=V",
 * NULL-terminated); stdin from the text, stdout and stderr into files; all
 * three 0600. */
static pid_t spawn(const char *const *argv, const char *const *env, const char *in_text, const char *out,
                   const char *err) {
    char in[300];
    path_of(in, sizeof in, "stdin");
    return cst_spawn_io(
        argv,
        &(cst_child_io){.env = env, .in = in, .in_text = in_text ? in_text : "", .out = out, .err = err, .mode = 0600});
}

/* Runs to completion; *out and *err get its output (the caller frees). */
static int run(const char *const *argv, const char *const *env, const char *in_text, char **out, char **err) {
    char in[300], o[300], e[300];
    path_of(in, sizeof in, "stdin");
    path_of(o, sizeof o, "out");
    path_of(e, sizeof e, "err");
    return cst_run_io(
        argv,
        &(cst_child_io){.env = env, .in = in, .in_text = in_text ? in_text : "", .out = o, .err = e, .mode = 0600},
        120000, out, err);
}

static int setup(void **state) {
    if (cst_cluster_setup(state) != 0) return -1;
    snprintf(dir, sizeof dir, "/tmp/cstream-opscfg-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return cst_cluster_teardown(state);
}

/* In `config show`'s section starting with `section`, the line of `key`:
 * its value and source ("" if absent). */
static void shown(const char *out, const char *section, const char *key, char *value, char *source, size_t size) {
    value[0] = source[0] = '\0';
    const char *s = strstr(out, section);
    if (!s) fail_msg("config show has no section \"%s\":\n%s", section, out);
    const char *end = strstr(s + 1, "\n# ");
    size_t klen = strlen(key);
    for (const char *l = strchr(s, '\n'); l && (!end || l < end); l = strchr(l + 1, '\n')) {
        if (strncmp(l + 1, key, klen) || l[1 + klen] != '=') continue;
        const char *v = l + 2 + klen, *hash = strstr(v, " # "), *eol = strchr(v, '\n');
        size_t vlen = (size_t)(hash - v);
        while (vlen && v[vlen - 1] == ' ') vlen--;
        snprintf(value, size, "%.*s", (int)vlen, v);
        snprintf(source, size, "%.*s", (int)(eol - hash - 3), hash + 3);
        return;
    }
}

#define ASSERT_SHOWN(out, section, key, want_value, want_source)                                                       \
    do {                                                                                                               \
        char v_[512], s_[512];                                                                                         \
        shown((out), (section), (key), v_, s_, sizeof v_);                                                             \
        if (strcmp(v_, (want_value)) || strncmp(s_, (want_source), strlen(want_source)))                               \
            fail_msg("%s in \"%s\": %s (from %s), expected %s (from %s...):\n%s", (key), (section), v_, s_,            \
                     (want_value), (want_source), (out));                                                              \
    } while (0)

#define PRODUCER "# producer"
#define ORDERS "# consumer of subscription orders "

static void precedence_through_the_command_line(void **state) {
    (void)state;
    char file[256], other[256], envfile[300];
    path_of(file, sizeof file, "client.properties");
    path_of(other, sizeof other, "other.properties");
    write_file(file,
               "# every client, then the producer's\n"
               "linger.ms=10\n"
               "producer.linger.ms=20\n"
               "session.timeout.ms=7000\n"
               "consumer.fetch.max.bytes=1000000\n",
               0600);
    write_file(other, "session.timeout.ms=9000\n", 0600);
    snprintf(envfile, sizeof envfile, "CSTREAM_CONFIG=%s", other);
    char *out, *err;

    /* The file over the code (ops_service sets session.timeout.ms=6000). */
    const char *file_only[] = {OPS_SERVICE, "config", "show", "--config", file, NULL};
    assert_int_equal(run(file_only, NULL, NULL, &out, &err), 0);
    char at[300];
    snprintf(at, sizeof at, "config file %s:3", file);
    ASSERT_SHOWN(out, PRODUCER, "linger.ms", "20", at);
    snprintf(at, sizeof at, "config file %s:4", file);
    ASSERT_SHOWN(out, ORDERS, "session.timeout.ms", "7000", at);
    ASSERT_SHOWN(out, ORDERS, "fetch.wait.max.ms", "10", "code cs_kafka_config");
    ASSERT_SHOWN(out, ORDERS, "client.id", "orders-svc", "default");
    ASSERT_SHOWN(out, ORDERS, "group.id", "orders-svc", "cstream");
    free(out), free(err);

    /* --config beats CSTREAM_CONFIG; the environment beats the file. */
    const char *env[] = {envfile, "CSTREAM_KAFKA_PRODUCER_LINGER_MS=30", "CSTREAM_KAFKA_FETCH_MAX_BYTES=2000000", NULL};
    assert_int_equal(run(file_only, env, NULL, &out, &err), 0);
    ASSERT_SHOWN(out, PRODUCER, "linger.ms", "30", "environment CSTREAM_KAFKA_PRODUCER_LINGER_MS");
    ASSERT_SHOWN(out, ORDERS, "session.timeout.ms", "7000", "config file");
    /* A higher source wins whatever the role: every client's key in the
     * environment beats the file's consumer. key. */
    ASSERT_SHOWN(out, ORDERS, "fetch.max.bytes", "2000000", "environment CSTREAM_KAFKA_FETCH_MAX_BYTES");
    free(out), free(err);

    /* CSTREAM_CONFIG alone is read. */
    const char *plain[] = {OPS_SERVICE, "config", "show", NULL};
    assert_int_equal(run(plain, env, NULL, &out, &err), 0);
    snprintf(at, sizeof at, "config file %s:1", other);
    ASSERT_SHOWN(out, ORDERS, "session.timeout.ms", "9000", at);
    free(out), free(err);

    /* -X beats the environment; the last -X of a key wins; subscription. */
    const char *flags[] = {OPS_SERVICE,
                           "config",
                           "show",
                           "--config",
                           file,
                           "-X",
                           "producer.linger.ms=35",
                           "-Xproducer.linger.ms=40",
                           "-X",
                           "subscription.orders.fetch.max.bytes=3000000",
                           NULL};
    assert_int_equal(run(flags, env, NULL, &out, &err), 0);
    ASSERT_SHOWN(out, PRODUCER, "linger.ms", "40", "-X producer.linger.ms");
    ASSERT_SHOWN(out, ORDERS, "fetch.max.bytes", "3000000", "-X subscription.orders.fetch.max.bytes");
    ASSERT_SHOWN(out, "# consumer of subscription audit ", "fetch.max.bytes", "2000000", "environment");
    free(out), free(err);
}

/* cs_kafka_profile: each client gets the profile's properties that apply to
 * it, named as their source; the code's properties and the operator's beat
 * them; an unknown profile or a late call is refused. */
static void low_latency_profile_under_every_layer(void **state) {
    (void)state;
    const char *show[] = {OPS_SERVICE, "config", "show", "-X", "consumer.socket.nagle.disable=false", NULL};
    const char *env[] = {"OPS_PROFILE=low-latency", NULL};
    char *out, *err;
    assert_int_equal(run(show, env, NULL, &out, &err), 0);
    ASSERT_SHOWN(out, PRODUCER, "linger.ms", "1", "profile low-latency");
    ASSERT_SHOWN(out, PRODUCER, "socket.nagle.disable", "true", "profile low-latency");
    ASSERT_SHOWN(out, PRODUCER, "fetch.min.bytes", "", ""); /* a consumer's property: not the producer's */
    ASSERT_SHOWN(out, ORDERS, "fetch.min.bytes", "1", "profile low-latency");
    ASSERT_SHOWN(out, ORDERS, "linger.ms", "", "");                               /* a producer's: not the consumer's */
    ASSERT_SHOWN(out, ORDERS, "fetch.wait.max.ms", "10", "code cs_kafka_config"); /* the code beats the profile */
    ASSERT_SHOWN(out, ORDERS, "socket.nagle.disable", "false", "-X consumer.socket.nagle.disable");
    free(out), free(err);
    /* Without the profile none of it is there. */
    const char *plain[] = {OPS_SERVICE, "config", "show", NULL};
    assert_int_equal(run(plain, NULL, NULL, &out, &err), 0);
    ASSERT_SHOWN(out, PRODUCER, "linger.ms", "", "");
    ASSERT_SHOWN(out, ORDERS, "fetch.min.bytes", "", "");
    free(out), free(err);

    cs_kafka *k = cs_kafka_new(NULL);
    assert_non_null(k);
    assert_int_equal(cs_kafka_profile(k, (cs_profile)7), CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "cs_kafka_profile"));
    assert_int_equal(cs_kafka_profile(NULL, CS_PROFILE_LOW_LATENCY), CS_ERR_ARG);
    assert_int_equal(cs_kafka_profile(k, CS_PROFILE_DEFAULT), CS_OK);
    cs_kafka_destroy(k);
}

static void config_show_masks_secrets(void **state) {
    (void)state;
    char file[256], pw[256], ca[256], text[1024];
    path_of(file, sizeof file, "secrets.properties");
    path_of(pw, sizeof pw, "password");
    path_of(ca, sizeof ca, "ca.pem");
    write_file(pw, "file-secret-1234\n", 0600);
    write_file(ca, "not-a-secret-but-from-a-file\n", 0644);
    snprintf(text, sizeof text,
             "sasl.username=alice\n"
             "sasl.password=@%s\n"
             "ssl.key.password=inline-secret-5678\n"
             "ssl.ca.location=@%s\n",
             pw, ca);
    write_file(file, text, 0600);
    char *out, *err;
    const char *argv[] = {
        OPS_SERVICE, "config", "show", "--config", file, "-X", "sasl.oauthbearer.config=flag-secret-9", NULL};
    assert_int_equal(run(argv, NULL, NULL, &out, &err), 0);
    ASSERT_SHOWN(out, PRODUCER, "sasl.username", "alice", "config file");
    ASSERT_SHOWN(out, PRODUCER, "sasl.password", "[redacted]", "config file");
    ASSERT_SHOWN(out, ORDERS, "ssl.key.password", "[redacted]", "config file");
    ASSERT_SHOWN(out, ORDERS, "sasl.oauthbearer.config", "[redacted]", "-X sasl.oauthbearer.config");
    char at_ca[300];
    snprintf(at_ca, sizeof at_ca, "@%s", ca);
    ASSERT_SHOWN(out, ORDERS, "ssl.ca.location", at_ca, "config file");
    /* The literal secret on the command line is warned about, not quoted. */
    char line[1024];
    if (!cst_log_line(err, "visible to every user", line, sizeof line)) fail_msg("no ps warning in:\n%s", err);
    assert_non_null(strstr(line, "sasl.oauthbearer.config"));
    const char *secrets[] = {"file-secret-1234", "inline-secret-5678", "flag-secret-9", "not-a-secret-but"};
    for (size_t i = 0; i < 4; i++) {
        cst_assert_no_secret("config show's output", out, secrets[i]);
        cst_assert_no_secret("config show's stderr", err, secrets[i]);
    }
    free(out), free(err);
}

static void owned_key_as_a_flag_consumes_nothing(void **state) {
    (void)state;
    char prefix[96], orders[160], group[160], env_prefix[128], env_brokers[512];
    cs_test_unique_name(prefix, sizeof prefix, "opscfg");
    strcat(prefix, ".");
    snprintf(orders, sizeof orders, "%sorders", prefix);
    snprintf(group, sizeof group, "%sorders-svc", prefix);
    const char *topics[] = {"orders", "orders.done", "orders.dlq", "audit", "invoices"};
    const int parts[] = {2, 2, 1, 1, 3};
    for (size_t i = 0; i < 5; i++) {
        char t[200];
        snprintf(t, sizeof t, "%s%s", prefix, topics[i]);
        CST_OK(cs_test_topic_create(cst_cluster, t, parts[i]));
    }
    CST_OK(cs_test_produce(cst_cluster, orders, 0, NULL, 0, "{\"id\":1,\"amount_cents\":5}", 26, NULL));
    snprintf(env_prefix, sizeof env_prefix, "OPS_PREFIX=%s", prefix);
    snprintf(env_brokers, sizeof env_brokers, "CSTREAM_BROKERS=%s", cs_test_cluster_brokers(cst_cluster));
    const char *env[] = {env_prefix, env_brokers, NULL};
    const char *argv[] = {OPS_SERVICE, "run", "-X", "consumer.enable.auto.commit=true", NULL};
    char *out, *err;
    assert_int_equal(run(argv, env, NULL, &out, &err), 1);
    if (!strstr(err, "-X consumer.enable.auto.commit: property enable.auto.commit is owned by cstream"))
        fail_msg("stderr does not name the flag and the key:\n%s", err);
    assert_null(strstr(err, "subscribed")); /* no consumer started */
    int64_t off = 0;
    CST_OK(cs_test_committed(cst_cluster, group, orders, 0, &off));
    assert_int_equal(off, -1);
    free(out), free(err);
}

/* ---- SASL_SSL from a file (real broker) ------------------------------------------ */

static const char *need_env(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) fail_msg("%s is not set: run this test through tests/with-real-broker", name);
    return v;
}

static void sasl_ssl_from_a_file_and_a_secret_file(void **state) {
    (void)state;
    if (cs_test_cluster_is_embedded(cst_cluster)) {
        cst_skip("real broker only: the embedded cluster has no SASL_SSL listener");
        return;
    }
    const char *brokers = need_env("CSTREAM_SASL_BROKERS"), *ca = need_env("CSTREAM_SASL_CA");
    const char *user = need_env("CSTREAM_SASL_USER"), *password = need_env("CSTREAM_SASL_PASSWORD");
    /* librdkafka before 2.6.1 cannot log in with SCRAM to Kafka 4 (#4895). */
    const char *mechanism = rd_kafka_version() >= 0x02060100 ? "SCRAM-SHA-512" : "PLAIN";

    char prefix[96], orders[160], group[160];
    cs_test_unique_name(prefix, sizeof prefix, "opssasl");
    strcat(prefix, ".");
    snprintf(orders, sizeof orders, "%sorders", prefix);
    snprintf(group, sizeof group, "%sorders-svc", prefix);
    const char *topics[] = {"orders", "orders.done", "orders.dlq", "audit", "invoices"};
    const int parts[] = {2, 2, 1, 1, 3};
    for (size_t i = 0; i < 5; i++) {
        char t[200];
        snprintf(t, sizeof t, "%s%s", prefix, topics[i]);
        CST_OK(cs_test_topic_create(cst_cluster, t, parts[i])); /* over PLAINTEXT */
    }

    char file[256], pw[256], text[2048];
    path_of(file, sizeof file, "sasl.properties");
    path_of(pw, sizeof pw, "sasl.password");
    char pw_text[256];
    snprintf(pw_text, sizeof pw_text, "%s\n", password); /* as `echo` writes it: the newline is dropped */
    write_file(pw, pw_text, 0600);
    snprintf(text, sizeof text,
             "# the cluster's client.properties, as an operator writes it\n"
             "security.protocol=SASL_SSL\n"
             "sasl.mechanisms=%s\n"
             "sasl.username=%s\n"
             "sasl.password=@%s\n"
             "ssl.ca.location=%s\n",
             mechanism, user, pw, ca);
    write_file(file, text, 0600);

    char env_prefix[128];
    snprintf(env_prefix, sizeof env_prefix, "OPS_PREFIX=%s", prefix);
    const char *env[] = {env_prefix, NULL};
    char rout[300], rerr[300];
    path_of(rout, sizeof rout, "run.out");
    path_of(rerr, sizeof rerr, "run.err");
    const char *run_argv[] = {OPS_SERVICE, "run", "--config", file, "--brokers", brokers, NULL};
    pid_t pid = spawn(run_argv, env, NULL, rout, rerr);

    const char *pub_argv[] = {OPS_SERVICE, "publish", orders,      "--partition", "0",
                              "--config",  file,      "--brokers", brokers,       NULL};
    char *out, *err;
    int published = run(pub_argv, env, "{\"id\":7,\"amount_cents\":500}", &out, &err);
    cs_err committed = published == 0 ? cs_test_wait_committed(cst_cluster, group, orders, 0, 1, 60000) : CS_ERR_KAFKA;
    char why[1024];
    snprintf(why, sizeof why, "%s", committed ? cs_errmsg() : "");
    kill(pid, SIGTERM);
    int status = cst_wait_exit(pid, 60000);
    char *run_out = cst_slurp(rout), *run_err = cst_slurp(rerr);
    if (published != 0) fail_msg("publish over SASL_SSL exited %d:\n%s\n%s", published, err, out);
    assert_non_null(strstr(out, "partition=0 offset=0"));
    if (committed)
        fail_msg("the service did not commit its record over SASL_SSL with %s: %s\n%s", mechanism, why, run_err);
    assert_int_equal(status, 0);
    const char *texts[] = {out, err, run_out, run_err};
    for (size_t i = 0; i < 4; i++) cst_assert_no_secret("the service's output", texts[i], password);
    free(out), free(err), free(run_out), free(run_err);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(precedence_through_the_command_line),
        cmocka_unit_test(low_latency_profile_under_every_layer),
        cmocka_unit_test(config_show_masks_secrets),
        cmocka_unit_test(owned_key_as_a_flag_consumes_nothing),
        cmocka_unit_test(sasl_ssl_from_a_file_and_a_secret_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
