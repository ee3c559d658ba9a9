/* clock.c — monotonic and realtime readings through one source, and the
 * monotonic condition-variable deadline (see clock.h). No state but the
 * source.
 *
 * Owns: the clock source (an atomic, a test's override). Locks: none.
 * Threads: any thread. */
#define _POSIX_C_SOURCE 200809L
#include "base/clock.h"

#include <stdatomic.h>

static _Atomic(cs_clock_source_fn) source; /* NULL: clock_gettime */

void cs__clock_set_source(cs_clock_source_fn fn) { atomic_store(&source, fn); }

static void read_clock(clockid_t id, struct timespec *ts) {
    cs_clock_source_fn fn = atomic_load_explicit(&source, memory_order_acquire);
    /* Cannot fail: both clocks exist on every system cstream builds for. */
    (void)(fn ? fn(id, ts) : clock_gettime(id, ts));
}

int64_t cs__now_ms(void) {
    struct timespec ts;
    read_clock(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t cs__mono_ns(void) {
    struct timespec ts;
    read_clock(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void cs__realtime_now(struct timespec *ts) { read_clock(CLOCK_REALTIME, ts); }

void cs__cond_init_monotonic(pthread_cond_t *cv) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

void cs__deadline_after(struct timespec *ts, int64_t ms) {
    if (ms < 0) ms = 0;
    read_clock(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}
