/* test_attempts_meta.c — the attempt counts and the acked set in committed
 * offset metadata: round trips, the size bound, hostile text from the
 * cluster, and a model-based test of the acked set across commits and
 * crashes (random settle orders, truncation) against a reference model.
 *
 * The model test replays with CS_TEST_SEED=<seed>; the seed is printed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/acked_set.h"
#include "core/attempts_meta.h"
#include "core/tracker.h"

#define CS_PRIOR_MAX_TEST 64

static void round_trip(void **state) {
    (void)state;
    int64_t off[3] = {5, 9, 1000000000000LL};
    uint32_t att[3] = {1, 3, 4000000000u};
    char buf[CS_META_MAX];
    assert_int_equal(cs__meta_encode(buf, sizeof buf, false, off, att, 3), 3);
    assert_string_equal(buf, "cs1;c=0;a=5:1,9:3,1000000000000:4000000000");
    bool clean = true;
    int64_t o[8];
    uint32_t a[8];
    size_t n = 0;
    assert_int_equal(cs__meta_decode(buf, strlen(buf), &clean, o, a, 8, &n), 0);
    assert_false(clean);
    assert_int_equal(n, 3);
    assert_int_equal(o[2], off[2]);
    assert_int_equal(a[2], att[2]);
    assert_int_equal(cs__meta_encode(buf, sizeof buf, true, off, att, 0), 0);
    assert_string_equal(buf, "cs1;c=1;a=");
    assert_int_equal(cs__meta_decode(buf, strlen(buf), &clean, o, a, 8, &n), 0);
    assert_true(clean);
    assert_int_equal(n, 0);
}

static void bounded_keeps_the_lowest(void **state) {
    (void)state;
    int64_t off[200];
    uint32_t att[200];
    for (int i = 0; i < 200; i++) off[i] = 1000000 + i, att[i] = 2;
    char buf[512];
    size_t written = cs__meta_encode(buf, sizeof buf, false, off, att, 200);
    assert_true(written > 10 && written < 200);
    assert_true(strlen(buf) < sizeof buf);
    bool clean;
    int64_t o[200];
    uint32_t a[200];
    size_t n;
    assert_int_equal(cs__meta_decode(buf, strlen(buf), &clean, o, a, 200, &n), 0);
    assert_int_equal(n, written);
    assert_int_equal(o[0], 1000000); /* the lowest offsets are the ones kept */
}

static void hostile_text_is_rejected(void **state) {
    (void)state;
    const char *bad[] = {"",
                         "cs2;c=0;a=",
                         "cs1;c=2;a=",
                         "cs1;c=0;b=",
                         "cs1;c=0;a=5",
                         "cs1;c=0;a=5:",
                         "cs1;c=0;a=:5",
                         "cs1;c=0;a=5:1,",
                         "cs1;c=0;a=9:1,5:1",
                         "cs1;c=0;a=5:1,5:2",
                         "cs1;c=0;a=-5:1",
                         "cs1;c=0;a=5:99999999999",
                         "cs1;c=0;a=99999999999999999999:1",
                         "cs1;c=0;a=5:1x",
                         "some consumer's own metadata"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        bool clean = false;
        int64_t o[4];
        uint32_t a[4];
        size_t n = 7;
        assert_int_equal(cs__meta_decode(bad[i], strlen(bad[i]), &clean, o, a, 4, &n), -1);
        assert_int_equal(n, 0);
        assert_true(clean); /* nothing is assumed from text that is not ours */
    }
    bool clean;
    size_t n;
    assert_int_equal(cs__meta_decode(NULL, 0, &clean, NULL, NULL, 0, &n), -1);
}

/* ---- cs2: the acked set ------------------------------------------------------ */

