/* soak_driver.c — `make soak`: millions of records through a Tracked cstream
 * service (soak_service, a child process) on the real broker, with 1% retries
 * and a broker restart in the middle, while the service's resident memory is
 * sampled. It passes when every record was acked (0 lost), the committed
 * positions reach the end of every partition, the service stops cleanly, and
 * its anonymous memory did not grow between the first and the last part of
 * the run (see rss_verdict).
 *
 * The driver produces the records itself (idempotent, acks=all) and keeps at
 * most SOAK_AHEAD records ahead of the service, so the restart hits producer
 * and consumer at the same time.
 *
 * Environment: CSTREAM_BROKERS (required; tests/with-real-broker sets it),
 *   SOAK_RECORDS (10000000), SOAK_PARTITIONS (6), SOAK_WORKERS (4),
 *   SOAK_AHEAD (500000), SOAK_OUT (directory for soak.csv, soak.json and
 *   service.log; default build/soak).
 * usage: soak_driver SOAK_SERVICE */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstream.h>
#include <cstream/testing.h>
#include <librdkafka/rdkafka.h>

#include "soak_shared.h"

#define VALUE_BYTES 100
#define SAMPLE_MS 500
#define STUCK_SECONDS 180 /* no new record acked for this long: the soak failed */
#define STUCK_SECONDS_TEXT "180"

typedef struct sample {
    double t;
    long vm_rss_kb, rss_anon_kb, heap_kb;
    uint64_t distinct;
} sample;

static struct {
    const char *brokers, *service, *out;
    char topic[96], group[128];
    uint64_t records, ahead;
    int partitions, workers;
    soak_shared *shared;
    pid_t child;
    /* producer thread */
    atomic_uint_fast64_t produced, delivered, delivery_failed;
    atomic_bool producer_done;
    char producer_error[600];
    /* broker restart thread */
    atomic_int restart_state; /* 0 not yet, 1 running, 2 done, 3 failed */
    double restart_begin, restart_end;
    struct timespec start;
} soak;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)(ts.tv_sec - soak.start.tv_sec) + (double)(ts.tv_nsec - soak.start.tv_nsec) / 1e9;
}

static uint64_t env_u64(const char *name, uint64_t fallback) {
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    char *end = NULL;
    unsigned long long n = strtoull(v, &end, 10);
    if (*end || n == 0) {
        fprintf(stderr, "soak: %s=%s is not a positive number; using %" PRIu64 "\n", name, v, fallback);
        return fallback;
    }
    return n;
}

static rd_kafka_t *new_client(rd_kafka_type_t type, const char *const *props) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", soak.brokers, err, sizeof err) != RD_KAFKA_CONF_OK) goto bad;
    for (; props && props[0]; props += 2)
        if (rd_kafka_conf_set(conf, props[0], props[1], err, sizeof err) != RD_KAFKA_CONF_OK) goto bad;
    rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof err);
    if (rk) return rk;
    fprintf(stderr, "soak: rd_kafka_new: %s\n", err);
    return NULL;
bad:
    fprintf(stderr, "soak: client config: %s\n", err);
    rd_kafka_conf_destroy(conf);
    return NULL;
}

/* The soak's topic, made with cstream's test API (the Admin API on the real broker). */
static bool create_topic(void) {
    cs_test_cluster *cluster = NULL;
    cs_err err = cs_test_cluster_new(&cluster);
    if (!err) err = cs_test_topic_create(cluster, soak.topic, soak.partitions);
    if (err) fprintf(stderr, "soak: creating topic %s: %s\n", soak.topic, cs_errmsg());
    cs_test_cluster_destroy(cluster);
    return !err;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    if (m->err) {
        if (atomic_fetch_add(&soak.delivery_failed, 1) == 0)
            snprintf(soak.producer_error, sizeof soak.producer_error, "delivery failed: %s", rd_kafka_err2str(m->err));
    } else {
        atomic_fetch_add(&soak.delivered, 1);
    }
}

