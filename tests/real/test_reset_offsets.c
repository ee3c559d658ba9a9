/* test_reset_offsets.c — the operators' `reset-offsets` command of the
 * standard command line, on the real broker only (librdkafka 2.0.2's mock
 * has no DescribeGroups and answers timestamp lookups with -1). The service
 * is tests/support/ops_service.c, run as a child process: a Tracked
 * subscription on <prefix>orders (2 partitions, group <prefix>orders-svc)
 * that replies {"order_id":N} to <prefix>orders.done.
 *
 * A dry run changes nothing; --execute moves the committed positions of a
 * stopped service, with each kind of reset (earliest, latest, offset,
 * datetime, timestamp, shift), per topic and per partition; a restarted
 * service reads from the new position, and its attempts metadata reads as a
 * clean stop; the command is refused while the group has a live member. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cstest.h"
#include "cstest_child.h"

#include <librdkafka/rdkafka.h>

enum { PER_PARTITION = 10, LATE = 5, TOOL_TIMEOUT_MS = 60000, SERVICE_TIMEOUT_MS = 60000 };

static char prefix[128], orders[160], done[160], group[160], dir[64];

/* ---- children ------------------------------------------------------------------------ */

/* Starts ops_service with argv[1..] (NULL-terminated), output to files (0644):
 * the environment minus OPS_* and CSTREAM_INSTANCE_ID* (CSTREAM_BROKERS
 * stays), plus OPS_PREFIX; stdin the test's. */
/* The group protocol the service joins with (ops_service's OPS_GROUP_PROTOCOL). */
static const char *service_protocol = "classic";

