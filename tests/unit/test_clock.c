/* test_clock.c — relative waits are measured on the monotonic clock, through
 * the injectable clock source (src/base/clock.h), never by stepping the
 * machine's clock:
 *   - a deadline is the monotonic reading plus the delay, whatever the
 *     realtime reading says (a fully fake source);
 *   - a timed wait on a cs__cond_init_monotonic condition ends at its
 *     deadline, neither stretched nor cut, while the source's realtime clock
 *     reads an hour ahead or behind the kernel's (as if NTP had stepped it
 *     right after a realtime deadline was taken);
 *   - a cs_delivery_retry_after delay through the real pipeline (its delay heap and
 *     timer thread) comes back on time under the same stepped realtime clock,
 *     and its timer thread waits instead of polling the clock.
 * The sources below read the kernel's CLOCK_MONOTONIC for the monotonic clock
 * whenever a real wait happens: the kernel measures pthread_cond_timedwait
 * on its own clock. The test's own deadlines read the kernel's clock directly. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/clock.h"
#include "core/delivery_internal.h"
#include "core/pipeline.h"

#include "fake_source.h"

enum { HOUR_S = 3600, WATCHDOG_MS = 10000 };
/* A source realtime_shift_s = +1 h ahead reads as the clock stepped back after it was read. */
#define STEPPED(step) ((step) > 0 ? "back" : "forward")

/* The test's own clock: the kernel's, never the source under test. */
static int64_t kernel_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the sources ------------------------------------------------------------ */

/* Fully fake: both clocks are what the test sets. */
static struct timespec fake_mono, fake_real;
static int fake_clock(clockid_t id, struct timespec *ts) {
    *ts = id == CLOCK_MONOTONIC ? fake_mono : fake_real;
    return 0;
}

/* The kernel's monotonic clock (counted), and its realtime clock shifted by
 * realtime_shift_s: +1 h reads as if the clock had been stepped back an hour
 * after a reading, -1 h as if stepped forward. */
static _Atomic long realtime_shift_s;
static _Atomic uint64_t monotonic_reads;
static int stepped_clock(clockid_t id, struct timespec *ts) {
    int rc = clock_gettime(id, ts);
    if (id == CLOCK_MONOTONIC) atomic_fetch_add(&monotonic_reads, 1);
    else ts->tv_sec += atomic_load(&realtime_shift_s);
    return rc;
}

static int restore_source(void **state) {
    (void)state;
    cs__clock_set_source(NULL);
    return 0;
}

/* ---- deadlines ---------------------------------------------------------------- */

static void deadlines_come_from_the_monotonic_clock(void **state) {
    (void)state;
    cs__clock_set_source(fake_clock);
    fake_mono = (struct timespec){1000, 250000000L};
    fake_real = (struct timespec){1700000000, 900000000L};
    struct timespec before, after, real;
    cs__deadline_after(&before, 1500);
    assert_int_equal(before.tv_sec, 1001);
    assert_int_equal(before.tv_nsec, 750000000L);
    assert_int_equal(cs__now_ms(), 1000250);
    assert_int_equal(cs__mono_ns(), 1000250000000ULL);
    for (int step = -1; step <= 1; step += 2) { /* the wall clock stepped back, then forward, by an hour */
        fake_real.tv_sec = 1700000000 + step * HOUR_S;
        cs__realtime_now(&real);
        assert_int_equal(real.tv_sec, fake_real.tv_sec); /* the step is visible where it belongs: timestamps */
        cs__deadline_after(&after, 1500);
        assert_memory_equal(&after, &before, sizeof after);
        assert_int_equal(cs__now_ms(), 1000250);
    }
    cs__deadline_after(&after, -5); /* a deadline already passed is now, not earlier */
    assert_int_equal(after.tv_sec, 1000);
    assert_int_equal(after.tv_nsec, 250000000L);
}

/* ---- a timed wait -------------------------------------------------------------- */

enum { WAIT_MS = 150 };

typedef struct timed_wait {
    pthread_mutex_t lock;
    pthread_cond_t cv; /* never signalled: only the deadline ends the wait */
    _Atomic bool done;
    int rc;
    int64_t started_ms, ended_ms; /* the kernel's monotonic clock */
} timed_wait;

static void *wait_once(void *arg) {
    timed_wait *w = arg;
    pthread_mutex_lock(&w->lock);
    w->started_ms = kernel_ms();
    struct timespec deadline;
    cs__deadline_after(&deadline, WAIT_MS);
    do w->rc = pthread_cond_timedwait(&w->cv, &w->lock, &deadline);
    while (w->rc == 0); /* a spurious wake-up: the deadline stands */
    w->ended_ms = kernel_ms();
    pthread_mutex_unlock(&w->lock);
    atomic_store(&w->done, true);
    return NULL;
}

