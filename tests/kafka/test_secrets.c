/* test_secrets.c — a configured sasl.password never reaches a log line or an
 * error message. Everything the process writes to stderr (cstream's lines and
 * librdkafka's own, routed through cstream's logger) is captured at debug
 * level with librdkafka's debug=all (its configuration dump included): a
 * whole run with the password configured (start, a record consumed and
 * replied to, stop), then a run with security.protocol sasl_plaintext, which
 * fails to start on both test clusters (librdkafka 2.0.2's mock broker has no
 * SASL, the real broker's listener is PLAINTEXT) and so logs the
 * authentication error paths. A property librdkafka rejects (a Java client's
 * sasl.jaas.config holding the password) must not echo its value in the
 * error message either. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cstest.h"

static char secret[64];

static void make_secret(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(secret, sizeof secret, "pw-%d-%ld-never-logged", (int)getpid(), (long)ts.tv_nsec);
}

static void assert_no_secret(const char *what, const char *text) { cst_assert_no_secret(what, text, secret); }

static cs_outcome reply_ok(cs_delivery *d, void *user) {
    (void)user;
    cs_delivery_reply(d, NULL, 0, "ok", 2);
    return CS_ACK;
}

/* One app on the test cluster with the password configured; security.protocol
 * is `protocol`. With "plaintext" the whole run works (the password is
 * configured but not sent); with "sasl_plaintext" start fails (see the top).
 * Returns what cs_app_start returned; *why gets its message. */
static cs_err one_run(const char *protocol, char *why, size_t size) {
    char topic[128], group[160], reply[160];
    cst_fresh("secrets", 1, topic, group, sizeof topic);
    snprintf(reply, sizeof reply, "%s.reply", topic);
    CST_OK(cs_test_topic_create(cst_cluster, reply, 1));
    cs_app *app = cs_app_new("secrets-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_config(k, "debug", "all"));
    CST_OK(cs_kafka_config(k, "security.protocol", protocol));
    CST_OK(cs_kafka_config(k, "sasl.mechanisms", "PLAIN"));
    CST_OK(cs_kafka_config(k, "sasl.username", "svc"));
    CST_OK(cs_kafka_config(k, "sasl.password", secret));
    cs_sub *s = cs_kafka_subscribe(k, topic, reply_ok, NULL);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_reply(s, reply, 5000));
    CST_OK(cs_app_add_kafka(app, k));
    cs_err started = cs_app_start(app);
    snprintf(why, size, "%s", started ? cs_errmsg() : "");
    if (started == CS_OK) {
        cs_record r = {.topic = topic, .partition = 0, .value = "x", .value_len = 1};
        CST_OK(cs_publish(k, &r, NULL));
        CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, 1, 60000)); /* handled and replied */
    }
    cs_app_stop(app);
    cs_app_destroy(app);
    return started;
}

static void sasl_password_in_no_log_line(void **state) {
    (void)state;
    cst_capture cap;
    cst_capture_start(&cap);
    cs_log_set_level(CS_LOG_DEBUG);

    /* A Java client's property, with the password inside: librdkafka rejects it. */
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    char jaas[256], jaas_err[1024];
    snprintf(jaas, sizeof jaas,
             "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"svc\" password=\"%s\";",
             secret);
    cs_err jaas_rc = cs_kafka_config(k, "sasl.jaas.config", jaas);
    snprintf(jaas_err, sizeof jaas_err, "%s", cs_errmsg());
    cs_kafka_destroy(k);

    char plain_err[1024], sasl_err[1024];
    cs_err plain_rc = one_run("plaintext", plain_err, sizeof plain_err);
    cs_err sasl_rc = one_run("sasl_plaintext", sasl_err, sizeof sasl_err);

    cs_log_set_level(CS_LOG_INFO);
    char *log = cst_capture_stop(&cap);
    if (getenv("CST_DUMP")) fputs(log, stdout);

    assert_int_not_equal(jaas_rc, CS_OK);
    assert_non_null(strstr(jaas_err, "sasl.jaas.config"));
    assert_no_secret("the sasl.jaas.config error", jaas_err);
    if (plain_rc != CS_OK) fail_msg("the plaintext run did not start: %s", plain_err);
    assert_int_not_equal(sasl_rc, CS_OK); /* neither cluster speaks SASL here */
    assert_no_secret("the start error", sasl_err);
    /* The capture saw librdkafka's debug output, the SASL attempt and the configuration included. */
    assert_non_null(strstr(log, "DEBUG librdkafka"));
    assert_non_null(strstr(log, "sasl.password"));
    assert_non_null(strstr(log, "facility=FAIL"));
    assert_no_secret("the log", log);
    free(log);
}

int main(void) {
    make_secret();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sasl_password_in_no_log_line),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
