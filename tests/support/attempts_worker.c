/* attempts_worker.c — a Tracked service with max_attempts 4 and a dead-letter
 * topic, for the tests that kill it between attempts. Offset 0 of partition 0
 * is a poison record: in mode "selfkill" its handler kills its own process
 * (SIGKILL) every time; in mode "retry" it asks to come back after 300 ms.
 * Every run of the poison record appends "run <attempt>" to OUTPUT_FILE.
 * usage: attempts_worker TOPIC GROUP DEAD_LETTER_TOPIC OUTPUT_FILE selfkill|retry */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cstream.h>

#include "classic_session.h"
#include "stop_signals.h"

static int out_fd = -1;
static bool self_kill;

static cs_outcome handle(cs_delivery *d, void *user) {
    (void)user;
    if (cs_delivery_partition(d) != 0 || cs_delivery_offset(d) != 0) return CS_ACK;
    char line[32];
    int n = snprintf(line, sizeof line, "run %d\n", cs_delivery_attempt(d));
    if (write(out_fd, line, (size_t)n) != n) return CS_RETRY;
    if (self_kill) raise(SIGKILL);
    cs_delivery_set_reason(d, "poison");
    return cs_delivery_retry_after(d, 300);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s TOPIC GROUP DEAD_LETTER_TOPIC OUTPUT_FILE selfkill|retry\n", argv[0]);
        return 2;
    }
    cst_hold_stop_signals();
    self_kill = !strcmp(argv[5], "selfkill");
    out_fd = open(argv[4], O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out_fd < 0) return 2;
    cs_log_set_level(CS_LOG_WARN);
    cs_app *app = cs_app_new("attempts-worker", "1.0");
    cs_kafka *k = cs_kafka_new(NULL);
    cs_sub *s = cs_kafka_subscribe(k, argv[1], handle, NULL);
    cs_err err = cst_classic_session(k, "6000");
    if (!err) err = cs_kafka_config(k, "fetch.wait.max.ms", "10");
    if (!err) err = cs_sub_group(s, argv[2]);
    if (!err) err = cs_sub_commit_mode(s, CS_COMMIT_TRACKED);
    if (!err) err = cs_sub_commit_interval_ms(s, 50);
    if (!err) err = cs_sub_max_attempts(s, 4);
    if (!err) err = cs_sub_dead_letter(s, argv[3]);
    if (!err) err = cs_app_add_kafka(app, k);
    if (!err) err = cs_app_run(app);
    if (err) fprintf(stderr, "attempts_worker: %s\n", cs_errmsg());
    cs_app_destroy(app);
    return err ? 1 : 0;
}
