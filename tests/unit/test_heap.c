/* test_heap.c — the min-heap of src/base/heap.c (the delay heap's data
 * structure): unit cases, a failed growth that leaves the heap unchanged, and
 * a randomised run against a sorted-array model.
 *
 * The model test replays with CS_TEST_SEED=<seed>; the seed is printed at the
 * start of every run. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/heap.h"

static uint64_t test_seed;

/* The heap's realloc, wrapped at link time (-Wl,--wrap=realloc in
 * tests/CMakeLists.txt): while fail_realloc is set, it fails. */
static bool fail_realloc;
void *__real_realloc(void *p, size_t size);
void *__wrap_realloc(void *p, size_t size);
void *__wrap_realloc(void *p, size_t size) { return fail_realloc ? NULL : __real_realloc(p, size); }

/* ---- unit cases ----------------------------------------------------------- */

static void empty_heap(void **state) {
    (void)state;
    cs_heap h = {0};
    assert_int_equal(cs__heap_count(&h), 0);
    assert_null(cs__heap_min(&h));
    cs__heap_free(&h); /* freeing an empty heap is fine */
    assert_null(cs__heap_min(&h));
}

static void smallest_key_first(void **state) {
    (void)state;
    cs_heap h = {0};
    int v[5];
    const int64_t keys[5] = {50, 10, 40, 20, 30};
    for (int i = 0; i < 5; i++) assert_true(cs__heap_push(&h, keys[i], &v[i]));
    assert_int_equal(cs__heap_count(&h), 5);
    assert_int_equal(cs__heap_min(&h)->key, 10);
    assert_ptr_equal(cs__heap_min(&h)->value, &v[1]);
    const int order[5] = {1, 3, 4, 2, 0}; /* the indices of keys 10, 20, 30, 40, 50 */
    for (int i = 0; i < 5; i++) {
        int64_t key = -1;
        assert_ptr_equal(cs__heap_pop(&h, &key), &v[order[i]]);
        assert_int_equal(key, keys[order[i]]);
    }
    assert_int_equal(cs__heap_count(&h), 0);
    assert_null(cs__heap_min(&h));
    cs__heap_free(&h);
}

/* Growth that fails: false, and the heap holds what it held, in order. */
static void failed_growth_changes_nothing(void **state) {
    (void)state;
    cs_heap h = {0};
    size_t n = 0;
    fail_realloc = true;
    assert_false(cs__heap_push(&h, 1, NULL)); /* the first allocation */
    fail_realloc = false;
    assert_int_equal(cs__heap_count(&h), 0);
    while (cs__heap_count(&h) < h.cap || h.cap == 0) assert_true(cs__heap_push(&h, (int64_t)(1000 - n++), NULL));
    fail_realloc = true;
    assert_false(cs__heap_push(&h, -5, NULL)); /* full: it would have to grow */
    fail_realloc = false;
    assert_int_equal(cs__heap_count(&h), n);
    int64_t prev = INT64_MIN, key;
    while (cs__heap_count(&h)) {
        cs__heap_pop(&h, &key);
        assert_true(key >= prev && key != -5);
        prev = key;
    }
    cs__heap_free(&h);
}

/* ---- randomised, against a sorted array --------------------------------- */

static uint64_t rng_state;
static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t rng_below(uint64_t n) { return rng_next() % n; }

/* The model: the pairs held, sorted by key (insertion after equal keys). */
typedef struct model {
    cs_heap_item *items;
    size_t n, cap;
} model;

static void model_push(model *m, int64_t key, void *value) {
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->items = __real_realloc(m->items, m->cap * sizeof *m->items);
        assert_non_null(m->items);
    }
    size_t i = m->n;
    while (i > 0 && m->items[i - 1].key > key) i--;
    memmove(m->items + i + 1, m->items + i, (m->n - i) * sizeof *m->items);
    m->items[i] = (cs_heap_item){key, value};
    m->n++;
}

