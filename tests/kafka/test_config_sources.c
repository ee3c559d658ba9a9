/* test_config_sources.c — the operator's configuration layers of a service
 * built on cs_kafka_new alone (no cs_app_main): CSTREAM_CONFIG (a Java
 * client.properties file) and the CSTREAM_KAFKA_* variables, checked against
 * what the running consumers were created with (rd_kafka_conf_get):
 *   - each source and one precedence: cstream's default < the code <
 *     the file < the environment; within a source, every client's key <
 *     consumer. < subscription.<name>. (variables: CONSUMER_,
 *     SUBSCRIPTION_<NAME>_); values from files (@path, _FILE, trailing
 *     newline dropped; @@ a literal @);
 *   - a bad file line, an unreadable value file, a cstream-owned key in the
 *     file or a variable, a subscription that does not exist: cs_app_start
 *     fails naming the source (file:line, variable), no consumer is created
 *     and no record handled;
 *   - a value read from a file never appears in an error, and a secret file
 *     others can read gets a WARN line that does not quote it.
 * The -X flags and `config show` go through cs_app_main: tests/ops/test_ops_config.c. */
#define _POSIX_C_SOURCE 200809L
#include <librdkafka/rdkafka.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cstest.h"
#include "cstream/rdkafka.h"

extern char **environ;

static _Atomic int handled;

static cs_outcome count(cs_delivery *d, void *user) {
    (void)d;
    (void)user;
    atomic_fetch_add(&handled, 1);
    return CS_ACK;
}

static char dir[64];

