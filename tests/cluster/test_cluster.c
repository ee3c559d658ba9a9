/* test_cluster.c — delivery guarantees on a real 3-broker cluster
 * (`scripts/kafka cluster start`: replication factor 3, min.insync.replicas=2)
 * while brokers are SIGKILLed and service instances come and go, under a
 * steady load this process produces.
 *
 * The service is tests/cluster/cluster_worker.c in child processes (Tracked
 * or Transactional, replies on an output topic, idempotent producer with
 * acks=all). Every figure is counted from the broker: the input topic's end
 * offsets, the group's committed offsets, and the replies read back (each
 * names its source record, the process and handler run that wrote it, and
 * when it ran). Per test, one "FIGURES" line on stdout gives lost,
 * duplicated, the pause per event and the fatal stops (docs/real-kafka.md).
 *
 * A worker that stops by itself with an error (a librdkafka 2.0.2 fault
 * after a broker loss: docs/real-kafka.md) is counted as a fatal stop and
 * replaced by a new one with the same identity; the test still requires 0
 * lost and the group at the end of the input. Any other exit fails the test.
 *
 * usage: test_cluster [TEST]  (no TEST: all of them), CSTREAM_BROKERS set
 * (tests/cluster/with-cluster). KAFKA_SCRIPT is scripts/kafka. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cstest.h"
#include "cstream/rdkafka.h"

#ifndef CLUSTER_WORKER
#error "CLUSTER_WORKER must name the cluster_worker executable"
#endif
#ifndef KAFKA_SCRIPT
#error "KAFKA_SCRIPT must name scripts/kafka"
#endif

enum { PARTS = 6, MAX_PROCS = 16, MAX_EVENTS = 8, RATE = 200 /* input records per second */ };

typedef struct proc {
    pid_t pid;
    bool live, is_static;
    char runs[256], err[256], log[256], id[160];
} proc;

typedef struct event {
    char what[96];
    long long start, end; /* ms, CLOCK_REALTIME, like the workers' timestamps */
    int lost_assignments; /* "assignment lost" in the workers' logs from its start to the next event's */
    int lost_base;        /* the count at its start */
    long rehandled;       /* sources handled again from its start to the next event's */
} event;

typedef struct run {
    const char *name;
    bool transactional;
    /* No CSTREAM_INSTANCE_ID for non-static workers: with one, every
     * consumer is a static member (cstream derives group.instance.id), which
     * does not leave its group when it stops, so a scale-in waited for the
     * session timeout. Transactional workers need it for transactional.id. */
    bool dynamic;
    char topic[96], out[128], group[128];
    char extra[2][96]; /* options for every worker (assignor=...) */
    int n_extra;
    rd_kafka_t *probe; /* metadata, end offsets, the group's committed offsets */
    pthread_t loader;
    atomic_bool stop_load;
    atomic_long sent, send_failed, load_fatal;
    proc procs[MAX_PROCS];
    int n_procs;
    int fatal_stops;
    int stall_restarts; /* wait_progress_or_restart */
    event ev[MAX_EVENTS];
    int n_ev;
} run;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *brokers(void) {
    const char *b = getenv("CSTREAM_BROKERS");
    if (!b || !*b) fail_msg("CSTREAM_BROKERS is not set: run through tests/cluster/with-cluster");
    return b;
}

static rd_kafka_conf_t *conf_of(const char *const kv[][2], size_t n) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char err[512];
    for (size_t i = 0; i < n; i++)
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], err, sizeof err) != RD_KAFKA_CONF_OK)
            fail_msg("%s=%s: %s", kv[i][0], kv[i][1], err);
    return conf;
}

/* ---- the cluster: topics, leaders, coordinators, brokers ---- */

/* Replication factor 3 with min.insync.replicas=2: an acks=all write
 * survives the loss of any one broker. */
static void create_topic(run *r, const char *topic) {
    char err[512];
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, PARTS, 3, err, sizeof err);
    if (!nt) fail_msg("topic %s: %s", topic, err);
    rd_kafka_NewTopic_set_config(nt, "min.insync.replicas", "2");
    rd_kafka_queue_t *q = rd_kafka_queue_new(r->probe);
    rd_kafka_CreateTopics(r->probe, &nt, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    if (!ev) fail_msg("topic %s: CreateTopics got no answer in 30 s", topic);
    size_t n = 0;
    const rd_kafka_topic_result_t **res =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    if (rd_kafka_event_error(ev) || n != 1 || rd_kafka_topic_result_error(res[0]))
        fail_msg("topic %s: %s", topic,
                 rd_kafka_event_error(ev) ? rd_kafka_event_error_string(ev)
                                          : rd_kafka_topic_result_error_string(res[0]));
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
}

/* The partition's leader (-1 if none or no answer) and its ISR size. */
static int leader_of(run *r, const char *topic, int32_t partition, int *isr) {
    rd_kafka_topic_t *t = rd_kafka_topic_new(r->probe, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    int leader = -1;
    if (isr) *isr = 0;
    if (rd_kafka_metadata(r->probe, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int i = 0; i < md->topic_cnt; i++)
            for (int j = 0; j < md->topics[i].partition_cnt; j++)
                if (!strcmp(md->topics[i].topic, topic) && md->topics[i].partitions[j].id == partition &&
                    !md->topics[i].partitions[j].err) {
                    leader = md->topics[i].partitions[j].leader;
                    if (isr) *isr = md->topics[i].partitions[j].isr_cnt;
                }
        rd_kafka_metadata_destroy(md);
    }
    rd_kafka_topic_destroy(t);
    return leader;
}

/* The broker coordinating the group, -1 if not known (yet). */
static int coordinator_of(run *r) {
    rd_kafka_queue_t *q = rd_kafka_queue_new(r->probe);
    const char *groups[] = {r->group};
    rd_kafka_DescribeConsumerGroups(r->probe, groups, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 15000);
    int id = -1;
    if (ev && !rd_kafka_event_error(ev)) {
        size_t n = 0;
        const rd_kafka_ConsumerGroupDescription_t **d =
            rd_kafka_DescribeConsumerGroups_result_groups(rd_kafka_event_DescribeConsumerGroups_result(ev), &n);
        if (n == 1 && !rd_kafka_ConsumerGroupDescription_error(d[0]) &&
            rd_kafka_ConsumerGroupDescription_coordinator(d[0]))
            id = rd_kafka_Node_id(rd_kafka_ConsumerGroupDescription_coordinator(d[0]));
    }
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    return id;
}

static void broker_cmd(const char *what, int broker) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s cluster %s %d", KAFKA_SCRIPT, what, broker);
    int rc = system(cmd);
    if (rc != 0) fail_msg("'%s' failed (status %d)", cmd, rc);
}

