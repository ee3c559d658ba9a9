/* bench/cs_latency.c — end-to-end latency of a consume-transform-produce
 * service, Tracked vs Transactional, on one cluster in one process:
 *
 *   cs_latency MODE BROKERS RATE SECONDS      MODE: tracked | txn | txn-barrier
 *
 * A producer writes RATE records/s for SECONDS to a fresh 6-partition input
 * topic; the service (4 workers) replies to each with the input's timestamp;
 * a read_committed consumer of the output topic measures, per output, now
 * minus the input's timestamp (wall clock, ms; the producer's linger.ms is
 * part of it and the same for every mode). Tracked publishes a reply as soon
 * as its handler acks; Transactional makes it visible when its window commits
 * (every 100 ms), so its latency is about half a window plus the commit.
 * The first second warms up every client and is not sampled. Prints one
 * JSON line: mode, outputs, samples, p50/p90/p99/max ms. BENCH_COMMIT_INTERVAL_MS
 * sets cs_sub_commit_interval_ms (Transactional: the window; default 100). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include <cstream.h>
#include <cstream/testing.h>

#include "bench_common.h"

enum { PARTS = 6, MAX_SAMPLES = 2000000 };

static int64_t wall_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static cs_outcome echo_timestamp(cs_delivery *d, void *user) {
    (void)user;
    char v[32];
    int n = snprintf(v, sizeof v, "%lld", (long long)cs_delivery_timestamp(d));
    return cs_delivery_reply(d, NULL, 0, v, (size_t)n) == CS_OK ? CS_ACK : CS_RETRY;
}

typedef struct measure {
    const char *brokers, *out;
    _Atomic bool stop;
    _Atomic bool ready;            /* the reader reached the end of every partition: it fetches live */
    _Atomic int64_t warm_until_ms; /* outputs of inputs stamped before this are not samples */
    _Atomic long outputs;
    int *samples;
    _Atomic long n;
} measure;

