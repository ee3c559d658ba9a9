/* fuzz_headers.c — what cstream does with the headers of incoming records:
 * reading them through the source interface (cs_delivery_header_count,
 * cs_delivery_header, cs_delivery_header_get in src/core/delivery.c), building
 * a dead-letter record's headers from them plus the provenance headers
 * (cs__dead_letter_headers, src/kafka/producer/dead_letter.c), and turning those into
 * librdkafka headers for the producer (cs__headers_new, src/kafka/producer/producer.c).
 *
 * The input describes a record's headers: per header one flags byte (bit 0:
 * null value; bit 1: the source fails to read this header, like a broken
 * message), a name length byte, the name, a 2-byte value length and the value.
 * Names end at their first NUL, as librdkafka hands them out. A final chunk
 * is the name to look up and the dead-letter reason. Checked: lookups find the
 * last header of a name; the dead-letter headers are the readable originals in
 * order, then the seven provenance headers with the record's coordinates;
 * librdkafka's headers read back exactly what was given. */
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/delivery_internal.h"
#include "kafka/kafka_internal.h"
#include "core/partition.h"

#define MAX_HEADERS 64

typedef struct fake_header {
    char *name;
    void *value; /* NULL: null value */
    size_t len;
    bool unreadable;
} fake_header;

typedef struct fake_record {
    fake_header h[MAX_HEADERS];
    size_t n;
} fake_record;

static void fake_release(void *msg) { (void)msg; }
static size_t fake_count(void *msg) { return ((fake_record *)msg)->n; }
static int fake_at(void *msg, size_t idx, const char **name, const void **value, size_t *len) {
    fake_record *r = msg;
    if (idx >= r->n || r->h[idx].unreadable) return -1;
    *name = r->h[idx].name;
    *value = r->h[idx].value;
    *len = r->h[idx].len;
    return 0;
}
static const cs_source_ops fake_ops = {fake_release, fake_count, fake_at};

static void check(bool ok) {
    if (!ok) abort(); /* a broken property is a finding */
}

/* The one partition of every input (its records' headers come from
 * fake_ops), made at the first: partition.h keeps its fields private. */
static cs_part *fake_part(void) {
    static cs_part *part;
    if (!part) {
        cs_delivery_pool *spares = cs__delivery_pool_new(0);
        part = spares ? cs__part_new(NULL, "payouts", 0, &fake_ops, false, spares) : NULL;
        cs__delivery_pool_unref(spares); /* the partition holds its own reference */
        check(part != NULL);
    }
    return part;
}

static size_t take(const uint8_t **p, const uint8_t *end, size_t bytes) {
    size_t v = 0;
    for (size_t i = 0; i < bytes && *p < end; i++) v = v << 8 | *(*p)++;
    return v;
}

/* Up to n bytes (fewer at the end of the input; *got says how many) on the
 * heap, plus a NUL so that names are C strings. */
static char *copy(const uint8_t **p, const uint8_t *end, size_t n, size_t *got) {
    if (n > (size_t)(end - *p)) n = (size_t)(end - *p);
    char *s = malloc(n + 1);
    if (n) memcpy(s, *p, n);
    s[n] = '\0';
    *p += n;
    if (got) *got = n;
    return s;
}

