/*
 * test_alloc_failures.c - configuration calls under out of memory: every
 * allocation they make fails in turn (calloc, malloc, realloc and strdup are
 * wrapped at link time, -Wl,--wrap in tests/CMakeLists.txt), and each call
 * must then fail cleanly, with CS_ERR_NOMEM or NULL and a cs_errmsg() that
 * says "out of memory" and names the thing, instead of crashing or returning
 * a half-built object.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstream.h"

/* Armed: the allocation numbered fail_at (0 = the first since arming) fails. */
static bool armed;
static int fail_at, seen;

static bool fail_now(void) { return armed && seen++ == fail_at; }

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
void *__wrap_malloc(size_t size) { return fail_now() ? NULL : __real_malloc(size); }
void *__wrap_calloc(size_t n, size_t size) { return fail_now() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t size) { return fail_now() ? NULL : __real_realloc(p, size); }
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }

static void arm(int n) {
    fail_at = n;
    seen = 0;
    armed = true;
}

/* A bound on the allocations one configuration call makes, so that a call
 * that never stops allocating fails the test instead of looping. */
#define MAX_ALLOCATIONS 64

static void assert_oom_message(const char *names) {
    const char *msg = cs_errmsg();
    if (!strstr(msg, "out of memory") || !strstr(msg, names)) fail_msg("cs_errmsg() is \"%s\"", msg);
}

static void app_new_fails_cleanly(void **state) {
    (void)state;
    int failures = 0;
    for (int n = 0; n < MAX_ALLOCATIONS; n++) {
        arm(n);
        cs_app *app = cs_app_new("payouts", "1.2.3");
        armed = false;
        if (app) {
            assert_string_equal(cs_app_name(app), "payouts");
            assert_string_equal(cs_app_version(app), "1.2.3");
            cs_app_destroy(app);
            assert_true(failures >= 3); /* the app, its name, its version */
            return;
        }
        failures++;
        assert_oom_message("cs_app_new(payouts)");
    }
    fail_msg("cs_app_new still failed after %d allocations", MAX_ALLOCATIONS);
}

static void kafka_new_fails_cleanly(void **state) {
    (void)state;
    int failures = 0;
    for (int n = 0; n < MAX_ALLOCATIONS; n++) {
        arm(n);
        cs_kafka *k = cs_kafka_new("broker-1:9092");
        armed = false;
        if (k) {
            cs_kafka_destroy(k);
            assert_true(failures >= 2); /* the broker, its bootstrap servers */
            return;
        }
        failures++;
        assert_oom_message("broker-1:9092");
    }
    fail_msg("cs_kafka_new still failed after %d allocations", MAX_ALLOCATIONS);
}

static cs_outcome handle(cs_delivery *d, void *user) {
    (void)d;
    (void)user;
    return CS_ACK;
}

static void topic_and_subscribe_fail_cleanly(void **state) {
    (void)state;
    cs_kafka *k = cs_kafka_new("broker-1:9092");
    assert_non_null(k);
    int n = 0;
    for (;; n++) {
        assert_true(n < MAX_ALLOCATIONS);
        arm(n);
        cs_err err = cs_kafka_topic(k, "payouts.done", 3);
        armed = false;
        if (err == CS_OK) break;
        assert_int_equal(err, CS_ERR_NOMEM);
        assert_oom_message("payouts.done");
    }
    assert_true(n >= 2); /* the topic list, the topic's name */
    const char *topics[] = {"payouts", "refunds"};
    for (n = 0;; n++) {
        assert_true(n < MAX_ALLOCATIONS);
        arm(n);
        cs_sub *s = cs_kafka_subscribe_topics(k, topics, 2, handle, NULL);
        armed = false;
        if (s) break;
        assert_oom_message("cs_kafka_subscribe");
    }
    assert_true(n >= 5); /* the subscription, the list, its topics and name, each topic */
    cs_kafka_destroy(k);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(app_new_fails_cleanly),
        cmocka_unit_test(kafka_new_fails_cleanly),
        cmocka_unit_test(topic_and_subscribe_fail_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
