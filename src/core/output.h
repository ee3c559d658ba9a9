/* output.h — a record a handler produced, held until its transaction.
 *
 * Under Transactional, the outputs of a delivery (its reply, its
 * cs_delivery_publish records, its dead-letter record) are copied into
 * cs_output nodes: first on the delivery while its handler runs, then, once
 * it is acked or dropped, on its partition's window until a transaction may
 * carry them (see window.c). One allocation per output holds the record and
 * all its bytes. Not thread-safe: the list's owner (delivery or partition
 * lock) serialises access.
 *
 * Owns: declares cs_output and cs_output_list; the list's holder (a delivery's
 * outputs, a partition's window) frees it with cs__output_list_free.
 * Locks: none of its own. Threads: whichever thread holds the list. */
#ifndef CS_CORE_OUTPUT_H
#define CS_CORE_OUTPUT_H

#include <stdint.h>

#include "base/list.h"
#include "cstream/record.h"

typedef struct cs_output {
    struct cs_output *next;
    int64_t source_offset;       /* the offset of the record that produced it */
    uint32_t source_attempt;     /* the handler run that produced it (1 = first) */
    struct cs_part *source_part; /* its partition, set when a window hands it out (borrowed: partitions
                                    live as long as their subscription) */
    cs_record rec;               /* every pointer points into this allocation */
} cs_output;

/* Outputs in order, linked through `next`; all zeroes is empty. */
typedef CS_STAILQ(cs_output) cs_output_list;

/* A deep copy of r (topic, key, value, headers). `traceparent`, the one r
 * inherits from its parent delivery (cs__inherited_traceparent, in
 * delivery_internal.h; NULL: none), becomes a header of the copy, and the
 * copy has no parent. NULL on out of memory. */
cs_output *cs__output_new(const cs_record *r, const char *traceparent, int64_t source_offset);
/* Frees every output of l; l is empty after it. */
void cs__output_list_free(cs_output_list *l);

#endif
