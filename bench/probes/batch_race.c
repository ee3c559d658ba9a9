/* bench/probes/batch_race.c — does rd_kafka_consume_batch_queue lose records on librdkafka 2.0.2
 * when only librdkafka itself pauses partitions (the LIB_PAUSE at the start of every rebalance,
 * rdkafka_cgrp.c:rd_kafka_assignment_pause), with no seek or pause from the application?
 * docs/fetch-path-design.md, 1c. Mock cluster, a few seconds:
 *
 *   cc -O1 -o /tmp/batch_race bench/probes/batch_race.c -lrdkafka -lpthread && /tmp/batch_race [batch|batch-app|callback] [seconds]
 *
 * A producer adds a record every 0.5 ms. Member A (cooperative-sticky, records in the consumer
 * queue as librdkafka's default) is caught up and takes records with
 * rd_kafka_consume_batch_queue(consumer queue, 500 ms, 500 per call). With `batch-app`: events
 * through rd_kafka_consumer_poll (rebalance callbacks there, between batch calls) and records by
 * rd_kafka_consume_batch_queue from an app queue every partition is forwarded to; with `callback`:
 * the same but records by rd_kafka_consume_callback_queue. Meanwhile member B joins and leaves
 * again and again. The application itself never seeks or pauses.
 * Every rebalance pauses A's partitions from librdkafka's main thread. A checks each record's
 * offset against the partition's previous one while the partition stays assigned: a jump forward
 * is a lost record (the topic has no gaps). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define PARTS 4

static const char *bootstraps;
static atomic_bool stop_b;
static int64_t next_off[PARTS];
static long taken, gaps, repeats, lost_records, rebalances;
static bool callback_mode, batch_app_mode;
static rd_kafka_queue_t *app_q;

static void die(const char *what) {
    fprintf(stderr, "batch_race: %s\n", what);
    exit(1);
}

static void set(rd_kafka_conf_t *conf, const char *k, const char *v) {
    char err[256];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) die(err);
}

static void rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *l, void *op) {
    (void)op;
    rebalances++;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        for (int i = 0; i < l->cnt; i++) {
            if (app_q) {
                rd_kafka_queue_t *pq = rd_kafka_queue_get_partition(rk, l->elems[i].topic, l->elems[i].partition);
                rd_kafka_queue_forward(pq, app_q);
                rd_kafka_queue_destroy(pq);
            }
            next_off[l->elems[i].partition] = -1; /* (re)assigned: restart the check */
        }
        rd_kafka_error_t *e = rd_kafka_incremental_assign(rk, l);
        if (e) rd_kafka_error_destroy(e);
    } else {
        for (int i = 0; i < l->cnt; i++) next_off[l->elems[i].partition] = -1;
        rd_kafka_error_t *e = rd_kafka_incremental_unassign(rk, l);
        if (e) rd_kafka_error_destroy(e);
    }
}

static rd_kafka_t *member(const char *group, bool with_cb) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", bootstraps);
    set(conf, "group.id", group);
    set(conf, "partition.assignment.strategy", "cooperative-sticky");
    set(conf, "enable.auto.commit", "false");
    set(conf, "auto.offset.reset", "earliest");
    set(conf, "session.timeout.ms", "6000");
    set(conf, "heartbeat.interval.ms", "100");
    if (with_cb) rd_kafka_conf_set_rebalance_cb(conf, rebalance);
    char err[256];
    rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!c) die(err);
    rd_kafka_poll_set_consumer(c);
    rd_kafka_topic_partition_list_t *t = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(t, "race", RD_KAFKA_PARTITION_UA);
    if (rd_kafka_subscribe(c, t)) die("subscribe");
    rd_kafka_topic_partition_list_destroy(t);
    return c;
}

/* Records keep arriving during the run, one every 0.5 ms round-robin: A is caught up and waits
 * inside its batch call with some records collected, the state every rebalance finds it in. */
