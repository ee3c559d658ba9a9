/* fuzz_attempts_meta.c — the attempt counts kept in committed offset metadata
 * (src/core/attempts_meta.c). The metadata comes back from the cluster, where
 * anyone in the group (or another client) may have written anything.
 *
 * Input byte 0 picks the mode:
 *   even: the rest is metadata text. The parser must not read out of bounds,
 *         and what it accepts must be well formed (strictly increasing,
 *         non-negative offsets, at most max entries) and survive
 *         encode -> decode unchanged.
 *   odd:  the rest builds entries (offset deltas and attempts) and a buffer
 *         size; encode must stay within the buffer, keep the lowest entries,
 *         and decode must give exactly those entries back. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/attempts_meta.h"

#define MAX_ENTRIES 256

static void check(bool ok) {
    if (!ok) abort(); /* a broken invariant is a finding */
}

static void decode_then_round_trip(const uint8_t *data, size_t size, size_t max) {
    /* an exact-size heap copy: ASan sees any read past the text */
    char *text = malloc(size ? size : 1);
    if (size) memcpy(text, data, size);
    bool clean;
    int64_t off[MAX_ENTRIES];
    uint32_t att[MAX_ENTRIES];
    size_t n = 99;
    int rc = cs__meta_decode(text, size, &clean, off, att, max, &n);
    free(text);
    if (rc != 0) {
        check(n == 0 && clean); /* nothing is assumed from text that is not ours */
        return;
    }
    check(n <= max);
    for (size_t i = 0; i < n; i++) {
        check(off[i] >= 0);
        if (i) check(off[i] > off[i - 1]);
    }
    char buf[MAX_ENTRIES * 32 + 16];
    check(cs__meta_encode(buf, sizeof buf, clean, off, att, n) == n);
    bool clean2;
    int64_t off2[MAX_ENTRIES];
    uint32_t att2[MAX_ENTRIES];
    size_t n2;
    check(cs__meta_decode(buf, strlen(buf), &clean2, off2, att2, MAX_ENTRIES, &n2) == 0);
    check(clean2 == clean && n2 == n);
    check(!memcmp(off, off2, n * sizeof *off) && !memcmp(att, att2, n * sizeof *att));
}

static uint64_t take(const uint8_t **p, const uint8_t *end, size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes && *p < end; i++) v = v << 8 | *(*p)++;
    return v;
}

static void encode_then_decode(const uint8_t *data, size_t size) {
    const uint8_t *p = data, *end = data + size;
    size_t cap = (size_t)take(&p, end, 2) % (CS_META_MAX * 2) + 1;
    bool clean = take(&p, end, 1) & 1;
    int64_t off[MAX_ENTRIES];
    uint32_t att[MAX_ENTRIES];
    size_t n = 0;
    int64_t at = (int64_t)(take(&p, end, 8) >> 1); /* 0..INT64_MAX */
    while (p < end && n < MAX_ENTRIES) {
        uint8_t shape = (uint8_t)take(&p, end, 1);
        uint64_t delta = shape & 1 ? take(&p, end, 8) >> 2 : take(&p, end, 1); /* small steps and huge ones */
        if (delta == 0) delta = 1;
        if (at > INT64_MAX - (int64_t)delta) break; /* offsets are int64: stop before overflowing */
        off[n] = n ? at + (int64_t)delta : at;
        at = off[n];
        att[n] = shape & 2 ? (uint32_t)take(&p, end, 4) : (uint32_t)take(&p, end, 1);
        n++;
    }
    /* the exact size: ASan sees any write past cap */
    char *buf = malloc(cap);
    size_t written = cs__meta_encode(buf, cap, clean, off, att, n);
    check(written <= n);
    size_t len = strnlen(buf, cap);
    check(len < cap); /* NUL-terminated inside the buffer */
    bool clean2;
    int64_t off2[MAX_ENTRIES];
    uint32_t att2[MAX_ENTRIES];
    size_t n2;
    int rc = cs__meta_decode(buf, len, &clean2, off2, att2, MAX_ENTRIES, &n2);
    if (len == 0) {
        check(written == 0 && rc == -1); /* not even the head fitted */
    } else {
        check(rc == 0 && clean2 == clean && n2 == written); /* the lowest entries, all of them read back */
        check(!memcmp(off, off2, n2 * sizeof *off) && !memcmp(att, att2, n2 * sizeof *att));
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (data[0] & 1) encode_then_decode(data + 1, size - 1);
    else decode_then_round_trip(data + 1, size - 1, (size_t)(data[0] >> 1) % (MAX_ENTRIES + 1));
    return 0;
}
