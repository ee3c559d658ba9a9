/* transaction.h — a Transactional subscription's producer (transaction.c).
 *
 * Owns: see transaction.c. Locks: none. Threads: one at a time (the
 * starting, fetch, closing and destroying threads in turn: transaction.c). */
#ifndef CS_KAFKA_TRANSACTION_H
#define CS_KAFKA_TRANSACTION_H

#include "core/output.h"
#include "kafka/kafka_internal.h"

typedef struct cs_txn cs_txn;

typedef enum cs_txn_result {
    CS_TXN_COMMITTED, /* outputs visible, positions committed */
    CS_TXN_ABORTED,   /* nothing of it happened: the caller reads the window again */
    CS_TXN_FATAL,     /* fenced or broken: the app is stopping, nothing is committed again */
} cs_txn_result;

/* Called (on the committing thread) for an output that could not be produced
 * in the transaction: its source record's partition, offset and attempt. */
typedef void (*cs_txn_output_failed_fn)(void *arg, struct cs_part *part, int64_t offset, uint32_t attempt);

/* Creates the producer with `transactional_id` and initialises transactions
 * (fencing any earlier producer with that id). */
cs_err cs__txn_start(cs_sub *s, cs_app *app, const char *transactional_id, cs_txn_output_failed_fn failed,
                     void *failed_arg, cs_txn **out);
/* One transaction: the outputs, in order, and the positions of `offsets`
 * with `consumer`'s group metadata. Blocks until it is committed or aborted. */
cs_txn_result cs__txn_commit(cs_txn *t, const cs_output *outputs, const rd_kafka_topic_partition_list_t *offsets,
                             rd_kafka_t *consumer);
/* True once a fatal error was reported. */
bool cs__txn_dead(const cs_txn *t);
/* Destroys the producer (an open transaction is left to the broker's timeout
 * or the next instance's init, which aborts it). NULL is accepted. */
void cs__txn_destroy(cs_txn *t);

#endif
