/** @file
 * cstream/rdkafka.h — the escape hatch: the librdkafka handle under a running
 * subscription, for what cstream does not wrap. Borrowed: valid while the app
 * runs; never close, destroy, poll, assign or commit through it (cstream owns
 * those), or the guarantees are gone. */
#ifndef CSTREAM_RDKAFKA_H
#define CSTREAM_RDKAFKA_H

#include "cstream/export.h"

#include <librdkafka/rdkafka.h>

#include "cstream/kafka.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The subscription's librdkafka consumer, for what cstream does not wrap
 * (positions, watermarks, metadata); NULL unless the app runs. The handle is
 * valid only while the app runs: once a stop begins (cs_app_stop, a stop
 * signal, a fatal error) it must not be used, nor any pointer taken from it,
 * since the stop closes and destroys it without waiting for callers (the
 * subscription's stats lock guards the pointer read here, not its use).
 * Call it from a thread that the stop waits for or that stops using it
 * first; do not keep it. Committing, assigning or polling through it would
 * bypass cstream's delivery guarantees.
 * @param s the subscription (NULL gives NULL).
 * @return the consumer handle, borrowed (owned by cstream; never destroy it),
 *         or NULL. */
CS_API rd_kafka_t *cs_sub_rdkafka_consumer(cs_sub *s);

#ifdef __cplusplus
}
#endif
#endif
