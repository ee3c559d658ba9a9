/* cstest.c — see cstest.h. */
#define _POSIX_C_SOURCE 200809L
#include "cstest.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cstream/rdkafka.h"

cs_test_cluster *cst_cluster;

int cst_cluster_setup(void **state) {
    (void)state;
    if (cs_test_cluster_new(&cst_cluster) != CS_OK) {
        fprintf(stderr, "test cluster: %s\n", cs_errmsg());
        return -1;
    }
    fprintf(stderr, "test cluster: %s at %s\n", cs_test_cluster_is_embedded(cst_cluster) ? "embedded" : "external",
            cs_test_cluster_brokers(cst_cluster));
    return 0;
}

int cst_cluster_teardown(void **state) {
    (void)state;
    cs_test_cluster_destroy(cst_cluster);
    cst_cluster = NULL;
    return 0;
}

struct cst_seen {
    pthread_mutex_t lock;
    int partitions;
    int64_t max_offset;
    int *counts;
};

cst_seen *cst_seen_new(int partitions, int64_t max_offset) {
    cst_seen *s = calloc(1, sizeof *s);
    s->partitions = partitions;
    s->max_offset = max_offset;
    s->counts = calloc((size_t)partitions * (size_t)max_offset, sizeof *s->counts);
    pthread_mutex_init(&s->lock, NULL);
    return s;
}

void cst_seen_free(cst_seen *s) {
    pthread_mutex_destroy(&s->lock);
    free(s->counts);
    free(s);
}

void cst_seen_add(cst_seen *s, int32_t partition, int64_t offset) {
    if (partition < 0 || partition >= s->partitions || offset < 0 || offset >= s->max_offset) {
        fprintf(stderr, "cst_seen: %d/%lld out of range\n", (int)partition, (long long)offset);
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->counts[partition * s->max_offset + offset]++;
    pthread_mutex_unlock(&s->lock);
}

int cst_seen_count(cst_seen *s, int32_t partition, int64_t offset) {
    pthread_mutex_lock(&s->lock);
    int n = s->counts[partition * s->max_offset + offset];
    pthread_mutex_unlock(&s->lock);
    return n;
}

static size_t sum(cst_seen *s, bool distinct) {
    size_t n = 0;
    pthread_mutex_lock(&s->lock);
    for (int64_t i = 0; i < s->partitions * s->max_offset; i++)
        n += distinct ? (s->counts[i] > 0) : (size_t)s->counts[i];
    pthread_mutex_unlock(&s->lock);
    return n;
}

size_t cst_seen_distinct(cst_seen *s) { return sum(s, true); }
size_t cst_seen_total(cst_seen *s) { return sum(s, false); }

int64_t cst_now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

bool cst_wait(bool (*pred)(void *arg), void *arg, int timeout_ms) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (pred(arg)) return true;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (elapsed >= timeout_ms) return false;
        usleep(10 * 1000);
    }
}

typedef struct tick_wait {
    const cs_sub *s;
    uint64_t until;
} tick_wait;

static bool ticks_reached(void *arg) {
    tick_wait *w = arg;
    return cs_test_sub_commit_ticks(w->s) >= w->until;
}

void cst_wait_commit_ticks(const cs_sub *s, int ticks, int timeout_ms) {
    uint64_t start = cs_test_sub_commit_ticks(s);
    tick_wait w = {s, start + (uint64_t)ticks};
    if (!cst_wait(ticks_reached, &w, timeout_ms))
        fail_msg("the committer completed %llu of %d commit ticks within %d ms",
                 (unsigned long long)(cs_test_sub_commit_ticks(s) - start), ticks, timeout_ms);
}

