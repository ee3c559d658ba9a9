/* test_exactly_once.c — Transactional mode's promise, on a real broker only
 * (librdkafka 2.0.2's mock keeps no transaction semantics): this process
 * produces the input, runs the transform service (support/transform_worker.c)
 * in child processes, and reads the output topic as a read_committed consumer.
 *
 * - SIGKILL: children are killed at random moments while four workers settle
 *   out of order across window boundaries; a new child takes over each time.
 *   The checker must see every input's output exactly once (0 lost, 0
 *   duplicated), though inputs were handled more than once.
 * - Zombie fencing: a second instance with the same instance id starts while
 *   the first runs; the first is fenced, stops by itself with an error that
 *   says so, and the outputs are still exactly once.
 * - Rebalances: members with their own instance ids join, leave and are
 *   killed while the group keeps going: still exactly once.
 * - An aborted transaction (an output too large for the broker fails inside
 *   it, after other outputs were sent) is invisible: its window is read again
 *   and each output is read exactly once.
 *
 * CS_KILLS sets the kills, 1 to 64 (3 when unset; 3 in CI; `make proof` runs
 * 20); 0 or anything else is refused. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cstest.h"

#ifndef TRANSFORM_WORKER
#error "TRANSFORM_WORKER must name the transform_worker executable"
#endif

enum { PARTS = 4, MAX_KILLS = 64 };

typedef struct run {
    char topic[128], out[128], group[160], instance[160], runs[256], errs[256];
    int kills;
    long records; /* input records */
    unsigned seed;
    cst_seen *outputs;
    long malformed;
} run;

static void setup(run *r, const char *prefix, long records) {
    memset(r, 0, sizeof *r);
    r->records = records;
    r->kills = cst_kills_wanted(MAX_KILLS);
    cst_fresh(prefix, PARTS, r->topic, r->group, sizeof r->topic);
    char out_prefix[64];
    snprintf(out_prefix, sizeof out_prefix, "%s-out", prefix);
    cst_fresh(out_prefix, PARTS, r->out, NULL, sizeof r->out);
    snprintf(r->instance, sizeof r->instance, "%s-instance", r->topic);
    snprintf(r->runs, sizeof r->runs, "/tmp/%s.runs", r->topic);
    snprintf(r->errs, sizeof r->errs, "/tmp/%s.err", r->topic);
    unlink(r->runs);
    unlink(r->errs);
    if (records) CST_OK(cs_test_produce_many(cst_cluster, r->topic, "rec-", (int)records));
    setenv("CSTREAM_BROKERS", cs_test_cluster_brokers(cst_cluster), 1);
    r->seed = (unsigned)time(NULL) ^ (unsigned)getpid();
}

static void teardown(run *r) {
    unlink(r->runs);
    unlink(r->errs);
    if (r->outputs) cst_seen_free(r->outputs);
}

static pid_t spawn_as(run *r, const char *instance) {
    char *const argv[] = {TRANSFORM_WORKER, r->topic, r->out, r->group, r->runs, r->errs, (char *)instance, NULL};
    return cst_spawn(TRANSFORM_WORKER, argv);
}

static pid_t spawn(run *r) { return spawn_as(r, r->instance); }

/* Handler runs so far: total lines and distinct records. */
static void runs_so_far(run *r, size_t *total, size_t *distinct) {
    cst_seen *s = cst_seen_new(PARTS, r->records);
    size_t n = 0;
    FILE *f = fopen(r->runs, "r");
    int p;
    long long o;
    while (f && fscanf(f, "%d %lld", &p, &o) == 2) {
        cst_seen_add(s, p, o);
        n++;
    }
    if (f) fclose(f);
    if (total) *total = n;
    if (distinct) *distinct = cst_seen_distinct(s);
    cst_seen_free(s);
}

static size_t distinct_runs(run *r) {
    size_t d;
    runs_so_far(r, NULL, &d);
    return d;
}

/* The group's committed positions are at the end of the input. */
static bool committed_to_end(void *arg) {
    run *r = arg;
    for (int p = 0; p < PARTS; p++) {
        int64_t end = 0, c = -1;
        if (cs_test_end_offset(cst_cluster, r->topic, p, &end) ||
            cs_test_committed(cst_cluster, r->group, r->topic, p, &c) || c < end)
            return false;
    }
    return true;
}

