/* bench/probes/take_cost.c — what taking records out of librdkafka 2.0.2 costs, per record, in the
 * three ways docs/fetch-path-design.md weighs (part 2, "Take cost"). Mock cluster, seconds:
 *
 *   cc -O2 -g -o /tmp/take_cost bench/probes/take_cost.c -lrdkafka
 *   /tmp/take_cost batch|poll|callback          # wall time per record (noisy on a shared machine)
 *   valgrind --tool=callgrind --toggle-collect='take_*' /tmp/take_cost MODE   # instructions, take loop only
 *
 * 6 partitions x 8,000 records of 512 B are queued in one app queue every partition is forwarded
 * to (nothing is taken until all 48,000 are there), then taken once:
 *   batch     rd_kafka_consume_batch_queue(q, 0, 1000 per call), then rd_kafka_message_destroy each
 *   poll      rd_kafka_consume_queue(q, 0) per record, then rd_kafka_message_destroy
 *   callback  rd_kafka_consume_callback_queue(q, 0, cb): cb copies key and value into a 64 KiB
 *             chunk (a new chunk from a free list when full), as the design's store does
 * The records are not decoded: this is the take alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define PARTS 6
#define PER_PART 8000
#define TOTAL (PARTS * PER_PART)

static void die(const char *what) {
    fprintf(stderr, "take_cost: %s\n", what);
    exit(1);
}

static void set(rd_kafka_conf_t *conf, const char *k, const char *v) {
    char err[256];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) die(err);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long sink; /* keeps the loops from being optimised away */

__attribute__((noinline)) static long take_batch(rd_kafka_queue_t *q) {
    static rd_kafka_message_t *b[1000];
    long n = 0;
    ssize_t got;
    while ((got = rd_kafka_consume_batch_queue(q, 0, b, 1000)) > 0)
        for (ssize_t i = 0; i < got; i++) {
            sink += b[i]->offset + (long)b[i]->len;
            rd_kafka_message_destroy(b[i]);
            n++;
        }
    return n;
}

__attribute__((noinline)) static long take_poll(rd_kafka_queue_t *q) {
    long n = 0;
    rd_kafka_message_t *m;
    while ((m = rd_kafka_consume_queue(q, 0))) {
        sink += m->offset + (long)m->len;
        rd_kafka_message_destroy(m);
        n++;
    }
    return n;
}

/* The design's store in miniature: records appended to 64 KiB chunks, recycled through a free list. */
typedef struct chunk {
    struct chunk *next;
    size_t used;
    unsigned char data[65536];
} chunk;
static chunk *open_chunk, *free_chunks;
static long copied;

static unsigned char *store_reserve(size_t n) {
    if (!open_chunk || open_chunk->used + n > sizeof open_chunk->data) {
        if (open_chunk) { /* "settled" at once: back to the free list */
            open_chunk->next = free_chunks;
            free_chunks = open_chunk;
        }
        chunk *c = free_chunks;
        if (c) free_chunks = c->next;
        else if (!(c = malloc(sizeof *c))) die("malloc");
        c->used = 0;
        open_chunk = c;
    }
    unsigned char *p = open_chunk->data + open_chunk->used;
    open_chunk->used += (n + 7) & ~(size_t)7;
    return p;
}

static void on_record(rd_kafka_message_t *m, void *opaque) {
    (void)opaque;
    if (m->err) return;
    size_t n = 32 + m->key_len + m->len;
    unsigned char *p = store_reserve(n);
    memcpy(p, &m->offset, sizeof m->offset);
    if (m->key_len) memcpy(p + 32, m->key, m->key_len);
    memcpy(p + 32 + m->key_len, m->payload, m->len);
    copied++;
}

__attribute__((noinline)) static long take_callback(rd_kafka_queue_t *q) {
    while (rd_kafka_consume_callback_queue(q, 0, on_record, NULL) > 0) {}
    return copied;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "batch";
    char err[256];
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_new(), err, sizeof err);
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(host, 1);
    if (!mc) die("mock");
    const char *bs = rd_kafka_mock_cluster_bootstraps(mc);
    if (rd_kafka_mock_topic_create(mc, "take", PARTS, 1)) die("topic");
    rd_kafka_conf_t *pc = rd_kafka_conf_new();
    set(pc, "bootstrap.servers", bs);
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, pc, err, sizeof err);
    if (!p) die(err);
    char v[512];
    memset(v, 'x', sizeof v);
    for (int i = 0; i < PER_PART; i++)
        for (int q = 0; q < PARTS; q++)
            while (rd_kafka_producev(p, RD_KAFKA_V_TOPIC("take"), RD_KAFKA_V_PARTITION(q),
                                     RD_KAFKA_V_VALUE(v, sizeof v), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                     RD_KAFKA_V_END))
                rd_kafka_poll(p, 10);
    if (rd_kafka_flush(p, 30000)) die("flush");
    rd_kafka_destroy(p);

    rd_kafka_conf_t *cc = rd_kafka_conf_new();
    set(cc, "bootstrap.servers", bs);
    set(cc, "group.id", "take");
    set(cc, "enable.auto.commit", "false");
    rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, cc, err, sizeof err);
    if (!c) die(err);
    rd_kafka_queue_t *app = rd_kafka_queue_new(c);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(PARTS);
    for (int q = 0; q < PARTS; q++) {
        rd_kafka_topic_partition_list_add(l, "take", q)->offset = 0;
        rd_kafka_queue_t *pq = rd_kafka_queue_get_partition(c, "take", q);
        rd_kafka_queue_forward(pq, app);
        rd_kafka_queue_destroy(pq);
    }
    if (rd_kafka_assign(c, l)) die("assign");
    rd_kafka_topic_partition_list_destroy(l);
    double deadline = now_s() + 60;
    while (rd_kafka_queue_length(app) < TOTAL) {
        rd_kafka_poll(c, 10);
        if (now_s() > deadline) die("records not all queued within 60 s");
    }
    double t0 = now_s();
    long n = !strcmp(mode, "poll") ? take_poll(app) : !strcmp(mode, "callback") ? take_callback(app) : take_batch(app);
    double dt = now_s() - t0;
    printf("take %-8s records=%ld  %.0f ns/record\n", mode, n, dt * 1e9 / (n ? n : 1));
    rd_kafka_assign(c, NULL);
    rd_kafka_queue_destroy(app);
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(host);
    return sink == 42; /* never */
}
