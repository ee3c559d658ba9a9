/* test_static_membership.c — static membership (KIP-345) on a real broker
 * only: librdkafka 2.0.2's mock accepts group.instance.id and ignores it (no
 * fencing, no held partitions). The payouts service is
 * support/payout_worker.c in child processes; an instance id reaches it as
 * CSTREAM_INSTANCE_ID.
 *
 * - restart_with_instance_id / restart_without_instance_id: the service,
 *   with librdkafka's default session timeout (45 s), is SIGKILLed 0.5–3 s
 *   after it showed progress and restarted at once; the table gives, per
 *   round and as the median, the time from the restart to the first payout
 *   handled, then lost and duplicated payouts over the whole run (0 lost,
 *   committed = log end after the last clean stop). With an instance id the
 *   restarted process must handle a payout before the killed one's session
 *   could have expired (42-45 s after the kill, SESSION_EXPIRES_MS): only a
 *   static member that takes its own place back can (under the classic
 *   protocol; CS_GROUP_PROTOCOL=consumer runs the rounds under KIP-848).
 *   CS_ROUNDS (2) and CS_PLAIN_ROUNDS (0: each
 *   round without an instance id waits out the 45 s) set the rounds;
 *   `make proof` runs 8 of each.
 * - fenced_instance_stops: a second process with the same instance id joins
 *   the group; the broker fences the first (FENCED_INSTANCE_ID), which stops
 *   with an ERROR line that says so and commits nothing; the second handles
 *   every payout.
 * - two_subscriptions_one_group: two subscriptions of one process in one
 *   group on one topic get distinct group.instance.ids (the documented
 *   "<app>.<group>.<subscription>.<instance id>" and the same with ".2"), so
 *   neither fences the other. Their group is fresh: the log says "no
 *   committed position yet", not that a previous owner did not stop cleanly.
 * - scale_in_*: a member shut down for good. Without an instance id its
 *   graceful stop leaves the group and the other member gets its partitions
 *   at once. With one, librdkafka sends no LeaveGroup: the broker keeps the
 *   stopped member (and its partitions) until session.timeout.ms, here 60 s,
 *   or until an operator removes it with the AdminClient
 *   (tests/real/RemoveStaticMembers.java); after the removal the other
 *   member gets them at once. Without the removal (and a 6 s session) they
 *   move when the session expires.
 *
 * CS_TEST=<pattern> runs only the tests whose names match. Every wait is
 * for a condition, with a deadline and a message. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "cstest.h"

#ifndef PAYOUT_WORKER
#error "PAYOUT_WORKER must name the payout_worker executable"
#endif
#ifndef CSTREAM_SOURCE_DIR
#error "CSTREAM_SOURCE_DIR must name the source tree"
#endif

/* A killed dynamic member's session expires 45 s (librdkafka's default
 * session.timeout.ms) after its last heartbeat, which came at most 3 s
 * (heartbeat.interval.ms) before the kill: no restart without static
 * membership gets the partitions back earlier than 42 s after the kill. */
enum { PARTS = 4, MAX_ROUNDS = 32, SESSION_EXPIRES_MS = 45000 - 3000 };
#define APP "payout-worker" /* payout_worker's cs_app name: the first part of its group.instance.id */

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

typedef struct run {
    char topic[128], group[160], out[256];
    int payouts;
    unsigned seed;
} run;

static void setup(run *r, const char *prefix, int payouts) {
    memset(r, 0, sizeof *r);
    r->payouts = payouts;
    cst_fresh(prefix, PARTS, r->topic, r->group, sizeof r->topic);
    snprintf(r->out, sizeof r->out, "/tmp/%s.out", r->topic);
    unlink(r->out);
    if (payouts) CST_OK(cs_test_produce_many(cst_cluster, r->topic, "payout-", payouts));
    setenv("CSTREAM_BROKERS", cs_test_cluster_brokers(cst_cluster), 1);
    r->seed = (unsigned)time(NULL) ^ (unsigned)getpid();
}

/* How the next child runs (NULL: the variable is not passed on). */
typedef struct child_env {
    const char *instance; /* CSTREAM_INSTANCE_ID */
    const char *session;  /* PAYOUT_SESSION_TIMEOUT_MS */
    const char *assign;   /* PAYOUT_ASSIGN_FILE */
    const char *log;      /* PAYOUT_LOG_FILE */
    const char *protocol; /* PAYOUT_GROUP_PROTOCOL */
} child_env;