/* The input's end offsets and the group's committed offsets; false if the
 * cluster did not answer (a broker is down: the callers retry). */
static bool end_offsets(run *r, int64_t *end) {
    for (int p = 0; p < PARTS; p++) {
        int64_t lo = 0;
        if (rd_kafka_query_watermark_offsets(r->probe, r->topic, p, &lo, &end[p], 5000)) return false;
    }
    return true;
}

static bool committed(run *r, int64_t *at) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(PARTS);
    for (int p = 0; p < PARTS; p++) rd_kafka_topic_partition_list_add(l, r->topic, p);
    bool ok = rd_kafka_committed(r->probe, l, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR;
    for (int p = 0; ok && p < PARTS; p++) {
        if (l->elems[p].err) ok = false;
        at[p] = l->elems[p].offset < 0 ? 0 : l->elems[p].offset;
    }
    rd_kafka_topic_partition_list_destroy(l);
    return ok;
}

static int64_t committed_total(run *r) {
    int64_t at[PARTS], sum = 0;
    if (!committed(r, at)) return -1;
    for (int p = 0; p < PARTS; p++) sum += at[p];
    return sum;
}

/* ---- the load: RATE records a second, idempotent, acks=all ---- */

static void on_sent(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    run *r = opaque;
    if (m->err) atomic_fetch_add(&r->send_failed, 1);
}

static rd_kafka_t *load_producer(run *r) {
    const char *kv[][2] = {{"bootstrap.servers", brokers()},
                           {"enable.idempotence", "true"},
                           {"acks", "all"},
                           {"linger.ms", "5"},
                           {"message.timeout.ms", "120000"}};
    rd_kafka_conf_t *conf = conf_of(kv, sizeof kv / sizeof kv[0]);
    rd_kafka_conf_set_dr_msg_cb(conf, on_sent);
    rd_kafka_conf_set_opaque(conf, r);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "load: %s\n", err);
        abort();
    }
    return rk;
}

/* Record i goes to partition i % PARTS, key and value "<i>": the inputs are
 * spread evenly, and a duplicate input would show as a repeated value. The
 * pacing is the load's rate, not a wait for a condition. */
static void *load_main(void *arg) {
    run *r = arg;
    rd_kafka_t *rk = load_producer(r);
    long long start = now_ms();
    for (long i = 0; !atomic_load(&r->stop_load); i++) {
        char v[32];
        int n = snprintf(v, sizeof v, "%ld", i);
        while (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(r->topic), RD_KAFKA_V_PARTITION((int32_t)(i % PARTS)),
                                 RD_KAFKA_V_KEY(v, (size_t)n), RD_KAFKA_V_VALUE(v, (size_t)n),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                 RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 10);
        atomic_fetch_add(&r->sent, 1);
        /* The same librdkafka fault may hit this producer: count it, carry on
         * with a new one (what it failed to write is simply not input). */
        char why[256];
        if (rd_kafka_fatal_error(rk, why, sizeof why)) {
            fprintf(stderr, "load: producer failed fatally (%s); a new one takes over\n", why);
            atomic_fetch_add(&r->load_fatal, 1);
            rd_kafka_destroy(rk);
            rk = load_producer(r);
        }
        long long due = start + (i + 1) * 1000 / RATE;
        long long wait = due - now_ms();
        rd_kafka_poll(rk, wait > 0 ? (int)wait : 0);
    }
    if (rd_kafka_flush(rk, 120000)) fprintf(stderr, "load: %d records not delivered in 120 s\n", rd_kafka_outq_len(rk));
    rd_kafka_destroy(rk);
    return NULL;
}

/* ---- the service's instances ---- */

static proc *spawn(run *r, const char *id, bool is_static) {
    if (r->n_procs == MAX_PROCS) fail_msg("more than %d workers", MAX_PROCS);
    proc *w = &r->procs[r->n_procs];
    memset(w, 0, sizeof *w);
    snprintf(w->id, sizeof w->id, "%s", id);
    snprintf(w->runs, sizeof w->runs, "/tmp/%s.%d.runs", r->topic, r->n_procs);
    snprintf(w->err, sizeof w->err, "/tmp/%s.%d.err", r->topic, r->n_procs);
    snprintf(w->log, sizeof w->log, "/tmp/%s.%d.log", r->topic, r->n_procs);
    unlink(w->runs);
    unlink(w->err);
    unlink(w->log);
    char opt[200], log[300];
    snprintf(opt, sizeof opt, "static=%s", id);
    snprintf(log, sizeof log, "stderr=%s", w->log);
    char *argv[12] = {
        CLUSTER_WORKER, r->transactional ? "transactional" : "tracked", r->topic, r->out, r->group, w->runs, w->err};
    int argc = 7;
    argv[argc++] = log;
    if (is_static) argv[argc++] = opt;
    for (int i = 0; i < r->n_extra; i++) argv[argc++] = r->extra[i];
    argv[argc] = NULL;
    if (!r->dynamic || is_static || r->transactional) setenv("CSTREAM_INSTANCE_ID", id, 1);
    w->pid = cst_spawn(CLUSTER_WORKER, argv);
    unsetenv("CSTREAM_INSTANCE_ID");
    if (w->pid < 0) fail_msg("fork failed");
    w->live = true;
    w->is_static = is_static;
    r->n_procs++;
    return w;
}

/* The stops a broker loss may cause with librdkafka 2.0.2 (docs/real-kafka.md):
 * a fatal librdkafka error (the idempotent producer's "sequence
 * desynchronization", #4438; also a static member fenced, seen once in a
 * rolling restart) or a transaction or coordinator that could not be reached
 * in time (#4970). Each is counted and printed; any other error fails the
 * test. */
static bool known_fatal(const char *why) {
    return strstr(why, "fatal") || strstr(why, "transaction") || strstr(why, "coordinator");
}

/* A worker that ended by itself: a fatal stop with its error written is
 * counted and replaced (same identity and options); anything else fails. */
static void reap(run *r) {
    for (int i = 0; i < r->n_procs; i++) {
        proc *w = &r->procs[i];
        int status;
        if (!w->live || waitpid(w->pid, &status, WNOHANG) != w->pid) continue;
        w->live = false;
        char *why = cst_slurp(w->err);
        bool fatal = WIFEXITED(status) && WEXITSTATUS(status) == 1 && known_fatal(why);
        if (!fatal) {
            fail_msg("worker %d (%s) ended by itself: %s %d, error: %s", (int)w->pid, w->id,
                     WIFEXITED(status) ? "exit status" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), *why ? why : "(none)");
        }
        r->fatal_stops++;
        fprintf(stderr, "FATAL STOP %d of %s: worker %d (%s) stopped with: %s", r->fatal_stops, r->name, (int)w->pid,
                w->id, why);
        free(why);
        char id[160];
        snprintf(id, sizeof id, "%s", w->id);
        spawn(r, id, w->is_static);
    }
}