/* Decodes buf as committed with `pos`, expecting status st. */
static cs_meta_status read_at(const char *buf, int64_t pos, uint32_t *runs, size_t max_runs, cs_meta_read *r) {
    static int64_t o[CS_PRIOR_MAX_TEST];
    static uint32_t a[CS_PRIOR_MAX_TEST];
    *r = (cs_meta_read){.offsets = o, .attempts = a, .max = CS_PRIOR_MAX_TEST, .runs = runs, .max_runs = max_runs};
    return cs__meta_read(buf, strlen(buf), pos, r);
}

static void set_round_trip_both_kinds(void **state) {
    (void)state;
    int64_t off[2] = {100, 107};
    uint32_t att[2] = {2, 1};
    /* few long runs: the varints are shorter */
    uint32_t few[4] = {1, 50000, 3, 70000};
    /* many short runs: the bitset is shorter */
    uint32_t many[200];
    for (int i = 0; i < 200; i++) many[i] = 1;
    const uint32_t *sets[2] = {few, many};
    size_t ns[2] = {4, 200};
    char kinds[2] = {'R', 'B'};
    for (int k = 0; k < 2; k++) {
        char buf[CS_META_MAX];
        uint64_t reach;
        assert_int_equal(cs__meta_encode_set(buf, sizeof buf, false, 100, off, att, 2, sets[k], ns[k], &reach), 2);
        assert_non_null(strstr(buf, kinds[k] == 'R' ? ";s=R" : ";s=B"));
        uint64_t sum = 0;
        for (size_t i = 0; i < ns[k]; i++) sum += sets[k][i];
        assert_int_equal(reach, sum);
        uint32_t runs[CS_ACKED_MAX_RUNS];
        cs_meta_read r;
        assert_int_equal(read_at(buf, 100, runs, CS_ACKED_MAX_RUNS, &r), CS_META_OK);
        assert_true(r.has_set && !r.clean);
        assert_int_equal(r.n, 2);
        assert_int_equal(r.offsets[1], 107);
        assert_int_equal(r.reach, sum);
        assert_int_equal(r.n_runs, ns[k]);
        assert_memory_equal(runs, sets[k], ns[k] * sizeof *runs);
        /* the old reader sees the attempt counts */
        bool clean;
        int64_t o[4];
        uint32_t a[4];
        size_t n;
        assert_int_equal(cs__meta_decode(buf, strlen(buf), &clean, o, a, 4, &n), 0);
        assert_int_equal(n, 2);
    }
}

static void set_first_record_settled_and_empty_set(void **state) {
    (void)state;
    uint32_t runs_in[2] = {0, 5}; /* the record at the position is settled too */
    char buf[256];
    uint64_t reach;
    cs__meta_encode_set(buf, sizeof buf, true, 7, NULL, NULL, 0, runs_in, 2, &reach);
    assert_int_equal(reach, 5);
    uint32_t runs[8];
    cs_meta_read r;
    assert_int_equal(read_at(buf, 7, runs, 8, &r), CS_META_OK);
    assert_int_equal(r.n_runs, 2);
    assert_int_equal(runs[0], 0);
    assert_int_equal(runs[1], 5);
    cs__meta_encode_set(buf, sizeof buf, true, 7, NULL, NULL, 0, NULL, 0, &reach);
    assert_int_equal(read_at(buf, 7, runs, 8, &r), CS_META_OK);
    assert_true(r.has_set && r.clean);
    assert_int_equal(r.n_runs, 0);
    assert_int_equal(r.reach, 0);
}

