/* tsan_c11_threads.c — compiled only into ThreadSanitizer builds.
 *
 * librdkafka uses C11 threads (thrd_*, mtx_*, cnd_*). glibc implements them
 * by calling its internal pthread functions directly, which gcc 12's
 * ThreadSanitizer does not intercept: librdkafka's threads would run without
 * TSan's per-thread state (and crash in its allocator), and its locks would be
 * invisible (every hand-over from a librdkafka thread would look like a race).
 * The definitions below win over libc's (the executable's symbols come first;
 * CMakeLists.txt pulls this object in with -u thrd_create) and route each call
 * through the intercepted pthread function. glibc lays out mtx_t and cnd_t
 * exactly as pthread_mutex_t and pthread_cond_t, which is what makes the casts
 * below the same thing glibc itself does. The library is built with
 * -fvisibility=hidden: these keep default visibility, since what they
 * replace is looked up by name.
 *
 * Owns: a start block per thrd_create, freed by the new thread (or at once if
 * pthread_create fails). Locks: none of its own; mtx_* lock librdkafka's
 * mutexes as pthread mutexes. Threads: whichever thread librdkafka calls from. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

typedef struct start {
    thrd_start_t func;
    void *arg;
} start;

static void *run(void *p) {
    start s = *(start *)p;
    free(p);
    return (void *)(intptr_t)s.func(s.arg);
}

#pragma GCC visibility push(default)

static int result(int rc) {
    return rc == 0 ? thrd_success : rc == ETIMEDOUT ? thrd_timedout : rc == EBUSY ? thrd_busy : thrd_error;
}

int thrd_create(thrd_t *thr, thrd_start_t func, void *arg) {
    start *s = malloc(sizeof *s);
    if (!s) return thrd_nomem;
    s->func = func;
    s->arg = arg;
    int rc = pthread_create(thr, NULL, run, s);
    if (rc != 0) free(s);
    return result(rc);
}

int thrd_join(thrd_t thr, int *res) {
    void *ret = NULL;
    int rc = pthread_join(thr, &ret);
    if (rc == 0 && res) *res = (int)(intptr_t)ret;
    return result(rc);
}

int thrd_detach(thrd_t thr) { return result(pthread_detach(thr)); }

int mtx_init(mtx_t *m, int type) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    if (type & mtx_recursive) pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    int rc = pthread_mutex_init((pthread_mutex_t *)m, &attr);
    pthread_mutexattr_destroy(&attr);
    return result(rc);
}

int mtx_lock(mtx_t *m) { return result(pthread_mutex_lock((pthread_mutex_t *)m)); }
int mtx_trylock(mtx_t *m) { return result(pthread_mutex_trylock((pthread_mutex_t *)m)); }
int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict ts) {
    return result(pthread_mutex_timedlock((pthread_mutex_t *)m, ts));
}
int mtx_unlock(mtx_t *m) { return result(pthread_mutex_unlock((pthread_mutex_t *)m)); }
void mtx_destroy(mtx_t *m) { pthread_mutex_destroy((pthread_mutex_t *)m); }

int cnd_init(cnd_t *c) { return result(pthread_cond_init((pthread_cond_t *)c, NULL)); }
int cnd_signal(cnd_t *c) { return result(pthread_cond_signal((pthread_cond_t *)c)); }
int cnd_broadcast(cnd_t *c) { return result(pthread_cond_broadcast((pthread_cond_t *)c)); }
int cnd_wait(cnd_t *c, mtx_t *m) { return result(pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m)); }
int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict ts) {
    return result(pthread_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, ts));
}
void cnd_destroy(cnd_t *c) { pthread_cond_destroy((pthread_cond_t *)c); }

#pragma GCC visibility pop
