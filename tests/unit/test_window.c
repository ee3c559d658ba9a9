/* test_window.c — the Transactional window (src/core/window.c) against a
 * model, through the real pipeline: records held pending by handlers are
 * settled in a random order (seed printed) while windows are taken at random
 * moments. Every take must hand out exactly the outputs of the settled
 * records below the position it commits, and the position must be the lowest
 * open record: an output never rides in a transaction that does not commit
 * its source. A rewind makes the window's records stale and forgets their
 * outputs. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/attempts_meta.h"
#include "base/log.h"
#include "core/pipeline.h"

#include "fake_source.h"

enum { N = 3000 };

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static cs_delivery *held[N];
static int n_held;

/* Publishes one output carrying its source offset, keeps the delivery. */
static cs_outcome hold(cs_delivery *d, void *user) {
    (void)user;
    int64_t off = cs_delivery_offset(d);
    cs_record r = {.topic = "out", .partition = -1, .value = &off, .value_len = sizeof off};
    assert_int_equal(cs_delivery_publish(d, &r), CS_OK);
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

static cs_pipeline *start(cs_part **part_out) {
    n_held = 0;
    cs_pipeline_config cfg = {
        .name = "t", .handler = hold, .tracked = true, .transactional = true, .workers = 3, .max_open = 100000};
    cs_pipeline *p = cs__pipeline_new(&cfg);
    assert_non_null(p);
    cs_part *part = cs__pipeline_part(p, "in", 0, &fake_source);
    cs__pipeline_assign(p, part);
    for (int i = 0; i < N; i++) {
        cs_delivery *d = cs__delivery_alloc(part);
        d->offset = i;
        d->timestamp = -1;
        d->msg = &fake_msg;
        cs__pipeline_dispatch(p, part, d);
    }
    /* every handler ran (a condition, not a timing) */
    for (int64_t deadline = cs__now_ms() + 30000; held_count() < N; usleep(1000))
        if (cs__now_ms() > deadline) fail_msg("%d of %d handlers ran within 30 s", held_count(), N);
    *part_out = part;
    return p;
}

static void stop(cs_pipeline *p) {
    cs__pipeline_drain(p, cs__now_ms() + 1000);
    cs__pipeline_destroy(p);
}

/* One take: checks it against the model and marks what it handed out. */
static void take_and_check(cs_part *part, const bool *settled, bool *taken) {
    cs_commit_state s = {.pos = -1};
    cs_output_list outs = {0};
    size_t n = 0;
    cs__window_take(part, false, &s, &outs, &n);
    int64_t pos = s.pos;
    int64_t lowest_open = 0;
    while (lowest_open < N && settled[lowest_open]) lowest_open++;
    assert_int_equal(pos, lowest_open);
    size_t counted = 0;
    for (cs_output *o = CS_STAILQ_FIRST(&outs); o; o = o->next, counted++) {
        int64_t src;
        memcpy(&src, o->rec.value, sizeof src);
        assert_int_equal(src, o->source_offset);
        assert_true(src < pos); /* its source is committed by this take */
        assert_true(settled[src]);
        assert_false(taken[src]); /* never twice */
        taken[src] = true;
    }
    assert_int_equal(counted, n);
    for (int64_t o = 0; o < pos; o++) assert_true(taken[o]); /* nothing below the position stays behind */
    cs__part_commit_done(part, pos, s.meta, true);
    cs__output_list_free(&outs);
}

static void shuffle(cs_delivery **a, int n, unsigned *seed) {
    for (int i = n - 1; i > 0; i--) {
        int j = rand_r(seed) % (i + 1);
        cs_delivery *t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static void outputs_ride_only_with_their_committed_source(void **state) {
    (void)state;
    unsigned seed =
        getenv("CS_SEED") ? (unsigned)strtoul(getenv("CS_SEED"), NULL, 10) : (unsigned)time(NULL) ^ (unsigned)getpid();
    printf("seed %u (replay with CS_SEED=%u)\n", seed, seed);
    for (int round = 0; round < 5; round++) {
        cs_part *part;
        cs_pipeline *p = start(&part);
        static bool settled[N], taken[N];
        memset(settled, 0, sizeof settled);
        memset(taken, 0, sizeof taken);
        /* Mostly in order with random local disorder, or fully random. */
        if (round % 2) {
            shuffle(held, N, &seed);
        } else {
            for (int i = 0; i < N; i += 50) shuffle(held + i, N - i < 50 ? N - i : 50, &seed);
        }
        for (int i = 0; i < N; i++) {
            int64_t off = cs_delivery_offset(held[i]);
            assert_int_equal(cs_delivery_settle(held[i], CS_ACK), CS_OK);
            settled[off] = true;
            if (rand_r(&seed) % 25 == 0) take_and_check(part, settled, taken);
        }
        take_and_check(part, settled, taken);
        for (int o = 0; o < N; o++) assert_true(taken[o]);
        stop(p);
    }
}

static void rewind_forgets_the_window(void **state) {
    (void)state;
    cs_part *part;
    cs_pipeline *p = start(&part);
    static bool settled[N], taken[N];
    memset(settled, 0, sizeof settled);
    memset(taken, 0, sizeof taken);
    for (int i = 0; i < 100; i++) { /* 0..99 settle and commit */
        assert_int_equal(cs_delivery_settle(held[i], CS_ACK), CS_OK);
        settled[i] = true;
    }
    take_and_check(part, settled, taken);
    for (int i = 101; i < 200; i++) assert_int_equal(cs_delivery_settle(held[i], CS_ACK), CS_OK); /* 100 open */
    assert_int_equal(cs__window_rewind(p, part), 100); /* back to the committed position */
    /* The window is empty and the old epoch's records are stale. */
    cs_commit_state s;
    cs_output_list outs = {0};
    size_t n = 0;
    cs__window_take(part, false, &s, &outs, &n);
    assert_int_equal(n, 0);
    assert_true(CS_STAILQ_EMPTY(&outs));
    for (int i = 100; i < 101; i++) assert_int_equal(cs_delivery_settle(held[i], CS_ACK), CS_ERR_STALE);
    for (int i = 200; i < N; i++) assert_int_equal(cs_delivery_settle(held[i], CS_ACK), CS_ERR_STALE);
    stop(p);
}

/* A take is the whole state a commit needs (the committer does not come
 * back to the partition for its name), and a partition whose log is unknown
 * gives none: nothing of it is committed until a record shows which log it
 * is (cs__part_mark_log_unknown). */
static void a_take_names_its_partition_and_an_unknown_log_gives_none(void **state) {
    (void)state;
    cs_part *part;
    cs_pipeline *p = start(&part);
    for (int i = 0; i < 10; i++) assert_int_equal(cs_delivery_settle(held[i], CS_ACK), CS_OK);
    cs_commit_state s = {0};
    cs_output_list outs = {0};
    size_t n = 0;
    cs__part_mark_log_unknown(part);
    assert_false(cs__window_take(part, false, &s, &outs, &n));
    assert_int_equal(n, 0);
    assert_null(s.part); /* untouched */
    cs__part_clear_log_unknown(part);
    assert_true(cs__window_take(part, false, &s, &outs, &n));
    assert_ptr_equal(s.part, part);
    assert_string_equal(s.topic, "in");
    assert_int_equal(s.partition, 0);
    assert_int_equal(s.pos, 10);
    assert_int_equal(n, 10);   /* the outputs of 0..9 */
    assert_false(s.truncated); /* no acked set under Transactional */
    cs__output_list_free(&outs);
    for (int i = 10; i < N; i++) assert_int_equal(cs_delivery_settle(held[i], CS_ACK), CS_OK);
    stop(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(outputs_ride_only_with_their_committed_source),
        cmocka_unit_test(rewind_forgets_the_window),
        cmocka_unit_test(a_take_names_its_partition_and_an_unknown_log_gives_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
