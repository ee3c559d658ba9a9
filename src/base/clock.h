/* clock.h — the library's clocks, and the one way to wait with a deadline.
 *
 * Every relative wait in cstream (a queue timeout, a retry delay, a drain
 * deadline, a destroy that may hang) is measured on the monotonic clock, which
 * no clock step moves: NTP stepping the time, settimeofday, a VM resumed hours
 * later. The realtime clock only stamps what people read (log lines).
 *
 * A condition variable that is waited on with a deadline is initialised with
 * cs__cond_init_monotonic, and the deadline comes from cs__deadline_after:
 * pthread_cond_timedwait compares the deadline with the condition's clock, so
 * both must be CLOCK_MONOTONIC. A deadline from the realtime clock on such a
 * condition would wait decades; a monotonic deadline on a default (realtime)
 * condition would expire at once and turn every wait into a spin.
 *
 * All readings go through one clock source, clock_gettime unless a unit test
 * installs another (tests/unit/test_clock.c fakes a realtime clock that was
 * stepped and shows that no wait moves with it).
 *
 * Owns: nothing here; clock.c keeps the clock source (an atomic). Locks: none.
 * Threads: any thread, cs__clock_set_source included. */
#ifndef CS_CORE_CLOCK_H
#define CS_CORE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Monotonic time in milliseconds and nanoseconds (arbitrary origin). */
int64_t cs__now_ms(void);
uint64_t cs__mono_ns(void);
/* *ts = the realtime clock: for timestamps only, never for a wait. */
void cs__realtime_now(struct timespec *ts);

/* Initialises cv to measure deadlines on the monotonic clock. Every condition
 * variable that takes a pthread_cond_timedwait is initialised with it. */
void cs__cond_init_monotonic(pthread_cond_t *cv);
/* *ts = the monotonic clock plus ms (negative: now): the deadline
 * pthread_cond_timedwait takes on a cs__cond_init_monotonic condition. */
void cs__deadline_after(struct timespec *ts, int64_t ms);

/* ---- the clock source, for unit tests ------------------------------------ */
/* Reads clock `id` (CLOCK_MONOTONIC or CLOCK_REALTIME) into *ts; 0 on success,
 * as clock_gettime. */
typedef int (*cs_clock_source_fn)(clockid_t id, struct timespec *ts);
/* Installs fn as the source of every reading above (NULL: clock_gettime
 * again). Any thread, at any time. The kernel still measures a
 * pthread_cond_timedwait on its own CLOCK_MONOTONIC, so a source a test
 * installs reads that clock for CLOCK_MONOTONIC (plus a fixed offset at most)
 * and fakes only what it means to test. */
void cs__clock_set_source(cs_clock_source_fn fn);

#endif
