/* test_list.c — the intrusive lists of src/base/list.h, against an array
 * model: a queue's order after appends, pushes at the head, takes, a whole
 * queue appended and a cut; a doubly linked list's unlinks at the head, in
 * the middle and at the end. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/list.h"

typedef struct item {
    int value;
    struct item *next;
    CS_LIST_LINK(struct item) live;
} item;

typedef CS_STAILQ(item) item_queue;
typedef CS_LIST(item) item_list;

/* The queue's values in order, and that `last` is its last element. */
static void assert_queue(const item_queue *q, const int *want, int n) {
    int i = 0;
    const item *it, *last = NULL;
    CS_STAILQ_FOREACH(it, q, next) {
        assert_true(i < n);
        assert_int_equal(it->value, want[i++]);
        last = it;
    }
    assert_int_equal(i, n);
    assert_ptr_equal(CS_STAILQ_LAST(q), last);
    assert_int_equal(CS_STAILQ_EMPTY(q), n == 0);
}

static void queue_keeps_order(void **state) {
    (void)state;
    item it[5] = {{.value = 0}, {.value = 1}, {.value = 2}, {.value = 3}, {.value = 4}};
    item_queue q = {0}; /* all zeroes: empty */
    assert_queue(&q, NULL, 0);
    CS_STAILQ_INSERT_TAIL(&q, &it[1], next);
    CS_STAILQ_INSERT_TAIL(&q, &it[2], next);
    CS_STAILQ_INSERT_HEAD(&q, &it[0], next);
    assert_queue(&q, (int[]){0, 1, 2}, 3);
    CS_STAILQ_REMOVE_HEAD(&q, next);
    CS_STAILQ_REMOVE_HEAD(&q, next);
    assert_queue(&q, (int[]){2}, 1);
    CS_STAILQ_REMOVE_HEAD(&q, next);
    assert_queue(&q, NULL, 0);
    CS_STAILQ_INSERT_HEAD(&q, &it[3], next); /* into an empty queue: also its last */
    CS_STAILQ_INSERT_TAIL(&q, &it[4], next);
    assert_queue(&q, (int[]){3, 4}, 2);
}

static void concat_moves_a_whole_queue(void **state) {
    (void)state;
    item it[4] = {{.value = 0}, {.value = 1}, {.value = 2}, {.value = 3}};
    item_queue a = {0}, b = {0};
    CS_STAILQ_CONCAT(&a, &b, next); /* empty onto empty */
    assert_queue(&a, NULL, 0);
    CS_STAILQ_INSERT_TAIL(&b, &it[0], next);
    CS_STAILQ_CONCAT(&a, &b, next); /* onto an empty queue */
    assert_queue(&a, (int[]){0}, 1);
    assert_queue(&b, NULL, 0);
    CS_STAILQ_INSERT_TAIL(&b, &it[1], next);
    CS_STAILQ_INSERT_TAIL(&b, &it[2], next);
    CS_STAILQ_CONCAT(&a, &b, next);
    assert_queue(&a, (int[]){0, 1, 2}, 3);
    assert_queue(&b, NULL, 0);
    CS_STAILQ_CONCAT(&a, &b, next); /* an empty one changes nothing */
    CS_STAILQ_INSERT_TAIL(&a, &it[3], next);
    assert_queue(&a, (int[]){0, 1, 2, 3}, 4);
}

static void cut_splits_after_an_element(void **state) {
    (void)state;
    item it[4] = {{.value = 0}, {.value = 1}, {.value = 2}, {.value = 3}};
    item_queue q = {0}, rest = {0};
    for (int i = 0; i < 4; i++) CS_STAILQ_INSERT_TAIL(&q, &it[i], next);
    CS_STAILQ_CUT_AFTER(&q, &it[1], &rest, next);
    assert_queue(&q, (int[]){0, 1}, 2);
    assert_queue(&rest, (int[]){2, 3}, 2);
    item_queue tail = {0};
    CS_STAILQ_CUT_AFTER(&rest, &it[3], &tail, next); /* after the last: nothing moves */
    assert_queue(&rest, (int[]){2, 3}, 2);
    assert_queue(&tail, NULL, 0);
    CS_STAILQ_CUT_AFTER(&q, (item *)NULL, &tail, next); /* before the first: everything moves */
    assert_queue(&q, NULL, 0);
    assert_queue(&tail, (int[]){0, 1}, 2);
}

static void foreach_safe_allows_taking_off(void **state) {
    (void)state;
    item it[3] = {{.value = 0}, {.value = 1}, {.value = 2}};
    item_queue q = {0}, moved = {0};
    for (int i = 0; i < 3; i++) CS_STAILQ_INSERT_TAIL(&q, &it[i], next);
    item *e, *after;
    CS_STAILQ_FOREACH_SAFE(e, &q, next, after) CS_STAILQ_INSERT_TAIL(&moved, e, next); /* relinks e */
    assert_queue(&moved, (int[]){0, 1, 2}, 3);
}

/* The list's values from the head, checked both ways through the links. */
static void assert_list(const item_list *l, const int *want, int n) {
    int i = 0;
    const item *it, *prev = NULL;
    CS_LIST_FOREACH(it, l, live) {
        assert_true(i < n);
        assert_int_equal(it->value, want[i++]);
        assert_ptr_equal(it->live.prev, prev);
        prev = it;
    }
    assert_int_equal(i, n);
    assert_int_equal(CS_LIST_EMPTY(l), n == 0);
}

static void list_unlinks_anywhere(void **state) {
    (void)state;
    item it[4] = {{.value = 0}, {.value = 1}, {.value = 2}, {.value = 3}};
    item_list l = {0};
    for (int i = 0; i < 4; i++) CS_LIST_INSERT_HEAD(&l, &it[i], live);
    assert_list(&l, (int[]){3, 2, 1, 0}, 4);
    CS_LIST_REMOVE(&l, &it[2], live); /* the middle */
    assert_list(&l, (int[]){3, 1, 0}, 3);
    assert_null(it[2].live.next);
    assert_null(it[2].live.prev);
    CS_LIST_REMOVE(&l, &it[3], live); /* the head */
    assert_list(&l, (int[]){1, 0}, 2);
    CS_LIST_REMOVE(&l, &it[0], live); /* the end */
    assert_list(&l, (int[]){1}, 1);
    item *e, *after;
    CS_LIST_FOREACH_SAFE(e, &l, live, after) CS_LIST_REMOVE(&l, e, live);
    assert_list(&l, NULL, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(queue_keeps_order),           cmocka_unit_test(concat_moves_a_whole_queue),
        cmocka_unit_test(cut_splits_after_an_element), cmocka_unit_test(foreach_safe_allows_taking_off),
        cmocka_unit_test(list_unlinks_anywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
