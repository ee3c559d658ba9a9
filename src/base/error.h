/* error.h — internal helpers that set the calling thread's error message.
 *
 * Owns: nothing; the per-thread message buffers are error.c's. Locks: none.
 * Threads: any thread; a call writes only the calling thread's buffer. */
#ifndef CS_CORE_ERROR_H
#define CS_CORE_ERROR_H

#include <stdarg.h>

#include "cstream/error.h"

/* Formats the reason into this thread's message buffer and returns `code`. */
cs_err cs__fail(cs_err code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cs_err cs__vfail(cs_err code, const char *fmt, va_list ap);

#endif
