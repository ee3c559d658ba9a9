/* bench/cs_bench.c — the C side of the benchmark harness (bench/run.py drives it).
 *
 *   cs_bench mock-host TOPIC:PARTITIONS...     hosts librdkafka's mock cluster (the embedded
 *                                             cluster, via cstream/testing.h), creates the topics,
 *                                             prints its bootstrap address, serves until stdin closes
 *   cs_bench create-topic BROKERS TOPIC PARTITIONS   Admin API (cs_test_topic_create)
 *   cs_bench delete-topic BROKERS TOPIC...           Admin API (cs_test_topic_delete)
 *   cs_bench produce BROKERS TOPIC PARTITIONS N [KEYS]   N records of 512 bytes of JSON, round-robin;
 *                                             with KEYS > 0 keyed "key-<id % KEYS>" and partitioned by
 *                                             key (librdkafka's default partitioner) instead
 *   cs_bench consume CONTENDER BROKERS TOPIC GROUP N [REPLY_TOPIC]
 *
 * Contenders: raw-batch (rd_kafka_consume_batch_queue), raw-batch-headers (the same, reading each
 * record's headers: a callgrind baseline, run.py --callgrind only), raw-poll (one rd_kafka_consumer_poll per
 * record), raw-reply (raw-batch that produces a reply per record, as cs-reply does, with librdkafka's
 * producer defaults as cstream's reply producer has them: done when every reply is delivered), cs-auto, cs-tracked-1w, cs-tracked-4w, cs-batch-500, cs-reply (Tracked, a reply per record),
 * cs-txn-reply (Transactional, a reply per record: done when every output is committed) and
 * cs-txn-reply-barrier (the same with stop-the-world window commits, CSTREAM_TXN_BARRIER=1).
 * Any cs contender with "+low-latency" appended runs under cs_kafka_profile(k, CS_PROFILE_LOW_LATENCY).
 * Scaling contenders (run.py --scaling): cs-sleep-<N>w (Tracked, N workers, lanes by partition) and
 * cs-sleep-key-<N>w (the same, lanes by key); their handler sleeps 1 ms per record, the case where
 * concurrency, not CPU, decides the rate.
 * Every contender decodes each record with cs_json_decode into `payment` (the same yajl field-table
 * decoder cstream uses), frees it, and marks its id in a bitmap; the run ends when every id 0..N-1
 * was seen (a topic may hold more: ids >= N are decoded and ignored, so one topic serves rounds of
 * any size up to its length; partitions are filled round-robin, so ids < N are each partition's head). consume prints one JSON line: records, distinct, duplicates, seconds (first record
 * handled -> last record settled), records_per_s, allocs (in that window, when the malloc_count
 * shim is preloaded), peak_rss_kb, total_seconds (including group join), pauses (cstream: partitions
 * paused at max_open; -1 for raw), valid. */
#include <dlfcn.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include <cstream.h>
#include <cstream/testing.h>

#include "bench_common.h"

/* ---- shared consume state ----------------------------------------------- */

static uint64_t g_n;
static _Atomic uint64_t *g_seen; /* bitmap of ids */
static _Atomic uint64_t g_distinct, g_dups, g_bad;
static _Atomic double g_t0, g_t_last;
static _Atomic uint64_t g_allocs0, g_allocs1;
static uint64_t (*g_malloc_count)(void);
static bool g_wait_acked;                            /* cs-reply: the end is when every source is acked */
static bool g_wait_outputs;                          /* cs-txn-*: the end is when every output is committed */
static long long g_pauses = -1;                      /* cstream: partitions paused at max_open (cs_sub_stats), -1 raw */
static long long g_wakeups = -1, g_buffer_peak = -1; /* cstream: fetch wake-ups, fetch buffer peak bytes */

static void mark_first(void) {
    double zero = 0;
    double now = bench_now();
    if (atomic_load_explicit(&g_t0, memory_order_relaxed) == 0 && atomic_compare_exchange_strong(&g_t0, &zero, now) &&
        g_malloc_count)
        atomic_store(&g_allocs0, g_malloc_count());
}

