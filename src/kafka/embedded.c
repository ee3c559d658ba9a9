/* embedded.c — the embedded Kafka: librdkafka's in-process mock cluster.
 * It speaks the Kafka protocol on loopback, keeps committed offsets per group
 * and runs group rebalances; it does not enforce transactions. It lives in a
 * plain producer handle that exists only to host it.
 *
 * Owns: the cs_embedded: the hosting producer handle and its mock cluster.
 * Locks: none of its own. Threads: created and destroyed by one thread; topic
 * creation may come from any thread (the mock locks). */
#define _POSIX_C_SOURCE 200809L
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kafka/kafka_internal.h"

/* Kafka's Metadata request (API key 3) carries AllowAutoTopicCreation from
 * version 4 on. The mock cluster of librdkafka 2.0.2 serves versions 0..2
 * only, and below 4 it creates every topic a client names (with 4
 * partitions): a consumer subscribed to a topic that does not exist yet would
 * make it, as a real broker never does for a consumer. Its handler reads
 * versions up to 4 (checked with kafka.positions), so the mock offers them.
 * From librdkafka 2.1.0 on the mock serves up to version 9 (12 from 2.5.0,
 * with the topic IDs the KIP-848 group protocol needs): its own range is
 * kept there, since capping it at 4 would be a downgrade. */
#define KAFKA_API_METADATA 3
#define METADATA_VERSION_WITH_AUTO_CREATE_FLAG 4
#define RDKAFKA_MOCK_METADATA_V9 0x02010000

struct cs_embedded {
    rd_kafka_t *host;
    rd_kafka_mock_cluster_t *mock;
    char *bootstraps;
};

cs_err cs__embedded_new(int brokers, cs_embedded **out) {
    char reason[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "client.id", "cstream-embedded-host", NULL, 0);
    rd_kafka_conf_set(conf, "log_level", "3", NULL, 0); /* it never connects anywhere: keep it quiet */
    rd_kafka_conf_set_log_cb(conf, cs__rdkafka_log);
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, reason, sizeof reason);
    if (!host) {
        rd_kafka_conf_destroy(conf);
        return cs__fail(CS_ERR_KAFKA, "embedded Kafka: could not create its host client: %s", reason);
    }
    rd_kafka_mock_cluster_t *mock = rd_kafka_mock_cluster_new(host, brokers);
    if (!mock) {
        rd_kafka_destroy(host);
        return cs__fail(CS_ERR_KAFKA, "embedded Kafka: librdkafka could not start the mock cluster");
    }
    rd_kafka_resp_err_t verr = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (rd_kafka_version() < RDKAFKA_MOCK_METADATA_V9)
        verr = rd_kafka_mock_set_apiversion(mock, KAFKA_API_METADATA, 0, METADATA_VERSION_WITH_AUTO_CREATE_FLAG);
    if (verr) {
        rd_kafka_mock_cluster_destroy(mock);
        rd_kafka_destroy(host);
        return cs__fail(CS_ERR_KAFKA, "embedded Kafka: could not set its Metadata versions: %s",
                        rd_kafka_err2str(verr));
    }
    cs_embedded *e = calloc(1, sizeof *e);
    if (!e) {
        rd_kafka_mock_cluster_destroy(mock);
        rd_kafka_destroy(host);
        return cs__fail(CS_ERR_NOMEM, "embedded Kafka: out of memory");
    }
    e->host = host;
    e->mock = mock;
    e->bootstraps = strdup(rd_kafka_mock_cluster_bootstraps(mock));
    if (!e->bootstraps) {
        cs__embedded_destroy(e);
        return cs__fail(CS_ERR_NOMEM, "embedded Kafka: out of memory");
    }
    *out = e;
    return CS_OK;
}

const char *cs__embedded_bootstraps(const cs_embedded *e) { return e->bootstraps; }

rd_kafka_mock_cluster_t *cs__embedded_mock(cs_embedded *e) { return e->mock; }

cs_err cs__embedded_topic(cs_embedded *e, const char *topic, int partitions) {
    rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(e->mock, topic, partitions, 1);
    if (err)
        return cs__fail(CS_ERR_TOPIC, "embedded Kafka: topic %s (%d partitions) could not be created: %s", topic,
                        partitions, rd_kafka_err2str(err));
    return CS_OK;
}

cs_err cs__embedded_set_down(cs_embedded *e, bool down) {
    rd_kafka_resp_err_t err =
        down ? rd_kafka_mock_broker_set_down(e->mock, 1) : rd_kafka_mock_broker_set_up(e->mock, 1);
    if (err)
        return cs__fail(CS_ERR_KAFKA, "embedded Kafka: broker %s failed: %s", down ? "down" : "up",
                        rd_kafka_err2str(err));
    return CS_OK;
}

cs_err cs__embedded_topic_error(cs_embedded *e, const char *topic, int kafka_error) {
    rd_kafka_mock_topic_set_error(e->mock, topic, (rd_kafka_resp_err_t)kafka_error);
    return CS_OK;
}

void cs__embedded_destroy(cs_embedded *e) {
    if (!e) return;
    rd_kafka_mock_cluster_destroy(e->mock);
    rd_kafka_destroy(e->host);
    free(e->bootstraps);
    free(e);
}
