/*
 * test_tracker.c - unit and randomised model tests for the commit tracker
 * (src/core/tracker.c).
 *
 * The model test replays with CS_TEST_SEED=<seed>; the seed is printed at the
 * start of every run.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/tracker.h"

static uint64_t test_seed;

/* The tracker's malloc, wrapped at link time (-Wl,--wrap=malloc in
 * tests/CMakeLists.txt): while fail_malloc is set, it fails. */
static bool fail_malloc;
void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_malloc(size_t size) { return fail_malloc ? NULL : __real_malloc(size); }

/* ------------------------------------------------------------------------ */
/* helpers                                                                  */
/* ------------------------------------------------------------------------ */

static int setup_tracker(void **state) {
    cs_tracker *t = cs_tracker_new();
    if (t == NULL) return -1;
    *state = t;
    return 0;
}

static int teardown_tracker(void **state) {
    cs_tracker_destroy(*state);
    return 0;
}

static uint64_t deliver_ok(cs_tracker *t, int64_t offset) {
    uint64_t seq = 0;
    assert_int_equal(cs_tracker_delivered(t, offset, &seq), 0);
    return seq;
}

static void assert_state(const cs_tracker *t, int64_t position, size_t open, int64_t lowest) {
    assert_true(cs_tracker_position(t) == position);
    assert_true(cs_tracker_open_count(t) == open);
    assert_true(cs_tracker_lowest_open(t) == lowest);
}

/* ------------------------------------------------------------------------ */
/* unit cases                                                               */
/* ------------------------------------------------------------------------ */

static void test_empty_tracker(void **state) {
    cs_tracker *t = *state;
    assert_state(t, -1, 0, -1);
    assert_int_equal(cs_tracker_settle(t, 0), -1);
    assert_int_equal(cs_tracker_settle(t, 1), -1);
    assert_int_equal(cs_tracker_settle(t, UINT64_MAX), -1);
    assert_state(t, -1, 0, -1);
}

static void test_in_order_acks(void **state) {
    cs_tracker *t = *state;
    uint64_t s10 = deliver_ok(t, 10);
    assert_state(t, 10, 1, 10);
    uint64_t s11 = deliver_ok(t, 11);
    uint64_t s12 = deliver_ok(t, 12);
    assert_state(t, 10, 3, 10);

    assert_int_equal(cs_tracker_settle(t, s10), 0);
    assert_state(t, 11, 2, 11);
    assert_int_equal(cs_tracker_settle(t, s11), 0);
    assert_state(t, 12, 1, 12);
    assert_int_equal(cs_tracker_settle(t, s12), 0);
    assert_state(t, 13, 0, -1);

    /* Delivering after the ring emptied continues from there. */
    uint64_t s13 = deliver_ok(t, 13);
    assert_state(t, 13, 1, 13);
    assert_int_equal(cs_tracker_settle(t, s13), 0);
    assert_state(t, 14, 0, -1);
}

static void test_out_of_order_acks(void **state) {
    cs_tracker *t = *state;
    uint64_t s[5];
    for (int i = 0; i < 5; i++) s[i] = deliver_ok(t, i);

    assert_int_equal(cs_tracker_settle(t, s[4]), 0);
    assert_state(t, 0, 4, 0);
    assert_int_equal(cs_tracker_settle(t, s[2]), 0);
    assert_state(t, 0, 3, 0);
    assert_int_equal(cs_tracker_settle(t, s[3]), 0);
    assert_state(t, 0, 2, 0);
    assert_int_equal(cs_tracker_settle(t, s[0]), 0);
    assert_state(t, 1, 1, 1);
    /* Settling 1 releases 2, 3 and 4 which were already settled. */
    assert_int_equal(cs_tracker_settle(t, s[1]), 0);
    assert_state(t, 5, 0, -1);
}

static void test_position_holds_at_the_open_record(void **state) {
    cs_tracker *t = *state;
    uint64_t first = deliver_ok(t, 100);
    uint64_t s[99];
    for (int i = 0; i < 99; i++) s[i] = deliver_ok(t, 101 + i);
    for (int i = 98; i >= 0; i--) {
        assert_int_equal(cs_tracker_settle(t, s[i]), 0);
        assert_state(t, 100, (size_t)i + 1, 100);
    }
    /* Later deliveries do not move it either. */
    uint64_t later = deliver_ok(t, 500);
    assert_state(t, 100, 2, 100);
    assert_int_equal(cs_tracker_settle(t, first), 0);
    assert_state(t, 500, 1, 500);
    assert_int_equal(cs_tracker_settle(t, later), 0);
    assert_state(t, 501, 0, -1);
}

