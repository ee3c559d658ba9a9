/* bench/probes/fetch_wake.c — librdkafka 2.0.2 facts behind docs/fetch-path-design.md, on the
 * mock cluster (no broker needed, runs in a few seconds):
 *
 *   cc -O1 -o /tmp/fetch_wake bench/probes/fetch_wake.c -lrdkafka && /tmp/fetch_wake
 *
 * bound:  4 partitions, queued.min.messages=1000, nothing consumed for 1.5 s. Records queued in
 *         librdkafka: (a) every partition queue forwarded to ONE app queue, (b) every partition
 *         queue on its own (forwarded to NULL, as src/kafka/consumer/consumer.c does today).
 * stall:  1 partition, its queue forwarded to one app queue, queued.min.messages=1000. Cycles of:
 *         wait until the queue is at the bound (the broker thread stops fetching), drain it to
 *         empty with rd_kafka_consume_callback_queue, then measure the time to the next record;
 *         the wake-up tried right after the drain is one of: none; rd_kafka_poll of the consumer
 *         queue; rd_kafka_seek (async, timeout 0) of the partition to the offset after the last
 *         record taken. Every record's offset is checked for continuity (no gap, no repeat).
 * Prints one line per case. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "fetch_wake: %s\n", what);
    exit(1);
}

static void set(rd_kafka_conf_t *conf, const char *k, const char *v) {
    char err[256];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) die(err);
}

static void produce(const char *bootstraps, const char *topic, int parts, int per_part, size_t size) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", bootstraps);
    set(conf, "linger.ms", "5");
    /* The mock cluster answers a Fetch with one produced message set per partition, whatever its
     * size: small sets make small fetches, so the overshoot past the bound stays small. */
    set(conf, "batch.num.messages", "50");
    char err[256];
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!p) die(err);
    char *buf = malloc(size);
    memset(buf, 'x', size);
    for (int i = 0; i < per_part; i++)
        for (int q = 0; q < parts; q++)
            while (rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(q), RD_KAFKA_V_VALUE(buf, size),
                                     RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END))
                rd_kafka_poll(p, 10);
    if (rd_kafka_flush(p, 30000)) die("flush");
    free(buf);
    rd_kafka_destroy(p);
}

static rd_kafka_t *consumer(const char *bootstraps, const char *min_msgs) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", bootstraps);
    set(conf, "group.id", "probe");
    set(conf, "enable.auto.commit", "false");
    set(conf, "queued.min.messages", min_msgs);
    char err[256];
    rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!c) die(err);
    rd_kafka_poll_set_consumer(c);
    return c;
}

/* Assigns partitions 0..parts-1 from offset 0; each partition queue forwarded to `to` (NULL: own queue). */
static void assign(rd_kafka_t *c, const char *topic, int parts, rd_kafka_queue_t *to) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(parts);
    for (int q = 0; q < parts; q++) {
        rd_kafka_topic_partition_list_add(l, topic, q)->offset = 0;
        rd_kafka_queue_t *pq = rd_kafka_queue_get_partition(c, topic, q);
        rd_kafka_queue_forward(pq, to);
        rd_kafka_queue_destroy(pq);
    }
    if (rd_kafka_assign(c, l)) die("assign");
    rd_kafka_topic_partition_list_destroy(l);
}

static void bound_case(const char *bootstraps, const char *topic, int parts, int shared) {
    rd_kafka_t *c = consumer(bootstraps, "1000");
    rd_kafka_queue_t *app = shared ? rd_kafka_queue_new(c) : NULL;
    assign(c, topic, parts, app);
    double until = now_s() + 1.5;
    while (now_s() < until) rd_kafka_poll(c, 50); /* events only; records stay queued */
    size_t total = 0;
    if (shared) total = rd_kafka_queue_length(app);
    for (int q = 0; !shared && q < parts; q++) {
        rd_kafka_queue_t *pq = rd_kafka_queue_get_partition(c, topic, q);
        total += rd_kafka_queue_length(pq);
        rd_kafka_queue_destroy(pq);
    }
    printf("bound %-26s partitions=%d queued.min.messages=1000 queued_after_1.5s=%zu\n",
           shared ? "one shared app queue:" : "per-partition queues:", parts, total);
    rd_kafka_assign(c, NULL);
    if (app) rd_kafka_queue_destroy(app);
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
}

struct take {
    int64_t next; /* offset expected next */
    long taken, gaps, repeats;
};

static void on_record(rd_kafka_message_t *m, void *opaque) {
    struct take *t = opaque;
    if (m->err) return;
    if (m->offset > t->next) t->gaps++;
    if (m->offset < t->next) t->repeats++;
    if (m->offset >= t->next) t->next = m->offset + 1;
    t->taken++;
}

enum wake { WAKE_NONE, WAKE_POLL, WAKE_SEEK };

static void stall_case(const char *bootstraps, const char *topic, enum wake how, int cycles) {
    static const char *names[] = {"none", "rd_kafka_poll(consumer queue)", "rd_kafka_seek(position, async)"};
    rd_kafka_t *c = consumer(bootstraps, "1000");
    rd_kafka_queue_t *app = rd_kafka_queue_new(c);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(c, topic, NULL);
    assign(c, topic, 1, app);
    struct take t = {0};
    double worst = 0, sum = 0;
    for (int i = 0; i < cycles; i++) {
        double deadline = now_s() + 10;
        while (rd_kafka_queue_length(app) < 1000) {
            rd_kafka_poll(c, 10);
            if (now_s() > deadline) die("queue never reached the bound");
        }
        rd_kafka_poll(c, 50); /* the fetch in flight lands; the broker thread finds the toppar not fetchable */
        while (rd_kafka_queue_length(app) > 0) rd_kafka_consume_callback_queue(app, 0, on_record, &t);
        double drained = now_s();
        if (how == WAKE_POLL) rd_kafka_poll(c, 0);
        if (how == WAKE_SEEK && rd_kafka_seek(rkt, 0, t.next, 0)) die("seek");
        long before = t.taken;
        while (t.taken == before) {
            rd_kafka_consume_callback_queue(app, 1, on_record, &t);
            if (now_s() - drained > 5) die("no record within 5 s");
        }
        double gap = now_s() - drained;
        sum += gap;
        if (gap > worst) worst = gap;
    }
    printf("stall wake=%-31s cycles=%d drained->next record: mean=%.3f s worst=%.3f s  taken=%ld gaps=%ld "
           "repeats=%ld\n",
           names[how], cycles, sum / cycles, worst, t.taken, t.gaps, t.repeats);
    rd_kafka_assign(c, NULL);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_queue_destroy(app);
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
}

