/* bench/cs_latency.c — what one record's trip costs, per contender (docs/benchmarks.md, "Latency").
 * bench/latency.py runs it; two roles, each its own process:
 *
 *   cs_latency drive BROKERS IN OUT RATE SECONDS WARM_S arrival|reply
 *   cs_latency serve CONTENDER BROKERS IN OUT MEASURED tuned|defaults
 *
 * drive is the paced producer (and, for the reply shape, the reader). It writes 512-byte records to
 * IN at RATE records/s, each stamped in a header "ts" with the time it was due (microseconds of
 * CLOCK_REALTIME, one clock for every process of the machine; stamping the due time rather than
 * the send time keeps a producer that falls behind from hiding its lag). Until it reads a line on
 * stdin (bench/latency.py writes one once the contender printed `first`) and for WARM_S seconds
 * after, the stamps read "w<us>": warm-up, never sampled. Then RATE * SECONDS measured records.
 * Reply shape: a read_committed consumer of OUT takes each reply's value (the input's stamp) and
 * samples now - stamp; it prints `first` at the first reply and one JSON line at the end.
 * Arrival shape: the contender samples; drive prints how far the producer fell behind its pace.
 *
 * serve is one contender. Arrival shapes (raw, cs-auto, cs-tracked-1w, cs-tracked-4w) sample
 * now - stamp where the handler starts; reply shapes (raw-reply, cs-reply, cs-txn-reply-10,
 * cs-txn-reply-100) reply to every record with its stamp. It prints `first` at the first record
 * and, after MEASURED measured records, one JSON line, then exits.
 *
 * tuned: every client of every contender runs with the same latency-bound properties, librdkafka's
 * side of them stated in TUNED (what cs_kafka_profile(k, CS_PROFILE_LOW_LATENCY) sets, which the
 * cs contenders call instead). defaults: each framework as it comes (raw: librdkafka's defaults).
 * The instruments (drive's producer and reader) always run tuned: they are the same for everyone.
 * Percentiles are exact (every sample kept and sorted), in microseconds. */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include <cstream.h>

#include "bench_common.h"

/* The properties cs_kafka_profile(k, CS_PROFILE_LOW_LATENCY) sets (src/kafka/profile.c), for the raw
 * contenders and the instruments: every client, then the producer's. */
