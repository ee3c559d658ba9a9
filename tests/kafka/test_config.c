/* test_config.c — configuration is checked when it is made: an unknown,
 * invalid, framework-owned or too-new property fails at once, with the key
 * and the reason, and leaves nothing behind. What can only be checked at
 * start (a subscription's group, the topics, a drain timeout not shorter
 * than its consumer's max.poll.interval.ms) fails cs_app_start naming what
 * is wrong, and configuration is closed once the app has started. */
#define _POSIX_C_SOURCE 200809L
#include <librdkafka/rdkafka.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstest.h"
#include "cstream/rdkafka.h"

static cs_outcome ack(cs_delivery *d, void *user) {
    (void)d;
    (void)user;
    return CS_ACK;
}

/* EXPECT_ERR(want, call, needle...): `call` returns `want` with a message
 * containing every needle (none is fine). */
#define EXPECT_ERR(...) EXPECT_ERR_(__VA_ARGS__, NULL)
#define EXPECT_ERR_(want, call, ...) expect_err((want), (call), #call, (const char *const[]){__VA_ARGS__})
static void expect_err(cs_err want, cs_err got, const char *what, const char *const *needles) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", cs_errmsg());
    if (got != want) fail_msg("%s -> %s, expected %s (message: %s)", what, cs_err_name(got), cs_err_name(want), msg);
    for (; *needles; needles++)
        if (!strstr(msg, *needles))
            fail_msg("%s -> %s: message lacks \"%s\": %s", what, cs_err_name(got), *needles, msg);
}

/* A broker that is never started: nothing here needs a cluster. */
static cs_kafka *offline_broker(cs_sub **sub) {
    cs_kafka *k = cs_kafka_new("127.0.0.1:1");
    assert_non_null(k);
    *sub = cs_kafka_subscribe(k, "config-topic", ack, NULL);
    assert_non_null(*sub);
    return k;
}

static void unknown_property_is_refused_with_librdkafkas_reason(void **state) {
    (void)state;
    cs_sub *s;
    cs_kafka *k = offline_broker(&s);
    EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_config(k, "no.such.property", "1"), "no.such.property",
               "No such configuration property");
    EXPECT_ERR(CS_ERR_CONFIG, cs_sub_config(s, "sesion.timeout.ms", "6000"), "sesion.timeout.ms",
               "No such configuration property");
    EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_producer_config(k, "linger.mss", "5"), "linger.mss",
               "No such configuration property");
    cs_kafka_destroy(k);
}

static void invalid_value_is_refused_naming_the_key(void **state) {
    (void)state;
    cs_sub *s;
    cs_kafka *k = offline_broker(&s);
    EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_config(k, "session.timeout.ms", "abc"), "session.timeout.ms", "abc");
    EXPECT_ERR(CS_ERR_CONFIG, cs_sub_config(s, "session.timeout.ms", "abc"), "session.timeout.ms", "abc");
    EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_config(k, "auto.offset.reset", "sometimes"), "auto.offset.reset");
    EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_producer_config(k, "acks", "most"), "acks");
    EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_producer_config(k, "linger.ms", "-5"), "linger.ms");
    /* Out of librdkafka's range is invalid too. */
    EXPECT_ERR(CS_ERR_CONFIG, cs_sub_config(s, "max.poll.interval.ms", "0"), "max.poll.interval.ms");
    /* A valid setting of the same keys still works afterwards. */
    CST_OK(cs_kafka_config(k, "session.timeout.ms", "7000"));
    CST_OK(cs_sub_config(s, "session.timeout.ms", "8000"));
    CST_OK(cs_kafka_producer_config(k, "acks", "all"));
    cs_kafka_destroy(k);
}

static void owned_properties_are_refused_saying_why(void **state) {
    (void)state;
    static const char *const owned[] = {"enable.auto.commit", "enable.auto.offset.store"};
    static const char *const values[] = {"true", "false"};
    cs_sub *s;
    cs_kafka *k = offline_broker(&s);
    for (size_t i = 0; i < 2; i++) {
        for (size_t v = 0; v < 2; v++) {
            EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_config(k, owned[i], values[v]), owned[i], "owned", "cs_sub_commit_mode");
            EXPECT_ERR(CS_ERR_CONFIG, cs_sub_config(s, owned[i], values[v]), owned[i], "owned", "cs_sub_commit_mode");
            EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_producer_config(k, owned[i], values[v]), owned[i], "owned",
                       "cs_sub_commit_mode");
        }
    }
    cs_kafka_destroy(k);
}