static void path_of(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", dir, name); }

static void write_file(const char *name, const char *text, mode_t mode) {
    char path[256];
    path_of(path, sizeof path, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

/* Every test starts and ends with none of the operator's variables set. */
static int clean_env(void **state) {
    (void)state;
    for (bool again = true; again;) {
        again = false;
        for (char **e = environ; *e; e++) {
            if (strncmp(*e, "CSTREAM_KAFKA_", 14) && strncmp(*e, "CSTREAM_CONFIG=", 15)) continue;
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(strchr(*e, '=') - *e), *e);
            unsetenv(name);
            again = true; /* environ changed under us */
            break;
        }
    }
    return 0;
}

static int setup(void **state) {
    if (cst_cluster_setup(state) != 0) return -1;
    snprintf(dir, sizeof dir, "/tmp/cstream-config-XXXXXX");
    return mkdtemp(dir) ? clean_env(state) : -1;
}

static int teardown(void **state) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return cst_cluster_teardown(state);
}

static void property(cs_sub *s, const char *key, char *buf, size_t size) {
    rd_kafka_t *rk = cs_sub_rdkafka_consumer(s);
    assert_non_null(rk);
    size_t len = size;
    if (rd_kafka_conf_get(rd_kafka_conf(rk), key, buf, &len) != RD_KAFKA_CONF_OK) fail_msg("no property %s", key);
}

#define ASSERT_PROPERTY(s, key, want)                                                                                  \
    do {                                                                                                               \
        char got_[256];                                                                                                \
        property((s), (key), got_, sizeof got_);                                                                       \
        if (strcmp(got_, (want))) fail_msg("%s of %s: %s, expected %s", (key), #s, got_, (want));                      \
    } while (0)

/* A variable's spelling of a topic name: upper case, others as '_'. */
static void env_name(const char *topic, char *out, size_t size) {
    size_t n = 0;
    for (const char *c = topic; *c && n + 1 < size; c++)
        out[n++] = (*c >= 'a' && *c <= 'z')                                 ? (char)(*c - 'a' + 'A')
                   : ((*c >= '0' && *c <= '9') || (*c >= 'A' && *c <= 'Z')) ? *c
                                                                            : '_';
    out[n] = '\0';
}

static void each_source_and_the_precedence(void **state) {
    (void)state;
    char t1[128], t2[128], group[160], file[256], rack[256], id[256], var[512], e1[128], e2[128];
    cst_fresh("cfgsrc-a", 1, t1, group, sizeof t1);
    cst_fresh("cfgsrc-b", 1, t2, NULL, sizeof t2);
    env_name(t1, e1, sizeof e1);
    env_name(t2, e2, sizeof e2);
    write_file("rack", "rack-from-file\n", 0600);
    write_file("id", "client-from-file\r\n\n", 0600);
    path_of(rack, sizeof rack, "rack");
    path_of(id, sizeof id, "id");
    char text[2048];
    snprintf(text, sizeof text,
             "# the operator's file\n"
             "! a Java-style comment\n"
             "\n"
             "  session.timeout.ms = 7000  \n"     /* beats the code's 6000 */
             "heartbeat.interval.ms=1500\n"        /* the environment beats it */
             "queued.min.messages=2000\n"          /* every client's: t2 keeps the consumer.'s */
             "consumer.queued.min.messages=3000\n" /* consumer. beats every client's */
             "subscription.%s.queued.min.messages=4000\n"
             "subscription.%s.client.rack=@%s\n" /* a value from a file */
             "subscription.%s.client.rack=@@literal\n"
             "fetch.wait.max.ms:\\\n"
             "    25\n", /* Java's ':' separator, a continued line */
             t1, t1, rack, t2);
    write_file("client.properties", text, 0600);
    path_of(file, sizeof file, "client.properties");
    setenv("CSTREAM_CONFIG", file, 1);
    setenv("CSTREAM_KAFKA_HEARTBEAT_INTERVAL_MS", "1600", 1);
    snprintf(var, sizeof var, "CSTREAM_KAFKA_SUBSCRIPTION_%s_CLIENT_ID_FILE", e2);
    setenv(var, id, 1);
    snprintf(var, sizeof var, "CSTREAM_KAFKA_SUBSCRIPTION_%s_MAX_POLL_INTERVAL_MS", e1);
    setenv(var, "400000", 1);
    setenv("CSTREAM_KAFKA_CONSUMER_MAX_POLL_INTERVAL_MS", "350000", 1);
    setenv("CSTREAM_KAFKA_LOG__LEVEL", "6", 1); /* "__" is a '_' of the name */

    cs_app *app = cs_app_new("cfgsrc", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_default_group(k, group));
    CST_OK(cs_kafka_config(k, "session.timeout.ms", "6000"));
    CST_OK(cs_kafka_config(k, "fetch.wait.max.ms", "10"));
    CST_OK(cs_kafka_config(k, "fetch.error.backoff.ms", "123")); /* the code alone */
    cs_sub *a = cs_kafka_subscribe(k, t1, count, NULL);
    cs_sub *b = cs_kafka_subscribe(k, t2, count, NULL);
    assert_non_null(a);
    assert_non_null(b);
    CST_OK(cs_sub_config(b, "session.timeout.ms", "6500")); /* the code's, below the file */
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    for (int i = 0; i < 2; i++) {
        cs_sub *s = i ? b : a;
        ASSERT_PROPERTY(s, "session.timeout.ms", "7000");
        ASSERT_PROPERTY(s, "heartbeat.interval.ms", "1600");
        ASSERT_PROPERTY(s, "fetch.wait.max.ms", "25");
        ASSERT_PROPERTY(s, "fetch.error.backoff.ms", "123");
        ASSERT_PROPERTY(s, "topic.metadata.refresh.interval.ms", "30000"); /* cstream's default */
        ASSERT_PROPERTY(s, "log_level", "6");
    }
    ASSERT_PROPERTY(a, "queued.min.messages", "4000");
    ASSERT_PROPERTY(b, "queued.min.messages", "3000");
    ASSERT_PROPERTY(a, "client.rack", "rack-from-file");
    ASSERT_PROPERTY(b, "client.rack", "@literal");
    ASSERT_PROPERTY(a, "client.id", "cfgsrc");
    ASSERT_PROPERTY(b, "client.id", "client-from-file");
    ASSERT_PROPERTY(a, "max.poll.interval.ms", "400000");
    ASSERT_PROPERTY(b, "max.poll.interval.ms", "350000");
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

/* cs_app_start with the current file and variables fails with CS_ERR_CONFIG
 * and every needle in its message, before anything consumed the record
 * waiting on the topic. */
static void expect_refused(const char *what, const char *const *needles, const char *never) {
    char topic[128], group[160];
    cst_fresh("cfgsrc-bad", 1, topic, group, sizeof topic);
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "x", 1, NULL));
    atomic_store(&handled, 0);
    cs_app *app = cs_app_new("cfgsrc-bad", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_default_group(k, group));
    cs_sub *s = cs_kafka_subscribe(k, topic, count, NULL);
    assert_non_null(s);
    CST_OK(cs_app_add_kafka(app, k));
    cs_err err = cs_app_start(app);
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", cs_errmsg());
    if (err != CS_ERR_CONFIG)
        fail_msg("%s: cs_app_start -> %s, expected CS_ERR_CONFIG: %s", what, cs_err_name(err), msg);
    for (; *needles; needles++)
        if (!strstr(msg, *needles)) fail_msg("%s: the message lacks \"%s\": %s", what, *needles, msg);
    if (never && strstr(msg, never)) fail_msg("%s: the message quotes \"%s\": %s", what, never, msg);
    assert_null(cs_sub_rdkafka_consumer(s)); /* no consumer was created */
    cs_app_destroy(app);
    assert_int_equal(atomic_load(&handled), 0);
    int64_t off = 0;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &off));
    assert_int_equal(off, -1);
    clean_env(NULL);
}