/* Removes the pair (key, value) from the model; false if it holds none. Equal
 * keys may leave the heap in any order, so any pair of the smallest key is
 * the right answer, and the value must be one of those held under it. */
static bool model_take(model *m, int64_t key, void *value) {
    for (size_t i = 0; i < m->n && m->items[i].key == key; i++) {
        if (m->items[i].value != value) continue;
        memmove(m->items + i, m->items + i + 1, (m->n - i - 1) * sizeof *m->items);
        m->n--;
        return true;
    }
    return false;
}

static void random_against_model(void **state) {
    (void)state;
    enum { ROUNDS = 200, VALUES = 4096 };
    static char values[VALUES]; /* distinct addresses to push */
    cs_heap h = {0};
    model m = {0};
    size_t peak = 0;
    long ops = 0;
    rng_state = test_seed;
    for (int round = 0; round < ROUNDS; round++) {
        /* Each round has its own mix: filling up, draining or balanced; and a
         * key range, narrow ones for many equal keys (retries due at the same
         * millisecond), wide ones with negatives. */
        static const unsigned push_pct[] = {20, 50, 80, 95};
        static const int64_t ranges[] = {1, 4, 100, 1000000, INT64_MAX / 2};
        unsigned p_push = push_pct[rng_below(sizeof push_pct / sizeof push_pct[0])];
        int64_t range = ranges[rng_below(sizeof ranges / sizeof ranges[0])];
        long n_ops = 1 + (long)rng_below(2000);
        for (long op = 0; op < n_ops; op++, ops++) {
            if (m.n == 0 || rng_below(100) < p_push) {
                int64_t key = (int64_t)rng_below((uint64_t)range) - (range > 1000 ? range / 2 : 0);
                void *value = &values[rng_below(VALUES)];
                assert_true(cs__heap_push(&h, key, value));
                model_push(&m, key, value);
            } else {
                const cs_heap_item *min = cs__heap_min(&h);
                assert_non_null(min);
                int64_t peeked = min->key, key = 0;
                void *value = cs__heap_pop(&h, &key);
                if (key != m.items[0].key || peeked != key || !model_take(&m, key, value))
                    fail_msg("heap and model differ (seed=%" PRIu64 " round=%d op=%ld): popped key %" PRId64
                             " (peeked %" PRId64 "), the model's smallest is %" PRId64,
                             test_seed, round, op, key, peeked, m.items[0].key);
            }
            if (cs__heap_count(&h) != m.n)
                fail_msg("count %zu, model %zu (seed=%" PRIu64 " round=%d op=%ld)", cs__heap_count(&h), m.n, test_seed,
                         round, op);
            if (m.n > peak) peak = m.n;
        }
        /* Sometimes drain it all: every key in order. */
        if (rng_below(4) == 0) {
            while (m.n) {
                int64_t key = 0;
                void *value = cs__heap_pop(&h, &key);
                if (key != m.items[0].key || !model_take(&m, key, value))
                    fail_msg("drain: popped key %" PRId64 ", the model's smallest is %" PRId64 " (seed=%" PRIu64
                             " round=%d)",
                             key, m.items[0].key, test_seed, round);
            }
            assert_null(cs__heap_min(&h));
        }
    }
    printf("test_heap: model test ran %ld ops, peak %zu pairs\n", ops, peak);
    cs__heap_free(&h);
    free(m.items);
}

static uint64_t choose_seed(void) {
    const char *env = getenv("CS_TEST_SEED");
    if (env != NULL && *env != '\0') return strtoull(env, NULL, 0);
    struct timespec ts;
    if (timespec_get(&ts, TIME_UTC) == 0) return (uint64_t)time(NULL);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(void) {
    test_seed = choose_seed();
    printf("test_heap: seed=%" PRIu64 " (replay with CS_TEST_SEED=%" PRIu64 ")\n", test_seed, test_seed);
    fflush(stdout);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_heap),
        cmocka_unit_test(smallest_key_first),
        cmocka_unit_test(failed_growth_changes_nothing),
        cmocka_unit_test(random_against_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
