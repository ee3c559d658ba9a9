/* test_attempts.c — attempt counts survive a restart (Tracked). They are kept
 * in the committed offset metadata; a previous owner that did not stop cleanly
 * makes the record at the committed position count one more attempt. So:
 * - a handler that kills its own process every time still reaches
 *   max_attempts (4) after at least 1 and at most 4 restarts, and the record
 *   is then dead-lettered without running again, its cstream.dlq.attempts
 *   header saying 4;
 * - SIGKILLs between attempts never reset the count: the attempt numbers the
 *   handler sees keep increasing across processes.
 * Every wait for a child has a deadline and fails if the child dies early. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cstest.h"

#ifndef ATTEMPTS_WORKER
#error "ATTEMPTS_WORKER must name the attempts_worker executable"
#endif

enum { MAX_ATTEMPTS = 4, RECORDS = 20, WAIT_MS = 60000 };

typedef struct setup {
    char topic[128], group[160], dlq[160], out[256];
} setup;

static void prepare(setup *s, const char *prefix) {
    cst_fresh(prefix, 1, s->topic, s->group, sizeof s->topic);
    snprintf(s->dlq, sizeof s->dlq, "%s.dlq", s->topic);
    snprintf(s->out, sizeof s->out, "/tmp/%s.out", s->topic);
    unlink(s->out);
    CST_OK(cs_test_topic_create(cst_cluster, s->dlq, 1));
    for (int i = 0; i < RECORDS; i++) CST_OK(cs_test_produce(cst_cluster, s->topic, 0, NULL, 0, "p", 1, NULL));
    setenv("CSTREAM_BROKERS", cs_test_cluster_brokers(cst_cluster), 1);
}

static pid_t spawn(const setup *s, const char *mode) {
    char *const argv[] = {
        ATTEMPTS_WORKER, (char *)s->topic, (char *)s->group, (char *)s->dlq, (char *)s->out, (char *)mode, NULL};
    return cst_spawn(ATTEMPTS_WORKER, argv);
}

/* The attempt numbers of the poison record's runs, in order. */
static int read_runs(const setup *s, int *runs, int max) {
    FILE *f = fopen(s->out, "r");
    if (!f) return 0;
    int n = 0, a;
    while (n < max && fscanf(f, "run %d\n", &a) == 1) runs[n++] = a;
    fclose(f);
    return n;
}

static bool all_committed(const setup *s) {
    int64_t c = -1;
    return cs_test_committed(cst_cluster, s->group, s->topic, 0, &c) == CS_OK && c >= RECORDS;
}

static int64_t end_offset(const char *topic) {
    int64_t end = 0;
    CST_OK(cs_test_end_offset(cst_cluster, topic, 0, &end));
    return end;
}

/* The dead letters' cstream.dlq.attempts headers, read back from the topic. */
typedef struct dead {
    pthread_mutex_t lock;
    int n;
    char attempts[8][16];
} dead;

static cs_outcome read_dead(cs_delivery *d, void *user) {
    dead *x = user;
    const void *v = NULL;
    size_t len = 0;
    pthread_mutex_lock(&x->lock);
    if (x->n < 8) {
        if (cs_delivery_header_get(d, "cstream.dlq.attempts", &v, &len) == CS_OK && v)
            snprintf(x->attempts[x->n], sizeof x->attempts[x->n], "%.*s", (int)len, (const char *)v);
        else snprintf(x->attempts[x->n], sizeof x->attempts[x->n], "(none)");
    }
    x->n++;
    pthread_mutex_unlock(&x->lock);
    return CS_ACK;
}