/* Whether the running librdkafka knows the property (fetch.queue.backoff.ms
 * is new in 2.3.0; Debian 12 has 2.0.2). */
static bool librdkafka_knows(const char *key, const char *value) {
    rd_kafka_conf_t *probe = rd_kafka_conf_new();
    char reason[256];
    bool known = rd_kafka_conf_set(probe, key, value, reason, sizeof reason) == RD_KAFKA_CONF_OK;
    rd_kafka_conf_destroy(probe);
    return known;
}

/* A property of a newer librdkafka is refused as unsupported, naming the
 * running version and what to use instead; a librdkafka that knows it gets it
 * like any other property. */
static void newer_property_is_unsupported_with_the_alternative(void **state) {
    (void)state;
    cs_sub *s;
    cs_kafka *k = offline_broker(&s);
    const char *running = rd_kafka_version_str();
    if (librdkafka_knows("fetch.queue.backoff.ms", "10")) {
        printf("librdkafka %s knows fetch.queue.backoff.ms: it is passed through\n", running);
        CST_OK(cs_kafka_config(k, "fetch.queue.backoff.ms", "10"));
        CST_OK(cs_sub_config(s, "fetch.queue.backoff.ms", "10"));
        CST_OK(cs_kafka_producer_config(k, "fetch.queue.backoff.ms", "10"));
        cs_kafka_destroy(k);
        return;
    }
    EXPECT_ERR(CS_ERR_UNSUPPORTED, cs_kafka_config(k, "fetch.queue.backoff.ms", "10"), "fetch.queue.backoff.ms",
               running, "queued.min.messages", "queued.max.messages.kbytes");
    EXPECT_ERR(CS_ERR_UNSUPPORTED, cs_sub_config(s, "fetch.queue.backoff.ms", "10"), "fetch.queue.backoff.ms", running,
               "queued.min.messages", "queued.max.messages.kbytes");
    EXPECT_ERR(CS_ERR_UNSUPPORTED, cs_kafka_producer_config(k, "fetch.queue.backoff.ms", "10"),
               "fetch.queue.backoff.ms", running, "queued.min.messages", "queued.max.messages.kbytes");
    /* The alternatives it names are accepted. */
    CST_OK(cs_sub_config(s, "queued.min.messages", "1000"));
    CST_OK(cs_sub_config(s, "queued.max.messages.kbytes", "1024"));
    cs_kafka_destroy(k);
}

static void property_value(rd_kafka_t *rk, const char *key, char *buf, size_t size) {
    size_t len = size;
    if (rd_kafka_conf_get(rd_kafka_conf(rk), key, buf, &len) != RD_KAFKA_CONF_OK) fail_msg("no property %s", key);
}

/* Every refused setting, on a broker that then starts: a refused setting that
 * had been kept would fail the start (librdkafka refuses it there too) or
 * show in the running consumer's configuration. */