static pid_t spawn_service(const char *const *args, const char *out, const char *err) {
    const char *argv[16] = {OPS_SERVICE};
    size_t n = 1;
    for (; args[n - 1]; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    char pfx[200], protocol[64];
    snprintf(pfx, sizeof pfx, "OPS_PREFIX=%s", prefix);
    snprintf(protocol, sizeof protocol, "OPS_GROUP_PROTOCOL=%s", service_protocol);
    return cst_spawn_io(
        argv,
        &(cst_child_io){.drop_env = (const char *const[]){"OPS_", "CSTREAM_INSTANCE_ID", "CSTREAM_LOG_LEVEL", NULL},
                        /* info: the assignment's line, which a test waits for */
                        .env = (const char *const[]){pfx, protocol, "CSTREAM_LOG_LEVEL=info", NULL},
                        .out = out,
                        .err = err,
                        .mode = 0644});
}

/* `ops_service reset-offsets ARGS...`: its status; *out and *err its output (caller frees). */
static int reset(char **out, char **err, const char *const *args) {
    const char *argv[16] = {"reset-offsets"};
    size_t n = 1;
    for (; args[n - 1]; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    char o[128], e[128];
    snprintf(o, sizeof o, "%s/out", dir);
    snprintf(e, sizeof e, "%s/err", dir);
    int status = cst_wait_exit(spawn_service(argv, o, e), TOOL_TIMEOUT_MS);
    *out = cst_slurp(o);
    *err = cst_slurp(e);
    return status;
}

#define RESET(out, err, ...) reset(out, err, (const char *const[]){__VA_ARGS__, NULL})

static void expect_line(const char *text, const char *line) {
    if (!strstr(text, line)) fail_msg("expected \"%s\" in:\n%s", line, text);
}

static int64_t committed(int32_t partition) {
    int64_t off = -2;
    CST_OK(cs_test_committed(cst_cluster, group, orders, partition, &off));
    return off;
}

/* "<orders> P CUR -> NEW" */
static void expect_row(const char *out, int partition, const char *cur, const char *next) {
    char line[256];
    snprintf(line, sizeof line, "%s %d %s -> %s", orders, partition, cur, next);
    expect_line(out, line);
}

static void produce_orders(int32_t partition, int first_id, int n) {
    for (int i = 0; i < n; i++) {
        char v[64];
        int len = snprintf(v, sizeof v, "{\"id\":%d,\"amount_cents\":100}", first_id + i);
        CST_OK(cs_test_produce(cst_cluster, orders, partition, NULL, 0, v, (size_t)len, NULL));
    }
}

/* Runs the service until both partitions are committed at `p0`/`p1`, then stops it
 * with SIGTERM; its log is returned (caller frees). */
static char *run_until_committed(int64_t p0, int64_t p1) {
    char o[128], e[128];
    snprintf(o, sizeof o, "%s/run.out", dir);
    snprintf(e, sizeof e, "%s/run.err", dir);
    pid_t pid = spawn_service((const char *const[]){"run", NULL}, o, e);
    cs_err w0 = cs_test_wait_committed(cst_cluster, group, orders, 0, p0, SERVICE_TIMEOUT_MS);
    cs_err w1 = cs_test_wait_committed(cst_cluster, group, orders, 1, p1, SERVICE_TIMEOUT_MS);
    kill(pid, SIGTERM);
    int status = cst_wait_exit(pid, SERVICE_TIMEOUT_MS);
    char *log = cst_slurp(e);
    if (w0 || w1 || status)
        fail_msg("service did not commit %lld/%lld or exit cleanly (%d):\n%s", (long long)p0, (long long)p1, status,
                 log);
    return log;
}

/* ---- fixture: the orders handled once, the service stopped ------------------------------ */

static int setup(void **state) {
    if (cst_cluster_setup(state)) return -1;
    if (cs_test_cluster_is_embedded(cst_cluster)) return 0; /* the tests skip */
    cs_test_unique_name(prefix, sizeof prefix - 1, "reset");
    strcat(prefix, ".");
    snprintf(orders, sizeof orders, "%sorders", prefix);
    snprintf(done, sizeof done, "%sorders.done", prefix);
    snprintf(group, sizeof group, "%sorders-svc", prefix);
    const char *topics[] = {"orders", "orders.done", "orders.dlq", "audit", "invoices"};
    for (int i = 0; i < 5; i++) {
        char t[200];
        snprintf(t, sizeof t, "%s%s", prefix, topics[i]);
        if (cs_test_topic_create(cst_cluster, t, i < 2 ? 2 : 1) != CS_OK) return -1;
    }
    snprintf(dir, sizeof dir, "/tmp/cs-reset-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    return 0;
}

static bool real_or_skip(void) {
    if (cs_test_cluster_is_embedded(cst_cluster)) {
        cst_skip("reset-offsets needs DescribeGroups and timestamp lookups, which librdkafka's mock lacks (2.0.2 to "
                 "2.14.2)");
        return false;
    }
    return true;
}

static void first_run(void) {
    static bool ran;
    if (ran) return;
    produce_orders(0, 0, PER_PARTITION);
    produce_orders(1, 1000, PER_PARTITION);
    free(run_until_committed(PER_PARTITION, PER_PARTITION));
    ran = true;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void dry_run_changes_nothing(void **state) {
    (void)state;
    if (!real_or_skip()) return;
    first_run();
    char *out, *err;
    assert_int_equal(RESET(&out, &err, "--group", group, "--to-earliest"), 0);
    expect_row(out, 0, "10", "0");
    expect_row(out, 1, "10", "0");
    expect_line(out, "dry run: nothing changed");
    assert_int_equal(committed(0), PER_PARTITION);
    assert_int_equal(committed(1), PER_PARTITION);
    free(out);
    free(err);
    /* A shift past the int64 range saturates (it once wrapped to the start). */
    assert_int_equal(RESET(&out, &err, "--group", group, "--shift-by", "9223372036854775807"), 0);
    expect_row(out, 0, "10", "10");
    free(out);
    free(err);
    /* Without --group: the service reads with two groups and must be told which. */
    assert_int_equal(RESET(&out, &err, "--to-earliest"), 1);
    expect_line(err, "several groups");
    free(out);
    free(err);
}

/* Each kind, with --execute, per topic and per partition. */
static void each_reset_kind_moves_the_committed_positions(void **state) {
    (void)state;
    if (!real_or_skip()) return;
    first_run();
    char *out, *err, scope0[200];
    snprintf(scope0, sizeof scope0, "%s:0", orders);

    assert_int_equal(RESET(&out, &err, "--group", group, "--to-offset", "4", "--topic", scope0, "--execute"), 0);
    expect_row(out, 0, "10", "4");
    expect_line(out, "committed");
    assert_int_equal(committed(0), 4);
    assert_int_equal(committed(1), PER_PARTITION); /* not in the scope */
    free(out);
    free(err);

    assert_int_equal(RESET(&out, &err, "--group", group, "--shift-by", "-3", "--topic", orders, "--execute"), 0);
    expect_row(out, 0, "4", "1");
    expect_row(out, 1, "10", "7");
    assert_int_equal(committed(0), 1);
    assert_int_equal(committed(1), 7);
    free(out);
    free(err);

    assert_int_equal(RESET(&out, &err, "--group", group, "--to-earliest", "--execute"), 0);
    assert_int_equal(committed(0), 0);
    assert_int_equal(committed(1), 0);
    free(out);
    free(err);

    assert_int_equal(RESET(&out, &err, "--group", group, "--to-latest", "--execute"), 0);
    expect_row(out, 1, "0", "10");
    assert_int_equal(committed(0), PER_PARTITION);
    assert_int_equal(committed(1), PER_PARTITION);
    free(out);
    free(err);

    /* Past the end: kept at the end, and said so (dry run). */
    assert_int_equal(RESET(&out, &err, "--group", group, "--to-offset", "99", "--topic", scope0), 0);
    expect_row(out, 0, "10", "10 (end of the partition; 99 is past it)");
    free(out);
    free(err);

    /* By time: records written after T. Their CreateTime is later than T
     * once the wall clock has passed T, which the loop waits for. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t t = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 + 1;
    do clock_gettime(CLOCK_REALTIME, &now);
    while ((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 <= t);
    produce_orders(0, PER_PARTITION, LATE); /* offsets 10..14 of partition 0 */
    assert_int_equal(RESET(&out, &err, "--group", group, "--to-earliest", "--topic", scope0, "--execute"), 0);
    free(out);
    free(err);
    time_t secs = (time_t)(t / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char iso[64];
    snprintf(iso, sizeof iso, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(t % 1000));
    assert_int_equal(RESET(&out, &err, "--group", group, "--to-datetime", iso, "--execute"), 0);
    expect_row(out, 0, "0", "10");  /* the first record at or after T */
    expect_row(out, 1, "10", "10"); /* none: the end */
    assert_int_equal(committed(0), PER_PARTITION);
    free(out);
    free(err);
    char ms[32];
    snprintf(ms, sizeof ms, "%lld", (long long)t - 24LL * 3600 * 1000); /* a day before: everything */
    assert_int_equal(RESET(&out, &err, "--group", group, "--to-timestamp", ms, "--topic", scope0), 0);
    expect_row(out, 0, "10", "0");
    free(out);
    free(err);
}

/* Replies seen per order id in <prefix>orders.done. */
static int replies[2000 + 1];
static void count_reply(const void *value, size_t len, void *arg) {
    (void)arg;
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < 63 ? len : 63), (const char *)value);
    const char *p = strstr(buf, "\"order_id\":");
    int id = p ? atoi(p + 11) : -1;
    if (id >= 0 && id <= 2000) replies[id]++;
}

/* A restarted service reads from the reset position, and takes the reset's
 * metadata for a clean stop. Runs after the kinds test: partition 0 holds
 * 15 records, 10 of them handled, committed at 10. */
static void a_restarted_service_reads_from_the_new_position(void **state) {
    (void)state;
    if (!real_or_skip()) return;
    first_run();
    char *out, *err, scope0[200];
    snprintf(scope0, sizeof scope0, "%s:0", orders);
    int64_t end = 0;
    CST_OK(cs_test_end_offset(cst_cluster, orders, 0, &end));
    assert_int_equal(end, PER_PARTITION + LATE);
    assert_int_equal(RESET(&out, &err, "--group", group, "--to-offset", "7", "--topic", scope0, "--execute"), 0);
    free(out);
    free(err);
    char *log = run_until_committed(end, PER_PARTITION);
    if (strstr(log, "did not stop cleanly") || strstr(log, "no committed position yet"))
        fail_msg("the reset's metadata did not read as a clean stop:\n%s", log);
    free(log);
    memset(replies, 0, sizeof replies);
    assert_true(cst_read_committed(done, 2, count_reply, NULL, 30000) >= 0);
    for (int id = 0; id < 7; id++) assert_int_equal(replies[id], 1);
    for (int id = 7; id < PER_PARTITION; id++) assert_int_equal(replies[id], 2); /* read again from 7 */
    for (int id = PER_PARTITION; id < PER_PARTITION + LATE; id++) assert_int_equal(replies[id], 1);
    for (int id = 1000; id < 1000 + PER_PARTITION; id++) assert_int_equal(replies[id], 1); /* partition 1 untouched */
}

/* Refused while the group has a live member, and nothing is committed. */
static void refused_while_live(const char *protocol) {
    service_protocol = protocol;
    int64_t before0 = committed(0), before1 = committed(1);
    char o[128], e[128];
    snprintf(o, sizeof o, "%s/live.out", dir);
    snprintf(e, sizeof e, "%s/live.err", dir);
    pid_t pid = spawn_service((const char *const[]){"run", NULL}, o, e);
    int64_t deadline = cst_now_ms() + SERVICE_TIMEOUT_MS;
    /* Joined this group: the service reads with two groups, and the other
     * one's assignment (audit-svc) can come first. */
    char joined[400];
    snprintf(joined, sizeof joined, " group=%s topic=%s partition=", group, orders);
    char *log = NULL;
    for (;;) {
        free(log);
        log = cst_slurp(e);
        if (strstr(log, joined)) break;
        if (cst_now_ms() > deadline) fail_msg("the service never got its partitions:\n%s", log);
        struct timespec tick = {0, 50 * 1000000L};
        nanosleep(&tick, NULL);
    }
    free(log);
    char *out, *err;
    int status = RESET(&out, &err, "--group", group, "--to-earliest", "--execute");
    kill(pid, SIGTERM);
    assert_int_equal(cst_wait_exit(pid, SERVICE_TIMEOUT_MS), 0);
    assert_int_equal(status, 1);
    expect_line(err, "live member");
    expect_line(err, "session times out");
    if (!strcmp(protocol, "consumer")) expect_line(err, "consumer group protocol");
    assert_int_equal(committed(0), before0);
    assert_int_equal(committed(1), before1);
    free(out);
    free(err);
    service_protocol = "classic";
}

static void refused_while_a_member_is_live(void **state) {
    (void)state;
    if (!real_or_skip()) return;
    first_run();
    refused_while_live("classic");
}

/* The same for a group of the consumer protocol (KIP-848), whose members
 * librdkafka >= 2.12 describes with ConsumerGroupDescribe. Runs last: the
 * empty classic group becomes a consumer group when its member joins. */
#if RD_KAFKA_VERSION >= 0x020c0000 /* where librdkafka has the protocol: see test_rebalance.c */
static void refused_while_a_consumer_protocol_member_is_live(void **state) {
    (void)state;
    if (!real_or_skip()) return;
    first_run();
    refused_while_live("consumer");
}
#endif

/* Removes the outputs' directory, then the cluster. */
static int teardown(void **state) {
    const char *names[] = {"out", "err", "run.out", "run.err", "live.out", "live.err"};
    for (size_t i = 0; dir[0] && i < sizeof names / sizeof *names; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    if (dir[0]) rmdir(dir);
    return cst_cluster_teardown(state);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dry_run_changes_nothing),
        cmocka_unit_test(each_reset_kind_moves_the_committed_positions),
        cmocka_unit_test(a_restarted_service_reads_from_the_new_position),
        cmocka_unit_test(refused_while_a_member_is_live),
#if RD_KAFKA_VERSION >= 0x020c0000
        cmocka_unit_test(refused_while_a_consumer_protocol_member_is_live),
#endif
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