/* Decodes one value and marks its id; the "work" every contender does per record. */
static void handle_value(const void *value, size_t len) {
    payment p;
    mark_first();
    if (cs_json_decode(&payment_type, value, len, &p) != CS_OK) {
        atomic_fetch_add(&g_bad, 1);
        return;
    }
    if (p.id >= g_n) { /* the topic holds more than this round reads */
        cs_value_free(&payment_type, &p);
        return;
    }
    uint64_t bit = 1ull << (p.id % 64);
    uint64_t old = atomic_fetch_or_explicit(&g_seen[p.id / 64], bit, memory_order_relaxed);
    cs_value_free(&payment_type, &p);
    if (old & bit) {
        atomic_fetch_add(&g_dups, 1);
        return;
    }
    if (atomic_fetch_add(&g_distinct, 1) + 1 == g_n && !g_wait_acked) {
        atomic_store(&g_t_last, bench_now());
        if (g_malloc_count) atomic_store(&g_allocs1, g_malloc_count());
    }
}

static bool all_seen(void) { return atomic_load(&g_distinct) >= g_n; }

/* ---- raw librdkafka ------------------------------------------------------ */

static rd_kafka_conf_t *common_conf(const char *brokers, const char *group, bool raw) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char err[512];
    const char *kv[][2] = {
        {"bootstrap.servers", brokers},
        {"group.id", group},
        {"auto.offset.reset", "earliest"},
        {"session.timeout.ms", "6000"},
        {"partition.assignment.strategy", "range"},
        {raw ? "enable.auto.offset.store" : NULL, "false"},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        if (!kv[i][0]) continue;
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], err, sizeof err) != RD_KAFKA_CONF_OK) {
            fprintf(stderr, "conf %s: %s\n", kv[i][0], err);
            exit(2);
        }
    }
    return conf;
}

/* raw-reply: the delivery report of each reply; the round ends when the replies of ids 0..N-1
 * are delivered (a reply's _private carries its id + 1; replies to ids >= N, which the topic
 * also holds, do not count). */
static _Atomic uint64_t g_replies_delivered, g_replies_failed;
static void reply_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk, (void)opaque;
    uint64_t id = (uint64_t)(uintptr_t)m->_private - 1;
    if (id >= g_n) return;
    if (m->err) {
        atomic_fetch_add(&g_replies_failed, 1);
    } else if (atomic_fetch_add(&g_replies_delivered, 1) + 1 == g_n) {
        atomic_store(&g_t_last, bench_now());
        if (g_malloc_count) atomic_store(&g_allocs1, g_malloc_count());
    }
}

/* The reply producer of raw-reply: librdkafka's defaults, as cstream's reply producer has them. */
static rd_kafka_t *reply_producer(const char *brokers) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, err, sizeof err)) {
        fprintf(stderr, "reply producer conf: %s\n", err);
        exit(2);
    }
    rd_kafka_conf_set_dr_msg_cb(conf, reply_dr_cb);
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!p) {
        fprintf(stderr, "reply producer: %s\n", err);
        exit(2);
    }
    return p;
}