static void refused_settings_leave_nothing_behind(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("config-clean", 1, topic, group, sizeof topic);
    cs_app *app = cs_app_new("config-clean", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_non_null(k);
    cs_sub *s = cs_kafka_subscribe(k, topic, ack, NULL);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));

    EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_config(k, "session.timeout.ms", "abc"), "session.timeout.ms");
    CST_OK(cs_kafka_config(k, "session.timeout.ms", "7000"));
    EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_config(k, "session.timeout.ms", "abc"), "session.timeout.ms");
    EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_config(k, "no.such.property", "1"), "no.such.property");
    EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_config(k, "enable.auto.commit", "false"), "enable.auto.commit");
    /* Refused only by a librdkafka older than the property (then nothing of it
     * may be kept); a newer one takes it like any other. */
    bool newer = librdkafka_knows("fetch.queue.backoff.ms", "10");
    if (newer) CST_OK(cs_kafka_config(k, "fetch.queue.backoff.ms", "10"));
    else EXPECT_ERR(CS_ERR_UNSUPPORTED, cs_kafka_config(k, "fetch.queue.backoff.ms", "10"), "fetch.queue.backoff.ms");

    EXPECT_ERR(CS_ERR_CONFIG, cs_sub_config(s, "max.poll.interval.ms", "abc"), "max.poll.interval.ms");
    CST_OK(cs_sub_config(s, "max.poll.interval.ms", "400000"));
    EXPECT_ERR(CS_ERR_CONFIG, cs_sub_config(s, "max.poll.interval.ms", "-1"), "max.poll.interval.ms");
    EXPECT_ERR(CS_ERR_CONFIG, cs_sub_config(s, "no.such.property", "1"), "no.such.property");
    EXPECT_ERR(CS_ERR_CONFIG, cs_sub_config(s, "enable.auto.offset.store", "true"), "enable.auto.offset.store");
    if (newer) CST_OK(cs_sub_config(s, "fetch.queue.backoff.ms", "10"));
    else EXPECT_ERR(CS_ERR_UNSUPPORTED, cs_sub_config(s, "fetch.queue.backoff.ms", "10"), "fetch.queue.backoff.ms");

    EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_producer_config(k, "linger.ms", "abc"), "linger.ms");
    CST_OK(cs_kafka_producer_config(k, "linger.ms", "3"));
    EXPECT_ERR(CS_ERR_CONFIG, cs_kafka_producer_config(k, "no.such.property", "1"), "no.such.property");
    if (newer) CST_OK(cs_kafka_producer_config(k, "fetch.queue.backoff.ms", "10"));
    else
        EXPECT_ERR(CS_ERR_UNSUPPORTED, cs_kafka_producer_config(k, "fetch.queue.backoff.ms", "10"),
                   "fetch.queue.backoff.ms");

    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    rd_kafka_t *rk = cs_sub_rdkafka_consumer(s);
    assert_non_null(rk);
    char value[64];
    property_value(rk, "session.timeout.ms", value, sizeof value);
    assert_string_equal(value, "7000");
    property_value(rk, "max.poll.interval.ms", value, sizeof value);
    assert_string_equal(value, "400000");
    /* Auto mode: the framework's values, not the refused ones: librdkafka
     * commits, cstream stores each offset as it hands the record out. */
    property_value(rk, "enable.auto.commit", value, sizeof value);
    assert_string_equal(value, "true");
    property_value(rk, "enable.auto.offset.store", value, sizeof value);
    assert_string_equal(value, "false");
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

static _Atomic int startups, shutdowns;

static cs_err count_startup(cs_app *app, void *user) {
    (void)app;
    (void)user;
    atomic_fetch_add(&startups, 1);
    return CS_OK;
}

static void count_shutdown(cs_app *app, void *user) {
    (void)app;
    (void)user;
    atomic_fetch_add(&shutdowns, 1);
}

static void missing_group_fails_start_naming_the_topic(void **state) {
    (void)state;
    char topic[128];
    cst_fresh("config-nogroup", 1, topic, NULL, sizeof topic);
    cs_app *app = cs_app_new("config-nogroup", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_non_null(k);
    cs_sub *s = cs_kafka_subscribe(k, topic, ack, NULL);
    assert_non_null(s);
    CST_OK(cs_app_add_kafka(app, k));
    EXPECT_ERR(CS_ERR_GROUP, cs_app_start(app), topic);
    assert_null(cs_sub_rdkafka_consumer(s));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);

    /* Control: the same broker with a default group starts, so the group was all that was missing. */
    char group[160];
    snprintf(group, sizeof group, "%s-group", topic);
    app = cs_app_new("config-defaultgroup", "1.0");
    k = cs_test_kafka_new(cst_cluster);
    s = cs_kafka_subscribe(k, topic, ack, NULL);
    CST_OK(cs_kafka_default_group(k, group));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    assert_non_null(cs_sub_rdkafka_consumer(s));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

static void missing_topic_fails_start_naming_the_topic(void **state) {
    (void)state;
    char topic[128], group[160];
    cs_test_unique_name(topic, sizeof topic, "config-notopic"); /* never created */
    snprintf(group, sizeof group, "%s-group", topic);
    atomic_store(&startups, 0);
    atomic_store(&shutdowns, 0);
    cs_app *app = cs_app_new("config-notopic", "1.0");
    CST_OK(cs_app_on_startup(app, count_startup, NULL));
    CST_OK(cs_app_on_shutdown(app, count_shutdown, NULL));
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_non_null(k);
    cs_sub *s = cs_kafka_subscribe(k, topic, ack, NULL);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_app_add_kafka(app, k));
    EXPECT_ERR(CS_ERR_TOPIC, cs_app_start(app), topic);
    assert_null(cs_sub_rdkafka_consumer(s));
    /* The start-up hook had succeeded: its shutdown hook ran once, after the brokers were closed. */
    assert_int_equal(atomic_load(&startups), 1);
    assert_int_equal(atomic_load(&shutdowns), 1);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    assert_int_equal(atomic_load(&shutdowns), 1);
}