/* Waits for pred, reaping workers meanwhile; fails naming `what` at the deadline. */
typedef struct waiting {
    run *r;
    bool (*pred)(run *r, void *arg);
    void *arg;
} waiting;

static bool check(void *arg) {
    waiting *w = arg;
    reap(w->r);
    return w->pred(w->r, w->arg);
}

static void wait_for(run *r, bool (*pred)(run *r, void *arg), void *arg, int timeout_ms, const char *what) {
    waiting w = {r, pred, arg};
    if (!cst_wait(check, &w, timeout_ms)) fail_msg("%s: not within %d ms", what, timeout_ms);
}

/* The live process of instance `id`: a fatal stop may have replaced the one
 * a test started. */
static proc *live_proc(run *r, const char *id) {
    for (int i = r->n_procs - 1; i >= 0; i--)
        if (r->procs[i].live && !strcmp(r->procs[i].id, id)) return &r->procs[i];
    fail_msg("instance %s has no live process", id);
    return NULL;
}

static bool handled_more_than(run *r, void *arg) {
    int64_t n = committed_total(r);
    return n >= 0 && n >= *(int64_t *)arg;
}

/* `more` records past what the group has committed now. */
static int64_t progress_target(run *r, int64_t more, const char *what) {
    int64_t now = -1;
    for (int i = 0; i < 50 && now < 0; i++) {
        now = committed_total(r);
        if (now < 0) usleep(200 * 1000); /* the coordinator moves: ask again */
    }
    if (now < 0) fail_msg("%s: the group's committed offsets could not be read for 10 s", what);
    return now + more;
}

/* Waits until the group committed `more` records past what it had committed now. */
static void wait_progress(run *r, int64_t more, int timeout_ms, const char *what) {
    int64_t target = progress_target(r, more, what);
    wait_for(r, handled_more_than, &target, timeout_ms, what);
}

/* wait_progress for a broker that stays down. librdkafka before 2.10 can
 * stop making progress after a broker loss (#4970, a request stuck on the
 * dead broker: docs/real-kafka.md). Seen in CI on 2.0.2: the session lost at
 * +6 s, then no progress for 180 s, and cstream's lost-session watchdog did
 * not fire (so the stall was not, or not only, a lost session). A supervisor
 * restarts such an instance; on those versions the test does the same, once
 * per wait: every live worker SIGKILLed and started again with its identity,
 * counted (STALL RESTART, stall_restarts in the figures), and the wait begins
 * again. Every guarantee is still checked at the end. From librdkafka 2.10
 * a stall fails the test. */
static void wait_progress_or_restart(run *r, int64_t more, int timeout_ms, const char *what) {
    int64_t target = progress_target(r, more, what);
    waiting w = {r, handled_more_than, &target};
    if (cst_wait(check, &w, timeout_ms)) return;
    /* CS_STALL_BACKTRACE=1: every live worker's thread stacks first (how the
     * Transactional stall of "Known problems" was understood). */
    for (int i = 0; getenv("CS_STALL_BACKTRACE") && i < r->n_procs; i++) {
        if (!r->procs[i].live) continue;
        char cmd[128];
        snprintf(cmd, sizeof cmd, "gdb -p %d -batch -ex 'thread apply all bt' >&2 2>/dev/null", (int)r->procs[i].pid);
        if (system(cmd) != 0) fprintf(stderr, "stall: gdb could not show worker %d\n", (int)r->procs[i].pid);
    }
    /* From 2.10 a stall fails the test, a Transactional worker's too: its
     * stall on 2.14.2 (a window's send_offsets_to_transaction waiting for a
     * dead coordinator forever, docs/real-kafka.md, "Known problems") is
     * what the transactional producer's connections.max.idle.ms ends. */
    if (rd_kafka_version() >= 0x020a0000) fail_msg("%s: not within %d ms", what, timeout_ms);
    r->stall_restarts++;
    int n = r->n_procs;
    for (int i = 0; i < n; i++) {
        proc *p = &r->procs[i];
        if (!p->live) continue;
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
        p->live = false;
        fprintf(stderr,
                "STALL RESTART %d of %s: no progress within %d ms (%s) on librdkafka %s: worker %d (%s) "
                "SIGKILLed and started again\n",
                r->stall_restarts, r->name, timeout_ms, what, rd_kafka_version_str(), (int)p->pid, p->id);
        char id[160];
        snprintf(id, sizeof id, "%s", p->id);
        spawn(r, id, p->is_static);
    }
    wait_progress(r, more, timeout_ms, what);
}

static bool runs_started(run *r, void *arg) {
    (void)r;
    struct stat st;
    return stat(((proc *)arg)->runs, &st) == 0 && st.st_size > 0;
}

static bool all_caught_up(run *r, void *arg) {
    (void)arg;
    int64_t end[PARTS], at[PARTS];
    if (!end_offsets(r, end) || !committed(r, at)) return false;
    /* Past the end is caught up too: finish() then fails naming it. */
    for (int p = 0; p < PARTS; p++)
        if (at[p] < end[p]) return false;
    return true;
}

static bool fully_replicated(run *r, void *arg) {
    const char *topics[] = {r->topic, r->out};
    (void)arg;
    for (int t = 0; t < 2; t++)
        for (int p = 0; p < PARTS; p++) {
            int isr = 0;
            if (leader_of(r, topics[t], p, &isr) < 0 || isr != 3) return false;
        }
    return true;
}

typedef struct not_led_by {
    int32_t partition;
    int broker;
} not_led_by;

static bool leader_moved(run *r, void *arg) {
    not_led_by *n = arg;
    int l = leader_of(r, r->topic, n->partition, NULL);
    return l >= 0 && l != n->broker;
}

