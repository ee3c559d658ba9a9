/* payout_worker.c — the service the kill tests SIGKILL: a Tracked payouts
 * handler with several workers, on the cluster named by CSTREAM_BROKERS. Each
 * handled payout is appended to an output file as "partition offset" (one
 * write per line, O_APPEND: lines from workers never interleave, and a
 * SIGKILL loses nothing already written). The parent counts lost and
 * duplicated payouts from that file.
 * usage: payout_worker TOPIC GROUP OUTPUT_FILE WORKERS [tracked|auto] */
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

static cs_outcome pay_out(cs_delivery *d, void *user) {
    unsigned *seed = user;
    (void)seed;
    /* A little work keeps several payouts in flight at any moment. */
    usleep((useconds_t)(cs_delivery_offset(d) * 7919 % 1500));
    char line[64];
    int n = snprintf(line, sizeof line, "%d %lld\n", (int)cs_delivery_partition(d), (long long)cs_delivery_offset(d));
    if (write(out_fd, line, (size_t)n) != n) return CS_RETRY;
    return CS_ACK;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s TOPIC GROUP OUTPUT_FILE WORKERS [tracked|auto]\n", argv[0]);
        return 2;
    }
    cst_hold_stop_signals();
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
    if (!err) err = cs_kafka_config(k, "session.timeout.ms", "6000");
    if (!err) err = cs_kafka_config(k, "fetch.wait.max.ms", "10");
    if (!err) err = cs_sub_group(s, argv[2]);
    bool auto_mode = argc == 6 && !strcmp(argv[5], "auto");
    if (!err) err = cs_sub_commit(s, auto_mode ? CS_COMMIT_AUTO : CS_COMMIT_TRACKED);
    if (!err && auto_mode) err = cs_kafka_config(k, "auto.commit.interval.ms", "100");
    if (!err) err = cs_sub_workers(s, atoi(argv[4]));
    if (!err) err = cs_sub_commit_interval_ms(s, 100);
    if (!err) err = cs_app_add_kafka(app, k);
    if (!err) err = cs_app_run(app);
    if (err) fprintf(stderr, "payout_worker: %s\n", cs_errmsg());
    cs_app_destroy(app);
    close(out_fd);
    return err ? 1 : 0;
}