static void stop_child(pid_t child) {
    kill(child, SIGTERM);
    int status;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("worker stopped badly: %s %d", WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

static void count_output(const void *value, size_t len, void *arg) {
    run *r = arg;
    char text[48];
    int p;
    long long o;
    snprintf(text, sizeof text, "%.*s", (int)(len < 47 ? len : 47), (const char *)value);
    if (sscanf(text, "%d:%lld", &p, &o) == 2 && p >= 0 && p < PARTS && o >= 0 && o < r->records)
        cst_seen_add(r->outputs, p, o);
    else r->malformed++;
}

/* Reads the output as read_committed; asserts every input's output exactly once. */
static void check_exactly_once(run *r, int kills) {
    r->outputs = cst_seen_new(PARTS, r->records);
    long n = cst_read_committed(r->out, PARTS, count_output, r, 120000);
    assert_true(n >= 0);
    long inputs = 0, lost = 0, dup = 0;
    for (int p = 0; p < PARTS; p++) {
        int64_t end;
        CST_OK(cs_test_end_offset(cst_cluster, r->topic, p, &end));
        for (int64_t o = 0; o < end; o++) {
            int c = cst_seen_count(r->outputs, p, o);
            inputs++;
            lost += c == 0;
            dup += c > 1 ? c - 1 : 0;
        }
    }
    size_t total, distinct;
    runs_so_far(r, &total, &distinct);
    printf("\nTransactional, %ld inputs, %d partitions, 4 workers, %d kills (seed %u)\n", inputs, PARTS, kills,
           r->seed);
    printf("| handler runs | records run more than once | outputs read_committed | lost | duplicated |\n");
    printf("|---|---|---|---|---|\n");
    printf("| %zu | %zu | %ld | %ld | %ld |\n", total, total - distinct, n, lost, dup);
    if (kills > 0) assert_true(total > distinct); /* the kills landed mid-stream: some records ran again */
    assert_int_equal(r->malformed, 0);
    assert_int_equal(lost, 0);
    assert_int_equal(dup, 0);
    assert_int_equal(n, inputs);
}

static long long committed_sum(run *r) {
    long long sum = 0;
    for (int p = 0; p < PARTS; p++) {
        int64_t c = -1;
        if (cs_test_committed(cst_cluster, r->group, r->topic, p, &c) == CS_OK && c > 0) sum += c;
    }
    return sum;
}

/* SIGKILLs the children of `pids` that are still there (0: none), and reaps them. */
static void kill_children(pid_t *pids, int n) {
    for (int i = 0; i < n; i++)
        if (pids[i] > 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
            pids[i] = 0;
        }
}

/* How long the workers get to commit up to a target: a fresh member joins,
 * fences its predecessor and commits thousands of records in seconds. */
enum { COMMIT_WAIT_MS = 120000 };

/* Polls until the group's committed positions sum to `target` (nothing wakes
 * the test when they move). The n children in `alive` (0: none) must keep
 * running meanwhile: if one exits, or the target is not reached within
 * COMMIT_WAIT_MS, the children are killed and the test fails saying so. */
static void wait_committed_sum(run *r, long long target, pid_t *alive, int n, const char *what) {
    int64_t deadline = cst_now_ms() + COMMIT_WAIT_MS;
    while (committed_sum(r) < target) {
        for (int i = 0; i < n; i++) {
            int status;
            if (alive[i] > 0 && waitpid(alive[i], &status, WNOHANG) == alive[i]) {
                pid_t gone = alive[i];
                alive[i] = 0;
                kill_children(alive, n);
                fail_msg("%s: worker %d exited early, status %d, with %lld of %lld committed", what, (int)gone, status,
                         committed_sum(r), target);
            }
        }
        if (cst_now_ms() > deadline) {
            kill_children(alive, n);
            fail_msg("%s: committed %lld of %lld within %d s", what, committed_sum(r), target, COMMIT_WAIT_MS / 1000);
        }
        usleep(5 * 1000);
    }
}

static void kills_lose_and_duplicate_nothing(void **state) {
    (void)state;
    run r;
    /* Enough input that every kill lands mid-stream (a restarted member's
     * first window can commit a few thousand records at once). */
    int kills = cst_kills_wanted(MAX_KILLS);
    setup(&r, "eos-kill", kills <= 3 ? 10000 : 3000L * kills);
    for (int k = 0; k < r.kills; k++) {
        /* Kill once this child has committed a random share of what is left
         * (it runs ahead of its commits, so records are always in flight). */
        long long before = committed_sum(&r);
        long long left = r.records - before;
        long long target = before + 50 + (left > 400 ? rand_r(&r.seed) % (left / (r.kills + 1)) : 0);
        if (target > r.records) target = r.records;
        pid_t child = spawn(&r);
        char what[32];
        snprintf(what, sizeof what, "before kill %d", k + 1);
        wait_committed_sum(&r, target, &child, 1, what);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        printf("kill %d: committed %lld, distinct records run %zu\n", k + 1, committed_sum(&r), distinct_runs(&r));
    }
    pid_t last = spawn(&r);
    assert_true(cst_wait(committed_to_end, &r, 300000));
    stop_child(last);
    check_exactly_once(&r, r.kills);
    teardown(&r);
}

static bool file_has_text(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    int c = fgetc(f);
    fclose(f);
    return c != EOF;
}

static void zombie_is_fenced(void **state) {
    (void)state;
    run r;
    setup(&r, "eos-fence", 10000);
    pid_t zombie = spawn(&r);
    int status = 0;
    /* Fenced once it has committed some windows: the successor starts from
     * those, and nothing may be committed twice. */
    wait_committed_sum(&r, 2000, &zombie, 1, "first instance");
    printf("committed when the successor starts: %lld\n", committed_sum(&r));
    pid_t successor = spawn(&r); /* same instance id: its start fences the first */
    bool exited = false;
    for (int waited = 0; waited < 60000 && !exited; waited += 10) {
        exited = waitpid(zombie, &status, WNOHANG) == zombie;
        if (!exited) usleep(10 * 1000);
    }
    if (!exited) {
        kill(zombie, SIGKILL);
        waitpid(zombie, NULL, 0);
        fail_msg("the first instance was not fenced within 60 s");
    }
    printf("committed when the fenced instance stopped: %lld\n", committed_sum(&r));
    assert_true(WIFEXITED(status));
    assert_int_not_equal(WEXITSTATUS(status), 0);
    assert_true(file_has_text(r.errs));
    char why[2048] = "";
    FILE *f = fopen(r.errs, "r");
    size_t n = fread(why, 1, sizeof why - 1, f);
    why[n] = '\0';
    fclose(f);
    printf("fenced instance stopped: %s", why);
    assert_non_null(strstr(why, "fenced"));
    assert_non_null(strstr(why, r.instance));
    assert_true(cst_wait(committed_to_end, &r, 300000));
    stop_child(successor);
    check_exactly_once(&r, 0);
    teardown(&r);
}

/* Members join, leave gracefully and are killed while the group keeps
 * rebalancing: every revoke closes its window before the partitions go, no
 * transaction spans two generations, and the outputs stay exactly once. */
static void rebalances_keep_exactly_once(void **state) {
    (void)state;
    run r;
    setup(&r, "eos-rebalance", 40000);
    char ids[3][200];
    for (int i = 0; i < 3; i++) snprintf(ids[i], sizeof ids[i], "%s-%d", r.instance, i);
    pid_t members[3] = {spawn_as(&r, ids[0]), 0, 0};
    pid_t leaving = 0;
    long long step = r.records / 6;
    for (int round = 1; round <= 4; round++) {
        long long target = step * round;
        char what[32];
        snprintf(what, sizeof what, "rebalance round %d", round);
        wait_committed_sum(&r, target, members, 3, what);
        switch (round) {
        case 1: /* a second and a third member join: two rebalances */
            members[1] = spawn_as(&r, ids[1]);
            members[2] = spawn_as(&r, ids[2]);
            break;
        case 2: /* the first leaves gracefully (reaped at the end: its drain takes a while) */
            kill(members[0], SIGTERM);
            leaving = members[0];
            members[0] = 0;
            break;
        case 3: /* the second is killed; the third takes over at session timeout */
            kill(members[1], SIGKILL);
            waitpid(members[1], NULL, 0);
            members[1] = 0;
            break;
        case 4: /* the first and the killed second come back (new processes, same instance ids: the
                   second's init aborts the transaction it left open) */
            members[1] = spawn_as(&r, ids[1]);
            if (leaving) {
                int status;
                waitpid(leaving, &status, 0);
                assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
                leaving = 0;
            }
            members[0] = spawn_as(&r, ids[0]);
            break;
        }
        printf("round %d: committed %lld\n", round, committed_sum(&r));
    }
    assert_true(cst_wait(committed_to_end, &r, 300000));
    for (int i = 0; i < 3; i++)
        if (members[i]) stop_child(members[i]);
    check_exactly_once(&r, 0); /* one member was killed, but re-runs are not guaranteed there */
    teardown(&r);
}

/* ---- an aborted transaction is invisible ------------------------------------ */

typedef struct oversize {
    const char *out;
    cst_seen *runs;
    bool always; /* record 30's output is refused on every run, not only the first */
} oversize;

/* Record 30's first run publishes a 2 MiB output to partition 0: the
 * producer accepts it (its message.max.bytes is raised) and the broker refuses
 * it (its limit is 1 MiB), so the transaction fails at commit, after the other
 * outputs of the window reached the other partitions, and aborts. */
static cs_outcome oversize_once(cs_delivery *d, void *user) {
    oversize *o = user;
    int32_t p = cs_delivery_partition(d);
    int64_t off = cs_delivery_offset(d);
    cst_seen_add(o->runs, p, off);
    char value[48];
    int n = snprintf(value, sizeof value, "%d:%lld", (int)p, (long long)off);
    if (off == 30 && (o->always || cst_seen_count(o->runs, p, off) == 1)) {
        static char big[2 * 1024 * 1024];
        memset(big, 'x', sizeof big);
        cs_record r = {.topic = o->out, .partition = 0, .value = big, .value_len = sizeof big};
        if (cs_delivery_publish(d, &r) != CS_OK) return CS_RETRY;
    }
    /* Keyed by offset, so that the outputs spread over the partitions. */
    return cs_delivery_reply(d, value, (size_t)n, value, (size_t)n) == CS_OK ? CS_ACK : CS_RETRY;
}

static void count_any(const void *value, size_t len, void *arg) {
    (void)value, (void)len;
    (*(long *)arg)++;
}

static bool outputs_at(void *arg) {
    void **a = arg;
    cs_sub_stats st;
    cs_sub_stats_get(a[0], &st);
    return st.outputs >= *(uint64_t *)a[1];
}

/* The in-process transform of the two tests below, started: its producer
 * accepts a 2 MiB record, the broker does not. `dlq` NULL: no dead letters. */
static cs_app *start_oversize(run *r, oversize *o, const char *dlq, cs_sub **out) {
    cs_app *app = cs_app_new("eos-oversize", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_instance_id(k, r->instance));
    CST_OK(cs_kafka_topic(k, r->out, PARTS));
    CST_OK(cs_kafka_producer_config(k, "message.max.bytes", "4000000"));
    cs_sub *s = cs_kafka_subscribe(k, r->topic, oversize_once, o);
    CST_OK(cs_sub_group(s, r->group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRANSACTIONAL));
    CST_OK(cs_sub_reply(s, r->out, 5000));
    if (dlq) {
        CST_OK(cs_sub_max_attempts(s, 2));
        CST_OK(cs_sub_dead_letter(s, dlq));
    }
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *out = s;
    return app;
}

static void aborted_transaction_is_invisible(void **state) {
    (void)state;
    run r;
    setup(&r, "eos-abort", 0);
    r.records = 200;
    for (int i = 0; i < 200; i++) {
        char v[16];
        int n = snprintf(v, sizeof v, "v%d", i);
        CST_OK(cs_test_produce(cst_cluster, r.topic, 0, NULL, 0, v, (size_t)n, NULL));
    }
    oversize o = {.out = r.out, .runs = cst_seen_new(PARTS, 200)};
    cs_sub *s;
    cs_app *app = start_oversize(&r, &o, NULL, &s);
    uint64_t want = 200;
    void *arg[2] = {s, &want};
    assert_true(cst_wait(outputs_at, arg, 60000));
    CST_OK(cs_app_stop(app));
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    printf("aborts %llu, transactions %llu, runs of 0/29/30/31: %d %d %d %d\n", (unsigned long long)st.aborts,
           (unsigned long long)st.transactions, cst_seen_count(o.runs, 0, 0), cst_seen_count(o.runs, 0, 29),
           cst_seen_count(o.runs, 0, 30), cst_seen_count(o.runs, 0, 31));
    assert_true(st.aborts >= 1);
    assert_int_equal(cst_seen_count(o.runs, 0, 30), 2); /* read again after the abort */
    /* The aborted transaction's outputs reached the broker (a read_uncommitted
     * reader sees them), yet read_committed sees each input's output once. */
    long all = 0;
    assert_true(cst_read_uncommitted(r.out, PARTS, count_any, &all, 60000) >= 0);
    printf("read_uncommitted sees %ld records (aborted ones included)\n", all);
    assert_true(all > 200);
    check_exactly_once(&r, 0);
    cs_app_destroy(app);
    cst_seen_free(o.runs);
    teardown(&r);
}

/* An output the broker refuses on every run counts as an attempt of its
 * source: at max_attempts the source goes to the dead-letter topic (inside a
 * transaction) and the others' outputs are still exactly once. */
static void refused_output_is_dead_lettered(void **state) {
    (void)state;
    run r;
    setup(&r, "eos-refused", 0);
    r.records = 100;
    char dlq[160];
    snprintf(dlq, sizeof dlq, "%s-dlq", r.topic);
    CST_OK(cs_test_topic_create(cst_cluster, dlq, 1));
    for (int i = 0; i < 100; i++) CST_OK(cs_test_produce(cst_cluster, r.topic, 0, NULL, 0, "v", 1, NULL));
    oversize o = {.out = r.out, .runs = cst_seen_new(PARTS, 100), .always = true};
    cs_sub *s;
    cs_app *app = start_oversize(&r, &o, dlq, &s);
    uint64_t want = 100; /* 99 replies and 1 dead letter */
    void *arg[2] = {s, &want};
    assert_true(cst_wait(outputs_at, arg, 120000));
    CST_OK(cs_app_stop(app));
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    printf("aborts %llu, dead-lettered %llu, runs of 30: %d\n", (unsigned long long)st.aborts,
           (unsigned long long)st.dead_lettered, cst_seen_count(o.runs, 0, 30));
    /* max_attempts runs, each aborting its window, then given up. librdkafka
     * (2.0.2 at least) may abort one more window: the outputs queued behind
     * the refused one left a gap in the producer's sequence numbers, and the
     * commit of the window holding the dead letter fails with
     * OUT_OF_ORDER_SEQUENCE_NUMBER (an epoch bump). That window is read
     * again, and the record, settled by its dead letter in it, starts its
     * attempts over (seen in CI: 7 aborts, 2 dead letters staged, 6 runs).
     * Exactly-once holds either way, as checked below: one dead letter
     * committed, no output of the record, the others' outputs once. */
    assert_true(st.aborts >= 2);
    assert_true(st.dead_lettered >= 1);
    assert_true(cst_seen_count(o.runs, 0, 30) >= 2);
    if (st.aborts > 2)
        printf("librdkafka aborted %llu windows more than the 2 refusals (a sequence gap after a refused "
               "output): the record ran %d times\n",
               (unsigned long long)st.aborts - 2, cst_seen_count(o.runs, 0, 30));
    long dead = 0;
    assert_int_equal(cst_read_committed(dlq, 1, count_any, &dead, 60000), 1);
    r.outputs = cst_seen_new(PARTS, 100);
    assert_int_equal(cst_read_committed(r.out, PARTS, count_output, &r, 60000), 99);
    assert_int_equal(cst_seen_count(r.outputs, 0, 30), 0);
    assert_int_equal(cst_seen_distinct(r.outputs), 99);
    cs_app_destroy(app);
    cst_seen_free(o.runs);
    teardown(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kills_lose_and_duplicate_nothing), cmocka_unit_test(zombie_is_fenced),
        cmocka_unit_test(rebalances_keep_exactly_once),     cmocka_unit_test(aborted_transaction_is_invisible),
        cmocka_unit_test(refused_output_is_dead_lettered),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