static void set_or_unset(const char *name, const char *value) {
    if (value) setenv(name, value, 1);
    else unsetenv(name);
}

static pid_t spawn(run *r, const child_env *e, int workers) {
    set_or_unset("CSTREAM_INSTANCE_ID", e->instance);
    set_or_unset("PAYOUT_SESSION_TIMEOUT_MS", e->session);
    set_or_unset("PAYOUT_ASSIGN_FILE", e->assign);
    set_or_unset("PAYOUT_LOG_FILE", e->log);
    set_or_unset("PAYOUT_GROUP_PROTOCOL", e->protocol);
    char w[16];
    snprintf(w, sizeof w, "%d", workers);
    char *const argv[] = {PAYOUT_WORKER, r->topic, r->group, r->out, w, "tracked", NULL};
    pid_t pid = cst_spawn(PAYOUT_WORKER, argv);
    unsetenv("CSTREAM_INSTANCE_ID");
    unsetenv("PAYOUT_SESSION_TIMEOUT_MS");
    unsetenv("PAYOUT_ASSIGN_FILE");
    unsetenv("PAYOUT_LOG_FILE");
    unsetenv("PAYOUT_GROUP_PROTOCOL");
    if (pid <= 0) fail_msg("could not start %s", PAYOUT_WORKER);
    return pid;
}

/* Bytes in the output file: it grows by one line per payout handled. */
static off_t out_size(const run *r) {
    struct stat st;
    return stat(r->out, &st) == 0 ? st.st_size : 0;
}

/* Distinct payouts handled and handler runs, from the output file. */
static size_t handled(const run *r, size_t *runs) {
    cst_seen *s = cst_seen_new(PARTS, r->payouts);
    FILE *f = fopen(r->out, "r");
    int p;
    long long o;
    size_t n = 0;
    while (f && fscanf(f, "%d %lld", &p, &o) == 2) {
        cst_seen_add(s, p, o);
        n++;
    }
    if (f) fclose(f);
    size_t d = cst_seen_distinct(s);
    cst_seen_free(s);
    if (runs) *runs = n;
    return d;
}

/* Waits until the output grew past `size`; false at the deadline or if the
 * child exited. */
static bool wait_growth(const run *r, off_t size, pid_t child, int timeout_ms) {
    for (int64_t until = now_ms() + timeout_ms; now_ms() < until;) {
        if (out_size(r) > size) return true;
        int status;
        if (waitpid(child, &status, WNOHANG) == child) fail_msg("worker exited early, status %d", status);
        usleep(2 * 1000);
    }
    return false;
}

