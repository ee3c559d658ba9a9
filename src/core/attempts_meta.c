/* attempts_meta.c — encodes and parses the attempt counts kept in committed
 * offset metadata (format in attempts_meta.h). Input comes from the cluster,
 * so the parser trusts nothing: bounded, no allocation, rejects anything off.
 *
 * Owns: nothing (its arguments only). Locks: none. Threads: any. */
#include "core/attempts_meta.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Appends the attempt entries that fit below `limit` (the bytes used must stay
 * under it, NUL included) at buf + *used; returns how many. */
static size_t put_attempts(char *buf, size_t limit, int *used, const int64_t *offsets, const uint32_t *attempts,
                           size_t n) {
    size_t written = 0;
    for (size_t i = 0; i < n; i++) {
        char entry[48];
        int len = snprintf(entry, sizeof entry, "%s%" PRId64 ":%" PRIu32, written ? "," : "", offsets[i], attempts[i]);
        if (len < 0 || (size_t)*used + (size_t)len >= limit) break; /* the bound: the rest is left out */
        memcpy(buf + *used, entry, (size_t)len + 1);
        *used += len;
        written++;
    }
    return written;
}

size_t cs__meta_encode(char *buf, size_t cap, bool clean, const int64_t *offsets, const uint32_t *attempts, size_t n) {
    if (cap == 0) return 0;
    int used = snprintf(buf, cap, "cs1;c=%d;a=", clean ? 1 : 0);
    if (used < 0 || (size_t)used >= cap) {
        buf[0] = '\0';
        return 0;
    }
    return put_attempts(buf, cap, &used, offsets, attempts, n);
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

/* Parses "<off>:<att>,..." from text[*i] up to `end` (exclusive; the list may
 * be empty); keeps the first max entries in r. False if malformed. */
static bool read_attempts(const char *text, size_t end, size_t *i, cs_meta_read *r) {
    size_t count = 0;
    int64_t prev = -1;
    while (*i < end) {
        uint64_t off, att;
        if (!read_number(text, end, i, &off) || off > INT64_MAX || *i >= end || text[(*i)++] != ':') return false;
        if (!read_number(text, end, i, &att) || att > UINT32_MAX) return false;
        if ((int64_t)off <= prev) return false; /* lowest first, strictly */
        prev = (int64_t)off;
        if (count < r->max) {
            r->offsets[count] = (int64_t)off;
            r->attempts[count] = (uint32_t)att;
            count++;
        }
        if (*i < end && (text[(*i)++] != ',' || *i == end)) return false; /* a comma must lead to another entry */
    }
    r->n = count;
    return true;
}

/* cs1 after its "cs1;" head. As before cs2: entries past max are not read. */
static bool read_cs1(const char *text, size_t len, cs_meta_read *r) {
    size_t i = 4;
    if (len < 4 + 6 || memcmp(text + i, "c=", 2) != 0) return false;
    i += 2;
    if (text[i] != '0' && text[i] != '1') return false;
    r->clean = text[i++] == '1';
    if (i + 3 > len || memcmp(text + i, ";a=", 3) != 0) return false;
    i += 3;
    size_t count = 0;
    while (i < len && count < r->max) {
        uint64_t off, att;
        if (!read_number(text, len, &i, &off) || off > INT64_MAX || i >= len || text[i++] != ':') return false;
        if (!read_number(text, len, &i, &att) || att > UINT32_MAX) return false;
        r->offsets[count] = (int64_t)off;
        r->attempts[count] = (uint32_t)att;
        if (count && r->offsets[count] <= r->offsets[count - 1]) return false;
        count++;
        if (i < len && (text[i++] != ',' || i == len)) return false;
    }
    r->n = count;
    return true;
}

int cs__meta_decode(const char *text, size_t len, bool *clean, int64_t *offsets, uint32_t *attempts, size_t max,
                    size_t *n) {
    cs_meta_read r = {.offsets = offsets, .attempts = attempts, .max = max};
    cs_meta_status st = cs__meta_read(text, len, -1, &r);
    *n = r.n;
    *clean = r.clean;
    return st == CS_META_OK ? 0 : -1;
}

/* ---- cs2 ---------------------------------------------------------------------- */

static uint32_t fnv1a32(const char *p, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static int b64_value(char ch) {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '-') return 62;
    if (ch == '_') return 63;
    return -1;
}

/* Characters base64url (no padding) needs for n bytes. */
static size_t b64_len(size_t n) { return (n * 4 + 2) / 3; }

/* Writes b64_len(n) characters of bytes[0..n) at out. */
static void b64_put(char *out, const uint8_t *bytes, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)bytes[i] << 16;
        if (i + 1 < n) v |= (uint32_t)bytes[i + 1] << 8;
        if (i + 2 < n) v |= bytes[i + 2];
        size_t chars = n - i >= 3 ? 4 : n - i + 1;
        for (size_t k = 0; k < chars; k++) out[o++] = b64[(v >> (18 - 6 * k)) & 63];
    }
}