static void *trickle(void *arg) {
    rd_kafka_t *p = arg;
    char v[100];
    memset(v, 'y', sizeof v);
    for (long i = 0; !atomic_load(&stop_b); i++) {
        rd_kafka_producev(p, RD_KAFKA_V_TOPIC("race"), RD_KAFKA_V_PARTITION((int32_t)(i % PARTS)),
                          RD_KAFKA_V_VALUE(v, sizeof v), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        rd_kafka_poll(p, 0);
        usleep(500);
    }
    rd_kafka_flush(p, 10000);
    return NULL;
}

static void *member_b(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_b)) {
        rd_kafka_t *b = member("race", false);
        /* B stays until it has had an assignment for a while: destroying a cooperative-sticky member
         * before its first assignment trips an assertion in librdkafka 2.0.2
         * (rd_kafka_sticky_assignor_state_destroy, confluentinc/librdkafka#4312, fixed in 2.3.0). */
        int assigned_polls = 0;
        for (int i = 0; i < 200 && assigned_polls < 20; i++) {
            rd_kafka_message_t *m = rd_kafka_consumer_poll(b, 100);
            if (m) rd_kafka_message_destroy(m); /* B's own records are not checked */
            rd_kafka_topic_partition_list_t *l = NULL;
            if (!rd_kafka_assignment(b, &l)) {
                if (l->cnt > 0) assigned_polls++;
                rd_kafka_topic_partition_list_destroy(l);
            }
        }
        rd_kafka_consumer_close(b);
        rd_kafka_destroy(b);
    }
    return NULL;
}

static void check(const rd_kafka_message_t *m) {
    if (m->err || m->partition < 0 || m->partition >= PARTS) return;
    int64_t *n = &next_off[m->partition];
    if (*n >= 0 && m->offset > *n) {
        gaps++;
        lost_records += m->offset - *n;
    }
    if (*n >= 0 && m->offset < *n) repeats++;
    if (m->offset + 1 > *n) *n = m->offset + 1;
    taken++;
}

static void on_record(rd_kafka_message_t *m, void *op) {
    (void)op;
    check(m);
}

int main(int argc, char **argv) {
    callback_mode = argc > 1 && !strcmp(argv[1], "callback");
    batch_app_mode = argc > 1 && !strcmp(argv[1], "batch-app");
    char err[256];
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_new(), err, sizeof err);
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(host, 1);
    if (!mc) die("mock");
    bootstraps = rd_kafka_mock_cluster_bootstraps(mc);
    if (rd_kafka_mock_topic_create(mc, "race", PARTS, 1)) die("topic");
    rd_kafka_conf_t *pc = rd_kafka_conf_new();
    set(pc, "bootstrap.servers", bootstraps);
    set(pc, "linger.ms", "1");
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, pc, err, sizeof err);
    if (!p) die(err);

    rd_kafka_t *a = member("race", true);
    if (callback_mode || batch_app_mode) app_q = rd_kafka_queue_new(a);
    rd_kafka_queue_t *cq = rd_kafka_queue_get_consumer(a);
    for (int q = 0; q < PARTS; q++) next_off[q] = -1;
    pthread_t tb, tp;
    pthread_create(&tp, NULL, trickle, p);
    pthread_create(&tb, NULL, member_b, NULL);
    rd_kafka_message_t *batch[500];
    time_t end = time(NULL) + (argc > 2 ? atoi(argv[2]) : 20);
    while (time(NULL) < end) {
        if (callback_mode) {
            rd_kafka_message_t *e = rd_kafka_consumer_poll(a, 0); /* events: rebalance callbacks here */
            if (e) rd_kafka_message_destroy(e);
            rd_kafka_consume_callback_queue(app_q, 100, on_record, NULL);
        } else if (batch_app_mode) {
            rd_kafka_message_t *e = rd_kafka_consumer_poll(a, 0); /* events: rebalance callbacks here */
            if (e) rd_kafka_message_destroy(e);
            ssize_t n = rd_kafka_consume_batch_queue(app_q, 100, batch, 500);
            for (ssize_t i = 0; i < n; i++) {
                check(batch[i]);
                rd_kafka_message_destroy(batch[i]);
            }
        } else {
            ssize_t n = rd_kafka_consume_batch_queue(cq, 500, batch, 500);
            for (ssize_t i = 0; i < n; i++) {
                check(batch[i]);
                rd_kafka_message_destroy(batch[i]);
            }
        }
    }
    atomic_store(&stop_b, true);
    pthread_join(tb, NULL);
    pthread_join(tp, NULL);
    rd_kafka_destroy(p);
    printf("%s: rebalance callbacks=%ld taken=%ld gaps=%ld lost_records=%ld repeats=%ld\n",
           callback_mode    ? "callback  (events by consumer_poll, records by consume_callback_queue on an app queue)"
           : batch_app_mode ? "batch-app (events by consumer_poll, records by consume_batch_queue on an app queue)"
                            : "batch     (rd_kafka_consume_batch_queue on the consumer queue)",
           rebalances, taken, gaps, lost_records, repeats);
    rd_kafka_queue_destroy(cq);
    rd_kafka_consumer_close(a);
    if (app_q) rd_kafka_queue_destroy(app_q);
    rd_kafka_destroy(a);
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(host);
    return 0;
}