/* SIGTERM (graceful stop), then wait for exit status 0. */
static void stop_worker(run *r, proc *w) {
    if (!w->live) return;
    kill(w->pid, SIGTERM);
    int status = 0;
    long long deadline = now_ms() + 60000;
    pid_t got = 0;
    while ((got = waitpid(w->pid, &status, WNOHANG)) == 0 && now_ms() < deadline) usleep(20 * 1000);
    if (got != w->pid) {
        kill(w->pid, SIGKILL);
        waitpid(w->pid, &status, 0);
        fail_msg("worker %d (%s) did not stop within 60 s of SIGTERM", (int)w->pid, w->id);
    }
    w->live = false;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char *why = cst_slurp(w->err);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 1 && known_fatal(why)) {
            /* A fatal error before or during the stop still counts as one. */
            r->fatal_stops++;
            fprintf(stderr, "FATAL STOP %d of %s: worker %d (%s) stopped with: %s", r->fatal_stops, r->name,
                    (int)w->pid, w->id, why);
        } else {
            fail_msg("worker %d (%s) stopped badly on SIGTERM: status %d, error: %s", (int)w->pid, w->id, status, why);
        }
        free(why);
    }
}

/* How often the workers logged that librdkafka declared their assignment lost
 * (session timeout, or a commit refused with ILLEGAL_GENERATION during a
 * rebalance: librdkafka #4059). */
static int lost_assignments(run *r) {
    int n = 0;
    for (int i = 0; i < r->n_procs; i++) {
        char *text = cst_slurp(r->procs[i].log);
        for (const char *at = text; (at = strstr(at, "assignment lost")); at++) n++;
        free(text);
    }
    return n;
}

/* A gap that starts in an event can end after it (wait_settled sees commits,
 * which a revoke can make for records handled before the gap), and the lost
 * assignment behind it can be logged after the event's end: losses count up
 * to the next event's start (or the end of the run), like re-handlings. */
static void count_lost(run *r, event *e) { e->lost_assignments = lost_assignments(r) - e->lost_base; }

static void event_end(run *r, event *e) {
    e->end = now_ms();
    count_lost(r, e);
}

static event *event_begin(run *r, const char *fmt, ...) {
    if (r->n_ev == MAX_EVENTS) fail_msg("more than %d events", MAX_EVENTS);
    if (r->n_ev > 0) count_lost(r, &r->ev[r->n_ev - 1]);
    event *e = &r->ev[r->n_ev++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->what, sizeof e->what, fmt, ap);
    va_end(ap);
    e->start = now_ms();
    e->lost_base = lost_assignments(r);
    fprintf(stderr, "%s: %s\n", r->name, e->what);
    return e;
}

/* One line of figures: on stdout, and appended to the file named by
 * CSTREAM_CLUSTER_FIGURES (make test-cluster prints it at the end, since
 * ctest shows the output of failed tests only). */
static void figure(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    printf("FIGURES %s", line);
    fflush(stdout);
    const char *path = getenv("CSTREAM_CLUSTER_FIGURES");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "%s", line);
        fclose(f);
    }
}

/* ---- reading back and counting ---- */

typedef struct reply {
    int p;
    long long o, ms;
    long pid, attempt;
} reply;

typedef struct replies {
    reply *v;
    size_t n, cap;
    long bad;
} replies;

static void add_reply(const rd_kafka_message_t *m, void *arg) {
    replies *rs = arg;
    reply x;
    char buf[128];
    size_t len = m->len < sizeof buf - 1 ? m->len : sizeof buf - 1;
    memcpy(buf, m->payload, len);
    buf[len] = '\0';
    if (sscanf(buf, "%d %lld %ld %ld %lld", &x.p, &x.o, &x.pid, &x.attempt, &x.ms) != 5 || x.p < 0 || x.p >= PARTS) {
        rs->bad++;
        return;
    }
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? rs->cap * 2 : 4096;
        rs->v = realloc(rs->v, rs->cap * sizeof *rs->v);
        assert_non_null(rs->v);
    }
    rs->v[rs->n++] = x;
}

typedef struct inputs {
    long n, max;
    unsigned char *seen; /* by value: how often each input value was read */
    long dups, bad;
} inputs;

static void add_input(const rd_kafka_message_t *m, void *arg) {
    inputs *in = arg;
    char buf[32];
    size_t len = m->len < sizeof buf - 1 ? m->len : sizeof buf - 1;
    memcpy(buf, m->payload, len);
    buf[len] = '\0';
    long v = strtol(buf, NULL, 10);
    in->n++;
    if (v < 0 || v >= in->max) {
        in->bad++;
        return;
    }
    if (in->seen[v]++) in->dups++;
}

/* Reads every partition of `topic` from the beginning to its end. */
static long read_back(const char *topic, bool read_committed, void (*fn)(const rd_kafka_message_t *m, void *arg),
                      void *arg) {
    char group[160], err[512];
    cs_test_unique_name(group, sizeof group, "cluster-checker");
    const char *kv[][2] = {{"bootstrap.servers", brokers()},
                           {"group.id", group},
                           {"isolation.level", read_committed ? "read_committed" : "read_uncommitted"},
                           {"enable.partition.eof", "true"},
                           {"enable.auto.commit", "false"},
                           {"fetch.wait.max.ms", "10"}};
    rd_kafka_conf_t *conf = conf_of(kv, sizeof kv / sizeof kv[0]);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) fail_msg("checker: %s", err);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(PARTS);
    for (int p = 0; p < PARTS; p++) rd_kafka_topic_partition_list_add(l, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    long n = 0;
    int eofs = 0;
    bool at_end[PARTS] = {0};
    long long deadline = now_ms() + 120000;
    while (eofs < PARTS) {
        if (now_ms() > deadline)
            fail_msg("checker: %s: end not reached in 120 s (%d of %d partitions)", topic, eofs, PARTS);
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (m->partition >= 0 && m->partition < PARTS && !at_end[m->partition]) {
                at_end[m->partition] = true;
                eofs++;
            }
        } else if (!m->err) {
            fn(m, arg);
            n++;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return n;
}

static int by_source(const void *a, const void *b) {
    const reply *x = a, *y = b;
    if (x->p != y->p) return x->p - y->p;
    if (x->o != y->o) return x->o < y->o ? -1 : 1;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    if (x->attempt != y->attempt) return x->attempt < y->attempt ? -1 : 1;
    return 0;
}

static int by_time(const void *a, const void *b) {
    const reply *x = a, *y = b;
    if (x->p != y->p) return x->p - y->p;
    return x->ms < y->ms ? -1 : x->ms > y->ms;
}

static int by_time_only(const void *a, const void *b) {
    const reply *x = a, *y = b;
    return x->ms < y->ms ? -1 : x->ms > y->ms;
}

/* The longest stretch without a handled record that overlaps [from, to]:
 * in any partition (*any) and in one partition (*one, the worst one). v is
 * sorted by partition then time. */
static void pauses(const reply *v, size_t n, long long from, long long to, long long *any, long long *one) {
    *one = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i].p == v[i - 1].p && v[i].ms >= from && v[i - 1].ms <= to && v[i].ms - v[i - 1].ms > *one)
            *one = v[i].ms - v[i - 1].ms;
    reply *t = malloc(n * sizeof *t);
    assert_non_null(t);
    memcpy(t, v, n * sizeof *t);
    qsort(t, n, sizeof *t, by_time_only);
    *any = 0;
    for (size_t i = 1; i < n; i++)
        if (t[i].ms >= from && t[i - 1].ms <= to && t[i].ms - t[i - 1].ms > *any) *any = t[i].ms - t[i - 1].ms;
    free(t);
}