static void a_timed_wait_ends_at_its_deadline_whatever_the_wall_clock(void **state) {
    (void)state;
    cs__clock_set_source(stepped_clock);
    for (int step = -1; step <= 1; step += 2) {
        atomic_store(&realtime_shift_s, (long)step * HOUR_S);
        static timed_wait w; /* static: a wait stretched past the watchdog keeps using it */
        memset(&w, 0, sizeof w);
        pthread_mutex_init(&w.lock, NULL);
        cs__cond_init_monotonic(&w.cv);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, wait_once, &w), 0);
        int64_t watchdog = kernel_ms() + WATCHDOG_MS;
        while (!atomic_load(&w.done) && kernel_ms() < watchdog) usleep(1000);
        if (!atomic_load(&w.done))
            fail_msg("a %d ms wait had not ended after %d s with the realtime clock stepped %s an hour: it is "
                     "measured on the realtime clock",
                     WAIT_MS, WATCHDOG_MS / 1000, STEPPED(step));
        pthread_join(t, NULL);
        assert_int_equal(w.rc, ETIMEDOUT);
        /* POSIX: ETIMEDOUT only once the condition's clock passed the deadline. */
        if (w.ended_ms - w.started_ms < WAIT_MS)
            fail_msg("a %d ms wait ended after %lld ms with the realtime clock stepped %s an hour: the deadline "
                     "and the condition variable do not measure on the same (monotonic) clock",
                     WAIT_MS, (long long)(w.ended_ms - w.started_ms), STEPPED(step));
        pthread_cond_destroy(&w.cv);
        pthread_mutex_destroy(&w.lock);
    }
}

/* ---- a delayed retry through the pipeline ------------------------------------- */

enum { DELAY_MS = 200, MAX_OPEN = 8 };
/* Clock readings a waiting timer thread makes for one delay: a few per wake-up
 * (the due time, the deadline), and it wakes once or twice. A timer thread
 * whose wait returns at once reads it on every turn of its loop, tens of
 * thousands of times in DELAY_MS. */
enum { MAX_READS_WHILE_DELAYED = 1000 };

static _Atomic int attempts;
static _Atomic uint64_t reads_at_retry, reads_at_return;
static _Atomic int64_t retried_ms, returned_ms;

static cs_outcome retry_once_after_delay(cs_delivery *d, void *user) {
    (void)user;
    if (atomic_fetch_add(&attempts, 1) == 0) {
        atomic_store(&retried_ms, kernel_ms());
        cs_outcome o = cs_delivery_retry_after(d, DELAY_MS);
        atomic_store(&reads_at_retry, atomic_load(&monotonic_reads));
        return o;
    }
    atomic_store(&reads_at_return, atomic_load(&monotonic_reads));
    atomic_store(&returned_ms, kernel_ms());
    return CS_ACK;
}

static void a_delayed_retry_comes_back_on_time_after_a_clock_step(void **state) {
    (void)state;
    cs__clock_set_source(stepped_clock);
    for (int step = -1; step <= 1; step += 2) {
        atomic_store(&realtime_shift_s, (long)step * HOUR_S);
        atomic_store(&attempts, 0);
        cs_pipeline_config cfg = {
            .name = "clock", .handler = retry_once_after_delay, .tracked = true, .workers = 1, .max_open = MAX_OPEN};
        cs_pipeline *p = cs__pipeline_new(&cfg);
        assert_non_null(p);
        cs_part *part = cs__pipeline_part(p, "in", 0, &fake_source);
        assert_non_null(part);
        cs__pipeline_assign(p, part);
        cs_delivery *d = cs__delivery_alloc(part);
        assert_non_null(d);
        d->offset = 0;
        d->timestamp = -1;
        d->msg = &fake_msg;
        cs__pipeline_dispatch(p, part, d);

        int64_t watchdog = kernel_ms() + WATCHDOG_MS;
        while (atomic_load(&attempts) < 2 && kernel_ms() < watchdog) usleep(1000);
        int seen = atomic_load(&attempts);
        cs__pipeline_drain(p, cs__now_ms() + 1000);
        cs__pipeline_destroy(p);
        if (seen < 2)
            fail_msg("a %d ms retry_after had not come back after %d s (attempts: %d) with the realtime clock "
                     "stepped %s an hour: the delay timer waits on the realtime clock",
                     DELAY_MS, WATCHDOG_MS / 1000, seen, STEPPED(step));
        int64_t waited = atomic_load(&returned_ms) - atomic_load(&retried_ms);
        if (waited < DELAY_MS)
            fail_msg("the retry came back after %lld ms, before its %d ms delay", (long long)waited, DELAY_MS);
        uint64_t reads = atomic_load(&reads_at_return) - atomic_load(&reads_at_retry);
        if (reads > MAX_READS_WHILE_DELAYED)
            fail_msg("the monotonic clock was read %llu times during one %d ms delay with the realtime clock "
                     "stepped %s an hour: the delay timer polls instead of waiting (its wait ends at once: cut by "
                     "the step, or a deadline on another clock than its condition variable's)",
                     (unsigned long long)reads, DELAY_MS, STEPPED(step));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(deadlines_come_from_the_monotonic_clock, restore_source),
        cmocka_unit_test_teardown(a_timed_wait_ends_at_its_deadline_whatever_the_wall_clock, restore_source),
        cmocka_unit_test_teardown(a_delayed_retry_comes_back_on_time_after_a_clock_step, restore_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
