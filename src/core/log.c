/* log.c — process-wide log threshold and line writer (stderr, one write per line
 * so lines from different threads never interleave). Any thread. */
#define _POSIX_C_SOURCE 200809L
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static _Atomic int threshold = -1; /* -1: not read from the environment yet */

static int level_from_env(void) {
    const char *v = getenv("CSTREAM_LOG_LEVEL");
    if (!v) return CS_LOG_INFO;
    if (!strcasecmp(v, "error")) return CS_LOG_ERROR;
    if (!strcasecmp(v, "warn")) return CS_LOG_WARN;
    if (!strcasecmp(v, "debug")) return CS_LOG_DEBUG;
    return CS_LOG_INFO;
}

void cs_log_set_level(cs_log_level level) { atomic_store(&threshold, (int)level); }

bool cs__log_enabled(cs_log_level level) {
    int t = atomic_load_explicit(&threshold, memory_order_relaxed);
    if (t < 0) {
        t = level_from_env();
        atomic_store(&threshold, t);
    }
    return (int)level <= t;
}

static const char *level_name(cs_log_level l) {
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    return names[l];
}

void cs__log(cs_log_level level, const char *fmt, ...) {
    if (!cs__log_enabled(level)) return;
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                     level_name(level));
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}

int64_t cs__now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool cs__ratelimit_allow(cs_ratelimit *rl, int64_t interval_ms, uint64_t *suppressed) {
    int64_t now = cs__now_ms();
    int64_t next = atomic_load(&rl->next_ms);
    if (now >= next && atomic_compare_exchange_strong(&rl->next_ms, &next, now + interval_ms)) {
        *suppressed = atomic_exchange(&rl->suppressed, 0);
        return true;
    }
    atomic_fetch_add(&rl->suppressed, 1);
    return false;
}