/* Produces {"id":N} for the record just handled, as cs-reply's handler does. */
static void raw_reply(rd_kafka_t *p, const char *reply_topic, const rd_kafka_message_t *m) {
    const char *id = memchr(m->payload, ':', m->len < 32 ? m->len : 32); /* {"id":N,... */
    unsigned long long n = id ? strtoull(id + 1, NULL, 10) : 0;
    char reply[64];
    int len = snprintf(reply, sizeof reply, "{\"id\":%llu}", n);
    while (rd_kafka_producev(p, RD_KAFKA_V_TOPIC(reply_topic), RD_KAFKA_V_VALUE(reply, (size_t)len),
                             RD_KAFKA_V_OPAQUE((void *)(uintptr_t)(n + 1)), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                             RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
        rd_kafka_poll(p, 1);
}

/* headers: also asks librdkafka for each record's headers, as a framework that offers them must
 * (raw-batch-headers: the header parse's cost, measured apart; docs/benchmarks.md finding 3).
 * reply_topic (raw-reply): a consume->produce loop, one reply per record, done once every reply
 * is delivered. */
static int consume_raw(const char *brokers, const char *topic, const char *group, bool batch, bool headers,
                       const char *reply_topic, double idle_timeout_s) {
    char err[512];
    rd_kafka_t *producer = reply_topic ? reply_producer(brokers) : NULL;
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, common_conf(brokers, group, true), err, sizeof err);
    if (!rk) {
        fprintf(stderr, "consumer: %s\n", err);
        return 2;
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(subs, topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(rk, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (e) {
        fprintf(stderr, "subscribe: %s\n", rd_kafka_err2str(e));
        return 2;
    }
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(rk);
    enum { MAX_BATCH = 10000 };
    rd_kafka_message_t **msgs = malloc(sizeof *msgs * MAX_BATCH);
    double last_progress = bench_now();
    uint64_t last_distinct = 0;
    while (!all_seen() || (producer && atomic_load(&g_replies_delivered) + atomic_load(&g_replies_failed) < g_n)) {
        ssize_t n = 0;
        if (producer && all_seen()) {
            rd_kafka_poll(producer, 10); /* only delivery reports left: serve them as they come */
        } else {
            if (producer) rd_kafka_poll(producer, 0);
            if (batch) {
                n = rd_kafka_consume_batch_queue(q, 100, msgs, MAX_BATCH);
            } else {
                msgs[0] = rd_kafka_consumer_poll(rk, 100);
                n = msgs[0] ? 1 : 0;
            }
        }
        for (ssize_t i = 0; i < n; i++) {
            rd_kafka_message_t *m = msgs[i];
            if (!m->err) {
                rd_kafka_headers_t *h;
                if (headers && rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR &&
                    rd_kafka_header_cnt(h) > 1000)
                    atomic_fetch_add(&g_bad, 1); /* uses the answer: the call cannot be optimised away */
                handle_value(m->payload, m->len);
                if (producer) raw_reply(producer, reply_topic, m);
                /* stores m->offset + 1 (next to read) for the auto-commit timer */
                rd_kafka_offset_store(m->rkt, m->partition, m->offset);
            } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                fprintf(stderr, "consume: %s\n", rd_kafka_message_errstr(m));
            }
            rd_kafka_message_destroy(m);
        }
        uint64_t d = atomic_load(&g_distinct) + atomic_load(&g_replies_delivered);
        if (d != last_distinct) {
            last_distinct = d;
            last_progress = bench_now();
        } else if (bench_now() - last_progress > idle_timeout_s) {
            fprintf(stderr, "no progress for %.0f s at %llu of %llu records\n", idle_timeout_s, (unsigned long long)d,
                    (unsigned long long)g_n);
            break;
        }
    }
    free(msgs);
    if (producer) {
        rd_kafka_flush(producer, 30000);
        if (atomic_load(&g_replies_failed)) atomic_fetch_add(&g_bad, atomic_load(&g_replies_failed));
        rd_kafka_destroy(producer);
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return 0;
}

/* ---- cstream ------------------------------------------------------------- */

static cs_outcome cs_handle(cs_delivery *d, void *user) {
    (void)user;
    const payment *p = cs_delivery_decoded(d);
    mark_first();
    if (!p) {
        atomic_fetch_add(&g_bad, 1);
        return CS_ACK;
    }
    if (p->id >= g_n) return CS_ACK; /* the topic holds more than this round reads */
    uint64_t bit = 1ull << (p->id % 64);
    uint64_t old = atomic_fetch_or_explicit(&g_seen[p->id / 64], bit, memory_order_relaxed);
    if (old & bit) {
        atomic_fetch_add(&g_dups, 1);
    } else if (atomic_fetch_add(&g_distinct, 1) + 1 == g_n && !g_wait_acked && !g_wait_outputs) {
        atomic_store(&g_t_last, bench_now());
        if (g_malloc_count) atomic_store(&g_allocs1, g_malloc_count());
    }
    return CS_ACK;
}

/* A handler that waits on something (a database, a remote call): 1 ms per
 * record of the round. Records past the round (ids >= N) do not sleep: the
 * fetch interleaves them with the round's records, and sleeping on them would
 * measure how much of the topic the fetch pulled in, not the round. */
static cs_outcome cs_handle_sleep(cs_delivery *d, void *user) {
    const payment *p = cs_delivery_decoded(d);
    if (p && p->id < g_n) {
        struct timespec ms = {0, 1000000};
        while (nanosleep(&ms, &ms) != 0) {} /* a signal cut it short: sleep the rest */
    }
    return cs_handle(d, user);
}

static cs_outcome cs_handle_reply(cs_delivery *d, void *user) {
    const payment *p = cs_delivery_decoded(d);
    if (p) {
        char reply[64];
        int len = snprintf(reply, sizeof reply, "{\"id\":%llu}", (unsigned long long)p->id);
        cs_delivery_reply(d, NULL, 0, reply, (size_t)len);
    }
    return cs_handle(d, user);
}

static cs_outcome cs_handle_batch(cs_delivery *const *batch, size_t n, cs_outcome *outcomes, void *user) {
    (void)outcomes;
    for (size_t i = 0; i < n; i++) cs_handle(batch[i], user);
    return CS_ACK;
}

static int consume_cstream(const char *name, const char *brokers, const char *topic, const char *group,
                           const char *reply_topic, double idle_timeout_s) {
    /* "<contender>+low-latency": the same under cs_kafka_profile(k, CS_PROFILE_LOW_LATENCY), its cost */
    char contender[64];
    snprintf(contender, sizeof contender, "%s", name);
    char *plus = strstr(contender, "+low-latency");
    if (plus) *plus = 0;
    cs_log_set_level(CS_LOG_WARN);
    cs_app *app = cs_app_new("cs-bench", "0");
    cs_kafka *k = cs_kafka_new(brokers);
    if (!app || !k || cs_kafka_default_group(k, group) || cs_kafka_config(k, "session.timeout.ms", "6000") ||
        cs_kafka_config(k, "partition.assignment.strategy", "range") ||
        (plus && cs_kafka_profile(k, CS_PROFILE_LOW_LATENCY))) {
        fprintf(stderr, "setup: %s\n", cs_errmsg());
        return 2;
    }
    bool batch = strcmp(contender, "cs-batch-500") == 0;
    bool txn = strncmp(contender, "cs-txn-reply", 12) == 0;
    bool reply = strcmp(contender, "cs-reply") == 0 || txn;
    bool sleepy = strncmp(contender, "cs-sleep-", 9) == 0;
    bool by_key = strncmp(contender, "cs-sleep-key-", 13) == 0;
    if (strcmp(contender, "cs-txn-reply-barrier") == 0) setenv("CSTREAM_TXN_BARRIER", "1", 1);
    cs_handler_fn fn = reply ? cs_handle_reply : sleepy ? cs_handle_sleep : cs_handle;
    cs_sub *s =
        batch ? cs_kafka_subscribe_batch(k, topic, cs_handle_batch, 500, NULL) : cs_kafka_subscribe(k, topic, fn, NULL);
    cs_commit_mode mode = strcmp(contender, "cs-auto") == 0 ? CS_COMMIT_AUTO
                          : txn                             ? CS_COMMIT_TRANSACTIONAL
                                                            : CS_COMMIT_TRACKED;
    if (txn && cs_kafka_instance_id(k, group)) {
        fprintf(stderr, "instance id: %s\n", cs_errmsg());
        return 2;
    }
    int workers = strcmp(contender, "cs-tracked-4w") == 0 ? 4 : 1;
    if (sleepy) workers = atoi(contender + (by_key ? 13 : 9)); /* cs-sleep-[key-]<N>w */
    if (workers < 1) {
        fprintf(stderr, "contender %s: no worker count\n", contender);
        return 2;
    }
    if (!s || cs_sub_start_at(s, CS_START_EARLIEST) || cs_sub_decode(s, &cs_codec_json, &payment_type) ||
        cs_sub_commit_mode(s, mode) || cs_sub_workers(s, workers) || (by_key && cs_sub_lanes(s, CS_LANES_BY_KEY))) {
        fprintf(stderr, "subscribe: %s\n", cs_errmsg());
        return 2;
    }
    /* BENCH_CONFIG="key=value,key=value": consumer properties (cs_sub_config), a
     * measurement knob (e.g. the pre-fetch bounds), not used by run.py */
    const char *extra = getenv("BENCH_CONFIG");
    if (extra && *extra) {
        char *list = strdup(extra), *save = NULL;
        for (char *kv = strtok_r(list, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            if (!eq) continue;
            *eq = 0;
            if (cs_sub_config(s, kv, eq + 1)) {
                fprintf(stderr, "config: %s\n", cs_errmsg());
                return 2;
            }
        }
        free(list);
    }
    /* BENCH_FETCH_BUFFER: bytes, a measurement knob (choosing the default), not used by run.py */
    const char *fetch_buffer = getenv("BENCH_FETCH_BUFFER");
    if (fetch_buffer && *fetch_buffer && cs_sub_fetch_buffer_bytes(s, (size_t)atoll(fetch_buffer))) {
        fprintf(stderr, "fetch buffer: %s\n", cs_errmsg());
        return 2;
    }
    /* BENCH_COMMIT_INTERVAL_MS: the commit interval (Transactional: the window), a measurement knob */
    const char *interval = getenv("BENCH_COMMIT_INTERVAL_MS");
    if (interval && *interval && cs_sub_commit_interval_ms(s, atoi(interval))) {
        fprintf(stderr, "commit interval: %s\n", cs_errmsg());
        return 2;
    }
    /* BENCH_MAX_OPEN: a measurement knob (what max_open costs), not used by run.py */
    const char *max_open = getenv("BENCH_MAX_OPEN");
    if (max_open && *max_open && cs_sub_max_open(s, (size_t)atoll(max_open))) {
        fprintf(stderr, "max_open: %s\n", cs_errmsg());
        return 2;
    }
    /* BENCH_ACKED_SET=0: Tracked without the acked set in its commits (its cost, side by side) */
    const char *acked_set = getenv("BENCH_ACKED_SET");
    if (acked_set && !strcmp(acked_set, "0") && cs_sub_acked_set(s, 0)) {
        fprintf(stderr, "acked set: %s\n", cs_errmsg());
        return 2;
    }
    if (reply) {
        g_wait_acked = !txn;
        g_wait_outputs = txn;
        if (cs_sub_reply(s, reply_topic, 5000)) {
            fprintf(stderr, "reply: %s\n", cs_errmsg());
            return 2;
        }
    }
    cs_app_add_kafka(app, k);
    if (cs_app_start(app)) {
        fprintf(stderr, "start: %s\n", cs_errmsg());
        return 2;
    }
    double last_progress = bench_now();
    uint64_t last = 0;
    for (;;) {
        usleep(200);
        cs_sub_stats st;
        cs_sub_stats_get(s, &st);
        if (g_wait_acked && all_seen() && st.acked >= g_n) {
            atomic_store(&g_t_last, bench_now());
            if (g_malloc_count) atomic_store(&g_allocs1, g_malloc_count());
            break;
        }
        if (g_wait_outputs && all_seen() && st.outputs >= g_n) {
            atomic_store(&g_t_last, bench_now());
            if (g_malloc_count) atomic_store(&g_allocs1, g_malloc_count());
            break;
        }
        if (!g_wait_acked && !g_wait_outputs && all_seen()) break;
        uint64_t progress = atomic_load(&g_distinct) + st.acked + st.outputs;
        if (progress != last) {
            last = progress;
            last_progress = bench_now();
        } else if (bench_now() - last_progress > idle_timeout_s) {
            fprintf(stderr, "no progress for %.0f s at %llu of %llu records (acked %llu)\n", idle_timeout_s,
                    (unsigned long long)atomic_load(&g_distinct), (unsigned long long)g_n,
                    (unsigned long long)st.acked);
            break;
        }
    }
    cs_app_stop(app);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    g_pauses = (long long)st.pauses;
    g_wakeups = (long long)st.wakeups;
    g_buffer_peak = (long long)st.fetch_buffer_peak;
    cs_app_destroy(app);
    return 0;
}

/* ---- commands ------------------------------------------------------------ */

static int cmd_consume(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: cs_bench consume CONTENDER BROKERS TOPIC GROUP N [REPLY_TOPIC]\n");
        return 2;
    }
    const char *contender = argv[2], *brokers = argv[3], *topic = argv[4], *group = argv[5];
    g_n = strtoull(argv[6], NULL, 10);
    const char *reply_topic = argc > 7 ? argv[7] : NULL;
    double idle = getenv("BENCH_IDLE_TIMEOUT_S") ? atof(getenv("BENCH_IDLE_TIMEOUT_S")) : 30;
    g_seen = calloc(g_n / 64 + 1, sizeof *g_seen);
    *(void **)&g_malloc_count = dlsym(RTLD_DEFAULT, "bench_malloc_count");
    double start = bench_now();
    int rc;
    if (strcmp(contender, "raw-batch") == 0) rc = consume_raw(brokers, topic, group, true, false, NULL, idle);
    else if (strcmp(contender, "raw-batch-headers") == 0)
        rc = consume_raw(brokers, topic, group, true, true, NULL, idle);
    else if (strcmp(contender, "raw-poll") == 0) rc = consume_raw(brokers, topic, group, false, false, NULL, idle);
    else if (strcmp(contender, "raw-reply") == 0) {
        g_wait_acked = true; /* the end is the last reply's delivery */
        rc = consume_raw(brokers, topic, group, true, false, reply_topic, idle);
    } else if (strncmp(contender, "cs-", 3) == 0)
        rc = consume_cstream(contender, brokers, topic, group, reply_topic, idle);
    else {
        fprintf(stderr, "unknown contender %s\n", contender);
        return 2;
    }
    double total = bench_now() - start;
    if (rc) return rc;
    double secs = atomic_load(&g_t_last) - atomic_load(&g_t0);
    uint64_t distinct = atomic_load(&g_distinct);
    bool valid = distinct == g_n && atomic_load(&g_bad) == 0 && atomic_load(&g_t_last) > 0;
    printf("{\"contender\":\"%s\",\"records\":%llu,\"distinct\":%llu,\"duplicates\":%llu,\"bad\":%llu,"
           "\"seconds\":%.6f,\"records_per_s\":%.1f,\"allocs\":%lld,\"peak_rss_kb\":%ld,"
           "\"total_seconds\":%.3f,\"pauses\":%lld,\"wakeups\":%lld,\"fetch_buffer_peak\":%lld,\"valid\":%s}\n",
           contender, (unsigned long long)g_n, (unsigned long long)distinct, (unsigned long long)atomic_load(&g_dups),
           (unsigned long long)atomic_load(&g_bad), valid ? secs : 0, valid && secs > 0 ? (double)g_n / secs : 0,
           g_malloc_count && valid ? (long long)(atomic_load(&g_allocs1) - atomic_load(&g_allocs0)) : -1LL,
           bench_peak_rss_kb(), total, g_pauses, g_wakeups, g_buffer_peak, valid ? "true" : "false");
    return valid ? 0 : 3;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    if (m->err) {
        fprintf(stderr, "delivery failed: %s\n", rd_kafka_err2str(m->err));
        atomic_fetch_add((_Atomic uint64_t *)opaque, 1);
    }
}

static int cmd_produce(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: cs_bench produce BROKERS TOPIC PARTITIONS N [KEYS]\n");
        return 2;
    }
    const char *brokers = argv[2], *topic = argv[3];
    int parts = atoi(argv[4]);
    uint64_t n = strtoull(argv[5], NULL, 10);
    uint64_t keys = argc > 6 ? strtoull(argv[6], NULL, 10) : 0;
    static _Atomic uint64_t failed;
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, err, sizeof err) ||
        rd_kafka_conf_set(conf, "linger.ms", "20", err, sizeof err) ||
        rd_kafka_conf_set(conf, "queue.buffering.max.messages", "1000000", err, sizeof err)) {
        fprintf(stderr, "producer conf: %s\n", err);
        return 2;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, (void *)&failed);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "producer: %s\n", err);
        return 2;
    }
    char buf[BENCH_VALUE_SIZE + 1];
    char key[32];
    double t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        size_t len = bench_make_value(buf, i);
        /* Keyed: the partitioner picks the partition from the key. Records are
         * produced in id order either way, so ids < N stay each partition's head. */
        int key_len = keys ? snprintf(key, sizeof key, "key-%llu", (unsigned long long)(i % keys)) : 0;
        int32_t partition = keys ? RD_KAFKA_PARTITION_UA : (int32_t)(i % (uint64_t)parts);
        for (;;) {
            rd_kafka_resp_err_t e =
                rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                                  RD_KAFKA_V_KEY(keys ? key : NULL, (size_t)key_len), RD_KAFKA_V_VALUE(buf, len),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
            if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                rd_kafka_poll(rk, 10);
                continue;
            }
            if (e) {
                fprintf(stderr, "produce: %s\n", rd_kafka_err2str(e));
                return 2;
            }
            break;
        }
        rd_kafka_poll(rk, 0);
    }
    rd_kafka_flush(rk, 120000);
    int left = rd_kafka_outq_len(rk);
    rd_kafka_destroy(rk);
    double secs = bench_now() - t0;
    printf("{\"produced\":%llu,\"failed\":%llu,\"left\":%d,\"seconds\":%.3f}\n", (unsigned long long)n,
           (unsigned long long)atomic_load(&failed), left, secs);
    return failed || left ? 3 : 0;
}