pid_t cst_spawn(const char *path, char *const argv[]) {
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigprocmask(SIG_BLOCK, &stop, &old);
    pid_t pid = fork();
    if (pid == 0) {
        execv(path, argv);
        _exit(127);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return pid;
}

double cst_metric(cs_app *app, const char *name, const char *labels) {
    double v;
    return cst_metric_value(app, name, labels, &v) ? v : -1;
}

static void count_failed(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    if (m->err) atomic_fetch_add((_Atomic long *)opaque, 1);
}

void cst_produce_sized(const char *topic, int32_t partition, long count, size_t value_bytes) {
    char err[512];
    _Atomic long failed = 0;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *kv[][2] = {{"bootstrap.servers", cs_test_cluster_brokers(cst_cluster)},
                           {"linger.ms", "20"},
                           {"batch.size", "1000000"},
                           {"compression.type", "none"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], err, sizeof err) != RD_KAFKA_CONF_OK)
            fail_msg("producer: %s", err);
    rd_kafka_conf_set_dr_msg_cb(conf, count_failed);
    rd_kafka_conf_set_opaque(conf, (void *)&failed);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) fail_msg("producer: %s", err);
    char *value = malloc(value_bytes ? value_bytes : 1);
    memset(value, 'v', value_bytes);
    int64_t deadline = cst_now_ms() + 120000;
    for (long i = 0; i < count; i++) {
        rd_kafka_resp_err_t e;
        while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                                      RD_KAFKA_V_VALUE(value, value_bytes), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                      RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL &&
               cst_now_ms() < deadline)
            rd_kafka_poll(rk, 10);
        if (e) fail_msg("produce to %s/%d: %s", topic, (int)partition, rd_kafka_err2str(e));
    }
    int64_t left = deadline - cst_now_ms();
    rd_kafka_resp_err_t fe = rd_kafka_flush(rk, (int)(left > 0 ? left : 0));
    rd_kafka_destroy(rk);
    free(value);
    if (fe || atomic_load(&failed))
        fail_msg("produce to %s/%d: %ld of %ld records failed, flush: %s", topic, (int)partition,
                 (long)atomic_load(&failed), count, rd_kafka_err2str(fe));
}

void cst_fresh(const char *prefix, int partitions, char *topic, char *group, size_t size) {
    cs_test_unique_name(topic, size, prefix);
    if (group) snprintf(group, size, "%s-group", topic);
    if (cs_test_topic_create(cst_cluster, topic, partitions) != CS_OK) fail_msg("topic %s: %s", topic, cs_errmsg());
}

/* Exactly one of fn (values) and msg_fn (whole records) is set. */
static long read_topic(const char *topic, int partitions, bool committed,
                       void (*fn)(const void *value, size_t len, void *arg),
                       void (*msg_fn)(const rd_kafka_message_t *m, void *arg), void *arg, int timeout_ms) {
    char group[160], err[512];
    cs_test_unique_name(group, sizeof group, "checker");
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *kv[][2] = {{"bootstrap.servers", cs_test_cluster_brokers(cst_cluster)},
                           {"group.id", group},
                           {"isolation.level", committed ? "read_committed" : "read_uncommitted"},
                           {"enable.partition.eof", "true"},
                           {"enable.auto.commit", "false"},
                           {"fetch.wait.max.ms", "10"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], err, sizeof err) != RD_KAFKA_CONF_OK) {
            fprintf(stderr, "checker: %s\n", err);
            rd_kafka_conf_destroy(conf);
            return -1;
        }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "checker: %s\n", err);
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        rd_kafka_topic_partition_list_add(l, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    long n = 0;
    int eofs = 0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    bool *at_end = calloc((size_t)partitions, sizeof *at_end);
    while (eofs < partitions) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 > timeout_ms) {
            fprintf(stderr, "checker: %s: end not reached in %d ms (%d of %d partitions, %ld records)\n", topic,
                    timeout_ms, eofs, partitions, n);
            n = -1;
            break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (m->partition >= 0 && m->partition < partitions && !at_end[m->partition]) {
                at_end[m->partition] = true;
                eofs++;
            }
        } else if (!m->err) {
            if (msg_fn) msg_fn(m, arg);
            else fn(m->payload, m->len, arg);
            n++;
        }
        rd_kafka_message_destroy(m);
    }
    free(at_end);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return n;
}

void cst_capture_start(cst_capture *c) {
    snprintf(c->path, sizeof c->path, "/tmp/cstream-capture-XXXXXX");
    int fd = mkstemp(c->path);
    assert_true(fd >= 0);
    fflush(stderr);
    /* Close-on-exec: a process the test starts meanwhile (scripts/registry
     * restart's JVM) must not inherit the real stderr, or a ctest pipe would
     * stay open, and ctest wait for it, until that process ends. */
    c->saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

char *cst_capture_stop(cst_capture *c) {
    fflush(stderr);
    dup2(c->saved, STDERR_FILENO);
    close(c->saved);
    assert_int_equal(access(c->path, R_OK), 0); /* an empty capture must not pass for a clean one */
    char *text = cst_slurp(c->path);
    unlink(c->path);
    return text;
}

char *cst_slurp(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return strdup("");
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    assert_non_null(buf);
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            buf = realloc(buf, cap *= 2);
            assert_non_null(buf);
        }
    }
    buf[n] = '\0';
    fclose(f);
    return buf;
}

