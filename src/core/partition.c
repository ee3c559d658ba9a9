/* partition.c — life of a cs_part: created on first assign, freed on the last
 * reference (the subscription's or a delivery's). */
#include "partition.h"

#include "clock.h"
#include "delivery_internal.h"
#include "output.h"

#include <stdlib.h>
#include <string.h>

cs_part *cs__part_new(cs_pipeline *pipe, const char *topic, int32_t partition, const cs_source_ops *ops,
                      bool tracked, cs_delivery_pool *spares) {
    cs_part *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->topic = strdup(topic);
    p->tracker = tracked ? cs_tracker_new() : NULL;
    if (!p->topic || (tracked && !p->tracker)) {
        free(p->topic);
        cs_tracker_destroy(p->tracker);
        free(p);
        return NULL;
    }
    p->partition = partition;
    p->ops = ops;
    p->pipe = pipe;
    p->last_committed = -1;
    p->window_tail = &p->window;
    p->first_fetched = -1;
    p->stall_offset = -1;
    atomic_init(&p->refs, 1);
    p->spares = spares;
    cs__delivery_pool_ref(spares);
    pthread_mutex_init(&p->lock, NULL);
    cs__cond_init_monotonic(&p->drained); /* timed: the drain deadline */
    return p;
}

void cs__part_ref(cs_part *p) { atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed); }

void cs__part_unref(cs_part *p) {
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
    cs__delivery_pool_unref(p->spares);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->drained);
    cs_tracker_destroy(p->tracker);
    cs__output_free_all(p->window);
    free(p->topic);
    free(p);
}