static const char *const TUNED[][2] = {
    {"fetch.wait.max.ms", "10"},
    {"fetch.min.bytes", "1"},
    {"socket.nagle.disable", "true"},
};
static const char *const TUNED_PRODUCER[][2] = {{"linger.ms", "1"}};
enum { N_TUNED = sizeof TUNED / sizeof *TUNED, N_TUNED_PRODUCER = sizeof TUNED_PRODUCER / sizeof *TUNED_PRODUCER };
enum { IDLE_TIMEOUT_S = 30, FIRST_TIMEOUT_S = 120, STAMP_MAX = 32 };

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_us(int64_t us) {
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* ---- samples: every measured latency, sorted at the end ------------------------------------ */

typedef struct samples {
    uint32_t *us;
    long cap;
    _Atomic long n;          /* measured records seen (may pass cap: those are not kept) */
    _Atomic int64_t last_us; /* when the last record of any kind arrived */
    _Atomic bool first;      /* `first` printed */
} samples;

/* One record arrived carrying stamp (value or header bytes, not terminated). Returns true once the
 * measured records reached cap. Any thread. */
static bool sample(samples *s, const void *stamp, size_t len) {
    int64_t now = now_us();
    atomic_store(&s->last_us, now);
    if (!atomic_exchange(&s->first, true)) {
        printf("first\n");
        fflush(stdout);
    }
    if (!stamp || len == 0 || len >= STAMP_MAX || *(const char *)stamp == 'w') return false;
    char text[STAMP_MAX];
    memcpy(text, stamp, len);
    text[len] = 0;
    int64_t lat = now - atoll(text);
    long i = atomic_fetch_add(&s->n, 1);
    if (i < s->cap) s->us[i] = lat < 0 ? 0 : lat > UINT32_MAX ? UINT32_MAX : (uint32_t)lat;
    return i + 1 >= s->cap;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Prints the JSON line of a finished contender or reader. */
static void print_samples(const char *who, samples *s, const char *error) {
    long n = atomic_load(&s->n) < s->cap ? atomic_load(&s->n) : s->cap;
    qsort(s->us, (size_t)n, sizeof *s->us, cmp_u32);
#define PCT(num, den) (n ? (long)s->us[n * (num) / (den) < n ? n * (num) / (den) : n - 1] : -1L)
    printf("{\"contender\":\"%s\",\"measured\":%ld,\"samples\":%ld,\"p50_us\":%ld,\"p90_us\":%ld,\"p99_us\":%ld,"
           "\"p999_us\":%ld,\"max_us\":%ld,\"valid\":%s%s%s%s}\n",
           who, s->cap, n, PCT(1, 2), PCT(9, 10), PCT(99, 100), PCT(999, 1000), n ? (long)s->us[n - 1] : -1L,
           error ? "false" : "true", error ? ",\"error\":\"" : "", error ? error : "", error ? "\"" : "");
#undef PCT
    fflush(stdout);
}

static bool measured_all(const samples *s) { return atomic_load(&s->n) >= s->cap; }

/* The idle rules, counted from `start`: FIRST_TIMEOUT_S without any record, IDLE_TIMEOUT_S
 * without one after the first. NULL while they hold, else the reason. */
static const char *idle_error(samples *s, int64_t start) {
    int64_t last = atomic_load(&s->last_us), now = now_us();
    if (!last && now - start > FIRST_TIMEOUT_S * 1000000LL) return "no record arrived";
    if (last && now - last > IDLE_TIMEOUT_S * 1000000LL) return "records stopped arriving";
    return NULL;
}

/* Waits until every measured record arrived or the idle rules fail; NULL or the reason. */
static const char *wait_measured(samples *s) {
    int64_t start = now_us();
    const char *error = NULL;
    while (!measured_all(s) && !(error = idle_error(s, start))) sleep_us(1000);
    return error;
}

/* ---- librdkafka clients ---------------------------------------------------------------------- */

static void set(rd_kafka_conf_t *conf, const char *key, const char *value) {
    char err[256];
    if (rd_kafka_conf_set(conf, key, value, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "%s=%s: %s\n", key, value, err);
        exit(2);
    }
}

static rd_kafka_t *client(rd_kafka_type_t type, const char *brokers, const char *group, bool tuned) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", brokers);
    for (int i = 0; tuned && i < N_TUNED; i++) set(conf, TUNED[i][0], TUNED[i][1]);
    for (int i = 0; tuned && type == RD_KAFKA_PRODUCER && i < N_TUNED_PRODUCER; i++)
        set(conf, TUNED_PRODUCER[i][0], TUNED_PRODUCER[i][1]);
    if (group) {
        set(conf, "group.id", group);
        set(conf, "auto.offset.reset", "earliest");
    }
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", err);
        exit(2);
    }
    if (type == RD_KAFKA_CONSUMER) rd_kafka_poll_set_consumer(rk);
    return rk;
}

static const void *stamp_of(const rd_kafka_message_t *m, size_t *len) {
    rd_kafka_headers_t *h = NULL;
    const void *v = NULL;
    if (rd_kafka_message_headers(m, &h) || rd_kafka_header_get_last(h, "ts", &v, len)) return NULL;
    return v;
}

/* ---- drive: the paced producer and the reply reader ------------------------------------------ */

typedef struct reader {
    const char *brokers, *out;
    samples s;
    _Atomic bool stop;
} reader;

static void *read_replies(void *arg) {
    reader *r = arg;
    char group[64];
    snprintf(group, sizeof group, "latency-reader-%d", (int)getpid());
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", r->brokers);
    set(conf, "group.id", group);
    set(conf, "auto.offset.reset", "earliest");
    set(conf, "isolation.level", "read_committed");
    for (int i = 0; i < N_TUNED; i++) set(conf, TUNED[i][0], TUNED[i][1]);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, r->out, RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    while (!atomic_load(&r->stop)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 50);
        if (!m) continue;
        if (!m->err) sample(&r->s, m->payload, m->len);
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return NULL;
}

static void *read_go(void *arg) {
    char line[64];
    if (fgets(line, sizeof line, stdin)) atomic_store((_Atomic int64_t *)arg, now_us());
    return NULL;
}