void cst_assert_no_secret(const char *what, const char *text, const char *secret) {
    const char *hit = strstr(text, secret);
    if (!hit) return;
    const char *line = hit;
    while (line > text && line[-1] != '\n') line--;
    const char *end = strchr(hit, '\n');
    fail_msg("the password appears in %s: %.*s", what, (int)(end ? end - line : (long)strlen(line)), line);
}

long cst_read_committed(const char *topic, int partitions, void (*fn)(const void *value, size_t len, void *arg),
                        void *arg, int timeout_ms) {
    return read_topic(topic, partitions, true, fn, NULL, arg, timeout_ms);
}

long cst_read_uncommitted(const char *topic, int partitions, void (*fn)(const void *value, size_t len, void *arg),
                          void *arg, int timeout_ms) {
    return read_topic(topic, partitions, false, fn, NULL, arg, timeout_ms);
}

long cst_read_records(const char *topic, int partitions, void (*fn)(const rd_kafka_message_t *m, void *arg), void *arg,
                      int timeout_ms) {
    return read_topic(topic, partitions, true, NULL, fn, arg, timeout_ms);
}

const char *cst_header(const rd_kafka_message_t *m, const char *name, char *buf, size_t size) {
    rd_kafka_headers_t *hdrs = NULL;
    const void *v = NULL;
    size_t len = 0;
    if (rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(hdrs, name, &v, &len) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return NULL;
    snprintf(buf, size, "%.*s", (int)len, v ? (const char *)v : "");
    return buf;
}

int cst_kills_wanted(int max) {
    const char *env = getenv("CS_KILLS");
    if (!env) return 3;
    char *rest;
    errno = 0;
    long n = strtol(env, &rest, 10);
    if (errno || rest == env || *rest || n < 1 || n > max)
        fail_msg("CS_KILLS=\"%s\": expected a number of kills from 1 to %d", env, max);
    return (int)n;
}

/* ---- review-fixes: helpers that several tests had their own copy of ------- */

void cst_gate_init(cst_gate *g) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC); /* the deadline must not move with the wall clock */
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cv, &a);
    pthread_condattr_destroy(&a);
    g->open = false;
}

void cst_gate_destroy(cst_gate *g) {
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->lock);
}

static void gate_set(cst_gate *g, bool open) {
    pthread_mutex_lock(&g->lock);
    g->open = open;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->lock);
}
void cst_gate_open(cst_gate *g) { gate_set(g, true); }
void cst_gate_close(cst_gate *g) { gate_set(g, false); }

bool cst_gate_wait(cst_gate *g, int timeout_ms) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&g->lock);
    while (!g->open)
        if (pthread_cond_timedwait(&g->cv, &g->lock, &until) != 0) break;
    bool open = g->open;
    pthread_mutex_unlock(&g->lock);
    return open;
}

char *cst_log_line(const char *text, const char *needle, char *out, size_t size) {
    const char *at = text && needle ? strstr(text, needle) : NULL;
    if (!at || size == 0) return NULL;
    const char *start = at, *end = strchr(at, '\n');
    while (start > text && start[-1] != '\n') start--;
    size_t len = end ? (size_t)(end - start) : strlen(start);
    if (len >= size) len = size - 1;
    memcpy(out, start, len);
    out[len] = '\0';
    return out;
}

bool cst_metric_in(const char *text, const char *name, const char *labels, double *value) {
    size_t nlen = strlen(name), llen = labels ? strlen(labels) : 0;
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (*line == '#' || strncmp(line, name, nlen) != 0) continue;
        const char *rest = line + nlen;
        if (llen) {
            if (*rest != '{' || strncmp(rest + 1, labels, llen) != 0) continue;
            char after = rest[1 + llen];
            if (after != ',' && after != '}') continue; /* labels ended mid-value or mid-name */
        } else if (*rest != '{' && *rest != ' ') {
            continue; /* a longer name that starts with this one */
        }
        const char *end = strchr(line, '\n');
        const char *space = NULL;
        for (const char *p = line; *p && p != end; p++)
            if (*p == ' ') space = p; /* the value follows the last blank: label values may hold blanks */
        if (!space) return false;
        *value = strtod(space + 1, NULL);
        return true;
    }
    return false;
}

