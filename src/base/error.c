/* error.c — the per-thread "last error" message behind cs_errmsg().
 *
 * Owns: last_message, a _Thread_local 2 KB buffer per thread. Locks: none.
 * Threads: any thread; each reads and writes only its own buffer. */
#include "base/error.h"

#include <stdio.h>

/* 2 KB: a refused login's message quotes librdkafka's reason, the settings involved
 * and a hint, and a long CA path must not cut the hint off. */
static _Thread_local char last_message[2048] = "no error";

cs_err cs__vfail(cs_err code, const char *fmt, va_list ap) {
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    return code;
}

cs_err cs__fail(cs_err code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cs__vfail(code, fmt, ap);
    va_end(ap);
    return code;
}

const char *cs_errmsg(void) { return last_message; }

const char *cs_err_name(cs_err err) {
    switch (err) {
    case CS_OK: return "CS_OK";
    case CS_ERR_ARG: return "CS_ERR_ARG";
    case CS_ERR_CONFIG: return "CS_ERR_CONFIG";
    case CS_ERR_STATE: return "CS_ERR_STATE";
    case CS_ERR_TOPIC: return "CS_ERR_TOPIC";
    case CS_ERR_GROUP: return "CS_ERR_GROUP";
    case CS_ERR_KAFKA: return "CS_ERR_KAFKA";
    case CS_ERR_FATAL: return "CS_ERR_FATAL";
    case CS_ERR_TIMEOUT: return "CS_ERR_TIMEOUT";
    case CS_ERR_UNSUPPORTED: return "CS_ERR_UNSUPPORTED";
    case CS_ERR_STALE: return "CS_ERR_STALE";
    case CS_ERR_NOMEM: return "CS_ERR_NOMEM";
    case CS_ERR_HOOK: return "CS_ERR_HOOK";
    case CS_ERR_AUTH: return "CS_ERR_AUTH";
    case CS_ERR_DECODE: return "CS_ERR_DECODE";
    case CS_ERR_ENCODE: return "CS_ERR_ENCODE";
    case CS_ERR_UNAVAILABLE: return "CS_ERR_UNAVAILABLE";
    }
    return "CS_ERR_UNKNOWN";
}
