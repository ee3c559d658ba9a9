/* codec_bench.c — decode cost per record of the three payload codecs on the
 * same record shape: the JSON field table (cs_codec_json), Avro
 * (cs_codec_avro_new, writer = reader = the table's schema) and Protobuf
 * (cs_codec_protobuf_new, into the generated message), plus protobuf-c's own
 * unpack as the floor under the Protobuf codec. Each decode is followed by
 * freeing what it allocated, as a delivery does.
 *
 * Rounds are interleaved: each round times every contender once, in an order
 * rotated by one per round, so a slow moment of a shared machine lands on all
 * of them; it prints each round, then the median and spread per contender
 * and the ratio of medians to JSON's. Usage: codec_bench [rounds] [records].
 * One thread; not part of `make test` (`make codec-bench` runs it). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec_bench.pb-c.h"
#include "cstream/avro.h"
#include "cstream/codec.h"
#include "cstream/protobuf.h"

#define DEFAULT_ROUNDS 7
#define DEFAULT_RECORDS 200000
#define N_TAGS 3
#define MEMO_LEN 120 /* a memo of realistic length: strings dominate most payloads */

typedef struct payout {
    uint64_t id;
    int64_t amount_cents;
    char *currency;
    bool urgent;
    char *memo;
    char **tags;
    size_t n_tags;
    double fee;
} payout;
static const cs_field payout_fields[] = {
    CS_FIELD_U64(payout, id, CS_REQUIRED),          CS_FIELD_I64(payout, amount_cents, CS_REQUIRED),
    CS_FIELD_STRING(payout, currency, CS_REQUIRED), CS_FIELD_BOOL(payout, urgent, CS_REQUIRED),
    CS_FIELD_STRING(payout, memo, CS_REQUIRED),     CS_FIELD_ARRAY(payout, tags, n_tags, CS_KIND_STRING, CS_REQUIRED),
    CS_FIELD_F64(payout, fee, CS_REQUIRED),
};
static CS_TYPE(payout_type, payout, payout_fields);

typedef struct contender {
    const char *name;
    const cs_codec *codec; /* NULL: protobuf-c's unpack directly */
    const cs_type *type;
    char *payload;
    size_t len;
    double *ns; /* per round */
} contender;

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "codec_bench: %s: %s\n", what, cs_errmsg());
    exit(1);
}