typedef struct figures {
    long inputs, input_dups, replies, lost, retry_dups, rehandled;
    replies rs; /* sorted by partition, then time */
} figures;

/* Stops the load, waits until the group committed every input, stops the
 * workers, then counts everything from the broker and checks the promises. */
static void finish(run *r, figures *f) {
    atomic_store(&r->stop_load, true);
    pthread_join(r->loader, NULL);
    wait_for(r, all_caught_up, NULL, 180000, "the group commits the input's end on every partition");
    for (int i = 0; i < r->n_procs; i++) stop_worker(r, &r->procs[i]);
    if (r->n_ev > 0) count_lost(r, &r->ev[r->n_ev - 1]); /* the last event's losses: up to the end of the run */

    int64_t end[PARTS], at[PARTS];
    bool ok = false;
    for (int i = 0; i < 50 && !ok; i++) ok = end_offsets(r, end) && committed(r, at);
    if (!ok) fail_msg("end and committed offsets could not be read");

    memset(f, 0, sizeof *f);
    inputs in = {.max = atomic_load(&r->sent)};
    in.seen = calloc((size_t)in.max + 1, 1);
    assert_non_null(in.seen);
    read_back(r->topic, false, add_input, &in);
    f->inputs = in.n;
    f->input_dups = in.dups;
    int64_t total_end = 0;
    for (int p = 0; p < PARTS; p++) total_end += end[p];

    read_back(r->out, r->transactional, add_reply, &f->rs);
    f->replies = (long)f->rs.n;
    reply *v = f->rs.v;
    qsort(v, f->rs.n, sizeof *v, by_source);
    /* Lost: an input offset with no reply. Retry duplicates: the same handler
     * run's reply twice. Re-handled: more than one handler run of a source. */
    size_t i = 0;
    for (int p = 0; p < PARTS; p++)
        for (int64_t o = 0; o < end[p]; o++) {
            while (i < f->rs.n && (v[i].p < p || (v[i].p == p && v[i].o < o))) i++;
            if (i == f->rs.n || v[i].p != p || v[i].o != o) {
                if (f->lost < 5) fprintf(stderr, "%s: LOST input %d/%lld: no reply\n", r->name, p, (long long)o);
                f->lost++;
                continue;
            }
            size_t j = i + 1;
            long long first = v[i].ms;
            for (; j < f->rs.n && v[j].p == p && v[j].o == o; j++) {
                if (v[j].pid == v[j - 1].pid && v[j].attempt == v[j - 1].attempt) f->retry_dups++;
                else f->rehandled++;
                if (v[j].ms < first) first = v[j].ms;
            }
            /* Each handler run after the first is a re-handling: charged to
             * the event it happened in (up to the next event). */
            for (size_t k = i; k < j; k++) {
                if (v[k].ms == first || (k > i && v[k].pid == v[k - 1].pid && v[k].attempt == v[k - 1].attempt))
                    continue;
                for (int e = r->n_ev - 1; e >= 0; e--)
                    if (v[k].ms >= r->ev[e].start) {
                        r->ev[e].rehandled++;
                        break;
                    }
            }
            i = j;
        }
    qsort(v, f->rs.n, sizeof *v, by_time);

    figure("%s: inputs=%ld (end offsets %lld, sent %ld, send failures %ld, input producer fatal %ld) "
           "input_dups=%ld replies=%ld lost=%ld retry_dups=%ld rehandled_dups=%ld fatal_stops=%d "
           "stall_restarts=%d\n",
           r->name, f->inputs, (long long)total_end, atomic_load(&r->sent), atomic_load(&r->send_failed),
           atomic_load(&r->load_fatal), f->input_dups, f->replies, f->lost, f->retry_dups, f->rehandled, r->fatal_stops,
           r->stall_restarts);
    for (int e = 0; e < r->n_ev; e++) {
        long long any, one;
        pauses(v, f->rs.n, r->ev[e].start, r->ev[e].end, &any, &one);
        figure("%s: event %d \"%s\": %lld ms; longest pause in handled records: %lld ms (any partition), "
               "%lld ms (worst partition); re-handled: %ld; assignments lost: %d\n",
               r->name, e + 1, r->ev[e].what, r->ev[e].end - r->ev[e].start, any, one, r->ev[e].rehandled,
               r->ev[e].lost_assignments);
    }

    assert_int_equal(in.bad, 0);
    assert_int_equal(f->rs.bad, 0);
    assert_int_equal(f->inputs, (long)total_end);
    assert_int_equal(f->input_dups, 0);
    assert_int_equal(f->lost, 0);
    assert_int_equal(f->retry_dups, 0);
    if (r->transactional) assert_int_equal(f->rehandled, 0); /* read_committed: each output exactly once */
    for (int p = 0; p < PARTS; p++)
        if (at[p] != end[p])
            fail_msg("partition %d: committed %lld, log end %lld", p, (long long)at[p], (long long)end[p]);
    free(in.seen);
}

/* True once every broker, asked on its own, has the topics' metadata: a
 * worker started before that may be told by a lagging broker that its topic
 * does not exist. A handle bootstrapped with one broker asks that broker
 * first. */
static bool known_everywhere(run *r, void *arg) {
    (void)arg;
    char list[512];
    snprintf(list, sizeof list, "%s", brokers());
    bool ok = true;
    for (char *save = NULL, *b = strtok_r(list, ",", &save); b && ok; b = strtok_r(NULL, ",", &save)) {
        char err[512];
        const char *kv[][2] = {{"bootstrap.servers", b}};
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf_of(kv, 1), err, sizeof err);
        if (!rk) fail_msg("probe of %s: %s", b, err);
        const char *topics[] = {r->topic, r->out};
        for (int t = 0; t < 2 && ok; t++) {
            rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topics[t], NULL);
            const struct rd_kafka_metadata *md = NULL;
            ok = rd_kafka_metadata(rk, 0, rkt, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR && md->topic_cnt == 1 &&
                 !md->topics[0].err && md->topics[0].partition_cnt == PARTS;
            if (md) rd_kafka_metadata_destroy(md);
            rd_kafka_topic_destroy(rkt);
        }
        rd_kafka_destroy(rk);
    }
    return ok;
}