/* yield: rd_kafka_yield from the consume callback every 97 records (cstream's budget full) must
 * put the ops not yet served back at the head of the queue, in order. */
struct yielding {
    rd_kafka_t *rk;
    struct take t;
};

static void on_record_yield(rd_kafka_message_t *m, void *opaque) {
    struct yielding *y = opaque;
    on_record(m, &y->t);
    if (y->t.taken % 97 == 0) rd_kafka_yield(y->rk);
}

static void yield_case(const char *bootstraps, const char *topic, long want) {
    rd_kafka_t *c = consumer(bootstraps, "1000");
    rd_kafka_queue_t *app = rd_kafka_queue_new(c);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(c, topic, NULL);
    assign(c, topic, 1, app);
    struct yielding y = {.rk = c};
    long calls = 0;
    double deadline = now_s() + 20;
    while (y.t.taken < want && now_s() < deadline) {
        long before = y.t.taken;
        rd_kafka_consume_callback_queue(app, 10, on_record_yield, &y);
        calls++;
        /* the bound is reached while taking slowly: wake the fetcher as the design does */
        if (y.t.taken > before && rd_kafka_queue_length(app) == 0) rd_kafka_seek(rkt, 0, y.t.next, 0);
    }
    printf("yield  rd_kafka_yield every 97 records: taken=%ld calls=%ld gaps=%ld repeats=%ld\n", y.t.taken, calls,
           y.t.gaps, y.t.repeats);
    rd_kafka_assign(c, NULL);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_queue_destroy(app);
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
}

/* pause: 2 partitions into one app queue; partition 0 is paused (the last resort for a stuck
 * partition) after 300 of its records were taken, partition 1 keeps flowing; after 0.5 s
 * partition 0 is resumed and sought to the offset after its last record taken. Its records must
 * continue there: no gap, no repeat. */
static void pause_case(const char *bootstraps, const char *topic) {
    rd_kafka_t *c = consumer(bootstraps, "1000");
    rd_kafka_queue_t *app = rd_kafka_queue_new(c);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(c, topic, NULL);
    assign(c, topic, 2, app);
    struct take t[2] = {{0}};
    rd_kafka_topic_partition_list_t *p0 = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(p0, topic, 0);
    int state = 0; /* 0 flowing, 1 paused, 2 resumed */
    double paused_at = 0, deadline = now_s() + 20;
    long p1_while_paused = 0, p0_while_paused = 0;
    while ((t[0].taken < 1500 || t[1].taken < 1500) && now_s() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consume_queue(app, 10);
        if (!m) {
            rd_kafka_poll(c, 0);
        } else {
            if (!m->err) {
                on_record(m, &t[m->partition]);
                if (state == 1) *(m->partition ? &p1_while_paused : &p0_while_paused) += 1;
            }
            rd_kafka_message_destroy(m);
        }
        if (state == 0 && t[0].taken >= 300) {
            rd_kafka_pause_partitions(c, p0);
            state = 1;
            paused_at = now_s();
        } else if (state == 1 && now_s() - paused_at > 0.5) {
            rd_kafka_resume_partitions(c, p0);
            if (rd_kafka_seek(rkt, 0, t[0].next, 0)) die("seek");
            state = 2;
        }
    }
    printf("pause  partition 0 paused at 300 records for 0.5 s: p0 taken=%ld gaps=%ld repeats=%ld (taken while "
           "paused: %ld)  p1 taken=%ld gaps=%ld repeats=%ld (taken while p0 paused: %ld)\n",
           t[0].taken, t[0].gaps, t[0].repeats, p0_while_paused, t[1].taken, t[1].gaps, t[1].repeats, p1_while_paused);
    rd_kafka_topic_partition_list_destroy(p0);
    rd_kafka_assign(c, NULL);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_queue_destroy(app);
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
}

int main(void) {
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!host) die(err);
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(host, 1);
    if (!mc) die("mock cluster");
    const char *bs = rd_kafka_mock_cluster_bootstraps(mc);
    if (rd_kafka_mock_topic_create(mc, "bound", 4, 1) || rd_kafka_mock_topic_create(mc, "stall", 1, 1) ||
        rd_kafka_mock_topic_create(mc, "pause", 2, 1))
        die("mock topic");
    produce(bs, "bound", 4, 1500, 1000);
    produce(bs, "stall", 1, 4500, 1000);
    produce(bs, "pause", 2, 1500, 1000);
    bound_case(bs, "bound", 4, 1);
    bound_case(bs, "bound", 4, 0);
    stall_case(bs, "stall", WAKE_NONE, 3);
    stall_case(bs, "stall", WAKE_POLL, 3);
    stall_case(bs, "stall", WAKE_SEEK, 3);
    yield_case(bs, "stall", 4500);
    pause_case(bs, "pause");
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(host);
    return 0;
}
