/* cstream/rdkafka.h — the escape hatch: the librdkafka handle under a running
 * subscription, for what cstream does not wrap. Borrowed: valid while the app
 * runs; never close, destroy, poll, assign or commit through it (cstream owns
 * those), or the guarantees are gone. */
#ifndef CSTREAM_RDKAFKA_H
#define CSTREAM_RDKAFKA_H

#include <librdkafka/rdkafka.h>

#include "cstream/kafka.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NULL unless the app runs. */
rd_kafka_t *cs_sub_rdkafka_consumer(cs_sub *s);

#ifdef __cplusplus
}
#endif
#endif
