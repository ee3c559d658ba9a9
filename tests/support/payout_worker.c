/* payout_worker.c — the service the kill tests SIGKILL: a Tracked payouts
 * handler with several workers, on the cluster named by CSTREAM_BROKERS. Each
 * handled payout is appended to an output file as "partition offset" (one
 * write per line, O_APPEND: lines from workers never interleave, and a
 * SIGKILL loses nothing already written). The parent counts lost and
 * duplicated payouts from that file.
 * usage: payout_worker TOPIC GROUP OUTPUT_FILE WORKERS [tracked|auto]
 *
 * Optional, from the environment (tests/real/test_static_membership.c):
 *   CSTREAM_INSTANCE_ID         the instance id (cstream reads it): the
 *                               consumer joins as a static member
 *   PAYOUT_SESSION_TIMEOUT_MS   session.timeout.ms (default 6000; "default"
 *                               leaves librdkafka's own, 45 s)
 *   PAYOUT_GROUP_PROTOCOL       "consumer": the KIP-848 group protocol
 *                               (cs_kafka_group_protocol); the session is
 *                               then the broker's and
 *                               PAYOUT_SESSION_TIMEOUT_MS is not used
 *   PAYOUT_ASSIGN_FILE          "+P" / "-P" lines as partitions are assigned
 *                               and revoked (one write each, O_APPEND)
 *   PAYOUT_LOG_FILE             stderr (cstream's log lines) goes there
 *   PAYOUT_ACKED_SET            0: cs_sub_acked_set(s, 0), commits without
 *                               the acked set (the side-by-side measurement)
 *   PAYOUT_HOLD_EVERY           N > 0: every record whose offset is a multiple
 *                               of N is held open on its first run, by
 *                               cs_delivery_retry_after(d, PAYOUT_HOLD_MS,
 *                               default 20000), before it is handled: the
 *                               committed position waits while the rest flows
 *   PAYOUT_COMMIT_INTERVAL_MS   cs_sub_commit_interval_ms (default 100): the
 *                               commit cadence that sets the duplicate floor */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstream.h>

#include "stop_signals.h"

static int out_fd = -1;
static long hold_every;     /* PAYOUT_HOLD_EVERY */
static int hold_ms = 20000; /* PAYOUT_HOLD_MS */

static cs_outcome pay_out(cs_delivery *d, void *user) {
    unsigned *seed = user;
    (void)seed;
    if (hold_every > 0 && cs_delivery_offset(d) % hold_every == 0 && cs_delivery_attempt(d) == 1)
        return cs_delivery_retry_after(d, hold_ms);
    /* A little work keeps several payouts in flight at any moment. */
    usleep((useconds_t)(cs_delivery_offset(d) * 7919 % 1500));
    char line[64];
    int n = snprintf(line, sizeof line, "%d %lld\n", (int)cs_delivery_partition(d), (long long)cs_delivery_offset(d));
    if (write(out_fd, line, (size_t)n) != n) return CS_RETRY;
    return CS_ACK;
}

static int assign_fd = -1;

static void note_partitions(char sign, const int32_t *partitions, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char line[32];
        int len = snprintf(line, sizeof line, "%c%d\n", sign, (int)partitions[i]);
        if (write(assign_fd, line, (size_t)len) != len) perror("PAYOUT_ASSIGN_FILE");
    }
}

static void on_assign(cs_sub *s, const char *topic, const int32_t *partitions, size_t n, void *user) {
    (void)s, (void)topic, (void)user;
    note_partitions('+', partitions, n);
}

static void on_revoke(cs_sub *s, const char *topic, const int32_t *partitions, size_t n, void *user) {
    (void)s, (void)topic, (void)user;
    note_partitions('-', partitions, n);
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s TOPIC GROUP OUTPUT_FILE WORKERS [tracked|auto]\n", argv[0]);
        return 2;
    }
    cst_hold_stop_signals();
    const char *log_file = getenv("PAYOUT_LOG_FILE");
    if (log_file && *log_file && !freopen(log_file, "a", stderr)) return 2;
    const char *assign_file = getenv("PAYOUT_ASSIGN_FILE");
    if (assign_file && *assign_file) {
        assign_fd = open(assign_file, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (assign_fd < 0) {
            perror(assign_file);
            return 2;
        }
    }
    const char *session = getenv("PAYOUT_SESSION_TIMEOUT_MS");
    if (!session || !*session) session = "6000";
    out_fd = open(argv[3], O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out_fd < 0) {
        perror(argv[3]);
        return 2;
    }
    cs_log_set_level(CS_LOG_WARN);
    unsigned seed = (unsigned)getpid();
    cs_app *app = cs_app_new("payout-worker", "1.0");
    cs_kafka *k = cs_kafka_new(NULL);
    cs_sub *s = cs_kafka_subscribe(k, argv[1], pay_out, &seed);
    cs_err err = CS_OK;
    const char *protocol = getenv("PAYOUT_GROUP_PROTOCOL");
    bool consumer_protocol = protocol && !strcmp(protocol, "consumer");
    if (!err && consumer_protocol) err = cs_kafka_group_protocol(k, CS_GROUP_PROTOCOL_CONSUMER);
    /* The consumer protocol refuses session.timeout.ms: its session is the broker's. */
    if (!err && !consumer_protocol && strcmp(session, "default"))
        err = cs_kafka_config(k, "session.timeout.ms", session);
    if (!err && assign_fd >= 0) err = cs_sub_on_assign(s, on_assign, NULL);
    if (!err && assign_fd >= 0) err = cs_sub_on_revoke(s, on_revoke, NULL);
    if (!err) err = cs_kafka_config(k, "fetch.wait.max.ms", "10");
    if (!err) err = cs_sub_group(s, argv[2]);
    bool auto_mode = argc == 6 && !strcmp(argv[5], "auto");
    if (!err) err = cs_sub_commit_mode(s, auto_mode ? CS_COMMIT_AUTO : CS_COMMIT_TRACKED);
    if (!err && auto_mode) err = cs_kafka_config(k, "auto.commit.interval.ms", "100");
    if (!err) err = cs_sub_workers(s, atoi(argv[4]));
    const char *interval = getenv("PAYOUT_COMMIT_INTERVAL_MS");
    if (!err) err = cs_sub_commit_interval_ms(s, interval ? atoi(interval) : 100);
    const char *acked_set = getenv("PAYOUT_ACKED_SET");
    if (!err && acked_set && !strcmp(acked_set, "0")) err = cs_sub_acked_set(s, 0);
    const char *hold = getenv("PAYOUT_HOLD_EVERY");
    if (hold) hold_every = atol(hold);
    const char *hold_for = getenv("PAYOUT_HOLD_MS");
    if (hold_for) hold_ms = atoi(hold_for);
    if (!err) err = cs_app_add_kafka(app, k);
    if (!err) err = cs_app_run(app);
    if (err) fprintf(stderr, "payout_worker: %s\n", cs_errmsg());
    cs_app_destroy(app);
    close(out_fd);
    if (assign_fd >= 0) close(assign_fd);
    return err ? 1 : 0;
}
