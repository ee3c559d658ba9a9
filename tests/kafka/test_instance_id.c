/* test_instance_id.c — what an instance id does to a subscription's consumer,
 * on both clusters (the real broker's side of static membership is in
 * tests/real/test_static_membership.c).
 *
 * - group.instance.id is cstream's: cs_kafka_config and cs_sub_config refuse
 *   it, naming the instance id as the way to set it.
 * - On a real broker the consumer joins as the static member
 *   "<app>.<group>.<topic>.<instance id>", characters outside Kafka's rule
 *   for the id ([A-Za-z0-9._-]) turned into '_' (the subscribed line says
 *   which). On the embedded cluster (the
 *   mock has no static membership, and a static member would skip LeaveGroup
 *   at its stop for nothing) the consumer stays dynamic and the start says so;
 *   records are handled either way. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstest.h"

static cs_outcome note(cs_delivery *d, void *user) {
    cst_seen_add(user, cs_delivery_partition(d), cs_delivery_offset(d));
    return CS_ACK;
}

static void group_instance_id_is_owned(void **state) {
    (void)state;
    cs_kafka *k = cs_kafka_new("127.0.0.1:1");
    cs_sub *s = cs_kafka_subscribe(k, "t", note, NULL);
    assert_non_null(s);
    assert_int_equal(cs_kafka_config(k, "group.instance.id", "mine"), CS_ERR_CONFIG);
    assert_non_null(strstr(cs_errmsg(), "instance id"));
    assert_int_equal(cs_sub_config(s, "group.instance.id", "mine"), CS_ERR_CONFIG);
    assert_non_null(strstr(cs_errmsg(), "cs_kafka_instance_id"));
    cs_kafka_destroy(k);
}

typedef struct want {
    cst_seen *seen;
    size_t n;
} want;

static bool all_seen(void *arg) {
    want *w = arg;
    return cst_seen_distinct(w->seen) >= w->n;
}

static void consumer_gets_its_group_instance_id(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("instance-id", 2, topic, group, sizeof topic);
    CST_OK(cs_test_produce_many(cst_cluster, topic, "r-", 50));
    want w = {cst_seen_new(2, 50), 50};
    cs_app *app = cs_app_new("inst-app", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_instance_id(k, "pod/7:a")); /* '/' and ':' are outside Kafka's rule for a group.instance.id */
    cs_sub *s = cs_kafka_subscribe(k, topic, note, w.seen);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_app_add_kafka(app, k));
    cs_log_set_level(CS_LOG_INFO);
    cst_capture cap;
    cst_capture_start(&cap);
    cs_err err = cs_app_start(app);
    bool seen = !err && cst_wait(all_seen, &w, 60000);
    cs_err stopped = cs_app_stop(app);
    char *log = cst_capture_stop(&cap);
    fputs(log, stderr);
    CST_OK(err);
    if (!seen) fail_msg("only %zu of 50 records handled within 60 s", cst_seen_distinct(w.seen));
    CST_OK(stopped);
    char expected[512];
    if (cs_test_cluster_is_embedded(cst_cluster)) {
        assert_non_null(strstr(log, "no static membership on the embedded cluster"));
        assert_non_null(strstr(log, "group.instance.id=-"));
    } else {
        snprintf(expected, sizeof expected, "group.instance.id=inst-app.%s.%s.pod_7_a", group, topic);
        if (!strstr(log, expected)) fail_msg("no \"%s\" in the log", expected);
    }
    free(log);
    cs_app_destroy(app);
    cst_seen_free(w.seen);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(group_instance_id_is_owned),
        cmocka_unit_test(consumer_gets_its_group_instance_id),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
