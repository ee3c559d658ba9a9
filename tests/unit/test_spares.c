/* test_spares.c — the spare deliveries a pipeline keeps (delivery_pool.h)
 * through the real pipeline, no cluster: a settled delivery comes back as a
 * spare, the next one handed out (to any partition) is a spare and reads as
 * freshly zeroed, the pool keeps at most what it was made for, and a pending
 * delivery settled after its pipeline is gone still lands safely (run it
 * under valgrind or LeakSanitizer to see the last unref free the spares). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/delivery_internal.h"
#include "base/log.h"
#include "core/pipeline.h"

#include "fake_source.h"

enum { MAX_OPEN = 8, N = 12 };

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static cs_delivery *held[N];
static int n_held;

/* Keeps every delivery pending, for the test to settle. */
static cs_outcome hold(cs_delivery *d, void *user) {
    (void)user;
    pthread_mutex_lock(&held_lock);
    held[n_held++] = d;
    pthread_mutex_unlock(&held_lock);
    return CS_PENDING;
}

static int held_count(void) {
    pthread_mutex_lock(&held_lock);
    int n = n_held;
    pthread_mutex_unlock(&held_lock);
    return n;
}

static size_t spares(cs_part *part) { return cs__delivery_pool_count(cs__part_spares(part)); }

/* A tracked pipeline with one partition and n records handed to `hold`. */
static cs_pipeline *start(cs_part **part_out, int n) {
    n_held = 0;
    cs_pipeline_config cfg = {.name = "t", .handler = hold, .tracked = true, .workers = 1, .max_open = MAX_OPEN};
    cs_pipeline *p = cs__pipeline_new(&cfg);
    assert_non_null(p);
    cs_part *part = cs__pipeline_part(p, "in", 0, &fake_source);
    assert_non_null(part);
    cs__pipeline_assign(p, part);
    for (int i = 0; i < n; i++) {
        cs_delivery *d = cs__delivery_alloc(part);
        assert_non_null(d);
        d->offset = i;
        d->timestamp = -1;
        d->msg = &fake_msg;
        cs__pipeline_dispatch(p, part, d); /* past max_open it asks for a pause; the test ignores it */
    }
    /* every handler ran (a condition, not a timing) */
    for (int64_t deadline = cs__now_ms() + 30000; held_count() < n; usleep(1000))
        if (cs__now_ms() > deadline) fail_msg("%d of %d handlers ran within 30 s", held_count(), n);
    *part_out = part;
    return p;
}

static void stop(cs_pipeline *p) {
    cs__pipeline_drain(p, cs__now_ms() + 1000);
    cs__pipeline_destroy(p);
}

static void settled_deliveries_come_back_zeroed(void **state) {
    (void)state;
    cs_part *part;
    cs_pipeline *p = start(&part, N);
    uintptr_t addr[N]; /* kept as numbers: a pointer's value is indeterminate after its free */
    for (int i = 0; i < N; i++) {
        addr[i] = (uintptr_t)held[i];
        assert_int_equal(cs_delivery_settle(held[i], CS_ACK), CS_OK);
    }
    if (!CS_SPARES) { /* AddressSanitizer: every delivery is freed for real */
        assert_int_equal(spares(part), 0);
        stop(p);
        return;
    }
    /* every one settled is kept (the pool keeps thousands) */
    assert_int_equal(spares(part), N);
    /* another partition of the pipeline gets one of them */
    cs_part *other = cs__pipeline_part(p, "in", 1, &fake_source);
    assert_non_null(other);
    assert_ptr_equal(cs__part_spares(other), cs__part_spares(part));
    cs_delivery *d = cs__delivery_alloc(other);
    assert_int_equal(spares(part), N - 1);
    bool was_held = false;
    for (int i = 0; i < N; i++) was_held |= (uintptr_t)d == addr[i];
    assert_true(was_held);
    /* Nothing of the record it carried before, up to the fields written
     * before they are read (CS_DELIVERY_ZEROED): the trace strings are set at
     * hand-out, the inline decoded bytes read only through `decoded`. Only
     * its new partition's topic and number are set (cs__delivery_alloc). */
    cs_delivery want;
    memset(&want, 0, sizeof want); /* padding too: the bytes are compared */
    want.topic = cs__part_topic(other);
    want.partition = cs__part_number(other);
    assert_memory_equal(d, &want, CS_DELIVERY_ZEROED);
    memset(d->traceparent, 'x', sizeof d->traceparent); /* as a traced record would leave them */
    memset(d->trace_id, 'x', sizeof d->trace_id);
    cs__delivery_read_trace(d);
    assert_null(cs_delivery_traceparent(d));
    assert_string_equal(d->trace_id, "");
    /* handed back unused: the caller owns it like a fresh one and may free it */
    cs__part_ref(other);
    d->part = other;
    cs__delivery_free(d);
    assert_int_equal(spares(part), N);
    stop(p);
}

/* The pool keeps at most `keep`; the rest is freed for real (LeakSanitizer
 * and valgrind see every one of them go). */
static void the_pool_keeps_at_most_its_size(void **state) {
    (void)state;
    enum { KEEP = 3, MADE = 5 };
    cs_delivery_pool *pool = cs__delivery_pool_new(KEEP);
    assert_non_null(pool);
    for (int i = 0; i < MADE; i++) {
        cs_delivery *d = calloc(1, sizeof *d);
        assert_non_null(d);
        if (!cs__delivery_pool_put(pool, d)) free(d);
    }
    assert_int_equal(cs__delivery_pool_count(pool), KEEP);
    cs_delivery *taken = cs__delivery_pool_take(pool); /* takes all three, hands one out */
    assert_non_null(taken);
    assert_int_equal(cs__delivery_pool_count(pool), KEEP - 1);
    assert_true(cs__delivery_pool_put(pool, taken)); /* the shared list has room again */
    assert_int_equal(cs__delivery_pool_count(pool), KEEP);
    cs__delivery_pool_unref(pool);
}

static void pending_settled_after_the_pipeline_is_gone(void **state) {
    (void)state;
    cs_part *part;
    cs_pipeline *p = start(&part, MAX_OPEN);
    stop(p); /* the deliveries stay pending; they hold the partition */
    /* stale now; each goes back to the partition, the last one frees it */
    for (int i = 0; i < MAX_OPEN; i++) assert_int_equal(cs_delivery_settle(held[i], CS_ACK), CS_ERR_STALE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(settled_deliveries_come_back_zeroed),
        cmocka_unit_test(pending_settled_after_the_pipeline_is_gone),
        cmocka_unit_test(the_pool_keeps_at_most_its_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
