/* bench/bench_common.h — the record every contender consumes, and shared helpers. */
#ifndef CSTREAM_BENCH_COMMON_H
#define CSTREAM_BENCH_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cstream.h>

/* {"id":u64,"amount_cents":u64,"memo":"<padding>"}, exactly BENCH_VALUE_SIZE bytes. */
#define BENCH_VALUE_SIZE 512

typedef struct payment {
    uint64_t id;
    uint64_t amount_cents;
    char *memo;
} payment;

static const cs_field payment_fields[] = {
    CS_FIELD_U64(payment, id, CS_REQUIRED),
    CS_FIELD_U64(payment, amount_cents, CS_REQUIRED),
    CS_FIELD_STRING(payment, memo, CS_OPTIONAL),
};
static CS_TYPE(payment_type, payment, payment_fields);

/* Writes the JSON of record `id` into buf (BENCH_VALUE_SIZE + 1 bytes); returns its length. */
static inline size_t bench_make_value(char *buf, uint64_t id) {
    int head = snprintf(buf, BENCH_VALUE_SIZE + 1, "{\"id\":%llu,\"amount_cents\":%llu,\"memo\":\"",
                        (unsigned long long)id, (unsigned long long)(id * 7 % 100000));
    size_t pad = BENCH_VALUE_SIZE - (size_t)head - 2; /* room for "} */
    for (size_t i = 0; i < pad; i++) buf[head + i] = (char)('a' + (id + i) % 26);
    buf[head + pad] = '"';
    buf[head + pad + 1] = '}';
    buf[BENCH_VALUE_SIZE] = 0;
    return BENCH_VALUE_SIZE;
}

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Peak RSS of this process in KiB (VmHWM), -1 if unknown. */
static inline long bench_peak_rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

#endif