static void set_that_does_not_verify_is_ignored(void **state) {
    (void)state;
    uint32_t in[4] = {2, 10, 1, 4};
    int64_t off[1] = {42};
    uint32_t att[1] = {3};
    char good[512];
    uint64_t reach;
    cs__meta_encode_set(good, sizeof good, false, 40, off, att, 1, in, 4, &reach);
    uint32_t runs[16];
    cs_meta_read r;
    assert_int_equal(read_at(good, 40, runs, 16, &r), CS_META_OK);
    /* another position: the set belongs to the commit it was written with */
    assert_int_equal(read_at(good, 41, runs, 16, &r), CS_META_BAD);
    assert_false(r.has_set);
    assert_int_equal(r.n_runs + r.n, 0);
    /* every single character changed: never accepted with a set */
    for (size_t i = 0; good[i]; i++) {
        char bad[512];
        strcpy(bad, good);
        bad[i] = bad[i] == 'A' ? 'B' : 'A';
        assert_int_not_equal(read_at(bad, 40, runs, 16, &r), CS_META_OK);
        assert_false(r.has_set);
    }
    /* cut short anywhere */
    for (size_t len = 0; len < strlen(good); len++) {
        char cut[512];
        memcpy(cut, good, len);
        cut[len] = '\0';
        assert_int_not_equal(read_at(cut, 40, runs, 16, &r), CS_META_OK);
    }
    /* a newer version, someone else's text, no metadata */
    assert_int_equal(read_at("cs3;p=40;whatever", 40, runs, 16, &r), CS_META_BAD);
    assert_string_equal(r.why, "unknown version");
    assert_int_equal(read_at("{\"consumer\":\"java\"}", 40, runs, 16, &r), CS_META_FOREIGN);
    assert_int_equal(read_at("", 40, runs, 16, &r), CS_META_NONE);
    /* more runs than the reader keeps */
    assert_int_equal(read_at(good, 40, runs, 2, &r), CS_META_BAD);
}

static void set_truncated_keeps_what_is_nearest(void **state) {
    (void)state;
    enum { N = 4000 };
    static uint32_t in[N];
    for (int i = 0; i < N; i++) in[i] = (uint32_t)(1 + (i * 7919) % 300); /* irregular runs, RLE 1-2 bytes each */
    uint64_t sum = 0;
    for (int i = 0; i < N; i++) sum += in[i];
    char buf[CS_META_MAX];
    uint64_t reach;
    cs__meta_encode_set(buf, sizeof buf, false, 1000, NULL, NULL, 0, in, N, &reach);
    assert_true(strlen(buf) < CS_META_MAX);
    assert_true(reach > 0 && reach < sum);
    uint32_t runs[N];
    cs_meta_read r;
    assert_int_equal(read_at(buf, 1000, runs, N, &r), CS_META_OK);
    assert_int_equal(r.reach, reach);
    assert_memory_equal(runs, in, r.n_runs * sizeof *runs); /* a prefix: nearest the position */
    /* a small buffer: still a verified set, reaching less */
    char small[80];
    uint64_t reach2;
    cs__meta_encode_set(small, sizeof small, false, 1000, NULL, NULL, 0, in, N, &reach2);
    assert_true(strlen(small) < sizeof small && reach2 < reach);
    assert_int_equal(read_at(small, 1000, runs, N, &r), CS_META_OK);
    assert_int_equal(r.reach, reach2);
}

/* ---- the model: commits, crashes and truncation ---------------------------------- */

enum { LOG_MAX = 600, OPEN_MAX = LOG_MAX };

typedef struct model {
    /* the log: offsets in increasing order, with gaps (compaction, markers) */
    int64_t log[LOG_MAX];
    size_t n_log;
    /* reference: what some owner settled, and what was handed to a handler */
    bool settled[LOG_MAX * 3];
    unsigned handled[LOG_MAX * 3];
    unsigned skipped[LOG_MAX * 3];
    /* the group */
    int64_t committed; /* -1: none */
    char meta[CS_META_MAX];
    bool corrupted; /* meta had a character changed since the last commit */
    /* the owner now */
    cs_tracker *t;
    cs_acked_set set;
    size_t next; /* index into log of the next record to fetch */
    int64_t highest_fetched;
    int64_t open_off[OPEN_MAX];
    uint64_t open_seq[OPEN_MAX];
    size_t n_open;
    uint64_t seed;
    int step;
} model;

static uint64_t rng_state;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void check_model(model *m, bool ok, const char *what, int64_t offset) {
    if (ok) return;
    print_error("acked-set model: %s offset=%" PRId64 " (seed=%" PRIu64 " step=%d)\n", what, offset, m->seed, m->step);
    fail();
}