static void read_dead_letters(const setup *s, dead *x) {
    char reader[200];
    snprintf(reader, sizeof reader, "%s-reader", s->group);
    cs_app *app = cs_app_new("dlq-reader", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *sub = cs_kafka_subscribe(k, s->dlq, read_dead, x);
    CST_OK(cs_sub_group(sub, reader));
    CST_OK(cs_sub_start_at(sub, CS_START_EARLIEST));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    CST_OK(cs_test_app_wait_idle(app, 30000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

/* Waits until the child exits (true, *status set) or the group's position
 * passed every record (false); fails the test after WAIT_MS. */
static bool exits_before_the_end(const setup *s, pid_t child, int *status) {
    for (int waited = 0;; waited += 20) {
        if (waitpid(child, status, WNOHANG) == child) return true;
        if (all_committed(s)) return false;
        if (waited >= WAIT_MS) {
            kill(child, SIGKILL);
            waitpid(child, NULL, 0);
            fail_msg("worker neither killed itself nor got past the poison record of %s within %d s", s->topic,
                     WAIT_MS / 1000);
        }
        usleep(20 * 1000);
    }
}

static void self_killing_handler_reaches_the_cap(void **state) {
    (void)state;
    setup s;
    prepare(&s, "selfkill");
    int restarts = 0;
    for (;;) {
        pid_t child = spawn(&s, "selfkill");
        int status = 0;
        if (!exits_before_the_end(&s, child, &status)) { /* it got past the poison record: stop it gracefully */
            kill(child, SIGTERM);
            waitpid(child, &status, 0);
            assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            break;
        }
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        restarts++;
        if (restarts > MAX_ATTEMPTS) fail_msg("still killing itself after %d restarts", restarts);
    }
    int runs[64];
    int n = read_runs(&s, runs, 64);
    printf("the handler killed its process %d times (runs: %d), then the record was dead-lettered\n", restarts, n);
    /* Its process died with it at least once (else nothing here was tested),
     * and it never ran more often than the cap allows. */
    assert_true(restarts >= 1);
    assert_true(n >= 1 && n <= MAX_ATTEMPTS);
    assert_int_equal(end_offset(s.dlq), 1);
    /* The dead letter says it was dead-lettered at the cap: the attempts the
     * killed processes never settled were counted. */
    dead x = {.lock = PTHREAD_MUTEX_INITIALIZER};
    read_dead_letters(&s, &x);
    assert_int_equal(x.n, 1);
    printf("dead letter: cstream.dlq.attempts=%s\n", x.attempts[0]);
    char cap[16];
    snprintf(cap, sizeof cap, "%d", MAX_ATTEMPTS);
    assert_string_equal(x.attempts[0], cap);
    unlink(s.out);
}

/* Waits until the poison record ran again (more than `seen` runs) or the
 * group's position passed every record; fails if the child exits first or
 * after WAIT_MS. */
static void wait_for_another_run(const setup *s, pid_t child, int seen) {
    int runs[64];
    for (int waited = 0; read_runs(s, runs, 64) <= seen && !all_committed(s); waited += 10) {
        int status;
        if (waitpid(child, &status, WNOHANG) == child) fail_msg("worker exited early, status %d", status);
        if (waited >= WAIT_MS) {
            kill(child, SIGKILL);
            waitpid(child, NULL, 0);
            fail_msg("the poison record of %s did not run again (after %d runs) within %d s", s->topic, seen,
                     WAIT_MS / 1000);
        }
        usleep(10 * 1000);
    }
}

static void sigkill_between_attempts_keeps_counting(void **state) {
    (void)state;
    setup s;
    prepare(&s, "retrykill");
    int seen = 0, kills = 0;
    while (!all_committed(&s)) {
        pid_t child = spawn(&s, "retry");
        int runs[64];
        /* Kill it after it has run the poison record once more (or it finished). */
        wait_for_another_run(&s, child, seen);
        seen = read_runs(&s, runs, 64);
        kill(child, all_committed(&s) ? SIGTERM : SIGKILL);
        waitpid(child, NULL, 0);
        kills++;
        if (kills > MAX_ATTEMPTS + 2) fail_msg("not dead-lettered after %d kills", kills);
    }
    int runs[64];
    int n = read_runs(&s, runs, 64);
    printf("attempts seen across %d processes:", kills);
    for (int i = 0; i < n; i++) printf(" %d", runs[i]);
    printf("\n");
    for (int i = 1; i < n; i++) assert_true(runs[i] > runs[i - 1]); /* never back to 1 */
    assert_true(n >= 1 && runs[n - 1] <= MAX_ATTEMPTS);
    /* Dead-lettered: once, or again if a kill came between the dead-letter
     * publish and the commit of its position (at-least-once, like any record). */
    assert_true(end_offset(s.dlq) >= 1);
    unlink(s.out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(self_killing_handler_reaches_the_cap),
        cmocka_unit_test(sigkill_between_attempts_keeps_counting),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
