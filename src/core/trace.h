/* trace.h — W3C trace context (https://www.w3.org/TR/trace-context/) as far as
 * cstream carries it: the `traceparent` header of an incoming record, checked
 * once when the record is fetched and kept in its delivery. Pure functions;
 * any thread.
 *
 * Owns: nothing. Locks: none. Threads: any thread. */
#ifndef CS_CORE_TRACE_H
#define CS_CORE_TRACE_H

#include <stdbool.h>
#include <stddef.h>

/* The record header cstream reads and writes. */
#define CS_TRACEPARENT_HEADER "traceparent"
/* "vv-<32 hex trace id>-<16 hex parent id>-<2 hex flags>" */
#define CS_TRACEPARENT_LEN 55
#define CS_TRACE_ID_LEN 32

/* True if the `len` bytes at `value` are a traceparent cstream carries:
 * exactly 55 characters, lowercase hex in the four dash-separated fields,
 * a version other than ff, a trace id and a parent id that are not all zero.
 * Anything else (a longer future-version value included) is treated as absent. */
bool cs__traceparent_valid(const void *value, size_t len);

#endif