static void setup(run *r, const char *name, bool transactional) {
    memset(r, 0, sizeof *r);
    /* All three brokers up, whatever an earlier failed test left behind. */
    int rc = system(KAFKA_SCRIPT " cluster start >/dev/null");
    if (rc != 0) fail_msg("'%s cluster start' failed (status %d)", KAFKA_SCRIPT, rc);
    r->name = name;
    r->transactional = transactional;
    cs_test_unique_name(r->topic, sizeof r->topic, name);
    snprintf(r->out, sizeof r->out, "%s-out", r->topic);
    snprintf(r->group, sizeof r->group, "%s-group", r->topic);
    char err[512];
    const char *kv[][2] = {{"bootstrap.servers", brokers()}, {"group.id", r->group}};
    rd_kafka_conf_t *conf = conf_of(kv, 2);
    r->probe = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!r->probe) fail_msg("probe: %s", err);
    create_topic(r, r->topic);
    create_topic(r, r->out);
    wait_for(r, fully_replicated, NULL, 60000, "the new topics have 3 in-sync replicas on every partition");
    wait_for(r, known_everywhere, NULL, 60000, "every broker knows the new topics");
}

static void start_load(run *r) {
    if (pthread_create(&r->loader, NULL, load_main, r)) fail_msg("load thread");
}

static void teardown(run *r, figures *f) {
    for (int i = 0; i < r->n_procs; i++) {
        unlink(r->procs[i].runs);
        unlink(r->procs[i].err);
        unlink(r->procs[i].log);
    }
    free(f->rs.v);
    rd_kafka_destroy(r->probe);
}

/* ---- the tests ---- */

/* The leader of a busy partition is SIGKILLed under load, then restarted. */
static void leader_kill(bool transactional) {
    run r;
    figures f;
    setup(&r, transactional ? "leader-kill-txn" : "leader-kill", transactional);
    start_load(&r);
    char id[128];
    snprintf(id, sizeof id, "%s-instance", r.topic);
    spawn(&r, id, false);
    wait_progress(&r, 2 * RATE, 60000, "the service handles its first records");
    int victim = leader_of(&r, r.topic, 0, NULL);
    if (victim < 1) fail_msg("partition 0 has no leader");
    event *e = event_begin(&r, "SIGKILL broker %d (leader of input partition 0), restart it", victim);
    broker_cmd("kill", victim);
    not_led_by n = {0, victim};
    wait_for(&r, leader_moved, &n, 60000, "partition 0 gets a new leader");
    /* 180 s: librdkafka 2.0.2 can take more than 90 s to find its group
     * coordinator again after a broker loss (a request stuck on the dead
     * broker, confluentinc/librdkafka#4970: docs/real-kafka.md); seen once in
     * CI, the session lost at +6 s and no rejoin for 73 s. The test proves
     * the guarantees, not librdkafka's recovery time. */
    wait_progress_or_restart(&r, 3 * RATE, 180000, "the service keeps handling with broker down");
    broker_cmd("start-broker", victim);
    wait_for(&r, fully_replicated, NULL, 90000, "the restarted broker is back in every ISR");
    event_end(&r, e);
    wait_progress(&r, RATE, 60000, "the service keeps handling after the restart");
    finish(&r, &f);
    teardown(&r, &f);
}

static void test_leader_kill_tracked(void **state) {
    (void)state;
    leader_kill(false);
}

static void test_leader_kill_transactional(void **state) {
    (void)state;
    leader_kill(true);
}

/* The group coordinator's broker is SIGKILLed mid-run, then restarted. */
static void test_coordinator_kill(void **state) {
    (void)state;
    run r;
    figures f;
    setup(&r, "coordinator-kill", false);
    start_load(&r);
    char id[128];
    snprintf(id, sizeof id, "%s-instance", r.topic);
    spawn(&r, id, false);
    wait_progress(&r, 2 * RATE, 60000, "the service handles its first records");
    int victim = -1;
    for (int i = 0; i < 20 && victim < 1; i++) victim = coordinator_of(&r);
    if (victim < 1) fail_msg("the group's coordinator is not known");
    event *e = event_begin(&r, "SIGKILL broker %d (the group coordinator), restart it", victim);
    broker_cmd("kill", victim);
    wait_progress_or_restart(&r, 3 * RATE, 180000,
                             "the group commits again with its coordinator's broker down"); /* as above */
    int now = coordinator_of(&r);
    fprintf(stderr, "%s: coordinator now broker %d\n", r.name, now);
    broker_cmd("start-broker", victim);
    wait_for(&r, fully_replicated, NULL, 90000, "the restarted broker is back in every ISR");
    event_end(&r, e);
    wait_progress(&r, RATE, 60000, "the service keeps handling after the restart");
    finish(&r, &f);
    teardown(&r, &f);
}

/* A rolling restart of 3 instances with instance ids: each one SIGTERMed and
 * started again (same id), and back before the next one goes. */
static void test_rolling_restart(void **state) {
    (void)state;
    run r;
    figures f;
    setup(&r, "rolling", false);
    start_load(&r);
    proc *inst[3];
    for (int i = 0; i < 3; i++) {
        char id[128];
        snprintf(id, sizeof id, "static-%s-%d", r.topic, i + 1);
        inst[i] = spawn(&r, id, true);
    }
    for (int i = 0; i < 3; i++) wait_for(&r, runs_started, inst[i], 60000, "each instance handles records");
    wait_progress(&r, 2 * RATE, 60000, "the service handles records");
    for (int i = 0; i < 3; i++) {
        event *e = event_begin(&r, "SIGTERM instance %d, start it again (same instance id)", i + 1);
        char id[160];
        snprintf(id, sizeof id, "%s", inst[i]->id);
        reap(&r);
        stop_worker(&r, live_proc(&r, id));
        inst[i] = spawn(&r, id, true);
        wait_for(&r, runs_started, inst[i], 60000, "the restarted instance handles records again");
        wait_progress(&r, RATE, 60000, "the service handles records after the restart");
        event_end(&r, e);
    }
    finish(&r, &f);
    teardown(&r, &f);
}

/* Who handled partition p last before t (its pid), 0 if nobody. */
static long owner_before(const reply *v, size_t n, int p, long long t) {
    long pid = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].p == p && v[i].ms < t) pid = v[i].pid;
    return pid;
}

/* Who handled partition p first after t, 0 if nobody. */
static long owner_after(const reply *v, size_t n, int p, long long t) {
    for (size_t i = 0; i < n; i++)
        if (v[i].p == p && v[i].ms > t) return v[i].pid;
    return 0;
}

