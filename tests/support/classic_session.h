/* classic_session.h — for the services the tests run as child processes:
 * their short classic group session, left out when the operator's variable
 * asks every group for the consumer protocol (CSTREAM_KAFKA_GROUP_PROTOCOL=
 * consumer, as tests/CMakeLists.txt's *.consumer_protocol entries do), where
 * the session is the broker's and librdkafka refuses session.timeout.ms. */
#ifndef CST_CLASSIC_SESSION_H
#define CST_CLASSIC_SESSION_H

#include <stdlib.h>
#include <string.h>

#include <cstream.h>

static inline cs_err cst_classic_session(cs_kafka *k, const char *ms) {
    const char *p = getenv("CSTREAM_KAFKA_GROUP_PROTOCOL");
    if (p && !strcmp(p, "consumer")) return CS_OK;
    return cs_kafka_config(k, "session.timeout.ms", ms);
}

#endif
