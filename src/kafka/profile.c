/* profile.c — cs_kafka_profile: named sets of librdkafka properties chosen for
 * one goal, and the layer that applies them to each client.
 *
 * Owns: the profiles' property tables. The broker's choice lives in
 * cs_kafka.profile (set on the configuring thread before start, read by the
 * client builders at start).
 * Threads: cs_kafka_profile, on the configuring thread before start;
 * cs__profile_apply, on the thread that builds a client. Locks: none.
 * Must never: set a property cstream owns, or one that changes a guarantee
 * (acks, idempotence, isolation): a profile trades throughput for latency
 * and nothing else. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "base/error.h"
#include "kafka/kafka_internal.h"

typedef enum applies_to { TO_EVERY_CLIENT, TO_CONSUMERS, TO_PRODUCERS } applies_to;

typedef struct profile_property {
    applies_to to;
    const char *key, *value;
} profile_property;

/* Measured in docs/benchmarks.md, "Latency": each line bounds one wait a
 * record can sit in. */
static const profile_property low_latency[] = {
    /* The producer waits 1 ms for a batch instead of 5. Not 0: then each
     * record goes in its own request, and at 5,000 replies/s on one partition
     * the broker of bench/latency.py fell behind (reply p50 179 ms with 0,
     * 2.2 ms with 1: bench/results/latency-linger-{0,1}.json). */
    {TO_PRODUCERS, "linger.ms", "1"},
    /* A fetch that finds nothing new comes back within 10 ms (500 by default);
     * the broker still answers at once when a record arrives (fetch.min.bytes). */
    {TO_CONSUMERS, "fetch.wait.max.ms", "10"},
    {TO_CONSUMERS, "fetch.min.bytes", "1"},
    /* Small requests leave without waiting for the previous one's ACK. */
    {TO_EVERY_CLIENT, "socket.nagle.disable", "true"},
};

cs_err cs_kafka_profile(cs_kafka *k, cs_profile p) {
    cs_err err = cs__conf_configurable(k, "cs_kafka_profile");
    if (err) return err;
    if (p != CS_PROFILE_DEFAULT && p != CS_PROFILE_LOW_LATENCY)
        return cs__fail(CS_ERR_ARG, "cs_kafka_profile: %d is not a cs_profile", (int)p);
    k->profile = p;
    return CS_OK;
}

cs_err cs__profile_apply(const cs_kafka *k, rd_kafka_conf_t *conf, cs_conf_trace *t, const char *who, bool producer) {
    if (k->profile != CS_PROFILE_LOW_LATENCY) return CS_OK;
    cs_err err = CS_OK;
    for (size_t i = 0; !err && i < sizeof low_latency / sizeof *low_latency; i++) {
        const profile_property *q = &low_latency[i];
        if (q->to == (producer ? TO_CONSUMERS : TO_PRODUCERS)) continue;
        err = cs__conf_put(conf, t, who, "profile low-latency", q->key, q->value, NULL);
    }
    return err;
}