/* Whether a process other than pid handled partition p in [from, to]. */
static bool handled_by_other(const reply *v, size_t n, int p, long long from, long long to, long pid) {
    for (size_t i = 0; i < n; i++)
        if (v[i].p == p && v[i].ms >= from && v[i].ms <= to && v[i].pid != pid) return true;
    return false;
}

/* The longest stretch partition p went without a handled record that
 * began in [from, to] (one that began in an earlier event is that event's:
 * charged to both, the stall of an excused event failed the next one), and
 * its ends in *g0 and *g1 (0 and 0 if none). v is sorted by partition, then
 * time. */
static long long gap_of(const reply *v, size_t n, int p, long long from, long long to, long long *g0, long long *g1) {
    long long g = 0;
    *g0 = *g1 = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i].p == p && v[i - 1].p == p && v[i - 1].ms >= from && v[i - 1].ms <= to && v[i].ms - v[i - 1].ms > g) {
            g = v[i].ms - v[i - 1].ms;
            *g0 = v[i - 1].ms;
            *g1 = v[i].ms;
        }
    return g;
}

/* How many records of partition p were handled strictly inside (from, to). */
static long handled_inside(const reply *v, size_t n, int p, long long from, long long to) {
    long k = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].p == p && v[i].ms > from && v[i].ms < to) k++;
    return k;
}

/* When partition p was last handled at or before t, -1 if never. */
static long long last_handled(const reply *v, size_t n, int p, long long t) {
    long long at = -1;
    for (size_t i = 0; i < n; i++)
        if (v[i].p == p && v[i].ms <= t) at = v[i].ms;
    return at;
}

static bool all_partitions_moved_on(run *r, void *arg) {
    int64_t *since = arg, at[PARTS];
    if (!committed(r, at)) return false;
    for (int p = 0; p < PARTS; p++)
        if (at[p] <= since[p]) return false;
    return true;
}

/* Until every partition committed past where it was now: the group has
 * settled on an assignment that handles all of them. */
static void wait_settled(run *r, const char *what) {
    int64_t since[PARTS];
    bool ok = false;
    for (int i = 0; i < 50 && !ok; i++) ok = committed(r, since);
    if (!ok) fail_msg("%s: committed offsets could not be read", what);
    wait_for(r, all_partitions_moved_on, since, 90000, what);
}

/* Scale out 1 -> 3 and back to 1 under load, without instance ids, with the
 * cooperative-sticky assignor: partitions that did not move keep being handled
 * while the others move.
 *
 * Judged per event: each partition that kept its owner must have a handled
 * record inside the rebalance, the longest gap of a moved partition, EDGE_MS
 * in from its ends. (Not that its own longest gap is shorter: librdkafka
 * pauses the whole assignment while the rebalance callback runs, and
 * cstream's (src/kafka/consumer/rebalance.c) loads attempts, drains and commits there,
 * so a kept partition pauses too, up to about a second, and a fast clean
 * rebalance can be shorter than that pause.) A stop-the-world (eager)
 * rebalance stops every partition of a member at its revoke and starts them
 * again at the assignment: the kept partitions of the member whose revoke
 * began the longest moved gap have nothing inside it but at its very ends
 * (EDGE_MS leaves out the skew between partitions there). Only a rebalance of at least JUDGE_MIN_MS is judged:
 * longer than the kept partitions' pause in the callback, and with the input
 * at RATE over PARTS partitions a kept partition gets a record every
 * PARTS * 1000 / RATE ms, dozens inside the judged stretch; a shorter one
 * (an eager rebalance here takes about 0.1 s) tells nothing. At least one
 * scale-out must be judged: there the member giving partitions away keeps the
 * others, which an eager rebalance stops; in a scale-in the survivors' kept
 * partitions go on under any assignor until they hear of the rebalance.
 * A run whose scale-outs all took under JUDGE_MIN_MS (at least two of them;
 * those that lost an assignment, below, aside) has nothing to judge and
 * passes: no member stopped for longer (the consumer protocol's usual case,
 * and eager's on a quiet cluster); the figures still show them.
 *
 * librdkafka 2.0.2 declares a member's whole assignment lost when an offset
 * commit sent during a rebalance comes back ILLEGAL_GENERATION (#4059, fixed
 * in 2.10.0): then the partitions it kept stop too, until it rejoins, and
 * what it handled since its last commit is handled again. cstream commits
 * the revoked partitions in the revoke callback, where that is allowed; its
 * periodic commit is what can collide. So the workers commit every 5 s here
 * instead of 100 ms, making the collision rare (at 100 ms and at 2 s every
 * scale-out hit it in our runs), and an event in which a
 * worker logged a lost assignment (from its start to the next event's, or
 * the end of the run) is counted and reported, not judged. */
/* A gap's start is known to a record's spacing (PARTS * 1000 / RATE ms): one
 * that begins within SLACK_MS of an event's end, the next event beginning
 * right after it, is the next event's (a scale-in's SIGTERM follows the
 * scale-out's end at once, and the leaving member's last record can come
 * just before it). */
enum { JUDGE_MIN_MS = 1500, EDGE_MS = 250, SLACK_MS = 3 * PARTS * 1000 / RATE, SCALE_CYCLES = 2 };
_Static_assert(SCALE_CYCLES * 4 <= MAX_EVENTS, "room for every scale event");
_Static_assert((JUDGE_MIN_MS - 2 * EDGE_MS) * RATE / PARTS / 1000 >= 10,
               "a judged stretch holds at least 10 input records of each partition");

