/* attempts_meta.h — the attempt counts of open records, as the metadata string
 * of a committed offset, so that they survive a restart and a rebalance.
 *
 *   cs1;c=<clean>;a=<offset>:<attempts>,<offset>:<attempts>,...
 *
 * clean=1: written by a graceful revoke or stop with nothing in flight; 0:
 * written on the commit timer (the writer may have died running a record).
 * Entries are lowest offset first. The string is bounded (CS_META_MAX bytes):
 * entries that do not fit are left out, and those records count their
 * attempts from zero after a restart (documented fallback). Pure functions. */
#ifndef CS_CORE_ATTEMPTS_META_H
#define CS_CORE_ATTEMPTS_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CS_META_MAX 512

/* Writes the string (NUL-terminated) into buf[cap]; returns the entries written. */
size_t cs__meta_encode(char *buf, size_t cap, bool clean, const int64_t *offsets, const uint32_t *attempts, size_t n);
/* Parses up to max entries. Returns 0, or -1 if the text is not ours or is
 * malformed (then *n is 0 and *clean is true: nothing is assumed). */
int cs__meta_decode(const char *text, size_t len, bool *clean, int64_t *offsets, uint32_t *attempts, size_t max,
                    size_t *n);

#endif
