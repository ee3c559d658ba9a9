/* utf8.c — strict UTF-8 validation (RFC 3629).
 *
 * yajl's own check only looks at lead and continuation bits: it lets overlong
 * forms (C0 AF for '/'), encoded surrogates (ED A0 80, which yajl itself
 * produces from a lone "\udc00") and code points above U+10FFFF through.
 * Every string the codec stores or writes passes here.
 *
 * Threads: pure function, any thread. Runs per string on the hot path: ASCII
 * is checked eight bytes at a time. Owns: nothing. Locks: none. */
#include "codec/codec_internal.h"

#include <string.h>

#define HIGH_BITS 0x8080808080808080ull

bool cs__codec_utf8_valid(const unsigned char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        if (len - i >= 8) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if ((word & HIGH_BITS) == 0) {
                i += 8;
                continue;
            }
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;                           /* continuation bytes */
        unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the first continuation byte */
        if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            if (c == 0xE0) lo = 0xA0;      /* overlong */
            else if (c == 0xED) hi = 0x9F; /* surrogates D800-DFFF */
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            if (c == 0xF0) lo = 0x90;      /* overlong */
            else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
        } else {
            return false; /* continuation byte, C0, C1 or F5-FF as a lead */
        }
        if (len - i <= n) return false;
        if (s[i + 1] < lo || s[i + 1] > hi) return false;
        for (size_t k = 2; k <= n; k++)
            if ((s[i + k] & 0xC0) != 0x80) return false;
        i += n + 1;
    }
    return true;
}