static void test_offset_gaps(void **state) {
    cs_tracker *t = *state;
    uint64_t s5 = deliver_ok(t, 5);
    uint64_t s9 = deliver_ok(t, 9);
    uint64_t s20 = deliver_ok(t, 20);
    uint64_t s21 = deliver_ok(t, 21);
    uint64_t s50 = deliver_ok(t, 50);
    assert_state(t, 5, 5, 5);

    assert_int_equal(cs_tracker_settle(t, s5), 0);
    assert_state(t, 9, 4, 9); /* not 6: offsets 6..8 were never delivered */
    assert_int_equal(cs_tracker_settle(t, s20), 0);
    assert_state(t, 9, 3, 9);
    assert_int_equal(cs_tracker_settle(t, s9), 0);
    assert_state(t, 21, 2, 21);
    assert_int_equal(cs_tracker_settle(t, s50), 0);
    assert_state(t, 21, 1, 21);
    assert_int_equal(cs_tracker_settle(t, s21), 0);
    assert_state(t, 51, 0, -1);

    /* A huge gap after an empty ring. */
    uint64_t far = deliver_ok(t, (int64_t)1 << 50);
    assert_state(t, (int64_t)1 << 50, 1, (int64_t)1 << 50);
    assert_int_equal(cs_tracker_settle(t, far), 0);
    assert_state(t, ((int64_t)1 << 50) + 1, 0, -1);
}

static void test_settle_twice_or_unknown_seq_is_rejected(void **state) {
    cs_tracker *t = *state;
    uint64_t a = deliver_ok(t, 1);
    uint64_t b = deliver_ok(t, 2);
    uint64_t c = deliver_ok(t, 3);
    assert_true(a != b && b != c && a != c);

    /* c settled but still kept in the ring (a is open below it). */
    assert_int_equal(cs_tracker_settle(t, c), 0);
    assert_int_equal(cs_tracker_settle(t, c), -1);
    assert_state(t, 1, 2, 1);

    /* a settled and dropped from the ring. */
    assert_int_equal(cs_tracker_settle(t, a), 0);
    assert_state(t, 2, 1, 2);
    assert_int_equal(cs_tracker_settle(t, a), -1);
    assert_state(t, 2, 1, 2);

    /* Never-issued seqs: pick values that are none of a, b, c. */
    uint64_t probes[] = {UINT64_MAX, UINT64_MAX - 1, (uint64_t)1 << 40};
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        if (probes[i] == a || probes[i] == b || probes[i] == c) continue;
        assert_int_equal(cs_tracker_settle(t, probes[i]), -1);
    }
    for (uint64_t x = 0; x < 64; x++) {
        if (x == a || x == b || x == c) continue;
        assert_int_equal(cs_tracker_settle(t, x), -1);
    }
    assert_state(t, 2, 1, 2);

    assert_int_equal(cs_tracker_settle(t, b), 0);
    assert_state(t, 4, 0, -1);
    assert_int_equal(cs_tracker_settle(t, b), -1);
    assert_state(t, 4, 0, -1);
}

static void test_non_increasing_offset_is_rejected(void **state) {
    cs_tracker *t = *state;
    uint64_t seq = 777;
    assert_int_equal(cs_tracker_delivered(t, -1, &seq), -1);
    assert_int_equal(cs_tracker_delivered(t, INT64_MIN, &seq), -1);
    assert_int_equal(seq, 777);
    assert_state(t, -1, 0, -1);

    uint64_t s10 = deliver_ok(t, 10);
    seq = 777;
    assert_int_equal(cs_tracker_delivered(t, 10, &seq), -1);
    assert_int_equal(cs_tracker_delivered(t, 9, &seq), -1);
    assert_int_equal(cs_tracker_delivered(t, 0, &seq), -1);
    assert_int_equal(cs_tracker_delivered(t, -5, &seq), -1);
    assert_int_equal(cs_tracker_delivered(t, INT64_MAX, &seq), -1);
    assert_int_equal(seq, 777);
    assert_state(t, 10, 1, 10);

    /* Still rejected once the ring is empty: the last delivered is kept. */
    assert_int_equal(cs_tracker_settle(t, s10), 0);
    assert_state(t, 11, 0, -1);
    assert_int_equal(cs_tracker_delivered(t, 10, &seq), -1);
    assert_int_equal(seq, 777);
    assert_state(t, 11, 0, -1);

    uint64_t s11 = deliver_ok(t, 11);
    assert_state(t, 11, 1, 11);
    assert_int_equal(cs_tracker_settle(t, s11), 0);
    assert_state(t, 12, 0, -1);
}