static void bad_file_syntax_names_the_line(void **state) {
    (void)state;
    char file[256], at[300];
    path_of(file, sizeof file, "bad.properties");
    write_file("bad.properties", "# ok\nsession.timeout.ms=7000\nthis line has no separator\n", 0600);
    setenv("CSTREAM_CONFIG", file, 1);
    snprintf(at, sizeof at, "config file %s:3", file);
    expect_refused("no separator", (const char *const[]){at, "expected key=value", NULL}, "this line");

    write_file("bad.properties", "session.timeout.ms=7000\n = 5\n", 0600);
    setenv("CSTREAM_CONFIG", file, 1);
    snprintf(at, sizeof at, "config file %s:2", file);
    expect_refused("empty name", (const char *const[]){at, "name is empty", NULL}, NULL);

    write_file("bad.properties", "\n\nno.such.property=1\n", 0600);
    setenv("CSTREAM_CONFIG", file, 1);
    snprintf(at, sizeof at, "config file %s:3", file);
    expect_refused("unknown property", (const char *const[]){at, "no.such.property", "No such configuration", NULL},
                   NULL);

    write_file("bad.properties", "consumer.session.timeout.ms=abc\n", 0600);
    setenv("CSTREAM_CONFIG", file, 1);
    snprintf(at, sizeof at, "config file %s:1", file);
    expect_refused("invalid value", (const char *const[]){at, "session.timeout.ms", NULL}, NULL);

    setenv("CSTREAM_CONFIG", "/nonexistent/client.properties", 1);
    expect_refused("missing file",
                   (const char *const[]){"CSTREAM_CONFIG", "/nonexistent/client.properties", "No such file", NULL},
                   NULL);
}

static void unreadable_secret_file_names_the_source(void **state) {
    (void)state;
    char file[256];
    path_of(file, sizeof file, "secret.properties");
    write_file("secret.properties", "sasl.password=@/nonexistent/password\n", 0600);
    setenv("CSTREAM_CONFIG", file, 1);
    expect_refused("@ file missing", (const char *const[]){":1", "/nonexistent/password", "No such file", NULL}, NULL);

    setenv("CSTREAM_KAFKA_SASL_PASSWORD_FILE", dir, 1); /* a directory: reading it fails */
    expect_refused("_FILE a directory",
                   (const char *const[]){"environment CSTREAM_KAFKA_SASL_PASSWORD_FILE", dir, NULL}, NULL);

    /* Read, but not a number: the message names the file, never its content. */
    write_file("bytes", "SECRET-CONTENT-42\n", 0600);
    char bytes[256];
    path_of(bytes, sizeof bytes, "bytes");
    char text[512];
    snprintf(text, sizeof text, "fetch.max.bytes=@%s\n", bytes);
    write_file("secret.properties", text, 0600);
    setenv("CSTREAM_CONFIG", file, 1);
    expect_refused("bad value from a file", (const char *const[]){"fetch.max.bytes", bytes, NULL}, "SECRET-CONTENT");
}

