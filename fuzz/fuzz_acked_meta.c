/* fuzz_acked_meta.c — the acked set in committed offset metadata (cs2,
 * src/core/attempts_meta.c). The metadata comes back from the cluster, where
 * anyone in the group (or another client) may have written anything, and a
 * set that verifies makes records be skipped: the decoder must never accept
 * a set that is not well formed.
 *
 * Input byte 0 picks the mode:
 *   even: the next 8 bytes are the committed position, the rest metadata
 *         text (with byte 0 % 4 == 2, sealed first: the harness appends the
 *         right checksum, so that mutations reach the parser behind it). The reader must not read out of bounds; a set it accepts is
 *         well formed (even count, only the first run may be empty, the runs
 *         add up to the reach, position + reach does not overflow, tied to
 *         the committed position) and survives encode -> read unchanged.
 *   odd:  the rest builds runs, a position and a buffer size; the encoder
 *         stays within the buffer and writes a prefix of the runs that the
 *         reader gives back exactly, with the reach it reported. */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attempts_meta.h"

#define MAX_ENTRIES 64

static void check(bool ok) {
    if (!ok) abort(); /* a broken invariant is a finding */
}

static uint64_t take(const uint8_t **p, const uint8_t *end, size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes && *p < end; i++) v = v << 8 | *(*p)++;
    return v;
}

static uint32_t runs[CS_ACKED_MAX_RUNS], runs2[CS_ACKED_MAX_RUNS];

static cs_meta_status read_text(const char *text, size_t len, int64_t committed, uint32_t *into, cs_meta_read *r) {
    static int64_t off[MAX_ENTRIES];
    static uint32_t att[MAX_ENTRIES];
    *r = (cs_meta_read){
        .offsets = off, .attempts = att, .max = MAX_ENTRIES, .runs = into, .max_runs = CS_ACKED_MAX_RUNS};
    return cs__meta_read(text, len, committed, r);
}

/* The format's checksum (attempts_meta.h): FNV-1a 32. */
static uint32_t fnv1a32(const char *p, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

static void read_then_round_trip(const uint8_t *data, size_t size, bool seal) {
    const uint8_t *p = data, *end = data + size;
    int64_t committed = (int64_t)(take(&p, end, 8) >> 1);
    if (committed % 7 == 0) committed = -1; /* sometimes no position */
    size_t len = (size_t)(end - p);
    char *text = malloc(len + 12); /* an exact-size copy: ASan sees any read past it */
    if (len) memcpy(text, p, len);
    if (seal) {
        char x[12];
        snprintf(x, sizeof x, ";x=%08x", (unsigned)fnv1a32(text, len));
        memcpy(text + len, x, 11);
        len += 11;
        char *exact = malloc(len);
        memcpy(exact, text, len);
        free(text);
        text = exact;
    }
    cs_meta_read r;
    cs_meta_status st = read_text(text, len, committed, runs, &r);
    free(text);
    if (st != CS_META_OK) {
        check(!r.has_set && r.n_runs == 0 && r.n == 0 && r.clean);
        return;
    }
    if (!r.has_set) {
        check(r.n_runs == 0 && r.reach == 0);
        return;
    }
    check(committed >= 0 && r.n_runs % 2 == 0 && r.n_runs <= CS_ACKED_MAX_RUNS);
    uint64_t sum = 0;
    for (size_t i = 0; i < r.n_runs; i++) {
        check(i == 0 || runs[i] > 0);
        sum += runs[i];
    }
    check(sum == r.reach && r.reach <= (uint64_t)INT64_MAX - (uint64_t)committed);
    /* what the reader accepted, written again, reads back the same */
    char buf[CS_META_MAX * 4];
    uint64_t reach;
    cs__meta_encode_set(buf, sizeof buf, r.clean, committed, r.offsets, r.attempts, r.n, runs, r.n_runs, &reach);
    cs_meta_read r2;
    check(read_text(buf, strlen(buf), committed, runs2, &r2) == CS_META_OK && r2.has_set);
    check(r2.reach == reach && reach <= r.reach);
    check(!memcmp(runs2, runs, r2.n_runs * sizeof *runs)); /* a prefix, the nearest */
}

static void encode_then_read(const uint8_t *data, size_t size) {
    const uint8_t *p = data, *end = data + size;
    size_t cap = (size_t)take(&p, end, 2) % (CS_META_MAX + 64) + 1;
    int64_t pos = (int64_t)(take(&p, end, 8) >> 2);
    size_t n = 0;
    uint64_t total = 0;
    while (p < end && n < CS_ACKED_MAX_RUNS) {
        uint8_t shape = (uint8_t)take(&p, end, 1);
        uint32_t len = shape & 1 ? (uint32_t)take(&p, end, 3) : shape >> 1;
        if (len == 0 && n > 0) len = 1;
        if (total + len > (uint64_t)INT64_MAX - (uint64_t)pos) break;
        runs[n++] = len;
        total += len;
    }
    n &= ~(size_t)1;
    char *buf = malloc(cap); /* the exact size: ASan sees any write past cap */
    uint64_t reach;
    cs__meta_encode_set(buf, cap, false, pos, NULL, NULL, 0, runs, n, &reach);
    size_t len = strnlen(buf, cap);
    check(len < cap);
    if (len == 0) {
        check(reach == 0);
        free(buf);
        return;
    }
    cs_meta_read r;
    check(read_text(buf, len, pos, runs2, &r) == CS_META_OK && r.has_set && r.reach == reach);
    /* the runs read back are the input's first ones: all equal but the last,
     * which a bitset may cut short */
    check(r.n_runs <= n);
    for (size_t j = 0; j < r.n_runs; j++)
        check(j + 1 < r.n_runs ? runs2[j] == runs[j] : runs2[j] > 0 && runs2[j] <= runs[j]);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (data[0] & 1) encode_then_read(data + 1, size - 1);
    else read_then_round_trip(data + 1, size - 1, data[0] & 2);
    return 0;
}