/* Decodes text[0..n) into out (room for b64 bytes); -1 unless canonical
 * base64url without padding (a lone last character, or unused bits set, are
 * refused so that one payload has one text). */
static long b64_get(const char *text, size_t n, uint8_t *out, size_t room) {
    if (n % 4 == 1) return -1;
    size_t bytes = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
    if (bytes > room) return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        size_t chars = n - i >= 4 ? 4 : n - i;
        uint32_t v = 0;
        for (size_t k = 0; k < 4; k++) {
            int d = k < chars ? b64_value(text[i + k]) : 0;
            if (d < 0) return -1;
            v = v << 6 | (uint32_t)d;
        }
        size_t got = chars - 1;
        if (got < 3 && (v & ((1u << (8 * (3 - got))) - 1)) != 0) return -1; /* unused bits */
        for (size_t k = 0; k < got; k++) out[o++] = (uint8_t)(v >> (16 - 8 * k));
    }
    return (long)o;
}

static size_t varint_len(uint32_t v) {
    size_t n = 1;
    while (v >= 0x80) v >>= 7, n++;
    return n;
}

static size_t varint_put(uint8_t *out, uint32_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

/* The trailer after the payload, at most: ";r=" + 20 digits + ";x=" + 8 hex + NUL. */
#define TRAILER_MAX 35

size_t cs__meta_encode_set(char *buf, size_t cap, bool clean, int64_t pos, const int64_t *offsets,
                           const uint32_t *attempts, size_t n, const uint32_t *runs, size_t n_runs, uint64_t *reach) {
    *reach = 0;
    if (cap == 0) return 0;
    buf[0] = '\0';
    int used = snprintf(buf, cap, "cs2;p=%" PRId64 ";c=%d;a=", pos, clean ? 1 : 0);
    if (used < 0 || (size_t)used + 4 + TRAILER_MAX > cap) {
        buf[0] = '\0';
        return 0;
    }
    size_t written = put_attempts(buf, cap - 4 - TRAILER_MAX, &used, offsets, attempts, n);
    memcpy(buf + used, ";s=", 3);
    used += 3;
    /* Room for the payload: what is left after the kind and the trailer. */
    size_t avail = cap - (size_t)used - 1 - TRAILER_MAX;
    size_t max_bytes = avail * 3 / 4; /* the most bytes whose base64 fits */
    uint8_t payload[CS_META_MAX];
    if (max_bytes > sizeof payload) max_bytes = sizeof payload;
    n_runs &= ~(size_t)1; /* the set ends with a settled run */

    /* Runs: the longest even prefix whose varints fit. */
    size_t k_rle = 0, bytes_rle = 0, b = 0;
    uint64_t reach_rle = 0, sum = 0;
    for (size_t i = 0; i + 1 < n_runs; i += 2) {
        b += varint_len(runs[i]) + varint_len(runs[i + 1]);
        sum += (uint64_t)runs[i] + runs[i + 1];
        if (b > max_bytes) break;
        k_rle = i + 2, bytes_rle = b, reach_rle = sum;
    }
    /* Bitset: as many offsets as max_bytes * 8 bits describe, ending on a
     * settled one. */
    uint64_t bits = (uint64_t)max_bytes * 8, reach_bits = 0, at = 0;
    for (size_t i = 0; i < n_runs; i++) {
        uint64_t end = at + runs[i];
        if (i % 2 == 1) reach_bits = end <= bits ? end : (at < bits ? bits : reach_bits);
        if (end >= bits) break;
        at = end;
    }
    bool bitset = reach_bits > reach_rle || (reach_bits == reach_rle && (reach_bits + 7) / 8 < bytes_rle);
    size_t np = 0;
    if (bitset) {
        np = (size_t)((reach_bits + 7) / 8);
        memset(payload, 0, np);
        at = 0;
        for (size_t i = 0; i < n_runs && at < reach_bits; i++) {
            uint64_t end = at + runs[i];
            if (end > reach_bits) end = reach_bits;
            if (i % 2 == 1)
                for (uint64_t o = at; o < end; o++) payload[o / 8] |= (uint8_t)(1u << (o % 8));
            at = end;
        }
        *reach = reach_bits;
    } else {
        for (size_t i = 0; i < k_rle; i++) np += varint_put(payload + np, runs[i]);
        *reach = reach_rle;
    }
    buf[used++] = bitset ? 'B' : 'R';
    b64_put(buf + used, payload, np);
    used += (int)b64_len(np);
    used += snprintf(buf + used, cap - (size_t)used, ";r=%" PRIu64, *reach);
    uint32_t x = fnv1a32(buf, (size_t)used);
    snprintf(buf + used, cap - (size_t)used, ";x=%08" PRIx32, x);
    return written;
}

/* Turns the payload into runs; false if it is not what an encoder writes. */
static bool payload_runs(char kind, const uint8_t *p, size_t np, uint64_t reach, cs_meta_read *r) {
    size_t n = 0;
    uint64_t sum = 0;
    if (kind == 'R') {
        size_t i = 0;
        while (i < np) {
            uint64_t v = 0;
            size_t shift = 0, start = i;
            for (;;) {
                if (i >= np || shift > 28) return false;
                uint8_t byte = p[i++];
                v |= (uint64_t)(byte & 0x7f) << shift;
                if (!(byte & 0x80)) break;
                shift += 7;
            }
            if (v > UINT32_MAX || (i - start > 1 && p[i - 1] == 0))
                return false;                   /* too big, or not the shortest form */
            if (v == 0 && n != 0) return false; /* only the first run may be empty */
            if (r->runs) {
                if (n >= r->max_runs) return false;
                r->runs[n] = (uint32_t)v;
            }
            n++;
            sum += v;
        }
        if (n % 2 != 0 || sum != reach) return false;
    } else {
        if (np != (size_t)((reach + 7) / 8)) return false;
        if (reach % 8 && (p[np - 1] >> (reach % 8)) != 0) return false;               /* bits past reach */
        if (reach && !(p[(reach - 1) / 8] & (1u << ((reach - 1) % 8)))) return false; /* ends settled */
        bool settled = false;
        uint64_t run = 0;
        for (uint64_t o = 0; o <= reach; o++) {
            bool s = o < reach && (p[o / 8] >> (o % 8)) & 1;
            if (o < reach && s == settled) {
                run++;
                continue;
            }
            /* the run of `settled` ends at o (the first run may be empty) */
            if (r->runs) {
                if (n >= r->max_runs) return false;
                r->runs[n] = (uint32_t)run;
            }
            n++;
            settled = !settled;
            run = 1;
            if (o == reach) break;
        }
        if (reach == 0) n = 0;
        if (n % 2 != 0) return false;
    }
    r->n_runs = n;
    return true;
}

static cs_meta_status read_cs2(const char *text, size_t len, int64_t committed, cs_meta_read *r) {
    /* The checksum first: nothing of a text that does not verify is used. */
    if (len < 11 || memcmp(text + len - 11, ";x=", 3) != 0) {
        r->why = "no checksum";
        return CS_META_BAD;
    }
    uint32_t x = 0;
    for (size_t i = len - 8; i < len; i++) {
        char ch = text[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0) {
            r->why = "no checksum";
            return CS_META_BAD;
        }
        x = x << 4 | (uint32_t)d;
    }
    size_t end = len - 11;
    if (fnv1a32(text, end) != x) {
        r->why = "wrong checksum";
        return CS_META_BAD;
    }
    r->why = "malformed";
    size_t i = 4;
    uint64_t pos, reach;
    if (end < i + 2 || memcmp(text + i, "p=", 2) != 0) return CS_META_BAD;
    i += 2;
    if (!read_number(text, end, &i, &pos) || pos > INT64_MAX) return CS_META_BAD;
    if (i + 4 > end || memcmp(text + i, ";c=", 3) != 0 || (text[i + 3] != '0' && text[i + 3] != '1'))
        return CS_META_BAD;
    bool clean = text[i + 3] == '1';
    i += 4;
    if (i + 3 > end || memcmp(text + i, ";a=", 3) != 0) return CS_META_BAD;
    i += 3;
    size_t s = i; /* the attempts end where ";s=" starts */
    while (s < end && text[s] != ';') s++;
    if (!read_attempts(text, s, &i, r) || s + 4 > end || memcmp(text + s, ";s=", 3) != 0) return CS_META_BAD;
    char kind = text[s + 3];
    if (kind != 'R' && kind != 'B') return CS_META_BAD;
    size_t p0 = s + 4, p1 = p0;
    while (p1 < end && text[p1] != ';') p1++;
    i = p1;
    if (i + 3 > end || memcmp(text + i, ";r=", 3) != 0) return CS_META_BAD;
    i += 3;
    if (!read_number(text, end, &i, &reach) || i != end) return CS_META_BAD;
    if (reach > (uint64_t)INT64_MAX - pos) return CS_META_BAD;
    uint8_t payload[CS_META_MAX];
    long np = b64_get(text + p0, p1 - p0, payload, sizeof payload);
    if (np < 0 || !payload_runs(kind, payload, (size_t)np, reach, r)) return CS_META_BAD;
    if (committed >= 0 && (int64_t)pos != committed) {
        r->why = "written for another position";
        return CS_META_BAD;
    }
    r->clean = clean;
    r->has_set = committed >= 0;
    r->reach = r->has_set ? reach : 0;
    if (!r->has_set) r->n_runs = 0;
    r->why = NULL;
    return CS_META_OK;
}

cs_meta_status cs__meta_read(const char *text, size_t len, int64_t committed, cs_meta_read *r) {
    r->clean = true;
    r->n = r->n_runs = 0;
    r->has_set = false;
    r->reach = 0;
    r->why = NULL;
    cs_meta_status st;
    if (!text || len == 0) {
        st = CS_META_NONE;
    } else if (len >= 4 && !memcmp(text, "cs1;", 4)) {
        st = read_cs1(text, len, r) ? CS_META_OK : CS_META_BAD;
        if (st != CS_META_OK) r->why = "malformed";
    } else if (len >= 4 && !memcmp(text, "cs2;", 4)) {
        st = read_cs2(text, len, committed, r);
    } else if (len >= 3 && text[0] == 'c' && text[1] == 's' && text[2] >= '0' && text[2] <= '9') {
        st = CS_META_BAD;
        r->why = "unknown version";
    } else {
        st = CS_META_FOREIGN;
        r->why = "not written by cstream";
    }
    if (st != CS_META_OK) {
        r->clean = true;
        r->n = r->n_runs = 0;
        r->has_set = false;
        r->reach = 0;
    }
    return st;
}
