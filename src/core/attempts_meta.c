/* attempts_meta.c — encodes and parses the attempt counts kept in committed
 * offset metadata (format in attempts_meta.h). Input comes from the cluster,
 * so the parser trusts nothing: bounded, no allocation, rejects anything off. */
#include "attempts_meta.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

size_t cs__meta_encode(char *buf, size_t cap, bool clean, const int64_t *offsets, const uint32_t *attempts, size_t n) {
    if (cap == 0) return 0;
    int used = snprintf(buf, cap, "cs1;c=%d;a=", clean ? 1 : 0);
    if (used < 0 || (size_t)used >= cap) {
        buf[0] = '\0';
        return 0;
    }
    size_t written = 0;
    for (size_t i = 0; i < n; i++) {
        char entry[48];
        int len = snprintf(entry, sizeof entry, "%s%" PRId64 ":%" PRIu32, written ? "," : "", offsets[i], attempts[i]);
        if (len < 0 || (size_t)used + (size_t)len >= cap) break; /* the bound: the rest is left out */
        memcpy(buf + used, entry, (size_t)len + 1);
        used += len;
        written++;
    }
    return written;
}

/* Reads a decimal number of at most 19 digits from text[*i], stopping at end. */
static bool read_number(const char *text, size_t len, size_t *i, uint64_t *out) {
    size_t start = *i;
    uint64_t v = 0;
    while (*i < len && text[*i] >= '0' && text[*i] <= '9' && *i - start < 19)
        v = v * 10 + (uint64_t)(text[(*i)++] - '0');
    *out = v;
    return *i > start && !(*i < len && text[*i] >= '0' && text[*i] <= '9');
}

int cs__meta_decode(const char *text, size_t len, bool *clean, int64_t *offsets, uint32_t *attempts, size_t max,
                    size_t *n) {
    *n = 0;
    *clean = true;
    static const char head[] = "cs1;c=";
    if (!text || len < sizeof head - 1 + 4 || memcmp(text, head, sizeof head - 1) != 0) return -1;
    size_t i = sizeof head - 1;
    if (text[i] != '0' && text[i] != '1') return -1;
    bool c = text[i++] == '1';
    if (i + 3 > len || memcmp(text + i, ";a=", 3) != 0) return -1;
    i += 3;
    size_t count = 0;
    while (i < len && count < max) {
        uint64_t off, att;
        if (!read_number(text, len, &i, &off) || off > INT64_MAX || i >= len || text[i++] != ':') goto bad;
        if (!read_number(text, len, &i, &att) || att > UINT32_MAX) goto bad;
        offsets[count] = (int64_t)off;
        attempts[count] = (uint32_t)att;
        if (count && offsets[count] <= offsets[count - 1]) goto bad; /* lowest first, strictly */
        count++;
        if (i < len && (text[i++] != ',' || i == len)) goto bad; /* a comma must lead to another entry */
    }
    *clean = c;
    *n = count;
    return 0;
bad:
    *n = 0;
    *clean = true;
    return -1;
}