static bool same_value(const void *a, size_t alen, const void *b, size_t blen) {
    if (!a || !b) return !a && !b;
    return alen == blen && (alen == 0 || !memcmp(a, b, alen));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *p = data, *end = data + size;
    fake_record rec = {.n = 0};
    size_t n_headers = take(&p, end, 1) % (MAX_HEADERS + 1);
    while (rec.n < n_headers && p < end) {
        fake_header *h = &rec.h[rec.n++];
        size_t flags = take(&p, end, 1);
        h->unreadable = flags & 2;
        h->name = copy(&p, end, take(&p, end, 1), NULL);
        char *v = copy(&p, end, take(&p, end, 2), &h->len);
        if (flags & 1) {
            free(v);
            h->value = NULL;
            h->len = 0;
        } else {
            h->value = v;
        }
    }
    char *lookup = copy(&p, end, take(&p, end, 1), NULL);
    char *reason = copy(&p, end, (size_t)(end - p), NULL);

    cs_delivery d = {.topic = "payouts",
                     .partition = (int32_t)(size % 7),
                     .offset = (int64_t)size * 1000003,
                     .timestamp = size % 2 ? -1 : 1700000000000,
                     .attempt = (int)(size % 5),
                     .msg = &rec,
                     .part = fake_part()};

    check(cs_delivery_header_count(&d) == rec.n);
    size_t readable = 0;
    for (size_t i = 0; i <= rec.n; i++) { /* one past the end too: an error, never a read */
        const char *name = NULL;
        const void *value = NULL;
        size_t len = 7;
        cs_err err = cs_delivery_header(&d, i, &name, &value, &len);
        if (i == rec.n || rec.h[i].unreadable) {
            check(err == CS_ERR_ARG);
            continue;
        }
        check(err == CS_OK && name == rec.h[i].name && value == rec.h[i].value);
        check(value ? len == rec.h[i].len : len == 0);
        readable++;
    }
    /* the last readable header of that name, or CS_ERR_ARG */
    const void *value = NULL;
    size_t len = 0;
    cs_err err = cs_delivery_header_get(&d, lookup, &value, &len);
    size_t want = rec.n;
    for (size_t i = rec.n; i-- > 0;)
        if (!rec.h[i].unreadable && !strcmp(rec.h[i].name, lookup)) {
            want = i;
            break;
        }
    if (want == rec.n) check(err == CS_ERR_ARG);
    else check(err == CS_OK && value == rec.h[want].value && len == (value ? rec.h[want].len : 0));

    /* the dead-letter record's headers */
    size_t cap = rec.n + CS_DLQ_HEADERS;
    cs_header *out = calloc(cap, sizeof *out);
    cs_dlq_numbers nums;
    size_t n = cs__dead_letter_headers(&d, "payouts-group", reason, out, cap, &nums);
    check(n == readable + CS_DLQ_HEADERS);
    for (size_t i = 0, j = 0; i < rec.n; i++) {
        if (rec.h[i].unreadable) continue;
        check(out[j].name == rec.h[i].name && out[j].value == rec.h[i].value);
        j++;
    }
    static const char *const provenance[CS_DLQ_HEADERS] = {
        "cstream.dlq.topic", "cstream.dlq.partition", "cstream.dlq.offset", "cstream.dlq.timestamp",
        "cstream.dlq.group", "cstream.dlq.attempts",  "cstream.dlq.reason"};
    char expect[CS_DLQ_HEADERS][64];
    snprintf(expect[1], sizeof expect[1], "%d", (int)d.partition);
    snprintf(expect[2], sizeof expect[2], "%lld", (long long)d.offset);
    snprintf(expect[3], sizeof expect[3], "%lld", (long long)d.timestamp);
    snprintf(expect[5], sizeof expect[5], "%d", d.attempt);
    for (size_t k = 0; k < CS_DLQ_HEADERS; k++) {
        const cs_header *h = &out[readable + k];
        check(!strcmp(h->name, provenance[k]) && h->value && strlen(h->value) == h->len);
    }
    check(!strcmp(out[readable].value, "payouts") && !strcmp(out[readable + 4].value, "payouts-group") &&
          !strcmp(out[readable + 6].value, reason));
    for (size_t k = 1; k < 6; k++)
        if (k != 4) check(!strcmp(out[readable + k].value, expect[k]));

    /* as librdkafka headers: everything reads back as given */
    rd_kafka_headers_t *hdrs = cs__headers_new(out, n);
    check(hdrs && rd_kafka_header_cnt(hdrs) == n);
    for (size_t i = 0; i < n; i++) {
        const char *name;
        const void *v;
        size_t vlen;
        check(rd_kafka_header_get_all(hdrs, i, &name, &v, &vlen) == RD_KAFKA_RESP_ERR_NO_ERROR);
        check(!strcmp(name, out[i].name) && same_value(v, vlen, out[i].value, out[i].value ? out[i].len : 0));
    }
    rd_kafka_headers_destroy(hdrs);
    check(cs__headers_new(out, 0) == NULL);

    free(out);
    free(lookup);
    free(reason);
    for (size_t i = 0; i < rec.n; i++) {
        free(rec.h[i].name);
        free(rec.h[i].value);
    }
    return 0;
}