/* Produces ids 0..records-1, never more than `ahead` past what the service
 * acked, and waits for every delivery report. */
static void *produce_all(void *arg) {
    (void)arg;
    /* Quiet: the broker restart makes every client log its disconnects; what
     * matters (a failed delivery) is counted from the delivery reports. */
    static const char *const props[] = {"enable.idempotence", "true",   "acks",      "all", "linger.ms", "10",
                                        "message.timeout.ms", "600000", "log_level", "0",   NULL};
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", soak.brokers, err, sizeof err);
    for (const char *const *p = props; p[0]; p += 2) rd_kafka_conf_set(conf, p[0], p[1], err, sizeof err);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        snprintf(soak.producer_error, sizeof soak.producer_error, "producer: %s", err);
        atomic_store(&soak.producer_done, true);
        return NULL;
    }
    char value[VALUE_BYTES], key[24];
    memset(value, 'x', sizeof value);
    for (uint64_t id = 0; id < soak.records; id++) {
        while (id > atomic_load(&soak.shared->distinct) + soak.ahead) rd_kafka_poll(rk, 20);
        int key_len = snprintf(key, sizeof key, "%" PRIu64, id);
        memcpy(value, key, (size_t)key_len);
        value[key_len] = ' ';
        for (;;) {
            rd_kafka_resp_err_t e = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC(soak.topic), RD_KAFKA_V_KEY(key, (size_t)key_len),
                RD_KAFKA_V_VALUE(value, sizeof value), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
            if (!e) break;
            if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                snprintf(soak.producer_error, sizeof soak.producer_error, "produce: %s", rd_kafka_err2str(e));
                atomic_fetch_add(&soak.delivery_failed, 1);
                break;
            }
            rd_kafka_poll(rk, 50);
        }
        atomic_fetch_add(&soak.produced, 1);
        rd_kafka_poll(rk, 0);
    }
    while (rd_kafka_outq_len(rk) > 0) rd_kafka_poll(rk, 100);
    rd_kafka_destroy(rk);
    atomic_store(&soak.producer_done, true);
    return NULL;
}

static void *restart_broker(void *arg) {
    const char *script = arg;
    soak.restart_begin = now_s();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' restart >/dev/null", script);
    int rc = system(cmd);
    soak.restart_end = now_s();
    atomic_store(&soak.restart_state, rc == 0 ? 2 : 3);
    return NULL;
}

/* VmRSS and RssAnon of pid in kB, from /proc/PID/status. */
static bool read_rss(pid_t pid, long *vm_rss, long *rss_anon) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    *vm_rss = *rss_anon = -1;
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "VmRSS: %ld", vm_rss);
        sscanf(line, "RssAnon: %ld", rss_anon);
    }
    fclose(f);
    return *vm_rss >= 0 && *rss_anon >= 0;
}

