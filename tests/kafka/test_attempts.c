/* test_attempts.c — attempt counts survive a restart (Tracked). They are kept
 * in the committed offset metadata; a previous owner that did not stop cleanly
 * makes the record at the committed position count one more attempt. So:
 * - a handler that kills its own process every time still reaches
 *   max_attempts (4) after at most 4 restarts, and the record is then
 *   dead-lettered without running again;
 * - SIGKILLs between attempts never reset the count: the attempt numbers the
 *   handler sees keep increasing across processes. */
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

enum { MAX_ATTEMPTS = 4, RECORDS = 20 };

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
    char *const argv[] = {ATTEMPTS_WORKER, (char *)s->topic, (char *)s->group, (char *)s->dlq, (char *)s->out,
                          (char *)mode, NULL};
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

static void self_killing_handler_reaches_the_cap(void **state) {
    (void)state;
    setup s;
    prepare(&s, "selfkill");
    int restarts = 0;
    for (;;) {
        pid_t child = spawn(&s, "selfkill");
        int status = 0;
        bool exited = false;
        while (!(exited = waitpid(child, &status, WNOHANG) == child) && !all_committed(&s)) usleep(20 * 1000);
        if (!exited) { /* it got past the poison record: stop it gracefully */
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
    assert_true(n <= MAX_ATTEMPTS);
    assert_int_equal(end_offset(s.dlq), 1);
    unlink(s.out);
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
        while (read_runs(&s, runs, 64) <= seen && !all_committed(&s)) usleep(10 * 1000);
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
