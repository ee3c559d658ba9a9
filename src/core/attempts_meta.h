/* attempts_meta.h — the attempt counts of open records, as the metadata string
 * of a committed offset, so that they survive a restart and a rebalance.
 *
 *   cs1;c=<clean>;a=<offset>:<attempts>,<offset>:<attempts>,...
 *
 * clean=1: written by a graceful revoke or stop with nothing in flight; 0:
 * written on the commit timer (the writer may have died running a record).
 * Entries are lowest offset first. The string is bounded (CS_META_MAX bytes):
 * entries that do not fit are left out, and those records count their
 * attempts from zero after a restart (documented fallback). Pure functions.
 *
 * Owns: nothing; the buffers and cs_meta_read's arrays are the caller's.
 * Locks: none. Threads: any thread. */
#ifndef CS_CORE_ATTEMPTS_META_H
#define CS_CORE_ATTEMPTS_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The broker refuses a commit whose metadata is longer than its
 * offset.metadata.max.bytes (4096 by default); cstream stays well below that
 * default, with a margin for a broker configured a little lower. */
#define CS_META_MAX 3900
/* Runs of the acked set (format cs2): the encoder describes at most this
 * many, the decoder accepts at most this many. A run is one or more offsets;
 * 2048 runs are 1024 open gaps, far more than the bytes allow when the runs
 * are short, and the bitset takes over then. */
#define CS_ACKED_MAX_RUNS 2048

/* Writes the string (NUL-terminated) into buf[cap]; returns the entries written. */
size_t cs__meta_encode(char *buf, size_t cap, bool clean, const int64_t *offsets, const uint32_t *attempts, size_t n);
/* Parses up to max entries. Returns 0, or -1 if the text is not ours or is
 * malformed (then *n is 0 and *clean is true: nothing is assumed). */
int cs__meta_decode(const char *text, size_t len, bool *clean, int64_t *offsets, uint32_t *attempts, size_t max,
                    size_t *n);

/* ---- cs2: the attempt counts and the acked set -----------------------------
 *
 *   cs2;p=<pos>;c=<clean>;a=<attempts as in cs1>;s=<R|B><payload>;r=<reach>;x=<fnv>
 *
 * The acked set says which offsets of [pos, pos + reach) were settled (acked,
 * dropped, dead-lettered) when the commit was taken; offsets from pos + reach
 * on are not described (read again, as without the set). As runs: lengths
 * that alternate open, settled, open, ... starting at pos with an open run
 * (the record at the position is normally the first open one; a first run of
 * 0 says it is settled), ending with a settled run. Payload, base64url without
 * padding: R, the runs as LEB128 varints; B, a bitset (bit i of byte i / 8,
 * least significant first, is offset pos + i; bits past reach are 0). The
 * encoder picks the one that reaches further within the budget. x: FNV-1a 32
 * of everything before ";x=", 8 lowercase hex digits. p ties the set to the
 * committed position it was written with, so a set is never applied to
 * another position. */

typedef enum cs_meta_status {
    CS_META_NONE,    /* no metadata */
    CS_META_OK,      /* ours and verified (cs1, or cs2 with its checksum and position) */
    CS_META_FOREIGN, /* written by something else */
    CS_META_BAD      /* ours but unusable: newer version, malformed, checksum, position */
} cs_meta_status;

/* What cs__meta_read fills: the caller provides the arrays. */
typedef struct cs_meta_read {
    int64_t *offsets; /* attempt counts, up to max (extra entries are ignored) */
    uint32_t *attempts;
    size_t max;
    uint32_t *runs; /* the acked set, up to max_runs; NULL: not wanted (still verified) */
    size_t max_runs;
    /* results */
    bool clean;
    size_t n;
    bool has_set; /* cs2 with a set tied to `committed` (it may be empty) */
    size_t n_runs;
    uint64_t reach;
    const char *why; /* FOREIGN and BAD: a short reason for the log line */
} cs_meta_read;

/* Reads metadata committed with position `committed` (-1: no position: then
 * no set is reported, only attempt counts). Bounded, no allocation; trusts
 * nothing. On anything but CS_META_OK, r->n and r->n_runs are 0, r->clean is
 * true and r->has_set false: nothing is assumed. */
cs_meta_status cs__meta_read(const char *text, size_t len, int64_t committed, cs_meta_read *r);

/* Writes cs2 (NUL-terminated) into buf[cap]: the attempt counts first (the
 * lowest that fit), then as much of the acked set (runs[0..n_runs), n_runs
 * even) as fits in what is left, nearest the position first. *reach gets how
 * many offsets from pos the written set describes (the sum of the runs when it
 * all fitted). Returns the attempt entries written. A cap too small for the
 * head and trailer writes "" and returns 0. */
size_t cs__meta_encode_set(char *buf, size_t cap, bool clean, int64_t pos, const int64_t *offsets,
                           const uint32_t *attempts, size_t n, const uint32_t *runs, size_t n_runs, uint64_t *reach);

#endif
