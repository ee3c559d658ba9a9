/* committed.c — reading a group's committed offsets from the cluster with a
 * short-lived consumer that never joins the group.
 *
 * Owns: nothing of a consumer (a short-lived handle of its own). Locks: none.
 * Threads: the configuring thread before start (its first call loads the
 * external configuration), any thread while the app runs (kafka.h). */
#include "base/error.h"
#include "kafka/kafka_internal.h"

/* How long a read of committed offsets waits for the group coordinator. */
#define COMMITTED_TIMEOUT_MS 5000

/* A token for OAUTHBEARER (librdkafka's background thread, oauth.c); the opaque is k. */
static void on_oauth_refresh(rd_kafka_t *rk, const char *config, void *opaque) {
    cs__oauth_refresh(opaque, rk, config, "group reader");
}

rd_kafka_t *cs__committed_reader(const char *brokers, const char *group, cs_kafka *k) {
    char reason[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* The operator's layers: a cluster that needs SASL needs it here too. */
    if (k && (cs__conf_apply(conf, "cs_kafka_config", &k->config) != CS_OK || cs__ext_load(k) != CS_OK ||
              cs__ext_apply(conf, k, CS_CONF_CONSUMER, NULL, NULL) != CS_OK)) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_conf_set(conf, "bootstrap.servers", brokers, NULL, 0);
    rd_kafka_conf_set(conf, "group.id", group, NULL, 0);
    rd_kafka_conf_set(conf, "enable.auto.commit", "false", NULL, 0);
    rd_kafka_conf_set_log_cb(conf, cs__rdkafka_log);
    if (k) {
        rd_kafka_conf_set_opaque(conf, k);
        cs__oauth_conf(k, conf, on_oauth_refresh);
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, reason, sizeof reason);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        cs__fail(CS_ERR_KAFKA, "committed offsets of group %s: %s", group, reason);
    } else if (k && cs__oauth_started(k, rk, "group reader") != CS_OK) {
        rd_kafka_destroy(rk);
        return NULL;
    }
    return rk;
}

cs_err cs__read_committed(rd_kafka_t *rk, const char *group, const char *topic, int32_t partition, int64_t *offset) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, partition);
    rd_kafka_resp_err_t err = rd_kafka_committed(rk, l, COMMITTED_TIMEOUT_MS);
    if (!err) err = l->elems[0].err;
    int64_t off = l->elems[0].offset;
    rd_kafka_topic_partition_list_destroy(l);
    if (err)
        return cs__fail(CS_ERR_KAFKA, "committed offset of group %s for %s/%d: %s", group, topic, (int)partition,
                        rd_kafka_err2str(err));
    *offset = off < 0 ? -1 : off;
    return CS_OK;
}

cs_err cs_kafka_committed(cs_kafka *k, const char *group, const char *topic, int32_t partition, int64_t *offset) {
    if (!k || !group || !topic || !offset) return cs__fail(CS_ERR_ARG, "cs_kafka_committed: missing argument");
    if (!k->bootstrap) return cs__fail(CS_ERR_STATE, "cs_kafka_committed: the embedded cluster is not running yet");
    rd_kafka_t *rk = cs__committed_reader(k->bootstrap, group, k);
    if (!rk) return CS_ERR_KAFKA;
    cs_err err = cs__read_committed(rk, group, topic, partition, offset);
    rd_kafka_destroy(rk);
    return err;
}