bool cst_metric_value(cs_app *app, const char *name, const char *labels, double *value) {
    char *text = NULL;
    if (cs_app_metrics(app, &text) != CS_OK || !text) return false;
    bool found = cst_metric_in(text, name, labels, value);
    free(text);
    return found;
}

bool cst_fetched_to_end(void *arg) {
    cst_fetched *f = arg;
    rd_kafka_t *rk = cs_sub_rdkafka_consumer(f->sub);
    rd_kafka_topic_partition_list_t *l = NULL;
    if (!rk || rd_kafka_assignment(rk, &l)) return false;
    bool yes = l->cnt == 1 && rd_kafka_position(rk, l) == RD_KAFKA_RESP_ERR_NO_ERROR && l->elems[0].offset >= f->end;
    rd_kafka_topic_partition_list_destroy(l);
    return yes;
}

/* Produce refusals pushed by cst_reply_topic_blocked on the embedded cluster. */
enum { REPLY_REFUSALS = 2000 };

/* An admin request on the real broker; fails the test on an error. */
static void admin_wait(rd_kafka_queue_t *q, const char *what) {
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    if (!ev) fail_msg("%s: no answer in 30 s", what);
    if (rd_kafka_event_error(ev)) fail_msg("%s: %s", what, rd_kafka_event_error_string(ev));
    const rd_kafka_topic_result_t **tr = NULL;
    const rd_kafka_ConfigResource_t **cr = NULL;
    size_t n = 0;
    if (rd_kafka_event_CreateTopics_result(ev))
        tr = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    else cr = rd_kafka_AlterConfigs_result_resources(rd_kafka_event_AlterConfigs_result(ev), &n);
    for (size_t i = 0; i < n; i++) {
        if (tr && rd_kafka_topic_result_error(tr[i]))
            fail_msg("%s: %s", what, rd_kafka_topic_result_error_string(tr[i]));
        if (cr && rd_kafka_ConfigResource_error(cr[i]))
            fail_msg("%s: %s", what, rd_kafka_ConfigResource_error_string(cr[i]));
    }
    rd_kafka_event_destroy(ev);
}

/* Replies that cannot get out, and their release. Embedded: every Produce
 * is refused with a retriable error, so the replies wait in the producer
 * and their sources stay open. Real broker: the reply topic takes records
 * of at most 1 byte (max.message.bytes) until it is altered back, so every
 * reply is refused (MESSAGE_TOO_LARGE, not retriable) and its source comes
 * back as a retry, again and again. (min.insync.replicas above the
 * replication factor refuses nothing on Kafka 4: tried.) */
void cst_reply_topic_blocked(const char *done, bool blocked) {
    if (cs_test_cluster_is_embedded(cst_cluster)) {
        if (!blocked) {
            CST_OK(cs_test_cluster_clear_request_errors(cst_cluster, 0));
            return;
        }
        CST_OK(cs_test_topic_create(cst_cluster, done, 1));
        static int refusals[REPLY_REFUSALS];
        for (int i = 0; i < REPLY_REFUSALS; i++) refusals[i] = 19; /* NOT_ENOUGH_REPLICAS: retriable */
        CST_OK(cs_test_cluster_push_request_errors(cst_cluster, 0, REPLY_REFUSALS, refusals));
        return;
    }
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", cs_test_cluster_brokers(cst_cluster), err, sizeof err))
        fail_msg("admin: %s", err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) fail_msg("admin: %s", err);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    const char *max_bytes = blocked ? "1" : "1048588";
    if (blocked) {
        rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(done, 1, 1, err, sizeof err);
        if (!nt) fail_msg("topic %s: %s", done, err);
        rd_kafka_NewTopic_set_config(nt, "max.message.bytes", max_bytes);
        rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
        admin_wait(q, "create the reply topic");
        rd_kafka_NewTopic_destroy(nt);
    } else {
        rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, done);
        rd_kafka_ConfigResource_set_config(res, "max.message.bytes", max_bytes);
        rd_kafka_AlterConfigs(rk, &res, 1, NULL, q);
        admin_wait(q, "release the reply topic");
        rd_kafka_ConfigResource_destroy(res);
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
}