/* True when the group's committed position is the end of every partition. */
static bool committed_at_end(rd_kafka_t *rk, int64_t *committed_total, int64_t *end_total) {
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(soak.partitions);
    for (int p = 0; p < soak.partitions; p++) rd_kafka_topic_partition_list_add(parts, soak.topic, p);
    bool at_end = rd_kafka_committed(rk, parts, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR;
    *committed_total = *end_total = 0;
    for (int p = 0; at_end && p < soak.partitions; p++) {
        int64_t low = 0, high = 0;
        if (rd_kafka_query_watermark_offsets(rk, soak.topic, p, &low, &high, 10000)) {
            at_end = false;
            break;
        }
        int64_t c = parts->elems[p].err ? -1 : parts->elems[p].offset;
        *committed_total += c > 0 ? c : 0;
        *end_total += high;
        if (c != high) at_end = false;
    }
    rd_kafka_topic_partition_list_destroy(parts);
    return at_end;
}

static pid_t spawn_service(const char *shared_path) {
    char workers[16], log_path[1024];
    snprintf(workers, sizeof workers, "%d", soak.workers);
    snprintf(log_path, sizeof log_path, "%s/service.log", soak.out);
    pid_t pid = fork();
    if (pid != 0) return pid;
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    execl(soak.service, soak.service, soak.topic, soak.group, shared_path, workers, (char *)NULL);
    perror(soak.service);
    _exit(127);
}

/* Growth between the early part of the run (after the first 10% of the
 * records warmed caches and pools up) and its last 20%: the floor of the live
 * heap in each part. Leaked memory can never be freed, so a leak lifts the
 * floor; the peaks are records fetched ahead (bounded by
 * queued.max.messages.kbytes) and come and go. The resident set is reported but not judged: it keeps the
 * allocator's high-water marks. */
static void heap_floors(const sample *s, size_t n, long *early_kb, long *late_kb) {
    *early_kb = *late_kb = -1;
    for (size_t i = 0; i < n; i++) {
        double done = (double)s[i].distinct / (double)soak.records;
        long *floor = done >= 0.10 && done < 0.30 ? early_kb : done >= 0.80 ? late_kb : NULL;
        if (floor && (*floor < 0 || s[i].heap_kb < *floor)) *floor = s[i].heap_kb;
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SOAK_SERVICE\n", argv[0]);
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &soak.start);
    soak.service = argv[1];
    soak.brokers = getenv("CSTREAM_BROKERS");
    if (!soak.brokers || !*soak.brokers) {
        fprintf(stderr, "soak: CSTREAM_BROKERS is not set (run it through tests/with-real-broker; make soak does)\n");
        return 2;
    }
    soak.records = env_u64("SOAK_RECORDS", 10000000);
    soak.partitions = (int)env_u64("SOAK_PARTITIONS", 6);
    soak.workers = (int)env_u64("SOAK_WORKERS", 4);
    soak.ahead = env_u64("SOAK_AHEAD", 500000);
    soak.out = getenv("SOAK_OUT") && *getenv("SOAK_OUT") ? getenv("SOAK_OUT") : "build/soak";
    mkdir(soak.out, 0755);
    snprintf(soak.topic, sizeof soak.topic, "soak-%ld-%d", (long)time(NULL), (int)getpid());
    snprintf(soak.group, sizeof soak.group, "%s-group", soak.topic);

    char shared_path[1024], csv_path[1024], json_path[1024];
    snprintf(shared_path, sizeof shared_path, "%s/shared.bin", soak.out);
    snprintf(csv_path, sizeof csv_path, "%s/soak.csv", soak.out);
    snprintf(json_path, sizeof json_path, "%s/soak.json", soak.out);
    size_t shared_size = soak_shared_size(soak.records);
    int fd = open(shared_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)shared_size) != 0) {
        perror(shared_path);
        return 2;
    }
    soak.shared = mmap(NULL, shared_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (soak.shared == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    soak.shared->records = soak.records;

    if (!create_topic()) return 1;
    printf("soak: %" PRIu64 " records, topic %s (%d partitions), %d workers, Tracked, 1%% retries, broker %s\n",
           soak.records, soak.topic, soak.partitions, soak.workers, soak.brokers);
    fflush(stdout);
    soak.child = spawn_service(shared_path);
    if (soak.child < 0) {
        perror("fork");
        return 2;
    }
    pthread_t producer, restarter;
    pthread_create(&producer, NULL, produce_all, NULL);

    static const char *const group_props[] = {"group.id", NULL, "enable.auto.commit", "false", "log_level", "0", NULL};
    const char *props[7];
    memcpy(props, group_props, sizeof props);
    props[1] = soak.group;
    rd_kafka_t *checker = new_client(RD_KAFKA_CONSUMER, props);

    FILE *csv = fopen(csv_path, "w");
    if (!csv || !checker) return 2;
    fprintf(csv, "seconds,vm_rss_kb,rss_anon_kb,heap_kb,acked,produced,restarting\n");
    size_t n_samples = 0, cap = 4096;
    sample *samples = malloc(cap * sizeof *samples);
    char script[1024];
    snprintf(script, sizeof script, "%s/scripts/kafka", CSTREAM_SOURCE_DIR);

    const char *failure = NULL;
    int child_status = 0;
    bool child_gone = false;
    uint64_t last_distinct = 0;
    double last_progress = 0, printed = 0;
    int64_t committed = 0, end = 0;
    for (;;) {
        struct timespec nap = {0, SAMPLE_MS * 1000000L};
        nanosleep(&nap, NULL);
        double t = now_s();
        pid_t w = waitpid(soak.child, &child_status, WNOHANG);
        if (w == soak.child) {
            child_gone = true;
            failure = "the service exited before the soak ended (see service.log)";
            break;
        }
        long vm = 0, anon = 0;
        if (!read_rss(soak.child, &vm, &anon)) continue;
        uint64_t distinct = atomic_load(&soak.shared->distinct);
        long heap = (long)(atomic_load(&soak.shared->heap_bytes) / 1024);
        int restarting = atomic_load(&soak.restart_state) == 1;
        fprintf(csv, "%.1f,%ld,%ld,%ld,%" PRIu64 ",%" PRIu64 ",%d\n", t, vm, anon, heap, distinct,
                (uint64_t)atomic_load(&soak.delivered), restarting);
        if (n_samples == cap) samples = realloc(samples, (cap *= 2) * sizeof *samples);
        samples[n_samples++] = (sample){t, vm, anon, heap, distinct};
        if (distinct != last_distinct) last_distinct = distinct, last_progress = t;
        if (t - printed >= 10) {
            printed = t;
            printf("soak: %6.0f s  acked %" PRIu64 "/%" PRIu64 "  retries %" PRIu64 "  duplicates %" PRIu64
                   "  rss %ld MB, heap %ld MB%s\n",
                   t, distinct, soak.records, (uint64_t)atomic_load(&soak.shared->retries),
                   (uint64_t)atomic_load(&soak.shared->duplicates), vm / 1024, heap / 1024,
                   restarting ? "  [broker restarting]" : "");
            fflush(stdout);
        }
        if (atomic_load(&soak.restart_state) == 0 && distinct >= soak.records / 2) {
            atomic_store(&soak.restart_state, 1);
            printf("soak: restarting the broker at %" PRIu64 " acked records\n", distinct);
            fflush(stdout);
            pthread_create(&restarter, NULL, restart_broker, script);
        }
        if (atomic_load(&soak.restart_state) == 3) {
            failure = "scripts/kafka restart failed";
            break;
        }
        if (t - last_progress > STUCK_SECONDS) {
            failure = "no record was acked for " STUCK_SECONDS_TEXT " s";
            break;
        }
        if (distinct == soak.records && atomic_load(&soak.producer_done) && atomic_load(&soak.restart_state) == 2 &&
            committed_at_end(checker, &committed, &end))
            break;
    }
    fclose(csv);
    if (!child_gone) {
        kill(soak.child, SIGTERM);
        waitpid(soak.child, &child_status, 0);
        if (!failure && !(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0))
            failure = "the service did not stop cleanly (see service.log)";
    }
    pthread_join(producer, NULL);
    if (atomic_load(&soak.restart_state) >= 2) pthread_join(restarter, NULL);
    committed_at_end(checker, &committed, &end);
    rd_kafka_destroy(checker);

    uint64_t distinct = atomic_load(&soak.shared->distinct);
    uint64_t lost = soak.records - distinct;
    long early = 0, late = 0;
    heap_floors(samples, n_samples, &early, &late);
    long peak = 0, end_rss = n_samples ? samples[n_samples - 1].vm_rss_kb : 0;
    for (size_t i = 0; i < n_samples; i++)
        if (samples[i].vm_rss_kb > peak) peak = samples[i].vm_rss_kb;
    /* Flat: the late floor may not be more than 10% (and at least 8 MB) over
     * the early one. Between the two parts at least half the records go by,
     * so a leak of 2 bytes per record of 10 million already fails it. */
    long allowed = early / 10 > 8192 ? early / 10 : 8192;
    bool flat = early > 0 && late > 0 && late - early <= allowed;
    if (!failure && lost) failure = "records were lost";
    if (!failure && atomic_load(&soak.delivery_failed)) failure = soak.producer_error;
    if (!failure && committed != end) failure = "committed positions are not at the end of the partitions";
    if (!failure && !flat) failure = "the service's live heap grew over the run";
    double seconds = now_s();

    FILE *js = fopen(json_path, "w");
    if (js) {
        fprintf(js,
                "{\n  \"records\": %" PRIu64 ",\n  \"partitions\": %d,\n  \"workers\": %d,\n"
                "  \"delivered\": %" PRIu64 ",\n  \"delivery_failed\": %" PRIu64 ",\n"
                "  \"acked_distinct\": %" PRIu64 ",\n  \"lost\": %" PRIu64 ",\n  \"duplicates\": %" PRIu64 ",\n"
                "  \"retries\": %" PRIu64 ",\n  \"foreign\": %" PRIu64 ",\n"
                "  \"committed\": %" PRId64 ",\n  \"log_end\": %" PRId64 ",\n"
                "  \"restart_begin_s\": %.1f,\n  \"restart_end_s\": %.1f,\n  \"seconds\": %.1f,\n"
                "  \"heap_floor_early_kb\": %ld,\n  \"heap_floor_late_kb\": %ld,\n  \"vm_rss_peak_kb\": %ld,\n"
                "  \"vm_rss_end_kb\": %ld,\n"
                "  \"samples\": %zu,\n  \"passed\": %s\n}\n",
                soak.records, soak.partitions, soak.workers, (uint64_t)atomic_load(&soak.delivered),
                (uint64_t)atomic_load(&soak.delivery_failed), distinct, lost,
                (uint64_t)atomic_load(&soak.shared->duplicates), (uint64_t)atomic_load(&soak.shared->retries),
                (uint64_t)atomic_load(&soak.shared->foreign), committed, end, soak.restart_begin, soak.restart_end,
                seconds, early, late, peak, end_rss, n_samples, failure ? "false" : "true");
        fclose(js);
    }
    printf("soak: %" PRIu64 " records in %.0f s: lost %" PRIu64 ", duplicates %" PRIu64 ", retries %" PRIu64
           ", committed %" PRId64 " of %" PRId64 "\n",
           soak.records, seconds, lost, (uint64_t)atomic_load(&soak.shared->duplicates),
           (uint64_t)atomic_load(&soak.shared->retries), committed, end);
    printf("soak: broker restart from %.1f s to %.1f s; live heap floor %.1f MB early, %.1f MB late (allowed +%ld MB); "
           "RSS peak %ld MB, at the end %ld MB\n",
           soak.restart_begin, soak.restart_end, early / 1024.0, late / 1024.0, allowed / 1024, peak / 1024,
           end_rss / 1024);
    if (lost) {
        uint64_t shown = 0;
        for (uint64_t id = 0; id < soak.records && shown < 10; id++)
            if (!(atomic_load(&soak.shared->seen[id / 64]) & (UINT64_C(1) << (id % 64)))) {
                printf("soak: lost id %" PRIu64 "\n", id);
                shown++;
            }
    }
    printf("soak: %s%s (samples in %s, summary in %s)\n", failure ? "FAILED: " : "passed", failure ? failure : "",
           csv_path, json_path);
    free(samples);
    return failure ? 1 : 0;
}