static void test_scale_out_in(void **state) {
    (void)state;
    run r;
    figures f;
    setup(&r, "scale", false);
    r.dynamic = true; /* "without instance ids": members that leave when they stop */
    snprintf(r.extra[r.n_extra++], sizeof r.extra[0], "assignor=%s",
             getenv("CS_ASSIGNOR") ? getenv("CS_ASSIGNOR") : "cooperative-sticky");
    snprintf(r.extra[r.n_extra++], sizeof r.extra[0], "commit_ms=%s",
             getenv("CS_COMMIT_MS") ? getenv("CS_COMMIT_MS") : "5000");
    start_load(&r);
    char id[128];
    proc *inst[3];
    int spawned = 1;
    bool scale_out[MAX_EVENTS] = {false};
    snprintf(id, sizeof id, "%s-1", r.topic);
    inst[0] = spawn(&r, id, false);
    wait_progress(&r, 2 * RATE, 60000, "the first instance handles records");
    /* Two cycles: a scale-out that loses an assignment (librdkafka #4059 on
     * 2.0.2) cannot be judged, and one cycle's two scale-outs were both left
     * unjudgeable that way often enough to fail CI. */
    for (int cycle = 0; cycle < SCALE_CYCLES; cycle++) {
        for (int i = 1; i < 3; i++) {
            scale_out[r.n_ev] = true;
            event *e = event_begin(&r, "scale out to %d instances", i + 1);
            snprintf(id, sizeof id, "%s-%d", r.topic, ++spawned);
            inst[i] = spawn(&r, id, false);
            wait_for(&r, runs_started, inst[i], 60000, "the new instance gets partitions and handles records");
            wait_settled(&r, "every partition is handled after the scale-out");
            event_end(&r, e);
        }
        for (int i = 2; i >= 1; i--) {
            event *e = event_begin(&r, "scale in to %d instances (SIGTERM)", i);
            reap(&r);
            stop_worker(&r, live_proc(&r, inst[i]->id));
            wait_settled(&r, "every partition is handled after the scale-in");
            event_end(&r, e);
        }
    }
    finish(&r, &f);
    /* Per event: while the moved partitions go unhandled (the rebalance: the
     * longest gap of a moved partition, from its old owner's last record to
     * its new owner's first), every partition that kept its owner must be
     * handled (see above for the judging rules). */
    const reply *v = f.rs.v;
    size_t n = f.rs.n;
    int judged_out = 0, judged_in = 0, quick_out = 0, lost_out = 0, n_out = 0;
    for (int e = 0; e < r.n_ev; e++) {
        const event *ev = &r.ev[e];
        long long rebalance = 0, g0 = 0, g1 = 0, kept_gap = 0;
        int moved = 0, kept = 0, kept_p[PARTS];
        for (int p = 0; p < PARTS; p++) {
            long before = owner_before(v, n, p, ev->start), after = owner_after(v, n, p, ev->end);
            long long a0, a1, g = gap_of(v, n, p, ev->start - SLACK_MS, ev->end - SLACK_MS, &a0, &a1);
            /* Moved: another owner after the event, or another process
             * handled it meanwhile (the event ends once every partition
             * committed again, which the old owner's revoke can do: a
             * partition can move and come back before it is handled again). */
            if (before != after || handled_by_other(v, n, p, ev->start, ev->end, before)) {
                moved++;
                if (g > rebalance) {
                    rebalance = g;
                    g0 = a0;
                    g1 = a1;
                }
            } else {
                kept_p[kept++] = p;
                if (g > kept_gap) kept_gap = g;
            }
        }
        /* The judgement: the fewest records a kept partition handled inside
         * the rebalance's gap, EDGE_MS in from its ends; a kept partition
         * already unhandled when the event began is left out (a stall an
         * earlier event left behind, charged to that one). */
        long long from = g0 + EDGE_MS, to = g1 - EDGE_MS;
        long fewest = -1;
        int worst = -1, carried = 0;
        bool judged = !ev->lost_assignments && moved > 0 && rebalance >= JUDGE_MIN_MS;
        for (int k = 0; judged && k < kept; k++) {
            if (last_handled(v, n, kept_p[k], from) < ev->start) {
                carried++;
                continue;
            }
            long h = handled_inside(v, n, kept_p[k], from, to);
            if (fewest < 0 || h < fewest) {
                fewest = h;
                worst = kept_p[k];
            }
        }
        if (fewest < 0) judged = false; /* no kept partition to judge */
        char verdict[256];
        if (ev->lost_assignments)
            snprintf(verdict, sizeof verdict, "not judged: an assignment was lost (librdkafka #4059)");
        else if (moved > 0 && rebalance < JUDGE_MIN_MS)
            snprintf(verdict, sizeof verdict, "not judged: the rebalance took under %d ms", JUDGE_MIN_MS);
        else if (!judged && kept == 0) snprintf(verdict, sizeof verdict, "not judged: no partition kept its owner");
        else if (!judged)
            snprintf(verdict, sizeof verdict, "not judged: no kept partition handled when the event began");
        else
            snprintf(verdict, sizeof verdict,
                     "judged: fewest records a kept partition handled inside the rebalance, %d ms in from its "
                     "ends: %ld%s",
                     EDGE_MS, fewest, carried ? " (kept partitions unhandled since before the event left out)" : "");
        figure("%s: event %d \"%s\": %d partitions moved, unhandled for up to %lld ms (the rebalance); "
               "%d kept their owner, longest gap %lld ms; %s\n",
               r.name, e + 1, ev->what, moved, rebalance, kept, kept_gap, verdict);
        n_out += scale_out[e];
        if (ev->lost_assignments) {
            lost_out += scale_out[e];
            continue;
        }
        if (moved == 0) fail_msg("event \"%s\": no partition moved", ev->what);
        if (scale_out[e] && rebalance < JUDGE_MIN_MS) quick_out++;
        if (!judged) continue;
        if (scale_out[e]) judged_out++;
        else judged_in++;
        if (fewest == 0)
            fail_msg("event \"%s\": partition %d kept its owner but handled no record while the moved partitions "
                     "went unhandled (%lld ms, from %lld to %lld; none between %lld and %lld), as in a "
                     "stop-the-world rebalance",
                     ev->what, worst, rebalance, g0, g1, from, to);
    }
    fprintf(stderr,
            "%s: judged %d scale-outs and %d scale-ins; of %d scale-outs %d took under %d ms, %d lost an "
            "assignment\n",
            r.name, judged_out, judged_in, n_out, quick_out, JUDGE_MIN_MS, lost_out);
    if (!judged_out && (quick_out < 2 || quick_out + lost_out < n_out))
        fail_msg("no scale-out could be judged (each lost an assignment, librdkafka #4059, had no kept partition "
                 "to judge, or took under %d ms, and not all the others, at least two, took under it): the promise "
                 "was not shown",
                 JUDGE_MIN_MS);
    teardown(&r, &f);
}

int main(int argc, char **argv) {
    const struct CMUnitTest all[] = {
        cmocka_unit_test(test_leader_kill_tracked), cmocka_unit_test(test_leader_kill_transactional),
        cmocka_unit_test(test_coordinator_kill),    cmocka_unit_test(test_rolling_restart),
        cmocka_unit_test(test_scale_out_in),
    };
    if (argc > 1) {
        char want[128];
        snprintf(want, sizeof want, "test_%s", argv[1]);
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (!strcmp(all[i].name, want)) {
                const struct CMUnitTest one[] = {all[i]};
                return _cmocka_run_group_tests(argv[1], one, 1, NULL, NULL);
            }
        fprintf(stderr, "test_cluster: no test %s\n", argv[1]);
        return 2;
    }
    return cmocka_run_group_tests(all, NULL, NULL);
}