static void test_reset(void **state) {
    cs_tracker *t = *state;
    uint64_t old[10];
    for (int i = 0; i < 10; i++) old[i] = deliver_ok(t, 100 + i);
    assert_int_equal(cs_tracker_settle(t, old[3]), 0);
    assert_state(t, 100, 9, 100);

    cs_tracker_reset(t);
    assert_state(t, -1, 0, -1);
    /* Seqs from before the reset are unknown now. */
    for (int i = 0; i < 10; i++) assert_int_equal(cs_tracker_settle(t, old[i]), -1);
    assert_state(t, -1, 0, -1);

    /* Offsets may start over, lower than before. */
    uint64_t s = deliver_ok(t, 5);
    assert_state(t, 5, 1, 5);
    for (int i = 0; i < 10; i++) assert_int_equal(cs_tracker_settle(t, old[i]), -1);
    assert_state(t, 5, 1, 5);
    assert_int_equal(cs_tracker_settle(t, s), 0);
    assert_state(t, 6, 0, -1);

    /* Reset with an empty ring, then again right away. */
    cs_tracker_reset(t);
    cs_tracker_reset(t);
    assert_state(t, -1, 0, -1);
    assert_int_equal(cs_tracker_settle(t, s), -1);
    s = deliver_ok(t, 0);
    assert_state(t, 0, 1, 0);
    assert_int_equal(cs_tracker_settle(t, s), 0);
    assert_state(t, 1, 0, -1);
}

/* Thousands of open entries, with the ring wrapped before it has to grow so
 * that re-indexing on growth is exercised. */
static void test_growth_past_initial_capacity(void **state) {
    cs_tracker *t = *state;
    enum { WARMUP = 37, N = 5000 };

    for (int i = 0; i < WARMUP; i++) {
        uint64_t s = deliver_ok(t, i);
        assert_int_equal(cs_tracker_settle(t, s), 0);
    }
    assert_state(t, WARMUP, 0, -1);

    static uint64_t seqs[N];
    for (int i = 0; i < N; i++) {
        int64_t offset = 1000 + 3 * (int64_t)i;
        seqs[i] = deliver_ok(t, offset);
        assert_state(t, 1000, (size_t)i + 1, 1000);
    }

    /* Settle the odd ones (highest first): position stays at offset of #0. */
    for (int i = N - 1; i >= 0; i--) {
        if (i % 2 == 1) assert_int_equal(cs_tracker_settle(t, seqs[i]), 0);
    }
    assert_state(t, 1000, N / 2, 1000);

    /* Each settled seq is still rejected the second time. */
    for (int i = 1; i < N; i += 2) assert_int_equal(cs_tracker_settle(t, seqs[i]), -1);

    /* Now the even ones in order: position walks up through the gaps. */
    for (int i = 0; i < N; i += 2) {
        assert_int_equal(cs_tracker_settle(t, seqs[i]), 0);
        int64_t expect = i + 2 < N ? 1000 + 3 * (int64_t)(i + 2) : 1000 + 3 * (int64_t)(N - 1) + 1;
        size_t open = (size_t)(N - i - 2) / 2;
        assert_state(t, expect, open, open ? expect : -1);
    }
    assert_state(t, 1000 + 3 * (int64_t)(N - 1) + 1, 0, -1);

    /* The grown ring still works after a reset. */
    cs_tracker_reset(t);
    for (int i = 0; i < N; i++) seqs[i] = deliver_ok(t, i);
    assert_state(t, 0, N, 0);
    for (int i = N - 1; i >= 0; i--) assert_int_equal(cs_tracker_settle(t, seqs[i]), 0);
    assert_state(t, N, 0, -1);
}

/* ------------------------------------------------------------------------ */
/* randomised model test                                                    */
/* ------------------------------------------------------------------------ */

static uint64_t rng_state;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t n) { return n ? rng_next() % n : 0; }

/* Reference model: every delivery since the reset in a plain array, answers
 * computed by linear scans. Deliberately independent of delivery order. */
typedef struct model_delivery {
    int64_t offset;
    uint64_t seq;
    bool settled;
    uint32_t attempts;
} model_delivery;