/* A new owner: the group's position and metadata, as at assign. */
static void start_owner(model *m) {
    bool corrupted = m->corrupted;
    cs_tracker_reset(m->t);
    cs__acked_set_clear(&m->set);
    m->n_open = 0;
    m->highest_fetched = -1;
    m->next = 0;
    while (m->committed >= 0 && m->next < m->n_log && m->log[m->next] < m->committed) m->next++;
    if (m->committed < 0) return;
    static uint32_t runs[CS_ACKED_MAX_RUNS];
    int64_t o[CS_PRIOR_MAX_TEST];
    uint32_t a[CS_PRIOR_MAX_TEST];
    cs_meta_read r = {
        .offsets = o, .attempts = a, .max = CS_PRIOR_MAX_TEST, .runs = runs, .max_runs = CS_ACKED_MAX_RUNS};
    cs_meta_status st = cs__meta_read(m->meta, strlen(m->meta), m->committed, &r);
    if (corrupted) /* one character changed: the checksum (or the syntax) refuses it */
        check_model(m, st != CS_META_OK && !r.has_set && r.n_runs == 0, "corrupted metadata verified", m->committed);
    else check_model(m, st == CS_META_OK || st == CS_META_NONE, "own metadata does not verify", m->committed);
    if (r.has_set && r.n_runs) check_model(m, cs__acked_set_load(&m->set, m->committed, runs, r.n_runs), "load", 0);
}

/* The fetch path (lanes.c): delivered, and settled at once if the set says so. */
static void fetch(model *m, size_t k) {
    for (size_t i = 0; i < k && m->next < m->n_log; i++) {
        int64_t off = m->log[m->next++];
        uint64_t seq;
        check_model(m, cs_tracker_delivered(m->t, off, &seq) == 0, "delivered refused", off);
        m->highest_fetched = off;
        if (m->set.n && cs__acked_set_take(&m->set, off)) {
            /* the property: nothing is skipped that no owner settled */
            check_model(m, m->settled[off], "skipped a record never settled", off);
            m->skipped[off]++;
            cs_tracker_settle(m->t, seq);
            continue;
        }
        if (m->set.n && !cs__acked_set_reaches(&m->set, off + 1)) cs__acked_set_clear(&m->set);
        m->handled[off]++;
        m->open_off[m->n_open] = off;
        m->open_seq[m->n_open++] = seq;
    }
}

static void settle_one(model *m) {
    if (!m->n_open) return;
    size_t i = (size_t)(rnd() % m->n_open);
    /* a record handled and settled here: the reference says so first */
    m->settled[m->open_off[i]] = true;
    check_model(m, cs_tracker_settle(m->t, m->open_seq[i]) == 0, "settle refused", m->open_off[i]);
    m->open_off[i] = m->open_off[m->n_open - 1];
    m->open_seq[i] = m->open_seq[--m->n_open];
}

/* A commit (partition.c's cs__part_state_locked), with a random budget. */
static void commit(model *m) {
    int64_t pos = cs_tracker_position(m->t);
    if (pos < 0) pos = m->committed;
    if (pos < 0) return;
    static uint32_t runs[CS_ACKED_MAX_RUNS];
    size_t max = 1 + (size_t)(rnd() % 4 == 0 ? rnd() % 8 : CS_ACKED_MAX_RUNS - 1);
    size_t n = cs__acked_collect(m->t, &m->set, m->highest_fetched, pos, runs, max);
    size_t cap = rnd() % 3 == 0 ? 40 + (size_t)(rnd() % 120) : CS_META_MAX;
    uint64_t reach;
    char meta[CS_META_MAX];
    cs__meta_encode_set(meta, cap, false, pos, NULL, NULL, 0, runs, n, &reach);
    if (!meta[0]) return; /* nothing fits: not sent, the group keeps the last commit */
    check_model(m, strlen(meta) < cap, "metadata over its budget", pos);
    memcpy(m->meta, meta, sizeof meta);
    /* 0 lost: the position passes only records some owner settled */
    for (size_t i = 0; i < m->n_log && m->log[i] < pos; i++)
        check_model(m, m->settled[m->log[i]], "position passed a record never settled", m->log[i]);
    /* and the set says settled only of what was */
    int64_t at = pos;
    uint64_t left = reach;
    for (size_t i = 0; i < n && left; i++) {
        uint64_t len = runs[i] < left ? runs[i] : left;
        if (i % 2 == 1)
            for (int64_t o = at; o < at + (int64_t)len; o++)
                check_model(m, o >= (int64_t)(LOG_MAX * 3) || m->settled[o] || !m->handled[o],
                            "set claims an open record", o);
        at += (int64_t)len;
        left -= len;
    }
    m->committed = pos;
    m->corrupted = false;
}

