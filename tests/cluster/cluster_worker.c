/* cluster_worker.c — the service the 3-broker cluster tests (test_cluster.c)
 * SIGKILL their brokers under and SIGTERM themselves: it reads TOPIC and
 * replies to each record on OUT_TOPIC, Tracked or Transactional, with an
 * idempotent producer and acks=all.
 *
 * Each reply's value is "<partition> <offset> <pid> <attempt> <ms>": the
 * source record, who handled it, a number unique to this handler run within
 * this process, and when it ran (CLOCK_REALTIME, ms). The parent reads the
 * replies back from the broker: two replies with the same pid and attempt
 * are one send written twice (a producer retry that idempotence should have
 * absorbed); two with different attempts are the source record handled
 * twice (expected under Tracked after a rebalance or restart).
 *
 * Each handler run is also appended to RUNS_FILE ("<partition> <offset>", one
 * write per line) only so the parent can tell this process is handling; the
 * figures come from the broker. The final error, if any, goes to ERR_FILE.
 *
 * usage: cluster_worker tracked|transactional TOPIC OUT_TOPIC GROUP RUNS_FILE ERR_FILE [OPTION...]
 *   static=ID        instance id ID: static membership (cstream derives group.instance.id)
 *   assignor=NAME    partition.assignment.strategy; "consumer": the consumer
 *                    group protocol (KIP-848) instead
 *   commit_ms=N      cs_sub_commit_interval_ms (default 100)
 *   stderr=PATH      append this process's log (cstream's and librdkafka's) to PATH
 * Transactional needs an instance id: static=ID or CSTREAM_INSTANCE_ID. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cstream.h>

#include "stop_signals.h"

static int runs_fd = -1;
static atomic_long attempts;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static cs_outcome reply(cs_delivery *d, void *user) {
    (void)user;
    int p = (int)cs_delivery_partition(d);
    long long o = (long long)cs_delivery_offset(d);
    char line[64];
    int n = snprintf(line, sizeof line, "%d %lld\n", p, o);
    if (write(runs_fd, line, (size_t)n) != n) return CS_RETRY;
    /* About 1 ms of work: several records are in flight at any moment. */
    usleep((useconds_t)(o * 7919 % 2000));
    char value[96];
    int vn = snprintf(value, sizeof value, "%d %lld %ld %ld %lld", p, o, (long)getpid(), atomic_fetch_add(&attempts, 1),
                      now_ms());
    size_t key_len = 0;
    const void *key = cs_delivery_key(d, &key_len);
    return cs_delivery_reply(d, key, key_len, value, (size_t)vn) == CS_OK ? CS_ACK : CS_RETRY;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(
            stderr,
            "usage: %s tracked|transactional TOPIC OUT_TOPIC GROUP RUNS_FILE ERR_FILE [static=ID] [assignor=NAME]\n",
            argv[0]);
        return 2;
    }
    cst_hold_stop_signals();
    /* A test that fails or times out must not leave its workers running. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1) return 2;
    bool transactional = !strcmp(argv[1], "transactional");
    runs_fd = open(argv[5], O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (runs_fd < 0) {
        perror(argv[5]);
        return 2;
    }
    for (int i = 7; i < argc; i++)
        if (!strncmp(argv[i], "stderr=", 7) && !freopen(argv[i] + 7, "a", stderr)) return 2;
    cs_log_set_level(getenv("CW_DEBUG") ? CS_LOG_DEBUG : CS_LOG_WARN);
    cs_app *app = cs_app_new("cluster-worker", "1.0");
    cs_kafka *k = cs_kafka_new(NULL);
    cs_sub *s = cs_kafka_subscribe(k, argv[2], reply, NULL);
    cs_err err = CS_OK;
    int commit_ms = 100;
    /* assignor=consumer: the consumer group protocol (KIP-848), whose
     * session and assignor are the broker's. */
    bool consumer_protocol = false;
    for (int i = 7; i < argc; i++) consumer_protocol |= !strcmp(argv[i], "assignor=consumer");
    if (!err && consumer_protocol) err = cs_kafka_group_protocol(k, CS_GROUP_PROTOCOL_CONSUMER);
    if (!err && !consumer_protocol) err = cs_kafka_config(k, "session.timeout.ms", "6000");
    if (!err) err = cs_kafka_config(k, "fetch.wait.max.ms", "10");
    /* What the cluster tests are about: a write counts once two in-sync
     * replicas have it, and retries after a broker loss write nothing twice. */
    if (!err) err = cs_kafka_producer_config(k, "enable.idempotence", "true");
    if (!err) err = cs_kafka_producer_config(k, "acks", "all");
    for (int i = 7; i < argc && !err; i++) {
        if (!strncmp(argv[i], "static=", 7)) {
            /* The instance id makes each consumer a static member
             * (group.instance.id derived from it, docs/guide.md). */
            err = cs_kafka_instance_id(k, argv[i] + 7);
        } else if (!strncmp(argv[i], "assignor=", 9)) {
            if (!consumer_protocol) err = cs_sub_config(s, "partition.assignment.strategy", argv[i] + 9);
        } else if (!strncmp(argv[i], "commit_ms=", 10)) {
            commit_ms = atoi(argv[i] + 10);
        } else if (strncmp(argv[i], "stderr=", 7)) {
            fprintf(stderr, "cluster_worker: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!err) err = cs_sub_group(s, argv[4]);
    if (!err) err = cs_sub_commit_mode(s, transactional ? CS_COMMIT_TRANSACTIONAL : CS_COMMIT_TRACKED);
    if (!err) err = cs_sub_workers(s, 4);
    if (!err) err = cs_sub_commit_interval_ms(s, commit_ms);
    if (!err) err = cs_sub_reply(s, argv[3], 5000);
    if (!err) err = cs_app_add_kafka(app, k);
    if (!err) err = cs_app_run(app);
    char why[1024];
    snprintf(why, sizeof why, "%s", err ? cs_errmsg() : "");
    cs_app_destroy(app);
    close(runs_fd);
    if (err) {
        FILE *f = fopen(argv[6], "w");
        if (f) {
            fprintf(f, "%s\n", why);
            fclose(f);
        }
        fprintf(stderr, "cluster_worker %ld: %s\n", (long)getpid(), why);
    }
    return err ? 1 : 0;
}