typedef struct model {
    model_delivery *d;
    size_t n;
    size_t cap;
    int64_t last_delivered; /* -1: nothing since the reset */
} model;

static void model_add(model *m, int64_t offset, uint64_t seq) {
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 256;
        m->d = realloc(m->d, m->cap * sizeof *m->d);
        assert_non_null(m->d);
    }
    m->d[m->n++] = (model_delivery){.offset = offset, .seq = seq, .settled = false, .attempts = 0};
    m->last_delivered = offset;
}

static int64_t model_lowest_open(const model *m) {
    int64_t lowest = -1;
    for (size_t i = 0; i < m->n; i++)
        if (!m->d[i].settled && (lowest < 0 || m->d[i].offset < lowest)) lowest = m->d[i].offset;
    return lowest;
}

static size_t model_open_count(const model *m) {
    size_t open = 0;
    for (size_t i = 0; i < m->n; i++) open += !m->d[i].settled;
    return open;
}

static int64_t model_position(const model *m) {
    if (m->n == 0) return -1;
    int64_t lowest = model_lowest_open(m);
    return lowest >= 0 ? lowest : m->last_delivered + 1;
}

typedef struct run_context {
    int round;
    long op;
    const char *what;
    int64_t previous_position; /* -1 right after a reset */
} run_context;

static void check_against_model(const cs_tracker *t, const model *m, run_context *ctx) {
    int64_t pos = cs_tracker_position(t), want_pos = model_position(m);
    size_t open = cs_tracker_open_count(t), want_open = model_open_count(m);
    int64_t low = cs_tracker_lowest_open(t), want_low = model_lowest_open(m);

    if (pos != want_pos || open != want_open || low != want_low) {
        print_error("model mismatch (seed=%" PRIu64 " round=%d op=%ld after %s): "
                    "position %" PRId64 " want %" PRId64 ", open %zu want %zu, "
                    "lowest_open %" PRId64 " want %" PRId64 "\n",
                    test_seed, ctx->round, ctx->op, ctx->what, pos, want_pos, open, want_open, low, want_low);
        fail();
    }
    if (ctx->previous_position >= 0 && pos < ctx->previous_position) {
        print_error("position went backwards (seed=%" PRIu64 " round=%d op=%ld after %s): "
                    "%" PRId64 " -> %" PRId64 "\n",
                    test_seed, ctx->round, ctx->op, ctx->what, ctx->previous_position, pos);
        fail();
    }
    ctx->previous_position = pos;

    /* The open deliveries with attempts, lowest offset first (the model's
     * array is in delivery order, which is offset order since the reset). */
    size_t want_n = 0;
    for (size_t i = 0; i < m->n; i++) want_n += !m->d[i].settled && m->d[i].attempts > 0;
    size_t cap = want_n + 1;
    int64_t *offsets = malloc(cap * sizeof *offsets);
    uint32_t *attempts = malloc(cap * sizeof *attempts);
    assert_non_null(offsets);
    assert_non_null(attempts);
    size_t n = cs_tracker_open_attempts(t, offsets, attempts, cap);
    bool same = n == want_n;
    for (size_t i = 0, k = 0; same && i < m->n; i++) {
        if (m->d[i].settled || m->d[i].attempts == 0) continue;
        same = offsets[k] == m->d[i].offset && attempts[k] == m->d[i].attempts;
        k++;
    }
    free(offsets);
    free(attempts);
    if (!same) {
        print_error("open attempts differ from the model (seed=%" PRIu64 " round=%d op=%ld after %s): "
                    "%zu entries, want %zu\n",
                    test_seed, ctx->round, ctx->op, ctx->what, n, want_n);
        fail();
    }
}

static int64_t random_gap(void) {
    uint64_t r = rng_below(100);
    if (r < 70) return 1;
    if (r < 95) return 1 + (int64_t)rng_below(10);
    if (r < 99) return 1 + (int64_t)rng_below(100000);
    return 1 + (int64_t)rng_below((uint64_t)1 << 40);
}

/* Picks a random open delivery of the model; returns its index or -1. */
static long pick_open_delivery(const model *m, size_t open) {
    if (open == 0) return -1;
    size_t k = (size_t)rng_below(open);
    for (size_t i = 0; i < m->n; i++)
        if (!m->d[i].settled && k-- == 0) return (long)i;
    return -1;
}

static long pick_settled_delivery(const model *m) {
    if (m->n == 0) return -1;
    size_t start = (size_t)rng_below(m->n);
    for (size_t j = 0; j < m->n; j++) {
        size_t i = (start + j) % m->n;
        if (m->d[i].settled) return (long)i;
    }
    return -1;
}