static void stop_child(pid_t child, const char *what) {
    kill(child, SIGTERM);
    int status;
    if (waitpid(child, &status, 0) != child) fail_msg("%s: waitpid failed", what);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("%s stopped badly: %s %d", what, WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* Waits until every payout was handled, stops the child gracefully, and
 * checks that the group's committed position is the end of every partition. */
static void finish(run *r, pid_t child) {
    for (int64_t until = now_ms() + 240000;;) {
        size_t d = handled(r, NULL);
        if (d >= (size_t)r->payouts) break;
        if (now_ms() > until) fail_msg("only %zu of %d payouts handled after 240 s", d, r->payouts);
        usleep(20 * 1000);
    }
    stop_child(child, "last worker");
    for (int p = 0; p < PARTS; p++) {
        int64_t end = 0, committed = -1;
        CST_OK(cs_test_end_offset(cst_cluster, r->topic, p, &end));
        CST_OK(cs_test_committed(cst_cluster, r->group, r->topic, p, &committed));
        if (committed != end)
            fail_msg("%s/%d: committed %lld after the last clean stop, log end %lld", r->topic, p, (long long)committed,
                     (long long)end);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* ---- restart: SIGKILL, restart at once, time to the first payout handled ---- */

static void restart_rounds(const char *label, bool with_instance, int rounds) {
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    run r;
    /* 2 workers handle about 2,500 payouts a second: enough for every round
     * to make progress, and some left for the last worker. */
    setup(&r, with_instance ? "restart-static" : "restart-plain", 8000 * (rounds + 1));
    char instance[200];
    snprintf(instance, sizeof instance, "%s-instance", r.topic);
    /* CS_GROUP_PROTOCOL=consumer runs the rounds under KIP-848 (the session
     * is then the broker's group.consumer.session.timeout.ms: Kafka's 45 s,
     * 10 s on the broker of scripts/kafka). */
    child_env e = {
        .instance = with_instance ? instance : NULL, .session = "default", .protocol = getenv("CS_GROUP_PROTOCOL")};
    double secs[MAX_ROUNDS];
    int64_t since_kill[MAX_ROUNDS];
    pid_t child = spawn(&r, &e, 2);
    if (!wait_growth(&r, 0, child, 120000)) fail_msg("%s: the first worker handled nothing within 120 s", label);
    for (int k = 0; k < rounds; k++) {
        /* A kill at a random moment 0.5-3 s after the child showed
         * progress (a chosen moment, not a wait for a condition). */
        usleep((useconds_t)(500 + rand_r(&r.seed) % 2500) * 1000);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        off_t at_kill = out_size(&r);
        int64_t killed = now_ms();
        child = spawn(&r, &e, 2);
        int64_t restarted = now_ms();
        if (!wait_growth(&r, at_kill, child, 120000))
            fail_msg("%s round %d: the restarted worker handled nothing within 120 s", label, k + 1);
        int64_t first = now_ms();
        secs[k] = (double)(first - restarted) / 1000.0;
        since_kill[k] = first - killed;
    }
    finish(&r, child);
    size_t runs;
    size_t distinct = handled(&r, &runs);
    bool consumer = e.protocol && !strcmp(e.protocol, "consumer");
    printf("\nrestart %s: %d payouts, %d partitions, 2 workers, %s, %d SIGKILLs (seed %u)\n", label, r.payouts, PARTS,
           consumer ? "consumer group protocol, the broker's group.consumer.session.timeout.ms"
                    : "classic protocol, session.timeout.ms librdkafka's default (45 s)",
           rounds, r.seed);
    printf("| round | restart to first payout handled (s) |\n|---|---|\n");
    for (int k = 0; k < rounds; k++) printf("| %d | %.2f |\n", k + 1, secs[k]);
    if (rounds) printf("median %.2f s\n", median(secs, rounds));
    printf("payouts %d, handled %zu times, distinct %zu: lost %lld, duplicated %zu\n", r.payouts, runs, distinct,
           (long long)r.payouts - (long long)distinct, runs - distinct);
    unlink(r.out);
    assert_int_equal(distinct, r.payouts); /* 0 lost */
    /* The broker held the killed member's partitions until the restarted
     * static member took its place back: before its session could expire. */
    for (int k = 0; with_instance && k < rounds; k++)
        if (since_kill[k] >= SESSION_EXPIRES_MS)
            fail_msg("round %d: the restarted static member handled its first payout %lld ms after the kill, not "
                     "before the killed one's session could expire (42-45 s): it did not take its place back",
                     k + 1, (long long)since_kill[k]);
}

static void restart_with_instance_id(void **state) {
    (void)state;
    restart_rounds("with an instance id", true, env_int("CS_ROUNDS", 2));
}

static void restart_without_instance_id(void **state) {
    (void)state;
    int rounds = env_int("CS_PLAIN_ROUNDS", 0);
    if (rounds <= 0) {
        printf("restart without an instance id: CS_PLAIN_ROUNDS=0 (each round waits out the 45 s session; "
               "make proof runs 8)\n");
        return;
    }
    restart_rounds("without an instance id", false, rounds);
}

/* ---- the consumer protocol (KIP-848): a restart after a SIGKILL -------------
 * The restarted static member's join is refused with UNRELEASED_INSTANCE_ID
 * (fatal in librdkafka) while the broker still holds the killed member, until
 * group.consumer.session.timeout.ms (45 s by default, 10 s on the broker of
 * scripts/kafka) expires it. cstream creates the consumer again and retries
 * with backoff (consumer.c, rejoin): the restarted process itself gets in,
 * with one WARN line naming the bound it read from the broker, and 0 lost. A
 * second live process with the same id is refused in the end: it holds the
 * id beyond the retry bound (twice the session timeout), and the newcomer
 * stops with an ERROR. */
static void restart_with_instance_id_under_consumer_protocol(void **state) {
    (void)state;
#if RD_KAFKA_VERSION < 0x020c0000
    cst_skip("the consumer group protocol needs librdkafka >= 2.12.0, this build runs %s", rd_kafka_version_str());
#endif
    run r;
    setup(&r, "restart-static-kip848", 20000);
    char instance[200], log[300];
    snprintf(instance, sizeof instance, "%s-instance", r.topic);
    snprintf(log, sizeof log, "/tmp/%s.log", r.topic);
    unlink(log);
    child_env e = {.instance = instance, .protocol = "consumer", .log = log};
    pid_t child = spawn(&r, &e, 2);
    if (!wait_growth(&r, 0, child, 120000)) fail_msg("the first worker handled nothing within 120 s");
    usleep((useconds_t)(500 + rand_r(&r.seed) % 2500) * 1000); /* a kill at a random moment */
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    off_t at_kill = out_size(&r);
    int64_t killed = now_ms();
    child = spawn(&r, &e, 2);
    /* wait_growth fails the test if the restarted process exits. */
    if (!wait_growth(&r, at_kill, child, 150000)) fail_msg("the restarted worker handled nothing within 150 s");
    int64_t first = now_ms() - killed;
    char *text = cst_slurp(log);
    char line[1024];
    bool said = cst_log_line(text, "UNRELEASED_INSTANCE_ID", line, sizeof line) != NULL;
    free(text);
    finish(&r, child);
    size_t runs;
    size_t distinct = handled(&r, &runs);
    printf("\nrestart with an instance id under group.protocol=consumer: SIGKILL, restarted at once: first payout "
           "%.2f s after the kill; payouts %d, handled %zu times, distinct %zu: lost %lld, duplicated %zu\n",
           (double)first / 1000.0, r.payouts, runs, distinct, (long long)r.payouts - (long long)distinct,
           runs - distinct);
    if (said) printf("the restarted process said: %s\n", line);
    unlink(r.out);
    unlink(log);
    assert_int_equal(distinct, r.payouts); /* 0 lost */
    /* The retry bound came from the broker's session timeout. */
    assert_true(said);
    assert_non_null(strstr(line, "twice the broker's group.consumer.session.timeout.ms="));
}

static bool exited(pid_t pid, int *status);

static void second_live_instance_refused_under_consumer_protocol(void **state) {
    (void)state;
#if RD_KAFKA_VERSION < 0x020c0000
    cst_skip("the consumer group protocol needs librdkafka >= 2.12.0, this build runs %s", rd_kafka_version_str());
#endif
    run r;
    setup(&r, "second-static-kip848", 400000);
    char instance[200], log[300];
    snprintf(instance, sizeof instance, "%s-instance", r.topic);
    snprintf(log, sizeof log, "/tmp/%s.log", r.topic);
    unlink(log);
    child_env first_env = {.instance = instance, .protocol = "consumer"};
    child_env second_env = {.instance = instance, .protocol = "consumer", .log = log};
    pid_t first = spawn(&r, &first_env, 2);
    if (!wait_growth(&r, 0, first, 120000)) fail_msg("the first worker handled nothing within 120 s");

    /* A stop asked for while refused and retrying is a clean stop (it was
     * once taken for a failed rejoin and exited 1). */
    char quit_log[320];
    snprintf(quit_log, sizeof quit_log, "/tmp/%s.quit.log", r.topic);
    unlink(quit_log);
    child_env quit_env = {.instance = instance, .protocol = "consumer", .log = quit_log};
    pid_t quitter = spawn(&r, &quit_env, 2);
    int quit_status = 0;
    for (int64_t until = now_ms() + 60000;;) {
        char *text = cst_slurp(quit_log);
        bool refused = strstr(text, "join refused") != NULL;
        free(text);
        if (refused) break;
        if (exited(quitter, &quit_status) || now_ms() > until) {
            kill(first, SIGKILL); /* no child outlives a failed test */
            kill(quitter, SIGKILL);
            fail_msg("the process refused at join %s",
                     now_ms() > until ? "logged no refusal within 60 s" : "exited before it was stopped");
        }
        usleep(20 * 1000);
    }
    kill(quitter, SIGTERM);
    waitpid(quitter, &quit_status, 0);
    char *quit_text = cst_slurp(quit_log);
    if (!WIFEXITED(quit_status) || WEXITSTATUS(quit_status) != 0 || strstr(quit_text, "could not rejoin")) {
        kill(first, SIGKILL);
        fail_msg("stopped while retrying its join: exit status %d, said:\n%s",
                 WIFEXITED(quit_status) ? WEXITSTATUS(quit_status) : -1, quit_text);
    }
    free(quit_text);
    unlink(quit_log);

    int64_t started = now_ms();
    pid_t second = spawn(&r, &second_env, 2);
    int status = 0;
    bool ended = false;
    for (int64_t until = now_ms() + 150000; now_ms() < until && !ended;) {
        ended = exited(second, &status);
        if (exited(first, &status)) fail_msg("the first worker exited while the second tried to join");
        usleep(20 * 1000);
    }
    int64_t took = now_ms() - started;
    if (!ended) {
        kill(second, SIGKILL);
        waitpid(second, NULL, 0);
        kill(first, SIGKILL);
        waitpid(first, NULL, 0);
        fail_msg("the second process with the same instance id was not refused within 150 s");
    }
    char *text = cst_slurp(log);
    char line[1024];
    bool said = cst_log_line(text, "refused at join (UNRELEASED_INSTANCE_ID)", line, sizeof line) != NULL;
    free(text);
    off_t before = out_size(&r);
    bool first_alive = wait_growth(&r, before, first, 30000);
    kill(first, SIGKILL);
    waitpid(first, NULL, 0);
    printf("\nsecond live process with the same instance id under group.protocol=consumer: refused after %.1f s, "
           "exit status %d; the first kept handling: %s\n",
           (double)took / 1000.0, WIFEXITED(status) ? WEXITSTATUS(status) : -1, first_alive ? "yes" : "no");
    if (said) printf("it said: %s\n", line);
    unlink(r.out);
    unlink(log);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    assert_true(said);
    assert_true(first_alive);
}

/* ---- fencing ------------------------------------------------------------------ */

static bool exited(pid_t pid, int *status) { return waitpid(pid, status, WNOHANG) == pid; }

static void fenced_instance_stops(void **state) {
    (void)state;
    run r;
    setup(&r, "fenced", 30000);
    char instance[200], log_a[300], log_b[300], static_id[512];
    snprintf(instance, sizeof instance, "%s-instance", r.topic);
    snprintf(log_a, sizeof log_a, "/tmp/%s.a.log", r.topic);
    snprintf(log_b, sizeof log_b, "/tmp/%s.b.log", r.topic);
    snprintf(static_id, sizeof static_id, "%s.%s.%s.%s", APP, r.group, r.topic, instance);
    unlink(log_a);
    unlink(log_b);
    pid_t a = spawn(&r, &(child_env){.instance = instance, .log = log_a}, 2);
    if (!wait_growth(&r, 0, a, 120000)) fail_msg("the first instance handled nothing within 120 s");
    pid_t b = spawn(&r, &(child_env){.instance = instance, .log = log_b}, 2);
    int status = 0;
    int64_t until = now_ms() + 60000;
    while (!exited(a, &status)) {
        int b_status;
        if (exited(b, &b_status)) {
            char *blog = cst_slurp(log_b);
            fail_msg("the second instance stopped (status %d) instead of fencing the first; its log:\n%s", b_status,
                     blog);
        }
        if (now_ms() > until) {
            kill(a, SIGKILL);
            kill(b, SIGKILL);
            fail_msg("the first instance was not fenced within 60 s of the second one's start");
        }
        usleep(20 * 1000);
    }
    char *alog = cst_slurp(log_a);
    printf("fenced instance: %s %d; its log:\n%s", WIFEXITED(status) ? "exit" : "signal",
           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), alog);
    if (!WIFEXITED(status) || WEXITSTATUS(status) == 0) fail_msg("the fenced instance did not exit with an error");
    const char *line = strstr(alog, "fenced (FENCED_INSTANCE_ID)");
    if (!line) fail_msg("no line says the first instance was fenced");
    const char *bol = line;
    while (bol > alog && bol[-1] != '\n') bol--;
    if (!strstr(bol, "ERROR") || strstr(bol, "ERROR") > line) fail_msg("the fenced line is not an ERROR line");
    assert_non_null(strstr(alog, static_id)); /* names the group.instance.id */
    assert_non_null(strstr(alog, "commits nothing"));
    assert_non_null(strstr(alog, "consumer closed after a fatal error: nothing committed"));
    free(alog);
    finish(&r, b);
    char *blog = cst_slurp(log_b);
    assert_null(strstr(blog, "fenced"));
    free(blog);
    size_t runs;
    size_t distinct = handled(&r, &runs);
    printf("fencing: payouts %d, handled %zu times, distinct %zu\n", r.payouts, runs, distinct);
    assert_int_equal(distinct, r.payouts);
    unlink(r.out);
    unlink(log_a);
    unlink(log_b);
}

/* ---- the broker's view of a group ----------------------------------------------- */

/* The group.instance.ids of the group's members ("" for a dynamic member),
 * from DescribeConsumerGroups; returns their number. */
static int group_members(const char *group, char ids[][256], int max) {
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", cs_test_cluster_brokers(cst_cluster), NULL, 0);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!rk) fail_msg("admin client: %s", errstr);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
    rd_kafka_AdminOptions_set_request_timeout(opts, 10000, errstr, sizeof errstr);
    const char *groups[] = {group};
    rd_kafka_DescribeConsumerGroups(rk, groups, 1, opts, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 20000);
    if (!ev || rd_kafka_event_error(ev))
        fail_msg("describe group %s: %s", group, ev ? rd_kafka_event_error_string(ev) : "no answer in 20 s");
    size_t n = 0;
    const rd_kafka_ConsumerGroupDescription_t **d =
        rd_kafka_DescribeConsumerGroups_result_groups(rd_kafka_event_DescribeConsumerGroups_result(ev), &n);
    if (n != 1 || rd_kafka_ConsumerGroupDescription_error(d[0]))
        fail_msg("describe group %s: %s", group,
                 n != 1 ? "no description" : rd_kafka_error_string(rd_kafka_ConsumerGroupDescription_error(d[0])));
    int members = (int)rd_kafka_ConsumerGroupDescription_member_count(d[0]);
    for (int i = 0; i < members && i < max; i++) {
        const char *id =
            rd_kafka_MemberDescription_group_instance_id(rd_kafka_ConsumerGroupDescription_member(d[0], (size_t)i));
        snprintf(ids[i], sizeof ids[i], "%s", id ? id : "");
    }
    rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return members;
}

static bool has_member(char ids[][256], int n, const char *id) {
    for (int i = 0; i < n; i++)
        if (!strcmp(ids[i], id)) return true;
    return false;
}

/* ---- two subscriptions of one process in one group ----------------------------- */

typedef struct two_subs {
    cst_seen *seen;
    int records;
} two_subs;

static cs_outcome note(cs_delivery *d, void *user) {
    cst_seen_add(user, cs_delivery_partition(d), cs_delivery_offset(d));
    return CS_ACK;
}

static bool all_seen(void *arg) {
    two_subs *t = arg;
    return cst_seen_distinct(t->seen) >= (size_t)t->records;
}

static void two_subscriptions_one_group(void **state) {
    (void)state;
    run r;
    setup(&r, "two-subs", 400);
    char instance[200];
    snprintf(instance, sizeof instance, "%s-instance", r.topic);
    two_subs t = {.seen = cst_seen_new(PARTS, r.payouts), .records = r.payouts};
    cs_app *app = cs_app_new("two-subs", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_instance_id(k, instance));
    cs_sub *s1 = cs_kafka_subscribe(k, r.topic, note, t.seen);
    cs_sub *s2 = cs_kafka_subscribe(k, r.topic, note, t.seen);
    assert_non_null(s1);
    assert_non_null(s2);
    CST_OK(cs_sub_group(s1, r.group));
    CST_OK(cs_sub_group(s2, r.group));
    CST_OK(cs_sub_commit_mode(s1, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_commit_mode(s2, CS_COMMIT_TRACKED));
    CST_OK(cs_app_add_kafka(app, k));
    cs_log_set_level(CS_LOG_INFO);
    cst_capture cap;
    cst_capture_start(&cap);
    CST_OK(cs_app_start(app));
    if (!cst_wait(all_seen, &t, 60000))
        fail_msg("only %zu of %d records handled within 60 s", cst_seen_distinct(t.seen), r.payouts);
    char first[512], second[600];
    snprintf(first, sizeof first, "two-subs.%s.%s.%s", r.group, r.topic, instance);
    snprintf(second, sizeof second, "%s.2", first);
    char ids[8][256];
    int n = group_members(r.group, ids, 8);
    for (int i = 0; i < n && i < 8; i++) printf("member %d: group.instance.id %s\n", i, ids[i]);
    cs_err err = cs_app_stop(app); /* a fenced consumer would have stopped the app with CS_ERR_FATAL */
    char *log = cst_capture_stop(&cap);
    fputs(log, stderr);
    if (err) fail_msg("the app stopped with %s: %s", cs_err_name(err), cs_errmsg());
    /* A fresh group: its first start is not a crash of a previous owner. */
    assert_non_null(strstr(log, "no committed position yet"));
    assert_null(strstr(log, "did not stop cleanly"));
    free(log);
    cs_app_destroy(app);
    cst_seen_free(t.seen);
    assert_int_equal(n, 2);
    assert_true(has_member(ids, n, first));
    assert_true(has_member(ids, n, second));
}

/* ---- scale-in: a member shut down for good ------------------------------------ */

typedef struct assignment {
    const char *path;
    int want; /* partitions */
} assignment;

/* The partitions the child holds now, from its "+P" / "-P" lines. */
static int assigned_now(const char *path) {
    bool held[PARTS] = {false};
    FILE *f = fopen(path, "r");
    char sign;
    int p;
    while (f && fscanf(f, " %c%d", &sign, &p) == 2)
        if (p >= 0 && p < PARTS) held[p] = sign == '+';
    if (f) fclose(f);
    int n = 0;
    for (int i = 0; i < PARTS; i++) n += held[i];
    return n;
}

static bool holds(void *arg) {
    assignment *a = arg;
    return assigned_now(a->path) == a->want;
}

/* Two members of one group (session timeout `session_ms`) share the 4
 * partitions; the first is stopped gracefully. Returns how long the second
 * took to hold all 4 after the stop (or after the operator's removal), or -1
 * if it did not within `wait_ms`. With an instance id the test first sees
 * that the broker still keeps the stopped member, then the operator removes
 * it (`remove`) or nobody acts. */
static int64_t scale_in(bool with_instance, bool remove, int session_ms, int wait_ms) {
    run r;
    setup(&r, with_instance ? "scale-in-static" : "scale-in-plain", 0);
    char inst_x[200], inst_y[200], assign_x[300], assign_y[300], static_x[512], static_y[512];
    snprintf(inst_x, sizeof inst_x, "%s-x", r.topic);
    snprintf(inst_y, sizeof inst_y, "%s-y", r.topic);
    snprintf(assign_x, sizeof assign_x, "/tmp/%s.x.assign", r.topic);
    snprintf(assign_y, sizeof assign_y, "/tmp/%s.y.assign", r.topic);
    snprintf(static_x, sizeof static_x, "%s.%s.%s.%s", APP, r.group, r.topic, inst_x);
    snprintf(static_y, sizeof static_y, "%s.%s.%s.%s", APP, r.group, r.topic, inst_y);
    unlink(assign_x);
    unlink(assign_y);
    char session[16];
    snprintf(session, sizeof session, "%d", session_ms);
    pid_t x =
        spawn(&r, &(child_env){.instance = with_instance ? inst_x : NULL, .session = session, .assign = assign_x}, 1);
    assignment ax = {assign_x, PARTS};
    if (!cst_wait(holds, &ax, 60000)) fail_msg("the first member was not assigned the 4 partitions within 60 s");
    pid_t y =
        spawn(&r, &(child_env){.instance = with_instance ? inst_y : NULL, .session = session, .assign = assign_y}, 1);
    assignment ay = {assign_y, PARTS / 2};
    ax.want = PARTS / 2;
    if (!cst_wait(holds, &ay, 60000) || !cst_wait(holds, &ax, 60000))
        fail_msg("the two members did not share the partitions within 60 s (first %d, second %d)",
                 assigned_now(assign_x), assigned_now(assign_y));
    stop_child(x, "the member shut down for good");
    int64_t stopped = now_ms();
    char ids[8][256];
    if (with_instance) {
        /* No LeaveGroup: the broker still counts the stopped member in, and
         * the other keeps only its own half. */
        int n = group_members(r.group, ids, 8);
        printf("after the stop, group %s has %d members:", r.group, n);
        for (int i = 0; i < n && i < 8; i++) printf(" %s", ids[i]);
        printf("\n");
        if (!has_member(ids, n, static_x))
            fail_msg("the stopped static member %s is no longer in the group: it left", static_x);
        assert_true(has_member(ids, n, static_y));
        if (now_ms() - stopped < session_ms) assert_int_equal(assigned_now(assign_y), PARTS / 2);
        if (remove) {
            char cmd[2048];
            snprintf(cmd, sizeof cmd,
                     "java -cp '%s/.cache/kafka/libs/*' %s/tests/real/RemoveStaticMembers.java %s %s %s",
                     CSTREAM_SOURCE_DIR, CSTREAM_SOURCE_DIR, cs_test_cluster_brokers(cst_cluster), r.group, static_x);
            printf("operator: %s\n", cmd);
            fflush(stdout);
            stopped = now_ms(); /* the figure includes the tool's JVM start */
            int rc = system(cmd);
            if (rc != 0) fail_msg("RemoveStaticMembers failed (status %d)", rc);
            printf("the removal command took %lld ms (the JVM compiles and starts the tool); the other member "
                   "holds %d partitions when it returns\n",
                   (long long)(now_ms() - stopped), assigned_now(assign_y));
        }
    }
    ay.want = PARTS;
    int64_t took = cst_wait(holds, &ay, wait_ms) ? now_ms() - stopped : -1;
    stop_child(y, "the remaining member");
    unlink(assign_x);
    unlink(assign_y);
    return took;
}

static void scale_in_without_instance_id(void **state) {
    (void)state;
    /* A dynamic member's graceful stop sends LeaveGroup: the rebalance starts
     * at once, well within the 60 s session timeout. */
    int64_t took = scale_in(false, false, 60000, 30000);
    printf("scale-in without an instance id: the other member held all partitions %lld ms after the stop\n",
           (long long)took);
    if (took < 0) fail_msg("without an instance id the stopped member's partitions did not move within 30 s");
}

static void scale_in_with_instance_id_and_removal(void **state) {
    (void)state;
    int64_t took = scale_in(true, true, 60000, 30000);
    printf("scale-in with an instance id: the other member held all partitions %lld ms after the operator's "
           "removal started (the JVM's start included)\n",
           (long long)took);
    if (took < 0)
        fail_msg("after the operator removed the stopped static member its partitions did not move within 30 s");
}

static void scale_in_with_instance_id_waits_for_the_session(void **state) {
    (void)state;
    /* Nobody removes the stopped static member: its partitions move when its
     * session expires (6 s here, the broker's minimum). */
    int64_t took = scale_in(true, false, 6000, 30000);
    printf("scale-in with an instance id, no removal, session.timeout.ms=6000: the other member held all "
           "partitions %lld ms after the stop\n",
           (long long)took);
    if (took < 0) fail_msg("the stopped static member's partitions did not move within 30 s of a 6 s session");
}

/* The mock has no static membership: every test here needs the real broker. */
static int real_cluster_setup(void **state) {
    int rc = cst_cluster_setup(state);
    if (rc == 0 && cs_test_cluster_is_embedded(cst_cluster)) {
        fprintf(stderr, "test_static_membership: needs a real broker (CSTREAM_BROKERS; tests/with-real-broker): "
                        "librdkafka's mock cluster has no static membership\n");
        return -1;
    }
    return rc;
}

int main(void) {
    const char *only = getenv("CS_TEST"); /* one test by name (a cmocka pattern), e.g. CS_TEST=fenced* */
    if (only && *only) cmocka_set_test_filter(only);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(restart_with_instance_id),
        cmocka_unit_test(restart_without_instance_id),
        cmocka_unit_test(restart_with_instance_id_under_consumer_protocol),
        cmocka_unit_test(second_live_instance_refused_under_consumer_protocol),
        cmocka_unit_test(fenced_instance_stops),
        cmocka_unit_test(two_subscriptions_one_group),
        cmocka_unit_test(scale_in_without_instance_id),
        cmocka_unit_test(scale_in_with_instance_id_and_removal),
        cmocka_unit_test(scale_in_with_instance_id_waits_for_the_session),
    };
    return cmocka_run_group_tests(tests, real_cluster_setup, cst_cluster_teardown);
}