static void acked_set_model(void **state) {
    (void)state;
    const char *env = getenv("CS_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    print_message("acked-set model seed=%" PRIu64 " (replay: CS_TEST_SEED=%" PRIu64 ")\n", seed, seed);
    static model m;
    uint64_t total_skipped = 0, total_handled = 0;
    for (int round = 0; round < 300; round++) {
        memset(&m, 0, sizeof m);
        m.seed = seed + (uint64_t)round;
        rng_state = m.seed * 0x9E3779B97F4A7C15ULL | 1;
        m.t = cs_tracker_new();
        assert_non_null(m.t);
        int64_t o = (int64_t)(rnd() % 5);
        m.n_log = 50 + (size_t)(rnd() % (LOG_MAX - 50));
        for (size_t i = 0; i < m.n_log; i++) {
            m.log[i] = o;
            o += rnd() % 10 == 0 ? 2 + (int64_t)(rnd() % 3) : 1; /* sometimes a gap */
        }
        m.committed = -1;
        start_owner(&m);
        int crashes = 0, steps = 2000;
        for (m.step = 0; m.step < steps; m.step++) {
            uint64_t op = rnd() % 100;
            if (op < 35) fetch(&m, 1 + (size_t)(rnd() % 20));
            else if (op < 80) settle_one(&m);
            else if (op < 95) commit(&m);
            else if (op < 98) {
                start_owner(&m); /* a crash: the next owner starts from what the group holds */
                crashes++;
            } else if (m.committed >= 0 && m.meta[0] && !m.corrupted) { /* (a second change could undo the first) */
                /* metadata that does not verify: nothing is skipped */
                m.meta[rnd() % strlen(m.meta)] ^= 1;
                m.corrupted = true;
                start_owner(&m);
                check_model(&m, m.set.n == 0, "a set from corrupted metadata", 0);
                crashes++;
            }
        }
        /* the last owner drains everything */
        while (m.next < m.n_log || m.n_open) {
            fetch(&m, 50);
            while (m.n_open) settle_one(&m);
        }
        for (size_t i = 0; i < m.n_log; i++) {
            check_model(&m, m.settled[m.log[i]] && m.handled[m.log[i]] > 0, "lost: never handled", m.log[i]);
            total_skipped += m.skipped[m.log[i]];
            total_handled += m.handled[m.log[i]];
        }
        cs_tracker_destroy(m.t);
        cs__acked_set_clear(&m.set);
        (void)crashes;
    }
    print_message("acked-set model: %" PRIu64 " handler runs, %" PRIu64 " records skipped as settled\n", total_handled,
                  total_skipped);
    assert_true(total_skipped > 0); /* the model exercised the skipping */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(bounded_keeps_the_lowest),
        cmocka_unit_test(hostile_text_is_rejected),
        cmocka_unit_test(set_round_trip_both_kinds),
        cmocka_unit_test(set_first_record_settled_and_empty_set),
        cmocka_unit_test(set_that_does_not_verify_is_ignored),
        cmocka_unit_test(set_truncated_keeps_what_is_nearest),
        cmocka_unit_test(acked_set_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