static void *read_outputs(void *arg) {
    measure *m = arg;
    char err[512], group[128];
    snprintf(group, sizeof group, "latency-%d", (int)getpid());
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", m->brokers, err, sizeof err);
    rd_kafka_conf_set(conf, "group.id", group, err, sizeof err);
    rd_kafka_conf_set(conf, "isolation.level", "read_committed", err, sizeof err);
    rd_kafka_conf_set(conf, "fetch.wait.max.ms", "5", err, sizeof err);
    rd_kafka_conf_set(conf, "enable.partition.eof", "true", err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(PARTS);
    for (int p = 0; p < PARTS; p++) rd_kafka_topic_partition_list_add(l, m->out, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    int eofs = 0;
    while (!atomic_load(&m->stop)) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(rk, 50);
        if (!msg) continue;
        if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF && ++eofs == PARTS) atomic_store(&m->ready, true);
        if (!msg->err) {
            char v[32];
            snprintf(v, sizeof v, "%.*s", (int)(msg->len < 31 ? msg->len : 31), (const char *)msg->payload);
            long long stamp = atoll(v);
            atomic_fetch_add(&m->outputs, 1);
            if (stamp >= atomic_load(&m->warm_until_ms)) {
                long i = atomic_fetch_add(&m->n, 1);
                if (i < MAX_SAMPLES) m->samples[i] = (int)(wall_ms() - stamp);
            }
        }
        rd_kafka_message_destroy(msg);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return NULL;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: cs_latency tracked|txn|txn-barrier BROKERS RATE SECONDS\n");
        return 2;
    }
    const char *mode = argv[1], *brokers = argv[2];
    int rate = atoi(argv[3]), seconds = atoi(argv[4]);
    bool txn = strncmp(mode, "txn", 3) == 0;
    if (!strcmp(mode, "txn-barrier")) setenv("CSTREAM_TXN_BARRIER", "1", 1);
    setenv("CSTREAM_BROKERS", brokers, 1);
    cs_log_set_level(CS_LOG_WARN);
    cs_test_cluster *cluster;
    char in[128], out[128];
    snprintf(in, sizeof in, "latency-%s-%d-in", mode, (int)getpid());
    snprintf(out, sizeof out, "latency-%s-%d-out", mode, (int)getpid());
    if (cs_test_cluster_new(&cluster) || cs_test_topic_create(cluster, in, PARTS) ||
        cs_test_topic_create(cluster, out, PARTS)) {
        fprintf(stderr, "topics: %s\n", cs_errmsg());
        return 2;
    }
    cs_app *app = cs_app_new("cs-latency", "0");
    cs_kafka *k = cs_kafka_new(brokers);
    cs_sub *s = cs_kafka_subscribe(k, in, echo_timestamp, NULL);
    if (cs_kafka_default_group(k, in) || cs_kafka_config(k, "fetch.wait.max.ms", "5") ||
        (txn && cs_kafka_instance_id(k, in)) ||
        cs_sub_commit_mode(s, txn ? CS_COMMIT_TRANSACTIONAL : CS_COMMIT_TRACKED) || cs_sub_workers(s, 4) ||
        cs_sub_reply(s, out, 5000) ||
        (getenv("BENCH_COMMIT_INTERVAL_MS") &&
         cs_sub_commit_interval_ms(s, atoi(getenv("BENCH_COMMIT_INTERVAL_MS")))) ||
        cs_app_add_kafka(app, k) || cs_app_start(app)) {
        fprintf(stderr, "service: %s\n", cs_errmsg());
        return 2;
    }
    if (cs_test_app_wait_idle(app, 60000)) { /* joined and assigned before the clock starts */
        fprintf(stderr, "service never got its partitions: %s\n", cs_errmsg());
        return 2;
    }
    measure m = {.brokers = brokers, .out = out, .samples = calloc(MAX_SAMPLES, sizeof(int))};
    pthread_t reader;
    pthread_create(&reader, NULL, read_outputs, &m);
    while (!atomic_load(&m.ready)) usleep(1000);
    /* The producer, paced: RATE records per second in 10 ms steps. */
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", brokers, err, sizeof err);
    rd_kafka_conf_set(conf, "linger.ms", "1", err, sizeof err);
    rd_kafka_t *producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    rd_kafka_topic_t *in_topic = rd_kafka_topic_new(producer, in, NULL);
    const struct rd_kafka_metadata *md = NULL; /* leaders known before the clock starts */
    if (rd_kafka_metadata(producer, 0, in_topic, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(in_topic);
    char buf[BENCH_VALUE_SIZE + 1];
    long total = (long)rate * seconds, sent = 0;
    double t0 = bench_now();
    atomic_store(&m.warm_until_ms, wall_ms() + 1000); /* the first second warms up every client */
    while (sent < total) {
        long due = (long)((bench_now() - t0) * rate);
        for (; sent < due && sent < total; sent++) {
            size_t len = bench_make_value(buf, (uint64_t)sent);
            while (rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(in), RD_KAFKA_V_VALUE(buf, len),
                                     RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                     RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                rd_kafka_poll(producer, 1);
        }
        rd_kafka_poll(producer, 0);
        usleep(10000);
    }
    rd_kafka_flush(producer, 30000);
    rd_kafka_destroy(producer);
    double sent_s = bench_now() - t0;
    for (int waited = 0; atomic_load(&m.outputs) < total && waited < 60000; waited += 10) usleep(10000);
    atomic_store(&m.stop, true);
    pthread_join(reader, NULL);
    cs_app_stop(app);
    cs_app_destroy(app);
    cs_test_cluster_destroy(cluster);
    long n = atomic_load(&m.n) < MAX_SAMPLES ? atomic_load(&m.n) : MAX_SAMPLES;
    qsort(m.samples, (size_t)n, sizeof(int), cmp_int);
    long outputs = atomic_load(&m.outputs);
    printf("{\"mode\":\"%s\",\"sent\":%ld,\"outputs\":%ld,\"samples\":%ld,\"rate\":%d,\"p50_ms\":%d,\"p90_ms\":%d,"
           "\"p99_ms\":%d,"
           "\"max_ms\":%d,\"seconds\":%.1f}\n",
           mode, total, outputs, n, rate, n ? m.samples[n / 2] : -1, n ? m.samples[n * 9 / 10] : -1,
           n ? m.samples[n * 99 / 100] : -1, n ? m.samples[n - 1] : -1, sent_s);
    free(m.samples);
    return outputs == total ? 0 : 3;
}