/* ns per record for `records` decodes (and frees) of c's payload. */
static double time_decodes(const contender *c, long records, void *scratch) {
    double t0 = now_ns();
    for (long i = 0; i < records; i++) {
        if (c->codec == NULL) {
            Bench__Payout *m = bench__payout__unpack(NULL, c->len, (const uint8_t *)c->payload);
            if (m == NULL) die("protobuf-c unpack");
            bench__payout__free_unpacked(m, NULL);
            continue;
        }
        if (c->codec->decode(c->codec, c->type, c->payload, c->len, scratch) != CS_OK) die(c->name);
        cs_codec_free_value(c->codec, c->type, scratch);
    }
    return (now_ns() - t0) / (double)records;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n) {
    double *s = malloc(sizeof *s * (size_t)n);
    memcpy(s, v, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    free(s);
    return m;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : DEFAULT_ROUNDS;
    long records = argc > 2 ? atol(argv[2]) : DEFAULT_RECORDS;
    if (rounds < 1 || records < 1) {
        fprintf(stderr, "usage: codec_bench [rounds >= 1] [records >= 1]\n");
        return 2;
    }
    char memo[MEMO_LEN + 1];
    for (int i = 0; i < MEMO_LEN; i++) memo[i] = (char)('a' + i % 26);
    memo[MEMO_LEN] = '\0';
    char *tags[N_TAGS] = {"payroll", "eu", "priority"};
    payout p = {.id = 123456789012ULL,
                .amount_cents = 250075,
                .currency = "EUR",
                .urgent = true,
                .memo = memo,
                .tags = tags,
                .n_tags = N_TAGS,
                .fee = 1.25};

    char *avro_schema;
    cs_codec *avro, *pb;
    if (cs_avro_schema_of(&payout_type, &avro_schema) != CS_OK) die("cs_avro_schema_of");
    if (cs_codec_avro_new(avro_schema, NULL, &avro) != CS_OK) die("cs_codec_avro_new");
    if (cs_codec_protobuf_new(&bench__payout__descriptor, NULL, &pb) != CS_OK) die("cs_codec_protobuf_new");
    Bench__Payout m = BENCH__PAYOUT__INIT;
    m.id = p.id;
    m.amount_cents = p.amount_cents;
    m.currency = p.currency;
    m.urgent = p.urgent;
    m.memo = p.memo;
    m.n_tags = N_TAGS;
    m.tags = tags;
    m.fee = p.fee;

    contender cs[] = {
        {.name = "json (field table)", .codec = &cs_codec_json, .type = &payout_type},
        {.name = "avro (field table)", .codec = avro, .type = &payout_type},
        {.name = "protobuf (generated message)", .codec = pb, .type = cs_codec_protobuf_type(pb)},
        {.name = "protobuf-c unpack (floor)", .codec = NULL},
    };
    enum { N = sizeof cs / sizeof cs[0] };
    if (cs_json_encode(&payout_type, &p, &cs[0].payload, &cs[0].len) != CS_OK) die("json encode");
    if (avro->encode(avro, &payout_type, &p, &cs[1].payload, &cs[1].len) != CS_OK) die("avro encode");
    if (pb->encode(pb, cs[2].type, &m, &cs[2].payload, &cs[2].len) != CS_OK) die("protobuf encode");
    cs[3].payload = cs[2].payload;
    cs[3].len = cs[2].len;
    size_t scratch_size = payout_type.size > cs[2].type->size ? payout_type.size : cs[2].type->size;
    void *scratch = calloc(1, scratch_size);
    for (int i = 0; i < N; i++) cs[i].ns = calloc((size_t)rounds, sizeof(double));

    printf("codec_bench: %d rounds of %ld decodes per contender, order rotated each round\n", rounds, records);
    for (int i = 0; i < N; i++) printf("  %-30s payload %zu bytes\n", cs[i].name, cs[i].len);
    for (int i = 0; i < N; i++) time_decodes(&cs[i], records / 10 + 1, scratch); /* warm-up, not reported */
    for (int r = 0; r < rounds; r++) {
        printf("round %d:", r + 1);
        for (int k = 0; k < N; k++) {
            contender *c = &cs[(r + k) % N];
            c->ns[r] = time_decodes(c, records, scratch);
        }
        for (int i = 0; i < N; i++) printf("  %s %.0f ns", cs[i].name, cs[i].ns[r]);
        printf("\n");
    }
    double json_median = median(cs[0].ns, rounds);
    printf("\n| codec | payload bytes | decode + free, ns/record (median) | spread (min-max) | vs JSON |\n");
    printf("|---|---|---|---|---|\n");
    for (int i = 0; i < N; i++) {
        double lo = cs[i].ns[0], hi = cs[i].ns[0];
        for (int r = 1; r < rounds; r++) {
            if (cs[i].ns[r] < lo) lo = cs[i].ns[r];
            if (cs[i].ns[r] > hi) hi = cs[i].ns[r];
        }
        double med = median(cs[i].ns, rounds);
        printf("| %s | %zu | %.0f | %.0f-%.0f | %.2fx |\n", cs[i].name, cs[i].len, med, lo, hi, med / json_median);
    }
    for (int i = 0; i < N; i++) free(cs[i].ns);
    for (int i = 0; i < 3; i++) free(cs[i].payload);
    free(scratch);
    free(avro_schema);
    cs_codec_avro_destroy(avro);
    cs_codec_protobuf_destroy(pb);
    return 0;
}
