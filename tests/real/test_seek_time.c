/* test_seek_time.c — cs_sub_seek_time on the real broker (librdkafka 2.0.2's
 * embedded cluster answers every timestamp lookup with "none"): records
 * written with explicit CreateTime values, handled once, then a replay from a
 * time re-handles exactly the records at and after it; a time after the last
 * record moves the partition to its end (nothing re-handled). */
#define _POSIX_C_SOURCE 200809L
#include <librdkafka/rdkafka.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cstest.h"

enum { N = 10, STEP_MS = 1000 };

typedef struct svc {
    cst_seen *seen;
    _Atomic int64_t bad_ts; /* a record whose timestamp was not the one written, else 0 */
    int64_t base;
} svc;

static cs_outcome handle(cs_delivery *d, void *user) {
    svc *v = user;
    int64_t off = cs_delivery_offset(d);
    if (cs_delivery_timestamp(d) != v->base + off * STEP_MS) atomic_store(&v->bad_ts, off + 1);
    cst_seen_add(v->seen, 0, off);
    return CS_ACK;
}

/* N records into partition 0, record i with CreateTime base + i s. */
static void produce_timed(const char *topic, int64_t base) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", cs_test_cluster_brokers(cst_cluster), err, sizeof err))
        fail_msg("%s", err);
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!p) fail_msg("producer: %s", err);
    for (int i = 0; i < N; i++) {
        rd_kafka_resp_err_t e =
            rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0), RD_KAFKA_V_VALUE("t", 1),
                              RD_KAFKA_V_TIMESTAMP(base + i * STEP_MS), RD_KAFKA_V_END);
        if (e) fail_msg("produce: %s", rd_kafka_err2str(e));
    }
    if (rd_kafka_flush(p, 30000)) fail_msg("flush timed out");
    rd_kafka_destroy(p);
}

typedef struct count_at {
    svc *v;
    int64_t offset;
    int times;
} count_at;

static bool seen_times(void *arg) {
    count_at *c = arg;
    return cst_seen_count(c->v->seen, 0, c->offset) >= c->times;
}

static void replay_from_a_time(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("seek-time", 1, topic, group, sizeof topic);
    svc v = {.seen = cst_seen_new(1, 100)};
    /* An hour ago, on whole seconds: well inside the broker's retention. */
    v.base = ((int64_t)time(NULL) - 3600) * 1000;
    produce_timed(topic, v.base);

    cs_app *app = cs_app_new("seek-time", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, handle, &v);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    count_at last = {&v, N - 1, 1};
    assert_true(cst_wait(seen_times, &last, 60000));
    CST_OK(cs_test_app_wait_idle(app, 30000));

    /* A time between two records (3.5 s after the first) starts at the next one, 4. */
    CST_OK(cs_sub_seek_time(s, topic, -1, v.base + 3 * STEP_MS + STEP_MS / 2));
    last.times = 2;
    assert_true(cst_wait(seen_times, &last, 60000));
    CST_OK(cs_test_app_wait_idle(app, 30000));
    for (int64_t o = 0; o < N; o++)
        if (cst_seen_count(v.seen, 0, o) != (o < 4 ? 1 : 2))
            fail_msg("offset %lld handled %d times, want %d", (long long)o, cst_seen_count(v.seen, 0, o),
                     o < 4 ? 1 : 2);
    assert_int_equal(atomic_load(&v.bad_ts), 0);

    /* After the last record: the end of the log, nothing handled again. */
    CST_OK(cs_sub_seek_time(s, topic, 0, v.base + N * STEP_MS + 60000));
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "after", 5, NULL));
    count_at next = {&v, N, 1};
    assert_true(cst_wait(seen_times, &next, 60000));
    assert_int_equal(cst_seen_total(v.seen), 4 + 2 * (N - 4) + 1);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_int_equal(st.seeks, 2);
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, N + 1, 30000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(v.seen);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(replay_from_a_time),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
