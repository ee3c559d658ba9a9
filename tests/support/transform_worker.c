/* transform_worker.c — the Transactional service the exactly-once tests run,
 * SIGKILL and fence: it reads TOPIC and writes one output per input record to
 * OUT_TOPIC, "<partition>:<offset>" with the input's key, in transactions.
 *
 * Settlement is deliberately out of order across window boundaries: four
 * workers with lanes by key, and every fourth record is kept pending and
 * settled by another thread 0-250 ms later (windows are 100 ms), its output
 * added with cs_delivery_publish; the others reply. Each handler run is
 * appended to RUNS_FILE as "partition offset" (O_APPEND, one write per line)
 * so the parent can pace its kills; the final error, if any, goes to ERR_FILE.
 * usage: transform_worker TOPIC OUT_TOPIC GROUP RUNS_FILE ERR_FILE INSTANCE_ID */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cstream.h>

#include "classic_session.h"
#include "stop_signals.h"

enum { MAX_HELD = 4096 };

typedef struct held {
    cs_delivery *d;
    int64_t due_ms;
} held;

static struct {
    pthread_mutex_t lock;
    held items[MAX_HELD];
    size_t n;
    bool stop;
} pending = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int runs_fd = -1;
static const char *out_topic;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool hold(cs_delivery *d, int64_t due_ms) {
    pthread_mutex_lock(&pending.lock);
    bool ok = pending.n < MAX_HELD;
    if (ok) pending.items[pending.n++] = (held){d, due_ms};
    pthread_mutex_unlock(&pending.lock);
    return ok;
}

/* Settles held deliveries once due, in no particular order. */
static void *settler(void *arg) {
    (void)arg;
    for (;;) {
        cs_delivery *due[64];
        size_t n_due = 0;
        pthread_mutex_lock(&pending.lock);
        bool stop = pending.stop;
        int64_t now = now_ms();
        for (size_t i = 0; i < pending.n && n_due < 64;) {
            if (stop || pending.items[i].due_ms <= now) {
                due[n_due++] = pending.items[i].d;
                pending.items[i] = pending.items[--pending.n];
            } else {
                i++;
            }
        }
        bool empty = pending.n == 0;
        pthread_mutex_unlock(&pending.lock);
        for (size_t i = 0; i < n_due; i++) cs_delivery_settle(due[i], CS_ACK);
        if (stop && empty && n_due == 0) return NULL;
        if (n_due == 0) usleep(2000);
    }
}

static cs_outcome transform(cs_delivery *d, void *user) {
    unsigned *seed = user;
    (void)seed;
    int32_t p = cs_delivery_partition(d);
    long long o = (long long)cs_delivery_offset(d);
    char line[64];
    int n = snprintf(line, sizeof line, "%d %lld\n", (int)p, o);
    if (write(runs_fd, line, (size_t)n) != n) return CS_RETRY;
    char value[48];
    int vn = snprintf(value, sizeof value, "%d:%lld", (int)p, o);
    size_t key_len = 0;
    const void *key = cs_delivery_key(d, &key_len);
    if (o % 4 == 3) { /* out of order: settled later by another thread */
        cs_header h = {"source", value, (size_t)vn};
        cs_record r = {.topic = out_topic,
                       .partition = -1,
                       .key = key,
                       .key_len = key_len,
                       .value = value,
                       .value_len = (size_t)vn,
                       .headers = &h,
                       .n_headers = 1};
        if (cs_delivery_publish(d, &r) != CS_OK) return CS_RETRY;
        if (hold(d, now_ms() + (o * 7919) % 250)) return CS_PENDING;
        return CS_ACK;
    }
    usleep((useconds_t)(o * 7919 % 4000)); /* 2 ms on average: kills land mid-stream */
    return cs_delivery_reply(d, key, key_len, value, (size_t)vn) == CS_OK ? CS_ACK : CS_RETRY;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s TOPIC OUT_TOPIC GROUP RUNS_FILE ERR_FILE INSTANCE_ID\n", argv[0]);
        return 2;
    }
    cst_hold_stop_signals();
    out_topic = argv[2];
    runs_fd = open(argv[4], O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (runs_fd < 0) {
        perror(argv[4]);
        return 2;
    }
    cs_log_set_level(getenv("TW_DEBUG") ? CS_LOG_DEBUG : CS_LOG_WARN);
    pthread_t settler_thread;
    pthread_create(&settler_thread, NULL, settler, NULL);
    unsigned seed = (unsigned)getpid();
    cs_app *app = cs_app_new("transform-worker", "1.0");
    cs_kafka *k = cs_kafka_new(NULL);
    cs_sub *s = cs_kafka_subscribe(k, argv[1], transform, &seed);
    cs_err err = CS_OK;
    if (!err) err = cst_classic_session(k, "6000");
    if (!err) err = cs_kafka_config(k, "fetch.wait.max.ms", "10");
    if (!err) err = cs_kafka_instance_id(k, argv[6]);
    if (!err) err = cs_kafka_topic(k, out_topic, 1); /* declared: cs_delivery_publish may write to it */
    if (!err) err = cs_sub_group(s, argv[3]);
    if (!err) err = cs_sub_commit_mode(s, CS_COMMIT_TRANSACTIONAL);
    if (!err) err = cs_sub_workers(s, 4);
    if (!err) err = cs_sub_lanes(s, CS_LANES_BY_KEY);
    if (!err) err = cs_sub_reply(s, out_topic, 5000);
    if (!err) err = cs_app_add_kafka(app, k);
    if (!err) err = cs_app_run(app);
    char why[1024];
    snprintf(why, sizeof why, "%s", err ? cs_errmsg() : "");
    pthread_mutex_lock(&pending.lock);
    pending.stop = true;
    pthread_mutex_unlock(&pending.lock);
    pthread_join(settler_thread, NULL);
    cs_app_destroy(app);
    close(runs_fd);
    if (err) {
        FILE *f = fopen(argv[5], "w");
        if (f) {
            fprintf(f, "%s\n", why);
            fclose(f);
        }
        fprintf(stderr, "transform_worker: %s\n", why);
    }
    return err ? 1 : 0;
}
