/* number.c — JSON numbers to C integers and doubles and back.
 *
 * Integers are read digit by digit, range-checked for the member's C type
 * (uint64 up to 18446744073709551615, which yajl's own long long path would
 * reject) and written without printf. Doubles go through strtod/snprintf in
 * the "C" locale (uselocale, per thread), so a service that calls
 * setlocale(LC_ALL, "") in a comma-decimal locale still reads and writes "0.5".
 *
 * Threads: pure functions, any thread; the "C" locale object is created once.
 *
 * Owns: c_locale, the "C" numeric locale object, made once and never freed.
 * Locks: none; pthread_once (c_locale_once) guards its creation. */
#include "codec/codec_internal.h"

#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale = (locale_t)0;

static void create_c_locale(void) { c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }

/* Switches this thread to the "C" numeric locale; returns what to restore. */
static locale_t enter_c_locale(void) {
    pthread_once(&c_locale_once, create_c_locale);
    return c_locale ? uselocale(c_locale) : (locale_t)0;
}

static void leave_c_locale(locale_t previous) {
    if (previous) uselocale(previous);
}

cs__codec_int_status cs__codec_parse_int(const char *s, size_t len, cs_kind kind, void *dest) {
    size_t i = 0;
    bool negative = len > 0 && s[0] == '-';
    if (negative) i = 1;
    uint64_t magnitude = 0;
    bool overflow = false;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return CS__CODEC_INT_NOT_INTEGER; /* '.', 'e' or 'E': yajl checked the rest */
        unsigned digit = (unsigned)(s[i] - '0');
        if (magnitude > (UINT64_MAX - digit) / 10)
            overflow = true; /* keep scanning: "1e400"-like text is "not an integer" first */
        magnitude = magnitude * 10 + digit;
    }
    if (overflow) return CS__CODEC_INT_RANGE;

    switch (kind) {
    case CS_KIND_U64:
        if (negative && magnitude != 0) return CS__CODEC_INT_RANGE;
        *(uint64_t *)dest = magnitude;
        return CS__CODEC_INT_OK;
    case CS_KIND_U32:
        if ((negative && magnitude != 0) || magnitude > UINT32_MAX) return CS__CODEC_INT_RANGE;
        *(uint32_t *)dest = (uint32_t)magnitude;
        return CS__CODEC_INT_OK;
    case CS_KIND_I64:
        if (magnitude > (negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX)) return CS__CODEC_INT_RANGE;
        /* -(magnitude - 1) - 1 reaches INT64_MIN without overflowing */
        *(int64_t *)dest = negative && magnitude ? -(int64_t)(magnitude - 1) - 1 : (int64_t)magnitude;
        return CS__CODEC_INT_OK;
    case CS_KIND_I32:
        if (magnitude > (negative ? (uint64_t)INT32_MAX + 1 : (uint64_t)INT32_MAX)) return CS__CODEC_INT_RANGE;
        *(int32_t *)dest = (int32_t)(negative ? -(int64_t)magnitude : (int64_t)magnitude);
        return CS__CODEC_INT_OK;
    default: return CS__CODEC_INT_NOT_INTEGER;
    }
}

bool cs__codec_parse_double(const char *s, size_t len, double *out) {
    char text[CS__CODEC_DOUBLE_TEXT_MAX + 1];
    if (len > CS__CODEC_DOUBLE_TEXT_MAX) return false;
    memcpy(text, s, len);
    text[len] = '\0';
    locale_t previous = enter_c_locale();
    double v = strtod(text, NULL);
    leave_c_locale(previous);
    if (v == HUGE_VAL || v == -HUGE_VAL) return false; /* overflow; underflow to 0 or a subnormal is accepted */
    *out = v;
    return true;
}

static size_t format_u64(uint64_t v, bool negative, char *buf) {
    char digits[24];
    size_t n = 0, len = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    if (negative) buf[len++] = '-';
    while (n > 0) buf[len++] = digits[--n];
    buf[len] = '\0';
    return len;
}

static size_t format_i64(int64_t v, char *buf) {
    uint64_t magnitude = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    return format_u64(magnitude, v < 0, buf);
}

size_t cs__codec_format_int(const void *src, cs_kind kind, char *buf) {
    switch (kind) {
    case CS_KIND_I32: return format_i64(*(const int32_t *)src, buf);
    case CS_KIND_U32: return format_u64(*(const uint32_t *)src, false, buf);
    case CS_KIND_I64: return format_i64(*(const int64_t *)src, buf);
    case CS_KIND_U64: return format_u64(*(const uint64_t *)src, false, buf);
    default: buf[0] = '\0'; return 0;
    }
}

size_t cs__codec_format_double(double v, char *buf) {
    locale_t previous = enter_c_locale();
    int len = 0;
    /* 15 significant digits print most doubles people write; 17 always read back exactly. */
    for (int precision = 15; precision <= 17; precision++) {
        len = snprintf(buf, 32, "%.*g", precision, v);
        if (strtod(buf, NULL) == v) break;
    }
    leave_c_locale(previous);
    return (size_t)len;
}