static void test_random_against_model(void **state) {
    cs_tracker *t = *state;
    enum { ROUNDS = 150, STALE_MAX = 64 };
    model m = {.d = NULL, .n = 0, .cap = 0, .last_delivered = -1};
    uint64_t stale[STALE_MAX]; /* seqs issued before some reset */
    size_t stale_n = 0;
    run_context ctx = {.round = 0, .op = 0, .what = "start", .previous_position = -1};
    long total_ops = 0, resets = 0, moves_back = 0;
    size_t max_open = 0;

    rng_state = test_seed;

    for (int round = 0; round < ROUNDS; round++) {
        ctx.round = round;
        /* Each round has its own bias: filling up, draining, or balanced. */
        static const unsigned deliver_pct[] = {20, 45, 50, 55, 80, 95};
        unsigned p_deliver = deliver_pct[rng_below(sizeof deliver_pct / sizeof deliver_pct[0])];
        long ops = 50 + (long)rng_below(1500);

        for (long op = 0; op < ops; op++, total_ops++) {
            ctx.op = op;
            size_t open = model_open_count(&m);
            if (open > max_open) max_open = open;
            uint64_t r = rng_below(1000);

            if (r < 2) {
                /* Reset: remember a few seqs to probe later. */
                for (size_t i = 0; i < m.n && stale_n < STALE_MAX; i += 1 + rng_below(8)) stale[stale_n++] = m.d[i].seq;
                cs_tracker_reset(t);
                m.n = 0;
                m.last_delivered = -1;
                ctx.previous_position = -1;
                resets++;
                ctx.what = "reset";
            } else if (r < 6 && m.last_delivered >= 0) {
                /* The source moves back (a seek on the raw handle, an offset
                 * reset, a truncation) to `to`, anywhere at or below what was
                 * delivered: the new epoch must start at or below every open
                 * delivery, or that one is never delivered again, and at or
                 * below `to`, or what the source now holds there is skipped. */
                int64_t to = m.last_delivered - (int64_t)rng_below(200);
                if (to < 0) to = 0;
                int64_t from = cs_tracker_reread_from(t, to);
                int64_t lowest = model_lowest_open(&m);
                if (from > to || (lowest >= 0 && from > lowest)) {
                    print_error("move back skips (seed=%" PRIu64 " round=%d op=%ld): to=%" PRId64 " from=%" PRId64
                                " lowest open=%" PRId64 "\n",
                                test_seed, round, op, to, from, lowest);
                    fail();
                }
                for (size_t i = 0; i < m.n && stale_n < STALE_MAX; i += 1 + rng_below(8)) stale[stale_n++] = m.d[i].seq;
                cs_tracker_reset(t);
                m.n = 0;
                /* The new epoch's first delivery is `from` itself. */
                uint64_t seq;
                assert_int_equal(cs_tracker_delivered(t, from, &seq), 0);
                model_add(&m, from, seq);
                ctx.previous_position = -1;
                moves_back++;
                ctx.what = "source moves back";
            } else if (r < 30) {
                /* Something that must be rejected and change nothing. */
                uint64_t kind = rng_below(3);
                if (kind == 0 && m.last_delivered >= 0) {
                    int64_t bad = m.last_delivered - (int64_t)rng_below(5);
                    uint64_t seq = 12345;
                    assert_int_equal(cs_tracker_delivered(t, bad, &seq), -1);
                    assert_int_equal(seq, 12345);
                    ctx.what = "non-increasing delivery";
                } else if (kind == 1) {
                    long i = pick_settled_delivery(&m);
                    if (i >= 0) assert_int_equal(cs_tracker_settle(t, m.d[i].seq), -1);
                    ctx.what = "second settlement";
                } else if (stale_n > 0) {
                    assert_int_equal(cs_tracker_settle(t, stale[rng_below(stale_n)]), -1);
                    ctx.what = "stale seq settlement";
                } else {
                    ctx.what = "nothing";
                }
            } else if (r < 200 && m.n > 0) {
                /* An attempt count set or cleared, on an open delivery or on a
                 * settled one (which must stay out of the report). */
                long i = (long)rng_below(m.n);
                uint32_t a = (uint32_t)rng_below(4);
                if (cs_tracker_set_attempts(t, m.d[i].seq, a) == 0) m.d[i].attempts = a;
                ctx.what = "attempts";
            } else if (rng_below(100) < p_deliver || open == 0) {
                int64_t offset = m.last_delivered < 0 ? (int64_t)rng_below(1000) : m.last_delivered + random_gap();
                uint64_t seq;
                assert_int_equal(cs_tracker_delivered(t, offset, &seq), 0);
                model_add(&m, offset, seq);
                ctx.what = "delivery";
            } else {
                long i = pick_open_delivery(&m, open);
                assert_true(i >= 0);
                assert_int_equal(cs_tracker_settle(t, m.d[i].seq), 0);
                m.d[i].settled = true;
                ctx.what = "settlement";
            }
            check_against_model(t, &m, &ctx);
        }

        /* Sometimes drain everything in random order at the end of a round. */
        if (rng_below(4) == 0) {
            ctx.what = "drain";
            size_t open;
            while ((open = model_open_count(&m)) > 0) {
                long i = pick_open_delivery(&m, open);
                assert_int_equal(cs_tracker_settle(t, m.d[i].seq), 0);
                m.d[i].settled = true;
                check_against_model(t, &m, &ctx);
            }
            assert_true(cs_tracker_position(t) == (m.n ? m.last_delivered + 1 : -1));
        }
    }
    printf("test_tracker: model test ran %ld ops, %ld resets, %ld moves back, max %zu open\n", total_ops, resets,
           moves_back, max_open);
    assert_true(moves_back > 0);
    free(m.d);
}