/* On a configured cluster a declared topic is not created: it must exist. */
static void missing_declared_topic_fails_start(void **state) {
    (void)state;
    char topic[128], missing[128], group[160];
    cst_fresh("config-declared", 1, topic, group, sizeof topic);
    cs_test_unique_name(missing, sizeof missing, "config-undeclared");
    cs_app *app = cs_app_new("config-declared", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_non_null(k);
    assert_false(cs_kafka_is_embedded(k));
    CST_OK(cs_kafka_topic(k, missing, 1));
    cs_sub *s = cs_kafka_subscribe(k, topic, ack, NULL);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_app_add_kafka(app, k));
    EXPECT_ERR(CS_ERR_TOPIC, cs_app_start(app), missing);
    assert_null(cs_sub_rdkafka_consumer(s));
    cs_app_destroy(app);
}

static cs_err no_startup(cs_app *app, void *user) {
    (void)app;
    (void)user;
    return CS_OK;
}

/* ---- the drain timeout against the group's rebalance timeout ------------------- */

/* Starts an app of one subscription on the offline broker (its topic check
 * would fail: the drain check comes first) and expects the refusal. */
static void expect_drain_refused(int drain_ms, const char *kafka_interval, const char *sub_interval,
                                 const char *const *needles) {
    cs_sub *s;
    cs_kafka *k = offline_broker(&s);
    CST_OK(cs_kafka_default_group(k, "config-group"));
    CST_OK(cs_sub_drain_timeout_ms(s, drain_ms));
    if (kafka_interval) CST_OK(cs_kafka_config(k, "max.poll.interval.ms", kafka_interval));
    if (sub_interval) CST_OK(cs_sub_config(s, "max.poll.interval.ms", sub_interval));
    cs_app *app = cs_app_new("config-drain", "1.0");
    CST_OK(cs_app_add_kafka(app, k));
    expect_err(CS_ERR_CONFIG, cs_app_start(app), "cs_app_start", needles);
    assert_null(cs_sub_rdkafka_consumer(s));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

/* A revoke drains inside the rebalance callback, where nothing polls: a drain
 * not shorter than max.poll.interval.ms would get the member out of its
 * group. The effective value counts: librdkafka's default, the broker's,
 * the subscription's over it; the message names both keys and both values. */
static void drain_longer_than_the_rebalance_timeout_fails_start(void **state) {
    (void)state;
    expect_drain_refused(
        3600000, NULL, NULL,
        (const char *const[]){"config-topic", "drain_timeout_ms=3600000", "max.poll.interval.ms=300000", NULL});
    expect_drain_refused(30000, "20000", NULL,
                         (const char *const[]){"drain_timeout_ms=30000", "max.poll.interval.ms=20000", NULL});
    /* As long as the interval is too long already: the time since the last
     * poll comes on top. */
    expect_drain_refused(20000, NULL, "20000",
                         (const char *const[]){"drain_timeout_ms=20000", "max.poll.interval.ms=20000", NULL});
    expect_drain_refused(30000, "60000", "20000",
                         (const char *const[]){"drain_timeout_ms=30000", "max.poll.interval.ms=20000", NULL});

    /* Controls on the cluster: the subscription's interval over the
     * broker's lets a 30 s drain start, with the consumer on that interval;
     * manual assignment joins no group and is not held to it. */
    char topic[128], group[160];
    cst_fresh("config-drain", 1, topic, group, sizeof topic);
    cs_app *app = cs_app_new("config-drain-ok", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_non_null(k);
    CST_OK(cs_kafka_default_group(k, group));
    CST_OK(cs_kafka_config(k, "max.poll.interval.ms", "20000"));
    cs_sub *s = cs_kafka_subscribe(k, topic, ack, NULL);
    assert_non_null(s);
    CST_OK(cs_sub_config(s, "max.poll.interval.ms", "60000"));
    CST_OK(cs_sub_drain_timeout_ms(s, 30000));
    cs_sub *manual = cs_kafka_subscribe(k, topic, ack, NULL);
    assert_non_null(manual);
    CST_OK(cs_sub_partitions(manual, (const int32_t[]){0}, 1));
    CST_OK(cs_sub_drain_timeout_ms(manual, 3600000));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    char value[64];
    property_value(cs_sub_rdkafka_consumer(s), "max.poll.interval.ms", value, sizeof value);
    assert_string_equal(value, "60000");
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

static void no_shutdown(cs_app *app, void *user) {
    (void)app;
    (void)user;
}

static void configuring_after_start_is_refused(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("config-late", 1, topic, group, sizeof topic);
    cs_app *app = cs_app_new("config-late", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_non_null(k);
    cs_sub *s = cs_kafka_subscribe(k, topic, ack, NULL);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));

    for (int round = 0; round < 2; round++) { /* running, then stopped */
        EXPECT_ERR(CS_ERR_STATE, cs_kafka_config(k, "session.timeout.ms", "9000"), "cs_kafka_config");
        EXPECT_ERR(CS_ERR_STATE, cs_kafka_producer_config(k, "linger.ms", "9"), "cs_kafka_producer_config");
        EXPECT_ERR(CS_ERR_STATE, cs_sub_config(s, "session.timeout.ms", "9000"), "cs_sub_config");
        /* A bad property on a started app is refused for the state, before it is looked at. */
        EXPECT_ERR(CS_ERR_STATE, cs_kafka_config(k, "no.such.property", "1"));
        EXPECT_ERR(CS_ERR_STATE, cs_kafka_default_group(k, "other-group"));
        EXPECT_ERR(CS_ERR_STATE, cs_kafka_topic(k, topic, 1));
        EXPECT_ERR(CS_ERR_STATE, cs_kafka_queue_timeout_ms(k, 100));
        EXPECT_ERR(CS_ERR_STATE, cs_sub_group(s, "other-group"));
        EXPECT_ERR(CS_ERR_STATE, cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
        EXPECT_ERR(CS_ERR_STATE, cs_sub_start_at(s, CS_START_LATEST));
        EXPECT_ERR(CS_ERR_STATE, cs_sub_workers(s, 4));
        EXPECT_ERR(CS_ERR_STATE, cs_sub_max_open(s, 10));
        EXPECT_ERR(CS_ERR_STATE, cs_sub_commit_interval_ms(s, 50));
        EXPECT_ERR(CS_ERR_STATE, cs_sub_drain_timeout_ms(s, 50));
        EXPECT_ERR(CS_ERR_STATE, cs_sub_handler_time_limit_ms(s, 50));
        EXPECT_ERR(CS_ERR_STATE, cs_sub_on_assign(s, NULL, NULL));
        EXPECT_ERR(CS_ERR_STATE, cs_sub_on_revoke(s, NULL, NULL));
        assert_null(cs_kafka_subscribe(k, topic, ack, NULL));
        assert_non_null(strstr(cs_errmsg(), "started"));
        EXPECT_ERR(CS_ERR_STATE, cs_app_on_startup(app, no_startup, NULL));
        EXPECT_ERR(CS_ERR_STATE, cs_app_on_shutdown(app, no_shutdown, NULL));
        cs_kafka *late = cs_test_kafka_new(cst_cluster);
        EXPECT_ERR(CS_ERR_STATE, cs_app_add_kafka(app, late));
        cs_kafka_destroy(late); /* refused, so still ours */
        EXPECT_ERR(CS_ERR_STATE, cs_app_start(app));
        if (round == 0) CST_OK(cs_app_stop(app));
    }
    cs_app_destroy(app);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unknown_property_is_refused_with_librdkafkas_reason),
        cmocka_unit_test(invalid_value_is_refused_naming_the_key),
        cmocka_unit_test(owned_properties_are_refused_saying_why),
        cmocka_unit_test(newer_property_is_unsupported_with_the_alternative),
        cmocka_unit_test(refused_settings_leave_nothing_behind),
        cmocka_unit_test(missing_group_fails_start_naming_the_topic),
        cmocka_unit_test(missing_topic_fails_start_naming_the_topic),
        cmocka_unit_test(missing_declared_topic_fails_start),
        cmocka_unit_test(configuring_after_start_is_refused),
        cmocka_unit_test(drain_longer_than_the_rebalance_timeout_fails_start),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