static int drive(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: cs_latency drive BROKERS IN OUT RATE SECONDS WARM_S arrival|reply\n");
        return 2;
    }
    const char *brokers = argv[2], *in = argv[3];
    long rate = atol(argv[5]), seconds = atol(argv[6]), warm_s = atol(argv[7]);
    bool reply = strcmp(argv[8], "reply") == 0;
    long measured = rate * seconds;
    reader r = {.brokers = brokers, .out = argv[4], .s = {.cap = measured}};
    pthread_t reader_thread, go_thread;
    if (reply) {
        r.s.us = calloc((size_t)measured, sizeof *r.s.us);
        pthread_create(&reader_thread, NULL, read_replies, &r);
    }
    static _Atomic int64_t go_us; /* written by the detached stdin thread: not on this stack */
    pthread_create(&go_thread, NULL, read_go, &go_us);
    pthread_detach(go_thread);
    rd_kafka_t *p = client(RD_KAFKA_PRODUCER, brokers, NULL, true);
    char value[BENCH_VALUE_SIZE + 1], stamp[STAMP_MAX];
    int64_t t0 = now_us(), behind_max = 0, measure_from = 0;
    long sent = 0, warm = 0, done = 0;
    while (done < measured) {
        int64_t due = t0 + (int64_t)((double)sent * 1e6 / (double)rate), now = now_us();
        if (now < due) { /* sleep until the next record is due: a spinning producer would take a core */
            sleep_us(due - now);
            continue;
        }
        if (!measure_from && atomic_load(&go_us)) measure_from = atomic_load(&go_us) + warm_s * 1000000;
        bool measuring = measure_from && due >= measure_from;
        if (measuring && now - due > behind_max) behind_max = now - due;
        int n = snprintf(stamp, sizeof stamp, "%s%lld", measuring ? "" : "w", (long long)due);
        size_t len = bench_make_value(value, (uint64_t)sent);
        while (rd_kafka_producev(p, RD_KAFKA_V_TOPIC(in), RD_KAFKA_V_VALUE(value, len),
                                 RD_KAFKA_V_HEADER("ts", stamp, n), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                 RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(p, 1);
        sent++;
        if (measuring) done++;
        else warm++;
        if (sent % 64 == 0) rd_kafka_poll(p, 0);
        if (!measure_from && now - t0 > FIRST_TIMEOUT_S * 1000000LL) {
            fprintf(stderr, "drive: the contender never said `first`\n");
            return 3;
        }
    }
    rd_kafka_flush(p, 30000);
    rd_kafka_destroy(p);
    printf("{\"sent\":%ld,\"warmup\":%ld,\"measured\":%ld,\"rate\":%ld,\"producer_behind_max_us\":%lld}\n", sent, warm,
           done, rate, (long long)behind_max);
    fflush(stdout);
    if (!reply) return 0;
    const char *error = wait_measured(&r.s);
    atomic_store(&r.stop, true);
    pthread_join(reader_thread, NULL);
    print_samples("reader", &r.s, error);
    return error ? 3 : 0;
}

/* ---- serve: the contenders ------------------------------------------------------------------- */

typedef struct serve_ctx {
    samples s;
    const char *out;
} serve_ctx;

static cs_outcome on_arrival(cs_delivery *d, void *user) {
    serve_ctx *c = user;
    const void *v = NULL;
    size_t len = 0;
    cs_delivery_header_get(d, "ts", &v, &len);
    sample(&c->s, v, len);
    return CS_ACK;
}

static cs_outcome on_reply(cs_delivery *d, void *user) {
    serve_ctx *c = user;
    const void *v = NULL;
    size_t len = 0;
    cs_delivery_header_get(d, "ts", &v, &len);
    if (cs_delivery_reply(d, NULL, 0, v, len) != CS_OK) return CS_RETRY;
    sample(&c->s, v, len);
    return CS_ACK;
}

static int serve_raw(serve_ctx *c, const char *brokers, const char *in, bool reply, bool tuned) {
    char group[64];
    snprintf(group, sizeof group, "latency-raw-%d", (int)getpid());
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, brokers, group, tuned);
    rd_kafka_t *p = reply ? client(RD_KAFKA_PRODUCER, brokers, NULL, tuned) : NULL;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, in, RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    const char *error = NULL;
    int64_t start = now_us();
    while (!measured_all(&c->s)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (p) rd_kafka_poll(p, 0);
        if ((error = idle_error(&c->s, start))) {
            if (m) rd_kafka_message_destroy(m);
            break;
        }
        if (!m) continue;
        if (!m->err) {
            size_t len = 0;
            const void *v = stamp_of(m, &len);
            while (p && rd_kafka_producev(p, RD_KAFKA_V_TOPIC(c->out), RD_KAFKA_V_VALUE((void *)v, len),
                                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                          RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                rd_kafka_poll(p, 1);
            sample(&c->s, v, len);
        }
        rd_kafka_message_destroy(m);
    }
    if (p) {
        rd_kafka_flush(p, 30000);
        rd_kafka_destroy(p);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    print_samples(reply ? "raw-reply" : "raw", &c->s, error);
    return error ? 3 : 0;
}

static int serve_cs(serve_ctx *c, const char *name, const char *brokers, const char *in, bool tuned) {
    /* "<contender>+retry-backoff-100": librdkafka's retry.backoff.ms on the producers, a measurement
     * knob (what cstream's 20 ms for the transactional producer changes) */
    char contender[64];
    snprintf(contender, sizeof contender, "%s", name);
    char *plus = strstr(contender, "+retry-backoff-100");
    if (plus) *plus = 0;
    bool reply = strstr(contender, "reply") != NULL, txn = strncmp(contender, "cs-txn-reply-", 13) == 0;
    int workers = strcmp(contender, "cs-tracked-1w") == 0 ? 1 : 4;
    cs_commit_mode mode = !strcmp(contender, "cs-auto") ? CS_COMMIT_AUTO
                          : txn                         ? CS_COMMIT_TRANSACTIONAL
                                                        : CS_COMMIT_TRACKED;
    char group[128];
    snprintf(group, sizeof group, "latency-%s-%d", contender, (int)getpid());
    cs_log_set_level(CS_LOG_WARN);
    cs_app *app = cs_app_new("cs-latency", "0");
    cs_kafka *k = cs_kafka_new(brokers);
    cs_sub *s = cs_kafka_subscribe(k, in, reply ? on_reply : on_arrival, c);
    if (!app || !k || !s || cs_kafka_default_group(k, group) ||
        (tuned && cs_kafka_profile(k, CS_PROFILE_LOW_LATENCY)) ||
        (plus && cs_kafka_producer_config(k, "retry.backoff.ms", "100")) || (txn && cs_kafka_instance_id(k, group)) ||
        cs_sub_commit_mode(s, mode) || cs_sub_workers(s, workers) || (reply && cs_sub_reply(s, c->out, 5000)) ||
        (txn && cs_sub_commit_interval_ms(s, atoi(contender + 13))) || cs_app_add_kafka(app, k) || cs_app_start(app)) {
        fprintf(stderr, "%s: %s\n", contender, cs_errmsg());
        return 2;
    }
    const char *error = wait_measured(&c->s);
    cs_app_stop(app); /* replies: flushed before it returns */
    cs_app_destroy(app);
    print_samples(name, &c->s, error);
    return error ? 3 : 0;
}

static int serve(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: cs_latency serve CONTENDER BROKERS IN OUT MEASURED tuned|defaults\n");
        return 2;
    }
    const char *contender = argv[2], *brokers = argv[3], *in = argv[4];
    bool tuned = strcmp(argv[7], "tuned") == 0;
    serve_ctx c = {.s = {.cap = atol(argv[6])}, .out = argv[5]};
    c.s.us = calloc((size_t)c.s.cap, sizeof *c.s.us);
    if (!strcmp(contender, "raw") || !strcmp(contender, "raw-reply"))
        return serve_raw(&c, brokers, in, strcmp(contender, "raw-reply") == 0, tuned);
    if (!strncmp(contender, "cs-", 3)) return serve_cs(&c, contender, brokers, in, tuned);
    fprintf(stderr, "unknown contender %s\n", contender);
    return 2;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "drive")) return drive(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "serve")) return serve(argc, argv);
    fprintf(stderr, "usage: cs_latency drive|serve ... (see bench/cs_latency.c)\n");
    return 2;
}