/* ------------------------------------------------------------------------ */

static uint64_t choose_seed(void) {
    const char *env = getenv("CS_TEST_SEED");
    if (env != NULL && *env != '\0') return strtoull(env, NULL, 0);
    struct timespec ts;
    if (timespec_get(&ts, TIME_UTC) == 0) return (uint64_t)time(NULL);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The ring cannot grow: the delivery is refused, and so is every later one
 * until the reset, so settling what was recorded cannot move the position
 * past the offset that was not. */
static void test_out_of_memory_stops_the_position(void **state) {
    cs_tracker *t = *state;
    uint64_t seqs[64], seq = 0;
    size_t n = 0;
    int64_t offset = 0;
    for (; n < 64; n++, offset++) assert_int_equal(cs_tracker_delivered(t, offset, &seqs[n]), 0);
    /* Offsets 0..63 fill the initial ring; 64 needs it to grow. */
    fail_malloc = true;
    assert_int_equal(cs_tracker_delivered(t, 64, &seq), -2);
    fail_malloc = false;
    assert_int_equal(cs_tracker_delivered(t, 65, &seq), -2);
    for (size_t i = 0; i < n; i++) assert_int_equal(cs_tracker_settle(t, seqs[i]), 0);
    assert_int_equal(cs_tracker_position(t), 64);
    assert_int_equal(cs_tracker_open_count(t), 0);
    /* A new assignment starts over from the committed position. */
    cs_tracker_reset(t);
    assert_int_equal(cs_tracker_delivered(t, 64, &seq), 0);
    assert_int_equal(cs_tracker_position(t), 64);
}

int main(void) {
    test_seed = choose_seed();
    printf("test_tracker: seed=%" PRIu64 " (replay with CS_TEST_SEED=%" PRIu64 ")\n", test_seed, test_seed);
    fflush(stdout);

    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_empty_tracker, setup_tracker, teardown_tracker),
        cmocka_unit_test_setup_teardown(test_in_order_acks, setup_tracker, teardown_tracker),
        cmocka_unit_test_setup_teardown(test_out_of_order_acks, setup_tracker, teardown_tracker),
        cmocka_unit_test_setup_teardown(test_position_holds_at_the_open_record, setup_tracker, teardown_tracker),
        cmocka_unit_test_setup_teardown(test_offset_gaps, setup_tracker, teardown_tracker),
        cmocka_unit_test_setup_teardown(test_settle_twice_or_unknown_seq_is_rejected, setup_tracker, teardown_tracker),
        cmocka_unit_test_setup_teardown(test_non_increasing_offset_is_rejected, setup_tracker, teardown_tracker),
        cmocka_unit_test_setup_teardown(test_reset, setup_tracker, teardown_tracker),
        cmocka_unit_test_setup_teardown(test_growth_past_initial_capacity, setup_tracker, teardown_tracker),
        cmocka_unit_test_setup_teardown(test_random_against_model, setup_tracker, teardown_tracker),
        cmocka_unit_test_setup_teardown(test_out_of_memory_stops_the_position, setup_tracker, teardown_tracker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
