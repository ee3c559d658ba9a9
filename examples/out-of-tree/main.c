/* main.c — a service built outside cstream's source tree: it finds cstream
 * through pkg-config only (Makefile beside it), so it builds against an
 * installed cstream (`make install`, or the Debian packages).
 *
 * On the embedded cluster (or CSTREAM_BROKERS) it publishes RECORDS
 * greetings, handles them under Tracked, stops, and exits 0 only when every
 * one of them was handled, once. scripts/check-package runs it. */
#include <stdatomic.h>
#include <stdio.h>
#include <threads.h>

#include <cstream.h>

enum { RECORDS = 50, TIMEOUT_MS = 30000, POLL_MS = 20 };

static atomic_int handled;

static cs_outcome greet(cs_delivery *d, void *user) {
    (void)d, (void)user;
    atomic_fetch_add(&handled, 1);
    return CS_ACK;
}

int main(void) {
    cs_app *app = cs_app_new("greeter", CSTREAM_VERSION);
    if (!app) {
        fprintf(stderr, "greeter: %s\n", cs_errmsg());
        return 1;
    }
    cs_kafka *k = cs_kafka_new(NULL);      /* CSTREAM_BROKERS, else the embedded cluster */
    cs_err err = cs_app_add_kafka(app, k); /* the app owns k from here */
    if (!err) err = cs_kafka_default_group(k, "greeter");
    if (!err) err = cs_kafka_topic(k, "greetings", 2); /* created by the embedded cluster */
    /* The embedded cluster answers an empty fetch only after fetch.wait.max.ms. */
    if (!err) err = cs_kafka_config(k, "fetch.wait.max.ms", "10");
    cs_sub *s = err ? NULL : cs_kafka_subscribe(k, "greetings", greet, NULL);
    if (!err && !s) err = CS_ERR_ARG; /* cs_errmsg() says why */
    if (!err) err = cs_sub_commit_mode(s, CS_COMMIT_TRACKED);
    if (!err) err = cs_app_start(app);

    for (int i = 0; !err && i < RECORDS; i++) {
        char text[32];
        int len = snprintf(text, sizeof text, "hello %d", i);
        cs_record r = {.topic = "greetings",
                       .partition = -1,
                       .key = text,
                       .key_len = (size_t)len,
                       .value = text,
                       .value_len = (size_t)len};
        err = cs_publish(k, &r, NULL); /* returns once the cluster accepted it */
    }
    for (int waited = 0; !err && atomic_load(&handled) < RECORDS && waited < TIMEOUT_MS; waited += POLL_MS)
        thrd_sleep(&(struct timespec){.tv_nsec = POLL_MS * 1000000L}, NULL);
    if (!err) err = cs_app_stop(app); /* graceful: drains, commits, closes */

    int n = atomic_load(&handled);
    if (err) fprintf(stderr, "greeter: %s: %s\n", cs_err_name(err), cs_errmsg());
    else printf("greeter: handled %d of %d records (cstream %s)\n", n, RECORDS, CSTREAM_VERSION);
    cs_app_destroy(app);
    return !err && n == RECORDS ? 0 : 1;
}
