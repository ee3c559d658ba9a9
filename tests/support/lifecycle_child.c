/* lifecycle_child.c — a minimal service for the signal tests in
 * tests/kafka/test_lifecycle.c. It runs under cs_app_run on the cluster named
 * by CSTREAM_BROKERS and reports each event on stdout as one flushed line:
 *   startup                 the start-up hook ran
 *   assigned <topic> <n>    the subscription was assigned n partitions
 *   handled <p> <offset>    the handler ran for a record
 *   shutdown                the shutdown hook ran
 *   exit <code name>        cs_app_run returned
 * Usage: lifecycle_child TOPIC GROUP. Exit status: 0 when cs_app_run returned
 * CS_OK, 1 when it failed, 2 on a usage error. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cstream.h"

static int marker; /* the hooks' user pointer */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    flockfile(stdout);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    funlockfile(stdout);
    va_end(ap);
}

static cs_err on_startup(cs_app *app, void *user) {
    if (user != &marker) return cs_app_fail(app, "start-up hook got the wrong user pointer");
    say("startup");
    return CS_OK;
}

static void on_shutdown(cs_app *app, void *user) {
    (void)app;
    say(user == &marker ? "shutdown" : "shutdown-wrong-user");
}

static void on_assign(cs_sub *s, const char *topic, const int32_t *partitions, size_t n, void *user) {
    (void)s;
    (void)partitions;
    (void)user;
    say("assigned %s %zu", topic, n);
}

static cs_outcome handle(cs_delivery *d, void *user) {
    (void)user;
    say("handled %d %lld", (int)cs_delivery_partition(d), (long long)cs_delivery_offset(d));
    return CS_ACK;
}

#define CHECK(expr)                                                                                                    \
    do {                                                                                                               \
        if ((expr) != CS_OK) {                                                                                         \
            fprintf(stderr, "lifecycle_child: %s: %s\n", #expr, cs_errmsg());                                          \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

int main(int argc, char **argv) {
    const char *brokers = getenv("CSTREAM_BROKERS");
    if (argc != 3 || !brokers || !*brokers) {
        fprintf(stderr, "usage: CSTREAM_BROKERS=host:port lifecycle_child TOPIC GROUP\n");
        return 2;
    }
    cs_app *app = cs_app_new("lifecycle-child", "1.0");
    cs_kafka *k = cs_kafka_new(NULL); /* from CSTREAM_BROKERS */
    if (!app || !k) return 1;
    CHECK(cs_kafka_config(k, "session.timeout.ms", "6000"));
    CHECK(cs_kafka_config(k, "heartbeat.interval.ms", "500"));
    CHECK(cs_kafka_config(k, "fetch.wait.max.ms", "10"));
    /* No timed commit during the test: what is committed, the stop committed. */
    CHECK(cs_kafka_config(k, "auto.commit.interval.ms", "600000"));
    cs_sub *s = cs_kafka_subscribe(k, argv[1], handle, NULL);
    if (!s) return 1;
    CHECK(cs_sub_group(s, argv[2]));
    CHECK(cs_sub_on_assign(s, on_assign, NULL));
    CHECK(cs_app_on_startup(app, on_startup, &marker));
    CHECK(cs_app_on_shutdown(app, on_shutdown, &marker));
    CHECK(cs_app_add_kafka(app, k));
    cs_err err = cs_app_run(app);
    say("exit %s", cs_err_name(err));
    if (err) fprintf(stderr, "lifecycle_child: cs_app_run: %s\n", cs_errmsg());
    cs_app_destroy(app);
    return err == CS_OK ? 0 : 1;
}