static int cmd_create_topic(int argc, char **argv) {
    if (argc < 5) return 2;
    setenv("CSTREAM_BROKERS", argv[2], 1);
    cs_test_cluster *c;
    if (cs_test_cluster_new(&c) || cs_test_topic_create(c, argv[3], atoi(argv[4]))) {
        fprintf(stderr, "create-topic: %s\n", cs_errmsg());
        return 2;
    }
    cs_test_cluster_destroy(c);
    return 0;
}

static int cmd_delete_topic(int argc, char **argv) {
    if (argc < 4) return 2;
    setenv("CSTREAM_BROKERS", argv[2], 1);
    cs_test_cluster *c;
    if (cs_test_cluster_new(&c)) {
        fprintf(stderr, "delete-topic: %s\n", cs_errmsg());
        return 2;
    }
    int rc = 0;
    for (int i = 3; i < argc; i++) {
        if (cs_test_topic_delete(c, argv[i])) {
            fprintf(stderr, "delete-topic %s: %s\n", argv[i], cs_errmsg());
            rc = 2;
        }
    }
    cs_test_cluster_destroy(c);
    return rc;
}

static int cmd_mock_host(int argc, char **argv) {
    unsetenv("CSTREAM_BROKERS");
    cs_log_set_level(CS_LOG_WARN);
    cs_test_cluster *c;
    if (cs_test_cluster_new(&c)) {
        fprintf(stderr, "mock-host: %s\n", cs_errmsg());
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s", argv[i]);
        char *colon = strrchr(name, ':');
        int parts = colon ? atoi(colon + 1) : 1;
        if (colon) *colon = 0;
        if (cs_test_topic_create(c, name, parts)) {
            fprintf(stderr, "mock-host: topic %s: %s\n", name, cs_errmsg());
            return 2;
        }
    }
    printf("%s\n", cs_test_cluster_brokers(c));
    fflush(stdout);
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        /* more topics on stdin: "TOPIC:PARTITIONS" */
        line[strcspn(line, "\n")] = 0;
        char *colon = strrchr(line, ':');
        if (!colon) continue;
        *colon = 0;
        cs_err e = cs_test_topic_create(c, line, atoi(colon + 1));
        printf("%s\n", e ? cs_errmsg() : "ok");
        fflush(stdout);
    }
    cs_test_cluster_destroy(c);
    return 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        fprintf(stderr, "usage: cs_bench mock-host|create-topic|produce|consume ...\n");
        return 2;
    }
    if (strcmp(argv[1], "consume") == 0) return cmd_consume(argc, argv);
    if (strcmp(argv[1], "produce") == 0) return cmd_produce(argc, argv);
    if (strcmp(argv[1], "create-topic") == 0) return cmd_create_topic(argc, argv);
    if (strcmp(argv[1], "delete-topic") == 0) return cmd_delete_topic(argc, argv);
    if (strcmp(argv[1], "mock-host") == 0) return cmd_mock_host(argc, argv);
    fprintf(stderr, "unknown command %s\n", argv[1]);
    return 2;
}
