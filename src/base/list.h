/* list.h — intrusive lists, in the manner of BSD <sys/queue.h>: the links
 * live in the elements, a list head holds two pointers, nothing allocates.
 * A list owns nothing: whoever owns the elements frees them (after taking
 * them off). Written here, not copied: cstream's lists need only these.
 *
 *   CS_STAILQ  singly linked with a tail: append, push or take the head,
 *              append a whole queue, cut it after an element. FIFO queues: a
 *              partition's backlog, a lane's deliveries, outputs waiting
 *              for their transaction, the fetch thread's requests.
 *   CS_LIST    doubly linked: insert at the head, unlink any element in
 *              O(1). A partition's deliveries in flight.
 *
 * A head that is all zeroes is an empty list (calloc'd structs need no
 * init). `link` names the element's link field: a `type *` for a CS_STAILQ,
 * a CS_LIST_LINK(type) for a CS_LIST. Arguments may be evaluated more than
 * once: pass plain lvalues.
 *
 * Owns: nothing. Locks: none (the caller holds whatever guards the list).
 * Threads: any. */
#ifndef CSTREAM_BASE_LIST_H
#define CSTREAM_BASE_LIST_H

#include <stddef.h>

/* ---- CS_STAILQ: singly linked, with a tail ------------------------------ */

#define CS_STAILQ(type)                                                                                                \
    struct {                                                                                                           \
        type *first, *last;                                                                                            \
    }

#define CS_STAILQ_INIT(h) ((h)->first = (h)->last = NULL)
#define CS_STAILQ_EMPTY(h) ((h)->first == NULL)
#define CS_STAILQ_FIRST(h) ((h)->first)
#define CS_STAILQ_LAST(h) ((h)->last)

#define CS_STAILQ_INSERT_TAIL(h, e, link)                                                                              \
    do {                                                                                                               \
        (e)->link = NULL;                                                                                              \
        if ((h)->last) (h)->last->link = (e);                                                                          \
        else (h)->first = (e);                                                                                         \
        (h)->last = (e);                                                                                               \
    } while (0)

#define CS_STAILQ_INSERT_HEAD(h, e, link)                                                                              \
    do {                                                                                                               \
        (e)->link = (h)->first;                                                                                        \
        if (!(h)->first) (h)->last = (e);                                                                              \
        (h)->first = (e);                                                                                              \
    } while (0)

/* Takes the first element off (its link is left as it was); the list must
 * not be empty. */
#define CS_STAILQ_REMOVE_HEAD(h, link)                                                                                 \
    do {                                                                                                               \
        (h)->first = (h)->first->link;                                                                                 \
        if (!(h)->first) (h)->last = NULL;                                                                             \
    } while (0)

/* Appends every element of `from` to `h`, in order; `from` is left empty. */
#define CS_STAILQ_CONCAT(h, from, link)                                                                                \
    do {                                                                                                               \
        if ((from)->first) {                                                                                           \
            if ((h)->last) (h)->last->link = (from)->first;                                                            \
            else (h)->first = (from)->first;                                                                           \
            (h)->last = (from)->last;                                                                                  \
            (from)->first = (from)->last = NULL;                                                                       \
        }                                                                                                              \
    } while (0)

/* Cuts `h` after `e` (NULL: before the first element): `h` keeps up to and
 * including `e`, `rest` (which must be empty) gets what followed it. */
#define CS_STAILQ_CUT_AFTER(h, e, rest, link)                                                                          \
    do {                                                                                                               \
        (rest)->first = (e) ? (e)->link : (h)->first;                                                                  \
        (rest)->last = (rest)->first ? (h)->last : NULL;                                                               \
        if (e) (e)->link = NULL;                                                                                       \
        else (h)->first = NULL;                                                                                        \
        (h)->last = (e);                                                                                               \
    } while (0)

#define CS_STAILQ_FOREACH(var, h, link) for ((var) = (h)->first; (var); (var) = (var)->link)

/* As CS_STAILQ_FOREACH, but the body may free or move `var`. */
#define CS_STAILQ_FOREACH_SAFE(var, h, link, tmp)                                                                      \
    for ((var) = (h)->first; (var) && ((tmp) = (var)->link, 1); (var) = (tmp))

/* ---- CS_LIST: doubly linked ---------------------------------------------- */

#define CS_LIST(type)                                                                                                  \
    struct {                                                                                                           \
        type *first;                                                                                                   \
    }
#define CS_LIST_LINK(type)                                                                                             \
    struct {                                                                                                           \
        type *next, *prev;                                                                                             \
    }

#define CS_LIST_INIT(h) ((h)->first = NULL)
#define CS_LIST_EMPTY(h) ((h)->first == NULL)
#define CS_LIST_FIRST(h) ((h)->first)

#define CS_LIST_INSERT_HEAD(h, e, link)                                                                                \
    do {                                                                                                               \
        (e)->link.prev = NULL;                                                                                         \
        (e)->link.next = (h)->first;                                                                                   \
        if ((h)->first) (h)->first->link.prev = (e);                                                                   \
        (h)->first = (e);                                                                                              \
    } while (0)

/* Unlinks `e`, which must be on `h`. */
#define CS_LIST_REMOVE(h, e, link)                                                                                     \
    do {                                                                                                               \
        if ((e)->link.prev) (e)->link.prev->link.next = (e)->link.next;                                                \
        else (h)->first = (e)->link.next;                                                                              \
        if ((e)->link.next) (e)->link.next->link.prev = (e)->link.prev;                                                \
        (e)->link.next = (e)->link.prev = NULL;                                                                        \
    } while (0)

#define CS_LIST_FOREACH(var, h, link) for ((var) = (h)->first; (var); (var) = (var)->link.next)

#define CS_LIST_FOREACH_SAFE(var, h, link, tmp)                                                                        \
    for ((var) = (h)->first; (var) && ((tmp) = (var)->link.next, 1); (var) = (tmp))

#endif