static void owned_key_in_each_source_is_refused(void **state) {
    (void)state;
    char file[256], at[300];
    path_of(file, sizeof file, "owned.properties");
    write_file("owned.properties", "# the group is the code's\ngroup.id=stolen\n", 0600);
    setenv("CSTREAM_CONFIG", file, 1);
    snprintf(at, sizeof at, "config file %s:2", file);
    expect_refused("file", (const char *const[]){at, "group.id", "owned by cstream", "cs_sub_group", NULL}, NULL);

    write_file("owned.properties", "consumer.enable.auto.commit=true\n", 0600);
    setenv("CSTREAM_CONFIG", file, 1);
    snprintf(at, sizeof at, "config file %s:1", file);
    expect_refused("file, consumer.", (const char *const[]){at, "enable.auto.commit", "cs_sub_commit_mode", NULL},
                   NULL);

    setenv("CSTREAM_KAFKA_ENABLE_AUTO_OFFSET_STORE", "true", 1);
    expect_refused("variable",
                   (const char *const[]){"environment CSTREAM_KAFKA_ENABLE_AUTO_OFFSET_STORE",
                                         "enable.auto.offset.store", "owned by cstream", NULL},
                   NULL);

    setenv("CSTREAM_KAFKA_CONSUMER_BOOTSTRAP_SERVERS", "127.0.0.1:1", 1);
    expect_refused(
        "variable, CONSUMER_",
        (const char *const[]){"CSTREAM_KAFKA_CONSUMER_BOOTSTRAP_SERVERS", "bootstrap.servers", "CSTREAM_BROKERS", NULL},
        NULL);

    setenv("CSTREAM_KAFKA_SUBSCRIPTION_NO_SUCH_TOPIC_FETCH_MAX_BYTES", "100000", 1);
    expect_refused("no such subscription",
                   (const char *const[]){"CSTREAM_KAFKA_SUBSCRIPTION_NO_SUCH_TOPIC_FETCH_MAX_BYTES",
                                         "names no subscription", NULL},
                   NULL);

    /* X and X_FILE for one property: which one wins would be a guess. */
    write_file("pw", "secret\n", 0600);
    char pw[256];
    path_of(pw, sizeof pw, "pw");
    setenv("CSTREAM_KAFKA_SASL_PASSWORD", "inline", 1);
    setenv("CSTREAM_KAFKA_SASL_PASSWORD_FILE", pw, 1);
    expect_refused("both X and X_FILE",
                   (const char *const[]){"CSTREAM_KAFKA_SASL_PASSWORD and", "CSTREAM_KAFKA_SASL_PASSWORD_FILE", NULL},
                   "secret");
}

static void readable_secret_file_is_warned_about(void **state) {
    (void)state;
    char file[256], pw[256], text[512], topic[128], group[160];
    cst_fresh("cfgsrc-warn", 1, topic, group, sizeof topic);
    write_file("pw-open", "open-secret-value\n", 0644);
    path_of(pw, sizeof pw, "pw-open");
    snprintf(text, sizeof text, "sasl.password=@%s\n", pw);
    write_file("warn.properties", text, 0600);
    path_of(file, sizeof file, "warn.properties");
    setenv("CSTREAM_CONFIG", file, 1);
    cst_capture cap;
    cst_capture_start(&cap);
    cs_app *app = cs_app_new("cfgsrc-warn", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_err err = cs_kafka_default_group(k, group);
    if (!err) err = cs_kafka_subscribe(k, topic, count, NULL) ? CS_OK : CS_ERR_ARG;
    if (!err) err = cs_app_add_kafka(app, k);
    if (!err) err = cs_app_start(app); /* PLAINTEXT ignores the password */
    if (!err) err = cs_app_stop(app);
    cs_app_destroy(app);
    char *log = cst_capture_stop(&cap);
    clean_env(NULL);
    CST_OK(err);
    char line[1024];
    if (!cst_log_line(log, "secret file is readable by group or others", line, sizeof line))
        fail_msg("no WARN line for a 0644 secret file in:\n%s", log);
    assert_non_null(strstr(line, "WARN"));
    assert_non_null(strstr(line, pw));
    assert_non_null(strstr(line, "mode=0644"));
    cst_assert_no_secret("the log of a run with a secret file", log, "open-secret-value");
    free(log);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(each_source_and_the_precedence, clean_env),
        cmocka_unit_test_teardown(bad_file_syntax_names_the_line, clean_env),
        cmocka_unit_test_teardown(unreadable_secret_file_names_the_source, clean_env),
        cmocka_unit_test_teardown(owned_key_in_each_source_is_refused, clean_env),
        cmocka_unit_test_teardown(readable_secret_file_is_warned_about, clean_env),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
