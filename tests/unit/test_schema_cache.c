/* test_schema_cache.c — the registry client's schema cache (src/schema/
 * schema_cache.c), alone:
 *
 *   - a miss is NULL, a put is found again, a second put of the same id keeps
 *     the first schema (ids are immutable in a registry);
 *   - it never holds more than its capacity, and evicts the least recently
 *     used schema (a lookup counts as a use);
 *   - a schema a caller holds survives its eviction and the cache's end;
 *   - random puts and gets against a model LRU list (seed printed);
 *   - threads looking up and adding at once leave it consistent (run it
 *     under TSan/ASan in those builds). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "schema/schema_cache.h"

static cs__schema *mk(int32_t id) {
    char text[32];
    int n = snprintf(text, sizeof text, "schema-%d", id);
    cs__schema *s = cs__schema_new(id, CS__SCHEMA_AVRO, text, (size_t)n);
    assert_non_null(s);
    return s;
}

/* Whether `id` is cached, without disturbing the recency order more than a get does. */
static int has(cs__schema_cache *c, int32_t id) {
    const cs__schema *s = cs__schema_cache_get(c, id);
    cs__schema_release(s);
    return s != NULL;
}

static void put_then_get(void **state) {
    (void)state;
    cs__schema_cache c;
    assert_int_equal(cs__schema_cache_init(&c, 4), CS_OK);
    assert_null(cs__schema_cache_get(&c, 1));
    const cs__schema *a = cs__schema_cache_put(&c, mk(1));
    assert_int_equal(a->id, 1);
    const cs__schema *b = cs__schema_cache_get(&c, 1);
    assert_ptr_equal(a, b);
    assert_string_equal(b->text, "schema-1");
    /* Same id again: the first schema stays, the new one is released. */
    cs__schema *dup = cs__schema_new(1, CS__SCHEMA_PROTOBUF, "other", 5);
    const cs__schema *c1 = cs__schema_cache_put(&c, dup);
    assert_ptr_equal(c1, a);
    assert_int_equal(cs__schema_cache_count(&c), 1);
    cs__schema_release(a);
    cs__schema_release(b);
    cs__schema_release(c1);
    cs__schema_cache_destroy(&c);
}

static void bounded_least_recently_used_out(void **state) {
    (void)state;
    cs__schema_cache c;
    assert_int_equal(cs__schema_cache_init(&c, 3), CS_OK);
    for (int32_t id = 1; id <= 3; id++) cs__schema_release(cs__schema_cache_put(&c, mk(id)));
    assert_true(has(&c, 1)); /* 1 is now the most recent: 2 is the oldest */
    cs__schema_release(cs__schema_cache_put(&c, mk(4)));
    assert_int_equal(cs__schema_cache_count(&c), 3);
    assert_int_equal(cs__schema_cache_evictions(&c), 1);
    assert_false(has(&c, 2));
    assert_true(has(&c, 1));
    assert_true(has(&c, 3));
    assert_true(has(&c, 4));
    for (int32_t id = 10; id < 100; id++) cs__schema_release(cs__schema_cache_put(&c, mk(id)));
    assert_int_equal(cs__schema_cache_count(&c), 3);
    assert_int_equal(cs__schema_cache_evictions(&c), 91);
    assert_true(has(&c, 97) && has(&c, 98) && has(&c, 99));
    cs__schema_cache_destroy(&c);
}

static void held_schema_outlives_eviction(void **state) {
    (void)state;
    cs__schema_cache c;
    assert_int_equal(cs__schema_cache_init(&c, 1), CS_OK);
    const cs__schema *held = cs__schema_cache_put(&c, mk(5));
    cs__schema_release(cs__schema_cache_put(&c, mk(6))); /* evicts 5 */
    assert_false(has(&c, 5));
    assert_string_equal(held->text, "schema-5"); /* ASan would see a freed read */
    cs__schema_cache_destroy(&c);
    const cs__schema *also = cs__schema_ref(held);
    cs__schema_release(held);
    assert_string_equal(also->text, "schema-5");
    cs__schema_release(also);
}

static void zero_capacity_refused(void **state) {
    (void)state;
    cs__schema_cache c;
    assert_int_equal(cs__schema_cache_init(&c, 0), CS_ERR_ARG);
    cs__schema_cache_destroy(&c); /* of a failed init: a no-op */
}

/* The model: ids from most to least recently used. */
#define MODEL_CAP 5
#define MODEL_IDS 12
static void model_touch(int32_t *m, size_t *n, int32_t id) {
    size_t i;
    for (i = 0; i < *n && m[i] != id; i++) {}
    if (i == *n) {
        if (*n == MODEL_CAP) i = --*n; /* drop the least recent */
        else i = *n;
        (*n)++;
    }
    memmove(m + 1, m, i * sizeof *m);
    m[0] = id;
}

static void random_against_model(void **state) {
    (void)state;
    unsigned seed = (unsigned)time(NULL);
    print_message("seed %u\n", seed);
    srand(seed);
    cs__schema_cache c;
    assert_int_equal(cs__schema_cache_init(&c, MODEL_CAP), CS_OK);
    int32_t model[MODEL_CAP];
    size_t n = 0;
    for (int step = 0; step < 20000; step++) {
        int32_t id = rand() % MODEL_IDS;
        int in_model = 0;
        for (size_t i = 0; i < n; i++) in_model |= model[i] == id;
        if (rand() % 2) {
            const cs__schema *s = cs__schema_cache_get(&c, id);
            if (!!s != in_model)
                fail_msg("seed %u step %d: get(%d) %s, model says %s", seed, step, id, s ? "hit" : "missed",
                         in_model ? "cached" : "not cached");
            if (s) {
                assert_int_equal(s->id, id);
                model_touch(model, &n, id);
            }
            cs__schema_release(s);
        } else {
            cs__schema_release(cs__schema_cache_put(&c, mk(id)));
            model_touch(model, &n, id);
        }
        assert_int_equal(cs__schema_cache_count(&c), n);
    }
    cs__schema_cache_destroy(&c);
}

#define THREADS 4
#define THREAD_OPS 20000
static void *hammer(void *arg) {
    cs__schema_cache *c = arg;
    unsigned r = (unsigned)(uintptr_t)&r;
    for (int i = 0; i < THREAD_OPS; i++) {
        int32_t id = (int32_t)(rand_r(&r) % 64);
        const cs__schema *s = cs__schema_cache_get(c, id);
        if (!s) s = cs__schema_cache_put(c, mk(id));
        if (s->id != id) return (void *)1;
        cs__schema_release(s);
    }
    return NULL;
}

static void threads_at_once(void **state) {
    (void)state;
    cs__schema_cache c;
    pthread_t t[THREADS];
    void *bad;
    assert_int_equal(cs__schema_cache_init(&c, 16), CS_OK);
    for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, hammer, &c), 0);
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(t[i], &bad), 0);
        assert_null(bad);
    }
    assert_true(cs__schema_cache_count(&c) <= 16);
    cs__schema_cache_destroy(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(put_then_get),
        cmocka_unit_test(bounded_least_recently_used_out),
        cmocka_unit_test(held_schema_outlives_eviction),
        cmocka_unit_test(zero_capacity_refused),
        cmocka_unit_test(random_against_model),
        cmocka_unit_test(threads_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
