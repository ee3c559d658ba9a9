/* test_part_index.c — the partition index of src/core/part_index.c (the
 * registry's lookup by topic and partition): unit cases, a failed growth
 * that leaves the index unchanged, and a randomised run against a model
 * that scans an array, as the registry did before the index.
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

#include "core/part_index.h"

static uint64_t test_seed;

/* The index's calloc, wrapped at link time (-Wl,--wrap=calloc in
 * tests/CMakeLists.txt): while fail_calloc is set, it fails. */
static bool fail_calloc;
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size) { return fail_calloc ? NULL : __real_calloc(n, size); }

/* ---- unit cases ----------------------------------------------------------- */

static void empty_index(void **state) {
    (void)state;
    cs_part_index ix = {0};
    assert_int_equal(cs__part_index_count(&ix), 0);
    assert_null(cs__part_index_find(&ix, "payouts", 0));
    cs__part_index_free(&ix); /* freeing an empty index is fine */
    assert_null(cs__part_index_find(&ix, "payouts", 0));
}

static void topic_and_partition_both_count(void **state) {
    (void)state;
    cs_part_index ix = {0};
    int a, b, c;
    assert_true(cs__part_index_add(&ix, "payouts", 0, &a));
    assert_true(cs__part_index_add(&ix, "payouts", 1, &b));
    assert_true(cs__part_index_add(&ix, "payouts.done", 0, &c));
    assert_ptr_equal(cs__part_index_find(&ix, "payouts", 0), &a);
    assert_ptr_equal(cs__part_index_find(&ix, "payouts", 1), &b);
    assert_ptr_equal(cs__part_index_find(&ix, "payouts.done", 0), &c);
    assert_null(cs__part_index_find(&ix, "payouts.done", 1));
    assert_null(cs__part_index_find(&ix, "payout", 0));
    assert_null(cs__part_index_find(&ix, "payouts", -1));
    /* Found by the name's text, not by the pointer the entry borrowed. */
    char copy[] = "payouts";
    assert_ptr_equal(cs__part_index_find(&ix, copy, 1), &b);
    assert_int_equal(cs__part_index_count(&ix), 3);
    cs__part_index_free(&ix);
    assert_int_equal(cs__part_index_count(&ix), 0);
}

/* Growth keeps every entry: 1,000 partitions of one topic. */
static void grows_and_keeps_entries(void **state) {
    (void)state;
    enum { N = 1000 };
    static int values[N];
    cs_part_index ix = {0};
    for (int i = 0; i < N; i++) assert_true(cs__part_index_add(&ix, "orders", i, &values[i]));
    for (int i = 0; i < N; i++) assert_ptr_equal(cs__part_index_find(&ix, "orders", i), &values[i]);
    assert_null(cs__part_index_find(&ix, "orders", N));
    assert_int_equal(cs__part_index_count(&ix), N);
    cs__part_index_free(&ix);
}

/* Out of memory at a growth: false, and the index is unchanged. */
static void failed_growth_leaves_the_index_unchanged(void **state) {
    (void)state;
    cs_part_index ix = {0};
    int values[9];
    for (int i = 0; i < 8; i++) assert_true(cs__part_index_add(&ix, "t", i, &values[i])); /* 16 slots, half full */
    fail_calloc = true;
    assert_false(cs__part_index_add(&ix, "t", 8, &values[8]));
    fail_calloc = false;
    assert_int_equal(cs__part_index_count(&ix), 8);
    assert_null(cs__part_index_find(&ix, "t", 8));
    for (int i = 0; i < 8; i++) assert_ptr_equal(cs__part_index_find(&ix, "t", i), &values[i]);
    assert_true(cs__part_index_add(&ix, "t", 8, &values[8]));
    assert_ptr_equal(cs__part_index_find(&ix, "t", 8), &values[8]);
    cs__part_index_free(&ix);
}

/* ---- against a model ------------------------------------------------------- */

/* xorshift64*: a small generator whose sequence the seed alone decides. */
static uint64_t next_random(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

/* Topics and partitions drawn from a small space, so that finds hit and miss
 * alike; the model is the registry's old scan. */
static void matches_a_scan(void **state) {
    (void)state;
    enum { TOPICS = 7, PARTS = 300, STEPS = 20000 };
    static char topics[TOPICS][16];
    static struct {
        const char *topic;
        int32_t partition;
        int *value;
    } model[TOPICS * PARTS];
    static int values[TOPICS * PARTS];
    size_t n_model = 0;
    for (int t = 0; t < TOPICS; t++) snprintf(topics[t], sizeof topics[t], "topic-%d", t);
    uint64_t rng = test_seed ? test_seed : 1;
    cs_part_index ix = {0};
    for (int step = 0; step < STEPS; step++) {
        const char *topic = topics[next_random(&rng) % TOPICS];
        int32_t partition = (int32_t)(next_random(&rng) % PARTS);
        int *want = NULL;
        for (size_t i = 0; i < n_model && !want; i++)
            if (model[i].partition == partition && !strcmp(model[i].topic, topic)) want = model[i].value;
        void *got = cs__part_index_find(&ix, topic, partition);
        if (got != want)
            fail_msg("seed %" PRIu64 " step %d: %s/%d found %p, the scan %p", test_seed, step, topic, (int)partition,
                     got, (void *)want);
        if (!want && next_random(&rng) % 2) {
            int *value = &values[n_model];
            assert_true(cs__part_index_add(&ix, topic, partition, value));
            model[n_model].topic = topic;
            model[n_model].partition = partition;
            model[n_model++].value = value;
        }
        assert_int_equal(cs__part_index_count(&ix), n_model);
    }
    printf("seed %" PRIu64 ": %zu entries\n", test_seed, n_model);
    cs__part_index_free(&ix);
}

int main(void) {
    const char *seed = getenv("CS_TEST_SEED");
    test_seed = seed ? strtoull(seed, NULL, 10) : (uint64_t)time(NULL);
    printf("CS_TEST_SEED=%" PRIu64 "\n", test_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_index),
        cmocka_unit_test(topic_and_partition_both_count),
        cmocka_unit_test(grows_and_keeps_entries),
        cmocka_unit_test(failed_growth_leaves_the_index_unchanged),
        cmocka_unit_test(matches_a_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
