/* log.h — log lines are facts with fields: `ts level [app] message key=value ...`.
 * Callers pass the fields in the format string; nothing is formatted when the
 * level is disabled (check cs__log_enabled on hot paths).
 *
 * Owns: declares cs_ratelimit; the caller embeds one (zeroed) and owns it. The
 * threshold and format are log.c's. Locks: none; cs_ratelimit is two atomics.
 * Threads: any thread. */
#ifndef CS_CORE_LOG_H
#define CS_CORE_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cstream/log.h"

bool cs__log_enabled(cs_log_level level);
void cs__log(cs_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define CS_LOG_ERR(...) cs__log(CS_LOG_ERROR, __VA_ARGS__)
#define CS_LOG_WARN(...) cs__log(CS_LOG_WARN, __VA_ARGS__)
#define CS_LOG_INFO(...) cs__log(CS_LOG_INFO, __VA_ARGS__)
#define CS_LOG_DEBUG(...)                                                                                              \
    do {                                                                                                               \
        if (cs__log_enabled(CS_LOG_DEBUG)) cs__log(CS_LOG_DEBUG, __VA_ARGS__);                                         \
    } while (0)

/* Rate limit for a repeated warning: at most one line per interval; the lines
 * skipped meanwhile are counted and reported with the next one. Lock-free, any thread. */
typedef struct cs_ratelimit {
    _Atomic int64_t next_ms;
    _Atomic uint64_t suppressed;
} cs_ratelimit;
/* Returns true if the caller should log now; *suppressed gets how many were skipped. */
bool cs__ratelimit_allow(cs_ratelimit *rl, int64_t interval_ms, uint64_t *suppressed);

#include "base/clock.h" /* cs__now_ms and the condition-variable deadlines */

/* ---- operations surface: log format and level parsing (cs_app_main) ---------- */
#include <stddef.h>
#include "cstream/main.h"
/* "error"|"warn"|"info"|"debug" (any case); -1 if s is none of them. */
int cs__log_level_parse(const char *s);
/* "text"|"json"; -1 otherwise. */
int cs__log_format_parse(const char *s);
/* Writes the JSON form of one text log line body ("message key=value ...")
 * into out (NUL-terminated, truncated at size); returns the length written. */
size_t cs__log_json_line(char *out, size_t size, const char *ts, const char *level, const char *body);

#endif
