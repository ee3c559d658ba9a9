/* test_kill.c — SIGKILL crash test under Tracked. This process hosts the
 * cluster (embedded, or CSTREAM_BROKERS) and hands it to a child payouts
 * service; the child is killed with SIGKILL while payouts are in flight, a new
 * child takes over, and so on; a last child finishes. Every payout must be
 * handled at least once (0 lost), and no payout below the position committed
 * at a kill may be handled again after it (duplicates only among records that
 * were not committed). CS_KILLS sets the number of kills (3 in CI; `make
 * proof` runs 20 and prints the table). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cstest.h"

#ifndef PAYOUT_WORKER
#error "PAYOUT_WORKER must name the payout_worker executable"
#endif

enum { PAYOUTS = 5000, PARTS = 4, WORKERS = 8, MAX_KILLS = 64 };

typedef struct line {
    int p;
    long long o;
} line;

static size_t read_lines(const char *path, line *out, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = 0;
    while (n < cap && fscanf(f, "%d %lld", &out[n].p, &out[n].o) == 2) n++;
    fclose(f);
    return n;
}

static pid_t spawn(const char *topic, const char *group, const char *out) {
    pid_t pid = fork();
    if (pid == 0) {
        char workers[8];
        snprintf(workers, sizeof workers, "%d", WORKERS);
        execl(PAYOUT_WORKER, PAYOUT_WORKER, topic, group, out, workers, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void kill_test(void **state) {
    (void)state;
    const char *env = getenv("CS_KILLS");
    int kills = env ? atoi(env) : 3;
    if (kills > MAX_KILLS) kills = MAX_KILLS;
    char topic[128], group[160], out[256];
    cst_fresh("kill", PARTS, topic, group, sizeof topic);
    snprintf(out, sizeof out, "/tmp/%s.out", topic);
    unlink(out);
    CST_OK(cs_test_produce_many(cst_cluster, topic, "payout-", PAYOUTS));
    setenv("CSTREAM_BROKERS", cs_test_cluster_brokers(cst_cluster), 1);

    line *lines = calloc(PAYOUTS * 4, sizeof *lines);
    size_t cut[MAX_KILLS + 1];                 /* lines written before each kill */
    long long committed[MAX_KILLS][PARTS];     /* positions committed at each kill */
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    printf("seed %u kills %d\n", seed, kills);
    for (int k = 0; k < kills; k++) {
        size_t before = read_lines(out, lines, PAYOUTS * 4);
        size_t left = PAYOUTS > before ? PAYOUTS - before : 0;
        size_t target = before + 100 + (left > 400 ? (size_t)rand_r(&seed) % (left / 3) : 0);
        pid_t child = spawn(topic, group, out);
        while (read_lines(out, lines, PAYOUTS * 4) < target) {
            int status;
            if (waitpid(child, &status, WNOHANG) == child) fail_msg("worker exited early, status %d", status);
            usleep(5 * 1000);
        }
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        cut[k] = read_lines(out, lines, PAYOUTS * 4);
        for (int p = 0; p < PARTS; p++) {
            int64_t c;
            CST_OK(cs_test_committed(cst_cluster, group, topic, p, &c));
            committed[k][p] = c < 0 ? 0 : c;
        }
    }
    /* The last worker finishes the job. */
    pid_t child = spawn(topic, group, out);
    size_t n = 0;
    for (int waited = 0;; waited += 20) {
        n = read_lines(out, lines, PAYOUTS * 4);
        cst_seen *s = cst_seen_new(PARTS, PAYOUTS);
        for (size_t i = 0; i < n; i++) cst_seen_add(s, lines[i].p, lines[i].o);
        size_t distinct = cst_seen_distinct(s);
        cst_seen_free(s);
        if (distinct >= PAYOUTS) break;
        if (waited > 180000) fail_msg("only %zu of %d payouts handled after 180 s", distinct, PAYOUTS);
        usleep(20 * 1000);
    }
    kill(child, SIGTERM);
    int status;
    waitpid(child, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    n = read_lines(out, lines, PAYOUTS * 4);
    cut[kills] = n;

    cst_seen *all = cst_seen_new(PARTS, PAYOUTS);
    for (size_t i = 0; i < n; i++) cst_seen_add(all, lines[i].p, lines[i].o);
    size_t distinct = cst_seen_distinct(all);
    long long lost = (long long)PAYOUTS - (long long)distinct;
    printf("\n| kill | handled before kill | committed at kill | handled, not committed | read again after kill | committed read again |\n");
    printf("|---|---|---|---|---|---|\n");
    long long violations = 0;
    for (int k = 0; k < kills; k++) {
        long long comm = 0;
        for (int p = 0; p < PARTS; p++) comm += committed[k][p];
        /* handled before this kill but not covered by its committed positions */
        cst_seen *upto = cst_seen_new(PARTS, PAYOUTS);
        for (size_t i = 0; i < cut[k]; i++) cst_seen_add(upto, lines[i].p, lines[i].o);
        long long uncommitted = 0, again = 0, bad = 0;
        for (int p = 0; p < PARTS; p++)
            for (long long o = committed[k][p]; o < PAYOUTS; o++) uncommitted += cst_seen_count(upto, p, o) > 0;
        for (size_t i = cut[k]; i < cut[k + 1]; i++) {
            if (cst_seen_count(upto, lines[i].p, lines[i].o) > 0) again++;
            if (lines[i].o < committed[k][lines[i].p]) bad++;
        }
        violations += bad;
        printf("| %d | %zu | %lld | %lld | %lld | %lld |\n", k + 1, cst_seen_distinct(upto), comm, uncommitted, again, bad);
        cst_seen_free(upto);
    }
    printf("\npayouts %d, handled %zu times, distinct %zu: lost %lld, duplicated %zu\n", PAYOUTS, n, distinct, lost,
           n - distinct);
    cst_seen_free(all);
    free(lines);
    unlink(out);
    assert_int_equal(lost, 0);
    assert_int_equal(violations, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(kill_test)};
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
