/* test_lane_placement.c — lanes by partition through the real pipeline, no
 * cluster (src/core/partition.c, place_in_lane): a partition's lane is
 * chosen when it is assigned, among the partitions held now, so that after
 * assignments and releases every worker has a partition; and a partition
 * released while one of its handlers may still run keeps its lane at its
 * next assignment, so that its new records never run beside that handler.
 * tests/kafka/test_lanes.c checks the same spread through a consumer group. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/clock.h"
#include "core/delivery_internal.h"
#include "core/pipeline.h"

#include "fake_source.h"

enum { PARTS = 8, MAX_HELD = 16 };

/* The worker running the handler, numbered as workers first run a record. */
static _Thread_local int worker_no = -1;
static _Atomic int workers_seen;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int worker_of[PARTS]; /* the worker that ran the partition's last record, -1 none */
static int handled;
static bool hold_next;                /* the next record stays pending, for the test to settle */
static cs_delivery *held_d[MAX_HELD]; /* those records */
static int n_held;

static cs_outcome note_worker(cs_delivery *d, void *user) {
    (void)user;
    if (worker_no < 0) worker_no = atomic_fetch_add(&workers_seen, 1);
    pthread_mutex_lock(&lock);
    worker_of[cs_delivery_partition(d)] = worker_no;
    handled++;
    bool hold = hold_next && n_held < MAX_HELD;
    if (hold) held_d[n_held++] = d;
    hold_next = false;
    pthread_mutex_unlock(&lock);
    return hold ? CS_PENDING : CS_ACK;
}

static void reset(void) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < PARTS; i++) worker_of[i] = -1;
    handled = 0;
    n_held = 0;
    hold_next = false;
    pthread_mutex_unlock(&lock);
}

static cs_pipeline *start(int workers, cs_part **parts) {
    reset();
    cs_pipeline_config cfg = {
        .name = "t", .handler = note_worker, .tracked = true, .workers = workers, .max_open = 100};
    cs_pipeline *p = cs__pipeline_new(&cfg);
    assert_non_null(p);
    for (int i = 0; i < PARTS; i++) assert_non_null(parts[i] = cs__pipeline_part(p, "in", i, &fake_source));
    return p;
}

/* One record to the partition; returns once its handler ran (a condition, not a timing). */
static void run_one_record(cs_pipeline *p, cs_part *part, int64_t offset) {
    pthread_mutex_lock(&lock);
    int before = handled;
    pthread_mutex_unlock(&lock);
    cs_delivery *d = cs__delivery_alloc(part);
    assert_non_null(d);
    d->offset = offset;
    d->timestamp = -1;
    d->msg = &fake_msg;
    cs__pipeline_dispatch(p, part, d);
    for (int64_t deadline = cs__now_ms() + 30000;; usleep(1000)) {
        pthread_mutex_lock(&lock);
        bool ran = handled > before;
        pthread_mutex_unlock(&lock);
        if (ran) return;
        if (cs__now_ms() > deadline)
            fail_msg("the handler of partition %d did not run within 30 s", cs__part_number(part));
    }
}

static int worker(int partition) {
    pthread_mutex_lock(&lock);
    int w = worker_of[partition];
    pthread_mutex_unlock(&lock);
    return w;
}

static void stop(cs_pipeline *p) {
    cs__pipeline_drain(p, cs__now_ms() + 1000);
    cs__pipeline_destroy(p);
}

/* The kafka test's three rebalances, by hand: x0 x1 y0 y1 assigned, y0 y1
 * released, z0 z1 assigned. In the order partitions were first seen, z0 and
 * z1 (the 5th and 6th) went to the lanes of x0 and x1. */
static void every_worker_has_a_partition_held_now(void **state) {
    (void)state;
    enum { X0, X1, Y0, Y1, Z0, Z1 };
    cs_part *parts[PARTS];
    cs_pipeline *p = start(4, parts);
    for (int i = X0; i <= Y1; i++) cs__pipeline_assign(p, parts[i]);
    for (int i = Y0; i <= Y1; i++) {
        cs__pipeline_stop_partition(p, parts[i]);
        cs__pipeline_release_partition(p, parts[i]);
    }
    for (int i = Z0; i <= Z1; i++) cs__pipeline_assign(p, parts[i]);
    int64_t offset = 0;
    int held_now[] = {X0, X1, Z0, Z1};
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < sizeof held_now / sizeof *held_now; i++) run_one_record(p, parts[held_now[i]], offset++);
    bool busy[4] = {false};
    for (size_t i = 0; i < sizeof held_now / sizeof *held_now; i++) {
        int w = worker(held_now[i]);
        assert_true(w >= 0 && w < 4);
        if (busy[w]) fail_msg("partition %d shares worker %d with another partition held now", held_now[i], w);
        busy[w] = true;
    }
    stop(p);
}

/* A partition whose last assignment ended with a record pending (a handler
 * past the drain deadline looks the same) keeps its lane: at its next
 * assignment it joins the lane it had, not the emptiest one. One released
 * with nothing in flight moves to the emptiest lane. */
static void a_partition_with_a_handler_left_keeps_its_lane(void **state) {
    (void)state;
    cs_part *parts[PARTS];
    cs_pipeline *p = start(2, parts);
    cs__pipeline_assign(p, parts[0]); /* lane 0 */
    cs__pipeline_assign(p, parts[1]); /* lane 1 */
    pthread_mutex_lock(&lock);
    hold_next = true;
    pthread_mutex_unlock(&lock);
    run_one_record(p, parts[0], 0); /* pending */
    run_one_record(p, parts[1], 0);
    int lane_of_0 = worker(0), lane_of_1 = worker(1);
    assert_int_not_equal(lane_of_0, lane_of_1);
    for (int i = 0; i < 2; i++) {
        cs__pipeline_stop_partition(p, parts[i]);
        cs__pipeline_release_partition(p, parts[i]);
    }
    /* Both lanes are empty: 1 takes the first, and 0 would take the second
     * but keeps its own, the first. */
    cs__pipeline_assign(p, parts[1]);
    cs__pipeline_assign(p, parts[0]);
    run_one_record(p, parts[1], 1);
    run_one_record(p, parts[0], 1);
    assert_int_equal(worker(0), lane_of_0);
    assert_int_equal(worker(1), lane_of_0);
    pthread_mutex_lock(&lock);
    cs_delivery *pending = held_d[0];
    pthread_mutex_unlock(&lock);
    assert_int_equal(cs_delivery_settle(pending, CS_ACK), CS_ERR_STALE);

    /* Released again with nothing in flight: free to move. 0 goes back to
     * the first lane (both empty, the first on a tie), then 1 to the other. */
    for (int i = 0; i < 2; i++) {
        cs__pipeline_stop_partition(p, parts[i]);
        cs__pipeline_release_partition(p, parts[i]);
    }
    cs__pipeline_assign(p, parts[0]);
    cs__pipeline_assign(p, parts[1]);
    run_one_record(p, parts[0], 2);
    run_one_record(p, parts[1], 2);
    assert_int_equal(worker(0), lane_of_0);
    assert_int_equal(worker(1), lane_of_1);
    stop(p);
}

int main(void) {
    for (int i = 0; i < PARTS; i++) worker_of[i] = -1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_worker_has_a_partition_held_now),
        cmocka_unit_test(a_partition_with_a_handler_left_keeps_its_lane),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
